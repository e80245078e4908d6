"""hf_ref_common.py — what the Hugging Face reference tests share (not a test itself).

Used by tests/e2e/test_hf_reference.py (ztrain's GPT-2 vs transformers' GPT2LMHeadModel) and
tests/e2e/test_lora_reference.py (ztrain's LoRA vs PEFT on the same model). Both are run as
`.venv-ref/bin/python tests/e2e/test_X.py` and put tests/helpers/ on sys.path to import this.

  reporting    report_pass / report_fail print the "PASS name (metrics)" / "FAIL name: reason"
               lines; `failures` counts the FAILs (a test exits non-zero when it is > 0);
               captured_reports() collects them instead (--self-check's negative controls).
  tolerances   TOL (coarse, vs the fp32 reference), RATIO / FLOOR (the yardstick against f64), THREADS.
  Yardstick    rel(candidate, f64) <= RATIO * max(rel(reference fp32, f64), FLOOR) per quantity, and
               .finish(), which prints a case's verdict.
  model_dump   BIN, shape_args, train_args, run_dump, parse_table, zt_table, write_tokens.
  the HF model make_hf (seeded GPT2LMHeadModel), hf_params, flat_weights (ztrain's table order),
               make_batches, hf_loss.
  training     lr_at (zt_lr_at), adamw_train (torch.optim.AdamW + clip_grad_norm_ driven as ztrain
               trains), check_loss_logits / check_train_records / check_clip_steps (the comparisons
               both tests make).

numpy / torch / transformers are imported here when they can be; when they cannot, IMPORT_ERROR holds
the exception, and require_imports() (which each test calls first) turns it into the test's FAIL line.
"""
import contextlib
import importlib
import math
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(REPO, "build", "tests", "model_dump")  # run_dump's binary (a test may point it elsewhere)
TOL = 1e-4        # coarse: the candidate vs the fp32 reference directly
RATIO = 3.0       # the candidate's error vs f64 may be at most RATIO x the fp32 reference's error vs f64
FLOOR = 2.0 ** -24
THREADS = 2

failures = 0
_captured = None  # a list while captured_reports() is active


def report_pass(name, msg):
    if _captured is not None:
        _captured.append(("PASS", name, msg))
        return
    print(f"PASS {name} ({msg})", flush=True)


def report_fail(name, msg):
    global failures
    if _captured is not None:
        _captured.append(("FAIL", name, msg))
        return
    failures += 1
    print(f"FAIL {name}: {msg}", flush=True)


@contextlib.contextmanager
def captured_reports():
    """collects the reports made inside as (PASS|FAIL, name, msg) in the list it yields, instead of
    printing them; a captured FAIL does not count in `failures`"""
    global _captured
    _captured = got = []
    try:
        yield got
    finally:
        _captured = None


try:
    import numpy as np
    import torch
    import torch.nn.functional as F
    from transformers import GPT2Config, GPT2LMHeadModel
except Exception as e:  # ImportError, or a broken install: reported by require_imports()
    IMPORT_ERROR = e
else:
    IMPORT_ERROR = None
    torch.set_num_threads(THREADS)


def require_imports(case, what, hint, extra=()):
    """a test's first step: when numpy / torch / transformers (imported above) or the modules named in
    extra cannot be imported, FAIL case ("cannot import <what> ...: <error> (<hint>)") and exit 1"""
    try:
        if IMPORT_ERROR is not None:
            raise IMPORT_ERROR
        for m in extra:
            importlib.import_module(m)
    except Exception as e:  # ImportError, or a broken install
        report_fail(case, f"cannot import {what} with {sys.executable}: {e!r} ({hint})")
        sys.exit(1)


# ----------------------------------------------------------------------------------- errors

def rel_err(a, b):
    a = np.asarray(a, dtype=np.float64).ravel()
    b = np.asarray(b, dtype=np.float64).ravel()
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def abs_err(a, b):
    a = np.asarray(a, dtype=np.float64).ravel()
    b = np.asarray(b, dtype=np.float64).ravel()
    return float(np.max(np.abs(a - b))) if a.size else 0.0


class Yardstick:
    """collects rel(candidate, f64) / max(rel(reference fp32, f64), FLOOR) per quantity; who names the
    candidate ("ztrain"), ref the reference ("HF", "PEFT")"""

    def __init__(self, who, ref):
        self.who, self.ref = who, ref
        self.rows = []  # (quantity, candidate err, reference err, ratio)

    def add(self, what, z, h, d):
        ez, eh = rel_err(z, d), rel_err(h, d)
        r = ez / max(eh, FLOOR)
        self.rows.append((what, ez, eh, r))
        return r

    def problems(self):
        return [f"{w}: {self.who} vs f64 {ez:.2e} > {RATIO:g} x {self.ref} fp32 vs f64 {eh:.2e} (ratio {r:.1f})"
                for w, ez, eh, r in self.rows if not r <= RATIO]

    def summary(self):
        w = max(self.rows, key=lambda x: x[3])
        byq = {}
        for q, ez, eh, r in self.rows:
            k = q.split(" ")[0]
            byq[k] = max(byq.get(k, 0.0), r)
        parts = ", ".join(f"{k} {v:.2f}" for k, v in byq.items())
        return (f"yardstick ratios ({self.who}/{self.ref} fp32 error vs f64, limit {RATIO:g}): "
                f"worst {w[3]:.2f} [{w[0]}]; {parts}")

    def verbose(self, name):
        if os.environ.get("ZT_HF_VERBOSE"):  # every quantity's errors and ratio
            for w, ez, eh, r in self.rows:
                print(f"#   {name} {w}: {self.who} {ez:.2e} {self.ref} fp32 {eh:.2e} ratio {r:.2f}")

    def finish(self, name, problems, msg):
        """the case's verdict: FAIL with the yardstick's problems and then the others (the first 6),
        or PASS; msg (the metrics) either way"""
        problems = self.problems() + problems
        self.verbose(name)
        if problems:
            report_fail(name, "; ".join(problems[:6]) + f" [{msg}]")
        else:
            report_pass(name, msg)


# ----------------------------------------------------------------------------------- model_dump

def shape_args(sh):
    return ["--layers", str(sh["L"]), "--heads", str(sh["H"]), "--embd", str(sh["C"]),
            "--vocab", str(sh["V"]), "--padded-vocab", str(sh["Vp"]), "--block", str(sh["maxT"]),
            "--threads", str(THREADS)]


def train_args(B, T, K, steps, hp):
    """the run and optimiser options of model_dump train / lora-train (cosine schedule)"""
    return ["--B", str(B), "--T", str(T), "--K", str(K), "--steps", str(steps), "--lr", repr(hp["lr"]),
            "--min-lr", repr(hp["min_lr"]), "--warmup", str(hp["warmup"]), "--clip", repr(hp["clip"]),
            "--wd", repr(hp["wd"]), "--beta1", repr(hp["beta1"]), "--beta2", repr(hp["beta2"]),
            "--eps", repr(hp["eps"]), "--schedule", "cosine"]


def run_dump(args):
    try:
        p = subprocess.run([BIN] + args, cwd=REPO, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"model_dump {args[0]} timed out (120 s)")
    if p.returncode != 0:
        raise RuntimeError(f"model_dump {args[0]} exited {p.returncode}: {(p.stderr or p.stdout).strip()[-500:]}")
    return p.stdout


def parse_table(out):
    """[(name, offset, numel, shape tuple, decay)], total — from a model_dump table listing"""
    ts, total = [], None
    for line in out.splitlines():
        f = line.split()
        if not f:
            continue
        if f[0] == "tensor":
            ndim = int(f[4])
            shape = (int(f[5]), int(f[6])) if ndim == 2 else (int(f[5]),)
            ts.append((f[1], int(f[2]), int(f[3]), shape, int(f[7])))
        elif f[0] == "total":
            total = int(f[1])
    if total is None:
        raise RuntimeError(f"no 'total' line in the table listing: {out.strip()[-300:]!r}")
    return ts, total


def zt_table(sh):
    """ztrain's parameter table (model_dump table): [(name, offset, numel, shape, decay)], total"""
    return parse_table(run_dump(["table"] + shape_args(sh)))


def write_tokens(path, batches):
    """batches [(tokens, targets)] as model_dump reads them: per batch the tokens, then the targets (int32)"""
    np.concatenate([np.concatenate([a.ravel(), b.ravel()]) for a, b in batches]).astype(np.int32).tofile(path)


# ----------------------------------------------------------------------------------- the HF model

def make_hf(sh, seed, dtype=None):
    """GPT2LMHeadModel (dtype, default float32) with a seeded random init; LayerNorm weights/biases
    and all biases are moved away from 1/0 so that their gradients are exercised. Other dtypes get the
    exact fp32 weights, widened."""
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
    if dtype is not None and dtype != torch.float32:
        model = model.to(dtype)
    model.eval()  # dropout is 0 anyway
    assert model.lm_head.weight.data_ptr() == model.transformer.wte.weight.data_ptr(), "lm_head not tied"
    return model


def hf_params(model):
    """ztrain name -> HF parameter (lm_head is the tied wte)"""
    return {n[len("transformer."):]: p for n, p in model.named_parameters() if n.startswith("transformer.")}


def flat_weights(model, ts, total, sh):
    """the model's weights in ztrain's table order (wte padded to Vp rows), as model_dump reads them"""
    hp = hf_params(model)
    missing = sorted(t[0] for t in ts if t[0] not in hp)
    if missing:
        raise RuntimeError(f"ztrain table tensors without an HF parameter: {missing}")
    w = np.zeros(total, dtype=np.float32)
    for name, o, numel, shape, _ in ts:
        t = hp[name].detach().to(torch.float32).cpu().numpy()
        if name == "wte.weight":
            t = np.concatenate([t, np.zeros((sh["Vp"] - sh["V"], sh["C"]), np.float32)])
        if t.size != numel:
            raise RuntimeError(f"{name}: ztrain numel {numel}, HF {t.size}")
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


# ----------------------------------------------------------------------------------- training

def lr_at(step, lr, min_lr, warmup, total, schedule="cosine"):
    """zt_lr_at (src/core/optim/optim.c), in double"""
    if step < warmup:
        return lr * (step + 1) / warmup
    if schedule == "constant" or total <= warmup + 1:
        return lr
    frac = min((step - warmup) / (total - warmup - 1), 1.0)
    if schedule == "linear":
        return lr - frac * (lr - min_lr)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * frac)) * (lr - min_lr)


def adamw_train(model, groups, batches, steps, K, hp, dtype):
    """torch.optim.AdamW over groups [(parameters, weight decay)], driven as ztrain trains: K
    micro-batches per step (each backward scaled by 1/K), clip_grad_norm_ over all the groups'
    parameters, then the step's lr_at (rounded to float for fp32). Returns rec (steps, 3) = mean loss,
    grad norm before clipping, lr"""
    opt = torch.optim.AdamW([{"params": ps, "weight_decay": wd} for ps, wd in groups],
                            lr=hp["lr"], betas=(hp["beta1"], hp["beta2"]), eps=hp["eps"])
    allp = [p for ps, _ in groups for p in ps]
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
    return np.array(rec)


# ----------------------------------------------------------------------------------- comparisons

def check_loss_logits(ys, problems, z_loss, z_logits, h_loss, h_logits, d_loss, d_logits, V, Vp):
    """a forward's loss and logits (the first V of Vp columns; the padded ones must be exactly 0)
    against the fp32 (h_) and f64 (d_) reference: yardstick rows, problems; returns loss_rel, log_rel,
    log_abs (vs fp32)"""
    ys.add("loss", z_loss, h_loss, d_loss)
    ys.add("logits", z_logits[..., :V], h_logits, d_logits)
    loss_rel = abs(z_loss - h_loss) / abs(h_loss)
    if not loss_rel <= TOL:
        problems.append(f"loss {z_loss:.8g} vs {ys.ref} {h_loss:.8g} (rel {loss_rel:.2e})")
    log_rel, log_abs = rel_err(z_logits[..., :V], h_logits), abs_err(z_logits[..., :V], h_logits)
    if not log_rel <= TOL:
        problems.append(f"logits rel {log_rel:.2e} abs {log_abs:.2e}")
    pad_log = float(np.max(np.abs(z_logits[..., V:]))) if Vp > V else 0.0
    if pad_log != 0.0:
        problems.append(f"padded logit columns not 0 (max |.| {pad_log:.3g})")
    return loss_rel, log_rel, log_abs


def check_train_records(ys, problems, zrec, hrec, drec, hp, steps, ref, lr_tol):
    """a training run's per-step records, the candidate's zrec (loss, grad norm, clip factor, lr)
    against the fp32 (hrec) and f64 (drec) reference's (loss, grad norm, lr): yardstick rows for the
    losses and grad norms, problems (ref names the reference in them); the lr against lr_at within
    lr_tol. Returns loss_rel, norm_rel (per step, vs fp32), loss_rel64, ref_rel64 (per step, the
    candidate's and the fp32 reference's loss vs f64), lr_rel"""
    z_loss, z_norm, z_lr = zrec[:, 0], zrec[:, 1], zrec[:, 3]
    ys.add(f"losses ({steps} steps)", z_loss, hrec[:, 0], drec[:, 0])
    ys.add(f"grad_norms ({steps} steps)", z_norm, hrec[:, 1], drec[:, 1])
    loss_rel = np.abs(z_loss - hrec[:, 0]) / np.abs(hrec[:, 0])
    norm_rel = np.abs(z_norm - hrec[:, 1]) / np.abs(hrec[:, 1])
    loss_rel64 = np.abs(z_loss - drec[:, 0]) / np.abs(drec[:, 0])
    ref_rel64 = np.abs(hrec[:, 0] - drec[:, 0]) / np.abs(drec[:, 0])
    lr_py = np.array([lr_at(s, hp["lr"], hp["min_lr"], hp["warmup"], steps) for s in range(steps)])
    lr_rel = float(np.max(np.abs(z_lr - lr_py) / lr_py))
    if not np.all(loss_rel <= TOL):
        s = int(np.argmax(loss_rel))
        problems.append(f"loss step {s + 1}: {z_loss[s]:.8g} vs {ref} {hrec[s, 0]:.8g} (rel {loss_rel[s]:.2e})")
    if not np.all(norm_rel <= TOL):
        s = int(np.argmax(norm_rel))
        problems.append(f"grad norm step {s + 1}: {z_norm[s]:.8g} vs {ref} {hrec[s, 1]:.8g} (rel {norm_rel[s]:.2e})")
    if not lr_rel <= lr_tol:
        problems.append(f"lr schedule differs from zt_lr_at's formula (rel {lr_rel:.2e})")
    return loss_rel, norm_rel, loss_rel64, ref_rel64, lr_rel


def check_clip_steps(problems, zrec, zc, hc, clip, who, ref):
    """the candidate (who; zrec as in check_train_records) clipped on the same steps as the reference
    (zc, hc: per step, clipped or not), by the factor min(1, clip / (norm + 1e-6))"""
    if not np.array_equal(zc, hc):
        problems.append(f"clipped steps differ: {who} {np.nonzero(zc)[0].tolist()}, {ref} {np.nonzero(hc)[0].tolist()}")
    exp_clip = np.minimum(1.0, clip / (zrec[:, 1] + 1e-6))
    if not np.allclose(zrec[:, 2], exp_clip, rtol=1e-6, atol=0):
        problems.append("clip factor is not min(1, clip / (norm + 1e-6))")


def check_table_map(ts, total, want, n_hf):
    """ztrain's table (model_dump table: ts, total) against want {name: array in ztrain's layout, from the HF
    model}: every tensor mapped once, in order, with its shape; the total equal to n_hf (HF's parameters with the
    vocabulary padding); decay on 2-D tensors only. Returns an error line or None"""
    names = [t[0] for t in ts]
    if sorted(names) != sorted(want):
        return f"ztrain tensors {sorted(set(names) - set(want))} not mapped, HF-derived {sorted(set(want) - set(names))} missing"
    if total != n_hf:
        return f"table total {total} != HF parameters (with the vocabulary padding) {n_hf}"
    off = 0
    for name, o, numel, shape, decay in ts:
        if tuple(want[name].shape) != shape or o != off:
            return f"{name}: ztrain shape {shape} at {o}, HF-derived {want[name].shape} at {off}"
        if decay != (len(shape) == 2):
            return f"{name}: decay flag {decay} for a {len(shape)}-D tensor"
        off += numel
    return None


def compare_tensors(ys, problems, ts, z_flat, ref32, ref64, V, Vp, vocab_names, what):
    """every tensor of ztrain's flat z_flat (table ts) against the fp32 (ref32) and f64 (ref64) references
    {name: array}: yardstick rows and the TOL check vs fp32, named "<what> <tensor>"; the tensors in vocab_names
    compared on their first V rows, and (what == "grad") their padded rows must be exactly 0. Returns the worst
    (name, rel vs fp32)"""
    worst = ("", 0.0)
    for tname, o, numel, shape, _ in ts:
        z = z_flat[o:o + numel].reshape(shape)
        h, d = ref32[tname], ref64[tname]
        if tname in vocab_names:
            if what == "grad" and Vp > V and np.any(z[V:] != 0):
                problems.append(f"{tname} padded rows got a gradient")
            z, h, d = z[:V], h[:V], d[:V]
        ys.add(f"{what} {tname}", z, h, d)
        r = rel_err(z, h)
        if not r <= TOL:
            problems.append(f"{what} {tname}: rel {r:.2e}")
        if r >= worst[1]:
            worst = (tname, r)
    return worst


def read_fwdbwd(opath, B, T, Vp, total):
    """model_dump fwdbwd's output: (loss, logits (B, T, Vp), flat gradients), or an error line"""
    out = np.fromfile(opath, dtype=np.float32)
    nlog = B * T * Vp
    if out.size != 1 + nlog + total:
        return f"model_dump wrote {out.size} floats, expected {1 + nlog + total}"
    return float(out[0]), out[1:1 + nlog].reshape(B, T, Vp), out[1 + nlog:]


def read_train(opath, steps, total):
    """model_dump train's output: (records (steps, 4): loss, grad norm, clip factor, lr; final flat parameters), or
    an error line"""
    raw = open(opath, "rb").read()
    if len(raw) != steps * 32 + total * 4:
        return f"model_dump wrote {len(raw)} bytes, expected {steps * 32 + total * 4}"
    return (np.frombuffer(raw[:steps * 32], dtype=np.float64).reshape(steps, 4),
            np.frombuffer(raw[steps * 32:], dtype=np.float32))


def check_train_run(ys, problems, zrec, hrec, drec, hp, steps):
    """a 20-step run against torch: check_train_records (lr within 1e-12), clipping triggered and on the same steps as
    torch's, the loss decreasing. Returns loss_rel, norm_rel, loss_rel64, ref_rel64 (as check_train_records) and zc,
    the steps ztrain clipped"""
    loss_rel, norm_rel, loss64, hf64, _ = check_train_records(ys, problems, zrec, hrec, drec, hp, steps, "torch", 1e-12)
    zc, hc = zrec[:, 2] < 1.0, hrec[:, 1] > hp["clip"]
    if not zc.any():
        problems.append(f"clipping never triggered (grad norms {zrec[:, 1].min():.3g}..{zrec[:, 1].max():.3g})")
    check_clip_steps(problems, zrec, zc, hc, hp["clip"], "ztrain", "torch")
    if zrec[-1, 0] >= zrec[0, 0]:
        problems.append(f"loss did not decrease ({zrec[0, 0]:.4f} -> {zrec[-1, 0]:.4f})")
    return loss_rel, norm_rel, loss64, hf64, zc
