#!/usr/bin/env python3
# test: long
"""test_export_llama.py — `ztrain import` / `ztrain export` of the Llama family (LlamaForCausalLM, MistralForCausalLM,
Qwen2ForCausalLM) against transformers.

Run from the repository root with the reference venv (scripts/setup-venv.sh), after make (ztrain and
build/tests/model_dump):
    .venv-ref/bin/python tests/e2e/test_export_llama.py
Prints "PASS name (numbers)" / "FAIL name: reason" lines; exits non-zero if any failed.

Models: tiny random models built and saved by transformers (save_pretrained, safetensors; RMSNorm weights and biases
moved away from 1 / 0 so that a swapped tensor shows):
  llama_gqa     Llama, 4 query / 2 key-value heads, V 97 (-> Vp 128), fp32, one file
  llama3_bf16   Llama 3 rotary scaling (rope_type llama3, theta 5e5), saved as bf16
  mistral_fp16  Mistral, multi-query (1 key-value head), saved as fp16 in several shards (max_shard_size 40KB,
                model.safetensors.index.json); exported with --max-shard-size 40KB
  qwen2_bias    Qwen2 (q, k, v biases, eps 1e-6, theta 1e6), fp32
  qwen2_tied    Qwen2 with tie_word_embeddings true (no lm_head tensor in the file), fp32
Per model:
  import_<m>     `ztrain import DIR` succeeds; the checkpoint's /model tensors are exactly (bit for bit) the file's
                 weights in ztrain's layout (tests/e2e/test_hf_llama.py's to_ztrain: q|k|v and gate|up fused and
                 transposed to (in, out), embedding / head padded with zero rows to Vp), the table of the stored
                 config has exactly those tensors, and the stored model.* keys are config.json's
  logits_<m>     ztrain's forward (build/tests/model_dump fwdbwd on the checkpoint's tensors and its stored model.*
                 keys) against transformers' (the directory loaded in fp32): rel <= 1e-5 (fp32 rounding)
  export_<m>     `ztrain export --dtype <the file's>`: every tensor equals the transformers-saved file's tensor
                 bit for bit (names, dtype, shape); config.json's model fields equal the original's
  export_hf_<m>  AutoModelForCausalLM.from_pretrained(export): the family's class, nothing missing / unexpected,
                 torch_dtype "auto" gives the export's dtype, logits equal the original model's
  roundtrip_<m>  import of the export == the first import, every /model tensor bit for bit
Layouts: export_layout_switch writes one --out as model.safetensors, then sharded (--max-shard-size 20KB), then
  single again: only the current layout's entry file is left (model.safetensors would shadow a new index in
  transformers' loader), each loads with the same logits; export_gpt2_sharded: GPT-2 shards the same way and
  GPT2LMHeadModel loads it.
Presets: `ztrain train -c inputs/llama-tiny.cfg --set train.steps=20` (and qwen2-tiny) runs and its loss falls
  (mean of the last 3 steps below the first 3 by > 0.05); the trained Llama exported loads in transformers with
  ztrain's logits (rel <= 1e-5).
Bad input, each: exit 2, one `ztrain: error` line naming the field / tensor / file, and nothing written (--out does
  not exist afterwards): Mistral sliding_window 16 < max_position_embeddings, Qwen2 use_sliding_window true,
  rope_scaling linear / yarn / llama3 on Mistral / an unknown llama3 parameter, attention_bias and mlp_bias true on
  Llama, hidden_act gelu, head_dim != hidden_size / heads, an unknown config field, quantization_config, an
  architectures entry of another head, a missing tensor, a tensor of the wrong shape, an extra tensor, a tied
  lm_head that differs from the embedding, a truncated safetensors file, an index.json naming a missing shard, a
  Llama directory without config.json; export of descriptions transformers' classes cannot hold (llama with
  model.bias = all, gpt2 with model.norm = rmsnorm) and a bad --max-shard-size.
"""
import copy
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "helpers"))
import hf_ref_common as common  # noqa: E402
from hf_ref_common import REPO, parse_table, rel_err, report_fail, report_pass, run_dump, write_tokens  # noqa: E402

common.require_imports("export_llama_imports", "numpy/torch/transformers/h5py/safetensors",
                       "create the venv with scripts/setup-venv.sh", extra=("h5py", "safetensors"))
import h5py  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from safetensors.numpy import load_file, save_file  # noqa: E402
from safetensors.torch import load_file as load_pt  # noqa: E402
from transformers import (AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM, MistralConfig,  # noqa: E402
                          MistralForCausalLM, Qwen2Config, Qwen2ForCausalLM)
from transformers.utils import logging as hf_logging  # noqa: E402

hf_logging.set_verbosity_error()
hf_logging.disable_progress_bar()
ZT = os.path.join(REPO, "ztrain")
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
TOL = 1e-5
TORCH = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
FAMILIES = {"llama": (LlamaConfig, LlamaForCausalLM), "mistral": (MistralConfig, MistralForCausalLM),
            "qwen2": (Qwen2Config, Qwen2ForCausalLM)}
# config.json's fields that define the model: the export must write the original's values
MODEL_FIELDS = ("architectures", "model_type", "hidden_size", "num_hidden_layers", "num_attention_heads",
                "num_key_value_heads", "intermediate_size", "vocab_size", "max_position_embeddings", "rms_norm_eps",
                "rope_theta", "rope_scaling", "tie_word_embeddings", "hidden_act", "attention_bias", "mlp_bias",
                "use_sliding_window", "torch_dtype", "initializer_range")


def zt(*args):
    p = subprocess.run([ZT, *args], cwd=REPO, env=ENV, capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout + p.stderr


def report(ok, name, msg):
    (report_pass if ok else report_fail)(name, msg)


def one_error(name, want, rc, out, must_not_exist):
    lines = [l for l in out.splitlines() if "ztrain: error" in l]
    left = os.path.exists(must_not_exist)
    ok = rc == 2 and len(lines) == 1 and want in lines[0] and not left
    report(ok, name, (lines[0][:220] if lines else f"exit {rc}: {out.strip()[-200:]}")
           + ("" if not left else f" (but {must_not_exist} was written)"))


# ----------------------------------------------------------------------------------- the models

def hf_config(sh):
    cfg_cls, _ = FAMILIES[sh["family"]]
    kw = dict(vocab_size=sh["V"], hidden_size=sh["C"], intermediate_size=sh["I"], num_hidden_layers=sh["L"],
              num_attention_heads=sh["H"], num_key_value_heads=sh["KV"], max_position_embeddings=sh["maxT"],
              rms_norm_eps=sh["eps"], rope_theta=sh["theta"], tie_word_embeddings=sh.get("tied", False),
              hidden_act="silu", attention_dropout=0.0)
    if sh["family"] == "llama":
        kw.update(attention_bias=False, mlp_bias=False, rope_scaling=sh.get("rope_scaling"))
    elif sh["family"] == "mistral":
        kw.update(sliding_window=None)
    else:
        kw.update(use_sliding_window=False)
    return cfg_cls(**kw)


def make_model(sh, seed):
    torch.manual_seed(seed)
    model = FAMILIES[sh["family"]][1](hf_config(sh))
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            elif name.endswith("bias"):
                p.copy_(0.05 * torch.randn(p.shape, generator=g))
            else:
                p.copy_((0.04 if ("o_proj" in name or "down_proj" in name) else 0.1) * torch.randn(p.shape, generator=g))
    return model.eval()


def save_model(model, d, dtype, shard=None):
    m = model if dtype == "fp32" else copy.deepcopy(model).to(TORCH[dtype])
    kw = {"safe_serialization": True}
    if shard:
        kw["max_shard_size"] = shard
    m.save_pretrained(d, **kw)


def to_ztrain(get, sh, Vp):
    """{ztrain tensor name: fp32 array in ztrain's layout} from get(hf name) (test_hf_llama.py's mapping)"""
    V, C = sh["V"], sh["C"]
    pad = lambda a: np.concatenate([a, np.zeros((Vp - V, C), a.dtype)])  # noqa: E731
    out = {"wte.weight": pad(get("model.embed_tokens.weight")), "ln_f.weight": get("model.norm.weight")}
    if not sh.get("tied"):
        out["lm_head.weight"] = pad(get("lm_head.weight"))
    for l in range(sh["L"]):
        p, a = f"model.layers.{l}.", f"model.layers.{l}.self_attn."
        out[f"h.{l}.ln_1.weight"] = get(p + "input_layernorm.weight")
        out[f"h.{l}.attn.c_attn.weight"] = np.concatenate([get(a + x + "_proj.weight") for x in "qkv"]).T
        if sh["family"] == "qwen2":
            out[f"h.{l}.attn.c_attn.bias"] = np.concatenate([get(a + x + "_proj.bias") for x in "qkv"])
        out[f"h.{l}.attn.c_proj.weight"] = get(a + "o_proj.weight").T
        out[f"h.{l}.ln_2.weight"] = get(p + "post_attention_layernorm.weight")
        out[f"h.{l}.mlp.c_fc.weight"] = np.concatenate([get(p + "mlp.gate_proj.weight"),
                                                        get(p + "mlp.up_proj.weight")]).T
        out[f"h.{l}.mlp.c_proj.weight"] = get(p + "mlp.down_proj.weight").T
    return {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in out.items()}


def bits(t):
    """a tensor's bit patterns (integers of its element size): equal bits, not equal values"""
    return t.contiguous().view(torch.int32 if t.element_size() == 4 else torch.int16)


def st_tensors(d):
    """every tensor of a save_pretrained directory (model.safetensors or the index's shards), as torch tensors"""
    idx = os.path.join(d, "model.safetensors.index.json")
    if os.path.exists(os.path.join(d, "model.safetensors")):
        return load_pt(os.path.join(d, "model.safetensors"))
    out = {}
    for f in sorted(set(json.load(open(idx))["weight_map"].values())):
        out.update(load_pt(os.path.join(d, f)))
    return out


# ----------------------------------------------------------------------------------- ztrain's side

def ckpt_model_keys(ck):
    """the model.* keys of the config a checkpoint stores: {key: value string}"""
    with h5py.File(ck, "r") as h:
        text = h.attrs["config"]
    text = text.decode() if isinstance(text, bytes) else str(text)
    grp = re.search(r"^model = \{(.*?)^\};", text, re.S | re.M).group(1)
    return {m.group(1): m.group(2).strip().strip('"') for m in re.finditer(r"^\s*(\w+) = (.*?);", grp, re.M)}


def dump_args(mk):
    args = ["--layers", mk["n_layer"], "--heads", mk["n_head"], "--embd", mk["n_embd"], "--vocab", mk["vocab_size"],
            "--padded-vocab", str(padded(mk)), "--block", mk["block_size"], "--threads", "2"]
    for k, v in mk.items():
        if k not in ("n_layer", "n_head", "n_embd", "vocab_size", "padded_vocab", "block_size", "init_std"):
            args += ["--set", f"model.{k}={v}"]
    return args


def padded(mk):
    v, p = int(mk["vocab_size"]), int(mk["padded_vocab"])
    return p if p else (v + 127) // 128 * 128


def h5_model(path):
    with h5py.File(path, "r") as h:
        return {k: h["model"][k][...] for k in h["model"]}


def ztrain_logits(ck, tokens, tmp):
    """ztrain's forward (model_dump) on the checkpoint's /model tensors, with its stored model.* keys"""
    mk = ckpt_model_keys(ck)
    ts, total = parse_table(run_dump(["table"] + dump_args(mk)))
    w = h5_model(ck)
    flat = np.concatenate([w[name].astype(np.float32).ravel() for name, *_ in ts])
    wp, tp, op = (os.path.join(tmp, x) for x in ("w.bin", "tok.bin", "out.bin"))
    flat.tofile(wp)
    write_tokens(tp, [(tokens, tokens)])
    B, T = tokens.shape
    run_dump(["fwdbwd"] + dump_args(mk) + ["--B", str(B), "--T", str(T), "--weights", wp, "--tokens", tp, "--out", op])
    Vp, V = padded(mk), int(mk["vocab_size"])
    return np.fromfile(op, dtype=np.float32)[1:1 + B * T * Vp].reshape(B, T, Vp)[:, :, :V]


def hf_logits(model, tokens):
    with torch.no_grad():
        return model(torch.from_numpy(tokens.astype(np.int64))).logits.float().numpy()


# ----------------------------------------------------------------------------------- cases

def expected_keys(sh):
    want = {"family": sh["family"], "n_kv_head": str(sh["KV"]), "intermediate_size": str(sh["I"]),
            "n_head": str(sh["H"]), "n_embd": str(sh["C"]), "n_layer": str(sh["L"]), "vocab_size": str(sh["V"]),
            "block_size": str(sh["maxT"]), "tie_embeddings": "true" if sh.get("tied") else "false",
            "rope_scaling": "llama3" if sh.get("rope_scaling") else "none"}
    return want


def check_import(tag, sh, d, ck, ref):
    mk = ckpt_model_keys(ck)
    Vp = padded(mk)
    want = to_ztrain(lambda n: ref[n].float().numpy(), sh, Vp)
    got = h5_model(ck)
    ts, _ = parse_table(run_dump(["table"] + dump_args(mk)))
    probs = [f"model.{k} = {mk.get(k)!r}, config.json says {v!r}" for k, v in expected_keys(sh).items()
             if mk.get(k) != v]
    for k, v in (("norm_eps", sh["eps"]), ("rope_theta", sh["theta"])):
        if float(mk[k]) != v:
            probs.append(f"model.{k} = {mk[k]} != {v}")
    if sorted(t[0] for t in ts) != sorted(got) or sorted(got) != sorted(want):
        probs.append(f"tensors: table {sorted(t[0] for t in ts)[:3]}..., checkpoint {sorted(got)[:3]}..., "
                     f"expected {sorted(want)[:3]}...")
    bad = [k for k in want if k in got and (got[k].shape != want[k].shape or got[k].tobytes() != want[k].tobytes())]
    if bad:
        probs.append(f"differ from the file's weights: {bad[:4]}")
    report(not probs, f"import_{tag}", f"{len(got)} tensors == the file's weights in ztrain's layout bit for bit "
           f"(Vp {Vp}, zero padding); model.* = config.json's ({mk['family']}, n_kv_head {mk['n_kv_head']}, "
           f"intermediate {mk['intermediate_size']}, tie {mk['tie_embeddings']}, rope_scaling {mk['rope_scaling']})"
           if not probs else "; ".join(probs[:4]))


def check_export(tag, sh, d, ck, exp, dtype, shard, tokens, ref_logits):
    args = ["export", "--checkpoint", ck, "--out", exp, "--dtype", dtype] + (["--max-shard-size", shard] if shard else [])
    rc, out = zt(*args)
    if rc != 0:
        report(False, f"export_{tag}", out.strip()[-300:])
        return False
    src, got = st_tensors(d), st_tensors(exp)
    bad = [k for k in src if k not in got or got[k].dtype != src[k].dtype or got[k].shape != src[k].shape
           or not torch.equal(bits(got[k]), bits(src[k]))]
    extra = sorted(set(got) - set(src))
    c0, c1 = json.load(open(os.path.join(d, "config.json"))), json.load(open(os.path.join(exp, "config.json")))
    cdiff = [f"{k}: {c1.get(k, '<none>')!r} != {c0.get(k, '<none>')!r}" for k in MODEL_FIELDS
             if k in c0 and c1.get(k) != c0[k]]
    nfiles = len([f for f in os.listdir(exp) if f.endswith(".safetensors")])
    sharded = os.path.exists(os.path.join(exp, "model.safetensors.index.json"))
    if shard and not (sharded and nfiles > 1):
        cdiff.append(f"--max-shard-size {shard}: {nfiles} files, index {sharded}")
    report(not bad and not extra and not cdiff, f"export_{tag}",
           f"{len(got)} tensors ({dtype}) == transformers' save_pretrained bit for bit"
           + (f", {nfiles} shards + model.safetensors.index.json" if sharded else ", model.safetensors")
           + "; config.json's model fields equal the original's" if not (bad or extra or cdiff)
           else f"differ {bad[:4]}, extra {extra[:4]}; config {cdiff[:4]}")
    try:
        m, info = AutoModelForCausalLM.from_pretrained(exp, torch_dtype=torch.float32, output_loading_info=True)
        auto = AutoModelForCausalLM.from_pretrained(exp, torch_dtype="auto")
        lg = hf_logits(m.eval(), tokens)
        diff = float(np.abs(lg - ref_logits).max())
        cls = type(m).__name__
        want_cls = FAMILIES[sh["family"]][1].__name__
        ok = (cls == want_cls and not info["missing_keys"] and not info["unexpected_keys"] and
              not info["mismatched_keys"] and auto.dtype == TORCH[dtype] and diff == 0.0)
        report(ok, f"export_hf_{tag}", f"{cls}.from_pretrained: missing {info['missing_keys']}, unexpected "
               f"{info['unexpected_keys']}; \"auto\" -> {auto.dtype}; logits max |diff| to the original {diff:.3g}")
    except Exception as e:
        report(False, f"export_hf_{tag}", f"{type(e).__name__}: {e}")
    return True


def run_case(tag, sh, dtype, shard, seed, tmp):
    base = os.path.join(tmp, tag)
    d, ck, exp, ck2 = (os.path.join(base, x) for x in ("hf", "imp.h5", "export", "back.h5"))
    save_model(make_model(sh, seed), d, dtype, shard)
    if shard and not os.path.exists(os.path.join(d, "model.safetensors.index.json")):
        report(False, f"import_{tag}", f"save_pretrained(max_shard_size={shard}) wrote no index: {os.listdir(d)}")
        return
    rc, out = zt("import", "--safetensors", d, "--out", ck)
    if rc != 0:
        report(False, f"import_{tag}", out.strip()[-300:])
        return
    ref = AutoModelForCausalLM.from_pretrained(d, torch_dtype=torch.float32).eval()
    check_import(tag, sh, d, ck, dict(ref.state_dict()))
    tokens = np.random.default_rng(seed).integers(0, sh["V"], size=(2, sh["maxT"]))
    a, b = ztrain_logits(ck, tokens, base), hf_logits(ref, tokens)
    r = rel_err(a, b)
    report(r <= TOL, f"logits_{tag}", f"ztrain vs transformers ({dtype} weights, fp32 compute) on (2, {sh['maxT']}): "
           f"rel {r:.2e} <= {TOL:g}, max abs {float(np.abs(a - b).max()):.2e} (max |logit| {np.abs(b).max():.2f})")
    if not check_export(tag, sh, d, ck, exp, dtype, shard, tokens, b):
        return
    rc, out = zt("import", "--safetensors", exp, "--out", ck2)
    if rc != 0:
        report(False, f"roundtrip_{tag}", out.strip()[-300:])
        return
    w1, w2 = h5_model(ck), h5_model(ck2)
    diff = [k for k in w1 if k not in w2 or w1[k].tobytes() != w2[k].tobytes()]
    same_cfg = ckpt_model_keys(ck) == ckpt_model_keys(ck2)
    report(not diff and same_cfg and set(w1) == set(w2), f"roundtrip_{tag}",
           f"import -> export -> import: {len(w1)} tensors bit for bit, model.* identical" if not diff and same_cfg
           else f"differ {diff[:4]}, model.* same {same_cfg}")


# ----------------------------------------------------------------------------------- presets

def train_preset(name, tmp):
    rc, out = zt("train", "-c", f"inputs/{name}.cfg", "--set", "train.steps=20", "--set", f"run.root={tmp}",
                 "--set", "checkpoint.every=20")
    losses = [float(m.group(1)) for m in re.finditer(r"^step \d+/20 \| loss ([0-9.]+)", out, re.M)]
    first, last = (np.mean(losses[:3]), np.mean(losses[-3:])) if len(losses) == 20 else (0, 0)
    ok = rc == 0 and len(losses) == 20 and last < first - 0.05
    report(ok, f"train_{name}", f"20 steps: loss {losses[0]:.4f} -> {losses[-1]:.4f} (first 3 {first:.4f}, last 3 "
           f"{last:.4f})" if ok else f"exit {rc}, {len(losses)} steps, {losses[:2]}..{losses[-2:]}: {out[-300:]}")
    cks = sorted(re.findall(r"^checkpoint (\S+\.h5)", out, re.M))
    return cks[-1] if ok and cks else None


def check_trained_export(name, ck, tmp):
    exp = os.path.join(tmp, name + "_export")
    rc, out = zt("export", "--checkpoint", ck, "--out", exp)
    if rc != 0:
        report(False, f"trained_export_{name}", out.strip()[-300:])
        return
    tokens = np.random.default_rng(5).integers(0, 256, size=(2, 32))
    m = AutoModelForCausalLM.from_pretrained(exp, torch_dtype=torch.float32).eval()
    a, b = ztrain_logits(ck, tokens, tmp), hf_logits(m, tokens)
    r = rel_err(a, b)
    report(r <= TOL, f"trained_export_{name}", f"the trained {type(m).__name__} in transformers: logits rel {r:.2e} "
           f"<= {TOL:g} vs ztrain's forward on the checkpoint")


# ----------------------------------------------------------------------------------- layouts

def check_layouts(tmp):
    """one --out written single-file, then sharded, then single again: the other layout's entry file goes (a stale
    model.safetensors would shadow the new index in transformers' loader); GPT-2 shards the same way"""
    ck, d = os.path.join(tmp, "llama_gqa", "imp.h5"), os.path.join(tmp, "layout")
    single = os.path.join(d, "model.safetensors")
    index = os.path.join(d, "model.safetensors.index.json")
    tokens = np.random.default_rng(9).integers(0, 97, size=(1, 16))
    seen = []
    for shard in (None, "20KB", None):
        rc, out = zt("export", "--checkpoint", ck, "--out", d, *(["--max-shard-size", shard] if shard else []))
        m = AutoModelForCausalLM.from_pretrained(d, torch_dtype=torch.float32).eval() if rc == 0 else None
        seen.append((rc, os.path.exists(single), os.path.exists(index), m is not None and hf_logits(m, tokens)))
    ok = ([x[:3] for x in seen] == [(0, True, False), (0, False, True), (0, True, False)] and
          all(np.array_equal(seen[0][3], x[3]) for x in seen))
    report(ok, "export_layout_switch", "single -> sharded (20KB) -> single into one --out: only the current layout's "
           "entry file is left, transformers loads each with the same logits" if ok else
           f"(rc, model.safetensors, index) per export: {[x[:3] for x in seen]}")
    rc, out = zt("train", "-c", "inputs/tiny.cfg", "--set", "train.steps=1", "--set", "train.warmup_steps=0", "--set",
                 f"run.root={tmp}", "--set", "run.name=gpt2", "--set", "checkpoint.every=1", "--set", "eval.every=0")
    cks = re.findall(r"^checkpoint (\S+\.h5)", out, re.M)
    g1, g2 = os.path.join(tmp, "gpt2_single"), os.path.join(tmp, "gpt2_sharded")
    rc1, o1 = zt("export", "--checkpoint", cks[-1], "--out", g1) if cks else (1, out)
    rc2, o2 = zt("export", "--checkpoint", cks[-1], "--out", g2, "--max-shard-size", "100KB") if cks else (1, out)
    if rc1 or rc2:
        report(False, "export_gpt2_sharded", (o1 + o2).strip()[-300:])
        return
    a, b = st_tensors(g1), st_tensors(g2)
    n = len([f for f in os.listdir(g2) if f.endswith(".safetensors")])
    tok = np.random.default_rng(3).integers(0, 256, size=(1, 16))
    la = hf_logits(transformers.GPT2LMHeadModel.from_pretrained(g1).eval(), tok)
    lb = hf_logits(transformers.GPT2LMHeadModel.from_pretrained(g2).eval(), tok)
    ok = n > 1 and set(a) == set(b) and all(torch.equal(a[k], b[k]) for k in a) and np.array_equal(la, lb)
    report(ok, "export_gpt2_sharded", f"GPT-2 with --max-shard-size 100KB: {n} shards + index, the same tensors as "
           f"model.safetensors; GPT2LMHeadModel loads it with the same logits" if ok else f"{n} files, tensors "
           f"{sorted(set(a) ^ set(b))[:4]}")


# ----------------------------------------------------------------------------------- bad input

def variant(src, dst, cfg_edit=None, tensors_edit=None):
    """a copy of save_pretrained directory src with config.json edited and / or the tensors edited (one file)"""
    os.makedirs(dst)
    c = json.load(open(os.path.join(src, "config.json")))
    if cfg_edit:
        cfg_edit(c)
    json.dump(c, open(os.path.join(dst, "config.json"), "w"), indent=2)
    if tensors_edit:
        t = load_file(os.path.join(src, "model.safetensors"))
        tensors_edit(t)
        save_file(t, os.path.join(dst, "model.safetensors"), metadata={"format": "pt"})
    else:
        os.symlink(os.path.join(src, "model.safetensors"), os.path.join(dst, "model.safetensors"))
    return dst


def bad_imports(tmp):
    llama = os.path.join(tmp, "llama_gqa", "hf")
    mistral, qwen2 = os.path.join(tmp, "bad_mistral"), os.path.join(tmp, "bad_qwen2")
    save_model(make_model(dict(MISTRAL, maxT=32), 41), mistral, "fp32")
    save_model(make_model(QWEN2, 42), qwen2, "fp32")
    out = os.path.join(tmp, "bad_out", "x.h5")

    def setk(**kw):
        return lambda c: c.update(kw)

    def pop(name):
        return lambda t: t.pop(name)

    def transpose(name):
        return lambda t: t.update({name: np.ascontiguousarray(t[name].T)})

    cases = [
        ("bad_sliding_window", mistral, setk(sliding_window=16), None, "sliding_window = 16"),
        ("bad_use_sliding_window", qwen2, setk(use_sliding_window=True), None, "use_sliding_window = true"),
        ("bad_rope_linear", llama, setk(rope_scaling={"type": "linear", "factor": 2.0}), None,
         'rope_scaling type "linear"'),
        ("bad_rope_yarn", llama, setk(rope_scaling={"rope_type": "yarn", "factor": 4.0,
                                                    "original_max_position_embeddings": 16}), None,
         'rope_scaling type "yarn"'),
        ("bad_rope_llama3_mistral", mistral, setk(rope_scaling={
            "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
            "original_max_position_embeddings": 16}), None, 'rope_scaling type "llama3" on MistralForCausalLM'),
        ("bad_rope_llama3_param", llama, setk(rope_scaling={
            "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
            "original_max_position_embeddings": 16, "attention_factor": 2.0}), None, "rope_scaling.attention_factor"),
        ("bad_attention_bias", llama, setk(attention_bias=True), None, "attention_bias = true"),
        ("bad_mlp_bias", llama, setk(mlp_bias=True), None, "mlp_bias = true"),
        ("bad_hidden_act", llama, setk(hidden_act="gelu"), None, 'hidden_act "gelu"'),
        ("bad_head_dim", llama, setk(head_dim=32), None, "head_dim = 32"),
        ("bad_unknown_field", llama, setk(rope_parameters={"rope_type": "default"}), None,
         'field "rope_parameters" is not one ztrain implements for LlamaForCausalLM'),
        ("bad_quantization_config", llama, setk(quantization_config={"quant_method": "bitsandbytes"}), None,
         "quantization_config"),
        ("bad_architectures", llama, setk(architectures=["LlamaForSequenceClassification"]), None,
         'architectures ["LlamaForSequenceClassification"]'),
        ("bad_missing_tensor", llama, None, pop("model.layers.1.mlp.up_proj.weight"),
         "tensor model.layers.1.mlp.up_proj.weight is missing"),
        ("bad_tensor_shape", llama, None, transpose("model.layers.0.self_attn.k_proj.weight"),
         "tensor model.layers.0.self_attn.k_proj.weight has shape (64, 32) but config.json's model has (32, 64)"),
        ("bad_extra_tensor", llama, None,
         lambda t: t.update({"model.layers.0.self_attn.o_proj.bias": np.zeros(64, np.float32)}),
         "tensor model.layers.0.self_attn.o_proj.bias is not part of the model"),
        ("bad_tied_head_differs", qwen2, setk(tie_word_embeddings=True), None,
         "lm_head.weight differs from model.embed_tokens.weight"),
    ]
    for name, src, ce, te, want in cases:
        d = variant(src, os.path.join(tmp, name), ce, te)
        one_error(name, want, *zt("import", "--safetensors", d, "--out", out), out)

    # a truncated file: the last tensor's bytes cut short
    tr = os.path.join(tmp, "bad_truncated")
    os.makedirs(tr)
    shutil.copy(os.path.join(llama, "config.json"), tr)
    raw = open(os.path.join(llama, "model.safetensors"), "rb").read()
    open(os.path.join(tr, "model.safetensors"), "wb").write(raw[:len(raw) - 1000])
    one_error("bad_truncated", "truncated", *zt("import", "--safetensors", tr, "--out", out), out)
    # an index naming a shard that is not there
    sh = os.path.join(tmp, "bad_missing_shard")
    shutil.copytree(os.path.join(tmp, "mistral_fp16", "hf"), sh)
    shards = sorted(f for f in os.listdir(sh) if f.endswith(".safetensors"))
    os.unlink(os.path.join(sh, shards[-1]))
    one_error("bad_missing_shard", f"model.safetensors.index.json names {shards[-1]} in its weight_map",
              *zt("import", "--safetensors", sh, "--out", out), out)
    # tensors without their config.json
    nc = os.path.join(tmp, "bad_no_config")
    os.makedirs(nc)
    os.symlink(os.path.join(llama, "model.safetensors"), os.path.join(nc, "model.safetensors"))
    one_error("bad_no_config", "needs its config.json", *zt("import", "--safetensors", nc, "--out", out), out)


def bad_exports(tmp):
    out = os.path.join(tmp, "bad_export_out")
    for name, cfg, sets, want in (("bad_export_llama_bias", "inputs/llama-tiny.cfg", ["model.bias=all"],
                                   'model.bias = "all"'),
                                  ("bad_export_gpt2_rmsnorm", "inputs/tiny.cfg", ["model.norm=rmsnorm"], "model.norm")):
        args = ["train", "-c", cfg, "--set", "train.steps=1", "--set", "train.warmup_steps=0", "--set",
                f"run.root={tmp}", "--set", f"run.name={name}", "--set", "checkpoint.every=1", "--set", "eval.every=0"]
        for s in sets:
            args += ["--set", s]
        rc, o = zt(*args)
        cks = re.findall(r"^checkpoint (\S+\.h5)", o, re.M)
        if rc != 0 or not cks:
            report(False, name, f"training the checkpoint failed: {o.strip()[-300:]}")
            continue
        one_error(name, want, *zt("export", "--checkpoint", cks[-1], "--out", out), out)
    ck = os.path.join(tmp, "llama_gqa", "imp.h5")
    one_error("bad_max_shard_size", "--max-shard-size 5XB",
              *zt("export", "--checkpoint", ck, "--out", out, "--max-shard-size", "5XB"), out)


# ----------------------------------------------------------------------------------- main

BASE = dict(L=2, C=64, V=97, maxT=32, I=96, eps=1e-5, theta=10000.0)
LLAMA = dict(BASE, family="llama", H=4, KV=2)
LLAMA3 = dict(LLAMA, theta=500000.0, I=80, rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                                                             high_freq_factor=4.0, original_max_position_embeddings=16))
MISTRAL = dict(BASE, family="mistral", H=4, KV=1, C=48, I=112)
QWEN2 = dict(BASE, family="qwen2", H=4, KV=2, eps=1e-6, theta=1000000.0)
QWEN2_TIED = dict(QWEN2, tied=True, V=130)


def guarded(name, fn, *args):
    """fn(*args); a crash of a tool or of the comparison is a FAIL of name, and the run goes on"""
    try:
        return fn(*args)
    except Exception as e:
        report_fail(name, f"{type(e).__name__}: {e}")
        return None


def main():
    t0 = time.time()
    for b in (ZT, common.BIN):
        if not os.access(b, os.X_OK):
            report_fail("export_llama_binaries", f"{os.path.relpath(b, REPO)} not built (make)")
            return 1
    if not os.path.exists(os.path.join(REPO, "data/tiny/train.bin")):
        subprocess.run([sys.executable, os.path.join(REPO, "tests/helpers/make_data.py"),
                        os.path.join(REPO, "data/tiny"), "256", "40000"], check=True, capture_output=True)
    tmp = tempfile.mkdtemp(prefix="zt_export_llama.")
    cases = [("llama_gqa", LLAMA, "fp32", None, 31), ("llama3_bf16", LLAMA3, "bf16", None, 32),
             ("mistral_fp16", MISTRAL, "fp16", "40KB", 33), ("qwen2_bias", QWEN2, "fp32", None, 34),
             ("qwen2_tied", QWEN2_TIED, "fp32", None, 35)]
    try:
        for tag, sh, dtype, shard, seed in cases:
            guarded(f"case_{tag}", run_case, tag, sh, dtype, shard, seed, tmp)
        for name in ("llama-tiny", "qwen2-tiny"):
            ck = guarded(f"train_{name}", train_preset, name, tmp)
            if ck:
                guarded(f"trained_export_{name}", check_trained_export, name, ck, tmp)
        guarded("layouts", check_layouts, tmp)
        guarded("bad_imports", bad_imports, tmp)
        guarded("bad_exports", bad_exports, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"# test_export_llama: {time.time() - t0:.1f} s, transformers {transformers.__version__}, torch "
          f"{torch.__version__}", file=sys.stderr)
    return 1 if common.failures else 0


if __name__ == "__main__":
    sys.exit(main())
