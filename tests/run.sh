#!/usr/bin/env bash
# The test runner: runs every test program, counts their `PASS name` / `FAIL name: reason` lines,
# and ends with the line `N passed, N failed`. A program that exits non-zero without printing a
# FAIL line counts as one failure; one that times out likewise.
#   tests/run.sh            all tests (make test)
#   tests/run.sh PATTERN    only tests whose file name contains PATTERN
#   ZT_LONG=1 tests/run.sh  also the long ones (make test-long)
set -u
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export ZT_PY="${ZT_PY:-$PWD/.venv-ref/bin/python}"
pattern="${1:-}"
logdir=build/test-logs
mkdir -p "$logdir"
passed=0; failed=0
tests=(build/tests/test_util build/tests/test_ops build/tests/test_ops_elementwise build/tests/test_decode build/tests/test_quant build/tests/test_ops_lora tests/test_quant.py tests/test_asan.sh tests/test_ops_devsim.sh tests/test_config.sh tests/test_train.sh tests/test_precision.sh tests/test_dist.sh
       tests/test_hf_reference.py tests/test_tokenizer.py tests/test_prepare.sh tests/test_ckpt.sh tests/test_ckpt_async.sh tests/test_multinode.sh tests/test_tools.sh tests/test_fuzz.sh tests/test_faults_train.sh tests/test_faults.sh tests/test_memory.sh
       tests/test_export.py tests/test_lora_reference.py tests/test_lora_fd.py tests/test_lora.py tests/test_sample.sh tests/test_launch.sh tests/test_slurm_launch.sh tests/test_slurm_kit.sh tests/test_tensorboard.py tests/test_devsim.sh build/tests/test_hostexec build/tests/test_kernels_elem build/tests/test_kernels_norm_attn tests/test_cudasim.sh tests/test_gpu_kit.sh)
[ -n "${ZT_LONG:-}" ] && tests+=(tests/test_long.sh tests/test_perf_model.sh tests/test_soak.sh)
for t in "${tests[@]}"; do
  [ -n "$pattern" ] && [[ "$t" != *"$pattern"* ]] && continue
  name=$(basename "$t")
  if [ ! -e "$t" ]; then echo "FAIL $name: missing"; failed=$((failed+1)); continue; fi
  case "$t" in
    *.py) cmd=("$ZT_PY" "$t") ;;
    *) cmd=("$t") ;;
  esac
  echo "== $name"
  start=$(date +%s)
  timeout 900 "${cmd[@]}" > "$logdir/$name.log" 2>&1
  rc=$?
  p=$(grep -c '^PASS ' "$logdir/$name.log")
  f=$(grep -c '^FAIL ' "$logdir/$name.log")
  grep -E '^(PASS|FAIL) ' "$logdir/$name.log"
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
    echo "FAIL $name: exited $rc without a FAIL line (log: $logdir/$name.log)"; tail -5 "$logdir/$name.log"; f=1
  fi
  echo "   ($name: $p passed, $f failed, $(( $(date +%s) - start )) s)"
  passed=$((passed+p)); failed=$((failed+f))
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
