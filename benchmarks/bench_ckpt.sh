#!/usr/bin/env bash
# bench_ckpt.sh — checkpoint write and read bandwidth of GPT-2 124M with its Adam state (params + exp_avg +
# exp_avg_sq, fp32: 1.49 GB per file) on 1, 2 and 4 ranks, each paired with `dd` moving the same number of
# bytes to / from the same directory within seconds of it (bench_ckpt --dd):
#   write: zt_ckpt_save (each rank's pieces, fdatasync, rename, `latest`)  vs  dd conv=fdatasync
#          and dd oflag=direct conv=fdatasync (row write/D: O_DIRECT, as ztrain writes)
#   read:  zt_ckpt_load (shard read + NaN/Inf check + all-gather of the parameters) of the file, cold  vs
#          dd of the same file, cold, alternating which reads first (on this VM the first use of memory the
#          host has not backed is slow, and a read right after another reuses its page-cache memory)
# One warm-up round, then REPS rounds. This disk's own speed swings by 2x within a minute (dd alone: 0.9 to 2.7 s for the same read),
# so each round's ztrain/dd ratio is formed from runs seconds apart and the table reports the MEDIAN
# ratio over rounds (and median times); #wrong counts buffers that differ after the load (must be 0).
# Reads: the first reader of a round pays for the page-cache memory the VM host backs and the second reuses it,
# so the read ratio is the median over pairs of rounds (ztrain first, then dd first) of the pair's geometric
# mean; the medians of each order alone follow the per-round list ("zt 1st" / "dd 1st").
#   benchmarks/bench_ckpt.sh [--json]      env: CFG (inputs/gpt2-124m.cfg), DIR (build/bench-ckpt), REPS (6),
#                                               RANKS ("1 2 4")
# Run it alone: the disk and the two cores are what is measured.
set -eu
cd "$(dirname "$0")/.."
CFG=${CFG:-inputs/gpt2-124m.cfg}
DIR=${DIR:-build/bench-ckpt}
REPS=${REPS:-6}
RANKS=${RANKS:-"1 2 4"}
JSON=${1:-}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
BIN=build/bench/bench_ckpt
[ -x $BIN ] || make --no-print-directory build-all >/dev/null
mkdir -p "$DIR"
trap 'rm -rf "$DIR"' EXIT

fs=$(df -T "$DIR" | awk 'NR == 2 { print $2 " on " $1 }')
rows=()
for np in $RANKS; do
  rows+=("$(mpirun --oversubscribe --bind-to none -np $np $BIN -c $CFG --dir "$DIR" --reps $REPS --dd --json 2> "$DIR/rounds.$np")")
  rm -rf "$DIR"/step_* "$DIR"/latest
done

if [ "$JSON" == "--json" ]; then printf '%s\n' "${rows[@]}"; exit 0; fi
printf '%s\n' "${rows[@]}" | python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin if l.strip()]
r0 = rows[0]
print("# ztrain checkpoint benchmark: %s (%d params) + Adam exp_avg, exp_avg_sq, fp32: %d bytes per file" % (sys.argv[1], r0["params"], r0["bytes"]))
print("# dir %s (%s); 1 warm-up + %d rounds, medians. Each round: ztrain save; the file read cold by ztrain (load +" % (sys.argv[2], sys.argv[3], r0["rounds"]))
print("# all-gather) and by dd bs=16M, alternating which goes first; dd writes of the same bytes: write = conv=fdatasync,")
print("# write/D = oflag=direct (as ztrain writes)")
print("#")
print("#%6s %7s %11s %9s %9s %9s %9s %10s %7s  %s" % ("ranks", "op", "bytes", "ztrain", "ztrain", "dd", "dd", "ztrain/dd", "#wrong", "ztrain/dd per round (%)"))
print("#%6s %7s %11s %9s %9s %9s %9s %10s %7s" % ("", "", "(B)", "(s)", "(GB/s)", "(s)", "(GB/s)", "(%)", ""))
ops = (("write", "write_s", "dd_write_s", "write_frac_dd"), ("write/D", "write_s", "dd_direct_write_s", "write_frac_dd_direct"),
       ("read", "read_s", "dd_read_s", "read_frac_dd"))
for r in rows:
    for op, zk, dk, qk in ops:
        t, d, q = r[zk], r[dk], r[qk]
        per = " ".join("%.0f" % (100 * x) for x in r[qk + "_rounds"])
        if op == "read" and "read_frac_dd_ztrain_first" in r:
            per += "  (zt 1st %.0f%%, dd 1st %.0f%%)" % (100 * r["read_frac_dd_ztrain_first"], 100 * r["read_frac_dd_dd_first"])
        print(" %6d %7s %11d %9.3f %9.3f %9.3f %9.3f %10.1f %7d  %s" % (r["ranks"], op, r["bytes"], t, r["bytes"] / t / 1e9, d, r["bytes"] / d / 1e9, 100 * q, r["wrong"], per))
print("#")
for op, zk, dk, qk in ops:
    q = [100 * r[qk] for r in rows]
    how = "median over pairs of rounds, both orders" if op == "read" else "median of rounds"
    print("# %s: ztrain / dd bandwidth (%s) %.0f%% on average, %.0f%% at worst" % (op, how, sum(q) / len(q), min(q)))
print("# #wrong total: %d" % sum(r["wrong"] for r in rows))
' "$CFG" "$DIR" "$fs"
