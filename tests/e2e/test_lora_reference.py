#!/usr/bin/env python3
"""test_lora_reference.py — ztrain's LoRA fine-tuning against Hugging Face PEFT on GPT2LMHeadModel.

Run from the repository root with the reference venv (scripts/setup-venv.sh):
    .venv-ref/bin/python tests/e2e/test_lora_reference.py               ztrain (build/tests/model_dump) vs PEFT
    .venv-ref/bin/python tests/e2e/test_lora_reference.py --self-check  the PEFT reference alone, against a
                                                                    hand-written torch LoRA (no model_dump)
Needs build/tests/model_dump with its lora-* modes (make build-all; ZT_MODEL_DUMP=PATH runs another
binary with the same interface). Prints one line per case,
"PASS name (metrics)" or "FAIL name: reason", and exits non-zero if any case failed. A missing
torch / transformers / peft, or a model_dump without the LoRA modes, is a FAIL.

The reference: transformers' GPT2LMHeadModel with the base weights of tests/e2e/test_hf_reference.py
(make_hf), wrapped by peft.get_peft_model with LoraConfig(r, lora_alpha, target_modules=<a regex of
full module names>, lora_dropout=0, fan_in_fan_out=True, use_rslora, bias="none"); the base is frozen
(PEFT sets requires_grad=False on it) and the adapters are set from the same random values that
ztrain is given. Targets: qkv = attn.c_attn, proj = attn.c_proj, fc = mlp.c_fc, fcproj = mlp.c_proj
(the regex keeps "proj" from also matching mlp.c_proj, as PEFT's bare "c_proj" would), all = the four.
For a targeted Conv1D with weight W (in, out):  y = x W + b + s (x A^T) B^T,  A (r, in), B (out, r),
s = alpha / r, or alpha / sqrt(r) with rslora.

What is compared (fp32 on both sides, base weights and adapters passed through files):
  table_*   `model_dump lora-table` against PEFT's trainable parameters: same names
            (h.<l>.<module>.lora_A/lora_B), shapes and order (per layer c_attn, attn.c_proj, mlp.c_fc,
            mlp.c_proj, A then B, only the targeted ones), contiguous offsets, decay 1 everywhere.
  fwdbwd_*  one forward + backward: mean loss, logits (first V of Vp columns; the padded columns must
            be exactly 0) and the gradient of EVERY adapter tensor; the base gets no gradient.
  fwdbwd_zeroB_*  adapters with B = 0 (PEFT's own init): the loss and logits equal the base model's
            (ztrain's `model_dump fwdbwd` on the same weights, rel <= 1e-6, bitwise expected and
            reported; PEFT's equal HF's bitwise), every lora_A gradient is exactly 0, the lora_B gradients are compared as above.
  train_*   AdamW steps on the adapters only, K=2 micro-batches per step (each backward scaled by 1/K),
            warmup + cosine decay (zt_lr_at), clipping by the global norm of the adapter gradients
            that triggers on some steps (asserted), weight decay on every adapter tensor; against
            torch.optim.AdamW + clip_grad_norm_ over PEFT's adapter parameters, driven exactly as
            test_hf_reference.py's torch_train: per-step losses, grad norms, learning rates and the
            final adapters. The reference's base weights must be bitwise unchanged afterwards. The
            zeroB train case starts from B = 0: its step-0 loss must be the base model's.

Metric and tolerances (as tests/e2e/test_hf_reference.py): for each quantity the norm-wise relative error
against a PEFT float64 run on the same (fp32) weights, adapters and batches. ztrain must satisfy
    rel(ztrain, f64) <= RATIO * max(rel(PEFT fp32, f64), FLOOR)
per quantity (the loss, the logits, each adapter gradient; in train_* the per-step losses, the grad
norms, each final adapter tensor), RATIO = 3, FLOOR = 2^-24; and, coarsely, rel(ztrain, PEFT fp32)
<= 1e-4 per quantity.

--self-check puts the hand-written torch LoRA (y = x W + b + s (x A^T) B^T patched into plain GPT-2's
Conv1D layers, with its own adapter parameters and AdamW) where ztrain stands, through the same
comparisons (table = the layout above), and also compares it with PEFT directly: per LoRA module on
random inputs, and over every case's loss / logits / gradients / training run, in float64 (must agree
to 1e-10) and in float32 (to 1e-5; ~1e-7 expected).
"""
import math
import os
import re
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "helpers"))
import hf_ref_common as common  # noqa: E402
from hf_ref_common import (REPO, TOL, Yardstick, abs_err, adamw_train, captured_reports,  # noqa: E402
                           check_clip_steps, check_loss_logits, check_train_records, flat_weights, hf_loss,
                           make_batches, make_hf, parse_table, rel_err, report_fail, report_pass, run_dump,
                           shape_args, train_args, write_tokens, zt_table)

common.BIN = os.environ.get("ZT_MODEL_DUMP") or common.BIN
BASE_TOL = 1e-6   # B = 0: ztrain's LoRA loss / logits vs its own base model's (bitwise expected; reported)
SELF_TOL64 = 1e-10  # --self-check: hand-written LoRA vs PEFT, float64
SELF_TOL32 = 1e-5   # --self-check: hand-written LoRA vs PEFT, float32

common.require_imports("lora_reference_imports", "numpy/torch/transformers/peft",
                       "create the venv with scripts/setup-venv.sh: transformers 4.44.2, peft 0.12.0, Debian's torch, "
                       "numpy", extra=("peft",))
import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
import peft  # noqa: E402
from peft import LoraConfig, get_peft_model  # noqa: E402


# ----------------------------------------------------------------------------------- LoRA layout

TARGETS = (("qkv", "attn.c_attn"), ("proj", "attn.c_proj"), ("fc", "mlp.c_fc"), ("fcproj", "mlp.c_proj"))


def target_modules(lo):
    """the targeted HF modules (relative to a block), in ztrain's table order"""
    keys = [k for k, _ in TARGETS] if lo["targets"] == "all" else lo["targets"].split(",")
    bad = [k for k in keys if k not in dict(TARGETS)]
    if bad or not keys:
        raise ValueError(f"bad LoRA targets {lo['targets']!r}")
    return [m for k, m in TARGETS if k in keys]


def module_dims(sh, mod):
    C = sh["C"]
    return {"attn.c_attn": (C, 3 * C), "attn.c_proj": (C, C), "mlp.c_fc": (C, 4 * C), "mlp.c_proj": (4 * C, C)}[mod]


def lora_scaling(lo):
    return lo["alpha"] / math.sqrt(lo["r"]) if lo["rslora"] else lo["alpha"] / lo["r"]


def lora_args(lo):
    return ["--lora-rank", str(lo["r"]), "--lora-alpha", f"{lo['alpha']:g}", "--lora-rslora", str(int(lo["rslora"])),
            "--lora-targets", lo["targets"]]


def expected_lora_table(sh, lo):
    """the adapter table as specified: [(name, offset, numel, shape, decay)], total"""
    rows, off, r = [], 0, lo["r"]
    for l in range(sh["L"]):
        for mod in target_modules(lo):
            fin, fout = module_dims(sh, mod)
            for ab, shape in (("A", (r, fin)), ("B", (fout, r))):
                n = math.prod(shape)
                rows.append((f"h.{l}.{mod}.lora_{ab}", off, n, shape, 1))
                off += n
    return rows, off


def zt_lora_table(sh, lo):
    return parse_table(run_dump(["lora-table"] + shape_args(sh) + lora_args(lo)))


def make_adapters(sh, lo, seed, zero_b=False):
    """random adapters (float32, table order): A ~ 0.1 N(0,1), B ~ 0.05 N(0,1) (or 0), so that the
    LoRA term is some 10-20% of the base layer's output and every adapter gets a gradient"""
    tab, total = expected_lora_table(sh, lo)
    rng = np.random.default_rng(seed)
    flat = np.zeros(total, dtype=np.float32)
    for name, o, n, shape, _ in tab:
        if name.endswith("lora_A"):
            flat[o:o + n] = 0.1 * rng.standard_normal(n)
        elif not zero_b:
            flat[o:o + n] = 0.05 * rng.standard_normal(n)
    return flat


class LoraRef:
    """a GPT-2 with LoRA adapters: .model (called like GPT2LMHeadModel), .adapters [(ztrain name,
    parameter)] in table order, .base [(name, frozen parameter)], .impl"""

    def snapshot_base(self):
        return {n: p.detach().clone() for n, p in self.base}

    def base_changed(self, snap):
        return [n for n, p in self.base if not torch.equal(p.detach(), snap[n])]

    def set_adapters(self, flat):
        tab, total = expected_lora_table(self.sh, self.lo)
        assert flat.size == total
        with torch.no_grad():
            for (name, o, n, shape, _), (pn, p) in zip(tab, self.adapters):
                assert name == pn and tuple(p.shape) == shape, (name, pn, tuple(p.shape), shape)
                p.copy_(torch.from_numpy(np.ascontiguousarray(flat[o:o + n]).reshape(shape)).to(p.dtype))


def peft_regex(lo):
    return r"transformer\.h\.\d+\.(?:" + "|".join(re.escape(m) for m in target_modules(lo)) + r")"


PEFT_NAME = re.compile(r"^base_model\.model\.transformer\.(h\.\d+\.(?:attn|mlp)\.c_\w+)\.(lora_[AB])\.default\.weight$")


class PeftLora(LoraRef):
    """the reference: peft.get_peft_model on make_hf's model"""

    def __init__(self, sh, lo, seed, flat, dtype):
        self.sh, self.lo, self.impl = sh, lo, "peft"
        base = make_hf(sh, seed, dtype)
        cfg = LoraConfig(r=lo["r"], lora_alpha=lo["alpha"], target_modules=peft_regex(lo), lora_dropout=0.0,
                         fan_in_fan_out=True, use_rslora=bool(lo["rslora"]), bias="none")
        self.model = get_peft_model(base, cfg)
        self.model.eval()
        self.adapters, self.base, bad = [], [], []
        for n, p in self.model.named_parameters():
            if p.requires_grad:
                m = PEFT_NAME.match(n)
                if not m:
                    bad.append(n)
                else:
                    self.adapters.append((f"{m.group(1)}.{m.group(2)}", p))
            else:
                self.base.append((n, p))
        if bad:
            raise RuntimeError(f"PEFT made trainable parameters that are not LoRA adapters: {bad[:4]}")
        if any(p.dtype != dtype for _, p in self.adapters):
            raise RuntimeError(f"PEFT adapters are not {dtype}")
        # the modules PEFT wrapped, and their scaling
        self.wrapped = {}
        for n, m in self.model.named_modules():
            if isinstance(m, peft.tuners.lora.LoraLayer):
                self.wrapped[n[len("base_model.model.transformer."):]] = m
        want = [f"h.{l}.{mod}" for l in range(sh["L"]) for mod in target_modules(lo)]
        if sorted(self.wrapped) != sorted(want):
            raise RuntimeError(f"PEFT wrapped {sorted(self.wrapped)}, expected {want}")
        for n, m in self.wrapped.items():
            if abs(m.scaling["default"] - lora_scaling(lo)) > 1e-15 or not m.fan_in_fan_out:
                raise RuntimeError(f"{n}: PEFT scaling {m.scaling['default']} fan_in_fan_out {m.fan_in_fan_out}, "
                                   f"expected {lora_scaling(lo)} / True")
        self.set_adapters(flat)


class ManualLora(LoraRef):
    """--self-check's second implementation: plain GPT-2, base frozen, each targeted Conv1D's forward
    replaced by a hand-written LoRA layer with its own A, B parameters:
      form "split":  y = x W + b + s (x A^T) B^T   (PEFT's order of operations: agrees bitwise)
      form "merged": y = x (W + s A^T B^T) + b     (the same maths, rounded differently in fp32)
    mutate (negative controls for --self-check): "scale" uses s (1 + 1e-4); "module" puts the
    adapters named attn.c_proj on mlp.c_proj"""

    def __init__(self, sh, lo, seed, flat, dtype, form="split", mutate=None):
        self.sh, self.lo, self.impl = sh, lo, f"manual-{form}"
        self.model = make_hf(sh, seed, dtype)
        self.base = list(self.model.named_parameters())
        for _, p in self.base:
            p.requires_grad_(False)
        s = lora_scaling(lo) * (1 + 1e-4 if mutate == "scale" else 1)
        tab, _ = expected_lora_table(sh, lo)
        params = {name: torch.nn.Parameter(torch.zeros(shape, dtype=dtype)) for name, _, _, shape, _ in tab}
        for l in range(sh["L"]):
            for mod in target_modules(lo):
                where = "mlp.c_proj" if mutate == "module" and mod == "attn.c_proj" else mod
                conv = self.model.transformer.get_submodule(f"h.{l}.{where}")
                A, B = params[f"h.{l}.{mod}.lora_A"], params[f"h.{l}.{mod}.lora_B"]
                if mutate == "module":  # shapes for mlp.c_proj: A (r, 4C) from A (r, C) tiled
                    A4 = lambda A=A: A.repeat(1, 4)  # noqa: E731
                else:
                    A4 = lambda A=A: A  # noqa: E731
                if form == "split":
                    def forward(x, W=conv.weight, b=conv.bias, A4=A4, B=B):
                        return x @ W + b + s * ((x @ A4().t()) @ B.t())
                else:
                    def forward(x, W=conv.weight, b=conv.bias, A4=A4, B=B):
                        return x @ (W + s * (A4().t() @ B.t())) + b
                conv.forward = forward
        self.adapters = [(name, params[name]) for name, _, _, _, _ in tab]
        self.set_adapters(flat)


def check_lora_table(ts, total, sh, lo, ref):
    """ztrain's (or the spec's) adapter table against PEFT's trainable parameters: None or the problem"""
    names = [t[0] for t in ts]
    pnames = [n for n, _ in ref.adapters]
    if names != pnames:
        missing = [n for n in pnames if n not in names]
        extra = [n for n in names if n not in pnames]
        if missing or extra:
            return f"PEFT adapters without a ztrain tensor {missing[:6]}, ztrain tensors not in PEFT {extra[:6]}"
        return f"order differs from PEFT's: ztrain {names[:6]}..., PEFT {pnames[:6]}..."
    exp, _ = expected_lora_table(sh, lo)
    off = 0
    for (name, o, numel, shape, decay), (_, p), e in zip(ts, ref.adapters, exp):
        if shape != tuple(p.shape) or numel != math.prod(shape):
            return f"{name}: ztrain shape {shape} numel {numel}, PEFT {tuple(p.shape)}"
        if shape != e[3]:
            return f"{name}: shape {shape}, the layout says {e[3]}"
        if o != off:
            return f"{name}: offset {o}, expected {off} (not contiguous)"
        if decay != 1:
            return f"{name}: decay flag {decay}, expected 1"
        off += numel
    if off != total:
        return f"total {total} != sum of numel {off}"
    return None


# ----------------------------------------------------------------------------------- the reference runs

def ref_fwdbwd(ref, tok, tgt):
    """loss, logits (B, T, V) f64, {name: grad f64}; the base must get no gradient"""
    ref.model.zero_grad(set_to_none=True)
    loss, logits = hf_loss(ref.model, tok, tgt)
    loss.backward()
    based = [n for n, p in ref.base if p.grad is not None]
    if based:
        raise RuntimeError(f"{ref.impl}: base parameters got a gradient: {based[:4]}")
    grads = {n: p.grad.detach().to(torch.float64).numpy().copy() for n, p in ref.adapters}
    return float(loss), logits.detach().to(torch.float64).numpy(), grads


def ref_train(ref, batches, steps, K, hp, dtype):
    """adamw_train (as tests/e2e/test_hf_reference.py's torch_train) over the adapters only, one group,
    weight decay on all: rec (S, 3) = loss, grad norm, lr; {name: final adapter f64}"""
    rec = adamw_train(ref.model, [([p for _, p in ref.adapters], hp["wd"])], batches, steps, K, hp, dtype)
    return rec, {n: p.detach().to(torch.float64).numpy().copy() for n, p in ref.adapters}


def base_loss_hf(sh, seed, batches):
    """the plain (no LoRA) HF fp32 model's mean loss over batches"""
    m = make_hf(sh, seed)
    with torch.no_grad():
        return [float(hf_loss(m, tok, tgt)[0]) for tok, tgt in batches]


# ----------------------------------------------------------------------------------- candidates
# A candidate is what stands where ztrain stands: model_dump (the test) or ManualLora (--self-check).
# Each returns ztrain's output format.

class ZtrainCandidate:
    who = "ztrain"
    lr_tol = 1e-12  # model_dump reports zt_lr_at's double

    def __init__(self, tmp):
        self.tmp = tmp

    def table(self, sh, lo):
        return zt_lora_table(sh, lo)

    def _files(self, tag, sh, weights_seed, flat, batches):
        model = make_hf(sh, weights_seed)
        ts, total = zt_table(sh)
        wpath, apath, tpath, opath = (os.path.join(self.tmp, f"{tag}.{x}") for x in ("w", "a", "tok", "out"))
        flat_weights(model, ts, total, sh).tofile(wpath)
        flat.astype(np.float32).tofile(apath)
        write_tokens(tpath, batches)
        return wpath, apath, tpath, opath

    def fwdbwd(self, tag, sh, lo, seed, flat, tok, tgt):
        """loss, logits (B, T, Vp), adapter grads (flat, table order)"""
        B, T = tok.shape
        wpath, apath, tpath, opath = self._files(tag, sh, seed, flat, [(tok, tgt)])
        run_dump(["lora-fwdbwd"] + shape_args(sh) + lora_args(lo) + [
            "--B", str(B), "--T", str(T), "--weights", wpath, "--adapters", apath, "--tokens", tpath, "--out", opath])
        out = np.fromfile(opath, dtype=np.float32)
        nlog = B * T * sh["Vp"]
        if out.size != 1 + nlog + flat.size:
            raise RuntimeError(f"model_dump lora-fwdbwd wrote {out.size} floats, expected {1 + nlog + flat.size}")
        return float(out[0]), out[1:1 + nlog].reshape(B, T, sh["Vp"]), out[1 + nlog:]

    def base_fwdbwd(self, tag, sh, seed, tok, tgt):
        """the base model without adapters (model_dump fwdbwd): loss, logits (B, T, Vp)"""
        B, T = tok.shape
        wpath, _, tpath, opath = self._files(tag + "_base", sh, seed, np.zeros(0, np.float32), [(tok, tgt)])
        run_dump(["fwdbwd"] + shape_args(sh) + ["--B", str(B), "--T", str(T), "--weights", wpath,
                                                "--tokens", tpath, "--out", opath])
        out = np.fromfile(opath, dtype=np.float32)
        nlog = B * T * sh["Vp"]
        return float(out[0]), out[1:1 + nlog].reshape(B, T, sh["Vp"])

    def train(self, tag, sh, lo, seed, flat, batches, B, T, K, steps, hp):
        """rec (S, 4) = loss, grad norm, clip factor, lr; final adapters (flat)"""
        wpath, apath, tpath, opath = self._files(tag, sh, seed, flat, batches)
        run_dump(["lora-train"] + shape_args(sh) + lora_args(lo) + train_args(B, T, K, steps, hp) +
                 ["--weights", wpath, "--adapters", apath, "--tokens", tpath, "--out", opath])
        raw = open(opath, "rb").read()
        if len(raw) != steps * 32 + flat.size * 4:
            raise RuntimeError(f"model_dump lora-train wrote {len(raw)} bytes, expected {steps * 32 + flat.size * 4}")
        return (np.frombuffer(raw[:steps * 32], dtype=np.float64).reshape(steps, 4),
                np.frombuffer(raw[steps * 32:], dtype=np.float32))


class ManualCandidate:
    """the hand-written fp32 LoRA (merged form: rounds differently from PEFT) in ztrain's place"""
    lr_tol = 1e-6   # reports the float lr it used

    def __init__(self, form="merged", mutate=None, no_wd=False):
        self.form, self.mutate, self.no_wd = form, mutate, no_wd
        self.who = f"manual-{form}"

    def table(self, sh, lo):
        return expected_lora_table(sh, lo)

    def fwdbwd(self, tag, sh, lo, seed, flat, tok, tgt):
        ref = ManualLora(sh, lo, seed, flat, torch.float32, self.form, self.mutate)
        loss, logits, grads = ref_fwdbwd(ref, tok, tgt)
        B, T, V = logits.shape
        lp = np.zeros((B, T, sh["Vp"]), np.float32)
        lp[..., :V] = logits
        return loss, lp, np.concatenate([grads[n].ravel() for n, _ in ref.adapters]).astype(np.float32)

    def base_fwdbwd(self, tag, sh, seed, tok, tgt):
        m = make_hf(sh, seed)
        with torch.no_grad():
            loss, logits = hf_loss(m, tok, tgt)
        B, T, V = logits.shape
        lp = np.zeros((B, T, sh["Vp"]), np.float32)
        lp[..., :V] = logits.numpy()
        return float(loss), lp

    def train(self, tag, sh, lo, seed, flat, batches, B, T, K, steps, hp):
        ref = ManualLora(sh, lo, seed, flat, torch.float32, self.form, self.mutate)
        rec, fin = ref_train(ref, batches, steps, K, dict(hp, wd=0.0) if self.no_wd else hp, torch.float32)
        clip = np.minimum(1.0, hp["clip"] / (rec[:, 1] + 1e-6))
        z = np.stack([rec[:, 0], rec[:, 1], clip, rec[:, 2]], axis=1)
        return z, np.concatenate([fin[n].ravel() for n, _ in ref.adapters]).astype(np.float32)


# ----------------------------------------------------------------------------------- cases

def case_table(cand, tag, sh, lo, seed):
    """the adapter table against PEFT's: returns (ts, total) or None (after a FAIL)"""
    ref = PeftLora(sh, lo, seed, make_adapters(sh, lo, seed + 3), torch.float32)
    ts, total = cand.table(sh, lo)
    err = check_lora_table(ts, total, sh, lo, ref)
    if err:
        report_fail(f"table_{tag}", err)
        return None
    report_pass(f"table_{tag}", f"targets {lo['targets']} r={lo['r']}: {len(ts)} adapter tensors, {total} elements, "
                                f"same names/shapes/order as PEFT's trainable parameters")
    return ts, total


def case_fwdbwd(cand, tag, sh, lo, B, T, seed, zero_b=False):
    name = f"fwdbwd_{tag}"
    tab = case_table(cand, tag, sh, lo, seed)
    if tab is None:
        return
    ts, total = tab
    (tok, tgt), = make_batches(1, B, T, sh["V"], seed + 2)
    flat = make_adapters(sh, lo, seed + 3, zero_b=zero_b)
    z_loss, z_logits, z_grad = cand.fwdbwd(tag, sh, lo, seed, flat, tok, tgt)

    # PEFT fp32 and fp64 on the same (fp32) base weights and adapters
    ref = {}
    for dt in (torch.float32, torch.float64):
        r = PeftLora(sh, lo, seed, flat, dt)
        snap = r.snapshot_base()
        ref[dt] = ref_fwdbwd(r, tok, tgt)
        if r.base_changed(snap):
            raise RuntimeError("PEFT's forward/backward changed base weights")

    V, Vp = sh["V"], sh["Vp"]
    problems = []
    h_loss, h_logits, h_grads = ref[torch.float32]
    d_loss, d_logits, d_grads = ref[torch.float64]
    ys = Yardstick(cand.who, "PEFT")
    loss_rel, log_rel, log_abs = check_loss_logits(ys, problems, z_loss, z_logits, h_loss, h_logits,
                                                   d_loss, d_logits, V, Vp)
    worst, worst64, hf64, max_abs, a_zero = ("", 0.0), 0.0, 0.0, 0.0, 0.0
    for tname, o, numel, shape, _ in ts:
        zg = z_grad[o:o + numel].reshape(shape)
        hg, dg = h_grads[tname], d_grads[tname]
        if zero_b and tname.endswith("lora_A"):
            # B = 0: dL/dA = s B^T (dL/dy)^T x = 0 exactly, on every side
            a_zero = max(a_zero, float(np.max(np.abs(zg))))
            if np.any(hg != 0) or np.any(dg != 0):
                problems.append(f"{tname}: PEFT's lora_A gradient is not exactly 0 with B = 0")
            continue
        if not np.linalg.norm(dg) > 0:
            problems.append(f"{tname}: the reference gradient is 0 (the case does not exercise it)")
        ys.add(f"grad {tname}", zg, hg, dg)
        r, a = rel_err(zg, hg), abs_err(zg, hg)
        worst64 = max(worst64, rel_err(zg, dg))
        hf64 = max(hf64, rel_err(hg, dg))
        max_abs = max(max_abs, a)
        if not r <= TOL:
            problems.append(f"grad {tname}: rel {r:.2e} abs {a:.2e} (||PEFT|| {np.linalg.norm(hg):.3g})")
        if r >= worst[1]:
            worst = (tname, r)
    extra = ""
    if zero_b:
        if a_zero != 0.0:
            problems.append(f"lora_A gradients not exactly 0 with B = 0 (max |.| {a_zero:.3g})")
        # the base model's loss and logits
        hb_loss = base_loss_hf(sh, seed, [(tok, tgt)])[0]
        if h_loss != hb_loss:
            problems.append(f"PEFT with B = 0: loss {h_loss!r} != the HF base model's {hb_loss!r}")
        b_loss, b_logits = cand.base_fwdbwd(tag, sh, seed, tok, tgt)
        bl_rel = abs(z_loss - b_loss) / abs(b_loss)
        bg_rel = rel_err(z_logits, b_logits)
        if not (bl_rel <= BASE_TOL and bg_rel <= BASE_TOL):
            problems.append(f"B = 0 but loss {z_loss!r} vs the base model's {b_loss!r} (rel {bl_rel:.2e}), "
                            f"logits rel {bg_rel:.2e} (limit {BASE_TOL:g})")
        bitwise = z_loss == b_loss and np.array_equal(z_logits, b_logits)
        extra = (f"; B = 0: loss = base model's ({'bitwise' if bitwise else f'rel {bl_rel:.1e}'}; PEFT = HF base "
                 f"bitwise), lora_A grads exactly 0")
    msg = (f"{ys.summary()}; loss {z_loss:.6f} rel {loss_rel:.1e}; logits rel {log_rel:.1e} abs {log_abs:.1e}; "
           f"adapter grads ({len(ts)} tensors) worst rel {worst[1]:.1e} [{worst[0]}], max abs {max_abs:.1e}; "
           f"vs f64: {cand.who} grads worst rel {worst64:.1e}, PEFT fp32 grads worst rel {hf64:.1e}{extra}")
    ys.finish(name, problems, msg)


def case_train(cand, tag, sh, lo, B, T, K, steps, hp, seed, zero_b=False):
    name = f"train_{tag}"
    nb = steps * K  # a different micro-batch every micro-step
    batches = make_batches(nb, B, T, sh["V"], seed + 2)
    flat = make_adapters(sh, lo, seed + 3, zero_b=zero_b)
    ref32 = PeftLora(sh, lo, seed, flat, torch.float32)
    ts, total = cand.table(sh, lo)
    err = check_lora_table(ts, total, sh, lo, ref32)
    if err:
        report_fail(name, "table: " + err)
        return
    zrec, zad = cand.train(tag, sh, lo, seed, flat, batches, B, T, K, steps, hp)

    ref64 = PeftLora(sh, lo, seed, flat, torch.float64)
    snaps = (ref32.snapshot_base(), ref64.snapshot_base())
    hrec, hpar = ref_train(ref32, batches, steps, K, hp, torch.float32)
    drec, dpar = ref_train(ref64, batches, steps, K, hp, torch.float64)

    problems = []
    for r, snap in zip((ref32, ref64), snaps):
        ch = r.base_changed(snap)
        if ch:
            problems.append(f"PEFT training changed base weights: {ch[:3]}")
    z_loss, z_norm = zrec[:, 0], zrec[:, 1]
    ys = Yardstick(cand.who, "PEFT")
    loss_rel, norm_rel, loss_rel64, hf_rel64, lr_rel = check_train_records(ys, problems, zrec, hrec, drec, hp, steps,
                                                                           "PEFT", cand.lr_tol)
    zc = zrec[:, 2] < 1.0
    hc = hrec[:, 1] > hp["clip"]
    n_clip = int(zc.sum())
    if n_clip == 0 or not hc.any():
        problems.append(f"clipping never triggered (grad norms {z_norm.min():.3g}..{z_norm.max():.3g}, clip {hp['clip']})")
    if hc.all():
        problems.append(f"PEFT clipped on every step (grad norms {hrec[:, 1].min():.3g}.., clip {hp['clip']}): "
                        "the case does not exercise unclipped steps")
    margin = float(np.min(np.abs(drec[:, 1] - hp["clip"]) / hp["clip"]))
    if not margin > 1e-3:  # a grad norm at the threshold would make the clipped steps a coin flip
        problems.append(f"a grad norm is within {margin:.1e} of the clip threshold {hp['clip']}: retune the case")
    check_clip_steps(problems, zrec, zc, hc, hp["clip"], cand.who, "PEFT")
    if z_loss[-1] >= z_loss[0] or hrec[-1, 0] >= hrec[0, 0]:
        problems.append(f"loss did not decrease ({cand.who} {z_loss[0]:.4f} -> {z_loss[-1]:.4f}, "
                        f"PEFT {hrec[0, 0]:.4f} -> {hrec[-1, 0]:.4f})")
    extra = ""
    if zero_b:  # step 0 runs the base model
        hb_acc = sum(base_loss_hf(sh, seed, batches[:K])) / K  # as ref_train accumulates it
        hb = hb_acc
        if hrec[0, 0] != hb_acc:
            problems.append(f"PEFT step 0 with B = 0: loss {hrec[0, 0]!r} != the HF base model's {hb_acc!r}")
        b_rel = abs(z_loss[0] - hb) / abs(hb)
        if not b_rel <= TOL:
            problems.append(f"step 0 with B = 0: loss {z_loss[0]:.8g} vs the HF base model's {hb:.8g} (rel {b_rel:.2e})")
        extra = f"; B = 0 at start: step-0 loss = the base model's (rel {b_rel:.1e}; PEFT's bitwise)"
    # final adapters, per tensor
    pworst, pworst_abs, pworst64 = ("", 0.0), 0.0, 0.0
    for tname, o, numel, shape, _ in ts:
        zp = zad[o:o + numel].reshape(shape)
        hq, dq = hpar[tname], dpar[tname]
        ys.add(f"final {tname}", zp, hq, dq)
        r = rel_err(zp, hq)
        pworst_abs = max(pworst_abs, abs_err(zp, hq))
        pworst64 = max(pworst64, rel_err(zp, dq))
        if r >= pworst[1]:
            pworst = (tname, r)
        if not r <= TOL:
            problems.append(f"final {tname}: rel {r:.2e}")
        if np.array_equal(hq, flat[o:o + numel].reshape(shape).astype(np.float64)):
            problems.append(f"{tname}: PEFT's adapter did not move")
    msg = (f"{ys.summary()}; {steps} steps x K={K}, loss {z_loss[0]:.4f} -> {z_loss[-1]:.4f}, clipped on "
           f"{n_clip}/{steps} steps (norm {z_norm.min():.3f}..{z_norm.max():.3f}, clip {hp['clip']}); "
           f"loss max rel {loss_rel.max():.1e}, grad norm max rel {norm_rel.max():.1e}, lr max rel {lr_rel:.1e}; "
           f"final adapters worst rel {pworst[1]:.1e} [{pworst[0]}] max abs {pworst_abs:.1e}; "
           f"vs f64: {cand.who} loss max rel {loss_rel64.max():.1e} adapters worst rel {pworst64:.1e}, "
           f"PEFT fp32 loss max rel {hf_rel64.max():.1e}; PEFT base weights unchanged{extra}")
    ys.finish(name, problems, msg)


# ----------------------------------------------------------------------------------- self-check only

def max_rel_dict(a, b):
    return max(rel_err(a[k], b[k]) for k in b)


def self_module(tag, sh, lo, seed):
    """each PEFT LoRA module on a random input vs x W + b + s (x A^T) B^T, float64 and float32"""
    name = f"selfcheck_modules_{tag}"
    flat = make_adapters(sh, lo, seed + 3)
    worst = {}
    for dt, tol in ((torch.float64, SELF_TOL64), (torch.float32, SELF_TOL32)):
        ref = PeftLora(sh, lo, seed, flat, dt)
        g = torch.Generator().manual_seed(seed)
        w = 0.0
        for mname, m in ref.wrapped.items():
            x = torch.randn((2, 5, m.in_features), generator=g, dtype=torch.float64).to(dt)
            W, b = m.base_layer.weight.detach(), m.base_layer.bias.detach()
            A, Bm = m.lora_A["default"].weight.detach(), m.lora_B["default"].weight.detach()
            with torch.no_grad():
                y = m(x)
                want = x @ W + b + lora_scaling(lo) * ((x @ A.t()) @ Bm.t())
            w = max(w, rel_err(y.numpy(), want.numpy()))
            if tuple(A.shape) != (lo["r"], m.in_features) or tuple(Bm.shape) != (m.out_features, lo["r"]):
                report_fail(name, f"{mname}: PEFT A {tuple(A.shape)} B {tuple(Bm.shape)}")
                return
        worst[dt] = w
    ok = worst[torch.float64] <= SELF_TOL64 and worst[torch.float32] <= SELF_TOL32
    msg = (f"{len(ref.wrapped)} modules, scaling {lora_scaling(lo):.6g}: max rel f64 {worst[torch.float64]:.1e} "
           f"(limit {SELF_TOL64:g}), fp32 {worst[torch.float32]:.1e} (limit {SELF_TOL32:g})")
    (report_pass if ok else report_fail)(name, msg)


def self_direct_fwdbwd(tag, sh, lo, B, T, seed, zero_b=False):
    """PEFT vs the hand-written LoRA (both forms) over a whole forward + backward, float64 and float32;
    and the adapters must matter (the loss moves away from the base model's unless B = 0)"""
    (tok, tgt), = make_batches(1, B, T, sh["V"], seed + 2)
    flat = make_adapters(sh, lo, seed + 3, zero_b=zero_b)
    base = base_loss_hf(sh, seed, [(tok, tgt)])[0]
    for form in ("split", "merged"):
        name = f"selfcheck_peft_vs_manual_{form}_fwdbwd_{tag}"
        parts, ok = [], True
        for dt, tol in ((torch.float64, SELF_TOL64), (torch.float32, SELF_TOL32)):
            p = ref_fwdbwd(PeftLora(sh, lo, seed, flat, dt), tok, tgt)
            m = ref_fwdbwd(ManualLora(sh, lo, seed, flat, dt, form), tok, tgt)
            if zero_b:  # lora_A gradients: exactly 0 on both sides
                za = [k for k in p[2] if k.endswith("lora_A") and (np.any(p[2][k] != 0) or np.any(m[2][k] != 0))]
                if za:
                    ok = False
                    parts.append(f"lora_A gradients not exactly 0 with B = 0: {za[:3]}")
                for k in [k for k in p[2] if k.endswith("lora_A")]:
                    del p[2][k], m[2][k]
            e = (abs(p[0] - m[0]) / abs(p[0]), rel_err(m[1], p[1]), max_rel_dict(m[2], p[2]))
            ok = ok and max(e) <= tol
            parts.append(f"{'f64' if dt == torch.float64 else 'fp32'}: loss {e[0]:.1e} logits {e[1]:.1e} "
                         f"grads worst {e[2]:.1e} (limit {tol:g})")
            if dt == torch.float32:
                moved = abs(p[0] - base) / abs(base)
                if zero_b and p[0] != base:
                    ok = False
                    parts.append(f"B = 0 but PEFT's loss {p[0]!r} != the base model's {base!r}")
                elif not zero_b and not moved > 1e-3:
                    ok = False
                    parts.append(f"the adapters barely change the loss (rel {moved:.1e} from the base model's)")
                parts.append("loss = base model's, bitwise" if zero_b else f"loss {moved:.1e} (rel) from the base model's")
        (report_pass if ok else report_fail)(name, "; ".join(parts))


def self_direct_train(tag, sh, lo, B, T, K, steps, hp, seed, zero_b=False):
    batches = make_batches(steps * K, B, T, sh["V"], seed + 2)
    flat = make_adapters(sh, lo, seed + 3, zero_b=zero_b)
    for form in ("split", "merged"):
        name = f"selfcheck_peft_vs_manual_{form}_train_{tag}"
        parts, ok = [], True
        for dt, tol in ((torch.float64, SELF_TOL64), (torch.float32, SELF_TOL32)):
            prec, ppar = ref_train(PeftLora(sh, lo, seed, flat, dt), batches, steps, K, hp, dt)
            mrec, mpar = ref_train(ManualLora(sh, lo, seed, flat, dt, form), batches, steps, K, hp, dt)
            e = (rel_err(mrec[:, 0], prec[:, 0]), rel_err(mrec[:, 1], prec[:, 1]), max_rel_dict(mpar, ppar))
            ok = ok and max(e) <= tol
            parts.append(f"{'f64' if dt == torch.float64 else 'fp32'}: losses {e[0]:.1e} grad norms {e[1]:.1e} "
                         f"final adapters worst {e[2]:.1e} (limit {tol:g})")
        (report_pass if ok else report_fail)(name, "; ".join(parts))


def self_mutants():
    """negative controls: slipped implementations in ztrain's place must FAIL the comparisons"""
    by_tag = {c[1]: c for c in CASES}
    controls = [  # (what, candidate, case tag)
        ("LoRA scaling off by 1e-4", ManualCandidate(mutate="scale"), "all_r4"),
        ("rank-stabilised scaling ignored", None, "qkv_r8_rslora"),
        ("'proj' adapters applied to mlp.c_proj", ManualCandidate(mutate="module"), "proj_r2"),
        ("no weight decay on the adapters", ManualCandidate(no_wd=True), "qkv_fcproj_r4"),
    ]
    for what, cand, tag in controls:
        kind, _, sh, lo, kw = by_tag[tag]
        if cand is None:  # rslora ignored: s = alpha / r instead of alpha / sqrt(r)
            cand, lo_c = ManualCandidate(), dict(lo, rslora=0)
            cand.fwdbwd = (lambda orig: lambda tag, sh, lo, *a: orig(tag, sh, lo_c, *a))(cand.fwdbwd)
        name = f"selfcheck_mutant_{tag}"
        with captured_reports() as got:
            run_case(cand, kind, tag, sh, lo, kw)
        fails = [r for r in got if r[0] == "FAIL"]
        if fails:
            report_pass(name, f"{what}: caught, {fails[0][1]}: {fails[0][2][:160]}...")
        else:
            report_fail(name, f"{what}: the comparisons did not catch it: {got}")


# ----------------------------------------------------------------------------------- main

SH_A = dict(L=2, H=4, C=64, V=97, Vp=128, maxT=32)
SH_B = dict(L=2, H=2, C=64, V=97, Vp=128, maxT=32)
SH_C = dict(L=2, H=2, C=32, V=101, Vp=128, maxT=32)
SH_D = dict(L=2, H=2, C=48, V=97, Vp=128, maxT=32)
HP = dict(lr=5e-3, min_lr=5e-4, warmup=3, clip=None, wd=0.1, beta1=0.9, beta2=0.95, eps=1e-8)

CASES = [
    # kind, tag, shape, LoRA, run
    ("fwdbwd", "all_r4", SH_A, dict(r=4, alpha=8, rslora=0, targets="all"), dict(B=2, T=16, seed=21)),
    ("fwdbwd", "qkv_r8_rslora", SH_B, dict(r=8, alpha=8, rslora=1, targets="qkv"), dict(B=2, T=16, seed=22)),
    # "proj" is attn.c_proj only (not mlp.c_proj): the ambiguous GPT-2 name
    ("fwdbwd", "proj_r2", SH_C, dict(r=2, alpha=4, rslora=0, targets="proj"), dict(B=2, T=12, seed=23)),
    ("fwdbwd", "zeroB_all_r4", SH_C, dict(r=4, alpha=8, rslora=0, targets="all"), dict(B=2, T=16, seed=24, zero_b=True)),
    ("train", "qkv_fcproj_r4", SH_D, dict(r=4, alpha=8, rslora=0, targets="qkv,fcproj"),
     dict(B=2, T=16, K=2, steps=10, seed=25, hp=dict(HP, clip=1.4))),
    ("train", "zeroB_fc_fcproj_r4_rslora", SH_C, dict(r=4, alpha=4, rslora=1, targets="fc,fcproj"),
     dict(B=2, T=16, K=2, steps=8, seed=26, zero_b=True, hp=dict(HP, clip=0.8))),
]


def run_case(cand, kind, tag, sh, lo, kw):
    if kind == "fwdbwd":
        case_fwdbwd(cand, tag, sh, lo, kw["B"], kw["T"], kw["seed"], kw.get("zero_b", False))
    else:
        case_train(cand, tag, sh, lo, kw["B"], kw["T"], kw["K"], kw["steps"], kw["hp"], kw["seed"],
                   kw.get("zero_b", False))


def run_cases(cand):
    for kind, tag, sh, lo, kw in CASES:
        try:
            run_case(cand, kind, tag, sh, lo, kw)
        except Exception as e:  # a crash of model_dump or of the comparison is a failure of this case
            report_fail(f"{kind}_{tag}", f"{type(e).__name__}: {e}")


def self_check():
    """the PEFT reference and the comparisons, with the hand-written LoRA in ztrain's place"""
    for kind, tag, sh, lo, kw in CASES:
        try:
            if kind == "fwdbwd":
                self_module(tag, sh, lo, kw["seed"])
                self_direct_fwdbwd(tag, sh, lo, kw["B"], kw["T"], kw["seed"], kw.get("zero_b", False))
            else:
                self_direct_train(tag, sh, lo, kw["B"], kw["T"], kw["K"], kw["steps"], kw["hp"], kw["seed"],
                                  kw.get("zero_b", False))
        except Exception as e:
            report_fail(f"selfcheck_{kind}_{tag}", f"{type(e).__name__}: {e}")
    run_cases(ManualCandidate("merged"))
    try:
        self_mutants()
    except Exception as e:
        report_fail("selfcheck_mutants", f"{type(e).__name__}: {e}")


def main():
    t0 = time.time()
    if "--self-check" in sys.argv[1:]:
        self_check()
    elif not os.access(common.BIN, os.X_OK):
        report_fail("lora_reference_binary", f"{os.path.relpath(common.BIN, REPO)} not built (run make build-all)")
    else:
        sh, lo = CASES[0][2], CASES[0][3]
        try:  # one clear failure when model_dump has no LoRA modes yet
            zt_lora_table(sh, lo)
        except Exception as e:
            report_fail("lora_model_dump", f"build/tests/model_dump has no working LoRA modes "
                                           f"(lora-table {' '.join(lora_args(lo))}): {e}")
        else:
            with tempfile.TemporaryDirectory(prefix="zt_lora_") as tmp:
                run_cases(ZtrainCandidate(tmp))
    print(f"# test_lora_reference{' --self-check' if '--self-check' in sys.argv[1:] else ''}: "
          f"{time.time() - t0:.1f} s, peft {peft.__version__}, transformers {transformers.__version__}, "
          f"torch {torch.__version__}", file=sys.stderr)
    return 1 if common.failures else 0


if __name__ == "__main__":
    sys.exit(main())
