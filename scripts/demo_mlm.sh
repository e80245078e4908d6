#!/usr/bin/env bash
# demo_mlm.sh — what `make demo-mlm` runs: masked-LM pretraining of a small BERT on the demo corpus.
#   1. the corpus (scripts/demo_corpus.sh): the King James Bible, one file per book under data/demo/books/;
#   2. a 4096-token WordPiece tokenizer trained by Hugging Face tokenizers (scripts/train_wordpiece.py, the
#      reference venv) and `ztrain prepare --mlm --seq-len 128`: sequences framed [CLS] ... [SEP] under
#      data/demo-mlm/ (the last 5% of every book is validation);
#   3. mpirun -np 2 ./ztrain train -c inputs/demo-mlm.cfg: ~4M parameters, 400 steps, the masked-LM accuracy in
#      every metrics line and at every evaluation, under runs/demo-mlm/;
#   4. ./ztrain eval on the final checkpoint (the fixed masked validation set's loss and accuracy);
#   5. tools/session_table.py and tools/plot_session.py (mlm_accuracy.png) for the session.
# Environment: DEMO_TIME_LIMIT (default 8:00) caps the training; DEMO_NP (default 2) ranks; DEMO_STEPS (400).
set -euo pipefail
cd "$(dirname "$0")/.."

ZT=./ztrain
D=data/demo
M=data/demo-mlm
NP=${DEMO_NP:-2}
LIMIT=${DEMO_TIME_LIMIT:-8:00}
STEPS=${DEMO_STEPS:-400}
PYREF=${ZT_PY:-.venv-ref/bin/python}
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
t0=$(date +%s)
say() { printf '\n== %s\n' "$*"; }
[ -x "$ZT" ] || { echo "demo_mlm.sh: $ZT not found: run \`make demo-mlm\` (or \`make\`) first" >&2; exit 1; }
[ -x "$PYREF" ] || { echo "demo_mlm.sh: $PYREF not found: run scripts/setup-venv.sh (make demo-mlm does)" >&2; exit 1; }

. scripts/demo_corpus.sh
demo_corpus
if [ ! -s "$M/train.bin" ] || [ ! -s "$M/tokenizer.json" ]; then
  say "tokenizer: WordPiece, 4096 tokens (Hugging Face tokenizers) -> $M/tokenizer.json"
  mkdir -p "$M"
  "$PYREF" scripts/train_wordpiece.py "$M/tokenizer.json" 4096 "$D/kjv.txt"
  say "prepare --mlm: sequences of 128 tokens framed [CLS] ... [SEP]"
  inputs=()
  for f in "$D"/books/*.txt; do inputs+=(--input "$f"); done
  "$ZT" prepare --mlm --seq-len 128 "${inputs[@]}" --tokenizer "$M/tokenizer.json" --val-fraction 0.05 \
    --out-dir "$M" | tee "$M/prepare.log"
fi
V=$("$PYREF" -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["model"]["vocab"]))' "$M/tokenizer.json")

say "train: mpirun -np $NP ./ztrain train -c inputs/demo-mlm.cfg --time-limit $LIMIT"
name=bert-kjv-$(date +%Y%m%d-%H%M%S)
run=runs/demo-mlm/$name
mpirun -np "$NP" --oversubscribe "$ZT" train -c inputs/demo-mlm.cfg --time-limit "$LIMIT" --set run.name="$name" \
  --set model.vocab_size="$V" --set train.steps="$STEPS"
[ -f "$run/results.json" ] || { echo "demo_mlm.sh: training did not finish: no $run/results.json" >&2; exit 1; }

ck=$(ls "$run"/checkpoints/step_*.h5 | tail -1)
say "eval: ./ztrain eval --checkpoint $ck"
"$ZT" eval --checkpoint "$ck" | tee "$run/demo_eval.txt"

say "the session: tools/session_table.py runs/demo-mlm; tools/plot_session.py runs/demo-mlm"
tools/session_table.py runs/demo-mlm || true
tools/plot_session.py runs/demo-mlm || true
say "masked-LM accuracy at each evaluation (validation: the same masked positions every time)"
/usr/bin/python3 - "$run/metrics.jsonl" <<'PYEOF'
import json, sys
for r in map(json.loads, open(sys.argv[1])):
    if "val_mlm_acc" in r:
        print(f"step {r['step']:4d}  train loss {r['loss']:.4f}  train acc {r.get('mlm_acc', float('nan')):.4f}  "
              f"val loss {r['val_loss']:.4f}  val acc {r['val_mlm_acc']:.4f}")
PYEOF
say "demo-mlm done in $(( $(date +%s) - t0 )) s (run dir $run)"
