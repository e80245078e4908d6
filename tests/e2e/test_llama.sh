#!/usr/bin/env bash
# The Llama family end to end on the tiny data (model.family = llama: RMSNorm, rotary positions, SwiGLU,
# grouped-query attention with 2 key/value heads for 4 query heads, an untied LM head):
#  - ordered reduction: 1, 2 and 4 ranks bit-identical (per-step losses and params_hash), fp32 and bf16;
#  - resume: 5 steps on 1 rank, then --resume auto on 2 ranks == the uninterrupted run;
#  - the device backends: devsim gives the cpu backend's bits; cudasim (the CUDA kernels under the harness) stays
#    within 1e-5 of the cpu losses and is bit-identical on 1 and 2 ranks;
#  - QLoRA (nf4_dq, dropout) with PEFT-named targets on a Llama base: 1 rank == 2 ranks (ZeRO stages 0, 1, 2) ==
#    a run resumed on another rank count; eval;
#  - sampling with the KV cache (greedy twice: the same tokens);
#  - bad descriptions: one line naming the key, exit 2.
set -u
cd "$(dirname "$0")/../.."
. tests/helpers/lib.sh
need_tiny_data
llama="--set model.family=llama --set model.n_head=4 --set model.n_kv_head=2 --set model.intermediate_size=96"
common="-c inputs/tiny.cfg $llama --set train.micro_batch=2 --set train.global_batch=8 --set train.steps=10
        --set train.warmup_steps=2 --set train.log_every=1 --set eval.every=5 --set run.root=$TMP --set run.session=ll"
run() { # name np args...
  local name=$1 np=$2; shift 2
  timeout 300 $MPIRUN -np $np $ZT train $common --set run.name=$name "$@" >> $TMP/$name.log 2>&1 \
    || { fail "run_$name: exit $? ($(grep -m1 error $TMP/$name.log || tail -1 $TMP/$name.log))"; return 1; }
}
d=$TMP/ll
for np in 1 2 4; do run f$np $np; done
compare_runs $d/f2 $d/f1 llama_fp32_2_ranks
compare_runs $d/f4 $d/f1 llama_fp32_4_ranks
for np in 1 2; do run b$np $np --set precision=bf16; done
compare_runs $d/b2 $d/b1 llama_bf16_2_ranks
# resume on another rank count
run r 1 --stop-after 5 && run r 2 --resume auto && compare_runs $d/r $d/f1 llama_resume_1_then_2_ranks
# the device backends
run ds 1 --set device=devsim
compare_runs $d/ds $d/f1 llama_devsim_equals_cpu
run cs1 1 --set device=cudasim && run cs2 2 --set device=cudasim
compare_runs $d/cs2 $d/cs1 llama_cudasim_1_vs_2_ranks
worst=$(loss_rel_diff $d/f1 $d/cs1 10)
if $PY -c "import sys; sys.exit(not float(sys.argv[1]) <= 1e-5)" "${worst:-nan}"; then
  pass "llama_cudasim_vs_cpu (10 losses, max rel diff $worst <= 1e-5)"
else fail "llama_cudasim_vs_cpu: max rel diff ${worst:-?}"; fi
# QLoRA on the Llama base (its last checkpoint), PEFT's module names
base=$(ls $d/f1/checkpoints/*.h5 | tail -1)
q="--set lora.enabled=true --set lora.base=$base --set lora.rank=4 --set lora.alpha=8 --set lora.quant=nf4_dq
   --set lora.dropout=0.1 --set lora.targets=q_proj,v_proj,gate_proj,down_proj --set train.lr=3e-3"
run q1 1 $q && run q2 2 $q && compare_runs $d/q2 $d/q1 llama_qlora_1_vs_2_ranks
for st in 0 1; do run qs$st 2 $q --set zero.stage=$st && compare_runs $d/qs$st $d/q1 llama_qlora_stage${st}_2_ranks; done
run qr 2 $q --stop-after 4 && run qr 1 $q --resume auto && compare_runs $d/qr $d/q1 llama_qlora_resume_2_then_1_rank
if grep -q "QLoRA: base" $d/../q1.log 2>/dev/null || grep -q "QLoRA: base" $TMP/q1.log; then
  pass "llama_qlora_banner ($(grep -m1 'QLoRA: base' $TMP/q1.log | cut -c1-90))"
else fail "llama_qlora_banner: no QLoRA line in the log"; fi
ck=$(ls $d/f1/checkpoints/*.h5 | tail -1)
if out=$($ZT eval --checkpoint $ck 2>&1) && echo "$out" | grep -q "loss"; then
  pass "llama_eval ($(echo "$out" | grep -m1 loss | cut -c1-80))"
else fail "llama_eval: $(echo "$out" | tail -1)"; fi
s1=$($ZT sample --checkpoint $ck --tokenizer none --prompt "1 2 3" --tokens 12 --top-k 1 2>/dev/null | grep -E "^[0-9 ]+$")
s2=$($ZT sample --checkpoint $ck --tokenizer none --prompt "1 2 3" --tokens 12 --top-k 1 2>/dev/null | grep -E "^[0-9 ]+$")
if [ -n "$s1" ] && [ "$s1" == "$s2" ] && ! echo "$s1" | grep -q error; then
  pass "llama_sample_greedy_deterministic ($(echo "$s1" | tail -1 | cut -c1-60))"
else fail "llama_sample_greedy_deterministic: $(echo "$s1" | tail -2 | tr '\n' ' ')"; fi
# the plan against the allocator on a scaled-down Llama (d6's size: 6 layers, C 384, 6 heads, 2 key/value heads,
# GPT-2's 50,257-token vocabulary, an untied LM head): full training at 1 and 2 ranks, and QLoRA (nf4_dq) on its
# checkpoint (and, with ZT_LONG=1, full training on 2 ranks); results.json's mem_alloc_bytes (growth of resident memory, the largest over ranks) within 5% of
# `ztrain estimate`'s total
[ -f data/d6/train.bin ] || tests/helpers/make_data.py data/d6 50257 60000 >/dev/null
ld6="-c inputs/d6.cfg --set model.family=llama --set model.n_kv_head=2 --set model.intermediate_size=1024
     --set train.micro_batch=2 --set train.global_batch=4 --set train.seq_len=128 --set train.threads=1
     --set train.warmup_steps=0 --set data.train=data/d6/train.bin --set data.val= --set sample.every=0
     --set run.root=$TMP --set run.session=llm --set eval.every=0 --set checkpoint.every=0"
estimate_check() { # name np args...: one 2-step run against the estimate
  local name=$1 np=$2; shift 2
  if ! timeout 300 $MPIRUN -np $np $ZT train $ld6 --set train.steps=2 --set run.name=$name "$@" > $TMP/$name.log 2>&1; then
    fail "estimate_vs_measured_$name: run failed: $(grep -m1 error $TMP/$name.log)"; return 1
  fi
  local meas pred err
  meas=$(result $TMP/llm/$name mem_alloc_bytes)
  pred=$($ZT estimate $ld6 --ranks $np "$@" | awk '$1 == "total" { print $2 * 1048576 }')
  err=$(awk -v m=$meas -v p=$pred 'BEGIN { printf "%+.1f%%", 100 * (p - m) / m }')
  if awk -v m=$meas -v p=$pred 'BEGIN { e = (p - m) / m; exit !(e <= 0.05 && e >= -0.05) }'; then
    pass "estimate_vs_measured_$name (measured $(awk -v m=$meas 'BEGIN { printf "%.1f", m / 1048576 }') MiB, estimated $(awk -v p=$pred 'BEGIN { printf "%.1f", p / 1048576 }') MiB, $err)"
  else fail "estimate_vs_measured_$name: measured $meas, estimated $pred ($err)"; fi
}
estimate_check llama_d6_1rank 1
[ -n "${ZT_LONG:-}" ] && estimate_check llama_d6_2ranks 2 --set zero.stage=2
base6=$(ls $TMP/llm/llama_d6_1rank/checkpoints/*.h5 2>/dev/null | tail -1)
[ -n "$base6" ] && estimate_check llama_d6_qlora 1 --set lora.enabled=true --set lora.base=$base6 --set lora.rank=8 \
  --set lora.quant=nf4_dq --set lora.targets=all
# bad descriptions
expect_bad() { # name expected-text args...
  local name=$1 want=$2; shift 2
  out=$($ZT train -c inputs/tiny.cfg --set run.root=$TMP "$@" 2>&1); rc=$?
  if [ $rc -eq 2 ] && [ "$(echo "$out" | grep -c 'ztrain: error')" -eq 1 ] && echo "$out" | grep -q -- "$want"; then
    pass "$name (exit 2: $(echo "$out" | grep -m1 'ztrain: error' | cut -c1-110))"
  else fail "$name: rc $rc: $(echo "$out" | tail -1)"; fi
}
expect_bad bad_kv_heads "model.n_kv_head = 3" --set model.family=llama --set model.intermediate_size=96 \
  --set model.n_head=4 --set model.n_kv_head=3
expect_bad bad_swiglu_size "model.intermediate_size = 0" --set model.family=llama
expect_bad bad_rope_odd_head "even head size" --set model.family=llama --set model.intermediate_size=96 \
  --set model.n_embd=66 --set model.n_head=2
expect_bad bad_encoder_key_on_decoder "for the encoder families" --set model.pad_id=3
expect_bad bad_bias_list "model.bias" --set model.bias=qkv,nope
finish
