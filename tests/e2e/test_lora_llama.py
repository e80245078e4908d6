#!/usr/bin/env python3
"""test_lora_llama.py — ztrain's LoRA on the Llama family against Hugging Face PEFT.

Run from the repository root with the reference venv: .venv-ref/bin/python tests/e2e/test_lora_llama.py
Needs build/tests/model_dump (its lora-* modes). PASS/FAIL lines; exits non-zero on a failure.

The reference: transformers' LlamaForCausalLM / Qwen2ForCausalLM of tests/helpers/hf_llama_common.py, wrapped by
peft.get_peft_model with LoraConfig(r, lora_alpha, target_modules = PEFT's module names (q_proj, k_proj, v_proj,
o_proj, gate_proj, up_proj, down_proj), lora_dropout 0, use_rslora, bias "none"); the base frozen, the adapters set
to the same random values ztrain gets (A and B both non-zero, so every adapter gradient is exercised). ztrain keeps
q|k|v and gate|up fused in its base weights; its adapters sit on their column slices, one A (r, in) and B (cols, r)
per PEFT module (core/lora/lora.h), named h.<l>.<module>.lora_A / lora_B in PEFT's order.
  table_*   `model_dump lora-table` against PEFT's trainable parameters: same modules, shapes and order.
  fwdbwd_*  one forward + backward: the loss, the logits and every adapter gradient.
  train_*   10 AdamW steps on the adapters (K = 2, warmup + cosine, clipping by the adapters' global norm) against
            torch.optim.AdamW + clip_grad_norm_ over PEFT's adapters: per-step losses, grad norms, final adapters.
The yardstick is tests/helpers/hf_ref_common.py's: rel(ztrain, f64) <= 3 x max(rel(PEFT fp32, f64), 2^-24) per
quantity, with PEFT on the float64 twin of the model as f64 (hf_llama_common.widened), and rel(ztrain, PEFT fp32) <=
1e-4. Cases: Llama with grouped-query attention and every module, rank-stabilised scaling on the attention modules
only, Qwen2 (q, k, v biases) with the MLP's and v_proj's adapters.
"""
import os
import re
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "helpers"))
import hf_ref_common as common  # noqa: E402
from hf_ref_common import (TOL, Yardstick, adamw_train, check_loss_logits, check_train_records, hf_loss,  # noqa: E402
                           make_batches, parse_table, rel_err, report_fail, report_pass, run_dump, train_args,
                           write_tokens)

common.require_imports("lora_llama_imports", "numpy/torch/transformers/peft",
                       "create the venv with scripts/setup-venv.sh", extra=("peft",))
import numpy as np  # noqa: E402
import torch  # noqa: E402
from peft import LoraConfig, get_peft_model  # noqa: E402
from hf_llama_common import dump_args, flat, make_model, to_ztrain, values, widened  # noqa: E402

# the coarse check of the final adapters against PEFT fp32 directly: Adam turns the two fp32 runs' last-bit gradient
# differences into O(lr) steps where a gradient is small, so after 10 steps they sit a few 1e-4 apart (measured up to
# 1.3e-4); the yardstick (each run's distance to float64) is the strict check
FINAL_TOL = 1e-3

MODULES = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
           "mlp.up_proj", "mlp.down_proj"]
PEFT_NAME = re.compile(r"^base_model\.model\.model\.layers\.(\d+)\.(\w+\.\w+)\.(lora_[AB])\.default\.weight$")


def modules(lo):
    if lo["targets"] == "all":
        return MODULES
    names = lo["targets"].split(",")
    return [m for m in MODULES if m.split(".")[1] in names]


def lora_args(lo):
    return ["--lora-rank", str(lo["r"]), "--lora-alpha", f"{lo['alpha']:g}", "--lora-rslora", str(int(lo["rslora"])),
            "--lora-targets", lo["targets"]]


def peft_model(model, lo):
    cfg = LoraConfig(r=lo["r"], lora_alpha=lo["alpha"], target_modules=[m.split(".")[1] for m in modules(lo)],
                     lora_dropout=0.0, use_rslora=bool(lo["rslora"]), bias="none")
    pm = get_peft_model(model, cfg)
    pm.eval()
    adapters = {}
    for n, p in pm.named_parameters():
        if p.requires_grad:
            m = PEFT_NAME.match(n)
            if not m:
                raise RuntimeError(f"unexpected trainable parameter {n}")
            adapters[f"h.{m.group(1)}.{m.group(2)}.{m.group(3)}"] = p
    return pm, adapters


def set_adapters(adapters, ts, vec):
    with torch.no_grad():
        for name, o, n, shape, _ in ts:
            adapters[name].copy_(torch.from_numpy(vec[o:o + n].reshape(shape)).to(adapters[name].dtype))


def random_adapters(ts, total, seed):
    rng = np.random.default_rng(seed)
    v = np.zeros(total, dtype=np.float32)
    for name, o, n, _, _ in ts:
        v[o:o + n] = (0.1 if name.endswith("lora_A") else 0.05) * rng.standard_normal(n)
    return v


def setup(tag, sh, lo, seed, tmp):
    """ztrain's adapter table checked against PEFT's, the base and adapters written; (ts, total, paths, models)"""
    model = make_model(sh, seed)
    model64 = widened(model, sh)
    wpath, apath = os.path.join(tmp, f"{tag}.w"), os.path.join(tmp, f"{tag}.a")
    base_ts, base_total = parse_table(run_dump(["table"] + dump_args(sh)))
    flat(to_ztrain(values(model), sh), base_ts, base_total).tofile(wpath)  # before PEFT wraps the linears
    ts, total = parse_table(run_dump(["lora-table"] + dump_args(sh) + lora_args(lo)))
    pm, ad = peft_model(model, lo)
    pm64, ad64 = peft_model(model64, lo)
    names = [t[0] for t in ts]
    want = [f"h.{l}.{m}.lora_{x}" for l in range(sh["L"]) for m in modules(lo) for x in "AB"]
    if names != want or sorted(names) != sorted(ad):
        raise RuntimeError(f"adapter table {names[:4]}... != PEFT's modules in order {want[:4]}...")
    for name, o, n, shape, decay in ts:
        if tuple(ad[name].shape) != shape or decay != 1:
            raise RuntimeError(f"{name}: ztrain {shape} decay {decay}, PEFT {tuple(ad[name].shape)}")
    vec = random_adapters(ts, total, seed + 5)
    set_adapters(ad, ts, vec)
    set_adapters(ad64, ts, vec)
    vec.tofile(apath)
    return ts, total, wpath, apath, (pm, ad), (pm64, ad64)


def case_fwdbwd(tag, sh, lo, B, T, seed, tmp):
    name = f"fwdbwd_{tag}"
    ts, total, wpath, apath, (pm, ad), (pm64, ad64) = setup(tag, sh, lo, seed, tmp)
    report_pass(f"table_{tag}", f"{len(ts)} adapter tensors, {total} params, PEFT's modules, shapes and order")
    (tok, tgt), = make_batches(1, B, T, sh["V"], seed + 2)
    tpath, opath = os.path.join(tmp, f"{tag}.tok"), os.path.join(tmp, f"{tag}.out")
    write_tokens(tpath, [(tok, tgt)])
    run_dump(["lora-fwdbwd"] + dump_args(sh) + lora_args(lo) + ["--B", str(B), "--T", str(T), "--weights", wpath,
                                                                "--adapters", apath, "--tokens", tpath, "--out", opath])
    V, Vp = sh["V"], sh["Vp"]
    out = np.fromfile(opath, dtype=np.float32)
    nlog = B * T * Vp
    if out.size != 1 + nlog + total:
        report_fail(name, f"model_dump wrote {out.size} floats, expected {1 + nlog + total}")
        return
    z_loss, z_logits, z_grad = float(out[0]), out[1:1 + nlog].reshape(B, T, Vp), out[1 + nlog:]
    ref = []
    for m, a in ((pm, ad), (pm64, ad64)):
        m.zero_grad(set_to_none=True)
        loss, logits = hf_loss(m, tok, tgt)
        loss.backward()
        ref.append((float(loss), logits.detach().to(torch.float64).numpy(),
                    {n: p.grad.detach().to(torch.float64).numpy() for n, p in a.items()}))
    (h_loss, h_logits, h_g), (d_loss, d_logits, d_g) = ref
    problems = []
    ys = Yardstick("ztrain", "PEFT")
    loss_rel, log_rel, _ = check_loss_logits(ys, problems, z_loss, z_logits, h_loss, h_logits, d_loss, d_logits, V, Vp)
    worst = ("", 0.0)
    for tname, o, n, shape, _ in ts:
        zg = z_grad[o:o + n].reshape(shape)
        ys.add(f"grad {tname}", zg, h_g[tname], d_g[tname])
        r = rel_err(zg, h_g[tname])
        if not r <= TOL:
            problems.append(f"grad {tname}: rel {r:.2e}")
        worst = max(worst, (tname, r), key=lambda x: x[1])
    ys.finish(name, problems, f"{ys.summary()}; loss {z_loss:.6f} rel {loss_rel:.1e}; logits rel {log_rel:.1e}; "
              f"adapter grads ({len(ts)} tensors) worst rel {worst[1]:.1e} [{worst[0]}]")


def case_train(tag, sh, lo, B, T, K, steps, hp, seed, tmp):
    name = f"train_{tag}"
    ts, total, wpath, apath, (pm, ad), (pm64, ad64) = setup(tag, sh, lo, seed, tmp)
    batches = make_batches(K, B, T, sh["V"], seed + 2)  # one step's batches every step: the loss must fall
    tpath, opath = os.path.join(tmp, f"{tag}.tok"), os.path.join(tmp, f"{tag}.out")
    write_tokens(tpath, batches)
    run_dump(["lora-train"] + dump_args(sh) + lora_args(lo) + train_args(B, T, K, steps, hp) +
             ["--weights", wpath, "--adapters", apath, "--tokens", tpath, "--out", opath])
    raw = open(opath, "rb").read()
    if len(raw) != steps * 32 + total * 4:
        report_fail(name, f"model_dump wrote {len(raw)} bytes, expected {steps * 32 + total * 4}")
        return
    zrec = np.frombuffer(raw[:steps * 32], dtype=np.float64).reshape(steps, 4)
    zad = np.frombuffer(raw[steps * 32:], dtype=np.float32)
    runs = []
    for m, a, dt in ((pm, ad, torch.float32), (pm64, ad64, torch.float64)):
        rec = adamw_train(m, [(list(a.values()), hp["wd"])], batches, steps, K, hp, dt)
        runs.append((rec, {n: p.detach().to(torch.float64).numpy() for n, p in a.items()}))
    (hrec, hpar), (drec, dpar) = runs
    problems = []
    ys = Yardstick("ztrain", "PEFT")
    loss_rel, norm_rel, _, _, _ = check_train_records(ys, problems, zrec, hrec, drec, hp, steps, "PEFT", 1e-12)
    if zrec[-1, 0] >= zrec[0, 0]:
        problems.append(f"loss did not decrease ({zrec[0, 0]:.4f} -> {zrec[-1, 0]:.4f})")
    if not (zrec[:, 2] < 1.0).any():
        problems.append("clipping never triggered")
    worst = ("", 0.0)
    for tname, o, n, shape, _ in ts:
        zp = zad[o:o + n].reshape(shape)
        ys.add(f"final {tname}", zp, hpar[tname], dpar[tname])
        r = rel_err(zp, hpar[tname])
        if not r <= FINAL_TOL:
            problems.append(f"final {tname}: rel {r:.2e}")
        worst = max(worst, (tname, r), key=lambda x: x[1])
    ys.finish(name, problems, f"{ys.summary()}; {steps} steps x K={K}, loss {zrec[0, 0]:.4f} -> {zrec[-1, 0]:.4f}, "
              f"clipped on {int((zrec[:, 2] < 1).sum())}/{steps}; loss max rel {loss_rel.max():.1e}, grad norm max rel "
              f"{norm_rel.max():.1e}; final adapters worst rel {worst[1]:.1e} [{worst[0]}]")


def main():
    t0 = time.time()
    base = dict(L=2, C=64, V=97, Vp=128, maxT=32, I=96, eps=1e-5, theta=10000.0)
    llama = dict(base, family="llama", H=4, KV=2)
    qwen2 = dict(base, family="qwen2", H=4, KV=1, eps=1e-6, theta=1000000.0)
    hp = dict(lr=1e-3, min_lr=1e-4, warmup=2, clip=0.3, wd=0.1, beta1=0.9, beta2=0.95, eps=1e-8)
    every = dict(r=4, alpha=8.0, rslora=0, targets="all")
    attn_rs = dict(r=8, alpha=16.0, rslora=1, targets="q_proj,k_proj,v_proj,o_proj")
    mlp_v = dict(r=4, alpha=4.0, rslora=0, targets="v_proj,gate_proj,up_proj,down_proj")
    cases = [("fwdbwd", "llama_all", llama, every, dict(B=2, T=16, seed=31)),
             ("fwdbwd", "llama_attn_rslora", llama, attn_rs, dict(B=2, T=20, seed=32)),
             ("fwdbwd", "qwen2_mlp_v", qwen2, mlp_v, dict(B=3, T=12, seed=33)),
             ("train", "llama_all", llama, every, dict(B=2, T=16, K=2, steps=10, seed=34)),
             ("train", "qwen2_mlp_v", qwen2, mlp_v, dict(B=2, T=16, K=2, steps=10, seed=35))]
    with tempfile.TemporaryDirectory(prefix="zt_loral_") as tmp:
        for kind, tag, sh, lo, kw in cases:
            try:
                if kind == "fwdbwd":
                    case_fwdbwd(tag, sh, lo, kw["B"], kw["T"], kw["seed"], tmp)
                else:
                    case_train(tag, sh, lo, kw["B"], kw["T"], kw["K"], kw["steps"], hp, kw["seed"], tmp)
            except Exception as e:  # a crash of model_dump or of the comparison fails the case
                report_fail(f"{kind}_{tag}", f"{type(e).__name__}: {e}")
    print(f"# test_lora_llama: {time.time() - t0:.1f} s", file=sys.stderr)
    return 1 if common.failures else 0


if __name__ == "__main__":
    sys.exit(main())
