#!/usr/bin/env python3
"""test_hf_reference.py — ztrain's GPT-2 numerics against Hugging Face transformers' GPT2LMHeadModel.

Run from the repository root with the reference venv (scripts/setup-venv.sh):
    .venv-ref/bin/python tests/e2e/test_hf_reference.py
Needs build/tests/model_dump (make build-all). Prints one line per case, "PASS name (metrics)" or
"FAIL name: reason", and exits non-zero if any case failed. A missing torch / transformers is a FAIL.

What is compared (fp32 on both sides, same weights passed through a file):
  table_*   ztrain's parameter table (model_dump table) against HF's named parameters: every HF
            parameter (lm_head is tied to wte) has a ztrain tensor of the same name and shape (wte
            padded from V to Vp rows) and vice versa; the flat order is taken from ztrain's table.
  fwdbwd_*  one forward + backward: mean loss, logits (first V of Vp columns; the padded columns
            must be exactly 0), and the gradient of EVERY parameter (wte's padded rows must be
            exactly 0). The HF loss is F.cross_entropy(HF logits, targets), mean over all B*T
            positions, i.e. ztrain's loss (tokens and targets given separately, no label shift).
  train_*   20 AdamW steps, K=2 micro-batches per step (each backward scaled by 1/K), warmup +
            cosine decay (zt_lr_at replicated in tests/helpers/hf_ref_common.py), global-norm clipping that
            triggers on some steps (asserted), weight decay on 2-D weights only; against
            torch.optim.AdamW + clip_grad_norm_ driven identically: per-step losses, grad norms,
            learning rates and the final parameters.

Metric: for each quantity the norm-wise relative error against an HF float64 run of the same
(fp32) weights and batches, rel = ||a - d||_2 / max(||d||_2, 1e-30) (d = HF f64; a scalar uses
|a - d| / |d|). The yardstick is HF fp32's own error against the same f64 run: ztrain must satisfy
    rel(ztrain, f64) <= RATIO * max(rel(HF fp32, f64), FLOOR)
per quantity: the loss, the logits, each parameter's gradient, and in train_* the 20 per-step
losses, the 20 grad norms (each as one vector) and each final parameter tensor. RATIO = 3, FLOOR =
2^-24 (one float32 rounding, for a scalar whose HF error happens to be ~0). A float32
implementation of the same maths lands at about 1x (measured ratios are printed, "ratio" = the
worst over the quantities of the case); a slip in a formula (a GELU or LayerNorm constant, a scale)
shows as many times HF's rounding even when it is far below the old flat 1e-4. The per-quantity
comparison against HF fp32 directly (rel <= 1e-4) is kept as a second, coarse check.
"""
import math
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "helpers"))
import hf_ref_common as common  # noqa: E402
from hf_ref_common import (REPO, TOL, Yardstick, abs_err, adamw_train, check_clip_steps,  # noqa: E402
                           check_loss_logits, check_train_records, flat_weights, hf_loss, hf_params, make_batches,
                           make_hf, rel_err, report_fail, report_pass, run_dump, shape_args, train_args,
                           write_tokens, zt_table)

common.require_imports("hf_reference_imports", "numpy/torch/transformers",
                       "create the venv with scripts/setup-venv.sh: transformers 4.44.2, Debian's torch, numpy")
import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402


# ----------------------------------------------------------------------------------- helpers
# (tests/helpers/hf_ref_common.py holds those shared with tests/e2e/test_lora_reference.py: errors, Yardstick,
# model_dump, make_hf, batches, lr_at, the AdamW driving and the loss/logits and training comparisons)

def check_table(sh, model):
    ts, total = zt_table(sh)
    hp = hf_params(model)
    names = [t[0] for t in ts]
    missing = sorted(set(hp) - set(names))
    extra = sorted(set(names) - set(hp))
    if missing or extra:
        return None, f"HF params without a ztrain tensor {missing}, ztrain tensors not in HF {extra}"
    off = 0
    for name, o, numel, shape, decay in ts:
        want = tuple(hp[name].shape)
        if name == "wte.weight":
            want = (sh["Vp"], sh["C"])
        if shape != want or numel != math.prod(shape):
            return None, f"{name}: ztrain shape {shape}, HF {tuple(hp[name].shape)}"
        if o != off:
            return None, f"{name}: offset {o}, expected {off} (not contiguous)"
        if decay != (1 if len(shape) == 2 else 0):
            return None, f"{name}: decay flag {decay} for a {len(shape)}-D tensor"
        off += numel
    if off != total:
        return None, f"total {total} != sum of numel {off}"
    return (ts, total), None


# ----------------------------------------------------------------------------------- fwd/bwd

def case_fwdbwd(tag, sh, B, T, seed, tmp):
    name = f"fwdbwd_{tag}"
    model = make_hf(sh, seed)
    tab, err = check_table(sh, model)
    if err:
        report_fail(f"table_{tag}", err)
        return
    ts, total = tab
    report_pass(f"table_{tag}", f"{len(ts)} tensors, {total} elements, same names/shapes/order as HF")
    (tok, tgt), = make_batches(1, B, T, sh["V"], seed + 2)
    w = flat_weights(model, ts, total, sh)
    wpath, tpath, opath = (os.path.join(tmp, f"{tag}.{x}") for x in ("w", "tok", "out"))
    w.tofile(wpath)
    write_tokens(tpath, [(tok, tgt)])
    run_dump(["fwdbwd"] + shape_args(sh) + ["--B", str(B), "--T", str(T), "--weights", wpath,
                                            "--tokens", tpath, "--out", opath])
    V, Vp, C = sh["V"], sh["Vp"], sh["C"]
    out = np.fromfile(opath, dtype=np.float32)
    nlog = B * T * Vp
    if out.size != 1 + nlog + total:
        report_fail(name, f"model_dump wrote {out.size} floats, expected {1 + nlog + total}")
        return
    z_loss = float(out[0])
    z_logits = out[1:1 + nlog].reshape(B, T, Vp)
    z_grad = out[1 + nlog:]

    # HF fp32 and fp64 on the same (fp32) weights
    ref = {}
    for dt in (torch.float32, torch.float64):
        m = model if dt == torch.float32 else make_hf(sh, seed, dt)
        if dt == torch.float64:  # the exact fp32 weights, widened
            with torch.no_grad():
                for (n, p), (_, q) in zip(m.named_parameters(), model.named_parameters()):
                    p.copy_(q.to(dt))
        m.zero_grad(set_to_none=True)
        loss, logits = hf_loss(m, tok, tgt)
        loss.backward()
        grads = {n: p.grad.detach().to(torch.float64).numpy() for n, p in hf_params(m).items()}
        ref[dt] = (float(loss), logits.detach().to(torch.float64).numpy(), grads)

    problems = []
    h_loss, h_logits, h_grads = ref[torch.float32]
    d_loss, d_logits, d_grads = ref[torch.float64]
    ys = Yardstick("ztrain", "HF")
    loss_rel, log_rel, log_abs = check_loss_logits(ys, problems, z_loss, z_logits, h_loss, h_logits,
                                                   d_loss, d_logits, V, Vp)
    worst = ("", 0.0, 0.0)
    worst64 = hf64 = 0.0
    for tname, o, numel, shape, _ in ts:
        zg = z_grad[o:o + numel].reshape(shape)
        if tname == "wte.weight":
            pad = float(np.max(np.abs(zg[V:]))) if Vp > V else 0.0
            if pad != 0.0:
                problems.append(f"wte padded rows got a gradient (max |.| {pad:.3g})")
            zg = zg[:V]
        hg, dg = h_grads[tname], d_grads[tname]
        ys.add(f"grad {tname}", zg, hg, dg)
        r, a = rel_err(zg, hg), abs_err(zg, hg)
        worst64 = max(worst64, rel_err(zg, dg))
        hf64 = max(hf64, rel_err(hg, dg))
        if not r <= TOL:
            problems.append(f"grad {tname}: rel {r:.2e} abs {a:.2e} (||HF|| {np.linalg.norm(hg):.3g})")
        if r >= worst[1]:
            worst = (tname, r, a)
    max_abs = max(abs_err(z_grad[o:o + n].reshape(s)[:V] if t == "wte.weight" else z_grad[o:o + n], h_grads[t])
                  for t, o, n, s, _ in ts)
    if T < sh["maxT"]:  # positions never seen get exactly no gradient
        wo = [t for t in ts if t[0] == "wpe.weight"][0][1]
        tail = float(np.max(np.abs(z_grad[wo + T * C:wo + sh["maxT"] * C])))
        if tail != 0.0:
            problems.append(f"wpe rows >= T got a gradient (max |.| {tail:.3g})")
    msg = (f"{ys.summary()}; loss {z_loss:.6f} rel {loss_rel:.1e}; logits rel {log_rel:.1e} abs {log_abs:.1e}; "
           f"grads ({len(ts)} tensors) worst rel {worst[1]:.1e} [{worst[0]}], max abs {max_abs:.1e}; "
           f"vs f64: ztrain logits rel {rel_err(z_logits[..., :V], d_logits):.1e} grads worst rel {worst64:.1e}, "
           f"HF fp32 grads worst rel {hf64:.1e}")
    ys.finish(name, problems, msg)


# ----------------------------------------------------------------------------------- training

def torch_train(model, batches, steps, K, hp, dtype):
    """torch.optim.AdamW + clip_grad_norm_ driven as ztrain trains, weight decay on the 2-D weights only:
    rec (steps, 3) = loss, grad norm, lr; {ztrain name: final parameter f64}"""
    params = hf_params(model)
    decay = [p for n, p in params.items() if p.dim() == 2]      # wte, wpe, Conv1D weights
    no_decay = [p for n, p in params.items() if p.dim() != 2]   # biases, LayerNorm
    rec = adamw_train(model, [(decay, hp["wd"]), (no_decay, 0.0)], batches, steps, K, hp, dtype)
    return rec, {n: p.detach().to(torch.float64).numpy() for n, p in params.items()}


def case_train(tag, sh, B, T, K, steps, hp, seed, tmp):
    name = f"train_{tag}"
    model = make_hf(sh, seed)
    model64 = make_hf(sh, seed, torch.float64)
    with torch.no_grad():
        for (_, p), (_, q) in zip(model64.named_parameters(), model.named_parameters()):
            p.copy_(q.to(torch.float64))
    tab, err = check_table(sh, model)
    if err:
        report_fail(name, "table: " + err)
        return
    ts, total = tab
    nb = steps * K  # a different micro-batch every micro-step
    batches = make_batches(nb, B, T, sh["V"], seed + 2)
    w = flat_weights(model, ts, total, sh)
    wpath, tpath, opath = (os.path.join(tmp, f"{tag}.{x}") for x in ("w", "tok", "out"))
    w.tofile(wpath)
    write_tokens(tpath, batches)
    run_dump(["train"] + shape_args(sh) + train_args(B, T, K, steps, hp) +
             ["--weights", wpath, "--tokens", tpath, "--out", opath])
    raw = open(opath, "rb").read()
    if len(raw) != steps * 4 * 8 + total * 4:
        report_fail(name, f"model_dump wrote {len(raw)} bytes, expected {steps * 32 + total * 4}")
        return
    zrec = np.frombuffer(raw[:steps * 32], dtype=np.float64).reshape(steps, 4)
    zparams = np.frombuffer(raw[steps * 32:], dtype=np.float32)

    hrec, hpar = torch_train(model, batches, steps, K, hp, torch.float32)
    drec, dpar = torch_train(model64, batches, steps, K, hp, torch.float64)

    problems = []
    z_loss, z_norm = zrec[:, 0], zrec[:, 1]
    ys = Yardstick("ztrain", "HF")
    loss_rel, norm_rel, loss_rel64, hf_rel64, lr_rel = check_train_records(ys, problems, zrec, hrec, drec, hp, steps,
                                                                           "torch", 1e-12)
    zc = zrec[:, 2] < 1.0
    hc = hrec[:, 1] > hp["clip"]
    n_clip = int(zc.sum())
    if n_clip == 0:
        problems.append(f"clipping never triggered (grad norms {z_norm.min():.3g}..{z_norm.max():.3g}, clip {hp['clip']})")
    check_clip_steps(problems, zrec, zc, hc, hp["clip"], "ztrain", "torch")
    if z_loss[-1] >= z_loss[0]:
        problems.append(f"loss did not decrease ({z_loss[0]:.4f} -> {z_loss[-1]:.4f})")
    # final parameters, per tensor
    V = sh["V"]
    pworst, pworst_abs, pworst64, kb_abs = ("", 0.0), 0.0, 0.0, 0.0
    for tname, o, numel, shape, _ in ts:
        zp = zparams[o:o + numel].reshape(shape)
        if tname == "wte.weight":
            if np.any(zp[V:] != 0):
                problems.append("wte padded rows moved during training")
            zp = zp[:V]
        hq, dq = hpar[tname], dpar[tname]
        if tname.endswith("attn.c_attn.bias"):
            # The key bias [C, 2C) has an exactly zero gradient (q.(k_j + b) shifts every score of a
            # query by the same q.b, which the softmax ignores): both sides feed Adam pure rounding
            # noise there, which Adam normalises to O(lr) steps in arbitrary directions, and which
            # has no effect on the model. Compared: the query and value biases.
            C = sh["C"]
            kb_abs = max(kb_abs, abs_err(zp[C:2 * C], hq[C:2 * C]))
            zp, hq, dq = (np.concatenate([x[:C], x[2 * C:]]) for x in (zp, hq, dq))
        ys.add(f"final {tname}", zp, hq, dq)
        r = rel_err(zp, hq)
        pworst_abs = max(pworst_abs, abs_err(zp, hq))
        pworst64 = max(pworst64, rel_err(zp, dq))
        if r > pworst[1]:
            pworst = (tname, r)
        if not r <= TOL:
            problems.append(f"final {tname}: rel {r:.2e}")
    msg = (f"{ys.summary()}; {steps} steps x K={K}, loss {z_loss[0]:.4f} -> {z_loss[-1]:.4f}, clipped on {n_clip}/{steps} steps "
           f"(norm {z_norm.min():.3f}..{z_norm.max():.3f}, clip {hp['clip']}); "
           f"loss max rel {loss_rel.max():.1e}, grad norm max rel {norm_rel.max():.1e}, lr max rel {lr_rel:.1e}; "
           f"final params worst rel {pworst[1]:.1e} [{pworst[0]}] max abs {pworst_abs:.1e} "
           f"(key biases, zero gradient, not compared: max abs {kb_abs:.1e}); "
           f"vs f64: ztrain loss max rel {loss_rel64.max():.1e} params worst rel {pworst64:.1e}, "
           f"torch fp32 loss max rel {hf_rel64.max():.1e}")
    ys.finish(name, problems, msg)


# ----------------------------------------------------------------------------------- main

def main():
    t0 = time.time()
    if not os.access(common.BIN, os.X_OK):
        report_fail("hf_reference_binary", f"{os.path.relpath(common.BIN, REPO)} not built (run make build-all)")
        return 1
    with tempfile.TemporaryDirectory(prefix="zt_hf_") as tmp:
        cases = [
            ("fwdbwd", "L2H2C32", dict(L=2, H=2, C=32, V=97, Vp=128, maxT=32), dict(B=2, T=20, seed=11)),
            ("fwdbwd", "L2H4C64", dict(L=2, H=4, C=64, V=97, Vp=128, maxT=32), dict(B=3, T=32, seed=12)),
            ("train", "L2H2C48", dict(L=2, H=2, C=48, V=97, Vp=128, maxT=32),
             dict(B=2, T=16, K=2, steps=20, seed=13,
                  hp=dict(lr=3e-3, min_lr=3e-4, warmup=4, clip=3.0, wd=0.1, beta1=0.9, beta2=0.95, eps=1e-8))),
        ]
        for kind, tag, sh, kw in cases:
            try:
                if kind == "fwdbwd":
                    case_fwdbwd(tag, sh, kw["B"], kw["T"], kw["seed"], tmp)
                else:
                    case_train(tag, sh, kw["B"], kw["T"], kw["K"], kw["steps"], kw["hp"], kw["seed"], tmp)
            except Exception as e:  # a crash of model_dump or of the comparison is a failure of this case
                report_fail(f"{kind}_{tag}", f"{type(e).__name__}: {e}")
    print(f"# test_hf_reference: {time.time() - t0:.1f} s, transformers {transformers.__version__}, "
          f"torch {torch.__version__}", file=sys.stderr)
    return 1 if common.failures else 0


if __name__ == "__main__":
    sys.exit(main())
