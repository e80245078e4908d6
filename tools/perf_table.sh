#!/usr/bin/env bash
# perf_table.sh — the scale table of docs/perf_table.md and docs/perf-model.md from the performance model (src/core/diag/perf_model.h): GPT-2
# 124M/350M/774M/1.5B (inputs/gpt2-*.cfg) on 8..512 GPUs of HW (h100) with 8 per node, ZeRO stages 1 and 2,
# ordered and native reduction; predicted step time, tokens/s, weak-scaling efficiency and the exposed
# gradient exchange, and the step with int64 fixed-point gradients (evaluated; ztrain keeps the ordered exchange). micro_batch per rank is the preset's, lowered where the global batch (512 x 1024
# tokens) cannot feed every rank.
#   tools/perf_table.sh [--hw h100] [--net GBIT,LAT_US] [--gpus 8,64,512] [--markdown]
set -u
cd "$(dirname "$0")/.."
ZT=${ZTRAIN:-./ztrain}
HW=h100 NET=400,12 GPUS=8,64,512 MD=0
while [ $# -gt 0 ]; do
  case $1 in
    --hw) HW=$2; shift ;;
    --net) NET=$2; shift ;;
    --gpus) GPUS=$2; shift ;;
    --markdown) MD=1 ;;
    *) echo "usage: $0 [--hw h100] [--net GBIT,LAT_US] [--gpus 8,64,512] [--markdown]" >&2; exit 2 ;;
  esac
  shift
done
[ -x "$ZT" ] || { echo "perf_table.sh: $ZT missing: run make first" >&2; exit 2; }
if [ $MD -eq 1 ]; then
  echo "| model | GPUs | nodes | stage | reduce | micro | step (s) | exposed grad (s) | tokens/s | efficiency | int64 fixed-point step (s) |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|"
else
  printf "%-10s %5s %5s %5s %8s %5s %10s %12s %12s %7s %12s\n" model gpus nodes stage reduce micro "step(s)" "exposed(s)" "tokens/s" effic "fixedpt(s)"
fi
for m in 124m 350m 774m 1558m; do
  cfg=inputs/gpt2-$m.cfg
  mb0=$(sed -n 's/^ *micro_batch = \([0-9]*\);.*/\1/p' $cfg | head -1)
  gb=$(sed -n 's/^ *global_batch = \([0-9]*\);.*/\1/p' $cfg | head -1)
  for n in ${GPUS//,/ }; do
    nodes=$(( (n + 7) / 8 ))
    mb=$mb0
    while [ $(( gb % (mb * n) )) -ne 0 ] && [ $mb -gt 1 ]; do mb=$((mb / 2)); done
    for stage in 1 2; do
      for red in ordered native; do
        j=$($ZT estimate -c $cfg --set train.micro_batch=$mb --set zero.stage=$stage --set zero.reduce=$red \
              --set checkpoint.every=0 --ranks $n --nodes $nodes --hw $HW --net $NET --json 2>&1 | tail -1)
        case "$j" in \{*) ;; *) echo "perf_table.sh: $m on $n: $j" >&2; exit 1 ;; esac
        /usr/bin/python3 -c '
import json, sys
j = json.loads(sys.argv[1]); m, n, nodes, mb, md = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6] == "1"
row = (m, n, nodes, j["stage"], j["reduce"], mb, j["step_s"], j["grad_exposed_s"], j["tokens_per_s"], 100 * j["efficiency"], j["fixed_step_s"])
if md: print("| %s | %d | %d | %d | %s | %d | %.3f | %.3f | %.0f | %.0f%% | %.3f |" % row)
else: print("%-10s %5d %5d %5d %8s %5d %10.3f %12.3f %12.0f %6.0f%% %12.3f" % row)' "$j" $m $n $nodes $mb $MD
      done
    done
  done
done
