#!/usr/bin/env bash
# bench_gpu.sh — the GPU benchmark (`make bench` runs it when a GPU is present): training tokens/s and
# model FLOPs utilisation (MFU) of GPT-2 124M and 350M, on 1 GPU and on every GPU of the node, for each
# precision asked (default bf16 and fp32), on synthetic GPT-2-vocabulary tokens; GPU_GiB: the most GPU memory
# NVML reported in use during the run (n/a without NVML).
#   MFU = model FLOPs per token (ztrain's count: 6 x params + attention, docs/performance.md) x tokens/s
#         / (GPUs x the GPU's dense bf16 peak): H100/H200 SXM 989 TFLOP/s, A100 312 (PEAK_TFLOPS= overrides).
# It runs $ZTRAIN (default build/ztrain-cuda, `make cuda`); without a usable GPU it says so and exits 0
# having measured nothing. 1-GPU runs go without mpirun when there is none (a packed build on a machine
# without Open MPI, scripts/gpu-bundle.sh); BENCH_ROOT=DIR keeps the runs' folders and logs there.
# Run on one H200 (docs/gpu-status.md has its table); ZTRAIN_OP_PROFILE=1 adds each run's op profile to
# its log. bf16 stores values in float32 buffers (docs/precision.md): its speed-up over fp32
# comes from the 2-byte GEMM operands alone.
#   benchmarks/bench_gpu.sh [--steps N] [--precisions "bf16 fp32"] [--models "gpt2-124m gpt2-350m"]
# BENCH_EXTRA="--set key=value ..." adds to every run's arguments (e.g. --set train.attention=materialized, the
# baseline of the fused attention) and BENCH_TAG=NAME to the runs' names and the table's rows.
set -u
cd "$(dirname "$0")/.."
STEPS=30 PRECS="bf16 fp32" MODELS="gpt2-124m gpt2-350m"
while [ $# -gt 0 ]; do
  case $1 in
    --steps) STEPS=$2; shift ;;
    --precisions) PRECS=$2; shift ;;
    --models) MODELS=$2; shift ;;
    *) echo "usage: $0 [--steps N] [--precisions LIST] [--models LIST]" >&2; exit 2 ;;
  esac
  shift
done
ZT=${ZTRAIN:-build/ztrain-cuda}
PY=/usr/bin/python3
$PY -c "import numpy" 2>/dev/null || PY=python3
NG=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "$NG" -eq 0 ]; then echo "bench_gpu.sh: no GPU here (nvidia-smi lists none): nothing measured"; exit 0; fi
[ -x $ZT ] || make --no-print-directory cuda >/dev/null || { echo "bench_gpu.sh: make cuda failed" >&2; exit 2; }
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$name" in
  *H100*|*H200*) peak=989 ;;
  *A100*) peak=312 ;;
  *) peak=0 ;;
esac
peak=${PEAK_TFLOPS:-$peak}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
DATA=build/bench-gpu-data
[ -f $DATA/train.bin ] || $PY tests/helpers/make_data.py $DATA 50257 20000000 >/dev/null
if [ -n "${BENCH_ROOT:-}" ]; then # kept: the caller reads the runs' logs and metrics
  ROOT=$BENCH_ROOT
  mkdir -p "$ROOT"
else
  ROOT=$(mktemp -d /tmp/zt-benchgpu.XXXXXX)
  trap 'rm -rf "$ROOT"' EXIT
fi
echo "# $name x $NG, dense bf16 peak $peak TFLOP/s per GPU; $STEPS steps, tokens/s over steps 2..$STEPS"
printf "%-14s %-5s %5s %12s %8s %10s %9s\n" model prec gpus tokens/s MFU% step_ms GPU_GiB
for m in $MODELS; do
  for p in $PRECS; do
    for g in 1 $([ "$NG" -gt 1 ] && echo "$NG"); do
      run=$m-$p-$g${BENCH_TAG:+-$BENCH_TAG}
      launch="mpirun --bind-to none -np $g"
      [ "$g" -eq 1 ] && ! command -v mpirun >/dev/null && launch=""
      if ! $launch $ZT train -c inputs/$m.cfg --set precision=$p --set train.steps=$STEPS \
          --set data.train=$DATA/train.bin --set data.val=$DATA/val.bin --set eval.every=0 --set eval.sequences=16 --set train.log_every=1 --set train.warmup_steps=2 \
          --set checkpoint.every=0 --set sample.every=0 --set train.global_batch=$((16 * g)) \
          --set run.root=$ROOT --set run.session=bench --set run.name=$run ${BENCH_EXTRA:-} > $ROOT/$run.log 2>&1; then
        printf "%-14s %-5s %5s %s\n" $m $p $g "failed: $(grep -m1 'error' $ROOT/$run.log || tail -1 $ROOT/$run.log)"
        continue
      fi
      $PY - $ROOT/bench/$run $m${BENCH_TAG:+-$BENCH_TAG} $p $g $peak <<'PYEOF'
import json, sys
d, m, p, g, peak = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])  # m: model[-tag]
r = json.load(open(d + "/results.json"))
steps = [json.loads(l) for l in open(d + "/metrics.jsonl")]
ms = sorted(s["step_ms"] for s in steps[1:])[len(steps[1:]) // 2]
gflops_tok = steps[-1]["gflops"] * 1e9 / (steps[-1]["tokens_per_s"] / g) if steps[-1]["tokens_per_s"] else 0
mfu = 100 * gflops_tok * r["tokens_per_s"] / (g * peak * 1e12) if peak else float("nan")
mem = max((st.get("gpu_mem_bytes", -1) for st in steps), default=-1)  # NVML: the GPU's used memory
gib = f"{mem / 2**30:9.1f}" if mem > 0 else f"{'n/a':>9}"
print(f"{m:<14} {p:<5} {g:5d} {r['tokens_per_s']:12.0f} {mfu:8.1f} {ms:10.1f} {gib}")
PYEOF
    done
  done
done
