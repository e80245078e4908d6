#!/usr/bin/env bash
# test: long
# Soak (make test-long): thousands of tiny steps on 2 ranks with checkpoints, evaluations and samples, watched
# from outside. Phase 1: SOAK_STEPS/2 steps with synchronous checkpoints every 50 steps (keep 2), an evaluation
# every 25, a sample every 250; phase 2 resumes it (--resume auto) for the other half with checkpoint.async =
# true. Every 0.1 s the sampler reads each rank's VmRSS (/proc/PID/status) and open file descriptors
# (/proc/PID/fd) together with the last recorded step.
#  soak_runs             both phases exit 0, every checkpoint save and evaluation happened, the final step is reached
#  soak_rss_flat         per rank and phase, after warm-up (the first 20% of the phase's steps): the median RSS of
#                        the last quarter of the samples exceeds that of the first quarter by less than
#                        SOAK_RSS_MB (default 2 MB; one leaked 4 KiB allocation per step would be ~6 MB)
#  soak_fds_flat         after warm-up the fewest open fds of a rank in the last quarter of the samples equals that of
#                        the first quarter, and no sample is more than 4 above it (a save holds a file or two open
#                        for a moment; one leaked fd per save would add 15 per phase)
#  soak_step_time_flat   median step_ms (metrics.jsonl) of the last 20% of each phase's steps <= 1.5 x that of the
#                        first 20% after warm-up (medians: other jobs share the cores)
# Duration is printed at the end (the default 5000 steps: under a minute on 2 idle cores, a few minutes when the cores are shared).
set -u
cd "$(dirname "$0")/../.."
. tests/helpers/lib.sh
need_tiny_data
STEPS=${SOAK_STEPS:-5000}
HALF=$((STEPS / 2))
RSS_MB=${SOAK_RSS_MB:-2}
T0=$(date +%s)
common="-c inputs/tiny.cfg --set train.log_every=1 --set run.root=$TMP --set run.session=soak --set run.name=s
        --set train.steps=$STEPS --set train.warmup_steps=20 --set eval.every=25 --set eval.sequences=16
        --set checkpoint.every=50 --set checkpoint.keep=2 --set sample.every=250 --set sample.tokens=16"
D=$TMP/soak/s
S=$TMP/samples.txt # phase pid rank step rss_kb fds
: > $S

# watch PHASE MPIRUN_PID: samples until mpirun exits
watch() {
  local phase=$1 mp=$2 pids="" p r step
  while kill -0 $mp 2>/dev/null; do
    [ $(echo $pids | wc -w) -lt 2 ] && pids=$(ztrain_pids $mp)
    step=$(tail -1 $D/metrics.jsonl 2>/dev/null | sed -n 's/^{"step": \([0-9]*\),.*/\1/p')
    r=0
    for p in $pids; do
      rss=$(awk '/^VmRSS/ {print $2}' /proc/$p/status 2>/dev/null)
      fds=$(ls /proc/$p/fd 2>/dev/null | wc -l)
      [ -n "$rss" ] && [ -n "$step" ] && echo "$phase $p $r $step $rss $fds" >> $S
      r=$((r + 1))
    done
    sleep 0.1
  done
}

ok=1
for phase in 1 2; do
  if [ $phase == 1 ]; then args="--stop-after $HALF"; else args="--resume auto --set checkpoint.async=true"; fi
  timeout 1800 $MPIRUN -np 2 $ZT train $common $args >> $TMP/soak.log 2>&1 &
  mp=$!
  watch $phase $mp
  wait $mp; rc=$?
  [ $rc -eq 0 ] || { ok=0; fail "soak_runs: phase $phase exited $rc: $(grep -m1 'ztrain: error' $TMP/soak.log)"; }
done
saves=$(grep -o "^checkpoint [^ :]*step_[0-9]*.h5" $TMP/soak.log | sort -u | wc -l)
evals=$($PY -c 'import json,sys; print(sum(1 for l in open(sys.argv[1]) if "val_loss" in json.loads(l)))' $D/metrics.jsonl 2>/dev/null)
last=$(tail -1 $D/metrics.jsonl | sed -n 's/^{"step": \([0-9]*\),.*/\1/p')
nsamples=$(grep -c '^sample at step' $TMP/soak.log)
if [ $ok -eq 1 ] && [ "$last" == "$STEPS" ] && [ "$(cat $D/checkpoints/latest)" == "$(printf 'step_%08d.h5' $STEPS)" ] \
   && [ "$saves" -eq $((STEPS / 50)) ] && [ "$evals" -eq $((STEPS / 25)) ] && [ "$nsamples" -eq $((STEPS / 250)) ]; then
  pass "soak_runs ($STEPS steps in 2 phases (sync, then async checkpoints after --resume auto): $saves checkpoints, $evals evaluations, $nsamples samples)"
elif [ $ok -eq 1 ]; then fail "soak_runs: last step $last, $saves checkpoints, $evals evaluations, $nsamples samples"; fi

out=$($PY - $S $D/metrics.jsonl $STEPS $RSS_MB <<'EOF'
import json, statistics as st, sys
samples, metrics, steps, rss_mb = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
half = steps // 2
rows = [l.split() for l in open(samples)]
bad_rss, bad_fd, info_rss, info_fd = [], [], [], []
for phase in (1, 2):
    lo, hi = (0, half) if phase == 1 else (half, steps)
    warm = lo + (hi - lo) // 5
    for rank in (0, 1):
        s = [(int(r[3]), int(r[4]), int(r[5])) for r in rows if r[0] == str(phase) and r[2] == str(rank) and warm <= int(r[3]) < hi]
        if len(s) < 8:
            bad_rss.append("phase %d rank %d: only %d samples after warm-up" % (phase, rank, len(s)))
            continue
        q = len(s) // 4
        a, b = st.median(x[1] for x in s[:q]), st.median(x[1] for x in s[-q:])
        info_rss.append("p%d r%d %.1f->%.1f MB" % (phase, rank, a / 1024, b / 1024))
        if b - a >= rss_mb * 1024: bad_rss.append("phase %d rank %d: RSS %.1f -> %.1f MB" % (phase, rank, a / 1024, b / 1024))
        # a save holds a few files open for a moment: the floor (fewest open) must not move, the peak stays near it
        f0, f1, top = min(x[2] for x in s[:q]), min(x[2] for x in s[-q:]), max(x[2] for x in s)
        info_fd.append("p%d r%d %d->%d (peak %d)" % (phase, rank, f0, f1, top))
        if f1 != f0 or top > f0 + 4: bad_fd.append("phase %d rank %d: fds %d -> %d, peak %d" % (phase, rank, f0, f1, top))
        print("phase %d rank %d: %d samples, steps %d..%d" % (phase, rank, len(s), s[0][0], s[-1][0]), file=sys.stderr)
print(("FAIL soak_rss_flat: " + "; ".join(bad_rss)) if bad_rss else
      "PASS soak_rss_flat (median RSS first -> last quarter after warm-up: %s)" % ", ".join(info_rss))
print(("FAIL soak_fds_flat: " + "; ".join(bad_fd)) if bad_fd else
      "PASS soak_fds_flat (open fds per phase and rank after warm-up: %s)" % ", ".join(info_fd))
ms = {}
for l in open(metrics):
    r = json.loads(l)
    ms[r["step"]] = r["step_ms"]
bad, info = [], []
for lo, hi in ((0, half), (half, steps)):
    warm = lo + (hi - lo) // 5
    n = (hi - lo) // 5
    a = st.median(ms[k] for k in range(warm + 1, warm + 1 + n) if k in ms)
    b = st.median(ms[k] for k in range(hi - n + 1, hi + 1) if k in ms)
    info.append("steps %d-%d: %.1f -> %.1f ms" % (lo + 1, hi, a, b))
    if b > 1.5 * a: bad.append("steps %d-%d: median step %.1f -> %.1f ms" % (lo + 1, hi, a, b))
print(("FAIL soak_step_time_flat: " + "; ".join(bad)) if bad else "PASS soak_step_time_flat (%s)" % ", ".join(info))
EOF
)
echo "$out"
NFAIL=$((NFAIL + $(grep -c '^FAIL' <<< "$out")))
echo "(soak: $(( $(date +%s) - T0 )) s, $(wc -l < $S) samples)"
finish
