#!/usr/bin/env python3
"""test_hf_reference.py — ztrain's GPT-2 numerics against Hugging Face transformers' GPT2LMHeadModel.

Run from the repository root with the reference venv (scripts/setup-venv.sh):
    .venv-ref/bin/python tests/test_hf_reference.py
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
            cosine decay (zt_lr_at replicated below), global-norm clipping that triggers on some
            steps (asserted), weight decay on 2-D weights only; against torch.optim.AdamW +
            clip_grad_norm_ driven identically: per-step losses, grad norms, learning rates and
            the final parameters.

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
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(REPO, "build", "tests", "model_dump")
TOL = 1e-4        # coarse: ztrain vs HF fp32 directly
RATIO = 3.0       # ztrain's error vs f64 may be at most RATIO x HF fp32's error vs f64
FLOOR = 2.0 ** -24
THREADS = 2

failures = 0


def report_pass(name, msg):
    print(f"PASS {name} ({msg})", flush=True)


def report_fail(name, msg):
    global failures
    failures += 1
    print(f"FAIL {name}: {msg}", flush=True)


try:
    import numpy as np
    import torch
    import torch.nn.functional as F
    import transformers
    from transformers import GPT2Config, GPT2LMHeadModel
except Exception as e:  # ImportError, or a broken install
    report_fail("hf_reference_imports",
                f"cannot import numpy/torch/transformers with {sys.executable}: {e!r} "
                "(create the venv with scripts/setup-venv.sh: transformers 4.44.2, Debian's torch, numpy)")
    sys.exit(1)

torch.set_num_threads(THREADS)


# ----------------------------------------------------------------------------------- helpers

def rel_err(a, b):
    a = np.asarray(a, dtype=np.float64).ravel()
    b = np.asarray(b, dtype=np.float64).ravel()
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def abs_err(a, b):
    a = np.asarray(a, dtype=np.float64).ravel()
    b = np.asarray(b, dtype=np.float64).ravel()
    return float(np.max(np.abs(a - b))) if a.size else 0.0


class Yardstick:
    """collects rel(ztrain, f64) / max(rel(HF fp32, f64), FLOOR) per quantity"""

    def __init__(self):
        self.rows = []  # (quantity, ztrain err, HF err, ratio)

    def add(self, what, z, h, d):
        ez, eh = rel_err(z, d), rel_err(h, d)
        r = ez / max(eh, FLOOR)
        self.rows.append((what, ez, eh, r))
        return r

    def problems(self):
        return [f"{w}: ztrain vs f64 {ez:.2e} > {RATIO:g} x HF fp32 vs f64 {eh:.2e} (ratio {r:.1f})"
                for w, ez, eh, r in self.rows if not r <= RATIO]

    def summary(self):
        w = max(self.rows, key=lambda x: x[3])
        byq = {}
        for q, ez, eh, r in self.rows:
            k = q.split(" ")[0]
            byq[k] = max(byq.get(k, 0.0), r)
        parts = ", ".join(f"{k} {v:.2f}" for k, v in byq.items())
        return f"yardstick ratios (ztrain/HF fp32 error vs f64, limit {RATIO:g}): worst {w[3]:.2f} [{w[0]}]; {parts}"


def shape_args(sh):
    return ["--layers", str(sh["L"]), "--heads", str(sh["H"]), "--embd", str(sh["C"]),
            "--vocab", str(sh["V"]), "--padded-vocab", str(sh["Vp"]), "--block", str(sh["maxT"]),
            "--threads", str(THREADS)]


def run_dump(args):
    p = subprocess.run([BIN] + args, cwd=REPO, capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        raise RuntimeError(f"model_dump {args[0]} exited {p.returncode}: {(p.stderr or p.stdout).strip()[-500:]}")
    return p.stdout


def zt_table(sh):
    """[(name, offset, numel, shape tuple, decay)], total — from model_dump table"""
    out = run_dump(["table"] + shape_args(sh))
    ts, total = [], None
    for line in out.splitlines():
        f = line.split()
        if f[0] == "tensor":
            ndim = int(f[4])
            shape = (int(f[5]), int(f[6])) if ndim == 2 else (int(f[5]),)
            ts.append((f[1], int(f[2]), int(f[3]), shape, int(f[7])))
        elif f[0] == "total":
            total = int(f[1])
    return ts, total


def make_hf(sh, seed, dtype=torch.float32):
    """GPT2LMHeadModel with a seeded random init; LayerNorm weights/biases and all biases are moved
    away from 1/0 so that their gradients are exercised."""
    cfg = GPT2Config(vocab_size=sh["V"], n_positions=sh["maxT"], n_embd=sh["C"], n_layer=sh["L"],
                     n_head=sh["H"], resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                     layer_norm_epsilon=1e-5, activation_function="gelu_new", tie_word_embeddings=True,
                     scale_attn_weights=True, scale_attn_by_inverse_layer_idx=False,
                     reorder_and_upcast_attn=False)
    cfg._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = GPT2LMHeadModel(cfg)
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.startswith("lm_head"):
                continue
            if ".ln_" in name or name.startswith("transformer.ln_f"):
                base = 1.0 if name.endswith("weight") else 0.0
                p.copy_(base + 0.1 * torch.randn(p.shape, generator=g))
            elif name.endswith("bias"):
                p.copy_(0.05 * torch.randn(p.shape, generator=g))
            else:  # wte, wpe, Conv1D weights: larger than GPT-2's 0.02 so attention is not uniform
                std = 0.04 if name.endswith("c_proj.weight") else 0.1
                p.copy_(std * torch.randn(p.shape, generator=g))
    model = model.to(dtype)
    model.eval()  # dropout is 0 anyway
    assert model.lm_head.weight.data_ptr() == model.transformer.wte.weight.data_ptr(), "lm_head not tied"
    return model


def hf_params(model):
    """ztrain name -> HF parameter (lm_head is the tied wte)"""
    return {n[len("transformer."):]: p for n, p in model.named_parameters() if n.startswith("transformer.")}


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


def flat_weights(model, ts, total, sh):
    hp = hf_params(model)
    w = np.zeros(total, dtype=np.float32)
    for name, o, numel, shape, _ in ts:
        t = hp[name].detach().to(torch.float32).cpu().numpy()
        if name == "wte.weight":
            t = np.concatenate([t, np.zeros((sh["Vp"] - sh["V"], sh["C"]), np.float32)])
        w[o:o + numel] = t.ravel()
    return w


def make_batches(n, B, T, V, seed):
    """n batches of (tokens, targets), each (B, T) int32: a learnable sequence (a fixed random
    next-token map with some noise), targets = the sequence shifted by one"""
    rng = np.random.default_rng(seed)
    nxt = rng.integers(0, V, size=V)
    out = []
    for _ in range(n):
        seq = np.empty((B, T + 1), dtype=np.int64)
        seq[:, 0] = rng.integers(0, V, size=B)
        for t in range(T):
            noise = rng.random(B) < 0.2
            seq[:, t + 1] = np.where(noise, rng.integers(0, V, size=B), nxt[seq[:, t]])
        out.append((seq[:, :-1].astype(np.int32), seq[:, 1:].astype(np.int32)))
    return out


def hf_loss(model, tok, tgt):
    logits = model(input_ids=torch.from_numpy(tok.astype(np.int64))).logits
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), torch.from_numpy(tgt.astype(np.int64)).reshape(-1))
    return loss, logits


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
    np.concatenate([tok.ravel(), tgt.ravel()]).astype(np.int32).tofile(tpath)
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
    ys = Yardstick()
    ys.add("loss", z_loss, h_loss, d_loss)
    ys.add("logits", z_logits[..., :V], h_logits, d_logits)
    loss_rel = abs(z_loss - h_loss) / abs(h_loss)
    if not loss_rel <= TOL:
        problems.append(f"loss {z_loss:.8g} vs HF {h_loss:.8g} (rel {loss_rel:.2e})")
    log_rel, log_abs = rel_err(z_logits[..., :V], h_logits), abs_err(z_logits[..., :V], h_logits)
    if not log_rel <= TOL:
        problems.append(f"logits rel {log_rel:.2e} abs {log_abs:.2e}")
    pad_log = float(np.max(np.abs(z_logits[..., V:]))) if Vp > V else 0.0
    if pad_log != 0.0:
        problems.append(f"padded logit columns not 0 (max |.| {pad_log:.3g})")
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
    problems = ys.problems() + problems
    msg = (f"{ys.summary()}; loss {z_loss:.6f} rel {loss_rel:.1e}; logits rel {log_rel:.1e} abs {log_abs:.1e}; "
           f"grads ({len(ts)} tensors) worst rel {worst[1]:.1e} [{worst[0]}], max abs {max_abs:.1e}; "
           f"vs f64: ztrain logits rel {rel_err(z_logits[..., :V], d_logits):.1e} grads worst rel {worst64:.1e}, "
           f"HF fp32 grads worst rel {hf64:.1e}")
    if os.environ.get("ZT_HF_VERBOSE"):  # every quantity's errors and ratio
        for w, ez, eh, r in ys.rows:
            print(f"#   {name} {w}: ztrain {ez:.2e} HF fp32 {eh:.2e} ratio {r:.2f}")
    if problems:
        report_fail(name, "; ".join(problems[:6]) + f" [{msg}]")
    else:
        report_pass(name, msg)


# ----------------------------------------------------------------------------------- training

def lr_at(step, lr, min_lr, warmup, total, schedule="cosine"):
    """zt_lr_at (src/core/optim.c), in double"""
    if step < warmup:
        return lr * (step + 1) / warmup
    if schedule == "constant" or total <= warmup + 1:
        return lr
    frac = min((step - warmup) / (total - warmup - 1), 1.0)
    if schedule == "linear":
        return lr - frac * (lr - min_lr)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * frac)) * (lr - min_lr)


def torch_train(model, batches, steps, K, hp, dtype):
    params = hf_params(model)
    decay = [p for n, p in params.items() if p.dim() == 2]      # wte, wpe, Conv1D weights
    no_decay = [p for n, p in params.items() if p.dim() != 2]   # biases, LayerNorm
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": hp["wd"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=hp["lr"], betas=(hp["beta1"], hp["beta2"]), eps=hp["eps"])
    allp = decay + no_decay
    rec = []
    for step in range(steps):
        opt.zero_grad(set_to_none=True)
        tot = 0.0
        for j in range(K):
            tok, tgt = batches[(step * K + j) % len(batches)]
            loss, _ = hf_loss(model, tok, tgt)
            (loss / K).backward()
            tot += float(loss)
        norm = float(torch.nn.utils.clip_grad_norm_(allp, hp["clip"]))
        lr = lr_at(step, hp["lr"], hp["min_lr"], hp["warmup"], steps)
        if dtype == torch.float32:
            lr = float(np.float32(lr))   # ztrain hands the adamw kernel a float lr
        for g in opt.param_groups:
            g["lr"] = lr
        opt.step()
        rec.append((tot / K, norm, lr))
    return np.array(rec), {n: p.detach().to(torch.float64).numpy() for n, p in params.items()}


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
    np.concatenate([np.concatenate([a.ravel(), b.ravel()]) for a, b in batches]).astype(np.int32).tofile(tpath)
    run_dump(["train"] + shape_args(sh) + [
        "--B", str(B), "--T", str(T), "--K", str(K), "--steps", str(steps), "--lr", repr(hp["lr"]),
        "--min-lr", repr(hp["min_lr"]), "--warmup", str(hp["warmup"]), "--clip", repr(hp["clip"]),
        "--wd", repr(hp["wd"]), "--beta1", repr(hp["beta1"]), "--beta2", repr(hp["beta2"]),
        "--eps", repr(hp["eps"]), "--schedule", "cosine", "--weights", wpath, "--tokens", tpath, "--out", opath])
    raw = open(opath, "rb").read()
    if len(raw) != steps * 4 * 8 + total * 4:
        report_fail(name, f"model_dump wrote {len(raw)} bytes, expected {steps * 32 + total * 4}")
        return
    zrec = np.frombuffer(raw[:steps * 32], dtype=np.float64).reshape(steps, 4)
    zparams = np.frombuffer(raw[steps * 32:], dtype=np.float32)

    hrec, hpar = torch_train(model, batches, steps, K, hp, torch.float32)
    drec, dpar = torch_train(model64, batches, steps, K, hp, torch.float64)

    problems = []
    z_loss, z_norm, z_clip, z_lr = zrec[:, 0], zrec[:, 1], zrec[:, 2], zrec[:, 3]
    ys = Yardstick()
    ys.add("losses (20 steps)", z_loss, hrec[:, 0], drec[:, 0])
    ys.add("grad_norms (20 steps)", z_norm, hrec[:, 1], drec[:, 1])
    loss_rel = np.abs(z_loss - hrec[:, 0]) / np.abs(hrec[:, 0])
    norm_rel = np.abs(z_norm - hrec[:, 1]) / np.abs(hrec[:, 1])
    loss_rel64 = np.abs(z_loss - drec[:, 0]) / np.abs(drec[:, 0])
    hf_rel64 = np.abs(hrec[:, 0] - drec[:, 0]) / np.abs(drec[:, 0])
    lr_py = np.array([lr_at(s, hp["lr"], hp["min_lr"], hp["warmup"], steps) for s in range(steps)])
    lr_rel = float(np.max(np.abs(z_lr - lr_py) / lr_py))
    if not np.all(loss_rel <= TOL):
        s = int(np.argmax(loss_rel))
        problems.append(f"loss step {s + 1}: {z_loss[s]:.8g} vs torch {hrec[s, 0]:.8g} (rel {loss_rel[s]:.2e})")
    if not np.all(norm_rel <= TOL):
        s = int(np.argmax(norm_rel))
        problems.append(f"grad norm step {s + 1}: {z_norm[s]:.8g} vs torch {hrec[s, 1]:.8g} (rel {norm_rel[s]:.2e})")
    if not lr_rel <= 1e-12:
        problems.append(f"lr schedule differs from zt_lr_at's formula (rel {lr_rel:.2e})")
    zc = z_clip < 1.0
    hc = hrec[:, 1] > hp["clip"]
    n_clip = int(zc.sum())
    if n_clip == 0:
        problems.append(f"clipping never triggered (grad norms {z_norm.min():.3g}..{z_norm.max():.3g}, clip {hp['clip']})")
    if not np.array_equal(zc, hc):
        problems.append(f"clipped steps differ: ztrain {np.nonzero(zc)[0].tolist()}, torch {np.nonzero(hc)[0].tolist()}")
    exp_clip = np.minimum(1.0, hp["clip"] / (z_norm + 1e-6))
    if not np.allclose(z_clip, exp_clip, rtol=1e-6, atol=0):
        problems.append("clip factor is not min(1, clip / (norm + 1e-6))")
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
    problems = ys.problems() + problems
    msg = (f"{ys.summary()}; {steps} steps x K={K}, loss {z_loss[0]:.4f} -> {z_loss[-1]:.4f}, clipped on {n_clip}/{steps} steps "
           f"(norm {z_norm.min():.3f}..{z_norm.max():.3f}, clip {hp['clip']}); "
           f"loss max rel {loss_rel.max():.1e}, grad norm max rel {norm_rel.max():.1e}, lr max rel {lr_rel:.1e}; "
           f"final params worst rel {pworst[1]:.1e} [{pworst[0]}] max abs {pworst_abs:.1e} "
           f"(key biases, zero gradient, not compared: max abs {kb_abs:.1e}); "
           f"vs f64: ztrain loss max rel {loss_rel64.max():.1e} params worst rel {pworst64:.1e}, "
           f"torch fp32 loss max rel {hf_rel64.max():.1e}")
    if os.environ.get("ZT_HF_VERBOSE"):  # every quantity's errors and ratio
        for w, ez, eh, r in ys.rows:
            print(f"#   {name} {w}: ztrain {ez:.2e} HF fp32 {eh:.2e} ratio {r:.2f}")
    if problems:
        report_fail(name, "; ".join(problems[:6]) + f" [{msg}]")
    else:
        report_pass(name, msg)


# ----------------------------------------------------------------------------------- main

def main():
    t0 = time.time()
    if not os.access(BIN, os.X_OK):
        report_fail("hf_reference_binary", f"{os.path.relpath(BIN, REPO)} not built (run make build-all)")
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
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
