#!/usr/bin/env bash
# bench_zero3.sh — the step time of ZeRO stage 3 against stage 2, and of zero.offload against none, on d6
# (inputs/d6.cfg, 30M parameters; --model tiny for a quick look) on the devsim backend (where host/device copies
# are explicit, so offloading moves bytes; on the cpu backend offload is a no-op) at 1 and 2 ranks. Weak scaling:
# a fixed micro-batch per rank (global_batch = micro_batch x ranks), 1 thread per rank, one micro-batch per rank
# per step, synthetic tokens (tests/helpers/make_data.py, vocab 50257). Configurations per rank count:
#   stage 2 / none (the baseline), stage 3 / none, stage 2 / optimizer, stage 3 / optimizer, stage 3 / optimizer+params
# Each run's metrics.jsonl gives per-step step_ms and update_ms: the first step is skipped (page faults, BLAS
# buffers) and the median of the rest taken; each configuration runs --reps times, in turn with the others, and
# the table shows the median of those medians, the spread (min-max of the run medians), the ratio to stage 2 / none
# at the same rank count (median against median, and fastest run against fastest run) and the largest share of the
# machine other processes took during one of the runs (as bench_scaling.sh measures it). Every run of a rank count
# must end with the same params_hash (checked: the configurations are bit-identical). The load average before and
# after is printed; run it on an idle machine (about 6.5 minutes on 2 cores with the defaults).
#   benchmarks/bench_zero3.sh [--ranks "1 2"] [--reps 3] [--steps 6] [--micro-batch 4] [--seq 128 (tiny: 32)]
#                             [--device devsim|cpu|cudasim] [--precision fp32|bf16] [--model d6|tiny] [--json]
set -u
cd "$(dirname "$0")/.."
ZT=${ZTRAIN:-./ztrain}
PY=/usr/bin/python3
RANKS="1 2" REPS=3 STEPS=6 MB=4 T="" DEV=devsim PREC=fp32 MODEL=d6 JSON=0
usage() {
  echo "usage: $0 [--ranks \"1 2\"] [--reps R] [--steps S] [--micro-batch B] [--seq T] [--device devsim|cpu|cudasim]" \
       "[--precision fp32|bf16] [--model d6|tiny] [--json]" >&2
  exit 2
}
while [ $# -gt 0 ]; do
  case $1 in
    --ranks) RANKS=$2; shift ;;
    --reps) REPS=$2; shift ;;
    --steps) STEPS=$2; shift ;;
    --micro-batch) MB=$2; shift ;;
    --seq) T=$2; shift ;;
    --device) DEV=$2; shift ;;
    --precision) PREC=$2; shift ;;
    --model) MODEL=$2; shift ;;
    --json) JSON=1 ;;
    *) usage ;;
  esac
  shift
done
[ -x "$ZT" ] || { echo "bench_zero3.sh: $ZT missing: run make first" >&2; exit 2; }
[ "$STEPS" -ge 3 ] || { echo "bench_zero3.sh: --steps must be >= 3 (the first step is skipped)" >&2; exit 2; }
case $MODEL in d6) cfg=inputs/d6.cfg; vocab=50257; T=${T:-128} ;; tiny) cfg=inputs/tiny.cfg; vocab=256; T=${T:-32} ;; *) usage ;; esac
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
maxr=0; for n in $RANKS; do [ "$n" -gt $maxr ] && maxr=$n; done
MPIRUN="mpirun --bind-to core -x OMP_NUM_THREADS"
[ "$maxr" -gt "$(getconf _NPROCESSORS_ONLN)" ] && MPIRUN="mpirun --oversubscribe --bind-to none -x OMP_NUM_THREADS"
ROOT=$(mktemp -d /tmp/zt-zero3.XXXXXX)
trap 'rm -rf "$ROOT"' EXIT
NTOK=$(( (STEPS + 1) * MB * maxr * (T + 1) * 2 + 100000 ))
$PY tests/helpers/make_data.py "$ROOT/data" $vocab $NTOK > /dev/null || { echo "bench_zero3.sh: make_data.py failed" >&2; exit 1; }
. benchmarks/lib_load.sh # load, cpu_snap, other_pct
LOAD0=$(load)
common="-c $cfg --set device=$DEV --set precision=$PREC --set train.threads=1 --set train.micro_batch=$MB
        --set train.seq_len=$T --set train.steps=$STEPS --set train.warmup_steps=1 --set train.log_every=1
        --set eval.every=0 --set sample.every=0 --set checkpoint.every=0 --set checkpoint.keep=1
        --set data.train=$ROOT/data/train.bin --set data.val= --set data.tokenizer=
        --set run.root=$ROOT/runs --set run.session=z3"
CONFS="2:none 3:none 2:optimizer 3:optimizer 3:optimizer+params"
for rep in $(seq 1 "$REPS"); do
  for np in $RANKS; do
    for c in $CONFS; do
      st=${c%%:*} off=${c#*:}
      name=n$np-s$st-$off-$rep
      [ $JSON = 1 ] || echo "# run $name ..." >&2
      cpu_snap "$ROOT"; s0=$SNAP
      if ! $MPIRUN -np "$np" "$ZT" train $common --set train.global_batch=$((MB * np)) --set zero.stage=$st \
           --set zero.offload=$off --set run.name=$name > "$ROOT/$name.log" 2>&1; then
        echo "bench_zero3.sh: run $name failed: $(grep -m1 "ztrain: error" "$ROOT/$name.log" || tail -3 "$ROOT/$name.log")" >&2; exit 1
      fi
      cpu_snap "$ROOT"; other_pct "$s0" "$SNAP" > "$ROOT/runs/z3/$name/other"
    done
  done
done
LOAD1=$(load)
$PY - "$ROOT/runs/z3" "$RANKS" "$CONFS" "$REPS" "$JSON" "$LOAD0" "$LOAD1" "$MODEL" "$DEV" "$PREC" "$MB" "$T" "$STEPS" <<'EOF'
import json, statistics, sys
root, ranks, confs, reps, js = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), int(sys.argv[4]), sys.argv[5] == "1"
load0, load1, model, dev, prec, mb, T, steps = sys.argv[6:14]
rows, bad = [], []
for np_ in ranks:
    base = None
    hashes = set()
    for c in confs:
        st, off = c.split(":", 1)
        meds, upd, other = [], [], []
        for rep in range(1, reps + 1):
            d = f"{root}/n{np_}-s{st}-{off}-{rep}"
            recs = [json.loads(l) for l in open(d + "/metrics.jsonl")][1:]
            meds.append(statistics.median(r["step_ms"] for r in recs))
            upd.append(statistics.median(r["update_ms"] for r in recs))
            hashes.add(json.load(open(d + "/results.json"))["params_hash"])
            other.append(float(open(d + "/other").read()))
        m = statistics.median(meds)
        if base is None: base, bmin = m, min(meds)
        rows.append(dict(ranks=int(np_), stage=int(st), offload=off, step_ms=round(m, 1), min_ms=round(min(meds), 1),
                         max_ms=round(max(meds), 1), update_ms=round(statistics.median(upd), 1), ratio=round(m / base, 3),
                         ratio_min=round(min(meds) / bmin, 3), other_pct=max(other)))
    if len(hashes) != 1: bad.append(f"{np_} ranks: {len(hashes)} different params_hash over the configurations")
if js:
    print(json.dumps(dict(model=model, device=dev, precision=prec, micro_batch=int(mb), seq_len=int(T), steps=int(steps),
                          reps=reps, load_before=load0, load_after=load1, rows=rows, identical=not bad)))
else:
    print(f"# {model}, device {dev}, {prec}, micro_batch {mb} x seq {T} per rank, 1 thread per rank, {steps} steps "
          f"(median of steps 2..{steps}), median of {reps} runs; load {load0} before, {load1} after")
    print(f"{'ranks':>5} {'stage':>5} {'offload':<17} {'step ms':>9} {'(min-max)':>17} {'update ms':>9} {'vs s2/none':>10}"
          f" {'min vs min':>10} {'other CPU':>9}")
    for r in rows:
        print(f"{r['ranks']:>5} {r['stage']:>5} {r['offload']:<17} {r['step_ms']:>9.1f} "
              f"{'(' + format(r['min_ms'], '.1f') + '-' + format(r['max_ms'], '.1f') + ')':>17} {r['update_ms']:>9.1f} "
              f"{r['ratio']:>9.3f}x {r['ratio_min']:>9.3f}x {r['other_pct']:>8.1f}%")
    print("(step ms: median over the runs of each run's median step; min vs min: the fastest run against the fastest "
          "stage 2 / none run; other CPU: the largest share of the machine other processes took during one of the runs)")
    print("params_hash: " + ("identical over the configurations of each rank count" if not bad else "; ".join(bad)))
sys.exit(1 if bad else 0)
EOF
