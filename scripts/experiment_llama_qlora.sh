#!/usr/bin/env bash
# experiment_llama_qlora.sh — the workload's own experiment on a small Llama: train the base
# (inputs/llama-small.cfg, 100 steps), then QLoRA-fine-tune it (inputs/llama-small-qlora.cfg: NF4 double-quantised
# base, r 8 on all seven modules) on 1 and 2 ranks through tools/experiment.sh, which writes the session's table
# (time, tokens/s, speedup, efficiency, final loss, bit-identical) and plots; they are copied to
# docs/results/llama-qlora/. Run after `make`; about two minutes on 2 cores.
set -eu
cd "$(dirname "$0")/.."
[ -f data/tiny/train.bin ] || /usr/bin/python3 tests/helpers/make_data.py data/tiny 256 40000 > /dev/null
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
base=runs/llama-small/base/checkpoints/step_00000100.h5
if [ ! -f "$base" ]; then
  rm -rf runs/llama-small/base
  ./ztrain train -c inputs/llama-small.cfg
fi
session=llama-qlora-$(date +%Y%m%d-%H%M%S)
tools/experiment.sh -c inputs/llama-small-qlora.cfg --ranks 1,2 --session "$session" --set lora.base="$base"
mkdir -p docs/results/llama-qlora
/usr/bin/python3 tools/session_table.py runs/"$session" > docs/results/llama-qlora/table.txt
cp runs/"$session"/*.png docs/results/llama-qlora/
echo "experiment_llama_qlora: runs/$session, table and plots in docs/results/llama-qlora/"
