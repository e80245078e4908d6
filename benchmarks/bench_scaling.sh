#!/usr/bin/env bash
# bench_scaling.sh — weak scaling of `ztrain train` on d6 (inputs/d6.cfg): a fixed micro_batch per rank,
# global_batch = micro_batch x ranks, 1 thread per rank (train.threads=1), ZeRO-2; 1 rank vs N ranks
# (default 2, one per core, mpirun --bind-to core) with zero.reduce=ordered (bitwise N == 1, docs/design.md
# section 4) and zero.reduce=native (MPI's own rooted reduces to the owners), on synthetic tokens from
# tests/helpers/make_data.py (vocab 50257). Each run's metrics.jsonl gives the per-step times: the first step
# is skipped (page faults, BLAS buffers) and the median of the rest is taken; results.json gives the
# gradient-reduction time left exposed after overlap with backward. Runs go to a temporary run.root,
# deleted at the end.
#   benchmarks/bench_scaling.sh [--ranks N] [--micro-batch B] [--seq T] [--steps S] [--reps R]
#                               [--bind core|none] [--json]
# Efficiency = tokens/s per rank at N ranks / tokens/s of the 1-rank run (target >= 0.95). With
# --reps R the three runs are repeated in turn R times and each keeps its best median (less exposed
# to other work on the machine). The load average is printed before and after, and for each run the
# share of CPU time other processes took while it ran.
set -u
cd "$(dirname "$0")/.."
ZT=${ZTRAIN:-./ztrain}
PY=/usr/bin/python3
RANKS=2 MB=8 T=128 STEPS=10 REPS=1 BIND=core JSON=0
while [ $# -gt 0 ]; do
  case $1 in
    --ranks) RANKS=$2; shift ;;
    --micro-batch) MB=$2; shift ;;
    --seq) T=$2; shift ;;
    --steps) STEPS=$2; shift ;;
    --reps) REPS=$2; shift ;;
    --bind) BIND=$2; shift ;;
    --json) JSON=1 ;;
    *) echo "usage: $0 [--ranks N] [--micro-batch B] [--seq T] [--steps S] [--reps R] [--bind core|none] [--json]" >&2
       exit 2 ;;
  esac
  shift
done
[ -x "$ZT" ] || { echo "bench_scaling.sh: $ZT missing: run make first" >&2; exit 2; }
[ "$STEPS" -ge 3 ] || { echo "bench_scaling.sh: --steps must be >= 3 (the first step is skipped)" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
MPIRUN="mpirun --bind-to $BIND -x OMP_NUM_THREADS"
[ "$RANKS" -gt "$(nproc)" ] && MPIRUN="$MPIRUN --oversubscribe"
ROOT=$(mktemp -d /tmp/zt-scaling.XXXXXX)
trap 'rm -rf "$ROOT"' EXIT
# enough tokens that no run wraps around: (steps + 1) x global batch x (T + 1) at the most ranks, x 2
NTOK=$(( (STEPS + 1) * MB * RANKS * (T + 1) * 2 + 100000 ))
tests/helpers/make_data.py "$ROOT/data" 50257 $NTOK > /dev/null || { echo "bench_scaling.sh: make_data.py failed" >&2; exit 1; }
. benchmarks/lib_load.sh # load, cpu_snap, other_pct
LOAD0=$(load)
common="-c inputs/d6.cfg --set device=cpu --set precision=fp32 --set train.threads=1 --set train.micro_batch=$MB
        --set train.seq_len=$T --set train.steps=$STEPS --set train.warmup_steps=1 --set train.log_every=1
        --set zero.stage=2 --set eval.every=0 --set sample.every=0 --set checkpoint.every=0
        --set data.train=$ROOT/data/train.bin --set data.val= --set data.tokenizer=
        --set run.root=$ROOT/runs --set run.session=scaling"
run() { # name np reduce
  local name=$1 np=$2 reduce=$3
  [ $JSON = 1 ] || echo "# run $name: $np rank(s), zero.reduce=$reduce ..." >&2
  cpu_snap "$ROOT"; local s0=$SNAP
  if ! $MPIRUN -np "$np" "$ZT" train $common --set train.global_batch=$((MB * np)) --set zero.reduce=$reduce \
       --set run.name=$name > "$ROOT/$name.log" 2>&1; then
    echo "bench_scaling.sh: run $name failed:" >&2; tail -5 "$ROOT/$name.log" >&2; exit 1
  fi
  cpu_snap "$ROOT"; other_pct "$s0" "$SNAP" > "$ROOT/$name.other"
}
for rep in $(seq 1 "$REPS"); do
  run r1-$rep 1 ordered
  run o$RANKS-$rep "$RANKS" ordered
  run n$RANKS-$rep "$RANKS" native
done
LOAD1=$(load)
$PY - "$ROOT" "$RANKS" "$MB" "$T" "$REPS" "$JSON" "$LOAD0" "$LOAD1" "$BIND" <<'PYEOF'
import json, statistics, sys
root, N, MB, T, reps, as_json, load0, load1, bind = sys.argv[1], *map(int, sys.argv[2:6]), sys.argv[6] == "1", \
    sys.argv[7], sys.argv[8], sys.argv[9]
def one(name):
    d = f"{root}/runs/scaling/{name}"
    steps = [json.loads(l) for l in open(f"{d}/metrics.jsonl")]
    res = json.load(open(f"{d}/results.json"))
    ms = [s["step_ms"] for s in steps if s["step"] > 1]
    return {"median_ms": statistics.median(ms), "min_ms": min(ms), "max_ms": max(ms), "steps_timed": len(ms),
            "comm_exposed_s_per_step": (res["comm_s"] + res.get("comm_exposed_s", 0)) / res["steps"],
            "comm_in_flight_s_per_step": res.get("comm_in_flight_s", 0) / res["steps"],
            "comm_hidden_frac": res.get("comm_hidden_frac", 0), "final_loss": res["final_loss"],
            "peak_rss_bytes": res["peak_rss_bytes"], "layout": res["layout"], "blas": res["blas"],
            "threads_per_rank": res["threads_per_rank"], "zero_stage": res["zero_stage"],
            "other_cpu_pct": float(open(f"{root}/{name}.other").read())}
def best(prefix):
    runs = [one(f"{prefix}-{r}") for r in range(1, reps + 1)]
    return min(runs, key=lambda x: x["median_ms"])
rows = []
for prefix, n, reduce in (("r1", 1, "ordered"), (f"o{N}", N, "ordered"), (f"n{N}", N, "native")):
    b = best(prefix)
    b.update(ranks=n, reduce=reduce if n > 1 else "(none: 1 rank)", micro_batch=MB, global_batch=MB * n, seq_len=T)
    b["tokens_per_s"] = MB * n * T / (b["median_ms"] * 1e-3)
    b["tokens_per_s_per_rank"] = b["tokens_per_s"] / n
    rows.append(b)
base = rows[0]["tokens_per_s_per_rank"]
for r in rows:
    r["efficiency"] = r["tokens_per_s_per_rank"] / base
eff_o, eff_n = rows[1]["efficiency"], rows[2]["efficiency"]
summary = {"efficiency_ordered": eff_o, "efficiency_native": eff_n, "target": 0.95,
           "ordered_vs_native_step_time": rows[1]["median_ms"] / rows[2]["median_ms"],
           "load_before": load0, "load_after": load1, "bind": bind, "reps": reps}
if as_json:
    print(json.dumps({"config": "inputs/d6.cfg", "rows": rows, "summary": summary}))
    sys.exit(0)
print(f"# ztrain weak scaling: d6 (inputs/d6.cfg), ZeRO-{rows[0]['zero_stage']}, micro_batch {MB} x seq {T} per rank, "
      f"{rows[0]['threads_per_rank']} thread/rank, mpirun --bind-to {bind}, {rows[0]['blas']}")
print(f"# median step time of steps 2.. (first skipped), best of {reps} run(s); load average before {load0}, "
      f"after {load1}")
fmt = "{:>5} {:>15} {:>6} {:>6} {:>9} {:>9} {:>9} {:>10} {:>10} {:>10} {:>9} {:>9} {:>9}"
print("# " + fmt.format("ranks", "reduce", "micro", "global", "ms/step", "min", "max", "tokens/s", "tok/s/rank",
                        "efficiency", "comm_exp", "in_flight", "other_cpu"))
print("# " + fmt.format("", "", "(seq)", "(seq)", "(ms)", "(ms)", "(ms)", "(tok/s)", "(tok/s)", "(x 1-rank)",
                        "(ms/step)", "(ms/step)", "(%)"))
for r in rows:
    print("  " + fmt.format(r["ranks"], r["reduce"], r["micro_batch"], r["global_batch"], f"{r['median_ms']:.1f}",
                            f"{r['min_ms']:.1f}", f"{r['max_ms']:.1f}", f"{r['tokens_per_s']:.1f}",
                            f"{r['tokens_per_s_per_rank']:.1f}", f"{r['efficiency']:.3f}",
                            f"{r['comm_exposed_s_per_step'] * 1e3:.1f}", f"{r['comm_in_flight_s_per_step'] * 1e3:.1f}",
                            f"{r['other_cpu_pct']:.0f}"))
verdict = lambda e: "meets" if e >= 0.95 else "BELOW"
print(f"# weak-scaling efficiency at {N} ranks: ordered {eff_o:.3f} ({verdict(eff_o)} the 0.95 target), "
      f"native {eff_n:.3f} ({verdict(eff_n)}); ordered/native step time {summary['ordered_vs_native_step_time']:.3f}")
print("# comm_exp: gradient-reduction time not hidden behind backward, per step (results.json comm_s + "
      "comm_exposed_s);\n# in_flight: time buckets spent in flight (comm_in_flight_s); other_cpu: share of the "
      "machine's CPU time used by\n# other processes during that run (trust rows where it is ~0)")
PYEOF
