#!/usr/bin/env python3
"""Tests of ztrain's WordPiece tokenizer (BERT: src/io/tokenizer_wordpiece.c, util/unicode.c) against Hugging Face
`tokenizers`, through `ztrain prepare`.

Run from the repo root with .venv-ref/bin/python (scripts/setup-venv.sh). Prints `PASS name (details)` or
`FAIL name: reason` per case and exits non-zero if any failed. The tokenizer.json files are made here with HF
`tokenizers` itself (no model hub is reachable): a WordPiece trained on the demo corpus (the King James Bible
of Debian's bible-kjv when `bible` is installed, else tests/helpers/make_tokenizers.py's synthetic multilingual
text) with BertNormalizer, BertPreTokenizer, the WordPiece decoder and the template [CLS] $A [SEP], in three
variants: uncased (lowercase, strip_accents null), cased (lowercase false) and tiny (vocab 200 from an alphabet of
20 characters, uncased, so that many words are [UNK], and max_input_chars_per_word 12). Each also has an added <|endoftext|>, which
`prepare --eot-between-docs` writes between documents so that the shard splits back into them.
  (a) ids: the corpus cut into ~300 documents, a hand-written stress text (accents precomposed and combining,
      Chinese/Japanese/Korean, emoji, control characters, tabs and newlines, NBSP and the other Unicode spaces,
      punctuation of every kind with the ASCII symbols BERT counts as punctuation, words around 100 characters,
      empty documents) and random mixtures of its pieces: one JSON Lines document each, one `prepare` run, the
      shard's documents equal HF's encode(text, add_special_tokens=False) (no [CLS]/[SEP]: only prepare --mlm
      frames BERT documents, tests/e2e/test_prepare_mlm.py);
  (b) the tokenizer.zttok prepare writes (version 4: it has [PAD] and [MASK]; their ids, [CLS]'s and [SEP]'s as
      HF's) encodes the whole text like the tokenizer.json and like HF,
      streamed in 1 KB blocks too;
  (c) decode equals HF's decode(ids, skip_special_tokens=False): the whole shard; one at a time (254 sequences),
      45 documents and 20 random id sequences (continuation pieces first, special tokens) per tokenizer, and 59
      sequences of a hand-made vocabulary whose tokens hit every cleanup rule (" .", " n't", " do not", ...);
  (d) every code point (all of them outside the big uniform blocks, which are sampled) between two letters, and
      random pairs of combining marks after a letter (canonical reordering, Mn removal), with a vocabulary of
      every character HF's normalizer outputs: ids equal for 3 normalizer settings; and
      src/util/unicode_bert_tables.h is what scripts/gen_unicode_bert.py writes;
  (e) bad tokenizer.json files (a normalizer, pre-tokenizer, decoder or model field the loader does not
      support) exit 2 with one line naming the file and the field, and write nothing; BertProcessing and
      RobertaProcessing load and encode like the template.
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_tokenizer_llama as base  # noqa: E402  (report, run, read_shard, zt_encode, zt_decode, first_diff)
from test_tokenizer_llama import first_diff, make_tokenizers, report, run  # noqa: E402

EOT = "<|endoftext|>"
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", EOT]


def read_shard(path):
    ids, width, vocab, eot = base.read_shard(path)
    return ids, eot


def zt_encode(tok, data, tmp, extra=()):
    return base.zt_encode(tok, data, tmp, extra)[0]


def zt_decode(tok, ids, vocab, tmp):
    """ids as a shard, decoded by `prepare --decode`"""
    shard = os.path.join(tmp, "dec_in.bin")
    with open(shard, "wb") as f:
        f.write(b"ZTSHARD\0" + struct.pack("<IIIIQ", 1, 4, vocab, 0xFFFFFFFF, len(ids)) + b"\0" * 32)
        f.write(struct.pack("<%dI" % len(ids), *ids))
    return base.zt_decode(tok, shard, tmp).decode("utf-8", "surrogateescape")


# ---------------------------------------------------------------- texts

def corpus_lines():
    """the demo corpus (bible-kjv, one verse a line), else synthetic text"""
    try:
        p = subprocess.run(["bible", "-l100000", "Gen1:1-Rev22:21"], capture_output=True, text=True, timeout=60)
        lines = [ln.split(" ", 1)[1] if ln[:1].isdigit() else ln
                 for ln in (x.strip() for x in p.stdout.split("\n")) if ln and not ln.endswith(" 1")]
        lines = [x for x in lines if not x.split()[-1].isdigit()]
        if p.returncode == 0 and len(lines) > 30000:
            return "bible-kjv", lines
    except (OSError, subprocess.TimeoutExpired):
        pass
    return "synthetic (no `bible`)", make_tokenizers.corpus_sentences(11, 30000)


STRESS = [
    "Café naïve résumé façade coöperate Ångström Ñandú São Paulo Øresund Łódź Dvořák Crème brûlée",
    "decomposed: e\u0301 a\u0308 n\u0303 A\u030a o\u0302\u0323 marks a\u0301\u0316\u0323\u0302 q\u0307\u0323",
    "Tiếng Việt có dấu; Ελληνικά: ΟΔΟΣ Σίσυφος ά; Ёлка й; İstanbul ıI; Straße ẞ; ﬁ ﬀ; Ǆemal ǅ ǆ; Ꭰ Ა ᲐᲑ",
    "中文字符和标点符号。日本語のテキストです、カタカナも。漢字かな交じり文 한국어 텍스트입니다",
    "CJK compatibility 豈更車 extension 𠀀𠀁𪜀 ext-A 㐀㐁 radicals ⺀ ideographic　space",
    "emoji 🙂👍🏽🇫🇷👨‍👩‍👧‍👦❤️🧑🏿‍💻🥰🫠 and ✓ ★ ♥",
    "controls a\x00b\x01c\x7fd\x85e\u200bf\u200dg\ufeffh\u00adi\ufffdj\x0bk\x0cl\x1cm\u0600n\u08e2o\U000e0001p",
    "tabs\tand\nnewlines\r\nand\u00a0nbsp\u2003em\u3000ideo\u2028ls\u2029ps\u202fnnbsp\u205fmm\u1680ogham\u180emvs",
    "Hello, world! (a) [b] {c} <d> \"e\" 'f' `g` $h ^i ~j |k \\l /m @n #o %p &q *r +s =t _u -v :w ;x ?y .z",
    "… ¿ ¡ « » „ “ ” ‘ ’ ‹ › — – · • § ¶ † ‡ ※ ‰ ′ ″ ⁂ ⸘ ⸮ 、 。 「 」 『 』 【 】 〈 〉 《 》 ！ ？ ， ． ： ； （ ） ［ ］",
    "currency €£¥₹¢ math ±×÷∑√∞≠≤≥ symbols ©®™°¦ letters-with-dashes don't can't I'm we've they're it's",
    "numbers 3.14159, 1,000,000 and 42nd ½ ² ³ ٣٤ १२ ① Ⅻ",
    "https://example.com/path?q=1&r=two#frag user@example.com C:\\Windows\\System32",
    "a" * 99, "b" * 100, "c" * 101, "d" * 150, "x" + "é" * 99, "y" + "é" * 100, "İ" * 50, "İ" * 51,
    "pneumonoultramicroscopicsilicovolcanoconiosis" * 3, "word " + "\u0301" * 120 + " end",
    "Unicode 9+ marks x\u1df9\u0301 y\u0301\u1df9 z\u1df9\U0001d165 w\U0001d165\u1df9 \u08d4\u0316 \U00011938",
    "", "   ", "\n", "\x00", "\u200b", "\t\r\n",
]
PIECES = ["the", "LORD", "said", "unto", "Moses", ",", ".", ";", ":", "!", "?", "'", "\"", "é", "e\u0301", "中",
          "文", "日本", "한", "🙂", "\u00a0", "\u3000", "\t", "\n", "\x01", "\u200b", "$", "^", "`", "—", "…",
          "İ", "Σ", "ß", "ǅ", "123", "½", "a\u0308\u0323", "\u0301", "xyz" * 20]


def random_texts(rng, n):
    out = []
    for _ in range(n):
        parts = [rng.choice(PIECES) if rng.random() < 0.7 else " " for _ in range(rng.randrange(1, 40))]
        out.append("".join(parts))
    return out


# ---------------------------------------------------------------- tokenizers

def train(path, lines, vocab, lowercase, max_chars=100, alphabet=None):
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=lowercase)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix="##")
    opts = {"limit_alphabet": alphabet} if alphabet else {}
    tok.train_from_iterator(lines, trainers.WordPieceTrainer(vocab_size=vocab, special_tokens=SPECIALS,
                                                             show_progress=False, **opts))
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
                                                       special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    tok.save(path)
    if max_chars != 100:  # the trainer makes a new model with the default
        j = json.load(open(path, encoding="utf-8"))
        j["model"]["max_input_chars_per_word"] = max_chars
        json.dump(j, open(path, "w", encoding="utf-8"), ensure_ascii=False)
    return Tokenizer.from_file(path)


def check_tokenizer(name, path, hf, docs, whole, tmp):
    d = os.path.join(tmp, name)
    os.makedirs(d)
    src = os.path.join(d, "docs.jsonl")
    with open(src, "w", encoding="utf-8") as f:
        for t in docs:
            f.write(json.dumps({"text": t}) + "\n")
    out = os.path.join(d, "out")
    rc, so, se = run(["prepare", "--tokenizer", path, "--input", src, "--val-fraction", "0", "--eot-between-docs",
                      "--out-dir", out])
    if rc != 0:
        report(f"{name}_prepare_runs", False, f"exit {rc}: {se.strip()[-300:]}")
        return
    ids, eot = read_shard(os.path.join(out, "train.bin"))
    got, cur = [], []
    for x in ids:
        if x == eot:
            got.append(cur)
            cur = []
        else:
            cur.append(x)
    got.append(cur)
    want = [e.ids for e in hf.encode_batch(docs, add_special_tokens=False)]
    same = sum(1 for i in range(len(docs)) if i < len(got) and got[i] == want[i])
    bad = next((i for i in range(len(docs)) if i >= len(got) or got[i] != want[i]), None)
    unk = hf.token_to_id("[UNK]")
    detail = (f"{same}/{len(docs)} documents identical, {len(docs) - same} mismatches, {sum(map(len, want))} tokens "
              f"({sum(x.count(unk) for x in want)} [UNK]), eot id {eot}")
    if bad is not None or len(got) != len(docs):
        g = got[bad] if bad is not None and bad < len(got) else []
        k = first_diff(g, want[bad]) if bad is not None else 0
        detail += (f"; {len(got)} documents in the shard; first differing #{bad} {docs[bad][:60]!r}: at {k} ztrain "
                   f"{[hf.id_to_token(x) for x in g[max(0, k - 2):k + 4]]} HF "
                   f"{[hf.id_to_token(x) for x in want[bad][max(0, k - 2):k + 4]]}") if bad is not None else ""
    report(f"{name}_ids_equal_hf", same == len(docs) and len(got) == len(docs), detail)
    report(f"{name}_no_cls_sep", hf.token_to_id("[CLS]") not in ids and hf.token_to_id("[SEP]") not in ids,
           "encode writes neither [CLS] nor [SEP]")

    # (b) the saved .zttok; the whole text streamed in blocks
    zttok = os.path.join(out, "tokenizer.zttok")
    lines = open(zttok, "rb").read().decode().split("\n")[:24]
    want_ids = [hf.token_to_id(t) for t in ("[CLS]", "[SEP]", "[PAD]", "[MASK]")]
    want_lines = [f"special {want_ids[0]} {want_ids[1]}", f"pad {want_ids[2]}", f"mask {want_ids[3]}"]
    report(f"{name}_zttok_version_4", lines[0] == "ztrain-tokenizer 4" and all(x in lines for x in want_lines),
           f"first line '{lines[0]}', {want_lines} (HF's ids)")
    want_whole = hf.encode(whole, add_special_tokens=False).ids
    try:
        for label, tok, extra in [("json", path, []), ("zttok", zttok, []), ("zttok_read_kb_1", zttok, ["--read-kb", "1"])]:
            g = zt_encode(tok, whole.encode(), tmp, extra)
            k = first_diff(g, want_whole)
            report(f"{name}_whole_text_{label}", g == want_whole, f"{len(g)} ids vs HF {len(want_whole)}"
                   + ("" if g == want_whole else f", first difference at {k}: ztrain {g[k:k + 4]} HF {want_whole[k:k + 4]}"))
    except RuntimeError as ex:
        report(f"{name}_whole_text", False, str(ex))

    # (c) decode: the whole shard, then documents one by one
    V = hf.get_vocab_size()
    try:
        back = zt_decode(path, ids, V, tmp)
        ref = hf.decode(ids, skip_special_tokens=False)
        k = first_diff(back, ref)
        report(f"{name}_decode_shard", back == ref, f"{len(back)} characters" + ("" if back == ref else
               f" vs HF {len(ref)}, first difference at {k}: ztrain {back[k:k + 30]!r} HF {ref[k:k + 30]!r}"))
        rng = random.Random(len(name))
        picks = [i for i in range(len(docs)) if want[i]]
        picks = sorted(rng.sample(picks, min(45, len(picks))))
        seqs = [want[i] for i in picks] + [[rng.randrange(V) for _ in range(rng.randrange(1, 12))] for _ in range(20)]
        same = 0
        for s in seqs:
            same += zt_decode(zttok, s, V, tmp) == hf.decode(s, skip_special_tokens=False)
        report(f"{name}_decode_sequences", same == len(seqs), f"{same}/{len(seqs)} sequences decode as HF's "
               "(the .zttok; documents and random ids)")
    except RuntimeError as ex:
        report(f"{name}_decode", False, str(ex))
    return len(docs), sum(map(len, want))


def cleanup_decode(tmp):
    """the decoder's cleanup rules, through tokens that spell them"""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    toks = ["[UNK]", "x", "##x", "do", "not", "do not", "n't", "'m", "'s", "'ve", "'re", "'", " ' ", ".", "?", "!",
            ",", "a .b", "##.", "##'s", "don", "ca", "I", "you", " do not", "##", "###", "a ? b , c"]
    tok = Tokenizer(models.WordPiece({t: i for i, t in enumerate(toks)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=True)
    p = os.path.join(tmp, "cleanup.json")
    tok.save(p)
    rng = random.Random(3)
    seqs = [[i] for i in range(len(toks))] + [[rng.randrange(len(toks)) for _ in range(rng.randrange(2, 9))]
                                              for _ in range(30)]
    seqs.append([rng.randrange(len(toks)) for _ in range(3000)])
    try:
        same = sum(zt_decode(p, s, len(toks), tmp) == tok.decode(s, skip_special_tokens=False) for s in seqs)
    except RuntimeError as ex:
        report("decode_cleanup_rules", False, str(ex))
        return
    report("decode_cleanup_rules", same == len(seqs), f"{same}/{len(seqs)} sequences decode as HF's")


# ---------------------------------------------------------------- (d) every code point

def code_points():
    out = []
    for cp in range(0x110000):
        if 0xD800 <= cp < 0xE000:
            continue
        big = (0x3400 <= cp <= 0x9FFF or 0x20000 <= cp <= 0x3FFFF or cp >= 0xF0000 or 0xE000 <= cp < 0xF900 or
               unicodedata.category(chr(cp)) == "Cn")
        if not big or cp % 97 == 0:
            out.append(cp)
    return out


def all_code_points(tmp):
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers
    cps = code_points()
    # every mark before and after the two kept (Mc) marks of classes 216 and 226, and random triples
    marks = [cp for cp in cps if unicodedata.combining(chr(cp)) or unicodedata.category(chr(cp)).startswith("M")]
    rng = random.Random(9)
    pairs = ["x" + chr(m) + k for m in marks for k in ("\U0001d165", "\U0001d16d")]
    pairs += ["x" + k + chr(m) for m in marks for k in ("\U0001d165", "\U0001d16d")]
    pairs += ["x" + chr(rng.choice(marks)) + chr(rng.choice(marks)) + chr(rng.choice(marks)) for _ in range(3000)]
    text = " ".join("x" + chr(c) + "x" for c in cps) + " " + " ".join(pairs)
    for name, kw in [("uncased", {"lowercase": True}), ("cased", {"lowercase": False}),
                     ("no_clean_no_chinese", {"clean_text": False, "handle_chinese_chars": False, "lowercase": True})]:
        norm = normalizers.BertNormalizer(**kw)
        vocab = {"[UNK]": 0}
        for ch in sorted(set(norm.normalize_str(text))):
            vocab.setdefault(ch, len(vocab))
            vocab.setdefault("##" + ch, len(vocab))
        tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
        tok.normalizer = norm
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.decoder = decoders.WordPiece()
        p = os.path.join(tmp, f"allcp_{name}.json")
        tok.save(p)
        want = tok.encode(text, add_special_tokens=False).ids
        try:
            got = zt_encode(p, text.encode(), tmp)
        except RuntimeError as ex:
            report(f"every_code_point_{name}", False, str(ex))
            continue
        detail = f"{len(cps)} code points between letters, {len(pairs)} mark sequences, vocab {len(vocab)}, {len(want)} ids"
        if got != want:  # which code points
            k = first_diff(got, want)
            detail += (f"; first difference at id {k}: ztrain {[tok.id_to_token(x) for x in got[k:k + 3]]} HF "
                       f"{[tok.id_to_token(x) for x in want[k:k + 3]]}")
        report(f"every_code_point_{name}", got == want, detail)


def tables_current():
    if not os.path.exists("/usr/share/unicode/DerivedAge.txt"):
        report("bert_tables_current", True, "skipped: no /usr/share/unicode/DerivedAge.txt (Debian unicode-data)")
        return
    p = subprocess.run(["/usr/bin/python3", "scripts/gen_unicode_bert.py"], capture_output=True)
    have = open("src/util/unicode_bert_tables.h", "rb").read()
    report("bert_tables_current", p.returncode == 0 and p.stdout == have,
           f"exit {p.returncode}; regenerate: scripts/gen_unicode_bert.py > src/util/unicode_bert_tables.h")


# ---------------------------------------------------------------- (e) bad files

def bad_cases(path, tmp):
    cases = []

    def add(name, edit, want):
        j = json.load(open(path, encoding="utf-8"))
        edit(j)
        p = os.path.join(tmp, f"bad_{name}.json")
        json.dump(j, open(p, "w", encoding="utf-8"), ensure_ascii=False, indent=1)
        cases.append((name, p, want))

    add("normalizer_lowercase", lambda j: j.update(normalizer={"type": "Lowercase"}), "normalizer: 'Lowercase'")
    add("normalizer_sequence", lambda j: j.update(normalizer={"type": "Sequence", "normalizers": [j["normalizer"]]}),
        "normalizer: 'Sequence'")
    add("normalizer_field", lambda j: j["normalizer"].update(new_flag=True), "normalizer.new_flag")
    add("normalizer_strip_accents", lambda j: j["normalizer"].update(strip_accents="yes"), "normalizer.strip_accents")
    add("pretok_whitespace", lambda j: j.update(pre_tokenizer={"type": "Whitespace"}), "pre_tokenizer: 'Whitespace'")
    add("pretok_null", lambda j: j.update(pre_tokenizer=None), "pre_tokenizer: 'null'")
    add("decoder_prefix", lambda j: j["decoder"].update(prefix="@@"), "decoder.prefix")
    add("decoder_bytelevel", lambda j: j.update(decoder={"type": "ByteLevel"}), "decoder: 'ByteLevel'")
    add("model_field", lambda j: j["model"].update(dropout=0.1), "model.dropout")
    add("model_max_chars", lambda j: j["model"].update(max_input_chars_per_word="many"), "model.max_input_chars_per_word")
    add("model_prefix_long", lambda j: j["model"].update(continuing_subword_prefix="#" * 20),
        "model.continuing_subword_prefix")
    add("model_unk_missing", lambda j: j["model"].update(unk_token="<unk>"), "model.unk_token")
    add("post_two_before", lambda j: j["post_processor"]["single"].insert(0, j["post_processor"]["single"][0]),
        "post_processor")
    add("post_roberta_field", lambda j: j.update(post_processor={"type": "RobertaProcessing", "sep": ["[SEP]", 3],
                                                                 "cls": ["[CLS]", 2], "pad": True}),
        "post_processor.pad")
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
    # BertProcessing and RobertaProcessing are read as [CLS] $A [SEP] (and encode writes neither)
    for kind in ("Bert", "Roberta"):
        j = json.load(open(path, encoding="utf-8"))
        j["post_processor"] = {"type": kind + "Processing", "sep": ["[SEP]", j["model"]["vocab"]["[SEP]"]],
                               "cls": ["[CLS]", j["model"]["vocab"]["[CLS]"]]}
        if kind == "Roberta":
            j["post_processor"].update(trim_offsets=True, add_prefix_space=False)
        p = os.path.join(tmp, f"{kind.lower()}_processing.json")
        json.dump(j, open(p, "w", encoding="utf-8"), ensure_ascii=False)
        try:
            report(f"post_{kind.lower()}_processing", zt_encode(p, b"hello, world", tmp) ==
                   zt_encode(path, b"hello, world", tmp), f"{kind}Processing loads and encodes like the template")
        except RuntimeError as ex:
            report(f"post_{kind.lower()}_processing", False, str(ex))


def main():
    t0 = time.time()
    tmp = tempfile.mkdtemp(prefix="zt_bert_")
    try:
        source, lines = corpus_lines()
        rng = random.Random(20260601)
        n = len(lines) // 300
        docs = ["\n".join(lines[i * n:(i + 1) * n]) for i in range(300)]
        docs = [d[:4000] for d in docs]  # ~1.2 MB in all
        docs += STRESS + random_texts(rng, 120)
        for t in docs:
            assert not any(s in t for s in SPECIALS), repr(t)
        whole = "\n".join(STRESS) + "\n" + "\n".join(docs[:40])
        print(f"corpus: {source}, {len(lines)} lines; {len(docs)} documents", flush=True)
        train_lines = lines[::2]
        made = {}
        for name, vocab, lower, mc, alpha in [("uncased", 4000, True, 100, None), ("cased", 4000, False, 100, None),
                                              ("tiny", 200, True, 12, 20)]:
            p = os.path.join(tmp, f"bert_{name}.json")
            made[name] = (p, train(p, train_lines, vocab, lower, mc, alpha))
        total_docs = total_toks = 0
        for name, (p, hf) in made.items():
            r = check_tokenizer(name, p, hf, docs, whole, tmp)
            if r:
                total_docs += r[0]
                total_toks += r[1]
        print(f"ids: {total_docs} documents, {total_toks} tokens over {len(made)} tokenizers", flush=True)
        cleanup_decode(tmp)
        all_code_points(tmp)
        tables_current()
        bad_cases(made["uncased"][0], tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"took {time.time() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    main()
    sys.exit(1 if base.FAILS else 0)
