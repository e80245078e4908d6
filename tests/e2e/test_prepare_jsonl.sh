#!/usr/bin/env bash
# Tests of `ztrain prepare` on document sources (src/io/docsrc.c, src/cmd/prepare_pipe.c): JSON Lines, gzip and
# zstd inputs give the ids of Hugging Face `tokenizers` encoding the same documents, framed as the tokenizer
# frames documents (GPT-2 style with --eot-between-docs, Llama 2 / Llama 3 BOS, Qwen2's end-of-text), split per
# file (the last floor(n F) documents are validation); the outputs are the same bytes for 1 and 2 threads, any
# work-unit size (documents cut inside) and 1, 2 or 3 MPI ranks; tokenizer training from JSON Lines equals
# training on the same documents as text files; every bad input exits 2 with one line naming the line number and
# leaves the output directory as it was; the Parquet converter (tools/parquet_to_jsonl.py); a prepare killed
# with SIGKILL leaves no train.bin and an earlier one unchanged.
# Run from the repo root. One line per case: PASS name / FAIL name: reason.
set -u
cd "$(dirname "$0")/../.."
. tests/helpers/lib.sh
REF=${ZT_PY:-.venv-ref/bin/python}

if [ ! -x "$ZT" ]; then fail "ztrain_binary: $ZT not found (build with make first)"; finish; fi
if ! "$REF" -c 'import tokenizers' 2>/dev/null; then fail "reference: $REF cannot import tokenizers (scripts/setup-venv.sh)"; finish; fi

# ---- the reference: corpus, tokenizers, and the expected shards computed with HF tokenizers
cat > "$TMP/ref.py" <<'EOF'
import gzip, json, math, os, random, struct, sys
sys.path.insert(0, "tests/helpers")

def docs_of(path):
    op = gzip.open if path.endswith(".gz") else open
    with op(path, "rt", encoding="utf-8", newline="\n") as f:
        return [json.loads(l) for l in f if l.strip(" \t\r\n")]

def make(d):
    rng = random.Random(7)
    lic = "/usr/share/common-licenses/"
    paras = []
    for n in ["GPL-3", "Apache-2.0", "Artistic", "BSD", "MPL-2.0", "LGPL-2.1"]:
        paras += [p for p in open(lic + n, encoding="utf-8").read().split("\n\n") if p.strip()]
    tricky = ["", "  leading spaces", "trailing spaces and lines  \n\n", "tabs\tand\r\nCRLF\r\n",
              "caf\u00e9 na\u00efve \u4e2d\u6587 \u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac \U0001F600 e\u0301 \u212b",
              "digits 1234567 3.14159 and don't I'll we're THEY'RE", "a" * 3000, "\u2028 line sep \u00a0 nbsp",
              "x" + " y" * 2000, "quote \" back\\slash / solidus"]
    docs = paras[:]
    rng.shuffle(docs)
    long_doc = "\n\n".join(paras[:60])                       # about 40 KB: cut inside at --chunk-kb 1
    a = docs[:150] + tricky[:5] + [long_doc]
    b = docs[150:] + tricky[5:]
    rng.shuffle(b)
    def write(path, texts, ascii_, key="text", extra=True):
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            for i, t in enumerate(texts):
                o = {"id": i, "meta": {"src": "lic", "n": [i, 1.5]}, key: t} if extra else {key: t}
                f.write(json.dumps(o, ensure_ascii=ascii_) + ("\r\n" if i % 7 == 3 else "\n"))
                if i % 11 == 5:
                    f.write("\n")                            # a blank line
    write(d + "/a.jsonl", a, True)                            # \u escapes, surrogate pairs
    write(d + "/b.jsonl", b, False)
    write(d + "/c.jsonl", a[:40], False, key="content")       # --field content
    # the training documents of a.jsonl and b.jsonl as text files (tokenizer training, below)
    os.makedirs(d + "/docs", exist_ok=True)
    k = 0
    for texts in (a, b):
        cut = len(texts) - math.floor(len(texts) * 0.1 + 1e-9)
        for t in texts[:cut]:
            if t:
                open(d + "/docs/%04d.txt" % k, "w", encoding="utf-8", newline="").write(t)
                k += 1
    from tokenizers import ByteLevelBPETokenizer
    hf = ByteLevelBPETokenizer()
    hf.train_from_iterator(a + b, vocab_size=1500, min_frequency=2, special_tokens=["<|endoftext|>"], show_progress=False)
    hf.save(d + "/gpt2.json")
    import make_tokenizers as mt
    lines = mt.training_lines()
    mt.make_llama2(d, lines)
    mt.make_llama3(d, lines)
    mt.make_qwen2(d, lines)

def shard(path):
    b = open(path, "rb").read()
    v, w, V, e, n = struct.unpack_from("<IIIIQ", b, 8)
    return list(struct.unpack_from("<%d%s" % (n, "H" if w == 2 else "I"), b, 64))

def expect(tok, out, frame, frac, files, field="text"):
    """frame: eot (GPT-2 style, <|endoftext|> between documents), bos (the template's BOS comes with
    encode), docend (<|endoftext|> after each document)"""
    from tokenizers import Tokenizer
    t = Tokenizer.from_file(tok)
    eot = t.token_to_id("<|endoftext|>")
    want = [[], []]
    ndocs = [0, 0]
    for f in files:
        texts = [o[field] for o in docs_of(f)]
        cut = len(texts) - math.floor(len(texts) * frac + 1e-9)
        for i, e in enumerate(t.encode_batch(texts)):
            k = int(i >= cut)
            if frame == "eot" and ndocs[k]:
                want[k].append(eot)
            want[k] += e.ids
            if frame == "docend":
                want[k].append(eot)
            ndocs[k] += 1
    for k, name in enumerate(["train.bin", "val.bin"]):
        got = shard(os.path.join(out, name))
        if got != want[k]:
            i = next((i for i in range(min(len(got), len(want[k]))) if got[i] != want[k][i]), min(len(got), len(want[k])))
            print(f"{name}: {len(got)} ids, HF {len(want[k])}; first difference at {i}: ztrain {got[i:i+4]} HF {want[k][i:i+4]}")
            return
    print(f"ok ({len(want[0])} + {len(want[1])} ids, {ndocs[0]} + {ndocs[1]} documents)")

if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2])
    elif sys.argv[1] == "expect":
        expect(sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5]), sys.argv[6:-1], sys.argv[-1])
EOF
if ! out=$("$REF" "$TMP/ref.py" make "$TMP" 2>&1); then fail "reference_corpus: $(echo "$out" | tail -3)"; finish; fi
A=$TMP/a.jsonl B=$TMP/b.jsonl

# same_outputs NAME DIR_A DIR_B: the three outputs byte for byte
same_outputs() {
  local f bad=""
  for f in train.bin val.bin tokenizer.zttok; do
    [ -s "$2/$f" ] && cmp -s "$2/$f" "$3/$f" || bad="$bad $f"
  done
  if [ -z "$bad" ]; then pass "$1"; else fail "$1: differ or missing:$bad ($2 vs $3)"; fi
}
# hf_check NAME TOKENIZER OUT FRAME FRACTION FIELD FILES...: the shards equal the HF reference
hf_check() {
  local name=$1 tok=$2 out=$3 frame=$4 frac=$5 field=$6; shift 6
  local r; r=$("$REF" "$TMP/ref.py" expect "$tok" "$out" "$frame" "$frac" "$@" "$field" 2>&1)
  if [[ "$r" == ok* ]]; then pass "$name ($r)"; else fail "$name: $r"; fi
}
prep() { "$ZT" prepare "$@" > "$TMP/p.out" 2> "$TMP/p.err" || { echo "prepare exited $?: $(tail -n 2 "$TMP/p.err")" >&2; return 1; }; }

# ---- JSON Lines against HF tokenizers, GPT-2 style framing
prep --input "$A" --input "$B" --tokenizer "$TMP/gpt2.json" --eot-between-docs --val-fraction 0.1 --threads 1 --out-dir "$TMP/j1"
hf_check jsonl_ids_equal_hf "$TMP/gpt2.json" "$TMP/j1" eot 0.1 text "$A" "$B"
# documents cut inside (1 KB work units) on 2 threads: the same bytes, and still HF's ids
prep --input "$A" --input "$B" --tokenizer "$TMP/gpt2.json" --eot-between-docs --val-fraction 0.1 --threads 2 --chunk-kb 1 --out-dir "$TMP/j2"
same_outputs jsonl_threads_1_vs_2_cut_units "$TMP/j1" "$TMP/j2"
# compressed: .jsonl.gz (two gzip members) and .jsonl.zst give the same bytes as the plain files
{ head -n 50 "$A" | gzip -c; tail -n +51 "$A" | gzip -c; } > "$TMP/a.jsonl.gz"
gzip -c "$B" > "$TMP/b.jsonl.gz"
zstd -q -c "$A" > "$TMP/a.jsonl.zst" && zstd -q -c "$B" > "$TMP/b.jsonl.zst"
prep --input "$TMP/a.jsonl.gz" --input "$TMP/b.jsonl.zst" --tokenizer "$TMP/gpt2.json" --eot-between-docs --val-fraction 0.1 --out-dir "$TMP/jc"
same_outputs jsonl_gz_zst_equal_plain "$TMP/j1" "$TMP/jc"
# --field
prep --input "$TMP/c.jsonl" --tokenizer "$TMP/gpt2.json" --field content --eot-between-docs --out-dir "$TMP/jf"
hf_check jsonl_field_option "$TMP/gpt2.json" "$TMP/jf" eot 0.05 content "$TMP/c.jsonl"

# ---- the Llama family's framing (BOS templates, Qwen2's document end), documents cut inside where safe
for t in llama2:bos llama3:bos qwen2:docend; do
  n=${t%%:*}
  prep --input "$A" --input "$B" --tokenizer "$TMP/$n.json" --val-fraction 0.1 --chunk-kb 1 --threads 2 --out-dir "$TMP/l_$n"
  hf_check "jsonl_framing_$n" "$TMP/$n.json" "$TMP/l_$n" "${t#*:}" 0.1 text "$A" "$B"
done

# ---- text files: .txt.gz / .txt.zst equal the plain file; units cut inside equal the whole document
cat /usr/share/common-licenses/GPL-3 /usr/share/common-licenses/Apache-2.0 /usr/share/common-licenses/GPL-2 > "$TMP/t.txt"
gzip -c "$TMP/t.txt" > "$TMP/t.txt.gz"; zstd -q -c "$TMP/t.txt" > "$TMP/t.txt.zst"
prep --input "$TMP/t.txt" --input "$TMP/t.txt" --tokenizer "$TMP/gpt2.json" --eot-between-files --threads 1 --out-dir "$TMP/t1"
prep --input "$TMP/t.txt.gz" --input "$TMP/t.txt.zst" --tokenizer "$TMP/gpt2.json" --eot-between-files --threads 2 --chunk-kb 1 --out-dir "$TMP/t2"
same_outputs text_gz_zst_and_cut_units_equal_plain "$TMP/t1" "$TMP/t2"
"$REF" - "$TMP/gpt2.json" "$TMP/t.txt" "$TMP/t1/train.bin" "$TMP/t1/val.bin" > "$TMP/tr.out" 2>&1 <<'EOF'
import struct, sys
from tokenizers import Tokenizer
t = Tokenizer.from_file(sys.argv[1]); data = open(sys.argv[2], "rb").read()
c = int(len(data) * (1 - 0.05)); c = data.index(b"\n", c - 1) + 1   # the split: the first line start from 95%
tr, va = t.encode(data[:c].decode()).ids, t.encode(data[c:].decode()).ids
e = t.token_to_id("<|endoftext|>")
def shard(p):
    b = open(p, "rb").read(); n = struct.unpack_from("<Q", b, 24)[0]; return list(struct.unpack_from("<%dH" % n, b, 64))
print("ok" if shard(sys.argv[3]) == tr + [e] + tr and shard(sys.argv[4]) == va + [e] + va else "differs")
EOF
if [ "$(cat "$TMP/tr.out")" = ok ]; then pass text_ids_equal_hf; else fail "text_ids_equal_hf: $(tail -n 2 "$TMP/tr.out")"; fi

# ---- ranks: 2 and 3 ranks write the bytes of 1 rank; progress is printed once
if timeout 120 $MPIRUN -np 2 "$ZT" prepare --input "$A" --input "$B" --tokenizer "$TMP/gpt2.json" --eot-between-docs \
     --val-fraction 0.1 --threads 1 --chunk-kb 4 --out-dir "$TMP/r2" > "$TMP/r2.out" 2> "$TMP/r2.err"; then
  same_outputs jsonl_ranks_2_equal_1 "$TMP/j1" "$TMP/r2"
  n=$(grep -c '^encoding: .*MB/s' "$TMP/r2.err"); s=$(grep -c '^tokens written' "$TMP/r2.out")
  if [ "$n" = 1 ] && [ "$s" = 1 ]; then pass ranks_rank0_prints_once; else fail "ranks_rank0_prints_once: $n progress lines, $s summaries"; fi
else
  fail "jsonl_ranks_2_equal_1: mpirun exited $?: $(grep -m1 'ztrain' "$TMP/r2.err")"
fi
# a trained tokenizer (rank 0 trains, the others get its file) on 3 ranks, text and JSON Lines mixed
prep --input "$A" --input "$TMP/t.txt.zst" --vocab-size 700 --val-fraction 0.1 --threads 2 --out-dir "$TMP/v1"
if timeout 120 $MPIRUN -np 3 "$ZT" prepare --input "$A" --input "$TMP/t.txt.zst" --vocab-size 700 --val-fraction 0.1 \
     --threads 1 --chunk-kb 2 --out-dir "$TMP/v3" > /dev/null 2> "$TMP/v3.err"; then
  same_outputs trained_ranks_3_equal_1 "$TMP/v1" "$TMP/v3"
else
  fail "trained_ranks_3_equal_1: mpirun exited $?: $(grep -m1 'ztrain' "$TMP/v3.err")"
fi
# training from JSON Lines = training on the same documents as text files (each its own document)
docs=(); for f in "$TMP"/docs/*.txt; do docs+=(--input "$f"); done
prep --input "$A" --input "$B" --vocab-size 800 --val-fraction 0.1 --out-dir "$TMP/tj"
prep "${docs[@]}" --vocab-size 800 --val-fraction 0 --out-dir "$TMP/tt"
if [ -s "$TMP/tj/tokenizer.zttok" ] && cmp -s "$TMP/tj/tokenizer.zttok" "$TMP/tt/tokenizer.zttok"; then
  pass "train_from_jsonl_equals_text_files ($(( ${#docs[@]} / 2 )) documents)"
else fail "train_from_jsonl_equals_text_files: the trained tokenizers differ"; fi

# ---- bad inputs: exit 2, one line naming the file and line, the output directory untouched
OUT=$TMP/keep
prep --input "$TMP/c.jsonl" --field content --tokenizer "$TMP/gpt2.json" --out-dir "$OUT"
sums() { (cd "$OUT" && ls -A | sort && md5sum train.bin val.bin tokenizer.zttok); }
before=$(sums)
expect_bad() {
  local name=$1 want=$2; shift 2
  "$ZT" prepare "$@" --out-dir "$OUT" > "$TMP/bad.out" 2> "$TMP/bad.err"
  local rc=$? lines first
  lines=$(wc -l < "$TMP/bad.err"); first=$(head -n 1 "$TMP/bad.err")
  if [ "$rc" -ne 2 ]; then fail "$name: exit code $rc (expected 2): $(head -c 300 "$TMP/bad.err")"
  elif [ "$lines" -ne 1 ]; then fail "$name: $lines stderr lines (expected 1): $(head -c 300 "$TMP/bad.err")"
  elif [[ "$first" != "ztrain: error: "*"$want"* ]]; then fail "$name: message lacks '$want': $first"
  elif [ "$(sums)" != "$before" ]; then fail "$name: the output directory changed"
  else pass "$name"; [ -n "${ZT_SHOW:-}" ] && echo "    $first"; fi
}
T="--tokenizer $TMP/gpt2.json"
{ head -n 20 "$B"; echo '{"text": "unclosed'; } > "$TMP/bad1.jsonl"
{ head -n 3 "$B"; echo '{"id": 4, "txt": "no text field"}'; } > "$TMP/bad2.jsonl"
{ head -n 2 "$B"; echo '{"text": 42}'; } > "$TMP/bad3.jsonl"
{ head -n 5 "$B"; printf '{"text": "bad \xff byte"}\n'; } > "$TMP/bad4.jsonl"
printf '\n  \n' > "$TMP/empty.jsonl"
gzip -c "$B" | head -c 3000 > "$TMP/trunc.jsonl.gz"
zstd -q -c "$B" > "$TMP/corrupt.jsonl.zst"; printf '\x13\x37\x13\x37' | dd of="$TMP/corrupt.jsonl.zst" bs=1 seek=100 conv=notrunc 2>/dev/null
expect_bad bad_json_line "bad1.jsonl:21: invalid JSON at byte 19 of the line" --input "$A" --input "$TMP/bad1.jsonl" $T
expect_bad bad_missing_field "bad2.jsonl:4: no field \"text\"" --input "$TMP/bad2.jsonl" $T
expect_bad bad_field_not_string "bad3.jsonl:3: field \"text\" is a number (expected a string)" --input "$TMP/bad3.jsonl" $T
expect_bad bad_invalid_utf8 "bad4.jsonl:6: invalid UTF-8 at byte 15 of the line" --input "$TMP/bad4.jsonl" $T
expect_bad bad_empty_source "empty.jsonl: no documents" --input "$TMP/empty.jsonl" $T
expect_bad bad_truncated_gzip "trunc.jsonl.gz: truncated gzip data" --input "$TMP/trunc.jsonl.gz" $T
expect_bad bad_corrupt_zstd "corrupt.jsonl.zst: corrupt zstd data" --input "$TMP/corrupt.jsonl.zst" $T
expect_bad bad_json_line_training "bad1.jsonl:21: invalid JSON" --input "$TMP/bad1.jsonl" --vocab-size 300
expect_bad bad_field_empty "--field: expected a field name" --input "$A" --field "" $T
# under mpirun: one error line from the ranks together (rank 0's)
timeout 60 $MPIRUN -np 2 "$ZT" prepare --input "$A" --input "$TMP/bad1.jsonl" $T --chunk-kb 1 --out-dir "$OUT" > /dev/null 2> "$TMP/mbad.err"
n=$(grep -c '^ztrain: error: .*bad1.jsonl:21: invalid JSON' "$TMP/mbad.err"); m=$(grep -c '^ztrain:' "$TMP/mbad.err")
if [ "$n" = 1 ] && [ "$m" = 1 ] && [ "$(sums)" = "$before" ]; then pass bad_json_line_2_ranks_one_line
else fail "bad_json_line_2_ranks_one_line: $m ztrain lines ($n the expected one), or the directory changed"; fi

# ---- Parquet: pyarrow writes a file, the converter streams it to JSON Lines, prepare gives the same ids
if "$REF" -c 'import pyarrow' 2>/dev/null; then
  "$REF" - "$B" "$TMP/b.parquet" <<'EOF'
import json, sys
import pyarrow as pa, pyarrow.parquet as pq
texts = [json.loads(l)["text"] for l in open(sys.argv[1], encoding="utf-8") if l.strip()]
pq.write_table(pa.table({"n": list(range(len(texts))), "body": texts}), sys.argv[2], row_group_size=7)
EOF
  if "$REF" tools/parquet_to_jsonl.py "$TMP/b.parquet" "$TMP/bp.jsonl" --column body --batch-rows 5 > "$TMP/pq.out" 2>&1; then
    prep --input "$TMP/bp.jsonl" --tokenizer "$TMP/gpt2.json" --eot-between-docs --out-dir "$TMP/pq"
    prep --input "$B" --tokenizer "$TMP/gpt2.json" --eot-between-docs --out-dir "$TMP/pb"
    same_outputs parquet_converted_equals_jsonl "$TMP/pb" "$TMP/pq"
  else
    fail "parquet_converted_equals_jsonl: converter failed: $(tail -n 1 "$TMP/pq.out")"
  fi
  "$REF" tools/parquet_to_jsonl.py "$TMP/b.parquet" "$TMP/x.jsonl" --column nope > /dev/null 2> "$TMP/pq.err"
  if [ $? = 2 ] && grep -q "no column 'nope' (columns: n, body" "$TMP/pq.err"; then pass parquet_bad_column
  else fail "parquet_bad_column: $(cat "$TMP/pq.err")"; fi
else
  echo "skip parquet_converted_equals_jsonl: pyarrow cannot be imported by $REF (scripts/setup-venv.sh installs it)"
fi

# ---- SIGKILL mid-run: no train.bin in a new directory, an existing one unchanged
"$REF" - "$A" "$B" "$TMP/huge.jsonl" <<'EOF'
import sys
lines = open(sys.argv[1], encoding="utf-8").read() + open(sys.argv[2], encoding="utf-8").read()
with open(sys.argv[3], "w", encoding="utf-8") as f:
    for _ in range(400): f.write(lines)
EOF
for dir in "$TMP/killnew" "$OUT"; do
  "$ZT" prepare --input "$TMP/huge.jsonl" --tokenizer "$TMP/llama3.json" --threads 1 --out-dir "$dir" > /dev/null 2>&1 &
  pid=$!
  for _ in $(seq 800); do [ -s "$dir/train.bin.tmp" ] && break; sleep 0.025; done
  sleep 0.05
  if kill -0 $pid 2>/dev/null; then
    kill -9 $pid; wait $pid 2>/dev/null
    if [ "$dir" = "$OUT" ]; then
      if [ "$(cd "$OUT" && md5sum train.bin val.bin tokenizer.zttok)" = "$(echo "$before" | tail -n 3)" ]; then
        pass killed_prepare_keeps_old_outputs; else fail "killed_prepare_keeps_old_outputs: the outputs changed"; fi
    elif [ ! -e "$dir/train.bin" ] && [ ! -e "$dir/val.bin" ] && [ ! -e "$dir/tokenizer.zttok" ]; then
      pass killed_prepare_leaves_no_train_bin
    else fail "killed_prepare_leaves_no_train_bin: $(ls "$dir" | tr '\n' ' ')"; fi
  else
    wait $pid; fail "killed_prepare ($dir): prepare ended before it could be killed"
  fi
done
finish
