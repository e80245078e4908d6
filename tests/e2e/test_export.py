#!/usr/bin/env python3
"""test_export.py — `ztrain export` / `ztrain import` against the Hugging Face references.

Run from the repository root with the reference venv (scripts/setup-venv.sh), after make build-all:
    .venv-ref/bin/python tests/e2e/test_export.py
Prints "PASS name (numbers)" or "FAIL name: reason" per case; exits non-zero if any failed.

ztrain's logits come from build/tests/model_dump (ztrain's forward) on weights read with h5py from
the checkpoint itself (in the parameter table's order), never from the exported file, so a wrong
name or layout in the export cannot cancel out. Cases:
  export_names_shapes     model.safetensors loads with safetensors.numpy; names transformer.<ztrain name>,
                          true shapes (wte cut from Vp = 384 to V = 256 rows), values == the checkpoint's
  export_config_json      config.json field by field against the checkpoint's config: vocab_size (V, not Vp),
                          n_positions = n_ctx = block_size, n_embd, n_layer, n_head, layer_norm_epsilon 1e-5,
                          activation_function gelu_new, bos/eos = the end-of-text id (V - 1: export.c's
                          convention, the last id of a GPT-2 vocabulary; byte-level here, no tokenizer),
                          tie_word_embeddings, model_type gpt2, architectures [GPT2LMHeadModel], no dropout
  export_st_header        the raw safetensors header: __metadata__ {"format": "pt"}, every dtype F32, shapes,
                          data_offsets contiguous in the table's order and covering the file exactly
  ckpt_root_attrs         the checkpoint's root attributes (h5py): format ztrain, version 1, step 20,
                          samples_seen = 20 x global_batch, tokens_seen = samples x seq_len, world_size 1,
                          vocab_size, padded_vocab, n_params = the table's total, complete, seed, config text
  export_hf_load          GPT2LMHeadModel.from_pretrained(DIR): no missing / unexpected weights
  export_hf_logits        HF logits == ztrain logits within 1e-5 (max abs) on a (2, 32) batch
  export_bf16 / _fp16     --dtype bf16 / fp16: every tensor BF16 / F16 (safetensors.torch) and bit for bit torch's
                          .to(bfloat16) / .to(float16) of the fp32 export; config.json the same but torch_dtype
  export_bf16_hf_logits   transformers loads the bf16 export as a bf16 model (explicit and "auto"); logits within
                          0.03 of the fp32 model's (measured 0.0106, max |logit| 0.73) and equal to the fp32 model
                          converted by torch
  export_fp16_hf_load     "auto" loads the fp16 export as float16; upcast to fp32, logits within 1e-3 (measured 3e-4)
  export_fp32_default     --dtype fp32 == no --dtype, byte for byte
  export_*_edges          a checkpoint edited (h5py) to hold fp16/bf16 edge values (65519.996, subnormals, ties) and
                          200 values over 2^-30..2^16: both exports equal torch's rounding bit for bit
  export_fp16_overflow    a weight of 70000 (then -65520): --dtype fp16 is one line naming tensor[i, j] and value,
                          exit 2, and writes nothing (no new --out, an existing --out stays empty); bf16 exports it
  export_bf16_overflow    FLT_MAX (rounds to Inf in bf16) is refused the same way
  bad_export_dtype        --dtype fp8: one line, exit 2
  export_help_dtype       `ztrain export --help` documents --dtype fp32|bf16|fp16
  roundtrip_bitexact      import of the export == the original checkpoint's /model bit for bit (wte padded back)
  import_resume           an import made with -c CFG resumes with `ztrain train -c CFG --resume` (step 0)
  hf_random_import        save_pretrained of a random GPT2LMHeadModel (V 300 -> Vp 384, 3 layers, 4 heads from
                          config.json) imports and gives transformers' logits within 1e-5
  hf_unprefixed_names     the same tensors named without "transformer." (+ a tied lm_head.weight) import identically
  hf_f16 / hf_bf16        F16 / BF16 files import as exactly the fp32 values of the half tensors
  bad_*                   not safetensors, no n_head, a transposed tensor, an unsupported activation, export of
                          a non-checkpoint, an unknown format or dtype: exit 2 with one `ztrain: error` line
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ZT = os.path.join(REPO, "ztrain")
MD = os.path.join(REPO, "build", "tests", "model_dump")
TOL = 1e-5
failures = 0


def report(ok, name, msg):
    global failures
    if ok:
        print(f"PASS {name} ({msg})", flush=True)
    else:
        failures += 1
        print(f"FAIL {name}: {msg}", flush=True)


try:
    import h5py
    import numpy as np
    import torch
    from safetensors import safe_open
    from safetensors.numpy import load_file, save_file
    from safetensors.torch import load_file as load_pt
    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.utils import logging as hf_logging
    hf_logging.set_verbosity_error()
except Exception as e:  # a missing reference is a failure, with what is missing
    report(False, "imports", f"{type(e).__name__}: {e} (run scripts/setup-venv.sh; use .venv-ref/bin/python)")
    sys.exit(1)

ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
TMP = tempfile.mkdtemp(prefix="zt-export.")


def zt(*args):
    p = subprocess.run([ZT, *args], cwd=REPO, env=ENV, capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout + p.stderr


def table_rows(L, H, C, V, Vp, T):
    """model_dump table: [(name, offset, numel, shape)], total"""
    out = subprocess.run([MD, "table", "--layers", str(L), "--heads", str(H), "--embd", str(C), "--vocab", str(V),
                          "--padded-vocab", str(Vp), "--block", str(T)], capture_output=True, text=True, check=True)
    rows, total = [], None
    for line in out.stdout.splitlines():
        f = line.split()
        if f and f[0] == "tensor":
            rows.append((f[1], int(f[2]), int(f[3]), tuple(int(x) for x in f[5:5 + int(f[4])])))
        elif f and f[0] == "total":
            total = int(f[1])
    return rows, total


def table(L, H, C, V, Vp, T):
    return [r[0] for r in table_rows(L, H, C, V, Vp, T)[0]]


def ztrain_logits(ckpt, shape, tokens):
    """ztrain's forward (model_dump) on the /model tensors of ckpt read with h5py"""
    L, H, C, V, Vp, T = shape
    with h5py.File(ckpt, "r") as h:
        flat = np.concatenate([h["model"][n][...].astype(np.float32).reshape(-1) for n in table(*shape)])
    B, TT = tokens.shape
    w, tk, out = (os.path.join(TMP, x) for x in ("w.bin", "tok.bin", "out.bin"))
    flat.tofile(w)
    np.concatenate([tokens, tokens]).astype(np.int32).tofile(tk)  # targets unused here
    subprocess.run([MD, "fwdbwd", "--layers", str(L), "--heads", str(H), "--embd", str(C), "--vocab", str(V),
                    "--padded-vocab", str(Vp), "--block", str(T), "--B", str(B), "--T", str(TT), "--weights", w,
                    "--tokens", tk, "--out", out], check=True, capture_output=True)
    o = np.fromfile(out, dtype=np.float32)
    return o[1:1 + B * TT * Vp].reshape(B, TT, Vp)[:, :, :V]


def hf_logits(model, tokens):
    model.eval()
    with torch.no_grad():
        return model(torch.from_numpy(tokens.astype(np.int64))).logits.float().numpy()


def h5_model(path):
    with h5py.File(path, "r") as h:
        return {k: h["model"][k][...] for k in h["model"]}


def one_error(name, want, rc, out):
    lines = [l for l in out.splitlines() if "ztrain: error" in l]
    report(rc == 2 and len(lines) == 1 and want in lines[0], name,
           lines[0][:160] if lines else f"exit {rc}: {out.strip()[-200:]}")


# ---------------------------------------------------------------- a trained ztrain checkpoint, exported
if not os.path.exists(os.path.join(REPO, "data/tiny/train.bin")):
    subprocess.run([os.path.join(REPO, "tests/helpers/make_data.py"), os.path.join(REPO, "data/tiny"), "256", "40000"],
                   check=True, capture_output=True)
SH = (2, 2, 64, 256, 384, 64)  # layers, heads, embd, V, Vp, block
cfgset = ["-c", "inputs/tiny.cfg", "--set", "model.padded_vocab=384"]
rc, out = zt("train", *cfgset, "--set", "train.steps=20", "--set", f"run.root={TMP}", "--set", "run.name=t",
             "--set", "eval.every=0")
ckpt = os.path.join(TMP, "tests", "t", "checkpoints", "step_00000020.h5")
if rc != 0 or not os.path.exists(ckpt):
    report(False, "setup_train", out[-400:])
    sys.exit(1)
exp = os.path.join(TMP, "export")
rc, out = zt("export", "--checkpoint", ckpt, "--out", exp)
st = os.path.join(exp, "model.safetensors")
if rc != 0 or not os.path.exists(st):
    report(False, "export", out[-400:])
    sys.exit(1)

orig = h5_model(ckpt)
tens = load_file(st)
names = table(*SH)
want = {"transformer." + n: (orig[n][:256] if n == "wte.weight" else orig[n]) for n in names}
bad = [k for k in want if k not in tens or tens[k].shape != want[k].shape or tens[k].dtype != np.float32
       or tens[k].tobytes() != want[k].tobytes()]
with safe_open(st, "np") as f:
    meta = f.metadata()
report(not bad and set(tens) == set(want) and meta == {"format": "pt"}, "export_names_shapes",
       f"{len(tens)} F32 tensors, wte {tens['transformer.wte.weight'].shape}, h.0.attn.c_attn.weight "
       f"{tens['transformer.h.0.attn.c_attn.weight'].shape}, equal to the checkpoint; metadata {meta}"
       if not bad else f"mismatched: {bad[:4]}, extra {sorted(set(tens) - set(want))[:4]}")

# config.json, field by field (inputs/tiny.cfg with padded_vocab 384)
L_, H_, C_, V_, Vp_, T_ = SH
cj = json.load(open(os.path.join(exp, "config.json")))
want_cfg = {"vocab_size": V_, "n_positions": T_, "n_ctx": T_, "n_embd": C_, "n_layer": L_, "n_head": H_,
            "layer_norm_epsilon": 1e-5, "activation_function": "gelu_new", "bos_token_id": V_ - 1,
            "eos_token_id": V_ - 1, "tie_word_embeddings": True, "model_type": "gpt2",
            "architectures": ["GPT2LMHeadModel"], "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0,
            "scale_attn_weights": True, "scale_attn_by_inverse_layer_idx": False, "reorder_and_upcast_attn": False,
            "n_inner": None, "initializer_range": 0.02, "torch_dtype": "float32"}
wrong = [f"{k}: {cj.get(k, '<missing>')!r} != {v!r}" for k, v in want_cfg.items()
         if k not in cj or cj[k] != v or type(cj[k]) is not type(v)]
report(not wrong, "export_config_json", f"{len(want_cfg)} fields equal the model's (V {V_}, n_positions {T_}, "
       f"bos=eos {V_ - 1})" if not wrong else "; ".join(wrong[:6]))

# the raw safetensors header: dtypes, shapes, contiguous offsets in table order, metadata
rows, ntotal = table_rows(*SH)
raw = open(st, "rb").read()
hlen = int.from_bytes(raw[:8], "little")
hdr = json.loads(raw[8:8 + hlen])
hmeta = hdr.pop("__metadata__", None)
probs, off = [], 0
for n, _, numel, shape in rows:
    e = hdr.get("transformer." + n)
    shp = (V_, C_) if n == "wte.weight" else shape
    if e is None:
        probs.append(f"{n} missing")
        continue
    if e["dtype"] != "F32" or tuple(e["shape"]) != shp:
        probs.append(f"{n}: {e['dtype']} {e['shape']}, want F32 {list(shp)}")
    nbytes = 4 * (V_ * C_ if n == "wte.weight" else numel)
    if e["data_offsets"] != [off, off + nbytes]:
        probs.append(f"{n}: data_offsets {e['data_offsets']}, want {[off, off + nbytes]}")
    off += nbytes
if len(hdr) != len(rows):
    probs.append(f"{len(hdr)} tensors in the header, {len(rows)} in the table")
if 8 + hlen + off != len(raw):
    probs.append(f"file {len(raw)} bytes, header + data {8 + hlen + off}")
if hmeta != {"format": "pt"}:
    probs.append(f"__metadata__ {hmeta}")
report(not probs, "export_st_header", f"{len(hdr)} F32 tensors, offsets contiguous in table order, {off} data "
       f"bytes, metadata {hmeta}" if not probs else "; ".join(probs[:6]))

# the checkpoint's root attributes against the run: 20 steps of global_batch 8 x seq_len 32, 1 rank
with h5py.File(ckpt, "r") as h:
    at = {k: h.attrs[k] for k in h.attrs}
ctext = at.get("config", b"")
ctext = ctext.decode() if isinstance(ctext, bytes) else str(ctext)
want_at = {"format": "ztrain", "version": 1, "step": 20, "samples_seen": 20 * 8, "tokens_seen": 20 * 8 * 32,
           "world_size": 1, "vocab_size": V_, "padded_vocab": Vp_, "n_params": ntotal, "complete": 1, "seed": 1337}
wrong = []
for k, v in want_at.items():
    g = at.get(k)
    g = g.decode() if isinstance(g, bytes) else g
    if g is None or (g != v if isinstance(v, str) else int(g) != v):
        wrong.append(f"{k}: {g!r} != {v!r}")
for frag in ("n_layer = 2;", "n_head = 2;", "n_embd = 64;", "vocab_size = 256;", "padded_vocab = 384;",
             "block_size = 64;", "steps = 20;", "seed = 1337;", "global_batch = 8;", "seq_len = 32;"):
    if frag not in ctext:
        wrong.append(f"config attribute lacks '{frag}'")
report(not wrong, "ckpt_root_attrs", f"{len(want_at)} attributes equal the run's (n_params {ntotal}, tokens_seen "
       f"{20 * 8 * 32}) and the config text has the run's settings" if not wrong else "; ".join(wrong[:6]))

model, info = GPT2LMHeadModel.from_pretrained(exp, output_loading_info=True)
miss = [k for k in info["missing_keys"] if not k.endswith(("attn.bias", "attn.masked_bias"))]
report(not miss and not info["unexpected_keys"] and not info["mismatched_keys"], "export_hf_load",
       f"GPT2LMHeadModel.from_pretrained: missing {miss}, unexpected {info['unexpected_keys']}, "
       f"config n_layer {model.config.n_layer} n_head {model.config.n_head} vocab {model.config.vocab_size}")
rng = np.random.default_rng(0)
tokens = rng.integers(0, 256, size=(2, 32))
a, b = ztrain_logits(ckpt, SH, tokens), hf_logits(model, tokens)
d = float(np.abs(a - b).max())
report(d <= TOL, "export_hf_logits", f"max |ztrain - HF| = {d:.3g} <= {TOL} over {a.size} logits (max |logit| "
       f"{np.abs(b).max():.3g})")

# ---------------------------------------------------------------- --dtype bf16 / fp16
# Every tensor must equal torch's own rounding (.to(bfloat16) / .to(float16): round to nearest even,
# subnormals kept) of the fp32 export, bit for bit; config.json differs from the fp32 one only in torch_dtype.
DTYPES = (("bf16", torch.bfloat16, "bfloat16", "BF16"), ("fp16", torch.float16, "float16", "F16"))
fp32_pt = load_pt(st)
fp32_cfg = json.load(open(os.path.join(exp, "config.json")))
hf_fp32_logits = b


def export_as(ck, dt, out_dir):
    return zt("export", "--checkpoint", ck, "--out", out_dir, "--dtype", dt)


def st_header(path):
    raw_ = open(path, "rb").read()
    n_ = int.from_bytes(raw_[:8], "little")
    h_ = json.loads(raw_[8:8 + n_])
    h_.pop("__metadata__", None)
    return h_, len(raw_) - 8 - n_


def half_mismatches(got, want32, tdt):
    """names whose tensor is not tdt or differs in any bit from want32[name].to(tdt)"""
    return [k for k in want32 if k not in got or got[k].dtype != tdt or got[k].shape != want32[k].shape
            or not torch.equal(got[k].view(torch.int16), want32[k].to(tdt).view(torch.int16))]


for dt, tdt, tname, stname in DTYPES:
    dd = os.path.join(TMP, "export_" + dt)
    rc, out = export_as(ckpt, dt, dd)
    if rc != 0:
        report(False, "export_" + dt, out[-300:])
        continue
    got = load_pt(os.path.join(dd, "model.safetensors"))
    bad = half_mismatches(got, fp32_pt, tdt)
    hdr_, data_bytes = st_header(os.path.join(dd, "model.safetensors"))
    dts = {e["dtype"] for e in hdr_.values()}
    nel = sum(v.numel() for v in fp32_pt.values())
    cj_ = json.load(open(os.path.join(dd, "config.json")))
    cdiff = sorted(k for k in set(cj_) | set(fp32_cfg) if k != "torch_dtype" and cj_.get(k) != fp32_cfg.get(k))
    sub = sum(int(((v.abs() < 2.0 ** -14) & (v != 0)).sum()) for v in fp32_pt.values())
    ok = not bad and set(got) == set(fp32_pt) and dts == {stname} and data_bytes == 2 * nel and \
        cj_.get("torch_dtype") == tname and not cdiff
    report(ok, "export_" + dt, f"{len(got)} {stname} tensors ({data_bytes} data bytes) == torch .to({tname}) of the "
           f"fp32 export bit for bit ({sub} values below 2^-14 among them); config.json torch_dtype \"{tname}\", "
           f"otherwise equal to fp32's" if ok else
           f"bit mismatches {bad[:4]}, dtypes {dts}, data {data_bytes} of {2 * nel} bytes, "
           f"torch_dtype {cj_.get('torch_dtype')!r}, other config differences {cdiff[:4]}")

# transformers: the bf16 export as a bf16 model (explicit and torch_dtype="auto", which reads config.json).
# Its logits on the (2, 32) batch against the fp32 model's: measured max |diff| 0.0106 (max |logit| 0.73;
# 0.0106-0.0108 on three batches); the tolerance is 0.03. They are also exactly the logits of the fp32
# model converted by torch (.to(torch.bfloat16)): the same weights, the same computation.
TOL_BF16 = 0.03
bdir = os.path.join(TMP, "export_bf16")
try:
    mb = GPT2LMHeadModel.from_pretrained(bdir, torch_dtype=torch.bfloat16)
    ma = GPT2LMHeadModel.from_pretrained(bdir, torch_dtype="auto")
    lb = hf_logits(mb, tokens)
    lt = hf_logits(GPT2LMHeadModel.from_pretrained(exp).to(torch.bfloat16), tokens)
    d = float(np.abs(lb - hf_fp32_logits).max())
    pdt = {str(p.dtype) for p in mb.parameters()}
    report(d <= TOL_BF16 and pdt == {"torch.bfloat16"} and ma.dtype == torch.bfloat16 and np.array_equal(lb, lt),
           "export_bf16_hf_logits", f"from_pretrained(torch_dtype=bfloat16 / \"auto\" -> {ma.dtype}): max |bf16 - "
           f"fp32 logits| = {d:.3g} <= {TOL_BF16} (max |logit| {np.abs(hf_fp32_logits).max():.3g}); == the fp32 "
           f"model .to(bfloat16): {np.array_equal(lb, lt)}")
except Exception as e:
    report(False, "export_bf16_hf_logits", f"{type(e).__name__}: {e}")

# the fp16 export in transformers: "auto" gives a float16 model; this torch has no CPU fp16 LayerNorm, so
# the logits are taken with the weights upcast (torch_dtype=float32): measured max |diff| 3.1e-4 against
# the fp32 model, tolerance 1e-3 (fp16 rounding of the weights alone)
TOL_FP16_W = 1e-3
hdir = os.path.join(TMP, "export_fp16")
try:
    mha = GPT2LMHeadModel.from_pretrained(hdir, torch_dtype="auto")
    lh = hf_logits(GPT2LMHeadModel.from_pretrained(hdir, torch_dtype=torch.float32), tokens)
    d = float(np.abs(lh - hf_fp32_logits).max())
    report(d <= TOL_FP16_W and mha.dtype == torch.float16, "export_fp16_hf_load",
           f"from_pretrained(torch_dtype=\"auto\") -> {mha.dtype}; fp16 weights in fp32: max |diff| to the fp32 "
           f"logits = {d:.3g} <= {TOL_FP16_W}")
except Exception as e:
    report(False, "export_fp16_hf_load", f"{type(e).__name__}: {e}")

# --dtype fp32 given explicitly is the default, byte for byte
rc, out = export_as(ckpt, "fp32", os.path.join(TMP, "export_fp32"))
same = rc == 0 and all(open(os.path.join(TMP, "export_fp32", f), "rb").read() == open(os.path.join(exp, f), "rb").read()
                       for f in ("model.safetensors", "config.json"))
report(same, "export_fp32_default", "--dtype fp32 writes the same model.safetensors and config.json bytes as no "
       "--dtype" if same else out[-300:])


def edited_ckpt(name, edits):
    """a copy of ckpt with /model values replaced: {tensor: [(flat index, value)]}; still finite"""
    path = os.path.join(TMP, name)
    shutil.copyfile(ckpt, path)
    with h5py.File(path, "r+") as h:
        for t, vals in edits.items():
            w = h["model"][t][...]
            flat = w.reshape(-1)
            for i, v in vals:
                flat[i] = v
            h["model"][t][...] = w
    return path


# values at the edges of the two formats (fp16: largest finite, the last value below the overflow threshold,
# subnormals and their ties, ties between normals; bf16: ties) and 200 values spread over 2^-30 .. 2^15.99,
# placed in h.0.mlp.c_fc.weight (64 x 256); each export must equal torch's rounding of the checkpoint's values
f32 = np.float32
edge = [65504, np.nextafter(f32(65520), f32(0)), -np.nextafter(f32(65520), f32(0)), 65505, 2.0 ** -24, 2.0 ** -25,
        3 * 2.0 ** -25, np.nextafter(f32(2.0 ** -25), f32(1)), 2.0 ** -14, 2.0 ** -14 - 2.0 ** -25, 1 + 2.0 ** -11,
        1 + 3 * 2.0 ** -11, 1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8, -(1 + 2.0 ** -8), -0.0, 1e-10, 1e-30]
erng = np.random.default_rng(7)
edge += list(erng.choice([-1.0, 1.0], 200) * 2.0 ** erng.uniform(-30, 15.99, 200))
eck = edited_ckpt("edges.h5", {"h.0.mlp.c_fc.weight": list(enumerate(f32(edge)))})
e32 = {"transformer." + k: torch.from_numpy(v[:V_] if k == "wte.weight" else v) for k, v in h5_model(eck).items()}
for dt, tdt, tname, stname in DTYPES:
    dd = os.path.join(TMP, "edges_" + dt)
    rc, out = export_as(eck, dt, dd)
    bad = half_mismatches(load_pt(os.path.join(dd, "model.safetensors")), e32, tdt) if rc == 0 else ["(export failed)"]
    report(rc == 0 and not bad, "export_" + dt + "_edges", f"{len(edge)} edge and wide-range values (up to "
           f"65519.996, subnormal ties) == torch .to({tname}) of the checkpoint bit for bit" if not bad else
           f"{bad[:4]} {out[-200:] if rc else ''}")

# fp16 cannot hold |x| >= 65520 (rounds to Inf): refused with one line naming the tensor, the element and the
# value, exit 2, before anything is written (neither --out nor a file in an existing --out); bf16 holds it
ovf = edited_ckpt("ovf.h5", {"h.1.mlp.c_proj.weight": [(3 * 64 + 5, 70000.0)]})
ovf_new, ovf_dir = os.path.join(TMP, "ovf_new"), os.path.join(TMP, "ovf_dir")
os.makedirs(ovf_dir)
rc, out = export_as(ovf, "fp16", ovf_new)
one_error("export_fp16_overflow", "tensor transformer.h.1.mlp.c_proj.weight[3, 5] = 70000 is outside float16's range",
          rc, out)
rc2, out2 = export_as(ovf, "fp16", ovf_dir)
rc3, out3 = export_as(edited_ckpt("ovf2.h5", {"wpe.weight": [(17, -65520.0)]}), "fp16", ovf_new)
rc4, _ = export_as(ovf, "bf16", os.path.join(TMP, "ovf_bf16"))
left = os.listdir(ovf_dir) + ([ovf_new] if os.path.exists(ovf_new) else [])
report(rc2 == 2 and rc3 == 2 and "wpe.weight[0, 17] = -65520" in out3 and rc4 == 0 and not left,
       "export_fp16_overflow_nothing_written", "nothing written (a new --out is not created, an existing one stays "
       "empty); -65520 (the threshold itself) refused too; the same checkpoint exports as bf16"
       if not left and rc4 == 0 else f"left {left}, rc {rc2} {rc3} {rc4}: {out3.strip()[-200:]}")

# bf16 holds fp32's range but for the top half-ulp: FLT_MAX rounds to Inf and is refused the same way
bovf = edited_ckpt("bovf.h5", {"ln_f.weight": [(2, float(np.finfo(np.float32).max))]})
one_error("export_bf16_overflow", "ln_f.weight[2] = 3.40282347e+38 is outside bfloat16's range",
          *export_as(bovf, "bf16", os.path.join(TMP, "bovf_out")))

# an unknown --dtype: one line, exit 2, nothing created
one_error("bad_export_dtype", "--dtype fp8: expected fp32, bf16 or fp16",
          *export_as(ckpt, "fp8", os.path.join(TMP, "e")))
rc, out = zt("export", "--help")
report(rc == 0 and "--dtype fp32|bf16|fp16" in out, "export_help_dtype",
       next((l.strip() for l in out.splitlines() if "--dtype" in l), f"no --dtype in `ztrain export --help`: {out!r}"))

back = os.path.join(TMP, "back.h5")
rc, out = zt("import", "--safetensors", exp, "--out", back, "--set", "model.padded_vocab=384")
if rc == 0:
    rt = h5_model(back)
    diff = [k for k in orig if k not in rt or rt[k].shape != orig[k].shape or rt[k].tobytes() != orig[k].tobytes()]
    with h5py.File(back, "r") as h:
        zero = all(not np.any(h[g][k][...]) for g in ("optim/exp_avg", "optim/exp_avg_sq") for k in h[g])
        step = int(h.attrs["step"])
    report(not diff and zero and step == 0, "roundtrip_bitexact",
           f"{len(orig)} tensors of /model bit-identical after export -> import; step 0, zero moments"
           if not diff else f"differ: {diff[:4]}")
else:
    report(False, "roundtrip_bitexact", out[-300:])

# an import made with the training config resumes as a step-0 checkpoint
imp = os.path.join(TMP, "ft", "ckpt", "step_00000000.h5")
rc, out = zt("import", "--safetensors", st, "--out", imp, *cfgset)
if rc == 0:
    rc, out = zt("train", *cfgset, "--set", "train.steps=6", "--set", f"run.root={TMP}", "--set", "run.name=ft",
                 "--set", f"checkpoint.dir={os.path.dirname(imp)}", "--resume", "auto")
report(rc == 0 and "at step 0" in out, "import_resume",
       next((l for l in out.splitlines() if "resumed from" in l), out[-300:]).strip()[:160])

# ---------------------------------------------------------------- checkpoints written by transformers
torch.manual_seed(0)
cfg = GPT2Config(vocab_size=300, n_positions=48, n_embd=48, n_layer=3, n_head=4, resid_pdrop=0.0, embd_pdrop=0.0,
                 attn_pdrop=0.0)
hf = GPT2LMHeadModel(cfg)
with torch.no_grad():  # every parameter non-trivial (LayerNorms and biases too)
    for n, p in hf.named_parameters():
        p.add_(torch.randn_like(p) * 0.05)
hf_dir = os.path.join(TMP, "hf")
hf.save_pretrained(hf_dir)
SH2 = (3, 4, 48, 300, 384, 48)
x2 = os.path.join(TMP, "hf.h5")
rc, out = zt("import", "--safetensors", hf_dir, "--out", x2)
if rc == 0:
    tokens = rng.integers(0, 300, size=(2, 48))
    a, b = ztrain_logits(x2, SH2, tokens), hf_logits(hf, tokens)
    d = float(np.abs(a - b).max())
    with h5py.File(x2, "r") as h:
        pad0 = not np.any(h["model/wte.weight"][300:])
        cfgtxt = h.attrs["config"].decode()
    report(d <= TOL and pad0 and "n_head = 4;" in cfgtxt, "hf_random_import",
           f"save_pretrained -> import (n_head 4 from config.json, wte 300 -> 384 rows, zero padding): "
           f"max |ztrain - HF| = {d:.3g} <= {TOL}")
else:
    report(False, "hf_random_import", out[-300:])

sd = load_file(os.path.join(hf_dir, "model.safetensors"))
plain = {k.removeprefix("transformer."): v for k, v in sd.items()}
plain["lm_head.weight"] = sd["transformer.wte.weight"]
pd_ = os.path.join(TMP, "plain")
os.makedirs(pd_)
save_file(plain, os.path.join(pd_, "model.safetensors"), metadata={"format": "pt"})
os.symlink(os.path.join(hf_dir, "config.json"), os.path.join(pd_, "config.json"))
x3 = os.path.join(TMP, "plain.h5")
rc, out = zt("import", "--safetensors", os.path.join(pd_, "model.safetensors"), "--out", x3)
if rc == 0:
    p1, p2 = h5_model(x2), h5_model(x3)
    report(all(p1[k].tobytes() == p2[k].tobytes() for k in p1), "hf_unprefixed_names",
           f"{len(plain)} tensors without 'transformer.' + tied lm_head.weight -> the same checkpoint")
else:
    report(False, "hf_unprefixed_names", out[-300:])

for dt, name in ((torch.float16, "hf_f16"), (torch.bfloat16, "hf_bf16")):
    h16 = GPT2LMHeadModel(cfg)
    h16.load_state_dict(hf.state_dict())
    h16 = h16.to(dt)
    dd = os.path.join(TMP, name)
    h16.save_pretrained(dd)
    xo = os.path.join(TMP, name + ".h5")
    rc, out = zt("import", "--safetensors", dd, "--out", xo)
    if rc != 0:
        report(False, name, out[-300:])
        continue
    got = h5_model(xo)
    sd16 = {k.removeprefix("transformer."): v.float().numpy() for k, v in h16.state_dict().items()}
    bad = [k for k in got if k in sd16 and got[k][:sd16[k].shape[0]].tobytes() != sd16[k].tobytes()]
    missing = [k for k in got if k not in sd16]
    with safe_open(os.path.join(dd, "model.safetensors"), "pt") as f:
        dts = {str(f.get_slice(k).get_dtype()) for k in f.keys()}
    report(not bad and not missing, name, f"file dtypes {sorted(dts)}: {len(got)} tensors equal the half values "
           f"widened to fp32, bit for bit" if not bad else f"differ: {bad[:4]} missing {missing[:3]}")

# ---------------------------------------------------------------- bad input
txt = os.path.join(TMP, "text.safetensors")
open(txt, "w").write("not safetensors at all\n")
one_error("bad_not_safetensors", "not a safetensors file", *zt("import", "--safetensors", txt, "--out",
                                                                 os.path.join(TMP, "x.h5")))
lone = os.path.join(TMP, "lone")
os.makedirs(lone)
save_file(plain, os.path.join(lone, "model.safetensors"))
one_error("bad_no_n_head", "model.n_head", *zt("import", "--safetensors", lone, "--out", os.path.join(TMP, "x.h5")))
tr = dict(plain)
tr["h.1.attn.c_attn.weight"] = np.ascontiguousarray(tr["h.1.attn.c_attn.weight"].T)
trd = os.path.join(TMP, "transposed")
os.makedirs(trd)
save_file(tr, os.path.join(trd, "model.safetensors"))
os.symlink(os.path.join(hf_dir, "config.json"), os.path.join(trd, "config.json"))
one_error("bad_transposed", "h.1.attn.c_attn.weight has shape (144, 48) but the model expects (48, 144)",
          *zt("import", "--safetensors", trd, "--out", os.path.join(TMP, "x.h5")))
rel = os.path.join(TMP, "relu")
os.makedirs(rel)
os.symlink(os.path.join(hf_dir, "model.safetensors"), os.path.join(rel, "model.safetensors"))
c = json.load(open(os.path.join(hf_dir, "config.json")))
c["activation_function"] = "relu"
json.dump(c, open(os.path.join(rel, "config.json"), "w"))
one_error("bad_activation", "activation_function \"relu\"", *zt("import", "--safetensors", rel, "--out",
                                                                   os.path.join(TMP, "x.h5")))
one_error("bad_export_input", "not an HDF5 file", *zt("export", "--checkpoint", txt, "--out", os.path.join(TMP, "e")))
one_error("bad_export_format", "--format onnx", *zt("export", "--checkpoint", ckpt, "--format", "onnx", "--out",
                                                    os.path.join(TMP, "e")))
report(not os.path.exists(os.path.join(TMP, "x.h5")) and not os.path.exists(os.path.join(TMP, "e")),
       "bad_nothing_written", "no --out file or directory was created by the failed commands")

subprocess.run(["rm", "-rf", TMP])
sys.exit(1 if failures else 0)
