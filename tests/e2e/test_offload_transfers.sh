#!/usr/bin/env bash
# zero.offload's host <-> device traffic, counted by devsim (results.json h2d_bytes / d2h_bytes: every to_device /
# to_host of the process). Each update of an offloaded run copies the reduced gradient shard down (S fp32) with the
# step's 5 scalars (ZT_HYPER_N floats: learning rate, bias corrections, gradient and loss scale) and the
# published parameters up: S fp32 at stages 1-2 (rounded on the host in bf16), S fp32 (fp32) or S 2-byte words
# (bf16) into the stage-3 shard. So between a 4-step and a 6-step run, offload adds exactly 2 (S x 4 + 20) bytes down and
# 2 S x (4 | 2) bytes up per rank compared with the same two runs without offload (S = this rank's shard).
#  offload_traffic_*  the measured extra bytes equal that count, and the runs' params_hash equal the run without
set -u
cd "$(dirname "$0")/../.."
. tests/helpers/lib.sh
need_tiny_data
common="-c inputs/tiny.cfg --set device=devsim --set run.root=$TMP --set run.session=o --set eval.every=0
        --set checkpoint.every=0 --set train.micro_batch=2 --set train.global_batch=8 --set train.warmup_steps=1"
# run NAME NP STEPS [--set ...]: the run's h2d, d2h and params_hash
run() {
  local name=$1 np=$2 steps=$3; shift 3
  $MPIRUN -np $np $ZT train $common --set train.steps=$steps --set run.name=$name "$@" > $TMP/$name.log 2>&1 \
    || { echo "failed: $(grep -m1 error $TMP/$name.log)"; return; }
  echo "$(result $TMP/o/$name h2d_bytes) $(result $TMP/o/$name d2h_bytes) $(result $TMP/o/$name params_hash)"
}
for spec in "1 2 fp32 optimizer 4" "2 2 bf16 optimizer 4" "2 3 fp32 optimizer 4" "2 3 bf16 optimizer 2"; do
  set -- $spec
  np=$1 stage=$2 prec=$3 off=$4 up=$5
  S=$($PY -c "import sys; n, N = int(sys.argv[1]), int(sys.argv[2]); u = N * 4096; print((n + u - 1) // u * u // N)" \
      120576 $np) # tiny.cfg: 120,576 parameters
  name="$np-$stage-$prec"
  set -- --set zero.stage=$stage --set precision=$prec
  a=($(run n4-$name $np 4 "$@")); b=($(run n6-$name $np 6 "$@"))
  c=($(run o4-$name $np 4 "$@" --set zero.offload=$off)); d=($(run o6-$name $np 6 "$@" --set zero.offload=$off))
  if [ ${#a[@]} != 3 ] || [ ${#b[@]} != 3 ] || [ ${#c[@]} != 3 ] || [ ${#d[@]} != 3 ]; then
    fail "offload_traffic_$name: a run failed: ${a[*]} | ${b[*]} | ${c[*]} | ${d[*]}"; continue
  fi
  up_x=$($PY -c "print(int((${d[0]} - ${c[0]}) - (${b[0]} - ${a[0]})))")
  down_x=$($PY -c "print(int((${d[1]} - ${c[1]}) - (${b[1]} - ${a[1]})))")
  want_up=$((2 * S * up)) want_down=$((2 * (S * 4 + 20)))
  if [ "$up_x" = "$want_up" ] && [ "$down_x" = "$want_down" ] && [ "${b[2]}" = "${d[2]}" ]; then
    pass "offload_traffic_$name (2 extra steps: +$down_x bytes down, +$up_x up = 2 x (S x 4 + 20), 2 x S x $up; S = $S; params_hash equal)"
  else
    fail "offload_traffic_$name: down +$down_x (want $want_down), up +$up_x (want $want_up), hashes ${b[2]:0:16} ${d[2]:0:16}"
  fi
done
finish
