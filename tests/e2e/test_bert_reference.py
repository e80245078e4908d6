#!/usr/bin/env python3
"""test_bert_reference.py — ztrain's encoders (model.family bert, roberta: masked-LM pretraining) against
transformers' BertForMaskedLM and RobertaForMaskedLM.

Run from the repository root with the reference venv (scripts/setup-venv.sh):
    .venv-ref/bin/python tests/e2e/test_bert_reference.py
Needs build/tests/model_dump. Prints "PASS name (metrics)" / "FAIL name: reason" lines; exits non-zero on a failure.

Each case builds a tiny random model with transformers (tests/helpers/hf_bert_common.py: seeded, LayerNorm weights
and biases moved away from 1 / 0), hands its fp32 weights to `model_dump` in ztrain's table order (query, key, value
side by side in one (in, out) matrix, every linear transposed to (in, out), the embedding and the decoder's bias
padded to Vp) and compares, on masked-LM batches with a [SEP] in the middle of each sequence (so token types 0 and 1
both occur) and a right-padded row (attention mask; RoBERTa's positions count the real tokens):
  table_*   the table's tensors cover every transformers parameter exactly once;
  fwdbwd_*  the loss over the masked positions, the logits and the gradient of EVERY parameter after one forward +
            backward;
  train_*   20 AdamW steps (K = 2 micro-batches, the step's loss the mean over all its masked positions, warmup +
            cosine, global-norm clipping that triggers) against torch.optim.AdamW + clip_grad_norm_ driven alike.
The yardstick is tests/helpers/hf_ref_common.py's: rel(ztrain, f64) <= 3 x max(rel(HF fp32, f64), 2^-24) per
quantity; f64 is transformers' model in float64 (BERT's code has no fp32 islands).
"""
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "helpers"))
import hf_ref_common as common  # noqa: E402
from hf_ref_common import (REPO, Yardstick, check_loss_logits, check_table_map, check_train_run,  # noqa: E402
                           compare_tensors, lr_at, parse_table, read_fwdbwd, read_train, report_fail, report_pass,
                           run_dump, train_args, write_tokens)

common.require_imports("hf_bert_imports", "numpy/torch/transformers",
                       "create the venv with scripts/setup-venv.sh: transformers 4.44.2, Debian's torch, numpy")
import numpy as np  # noqa: E402
import torch  # noqa: E402
from hf_bert_common import (dump_args, flat, grads, hf_mlm_loss, make_model, mlm_batches, to_ztrain,  # noqa: E402
                            values, widened)

VOCAB_ROWS = ("wte.weight", "head.bias")  # padded to Vp rows: compared on the first V


def check_table(sh, model):
    ts, total = parse_table(run_dump(["table"] + dump_args(sh)))
    n_hf = sum(p.numel() for p in model.parameters()) + (sh["Vp"] - sh["V"]) * (sh["C"] + 1)
    err = check_table_map(ts, total, to_ztrain(values(model), sh), n_hf)
    return (None, err) if err else ((ts, total), None)


def case_fwdbwd(tag, sh, B, T, seed, tmp):
    name = f"fwdbwd_{tag}"
    model = make_model(sh, seed)
    tab, err = check_table(sh, model)
    if err:
        report_fail(f"table_{tag}", err)
        return
    ts, total = tab
    report_pass(f"table_{tag}", f"{len(ts)} tensors, {total} elements, every {sh['family']} parameter once")
    (tok, tgt), = mlm_batches(1, B, T, sh, seed + 2)
    wpath, tpath, opath = (os.path.join(tmp, f"{tag}.{x}") for x in ("w", "tok", "out"))
    flat(to_ztrain(values(model), sh), ts, total).tofile(wpath)
    write_tokens(tpath, [(tok, tgt)])
    run_dump(["fwdbwd"] + dump_args(sh) + ["--B", str(B), "--T", str(T), "--weights", wpath, "--tokens", tpath,
                                           "--out", opath, "--masked", "1"])
    V, Vp = sh["V"], sh["Vp"]
    got = read_fwdbwd(opath, B, T, Vp, total)
    if isinstance(got, str):
        report_fail(name, got)
        return
    z_loss, z_logits, z_grad = got
    ref = []
    for m in (model, widened(model, sh)):
        m.zero_grad(set_to_none=True)
        loss, logits = hf_mlm_loss(m, tok, tgt, sh)
        loss.backward()
        ref.append((float(loss), logits.detach().to(torch.float64).numpy(), to_ztrain(grads(m), sh)))
    (h_loss, h_logits, h_grads), (d_loss, d_logits, d_grads) = ref
    problems = []
    ys = Yardstick("ztrain", "HF")
    loss_rel, log_rel, log_abs = check_loss_logits(ys, problems, z_loss, z_logits, h_loss, h_logits, d_loss, d_logits,
                                                   V, Vp)
    worst = compare_tensors(ys, problems, ts, z_grad, h_grads, d_grads, V, Vp, VOCAB_ROWS, "grad")
    msg = (f"{ys.summary()}; loss {z_loss:.6f} rel {loss_rel:.1e}; logits rel {log_rel:.1e} abs {log_abs:.1e}; "
           f"grads ({len(ts)} tensors) worst rel {worst[1]:.1e} [{worst[0]}]")
    ys.finish(name, problems, msg)


def torch_train(model, sh, batches, steps, K, hp, dtype):
    """AdamW as ztrain's step runs it with loss masks: each step's loss is the sum over its K micro-batches' masked
    positions divided by their number"""
    params = dict(model.named_parameters())
    groups = [([p for p in params.values() if p.dim() == 2], hp["wd"]), ([p for p in params.values() if p.dim() != 2], 0.0)]
    opt = torch.optim.AdamW([{"params": ps, "weight_decay": wd} for ps, wd in groups], lr=hp["lr"],
                            betas=(hp["beta1"], hp["beta2"]), eps=hp["eps"])
    allp = [p for ps, _ in groups for p in ps]
    rec = []
    for step in range(steps):
        opt.zero_grad(set_to_none=True)
        micro = [batches[(step * K + j) % len(batches)] for j in range(K)]
        n = sum(int((tg >= 0).sum()) for _, tg in micro)
        tot = 0.0
        for tok, tgt in micro:
            loss, _ = hf_mlm_loss(model, tok, tgt, sh, reduction="sum")
            (loss / n).backward()
            tot += float(loss)
        norm = float(torch.nn.utils.clip_grad_norm_(allp, hp["clip"]))
        lr = lr_at(step, hp["lr"], hp["min_lr"], hp["warmup"], steps)
        if dtype == torch.float32:
            lr = float(np.float32(lr))
        for g in opt.param_groups:
            g["lr"] = lr
        opt.step()
        rec.append((tot / n, norm, lr))
    return np.array(rec), to_ztrain(values(model), sh)


def case_train(tag, sh, B, T, K, steps, hp, seed, tmp):
    name = f"train_{tag}"
    model = make_model(sh, seed)
    model64 = widened(model, sh)
    tab, err = check_table(sh, model)
    if err:
        report_fail(name, "table: " + err)
        return
    ts, total = tab
    batches = mlm_batches(steps * K, B, T, sh, seed + 2)
    wpath, tpath, opath = (os.path.join(tmp, f"{tag}.{x}") for x in ("w", "tok", "out"))
    flat(to_ztrain(values(model), sh), ts, total).tofile(wpath)
    write_tokens(tpath, batches)
    run_dump(["train"] + dump_args(sh) + train_args(B, T, K, steps, hp) +
             ["--weights", wpath, "--tokens", tpath, "--out", opath, "--masked", "1"])
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
    worst = compare_tensors(ys, problems, ts, zparams, hpar, dpar, sh["V"], sh["Vp"], VOCAB_ROWS, "final")
    msg = (f"{ys.summary()}; {steps} steps x K={K}, loss {zrec[0, 0]:.4f} -> {zrec[-1, 0]:.4f}, clipped on "
           f"{int(zc.sum())}/{steps} steps; loss max rel {loss_rel.max():.1e}, grad norm max rel {norm_rel.max():.1e}; "
           f"final params worst rel {worst[1]:.1e} [{worst[0]}]; vs f64: ztrain loss max rel {loss64.max():.1e}, "
           f"torch fp32 {hf64.max():.1e}")
    ys.finish(name, problems, msg)


def main():
    t0 = time.time()
    if not os.access(common.BIN, os.X_OK):
        report_fail("bert_binary", f"{os.path.relpath(common.BIN, REPO)} not built")
        return 1
    bert = dict(family="bert", L=2, H=4, C=32, I=80, V=97, Vp=128, maxT=24, types=2, pad=0, sep=3, eps=1e-12)
    roberta = dict(bert, family="roberta", I=128, types=1, pad=1, eps=1e-5)
    hp = dict(lr=3e-3, min_lr=3e-4, warmup=4, clip=1.0, wd=0.1, beta1=0.9, beta2=0.98, eps=1e-6)
    with tempfile.TemporaryDirectory() as tmp:
        for tag, sh, seed in (("bert", bert, 31), ("roberta", roberta, 41)):
            for fn, args in ((case_fwdbwd, (tag, sh, 3, 20, seed, tmp)),
                             (case_train, (tag, sh, 2, 16, 2, 20, hp, seed + 5, tmp))):
                try:
                    fn(*args)
                except Exception as e:  # a crash is a failure of that case, the others still run
                    report_fail(f"{fn.__name__[5:]}_{tag}", f"{type(e).__name__}: {e}")
    print(f"# test_bert_reference: {time.time() - t0:.1f} s", file=sys.stderr)
    return 1 if common.failures else 0


if __name__ == "__main__":
    sys.exit(main())
