#!/usr/bin/env bash
# test: long
# test: alone
# Asynchronous checkpoints (checkpoint.async = true) on the tiny model with real mpirun:
#  async_same_files      1 and 2 ranks, checkpoints at 10/20/30: every dataset of every async file equals the
#                        synchronous run's file bit for bit (h5py), and the params_hash is the same
#  async_resume_exact    20 steps with --stop-after (async) + --resume auto == 40 straight: per-step losses, hash
#  async_stall_metrics   metrics.jsonl has ckpt_stall_s on save steps (and on the step that published a
#                        background write), results.json ckpt_saves/ckpt_stall_s
#  async_sigkill         writes slowed by the fault-injection hook ZTRAIN_CKPT_TEST_DELAY_MS; SIGKILL while
#                        step 20's background write is in flight: `latest` names step 10, which is complete, every
#                        step_*.h5 is complete, and --resume auto ends bit-identical to an uninterrupted run
#  async_signal_waits    SIGUSR1 while a background write is in flight: the write in flight and the signal's own
#                        checkpoint are both published before the exit with code 3
#  direct_io_off         checkpoint.direct_io = false writes the same bytes
#  async_disk_full       the disk fills after the first save (a 4.5 MB tmpfs): the second save, laid out in the
#                        background, fails with exit 2 and one line on every rank; the first stays `latest`,
#                        complete, and no .tmp is left (skipped where no tmpfs can be mounted)
#  reads_*               loads read with O_DIRECT (strace: the checkpoint opened O_DIRECT by eval and by a resume),
#                        and resuming through the page cache (direct_io = false) or from a tmpfs checkpoint
#                        directory ends bit-identical to the straight run; a resume reads through the run's
#                        checkpoint staging (strace: no 16 MiB read buffers mapped, where eval maps its four)
set -u
cd "$(dirname "$0")/../.."
. tests/helpers/lib.sh
need_tiny_data
H="$PY tests/helpers/ckpt_h5.py"
common="-c inputs/tiny.cfg --set train.log_every=1 --set run.root=$TMP --set run.session=as --set eval.every=0 --set checkpoint.keep=0"
R=$TMP/as
run() { run_named "$@"; }
compare() { compare_runs $R/$1 $R/$2 "$3"; } # run $1 against reference run $2, check named $3
# every step file of run dir $1 equals the same-named file of run dir $2 (all datasets, bit for bit)
same_files() {
  local f n=0 msg
  for f in $R/$1/checkpoints/step_*.h5; do
    msg=$($H same "$f" "$R/$2/checkpoints/$(basename $f)") || { echo "$(basename $f): $msg"; return 1; }
    n=$((n + 1))
  done
  [ $n -gt 0 ] || { echo "no checkpoint files in $R/$1"; return 1; }
  echo "$n files"
}

# ---------------------------------------------------------------- same bytes as synchronous saves
for np in 1 2; do
  if run sync$np $np --set train.steps=30 --set checkpoint.every=10 &&
     run async$np $np --set train.steps=30 --set checkpoint.every=10 --set checkpoint.async=true; then
    if msg=$(same_files async$np sync$np) && [ "$(result $R/async$np params_hash)" == "$(result $R/sync$np params_hash)" ]; then
      pass "async_same_files_${np}rank ($msg: every dataset bit-identical to the synchronous saves; params_hash equal)"
    else fail "async_same_files_${np}rank: $msg"; fi
  else fail "async_same_files_${np}rank: a run failed"; fi
done
if run nodirect 2 --set train.steps=30 --set checkpoint.every=10 --set checkpoint.direct_io=false && msg=$(same_files nodirect sync2); then
  pass "direct_io_off ($msg identical with buffered writes)"
else fail "direct_io_off: ${msg:-run failed}"; fi

# ---------------------------------------------------------------- stall figures
st=$($PY -c '
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl")]
steps = sorted({r["step"] for r in recs if "ckpt_stall_s" in r})
res = json.load(open(sys.argv[1] + "/results.json"))
ok = {10, 20, 30} <= set(steps) and res["ckpt_saves"] == 3 and res["ckpt_async"] is True and res["ckpt_stall_s"] >= 0
print(("ok" if ok else "bad"), steps, res["ckpt_saves"], res["ckpt_stall_s"])' $R/async2 2>&1)
[ "${st%% *}" == ok ] && pass "async_stall_metrics (save steps, saves, total stall s: ${st#ok })" || fail "async_stall_metrics: $st"

# ---------------------------------------------------------------- resume from async files
if run straight 2 --set train.steps=40 && run split 2 --set train.steps=40 --set checkpoint.async=true --stop-after 20 &&
   run split 2 --set train.steps=40 --set checkpoint.async=true --resume auto; then
  compare split straight async_resume_exact
else fail "async_resume_exact: a run failed"; fi

# ---------------------------------------------------------------- reads: O_DIRECT, page cache, tmpfs
ck=$R/split/checkpoints/step_00000020.h5
if strace -f -qq -e trace=openat -o $TMP/eval.strace $ZT eval --checkpoint $ck > $TMP/eval.log 2>&1 &&
   grep -q "step_00000020.h5\", O_RDONLY|O_DIRECT" $TMP/eval.strace; then
  pass "reads_o_direct_eval ($(grep -c "step_00000020.h5\", O_RDONLY|O_DIRECT" $TMP/eval.strace) O_DIRECT opens of $(basename $ck))"
else fail "reads_o_direct_eval: $(grep step_00000020 $TMP/eval.strace | head -3 | tr '\n' ' ') $(tail -1 $TMP/eval.log)"; fi
if run rdbuf 2 --set train.steps=40 --stop-after 20 &&
   strace -f -qq -e trace=openat -o $TMP/rdbuf.strace $MPIRUN -np 2 $ZT train $common --set run.name=rdbuf --set train.steps=40 \
     --set checkpoint.direct_io=false --resume auto >> $TMP/rdbuf.log 2>&1; then
  if grep -q "step_00000020.h5\", O_RDONLY|O_DIRECT" $TMP/rdbuf.strace || ! grep -q "step_00000020.h5\", O_RDONLY" $TMP/rdbuf.strace; then
    fail "reads_page_cache_resume: direct_io = false: $(grep step_00000020 $TMP/rdbuf.strace | head -3 | tr '\n' ' ')"
  else compare rdbuf straight reads_page_cache_resume_exact; fi
else fail "reads_page_cache_resume_exact: a run failed"; fi
# read buffers: eval allocates its own (16 MiB + 8 KiB each: glibc maps 16793600 bytes for one; eval of the
# tiny model's file needs one), a resume reads through the saver's staging (the positive control on eval
# keeps the size pattern honest: if glibc mapped them otherwise, that half fails)
big16() { grep -c 'mmap(NULL, 16793600,' "$1"; }
$ZT train $common --set run.name=rs1 --set train.steps=20 --stop-after 10 > /dev/null 2>&1
strace -f -qq -e trace=mmap -o $TMP/rs.strace $ZT train $common --set run.name=rs1 --set train.steps=20 --resume auto > $TMP/rs1.log 2>&1
rsn=$(big16 $TMP/rs.strace)
strace -f -qq -e trace=mmap -o $TMP/ev.strace $ZT eval --checkpoint $R/rs1/checkpoints/step_00000010.h5 > /dev/null 2>&1
evn=$(big16 $TMP/ev.strace)
if grep -q params_hash $TMP/rs1.log && [ "$rsn" -eq 0 ] && [ "$evn" -ge 1 ]; then
  pass "reads_through_staging (resume: $rsn read buffers mapped; eval of the same file: $evn)"
else fail "reads_through_staging: resume mapped $rsn read buffers (want 0), eval $evn (want >= 1): $(tail -1 $TMP/rs1.log)"; fi
if [ -d /dev/shm ] && [ -w /dev/shm ]; then
  shm=$(mktemp -d /dev/shm/zt-ckpt.XXXXXX)
  if run rdshm 2 --set train.steps=40 --set checkpoint.dir=$shm --stop-after 20 &&
     run rdshm 2 --set train.steps=40 --set checkpoint.dir=$shm --resume auto; then
    compare rdshm straight "reads_tmpfs_resume_exact ($(df -T $shm | awk 'NR == 2 { print $2 }'))"
  else fail "reads_tmpfs_resume_exact: a run failed"; fi
  rm -rf "$shm"
else fail "reads_tmpfs_resume_exact: no writable /dev/shm"; fi

# ---------------------------------------------------------------- a full disk under a background layout
mkdir -p $TMP/full
if mount -t tmpfs -o size=4500k tmpfs $TMP/full 2>/dev/null; then
  out=$(timeout 120 $MPIRUN -np 2 $ZT train $common --set run.name=full --set train.steps=30 --set checkpoint.every=10 \
        --set checkpoint.async=true --set checkpoint.dir=$TMP/full/ck 2>&1); rc=$?
  n=$(echo "$out" | grep -c "ztrain: error")
  lt=$(cat $TMP/full/ck/latest 2>/dev/null)
  if [ $rc -eq 2 ] && [ "$n" -eq 1 ] && echo "$out" | grep "ztrain: error" | grep -q "No space left on device" &&
     [ "$lt" == step_00000010.h5 ] && $H verify $TMP/full/ck/$lt > /dev/null && [ -z "$(ls $TMP/full/ck | grep tmp)" ]; then
    pass "async_disk_full ($(echo "$out" | grep 'ztrain: error' | cut -c1-140); latest $lt complete, no .tmp)"
  else fail "async_disk_full: exit $rc, $n error lines: $(echo "$out" | grep -m2 'error' | tr '\n' ' '); latest '$lt'; files: $(ls $TMP/full/ck | tr '\n' ' ')"; fi
  umount $TMP/full
else echo "SKIP async_disk_full: cannot mount a tmpfs here (not root?)"; fi

# ---------------------------------------------------------------- SIGKILL during a background write
export ZTRAIN_CKPT_TEST_DELAY_MS=1500
$MPIRUN -x ZTRAIN_CKPT_TEST_DELAY_MS -np 2 $ZT train $common --set run.name=kill --set train.steps=40 --set checkpoint.every=10 \
  --set checkpoint.async=true > $TMP/kill.log 2>&1 &
mp=$!
ok=0
for _ in $(seq 1 600); do # until step 10 is published and step 20's write is in flight
  if [ -f $R/kill/checkpoints/step_00000010.h5 ] && [ -f $R/kill/checkpoints/step_00000020.h5.tmp ]; then ok=1; break; fi
  sleep 0.05
done
pids=$(ztrain_pids $mp)
[ -n "$pids" ] && kill -9 $pids 2>/dev/null
wait $mp 2>/dev/null
unset ZTRAIN_CKPT_TEST_DELAY_MS
if [ $ok -eq 1 ]; then
  lt=$(cat $R/kill/checkpoints/latest 2>/dev/null)
  bad=""
  for f in $R/kill/checkpoints/step_*.h5; do $H verify $f > /dev/null || bad="$bad $(basename $f)"; done
  if [ "$lt" == step_00000010.h5 ] && [ -z "$bad" ] && [ -f $R/kill/checkpoints/step_00000020.h5.tmp ]; then
    pass "async_sigkill_invariants (killed during step 20's background write: latest = $lt, complete; the .tmp left unpublished)"
  else fail "async_sigkill_invariants: latest '$lt', incomplete:$bad, files: $(ls $R/kill/checkpoints | tr '\n' ' ')"; fi
  if run kill 2 --set train.steps=40 --set checkpoint.every=10 --set checkpoint.async=true --resume auto; then
    compare kill straight async_sigkill_resume_exact
  else fail "async_sigkill_resume_exact: the resumed run failed"; fi
else fail "async_sigkill: never saw step 20's write in flight (log: $(tail -2 $TMP/kill.log | tr '\n' ' '))"; fi

# ---------------------------------------------------------------- SIGUSR1 while a write is in flight
export ZTRAIN_CKPT_TEST_DELAY_MS=1500
$MPIRUN -x ZTRAIN_CKPT_TEST_DELAY_MS -np 2 $ZT train $common --set run.name=usr1 --set train.steps=400 --set checkpoint.every=10 \
  --set checkpoint.async=true --set checkpoint.signal_exit_code=3 > $TMP/usr1.log 2>&1 &
mp=$!
ok=0
for _ in $(seq 1 600); do
  [ -f $R/usr1/checkpoints/step_00000010.h5.tmp ] && { ok=1; break; }
  sleep 0.05
done
pids=$(ztrain_pids $mp)
[ -n "$pids" ] && kill -USR1 $pids 2>/dev/null
wait $mp
rc=$?
unset ZTRAIN_CKPT_TEST_DELAY_MS
lt=$(cat $R/usr1/checkpoints/latest 2>/dev/null)
n=$(ls $R/usr1/checkpoints | grep -c '\.h5$')
tmps=$(ls $R/usr1/checkpoints | grep -c '\.tmp$')
if [ $ok -eq 1 ] && [ $rc -eq 3 ] && [ "$n" -ge 2 ] && [ "$tmps" -eq 0 ] && $H verify $R/usr1/checkpoints/$lt > /dev/null &&
   $H verify $R/usr1/checkpoints/step_00000010.h5 > /dev/null; then
  pass "async_signal_waits (exit 3; step 10's background write and the signal's checkpoint $lt both published, no .tmp)"
else fail "async_signal_waits: rc $rc, latest '$lt', files: $(ls $R/usr1/checkpoints | tr '\n' ' ')"; fi
finish
