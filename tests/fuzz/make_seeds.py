#!/usr/bin/env python3
"""make_seeds.py — (re)makes the seed corpora under tests/fuzz/seeds/<target>/ from real files:
ztrain's own outputs (prepare: tokenizer + shards; train: a checkpoint; export: safetensors;
config: the resolved config) and Hugging Face's (tokenizers: tokenizer.json, vocab.json + merges.txt;
safetensors: every dtype). The seeds are committed; run this only to refresh them (regress_* files, the inputs of fixed bugs, are
kept):

    .venv-ref/bin/python tests/fuzz/make_seeds.py      (after `make`: needs ./ztrain)

Each seed is small (a few KB): libFuzzer mutates whole inputs, and a tiny model's files hold the
same structure as a big one's.
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import h5py
import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SEEDS = os.path.join(ROOT, "tests", "fuzz", "seeds")
ZT = os.path.join(ROOT, "ztrain")

TEXT = """The river town woke before the sun. Boats knocked against the pier, gulls argued over the
nets, and the baker's ovens breathed warm bread into the cold street. "We'll need more flour," said
the baker's daughter; she'd counted the sacks twice. Her brother didn't answer: he was reading the
ledger, 1,204 loaves sold in March, 987 in April, and he couldn't tell why.

At noon the ferry came in with 42 passengers, three goats and a crate of oranges from the south.
The ferryman's log said 11:58, the church clock said 12:03, and nobody cared which was right.

Children ran along the quay, shouting numbers -- 7, 8, 9! -- as they jumped the mooring ropes.
An old man mended a sail with blue thread; he'd done it for fifty years and he'll do it for ten more.
"""
UNICODE = ("Caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00fcber Stra\u00dfe \u0391\u03b8\u03ae\u03bd\u03b1 "
           "\u041c\u043e\u0441\u043a\u0432\u0430 \u6771\u4eac \u0968\u0966\u0968\u096a \u00bd \u2167 "
           "\U0001F600 tab\there\u00a0nbsp\u3000ideographic\u2028line\r\nCRLF   trailing   \n")


def run(*args, **kw):
    r = subprocess.run([str(a) for a in args], capture_output=True, text=True, cwd=ROOT, **kw)
    if r.returncode != 0:
        sys.exit(f"{' '.join(map(str, args))} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r.stdout


def put(target, name, data):
    d = os.path.join(SEEDS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode("utf-8"))


def read(path):
    with open(path, "rb") as f:
        return f.read()


def shard(vocab, eot, toks, width=None):
    width = width or (2 if vocab <= 65536 else 4)
    h = b"ZTSHARD\0" + struct.pack("<IIIIQ", 1, width, vocab, eot, len(toks)) + b"\0" * 32
    return h + struct.pack("<%d%s" % (len(toks), "H" if width == 2 else "I"), *toks)


def main():
    if not os.access(ZT, os.X_OK):
        sys.exit("make_seeds.py: build ./ztrain first (make)")
    tmp = tempfile.mkdtemp(prefix="zt-seeds.")
    try:
        make(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def make(tmp):
    for d, _, names in os.walk(SEEDS):  # the regression inputs of fixed bugs stay
        for n in names:
            if not n.startswith("regress_"):
                os.remove(os.path.join(d, n))
    text = os.path.join(tmp, "text.txt")
    with open(text, "w", encoding="utf-8") as f:
        f.write(TEXT + UNICODE)

    # ---- ztrain prepare: a trained .zttok and real shards
    prep = os.path.join(tmp, "prep")
    run(ZT, "prepare", "--input", text, "--vocab-size", 300, "--out-dir", prep, "--val-fraction", 0.2)
    put("tokenizer", "trained_300.zttok", read(os.path.join(prep, "tokenizer.zttok")))
    put("tokenizer_hf", "trained_300.zttok", read(os.path.join(prep, "tokenizer.zttok")))
    put("shard", "prepare_val.bin", read(os.path.join(prep, "val.bin")))
    put("shard", "u16_gpt2_vocab.bin", shard(50257, 50256, [50256, 15496, 11, 995, 0, 50256, 464]))
    put("shard", "u32_big_vocab.bin", shard(70000, 0xFFFFFFFF, [69999, 65536, 1, 0, 69998]))
    put("shard", "empty.bin", shard(512, 511, []))

    # ---- tokenizer training text
    put("tokenizer_train", "prose.txt", TEXT[:1200])
    put("tokenizer_train", "unicode.txt", UNICODE * 3)

    # ---- Hugging Face tokenizers: tokenizer.json (both merges spellings), vocab.json + NUL + merges.txt
    from tokenizers import ByteLevelBPETokenizer
    hf = ByteLevelBPETokenizer()
    hf.train([text], vocab_size=300, min_frequency=2, special_tokens=["<|endoftext|>"], show_progress=False)
    hfd = os.path.join(tmp, "hf")
    os.makedirs(hfd)
    tj = os.path.join(hfd, "tokenizer.json")
    hf.save(tj)
    hf.save_model(hfd)
    j = json.load(open(tj, encoding="utf-8"))
    pairs = [x if isinstance(x, list) else x.split(" ") for x in j["model"]["merges"]]
    j["model"]["merges"] = pairs
    put("tokenizer_hf", "tokenizer_pairs.json", json.dumps(j, ensure_ascii=False))
    j["model"]["merges"] = [" ".join(p) for p in pairs]
    j["model"].update({"continuing_subword_prefix": "", "end_of_word_suffix": "", "dropout": None,
                       "unk_token": None, "fuse_unk": False, "byte_fallback": False})
    put("tokenizer_hf", "tokenizer_strings_escaped.json", json.dumps(j, ensure_ascii=True))
    put("json", "tokenizer.json", json.dumps(j, ensure_ascii=True))
    vocab, merges = read(os.path.join(hfd, "vocab.json")), read(os.path.join(hfd, "merges.txt"))
    put("tokenizer_hf", "vocab_nul_merges", vocab + b"\0" + merges)
    put("json", "vocab.json", vocab)
    hfprep = os.path.join(tmp, "hfprep")
    run(ZT, "prepare", "--input", text, "--tokenizer", tj, "--out-dir", hfprep)
    put("tokenizer", "hf_ids_300.zttok", read(os.path.join(hfprep, "tokenizer.zttok")))

    # ---- config: the shipped configs, the resolved text a checkpoint stores, one with --set lines
    for name in sorted(os.listdir(os.path.join(ROOT, "inputs"))):
        if name.endswith(".cfg"):
            put("config", name, read(os.path.join(ROOT, "inputs", name)))
    resolved = run(ZT, "config", "-c", "inputs/tiny.cfg")
    put("config", "resolved_tiny.cfg", resolved)
    put("config", "tiny_with_sets", read(os.path.join(ROOT, "inputs", "tiny.cfg")) +
        b"\0train.lr=3e-4\nmodel.n_layer = 3\ncheckpoint.async=true\ndata.train=x.bin\ntrain.steps=3000000000L")

    # ---- a checkpoint of a tiny model (1 layer, width 4, vocab 2: a few KB), then its export
    data = os.path.join(tmp, "data")
    run(sys.executable, "tests/helpers/make_data.py", data, 2, 400)
    cfg = os.path.join(tmp, "ck.cfg")
    with open(cfg, "w") as f:
        f.write(f"""model = {{ n_layer = 1; n_head = 1; n_embd = 4; vocab_size = 2; block_size = 4; }};
train = {{ micro_batch = 1; global_batch = 1; seq_len = 4; steps = 1; threads = 1; }};
data = {{ train = "{data}/train.bin"; }};
run = {{ root = "{tmp}/runs"; session = "s"; name = "r"; }};
""")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    run(ZT, "train", "-c", cfg, env=env)
    ckdir = os.path.join(tmp, "runs", "s", "r", "checkpoints")
    ck = os.path.join(ckdir, sorted(n for n in os.listdir(ckdir) if n.endswith(".h5"))[-1])
    put("ckpt_raw", "tiny_step1.h5", read(ck))
    # h5py's spelling (variable-length strings), an interrupted save, an HDF5 file that is not ztrain's
    for name, complete, fmt in [("h5py_attrs_only.h5", 1, "ztrain"), ("incomplete.h5", 0, "ztrain"),
                                ("other_format.h5", 1, "other")]:
        p = os.path.join(tmp, name)
        with h5py.File(ck, "r") as src, h5py.File(p, "w") as dst:
            for k, v in src.attrs.items():
                dst.attrs[k] = v.decode() if isinstance(v, bytes) else v
            dst.attrs["complete"] = np.int32(complete)
            dst.attrs["format"] = fmt
        put("ckpt_raw", name, read(p))
    ckpt_edits()
    hashmap_programs()
    exp = os.path.join(tmp, "export")
    run(ZT, "export", "--checkpoint", ck, "--format", "safetensors", "--out", exp)
    st = read(os.path.join(exp, "model.safetensors"))
    put("safetensors", "ztrain_export_tiny.safetensors", st)
    hl = struct.unpack("<Q", st[:8])[0]
    put("json", "safetensors_header.json", st[8:8 + hl])
    if os.path.exists(os.path.join(exp, "config.json")):
        put("json", "config.json", read(os.path.join(exp, "config.json")))

    # ---- safetensors from Hugging Face's library: every dtype ztrain converts, and some it refuses
    from safetensors.numpy import save_file
    tensors = {
        "f32": np.arange(6, dtype=np.float32).reshape(2, 3) / 7,
        "f16": np.array([1.5, -0.0, 65504, 6e-8], dtype=np.float16),
        "f64": np.array([[1e300], [-2.5]], dtype=np.float64),
        "i64": np.array([1, -2], dtype=np.int64),
        "u8_3d": np.zeros((1, 2, 2), dtype=np.uint8),
        "scalar": np.array(3.0, dtype=np.float32),
        "empty": np.zeros((0, 4), dtype=np.float32),
    }
    p = os.path.join(tmp, "hf.safetensors")
    save_file(tensors, p, metadata={"format": "pt"})
    put("safetensors", "hf_dtypes.safetensors", read(p))
    hdr = json.dumps({"bf": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]}}).encode()
    put("safetensors", "bf16.safetensors", struct.pack("<Q", len(hdr)) + hdr + b"\x80\x3f\x00\xc0")

    # ---- JSON: the escapes and numbers safetensors and tokenizer files never hold
    put("json", "escapes_numbers.json",
        '{"s": "a\\"b\\\\c\\/d\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00\\ud800 \\u0000", '
        '"n": [0, -0, 1.5e-3, -2E+10, 9007199254740993, 12345678901234567890, 1e400, -1e-400], '
        '"l": [true, false, null, [], {}, [[[]]]], "dup": 1, "dup": 2}')
    put("json", "index.json", json.dumps({"metadata": {"total_size": 496}, "weight_map": {
        "wte.weight": "model-00001-of-00002.safetensors", "h.0.ln_1.weight": "model-00002-of-00002.safetensors"}}))


def ckpt_edits():
    """fuzz_ckpt's inputs: edits of a valid checkpoint's root attributes (format in fuzz_ckpt.c)"""
    known = ["format", "version", "complete", "step", "samples_seen", "tokens_seen", "world_size", "loss_scale",
             "seed", "config", "created", "finite"]
    types = {"i32": 0, "i64": 1, "u64": 2, "f32": 3, "f64": 4, "i8": 5, "u16be": 6, "str": 7, "strpad": 8,
             "vstr": 9, "b8": 10, "vstr_utf8": 11, "str_utf8": 12}

    def edit(name, typ=None, value=None, space=0):
        sel = known.index(name) if name in known else len(known)
        out = bytes([sel]) + (bytes([len(name)]) + name.encode() if sel == len(known) else b"")
        if typ is None:
            return out + b"\0"  # delete
        out += bytes([types[typ] << 2 | 1, space])
        if typ in ("str", "strpad", "vstr", "vstr_utf8", "str_utf8"):
            v = value.encode()
            return out + (bytes([len(v)]) + v if len(v) < 255 else b"\xff" + struct.pack("<H", len(v)) + v)
        fmt = {"i32": "<i", "i64": "<q", "u64": "<Q", "f32": "<f", "f64": "<d", "i8": "<b", "u16be": ">H", "b8": "<B"}
        return out + struct.pack(fmt[typ], value)

    cfg = "model = { n_layer = 3; n_embd = 96; n_head = 3; };\ntrain = { lr = 1e-3; steps = 3000000000L; };\n"
    seeds = {
        "valid_unchanged": edit("x"),
        "h5py_vlen_strings": edit("format", "vstr", "ztrain") + edit("created", "vstr", "2026-01-01T00:00:00Z")
        + edit("config", "vstr", cfg),
        "fixed_config": edit("config", "str", cfg),
        "h5py_utf8_strings": edit("format", "vstr_utf8", "ztrain") + edit("config", "vstr_utf8", cfg),
        "fixed_utf8_format": edit("format", "str_utf8", "ztrain"),
        "nullpad_format": edit("format", "strpad", "ztrain"),
        "incomplete": edit("complete", "i32", 0),
        "newer_version": edit("version", "i32", 2),
        "step_f64_u16": edit("step", "f64", 1e3) + edit("world_size", "u16be", 4),
        "missing_seed_config": edit("seed") + edit("config"),
        "not_finite": edit("finite", "i32", 0),
        "bad_config": edit("config", "str", "model = { n_layer = 0; };\nbogus = 1;"),
    }
    for name, data in seeds.items():
        put("ckpt", name, data)


def hashmap_programs():
    """fuzz_hashmap's inputs: operation programs (format in fuzz_hashmap.c)"""
    def key(b):
        return bytes([len(b)]) + b
    val = struct.pack("<Q", 7)
    prog = bytes([0])  # the map's size byte
    for i in range(40):  # short and 12-byte inline keys, then growth
        prog += bytes([0]) + key(b"w%d" % i + b"x" * (i % 14)) + struct.pack("<Q", i)
    prog += bytes([7, 1]) + key(b"w3xxx") + bytes([1]) + key(b"absent") + bytes([7])
    put("hashmap", "grow_inline_keys", prog)
    prog = bytes([5])
    for i in range(12):  # long keys in the arena, u64 keys, a filter, a clear
        prog += bytes([6, i]) + bytes([65 + i]) * (100 + i) + struct.pack("<Q", i)
        prog += bytes([2]) + struct.pack("<Q", i * 0x100000001) + struct.pack("<Q", i + 100)
    prog += bytes([7, 4, 1, 7, 3]) + struct.pack("<Q", 0x100000001) + bytes([5, 7, 0]) + key(b"after") + val + bytes([7])
    put("hashmap", "arena_u64_filter_clear", prog)


if __name__ == "__main__":
    main()
