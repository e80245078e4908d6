#!/usr/bin/env bash
# demo.sh — what `make demo` runs after installing packages and building ./ztrain:
#   1. the corpus (scripts/demo_corpus.sh, shared with demo_finetune.sh): the King James Bible from
#      Debian's bible-kjv (`bible`), one verse per line, verse numbers removed, one file per book under
#      data/demo/books/ (66 files);
#   2. ./ztrain prepare (scripts/demo_corpus.sh): a 4096-token byte-level BPE tokenizer and token
#      shards; the last 5% of every book is validation, so validation covers the whole Bible, not
#      just Revelation;
#   3. mpirun -np 2 ./ztrain train -c inputs/demo.cfg: ~9M parameters, ZeRO-2, progress bar,
#      evaluation, samples and checkpoints every 50 steps, under runs/demo/;
#   4. ./ztrain sample from the final checkpoint: "And God said", 200 tokens;
#   5. a summary: validation loss next to the unigram baseline, the sample, the time taken.
# Environment: DEMO_TIME_LIMIT (default 6:00) caps the training so a slow or busy machine still
# finishes (with a checkpoint); DEMO_NP (default 2) ranks; DEMO_TOKENS (default 200).
set -euo pipefail
cd "$(dirname "$0")/.."

ZT=./ztrain
D=data/demo
NP=${DEMO_NP:-2}
LIMIT=${DEMO_TIME_LIMIT:-6:00}
NTOK=${DEMO_TOKENS:-200}
PROMPT="And God said"
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
t0=$(date +%s)
say() { printf '\n== %s\n' "$*"; }

[ -x "$ZT" ] || { echo "demo.sh: $ZT not found: run \`make demo\` (or \`make\`) first" >&2; exit 1; }

# ---- 1. corpus and 2. tokenizer and shards (shared with demo_finetune.sh; reused when complete)
. scripts/demo_corpus.sh
demo_corpus
demo_tokenizer

# ---- 3. training on $NP ranks
say "train: mpirun -np $NP ./ztrain train -c inputs/demo.cfg --time-limit $LIMIT"
# a fresh run name each time, so the run directory is known (and the bar stays on the terminal)
name=kjv-$(date +%Y%m%d-%H%M%S)
run=runs/demo/$name
mpirun -np "$NP" --oversubscribe "$ZT" train -c inputs/demo.cfg --time-limit "$LIMIT" --set run.name="$name"
[ -f "$run/results.json" ] || { echo "demo.sh: training did not finish: no $run/results.json" >&2; exit 1; }

# ---- 4. sampling from the final checkpoint
say "sample: ./ztrain sample --checkpoint $run/checkpoints --prompt \"$PROMPT\" --tokens $NTOK"
# decoding runs many tiny parallel regions per token: passive waiting keeps idle OpenMP threads
# from spinning against the working one (measured 3-10x faster on 2 busy shared cores)
OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive} "$ZT" sample --checkpoint "$run/checkpoints" --prompt "$PROMPT" \
  --tokens "$NTOK" --temperature 0.8 --top-k 40 --seed 1 2> "$run/demo_sample.err" | tee "$run/demo_sample.txt"
cat "$run/demo_sample.err" >&2

# ---- 5. summary
val=$(sed -n 's/.*"final_val_loss": \([0-9.e+-]*\),.*/\1/p' "$run/results.json" | head -1)
[ -n "$val" ] && val=$(printf "%.4f" "$val")
steps=$(sed -n 's/.*"steps": \([0-9]*\),.*/\1/p' "$run/results.json" | head -1)
tps=$(grep -oE '[0-9.]+ tokens/s' "$run/demo_sample.err" | tail -1)
say "demo done in $(( $(date +%s) - t0 )) s (run dir $run)"
echo "steps trained:        $steps (of $(sed -n 's/^ *steps = \([0-9]*\);.*/\1/p' inputs/demo.cfg | head -1))"
echo "validation loss:      $val nats/token"
echo "unigram baseline:     $baseline nats/token (predicting every token by its training frequency)"
echo "sampling speed:       $tps"
echo "sample (\"$PROMPT\", $NTOK tokens, temperature 0.8, top-k 40):"
echo "----------------------------------------------------------------------"
cat "$run/demo_sample.txt"
echo "----------------------------------------------------------------------"
