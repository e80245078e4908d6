#!/usr/bin/env bash
# The performance model (src/core/perf_model.h, `ztrain estimate --hw cpu`) against measured step times
# on this machine (make test-long: ~5 min; run it alone, the two cores are what is measured):
#  calibration  one 1-rank run per model (1 thread) gives the sustained GFLOP/s of a core on that model's
#               shapes (FLOPs per step / median step time), passed to the model as --flops: the model's
#               compute is calibrated, its communication, overlap and core sharing are not
#  predicted    d6 (micro_batch 2, global 8) on 2 and 4 ranks and GPT-2 124M (micro_batch 1, seq 64,
#               global 4) on 2 ranks, ZeRO stages 1 and 2, ordered and native: the median step time of steps
#               2.. against `ztrain estimate --ranks N --json`'s step_s, each within 15%
# Prints the predicted-vs-measured table (README "Performance model").
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
[ -f data/d6/train.bin ] || tests/make_data.py data/d6 50257 60000 >/dev/null
TOL=${PERF_TOL:-0.15}
median_step_s() { # run dir: median step_ms of steps >= 2, in seconds
  $PY -c '
import json, sys
d = {}
for l in open(sys.argv[1] + "/metrics.jsonl"):
    r = json.loads(l)
    if r["step"] >= 2: d[r["step"]] = r["step_ms"]
v = sorted(d.values()); print(v[len(v) // 2] / 1000)' "$1"
}
flops_step() { $ZT estimate -c inputs/$1.cfg "${@:2}" | awk '/per step:/ { print $NF }'; }
d6="--set device=cpu --set precision=fp32 --set train.micro_batch=2 --set train.global_batch=8 --set train.seq_len=128 --set data.train=data/d6/train.bin --set data.val="
g124="--set device=cpu --set precision=fp32 --set train.micro_batch=1 --set train.global_batch=4 --set train.seq_len=64 --set data.train=data/d6/train.bin --set data.val="
common="--set train.threads=1 --set train.warmup_steps=1 --set train.log_every=1 --set eval.every=0 --set checkpoint.every=0 --set run.root=$TMP --set run.session=perf"
printf "# %-10s %5s %5s %8s %12s %12s %8s\n" model ranks stage reduce "measured(s)" "predicted(s)" "error"
for model in d6 gpt2-124m; do
  if [ $model = d6 ]; then set_=$d6; steps=7; ranks="2 4"; else set_=$g124; steps=5; ranks="2"; fi
  # calibration: 1 rank, 1 thread
  if ! $ZT train -c inputs/$model.cfg $set_ $common --set train.steps=$steps --set run.name=$model-cal > $TMP/$model-cal.log 2>&1; then
    fail "calibrate_$model: $(tail -2 $TMP/$model-cal.log | tr '\n' ' ')"; continue
  fi
  t1=$(median_step_s $TMP/perf/$model-cal)
  f=$(flops_step $model $set_)
  gflops=$(awk -v f=$f -v t=$t1 'BEGIN { printf "%.3f", f / t / 1e9 }')
  pass "calibrate_$model (1 rank, 1 thread: $t1 s/step = $gflops GFLOP/s per core)"
  for n in $ranks; do
    for stage in 1 2; do
      for red in ordered native; do
        name=$model-$n-$stage-$red
        if ! $MPIRUN -np $n $ZT train -c inputs/$model.cfg $set_ $common --set train.steps=$steps --set zero.stage=$stage \
             --set zero.reduce=$red --set run.name=$name > $TMP/$name.log 2>&1; then
          fail "predict_$name: run failed: $(grep -m1 error $TMP/$name.log)"; continue
        fi
        meas=$(median_step_s $TMP/perf/$name)
        pred=$($ZT estimate -c inputs/$model.cfg $set_ $common --set zero.stage=$stage --set zero.reduce=$red --ranks $n \
                 --hw cpu --flops $gflops --json | tail -1 | $PY -c 'import json,sys; print(json.load(sys.stdin)["step_s"])')
        err=$(awk -v m=$meas -v p=$pred 'BEGIN { printf "%.3f", (p - m) / m }')
        printf "  %-10s %5d %5d %8s %12.3f %12.3f %7.1f%%\n" $model $n $stage $red $meas $pred $(awk -v e=$err 'BEGIN { print 100 * e }')
        if awk -v e=$err -v t=$TOL 'BEGIN { exit !(e <= t && e >= -t) }'; then pass "predict_$name (measured $meas s, predicted $pred s)"
        else fail "predict_$name: measured $meas s, predicted $pred s (error $err, limit $TOL)"; fi
      done
    done
  done
done
finish
