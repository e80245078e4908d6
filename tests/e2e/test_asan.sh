#!/usr/bin/env bash
# AddressSanitizer + UBSan in the normal suite (make test builds ./ztrain-asan and build/tests/*-asan):
#   asan_<unit test>    the C unit tests (test_util, test_ops, test_ops_elementwise, test_decode) built
#                       with ASan + UBSan: their own PASS lines, exit 0, no sanitizer report, no leak
#   asan_train_cpu      ./ztrain-asan on 2 ranks, cpu, ZeRO-2: 3 of 6 steps with an eval and a checkpoint
#                       (--stop-after 3), then --resume auto from it to step 6 with another eval and
#                       checkpoint (the checkpoint read path too): both exit 0, no sanitizer report, no leak,
#                       "resumed from ...step_00000003.h5 at step 3", two val losses, step_00000006.h5 present
# Leak checking stays on: tests/helpers/asan.supp hides only allocations with an Open MPI / PMIx / hwloc /
# libevent frame on their stack (MPI_Init's own, never freed by MPI_Finalize); full stacks
# (fast_unwind_on_malloc=0) so those frames are seen. The devsim and cudasim runs under ASan, and the
# harness's ASan test, are in tests/e2e/test_long.sh.
set -u
cd "$(dirname "$0")/../.."
. tests/helpers/lib.sh
need_tiny_data
asan_env
# san_lines LOG: the first sanitizer lines of a log, on one line
san_lines() { grep -E "$SAN_RE" "$1" | head -3 | tr '\n' ' '; }

for t in test_util test_ops test_ops_elementwise test_decode; do
  b=build/tests/$t-asan
  if [ ! -x $b ]; then fail "asan_$t: $b missing (make test builds it)"; continue; fi
  timeout 300 $b > $TMP/$t.log 2>&1
  rc=$?
  np=$(grep -c '^PASS ' $TMP/$t.log); nf=$(grep -c '^FAIL ' $TMP/$t.log)
  if [ $rc -ne 0 ] || [ $nf -ne 0 ] || [ $np -eq 0 ] || grep -qE "$SAN_RE" $TMP/$t.log; then
    fail "asan_$t: exit $rc, $np PASS, $nf FAIL: $(grep -m2 '^FAIL ' $TMP/$t.log | tr '\n' ' ')$(san_lines $TMP/$t.log)"
  else
    pass "asan_$t (clean: $np PASS lines)"
  fi
done

if [ ! -x ./ztrain-asan ]; then fail "asan_train_cpu: ./ztrain-asan missing (make test builds it)"; finish; fi
common="-c inputs/tiny.cfg --set device=cpu --set zero.stage=2 --set train.micro_batch=2 --set train.global_batch=8
        --set train.steps=6 --set train.log_every=1 --set eval.every=3 --set checkpoint.every=3
        --set run.root=$TMP --set run.session=asan --set run.name=cpu"
MPIRUN_ASAN="$MPIRUN -x ASAN_OPTIONS -x LSAN_OPTIONS -x UBSAN_OPTIONS"
log=$TMP/asan-cpu.log
timeout 300 $MPIRUN_ASAN -np 2 ./ztrain-asan train $common --stop-after 3 > $log 2>&1
rc1=$?
ck3=$(ls $TMP/asan/cpu/checkpoints/step_00000003.h5 2>/dev/null)
timeout 300 $MPIRUN_ASAN -np 2 ./ztrain-asan train $common --resume auto >> $log 2>&1
rc2=$?
if [ $rc1 -ne 0 ] || [ $rc2 -ne 0 ] || grep -qE "$SAN_RE" $log || [ -z "$ck3" ] || \
   ! grep -q "^resumed from .*step_00000003.h5 at step 3" $log || \
   [ ! -f $TMP/asan/cpu/checkpoints/step_00000006.h5 ] || [ "$(grep -c '^val loss' $log)" -ne 2 ]; then
  fail "asan_train_cpu: exits $rc1/$rc2, step 3 checkpoint '${ck3##*/}', $(grep -c '^resumed from' $log) resumes, $(grep -c '^val loss' $log) val losses: $(san_lines $log)$(grep -m1 'error:' $log)"
else
  pass "asan_train_cpu (clean, leak check on: 2 ranks ZeRO-2, 3 steps + eval + checkpoint, resumed to 6 + eval + checkpoint; final loss $(losses $TMP/asan/cpu | tail -1))"
fi
finish
