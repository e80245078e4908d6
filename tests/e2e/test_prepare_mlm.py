#!/usr/bin/env python3
"""Tests of `ztrain prepare --mlm` (src/cmd/prepare_mlm.c, prepare.h "Masked LM") and of the encoder tokenizers'
specials (tokenizer.h: cls, sep, pad, mask; the .zttok version 4) against Hugging Face `tokenizers`.

Run from the repo root with .venv-ref/bin/python (scripts/setup-venv.sh). Prints `PASS name (details)` or
`FAIL name: reason` per case and exits non-zero if any failed. The tokenizer.json files are made here with HF
`tokenizers` (no model hub is reachable), trained on license texts: a BERT WordPiece (BertNormalizer,
BertPreTokenizer, [PAD] [UNK] [CLS] [SEP] [MASK]) with the template [CLS] $A [SEP] (bert-base's layout) and one
with BertProcessing; a RoBERTa byte-level BPE (<s> <pad> </s> <unk> <mask>, RobertaProcessing); and the same BPE
with the template <s> $A </s> (encode writes it; --mlm leaves it out). For each:
  (a) specials: the tokenizer.zttok that prepare writes is version 4 with cls, sep, pad and mask equal to HF's
      token_to_id("[CLS]") ... ("<mask>"), and so are the ids of the summary's "mlm config" line; `prepare
      --encode` gives HF's encode(text, add_special_tokens=False) (the template's: add_special_tokens=True), from
      the tokenizer.json and from the .zttok;
  (b) framing: train.bin and val.bin (parsed here from the bytes, data_shard.h) are version-2 shards of examples
      of T tokens with a loss mask; every example starts with cls, the last real token of each is sep, padding
      (pad, mask 0) only at the tail of a split's last example, every other mask byte 1; and the whole token
      sequence equals the rule applied to HF's ids of the documents (the last floor(n F) of them validation):
      documents joined by sep, cut into chunks of T - 2 with a sep that would start a chunk left out, each
      chunk cls chunk sep;
      and, at T = 5 on one-token words, six sequences written out by hand: a separator that ends a chunk
      ("[SEP] [SEP]"), one that would start a chunk (left out), an empty document, the padded tail;
  (c) the outputs are the same bytes for 1 thread, 2 threads with 1 KB work units (long documents cut inside),
      and 2 MPI ranks;
  (d) bad uses exit 2 with one line `ztrain: error: ...` naming what is missing or wrong, and write nothing:
      a tokenizer without cls/sep, one without [PAD], --seq-len 2, --mlm without --seq-len, --seq-len without
      --mlm, --mlm with --vocab-size, with --eot-between-docs; a version-4 .zttok with a bad pad line;
  (e) a version-3 .zttok (the BERT file without its pad / mask lines) still loads and encodes the same.
"""
import json
import os
import random
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_tokenizer_llama as base  # noqa: E402  (report, FAILS)
from test_tokenizer_llama import report  # noqa: E402

ZT = os.environ.get("ZTRAIN", "./ztrain")
MPIRUN = ["mpirun", "--oversubscribe", "--bind-to", "none"]


def run(args, pre=()):
    p = subprocess.run(list(pre) + [ZT] + args, capture_output=True, timeout=120)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


# ---------------------------------------------------------------- data and tokenizers

def documents():
    rng = random.Random(5)
    paras = []
    for n in ["GPL-3", "Apache-2.0", "Artistic", "BSD", "MPL-2.0"]:
        paras += [p.strip() for p in open("/usr/share/common-licenses/" + n, encoding="utf-8").read().split("\n\n")
                  if p.strip()]
    rng.shuffle(paras)
    docs = paras[:70]
    docs[3] = ""                                  # an empty document adds nothing
    docs[10] = " ".join(paras[70:110])            # a long one: many sequences, cut into work units
    docs[20] = "caf\u00e9 na\u00efve \u4e2d\u6587 \U0001F600 e\u0301 x"
    return docs, paras[110:400]


def make_tokenizers(d, lines):
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    out = {}
    bert = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    bert.normalizer = normalizers.BertNormalizer(lowercase=True)
    bert.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    bert.decoder = decoders.WordPiece(prefix="##")
    bert.train_from_iterator(lines, trainers.WordPieceTrainer(
        vocab_size=600, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"], show_progress=False))
    cls, sep = bert.token_to_id("[CLS]"), bert.token_to_id("[SEP]")
    bert.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
                                                        special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    out["bert"] = bert
    bp = Tokenizer.from_str(bert.to_str())
    bp.post_processor = processors.BertProcessing(("[SEP]", sep), ("[CLS]", cls))
    out["bert_processing"] = bp
    rob = Tokenizer(models.BPE())
    rob.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    rob.decoder = decoders.ByteLevel()
    rob.train_from_iterator(lines, trainers.BpeTrainer(
        vocab_size=700, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    rob.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
    out["roberta"] = rob
    rt = Tokenizer.from_str(rob.to_str())
    rt.post_processor = processors.TemplateProcessing(single="<s> $A </s>", special_tokens=[("<s>", 0), ("</s>", 2)])
    out["bpe_template"] = rt
    paths = {}
    for name, tok in out.items():
        paths[name] = os.path.join(d, name + ".json")
        tok.save(paths[name])
    return out, paths


def specials(name, tok):
    names = ("[CLS]", "[SEP]", "[PAD]", "[MASK]") if name.startswith("bert") else ("<s>", "</s>", "<pad>", "<mask>")
    return [tok.token_to_id(n) for n in names]


# ---------------------------------------------------------------- reading what prepare wrote

def read_shard(path):
    b = open(path, "rb").read()
    assert b[:8] == b"ZTSHARD\0", "bad magic"
    ver, width, vocab, eot, count, flags, L = struct.unpack_from("<IIIIQII", b, 8)
    assert len(b) == 64 + count * width + (count if flags & 1 else 0), "size mismatch"
    ids = list(struct.unpack_from("<%d%s" % (count, "H" if width == 2 else "I"), b, 64))
    mask = list(b[64 + count * width:]) if flags & 1 else None
    return {"version": ver, "flags": flags, "L": L, "ids": ids, "mask": mask}


def zttok_specials(path):
    """cls sep pad mask from a .zttok's lines (and its version)"""
    lines = open(path, encoding="utf-8").read().split("\n")[:40]
    ver = int(lines[0].split()[1])
    get = {ln.split()[0]: ln.split()[1:] for ln in lines if ln.split()}
    cls, sep = (int(x) for x in get.get("special", ["-9", "-9"]))
    return ver, [cls, sep, int(get.get("pad", ["-9"])[0]), int(get.get("mask", ["-9"])[0])]


def expected(doc_ids, T, cls, sep, pad):
    """the documented rule, written independently of the packer: tokens and mask of the split's sequences"""
    stream = []
    for ids in doc_ids:
        if not ids:
            continue
        if stream:
            stream.append(None)  # a separator between documents
        stream += ids
    chunks, cur = [], []
    for x in stream:
        if x is None and not cur:
            continue  # a separator that would start a chunk
        cur.append(sep if x is None else x)
        if len(cur) == T - 2:
            chunks.append(cur)
            cur = []
    if cur:
        chunks.append(cur)
    toks, mask = [], []
    for c in chunks:
        seq = [cls] + c + [sep]
        toks += seq + [pad] * (T - len(seq))
        mask += [1] * len(seq) + [0] * (T - len(seq))
    return toks, mask


def check_framing(name, sh, T, cls, sep, pad, last_split):
    ids, mask, n = sh["ids"], sh["mask"], len(sh["ids"]) // T
    problems = []
    if sh["version"] != 2 or sh["flags"] != 1 or sh["L"] != T or len(ids) % T:
        problems.append(f"header version {sh['version']} flags {sh['flags']} L {sh['L']} count {len(ids)}")
    for e in range(n):
        seq, m = ids[e * T:(e + 1) * T], mask[e * T:(e + 1) * T]
        real = sum(m)
        if seq[0] != cls:
            problems.append(f"example {e} starts with {seq[0]}")
        if m != [1] * real + [0] * (T - real) or seq[real:] != [pad] * (T - real):
            problems.append(f"example {e}: padding not a tail of pad ids with mask 0")
        if real < 3 or seq[real - 1] != sep:
            problems.append(f"example {e}: no sep before its padding")
        if real < T and e != n - 1:
            problems.append(f"example {e} of {n} is padded")
        if problems:
            break
    report(f"{name}_{last_split}_framing", not problems and n > 0,
           "; ".join(problems[:3]) if problems else f"{n} examples of {T}: cls first, sep last, padding "
           f"{T * n - sum(mask)} tokens at the tail only")


# ---------------------------------------------------------------- the cases

def case_tokenizer(name, tok, path, docs, tmp, T, F):
    cls, sep, pad, msk = specials(name, tok)
    out = os.path.join(tmp, "out_" + name)
    src = os.path.join(tmp, "docs.jsonl")
    rc, so, se = run(["prepare", "--mlm", "--seq-len", str(T), "--tokenizer", path, "--input", src, "--val-fraction",
                      str(F), "--threads", "1", "--out-dir", out])
    if rc != 0:
        report(f"{name}_prepare_mlm_runs", False, f"exit {rc}: {se.strip()[-300:]}")
        return None
    # (a) the specials: .zttok and the summary
    zttok = os.path.join(out, "tokenizer.zttok")
    ver, got = zttok_specials(zttok)
    report(f"{name}_zttok_specials", ver == 4 and got == [cls, sep, pad, msk],
           f"version {ver}, cls sep pad mask {got} (HF token_to_id: {[cls, sep, pad, msk]})")
    line = next((ln for ln in so.split("\n") if ln.startswith("mlm config:")), "")
    want_line = f"model.pad_id = {pad}; model.sep_id = {sep}; mlm.cls_id = {cls}; mlm.sep_id = {sep}; mlm.mask_id = {msk}"
    report(f"{name}_summary_ids", want_line in line and f"train.seq_len = {T}" in line, line or "no 'mlm config:' line")
    text = "\n".join(docs[:12])
    template = name == "bpe_template"
    want = tok.encode(text, add_special_tokens=template).ids
    for label, p in [("json", path), ("zttok", zttok)]:
        enc = os.path.join(tmp, f"enc_{name}_{label}.bin")
        open(os.path.join(tmp, "enc.txt"), "w", encoding="utf-8").write(text)
        rc, _, se = run(["prepare", "--tokenizer", p, "--encode", os.path.join(tmp, "enc.txt"), "--ids-out", enc])
        g = read_shard(enc)["ids"] if rc == 0 else None
        report(f"{name}_encode_{label}_equals_hf", g == want,
               f"{len(want)} ids = HF encode(add_special_tokens={template})" if g == want else
               f"exit {rc} {se.strip()[:200]}; {len(g or [])} ids vs {len(want)}")
    # (b) the sequences, both splits, against the rule on HF's ids (without special tokens)
    n_val = int(len(docs) * F + 1e-9)
    splits = {"train": docs[:len(docs) - n_val], "val": docs[len(docs) - n_val:]}
    for split, ds in splits.items():
        sh = read_shard(os.path.join(out, split + ".bin"))
        check_framing(name, sh, T, cls, sep, pad, split)
        doc_ids = [e.ids for e in tok.encode_batch(ds, add_special_tokens=False)]
        wt, wm = expected(doc_ids, T, cls, sep, pad)
        same = sh["ids"] == wt and sh["mask"] == wm
        k = next((i for i in range(min(len(wt), len(sh["ids"]))) if wt[i] != sh["ids"][i]), None)
        report(f"{name}_{split}_ids_equal_hf", same,
               f"{len(ds)} documents, {sum(map(len, doc_ids))} HF ids -> {len(wt) // T} sequences" if same else
               f"{len(sh['ids'])} tokens vs {len(wt)} expected; first difference at {k}; masks equal {sh['mask'] == wm}")
    return out


def case_edges(tok, path, tmp):
    """T = 5 (chunks of 3) on one-token words: a separator that ends a chunk ([SEP] [SEP]), one that would start a
    chunk (left out), an empty document, a final padded sequence; the sequences written out by hand"""
    words = sorted(w for w, i in tok.get_vocab().items() if w.isalpha() and w.islower() and len(w) > 2)[:6]
    if len(words) < 6 or any(len(tok.encode(w, add_special_tokens=False).ids) != 1 for w in words):
        report("edges_words", False, f"no six one-token words in the vocab: {words}")
        return
    w = [tok.token_to_id(x) for x in words]
    docs = [f"{words[0]} {words[1]}", " ".join(words[2:5]), words[5], "", " ".join(words + words[:1]), words[1]]
    src = os.path.join(tmp, "edges.jsonl")
    with open(src, "w") as f:
        for d in docs:
            f.write(json.dumps({"text": d}) + "\n")
    out = os.path.join(tmp, "edges")
    rc, _, se = run(["prepare", "--mlm", "--seq-len", "5", "--tokenizer", path, "--input", src, "--val-fraction", "0",
                     "--out-dir", out])
    if rc != 0:
        report("edges_sequences", False, f"exit {rc}: {se.strip()[-300:]}")
        return
    C, S, P = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]"), tok.token_to_id("[PAD]")
    want = [[C, w[0], w[1], S, S], [C, w[2], w[3], w[4], S], [C, w[5], S, w[0], S], [C, w[1], w[2], w[3], S],
            [C, w[4], w[5], w[0], S], [C, w[1], S, P, P]]
    sh = read_shard(os.path.join(out, "train.bin"))
    got = [sh["ids"][i:i + 5] for i in range(0, len(sh["ids"]), 5)]
    ok = got == want and sh["mask"] == [1] * 28 + [0] * 2
    report("edges_sequences", ok, "6 sequences as written out: [SEP] [SEP], a left-out [SEP], the empty document, the "
           "padded tail" if ok else f"got {got}, mask {sh['mask']}; want {want}")


def case_same_bytes(path, tmp, T, ref_out):
    src = os.path.join(tmp, "docs.jsonl")
    base = ["prepare", "--mlm", "--seq-len", str(T), "--tokenizer", path, "--input", src, "--val-fraction", "0.1"]
    for label, extra, pre in [("threads_2_chunk_1kb", ["--threads", "2", "--chunk-kb", "1"], ()),
                              ("ranks_2", ["--threads", "1", "--chunk-kb", "2"], MPIRUN + ["-np", "2"])]:
        out = os.path.join(tmp, "same_" + label)
        rc, so, se = run(base + extra + ["--out-dir", out], pre)
        if rc != 0:
            report(f"same_bytes_{label}", False, f"exit {rc}: {se.strip()[-300:]}")
            continue
        bad = [f for f in ("train.bin", "val.bin", "tokenizer.zttok")
               if open(os.path.join(out, f), "rb").read() != open(os.path.join(ref_out, f), "rb").read()]
        report(f"same_bytes_{label}", not bad, "train.bin, val.bin, tokenizer.zttok identical to 1 thread" if not bad
               else f"differ: {bad}")


def case_errors(paths, tmp):
    src = os.path.join(tmp, "docs.jsonl")
    j = json.load(open(paths["roberta"], encoding="utf-8"))
    j["post_processor"] = None
    no_cls = os.path.join(tmp, "no_cls.json")
    json.dump(j, open(no_cls, "w", encoding="utf-8"))
    j = json.load(open(paths["bert"], encoding="utf-8"))
    j["model"]["vocab"]["[PAX]"] = j["model"]["vocab"].pop("[PAD]")
    for a in j["added_tokens"]:
        if a["content"] == "[PAD]":
            a["content"] = "[PAX]"
    no_pad = os.path.join(tmp, "no_pad.json")
    json.dump(j, open(no_pad, "w", encoding="utf-8"))
    bad_v4 = os.path.join(tmp, "bad_v4.zttok")
    txt = open(os.path.join(tmp, "out_bert", "tokenizer.zttok"), encoding="utf-8").read()
    open(bad_v4, "w", encoding="utf-8").write(txt.replace("\npad 0\n", "\npad 99999\n", 1))
    mlm = ["prepare", "--mlm", "--input", src]
    cases = [
        ("no_cls_sep", mlm + ["--seq-len", "16", "--tokenizer", no_cls], "has no cls ([CLS] or <s>), sep ([SEP] or </s>)"),
        ("no_pad", mlm + ["--seq-len", "16", "--tokenizer", no_pad], "has no pad ([PAD] or <pad>)"),
        ("seq_len_2", mlm + ["--seq-len", "2", "--tokenizer", paths["bert"]], "--seq-len 2: expected an integer in 3.."),
        ("no_seq_len", mlm + ["--tokenizer", paths["bert"]], "no --seq-len T given"),
        ("seq_len_without_mlm", ["prepare", "--input", src, "--seq-len", "16", "--tokenizer", paths["bert"]],
         "--seq-len T is for --mlm"),
        ("vocab_size", mlm + ["--seq-len", "16", "--vocab-size", "300"], "--mlm needs --tokenizer PATH"),
        ("eot_between", mlm + ["--seq-len", "16", "--tokenizer", paths["roberta"], "--eot-between-docs"],
         "cannot be combined with --mlm"),
        ("bad_v4_pad_line", mlm + ["--seq-len", "16", "--tokenizer", bad_v4], "expected 'pad ID'"),
    ]
    for name, args, want in cases:
        out = os.path.join(tmp, "err_" + name)
        rc, so, se = run(args + ["--out-dir", out])
        lines = se.strip().split("\n")
        ok = rc == 2 and len(lines) == 1 and lines[0].startswith("ztrain: error: ") and want in lines[0] and \
            not os.path.exists(out)
        report(f"error_{name}", ok, lines[0] if ok else f"exit {rc}, stderr {se.strip()[:300]!r} (expected exit 2, one "
               f"line with {want!r}, no {out})")


def case_v3(tok, tmp):
    """the version-3 file of before (no pad / mask lines) loads and encodes as the version 4"""
    v4 = os.path.join(tmp, "out_bert", "tokenizer.zttok")
    lines = open(v4, encoding="utf-8").read().split("\n")
    v3 = [ln for ln in lines if not ln.startswith(("pad ", "mask "))]
    v3[0] = "ztrain-tokenizer 3"
    p = os.path.join(tmp, "v3.zttok")
    open(p, "w", encoding="utf-8").write("\n".join(v3))
    text = "The licenses for most software are designed to take away your freedom to share and change it."
    open(os.path.join(tmp, "v3.txt"), "w").write(text)
    out = os.path.join(tmp, "v3.bin")
    rc, _, se = run(["prepare", "--tokenizer", p, "--encode", os.path.join(tmp, "v3.txt"), "--ids-out", out])
    want = tok.encode(text, add_special_tokens=False).ids
    got = read_shard(out)["ids"] if rc == 0 else None
    report("zttok_version_3_still_loads", got == want, f"{len(want)} ids" if got == want else f"exit {rc}: {se[:200]}")


def main():
    t0 = time.time()
    if subprocess.run([sys.executable, "-c", "import tokenizers"], capture_output=True).returncode != 0:
        report("reference", False, f"{sys.executable} cannot import tokenizers (scripts/setup-venv.sh)")
        return
    if not os.access(ZT, os.X_OK):
        report("ztrain_binary", False, f"{ZT} not found (build with make first)")
        return
    with tempfile.TemporaryDirectory(prefix="zt_mlm_") as tmp:
        docs, lines = documents()
        with open(os.path.join(tmp, "docs.jsonl"), "w", encoding="utf-8") as f:
            for t in docs:
                f.write(json.dumps({"text": t}) + "\n")
        toks, paths = make_tokenizers(tmp, lines)
        T, F = 48, 0.1
        outs = {name: case_tokenizer(name, toks[name], paths[name], docs, tmp, T, F) for name in toks}
        if outs["roberta"] and outs["bpe_template"]:
            same = all(read_shard(os.path.join(outs["roberta"], f)) == read_shard(os.path.join(outs["bpe_template"], f))
                       for f in ("train.bin", "val.bin"))  # the headers' eot differ (</s> is the template's eot)
            report("template_left_out", same, "<s> $A </s> template: the same sequences and masks as RobertaProcessing")
        case_edges(toks["bert"], paths["bert"], tmp)
        if outs["roberta"]:
            case_same_bytes(paths["roberta"], tmp, T, outs["roberta"])
        if outs["bert"]:
            case_errors(paths, tmp)
            case_v3(toks["bert"], tmp)
    print(f"took {time.time() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    main()
    sys.exit(1 if base.FAILS else 0)
