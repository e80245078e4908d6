#!/usr/bin/env python3
# test: long
# test: alone
"""Tests of ztrain's Llama-family tokenizers (src/io/tokenizer*.c, util/unicode.c) against Hugging Face
`tokenizers`, through `ztrain prepare`.

Run from the repo root with .venv-ref/bin/python (scripts/setup-venv.sh). Prints `PASS name (details)`
or `FAIL name: reason` per case and exits non-zero if any failed. The tokenizer.json files are made
here by tests/helpers/make_tokenizers.py (shaped like Llama 2's in both layouts, Llama 3's and
Qwen2's; no model hub is reachable). For each:
  (a) ids: every text of a varied corpus (Latin with accents in both Unicode forms, Cyrillic, Greek,
      CJK, Hangul, Arabic, Devanagari, Thai; runs of spaces, tabs, newlines, \\r\\n; numbers of many
      lengths; emoji with skin tones, flags and ZWJ sequences; code; strings starting with spaces;
      upper-case contractions; combining marks for NFC) is one document of one `prepare` run, and the
      shard's ids equal HF's encode(text) (BOS included) with the document framing (Llama: BOS
      before each document; Qwen2: <|endoftext|> after each). Reported as "K/N texts identical". The
      empty string goes through --encode of an empty file;
  (b) the tokenizer.zttok that prepare writes encodes the whole corpus like the tokenizer.json and
      like HF, and the read block size (--read-kb 1) changes nothing;
  (c) decode: ztrain's decode of the shard equals HF's decode(ids, skip_special_tokens=False);
      random bytes (invalid UTF-8 included) come back from decode(encode(x)) as x after the
      template and the prefix space (NFC applied for Qwen2);
  (d) framing: BOS once per document, --eot-between-files, 4-byte tokens for ids >= 65536; and the
      shards and the saved .zttok in use: train the tiny model on them, `sample` with a text prompt
      (its ids as HF's, BOS included), `eval`;
  (e) bad tokenizer.json files (an unsupported normalizer, pre-tokenizer, model type or flag) exit 2
      with one line naming the field, and write nothing;
  (f) speed: tokens/s of each against the GPT-2 path on the same text, and no slowdown on long
      words and long runs of combining marks;
  (g) NFC: the generated tables are current, and text dense in what NFC changes equals HF's.
"""
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import unicodedata

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
import make_tokenizers  # noqa: E402

ZT = os.environ.get("ZTRAIN", "./ztrain")
FAILS = 0


def report(name, ok, reason=""):
    global FAILS
    if ok:
        print(f"PASS {name}" + (f" ({reason})" if reason else ""), flush=True)
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
    if len(data) != 64 + count * width:
        raise ValueError(f"{path}: size mismatch")
    return list(struct.unpack_from("<%d%s" % (count, "H" if width == 2 else "I"), data, 64)), width, vocab, eot


def zt_encode(tok, data, tmp, extra=()):
    src, out = os.path.join(tmp, "enc_in.txt"), os.path.join(tmp, "enc_out.bin")
    with open(src, "wb") as f:
        f.write(data)
    rc, so, se = run(["prepare", "--tokenizer", tok, "--encode", src, "--ids-out", out] + list(extra))
    if rc != 0:
        raise RuntimeError(f"ztrain --encode exited {rc}: {se.strip()[-300:]}")
    return read_shard(out)[0], so


def zt_decode(tok, shard, tmp):
    out = os.path.join(tmp, "dec_out.txt")
    rc, so, se = run(["prepare", "--tokenizer", tok, "--decode", shard, "--text-out", out])
    if rc != 0:
        raise RuntimeError(f"ztrain --decode exited {rc}: {se.strip()[-300:]}")
    return open(out, "rb").read()


# ---------------------------------------------------------------- the corpus

TRICKY = [
    "Hello world", "hello", "Hello, World! How are you?", " leading space", "  two leading spaces",
    "      many leading spaces", "\tleading tab", "\nleading newline", "trailing space ", "trailing spaces   ",
    "a", " ", "  ", "\n", "\n\n\n", "\r\n", "x\r\ny\r\n\r\nz", "tabs\tin\t\tthe\t\t\tmiddle",
    "spaces   in     the  middle", "mixed \t \n \r\n  whitespace\n\t end", "line one\nline two\n  indented\n",
    "DON'T", "I'LL", "WE'RE", "THEY'VE", "SHE'D", "I'M", "IT'S", "don't can't won't", "'s 't 're 've 'm 'll 'd",
    "'S 'T 'RE 'VE 'M 'LL 'D", "John's car", "the '90s", "'ſ long s", "O'Neil's", "rock 'n' roll",
    "0", "7", "42", "123", "1234", "12345", "123456", "1234567", "12345678901234567890", "3.14159 2.71828",
    "1,000,000 and 1.000.000", "version 10.0.19041", "٣٤٥ ١٢ arabic digits", "Ⅻ ½ ¾ ² ³ numbers", "0x1F 0b1010",
    "naïve café résumé façade coöperate", "Ærøskøbing Åland", "Crème brûlée à la française",
    "e\u0301 a\u0308 o\u0302 decomposed accents", "A\u030a vs \u212b (angstrom sign) vs \u00c5", "d\u0307\u0323 reordered marks",
    "\u1100\u1161\u11a8 Hangul jamo", "한국어 텍스트 입니다", "\u0915\u093c excluded composition क़",
    "ﬁ ligature and ﬀ", "Straße und Grüße", "Ελληνικά κείμενα με τόνους", "русский текст с ёлкой",
    "Українська мова", "中文字符和标点符号。", "日本語のテキストです、カタカナも。", "漢字かな交じり文",
    "العربية نص مع التشكيل: مَرْحَبًا", "हिन्दी पाठ, देवनागरी लिपि", "ภาษาไทย ไม่มีช่องว่าง",
    "עברית", "Tiếng Việt có dấu", "emoji 🙂", "👍🏽 skin tone", "🇫🇷🇯🇵 flags", "👨‍👩‍👧‍👦 family ZWJ",
    "🏳️‍🌈 rainbow flag", "❤️ heart with VS16", "🧑🏿‍💻 technologist", "😀😃😄😁😆😅", "a\u200db zero width joiner",
    "nbsp:\u00a0x ideographic:\u3000y", "line\u2028separator\u2029para", "\u00a0\u00a0leading nbsp",
    "def f(x):\n    return x + 1\n", "for (int i = 0; i < n; i++) {\n\ta[i] = b[i] * 2;\n}\n",
    "#include <stdio.h>\nint main(void) { printf(\"hi\\n\"); return 0; }",
    "{\"key\": [1, 2, 3], \"nested\": {\"a\": null}}", "x->y && z || !w; a += b << 2;",
    "SELECT * FROM users WHERE id = 42;", "$ ls -la | grep foo > /dev/null 2>&1",
    "https://example.com/path?q=1&r=two#frag", "user@example.com", "C:\\Windows\\System32",
    "--- === *** ### !!! ??? ...", "(((nested)))", "[[brackets]] {{braces}}", "<html><body>text</body></html>",
    "\u2581literal metaspace", "▁▁ two metaspaces", "x\u2581y",
    "a" * 3000, "ab" * 700 + " end", "1" * 100, "\u0301" * 50 + "marks first", "e" + "\u0301\u0323" * 40,
    "Mixed: naïve 中文 🙂 123 DON'T\r\n\tend",
]

FRAGS = ["'s", "'t", "'RE", "'ll", "don't", "DON'T", "hello", "World", "naïve", "e\u0301", "Ελλάδα", "русский",
         "中文", "日本語", "한국어", "हिन्दी", "مرحبا", "123", "4567", "٣٤", "½", "3.14", "--", "!?", "#",
         "🙂", "👍🏽", "👨‍👩‍👧", "🇫🇷", "a", "Z", "_", "\\", "(", ")", "{", "}", ";", "=", "\u2581", "ſ",
         "\u0301", "\u0323", "\u1161", "\u212b"]
WS = [" ", "  ", "   ", "\t", "\n", "\r\n", "\n\n", " \n", "\u00a0", "\u3000", "\u2028"]

SPECIAL_STRINGS = ["<s>", "</s>", "<unk>", "<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|endoftext|>",
                   "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>", "<|reserved_special_token", "<|fim_"]


def random_texts(rng, n):
    out = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randrange(1, 30)):
            parts.append(rng.choice(WS) if rng.random() < 0.35 else rng.choice(FRAGS))
        out.append("".join(parts))
    return out


def corpus():
    rng = random.Random(20240531)
    lines = make_tokenizers.corpus_sentences(77, 600)
    docs = list(TRICKY)
    for i in range(0, 400, 4):  # multi-line documents of generated text
        docs.append("\n".join(lines[i:i + 4]) + ("\n" if i % 8 else ""))
    docs += lines[400:500]
    docs += random_texts(rng, 150)
    for d in docs:
        assert d and not any(s in d for s in SPECIAL_STRINGS) and "\0" not in d, repr(d)
    return docs


def random_bytes(rng, n):
    out = bytearray()
    pieces = ["abc ", " ", "é", "中", "🙂", "  ", "\n", "'s", "123", "\u00a0", "Ω", "e\u0301", "\u2581"]
    while len(out) < n:
        k = rng.random()
        if k < 0.2:
            out += bytes(rng.randrange(1, 256) for _ in range(rng.randrange(1, 6)))
        elif k < 0.3:
            out += rng.choice([b"\xc3", b"\xe4\xb8", b"\xf0\x9f\x99", b"\x80\x80", b"\xff", b"\xed\xa0\x80"])
        else:
            out += rng.choice(pieces).encode()
    return bytes(out[:n])


# ---------------------------------------------------------------- per tokenizer

def framing(name, hf):
    """(bos id or None, id after each document or None)"""
    if name.startswith("llama2"):
        return hf.token_to_id("<s>"), None
    if name == "llama3":
        return hf.token_to_id("<|begin_of_text|>"), None
    return None, hf.token_to_id("<|endoftext|>")


def split_docs(ids, bos, end):
    docs, cur = [], None
    for x in ids:
        if bos is not None and x == bos:
            if cur is not None:
                docs.append(cur)
            cur = [x]
        else:
            if cur is None:
                cur = []
            cur.append(x)
            if end is not None and x == end:
                docs.append(cur)
                cur = None
    if cur is not None:
        docs.append(cur)
    return docs


def first_diff(a, b):
    return next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))


def check_tokenizer(name, path, docs, tmp):
    from tokenizers import Tokenizer
    hf = Tokenizer.from_file(path)
    bos, end = framing(name, hf)
    d = os.path.join(tmp, name)
    os.makedirs(d)
    paths = []
    for i, t in enumerate(docs):
        p = os.path.join(d, "doc%04d.txt" % i)
        with open(p, "wb") as f:
            f.write(t.encode("utf-8"))
        paths.append(p)
    out = os.path.join(d, "out")
    rc, so, se = run(["prepare", "--tokenizer", path, "--val-fraction", "0", "--out-dir", out]
                     + sum((["--input", p] for p in paths), []))
    if rc != 0:
        report(f"{name}_prepare_runs", False, f"exit {rc}: {se.strip()[-300:]}")
        return
    ids, width, vocab, eot = read_shard(os.path.join(out, "train.bin"))
    want = [hf.encode(t).ids + ([end] if end is not None else []) for t in docs]
    got = split_docs(ids, bos, end)
    same = sum(1 for i in range(len(docs)) if i < len(got) and got[i] == want[i])
    bad = next((i for i in range(len(docs)) if i >= len(got) or got[i] != want[i]), None)
    detail = f"{same}/{len(docs)} texts identical, {len(ids)} tokens"
    if bad is not None:
        g = got[bad] if bad < len(got) else []
        k = first_diff(g, want[bad])
        detail += (f"; first differing text #{bad} {docs[bad][:50]!r}: at id {k} ztrain {g[max(0, k - 2):k + 4]} "
                   f"HF {want[bad][max(0, k - 2):k + 4]}")
    report(f"{name}_ids_equal_hf", same == len(docs) and len(got) == len(docs), detail)

    # framing: BOS once at the start of each document / <|endoftext|> at the end of each; shard width
    if bos is not None:
        ok = ids.count(bos) == len(docs) and all(g[0] == bos for g in got)
        report(f"{name}_bos_per_document", ok, f"{ids.count(bos)} BOS ids (id {bos}) for {len(docs)} documents")
    else:
        ok = ids.count(end) == len(docs) and ids[-1] == end and bos is None and eot == end
        report(f"{name}_eot_after_each_document", ok, f"{ids.count(end)} <|endoftext|> for {len(docs)} documents, "
               f"shard eot {eot}")
    V = hf.get_vocab_size(with_added_tokens=True)
    report(f"{name}_shard_width", vocab == V and width == (4 if V > 65536 else 2), f"vocab {vocab}, {width} bytes a token")

    # the empty string, through --encode of an empty file
    try:
        e, _ = zt_encode(path, b"", tmp)
        report(f"{name}_empty_string", e == hf.encode("").ids, f"ztrain {e}, HF {hf.encode('').ids}")
    except RuntimeError as ex:
        report(f"{name}_empty_string", False, str(ex))

    # (b) the saved .zttok, whole-corpus encoding, read block independence
    whole = "\n".join(docs)
    want_whole = hf.encode(whole).ids
    zttok = os.path.join(out, "tokenizer.zttok")
    try:
        res = {}
        for label, tok, extra in [("json", path, []), ("zttok", zttok, []), ("zttok_read_kb_1", zttok, ["--read-kb", "1"]),
                                  ("json_read_kb_1", path, ["--read-kb", "1"])]:
            res[label] = zt_encode(tok, whole.encode(), tmp, extra)[0]
        for label, got_ids in res.items():
            k = first_diff(got_ids, want_whole)
            report(f"{name}_whole_corpus_{label}", got_ids == want_whole,
                   f"{len(got_ids)} ids vs HF {len(want_whole)}" + ("" if got_ids == want_whole else
                   f", first difference at {k}: ztrain {got_ids[k:k + 4]} HF {want_whole[k:k + 4]}"))
        head = open(zttok, "rb").readline().decode().strip()
        report(f"{name}_zttok_version_2", head == "ztrain-tokenizer 2", f"first line '{head}'")
    except RuntimeError as ex:
        report(f"{name}_whole_corpus", False, str(ex))

    # (c) decode
    try:
        back = zt_decode(path, os.path.join(out, "train.bin"), tmp)
        ref = hf.decode(ids, skip_special_tokens=False).encode("utf-8")
        k = first_diff(back, ref)
        report(f"{name}_decode_equals_hf", back == ref, f"{len(back)} bytes" + ("" if back == ref else
               f" vs HF {len(ref)}, first difference at byte {k}: ztrain {back[k:k + 20]!r} HF {ref[k:k + 20]!r}"))
        back2 = zt_decode(zttok, os.path.join(out, "train.bin"), tmp)
        report(f"{name}_decode_zttok", back2 == back, "the .zttok decodes like the tokenizer.json")
    except RuntimeError as ex:
        report(f"{name}_decode_equals_hf", False, str(ex))
    rng = random.Random(5)
    try:
        ok_all, why = True, ""
        for n in [1, 7, 300, 5000, 100000]:
            x = random_bytes(rng, n)
            e, _ = zt_encode(path, x, tmp)
            back = zt_decode(path, os.path.join(tmp, "enc_out.bin"), tmp)
            body = x
            if name == "qwen2":
                body = unicodedata.normalize("NFC", x.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")
            if name.startswith("llama2"):  # "▁" decodes as a space; the prefix space ("first": unless one is there)
                if name != "llama2_metaspace" or not (x.startswith(b" ") or x.startswith("\u2581".encode())):
                    body = b" " + body
                body = body.replace("\u2581".encode(), b" ")
            prefix = hf.decode([bos], skip_special_tokens=False).encode() if bos is not None else b""
            suffix = b""
            want_b = prefix + body + suffix
            if back != want_b or any(i >= vocab for i in e):
                ok_all, why = False, f"{n} random bytes: decoded {len(back)} bytes, expected {len(want_b)}, first difference at {first_diff(back, want_b)}"
                break
        report(f"{name}_roundtrip_random_bytes", ok_all, why or "1 to 100000 bytes with invalid UTF-8")
    except RuntimeError as ex:
        report(f"{name}_roundtrip_random_bytes", False, str(ex))

    # --eot-between-files: Llama adds the end-of-text token between files; Qwen2 (already ending each
    # document with it) adds nothing
    out2 = os.path.join(d, "out2")
    rc, so, se = run(["prepare", "--tokenizer", path, "--val-fraction", "0", "--out-dir", out2, "--eot-between-files",
                      "--input", paths[0], "--input", paths[1], "--input", paths[2]])
    if rc != 0:
        report(f"{name}_eot_between_files", False, f"exit {rc}: {se.strip()[-200:]}")
    else:
        ids2, _, _, eot2 = read_shard(os.path.join(out2, "train.bin"))
        if end is None:
            want2 = want[0] + [eot2] + want[1] + [eot2] + want[2]
        else:
            want2 = want[0] + want[1] + want[2]
        eot_name = hf.id_to_token(eot2) if eot2 != 0xFFFFFFFF else None
        report(f"{name}_eot_between_files", ids2 == want2, f"end-of-text {eot_name} (id {eot2})")


def check_special_text(paths, tmp):
    """special tokens' text is encoded as text (HF with encode_special_tokens=True)"""
    from tokenizers import Tokenizer
    text = "a <s> b </s> <|begin_of_text|> c <|endoftext|> <|im_start|>user\nhi<|im_end|>"
    for name, path in paths.items():
        hf = Tokenizer.from_file(path)
        hf.encode_special_tokens = True
        want = hf.encode(text).ids
        got, _ = zt_encode(path, text.encode(), tmp)
        report(f"{name}_special_token_text_is_text", got == want, "ids equal HF's with encode_special_tokens=True")


def nfc_stress(path, tmp):
    """Qwen2 on text dense in what NFC changes: combining marks of many classes (reordered), pairs that
    compose, singletons, excluded compositions, Hangul jamo; whole and in 1 KB reads (NFC across
    read boundaries)"""
    from tokenizers import Tokenizer
    rng = random.Random(3)
    marks = [chr(c) for c in range(0x300, 0x370)] + ["\u0323", "\u0327", "\u0328", "\u031b", "\u0345", "\u05b0",
                                                      "\u0654", "\u093c", "\u09bc", "\u0b3e", "\u0bbe", "\u0cd5",
                                                      "\u0dca", "\u102e", "\u3099", "\u309a", "\U0001D165"]
    bases = list("aeiouAEIOUcCnNsSzZyYwW") + ["\u0391", "\u03b1", "\u0415", "\u0435", "\u0b47", "\u0bc6", "\u0cc6",
                                              "\u0dd9", "\u1025", "\u304b", "\u30cf", "\u00c5", "\u212b", "\u2126",
                                              "\u0958", "\u2260", "\u1e9b"]
    jamo = [chr(c) for c in range(0x1100, 0x1113)] + [chr(c) for c in range(0x1161, 0x1176)] + \
        [chr(c) for c in range(0x11a8, 0x11c3)] + ["가", "각"]
    other = [" ", "\n", "x", "1", "中", "🙂", "'s", "\u00e9", "\u1ea5"]
    pools = [(0.3, marks), (0.55, bases), (0.75, jamo), (1.0, other)]
    parts = []
    for _ in range(40000):
        k = rng.random()
        parts.append(rng.choice(next(p for lim, p in pools if k < lim)))
    text = "".join(parts)
    hf = Tokenizer.from_file(path)
    want = hf.encode(text).ids
    for extra in [[], ["--read-kb", "1"]]:
        got, _ = zt_encode(path, text.encode(), tmp, extra)
        k = first_diff(got, want)
        report("qwen2_nfc_stress" + ("_read_kb_1" if extra else ""), got == want,
               f"{len(text)} characters, {len(got)} ids vs HF {len(want)}" + ("" if got == want else
               f", first difference at {k}: ztrain {got[k:k + 4]} HF {want[k:k + 4]}"))


def train_sample_eval(paths, tmp):
    """prepare -> train (the tiny test model with the tokenizer's vocab, samples during training) ->
    sample with a text prompt (encoded as HF encodes it: BOS included) -> eval, with the .zttok that
    prepare wrote as data.tokenizer: Llama 2 (2-byte shards) and Qwen2 (ids above 65535)"""
    from tokenizers import Tokenizer
    corpus_txt = os.path.join(tmp, "license.txt")
    with open(corpus_txt, "wb") as f:
        for lic in ["GPL-3", "Apache-2.0"]:
            p = os.path.join("/usr/share/common-licenses", lic)
            if os.path.isfile(p):
                f.write(open(p, "rb").read())
        f.write("\n".join(make_tokenizers.corpus_sentences(5, 300)).encode())
    prompt = "This License applies"
    for name in ["llama2", "qwen2"]:
        d = os.path.join(tmp, "tse_" + name)
        rc, so, se = run(["prepare", "--input", corpus_txt, "--tokenizer", paths[name], "--out-dir", d,
                          "--val-fraction", "0.1"])
        if rc != 0:
            report(f"{name}_train_sample_eval", False, f"prepare exited {rc}: {se.strip()[-200:]}")
            continue
        V = read_shard(os.path.join(d, "train.bin"))[2]
        tok = os.path.join(d, "tokenizer.zttok")
        rc, so, se = run(["train", "-c", "inputs/tiny.cfg", "--set", f"model.vocab_size={V}",
                          "--set", f"data.train={d}/train.bin", "--set", f"data.val={d}/val.bin",
                          "--set", f"data.tokenizer={tok}", "--set", "train.steps=4", "--set", "train.warmup_steps=1",
                          "--set", "eval.every=0", "--set", "checkpoint.every=4", "--set", "sample.every=4",
                          "--set", "sample.tokens=4", "--set", f"sample.prompt={prompt}", "--set", f"run.root={d}",
                          "--set", "run.session=s", "--set", "run.name=r"])
        ck = os.path.join(d, "s", "r", "checkpoints")
        if rc != 0 or not os.path.isdir(ck):
            report(f"{name}_train_sample_eval", False, f"train exited {rc}: {(so + se).strip()[-300:]}")
            continue
        rc, so, se = run(["sample", "--checkpoint", ck, "--prompt", prompt, "--tokens", "8", "--seed", "3"])
        n_hf = len(Tokenizer.from_file(paths[name]).encode(prompt).ids)
        ok_sample = rc == 0 and so.startswith(prompt) and f"prompt {n_hf} tokens" in se
        rc2, so2, se2 = run(["eval", "--checkpoint", os.path.join(ck, "step_00000004.h5")])
        ok_eval = rc2 == 0 and "val loss" in so2 + se2
        report(f"{name}_train_sample_eval", ok_sample and ok_eval,
               f"vocab {V}; sample: '{so.strip()[:40]}...', prompt of {n_hf} tokens as HF encodes it; eval: "
               f"{next((l for l in (so2 + se2).split(chr(10)) if 'val loss' in l), '(no val loss)').strip()}"
               if ok_sample and ok_eval else f"sample exit {rc}: {(so + se).strip()[-200:]!r}; eval exit {rc2}: "
               f"{(so2 + se2).strip()[-200:]!r} (HF's prompt: {n_hf} tokens)")


def nfc_tables_current():
    """src/util/unicode_nfc_tables.h is what tools/gen_unicode_nfc.py writes"""
    p = subprocess.run([sys.executable, "tools/gen_unicode_nfc.py"], capture_output=True)
    have = open("src/util/unicode_nfc_tables.h", "rb").read()
    report("nfc_tables_generated", p.returncode == 0 and p.stdout == have,
           f"Unicode {unicodedata.unidata_version}" if p.stdout == have else
           f"exit {p.returncode}; regenerate: tools/gen_unicode_nfc.py > src/util/unicode_nfc_tables.h")


def crossmerge_variant(path, tmp):
    """Llama 2 with merges that join a non-space to a following "▁" (so ztrain may not cut words at
    spaces): still equal to HF"""
    j = json.load(open(path, encoding="utf-8"))
    v = j["model"]["vocab"]
    extra = [[a, b] for a, b in [["s", "▁"], ["e", "▁"], [".", "▁"], [",", "▁"], ["e▁", "▁the"]] if a in v and b in v
             or a + b in ("s▁", "e▁")]
    for a, b in extra:
        if a + b not in v:
            v[a + b] = len(v)
    if j["model"]["merges"] and isinstance(j["model"]["merges"][0], str):
        extra = [" ".join(m) for m in extra]
    j["model"]["merges"] = extra + j["model"]["merges"]
    p = os.path.join(tmp, "llama2_crossmerge.json")
    json.dump(j, open(p, "w", encoding="utf-8"), ensure_ascii=False)
    return p


# ---------------------------------------------------------------- bad input

def bad_cases(paths, tmp):
    def load(n):
        return json.load(open(paths[n], encoding="utf-8"))

    cases = []

    def add(name, base, edit, want):
        j = load(base)
        edit(j)
        p = os.path.join(tmp, f"bad_{name}.json")
        json.dump(j, open(p, "w", encoding="utf-8"), ensure_ascii=False, indent=1)
        cases.append((name, p, want))

    add("dropout", "llama3", lambda j: j["model"].update(dropout=0.1), "model.dropout")
    add("split_regex", "llama3", lambda j: j["pre_tokenizer"]["pretokenizers"][0]["pattern"].update(
        Regex=r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"),
        "pre_tokenizer.pretokenizers[0].pattern.Regex")
    add("split_behavior", "qwen2", lambda j: j["pre_tokenizer"]["pretokenizers"][0].update(behavior="Removed"),
        "pre_tokenizer.pretokenizers[0].behavior")
    add("wordpiece", "llama3", lambda j: j["model"].update(type="WordPiece"), "model type 'WordPiece'")
    add("unigram", "llama2", lambda j: j["model"].update(type="Unigram"), "model type 'Unigram'")
    add("normalizer_nfkc", "qwen2", lambda j: j.update(normalizer={"type": "NFKC"}), "normalizer: 'NFKC'")
    add("normalizer_lowercase", "llama2", lambda j: j["normalizer"]["normalizers"].append({"type": "Lowercase"}),
        "normalizer")
    add("metaspace_split", "llama2_metaspace", lambda j: j["pre_tokenizer"].update(split=True), "pre_tokenizer.split")
    add("continuing_subword_prefix", "qwen2", lambda j: j["model"].update(continuing_subword_prefix="##"),
        "model.continuing_subword_prefix")
    add("unknown_model_field", "llama3", lambda j: j["model"].update(new_flag=True), "model.new_flag: unknown field")
    add("ignore_merges_byte_fallback", "llama2", lambda j: j["model"].update(ignore_merges=True), "model.ignore_merges")
    add("byte_level_prefix_space", "llama3", lambda j: j["pre_tokenizer"]["pretokenizers"][1].update(
        add_prefix_space=True), "pre_tokenizer.pretokenizers[1].add_prefix_space")
    add("decoder_metaspace", "llama2", lambda j: j.update(decoder={"type": "Metaspace", "replacement": "▁",
                                                                    "prepend_scheme": "always", "split": True}), "decoder")
    add("post_roberta_field", "qwen2", lambda j: j.update(post_processor={
        "type": "RobertaProcessing", "sep": ["</s>", 2], "cls": ["<s>", 0], "pad_to": 8}), "post_processor.pad_to")
    add("missing_byte_token", "llama2", lambda j: j["model"]["vocab"].pop("<0x41>"), "<0x41>")
    add("byte_fallback_byte_level", "qwen2", lambda j: (j["model"].update(byte_fallback=True), j.update(normalizer=None)),
        "pre_tokenizer")
    add("pretok_whitespace", "llama3", lambda j: j.update(pre_tokenizer={"type": "Whitespace"}),
        "pre_tokenizer: 'Whitespace'")
    src = os.path.join(tmp, "bad_in.txt")
    open(src, "w").write("hello world\n")
    for name, p, want in cases:
        out = os.path.join(tmp, f"bad_{name}.bin")
        rc, so, se = run(["prepare", "--tokenizer", p, "--encode", src, "--ids-out", out])
        lines = se.strip().split("\n")
        ok = rc == 2 and len(lines) == 1 and want in lines[0] and lines[0].startswith("ztrain: error: ") and \
            p in lines[0] and not os.path.exists(out)
        report(f"bad_{name}", ok, lines[0] if ok else f"exit {rc}, stderr {se.strip()[:300]!r} (expected exit 2, "
               f"one line naming '{want}', no output)")


# ---------------------------------------------------------------- speed

def speed(paths, tmp):
    from tokenizers import ByteLevelBPETokenizer
    lines = make_tokenizers.training_lines()
    g = ByteLevelBPETokenizer()
    g.train_from_iterator(lines, vocab_size=2500, min_frequency=2, special_tokens=["<|endoftext|>"],
                          show_progress=False)
    gpt2 = os.path.join(tmp, "gpt2.json")
    g.save(gpt2)
    text = "\n".join(make_tokenizers.corpus_sentences(99, 200000)).encode()
    src = os.path.join(tmp, "speed.txt")
    open(src, "wb").write(text)

    def rate(tok, path_in, size):
        """MB/s and M tokens/s of the encoding alone (prepare's closing line), the best of 3"""
        best = 0.0
        for _ in range(3):
            out = os.path.join(tmp, "speed.bin")
            rc, so, se = run(["prepare", "--tokenizer", tok, "--encode", path_in, "--ids-out", out])
            if rc != 0:
                raise RuntimeError(se.strip()[-200:])
            n = struct.unpack_from("<Q", open(out, "rb").read(32), 24)[0]
            line = next((l for l in se.split("\n") if l.startswith("encoding:")), "")
            try:
                mbs = float(line.rsplit("(", 1)[1].split(" MB/s")[0])
            except (IndexError, ValueError):
                raise RuntimeError(f"no throughput in prepare's output: {line!r}")
            best = max(best, mbs)
        return best, best * n / size

    try:
        g_mb, g_tok = rate(gpt2, src, len(text))
        report("speed_gpt2_path", True, f"{len(text) / 1e6:.1f} MB: {g_mb:.1f} MB/s, {g_tok:.2f} M tokens/s")
        for name, path in paths.items():
            mb, tk = rate(path, src, len(text))
            report(f"speed_{name}", tk > 0.2 * g_tok, f"{mb:.1f} MB/s, {tk:.2f} M tokens/s = {tk / g_tok:.2f}x the "
                   f"GPT-2 path's tokens/s")
    except RuntimeError as ex:
        report("speed", False, str(ex))
    # long words and long runs of combining marks: time proportional to the length
    cases = [("long_word", "a" * 3_000_000), ("long_cjk_no_spaces", "中文字符和标点" * 300_000),
             ("long_combining_run", "e" + "\u0301\u0323" * 200_000 + " end"), ("long_spaces", " " * 2_000_000 + "x")]
    for cname, t in cases:
        data = t.encode()
        p = os.path.join(tmp, "long.txt")
        open(p, "wb").write(data)
        for name, path in paths.items():
            t0 = time.time()
            rc, so, se = run(["prepare", "--tokenizer", path, "--encode", p, "--ids-out", os.path.join(tmp, "long.bin")])
            dt = time.time() - t0
            report(f"speed_{name}_{cname}", rc == 0 and dt < 30, f"{len(data) / 1e6:.1f} MB in {dt:.2f} s"
                   + ("" if rc == 0 else f", exit {rc}: {se.strip()[-200:]}"))


def main():
    if not os.access(ZT, os.X_OK):
        report("ztrain_binary", False, f"{ZT} not found or not executable (build with make first)")
        return
    try:
        import tokenizers  # noqa: F401
    except ImportError as e:
        report("hf_tokenizers", False, f"python module 'tokenizers' is missing ({e}); run scripts/setup-venv.sh and "
               "use .venv-ref/bin/python")
        return
    tmp = tempfile.mkdtemp(prefix="zt-tokllama-")
    try:
        paths = make_tokenizers.make_all(os.path.join(tmp, "fixtures"))
        docs = corpus()
        for name, path in paths.items():
            check_tokenizer(name, path, docs, tmp)
        check_tokenizer("llama2_crossmerge", crossmerge_variant(paths["llama2"], tmp), docs, tmp)
        nfc_tables_current()
        nfc_stress(paths["qwen2"], tmp)
        train_sample_eval(paths, tmp)
        check_special_text(paths, tmp)
        bad_cases(paths, tmp)
        if not os.environ.get("ZT_TOK_NO_SPEED"):
            speed(paths, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
    sys.exit(1 if FAILS else 0)
