#!/usr/bin/env python3
"""Tests of ztrain's byte-level BPE tokenizer (src/tokenizer*.c) through `ztrain prepare`.

Run from the repo root with an interpreter that has Hugging Face `tokenizers` and `regex`
(tests/run.sh uses .venv-ref/bin/python, made by scripts/setup-venv.sh). Prints one line per case,
`PASS name` or `FAIL name: reason`, and exits non-zero if any failed.

  (a) an independent BPE trainer written here (the rule documented in src/io/tokenizer.h) gives
      exactly the merges of ztrain's trained tokenizer; ztrain's encoding equals a GPT-2 style
      encoder written here with those merges;
  (b) decode(encode(x)) == x for random bytes (invalid UTF-8 included) and for the corpus, and
      the result does not depend on the read block size (streaming boundaries);
  (c) Hugging Face `tokenizers` trains a ByteLevel BPE tokenizer; ztrain loads its tokenizer.json
      (merges as pairs and as "a b" strings) and vocab.json + merges.txt, and its ids equal HF's.
"""
import glob
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile

ZT = os.environ.get("ZTRAIN", "./ztrain")
FAILS = 0


def report(name, ok, reason=""):
    global FAILS
    if ok:
        print(f"PASS {name}", flush=True)
    else:
        FAILS += 1
        print(f"FAIL {name}: {reason}", flush=True)


def run(args):
    p = subprocess.run([ZT] + args, capture_output=True)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def read_shard(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"ZTSHARD\0":
        raise ValueError(f"{path}: bad magic")
    version, width, vocab, eot, count = struct.unpack_from("<IIIIQ", data, 8)
    body = data[64:]
    if len(body) != count * width:
        raise ValueError(f"{path}: size mismatch")
    fmt = "<%d%s" % (count, "H" if width == 2 else "I")
    return list(struct.unpack(fmt, body)), vocab, eot


def read_zttok(path):
    lines = open(path, "rb").read().decode().split("\n")
    assert lines[0] == "ztrain-tokenizer 1", lines[0]
    vocab = int(lines[1].split()[1])
    eot = int(lines[2].split()[1])
    assert lines[3] == f"tokens {vocab}"
    toks = [b"" if l == "-" else bytes.fromhex(l) for l in lines[4:4 + vocab]]
    nm = int(lines[4 + vocab].split()[1])
    merges = [tuple(int(x) for x in l.split()) for l in lines[5 + vocab:5 + vocab + nm]]
    return vocab, eot, toks, merges


def ztrain_encode(tok, data, tmp, extra=()):
    src = os.path.join(tmp, "enc_in.txt")
    out = os.path.join(tmp, "enc_out.bin")
    with open(src, "wb") as f:
        f.write(data)
    rc, so, se = run(["prepare", "--tokenizer", tok, "--encode", src, "--ids-out", out] + list(extra))
    if rc != 0:
        raise RuntimeError(f"ztrain --encode exited {rc}: {se.strip()[-300:]}")
    return read_shard(out)[0]


def ztrain_decode(tok, ids_path, tmp):
    out = os.path.join(tmp, "dec_out.txt")
    rc, so, se = run(["prepare", "--tokenizer", tok, "--decode", ids_path, "--text-out", out])
    if rc != 0:
        raise RuntimeError(f"ztrain --decode exited {rc}: {se.strip()[-300:]}")
    return open(out, "rb").read()


# ---------------------------------------------------------------- an independent reference

GPT2_PAT = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def ref_train(docs, vocab_size, regex):
    """Plain BPE: recount all pairs every step (overlaps counted), most frequent pair wins, ties
    to the smallest (left id, right id); stop below count 2. Returns merges as id pairs."""
    pat = regex.compile(GPT2_PAT)
    counts = {}
    for d in docs:
        for w in pat.findall(d):
            b = tuple(w.encode("utf-8"))
            counts[b] = counts.get(b, 0) + 1
    words = counts
    merges = []
    while len(merges) < vocab_size - 257:
        pc = {}
        for w, c in words.items():
            for p in zip(w, w[1:]):
                pc[p] = pc.get(p, 0) + c
        if not pc:
            break
        best = min(pc, key=lambda p: (-pc[p], p))
        if pc[best] < 2:
            break
        new_id = 256 + len(merges)
        merges.append(best)
        nw = {}
        for w, c in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(new_id)
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            t = tuple(out)
            nw[t] = nw.get(t, 0) + c
        words = nw
    return merges


def ref_encode(text_bytes, toks, merges, regex):
    """GPT-2's encoder: per pre-token, repeatedly merge every occurrence of the lowest-rank pair."""
    pat = regex.compile(GPT2_PAT)
    rank = {(a, b): (r, c) for r, (a, b, c) in enumerate(merges)}
    byte_id = {}
    for i, t in enumerate(toks):
        if len(t) == 1 and t[0] not in byte_id:
            byte_id[t[0]] = i
    ids = []
    for w in pat.findall(text_bytes.decode("utf-8")):
        seq = [byte_id[b] for b in w.encode("utf-8")]
        while len(seq) > 1:
            pairs = [(rank[p][0], p) for p in zip(seq, seq[1:]) if p in rank]
            if not pairs:
                break
            r, best = min(pairs)
            c = rank[best][1]
            out, i = [], 0
            while i < len(seq):
                if i + 1 < len(seq) and (seq[i], seq[i + 1]) == best:
                    out.append(c)
                    i += 2
                else:
                    out.append(seq[i])
                    i += 1
            seq = out
        ids.extend(seq)
    return ids


def gpt2_unicode_to_byte():
    """GPT-2's bytes_to_unicode, inverted (written from its definition)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    m, n = {}, 0
    for b in range(256):
        if b in keep:
            m[chr(b)] = b
        else:
            m[chr(256 + n)] = b
            n += 1
    return m


# ---------------------------------------------------------------- test data

TRICKY = (
    "Hello world! I'm here, they're there; we'VE 'll don't can't.\n"
    "Numbers: 12345 3.14159 1,000,000 ٣٤ Ⅻ ½ 2nd\n"
    "Spaces:   three   and\ttabs\t\tand trailing   \n\n\n"
    "Unicode: naïve café Ελληνικά русский текст 中文字符 日本語のテキスト 한국어\n"
    "Combining: e\u0301 a\u0308 emoji 🙂👍🏽 🇫🇷 nbsp:\u00a0x ideographic:\u3000y\n"
    "Symbols: --- === *** #include <stdio.h> x+=1; a->b; ''' \"\"\" ```\n"
    "  indented line\n    more indented\r\nwindows line\r\n"
    "End without newline   "
)


def make_corpus(tmp):
    """A few documents: license texts from /usr/share/common-licenses plus generated text."""
    files = []
    lic = sorted(glob.glob("/usr/share/common-licenses/*"))
    lic = [p for p in lic if os.path.isfile(p)]
    rng = random.Random(1234)
    words = "the of and to in a is that for it as was with be by on not he this are or his from at which".split()
    for k in range(3):
        parts = []
        for p in lic[k::3][:3]:
            parts.append(open(p, "rb").read().decode("utf-8", errors="replace"))
        parts.append(TRICKY)
        parts.append(" ".join(rng.choice(words) for _ in range(2000)))
        path = os.path.join(tmp, f"doc{k}.txt")
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(parts))
        files.append(path)
    return files


def tricky_text(rng, n):
    """Random mixtures of what the pre-tokenizer regex distinguishes: every White_Space character and
    some look-alikes that are not, contractions in both cases, letters/marks/digits of several
    scripts, punctuation, emoji, runs of spaces before letters/punctuation/line ends."""
    ws = ["\t", "\n", "\x0b", "\x0c", "\r", " ", "\x85", "\xa0", "\u1680", "\u2000", "\u2005", "\u200a",
          "\u2028", "\u2029", "\u202f", "\u205f", "\u3000"]
    not_ws = ["\x1c", "\x1f", "\u180e", "\u200b", "\ufeff", "\x00", "\x7f"]
    frags = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'RE", "'x", "'", "don't", "hello", "World",
             "naïve", "Ελλάδα", "русский", "中文", "日本語", "한국어", "e\u0301", "\u0308", "123", "٣٤",
             "Ⅻ", "½", "3.14", "--", "!?", "#", "<|endoftext|>", "🙂", "👍🏽", "🇫🇷", "a", "Z", "_", "\\"]
    out = []
    for _ in range(n):
        k = rng.random()
        if k < 0.35:
            out.append("".join(rng.choice(ws) for _ in range(rng.randrange(1, 4))))
        elif k < 0.42:
            out.append(rng.choice(not_ws))
        else:
            out.append(rng.choice(frags))
    return "".join(out)


def random_bytes(rng, n):
    """Random bytes with valid UTF-8 pieces, invalid sequences, NULs and cut multi-byte chars."""
    out = bytearray()
    pieces = ["abc ", "é", "中", "🙂", "  ", "\n", "'s", "123", "\u00a0", "Ω"]
    while len(out) < n:
        k = rng.random()
        if k < 0.3:
            out += bytes(rng.randrange(256) for _ in range(rng.randrange(1, 8)))
        elif k < 0.4:
            out += rng.choice([b"\xc3", b"\xe4\xb8", b"\xf0\x9f\x99", b"\x80\x80", b"\xff", b"\x00", b"\xed\xa0\x80"])
        else:
            out += rng.choice(pieces).encode()
    return bytes(out[:n])


# ---------------------------------------------------------------- cases

def main():
    if not os.access(ZT, os.X_OK):
        report("ztrain_binary", False, f"{ZT} not found or not executable (build with make first)")
        return
    try:
        import regex
    except ImportError as e:
        regex = None
        regex_err = f"python module 'regex' is missing ({e}); run scripts/setup-venv.sh and use .venv-ref/bin/python"
    try:
        import tokenizers
    except ImportError as e:
        tokenizers = None
        tok_err = f"python module 'tokenizers' is missing ({e}); run scripts/setup-venv.sh and use .venv-ref/bin/python"

    tmp = tempfile.mkdtemp(prefix="zt-tok-")
    try:
        files = make_corpus(tmp)
        docs = [open(p, encoding="utf-8").read() for p in files]
        corpus_bytes = b"".join(open(p, "rb").read() for p in files)
        V = 700

        # (a) training against the independent trainer; small read blocks exercise the streaming split
        out1, out2 = os.path.join(tmp, "o1"), os.path.join(tmp, "o2")
        args = sum((["--input", p] for p in files), [])
        rc, so, se = run(["prepare"] + args + ["--vocab-size", str(V), "--val-fraction", "0", "--out-dir", out1,
                                               "--read-kb", "1"])
        tok1 = os.path.join(out1, "tokenizer.zttok")
        if rc != 0 or not os.path.exists(tok1):
            report("train_runs", False, f"exit {rc}: {se.strip()[-300:]}")
            return
        report("train_runs", True)
        vocab, eot, toks, merges = read_zttok(tok1)
        ok = vocab == V and eot == V - 1 and toks[eot] == b"<|endoftext|>" and len(merges) == V - 257
        report("train_vocab_layout", ok, f"vocab {vocab}, eot {eot}, merges {len(merges)} (expected {V}, {V-1}, {V-257})")
        if regex is None:
            report("train_merges_equal_reference", False, regex_err)
        else:
            ref = ref_train(docs, V, regex)
            got = [(a, b) for a, b, c in merges]
            ids_ok = all(c == 256 + i for i, (a, b, c) in enumerate(merges))
            if got == ref and ids_ok:
                report("train_merges_equal_reference", True)
            else:
                i = next((i for i in range(min(len(got), len(ref))) if got[i] != ref[i]), min(len(got), len(ref)))
                show = lambda m: repr(toks[m[0]] + b"|" + toks[m[1]]) if m[0] < len(toks) and m[1] < len(toks) else str(m)
                report("train_merges_equal_reference", False,
                       f"{len(got)} vs {len(ref)} merges, first difference at rank {i}: ztrain "
                       f"{show(got[i]) if i < len(got) else '-'} reference {show(ref[i]) if i < len(ref) else '-'}")

        rc, so, se = run(["prepare"] + args + ["--vocab-size", str(V), "--val-fraction", "0", "--out-dir", out2])
        same = rc == 0 and open(tok1, "rb").read() == open(os.path.join(out2, "tokenizer.zttok"), "rb").read()
        report("train_independent_of_read_block", same, f"exit {rc}; tokenizer differs between --read-kb 1 and default")

        # encoding against the reference encoder
        text = (TRICKY + "\n" + docs[0][:20000]).encode()
        ids = ztrain_encode(tok1, text, tmp)
        if regex is None:
            report("encode_equals_reference", False, regex_err)
        else:
            ref_ids = ref_encode(text, toks, merges, regex)
            i = next((i for i in range(min(len(ids), len(ref_ids))) if ids[i] != ref_ids[i]), None)
            report("encode_equals_reference", ids == ref_ids,
                   f"{len(ids)} vs {len(ref_ids)} ids, first difference at {i}")
        ids_small = ztrain_encode(tok1, text, tmp, ["--read-kb", "1"])
        report("encode_independent_of_read_block", ids_small == ids, "ids differ with --read-kb 1")

        # the pre-tokenizer against the GPT-2 regex (python `regex`) and HF's ByteLevel pre-tokenizer
        ptext = tricky_text(random.Random(11), 20000)
        pin = os.path.join(tmp, "pre.txt")
        with open(pin, "w", encoding="utf-8", newline="") as f:
            f.write(ptext)
        pre = {}
        for blk in ["1024", "1"]:
            pout = os.path.join(tmp, "pre.out")
            rc, so, se = run(["prepare", "--pretokenize", pin, "--text-out", pout, "--read-kb", blk])
            pre[blk] = [bytes.fromhex(l) for l in open(pout).read().split("\n")[:-1]] if rc == 0 else None
        ok = pre["1024"] is not None and b"".join(pre["1024"]) == ptext.encode()
        report("pretokenize_covers_text", ok, "pre-tokens do not join back to the text")
        report("pretokenize_independent_of_read_block", pre["1024"] == pre["1"], "pre-tokens differ with --read-kb 1")
        refs = {}
        if regex is not None:
            refs["regex"] = [w.encode() for w in regex.findall(GPT2_PAT, ptext)]
        if tokenizers is not None:
            from tokenizers import pre_tokenizers
            u2b = gpt2_unicode_to_byte()
            refs["hf"] = [bytes(u2b[c] for c in w) for w, _ in
                          pre_tokenizers.ByteLevel(add_prefix_space=False).pre_tokenize_str(ptext)]
        for name in ["regex", "hf"]:
            case = f"pretokenize_equals_{name}"
            if name not in refs:
                report(case, False, regex_err if name == "regex" else tok_err)
                continue
            got, want = pre["1024"] or [], refs[name]
            i = next((i for i in range(min(len(got), len(want))) if got[i] != want[i]), None)
            report(case, got == want, f"{len(got)} vs {len(want)} pre-tokens, first difference at {i}"
                   + (f": ztrain {got[i:i+3]} {name} {want[i:i+3]}" if i is not None else ""))

        # (b) round trips
        rng = random.Random(7)
        for name, data, extra in [("roundtrip_random_bytes", random_bytes(rng, 300000), []),
                                  ("roundtrip_random_bytes_small_blocks", random_bytes(rng, 100000), ["--read-kb", "1"]),
                                  ("roundtrip_corpus", corpus_bytes, []),
                                  ("roundtrip_empty", b"", []),
                                  ("roundtrip_long_run", b"a" * 3000000 + b" " * 5000 + b"\xff" * 1000, [])]:
            try:
                ids = ztrain_encode(tok1, data, tmp, extra)
                back = ztrain_decode(tok1, os.path.join(tmp, "enc_out.bin"), tmp)
                bad = next((i for i in range(min(len(back), len(data))) if back[i] != data[i]), None)
                report(name, back == data and all(i < V for i in ids),
                       f"decoded {len(back)} bytes of {len(data)}, first difference at {bad}")
            except Exception as e:  # noqa: BLE001
                report(name, False, str(e))

        # (c) Hugging Face tokenizers
        if tokenizers is None:
            for n in ["hf_tokenizer_json_pairs", "hf_tokenizer_json_strings_gpt2_fields", "hf_vocab_merges",
                      "hf_vocab_merges_flag", "hf_resaved_zttok", "hf_decode"]:
                report(n, False, tok_err)
        else:
            hf_cases(tmp, files, docs)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def hf_cases(tmp, files, docs):
    from tokenizers import ByteLevelBPETokenizer
    hf = ByteLevelBPETokenizer()
    hf.train(files, vocab_size=900, min_frequency=2, special_tokens=["<|endoftext|>"], show_progress=False)
    d = os.path.join(tmp, "hf")
    os.makedirs(d)
    tj = os.path.join(d, "tokenizer.json")
    hf.save(tj)
    hf.save_model(d)  # vocab.json, merges.txt
    # the other merges spelling in tokenizer.json: newer tokenizers write ["a", "b"], older "a b"
    j = json.load(open(tj, encoding="utf-8"))
    m = j["model"]["merges"]
    pairs = [x if isinstance(x, list) else x.split(" ") for x in m]
    j_pairs, j_str = json.loads(json.dumps(j)), json.loads(json.dumps(j))
    j_pairs["model"]["merges"] = pairs
    j_str["model"]["merges"] = [" ".join(p) for p in pairs]
    # the field values of GPT-2's own tokenizer.json (openai-community/gpt2), which newer tokenizers write as null
    j_str["model"].update({"continuing_subword_prefix": "", "end_of_word_suffix": "", "dropout": None,
                           "unk_token": None, "fuse_unk": False, "byte_fallback": False})
    tj_pairs, tj_str = os.path.join(d, "pairs.json"), os.path.join(d, "strings.json")
    json.dump(j_pairs, open(tj_pairs, "w", encoding="utf-8"), ensure_ascii=False)
    json.dump(j_str, open(tj_str, "w", encoding="utf-8"), ensure_ascii=True)  # \u escapes too

    text = TRICKY + "\n" + docs[1][:30000] + "\n" + "".join(chr(c) for c in range(0x20, 0x800) if chr(c).isprintable())
    want = hf.encode(text).ids
    data = text.encode("utf-8")

    def check(name, tok, extra=()):
        try:
            got = ztrain_encode(tok, data, tmp, extra)
            i = next((i for i in range(min(len(got), len(want))) if got[i] != want[i]), None)
            report(name, got == want, f"{len(got)} vs HF {len(want)} ids, first difference at {i}"
                   + (f": ztrain {got[i:i+5]} HF {want[i:i+5]}" if i is not None else ""))
        except Exception as e:  # noqa: BLE001
            report(name, False, str(e))

    check("hf_tokenizer_json_pairs", tj_pairs)
    check("hf_tokenizer_json_strings_gpt2_fields", tj_str)
    check("hf_vocab_merges", os.path.join(d, "vocab.json"))
    other = os.path.join(tmp, "elsewhere.txt")
    shutil.copy(os.path.join(d, "merges.txt"), other)
    os.remove(os.path.join(d, "merges.txt"))
    check("hf_vocab_merges_flag", os.path.join(d, "vocab.json"), ["--merges", other])
    # prepare with an HF tokenizer saves it as .zttok with HF's ids
    out = os.path.join(tmp, "hfprep")
    rc, so, se = run(["prepare", "--input", files[0], "--tokenizer", tj_pairs, "--out-dir", out])
    if rc != 0:
        report("hf_resaved_zttok", False, f"prepare exited {rc}: {se.strip()[-300:]}")
    else:
        check("hf_resaved_zttok", os.path.join(out, "tokenizer.zttok"))
    try:
        ztrain_encode(tj_pairs, data, tmp)
        back = ztrain_decode(tj_pairs, os.path.join(tmp, "enc_out.bin"), tmp)
        report("hf_decode", back == data and hf.decode(want) == text, "decode(encode(text)) != text")
    except Exception as e:  # noqa: BLE001
        report("hf_decode", False, str(e))


if __name__ == "__main__":
    main()
    sys.exit(1 if FAILS else 0)
