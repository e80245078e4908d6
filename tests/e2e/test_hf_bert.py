#!/usr/bin/env python3
"""test_hf_bert.py — `ztrain import` / `ztrain export` of BertForMaskedLM and RobertaForMaskedLM against transformers.

Run from the repository root with the reference venv (scripts/setup-venv.sh), after make (ztrain):
    .venv-ref/bin/python tests/e2e/test_hf_bert.py
Prints "PASS name (numbers)" / "FAIL name: reason" lines; exits non-zero if any failed. Needs no forward pass:
the weights are compared, not the logits.

Models: tiny random models built and saved by transformers (tests/helpers/hf_bert_common.py's make_model, every
weight random so that a swapped tensor shows; save_pretrained, safetensors):
  bert            BERT, 2 layers, C 32, 4 heads, intermediate 48 (not 4C), V 100 (-> Vp 128), 64 positions, 2 token
                  types, pad 0, eps 1e-12, fp32, one file
  roberta         RoBERTa, pad 1 (positions from 2: block_size 62 of 64 rows), 1 token type, intermediate 128, eps 1e-5
  roberta_bf16    the same saved as bf16 in shards (max_shard_size 20KB + model.safetensors.index.json), exported with
                  --dtype bf16 --max-shard-size 20KB
Per model:
  import_<m>     `ztrain import DIR --set mlm.mask_id=4` succeeds; the checkpoint's /model tensors are exactly (bit for
                 bit) the file's weights in ztrain's layout (hf_bert_common.py's to_ztrain: q|k|v fused, every linear
                 transposed to (in, out), word embeddings and decoder bias padded with zeros to Vp) and nothing else;
                 the stored model.* keys are config.json's (block_size = max_position_embeddings - position_offset)
  export_<m>     `ztrain export`: the same tensor names as save_pretrained's file (the tied decoder left out, as it
                 leaves it), every tensor bit for bit; config.json's model fields equal the original's
  export_hf_<m>  AutoModelForMaskedLM.from_pretrained(export): the family's class, nothing missing or unexpected,
                 every parameter bitwise equal to the original model's (the decoder tied to the word embeddings)
  roundtrip_<m>  import of the export == the first import, every /model tensor bit for bit
Accepted extras (import_legacy_bert): the original BERT checkpoints' LayerNorm names (.gamma / .beta), a stored
  decoder weight and bias equal to the word embeddings and the head's bias, the position_ids buffer, the pooler and
  the next-sentence head (left out, and said so), chunk_size_feed_forward 2 and dropout 0.3: the same checkpoint.
Bad input, each: exit 2, one `ztrain: error` line naming the file, the field and its value (or the tensor), and
  nothing written: hidden_act relu, position_embedding_type relative_key, is_decoder, add_cross_attention,
  tie_word_embeddings false, an untied decoder (cls.predictions.decoder.weight stored with other values), an unknown
  field, an architectures entry of another head, a missing and an extra tensor, pad_token_id null, RoBERTa's
  max_position_embeddings leaving no position, no mlm.mask_id; export of descriptions the classes cannot hold
  (model.mlp = gelu (tanh), RoBERTa with another position_offset).
"""
import copy
import functools
import json
import os
import re
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "helpers"))
sys.path.insert(0, HERE)
import hf_ref_common as common  # noqa: E402
from hf_ref_common import REPO, report_fail  # noqa: E402

common.require_imports("hf_bert_imports", "numpy/torch/transformers/h5py/safetensors",
                       "create the venv with scripts/setup-venv.sh", extra=("h5py", "safetensors"))
import h5py  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import AutoModelForMaskedLM  # noqa: E402

# the ztrain runner and the file helpers of the Llama family's import / export test
from test_export_llama import (ZT, bits, ckpt_model_keys, guarded, h5_model, one_error, report,  # noqa: E402
                               st_tensors, variant, zt)
from hf_bert_common import make_model, to_ztrain, values  # noqa: E402

MASK = ["--set", "mlm.mask_id=4"]
BERT = dict(family="bert", L=2, H=4, C=32, I=48, V=100, Vp=128, maxT=64, types=2, pad=0, sep=-1, eps=1e-12)
ROBERTA = dict(BERT, family="roberta", I=128, maxT=62, types=1, pad=1, eps=1e-5)
# config.json's fields that define the model: the export must write the original's values
MODEL_FIELDS = ("architectures", "model_type", "hidden_size", "num_hidden_layers", "num_attention_heads",
                "intermediate_size", "vocab_size", "max_position_embeddings", "type_vocab_size", "layer_norm_eps",
                "hidden_act", "position_embedding_type", "pad_token_id", "initializer_range", "torch_dtype")


def expected_keys(sh):
    off = sh["pad"] + 1 if sh["family"] == "roberta" else 0
    return {"family": sh["family"], "n_layer": str(sh["L"]), "n_head": str(sh["H"]), "n_embd": str(sh["C"]),
            "intermediate_size": str(sh["I"]), "vocab_size": str(sh["V"]), "block_size": str(sh["maxT"]),
            "type_vocab_size": str(sh["types"]), "pad_id": str(sh["pad"]), "position_offset": str(off)}


def differing(a, b):
    """the names of two {name: array} whose arrays are not the same bit for bit (or that one of them lacks)"""
    return sorted(k for k in set(a) | set(b)
                  if k not in a or k not in b or a[k].shape != b[k].shape or a[k].tobytes() != b[k].tobytes())


def check_import(tag, sh, model, ck):
    """the checkpoint's /model == the HF weights in ztrain's layout, bit for bit; model.* == config.json's"""
    mk = ckpt_model_keys(ck)
    wrong = {k: mk.get(k) for k, v in expected_keys(sh).items() if mk.get(k) != v}
    if float(mk["norm_eps"]) != sh["eps"]:
        wrong["norm_eps"] = mk["norm_eps"]
    want = {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in to_ztrain(values(model), sh).items()}
    differ = differing(want, h5_model(ck))
    report(not wrong and not differ, f"import_{tag}",
           f"{len(want)} tensors == the file's weights in ztrain's layout bit for bit (Vp {sh['Vp']}, zero padding); "
           f"model.* = config.json's (block_size {mk['block_size']}, position_offset {mk['position_offset']}, pad_id "
           f"{mk['pad_id']}, token types {mk['type_vocab_size']})" if not (wrong or differ) else
           f"model.* not config.json's: {wrong}; tensors not the file's (or not in both): {differ[:4]}")


def same_bits(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(bits(a), bits(b))


def check_export(tag, d, ck, exp, model, args):
    """the export == save_pretrained's directory (tensors bit for bit, config.json's model fields); transformers loads
    it as the original model"""
    rc, out = zt("export", "--checkpoint", ck, "--out", exp, *args)
    if rc != 0:
        report(False, f"export_{tag}", out.strip()[-300:])
        return False
    want, got = st_tensors(d), st_tensors(exp)
    differ = sorted(k for k in set(want) | set(got) if k not in want or k not in got or not same_bits(want[k], got[k]))
    cfg = [json.load(open(os.path.join(x, "config.json"))) for x in (d, exp)]
    fields = [f"{k}: {cfg[1].get(k)!r} (original {cfg[0].get(k)!r})" for k in MODEL_FIELDS
              if cfg[0].get(k) != cfg[1].get(k)]
    report(not differ and not fields, f"export_{tag}",
           f"{len(got)} tensors, the names of save_pretrained's file (no decoder weight), bit for bit; config.json's "
           f"model fields equal the original's" if not (differ or fields) else f"tensors {differ[:4]}; {fields[:4]}")
    m, info = AutoModelForMaskedLM.from_pretrained(exp, torch_dtype="auto", output_loading_info=True)
    p0, p1 = dict(model.named_parameters()), dict(m.named_parameters())
    diff = [k for k in p0 if k not in p1 or not same_bits(p0[k], p1[k])]
    tied = m.get_output_embeddings().weight is m.get_input_embeddings().weight
    ok = (type(m) is type(model) and not any(info.values()) and not diff and len(p0) == len(p1) and tied)
    report(ok, f"export_hf_{tag}", f"{type(m).__name__}.from_pretrained: missing {info['missing_keys']}, unexpected "
           f"{info['unexpected_keys']}; {len(p1)} parameters, differing from the original's: {diff[:4]}; decoder tied "
           f"to the word embeddings: {tied}")
    return True


def check_roundtrip(tag, ck, exp, tmp):
    ck2 = os.path.join(tmp, f"{tag}_rt.h5")
    rc, out = zt("import", "--safetensors", exp, "--out", ck2, *MASK)
    differ = differing(h5_model(ck), h5_model(ck2)) if rc == 0 else None
    report(rc == 0 and not differ, f"roundtrip_{tag}", "import(export) == import, every tensor bit for bit"
           if rc == 0 else out.strip()[-300:] + (f"; differ {differ[:4]}" if differ else ""))


def run_case(tag, sh, seed, tmp, dtype=None, shard=None):
    d = os.path.join(tmp, tag, "hf")
    model = make_model(sh, seed)
    if dtype is not None:
        model = model.to(dtype)
    model.save_pretrained(d, safe_serialization=True, **({"max_shard_size": shard} if shard else {}))
    ck = os.path.join(tmp, tag, "imp.h5")
    rc, out = zt("import", "--safetensors", d, "--out", ck, *MASK)
    if rc != 0:
        report(False, f"import_{tag}", out.strip()[-300:])
        return None
    check_import(tag, sh, copy.deepcopy(model).float(), ck)
    args = (["--dtype", "bf16"] if dtype is not None else []) + (["--max-shard-size", shard] if shard else [])
    exp = os.path.join(tmp, tag, "exp")
    if check_export(tag, d, ck, exp, model, args):
        check_roundtrip(tag, ck, exp, tmp)
    return d


# ----------------------------------------------------------------------------------- accepted extras

def legacy(bert_dir, tmp):
    """BERT as the original checkpoints store it: LayerNorm .gamma / .beta, the decoder stored (equal), position_ids,
    the pooler and the next-sentence head; config.json with chunking and dropout"""
    def tensors(t):
        for k in [k for k in t if "LayerNorm" in k]:
            t[k.replace(".weight", ".gamma").replace(".bias", ".beta")] = t.pop(k)
        t["cls.predictions.decoder.weight"] = t["bert.embeddings.word_embeddings.weight"].copy()
        t["cls.predictions.decoder.bias"] = t["cls.predictions.bias"].copy()
        t["bert.embeddings.position_ids"] = np.arange(64, dtype=np.int64)[None]
        t["bert.pooler.dense.weight"] = np.ones((32, 32), np.float32)
        t["bert.pooler.dense.bias"] = np.ones(32, np.float32)
        t["cls.seq_relationship.weight"] = np.ones((2, 32), np.float32)
        t["cls.seq_relationship.bias"] = np.ones(2, np.float32)

    d = variant(bert_dir, os.path.join(tmp, "legacy_bert"),
                lambda c: c.update(chunk_size_feed_forward=2, hidden_dropout_prob=0.3,
                                   attention_probs_dropout_prob=0.3),
                tensors)
    ck = os.path.join(tmp, "legacy_bert.h5")
    rc, out = zt("import", "--safetensors", d, "--out", ck, *MASK)
    same = rc == 0 and not differing(h5_model(os.path.join(tmp, "bert", "imp.h5")), h5_model(ck))
    said = "4 pooler / next-sentence tensors left out" in out
    report(same and said, "import_legacy_bert", "gamma/beta names, a stored decoder weight and bias equal to the "
           "embeddings / head bias, position_ids, pooler and next-sentence head (said: 4 left out), chunking and "
           "dropout: the same checkpoint bit for bit" if same and said else out.strip()[-300:])


# ----------------------------------------------------------------------------------- bad input

def bad_imports(bert, roberta, tmp):
    out = os.path.join(tmp, "bad_out", "x.h5")

    def setk(**kw):
        return lambda c: c.update(kw)

    def untie(t):
        t["cls.predictions.decoder.weight"] = t["bert.embeddings.word_embeddings.weight"] + 1.0

    cases = [
        ("bad_hidden_act", bert, setk(hidden_act="relu"), None, 'config.json: hidden_act "relu": ztrain\'s encoders '
         'use the exact (erf) GELU, "gelu"'),
        ("bad_position_embedding_type", bert, setk(position_embedding_type="relative_key"), None,
         'position_embedding_type "relative_key"'),
        ("bad_is_decoder", bert, setk(is_decoder=True), None, "is_decoder = true"),
        ("bad_cross_attention", roberta, setk(add_cross_attention=True), None, "add_cross_attention = true"),
        ("bad_untied_config", bert, setk(tie_word_embeddings=False), None, "tie_word_embeddings = false"),
        ("bad_untied_decoder", bert, None, untie,
         "cls.predictions.decoder.weight differs from bert.embeddings.word_embeddings.weight"),
        ("bad_unknown_field", roberta, setk(use_rotary=True), None,
         'field "use_rotary" is not one ztrain implements for RobertaForMaskedLM'),
        ("bad_architectures", roberta, setk(architectures=["RobertaForSequenceClassification"]), None,
         'architectures ["RobertaForSequenceClassification"]'),
        ("bad_missing_tensor", bert, None, lambda t: t.pop("bert.encoder.layer.1.output.dense.bias"),
         "tensor bert.encoder.layer.1.output.dense.bias is missing"),
        ("bad_extra_tensor", bert, None,
         lambda t: t.update({"bert.encoder.layer.0.attention.self.distance_embedding.weight": np.zeros((127, 8),
                                                                                                   np.float32)}),
         "tensor bert.encoder.layer.0.attention.self.distance_embedding.weight is not part of the model"),
        ("bad_pad_null", roberta, setk(pad_token_id=None), None, "pad_token_id null"),
        ("bad_roberta_positions", roberta, setk(max_position_embeddings=2), None, "max_position_embeddings = 2"),
    ]
    for name, src, ce, te, want in cases:
        d = variant(src, os.path.join(tmp, name), ce, te)
        one_error(name, want, *zt("import", "--safetensors", d, "--out", out, *MASK), out)
    one_error("bad_no_mask_id", "--set mlm.mask_id=ID", *zt("import", "--safetensors", bert, "--out", out), out)


def edited_checkpoint(src, dst, edits):
    """a copy of checkpoint src whose stored config has model.KEY = VALUE for each (KEY, VALUE) of edits"""
    shutil.copy(src, dst)
    with h5py.File(dst, "r+") as h:
        dt = h.attrs.get_id("config").dtype
        text = h.attrs["config"]
        text = text.decode() if isinstance(text, bytes) else str(text)
        for k, v in edits:
            text = re.sub(rf"^(model = \{{.*?^  {k} = )[^;]*;", rf"\g<1>{v};", text, count=1, flags=re.S | re.M)
        h.attrs.create("config", text.encode() if dt.kind == "S" else text, dtype=dt)
    return dst


def bad_exports(tmp):
    out = os.path.join(tmp, "bad_export_out")
    for name, src, edits, want in (
            ("bad_export_tanh_gelu", "bert", [("mlp", '"gelu"')], "model.mlp = gelu (tanh)"),
            ("bad_export_roberta_offset", "roberta", [("position_offset", "0"), ("block_size", "64")],
             "model.position_offset = 0: transformers' RobertaForMaskedLM numbers positions from 2")):
        ck = edited_checkpoint(os.path.join(tmp, src, "imp.h5"), os.path.join(tmp, name + ".h5"), edits)
        one_error(name, want, *zt("export", "--checkpoint", ck, "--out", out), out)


# ----------------------------------------------------------------------------------- main

def main():
    t0 = time.time()
    if not os.access(ZT, os.X_OK):
        report_fail("hf_bert_binary", f"{os.path.relpath(ZT, REPO)} not built (make)")
        return 1
    tmp = tempfile.mkdtemp(prefix="zt_hf_bert.")
    try:
        cases = (("bert", BERT, 51, {}), ("roberta", ROBERTA, 52, {}),
                 ("roberta_bf16", ROBERTA, 53, dict(dtype=torch.bfloat16, shard="20KB")))
        dirs = [guarded(f"case_{tag}", functools.partial(run_case, tag, sh, seed, tmp, **kw))
                for tag, sh, seed, kw in cases]
        if dirs[0] and dirs[1]:
            for name, fn, args in (("legacy", legacy, (dirs[0], tmp)), ("bad_imports", bad_imports, (*dirs[:2], tmp)),
                                   ("bad_exports", bad_exports, (tmp,))):
                guarded(name, fn, *args)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    versions = f"transformers {transformers.__version__}, torch {torch.__version__}"
    print(f"# test_hf_bert: {time.time() - t0:.1f} s, {versions}", file=sys.stderr)
    return 1 if common.failures else 0


if __name__ == "__main__":
    sys.exit(main())
