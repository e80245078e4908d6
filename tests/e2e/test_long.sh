#!/usr/bin/env bash
# test: long
# The slow checks (make test-long): AddressSanitizer + UBSan builds on the paths the normal suite runs
# optimized, beyond tests/e2e/test_asan.sh (make test: the unit tests and a cpu training run with a resume
# under ASan): the host execution harness's own tests, and 2-rank ZeRO-2 training runs of ./ztrain-asan
# on the devsim and cudasim backends (devsim's translation and the CUDA kernels under the harness):
# clean, leak check on (tests/helpers/asan.supp as in test_asan.sh), and finished with a checkpoint; and bf16 runs with 2-byte
# working parameters on cpu and cudasim; a step replayed as one CUDA graph on cudasim.
set -u
cd "$(dirname "$0")/../.."
. tests/helpers/lib.sh
need_tiny_data
asan_env
if [ -x build/tests/test_hostexec-asan ]; then
  if timeout 600 build/tests/test_hostexec-asan > $TMP/hx.log 2>&1; then
    pass "hostexec_asan ($(tail -1 $TMP/hx.log))"
  else fail "hostexec_asan: $(grep -E 'FAIL|ERROR|runtime error|SUMMARY' $TMP/hx.log | head -3 | tr '\n' ' ')"; fi
else fail "hostexec_asan: build/tests/test_hostexec-asan missing (make test-long builds it)"; fi
if [ ! -x ./ztrain-asan ]; then fail "ztrain_asan: ./ztrain-asan missing (make test-long builds it)"; finish; fi
common="-c inputs/tiny.cfg --set train.micro_batch=2 --set train.global_batch=8 --set train.steps=6
        --set train.log_every=1 --set run.root=$TMP --set run.session=long --set eval.every=3"
for dev in devsim cudasim; do
  timeout 900 $MPIRUN -x ASAN_OPTIONS -x LSAN_OPTIONS -x UBSAN_OPTIONS -np 2 ./ztrain-asan train $common --set device=$dev \
    --set run.name=asan-$dev > $TMP/asan-$dev.log 2>&1
  rc=$?
  if [ $rc -ne 0 ] || grep -qE "$SAN_RE" $TMP/asan-$dev.log || \
     ! ls $TMP/long/asan-$dev/checkpoints/step_00000006.h5 >/dev/null 2>&1; then
    fail "asan_train_$dev: exit $rc: $(grep -E 'ERROR|runtime error|error:' $TMP/asan-$dev.log | head -2 | tr '\n' ' ')"
  else
    pass "asan_train_$dev (clean, leak check on: 6 steps, eval, checkpoint; final loss $(losses $TMP/long/asan-$dev | tail -1))"
  fi
done
# bf16 with 2-byte working parameters (the fp32 window, the words' all-gather, /model rounded in the async writer's
# staging, sampling from an unpacked copy, the in-place decode of params_hash)
for dev in cpu cudasim; do
  timeout 900 $MPIRUN -x ASAN_OPTIONS -x LSAN_OPTIONS -x UBSAN_OPTIONS -np 2 ./ztrain-asan train $common --set device=$dev \
    --set run.name=asan-p16-$dev --set precision=bf16 --set train.param_storage=precision --set checkpoint.every=3 \
    --set checkpoint.async=true --set sample.every=3 > $TMP/asan-p16-$dev.log 2>&1
  rc=$?
  if [ $rc -ne 0 ] || grep -qE "$SAN_RE" $TMP/asan-p16-$dev.log || ! grep -q "2-byte words" $TMP/asan-p16-$dev.log || \
     ! ls $TMP/long/asan-p16-$dev/checkpoints/step_00000006.h5 >/dev/null 2>&1; then
    fail "asan_train_2_byte_params_$dev: exit $rc: $(grep -E 'ERROR|runtime error|error:' $TMP/asan-p16-$dev.log | head -2 | tr '\n' ' ')"
  else
    pass "asan_train_2_byte_params_$dev (bf16, clean, leak check on: 6 steps, eval, async checkpoints, samples)"
  fi
done
# a step replayed as one CUDA graph on cudasim (1 rank: the harness's recorded closures run after the slots that
# made them returned), tiny and llama-tiny in bf16, 8 steps of which 4 replayed
for cfg in tiny llama-tiny; do
  timeout 900 ./ztrain-asan train -c inputs/$cfg.cfg --set device=cudasim --set precision=bf16 --set train.steps=8 \
    --set train.micro_batch=2 --set train.global_batch=4 --set train.cuda_graph=true --set eval.every=0 \
    --set sample.every=0 --set run.root=$TMP --set run.session=long --set run.name=asan-graph-$cfg \
    > $TMP/asan-graph-$cfg.log 2>&1
  rc=$?
  if [ $rc -ne 0 ] || grep -qE "$SAN_RE" $TMP/asan-graph-$cfg.log || \
     ! grep -q "step graph: 4 steps replayed" $TMP/asan-graph-$cfg.log; then
    fail "asan_step_graph_$cfg: exit $rc: $(grep -E 'ERROR|runtime error|error:|step graph' $TMP/asan-graph-$cfg.log | head -2 | tr '\n' ' ')"
  else
    pass "asan_step_graph_$cfg (clean, leak check on: 8 steps, 4 replayed as one CUDA graph)"
  fi
done
finish
