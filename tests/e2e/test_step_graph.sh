#!/usr/bin/env bash
# test: heavy
# A training step replayed as one CUDA graph (train.cuda_graph, core/optim/step_graph.h) on cudasim, where the host
# execution harness records a capture's launches, copies and memsets and replays them (cuda/hostexec):
#  - graph_same_*          the run with train.cuda_graph = true gives the per-step losses and params_hash of the
#                          same run without it (bf16, fp32, Llama, bf16 with the GELU recomputed, whose steps
#                          take an odd number of word buffers, ZeRO stage 0, LoRA, QLoRA, QLoRA with dropout (its
#                          masks' micro-batch index read on the device; graph_dropout_applies: it changes the
#                          result), loss masks (a fine-tuning shard of prompts and responses; the masked LM, an
#                          encoder: the d(loss) scale, which follows each step's count of targets, is read from the
#                          device), fp16 with an injected overflow: its step key
#                          differs, so that step runs as calls and is skipped), and replayed most steps
#                          (results.json graph_replays);
#  - graph_eval_between    evaluation, sampling and checkpoints between steps (other forwards, the backend's state
#                          touched) send a step back to tracing; the results stay those of the run without graphs;
#  - graph_resume          6 of 12 steps with graphs, stopped, resumed with graphs: the straight run without them;
#  - graph_ranks_*         several ranks (the communicator's operations recorded with the capture, iface/backend.h's
#                          host_call): 2 ranks bf16 (ZeRO-2, 2-byte wire) and QLoRA with dropout (the same masks as on
#                          1 rank) give the bits of the 1-rank run without graphs, most steps replayed;
#  - graph_resume_2_to_1_rank  6 steps on 2 ranks with graphs, resumed on 1 rank with graphs: the straight run;
#  - graph_stage3_2_ranks  stage 3 (the layers' gathers captured too) on 2 ranks: the 1-rank stage-2 run;
#  (more rank counts, stages and reductions: test_step_graph_ranks.sh, make test-long)
#  - graph_not_on_offload  the optimizer offloaded (a host update inside the step): no graph, results unchanged;
#  - graph_config          train.cuda_graph is a boolean.
set -u
cd "$(dirname "$0")/../.."
. tests/helpers/lib.sh
need_tiny_data
. tests/helpers/graph_pair.sh
pair graph_same_bf16 1 8 --set precision=bf16
pair graph_same_fp32 1 8 --set precision=fp32
pair graph_same_llama_bf16 1 8 -c inputs/llama-tiny.cfg --set precision=bf16
pair graph_same_recompute_gelu 1 8 --set precision=bf16 --set train.recompute=gelu
pair graph_same_stage0 1 8 --set precision=bf16 --set zero.stage=0
# LoRA (no dropout) and QLoRA on a base the cpu trained for 6 steps
run_named lbase 1 --set device=cpu --set train.steps=6 --set checkpoint.every=6 ||
  fail "graph_lora: the base run failed"
lora="--set lora.enabled=true --set lora.rank=4 --set lora.alpha=8 --set lora.targets=all
      --set lora.base=$TMP/g/lbase/checkpoints/step_00000006.h5"
pair graph_same_lora 1 8 --set precision=bf16 $lora
pair graph_same_qlora 1 8 --set precision=bf16 $lora --set lora.quant=nf4_dq
# LoRA dropout: the masks' micro-batch index is uploaded with the step's rows, so the slot calls repeat
qdrop="$lora --set lora.quant=nf4_dq --set lora.dropout=0.1"
pair graph_same_qlora_dropout 1 8 --set precision=bf16 $qdrop
if [ "$(run_sig $TMP/g/graph_same_qlora_dropout-eager | tail -1)" != "$(run_sig $TMP/g/graph_same_qlora-eager | tail -1)" ]; then
  pass "graph_dropout_applies (the dropout run's params_hash differs from the run without dropout)"
else fail "graph_dropout_applies: lora.dropout = 0.1 gave the params_hash of no dropout"; fi
# loss masks: a step's d(loss) scale follows its count of targets (fine-tuning's prompts and padding, the masked
# LM's masks); read from the device, uploaded with the step's rows, so the slot calls repeat all the same
mkdir -p $TMP/sft
$PY - $TMP/sft <<'EOF'
import json, random, sys
d, rng = sys.argv[1], random.Random(5)
words = "alpha beta gamma delta river stone light tree cloud north south quiet swift green small".split()
lines = [" ".join(rng.choice(words) for _ in range(rng.randint(4, 12))) for _ in range(1500)]
open(d + "/corpus.txt", "w").write("\n".join(lines + [l.upper() for l in lines[:300]]) + "\n")
with open(d + "/train.jsonl", "w") as f:
    for l in lines[:96]:  # responses of different lengths: every step counts its own number of targets
        f.write(json.dumps({"prompt": "Upper: " + l, "response": l.upper()[: rng.randint(3, 40)]}) + "\n")
EOF
if $ZT prepare --input $TMP/sft/corpus.txt --vocab-size 300 --out-dir $TMP/sft/bpe > $TMP/sft_bpe.log 2>&1 &&
   $ZT prepare --sft --input $TMP/sft/train.jsonl --tokenizer $TMP/sft/bpe/tokenizer.zttok --seq-len 32 \
     --val-fraction 0.125 --out-dir $TMP/sft/data > $TMP/sft_prep.log 2>&1; then
  V=$($PY -c 'import struct,sys; print(struct.unpack("<III", open(sys.argv[1], "rb").read(20)[8:20])[2])' \
      $TMP/sft/data/train.bin)
  pair graph_same_loss_mask 1 8 --set precision=bf16 --set data.train=$TMP/sft/data/train.bin \
    --set data.val=$TMP/sft/data/val.bin --set model.vocab_size=$V
else fail "graph_same_loss_mask: prepare failed: $(tail -n1 $TMP/sft_bpe.log $TMP/sft_prep.log | tr '\n' ' ')"; fi
# the masked LM (an encoder; the masks' count changes the scale every step)
if "${ZT_PY:-.venv-ref/bin/python}" tests/helpers/make_mlm_corpus.py $TMP/mlmc > $TMP/mlm_vocab.txt 2>&1 &&
   $ZT prepare --mlm --seq-len 32 --input $TMP/mlmc/corpus.jsonl --tokenizer $TMP/mlmc/tokenizer.json \
     --out-dir $TMP/mlmc/data > $TMP/mlm_prep.log 2>&1; then
  pair graph_same_mlm 1 8 --set precision=bf16 --set model.family=bert --set model.vocab_size=$(tail -n1 $TMP/mlm_vocab.txt) \
    --set model.sep_id=3 --set mlm.mask_id=4 --set mlm.cls_id=2 --set data.train=$TMP/mlmc/data/train.bin \
    --set data.val=$TMP/mlmc/data/val.bin
else fail "graph_same_mlm: the corpus or prepare failed: $(tail -n1 $TMP/mlm_vocab.txt $TMP/mlm_prep.log | tr '\n' ' ')"; fi
ZTRAIN_TEST_OVERFLOW_STEP=9 pair graph_same_fp16_overflow 1 6 --set train.steps=16 --set precision=fp16
if grep -q "step 9: fp16 gradients overflowed" $TMP/graph_same_fp16_overflow-graph.log; then
  pass "graph_fp16_overflow_skipped (the injected overflow at step 9 skipped with graphs on too)"
else
  fail "graph_fp16_overflow_skipped: $(grep -m1 overflow $TMP/graph_same_fp16_overflow-graph.log)"
fi
pair graph_eval_between 1 1 --set precision=bf16 --set eval.every=5 --set sample.every=7 --set train.steps=24 \
  --set checkpoint.every=6
# stopped after 6 steps and resumed with graphs: the run without graphs, straight
run_named graph_resume 1 --set precision=bf16 --set train.cuda_graph=true --set checkpoint.every=6 --stop-after 6 &&
  run_named graph_resume 1 --set precision=bf16 --set train.cuda_graph=true --set checkpoint.every=6 --resume auto &&
  compare_runs $TMP/g/graph_resume $TMP/g/graph_same_bf16-eager graph_resume
# graphed NAME NP MIN REF ARGS...: the run with graphs on NP ranks against the run REF without them (1 rank, the same
# batches: the ordered reduction and every stage give the same bits); PASS when identical and at least MIN replays
graphed() {
  local name=$1 np=$2 min=$3 ref=$4; shift 4
  run_named $name $np "$@" --set train.cuda_graph=true || { fail "$name: the run with graphs failed"; return; }
  local a b rep
  a=$(run_sig $TMP/g/$ref-eager); b=$(run_sig $TMP/g/$name)
  rep=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1])).get("graph_replays", 0))' $TMP/g/$name/results.json)
  if [ -n "$a" ] && [ "$a" == "$b" ] && [ "$rep" -ge "$min" ]; then
    pass "$name ($(echo "$a" | grep -c '^[0-9]') per-step losses and params_hash identical to $ref without graphs on 1 rank; steps replayed: $rep)"
  else
    fail "$name: replays $rep (want >= $min); $(diff <(echo "$a") <(echo "$b") | head -4 | tr '\n' ' ')"
  fi
}
# several ranks: the communicator's operations are recorded with the capture and made at each replay
graphed graph_ranks_2_bf16 2 8 graph_same_bf16 --set precision=bf16
graphed graph_ranks_2_qlora_dropout 2 8 graph_same_qlora_dropout --set precision=bf16 $qdrop
# 6 steps on 2 ranks with graphs, resumed on 1 rank with graphs: the straight 1-rank run without them
run_named graph_resume_ranks 2 --set precision=bf16 --set train.cuda_graph=true --set checkpoint.every=6 --stop-after 6 &&
  run_named graph_resume_ranks 1 --set precision=bf16 --set train.cuda_graph=true --set checkpoint.every=6 --resume auto &&
  compare_runs $TMP/g/graph_resume_ranks $TMP/g/graph_same_bf16-eager graph_resume_2_to_1_rank
# stage 3: the layers' gathers (grouped point-to-point, one layer ahead) are captured with the step
graphed graph_stage3_2_ranks 2 8 graph_same_bf16 --set precision=bf16 --set zero.stage=3
pair graph_not_on_offload 2 none --set precision=bf16 --set zero.offload=optimizer
if grep -q "step graph:" $TMP/graph_not_on_offload-graph.log; then fail "graph_not_on_offload: a step graph line"; fi
out=$($ZT train $common --set run.name=bad --set train.cuda_graph=maybe 2>&1); rc=$?
if [ $rc -eq 2 ] && echo "$out" | grep -q "train.cuda_graph"; then
  pass "graph_config (exit 2: $(echo "$out" | grep -m1 error))"
else
  fail "graph_config: exit $rc: $(echo "$out" | tail -1)"
fi
finish
