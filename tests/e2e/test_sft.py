#!/usr/bin/env python3
"""test_sft.py — `ztrain prepare --sft` (src/cmd/prepare_sft*.c): fine-tuning examples rendered by chat templates,
padded, with a loss mask, against transformers' apply_chat_template and Hugging Face `tokenizers`.

Run from the repository root with the reference venv (scripts/setup-venv.sh; apply_chat_template needs jinja2):
    .venv-ref/bin/python tests/e2e/test_sft.py
Prints "PASS name (details)" / "FAIL name: reason" per case and exits non-zero if any failed. The tokenizer.json
files are made by tests/helpers/make_tokenizers.py (shaped like Qwen2's, Llama 3's and Llama 2's in both layouts;
no model hub is reachable) and get the real models' chat templates (Qwen2-Instruct's, Llama-3-Instruct's,
Llama-2-chat's, copied below) in transformers' PreTrainedTokenizerFast.
  ids_mask_*      seeded chat examples (multilingual text, runs of white space and newlines at the content's ends,
                  decomposed accents for NFC, emoji, U+2581, empty assistant turns, several turns, system or not):
                  the shard's ids equal apply_chat_template(messages, tokenize=True), and its mask is 1 exactly on
                  the tokens that overlap an assistant turn (found independently: the rendered string of
                  messages[:i] and messages[:i+1] bound turn i; the role header and chatml's "\\n" after <|im_end|>
                  are not the turn's; the token offsets come from tokenizers' offset mapping), except the first
                  token (never a target). Also the split (the last floor(n F) examples are val.bin), the header
                  (version 2, mask flag, example length T+1), and the padding (end-of-text id, mask 0).
                  chatml: Qwen2's real template for examples with a system message, plain ChatML for the others.
  prompt_*        {"prompt", "response"} examples: template none against tokenizers' encode(prompt + response) with
                  the document framing and the end-of-text token; chatml / llama3 against apply_chat_template of a
                  user and an assistant turn; renamed fields; gzip and zstd inputs give the same bytes.
  truncate_*      right (the end cut), left (the start cut) and drop (counted, with a warning naming FILE:LINE)
  special_text    "<|im_end|>" inside a content is text, not the special token
  loss_vs_hf      a tiny random GPT-2 (transformers, float64) with labels = ids where the mask is 1 and -100
                  elsewhere: its loss equals ztrain's first-step loss on the shard (the model imported with
                  `ztrain import`, train.steps=1, data.shuffle=false): rel <= 1e-5; the loss without the mask
                  differs by far more (the control)
  train_sft       `ztrain train` on a shard of SFT examples (seq_len T): loss decreases over 30 steps;
                  train.seq_len != T exits 2 with one line naming the shard and the right seq_len
  bad_*           bad inputs exit 2 with one line naming FILE:LINE (or the option) and what is expected; an
                  existing DIR/train.bin survives unchanged and no .tmp is left
"""
import gzip
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tests", "helpers"))
import make_tokenizers  # noqa: E402

ZT = os.environ.get("ZTRAIN", os.path.join(REPO, "ztrain"))
FAILS = 0


def report(ok, name, detail=""):
    global FAILS
    if ok:
        print(f"PASS {name}" + (f" ({detail})" if detail else ""), flush=True)
    else:
        FAILS += 1
        print(f"FAIL {name}: {detail}", flush=True)


try:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast
    from transformers.utils import logging as hf_logging
    import jinja2  # noqa: F401  (apply_chat_template)
    hf_logging.set_verbosity_error()
except Exception as e:  # noqa: BLE001
    report(False, "imports", f"{type(e).__name__}: {e} (run scripts/setup-venv.sh; use .venv-ref/bin/python)")
    sys.exit(1)

# the real models' chat templates (tokenizer_config.json of Qwen2-7B-Instruct, Meta-Llama-3-8B-Instruct,
# Llama-2-7b-chat-hf), and plain ChatML (Qwen2's without its default system message)
QWEN2 = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n"
         "You are a helpful assistant.<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
         "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>"
         "assistant\n' }}{% endif %}")
CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>'"
          " + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
LLAMA3 = ("{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' "
          "+ message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if "
          "loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if "
          "add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}")
LLAMA2 = ("{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = "
          "messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}"
          "{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) "
          "%}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
          "{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + "
          "'\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}"
          "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif "
          "message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}")
# per family: bos, eos (transformers' tokenizer_config), the end-of-text id prepare writes after a document
FAMILY = {"qwen2": ("<|endoftext|>", "<|im_end|>", "<|endoftext|>"),
          "llama3": ("<|begin_of_text|>", "<|eot_id|>", "<|end_of_text|>"),
          "llama2": ("<s>", "</s>", "</s>"), "llama2_metaspace": ("<s>", "</s>", "</s>")}
# the assistant turn's header and trailer around what is trained
TURN = {"chatml": ("<|im_start|>assistant\n", "\n"), "qwen2": ("<|im_start|>assistant\n", "\n"),
        "llama3": ("<|start_header_id|>assistant<|end_header_id|>\n\n", ""), "llama2": ("", "")}


def zt(*args, timeout=600):
    p = subprocess.run([ZT, *args], cwd=REPO, capture_output=True, timeout=timeout)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def read_shard(path):
    with open(path, "rb") as f:
        d = f.read()
    assert d[:8] == b"ZTSHARD\0", f"{path}: bad magic"
    ver, width, vocab, eot, count = struct.unpack_from("<IIIIQ", d, 8)
    flags, L = struct.unpack_from("<II", d, 32)
    assert len(d) == 64 + count * width + (count if flags & 1 else 0), f"{path}: size"
    ids = list(struct.unpack_from("<%d%s" % (count, "H" if width == 2 else "I"), d, 64))
    mask = list(d[64 + count * width:]) if flags & 1 else None
    ex = [(ids[i:i + L], mask[i:i + L]) for i in range(0, count, L)] if L else []
    return dict(version=ver, vocab=vocab, eot=eot, flags=flags, L=L, count=count, examples=ex)


def hf_tok(path, family, template=None):
    bos, eos, _ = FAMILY[family]
    t = PreTrainedTokenizerFast(tokenizer_file=path, bos_token=bos, eos_token=eos, clean_up_tokenization_spaces=False)
    t.chat_template = template
    return t


def overlap_mask(offsets, spans):
    """1 for a token whose character span meets one of spans (a zero-width token: lies inside one)"""
    return [int(any((a < e and b > s) if b > a else (s <= a < e) for s, e in spans)) for a, b in offsets]


def ref_chat(tok, kind, msgs):
    """ids of apply_chat_template and the mask of the assistant turns, computed from the rendered strings"""
    ids = tok.apply_chat_template(msgs, tokenize=True)
    text = tok.apply_chat_template(msgs, tokenize=False)
    head, tail = TURN[kind]
    spans = []
    for i, m in enumerate(msgs):
        if m["role"] != "assistant":
            continue
        post = tok.apply_chat_template(msgs[:i + 1], tokenize=False)
        # a first message's turn starts after what the template writes first (Llama 3's BOS)
        pre = tok.apply_chat_template(msgs[:i], tokenize=False) if i else post[:post.find(head)] if head else ""
        if not (text.startswith(post) and post.startswith(pre + head) and post.endswith(tail)):
            raise AssertionError(f"turn {i} does not render as a suffix: {post[len(pre):]!r}")
        spans.append((len(pre) + len(head), len(post) - len(tail)))
    enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
    if enc.input_ids != ids:
        raise AssertionError("tokenizing the rendered string differs from apply_chat_template's ids")
    mask = overlap_mask(enc.offset_mapping, spans)
    mask[0] = 0
    return ids, mask


def ref_prompt(tok, family, prompt, response):
    """template none: encode(prompt + response) with the tokenizer's framing, then the end-of-text token"""
    text = prompt + response
    enc = tok(text, add_special_tokens=True, return_offsets_mapping=True, return_special_tokens_mask=True)
    ids, mask, lead = list(enc.input_ids), [], True
    for (a, b), sp in zip(enc.offset_mapping, enc.special_tokens_mask):
        if sp:
            mask.append(0 if lead else 1)
        else:
            lead = False
            mask.append(overlap_mask([(a, b)], [(len(prompt), len(text))])[0])
    end = tok.convert_tokens_to_ids(FAMILY[family][2])
    if not ids or ids[-1] != end:
        ids.append(end)
        mask.append(1)
    mask[0] = 0
    return ids, mask


# ----------------------------------------------------------------------------------- corpus

TRICKY = ["\n\nstarts with newlines", "  two spaces first", "ends with newlines\n\n", "trailing spaces   ",
          "\ttab\tseparated\t", "e\u0301te\u0301 de\u0301compose\u0301", "\u0301combining first", "emoji \U0001F600\U0001F44D\U0001F3FD",
          "\u2581marked\u2581spaces\u2581", "line one\r\nline two", "\u3000ideographic space\u3000", "numbers 1234567 89",
          "code:\n    return x + 1\n", "a", "   ", "\u00a0nbsp\u00a0", "mixed\u2581 \u2581mark"]


def content(rng, sentences):
    if rng.random() < 0.25:
        return rng.choice(TRICKY)
    k = rng.randint(1, 3)
    seps = [" ", "\n", "\n\n", "  ", ""]
    s = rng.choice(sentences)
    for _ in range(k - 1):
        s += rng.choice(seps) + rng.choice(sentences)
    if rng.random() < 0.15:
        s = rng.choice(["\n", " ", "\n\n", "\t"]) + s
    if rng.random() < 0.15:
        s += rng.choice(["\n", " ", "\n\n"])
    return s


def chats(seed, n, alternating):
    rng = random.Random(seed)
    sentences = make_tokenizers.corpus_sentences(seed + 7, 400)
    out = []
    for i in range(n):
        msgs = []
        if rng.random() < 0.5:
            msgs.append({"role": "system", "content": content(rng, sentences)})
        turns = rng.randint(1, 3)
        for _ in range(turns):
            msgs.append({"role": "user", "content": content(rng, sentences)})
            msgs.append({"role": "assistant", "content": "" if rng.random() < 0.05 else content(rng, sentences)})
        if not alternating and rng.random() < 0.3:  # any order: chatml and llama3 render every sequence
            rng.shuffle(msgs)
            if not any(m["role"] == "assistant" for m in msgs):
                msgs.append({"role": "assistant", "content": "ok"})
        if rng.random() < 0.2 and msgs[-1]["role"] == "assistant":
            msgs.append({"role": "user", "content": content(rng, sentences)})  # a last user turn: trains nothing
        out.append(msgs)
    return out


def write_jsonl(path, rows, blank_every=0):
    with open(path, "w", encoding="utf-8") as f:
        for i, r in enumerate(rows):
            f.write(json.dumps(r, ensure_ascii=i % 2 == 0) + "\n")
            if blank_every and i % blank_every == 0:
                f.write("  \n")


def prepare(inp, tok, T, out, *extra):
    ins = inp if isinstance(inp, list) else [inp]
    args = ["prepare", "--sft"] + sum((["--input", x] for x in ins), []) + ["--tokenizer", tok, "--seq-len", str(T),
                                                                           "--out-dir", out, *extra]
    return zt(*args)


def compare(name, out, refs, T, val_fraction, eot, detail=""):
    """the shards of out against refs [(ids, mask)] (file order), split and padding included"""
    try:
        tr, va = read_shard(os.path.join(out, "train.bin")), read_shard(os.path.join(out, "val.bin"))
    except Exception as e:  # noqa: BLE001
        return report(False, name, f"shards: {e}")
    L = T + 1
    n_val = int(len(refs) * val_fraction + 1e-9)
    got = tr["examples"] + va["examples"]
    probs = []
    for s, tag in ((tr, "train"), (va, "val")):
        if (s["version"], s["flags"], s["L"], s["eot"]) != (2, 1, L, eot):
            probs.append(f"{tag} header (version {s['version']}, flags {s['flags']}, L {s['L']}, eot {s['eot']})")
    if len(va["examples"]) != n_val or len(got) != len(refs):
        probs.append(f"{len(tr['examples'])} train + {len(va['examples'])} val examples, expected "
                     f"{len(refs) - n_val} + {n_val}")
    bad = []
    ntok = ntrain = 0
    for k, ((ids, mask), (zi, zm)) in enumerate(zip(refs, got)):
        n = len(ids)
        ntok += n
        ntrain += sum(mask)
        if n > L:
            probs.append(f"example {k}: {n} tokens > L {L} (the test's T is too small)")
            continue
        if zi[:n] != ids or zi[n:] != [eot] * (L - n):
            j = next((i for i in range(n) if i >= len(zi) or zi[i] != ids[i]), n)
            bad.append(f"example {k}: ids differ at {j} (ztrain {zi[j:j + 4]}, ref {ids[j:j + 4]})")
        elif zm[:n] != mask or any(zm[n:]):
            j = next((i for i in range(L) if (mask + [0] * L)[i] != zm[i]), 0)
            bad.append(f"example {k}: mask differs at {j} (ztrain {zm[max(0, j - 2):j + 3]}, "
                       f"ref {(mask + [0] * L)[max(0, j - 2):j + 3]})")
    probs += bad[:3]
    report(not probs, name, f"{len(refs)} examples ({len(refs) - n_val} train, {n_val} val), {ntok} tokens, "
           f"{ntrain} trained: ids and mask identical{detail}" if not probs else "; ".join(probs[:4]))


# ----------------------------------------------------------------------------------- cases

LONG = bool(os.environ.get("ZT_LONG"))  # make test-long: every tokenizer layout; make test: one per family


def case_chat(tmp, toks):
    cases = [("chatml", "qwen2", False), ("llama3", "llama3", False), ("llama2", "llama2", True),
             ("llama2", "llama2_metaspace", True)]
    T = 1023
    for seed, (kind, fam, alt) in enumerate(cases):
        if fam == "llama2_metaspace" and not LONG:  # make test-long: also Llama 2's Metaspace layout
            continue
        name = f"ids_mask_{kind}_{fam}"
        rows = chats(100 + seed, 60, alt)
        tpl = {"chatml": CHATML, "llama3": LLAMA3, "llama2": LLAMA2}[kind]
        tok = hf_tok(toks[fam], fam, tpl)
        qwen = hf_tok(toks[fam], fam, QWEN2) if kind == "chatml" else None
        try:
            refs, real = [], 0
            for m in rows:
                r = ref_chat(tok, kind, m)
                if qwen is not None and m[0]["role"] == "system":
                    q = ref_chat(qwen, "qwen2", m)
                    if q != r:
                        raise AssertionError("Qwen2's template and plain ChatML differ on an example with a system "
                                             "message")
                    real += 1
                refs.append(r)
        except Exception as e:  # noqa: BLE001
            report(False, name, f"reference: {type(e).__name__}: {e}")
            continue
        src = os.path.join(tmp, name + ".jsonl")
        write_jsonl(src, [{"messages": m, "id": i} for i, m in enumerate(rows)], blank_every=7)
        out = os.path.join(tmp, name)
        rc, so, se = prepare(src, toks[fam], T, out, "--template", kind, "--val-fraction", "0.2")
        if rc != 0:
            report(False, name, f"exit {rc}: {se.strip()[-300:]}")
            continue
        eot = tok.convert_tokens_to_ids(FAMILY[fam][2])
        compare(name, out, refs, T, 0.2, eot,
                f"; {real} of them also through Qwen2's real template" if qwen is not None else "")


def prompt_rows(seed, n):
    rng = random.Random(seed)
    sentences = make_tokenizers.corpus_sentences(seed + 3, 300)
    rows = []
    for i in range(n):
        p = content(rng, sentences)
        r = content(rng, sentences)
        if i % 5 == 0:
            p += "\nAnswer:"
            r = " " + r
        if i % 11 == 0:
            p = ""
        rows.append({"prompt": p, "response": r})
    return rows


def case_prompt(tmp, toks):
    T = 511
    rows = prompt_rows(11, 40)
    for fam in ("qwen2", "llama3", "llama2") + (("llama2_metaspace",) if LONG else ()):
        name = f"prompt_none_{fam}"
        tok = hf_tok(toks[fam], fam)
        refs = [ref_prompt(tok, fam, r["prompt"], r["response"]) for r in rows]
        src = os.path.join(tmp, name + ".jsonl")
        write_jsonl(src, rows)
        out = os.path.join(tmp, name)
        rc, so, se = prepare(src, toks[fam], T, out, "--val-fraction", "0.1")
        if rc != 0:
            report(False, name, f"exit {rc}: {se.strip()[-300:]}")
            continue
        compare(name, out, refs, T, 0.1, tok.convert_tokens_to_ids(FAMILY[fam][2]))
    # with a template: a user and an assistant turn; renamed fields; compressed inputs
    for kind, fam in (("chatml", "qwen2"), ("llama3", "llama3")):
        name = f"prompt_{kind}_{fam}"
        tok = hf_tok(toks[fam], fam, {"chatml": CHATML, "llama3": LLAMA3}[kind])
        refs = [ref_chat(tok, kind, [{"role": "user", "content": r["prompt"]},
                                     {"role": "assistant", "content": r["response"]}]) for r in rows]
        src = os.path.join(tmp, name + ".jsonl")
        write_jsonl(src, [{"q": r["prompt"], "a": r["response"], "prompt": 5} for r in rows])
        out = os.path.join(tmp, name)
        rc, so, se = prepare(src, toks[fam], T, out, "--template", kind, "--prompt-field", "q", "--response-field",
                             "a", "--val-fraction", "0")
        if rc != 0:
            report(False, name, f"exit {rc}: {se.strip()[-300:]}")
            continue
        eot = tok.convert_tokens_to_ids(FAMILY[fam][2])
        compare(name, out, refs, T, 0, eot, "; fields --prompt-field q --response-field a")
        if fam != "qwen2":
            continue
        with open(src, "rb") as f, gzip.open(src + ".gz", "wb") as g:
            g.write(f.read())
        subprocess.run(["zstd", "-q", "-f", src, "-o", src + ".zst"], check=True)
        same = []
        for suf in (".gz", ".zst"):
            o2 = out + suf.replace(".", "_")
            rc, so, se = prepare(src + suf, toks[fam], T, o2, "--template", kind, "--prompt-field", "q",
                                 "--response-field", "a", "--val-fraction", "0")
            same.append(rc == 0 and all(open(os.path.join(out, f), "rb").read() == open(os.path.join(o2, f), "rb").read()
                                        for f in ("train.bin", "val.bin", "tokenizer.zttok")))
        report(all(same), "prompt_compressed", ".jsonl.gz and .jsonl.zst give the same train.bin, val.bin and "
               "tokenizer.zttok as .jsonl" if all(same) else f"same per (.gz, .zst): {same}")


def case_truncate(tmp, toks):
    fam = "llama3"
    tok = hf_tok(toks[fam], fam, LLAMA3)
    rows = chats(23, 30, False)
    refs = [ref_chat(tok, "llama3", m) for m in rows]
    lens = sorted(len(r[0]) for r in refs)
    T = lens[len(lens) // 2] - 1  # about half the examples are longer than T + 1
    L = T + 1
    src = os.path.join(tmp, "trunc.jsonl")
    write_jsonl(src, [{"messages": m} for m in rows])
    eot = tok.convert_tokens_to_ids("<|end_of_text|>")

    def cut(ids, mask, left):
        if len(ids) <= L:
            return ids, mask
        ids, mask = (ids[-L:], mask[-L:]) if left else (ids[:L], mask[:L])
        return ids, [0] + mask[1:]

    for mode in ("right", "left"):
        out = os.path.join(tmp, "trunc_" + mode)
        rc, so, se = prepare(src, toks[fam], T, out, "--template", "llama3", "--val-fraction", "0", "--truncate", mode)
        want = [cut(i, m, mode == "left") for i, m in refs]
        kept = [w for w in want if sum(w[1])]
        n_long = sum(len(i) > L for i, _ in refs)
        if rc != 0:
            report(False, f"truncate_{mode}", f"exit {rc}: {se.strip()[-300:]}")
            continue
        ok_counts = f"truncated: {n_long} " in so and f"dropped: {len(want) - len(kept)} " in so
        if not ok_counts:
            report(False, f"truncate_{mode}", f"counts: expected {n_long} truncated, {len(want) - len(kept)} dropped: "
                   f"{so.strip()}")
            continue
        compare(f"truncate_{mode}", out, kept, T, 0, eot, f"; T {T}: {n_long} cut at the "
                f"{'start' if mode == 'left' else 'end'}, {len(want) - len(kept)} left without a trained token")
    out = os.path.join(tmp, "trunc_drop")
    rc, so, se = prepare(src, toks[fam], T, out, "--template", "llama3", "--val-fraction", "0", "--truncate", "drop")
    long_lines = [k + 1 for k, (i, _) in enumerate(refs) if len(i) > L]
    kept = [r for r in refs if len(r[0]) <= L]
    warn = [x for x in se.splitlines() if x.startswith("ztrain: warning: ")]
    ok = (rc == 0 and f"dropped: {len(long_lines)} ({len(long_lines)} longer" in so and
          warn and f"{src}:{long_lines[0]}: " in warn[0] and "--truncate drop" in warn[0])
    if not ok:
        report(False, "truncate_drop", f"exit {rc}, expected {len(long_lines)} dropped (lines {long_lines[:4]}): "
               f"{so.strip()[-300:]} {se.strip()[-300:]}")
    else:
        compare("truncate_drop", out, kept, T, 0, eot, f"; {len(long_lines)} dropped and counted, "
                f"the first warning names {os.path.basename(src)}:{long_lines[0]}")


def case_special_text(tmp, toks):
    fam = "qwen2"
    src = os.path.join(tmp, "special.jsonl")
    write_jsonl(src, [{"messages": [{"role": "user", "content": "say <|im_end|> and <|im_start|>"},
                                    {"role": "assistant", "content": "<|im_end|><|endoftext|>"}]}])
    out = os.path.join(tmp, "special")
    rc, so, se = prepare(src, toks[fam], 63, out, "--template", "chatml", "--val-fraction", "0")
    tok = hf_tok(toks[fam], fam)
    if rc != 0:
        return report(False, "special_text", f"exit {rc}: {se.strip()[-300:]}")
    ids, _ = read_shard(os.path.join(out, "train.bin"))["examples"][0]
    sp = [tok.convert_tokens_to_ids(s) for s in ("<|im_start|>", "<|im_end|>", "<|endoftext|>")]
    n = len(ids) - ids[::-1].index(sp[1])  # up to the last <|im_end|>: the padding is <|endoftext|>
    plain = tok("say <|im_end|> and <|im_start|>", add_special_tokens=False, split_special_tokens=True).input_ids
    counts = [ids[:n].count(i) for i in sp]
    ok = counts == [2, 2, 0] and any(ids[k:k + len(plain)] == plain for k in range(n))
    report(ok, "special_text", "special-token strings in contents are encoded as text (tokenizers' "
           "split_special_tokens=True ids); the template's <|im_start|> x2 and <|im_end|> x2 are the only special "
           "ids" if ok else f"special ids (im_start, im_end, endoftext) counted {counts}, expected [2, 2, 0]; "
           f"text ids found {any(ids[k:k + len(plain)] == plain for k in range(n))}")


# ----------------------------------------------------------------------------------- training

def gpt2(V, seed):
    torch.manual_seed(seed)
    cfg = GPT2Config(vocab_size=V, n_positions=64, n_embd=32, n_layer=2, n_head=2, resid_pdrop=0.0, embd_pdrop=0.0,
                     attn_pdrop=0.0)
    m = GPT2LMHeadModel(cfg)
    with torch.no_grad():
        for _, p in m.named_parameters():
            p.add_(torch.randn_like(p) * 0.2)
    return m


def train_args(tmp, name, shard_dir, V, T, steps, extra=()):
    return ["train", "-c", "inputs/tiny.cfg", "--set", f"model.vocab_size={V}", "--set", "model.n_embd=32",
            "--set", "model.n_layer=2", "--set", "model.n_head=2", "--set", "model.block_size=64",
            "--set", f"data.train={shard_dir}/train.bin", "--set", f"data.val={shard_dir}/val.bin",
            "--set", f"train.seq_len={T}", "--set", f"train.steps={steps}", "--set", "eval.every=0",
            "--set", "checkpoint.every=0", "--set", f"run.root={tmp}/runs", "--set", "run.session=sft",
            "--set", f"run.name={name}", *extra]


def losses(tmp, name):
    d = {}
    for line in open(os.path.join(tmp, "runs", "sft", name, "metrics.jsonl")):
        r = json.loads(line)
        if "loss" in r and "step" in r:
            d[r["step"]] = r["loss"]
    return [d[k] for k in sorted(d)]


def case_loss(tmp, toks):
    fam = "llama3"
    tok = hf_tok(toks[fam], fam, LLAMA3)
    V = len(tok)
    T = 63
    rows = []
    for m in chats(31, 40, False):  # short ones: whole examples within 64 tokens
        ids, _ = ref_chat(tok, "llama3", m)
        if 20 < len(ids) <= T + 1 - 4:
            rows.append(m)
    rng = random.Random(5)
    while len(rows) < 12:
        w = make_tokenizers.corpus_sentences(rng.randint(0, 10 ** 6), 3)
        rows.append([{"role": "user", "content": w[0]}, {"role": "assistant", "content": w[1]}])
    src = os.path.join(tmp, "loss.jsonl")
    write_jsonl(src, [{"messages": m} for m in rows])
    out = os.path.join(tmp, "loss")
    rc, so, se = prepare(src, toks[fam], T, out, "--template", "llama3", "--val-fraction", "0.2")
    if rc != 0:
        return report(False, "loss_vs_hf", f"prepare exit {rc}: {se.strip()[-300:]}")
    ex = read_shard(os.path.join(out, "train.bin"))["examples"][:8]
    hf = gpt2(V, 3)
    hf_dir, ck = os.path.join(tmp, "hf_gpt2"), os.path.join(tmp, "gpt2.h5")
    hf.save_pretrained(hf_dir)
    rc, so, se = zt("import", "--safetensors", hf_dir, "--out", ck)
    if rc != 0:
        return report(False, "loss_vs_hf", f"import exit {rc}: {(so + se).strip()[-300:]}")
    rc, so, se = zt(*train_args(tmp, "loss", out, V, T, 1, ["--set", "data.shuffle=false", "--set",
                                                           "train.micro_batch=4", "--set", "train.global_batch=8",
                                                           "--set", "train.warmup_steps=1",
                                                           "--init-from", ck]))
    if rc != 0:
        return report(False, "loss_vs_hf", f"train exit {rc}: {(so + se).strip()[-300:]}")
    z = losses(tmp, "loss")[0]
    ids = torch.tensor([e[0] for e in ex], dtype=torch.long)
    mask = torch.tensor([e[1] for e in ex], dtype=torch.long)
    m64 = hf.double().eval()
    with torch.no_grad():
        ref = float(m64(input_ids=ids, labels=torch.where(mask == 1, ids, torch.full_like(ids, -100))).loss)
        full = float(m64(input_ids=ids, labels=ids).loss)
        shifted = float(m64(input_ids=ids, labels=torch.where(torch.roll(mask, 1, 1) == 1, ids,
                                                              torch.full_like(ids, -100))).loss)
    rel = abs(z - ref) / abs(ref)
    ctl = min(abs(full - ref), abs(shifted - ref)) / abs(ref)
    n = int(mask[:, 1:].sum())
    report(rel <= 1e-5 and ctl > 10 * 1e-5, "loss_vs_hf",
           f"GPT-2 (V {V}, C 32, L 2) on 8 examples of {T + 1} tokens, {n} trained targets: ztrain {z:.8f}, "
           f"transformers f64 {ref:.8f}, rel {rel:.2e} <= 1e-5; controls (no mask {full:.5f}, mask shifted by one "
           f"{shifted:.5f}) differ by rel >= {ctl:.2e}")


def case_train(tmp, toks):
    T = 63
    rng = random.Random(9)
    sentences = make_tokenizers.corpus_sentences(77, 200)
    rows = []
    for i in range(64):  # a learnable response: the prompt's words in upper case
        p = rng.choice(sentences)[:60]
        rows.append({"prompt": "Upper: " + p, "response": p.upper()})
    src = os.path.join(tmp, "train.jsonl")
    write_jsonl(src, rows)
    # a small tokenizer of ztrain's own (GPT-2 configuration): the tiny model's vocab stays small
    corpus = os.path.join(tmp, "corpus.txt")
    with open(corpus, "w") as f:
        f.write("\n".join(make_tokenizers.corpus_sentences(1, 3000)) + "\n" + "\n".join(s.upper() for s in sentences))
    rc, so, se = zt("prepare", "--input", corpus, "--vocab-size", "512", "--out-dir", os.path.join(tmp, "bpe"))
    tokp = os.path.join(tmp, "bpe", "tokenizer.zttok")
    out = os.path.join(tmp, "sft_train")
    if rc == 0:
        rc, so, se = prepare(src, tokp, T, out, "--val-fraction", "0.125")
    if rc != 0:
        return report(False, "train_sft", f"prepare exit {rc}: {se.strip()[-300:]}")
    V = read_shard(os.path.join(out, "train.bin"))["vocab"]
    rc, so, se = zt(*train_args(tmp, "smoke", out, V, T, 30, ["--set", "train.lr=1e-2", "--set", "train.warmup_steps=3",
                                                               "--set", "model.padded_vocab=0"]))
    ls = losses(tmp, "smoke") if rc == 0 else []
    ok = rc == 0 and len(ls) == 30 and sum(ls[-3:]) / 3 < sum(ls[:3]) / 3 - 0.5
    report(ok, "train_sft", f"30 steps on {T + 1}-token examples (vocab {V}): loss {ls[0]:.3f} -> {ls[-1]:.3f} "
           f"(first 3 {sum(ls[:3]) / 3:.3f}, last 3 {sum(ls[-3:]) / 3:.3f})" if ok else
           f"exit {rc}, {len(ls)} losses {ls[:2]}..{ls[-2:]}: {(so + se).strip()[-300:]}")
    rc, so, se = zt(*train_args(tmp, "wrong_T", out, V, T - 1, 2, ["--set", "train.warmup_steps=1"]))
    lines = se.strip().splitlines()
    ok = (rc == 2 and len(lines) == 1 and lines[0].startswith("ztrain: error: ") and "train.bin" in lines[0]
          and f"train.seq_len must be {T}" in lines[0])
    report(ok, "train_sft_wrong_seq_len", f"train.seq_len {T - 1}: exit 2, \"{lines[0] if lines else ''}\"" if ok
           else f"exit {rc}, stderr {se.strip()[-300:]!r}")


# ----------------------------------------------------------------------------------- bad inputs

def case_bad(tmp, toks):
    out = os.path.join(tmp, "bad_out")
    os.makedirs(out, exist_ok=True)
    sentinel = b"an earlier train.bin\n"
    with open(os.path.join(out, "train.bin"), "wb") as f:
        f.write(sentinel)
    good = json.dumps({"prompt": "hi", "response": "there"})
    chat = lambda *ms: json.dumps({"messages": [{"role": r, "content": c} for r, c in ms]})  # noqa: E731
    ua = chat(("user", "q"), ("assistant", "a"))
    cases = [  # name, lines (bytes), expected line, expected text, extra options
        ("bad_json", [good, "", '{"prompt": "a", "response": }'], 3, "invalid JSON at byte 29", ()),
        ("bad_not_object", [good, "[1, 2]"], 2, "the line is an array (expected one JSON object per line)", ()),
        ("bad_no_response", [good, good, '{"prompt": "a"}'], 3, 'no field "response" in the object', ()),
        ("bad_no_fields", ['{"text": "a"}'], 1, 'no field "messages" or "prompt"', ()),
        ("bad_not_string", ['{"prompt": 5, "response": "a"}'], 1, 'field "prompt" is a number (expected a string)', ()),
        ("bad_no_role", [ua, json.dumps({"messages": [{"content": "x"}]})], 2, 'message 1 has no "role"',
         ("--template", "chatml")),
        ("bad_no_content", [json.dumps({"messages": [{"role": "user", "content": "x"}, {"role": "assistant"}]})], 1,
         'message 2 has no "content"', ("--template", "chatml")),
        ("bad_role", [ua, ua, chat(("user", "q"), ("tool", "x"))], 3,
         'message 2 has role "tool" (expected system, user or assistant)', ("--template", "llama3")),
        ("bad_content_type", [json.dumps({"messages": [{"role": "user", "content": None}]})], 1,
         "message 1's \"content\" is null (expected a string)", ("--template", "chatml")),
        ("bad_utf8", [good.encode(), b'{"prompt": "caf\xc3", "response": "x"}'], 2, "invalid UTF-8 at byte 16", ()),
        ("bad_surrogate", ['{"prompt": "\\ud800", "response": "x"}'], 1, "lone surrogate", ()),
        ("bad_no_assistant", [ua, chat(("system", "s"), ("user", "q"))], 2, "no assistant message",
         ("--template", "chatml")),
        ("bad_llama2_order", [chat(("user", "q"), ("user", "q2"), ("assistant", "a"))], 1,
         "--template llama2 expects user and assistant turns alternating", ("--template", "llama2")),
        ("bad_chat_without_template", [good, ua], 2, 'a chat example ("messages") needs --template', ()),
        ("bad_empty_messages", ['{"messages": []}'], 1, 'field "messages" is an empty array', ("--template", "chatml")),
    ]
    tok_for = {"chatml": "qwen2", "llama3": "llama3", "llama2": "llama2"}  # --template's tokenizer
    def reset():
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        with open(os.path.join(out, "train.bin"), "wb") as f:
            f.write(sentinel)

    for name, lines, line_no, text, extra in cases:
        reset()
        src = os.path.join(tmp, name + (".jsonl.gz" if name == "bad_role" else ".jsonl"))
        data = b"".join((x if isinstance(x, bytes) else x.encode()) + b"\n" for x in lines)
        if src.endswith(".gz"):
            with gzip.open(src, "wb") as g:
                g.write(data)
        else:
            with open(src, "wb") as f:
                f.write(data)
        fam = tok_for[extra[1]] if extra else "qwen2"
        rc, so, se = prepare(src, toks[fam], 63, out, *extra)
        errs = se.strip().splitlines()
        left = sorted(f for f in os.listdir(out) if f != "train.bin")
        intact = open(os.path.join(out, "train.bin"), "rb").read() == sentinel
        want = f"ztrain: error: {src}:{line_no}: "
        ok = rc == 2 and len(errs) == 1 and errs[0].startswith(want) and text in errs[0] and intact and not left
        report(ok, name, f"exit 2: {errs[0][len('ztrain: error: ') + len(tmp) + 1:]!r}; DIR unchanged" if ok else
               f"exit {rc}, stderr {se.strip()[-300:]!r} (expected \"{want}...{text}\"), train.bin intact {intact}, "
               f"other files {left}")
    # errors that are not a line's
    src = os.path.join(tmp, "ok.jsonl")
    with open(src, "w") as f:
        f.write(good + "\n" + json.dumps({"prompt": "x" * 400, "response": "y"}) + "\n")
    txt = os.path.join(tmp, "ok.txt")
    shutil.copy(src, txt)
    others = [
        ("bad_template_token", [src, toks["llama3"], "--template", "chatml"], 'the tokenizer has no token "<|im_start|>"'),
        ("bad_all_dropped", [src, toks["qwen2"], "--truncate", "drop", "--seq-len", "1"], "no example left"),
        ("bad_text_input", [txt, toks["qwen2"]], "ok.txt: not a JSON Lines name"),
        ("bad_template_name", [src, toks["qwen2"], "--template", "vicuna"],
         "--template vicuna: expected none, chatml, llama2 or llama3"),
        ("bad_seq_len", [src, toks["qwen2"], "--seq-len", "0"], "--seq-len 0: expected an integer"),
    ]
    for name, (inp, tk, *extra), text in others:
        reset()
        T = extra[extra.index("--seq-len") + 1] if "--seq-len" in extra else "63"
        extra = [x for i, x in enumerate(extra) if x != "--seq-len" and (i == 0 or extra[i - 1] != "--seq-len")]
        rc, so, se = prepare(inp, tk, int(T), out, *extra)
        errs = [x for x in se.strip().splitlines() if not x.startswith("ztrain: warning: ")]  # the dropped ones
        left = sorted(f for f in os.listdir(out) if f != "train.bin")
        intact = open(os.path.join(out, "train.bin"), "rb").read() == sentinel
        ok = rc == 2 and len(errs) == 1 and errs[0].startswith("ztrain: error: ") and text in errs[0] and intact \
            and not left
        report(ok, name, f"exit 2: {errs[0][len('ztrain: error: '):].replace(tmp + '/', '')!r}; DIR unchanged" if ok
               else f"exit {rc}, stderr {se.strip()[-300:]!r} (expected {text!r}), intact {intact}, files {left}")


def main():
    if not os.access(ZT, os.X_OK):
        report(False, "build", f"{ZT} not found: run make")
        return 1
    tmp = tempfile.mkdtemp(prefix="zt-sft-")
    try:
        toks = make_tokenizers.make_all(os.path.join(tmp, "tok"))
        for case in (case_chat, case_prompt, case_truncate, case_special_text, case_bad, case_loss, case_train):
            try:
                case(tmp, toks)
            except Exception as e:  # noqa: BLE001
                report(False, case.__name__, f"{type(e).__name__}: {e}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{'FAIL' if FAILS else 'PASS'}: test_sft ({FAILS} failed)", flush=True)
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
