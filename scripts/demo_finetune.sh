#!/usr/bin/env bash
# demo_finetune.sh — what `make demo-finetune` runs after installing packages, building ./ztrain and
# making .venv-ref (transformers, peft):
#   1. the corpus and tokenizer of `make demo` (scripts/demo_corpus.sh: reused when data/demo/ has
#      them), and with that tokenizer (./ztrain prepare --tokenizer) token shards of the Old Testament
#      (books 01-39 -> data/demo/ot/) and of the New Testament (books 40-66 -> data/demo/nt/); the last
#      5% of every book is validation;
#   2. a "pretrained" base: mpirun -np 2 ./ztrain train -c inputs/finetune_base.cfg (4.2M parameters)
#      on the Old Testament only, ./ztrain export -> transformers GPT2LMHeadModel.from_pretrained +
#      save_pretrained -> ./ztrain import: base.h5, a GPT-2 saved by transformers;
#   3. LoRA fine-tuning of that frozen base on the New Testament (inputs/finetune_lora.cfg: rank 8,
#      alpha 16, every linear layer) at 1 rank and at 2 ranks (mpirun -np 2): the two runs must be
#      bit-identical (every step's loss, params_hash), and the NT validation loss falls from the
#      base's (./ztrain eval of base.h5) to the fine-tuned model's (./ztrain eval merges the adapters);
#   4. ./ztrain export --merge -> transformers: its loss on the validation windows ztrain eval scores,
#      next to ztrain's; ./ztrain export (PEFT adapters) -> peft PeftModel.from_pretrained on the
#      transformers base: logits equal to the merged model's within 1e-4; a short sample from the base
#      and from the fine-tuned model;
#   5. a summary: validation losses, times, parameters trained vs total.
# Everything of a run lands in runs/finetune/<date-time>/ (base/, lora-1rank/, lora-2ranks/: ztrain run
# directories; base_hf/, base.h5, merged/, adapters/). Exit status 1 if a check fails.
# Environment: FT_BASE_TIME_LIMIT (default 3:00) caps the base's training so a slow or busy machine
# still finishes (with a checkpoint); FT_TOKENS (default 40) tokens per sample.
set -euo pipefail
cd "$(dirname "$0")/.."

ZT=./ztrain
D=data/demo
PY=.venv-ref/bin/python
LIMIT=${FT_BASE_TIME_LIMIT:-3:00}
NTOK=${FT_TOKENS:-40}
PROMPT="And Jesus said"
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
say() { printf '\n== %s\n' "$*"; }
die() { echo "demo_finetune.sh: $*" >&2; exit 1; }
secs() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; } # seconds since $1
json() { sed -n "s/^ *\"$2\": \"*\([^\",]*\)\"*,*$/\1/p" "$1" | head -1; }      # a top-level value of results.json
evalloss() { sed -n 's/^val loss \([0-9.e+-]*\) .*/\1/p'; }
t0=$EPOCHREALTIME

[ -x "$ZT" ] || die "$ZT not found: run \`make demo-finetune\` (or \`make\`) first"
[ -x "$PY" ] || die "$PY not found: run scripts/setup-venv.sh (or \`make demo-finetune\`) first"

# ---- 1. corpus, tokenizer (shared with demo.sh), Old and New Testament shards
t=$EPOCHREALTIME
. scripts/demo_corpus.sh
demo_corpus
demo_tokenizer
for part in ot nt; do
  if [ "$part" = ot ]; then books=$(seq -w 1 39); else books=$(seq 40 66); fi
  # reused when present and made with the current tokenizer (prepare copies it into the directory)
  if [ ! -s "$D/$part/val.bin" ] || ! cmp -s "$D/tokenizer.zttok" "$D/$part/tokenizer.zttok"; then
    say "prepare: $( [ $part = ot ] && echo 'Old Testament (books 01-39)' || echo 'New Testament (books 40-66)') -> $D/$part/"
    mkdir -p "$D/$part"
    inputs=()
    for b in $books; do inputs+=(--input "$D/books/$b.txt"); done
    "$ZT" prepare --tokenizer "$D/tokenizer.zttok" "${inputs[@]}" --val-fraction 0.05 --eot-between-files \
      --out-dir "$D/$part" > "$D/$part/prepare.log.tmp" 2>&1 || { cat "$D/$part/prepare.log.tmp" >&2; exit 1; }
    mv "$D/$part/prepare.log.tmp" "$D/$part/prepare.log"
    cat "$D/$part/prepare.log"
  fi
done
tok_ot=$(sed -n 's/.*tokens written: train \([0-9]*\).*/\1/p' "$D/ot/prepare.log")
tok_nt=$(sed -n 's/.*tokens written: train \([0-9]*\).*/\1/p' "$D/nt/prepare.log")
t_data=$(secs "$t")

stamp=$(date +%Y%m%d-%H%M%S)
W=runs/finetune/$stamp
runset=(--set run.root=runs/finetune --set run.session="$stamp")

# ---- 2. the "pretrained" base
say "pretrain: mpirun -np 2 ./ztrain train -c inputs/finetune_base.cfg (Old Testament) --time-limit $LIMIT"
t=$EPOCHREALTIME
mpirun -np 2 --oversubscribe "$ZT" train -c inputs/finetune_base.cfg --time-limit "$LIMIT" "${runset[@]}" \
  --set run.name=base
[ -f "$W/base/results.json" ] || die "pretraining did not finish: no $W/base/results.json"
t_base=$(secs "$t")
base_ck=$W/base/checkpoints/$(cat "$W/base/checkpoints/latest")
base_steps=$(json "$W/base/results.json" steps)
base_params=$(json "$W/base/results.json" params)
base_val_ot=$(json "$W/base/results.json" final_val_loss)

say "base: ./ztrain export -> transformers from_pretrained + save_pretrained -> ./ztrain import"
t=$EPOCHREALTIME
"$ZT" export --checkpoint "$base_ck" --out "$W/base_export"
"$PY" scripts/demo_finetune.py resave "$W/base_export" "$W/base_hf"
"$ZT" import --safetensors "$W/base_hf" --out "$W/base.h5"
t_roundtrip=$(secs "$t")

# the imported base keeps ztrain's defaults for what is not the model: score the windows training scores
evalset=(--set train.seq_len=128 --set train.micro_batch=8 --set train.global_batch=8 --set eval.sequences=64)
say "eval: the base on the Old Testament's and the New Testament's validation windows"
t=$EPOCHREALTIME
base_val_ot_imp=$("$ZT" eval --checkpoint "$W/base.h5" "${evalset[@]}" --set data.val="$D/ot/val.bin" | tee /dev/stderr | evalloss)
base_val_nt=$("$ZT" eval --checkpoint "$W/base.h5" "${evalset[@]}" --set data.val="$D/nt/val.bin" | tee /dev/stderr | evalloss)
t_evalbase=$(secs "$t")

# ---- 3. LoRA on the New Testament, 1 rank and 2 ranks
lora=(-c inputs/finetune_lora.cfg --set lora.base="$W/base.h5" "${runset[@]}")
say "LoRA, 1 rank: ./ztrain train -c inputs/finetune_lora.cfg --set lora.base=$W/base.h5"
t=$EPOCHREALTIME
"$ZT" train "${lora[@]}" --set run.name=lora-1rank
t_lora1=$(secs "$t")
say "LoRA, 2 ranks: mpirun -np 2 ./ztrain train -c inputs/finetune_lora.cfg --set lora.base=$W/base.h5"
t=$EPOCHREALTIME
mpirun -np 2 --oversubscribe "$ZT" train "${lora[@]}" --set run.name=lora-2ranks
t_lora2=$(secs "$t")
for r in lora-1rank lora-2ranks; do
  [ -f "$W/$r/results.json" ] || die "LoRA training did not finish: no $W/$r/results.json"
done
say "1 rank vs 2 ranks"
/usr/bin/python3 scripts/demo_finetune.py compare "$W/lora-1rank" "$W/lora-2ranks" > "$W/compare.txt" 2>&1 || true
cat "$W/compare.txt"
same=$(sed -n 's/^RESULT identical=\([a-z]*\).*/\1/p' "$W/compare.txt")
lora_ck=$W/lora-1rank/checkpoints/$(cat "$W/lora-1rank/checkpoints/latest")
lora_steps=$(json "$W/lora-1rank/results.json" steps)
lora_train_val=$(json "$W/lora-1rank/results.json" final_val_loss)

say "eval: the fine-tuned model (./ztrain eval merges the adapters into the base)"
t=$EPOCHREALTIME
lora_val_nt=$("$ZT" eval --checkpoint "$lora_ck" --set data.val="$D/nt/val.bin" | tee /dev/stderr | evalloss)
lora_val_ot=$("$ZT" eval --checkpoint "$lora_ck" --set data.val="$D/ot/val.bin" | tee /dev/stderr | evalloss)

# ---- 4. exports checked by transformers and PEFT
say "export: --merge (GPT-2 for transformers) and adapters (PEFT)"
"$ZT" export --checkpoint "$lora_ck" --out "$W/merged" --merge
"$ZT" export --checkpoint "$lora_ck" --out "$W/adapters"
say "transformers and peft"
"$PY" scripts/demo_finetune.py check --merged "$W/merged" --adapters "$W/adapters" --base-hf "$W/base_hf" \
  --val "$D/nt/val.bin" --seq-len 128 --sequences 64 --ztrain-loss "$lora_val_nt" > "$W/check.txt" 2>&1 || true
cat "$W/check.txt"
ok=$(sed -n 's/^RESULT .*ok=\([a-z]*\).*/\1/p' "$W/check.txt")
res() { sed -n "s/^RESULT .*$1=\([^ ]*\).*/\1/p" "$W/check.txt"; }
trainable=$(res trainable)
t_check=$(secs "$t")

say "sample: \"$PROMPT\", $NTOK tokens (temperature 0.8, top-k 40, seed 1), base vs fine-tuned"
t=$EPOCHREALTIME
samp=(--prompt "$PROMPT" --tokens "$NTOK" --temperature 0.8 --top-k 40 --seed 1 --tokenizer "$D/tokenizer.zttok")
OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive} "$ZT" sample --checkpoint "$W/base.h5" "${samp[@]}" \
  > "$W/sample_base.txt" 2> /dev/null || echo "(sampling failed)" > "$W/sample_base.txt"
OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive} "$ZT" sample --checkpoint "$lora_ck" "${samp[@]}" \
  > "$W/sample_lora.txt" 2> /dev/null || echo "(sampling failed)" > "$W/sample_lora.txt"
t_sample=$(secs "$t")

# ---- 5. summary
f4() { [ -n "$1" ] && printf '%.4f' "$1" || printf '?'; }
total=$(secs "$t0")
say "fine-tuning demo done in $total s (run dir $W)"
printf '%-58s %s\n' "model: GPT-2 L4 C256 H4, vocab 4096, block 128" "$base_params parameters"
printf '%-58s %s\n' "pretraining: Old Testament, $base_steps steps x 16 x 128 tokens" "($tok_ot OT training tokens)"
printf '%-58s %s\n' "LoRA: New Testament, $lora_steps steps x 16 x 128 tokens" "($tok_nt NT training tokens)"
echo
printf '%-46s %12s %12s\n' "validation loss (nats/token, 64 x 128 tokens)" "OT val" "NT val"
printf '%-46s %12s %12s\n' "base, after pretraining (ztrain train)" "$(f4 "$base_val_ot")" ""
printf '%-46s %12s %12s\n' "base, saved by transformers (ztrain eval)" "$(f4 "$base_val_ot_imp")" "$(f4 "$base_val_nt")"
printf '%-46s %12s %12s\n' "LoRA fine-tuned on NT (ztrain eval)" "$(f4 "$lora_val_ot")" "$(f4 "$lora_val_nt")"
printf '%-46s %12s %12s\n' "  merged export in transformers" "" "$(f4 "$(res hf_loss)")"
printf '%-46s %12s %12s\n' "  adapters in peft on the transformers base" "" "$(f4 "$(res peft_loss)")"
echo
echo "NT validation loss: $(f4 "$base_val_nt") (base) -> $(f4 "$lora_val_nt") (LoRA), $(awk -v a="$base_val_nt" -v b="$lora_val_nt" 'BEGIN { printf "%+.4f", b - a }')"
echo "transformers vs ztrain eval:    relative difference $(res rel) (must be < 1e-5)"
echo "peft vs merged logits:          max abs difference $(res peft_maxdiff) (must be < 1e-4)"
echo "1 rank vs 2 ranks:              $( [ "$same" = yes ] && echo "bit-identical ($lora_steps per-step losses and params_hash)" || echo "DIFFERENT" )"
echo
printf '%-32s %14s %10s\n' "parameters" "trained" "total"
printf '%-32s %14s %10s\n' "pretraining (full)" "$base_params" "$base_params"
printf '%-32s %14s %10s\n' "LoRA r 8, all linear layers" "$trainable ($(awk -v a="$trainable" -v b="$base_params" 'BEGIN { printf "%.2f%%", 100 * a / b }'))" "$base_params"
echo
printf '%-44s %8s\n' "time (s)" ""
printf '%-44s %8s\n' "corpus, tokenizer, OT/NT shards" "$t_data"
printf '%-44s %8s\n' "pretraining, 2 ranks ($(json "$W/base/results.json" tokens_per_s | cut -d. -f1) tokens/s)" "$t_base"
printf '%-44s %8s\n' "export -> transformers -> import" "$t_roundtrip"
printf '%-44s %8s\n' "eval of the base (OT, NT)" "$t_evalbase"
printf '%-44s %8s\n' "LoRA, 1 rank ($(json "$W/lora-1rank/results.json" tokens_per_s | cut -d. -f1) tokens/s)" "$t_lora1"
printf '%-44s %8s\n' "LoRA, 2 ranks ($(json "$W/lora-2ranks/results.json" tokens_per_s | cut -d. -f1) tokens/s)" "$t_lora2"
printf '%-44s %8s\n' "eval, exports, transformers and peft checks" "$t_check"
printf '%-44s %8s\n' "samples" "$t_sample"
printf '%-44s %8s\n' "total" "$total"
echo
echo "sample of the base (\"$PROMPT\"):"
echo "  $(tr '\n' ' ' < "$W/sample_base.txt")"
echo "sample of the fine-tuned model:"
echo "  $(tr '\n' ' ' < "$W/sample_lora.txt")"
[ "$same" = yes ] && [ "$ok" = yes ] || { echo "demo_finetune.sh: a check failed (see above)" >&2; exit 1; }
