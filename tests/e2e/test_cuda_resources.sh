#!/usr/bin/env bash
# The GPU build's kernels keep their data in registers and shared memory, never in local memory. ptxas reports
# each kernel's registers, stack frame and spills when the GPU build compiles it (`make cuda`: nvcc -Xptxas -v,
# kept as build/cuda/NAME.ptxas); scripts/cuda-resources.py reads the reports. A fragment or accumulator array
# indexed by a loop nvcc did not unroll lives in local memory (a "stack frame"): the tensor-core attention's
# backward once kept its dk, dv, p and ds accumulators there (512 bytes a thread) until its loops took ZT_UNROLL.
#  - reports_complete        a report for every cuda/*.cu, newer than its source
#  - no_local_memory_sm_80   no kernel compiled for sm_80 has a stack frame or spills (and there are >= 60 of them)
#  - no_local_memory_sm_90   the same for sm_90 (the H100 / H200)
#  - detects_local_memory    a kernel written here with a register array indexed at run time, compiled by nvcc:
#                            the check fails and names it, and not its unrolled twin (the check can fail)
# SKIP without nvcc's build (build/ztrain-cuda: make test builds it when nvcc exists).
set -u
cd "$(dirname "$0")/../.."
. tests/helpers/lib.sh

NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
if [ ! -x build/ztrain-cuda ] || ! [ -x "$NVCC" ]; then echo "SKIP cuda resources: no build/ztrain-cuda or nvcc"; finish; fi

missing=""
for f in cuda/*.cu; do
  r=build/cuda/$(basename $f .cu).ptxas
  if [ ! -s $r ] || [ $r -ot $f ]; then missing="$missing $r"; fi
done
[ -z "$missing" ] && pass "reports_complete (a report for each of the $(ls cuda/*.cu | wc -l) sources nvcc compiles)" \
  || fail "reports_complete: missing or older than their source:$missing (rebuild: make cuda)"

for a in sm_80 sm_90; do
  $PY scripts/cuda-resources.py --check --arch $a build/cuda/*.ptxas > $TMP/res_$a.txt 2> $TMP/res_$a.err; rc=$?
  n=$(tail -1 $TMP/res_$a.txt | cut -d' ' -f1)
  maxr=$(awk 'NR > 1 && $2 ~ /^[0-9]+$/ { if ($2 > m) m = $2 } END { print m + 0 }' $TMP/res_$a.txt)
  [ $rc -eq 0 ] && [ "${n:-0}" -ge 60 ] \
    && pass "no_local_memory_$a ($n kernels, none with a stack frame or spills; at most $maxr registers)" \
    || fail "no_local_memory_$a: rc $rc, ${n:-no} kernels: $(head -3 $TMP/res_$a.err | tr '\n' ' ')"
done

cat > $TMP/local.cu <<'EOF'
// acc[] indexed by a run-time value: local memory; its twin indexes only with unrolled constants
__global__ void zt_res_dynamic(float *out, const int *idx, int n) {
    float acc[32];
    for (int i = 0; i < 32; i++) acc[i] = out[i * n + threadIdx.x];
    for (int k = 0; k < n; k++) acc[idx[k] & 31] += 1.0f;
    out[threadIdx.x] = acc[idx[0] & 31];
}
__global__ void zt_res_unrolled(float *out, const int *idx, int n) {
    float acc[32];
#pragma unroll
    for (int i = 0; i < 32; i++) acc[i] = out[i * n + threadIdx.x];
    for (int k = 0; k < n; k++) {
#pragma unroll
        for (int i = 0; i < 32; i++) acc[i] += (idx[k] & 31) == i ? 1.0f : 0.0f;
    }
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < 32; i++) s += acc[i];
    out[threadIdx.x] = s;
}
EOF
$NVCC -std=c++17 -O3 -arch=sm_90 -Xptxas -v -c $TMP/local.cu -o $TMP/local.o 2> $TMP/local.ptxas; rcc=$?
$PY scripts/cuda-resources.py --check $TMP/local.ptxas > $TMP/local.txt 2> $TMP/local.err; rc=$?
if [ $rcc -ne 0 ]; then fail "detects_local_memory: nvcc failed: $(head -2 $TMP/local.ptxas)"
elif [ $rc -eq 1 ] && grep -q "zt_res_dynamic" $TMP/local.err && ! grep -q "zt_res_unrolled" $TMP/local.err; then
  pass "detects_local_memory (exit 1: $(grep -o 'zt_res_dynamic[^:]*: [0-9]* bytes stack frame' $TMP/local.err | head -1); the unrolled twin not named)"
else fail "detects_local_memory: rc $rc: $(cat $TMP/local.err $TMP/local.txt | tr '\n' ' ' | cut -c1-300)"; fi
finish
