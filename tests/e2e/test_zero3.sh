#!/usr/bin/env bash
# test: heavy
# ZeRO stage 3 (each rank keeps its shard of the parameters; every layer all-gathered before its forward and its
# backward, the next one's gather in flight) and zero.offload (optimizer state, and with optimizer+params the
# parameter shard, in host memory; the update on the host), with real mpirun. Every check compares two runs made
# independently by this test (no stored hashes): per step the loss, grad_norm and val_loss of metrics.jsonl, and
# results.json's params_hash, must be equal bit for bit.
#  stage3_*              stage 3 == stage 0 on 1 rank (stage 2 beside them), cpu: fp32 on 1/2/3/4 ranks, bf16 on 2
#                        and 3 (4: devsim below); 3 layers so that the two layer slots are reused (a layer
#                        gathered again in backward, the prefetch landing in the slot not in use); eval every 4 steps
#                        (3 ranks: a rank without a validation batch in a round still takes part in the gathers)
#  offload_*             devsim: offload optimizer at stages 1/2/3 and optimizer+params at stage 3 == no offload (the
#                        log must say the update runs on the host); cpu: the run says it is a no-op, results equal
#  cudasim_*             the CUDA kernels under the host harness: stage 3 + optimizer+params == stage 2, bf16
#  llama_stage3          llama-tiny (RMSNorm, rotary, SwiGLU, GQA) stage 3 on 2 ranks == stage 0 on 1
#  recompute_layer_*     train.recompute = layer at stage 3 == the reference
#  sample_stage3         sample.every during training at stage 3 (every rank takes part in the gathers): the same
#                        samples.txt as stage 2, and the training unchanged
#  resume_*              --stop-after then --resume auto across stages, offload settings, backends and rank counts
#                        (3 ranks stage 3 -> 2 ranks stage 2; 4 ranks stage 1 + offload -> 1 rank stage 3 + optimizer+params;
#                        bf16 devsim stage 3 + optimizer+params -> cpu stage 2 on 3 ranks) == the straight run, and
#                        the final checkpoint files (parameters and both Adam moments) equal the straight run's
#  ckpt_stage3_files     a stage-3 (+ optimizer+params) run's checkpoint == the stage-0 1-rank run's, dataset by dataset
#  ckpt_master_group_*   /master in the bf16 runs' files only: an fp32 run's has none, whatever the stage and offload
#  config_*              exit 2, one "ztrain: error" line naming both keys, no run directory created: stage 3 with
#                        LoRA, offload with LoRA, offload at stage 0, optimizer+params below stage 3, stage 4
#  kill_gather_*         ZTRAIN_TEST_KILL_GATHER=K,R: rank R exits 137 when it starts its K-th stage-3 gather of a
#                        resumed run: non-zero exit within a bound (no hang), every rank gone, no core file, the
#                        checkpoints the run resumed from unchanged, every step_*.h5 complete, `latest` names a
#                        complete file, results.json untouched; resuming again == the straight run
# At the end a table: run, params_hash prefix, what it was compared with.
# make test: about 60 s on 2 idle cores. ZT_LONG=1 (make test-long) adds the full matrix: stages 0-3 x 1-4 ranks x
# fp32/bf16 on cpu and devsim with every offload setting, fp16, 2-byte gradient wire, cudasim fp32/bf16/fp16 on 1-2
# ranks, qwen2-tiny, recompute gelu, a 4-layer model, d6 (30M) on 1 and 2 ranks, more kill points.
set -u
cd "$(dirname "$0")/../.."
. tests/helpers/lib.sh
need_tiny_data
H="$PY tests/helpers/ckpt_h5.py"
# ckfiles A B: the training state of checkpoint A equals B's bit for bit: every dataset of /model and /optim, and of
# /master where both files have one (whether a file has /master is ckmaster's check); prints "ok ..." or the first
# difference
ckfiles() {
  $PY - "$1" "$2" <<'EOF2'
import sys, h5py
def ds(h):
    out = {}
    h.visititems(lambda n, o: out.__setitem__(n, o) if isinstance(o, h5py.Dataset) else None)
    return out
with h5py.File(sys.argv[1], "r") as a, h5py.File(sys.argv[2], "r") as b:
    both_master = "master" in a and "master" in b
    pick = lambda d: {k for k in d if k.startswith(("model/", "optim/")) or (both_master and k.startswith("master/"))}
    da, db = ds(a), ds(b)
    ka, kb = pick(da), pick(db)
    if ka != kb or not ka:
        print("different datasets:", sorted(ka ^ kb)[:4]); sys.exit(1)
    for k in sorted(ka):
        x, y = da[k][...], db[k][...]
        if x.shape != y.shape or x.tobytes() != y.tobytes():
            print(k, "differs"); sys.exit(1)
    print(f"ok: {len(ka)} datasets bit-identical (/model, /optim{', /master' if both_master else ''})")
EOF2
}
# ckmaster CHECK FILE PREC: /master (fp32 master weights) is in a bf16/fp16 run's file and absent from an fp32 run's
# (src/io/ckpt.c, docs/checkpoints.md: "an fp32 run's parameters are its master weights and the group is absent"),
# whatever the stage and offload setting
ckmaster() {
  local has
  has=$($PY -c 'import h5py, sys; print(int("master" in h5py.File(sys.argv[1], "r")))' "$2" 2>&1)
  if { [ "$3" == fp32 ] && [ "$has" == 0 ]; } || { [ "$3" != fp32 ] && [ "$has" == 1 ]; }; then
    pass "$1 ($3: /master $( [ "$has" == 1 ] && echo present || echo absent), as in every $3 checkpoint)"
  else fail "$1: $3 checkpoint $(basename $(dirname $(dirname $2)))/$(basename $2) $( [ "$has" == 1 ] && echo "has a /master group (an fp32 file has none)" || echo "lacks /master ($has)")"; fi
}
LONG=${ZT_LONG:-}
T0=$(date +%s)
R=$TMP/z3
common="-c inputs/tiny.cfg --set model.n_layer=3 --set train.micro_batch=2 --set train.global_batch=24 --set train.steps=8
        --set eval.every=4 --set train.threads=1 --set train.log_every=1 --set run.root=$TMP --set run.session=z3"
TABLE=$TMP/table.txt
: > $TABLE

# per step "step loss grad_norm val_loss" (the last record of each step) and "hash H"
sig() {
  $PY - "$1" <<'EOF'
import json, sys
d = {}
for l in open(sys.argv[1] + "/metrics.jsonl"):
    r = json.loads(l); d[r["step"]] = (r["loss"], r["grad_norm"], r.get("val_loss"))
for s in sorted(d): print(s, *d[s])
print("hash", json.load(open(sys.argv[1] + "/results.json"))["params_hash"])
EOF
}
hash16() { $PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["params_hash"].split(":")[1][:16])' "$R/$1/results.json" 2>/dev/null || echo "-"; }
row() { printf '%-44s %-17s %s\n' "$1" "$2" "$3" >> $TABLE; }
# same CHECK RUN REF: PASS when RUN's signature equals REF's (both are runs of this test)
same() {
  local check=$1 run=$2 ref=$3 a b
  a=$(sig $R/$run 2>&1); b=$(sig $R/$ref 2>&1)
  if [ -n "$a" ] && [ "$a" == "$b" ] && echo "$a" | grep -q '^hash sha256:'; then
    pass "$check ($run == $ref: $(echo "$a" | grep -c '^[0-9]') steps' loss/grad_norm/val_loss and params_hash $(hash16 $run)...)"
    row "$run" "$(hash16 $run)" "== $ref"
  else
    fail "$check: $run differs from $ref: $(diff <(echo "$a") <(echo "$b") | grep '^[<>]' | head -4 | tr '\n' ' ' | cut -c1-300)"
    row "$run" "$(hash16 $run)" "DIFFERS from $ref"
  fi
}
# one NAME NP ARGS...: a run; a failure is a FAIL line (and a table row)
one() {
  local name=$1
  run_named "$@" && return 0
  fail "run_$name: exit code $(tail -c 2000 $TMP/$name.log | grep -m1 -E 'ztrain: error|exit code|Exit code|signal' | cut -c1-200)"
  row "$name" "-" "RUN FAILED"
  return 1
}
# check CHECK NAME NP REF ARGS...: run NAME, compare it with REF
check() { local c=$1 n=$2 np=$3 ref=$4; shift 4; one $n $np "$@" && same $c $n $ref; }
# the log says the run was stage 3 / the update ran on the host
is_stage3() { grep -q "ZeRO-3 " $TMP/$1.log || { fail "$1_is_stage3: the log has no 'ZeRO-3' line"; return 1; }; }
is_offloaded() {
  grep -q "^zero.offload = $2: .*the update runs on the host" $TMP/$1.log \
    || { fail "$1_offloaded: no 'zero.offload = $2: ... the update runs on the host' line: $(grep -m1 offload $TMP/$1.log)"; return 1; }
}

# ---------------------------------------------------------------- (1) stage 3 == stages 0/1/2, cpu, fp32 and bf16
for p in fp32 bf16; do
  ref=cpu-$p-s0-n1
  one $ref 1 --set precision=$p --set zero.stage=0 || continue
  row "$ref" "$(hash16 $ref)" "(reference)"
  if [ -n "$LONG" ]; then sn="0:2 0:3 0:4 1:1 1:2 1:3 1:4 2:1 2:2 2:3 2:4 3:1 3:2 3:3 3:4"
  elif [ $p == fp32 ]; then sn="2:3 3:1 3:2 3:3 3:4"
  else sn="2:2 3:2 3:3"; fi # (bf16 at stage 3 on 4 ranks: the devsim optimizer+params run below)
  for x in $sn; do
    st=${x%:*} np=${x#*:}
    check stage${st}_${p}_cpu_${np}ranks cpu-$p-s$st-n$np $np $ref --set precision=$p --set zero.stage=$st
  done
  is_stage3 cpu-$p-s3-n2
done

# ---------------------------------------------------------------- (2) offload on devsim (== cpu: devsim is cpu's ops)
for p in fp32 bf16; do
  ref=cpu-$p-s0-n1
  [ -f $R/$ref/results.json ] || continue
  if [ -n "$LONG" ]; then
    cases="1:optimizer:1 1:optimizer:4 2:optimizer:1 2:optimizer:3 3:none:1 3:none:2 3:none:3 3:none:4 3:optimizer:1
           3:optimizer:2 3:optimizer:3 3:optimizer:4 3:optimizer+params:1 3:optimizer+params:2 3:optimizer+params:3
           3:optimizer+params:4 2:none:2"
  elif [ $p == fp32 ]; then cases="1:optimizer:4 2:optimizer:2 3:none:2 3:optimizer:2 3:optimizer+params:3"
  else cases="2:optimizer:3 3:none:2 3:optimizer:2 3:optimizer+params:4"; fi
  for x in $cases; do
    st=${x%%:*} o=${x#*:}; o=${o%:*}; np=${x##*:}
    n=dev-$p-s$st-$o-n$np
    check offload_${o}_stage${st}_${p}_devsim_${np}ranks $n $np $ref --set device=devsim --set precision=$p \
      --set zero.stage=$st --set zero.offload=$o && { [ $o == none ] || is_offloaded $n $o; }
  done
done
# on the cpu backend offload is a no-op that says so
if check offload_cpu_noop cpu-fp32-s3-optimizer+params-n2 2 cpu-fp32-s0-n1 --set zero.stage=3 --set zero.offload=optimizer+params; then
  l=$(grep -m1 "^zero.offload = " $TMP/cpu-fp32-s3-optimizer+params-n2.log)
  [[ "$l" == *"on the cpu backend"*"nothing moves"* ]] && pass "offload_cpu_noop_says_so ($l)" \
    || fail "offload_cpu_noop_says_so: no 'zero.offload = ... on the cpu backend: ... nothing moves' line: '$l'"
fi

# ---------------------------------------------------------------- (3) cudasim (its own kernels: compared with itself)
if [ -n "$LONG" ]; then cs="bf16:2:2:none bf16:3:2:optimizer+params bf16:3:1:optimizer bf16:3:2:none fp32:2:2:none
                            fp32:3:2:optimizer+params fp32:3:1:none fp16:2:2:none fp16:3:2:optimizer+params"
else cs="bf16:2:2:none bf16:3:2:optimizer+params"; fi
for x in $cs; do
  IFS=: read p st np o <<< "$x"
  n=cuda-$p-s$st-$o-n$np
  if [ $st == 2 ]; then one $n $np --set device=cudasim --set precision=$p --set zero.stage=2 && row $n "$(hash16 $n)" "(reference)"
  else
    check cudasim_stage3_${o}_${p}_${np}ranks $n $np cuda-$p-s2-none-n2 --set device=cudasim --set precision=$p --set zero.stage=3 \
      --set zero.offload=$o
  fi
done

# ---------------------------------------------------------------- (4) Llama family, recompute, sampling
llama="-c inputs/llama-tiny.cfg --set model.n_layer=3"
one llama-s0-n1 1 $llama --set zero.stage=0 && row llama-s0-n1 "$(hash16 llama-s0-n1)" "(reference)" \
  && check llama_stage3_2ranks llama-s3-n2 2 llama-s0-n1 $llama --set zero.stage=3
if [ -n "$LONG" ]; then
  one llama-bf16-s0-n1 1 $llama --set zero.stage=0 --set precision=bf16 && row llama-bf16-s0-n1 "$(hash16 llama-bf16-s0-n1)" "(reference)" \
    && check llama_stage3_offload_devsim_bf16_3ranks llama-bf16-s3-op-n3 3 llama-bf16-s0-n1 $llama --set zero.stage=3 \
         --set device=devsim --set precision=bf16 --set zero.offload=optimizer+params
  qwen="-c inputs/qwen2-tiny.cfg --set model.n_layer=3"
  one qwen-s0-n1 1 $qwen --set zero.stage=0 && row qwen-s0-n1 "$(hash16 qwen-s0-n1)" "(reference)" \
    && check qwen2_stage3_4ranks qwen-s3-n4 4 qwen-s0-n1 $qwen --set zero.stage=3 \
    && check qwen2_stage3_offload_devsim_2ranks qwen-s3-op-n2 2 qwen-s0-n1 $qwen --set zero.stage=3 --set device=devsim \
         --set zero.offload=optimizer+params
fi
check recompute_layer_stage3_fp32_3ranks cpu-fp32-s3-layer-n3 3 cpu-fp32-s0-n1 --set zero.stage=3 --set train.recompute=layer
if [ -n "$LONG" ]; then
  check recompute_gelu_stage3_bf16_2ranks cpu-bf16-s3-gelu-n2 2 cpu-bf16-s0-n1 --set precision=bf16 --set zero.stage=3 \
    --set train.recompute=gelu
  check recompute_layer_stage3_offload_devsim_bf16 dev-bf16-s3-layer-op-n2 2 cpu-bf16-s0-n1 --set precision=bf16 --set zero.stage=3 \
    --set train.recompute=layer --set device=devsim --set zero.offload=optimizer+params
  check grad_wire16_stage3_bf16_3ranks cpu-bf16-s3-wire16-n3 3 cpu-bf16-s0-n1 --set precision=bf16 --set zero.stage=3 \
    --set zero.grad_wire=precision
  for x in 0:1 3:2 3:4; do
    st=${x%:*} np=${x#*:}
    if [ $st == 0 ]; then one cpu-fp16-s0-n1 1 --set precision=fp16 --set zero.stage=0 && row cpu-fp16-s0-n1 "$(hash16 cpu-fp16-s0-n1)" "(reference)"
    else check stage3_fp16_cpu_${np}ranks cpu-fp16-s3-n$np $np cpu-fp16-s0-n1 --set precision=fp16 --set zero.stage=3; fi
  done
  check offload_stage3_fp16_devsim_2ranks dev-fp16-s3-op-n2 2 cpu-fp16-s0-n1 --set precision=fp16 --set zero.stage=3 --set device=devsim \
    --set zero.offload=optimizer+params
  # 4 layers (an even count: the slots alternate differently) and a layer count above the slots on 3 ranks
  l4="--set model.n_layer=4"
  one cpu-l4-s0-n1 1 $l4 --set zero.stage=0 && row cpu-l4-s0-n1 "$(hash16 cpu-l4-s0-n1)" "(reference)" \
    && check stage3_4layers_3ranks cpu-l4-s3-n3 3 cpu-l4-s0-n1 $l4 --set zero.stage=3 \
    && check stage3_4layers_offload_devsim_bf16 dev-l4-s3-op-n2 2 cpu-l4-s0-n1 $l4 --set zero.stage=3 --set device=devsim \
         --set zero.offload=optimizer+params
fi
sm="--set sample.every=4 --set sample.tokens=12"
if one smp-s2-n2 2 $sm --set zero.stage=2 && one smp-s3-n3 3 $sm --set zero.stage=3; then
  row smp-s2-n2 "$(hash16 smp-s2-n2)" "(reference: sample.every = 4)"
  same sample_stage3_training smp-s3-n3 smp-s2-n2
  a=$R/smp-s2-n2/samples.txt b=$R/smp-s3-n3/samples.txt
  if [ -s $a ] && cmp -s $a $b && [ "$(grep -c '^=== step' $a)" -eq 2 ]; then
    pass "sample_stage3 (samples.txt at steps 4 and 8 identical to stage 2's: $(sed -n 2p $a | cut -c1-40)...)"
  else fail "sample_stage3: samples.txt differ or missing: $(diff $a $b 2>&1 | head -3 | tr '\n' ' ')"; fi
fi
if [ -n "$LONG" ]; then
  one smp-bf16-s2-n1 1 $sm --set precision=bf16 --set zero.stage=2 \
    && check sample_stage3_offload_devsim_bf16_training smp-dev-bf16-s3-op-n2 2 smp-bf16-s2-n1 $sm --set precision=bf16 \
         --set zero.stage=3 --set device=devsim --set zero.offload=optimizer+params \
    && { cmp -s $R/smp-bf16-s2-n1/samples.txt $R/smp-dev-bf16-s3-op-n2/samples.txt \
           && pass "sample_stage3_offload_devsim_bf16 (samples.txt identical to stage 2's on 1 rank)" \
           || fail "sample_stage3_offload_devsim_bf16: samples.txt differ"; }
fi

# ---------------------------------------------------------------- (5) resume across stages, offload, backends, ranks
# resume NAME STRAIGHT "NP_A ARGS_A" "NP_B ARGS_B" STOP: NAME stops after STOP steps with A, resumes with B; == STRAIGHT
resume() {
  local name=$1 ref=$2 a=$3 b=$4 stop=$5
  [ -f $R/$ref/results.json ] || return
  if one $name ${a%% *} ${a#* } --stop-after $stop && one $name ${b%% *} ${b#* } --resume auto; then
    grep -q "resumed from .*step_0*$stop.h5" $TMP/$name.log || fail "${name}_resumed: no 'resumed from ...step_$stop' line"
    same $name $name $ref
    local msg
    msg=$(ckfiles $R/$name/checkpoints/step_00000008.h5 $R/$ref/checkpoints/step_00000008.h5 2>&1) \
      && pass "${name}_files (final checkpoint == $ref's: $msg)" || fail "${name}_files: $msg"
  fi
}
resume resume_s3n3_to_s2n2 cpu-fp32-s0-n1 "3 --set zero.stage=3" "2 --set zero.stage=2" 4
resume resume_s1n4_offload_to_s3n1_offload_params cpu-fp32-s0-n1 "4 --set zero.stage=1 --set device=devsim --set zero.offload=optimizer" \
  "1 --set zero.stage=3 --set device=devsim --set zero.offload=optimizer+params" 4
resume resume_bf16_devsim_s3n2_offload_to_cpu_s2n3 cpu-bf16-s0-n1 \
  "2 --set precision=bf16 --set zero.stage=3 --set device=devsim --set zero.offload=optimizer+params" \
  "3 --set precision=bf16 --set zero.stage=2" 3
if [ -n "$LONG" ]; then
  resume resume_s3n4_to_s3n2 cpu-fp32-s0-n1 "4 --set zero.stage=3" "2 --set zero.stage=3" 5
  resume resume_bf16_s0n1_to_devsim_s3n4_offload cpu-bf16-s0-n1 "1 --set precision=bf16 --set zero.stage=0" \
    "4 --set precision=bf16 --set zero.stage=3 --set device=devsim --set zero.offload=optimizer" 2
  resume resume_bf16_s3n3_to_s3n1_offload_params cpu-bf16-s0-n1 "3 --set precision=bf16 --set zero.stage=3" \
    "1 --set precision=bf16 --set zero.stage=3 --set device=devsim --set zero.offload=optimizer+params" 6
fi
# a stage-3 run's checkpoint is the stage-0 1-rank run's, dataset by dataset (parameters and both moments)
for x in "dev-fp32-s3-optimizer+params-n3 cpu-fp32-s0-n1" "dev-bf16-s3-optimizer+params-n4 cpu-bf16-s0-n1" "cpu-fp32-s3-n4 cpu-fp32-s0-n1"; do
  set -- $x
  [ -f $R/$1/checkpoints/step_00000008.h5 ] || continue
  msg=$(ckfiles $R/$1/checkpoints/step_00000008.h5 $R/$2/checkpoints/step_00000008.h5 2>&1) \
    && pass "ckpt_stage3_files_$1 (step 8 == $2's: $msg)" || fail "ckpt_stage3_files_$1: $msg"
done
# /master only where the precision has master weights, whatever the stage and offload
for x in dev-fp32-s2-optimizer-n2:fp32 dev-fp32-s3-optimizer+params-n3:fp32 cpu-fp32-s3-n4:fp32 dev-bf16-s3-optimizer+params-n4:bf16 \
         dev-bf16-s3-none-n2:bf16; do
  f=$R/${x%:*}/checkpoints/step_00000008.h5
  [ -f $f ] && ckmaster ckpt_master_group_${x%:*} $f ${x#*:}
done

# ---------------------------------------------------------------- (6) config errors
base=$(ls $R/cpu-fp32-s0-n1/checkpoints/step_*.h5 2>/dev/null | tail -1)
E=$TMP/errs
# cfg_error NAME "KEY1 KEY2" ARGS...: exit 2, one line naming both keys, nothing under its run.root
cfg_error() {
  local name=$1 keys=$2 out rc n line k miss=""; shift 2
  out=$(timeout 60 $MPIRUN -np 2 $ZT train $common --set run.root=$E --set run.name=$name "$@" 2>&1); rc=$?
  n=$(echo "$out" | grep -c "ztrain: error"); line=$(echo "$out" | grep -m1 "ztrain: error")
  for k in $keys; do [[ "$line" == *"$k"* ]] || miss="$miss $k"; done
  if [ $rc -eq 2 ] && [ "$n" -eq 1 ] && [ -z "$miss" ] && [ ! -e $E ]; then pass "config_$name (exit 2: $(echo "$line" | cut -c1-150))"
  else fail "config_$name: exit $rc, $n error lines, keys missing:${miss:- none}, run root $( [ -e $E ] && echo created || echo absent): $line"; fi
}
cfg_error stage3_lora "zero.stage lora.enabled" --set zero.stage=3 --set lora.enabled=true --set lora.base=$base
cfg_error offload_lora "zero.offload lora.enabled" --set zero.stage=2 --set zero.offload=optimizer --set lora.enabled=true --set lora.base=$base
cfg_error offload_stage0 "zero.offload zero.stage" --set zero.stage=0 --set zero.offload=optimizer
cfg_error offload_params_stage2 "optimizer+params zero.stage" --set zero.stage=2 --set zero.offload=optimizer+params
cfg_error offload_params_stage1 "optimizer+params zero.stage" --set zero.stage=1 --set zero.offload=optimizer+params
cfg_error stage4 "zero.stage" --set zero.stage=4
# in a config file: file and line named
sed 's/^  stage = 2;/  stage = 4;/' inputs/tiny.cfg > $TMP/stage4.cfg
ln=$(grep -n "^  stage = 4;" $TMP/stage4.cfg | cut -d: -f1)
out=$($ZT train -c $TMP/stage4.cfg --set run.root=$E 2>&1); rc=$?
[ $rc -eq 2 ] && [ "$(echo "$out" | grep -c 'ztrain: error')" -eq 1 ] && echo "$out" | grep -q "stage4.cfg:$ln: .*zero.stage" \
  && pass "config_stage4_file (exit 2: $(echo "$out" | grep 'ztrain: error' | cut -c1-150))" \
  || fail "config_stage4_file: exit $rc: $out"

# ---------------------------------------------------------------- (7) a rank killed while it starts a gather
# processes with tag $1 in their environment, and the ztrain ones among them (as tests/e2e/test_faults.sh)
tagged() {
  local f
  for f in $(grep -lzx "ZT_FAULT_TAG=$1" /proc/[0-9]*/environ 2>/dev/null); do
    f=${f#/proc/}; [ "${f%/environ}" != self ] && echo "${f%/environ}"
  done
}
tagged_ztrain() { local p; for p in $(tagged $1); do [[ "$(cat /proc/$p/comm 2>/dev/null)" == ztrain* ]] && echo $p; done; }
cores() { ls core core.* $TMP/core* 2>/dev/null | wc -l; }
KLIMIT=60 KBOUND=30
# kill_gather NAME NP K,R STRAIGHT ARGS...: 4 steps (checkpoints at 2 and 4), then --resume auto with rank R told to die
# at its K-th gather; then --resume auto again must finish == STRAIGHT
kill_gather() {
  local name=$1 np=$2 kr=$3 ref=$4; shift 4
  local ck=$R/$name/checkpoints tag=z3k$$-$name c0 t1 rc dt left before after bad="" f l
  [ -f $R/$ref/results.json ] || return
  one $name $np "$@" --set checkpoint.every=2 --set checkpoint.keep=0 --stop-after 4 || return
  before=$(cd $R/$name && sha256sum config.cfg checkpoints/step_00000002.h5 checkpoints/step_00000004.h5 results.json 2>/dev/null)
  c0=$(cores); t1=${EPOCHREALTIME/,/.}
  ZT_FAULT_TAG=$tag ZTRAIN_TEST_KILL_GATHER=$kr timeout -k 3 $KLIMIT $MPIRUN -x ZT_FAULT_TAG -x ZTRAIN_TEST_KILL_GATHER -np $np \
    $ZT train $common --set run.name=$name "$@" --set checkpoint.every=2 --set checkpoint.keep=0 --resume auto > $TMP/$name.kill.log 2>&1
  rc=$?
  dt=$(awk -v a=$t1 -v b=${EPOCHREALTIME/,/.} 'BEGIN { printf "%.1f", b - a }')
  for _ in $(seq 1 30); do left=$(tagged_ztrain $tag); [ -z "$left" ] && break; sleep 0.1; done
  [ -n "$left" ] && kill -9 $left 2>/dev/null
  after=$(cd $R/$name && sha256sum config.cfg checkpoints/step_00000002.h5 checkpoints/step_00000004.h5 results.json 2>/dev/null)
  for f in $ck/step_*.h5; do $H verify $f > /dev/null 2>&1 || bad="$bad $(basename $f) incomplete;"; done
  l=$(cat $ck/latest 2>/dev/null)
  { [ -n "$l" ] && $H verify $ck/$l > /dev/null 2>&1; } || bad="$bad latest '$l' not a complete file;"
  local died=$(tail -1 $R/$name/metrics.jsonl | $PY -c 'import json,sys; print(json.loads(sys.stdin.read())["step"])' 2>/dev/null)
  if [ $rc -eq 124 ] || [ $rc -eq 137 -a "${dt%.*}" -ge $KLIMIT ]; then fail "kill_gather_$name: hang: timed out after $KLIMIT s"
  elif [ $rc -eq 0 ]; then fail "kill_gather_$name: exit 0 (the hook did not fire? $(grep -c '^step' $TMP/$name.kill.log) steps logged)"
  elif [ -n "$left" ]; then fail "kill_gather_$name: ranks still running after mpirun returned: $left"
  elif [ "${dt%.*}" -ge $KBOUND ]; then fail "kill_gather_$name: took $dt s (bound $KBOUND s)"
  elif ! grep -qE "Exit code: *137|exited on signal" $TMP/$name.kill.log; then fail "kill_gather_$name: mpirun does not report the rank's exit 137: $(tail -3 $TMP/$name.kill.log | tr '\n' ' ')"
  elif grep -q "^done: " $TMP/$name.kill.log; then fail "kill_gather_$name: the run finished although rank ${kr#*,} died"
  elif [ "$(cores)" -ne "$c0" ]; then fail "kill_gather_$name: a core file appeared"
  elif [ "$before" != "$after" ]; then fail "kill_gather_$name: files changed: $(diff <(echo "$before") <(echo "$after") | grep '^[<>]' | head -2 | tr '\n' ' ')"
  elif [ -n "$bad" ]; then fail "kill_gather_$name: $bad"
  else pass "kill_gather_$name (ZTRAIN_TEST_KILL_GATHER=$kr after step ${died:-?}: exit $rc in $dt s, every rank gone, checkpoints of steps 2 and 4 and config.cfg unchanged, $(ls $ck | grep -c 'step_.*\.h5$') step files complete, latest = $l)"; fi
  one $name $np "$@" --set checkpoint.every=2 --set checkpoint.keep=0 --resume auto && same kill_gather_${name}_resume_exact $name $ref
}
kill_gather k-cpu-fp32-n2 2 10,1 cpu-fp32-s0-n1 --set zero.stage=3
kill_gather k-dev-bf16-op-n3 3 0,0 cpu-bf16-s0-n1 --set zero.stage=3 --set precision=bf16 --set device=devsim --set zero.offload=optimizer+params
if [ -n "$LONG" ]; then
  kill_gather k-cpu-fp32-n4-late 4 20,3 cpu-fp32-s0-n1 --set zero.stage=3
  kill_gather k-dev-fp32-opt-n2-late 2 45,0 cpu-fp32-s0-n1 --set zero.stage=3 --set device=devsim --set zero.offload=optimizer
  kill_gather k-cuda-bf16-n2 2 7,1 cuda-bf16-s2-none-n2 --set zero.stage=3 --set precision=bf16 --set device=cudasim
fi

# ---------------------------------------------------------------- (8) d6 (30M parameters), make test-long only
if [ -n "$LONG" ]; then
  $PY tests/helpers/make_data.py $TMP/d6 50257 40000 > /dev/null
  d6="-c inputs/d6.cfg --set data.train=$TMP/d6/train.bin --set data.val=$TMP/d6/val.bin --set train.steps=3 --set train.micro_batch=2
      --set train.global_batch=8 --set train.seq_len=64 --set eval.every=3 --set eval.sequences=4 --set sample.every=0
      --set train.warmup_steps=1"
  one d6-s0-n1 1 $d6 --set zero.stage=0 && row d6-s0-n1 "$(hash16 d6-s0-n1)" "(reference)" \
    && check d6_stage3_2ranks d6-s3-n2 2 d6-s0-n1 $d6 --set zero.stage=3 \
    && check d6_stage3_offload_devsim_1rank d6-s3-op-n1 1 d6-s0-n1 $d6 --set zero.stage=3 --set device=devsim --set zero.offload=optimizer+params
fi

echo "bit-identity table (run, params_hash prefix, compared with); $(( $(date +%s) - T0 )) s in all"
cat $TABLE
finish
