#!/usr/bin/env python3
"""test_export.py — `ztrain export` / `ztrain import` against the Hugging Face references.

Run from the repository root with the reference venv (scripts/setup-venv.sh), after make build-all:
    .venv-ref/bin/python tests/test_export.py
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
  roundtrip_bitexact      import of the export == the original checkpoint's /model bit for bit (wte padded back)
  import_resume           an import made with -c CFG resumes with `ztrain train -c CFG --resume` (step 0)
  hf_random_import        save_pretrained of a random GPT2LMHeadModel (V 300 -> Vp 384, 3 layers, 4 heads from
                          config.json) imports and gives transformers' logits within 1e-5
  hf_unprefixed_names     the same tensors named without "transformer." (+ a tied lm_head.weight) import identically
  hf_f16 / hf_bf16        F16 / BF16 files import as exactly the fp32 values of the half tensors
  bad_*                   not safetensors, no n_head, a transposed tensor, an unsupported activation, export of
                          a non-checkpoint, an unknown format: exit 2 with one `ztrain: error` line
"""
import json
import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
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
    subprocess.run([os.path.join(REPO, "tests/make_data.py"), os.path.join(REPO, "data/tiny"), "256", "40000"],
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
