#!/usr/bin/env bash
# Tests of `ztrain prepare` (src/cmd/prepare.c, src/io/data_shard.c): the shards it writes (headers, split,
# --max-tokens, --eot-between-files, uint32 tokens for big vocabs, the unigram baseline), and every
# bad-input case: exit code 2 and one line `ztrain: error: ...` that says what is wrong.
# Run from the repo root. One line per case: PASS name / FAIL name: reason.
set -u
cd "$(dirname "$0")/../.."
. tests/helpers/lib.sh

if [ ! -x "$ZT" ]; then fail "ztrain_binary: $ZT not found (build with make first)"; finish; fi

# ---- a small corpus: license texts, several documents
C1=$TMP/c1.txt C2=$TMP/c2.txt
cat /usr/share/common-licenses/GPL-3 /usr/share/common-licenses/Apache-2.0 > "$C1"
cat /usr/share/common-licenses/Artistic /usr/share/common-licenses/BSD /usr/share/common-licenses/MPL-2.0 > "$C2"

# shard header as "version width vocab eot count" (and a size check) via python
shard_info() {
  $PY - "$1" <<'EOF'
import struct, sys, os
d = open(sys.argv[1], "rb").read()
assert d[:8] == b"ZTSHARD\0", "bad magic"
v, w, V, e, n = struct.unpack_from("<IIIIQ", d, 8)
assert len(d) == 64 + n * w, "size mismatch"
print(v, w, V, e, n)
EOF
}

# expect_error NAME SUBSTRING ARGS... : exit code 2, exactly one stderr line "ztrain: error: ...SUBSTRING..."
expect_error() {
  local name=$1 want=$2; shift 2
  "$ZT" prepare "$@" > "$TMP/out" 2> "$TMP/err"
  local rc=$? lines first
  lines=$(wc -l < "$TMP/err")
  first=$(head -n 1 "$TMP/err")
  if [ "$rc" -ne 2 ]; then fail "$name: exit code $rc (expected 2); stderr: $(head -c 300 "$TMP/err")"
  elif [ "$lines" -ne 1 ]; then fail "$name: $lines stderr lines (expected 1): $(head -c 300 "$TMP/err")"
  elif [[ "$first" != "ztrain: error: "* ]]; then fail "$name: stderr does not start with 'ztrain: error: ': $first"
  elif [[ "$first" != *"$want"* ]]; then fail "$name: message lacks '$want': $first"
  else pass "$name"; [ -n "${ZT_SHOW:-}" ] && echo "    $first"; fi
}

# ---- happy path: train, split, headers, unigram baseline
OUT=$TMP/out1
if "$ZT" prepare --input "$C1" --vocab-size 512 --val-fraction 0.1 --out-dir "$OUT" > "$TMP/sum" 2> "$TMP/log"; then
  pass prepare_train_runs
else
  fail "prepare_train_runs: exit $?: $(tail -n 3 "$TMP/log")"; finish
fi
tr_info=$(shard_info "$OUT/train.bin" 2>&1); va_info=$(shard_info "$OUT/val.bin" 2>&1)
read -r v w V e n <<< "$tr_info"
read -r v2 w2 V2 e2 n2 <<< "$va_info"
if [ "$v" = 1 ] && [ "$w" = 2 ] && [ "$V" = 512 ] && [ "$e" = 511 ] && [ "${n:-0}" -gt 1000 ] &&
   [ "$V2" = 512 ] && [ "${n2:-0}" -gt 50 ] && [ -f "$OUT/tokenizer.zttok" ]; then
  pass prepare_shard_headers
else
  fail "prepare_shard_headers: train '$tr_info' val '$va_info' (expected version 1, width 2, vocab 512, eot 511)"
fi
# the split: decode(train) + decode(val) == the input, and val starts at a line start near 90%
"$ZT" prepare --tokenizer "$OUT/tokenizer.zttok" --decode "$OUT/train.bin" --text-out "$TMP/tr.txt" > /dev/null 2>&1
"$ZT" prepare --tokenizer "$OUT/tokenizer.zttok" --decode "$OUT/val.bin" --text-out "$TMP/va.txt" > /dev/null 2>&1
cat "$TMP/tr.txt" "$TMP/va.txt" > "$TMP/both.txt"
sz=$(stat -c %s "$C1"); trsz=$(stat -c %s "$TMP/tr.txt" 2>/dev/null || echo 0)
if cmp -s "$TMP/both.txt" "$C1" && [ "$(tail -c 1 "$TMP/tr.txt" | od -An -c | tr -d ' ')" = '\n' ] &&
   [ "$trsz" -ge $((sz * 9 / 10)) ] && [ "$trsz" -lt $((sz * 9 / 10 + 200)) ]; then
  pass prepare_split_last_fraction_at_line_start
else
  fail "prepare_split_last_fraction_at_line_start: train part $trsz of $sz bytes, or train+val != input"
fi
# the unigram baseline printed equals the entropy of train.bin's token frequencies
want=$($PY - "$OUT/train.bin" <<'EOF'
import struct, sys, math, collections
d = open(sys.argv[1], "rb").read(); n = struct.unpack_from("<Q", d, 24)[0]
c = collections.Counter(struct.unpack_from("<%dH" % n, d, 64))
print("%.4f" % -sum(k / n * math.log(k / n) for k in c.values()))
EOF
)
got=$(sed -n 's/^unigram baseline loss: //p' "$TMP/sum")
if [ -n "$got" ] && [ "$got" = "$want" ]; then pass prepare_unigram_baseline
else fail "prepare_unigram_baseline: printed '$got', entropy of train.bin is '$want'"; fi
if grep -q "MB/s" "$TMP/log" && grep -q "^tokens written: train $n " "$TMP/sum"; then pass prepare_reports_speed_and_counts
else fail "prepare_reports_speed_and_counts: no MB/s on stderr or wrong token count in: $(cat "$TMP/sum")"; fi

# ---- --max-tokens caps both splits in proportion
"$ZT" prepare --input "$C1" --input "$C2" --tokenizer "$OUT/tokenizer.zttok" --max-tokens 1000 --out-dir "$TMP/out2" > /dev/null 2>&1
a=$(shard_info "$TMP/out2/train.bin" 2>&1 | cut -d' ' -f5); b=$(shard_info "$TMP/out2/val.bin" 2>&1 | cut -d' ' -f5)
if [ "$a" = 1000 ] && [ "$b" = 53 ]; then pass prepare_max_tokens
else fail "prepare_max_tokens: train $a val $b tokens (expected 1000 and ceil(1000*0.05/0.95) = 53)"; fi

# ---- --eot-between-files: exactly one <|endoftext|> between the two files in each split
"$ZT" prepare --input "$C1" --input "$C2" --tokenizer "$OUT/tokenizer.zttok" --eot-between-files --out-dir "$TMP/out3" > /dev/null 2>&1
res=$($PY - "$TMP/out3/train.bin" "$TMP/out3/val.bin" <<'EOF'
import struct, sys
r = []
for p in sys.argv[1:]:
    d = open(p, "rb").read(); n = struct.unpack_from("<Q", d, 24)[0]; eot = struct.unpack_from("<I", d, 20)[0]
    t = struct.unpack_from("<%dH" % n, d, 64)
    r.append(str(sum(1 for x in t if x == eot)))
print(" ".join(r))
EOF
)
if [ "$res" = "1 1" ]; then pass prepare_eot_between_files; else fail "prepare_eot_between_files: eot counts '$res' (expected '1 1')"; fi

# ---- a vocab over 65536 gives uint32 tokens (an HF vocab.json with 70000 ids)
$PY - "$TMP/big" <<'EOF'
import json, os, sys
d = sys.argv[1]; os.makedirs(d)
keep = list(range(33, 127)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
m, k = {}, 0
for b in range(256):
    if b in keep: m[b] = chr(b)
    else: m[b] = chr(256 + k); k += 1
vocab = {m[b]: b for b in range(256)}
for i in range(256, 69999): vocab["tok%d" % i] = i
vocab[m[ord("t")] + m[ord("h")]] = 69999
json.dump(vocab, open(os.path.join(d, "vocab.json"), "w"))
open(os.path.join(d, "merges.txt"), "w").write("#version: 0.2\nt h\n")
EOF
"$ZT" prepare --input "$C1" --tokenizer "$TMP/big/vocab.json" --out-dir "$TMP/out4" > /dev/null 2> "$TMP/log4"
info=$(shard_info "$TMP/out4/train.bin" 2>&1)
has_th=$($PY -c "
import struct,sys; d=open(sys.argv[1],'rb').read(); n=struct.unpack_from('<Q',d,24)[0]
print(69999 in struct.unpack_from('<%dI'%n,d,64))" "$TMP/out4/train.bin" 2>&1)
if [[ "$info" == "1 4 70000 4294967295 "* ]] && [ "$has_th" = True ]; then pass prepare_uint32_tokens_for_big_vocab
else fail "prepare_uint32_tokens_for_big_vocab: header '$info', merged id present: $has_th; $(tail -n 1 "$TMP/log4")"; fi

# ---- bad input: each exits 2 with one clear line
printf 'some text\n' > "$TMP/ok.txt"
: > "$TMP/empty.txt"
{ printf 'text\n'; head -c 5000 /dev/zero; printf 'more text\n'; } > "$TMP/binary.bin"
touch "$TMP/afile"
expect_error bad_missing_input "$TMP/nope.txt: cannot open input file (No such file" --input "$TMP/nope.txt" --vocab-size 300 --out-dir "$TMP/o"
expect_error bad_empty_input "$TMP/empty.txt: empty input file" --input "$TMP/empty.txt" --vocab-size 300 --out-dir "$TMP/o"
expect_error bad_binary_input "$TMP/binary.bin: looks binary (5000 NUL bytes" --input "$TMP/binary.bin" --vocab-size 300 --out-dir "$TMP/o"
expect_error bad_vocab_too_small "--vocab-size 100: out of range (expected 257..65536" --input "$TMP/ok.txt" --vocab-size 100 --out-dir "$TMP/o"
expect_error bad_vocab_too_large "--vocab-size 70000: out of range (expected 257..65536" --input "$TMP/ok.txt" --vocab-size 70000 --out-dir "$TMP/o"
expect_error bad_vocab_not_number "--vocab-size 12k: expected an integer" --input "$TMP/ok.txt" --vocab-size 12k --out-dir "$TMP/o"
expect_error bad_out_dir_not_writable "--out-dir $TMP/afile/sub: cannot create directory" --input "$TMP/ok.txt" --vocab-size 300 --out-dir "$TMP/afile/sub"
expect_error bad_no_input "no --input" --vocab-size 300 --out-dir "$TMP/o"
expect_error bad_both_tokenizer_and_vocab "exactly one of --vocab-size" --input "$TMP/ok.txt" --vocab-size 300 --tokenizer "$OUT/tokenizer.zttok" --out-dir "$TMP/o"
expect_error bad_unknown_option "unknown option '--vocab'" --input "$TMP/ok.txt" --vocab 300 --out-dir "$TMP/o"
expect_error bad_val_fraction "--val-fraction 1.5: expected a number in [0, 1)" --input "$TMP/ok.txt" --vocab-size 300 --val-fraction 1.5 --out-dir "$TMP/o"
# corrupt / unreadable tokenizer files
# (random bytes after a fixed binary start: a random first byte of '{' made it a JSON file 1 run in 256)
{ printf '\001\002\003'; head -c 2997 /dev/urandom; } > "$TMP/garbage.tok"
head -n 100 "$OUT/tokenizer.zttok" > "$TMP/truncated.zttok"
sed '5s/.*/zz/' "$OUT/tokenizer.zttok" > "$TMP/badhex.zttok"
head -c 2000 "$TMP/big/vocab.json" > "$TMP/cut.json"
mkdir -p "$TMP/nomerges" && cp "$TMP/big/vocab.json" "$TMP/nomerges/vocab.json"
mkdir -p "$TMP/badmerge" && cp "$TMP/big/vocab.json" "$TMP/badmerge/vocab.json" && printf '#version: 0.2\nt h\nq zzz\n' > "$TMP/badmerge/merges.txt"
echo '{"model": {"type": "Unigram", "vocab": {"a": 0}}}' > "$TMP/unigram.json"
expect_error bad_tokenizer_missing "$TMP/nope.zttok: cannot open tokenizer file" --input "$TMP/ok.txt" --tokenizer "$TMP/nope.zttok" --out-dir "$TMP/o"
expect_error bad_tokenizer_garbage "$TMP/garbage.tok: not a tokenizer file" --input "$TMP/ok.txt" --tokenizer "$TMP/garbage.tok" --out-dir "$TMP/o"
expect_error bad_tokenizer_truncated "$TMP/truncated.zttok:101: unexpected end of file (truncated" --input "$TMP/ok.txt" --tokenizer "$TMP/truncated.zttok" --out-dir "$TMP/o"
expect_error bad_tokenizer_bad_hex "$TMP/badhex.zttok:5: token 0: bad hex digit" --input "$TMP/ok.txt" --tokenizer "$TMP/badhex.zttok" --out-dir "$TMP/o"
expect_error bad_tokenizer_cut_json "$TMP/cut.json:1: invalid JSON: unexpected end of file" --input "$TMP/ok.txt" --tokenizer "$TMP/cut.json" --out-dir "$TMP/o"
expect_error bad_tokenizer_no_merges_txt "$TMP/nomerges/merges.txt: cannot open merges file" --input "$TMP/ok.txt" --tokenizer "$TMP/nomerges/vocab.json" --out-dir "$TMP/o"
expect_error bad_tokenizer_merge_not_in_vocab "merge 2 ('q zzz'): its second token is not in the vocab" --input "$TMP/ok.txt" --tokenizer "$TMP/badmerge/vocab.json" --out-dir "$TMP/o"
expect_error bad_tokenizer_not_bpe "model type 'Unigram' (expected a byte-level 'BPE'" --input "$TMP/ok.txt" --tokenizer "$TMP/unigram.json" --out-dir "$TMP/o"
expect_error bad_eot_missing "has no <|endoftext|> token" --input "$TMP/ok.txt" --input "$TMP/ok.txt" --tokenizer "$TMP/big/vocab.json" --eot-between-files --out-dir "$TMP/o"
# corrupt shards (data_shard.c), read through --decode
$PY - "$TMP" "$OUT/train.bin" <<'EOF'
import struct, sys
t, src = sys.argv[1], open(sys.argv[2], "rb").read()
open(t + "/magic.bin", "wb").write(b"NOTSHARD" + src[8:])
open(t + "/short.bin", "wb").write(src[:64 + 2000 * 2 + 100])
open(t + "/short.bin", "r+b").write(b"")
hdr = bytearray(src[:64]); struct.pack_into("<Q", hdr, 24, 1000)
open(t + "/trunc.bin", "wb").write(bytes(hdr) + src[64:64 + 1500 - 64])
hdr = bytearray(src[:64]); struct.pack_into("<II", hdr, 12, 4, 50257); struct.pack_into("<Q", hdr, 24, 20)
toks = [5] * 20; toks[12] = 70000
open(t + "/badtok.bin", "wb").write(bytes(hdr) + struct.pack("<20I", *toks))
hdr = bytearray(src[:64]); struct.pack_into("<I", hdr, 8, 7)
open(t + "/version.bin", "wb").write(bytes(hdr) + src[64:])
EOF
expect_error bad_shard_magic "$TMP/magic.bin: not a ztrain shard (bad magic)" --tokenizer "$OUT/tokenizer.zttok" --decode "$TMP/magic.bin" --text-out "$TMP/x"
expect_error bad_shard_truncated "$TMP/trunc.bin: truncated: header says 1000 tokens (2064 bytes) but file has 1500 bytes" --tokenizer "$OUT/tokenizer.zttok" --decode "$TMP/trunc.bin" --text-out "$TMP/x"
expect_error bad_shard_token_range "$TMP/badtok.bin: token 70000 at index 12 >= vocab size 50257" --tokenizer "$OUT/tokenizer.zttok" --decode "$TMP/badtok.bin" --text-out "$TMP/x"
expect_error bad_shard_version "$TMP/version.bin: unsupported shard version 7 (expected 1 or 2)" --tokenizer "$OUT/tokenizer.zttok" --decode "$TMP/version.bin" --text-out "$TMP/x"
finish
