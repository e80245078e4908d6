#!/usr/bin/env bash
# Training on one rank: thread-count invariance (tiny, d6), overfitting one batch, run outputs,
# and user errors from the train command (exit 2, one clear line).
set -u
cd "$(dirname "$0")/../.."
. tests/helpers/lib.sh
unset ZTRAIN_TEST_SGEMM_N # these runs measure the sgemm peak as a user's run does (2048 x 2048)
need_tiny_data
[ -f data/d6/train.bin ] || tests/helpers/make_data.py data/d6 50257 60000 >/dev/null

# --- a newcomer's first command: the tiny preset as shipped (only the run root moved) trains and validates
if $ZT train -c inputs/tiny.cfg --set run.root=$TMP/newcomer > $TMP/newcomer.log 2>&1 && grep -q "^val loss" $TMP/newcomer.log \
   && [ -f $TMP/newcomer/tests/tiny/results.json ]; then pass "tiny_preset_as_shipped ($(grep '^val loss' $TMP/newcomer.log))"
else fail "tiny_preset_as_shipped: $(tail -2 $TMP/newcomer.log | tr '\n' ' ')"; fi

# --- thread-count invariance: identical losses and params_hash with 1 and 2 threads
for cfg in tiny d6; do
  extra=""
  [ $cfg = d6 ] && extra="--set train.warmup_steps=2 --set train.micro_batch=2 --set train.global_batch=4 --set train.seq_len=64 --set data.train=data/d6/train.bin --set data.val="
  for th in 1 2; do
    $ZT train -c inputs/$cfg.cfg --set train.steps=5 --set train.log_every=1 --set train.threads=$th --set run.root=$TMP \
      --set run.session=threads --set run.name=$cfg-$th $extra > $TMP/$cfg-$th.log 2>&1 || { fail "threads_$cfg: run with $th threads failed"; tail -3 $TMP/$cfg-$th.log; }
  done
  a=$TMP/threads/$cfg-1; b=$TMP/threads/$cfg-2
  if [ -f $a/results.json ] && [ -f $b/results.json ]; then
    la=$(losses $a); lb=$(losses $b)
    ha=$(result $a params_hash); hb=$(result $b params_hash)
    n=$(echo "$la" | wc -l)
    if [ "$la" == "$lb" ] && [ "$ha" == "$hb" ] && [ "$n" -eq 5 ]; then
      pass "threads_$cfg (5 losses and params_hash identical with 1 and 2 threads: $ha)"
    else
      fail "threads_$cfg: 1 thread: $(echo $la) $ha / 2 threads: $(echo $lb) $hb"
    fi
  fi
done

# --- the same run twice gives the same bits
$ZT train -c inputs/tiny.cfg --set train.steps=5 --set run.root=$TMP --set run.session=again --set run.name=a > /dev/null 2>&1
$ZT train -c inputs/tiny.cfg --set train.steps=5 --set run.root=$TMP --set run.session=again --set run.name=a > /dev/null 2>&1
if [ -d $TMP/again/a-1 ] && [ "$(result $TMP/again/a params_hash)" == "$(result $TMP/again/a-1 params_hash)" ]; then
  pass "repeatable (a run twice gives the same params_hash; the second run dir got the suffix -1)"
else fail "repeatable: $(ls $TMP/again)"; fi

# --- overfit one batch: 4 windows, global batch 4 -> every step sees the same 4 sequences
$PY - "$TMP/one" <<'PYEOF'
import sys, os, struct, numpy as np
out = sys.argv[1]; os.makedirs(out, exist_ok=True)
toks = np.random.default_rng(7).integers(0, 256, size=4 * 32 + 1)
h = b"ZTSHARD\0" + struct.pack("<IIIIQ", 1, 2, 256, 0xFFFFFFFF, len(toks)) + b"\0" * 32
open(os.path.join(out, "train.bin"), "wb").write(h + toks.astype(np.uint16).tobytes())
PYEOF
$ZT train -c inputs/tiny.cfg --set data.train=$TMP/one/train.bin --set data.val= --set train.global_batch=4 \
  --set train.steps=300 --set train.lr=1e-2 --set train.min_lr=1e-3 --set train.weight_decay=0 --set train.warmup_steps=10 \
  --set run.root=$TMP --set run.session=overfit > $TMP/overfit.log 2>&1
final=$(losses $TMP/overfit/tiny 2>/dev/null | tail -1)
first=$(losses $TMP/overfit/tiny 2>/dev/null | head -1)
if [ -n "$final" ] && $PY -c "import sys; sys.exit(0 if float('$final') < 0.05 else 1)"; then
  pass "overfit_one_batch (loss $first -> $final < 0.05 in 300 steps)"
else fail "overfit_one_batch: loss $first -> $final (want < 0.05)"; tail -3 $TMP/overfit.log; fi

# the speed line: tokens/s as a fraction of the sgemm peak measured in the same run (2048 x 2048 here)
pk=$(sed -n 's/.*% of sgemm peak \([0-9.]*\) GFLOP\/s.*/\1/p' $TMP/overfit.log | tail -1)
[ -n "$pk" ] && $PY -c "import sys; sys.exit(0 if float('$pk') > 1 else 1)" && pass "sgemm_peak_measured ($pk GFLOP/s)" \
  || fail "sgemm_peak_measured: $(grep -m1 'sgemm peak' $TMP/overfit.log)"

# --- run outputs: config.cfg parses back, metrics.jsonl has every step, results.json fields
d=$TMP/again/a
if $ZT config -c $d/config.cfg > $TMP/cfg2 2>&1 && [ "$(wc -l < $d/metrics.jsonl)" -eq 5 ] \
   && $PY -c "import json; r=json.load(open('$d/results.json')); assert r['params_hash'].startswith('sha256:') and len(r['params_hash'])==71 and r['world_size']==1 and r['tokens_per_s']>0 and r['peak_rss_bytes']>0"; then
  pass "run_outputs (config.cfg re-parses, 5 metrics lines, results.json has params_hash/world_size/tokens_per_s/peak_rss)"
else fail "run_outputs"; fi

# --- ZTRAIN_OP_PROFILE=1: the last step's ops timed, printed once (rank 0), results unchanged
ZTRAIN_OP_PROFILE=1 $MPIRUN -np 2 $ZT train -c inputs/tiny.cfg --set train.steps=6 --set run.root=$TMP --set run.session=prof \
  --set run.name=p > $TMP/prof.log 2>&1
$ZT train -c inputs/tiny.cfg --set train.steps=6 --set run.root=$TMP --set run.session=prof --set run.name=q > /dev/null 2>&1
# tiny: 2 layers, 2 micro-batches per step, 1 per rank: 2 attention forwards per rank in that step
att=$(awk '$1 == "attention" && $2 == "fwd" {print $(NF-1)}' $TMP/prof.log)
if [ "$(grep -c '^op profile of step 6 ' $TMP/prof.log)" -eq 1 ] && [ "$att" == "2" ] && grep -q '^  adamw ' $TMP/prof.log \
   && [ -f $TMP/prof/q/results.json ] && [ "$(result $TMP/prof/p params_hash)" == "$(result $TMP/prof/q params_hash)" ]; then
  pass "op_profile (one table from 2 ranks, attention fwd $att calls, params_hash as without it)"
else fail "op_profile: attention calls '$att'; $(grep -c '^op profile' $TMP/prof.log) tables; $(tail -3 $TMP/prof.log | tr '\n' ' ')"; fi

# --- user errors: exit 2, one line naming the file/key
check_err() { # name expected-substring args...
  local name=$1 want=$2; shift 2
  out=$($ZT "$@" 2>&1 >/dev/null); rc=$?
  if [ $rc -eq 2 ] && echo "$out" | grep -qF -- "$want" && [ "$(echo "$out" | wc -l)" -eq 1 ]; then pass "error_$name ($out)"
  else fail "error_$name: rc=$rc out=$out (want exit 2 and '$want')"; fi
}
check_err missing_data "data/nope.bin: no such data file" train -c inputs/tiny.cfg --set data.train=data/nope.bin --set run.root=$TMP
printf 'garbage that is not a shard, long enough to have a header...........................' > $TMP/bad.bin
check_err bad_magic "bad.bin" train -c inputs/tiny.cfg --set data.train=$TMP/bad.bin --set run.root=$TMP
head -c 1000 data/tiny/train.bin > $TMP/trunc.bin
check_err truncated_shard "trunc.bin" train -c inputs/tiny.cfg --set data.train=$TMP/trunc.bin --set run.root=$TMP
check_err vocab_mismatch "vocab" train -c inputs/tiny.cfg --set data.train=data/d6/train.bin --set data.val= --set run.root=$TMP
check_err unknown_key "did you mean" train -c inputs/tiny.cfg --set train.lrr=1
check_err bad_option "unknown option '--bogus'" train -c inputs/tiny.cfg --bogus
check_err seq_len "block_size" train -c inputs/tiny.cfg --set train.seq_len=128
check_err no_config "nope.cfg" train -c nope.cfg
finish
