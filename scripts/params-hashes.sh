#!/usr/bin/env bash
# params-hashes.sh — the final params_hash of a fixed matrix of short training runs, one line per run:
#   NAME  sha256:...
# A refactor that must not change results runs it before and after and diffs the two outputs:
#   scripts/params-hashes.sh [ZTRAIN_BINARY] > before.txt ... > after.txt; diff before.txt after.txt
# The matrix: tiny and d6 (synthetic data), 1/2/4 ranks, fp32 and bf16, recompute gelu/layer, 2-byte activations and
# parameters, LoRA and QLoRA (on a base trained by the same binary), on the cpu, devsim and cudasim backends.
set -u
ZT=$(realpath "${1:-./ztrain}")
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ZTRAIN_TEST_SGEMM_N=256
MPIRUN="mpirun --oversubscribe --bind-to none"
W=$(mktemp -d /tmp/zt-hashes.XXXXXX)
trap 'rm -rf "$W"' EXIT
/usr/bin/python3 tests/helpers/make_data.py "$W/tiny" 256 40000 > /dev/null || exit 2
/usr/bin/python3 tests/helpers/make_data.py "$W/d6" 50257 40000 > /dev/null || exit 2
tiny="-c inputs/tiny.cfg --set data.train=$W/tiny/train.bin --set data.val=$W/tiny/val.bin --set train.steps=6
      --set train.micro_batch=2 --set train.global_batch=8 --set eval.every=3"
d6="-c inputs/d6.cfg --set data.train=$W/d6/train.bin --set data.val=$W/d6/val.bin --set train.steps=3
    --set train.micro_batch=2 --set train.global_batch=8 --set train.seq_len=64 --set eval.every=3 --set eval.sequences=4
    --set sample.every=0 --set train.warmup_steps=1 --set train.threads=1"
# run NAME NP MODEL_ARGS [--set ...]: prints NAME and its params_hash (or the failure)
run() {
  local name=$1 np=$2 model=$3; shift 3
  if $MPIRUN -np "$np" "$ZT" train $model --set run.root="$W/runs" --set run.session=h --set run.name="$name" \
       --set checkpoint.keep=1 --set train.log_every=1 "$@" > "$W/$name.log" 2>&1; then
    printf '%-28s %s\n' "$name" "$(sed -n 's/^params_hash //p' "$W/$name.log")"
  else
    printf '%-28s FAILED: %s\n' "$name" "$(grep -m1 'error' "$W/$name.log" || tail -1 "$W/$name.log")"
  fi
}
for m in tiny d6; do
  for np in 1 2 4; do
    for p in fp32 bf16; do run "$m-${np}r-$p" $np "${!m}" --set precision=$p; done
  done
done
run tiny-2r-bf16-gelu 2 "$tiny" --set precision=bf16 --set train.recompute=gelu
run tiny-2r-bf16-layer 2 "$tiny" --set precision=bf16 --set train.recompute=layer
run tiny-1r-fp32-layer 1 "$tiny" --set train.recompute=layer
run tiny-1r-bf16-act32 1 "$tiny" --set precision=bf16 --set train.act_storage=fp32
run tiny-2r-bf16-param16 2 "$tiny" --set precision=bf16 --set train.param_storage=precision
run tiny-2r-fp16-param16 2 "$tiny" --set precision=fp16 --set train.param_storage=precision
run tiny-2r-bf16-stage0 2 "$tiny" --set precision=bf16 --set zero.stage=0
run tiny-2r-bf16-stage1 2 "$tiny" --set precision=bf16 --set zero.stage=1
run tiny-2r-fp16 2 "$tiny" --set precision=fp16
# LoRA / QLoRA on a base the same binary trained (its last checkpoint)
run tinybase 1 "$tiny" --set train.steps=6
tbase=$(ls "$W"/runs/h/tinybase/checkpoints/*.h5 | tail -1)
run d6base 1 "$d6" --set train.steps=1
dbase=$(ls "$W"/runs/h/d6base/checkpoints/*.h5 | tail -1)
lora="--set lora.enabled=true --set lora.rank=4 --set lora.alpha=8 --set lora.targets=all"
for np in 1 2; do
  for p in fp32 bf16; do
    run "tiny-lora-${np}r-$p" $np "$tiny" $lora --set lora.base="$tbase" --set precision=$p
    run "tiny-qlora-${np}r-$p" $np "$tiny" $lora --set lora.base="$tbase" --set precision=$p --set lora.quant=nf4_dq \
        --set lora.dropout=0.1
  done
done
run tiny-qlora-int8-1r 1 "$tiny" $lora --set lora.base="$tbase" --set lora.quant=int8
run tiny-lora-rslora-2r 2 "$tiny" $lora --set lora.base="$tbase" --set lora.rslora=true
run d6-lora-1r-fp32 1 "$d6" $lora --set lora.base="$dbase"
run d6-qlora-2r-bf16 2 "$d6" $lora --set lora.base="$dbase" --set lora.quant=nf4 --set precision=bf16
# the device backends: devsim (the cpu ops behind device memory) and cudasim (the CUDA kernels under the harness)
for dev in devsim cudasim; do
  for np in 1 2; do
    for p in fp32 bf16; do run "tiny-$dev-${np}r-$p" $np "$tiny" --set device=$dev --set precision=$p; done
  done
  run "tiny-$dev-qlora-2r-bf16" 2 "$tiny" --set device=$dev $lora --set lora.base="$tbase" --set precision=bf16 \
      --set lora.quant=nf4_dq --set lora.dropout=0.1
done
run tiny-cudasim-2r-bf16-fp16 2 "$tiny" --set device=cudasim --set precision=fp16
run tiny-cudasim-1r-bf16-gelu 1 "$tiny" --set device=cudasim --set precision=bf16 --set train.recompute=gelu
