#!/usr/bin/env python3
"""test_loss_mask.py — loss masks (a target < 0 is an ignored position: fine-tuning's prompt tokens and padding)
against transformers' labels = -100, in float64.

Run from the repository root with the reference venv (scripts/setup-venv.sh):
    .venv-ref/bin/python tests/e2e/test_loss_mask.py
Needs build/tests/model_dump. Prints "PASS name (metrics)" / "FAIL name: reason" lines; exits non-zero on a failure.

ztrain's targets are (B, T) beside the tokens, -1 where a position does not count. transformers shifts its labels
inside the model (logits[:, :-1] predict labels[:, 1:]), so the reference gets the T tokens plus one dummy token
(its logits are dropped by the shift, and causal attention keeps it from every earlier position) and labels
[-100, targets with -1 as -100]: its shifted labels are exactly ztrain's targets. Its loss is the mean over the
labels that are not -100, ztrain's (model_dump --masked 1, core/optim/step.h) the mean over the counted targets.
  fwdbwd_*       one forward + backward on a batch with prompts and padding masked (rows of different counts, one
                 row without any counted target): loss, logits, the gradient of every parameter; GPT-2
                 (GPT2LMHeadModel(labels=)) and Llama with grouped-query attention (LlamaForCausalLM(labels=); its
                 float64 twin computes the same loss from the float64 logits, since transformers casts them to
                 float32 before the loss)
  train_*        AdamW steps with K = 2 micro-batches per step whose counted targets differ (one micro-batch of one
                 step has none): the reference weighs micro-batch j's mean loss by n_j / n (n the step's count),
                 i.e. the mean over the global batch's counted targets; per-step losses, grad norms, final parameters
  normalisation_control  the same f64 reference run with the mean of the micro-batch means instead: its losses must
                 lie far outside the limit, so a step that normalised per micro-batch would fail train_*
  ignored_values_bitwise  the masked positions' targets changed (-1 to -100, -7, INT32_MIN): loss, logits and
                 gradients bit-identical; changing one counted target changes the loss (the control)
  all_counted_bitwise  --masked 1 on batches without a masked target == the run without masks, bit for bit
                 (fwdbwd and 3 training steps)
  ranks_bitwise  the masked training run on 1, 2 and 4 ranks (mpirun, K = 4): bit-identical records and parameters
  devsim_bitwise the masked fwdbwd on the devsim backend == the cpu backend's, bit for bit
  fwdbwd_gpt2_cudasim  fwdbwd_gpt2 on the cudasim backend (the CUDA kernels under the host execution harness),
                 against the same references and limits
  all_masked_step  a step whose global batch has no counted target: loss 0 and grad norm 0
Yardstick (tests/helpers/hf_ref_common.py): rel(ztrain, f64) <= 3 x max(rel(HF fp32, f64), 2^-24) per quantity,
plus the coarse rel(ztrain, HF fp32) <= 1e-4. After a few Adam steps that ratio is heavy-tailed over seeds on both
sides (a weight whose gradient is near 0 turns rounding noise into a full normalised step): over 24 seeds, 8 steps,
the Llama run exceeded 3 on 2 seeds with masks and on 7 with test_hf_llama.py's unmasked batches. The seeds here
are fixed, as in the other reference tests.
"""
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "helpers"))
import hf_ref_common as common  # noqa: E402
from hf_ref_common import (FLOOR, RATIO, REPO, TOL, Yardstick, flat_weights, hf_params, lr_at, make_batches,  # noqa: E402
                           make_hf, parse_table, rel_err, report_fail, report_pass, run_dump, shape_args, train_args,
                           write_tokens)

common.require_imports("loss_mask_imports", "numpy/torch/transformers",
                       "create the venv with scripts/setup-venv.sh: transformers 4.44.2, Debian's torch, numpy")
import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from hf_llama_common import dump_args, flat, grads, make_model, to_ztrain, values, widened  # noqa: E402

GPT2 = dict(family="gpt2", L=2, H=2, C=32, V=97, Vp=128, maxT=32)
LLAMA = dict(family="llama", L=2, H=4, KV=2, C=64, V=97, Vp=128, maxT=32, I=96, eps=1e-5, theta=10000.0)
# the optimiser settings of test_hf_reference.py (GPT-2) and test_hf_llama.py (Llama)
HP = dict(lr=3e-3, min_lr=3e-4, warmup=4, clip=3.0, wd=0.1, beta1=0.9, beta2=0.95, eps=1e-8)
HP_LLAMA = dict(HP, clip=2.0)
HP_SHORT = dict(HP, warmup=1)  # the 3-step runs of the bitwise checks


# ----------------------------------------------------------------------------------- the two families

def fam_args(sh):
    return shape_args(sh) if sh["family"] == "gpt2" else dump_args(sh)


def fam_models(sh, seed):
    """the fp32 model and its float64 twin (the exact fp32 weights, widened)"""
    if sh["family"] == "gpt2":
        m32 = make_hf(sh, seed)
        m64 = make_hf(sh, seed, torch.float64)
        with torch.no_grad():
            for (_, p), (_, q) in zip(m64.named_parameters(), m32.named_parameters()):
                p.copy_(q.to(torch.float64))
        return m32, m64
    m32 = make_model(sh, seed)
    return m32, widened(m32, sh)


def fam_values(model, sh, grad=False):
    """{ztrain tensor name: float64 array} of the parameters (or their gradients)"""
    if sh["family"] == "gpt2":
        return {n: (p.grad if grad else p).detach().to(torch.float64).numpy() for n, p in hf_params(model).items()}
    return to_ztrain(grads(model) if grad else values(model), sh)


def fam_weights(model, sh, ts, total):
    return flat_weights(model, ts, total, sh) if sh["family"] == "gpt2" else flat(to_ztrain(values(model), sh), ts,
                                                                                 total)


def fam_trained(model, sh):
    """the parameters the optimizer trains, as (decay, no decay) groups: weight decay on the 2-D ones"""
    ps = list(hf_params(model).values()) if sh["family"] == "gpt2" else [p for _, p in model.named_parameters()]
    return [[p for p in ps if p.dim() == 2], [p for p in ps if p.dim() != 2]]


def hf_masked_loss(model, sh, tok, tgt):
    """transformers' loss with labels -100 at the ignored positions (see the file comment): loss, logits (B, T, V)"""
    B, T = tok.shape
    ids = torch.from_numpy(np.concatenate([tok, np.zeros((B, 1), np.int32)], axis=1).astype(np.int64))
    labels = np.full((B, T + 1), -100, np.int64)
    labels[:, 1:] = np.where(tgt >= 0, tgt, -100)
    labels = torch.from_numpy(labels)
    f64 = next(model.parameters()).dtype == torch.float64
    if sh["family"] != "gpt2" and f64:
        # LlamaForCausalLM casts its logits to float32 before the loss: the same loss from the float64 logits
        logits = model.lm_head(model.model(input_ids=ids)[0])
        loss = torch.nn.CrossEntropyLoss()(logits[:, :-1].reshape(-1, sh["V"]), labels[:, 1:].reshape(-1))
    else:
        out = model(input_ids=ids, labels=labels)
        loss, logits = out.loss, out.logits
    return loss, logits[:, :T]


# ----------------------------------------------------------------------------------- data

def mask_batch(tok, tgt, rng, heavy):
    """targets with a prompt (the first p positions) and, on some rows, padding at the end ignored (-1); heavy:
    long prompts (few counted targets), else short ones"""
    B, T = tgt.shape
    t = tgt.copy()
    for b in range(B):
        p = int(rng.integers(T // 2, T - 2)) if heavy else int(rng.integers(0, 4))
        t[b, :p] = -1
        if rng.random() < 0.5:
            t[b, T - int(rng.integers(1, T // 4)):] = -1
    return tok, t


def masked_batches(n, B, T, V, seed):
    rng = np.random.default_rng(seed + 100)
    return [mask_batch(tok, tgt, rng, i % 2 == 0) for i, (tok, tgt) in enumerate(make_batches(n, B, T, V, seed))]


def read_fwdbwd(path, B, T, Vp, total):
    out = np.fromfile(path, dtype=np.float32)
    nlog = B * T * Vp
    if out.size != 1 + nlog + total:
        raise RuntimeError(f"model_dump wrote {out.size} floats, expected {1 + nlog + total}")
    return float(out[0]), out[1:1 + nlog].reshape(B, T, Vp), out[1 + nlog:]


def fwdbwd(sh, tmp, tag, wpath, batch, B, T, extra=()):
    """model_dump fwdbwd --masked 1 on one batch: the output file's bytes"""
    tpath, opath = os.path.join(tmp, f"{tag}.tok"), os.path.join(tmp, f"{tag}.out")
    write_tokens(tpath, [batch])
    run_dump(["fwdbwd"] + fam_args(sh) + ["--B", str(B), "--T", str(T), "--weights", wpath, "--tokens", tpath,
                                          "--out", opath, "--masked", "1", *extra])
    return opath


# ----------------------------------------------------------------------------------- comparisons

def compare_tensors(ys, problems, what, ts, zflat, h, d, V):
    """ztrain's flat values (table order) against the fp32 (h) and f64 (d) references, per tensor: the first V rows
    of the vocabulary-sized ones (their padded rows must be exactly 0); returns the worst coarse rel vs fp32"""
    worst = ("", 0.0)
    for tname, o, numel, shape, _ in ts:
        z = zflat[o:o + numel].reshape(shape)
        hq, dq = h[tname], d[tname]
        if tname in ("wte.weight", "lm_head.weight"):
            if np.any(z[V:] != 0):
                problems.append(f"{what} {tname}: padded rows not 0")
            z, hq, dq = z[:V], hq[:V], dq[:V]
        if what == "final" and tname.endswith("attn.c_attn.bias"):
            # the key bias has an exactly zero gradient (it shifts every score of a query alike): both sides feed
            # Adam rounding noise there (as test_hf_reference.py). Compared: the query and value biases
            C = len(z) // 3
            z, hq, dq = (np.concatenate([x[:C], x[2 * C:]]) for x in (z, hq, dq))
        ys.add(f"{what} {tname}", z, hq, dq)
        r = rel_err(z, hq)
        if not r <= TOL:
            problems.append(f"{what} {tname}: rel {r:.2e} vs HF fp32")
        if r >= worst[1]:
            worst = (tname, r)
    return worst


def case_fwdbwd(tag, sh, B, T, seed, tmp, device=None):
    name = f"fwdbwd_{tag}" + (f"_{device}" if device else "")
    m32, m64 = fam_models(sh, seed)
    ts, total = parse_table(run_dump(["table"] + fam_args(sh)))
    (tok, tgt), = masked_batches(1, B, T, sh["V"], seed + 2)
    tgt[1, :] = -1  # a row without any counted target
    wpath = os.path.join(tmp, f"fb_{tag}.w")
    fam_weights(m32, sh, ts, total).tofile(wpath)
    opath = fwdbwd(sh, tmp, f"fb_{tag}_{device}", wpath, (tok, tgt), B, T, ("--device", device) if device else ())
    z_loss, z_logits, z_grad = read_fwdbwd(opath, B, T, sh["Vp"], total)
    ref = []
    for m in (m32, m64):
        m.zero_grad(set_to_none=True)
        loss, logits = hf_masked_loss(m, sh, tok, tgt)
        loss.backward()
        ref.append((float(loss), logits.detach().to(torch.float64).numpy(), fam_values(m, sh, grad=True)))
    (h_loss, h_logits, h_grads), (d_loss, d_logits, d_grads) = ref
    problems = []
    if sh["family"] != "gpt2":  # the float64 loss formula is transformers' own: its labels= path agrees
        with torch.no_grad():
            ids = np.concatenate([tok, np.zeros((B, 1), np.int32)], axis=1).astype(np.int64)
            lab = np.full((B, T + 1), -100, np.int64)
            lab[:, 1:] = np.where(tgt >= 0, tgt, -100)
            own = float(m64(input_ids=torch.from_numpy(ids), labels=torch.from_numpy(lab)).loss)
        if not abs(own - d_loss) <= 1e-6 * abs(d_loss):
            problems.append(f"float64 loss {d_loss!r} differs from transformers' labels= loss {own!r}")
    V = sh["V"]
    ys = Yardstick("ztrain", "HF")
    ys.add("loss", z_loss, h_loss, d_loss)
    ys.add("logits", z_logits[..., :V], h_logits, d_logits)
    loss_rel = abs(z_loss - h_loss) / abs(h_loss)
    if not loss_rel <= TOL:
        problems.append(f"loss {z_loss:.8g} vs HF fp32 {h_loss:.8g} (rel {loss_rel:.2e})")
    worst = compare_tensors(ys, problems, "grad", ts, z_grad, h_grads, d_grads, V)
    n = int((tgt >= 0).sum())
    msg = (f"{ys.summary()}; {n}/{B * T} targets counted; loss {z_loss:.6f} (HF f64 {d_loss:.6f}) rel {loss_rel:.1e}; "
           f"grads ({len(ts)} tensors) worst rel vs HF fp32 {worst[1]:.1e} [{worst[0]}]")
    ys.finish(name, problems, msg)
    return wpath, (tok, tgt), ts, total, opath


# ----------------------------------------------------------------------------------- training

def torch_train(model, sh, batches, steps, K, hp, dtype, norm="global"):
    """torch.optim.AdamW + clip_grad_norm_ driven as ztrain trains, micro-batch j's mean loss (over its counted
    targets) weighed n_j / n (norm "global": the mean over the step's n counted targets) or 1 / K (norm "mean": the
    mean of the micro-batch means). rec (steps, 3) = loss, grad norm, lr; {ztrain name: final parameter}"""
    decay, no_decay = fam_trained(model, sh)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": hp["wd"]}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=hp["lr"], betas=(hp["beta1"], hp["beta2"]), eps=hp["eps"])
    rec = []
    for step in range(steps):
        opt.zero_grad(set_to_none=True)
        mbs = [batches[(step * K + j) % len(batches)] for j in range(K)]
        counts = [int((tgt >= 0).sum()) for _, tgt in mbs]
        tot = 0.0
        for (tok, tgt), n in zip(mbs, counts):
            if n == 0:  # no counted target: no loss and no gradient (transformers' mean would be 0/0)
                continue
            w = n / sum(counts) if norm == "global" else 1.0 / K
            loss, _ = hf_masked_loss(model, sh, tok, tgt)
            (loss * w).backward()
            tot += float(loss) * w
        gnorm = float(torch.nn.utils.clip_grad_norm_(decay + no_decay, hp["clip"]))
        lr = lr_at(step, hp["lr"], hp["min_lr"], hp["warmup"], steps)
        if dtype == torch.float32:
            lr = float(np.float32(lr))  # ztrain hands the adamw kernel a float lr
        for g in opt.param_groups:
            g["lr"] = lr
        opt.step()
        rec.append((tot, gnorm, lr))
    return np.array(rec), fam_values(model, sh)


def train_dump(sh, tmp, tag, wpath, batches, B, T, K, steps, hp, masked=True, ranks=1, extra=()):
    """model_dump train: (records (steps, 4), final parameters, the output's bytes)"""
    tpath, opath = os.path.join(tmp, f"{tag}.tok"), os.path.join(tmp, f"{tag}.out")
    write_tokens(tpath, batches)
    args = ["train"] + fam_args(sh) + train_args(B, T, K, steps, hp) + ["--weights", wpath, "--tokens", tpath,
                                                                         "--out", opath, *extra]
    if masked:
        args += ["--masked", "1"]
    if ranks == 1:
        run_dump(args)
    else:
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        p = subprocess.run(["mpirun", "--oversubscribe", "--bind-to", "none", "-np", str(ranks), common.BIN] + args,
                           cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
        if p.returncode != 0:
            raise RuntimeError(f"mpirun -np {ranks} model_dump train exited {p.returncode}: "
                               f"{(p.stderr or p.stdout).strip()[-500:]}")
    raw = open(opath, "rb").read()
    return (np.frombuffer(raw[:steps * 32], dtype=np.float64).reshape(steps, 4),
            np.frombuffer(raw[steps * 32:], dtype=np.float32), raw)


def case_train(tag, sh, B, T, K, steps, seed, tmp, hp):
    name = f"train_{tag}"
    m32, m64 = fam_models(sh, seed)
    ts, total = parse_table(run_dump(["table"] + fam_args(sh)))
    batches = masked_batches(steps * K, B, T, sh["V"], seed + 2)
    batches[3] = (batches[3][0], np.full_like(batches[3][1], -1))  # step 1's second micro-batch: nothing counted
    wpath = os.path.join(tmp, f"tr_{tag}.w")
    fam_weights(m32, sh, ts, total).tofile(wpath)
    zrec, zpar, _ = train_dump(sh, tmp, f"tr_{tag}", wpath, batches, B, T, K, steps, hp)
    hrec, hpar = torch_train(m32, sh, batches, steps, K, hp, torch.float32)
    m64_wrong = fam_models(sh, seed)[1]
    drec, dpar = torch_train(m64, sh, batches, steps, K, hp, torch.float64)
    problems = []
    ys = Yardstick("ztrain", "HF")
    ys.add(f"losses ({steps} steps)", zrec[:, 0], hrec[:, 0], drec[:, 0])
    ys.add(f"grad_norms ({steps} steps)", zrec[:, 1], hrec[:, 1], drec[:, 1])
    loss_rel = float(np.max(np.abs(zrec[:, 0] - hrec[:, 0]) / np.abs(hrec[:, 0])))
    norm_rel = float(np.max(np.abs(zrec[:, 1] - hrec[:, 1]) / np.abs(hrec[:, 1])))
    if not loss_rel <= TOL:
        problems.append(f"losses rel {loss_rel:.2e} vs torch fp32")
    if not norm_rel <= TOL:
        problems.append(f"grad norms rel {norm_rel:.2e} vs torch fp32")
    if not np.allclose(zrec[:, 3], drec[:, 2], rtol=1e-6, atol=0):
        problems.append("learning rates differ from lr_at's")
    worst = compare_tensors(ys, problems, "final", ts, zpar, hpar, dpar, sh["V"])
    counts = [[int((batches[s * K + j][1] >= 0).sum()) for j in range(K)] for s in range(steps)]
    msg = (f"{ys.summary()}; {steps} steps x K={K}, counted targets per micro-batch {counts}; loss "
           f"{zrec[0, 0]:.4f} -> {zrec[-1, 0]:.4f}, max rel vs torch fp32: loss {loss_rel:.1e}, grad norm "
           f"{norm_rel:.1e}, final params {worst[1]:.1e} [{worst[0]}]")
    ys.finish(name, problems, msg)
    # the per-micro-batch normalisation, run as the f64 reference: how far outside the limit its losses lie
    wrec, _ = torch_train(m64_wrong, sh, batches, steps, K, hp, torch.float64, norm="mean")
    ratio = rel_err(wrec[:, 0], drec[:, 0]) / max(rel_err(hrec[:, 0], drec[:, 0]), FLOOR)
    nratio = rel_err(wrec[:, 1], drec[:, 1]) / max(rel_err(hrec[:, 1], drec[:, 1]), FLOOR)
    cname = f"normalisation_control_{tag}"
    if ratio > 100 * RATIO and nratio > 100 * RATIO:
        report_pass(cname, f"the mean of the micro-batch means is {ratio:.3g} (losses), {nratio:.3g} (grad norms) "
                    f"x HF fp32's error from the f64 reference: far beyond the limit {RATIO:g}")
    else:
        report_fail(cname, f"the mean of the micro-batch means is only {ratio:.3g} / {nratio:.3g} x HF fp32's error: "
                    f"the batches do not tell the normalisations apart")
    return wpath, batches


# ----------------------------------------------------------------------------------- bitwise checks

def bits_equal(a, b):
    return open(a, "rb").read() == open(b, "rb").read()


def case_ignored_values(sh, tmp, wpath, batch, B, T, opath, ts, total):
    name = "ignored_values_bitwise"
    tok, tgt = batch
    problems = []
    for i, v in enumerate((-100, -7, -2 ** 31)):
        t2 = np.where(tgt >= 0, tgt, v).astype(np.int32)
        if not bits_equal(opath, fwdbwd(sh, tmp, f"ign{i}", wpath, (tok, t2), B, T)):
            problems.append(f"ignored targets {v} instead of -1: the output differs")
    # the control: one counted target changed must change the loss
    t3 = tgt.copy()
    b, t = np.argwhere(tgt >= 0)[0]
    t3[b, t] = (t3[b, t] + 1) % sh["V"]
    l0 = read_fwdbwd(opath, B, T, sh["Vp"], total)[0]
    l3 = read_fwdbwd(fwdbwd(sh, tmp, "ignc", wpath, (tok, t3), B, T), B, T, sh["Vp"], total)[0]
    if l3 == l0:
        problems.append("control: changing a counted target left the loss unchanged")
    if problems:
        report_fail(name, "; ".join(problems))
    else:
        report_pass(name, f"-1, -100, -7 and INT32_MIN at the {int((tgt < 0).sum())} ignored positions: loss, logits "
                    f"and every gradient bit-identical; one counted target changed moves the loss {l0:.6f} -> {l3:.6f}")


def case_all_counted(sh, tmp, wpath, B, T, seed):
    name = "all_counted_bitwise"
    batches = make_batches(6, B, T, sh["V"], seed)
    problems = []
    tpath = os.path.join(tmp, "allc.tok")
    write_tokens(tpath, batches[:1])
    for masked in ("0", "1"):
        run_dump(["fwdbwd"] + fam_args(sh) + ["--B", str(B), "--T", str(T), "--weights", wpath, "--tokens", tpath,
                                              "--out", os.path.join(tmp, f"allc{masked}.out"), "--masked", masked])
    if not bits_equal(os.path.join(tmp, "allc0.out"), os.path.join(tmp, "allc1.out")):
        problems.append("fwdbwd: --masked 1 differs from the run without masks")
    K, steps = 2, 3
    _, _, r1 = train_dump(sh, tmp, "allc_m", wpath, batches, B, T, K, steps, HP_SHORT, masked=True)
    _, _, r0 = train_dump(sh, tmp, "allc_u", wpath, batches, B, T, K, steps, HP_SHORT, masked=False)
    if r1 != r0:
        problems.append("train: --masked 1 differs from the run without masks")
    if problems:
        report_fail(name, "; ".join(problems))
    else:
        report_pass(name, f"every target counted: fwdbwd and {steps} steps x K={K} (losses, grad norms, final "
                    "parameters) bit-identical to the unmasked run")


def case_ranks(sh, tmp, wpath, B, T, seed):
    name = "ranks_bitwise"
    K, steps = 4, 3
    batches = masked_batches(K * steps, B, T, sh["V"], seed)
    outs = {}
    for n in (1, 2, 4):
        outs[n] = train_dump(sh, tmp, f"ranks{n}", wpath, batches, B, T, K, steps, HP_SHORT, ranks=n,
                             extra=("--threads", "1"))
    differ = [n for n in (2, 4) if outs[n][2] != outs[1][2]]
    if differ:
        report_fail(name, f"masked training on {differ} ranks differs from 1 rank (losses "
                    f"{[outs[n][0][:, 0].tolist() for n in (1, 2, 4)]})")
    else:
        report_pass(name, f"{steps} steps x K={K} with masks on 1, 2 and 4 ranks: records and final parameters "
                    f"bit-identical (losses {', '.join(f'{x:.6f}' for x in outs[1][0][:, 0])})")


def case_devsim(sh, tmp, wpath, batch, B, T, opath):
    name = "devsim_bitwise"
    o2 = fwdbwd(sh, tmp, "devsim", wpath, batch, B, T, extra=("--device", "devsim"))
    if bits_equal(opath, o2):
        report_pass(name, "masked fwdbwd on devsim: loss, logits and gradients bit-identical to the cpu backend")
    else:
        report_fail(name, "masked fwdbwd on devsim differs from the cpu backend")


def case_all_masked(sh, tmp, wpath, B, T, seed):
    name = "all_masked_step"
    K, steps = 2, 3
    batches = masked_batches(K * steps, B, T, sh["V"], seed)
    for j in (2, 3):  # step 1: nothing counted
        batches[j] = (batches[j][0], np.full_like(batches[j][1], -1))
    zrec, zpar, _ = train_dump(sh, tmp, "allmask", wpath, batches, B, T, K, steps, HP_SHORT)
    if zrec[1, 0] == 0.0 and zrec[1, 1] == 0.0 and np.all(np.isfinite(zpar)) and zrec[2, 0] > 0:
        report_pass(name, f"step 2 of 3 with no counted target: loss 0, grad norm 0; losses {zrec[:, 0].tolist()}")
    else:
        report_fail(name, f"step with no counted target: loss {zrec[1, 0]!r}, grad norm {zrec[1, 1]!r} (want 0, 0)")


# ----------------------------------------------------------------------------------- main

def main():
    t0 = time.time()
    if not os.access(common.BIN, os.X_OK):
        report_fail("loss_mask_binary", f"{os.path.relpath(common.BIN, REPO)} not built (run make build-all)")
        return 1
    with tempfile.TemporaryDirectory(prefix="zt_mask_") as tmp:
        steps = [
            ("fwdbwd_gpt2", lambda: case_fwdbwd("gpt2", GPT2, 3, 20, 31, tmp)),
            ("fwdbwd_llama_gqa", lambda: case_fwdbwd("llama_gqa", LLAMA, 3, 20, 32, tmp)),
            ("fwdbwd_gpt2_cudasim", lambda: case_fwdbwd("gpt2", GPT2, 3, 20, 31, tmp, "cudasim")),
            ("train_gpt2", lambda: case_train("gpt2", GPT2, 2, 16, 2, 8, 33, tmp, HP)),
            ("train_llama_gqa", lambda: case_train("llama_gqa", LLAMA, 2, 16, 2, 8, 33, tmp, HP_LLAMA)),
        ]
        got = {}
        for nm, fn in steps:
            try:
                got[nm] = fn()
            except Exception as e:  # a crash of model_dump or of the comparison fails the case
                report_fail(nm, f"{type(e).__name__}: {e}")
        if "fwdbwd_gpt2" in got:
            wpath, batch, ts, total, opath = got["fwdbwd_gpt2"]
            B, T = batch[0].shape
            for nm, fn in (("ignored_values_bitwise",
                            lambda: case_ignored_values(GPT2, tmp, wpath, batch, B, T, opath, ts, total)),
                           ("all_counted_bitwise", lambda: case_all_counted(GPT2, tmp, wpath, B, T, 35)),
                           ("ranks_bitwise", lambda: case_ranks(GPT2, tmp, wpath, 2, 8, 36)),
                           ("devsim_bitwise", lambda: case_devsim(GPT2, tmp, wpath, batch, B, T, opath)),
                           ("all_masked_step", lambda: case_all_masked(GPT2, tmp, wpath, 2, 8, 37))):
                try:
                    fn()
                except Exception as e:
                    report_fail(nm, f"{type(e).__name__}: {e}")
    print(f"# test_loss_mask: {time.time() - t0:.1f} s, transformers {transformers.__version__}, "
          f"torch {torch.__version__}", file=sys.stderr)
    return 1 if common.failures else 0


if __name__ == "__main__":
    sys.exit(main())
