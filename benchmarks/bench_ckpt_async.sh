#!/usr/bin/env bash
# bench_ckpt_async.sh — training time lost per checkpoint, synchronous vs asynchronous (checkpoint.async),
# for d6 and GPT-2 124M (fp32, with Adam state) on 1 and 2 ranks. Each run trains STEPS steps with a
# checkpoint every EVERY steps on synthetic tokens (tests/helpers/make_data.py, vocab 50257); results.json gives
# ckpt_stall_s (seconds the training loop waited for saves, summed) and ckpt_saves; the stall per save is
# their ratio. The synchronous stall per save is the synchronous write time; the asynchronous one is the
# copy into staging plus the HDF5 layout plus any wait for a write still in flight.
#   benchmarks/bench_ckpt_async.sh [--configs d6,gpt2-124m] [--ranks 1,2] [--steps S] [--every K]
# Run it alone: the disk and the two cores are what is measured.
set -u
cd "$(dirname "$0")/.."
ZT=${ZTRAIN:-./ztrain}
PY=/usr/bin/python3
CONFIGS=d6,gpt2-124m RANKS=1,2 STEPS=9 EVERY=3
while [ $# -gt 0 ]; do
  case $1 in
    --configs) CONFIGS=$2; shift ;;
    --ranks) RANKS=$2; shift ;;
    --steps) STEPS=$2; shift ;;
    --every) EVERY=$2; shift ;;
    *) echo "usage: $0 [--configs d6,gpt2-124m] [--ranks 1,2] [--steps S] [--every K]" >&2; exit 2 ;;
  esac
  shift
done
[ -x "$ZT" ] || { echo "bench_ckpt_async.sh: $ZT missing: run make first" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ROOT=$(mktemp -d "${DIR:-build}/zt-ckasync.XXXXXX")
[ -n "${KEEP:-}" ] || trap 'rm -rf "$ROOT"' EXIT
"$PY" tests/helpers/make_data.py "$ROOT/data" 50257 400000 > /dev/null || { echo "bench_ckpt_async.sh: make_data.py failed" >&2; exit 1; }
printf "# %-10s %5s %6s %12s %14s %14s %8s\n" config ranks saves "ckpt (MB)" "sync (s/save)" "async (s/save)" "async/sync"
for cfg in ${CONFIGS//,/ }; do
  for np in ${RANKS//,/ }; do
    declare -A stall=()
    for mode in false true; do
      name=$cfg-$np-$mode
      mpirun --oversubscribe --bind-to none -np $np $ZT train -c inputs/$cfg.cfg --set precision=fp32 --set device=cpu \
        --set train.micro_batch=1 --set train.global_batch=$np --set train.seq_len=64 --set train.steps=$STEPS \
        --set train.warmup_steps=1 --set checkpoint.every=$EVERY --set checkpoint.keep=2 --set checkpoint.async=$mode \
        --set eval.every=0 --set data.val= --set data.train=$ROOT/data/train.bin --set train.log_every=1 \
        --set run.root=$ROOT --set run.session=b --set run.name=$name > $ROOT/$name.log 2>&1 \
        || { echo "bench_ckpt_async.sh: run $name failed: $(tail -2 $ROOT/$name.log)" >&2; exit 1; }
      stall[$mode]=$("$PY" -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["ckpt_stall_s"] / r["ckpt_saves"], r["ckpt_saves"], r["params"])' $ROOT/b/$name/results.json)
    done
    set -- ${stall[false]}; s=$1; saves=$2; params=$3
    set -- ${stall[true]}; a=$1
    awk -v c=$cfg -v n=$np -v k=$saves -v p=$params -v s=$s -v a=$a \
      'BEGIN { printf "  %-10s %5d %6d %12.0f %14.3f %14.3f %7.1f%%\n", c, n, k, 3 * p * 4 / 1e6, s, a, 100 * a / s }'
  done
done
