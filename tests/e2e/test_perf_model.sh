#!/usr/bin/env bash
# test: long
# test: alone
# The performance model (src/core/diag/perf_model.h, `ztrain estimate --hw cpu`) against measured step times
# on this machine (make test-long: 12-13 min; run it alone, the two cores are what is measured). Every
# constant the model uses is measured here, in this run, by something other than the runs it predicts:
#  compute      two 1-rank runs side by side (so both cores are busy, as in the runs predicted), 1 thread,
#               one micro-batch per step (so no gradient accumulation pass: on N ranks the sums are part of
#               the measured exchange): metrics.jsonl's update_ms is the step's norm + AdamW over all P
#               parameters (-> --mem-bw = 32 bytes x P / update), the rest of the step is the micro-batch
#               (its FLOPs / its time -> --flops, sustained GFLOP/s per core on these shapes)
#  collectives  `bench_comm --json -r 4` on 2 and 4 ranks (1 thread, sizes around the gradient buffer, the best of 4
#               calls) -> --comm:
#               the model takes the measured time of the all-to-all + ordered sum, MPI's reduce-scatter and the
#               all-gather at the gradient buffer's size
#  predicted    d6 (micro_batch 2, global 8) and GPT-2 124M (micro_batch 1, seq 64, global 4) on 1, 2 and 4
#               ranks (1 rank: two copies side by side, their mean, so both cores are busy as calibrated),
#               ZeRO stages 1 and 2, ordered and native (1 rank: ordered): the step time of steps
#               2.. (the fastest, as for the calibration) against `ztrain estimate --ranks N --json`'s step_s,
#               each within 15%
# Prints the predicted-vs-measured table (README "Performance model").
set -u
cd "$(dirname "$0")/../.."
. tests/helpers/lib.sh
export ZTRAIN_TEST_SGEMM_N=2048 # timed runs start as a user's run does (the full sgemm probe)
[ -f data/d6/train.bin ] || tests/helpers/make_data.py data/d6 50257 60000 >/dev/null
TOL=${PERF_TOL:-0.15}
best_step_s() { # run dir [key]: the fastest step_ms (or update_ms) of steps >= 2, in seconds. The fastest, not
  # the median: on this shared 2-core VM other tenants only ever slow a step down (the same run measured
  # 1.54-1.75 s median from one run to the next), on the calibration runs and the predicted ones alike
  $PY -c '
import json, sys
v = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl")]
print(min(r[sys.argv[2]] for r in v if r["step"] >= 2) / 1000)' "$1" "${2:-step_ms}"
}
flops_step() { $ZT estimate -c inputs/$1.cfg "${@:2}" | awk '/per step:/ { print $NF }'; }
params_of() { $ZT estimate -c inputs/$1.cfg "${@:2}" | awk '/^config:/ { for (i = 1; i <= NF; i++) if ($i ~ /^params/) print $(i-1) }'; }
d6="--set device=cpu --set precision=fp32 --set train.micro_batch=2 --set train.seq_len=128 --set data.train=data/d6/train.bin --set data.val="
g124="--set device=cpu --set precision=fp32 --set train.micro_batch=1 --set train.seq_len=64 --set data.train=data/d6/train.bin --set data.val="
common="--set train.threads=1 --set train.warmup_steps=1 --set train.log_every=1 --set eval.every=0 --set checkpoint.every=0 --set run.root=$TMP --set run.session=perf"

# collectives on 2 and 4 ranks, 1 thread for the ordered sum (as the runs below), 32..512 MiB, the four the model
# reads; each the best of 4 calls (-r 4), as each step below is the fastest of its run: on ranks sharing the cores one
# 500 MB reduce took 1.0 s or 2.0 s from one call to the next (the best of 1 call moved the 4-rank stage 2 native
# prediction from 3.23 s to 3.42 s between two runs, against 2.80-2.87 s measured)
for n in 2 4; do
  if $MPIRUN -np $n build/bench/bench_comm -b 32M -e 512M -f 4 --time 1 -r 4 --threads 1 \
       --ops reduce_scatter,rs_ordered,rs_owners,all_gather --json > $TMP/comm$n.json 2> $TMP/comm$n.err &&
     grep -q '"wrong": 0}' $TMP/comm$n.json; then
    pass "calibrate_comm_$n (seconds at 128 and 512 MiB: $($PY -c '
import json, sys
r = json.load(open(sys.argv[1]))["results"]
print(", ".join("%s %s" % (o, " ".join("%.3f" % (x["time_us"] / 1e6) for x in r if x["op"] == o and x["size"] >= 1 << 27))
                for o in ("reduce_scatter", "rs_ordered", "rs_owners", "all_gather")))' $TMP/comm$n.json))"
  else fail "calibrate_comm_$n: bench_comm failed: $(tail -2 $TMP/comm$n.err | tr '\n' ' ')"; fi
done

printf "# %-10s %5s %5s %8s %12s %12s %8s\n" model ranks stage reduce "measured(s)" "predicted(s)" "error"
for model in d6 gpt2-124m; do
  if [ $model = d6 ]; then set_=$d6; mb=2; else set_=$g124; mb=1; fi
  ranks="1 2 4"
  g4=$((4 * mb)); g8=$((8 * mb))
  # compute: two runs of one micro-batch per step side by side
  for k in 1 2; do
    $ZT train -c inputs/$model.cfg $set_ $common --set train.global_batch=$mb --set train.steps=13 --set run.name=$model-cal$k \
      > $TMP/$model-cal$k.log 2>&1 &
  done
  wait; bad=""
  for k in 1 2; do
    [ -f $TMP/perf/$model-cal$k/results.json ] || bad="$bad $(tail -1 $TMP/$model-cal$k.log)"
    rm -rf $TMP/perf/$model-cal$k/checkpoints # only the step times are used
  done
  if [ -n "$bad" ]; then fail "calibrate_$model:$bad"; continue; fi
  ts=$(awk -v a=$(best_step_s $TMP/perf/$model-cal1) -v b=$(best_step_s $TMP/perf/$model-cal2) 'BEGIN { print (a + b) / 2 }')
  tu=$(awk -v a=$(best_step_s $TMP/perf/$model-cal1 update_ms) -v b=$(best_step_s $TMP/perf/$model-cal2 update_ms) 'BEGIN { print (a + b) / 2 }')
  fm=$(flops_step $model $set_ --set train.global_batch=$mb)
  P=$(params_of $model $set_)
  read gflops membw tmicro <<< $(awk -v s=$ts -v u=$tu -v f=$fm -v p=$P 'BEGIN {
    tm = s - u; if (tm <= 0 || u <= 0) { print "x x x"; exit }
    printf "%.3f %.3f %.4f\n", f / tm / 1e9, 32 * p / u / 1e9, tm }')
  if [ "$gflops" = x ]; then fail "calibrate_$model: step $ts s, update $tu s: no positive micro-batch time"; continue; fi
  pass "calibrate_$model (1 rank x 2 side by side, 1 thread, 1 micro-batch per step: step $ts s, update $tu s -> $tmicro s per micro-batch = $gflops GFLOP/s per core; update = $membw GB/s for 32 B x $P params)"
  for n in $ranks; do
    for stage in 1 2; do
      reds="ordered native"; [ $n = 1 ] && reds=ordered # one rank: nothing to reduce
      for red in $reds; do
        name=$model-$n-$stage-$red
        # 124M: 13 steps (12 timed): its native reductions of a 500 MB gradient swing most from step to step here
        # (2-rank stage 2: 2.41-2.63 s within one run; 4 ranks sharing 2 cores more), and the check takes the
        # fastest; 4 timed steps had missed it, 8 sometimes (4-rank stage 1 native -13..-15% in two runs)
        steps=7; [ $model = gpt2-124m ] && steps=13
        # one rank: two copies side by side, so both cores are busy as in the calibration and in the 2- and
        # 4-rank runs (alone, with the other core idle, a rank ran ~9% faster: more memory bandwidth)
        copies=""; [ $n = 1 ] && copies="a b"
        bad=""
        for c in ${copies:-one}; do
          nm=$name; [ $c != one ] && nm=$name-$c
          $MPIRUN -np $n $ZT train -c inputs/$model.cfg $set_ --set train.global_batch=$g4 $common --set train.steps=$steps \
            --set zero.stage=$stage --set zero.reduce=$red --set run.name=$nm > $TMP/$nm.log 2>&1 &
        done
        wait
        for c in ${copies:-one}; do
          nm=$name; [ $c != one ] && nm=$name-$c
          [ -f $TMP/perf/$nm/results.json ] || bad="$bad $(grep -m1 error $TMP/$nm.log)"
          rm -rf $TMP/perf/$nm/checkpoints # 1.5 GB each for GPT-2 124M: 20 runs would need 30 GB of /tmp
        done
        if [ -n "$bad" ]; then fail "predict_$name: run failed:$bad"; continue; fi
        if [ $n = 1 ]; then
          meas=$(awk -v a=$(best_step_s $TMP/perf/$name-a) -v b=$(best_step_s $TMP/perf/$name-b) 'BEGIN { print (a + b) / 2 }')
        else meas=$(best_step_s $TMP/perf/$name); fi
        pred=$($ZT estimate -c inputs/$model.cfg $set_ --set train.global_batch=$g4 $common --set zero.stage=$stage \
                 --set zero.reduce=$red --ranks $n --hw cpu --flops $gflops --mem-bw $membw $([ $n -gt 1 ] && echo --comm $TMP/comm$n.json) --json |
               tail -1 | $PY -c 'import json,sys; print(json.load(sys.stdin)["step_s"])')
        err=$(awk -v m=$meas -v p=$pred 'BEGIN { printf "%.3f", (p - m) / m }')
        printf "  %-10s %5d %5d %8s %12.3f %12.3f %7.1f%%\n" $model $n $stage $red $meas $pred $(awk -v e=$err 'BEGIN { print 100 * e }')
        if awk -v e=$err -v t=$TOL 'BEGIN { exit !(e <= t && e >= -t) }'; then pass "predict_$name (measured $meas s, predicted $pred s)"
        else fail "predict_$name: measured $meas s, predicted $pred s (error $err, limit $TOL)"; fi
      done
    done
  done
done
finish
