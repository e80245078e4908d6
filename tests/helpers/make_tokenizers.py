#!/usr/bin/env python3
"""Builds tokenizer.json files shaped like those of Llama 2, Llama 3 and Qwen2 with Hugging Face
`tokenizers` (no model hub is reachable here), for tests/e2e/test_tokenizer_llama.py.

  make_tokenizers.py OUT_DIR     writes OUT_DIR/<name>.json for every name below, prints the paths
  (as a module: make_all(out_dir) -> {name: path}; corpus_sentences(seed, n) -> text for tests)

Each file has the real one's normalizer, pre_tokenizer, model flags, decoder, post_processor and
special tokens (with the real ids), and a BPE trained here on a small built-in multilingual corpus, so
the merges are realistic; the vocab is padded with unreachable tokens ("zzpad<N>") to the real size.
  llama2            what transformers' LlamaTokenizerFast saves (legacy layout): normalizer
                    Sequence[Prepend("▁"), Replace(" ", "▁")], no pre_tokenizer, BPE with byte_fallback
                    and fuse_unk, <unk>/<s>/</s> = 0/1/2, <0x00>..<0xFF> = 3..258, decoder
                    Sequence[Replace, ByteFallback, Fuse, Strip], TemplateProcessing "<s> $A"; vocab 32000.
                    The alphabet is limited (limit_alphabet), and newlines/tabs are left out of
                    training, so characters outside the vocab take the byte fallback; "▁▁" and "▁▁▁▁"
                    are added as SentencePiece has them.
  llama2_metaspace  the newer layout: no normalizer, pre_tokenizer Metaspace(prepend_scheme "first",
                    split false); same vocab
  llama3            Split(the Llama 3 regex, Isolated) + ByteLevel(use_regex false), BPE with
                    ignore_merges, 256 special tokens from <|begin_of_text|> = 128000,
                    post_processor Sequence[ByteLevel, TemplateProcessing "<|begin_of_text|> $A"].
                    Whole words the merges split are added to the vocab without merges, so
                    ignore_merges changes the ids (make_all checks that it does).
  qwen2             NFC normalizer, Split(the Qwen2 regex) + ByteLevel(use_regex false), BPE, the
                    special tokens of Qwen2.5 from <|endoftext|> = 151643, post_processor ByteLevel.
"""
import json
import os
import random
import sys

LLAMA3_RE = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
QWEN2_RE = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""

EN = ("the of and to in a is that for it as was with be by on not he this are or his from at which but have an they "
      "you were her she there been one all we their has would when if so no out up into said could them what time "
      "people about more other some only new after first also can like just over most such where through before "
      "because while should these those language model training tokenizer learning international organization "
      "government university information development community understanding communication everything "
      "responsibility environment performance distributed gradient parameter optimizer sequence").split()
FR = "le la les une des été très élève français où garçon déjà forêt noël château cœur naïve à ça être".split()
DE = "der die das und über größer straße müssen schön früh äußerst können grün mädchen".split()
ES = "el los niño año señor canción corazón mañana está también qué más música".split()
RU = "и в не на я что тот быть с он как это весь она по но они к у ты из мы за вы так же от".split()
EL = "και το να είναι της που με για στο από την".split()
ZH = "我们 中国 人民 学习 语言 模型 训练 数据 的 是 在 有 和 了 不".split()
JA = "これは 日本語 の テスト です ひらがな カタカナ 漢字".split()
CODE = ["def f(x):", "    return x + 1", "for (int i = 0; i < n; i++) {", "    a[i] = b[i] * 2;", "}",
        "if __name__ == '__main__':", "    main()", "#include <stdio.h>", "x->y = {1, 2, 3};", "print(f'{x:.3f}')"]


def corpus_sentences(seed, n):
    """n lines of synthetic multilingual text (words, numbers, punctuation, code), seeded."""
    rng = random.Random(seed)
    langs = [(EN, 0.55), (FR, 0.08), (DE, 0.06), (ES, 0.05), (RU, 0.1), (EL, 0.04), (ZH, 0.06), (JA, 0.03),
             (None, 0.03)]
    out = []
    for _ in range(n):
        r, acc, words = rng.random(), 0, EN
        for w, p in langs:
            acc += p
            if r < acc:
                words = w
                break
        if words is None:
            out.append(rng.choice(CODE))
            continue
        k = rng.randint(4, 14)
        toks = []
        for i in range(k):
            x = rng.random()
            if x < 0.06:
                toks.append(str(rng.randint(0, 10 ** rng.randint(1, 6))))
            elif x < 0.1:
                toks.append(rng.choice(["don't", "it's", "we're", "I'll", "they've", "she'd", "I'm"]))
            else:
                t = rng.choice(words)
                toks.append(t.capitalize() if i == 0 and rng.random() < 0.5 else t)
        sep = "" if words in (ZH, JA) else " "
        out.append(sep.join(toks) + rng.choice([".", ".", "!", "?", ",", ":", ""]))
    return out


def _save(tok, path):
    tok.save(path)
    return path


def _pad(vocab, size):
    i = 0
    while len(vocab) < size:
        name = "zzpad%d" % i
        i += 1
        if name not in vocab:
            vocab[name] = len(vocab)
    return vocab


def _llama2_vocab(lines):
    """Trained on the lines with the Metaspace split (merges stay inside words, as SentencePiece's)."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
    t = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    t.normalizer = normalizers.Replace(" ", "▁")
    t.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=True)
    tr = trainers.BpeTrainer(vocab_size=1500, special_tokens=["<unk>", "<s>", "</s>"], limit_alphabet=120,
                             show_progress=False)
    t.train_from_iterator([l.replace("\t", " ") for l in lines], tr)
    m = json.loads(t.to_str())["model"]
    merges = [tuple(x.split(" ")) if isinstance(x, str) else tuple(x) for x in m["merges"]]
    trained = sorted(m["vocab"].items(), key=lambda kv: kv[1])
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab["<0x%02X>" % b] = len(vocab)
    for s, _ in trained:
        if s not in vocab:
            vocab[s] = len(vocab)
    for s, pair in [("▁▁", ("▁", "▁")), ("▁▁▁▁", ("▁▁", "▁▁"))]:  # SentencePiece's whitespace pieces
        if s not in vocab:
            vocab[s] = len(vocab)
            merges.append(pair)
    return _pad(vocab, 32000), merges


def make_llama2(out_dir, lines, metaspace=False):
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, AddedToken
    vocab, merges = _llama2_vocab(lines)
    t = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    if metaspace:
        t.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False)
    else:
        t.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    t.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                   decoders.Strip(content=" ", left=1, right=0)])
    t.add_special_tokens([AddedToken(s, normalized=False, special=True) for s in ["<unk>", "<s>", "</s>"]])
    t.post_processor = processors.TemplateProcessing(single="<s>:0 $A:0", pair="<s>:0 $A:0 <s>:1 $B:1",
                                                     special_tokens=[("<s>", 1)])
    path = _save(t, os.path.join(out_dir, "llama2_metaspace.json" if metaspace else "llama2.json"))
    ids = Tokenizer.from_file(path).encode("हिन्दी 🙂\tend\n").ids  # outside the vocab: byte fallback
    assert ids[0] == 1 and sum(1 for i in ids if 3 <= i <= 258) >= 10, ids
    return path


def _byte_level_trained(lines, regex, vocab_size, nfc):
    from tokenizers import Tokenizer, Regex, models, normalizers, pre_tokenizers, trainers
    t = Tokenizer(models.BPE())
    if nfc:
        t.normalizer = normalizers.NFC()
    t.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False),
                                               pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tr = trainers.BpeTrainer(vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                             show_progress=False)
    t.train_from_iterator(lines, tr)
    m = json.loads(t.to_str())["model"]
    merges = [tuple(x.split(" ")) if isinstance(x, str) else tuple(x) for x in m["merges"]]
    return dict(m["vocab"]), merges, t


def make_llama3(out_dir, lines):
    from tokenizers import Tokenizer, Regex, decoders, models, pre_tokenizers, processors, AddedToken
    vocab, merges, trained = _byte_level_trained(lines, LLAMA3_RE, 2500, False)
    # whole words the merges split become tokens without a merge: only ignore_merges reaches them
    counts = {}
    for l in lines:
        for w, _ in trained.pre_tokenizer.pre_tokenize_str(l):
            if len(w) > 5:
                counts[w] = counts.get(w, 0) + 1
    extra = [w for w, c in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
             if w not in vocab and len(trained.model.tokenize(w)) > 1][:40]
    for w in extra:
        vocab[w] = len(vocab)
    _pad(vocab, 128000)
    t = Tokenizer(models.BPE(vocab=vocab, merges=merges, ignore_merges=True))
    t.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_RE), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    t.decoder = decoders.ByteLevel(add_prefix_space=True, trim_offsets=True, use_regex=True)
    names = ["<|begin_of_text|>", "<|end_of_text|>"] + ["<|reserved_special_token_%d|>" % i for i in range(4)] + \
        ["<|start_header_id|>", "<|end_header_id|>", "<|reserved_special_token_4|>", "<|eot_id|>"] + \
        ["<|reserved_special_token_%d|>" % i for i in range(5, 251)]
    t.add_special_tokens([AddedToken(s, normalized=False, special=True) for s in names])
    t.post_processor = processors.Sequence([
        processors.ByteLevel(add_prefix_space=True, trim_offsets=False, use_regex=True),
        processors.TemplateProcessing(single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B:1",
                                      special_tokens=[("<|begin_of_text|>", 128000)])])
    path = _save(t, os.path.join(out_dir, "llama3.json"))
    assert Tokenizer.from_file(path).token_to_id("<|begin_of_text|>") == 128000
    # ignore_merges must matter on this corpus
    j = json.load(open(path, encoding="utf-8"))
    j["model"]["ignore_merges"] = False
    plain = Tokenizer.from_str(json.dumps(j))
    sample = "\n".join(lines[:400])
    assert Tokenizer.from_file(path).encode(sample).ids != plain.encode(sample).ids, "ignore_merges changes nothing"
    return path


QWEN25_SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
                  "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
                  "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>"]
QWEN25_ADDED = ["<tool_call>", "</tool_call>"]  # added but not special in Qwen2.5
QWEN25_FIM = ["<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>"]


def make_qwen2(out_dir, lines):
    from tokenizers import Tokenizer, Regex, decoders, models, normalizers, pre_tokenizers, processors, AddedToken
    vocab, merges, _ = _byte_level_trained(lines, QWEN2_RE, 2500, True)
    _pad(vocab, 151643)
    t = Tokenizer(models.BPE(vocab=vocab, merges=merges, dropout=None, unk_token=None, continuing_subword_prefix="",
                             end_of_word_suffix="", fuse_unk=False, byte_fallback=False))
    t.normalizer = normalizers.NFC()
    t.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_RE), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    t.decoder = decoders.ByteLevel()
    t.post_processor = processors.ByteLevel(trim_offsets=False)
    t.add_special_tokens([AddedToken(s, normalized=False, special=True) for s in QWEN25_SPECIAL])
    t.add_tokens([AddedToken(s, normalized=False, special=False) for s in QWEN25_ADDED])
    t.add_special_tokens([AddedToken(s, normalized=False, special=True) for s in QWEN25_FIM])
    path = _save(t, os.path.join(out_dir, "qwen2.json"))
    assert Tokenizer.from_file(path).token_to_id("<|endoftext|>") == 151643
    return path


def training_lines():
    lines = corpus_sentences(1, 6000)
    lines += ["    " + c for c in CODE] * 20
    return lines


def make_all(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    lines = training_lines()
    return {"llama2": make_llama2(out_dir, lines), "llama2_metaspace": make_llama2(out_dir, lines, metaspace=True),
            "llama3": make_llama3(out_dir, lines), "qwen2": make_qwen2(out_dir, lines)}


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_tokenizers.py OUT_DIR")
    for name, path in make_all(sys.argv[1]).items():
        print(name, path)
