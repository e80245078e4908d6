#!/usr/bin/env python3
"""test_hf_llama.py — ztrain's Llama family (Llama, Mistral, Qwen2 descriptions) against transformers'
LlamaForCausalLM, MistralForCausalLM and Qwen2ForCausalLM.

Run from the repository root with the reference venv (scripts/setup-venv.sh):
    .venv-ref/bin/python tests/e2e/test_hf_llama.py
Needs build/tests/model_dump. Prints "PASS name (metrics)" / "FAIL name: reason" lines; exits non-zero on a failure.

Each case builds a tiny random model with transformers (seeded; RMSNorm weights and biases moved away from 1 / 0),
hands its fp32 weights to `model_dump` in ztrain's table order (the q, k, v projections side by side in one (in, out)
matrix, gate and up likewise; every other linear transposed to (in, out); the embedding and the untied LM head padded
to Vp rows) with `--set model.family=...` and the config's sizes, and compares:
  table_*   the table's tensors cover every HF parameter exactly once (sizes add up), decay on 2-D weights only;
  fwdbwd_*  the loss, the logits and the gradient of EVERY parameter after one forward + backward;
  train_*   20 AdamW steps (K = 2 micro-batches, warmup + cosine, global-norm clipping that triggers) against
            torch.optim.AdamW + clip_grad_norm_ driven identically: per-step losses, grad norms, final parameters.
The yardstick is tests/helpers/hf_ref_common.py's: rel(ztrain, f64) <= 3 x max(rel(HF fp32, f64), 2^-24) per
quantity. The f64 reference is transformers' model in float64 with the three places where its code computes in fp32
whatever the model's dtype made float64 as well (RMSNorm's upcast, the softmax's dtype=float32 and the rotary
frequencies and angles, recomputed here in float64 with transformers' formulas, Llama 3's scaling included): without
that the "f64" run would carry fp32 errors. The fp32 reference is transformers' code unchanged.
Cases: Llama with grouped-query attention (4 query heads, 2 key/value heads), Llama 3's rotary scaling, Mistral with
multi-query attention (1 key/value head), Qwen2 (q, k, v biases, norm eps 1e-6, rope theta 1e6).
"""
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "helpers"))
import hf_ref_common as common  # noqa: E402
from hf_ref_common import (REPO, TOL, Yardstick, abs_err, adamw_train, check_loss_logits,  # noqa: E402
                           check_table_map, check_train_run, compare_tensors, hf_loss, make_batches, parse_table,
                           read_fwdbwd, read_train, rel_err, report_fail, report_pass, run_dump, train_args,
                           write_tokens)

common.require_imports("hf_llama_imports", "numpy/torch/transformers",
                       "create the venv with scripts/setup-venv.sh: transformers 4.44.2, Debian's torch, numpy")
import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from hf_llama_common import dump_args, flat, grads, make_model, to_ztrain, values, widened  # noqa: E402

def check_table(sh, model):
    ts, total = parse_table(run_dump(["table"] + dump_args(sh)))
    n_hf = sum(p.numel() for p in model.parameters()) + 2 * (sh["Vp"] - sh["V"]) * sh["C"]
    err = check_table_map(ts, total, to_ztrain(values(model), sh), n_hf)
    return (None, err) if err else ((ts, total), None)


# ----------------------------------------------------------------------------------- cases

def case_fwdbwd(tag, sh, B, T, seed, tmp):
    name = f"fwdbwd_{tag}"
    model = make_model(sh, seed)
    tab, err = check_table(sh, model)
    if err:
        report_fail(f"table_{tag}", err)
        return
    ts, total = tab
    report_pass(f"table_{tag}", f"{len(ts)} tensors, {total} elements, every {sh['family']} parameter once, HF layouts "
                f"mapped (q|k|v and gate|up fused, (in, out))")
    (tok, tgt), = make_batches(1, B, T, sh["V"], seed + 2)
    wpath, tpath, opath = (os.path.join(tmp, f"{tag}.{x}") for x in ("w", "tok", "out"))
    flat(to_ztrain(values(model), sh), ts, total).tofile(wpath)
    write_tokens(tpath, [(tok, tgt)])
    run_dump(["fwdbwd"] + dump_args(sh) + ["--B", str(B), "--T", str(T), "--weights", wpath, "--tokens", tpath,
                                           "--out", opath])
    V, Vp = sh["V"], sh["Vp"]
    got = read_fwdbwd(opath, B, T, Vp, total)
    if isinstance(got, str):
        report_fail(name, got)
        return
    z_loss, z_logits, z_grad = got
    ref = {}
    for m in (model, widened(model, sh)):
        m.zero_grad(set_to_none=True)
        loss, logits = hf_loss(m, tok, tgt)
        loss.backward()
        ref[m] = (float(loss), logits.detach().to(torch.float64).numpy(), to_ztrain(grads(m), sh))
    (h_loss, h_logits, h_grads), (d_loss, d_logits, d_grads) = ref.values()
    problems = []
    ys = Yardstick("ztrain", "HF")
    loss_rel, log_rel, log_abs = check_loss_logits(ys, problems, z_loss, z_logits, h_loss, h_logits, d_loss, d_logits,
                                                   V, Vp)
    worst = compare_tensors(ys, problems, ts, z_grad, h_grads, d_grads, V, Vp, ("wte.weight", "lm_head.weight"), "grad")
    msg = (f"{ys.summary()}; loss {z_loss:.6f} rel {loss_rel:.1e}; logits rel {log_rel:.1e} abs {log_abs:.1e}; "
           f"grads ({len(ts)} tensors) worst rel {worst[1]:.1e} [{worst[0]}]")
    ys.finish(name, problems, msg)


def torch_train(model, sh, batches, steps, K, hp, dtype):
    params = dict(model.named_parameters())
    decay = [p for p in params.values() if p.dim() == 2]
    no_decay = [p for p in params.values() if p.dim() != 2]
    rec = adamw_train(model, [(decay, hp["wd"]), (no_decay, 0.0)], batches, steps, K, hp, dtype)
    return rec, to_ztrain(values(model), sh)


def case_train(tag, sh, B, T, K, steps, hp, seed, tmp):
    name = f"train_{tag}"
    model = make_model(sh, seed)
    model64 = widened(model, sh)
    tab, err = check_table(sh, model)
    if err:
        report_fail(name, "table: " + err)
        return
    ts, total = tab
    batches = make_batches(steps * K, B, T, sh["V"], seed + 2)
    wpath, tpath, opath = (os.path.join(tmp, f"{tag}.{x}") for x in ("w", "tok", "out"))
    flat(to_ztrain(values(model), sh), ts, total).tofile(wpath)
    write_tokens(tpath, batches)
    run_dump(["train"] + dump_args(sh) + train_args(B, T, K, steps, hp) +
             ["--weights", wpath, "--tokens", tpath, "--out", opath])
    got = read_train(opath, steps, total)
    if isinstance(got, str):
        report_fail(name, got)
        return
    zrec, zparams = got
    hrec, hpar = torch_train(model, sh, batches, steps, K, hp, torch.float32)
    drec, dpar = torch_train(model64, sh, batches, steps, K, hp, torch.float64)
    problems = []
    ys = Yardstick("ztrain", "HF")
    loss_rel, norm_rel, loss64, hf64, zc = check_train_run(ys, problems, zrec, hrec, drec, hp, steps)
    V, C, H, KV = sh["V"], sh["C"], sh["H"], sh["KV"]
    worst, kb_abs = ("", 0.0), 0.0
    for tname, o, numel, shape, _ in ts:
        zp = zparams[o:o + numel].reshape(shape)
        hq, dq = hpar[tname], dpar[tname]
        if tname in ("wte.weight", "lm_head.weight"):
            zp, hq, dq = zp[:V], hq[:V], dq[:V]
        if tname.endswith("attn.c_attn.bias"):
            # the key bias has an exactly zero gradient (it shifts every score of a query alike): both sides feed
            # Adam rounding noise there. Compared: the query and value biases
            k0, k1 = C, C + KV * (C // H)
            kb_abs = max(kb_abs, abs_err(zp[k0:k1], hq[k0:k1]))
            zp, hq, dq = (np.concatenate([x[:k0], x[k1:]]) for x in (zp, hq, dq))
        ys.add(f"final {tname}", zp, hq, dq)
        r = rel_err(zp, hq)
        if not r <= TOL:
            problems.append(f"final {tname}: rel {r:.2e}")
        if r > worst[1]:
            worst = (tname, r)
    msg = (f"{ys.summary()}; {steps} steps x K={K}, loss {zrec[0, 0]:.4f} -> {zrec[-1, 0]:.4f}, clipped on "
           f"{int(zc.sum())}/{steps} steps; loss max rel {loss_rel.max():.1e}, grad norm max rel {norm_rel.max():.1e}; "
           f"final params worst rel {worst[1]:.1e} [{worst[0]}]"
           + (f" (key biases, zero gradient, not compared: max abs {kb_abs:.1e})" if sh["family"] == "qwen2" else "")
           + f"; vs f64: ztrain loss max rel {loss64.max():.1e}, torch fp32 {hf64.max():.1e}")
    ys.finish(name, problems, msg)


def main():
    t0 = time.time()
    if not os.access(common.BIN, os.X_OK):
        report_fail("hf_llama_binary", f"{os.path.relpath(common.BIN, REPO)} not built")
        return 1
    base = dict(L=2, C=64, V=97, Vp=128, maxT=32, I=96, eps=1e-5, theta=10000.0)
    llama = dict(base, family="llama", H=4, KV=2)
    llama3 = dict(llama, theta=500000.0, I=80,
                  rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                                    original_max_position_embeddings=16))
    mistral = dict(base, family="mistral", H=4, KV=1, C=48, I=112)
    qwen2 = dict(base, family="qwen2", H=4, KV=2, eps=1e-6, theta=1000000.0)
    hp = dict(lr=3e-3, min_lr=3e-4, warmup=4, clip=2.0, wd=0.1, beta1=0.9, beta2=0.95, eps=1e-8)
    cases = [("fwdbwd", "llama_gqa", llama, dict(B=2, T=20, seed=21)),
             ("fwdbwd", "llama3_scaled_rope", llama3, dict(B=2, T=32, seed=22)),
             ("fwdbwd", "mistral_mqa", mistral, dict(B=3, T=17, seed=23)),
             ("fwdbwd", "qwen2_bias", qwen2, dict(B=2, T=24, seed=24)),
             ("train", "llama_gqa", llama, dict(B=2, T=16, K=2, steps=20, seed=25)),
             ("train", "mistral_mqa", mistral, dict(B=2, T=16, K=2, steps=20, seed=26)),
             ("train", "qwen2_bias", qwen2, dict(B=2, T=16, K=2, steps=20, seed=27))]
    with tempfile.TemporaryDirectory(prefix="zt_hfl_") as tmp:
        for kind, tag, sh, kw in cases:
            try:
                if kind == "fwdbwd":
                    case_fwdbwd(tag, sh, kw["B"], kw["T"], kw["seed"], tmp)
                else:
                    case_train(tag, sh, kw["B"], kw["T"], kw["K"], kw["steps"], hp, kw["seed"], tmp)
            except Exception as e:  # a crash of model_dump or of the comparison fails the case
                report_fail(f"{kind}_{tag}", f"{type(e).__name__}: {e}")
    print(f"# test_hf_llama: {time.time() - t0:.1f} s, transformers {transformers.__version__}, torch {torch.__version__}",
          file=sys.stderr)
    return 1 if common.failures else 0


if __name__ == "__main__":
    sys.exit(main())
