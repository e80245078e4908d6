#!/usr/bin/env bash
# Data at corpus scale: memory-mapped shards, resident memory independent of the corpus, damaged and old shards.
#  data_rss_50gb        a 50 GB shard (sparse: 25e9 zero tokens) trained on for 20 steps (tiny, 1 rank): peak RSS
#                       (results.json) within 5% of the same run on a 1 MB shard; the estimate's data line is printed
#  data_damaged_token   a 300 MB shard (checked window by window) whose token in a window is >= its vocab size, on
#                       2 ranks: exit 2 on both, one line naming the file and index, at the step that reads it;
#                       a 1 MB one (checked whole at open): the same line before the run directory is made
#  data_shard_v1_v2     the same tokens as a version-1 shard and as a version-2 shard with an all-ones mask train to
#                       the same params_hash (a mask of ones changes nothing)
#  data_examples_len    a shard of examples of L tokens with train.seq_len != L - 1: exit 2, one line saying which
set -u
cd "$(dirname "$0")/../.."
. tests/helpers/lib.sh
need_tiny_data
common="--set run.root=$TMP --set run.session=d --set data.val= --set checkpoint.every=0 --set train.log_every=1"

# shard NAME COUNT [VERSION FLAGS EXLEN] < tokens (or sparse zeros with SPARSE=1)
$PY - "$TMP" <<'PY'
import sys, numpy as np
tmp = sys.argv[1]
def hdr(count, version=1, flags=0, exlen=0, vocab=256):
    h = bytearray(64)
    h[0:8] = b"ZTSHARD\0"
    h[8:12] = version.to_bytes(4, "little"); h[12:16] = (2).to_bytes(4, "little")
    h[16:20] = vocab.to_bytes(4, "little"); h[20:24] = (0xFFFFFFFF).to_bytes(4, "little")
    h[24:32] = count.to_bytes(8, "little"); h[32:36] = flags.to_bytes(4, "little"); h[36:40] = exlen.to_bytes(4, "little")
    return bytes(h)
n = 25 * 10**9                                   # 50 GB of 2-byte tokens, all 0, no blocks on disk
with open(f"{tmp}/big.bin", "wb") as f:
    f.write(hdr(n)); f.truncate(64 + 2 * n)
tok = np.random.default_rng(1).integers(0, 256, 500000).astype("<u2")
with open(f"{tmp}/small.bin", "wb") as f:
    f.write(hdr(len(tok))); f.write(tok.tobytes())
with open(f"{tmp}/v2.bin", "wb") as f:
    f.write(hdr(len(tok), 2, 1)); f.write(tok.tobytes()); f.write(np.ones(len(tok), np.uint8).tobytes())
nb = 150 * 10**6                                 # 300 MB (sparse): checked window by window, not at open
with open(f"{tmp}/bad.bin", "wb") as f:
    f.write(hdr(nb)); f.truncate(64 + 2 * nb)
    f.seek(64 + 2 * 40000); f.write((300).to_bytes(2, "little"))   # vocab of the file: 256
small = tok.copy(); small[40000] = 300
with open(f"{tmp}/badsmall.bin", "wb") as f:
    f.write(hdr(len(small))); f.write(small.tobytes())
ex = tok[:33 * 100]
with open(f"{tmp}/ex.bin", "wb") as f:
    f.write(hdr(len(ex), 2, 0, 33)); f.write(ex.tobytes())
PY

# ---------------------------------------------------------------- resident memory: 50 GB vs 1 MB
for s in small big; do
  run_named rss-$s 1 -c inputs/tiny.cfg --set data.train=$TMP/$s.bin --set train.steps=20 \
    || fail "data_rss_50gb: the $s run failed"
done
if [ -f $TMP/d/rss-big/results.json ] && [ -f $TMP/d/rss-small/results.json ]; then
  a=$(result $TMP/d/rss-small peak_rss_bytes); b=$(result $TMP/d/rss-big peak_rss_bytes)
  line=$($ZT estimate -c inputs/tiny.cfg --set data.train=$TMP/big.bin --set data.val= 2>&1 | grep '^data ')
  if $PY -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if abs(b - a) <= 0.05 * a else 1)" "$a" "$b"; then
    pass "data_rss_50gb (peak RSS $b bytes on a $(stat -c %s $TMP/big.bin)-byte shard vs $a on a 1 MB shard; estimate: $line)"
  else
    fail "data_rss_50gb: peak RSS $b bytes on the 50 GB shard vs $a on the 1 MB one (limit 5%)"
  fi
fi

# ---------------------------------------------------------------- a damaged token: every rank exits 2
timeout 120 $MPIRUN -np 2 $ZT train -c inputs/tiny.cfg $common --set run.name=bad --set data.train=$TMP/bad.bin \
  --set data.shuffle=false --set train.steps=1000 --set train.global_batch=8 > $TMP/bad.out 2> $TMP/bad.err
rc=$?
nerr=$(grep -c '^ztrain' $TMP/bad.err) # mpirun adds its own lines about the exit codes
if [ $rc = 2 ] && [ "$nerr" = 1 ] && grep -q "bad.bin: token 300 at index 40000 >= the shard's vocab size 256" $TMP/bad.err; then
  pass "data_damaged_token (2 ranks, exit 2: $(grep '^ztrain' $TMP/bad.err))"
else
  fail "data_damaged_token: exit $rc, $nerr stderr lines: $(head -3 $TMP/bad.err | tr '\n' ' ')"
fi

timeout 120 $MPIRUN -np 2 $ZT train -c inputs/tiny.cfg $common --set run.name=badsmall \
  --set data.train=$TMP/badsmall.bin --set train.steps=10 > $TMP/bads.out 2> $TMP/bads.err
rc=$?
if [ $rc = 2 ] && [ "$(grep -c '^ztrain' $TMP/bads.err)" = 1 ] && [ ! -e $TMP/d/badsmall ] &&
   grep -q "badsmall.bin: token 300 at index 40000 >= the shard's vocab size 256" $TMP/bads.err; then
  pass "data_damaged_token_at_open (2 ranks, exit 2 before the run directory exists)"
else
  fail "data_damaged_token_at_open: exit $rc: $(head -3 $TMP/bads.err | tr '\n' ' ')"
fi

# ---------------------------------------------------------------- version 1 == version 2 with an all-ones mask
run_named v1 1 -c inputs/tiny.cfg --set data.train=$TMP/small.bin --set train.steps=10 || fail "data_shard_v1_v2: v1 run"
run_named v2 1 -c inputs/tiny.cfg --set data.train=$TMP/v2.bin --set train.steps=10 || fail "data_shard_v1_v2: v2 run"
h1=$(result $TMP/d/v1 params_hash 2>/dev/null); h2=$(result $TMP/d/v2 params_hash 2>/dev/null)
[ -n "$h1" ] && [ "$h1" = "$h2" ] && pass "data_shard_v1_v2 (params_hash ${h1:7:16} both)" \
  || fail "data_shard_v1_v2: $h1 vs $h2"

# ---------------------------------------------------------------- examples of L tokens need seq_len L - 1
$ZT train -c inputs/tiny.cfg $common --set run.name=ex --set data.train=$TMP/ex.bin --set train.steps=10 \
  > $TMP/ex.out 2> $TMP/ex.err
rc=$?
if [ $rc = 2 ] && [ "$(grep -c . $TMP/ex.err)" = 1 ] && grep -q "examples of 33 tokens; train.seq_len must be 32" $TMP/ex.err; then
  fail "data_examples_len: seq_len 32 with examples of 33 should be accepted: $(cat $TMP/ex.err)"
elif [ $rc = 0 ]; then
  $ZT train -c inputs/tiny.cfg $common --set run.name=ex2 --set data.train=$TMP/ex.bin --set train.steps=10 \
    --set train.seq_len=16 > $TMP/ex2.out 2> $TMP/ex2.err
  rc=$?
  if [ $rc = 2 ] && [ "$(grep -c . $TMP/ex2.err)" = 1 ] && grep -q "examples of 33 tokens; train.seq_len must be 32 (one less), not 16" $TMP/ex2.err; then
    pass "data_examples_len (seq_len 32 trains on examples of 33; seq_len 16: $(cat $TMP/ex2.err))"
  else
    fail "data_examples_len: exit $rc: $(head -2 $TMP/ex2.err | tr '\n' ' ')"
  fi
else
  fail "data_examples_len: seq_len 32 on examples of 33: exit $rc: $(head -2 $TMP/ex.err | tr '\n' ' ')"
fi
finish
