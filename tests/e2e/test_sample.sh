#!/usr/bin/env bash
# Tests of `ztrain sample` and of samples during training (src/cmd/sample.c, src/core/model/sampler.c). The decode path itself
# (KV-cache logits == full forward, greedy == argmax, padded rows, top-k, sliding window) is checked
# by build/tests/test_decode (tests/unit/core/model/test_decode.c; tests/run.sh runs it).
# Here: determinism for a seed (and a different seed gives different tokens), 2 ranks == 1 rank,
# greedy ignores the seed, a text prompt through a trained tokenizer, tokens/s reported, samples
# written during training, and bad input (exit 2, one line).
# Run from the repo root. One line per case: PASS name / FAIL name: reason.
set -u
cd "$(dirname "$0")/../.."
. tests/helpers/lib.sh

if [ ! -x "$ZT" ]; then fail "ztrain_binary: $ZT not found (build with make first)"; finish; fi

# ---- a tiny byte-level model (vocab 256, no tokenizer): 10 steps, one final checkpoint
need_tiny_data
$ZT train -c inputs/tiny.cfg --set train.steps=10 --set eval.every=0 --set checkpoint.every=0 \
  --set run.root=$TMP --set run.session=s --set run.name=byte > "$TMP/train.log" 2>&1
CK=$TMP/s/byte/checkpoints
if ! ls "$CK"/step_*.h5 > /dev/null 2>&1; then
  fail "setup: tiny training left no checkpoint in $CK: $(tail -3 "$TMP/train.log")"; finish
fi

# sample NAME ARGS... -> stdout in $TMP/NAME.out, stderr in $TMP/NAME.err, exit code in $rc
sample() { local n=$1; shift; $ZT sample --checkpoint "$CK" "$@" > "$TMP/$n.out" 2> "$TMP/$n.err"; rc=$?; }

sample a --prompt "10 20 30" --tokens 40 --seed 7 --top-k 0
sample b --prompt "10 20 30" --tokens 40 --seed 7 --top-k 0
sample c --prompt "10 20 30" --tokens 40 --seed 8 --top-k 0
na=$(wc -w < "$TMP/a.out")
if [ $rc -eq 0 ] && [ "$na" -eq 43 ] && cmp -s "$TMP/a.out" "$TMP/b.out" && ! cmp -s "$TMP/a.out" "$TMP/c.out"; then
  pass "seed_determinism (seed 7 twice: identical 3+40 ids; seed 8: different)"
else fail "seed_determinism: rc=$rc words=$na a='$(head -c 80 "$TMP/a.out")' b='$(head -c 80 "$TMP/b.out")' c='$(head -c 80 "$TMP/c.out")'"; fi

if grep -qE '[0-9.]+ tokens/s' "$TMP/a.err"; then pass "tokens_per_s ($(grep -oE '[0-9.]+ tokens/s' "$TMP/a.err"))"
else fail "tokens_per_s: stderr has no 'N tokens/s': $(cat "$TMP/a.err")"; fi

sample g1 --prompt "5" --tokens 30 --seed 1 --top-k 1
sample g2 --prompt "5" --tokens 30 --seed 2 --top-k 1 --temperature 3
if [ $rc -eq 0 ] && cmp -s "$TMP/g1.out" "$TMP/g2.out"; then pass "greedy_ignores_seed (top-k 1: same 30 ids for seeds 1 and 2)"
else fail "greedy_ignores_seed: '$(cat "$TMP/g1.out")' vs '$(cat "$TMP/g2.out")'"; fi

# directory (newest checkpoint) == the file itself; 2 ranks == 1 rank
f=$(ls "$CK"/step_*.h5 | tail -1)
$ZT sample --checkpoint "$f" --prompt "10 20 30" --tokens 40 --seed 7 --top-k 0 > "$TMP/file.out" 2>/dev/null
$MPIRUN -np 2 $ZT sample --checkpoint "$CK" --prompt "10 20 30" --tokens 40 --seed 7 --top-k 0 > "$TMP/np2.out" 2> "$TMP/np2.err"
rc=$?
if [ $rc -eq 0 ] && cmp -s "$TMP/a.out" "$TMP/file.out" && cmp -s "$TMP/a.out" "$TMP/np2.out"; then
  pass "ranks_and_paths (2 ranks print the same ids as 1; a checkpoint dir means its newest file)"
else fail "ranks_and_paths: rc=$rc np2='$(head -c 120 "$TMP/np2.out")' err='$(head -c 200 "$TMP/np2.err")'"; fi

# longer than block_size (64): the window slides
sample long --prompt "1" --tokens 150 --seed 3
if [ $rc -eq 0 ] && [ "$(wc -w < "$TMP/long.out")" -eq 151 ]; then pass "past_block_size (150 tokens with block_size 64: the window slides)"
else fail "past_block_size: rc=$rc $(head -c 200 "$TMP/long.err")"; fi

# ---- a model with a trained tokenizer: text prompts, samples during training
cat /usr/share/common-licenses/GPL-3 /usr/share/common-licenses/Apache-2.0 > "$TMP/corpus.txt"
$ZT prepare --input "$TMP/corpus.txt" --vocab-size 320 --out-dir "$TMP/bpe" --val-fraction 0.1 > "$TMP/prep.log" 2>&1 \
  || { fail "setup_bpe: prepare failed: $(tail -2 "$TMP/prep.log")"; finish; }
$ZT train -c inputs/tiny.cfg --set model.vocab_size=320 --set data.train="$TMP/bpe/train.bin" --set data.val="$TMP/bpe/val.bin" \
  --set data.tokenizer="$TMP/bpe/tokenizer.zttok" --set train.steps=10 --set eval.every=0 --set checkpoint.every=0 \
  --set sample.every=5 --set sample.tokens=16 --set sample.prompt="the Program" \
  --set run.root=$TMP --set run.session=s --set run.name=bpe > "$TMP/train-bpe.log" 2>&1
CKB=$TMP/s/bpe/checkpoints
if ls "$CKB"/step_*.h5 > /dev/null 2>&1; then
  $ZT sample --checkpoint "$CKB" --prompt "This License" --tokens 30 --seed 5 > "$TMP/t.out" 2> "$TMP/t.err"; rc=$?
  if [ $rc -eq 0 ] && [[ "$(head -c 12 "$TMP/t.out")" == "This License" ]] && [ "$(wc -c < "$TMP/t.out")" -gt 20 ]; then
    pass "text_prompt (checkpoint config's data.tokenizer: '$(head -c 60 "$TMP/t.out" | tr '\n' ' ')...')"
  else fail "text_prompt: rc=$rc out='$(head -c 100 "$TMP/t.out")' err='$(head -c 200 "$TMP/t.err")'"; fi
  # the empty prompt starts from <|endoftext|>
  $ZT sample --checkpoint "$CKB" --prompt "" --tokens 10 --seed 5 > "$TMP/e.out" 2> "$TMP/e.err"; rc=$?
  if [ $rc -eq 0 ]; then pass "empty_prompt (starts from <|endoftext|>)"; else fail "empty_prompt: $(cat "$TMP/e.err")"; fi
  # tokenizer "none": ids in, ids out
  $ZT sample --checkpoint "$CKB" --tokenizer none --prompt "300 301" --tokens 5 > "$TMP/n.out" 2>/dev/null; rc=$?
  if [ $rc -eq 0 ] && [ "$(wc -w < "$TMP/n.out")" -eq 7 ]; then pass "tokenizer_none (ids in, ids out)"
  else fail "tokenizer_none: rc=$rc '$(cat "$TMP/n.out")'"; fi
else
  fail "setup_bpe_train: no checkpoint: $(tail -3 "$TMP/train-bpe.log")"
fi
S=$TMP/s/bpe/samples.txt
if [ -f "$S" ] && grep -q '^=== step 5$' "$S" && grep -q '^=== step 10$' "$S" && grep -q '^the Program' "$S" \
   && grep -q '^sample at step 5 ' "$TMP/train-bpe.log"; then
  pass "samples_during_training (steps 5 and 10 in samples.txt and the log, starting with the prompt)"
else fail "samples_during_training: $( [ -f "$S" ] && head -c 200 "$S" || echo "no $S (train.c hook missing?)")"; fi

# ---- bad input: exit 2 and one line naming what is wrong
check_err() { # name expected-substring args...
  local name=$1 want=$2; shift 2
  out=$($ZT sample "$@" 2>&1 >/dev/null); rc=$?
  if [ $rc -eq 2 ] && echo "$out" | grep -qF -- "$want" && [ "$(echo "$out" | wc -l)" -eq 1 ]; then pass "error_$name ($out)"
  else fail "error_$name: rc=$rc out=$out (want exit 2 and '$want')"; fi
}
check_err missing_checkpoint "$TMP/nope.h5" --checkpoint "$TMP/nope.h5"
mkdir -p "$TMP/empty"
check_err empty_dir "no complete checkpoint" --checkpoint "$TMP/empty"
check_err not_a_checkpoint "corpus.txt" --checkpoint "$TMP/corpus.txt"
check_err no_checkpoint_option "--checkpoint" --prompt "1 2"
check_err tokenizer_vocab "tokenizer $TMP/bpe/tokenizer.zttok has vocab 320 but the model has 256" \
  --checkpoint "$CK" --tokenizer "$TMP/bpe/tokenizer.zttok" --prompt "x"
check_err missing_tokenizer "$TMP/nope.zttok" --checkpoint "$CK" --tokenizer "$TMP/nope.zttok"
check_err id_out_of_range "[0, 256)" --checkpoint "$CK" --prompt "1 256"
check_err bad_top_k "--top-k -1" --checkpoint "$CK" --top-k -1
check_err bad_tokens "--tokens 0" --checkpoint "$CK" --tokens 0
check_err bad_temperature "--temperature abc" --checkpoint "$CK" --temperature abc
check_err unknown_option "unknown option '--bogus'" --checkpoint "$CK" --bogus
# the same errors end every rank: 2 ranks, exit 2, one line
# (mpirun adds its own banner; ztrain's lines are those starting "ztrain:")
$MPIRUN -np 2 $ZT sample --checkpoint "$CK" --tokenizer "$TMP/bpe/tokenizer.zttok" > /dev/null 2> "$TMP/np2err.log"; rc=$?
out=$(grep '^ztrain' "$TMP/np2err.log")
if [ $rc -eq 2 ] && [ "$(echo "$out" | wc -l)" -eq 1 ] && echo "$out" | grep -q "has vocab 320"; then pass "error_two_ranks (exit 2, one line from 2 ranks)"
else fail "error_two_ranks: rc=$rc out=$out"; fi
finish
