#!/usr/bin/env bash
# GPU kernel launches and device-memory traffic per training step, counted without a GPU
# (src/core/diag/backend_count.h, `ztrain estimate --hw h100|h200` / `--count-device`):
#  - launches_cudasim_*  the wrapper's launch table against the host execution harness's own count of the
#                        launches it executed, the elements it packed as product operands and the sizes its three
#                        packed-operand buffers grew to (cuda/cudasim_count.cu) in one training step of the tiny models on cudasim: fp32, bf16 (fused rounding, packed GEMM
#                        operands, operands read from the words they mirror), bf16 without the fused rounding or
#                        without the mirrors,
#                        the materialized attention, Llama (RMSNorm, rotary, SwiGLU, GQA), the LM head in 3 chunks
#                        (train.head_chunks), a batch whose embedding backward sorts in several stages;
#  - count_device_same   the count device (no compute) counts the same launches and bytes as cudasim;
#  - host_waits_per_step a step of 3 micro-batches waits for the device (sync, to_host) as often as a step of 1,
#                        at most twice (the norm and the losses, once the update is queued), and copies nothing to
#                        the device once its first launch is queued (every micro-batch's inputs go first);
#  - bytes_*             bytes of a few op kinds against formulas computed here from the shapes;
#  - dry_run_gpt2_124m   one step of GPT-2 124M, micro-batch 16 x 1024, bf16 on the count device: launches and GB
#                        per step, in seconds;
#  - gpu_ratchet         no more launches and GB than the step has reached (lowered with each change that lowers them);
#  - gpu_budget_launches at most 400 launches per step;
#  - gpu_budget_traffic  at most 60 GB of HBM traffic per step.
set -u
cd "$(dirname "$0")/../.."
. tests/helpers/lib.sh

# est NAME ARGS...: `ztrain estimate ARGS` into $TMP/NAME.out; 0 when it succeeded
est() {
  local name=$1; shift
  if ! timeout 300 $ZT estimate "$@" > $TMP/$name.out 2>&1; then
    fail "$name: ztrain estimate $* exited non-zero: $(grep -m1 -E 'error|panic' $TMP/$name.out)"
    return 1
  fi
}
# field FILE WHAT: counted launches ("counted"), the harness's ("executed"), total bytes ("bytes"), launches per step
# ("launches"), or the bytes of one op kind ("kind:NAME")
field() {
  $PY - "$1" "$2" <<'EOF'
import re, sys
txt, what = open(sys.argv[1]).read(), sys.argv[2]
if what == "executed": m = re.search(r"executed by the host execution harness: (\d+)", txt)
elif what == "counted": m = re.search(r"the wrapper counted (\d+) kernels", txt)
elif what == "packed": m = re.search(r"elements it packed as product operands: (\d+)", txt)
elif what == "packed_counted": m = re.search(r"as product operands: \d+ \(the wrapper counted (\d+)\)", txt)
elif what == "g16": m = re.search(r"GEMM operand buffers: [\d.]+ MiB \((\d+) 2-byte elements", txt)
elif what == "g16_harness": m = re.search(r"the harness's buffers: (\d+) elements", txt)
elif what == "words": m = re.search(r"product operands read from 2-byte words, not packed: (\d+)", txt)
elif what == "launches": m = re.search(r"kernel launches per step: (\d+)", txt)
elif what == "bytes": m = re.search(r"HBM traffic per step: [\d.]+ GB \((\d+) bytes", txt)
elif what == "gb": m = re.search(r"HBM traffic per step: ([\d.]+) GB", txt)
else:
    name = what[5:]
    m = re.search(r"^  " + re.escape(name) + r" +\d+ +\d+ +\d+ +[\d.]+ +(\d+)$", txt, re.M)
print(m.group(1) if m else "none")
EOF
}

# ---------------------------------------------------------------- launches: the wrapper's table vs the harness
tiny="-c inputs/tiny.cfg --count-device cudasim"
check_launches() {
  local name=$1; shift
  est $name "$@" || return
  local e c
  e=$(field $TMP/$name.out executed); c=$(field $TMP/$name.out counted)
  pe=$(field $TMP/$name.out packed); pc=$(field $TMP/$name.out packed_counted); w=$(field $TMP/$name.out words)
  # bf16 / fp16: the packed-operand buffers' sizes, as the wrapper models them and as the harness grew them
  gc=$(field $TMP/$name.out g16); gh=$(field $TMP/$name.out g16_harness)
  if [ "$e" != none ] && [ "$e" -gt 0 ] && [ "$e" = "$c" ] && [ "$pe" != none ] && [ "$pe" = "$pc" ] && [ "$gc" = "$gh" ]; then
    pass "$name (one step: the harness executed $e launches and packed $pe product operand elements, the wrapper counted $c and $pc; $w operands read from 2-byte words; packed-operand buffers: $gh elements, the wrapper's $gc)"
  else
    fail "$name: the harness executed $e launches and packed $pe elements, the wrapper counted $c and $pc; packed-operand buffers: the harness's $gh elements, the wrapper's $gc"
  fi
}
check_launches launches_cudasim_fp32 $tiny
check_launches launches_cudasim_bf16 $tiny --set precision=bf16
ZT_CUDA_FUSE_ROUND=0 check_launches launches_cudasim_bf16_unfused $tiny --set precision=bf16
ZT_CUDA_MIRROR=0 check_launches launches_cudasim_bf16_no_mirrors $tiny --set precision=bf16
check_launches launches_cudasim_fp16_materialized $tiny --set precision=fp16 --set train.attention=materialized
check_launches launches_cudasim_llama_bf16 -c inputs/llama-tiny.cfg --count-device cudasim --set precision=bf16
check_launches launches_cudasim_head_chunks $tiny --set precision=bf16 --set train.head_chunks=3
check_launches launches_cudasim_sort_stages $tiny --set precision=bf16 --set train.micro_batch=64 \
  --set train.global_batch=64 --set train.seq_len=64

# the count device takes the same paths as cudasim: the same launches and bytes
if est count_tiny -c inputs/tiny.cfg --count-device count --set precision=bf16; then
  a="$(field $TMP/count_tiny.out launches) $(field $TMP/count_tiny.out bytes)"
  b="$(field $TMP/launches_cudasim_bf16.out launches) $(field $TMP/launches_cudasim_bf16.out bytes)"
  [ "$a" = "$b" ] && [ "${a%% *}" != none ] && pass "count_device_same (tiny bf16: launches and bytes $a on both)" ||
    fail "count_device_same: count device $a, cudasim $b (launches bytes)"
fi

# no host wait inside a step: a step of 3 micro-batches waits for the device as often as a step of 1, and at most
# twice, both after the update is queued (the losses and the norm stay on the device until then, the clip factor is
# computed there: core/optim/step.c), while its launches grow
waits() { sed -n 's/^  host waits per step: \([0-9]*\).*/\1/p' "$1"; }
mid() { sed -n 's/^  host waits per step: .*copies to the device between its launches: \([0-9]*\).*/\1/p' "$1"; }
if ZTRAIN_TEST_COUNT_MICRO=3 est count_tiny_k3 -c inputs/tiny.cfg --count-device count --set precision=bf16; then
  w1=$(waits $TMP/count_tiny.out); w3=$(waits $TMP/count_tiny_k3.out)
  l1=$(field $TMP/count_tiny.out launches); l3=$(field $TMP/count_tiny_k3.out launches)
  m3=$(mid $TMP/count_tiny_k3.out)
  if [ -n "$w1" ] && [ "$w1" = "$w3" ] && [ "$w1" -le 2 ] && [ "$m3" = 0 ] && [ "$l3" -gt $((2 * l1)) ] \
     && grep -q "3 micro-batches" $TMP/count_tiny_k3.out; then
    pass "host_waits_per_step (tiny bf16: $w1 waits for 1 micro-batch, $w3 for 3, $m3 copies to the device between launches; launches $l1 -> $l3)"
  else
    fail "host_waits_per_step: waits $w1 (1 micro-batch) vs $w3 (3), $m3 copies to the device between launches (want 0), launches $l1 vs $l3"
  fi
fi

# ---------------------------------------------------------------- bytes of a few op kinds from the shapes
# tiny: L 2, C 64, micro-batch 4 x 32 (N = 128 rows), 120,576 parameters (inputs/tiny.cfg); every buffer float32
want=$($PY - <<'EOF'
L, C, N, P = 2, 64, 128, 120576
lin = [(C, 3 * C), (C, C), (C, 4 * C), (4 * C, C)]  # (in, out) of qkv, attention projection, fc, fc projection
# linear forward: read inp (N, K) and w (K, OC), the bias (OC); write out (N, OC)
fp32 = L * sum(4 * (N * K + K * OC + OC + N * OC) for K, OC in lin)
# bf16: the GEMM reads both operands as packed 2-byte words and the float32 bias; each product's output is read next
# as 2-byte words (the tensor-core attention, residual + LayerNorm, the GELU), which is all the product writes
bf16 = L * sum(2 * (N * K + K * OC) + 4 * OC + 2 * N * OC for K, OC in lin)
# LayerNorm forward alone: only layer 0's ln1 (every other LayerNorm, ln2, the next layer's ln1 and ln_f, is fused with
# the residual add before it): read inp, w, b; write out, mean, rstd
ln = 1 * 4 * (N * C + 2 * C + N * C + 2 * N)
gelu = L * 4 * (N * 4 * C + N * 4 * C)   # read the fc output, write its GELU
adamw = 4 * 7 * P                         # read param, grad, m, v; write param, m, v: every parameter once
print(fp32, bf16, ln, gelu, adamw)
EOF
)
read -r w_lin32 w_lin16 w_ln w_gelu w_adamw <<< "$want"
bytes_check() { # NAME FILE KIND WANT
  local got; got=$(field $2 "kind:$3")
  [ "$got" = "$4" ] && pass "$1 ($3: $got bytes, as the formula from the shapes)" || fail "$1: $3 counted $got bytes, the formula gives $4"
}
f32=$TMP/launches_cudasim_fp32.out
bytes_check bytes_linear_fwd_fp32 $f32 "linear fwd" $w_lin32
bytes_check bytes_layernorm_fwd $f32 "layernorm fwd" $w_ln
bytes_check bytes_gelu_fwd $f32 "gelu fwd" $w_gelu
bytes_check bytes_adamw $f32 "adamw" $w_adamw
bytes_check bytes_linear_fwd_bf16 $TMP/launches_cudasim_bf16.out "linear fwd" $w_lin16

# ---------------------------------------------------------------- GPT-2 124M, micro-batch 16 x 1024, bf16: the dry run
g=$TMP/gpt2.out
t0=$(date +%s.%N)
if est gpt2 -c inputs/gpt2-124m.cfg --hw h100; then
  dt=$($PY -c "import sys; print('%.2f' % ($(date +%s.%N) - $t0))")
  n=$(field $g launches); gb=$(field $g gb)
  if grep -q "one micro-batch of 16 x 1024, bf16" $g && [ "$n" != none ] && [ "$gb" != none ] && [ "$n" -gt 0 ] &&
     grep -q "predicted step on h100" $g && $PY -c "import sys; sys.exit(not ($dt < 10 and $gb > 0))"; then
    over=$($PY -c "print('over budget' if $n > 400 or $gb > 60 else 'within budget')")
    pass "dry_run_gpt2_124m (one step on the count device in $dt s: $n kernel launches, $gb GB of HBM traffic per step; budget 400 launches, 60 GB: $over)"
  else
    fail "dry_run_gpt2_124m: launches $n, GB $gb, $dt s: $(grep -A2 'GPU kernels' $g | tr '\n' ' ')"
  fi
  sed -n '/GPU kernels/,$p' $g | sed 's/^/# /'
  # the ratchet: no change may add launches or traffic to this step (the figures it reached, docs/gpu-status.md);
  # lower them here when a change lowers the count
  if [ "$n" != none ] && [ "$gb" != none ]; then
    if [ "$n" -le 381 ] && $PY -c "import sys; sys.exit(not $gb <= 58.22)"; then
      pass "gpu_ratchet ($n launches <= 381, $gb GB <= 58.22 per step: no regression)"
    else
      fail "gpu_ratchet: $n launches, $gb GB per step; at most 381 and 58.22 (a change added launches or traffic)"
    fi
  fi
  # the budgets (issue 32): 400 launches and 60 GB of HBM traffic per step
  if [ "$n" != none ] && [ "$gb" != none ]; then
    [ "$n" -le 400 ] && pass "gpu_budget_launches ($n launches <= 400 per step)" ||
      fail "gpu_budget_launches: $n launches per step, budget 400"
    $PY -c "import sys; sys.exit(not $gb <= 60)" && pass "gpu_budget_traffic ($gb GB <= 60 per step)" ||
      fail "gpu_budget_traffic: $gb GB per step, budget 60"
  fi
fi
finish
