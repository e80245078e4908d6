#!/usr/bin/env bash
# Distribution with real mpirun at 1, 2 and 4 ranks (4 oversubscribed on 2 cores):
#  - ordered reduction: ZeRO stages 0/1/2 x 1/2/4 ranks give bit-identical per-step losses and
#    params_hash over 30 steps with gradient accumulation and clipping active;
#  - native reduction agrees within 1e-7 relative on every loss and 5e-7 on every grad_norm (see below);
#  - optimizer state per rank at stages 1-2 = stage 0 / N (+ padding);
#  - an error on one rank only ends every rank with one message and exit 2, no hang.
set -u
cd "$(dirname "$0")/../.."
. tests/helpers/lib.sh
need_tiny_data
common="-c inputs/tiny.cfg --set train.micro_batch=2 --set train.global_batch=8 --set train.steps=30
        --set train.grad_clip=0.5 --set train.log_every=1 --set run.root=$TMP --set run.session=dist"
run() { # name np args...
  local name=$1 np=$2; shift 2
  timeout 300 $MPIRUN -np $np $ZT train $common --set run.name=$name "$@" > $TMP/$name.log 2>&1 \
    || { fail "run_$name: exit $? ($(tail -2 $TMP/$name.log | tr '\n' ' '))"; return 1; }
}
ref=""
for st in 0 1 2; do
  for np in 1 2 4; do
    run o-s$st-n$np $np --set zero.stage=$st --set zero.reduce=ordered || continue
    d=$TMP/dist/o-s$st-n$np
    l=$(losses $d); h=$(result $d params_hash)
    if [ -z "$ref" ]; then ref="$l"; refh="$h"; refname="o-s$st-n$np"; continue; fi
    if [ "$l" == "$ref" ] && [ "$h" == "$refh" ]; then pass "ordered_stage${st}_${np}ranks (30 losses + params_hash == $refname: $h)"
    else fail "ordered_stage${st}_${np}ranks: differs from $refname (hash $h vs $refh; first losses $(echo $l | cut -c1-60) vs $(echo $ref | cut -c1-60))"; fi
  done
done
# clipping must have been active in the reference run
clipped=$($PY -c "import json; print(sum(1 for l in open('$TMP/dist/o-s0-n1/metrics.jsonl') if json.loads(l)['grad_norm'] > 0.5))")
[ "$clipped" -gt 0 ] && pass "clipping_active ($clipped of 30 steps had grad_norm > clip 0.5)" || fail "clipping_active: no step clipped"

# native reduce (MPI's own sums, in whatever order MPI adds): every step's loss and grad_norm against the ordered
# 1-rank run. The two differ only by the float32 rounding of the gradient sums (4 micro-batch parts per element,
# added in another order), which the 30 steps carry on: measured max relative difference 2.2e-8 on the losses
# (a fifth of a float32 ulp of the loss) and 6.6e-8 on grad_norm, at stages 0 and 2 on 2 and 4 ranks alike. The
# limits are small multiples of that: 1e-7 (under one float32 ulp, 2^-23 = 1.2e-7) and 5e-7. Losing one element
# per shard is far outside them: with the owner keeping only its own part of one gradient element of its shard
# (a scratch-copy experiment: 5 positions in the shard x 2 and 4 ranks, stages 0 and 2), the losses moved by
# 1.1e-7 to 1.3e-5 and grad_norm by 5.4e-6 to 4.8e-4 (the former loss-only limit, 1e-5, let 8 of the 10 through).
NATIVE_LOSS_TOL=1e-7 NATIVE_NORM_TOL=5e-7
for st in 0 2; do
  for np in 2 4; do
    run n-s$st-n$np $np --set zero.stage=$st --set zero.reduce=native || continue
    cmp=$($PY - "$TMP/dist/o-s0-n1/metrics.jsonl" "$TMP/dist/n-s$st-n$np/metrics.jsonl" $NATIVE_LOSS_TOL $NATIVE_NORM_TOL <<'PYEOF'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
assert len(a) == len(b) == 30, (len(a), len(b))
worst = {k: max(abs(x[k] - y[k]) / abs(x[k]) for x, y in zip(a, b)) for k in ("loss", "grad_norm")}
ok = worst["loss"] <= float(sys.argv[3]) and worst["grad_norm"] <= float(sys.argv[4])
print(("ok" if ok else "bad") + f" max rel diff: loss {worst['loss']:.3g} (limit {sys.argv[3]}), grad_norm {worst['grad_norm']:.3g} (limit {sys.argv[4]})")
PYEOF
)
    if [ "${cmp%% *}" == ok ]; then pass "native_stage${st}_${np}ranks (30 steps vs ordered 1 rank, ${cmp#ok })"
    else fail "native_stage${st}_${np}ranks: ${cmp#bad }"; fi
  done
done

# memory per rank from the allocator's plan (ztrain estimate uses the same function)
est() { $ZT estimate -c inputs/d6.cfg --set train.micro_batch=2 --set zero.stage=$1 --ranks $2 | awk -v k="$3" 'index($0,k)==1 {print $NF}'; }
o0=$(est 0 1 "optimizer"); o2=$(est 2 4 "optimizer"); o1=$(est 1 2 "optimizer")
if $PY -c "import sys; a,b,c=$o0,$o2,$o1; sys.exit(0 if abs(b-a/4) <= 0.1 + a*0.001 and abs(c-a/2) <= 0.1 + a*0.001 else 1)"; then
  pass "optimizer_state_sharded (stage 0: $o0 MiB, stage 1 @2: $o1 MiB, stage 2 @4: $o2 MiB)"
else fail "optimizer_state_sharded: stage0 $o0, stage1@2 $o1, stage2@4 $o2"; fi

# uneven: 3 ranks (shards cut tensors; parameter count not a multiple of 3*4096) == 1 rank
for np in 1 3; do run u-n$np $np --set zero.stage=2 --set train.micro_batch=1 --set train.global_batch=6 --set train.steps=10 || true; done
if [ -f $TMP/dist/u-n1/results.json ] && [ -f $TMP/dist/u-n3/results.json ] && [ "$(losses $TMP/dist/u-n1)" == "$(losses $TMP/dist/u-n3)" ] \
   && [ "$(result $TMP/dist/u-n1 params_hash)" == "$(result $TMP/dist/u-n3 params_hash)" ]; then
  pass "uneven_3ranks (stage 2, 10 steps, 6 micro-batches: losses + params_hash == 1 rank)"
else fail "uneven_3ranks"; fi

# stage 2 keeps no full gradient: micro-batch gradient memory = buckets only (the ring + wte/wpe's
# own bucket), well below stage 0's full gradient (GPT-2 124M, where wte is a third of the model)
e124() { $ZT estimate -c inputs/gpt2-124m.cfg --set device=cpu --set precision=fp32 --set zero.stage=$1 --ranks $2 | awk -v k="$3" 'index($0,k)==1 {print $NF}'; }
g0=$(e124 0 1 "micro-batch gradients"); g2=$(e124 2 4 "micro-batch gradients"); a2=$(e124 2 4 "reduced gradients")
if $PY -c "import sys; sys.exit(0 if $g2 < $g0 / 2 and $a2 <= $g0 / 4 + 0.1 else 1)"; then
  pass "stage2_gradient_memory (stage 0: full gradient $g0 MiB; stage 2 @4: buckets $g2 MiB + reduced shard $a2 MiB)"
else fail "stage2_gradient_memory: stage0 $g0, stage2 buckets $g2, shard $a2"; fi

# an error on one rank only: rank 1 gets a data path that does not exist
out=$(timeout 120 $MPIRUN -np 1 $ZT train $common --set run.name=e : -np 1 $ZT train $common --set run.name=e \
      --set data.train=$TMP/missing.bin 2>&1); rc=$?
n=$(echo "$out" | grep -c "ztrain: error")
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ "$n" -eq 1 ] && echo "$out" | grep -q "missing.bin: no such data file"; then
  pass "error_on_one_rank (exit $rc, one message: $(echo "$out" | grep 'ztrain: error'))"
else fail "error_on_one_rank: rc=$rc, $n error lines: $out"; fi
finish
