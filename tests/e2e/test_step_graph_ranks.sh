#!/usr/bin/env bash
# test: long
# Step graphs on several ranks beyond tests/e2e/test_step_graph.sh (make test-long): each run with train.cuda_graph
# = true gives the per-step losses and params_hash of the same run without it, most steps replayed:
#  - graph_ranks_2_stage1_fp16_overflow  stage 1, fp16, an injected overflow at step 9 (that step runs as calls);
#  - graph_ranks_2_native_buckets        fp32, the native reduction (rooted reduces), 0.01 MB buckets (many, the
#                                        ring slots reused: buckets absorbed where their slot is wanted);
#  - graph_ranks_2_stage0_accum          stage 0 with gradient accumulation (2 micro-batches a rank);
#  - graph_stage3_llama_4_ranks          Llama at stage 3 on 4 ranks (the gathers of 4 owners);
#  - graph_stage3_2_ranks_eval_between   stage 3 with evaluation, sampling and checkpoints between steps.
set -u
cd "$(dirname "$0")/../.."
. tests/helpers/lib.sh
need_tiny_data
. tests/helpers/graph_pair.sh
ZTRAIN_TEST_OVERFLOW_STEP=9 pair graph_ranks_2_stage1_fp16_overflow 2 6 --set train.steps=16 --set precision=fp16 --set zero.stage=1
pair graph_ranks_2_native_buckets 2 8 --set precision=fp32 --set zero.reduce=native --set zero.bucket_mb=0.01
pair graph_ranks_2_stage0_accum 2 8 --set precision=bf16 --set zero.stage=0 --set train.global_batch=8
pair graph_stage3_llama_4_ranks 4 8 -c inputs/llama-tiny.cfg --set precision=bf16 --set zero.stage=3 \
  --set train.global_batch=8
pair graph_stage3_2_ranks_eval_between 2 1 --set precision=bf16 --set zero.stage=3 --set eval.every=5 \
  --set sample.every=7 --set train.steps=24 --set checkpoint.every=6
finish
