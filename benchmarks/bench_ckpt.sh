#!/usr/bin/env bash
# bench_ckpt.sh — checkpoint write and read bandwidth of GPT-2 124M with its Adam state (params + exp_avg +
# exp_avg_sq, fp32: 1.49 GB per file) on 1, 2 and 4 ranks, each next to `dd` moving the same number of bytes
# to / from the same directory in the same run:
#   write: zt_ckpt_save (collective parallel-HDF5 write, fsync, rename, `latest`)  vs  dd conv=fdatasync
#   read:  zt_ckpt_load (shard read + all-gather of the parameters) after dropping the file's page cache
#          vs  dd of the dd file after dropping its page cache (iflag=nocache)
# Best of REPS for both; the #wrong column counts buffers that differ after the load (must be 0).
#   benchmarks/bench_ckpt.sh [--json]      env: CFG (inputs/gpt2-124m.cfg), DIR (build/bench-ckpt), REPS (3),
#                                               RANKS ("1 2 4")
# Run it alone: the disk and the two cores are what is measured.
set -eu
cd "$(dirname "$0")/.."
CFG=${CFG:-inputs/gpt2-124m.cfg}
DIR=${DIR:-build/bench-ckpt}
REPS=${REPS:-3}
RANKS=${RANKS:-"1 2 4"}
JSON=${1:-}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
BIN=build/bench/bench_ckpt
[ -x $BIN ] || make --no-print-directory build-all >/dev/null
mkdir -p "$DIR"
DD="$DIR/dd.bin"
trap 'rm -rf "$DIR"' EXIT

# seconds of one dd run, from its summary line
dd_s() { dd "$@" 2>&1 | awk '/copied/ { for (i = 1; i <= NF; i++) if ($i ~ /^s,?$/) print $(i-1) }'; }
min() { printf '%s\n' "$@" | sort -g | head -1; }

fs=$(df -T "$DIR" | awk 'NR == 2 { print $2 " on " $1 }')
rows=()
for np in $RANKS; do
  j=$(mpirun --oversubscribe --bind-to none -np $np $BIN -c $CFG --dir "$DIR" --reps $REPS --json)
  get() { echo "$j" | sed -E "s/.*\"$1\": ([^,}]*).*/\1/"; }
  bytes=$(get bytes); ws=$(get write_s); rs=$(get read_s); wrong=$(get wrong); params=$(get params)
  rm -rf "$DIR"/step_* "$DIR"/latest
  dw=(); dr=()
  for _ in $(seq 1 $REPS); do
    dw+=($(dd_s if=/dev/zero of="$DD" bs=16M count=$bytes iflag=count_bytes conv=fdatasync))
    dd if="$DD" iflag=nocache count=0 status=none
    dr+=($(dd_s if="$DD" of=/dev/null bs=16M))
  done
  rm -f "$DD"
  rows+=("$np write $bytes $ws $(min "${dw[@]}") $wrong" "$np read $bytes $rs $(min "${dr[@]}") $wrong")
done

if [ "$JSON" == "--json" ]; then
  for r in "${rows[@]}"; do
    set -- $r
    awk -v n=$1 -v op=$2 -v b=$3 -v t=$4 -v d=$5 -v w=$6 'BEGIN { printf "{\"ranks\": %d, \"op\": \"%s\", \"bytes\": %d, \"time_s\": %.4f, \"GBps\": %.4f, \"dd_time_s\": %.4f, \"dd_GBps\": %.4f, \"frac_dd\": %.4f, \"wrong\": %d}\n", n, op, b, t, b / t / 1e9, d, b / d / 1e9, d / t, w }'
  done
  exit 0
fi
echo "# ztrain checkpoint benchmark: $CFG ($params params) + Adam exp_avg, exp_avg_sq, fp32: $bytes bytes per file"
echo "# dir $DIR ($fs), best of $REPS; dd moves the same bytes there (bs=16M; write conv=fdatasync; read cold)"
echo "#"
printf "#%6s %6s %12s %9s %9s %9s %9s %10s %7s\n" ranks op bytes ztrain ztrain dd dd ztrain/dd "#wrong"
printf "#%6s %6s %12s %9s %9s %9s %9s %10s %7s\n" "" "" "(B)" "(s)" "(GB/s)" "(s)" "(GB/s)" "(%)" ""
allw=0
for r in "${rows[@]}"; do
  set -- $r
  awk -v n=$1 -v op=$2 -v b=$3 -v t=$4 -v d=$5 -v w=$6 \
    'BEGIN { printf " %6d %6s %12d %9.3f %9.3f %9.3f %9.3f %10.1f %7d\n", n, op, b, t, b / t / 1e9, d, b / d / 1e9, 100 * d / t, w }'
  allw=$((allw + $6))
done
echo "#"
for op in write read; do
  printf '%s\n' "${rows[@]}" | awk -v op=$op '$2 == op { s += 100 * $5 / $4; if (min == "" || 100 * $5 / $4 < min) min = 100 * $5 / $4; n++ }
    END { printf "# %s: ztrain / dd bandwidth %.0f%% on average, %.0f%% at worst (target >= 50%%)\n", op, s / n, min }'
done
echo "# #wrong total: $allw"
