#!/usr/bin/env bash
# test: long
# Memory: activation recomputation, the estimate against measured memory, fitting a limit, hwinfo's advice.
#  recompute_bitwise_*   tiny, train.recompute none / gelu / layer: identical params_hash on 1 rank (stage 0)
#                        and on 2 ranks (stage 2); the planned activation bytes fall none > gelu > layer
#  estimate_vs_measured  d6 (micro_batch 2) at 1, 2 and 4 ranks and ZeRO stages 0, 1, 2 (and layer recompute):
#                        results.json's mem_alloc_bytes (the growth of resident memory from just before the
#                        allocations to the peak, the largest over ranks) within 5% of `ztrain estimate`'s
#                        total for that rank count (ZT_LONG=1: every combination; otherwise 2 of them)
#  mem_limit_fit         `ztrain estimate --mem-limit`: the chosen micro-batch's plan fits and the next larger
#                        valid micro-batch's does not (each checked with a separate `estimate` run)
#  micro_batch_auto      train.micro_batch = "auto" with train.mem_limit: runs, logs the value, results.json has it,
#                        and it equals `estimate --mem-limit`'s choice
#  hwinfo_recommend      `ztrain hwinfo -c inputs/tiny.cfg` prints a recommendation whose command runs
set -u
cd "$(dirname "$0")/../.."
. tests/helpers/lib.sh
need_tiny_data
[ -f data/d6/train.bin ] || tests/helpers/make_data.py data/d6 50257 60000 >/dev/null
common="--set run.root=$TMP --set run.session=mem --set eval.every=0 --set checkpoint.every=0 --set train.log_every=1"

# ---------------------------------------------------------------- recompute: same bits, less memory
for np in 1 2; do
  stage=$([ $np = 1 ] && echo 0 || echo 2)
  hs=""
  for rc in none gelu layer; do
    $MPIRUN -np $np $ZT train -c inputs/tiny.cfg $common --set train.steps=20 --set zero.stage=$stage \
      --set train.recompute=$rc --set run.name=rc-$np-$rc > $TMP/rc-$np-$rc.log 2>&1 \
      || { fail "recompute_bitwise_${np}rank: $rc run failed: $(grep -m1 error $TMP/rc-$np-$rc.log)"; continue 2; }
    hs="$hs $(result $TMP/mem/rc-$np-$rc params_hash)"
  done
  set -- $hs
  [ "$1" == "$2" ] && [ "$1" == "$3" ] && pass "recompute_bitwise_${np}rank (none, gelu, layer: ${1:0:24}...)" \
    || fail "recompute_bitwise_${np}rank: $hs"
done
act() { $ZT estimate -c inputs/d6.cfg --set train.recompute=$1 | awk '/^activations/ { print $NF }'; }
a0=$(act none); a1=$(act gelu); a2=$(act layer)
awk -v a=$a0 -v b=$a1 -v c=$a2 'BEGIN { exit !(a > b && b > c) }' \
  && pass "recompute_plan (d6 activations: none $a0 MiB > gelu $a1 > layer $a2)" || fail "recompute_plan: $a0 $a1 $a2"

# ---------------------------------------------------------------- the estimate against measured memory
d6="-c inputs/d6.cfg --set train.micro_batch=2 --set train.global_batch=8 --set train.seq_len=128 --set train.threads=1 --set train.warmup_steps=1
    --set data.train=data/d6/train.bin --set data.val="
if [ -n "${ZT_LONG:-}" ]; then cases="1:0:none 2:0:none 4:0:none 1:1:none 2:1:none 4:1:none 1:2:none 2:2:none 4:2:none 2:2:layer 4:2:gelu"
else cases="2:1:none 4:2:layer"; fi
for cs in $cases; do
  IFS=: read np stage rc <<< "$cs"
  name=est-$np-$stage-$rc
  if ! $MPIRUN -np $np $ZT train $d6 $common --set train.steps=2 --set zero.stage=$stage --set train.recompute=$rc \
       --set run.name=$name > $TMP/$name.log 2>&1; then
    fail "estimate_vs_measured_$name: run failed: $(grep -m1 error $TMP/$name.log)"; continue
  fi
  meas=$(result $TMP/mem/$name mem_alloc_bytes)
  pred=$($ZT estimate $d6 --set zero.stage=$stage --set train.recompute=$rc --ranks $np | awk '$1 == "total" { print $2 * 1048576 }')
  err=$(awk -v m=$meas -v p=$pred 'BEGIN { printf "%.4f", (p - m) / m }')
  line=$(awk -v m=$meas -v p=$pred -v e=$err 'BEGIN { printf "measured %.1f MiB, estimated %.1f MiB, %+.1f%%", m / 1048576, p / 1048576, 100 * e }')
  echo "  $np ranks, stage $stage, recompute $rc: $line"
  awk -v e=$err 'BEGIN { exit !(e <= 0.05 && e >= -0.05) }' && pass "estimate_vs_measured_$name ($line)" \
    || fail "estimate_vs_measured_$name: $line"
done

# ---------------------------------------------------------------- fitting a memory limit
g124="-c inputs/gpt2-124m.cfg --set device=cpu --set precision=fp32"
out=$($ZT estimate $g124 --ranks 2 --mem-limit 6G 2>&1)
mb=$(echo "$out" | sed -n 's/^largest micro_batch within .*: \([0-9]*\) (.*/\1/p')
if [ -n "$mb" ]; then
  tot() { $ZT estimate $g124 --set train.micro_batch=$1 --ranks 2 | awk '$1 == "total" { print $2 }'; }
  per=256; nxt=$((mb + 1)); while [ $nxt -le $per ] && [ $((per % nxt)) -ne 0 ]; do nxt=$((nxt + 1)); done
  t=$(tot $mb); tn=$(tot $nxt)
  awk -v t=$t -v n=$tn 'BEGIN { exit !(t <= 6144 && n > 6144) }' \
    && pass "mem_limit_fit (124M, 2 ranks, 6 GiB: micro_batch $mb = $t MiB fits, $nxt = $tn MiB does not)" \
    || fail "mem_limit_fit: micro_batch $mb = $t MiB, $nxt = $tn MiB against 6144"
else fail "mem_limit_fit: $out"; fi

# ---------------------------------------------------------------- micro_batch = "auto"
want=$($ZT estimate $d6 --set train.global_batch=16 --ranks 2 --mem-limit 900M | sed -n 's/^largest micro_batch within .*: \([0-9]*\) (.*/\1/p')
if $MPIRUN -np 2 $ZT train $d6 $common --set train.global_batch=16 --set train.steps=2 --set 'train.micro_batch="auto"' \
     --set train.mem_limit=900M --set run.name=auto > $TMP/auto.log 2>&1; then
  got=$(result $TMP/mem/auto micro_batch)
  [ -n "$want" ] && [ "$got" == "$want" ] && grep -q "micro_batch auto" $TMP/auto.log \
    && pass "micro_batch_auto (900 MiB per rank on 2 ranks: micro_batch $got, as estimate --mem-limit; logged)" \
    || fail "micro_batch_auto: got '$got', estimate says '$want'; log: $(grep -m1 micro_batch $TMP/auto.log)"
else fail "micro_batch_auto: run failed: $(grep -m1 error $TMP/auto.log)"; fi

# ---------------------------------------------------------------- hwinfo's advice runs
rec=$($ZT hwinfo -c inputs/tiny.cfg 2>&1)
cmd=$(echo "$rec" | sed -n 's/^  run: //p')
if [ -n "$cmd" ] && (eval "$cmd --set train.steps=6 --set run.root=$TMP/rec" > $TMP/rec.log 2>&1); then
  pass "hwinfo_recommend ($(echo "$rec" | grep -m1 'ranks per node' | sed 's/^ *//'))"
else fail "hwinfo_recommend: '$cmd': $(tail -2 $TMP/rec.log 2>/dev/null | tr '\n' ' ') $(echo "$rec" | tail -3)"; fi
finish
