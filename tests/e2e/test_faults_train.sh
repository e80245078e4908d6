#!/usr/bin/env bash
# test: long
# Fault cases of `ztrain train` and of the checkpoint readers, tiny model, 2 ranks under real mpirun. Every
# case runs under `timeout` and checks: the exit code, ONE line naming the problem ("ztrain: error: ..."),
# the time it took (all ranks gone within a bound), no core file and no crash (exit < 128), and that
# nothing that must not change did (checksums of the files before and after).
#  diverge_sync / _async   (async: make test-long) real divergence (train.lr=10 with weight_decay=10 multiplies every decayed weight by
#                          -99 a step: NaN loss at step 10): exit 2 naming step 10 and the last checkpoint;
#                          step_6 and step_9 kept (finite = 1, complete = 1, every value finite per h5py), no
#                          later file, `latest` = step_9, metrics.jsonl valid JSON up to step 9, no results.json
#  nan_state_not_saved_*   a NaN put into a weight after step 6's update (fault hook ZTRAIN_TEST_NAN_PARAM_STEP; the
#                          step's loss and norm are finite): the save of step 6, synchronous or async, is refused
#                          with exit 2 naming the tensor; step_3 and `latest` stay, no .tmp is left
#  nan_refused_*           a copy of a checkpoint with one NaN weight (h5py): refused by resume, sample and
#                          export (one line naming the tensor and element; export writes no output)
#  negative_step_*         a copy with step = -5: refused by resume and sample
#  resume_all_damaged      --resume auto on a run whose checkpoints are all damaged: exit 2 naming each file,
#                          no file of the run changed (no restart from step 0)
#  resume_finished         --resume auto on a finished run: exit 0 with "already finished", no file changed
#  signal_eval             SIGTERM to one rank during a long evaluation (a validation shard of 80,000 windows,
#                          ~35 s to score on 2 cores; eval.sequences beyond it: clamped with one note, from rank 0
#                          only): every rank stops after the current forward pass (here ~1 s), saves and exits
#                          with checkpoint.signal_exit_code
#  signal_setup            SIGTERM to one rank during set-up: exit with the signal code before the first step,
#                          no checkpoint, no step recorded
#  disk_full_*             a tmpfs as checkpoint.dir holding the checkpoints of steps 3 and 6, filled up leaving
#                          0 bytes / 4 KB / 64 KB (metadata only) before the save of step 9, and filled right
#                          after the file is created (ZTRAIN_CKPT_TEST_LAYOUT_DELAY_MS: the HDF5 layout then
#                          meets a full disk): exit 2 "No space left on device", the earlier checkpoints and
#                          `latest` unchanged, no .tmp left. Filled after the layout reserved the file's space
#                          (async save, writes slowed by ZTRAIN_CKPT_TEST_DELAY_MS): the save completes from its
#                          reservation and is published. Skipped where no tmpfs can be mounted.
# 52 s on 2 idle cores (99 s while other jobs shared them): most of each run is start-up (MPI, the sgemm peak).
set -u
cd "$(dirname "$0")/../.."
. tests/helpers/lib.sh
need_tiny_data
R=$TMP/ft
common="-c inputs/tiny.cfg --set train.log_every=1 --set run.root=$TMP --set run.session=ft --set eval.every=0"
LIMIT=60 # timeout of one fault run (a hang shows as exit 124)
BOUND=30 # seconds a fault run may take, start-up included
T0=$(date +%s)

# h5py: every named checkpoint complete = 1, finite = 1 and every value finite; prints "ok N" or the problem
ckcheck() {
  $PY - "$@" <<'EOF'
import sys, h5py, numpy as np
bad = []
for p in sys.argv[1:]:
    try:
        with h5py.File(p, "r") as f:
            if int(f.attrs.get("complete", 0)) != 1: bad.append(p + ": complete != 1")
            if int(f.attrs.get("finite", 0)) != 1: bad.append(p + ": finite != 1")
            def visit(name, o):
                if isinstance(o, h5py.Dataset) and not np.isfinite(o[...]).all(): bad.append(p + ": " + name + " not finite")
            f.visititems(visit)
    except Exception as e:
        bad.append(p + ": " + str(e))
print("; ".join(bad) if bad else "ok %d" % (len(sys.argv) - 1))
sys.exit(1 if bad else 0)
EOF
}
# fingerprint of files (content and mtime) to prove they were not touched
snap() { for f in "$@"; do [ -e "$f" ] && find "$f" -type f -exec sha256sum {} \; -exec stat -c '%n %Y %s' {} \; ; done | sort; }
cores() { ls core core.* $TMP/core* 2>/dev/null | wc -l; }

# fault NAME RC PATTERN COMMAND...: runs COMMAND under timeout; PASS when it exits RC within BOUND seconds, with
# (for RC 2) exactly one "ztrain: error" line containing PATTERN (for RC != 2: PATTERN somewhere in the output),
# no core file; the output stays in $OUT
fault() {
  local name=$1 want=$2 pat=$3; shift 3
  local c0 t0 rc dt n
  c0=$(cores); t0=$(date +%s.%N)
  OUT=$(timeout $LIMIT "$@" 2>&1); rc=$?
  dt=$(echo "$(date +%s.%N) - $t0" | bc)
  n=$(echo "$OUT" | grep -c "ztrain: error")
  local why=""
  [ $rc -eq $want ] || why="exit $rc (want $want)"
  if [ $want -eq 2 ]; then
    [ "$n" -eq 1 ] || why="$why; $n error lines"
    echo "$OUT" | grep "ztrain: error" | grep -qF -- "$pat" || why="$why; no error line with '$pat'"
  else
    [ "$n" -eq 0 ] || why="$why; $n error lines"
    echo "$OUT" | grep -qF -- "$pat" || why="$why; no line with '$pat'"
  fi
  [ "$(echo "$dt > $BOUND" | bc)" -eq 0 ] || why="$why; took ${dt}s > ${BOUND}s"
  [ "$(cores)" -eq "$c0" ] || why="$why; core file"
  if [ -z "$why" ]; then
    pass "$name (exit $rc in ${dt:0:4} s: $(echo "$OUT" | grep -m1 -F -- "$pat" | cut -c1-170))"
    return 0
  fi
  fail "$name: ${why#; } ($(echo "$OUT" | grep -m2 -iE 'error|rror' | tr '\n' ' ' | cut -c1-300))"
  return 1
}
tr2="$MPIRUN -np 2 $ZT train $common"

# ---------------------------------------------------------------- divergence
DIV="--set train.lr=10 --set train.weight_decay=10 --set train.schedule=constant --set train.warmup_steps=0 --set train.steps=30 --set checkpoint.every=3 --set checkpoint.keep=2"
for mode in sync ${ZT_LONG:+async}; do # make test-long: also with checkpoint.async
  a=false; [ $mode == async ] && a=true
  d=$R/div$mode
  if fault diverge_$mode 2 "training diverged at step 10" $tr2 --set run.name=div$mode $DIV --set checkpoint.async=$a; then
    files=$(cd $d/checkpoints && ls | tr '\n' ' ')
    why=""
    [ "$files" == "latest step_00000006.h5 step_00000009.h5 " ] || why="files: $files"
    [ "$(cat $d/checkpoints/latest)" == step_00000009.h5 ] || why="$why latest=$(cat $d/checkpoints/latest)"
    echo "$OUT" | grep "ztrain: error" | grep -q "step_00000009.h5" || why="$why error line does not name step_00000009.h5"
    ck=$(ckcheck $d/checkpoints/step_*.h5) || why="$why $ck"
    last=$($PY -c 'import json,sys; print([json.loads(l)["step"] for l in open(sys.argv[1])][-1])' $d/metrics.jsonl 2>&1)
    [ "$last" == 9 ] || why="$why metrics.jsonl: $last"
    [ -e $d/results.json ] && why="$why results.json written"
    [ -z "$why" ] && pass "diverge_${mode}_keeps_finite (checkpoints $files- $ck finite; metrics.jsonl valid up to step 9; no results.json)" \
      || fail "diverge_${mode}_keeps_finite: $why"
  fi
done

# ---------------------------------------------------------------- a non-finite state at a save (the loss still finite)
# ZTRAIN_TEST_NAN_PARAM_STEP=6: train.c writes a NaN into rank 0's first parameter after step 6's update
for mode in sync async; do
  a=false; [ $mode == async ] && a=true
  d=$R/nanp$mode
  if fault nan_state_not_saved_$mode 2 "checkpoint of step 6 not written: the state holds non-finite values (NaN in /model/wte.weight[0, 0])" \
       env ZTRAIN_TEST_NAN_PARAM_STEP=6 $MPIRUN -np 2 -x ZTRAIN_TEST_NAN_PARAM_STEP $ZT train $common --set run.name=nanp$mode \
       --set train.steps=12 --set checkpoint.every=3 --set checkpoint.async=$a; then
    files=$(cd $d/checkpoints && ls | tr '\n' ' ')
    [ "$files" == "latest step_00000003.h5 " ] && [ "$(cat $d/checkpoints/latest)" == step_00000003.h5 ] \
      && pass "nan_state_not_saved_${mode}_files (only step_00000003.h5 and latest naming it; no .tmp)" \
      || fail "nan_state_not_saved_${mode}_files: $files"
  fi
done

# ---------------------------------------------------------------- damaged checkpoint files
B=$TMP/bad; mkdir -p $B
src=$R/divsync/checkpoints/step_00000009.h5
if [ -e $src ]; then
  $PY - $src $B <<'EOF'
import sys, shutil, h5py, numpy as np
src, b = sys.argv[1], sys.argv[2]
shutil.copy(src, b + "/nan.h5")
with h5py.File(b + "/nan.h5", "r+") as f:
    d = f["model/h.1.mlp.c_fc.weight"]; a = d[...]; a[3, 5] = np.nan; d[...] = a
shutil.copy(src, b + "/inf.h5")
with h5py.File(b + "/inf.h5", "r+") as f:  # the last element of ln_f.weight in the last group (rank 1 reads it)
    d = f["optim/exp_avg_sq/ln_f.weight"]; a = d[...]; a[-1] = np.inf; d[...] = a
shutil.copy(src, b + "/neg.h5")
with h5py.File(b + "/neg.h5", "r+") as f:
    f.attrs["step"] = np.int64(-5)
EOF
  before=$(snap $B)
  fault nan_refused_resume 2 "NaN in /model/h.1.mlp.c_fc.weight[3, 5]" $tr2 --set run.name=nanres $DIV --resume $B/nan.h5
  # the moments are read in the background while the parameters are all-gathered (cpu, 2 ranks): refused too
  fault inf_moment_refused 2 "+Inf in /optim/exp_avg_sq/ln_f.weight[" $tr2 --set run.name=infres0 $DIV --resume $B/inf.h5
  # read through the device path (devsim: staged chunk by chunk, checked before to_device) on 2 ranks
  fault inf_moment_refused_devsim 2 "+Inf in /optim/exp_avg_sq/ln_f.weight[" $tr2 --set run.name=infres $DIV --set device=devsim --resume $B/inf.h5
  fault nan_refused_sample 2 "NaN in /model/h.1.mlp.c_fc.weight[3, 5]" $ZT sample --checkpoint $B/nan.h5 --tokens 4
  fault nan_refused_export 2 "NaN in /model/h.1.mlp.c_fc.weight[3, 5]" $ZT export --checkpoint $B/nan.h5 --format safetensors --out $B/exported
  [ -e $B/exported ] && fail "nan_refused_export_no_output: $B/exported exists"
  fault negative_step_resume 2 "step -5 is negative" $tr2 --set run.name=negres $DIV --resume $B/neg.h5
  fault negative_step_sample 2 "step -5 is negative" $ZT sample --checkpoint $B/neg.h5 --tokens 4
  [ "$(snap $B)" == "$before" ] || fail "damaged_files_unchanged: $(diff <(echo "$before") <(snap $B) | head -2 | tr '\n' ' ')"
else fail "nan_refused: no checkpoint from diverge_sync to edit"; fi

# ---------------------------------------------------------------- --resume auto over damaged checkpoints only
if [ -d $R/divsync/checkpoints ]; then
  cp -r $R/divsync $R/dmg
  truncate -s 5000 $R/dmg/checkpoints/step_00000009.h5
  echo "not a checkpoint" > $R/dmg/checkpoints/step_00000006.h5
  before=$(snap $R/dmg)
  fault resume_all_damaged 2 "every checkpoint in $R/dmg/checkpoints is damaged: step_00000009.h5 (truncated HDF5 file), step_00000006.h5 (not an HDF5 file" \
    $tr2 --set run.name=dmg $DIV --resume auto
  [ "$(snap $R/dmg)" == "$before" ] && pass "resume_all_damaged_nothing_changed ($(echo "$before" | grep -c ' ') files of the run: content and mtime)" \
    || fail "resume_all_damaged_nothing_changed: $(diff <(echo "$before") <(snap $R/dmg) | grep '^>' | head -3 | tr '\n' ' ')"
fi

# ---------------------------------------------------------------- signal during a long evaluation
$PY - $TMP/bigval.bin <<'EOF'
import struct, sys, numpy as np
toks = np.random.default_rng(7).integers(0, 256, size=80000 * 32 + 1).astype(np.uint16)
h = b"ZTSHARD\0" + struct.pack("<IIIIQ", 1, 2, 256, 0xFFFFFFFF, len(toks)) + b"\0" * 32
open(sys.argv[1], "wb").write(h + toks.tobytes())
EOF
sg="--set checkpoint.signal_exit_code=3 --set checkpoint.every=0 --set train.steps=4 --set train.warmup_steps=0"
ev="--set data.val=$TMP/bigval.bin --set eval.sequences=1000000 --set eval.every=2"
t0=$(date +%s.%N)
timeout $LIMIT $MPIRUN -np 2 $ZT train $common $sg $ev --set run.name=sigeval > $TMP/sigeval.log 2>&1 &
mp=$!
# the step-2 evaluation runs once step 1 is recorded (step 2's record comes after its evaluation)
for _ in $(seq 1 1200); do [ -s $R/sigeval/metrics.jsonl ] && break; kill -0 $mp 2>/dev/null || break; sleep 0.02; done
sleep 1
zp=$(ztrain_pids $mp | tail -1)
ts=$(date +%s.%N)
[ -n "$zp" ] && kill -TERM $zp
wait $mp; rc=$?
dt=$(echo "$(date +%s.%N) - $ts" | bc)
notes=$(grep -c "validation sequences asked for" $TMP/sigeval.log)
if [ $rc -eq 3 ] && grep -q "evaluation abandoned: signal received" $TMP/sigeval.log && grep -q "stopped at step 2/4: signal received" $TMP/sigeval.log \
   && [ "$(cat $R/sigeval/checkpoints/latest 2>/dev/null)" == step_00000002.h5 ] && [ "$(echo "$dt < 10" | bc)" -eq 1 ]; then
  pass "signal_eval (SIGTERM to rank 1 during the 80,000-sequence evaluation of step 2: all ranks stopped ${dt:0:4} s later, saved step_00000002.h5, exit 3)"
else fail "signal_eval: exit $rc after ${dt:0:5} s; $(grep -E 'abandoned|stopped|error' $TMP/sigeval.log | head -3 | tr '\n' ' ')"; fi
[ "$notes" -eq 1 ] && pass "eval_sequences_clamped (one note: $(grep -m1 'validation sequences asked for' $TMP/sigeval.log | cut -c1-150))" \
  || fail "eval_sequences_clamped: $notes notes"

# ---------------------------------------------------------------- signal during set-up
# (the full 2048 sgemm probe, as a user's run: set-up lasts long enough for the signal to land in it)
ZTRAIN_TEST_SGEMM_N=2048 timeout $LIMIT $MPIRUN -np 2 $ZT train $common $sg --set run.name=sigsetup > $TMP/sigsetup.log 2>&1 &
mp=$!
caught() { local m; m=$(awk '/SigCgt/ {print $2}' /proc/$1/status 2>/dev/null); [ -n "$m" ] && [ $(( 0x$m & 0x4000 )) -ne 0 ]; }
zp=""
for _ in $(seq 1 3000); do
  zp=$(ztrain_pids $mp | tail -1)
  [ -n "$zp" ] && caught $zp && break
  kill -0 $mp 2>/dev/null || break; sleep 0.005
done
ts=$(date +%s.%N)
[ -n "$zp" ] && kill -TERM $zp
wait $mp; rc=$?
dt=$(echo "$(date +%s.%N) - $ts" | bc)
if [ $rc -eq 3 ] && grep -q "before training: signal received during set-up" $TMP/sigsetup.log && [ ! -e $R/sigsetup/checkpoints ] \
   && [ ! -s $R/sigsetup/metrics.jsonl ] && [ "$(echo "$dt < 15" | bc)" -eq 1 ]; then
  pass "signal_setup (SIGTERM to rank 1 during set-up: every rank ended ${dt:0:4} s later with exit 3 before step 1, no checkpoint)"
else fail "signal_setup: exit $rc after ${dt:0:5} s; $(grep -E 'stopped|error|checkpoint' $TMP/sigsetup.log | head -3 | tr '\n' ' ')"; fi

# ---------------------------------------------------------------- a finished run, then a full disk
# the run's checkpoints go to a small tmpfs when one can be mounted (for the full-disk cases)
F=$TMP/full; mkdir -p $F
mounted=0
if mount -t tmpfs -o size=8m tmpfs $F 2>/dev/null; then mounted=1; trap 'umount $F 2>/dev/null; rm -rf "$TMP"' EXIT; fi
ck=$F/ck; [ $mounted -eq 1 ] || ck=$R/df/checkpoints
dfull="--set checkpoint.every=3 --set checkpoint.dir=$ck"
if run_named df 2 $dfull --set train.steps=6; then
  # a finished run: --resume auto says so and touches nothing
  before=$(snap $R/df $ck)
  fault resume_finished 0 "the run is already finished: resumed from $ck/step_00000006.h5 at step 6 and train.steps = 6: nothing to do" \
    $tr2 --set run.name=df $dfull --set train.steps=6 --resume auto
  [ "$(snap $R/df $ck)" == "$before" ] && pass "resume_finished_nothing_changed (config.cfg, metrics.jsonl, results.json, checkpoints: content and mtime)" \
    || fail "resume_finished_nothing_changed: $(diff <(echo "$before") <(snap $R/df $ck) | grep '^>' | head -3 | tr '\n' ' ')"
else fail "resume_finished: the first run failed"; fi
if [ $mounted -eq 1 ] && [ -e $ck/step_00000006.h5 ]; then
  avail() { df -B1 --output=avail $F | tail -1 | tr -d ' '; }
  fill() { local a; a=$(avail); [ "$a" -gt "$1" ] && fallocate -l $(( a - $1 )) $F/fill.$2; }
  ckfiles=$(snap $ck)
  nothing_changed() { # name
    local now; now=$(snap $ck)
    [ "$now" == "$ckfiles" ] && [ -z "$(ls $ck/*.tmp 2>/dev/null)" ] && pass "$1_nothing_changed (step_3, step_6, latest unchanged; no .tmp)" \
      || fail "$1_nothing_changed: $(diff <(echo "$ckfiles") <(echo "$now") | head -3 | tr '\n' ' ') $(ls $ck/*.tmp 2>/dev/null)"
  }
  for leave in 0 4096 65536; do
    fill $leave $leave
    fault disk_full_before_create_$leave 2 "No space left on device" $tr2 --set run.name=df $dfull --set train.steps=9 --resume auto
    nothing_changed disk_full_before_create_$leave
    rm -f $F/fill.$leave
  done
  # full right after the file is created, before its space is reserved: HDF5 (rank 0 alone) meets the full disk
  t0=$(date +%s.%N)
  ZTRAIN_CKPT_TEST_LAYOUT_DELAY_MS=800 timeout $LIMIT $MPIRUN -np 2 -x ZTRAIN_CKPT_TEST_LAYOUT_DELAY_MS $ZT train $common \
    --set run.name=df $dfull --set train.steps=9 --resume auto > $TMP/dfc.log 2>&1 &
  mp=$!
  for _ in $(seq 1 3000); do [ -e $ck/step_00000009.h5.tmp ] && break; kill -0 $mp 2>/dev/null || break; sleep 0.005; done
  fill 0 create
  wait $mp; rc=$?
  dt=$(echo "$(date +%s.%N) - $t0" | bc)
  n=$(grep -c "ztrain: error" $TMP/dfc.log)
  if [ $rc -eq 2 ] && [ "$n" -eq 1 ] && grep "ztrain: error" $TMP/dfc.log | grep -q "No space left on device" && [ "$(echo "$dt < $BOUND" | bc)" -eq 1 ]; then
    pass "disk_full_after_create (exit 2 in ${dt:0:4} s: $(grep 'ztrain: error' $TMP/dfc.log | cut -c1-150))"
  else fail "disk_full_after_create: exit $rc, $n error lines, ${dt:0:5} s: $(grep -m2 -i error $TMP/dfc.log | tr '\n' ' ')"; fi
  nothing_changed disk_full_after_create
  rm -f $F/fill.create
  # full once the layout has reserved the file's space (the data writes slowed down): the save completes
  t0=$(date +%s.%N)
  ZTRAIN_CKPT_TEST_DELAY_MS=600 timeout $LIMIT $MPIRUN -np 2 -x ZTRAIN_CKPT_TEST_DELAY_MS $ZT train $common \
    --set run.name=df $dfull --set train.steps=9 --set checkpoint.async=true --resume auto > $TMP/dfl.log 2>&1 &
  mp=$!
  t=$ck/step_00000009.h5.tmp
  for _ in $(seq 1 3000); do [ -e $t ] && [ "$(stat -c %s $t 2>/dev/null || echo 0)" -gt 0 ] && break; kill -0 $mp 2>/dev/null || break; sleep 0.005; done
  fill 0 layout
  left=$(avail)
  wait $mp; rc=$?
  dt=$(echo "$(date +%s.%N) - $t0" | bc)
  ok=$(ckcheck $ck/step_00000009.h5 2>&1)
  if [ $rc -eq 0 ] && [ "$left" == 0 ] && [ "$(cat $ck/latest)" == step_00000009.h5 ] && [[ "$ok" == ok* ]] && [ "$(echo "$dt < $BOUND" | bc)" -eq 1 ]; then
    pass "disk_full_after_layout (0 bytes free during the async write: published from its reservation in ${dt:0:4} s; step_00000009.h5 $ok)"
  else fail "disk_full_after_layout: exit $rc, free $left, latest $(cat $ck/latest), $ok: $(grep -m2 -i error $TMP/dfl.log | tr '\n' ' ')"; fi
elif [ $mounted -eq 0 ]; then echo "SKIP disk_full_*: cannot mount a tmpfs here (not root?)"; fi
[ $mounted -eq 1 ] && { umount $F; trap 'rm -rf "$TMP"' EXIT; }

echo "($(( $(date +%s) - T0 )) s)"
finish
