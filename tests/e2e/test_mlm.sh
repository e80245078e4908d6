#!/usr/bin/env bash
# Masked-LM pretraining end to end (model.family = bert / roberta, docs/mlm.md) on a small grammar corpus with a
# WordPiece tokenizer made by Hugging Face tokenizers (tests/helpers/make_mlm_corpus.py), framed by
# `ztrain prepare --mlm`:
#  - 1, 2 and 4 ranks bit-identical (per-step losses, masked-LM accuracies — so the masks — and params_hash), fp32
#    and bf16; ZeRO stage 3 on 2 ranks == stage 2 on 1; train.recompute gelu and layer == none; RoBERTa (positions
#    from pad_id + 1, one token type) 1 == 2;
#  - resume: 4 steps on 1 rank, then --resume auto on 2 ranks == the uninterrupted run;
#  - devsim gives the cpu backend's bits; cudasim (the CUDA kernels under the harness) is bit-identical on 1 and 2
#    ranks and within 1e-5 of the cpu losses;
#  - metrics.jsonl has mlm_acc every step and val_mlm_acc at evaluations; `ztrain eval` prints the same validation
#    loss and accuracy as the run's last evaluation; tools/session_table.py shows it, plot_session.py draws it;
#  - data.stream (tokenized and framed as read) == the shard prepare --mlm writes, and resumes on another rank count;
#  - errors (one line, exit 2): no mlm.mask_id, sampling an encoder, sequences of another length, a streamed
#    tokenizer without [CLS]/[SEP];
#  - ZT_LONG=1: 300 steps, the validation accuracy rises from the most frequent word's share.
set -u
cd "$(dirname "$0")/../.."
. tests/helpers/lib.sh
C=$TMP/corpus
"${ZT_PY:-.venv-ref/bin/python}" tests/helpers/make_mlm_corpus.py $C > $TMP/vocab.txt 2>&1 || { fail "mlm_corpus: $(tail -1 $TMP/vocab.txt)"; finish; }
if $ZT prepare --mlm --seq-len 32 --input $C/corpus.jsonl --tokenizer $C/tokenizer.json --out-dir $C/data > $TMP/prep.log 2>&1; then
  pass "mlm_prepare ($(grep -m1 '^mlm:' $TMP/prep.log | cut -c1-100))"
else fail "mlm_prepare: $(tail -1 $TMP/prep.log)"; finish; fi
V=$(cat $TMP/vocab.txt | tail -1)
bert="--set model.family=bert --set model.vocab_size=$V --set model.sep_id=3 --set mlm.mask_id=4 --set mlm.cls_id=2"
common="-c inputs/tiny.cfg $bert --set data.train=$C/data/train.bin --set data.val=$C/data/val.bin
        --set train.micro_batch=2 --set train.global_batch=8 --set train.steps=8 --set train.warmup_steps=2
        --set train.lr=2e-3 --set model.init_std=0.1 --set train.log_every=1 --set eval.every=4 --set eval.sequences=12
        --set checkpoint.every=4 --set run.root=$TMP --set run.session=mlm"
d=$TMP/mlm
run() { run_named "$@" || fail "run_$1: exit $? ($(grep -m1 error $TMP/$1.log || tail -1 $TMP/$1.log))"; }
# per-step mlm_acc and val_mlm_acc of a run (the masks' fingerprint next to the losses)
accs() { $PY -c 'import json,sys; [print(r["step"], r.get("mlm_acc"), r.get("val_mlm_acc")) for r in map(json.loads, open(sys.argv[1]))]' "$1/metrics.jsonl"; }
same_accs() {
  if [ -n "$(accs $1)" ] && [ "$(accs $1)" == "$(accs $2)" ]; then pass "$3 ($(accs $1 | wc -l) steps' mlm_acc equal)"
  else fail "$3: $(diff <(accs $1) <(accs $2) | head -3 | tr '\n' ' ')"; fi
}
for np in 1 2 4; do run f$np $np; done
compare_runs $d/f2 $d/f1 mlm_fp32_2_ranks
compare_runs $d/f4 $d/f1 mlm_fp32_4_ranks
same_accs $d/f4 $d/f1 mlm_masks_4_ranks
for np in 1 2; do run b$np $np --set precision=bf16; done
compare_runs $d/b2 $d/b1 mlm_bf16_2_ranks
run z3 2 --set zero.stage=3 && compare_runs $d/z3 $d/f1 mlm_stage3_2_ranks
for rc in gelu layer; do run rc_$rc 1 --set train.recompute=$rc && compare_runs $d/rc_$rc $d/f1 mlm_recompute_$rc; done
run r 1 --stop-after 4 && run r 2 --resume auto && compare_runs $d/r $d/f1 mlm_resume_1_then_2_ranks
run ds 1 --set device=devsim && compare_runs $d/ds $d/f1 mlm_devsim_equals_cpu
run cs1 1 --set device=cudasim && run cs2 2 --set device=cudasim && compare_runs $d/cs2 $d/cs1 mlm_cudasim_1_vs_2_ranks
worst=$(loss_rel_diff $d/f1 $d/cs1 8)
if $PY -c "import sys; sys.exit(not float(sys.argv[1]) <= 1e-5)" "${worst:-nan}"; then
  pass "mlm_cudasim_vs_cpu (8 losses, max rel diff $worst <= 1e-5)"
else fail "mlm_cudasim_vs_cpu: max rel diff ${worst:-?}"; fi
rob="--set model.family=roberta --set model.pad_id=0 --set model.sep_id=-1 --set mlm.sep_id=3"
run ro1 1 $rob && run ro2 2 $rob && compare_runs $d/ro2 $d/ro1 mlm_roberta_2_ranks
# data.stream: the corpus tokenized and framed as read == the shard prepare --mlm writes (read in order), and a
# streamed run resumed on another rank count
$ZT prepare --mlm --seq-len 32 --input $C/corpus.jsonl --tokenizer $C/tokenizer.json --val-fraction 0 --out-dir $C/all \
  > $TMP/prep_all.log 2>&1 || fail "mlm_prepare_all: $(tail -1 $TMP/prep_all.log)"
inorder="--set data.shuffle=false --set data.val= --set eval.every=0"
stream="$inorder --set data.stream=true --set data.train=$C/corpus.jsonl --set data.tokenizer=$C/tokenizer.json"
run sh1 1 $inorder --set data.train=$C/all/train.bin && run st1 1 $stream && compare_runs $d/st1 $d/sh1 mlm_stream_equals_prepared
run st2 2 $stream --stop-after 4 && run st2 1 $stream --resume auto && compare_runs $d/st2 $d/st1 mlm_stream_resume_2_then_1_rank
# the metrics: mlm_acc on every step, val_mlm_acc at the evaluations (steps 4, 8)
n_acc=$(grep -c '"mlm_acc"' $d/f1/metrics.jsonl); n_val=$(grep -c '"val_mlm_acc"' $d/f1/metrics.jsonl)
if [ "$n_acc" = 8 ] && [ "$n_val" = 2 ]; then pass "mlm_metrics (mlm_acc on $n_acc steps, val_mlm_acc on $n_val)"
else fail "mlm_metrics: mlm_acc on $n_acc of 8 steps, val_mlm_acc on $n_val of 2"; fi
# ztrain eval on the last checkpoint: the run's last validation loss and accuracy
ck=$(ls $d/f1/checkpoints/*.h5 | tail -1)
out=$($ZT eval --checkpoint $ck 2>&1)
want=$($PY -c 'import json,sys; r=json.load(open(sys.argv[1])); print("%.4f %.4f" % (r["final_val_loss"], r["final_val_mlm_acc"]))' $d/f1/results.json)
got=$(echo "$out" | sed -n 's/.*val loss \([0-9.e+-]*\), val MLM accuracy \([0-9.]*\).*/\1 \2/p' | awk '{printf "%.4f %.4f", $1, $2}')
if [ -n "$got" ] && [ "$got" == "$want" ]; then pass "mlm_eval (ztrain eval: $(echo "$out" | grep -m1 'MLM accuracy' | cut -c1-80))"
else fail "mlm_eval: eval printed '$got', the run's last evaluation '$want' ($(echo "$out" | tail -1))"; fi
# the tools: the table's accuracy column, the accuracy plot
if tools/session_table.py $d > $TMP/table.txt 2>&1 && grep -q mlm_acc $TMP/table.txt; then pass "mlm_session_table (mlm_acc column)"
else fail "mlm_session_table: $(tail -2 $TMP/table.txt)"; fi
if $PY -c "import matplotlib" 2>/dev/null; then
  if tools/plot_session.py $d --out $TMP/plots > $TMP/plot.txt 2>&1 && [ -s $TMP/plots/mlm_accuracy.png ]; then
    pass "mlm_plot (mlm_accuracy.png, $(stat -c %s $TMP/plots/mlm_accuracy.png) bytes)"
  else fail "mlm_plot: $(tail -2 $TMP/plot.txt)"; fi
fi
# errors: one line naming the key or file, exit 2
err_case() { # name expected-pattern args...
  local name=$1 pat=$2; shift 2
  $ZT train $common --set run.name=e_$name "$@" > $TMP/e_$name.log 2>&1; local rc=$?
  if [ $rc -eq 2 ] && grep -q "$pat" $TMP/e_$name.log && [ ! -d $d/e_$name ]; then pass "mlm_error_$name ($(grep -m1 "$pat" $TMP/e_$name.log | cut -c1-90))"
  else fail "mlm_error_$name: exit $rc, $(tail -1 $TMP/e_$name.log)"; fi
}
$PY -c 'import json,sys; t=json.load(open(sys.argv[1])); t["post_processor"]=None; json.dump(t, open(sys.argv[2], "w"))' \
  $C/tokenizer.json $TMP/plain.json # the tokenizer without its [CLS] $A [SEP] post-processor
err_case no_mask_id "mlm.mask_id" --set mlm.mask_id=-1
err_case sampling "sample.every" --set sample.every=2
err_case seq_len "train.seq_len must" --set train.seq_len=16
err_case stream_no_cls "needs the tokenizer's \[CLS\]" --set data.stream=true --set data.train=$C/corpus.jsonl \
  --set data.tokenizer=$TMP/plain.json
$ZT sample --checkpoint $ck --prompt "x" > $TMP/s.log 2>&1; rc=$?
if [ $rc -eq 2 ] && grep -q "encoder" $TMP/s.log; then pass "mlm_error_sample_cmd ($(grep -m1 encoder $TMP/s.log | cut -c1-90))"
else fail "mlm_error_sample_cmd: exit $rc, $(tail -1 $TMP/s.log)"; fi
if [ "${ZT_LONG:-0}" = 1 ]; then # the accuracy rises: 300 steps
  run long 1 --set train.steps=300 --set train.warmup_steps=20 --set train.micro_batch=8 --set train.global_batch=16 \
    --set eval.every=100 --set checkpoint.every=0 --set train.weight_decay=0.01 --set train.log_every=10
  first=$($PY -c 'import json,sys; v=[r["val_mlm_acc"] for r in map(json.loads, open(sys.argv[1])) if "val_mlm_acc" in r]; print(v[0], v[-1])' $d/long/metrics.jsonl)
  if $PY -c "import sys; a, b = map(float, sys.argv[1:]); sys.exit(not b > a + 0.05)" $first; then pass "mlm_accuracy_rises (val accuracy $first at steps 100, 300)"
  else fail "mlm_accuracy_rises: val accuracy $first"; fi
fi
finish
