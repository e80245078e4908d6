#!/usr/bin/env bash
# benchmarks/sweep.sh — presets x rank counts x ZeRO stages x micro-batch sizes, each one `ztrain train`
# run in one session, then the session table (tools/session_table.py: tokens/s, speedup and efficiency
# against the matching 1-rank run, loss agreement) and the plots (tools/plot_session.py) in the session
# directory. Strong scaling (--mode strong): the global batch stays fixed (the config's, or
# --global-batch); weak scaling (--mode weak): global batch = micro-batch x ranks (1 accumulation step).
#   benchmarks/sweep.sh --configs inputs/d6.cfg[,CFG..] [--ranks 1,2,4] [--stages 0,1,2]
#       [--micro-batch 4[,8]] [--mode strong|weak] [--steps S] [--global-batch G] [--session NAME]
#       [--root DIR] [--data-dir D] [--bind core|none] [--set key=value ...]
# Defaults: ranks 1,2; stages 2; the config's micro-batch; strong; 10 steps; root runs; session
# sweep-<mode>-<date>-<time>. Run names: <preset>-r<N>-z<stage>-mb<B>, e.g. d6-r2-z1-mb4.
# Every rank runs 1 thread (train.threads=1, OMP_NUM_THREADS=1; as benchmarks/bench_scaling.sh), mpirun
# --bind-to core (--bind none, and always when ranks > cores: --oversubscribe). Benchmark settings:
# train.warmup_steps=1, train.log_every=1, eval and checkpoint only at the end, no sampling; --set
# overrides any of them. Data: D/train.bin and D/val.bin with --data-dir D; else the config's own shards;
# where those are missing, synthetic shards in data/<preset>/ (tests/helpers/make_data.py with the config's vocab,
# as bench_scaling.sh does for d6); missing shards in D are made the same way (with the smallest vocab).
# A combination ztrain refuses (a global batch that micro-batch x ranks does not divide) is skipped with
# ztrain's message (checked by `ztrain estimate` first). Exit status: 0; 2 for a usage error or when every
# combination is refused; 1 when a run failed (the table of the others is still printed).
# ZTRAIN=path overrides ./ztrain.
set -u
SELF=$(readlink -f "$0")
cd "$(dirname "$SELF")/.." || exit 2
ZT=${ZTRAIN:-./ztrain}
PY=/usr/bin/python3
usage() {
  echo "usage: benchmarks/sweep.sh --configs CFG[,CFG..] [--ranks 1,2,4] [--stages 0,1,2] [--micro-batch 4[,8]]" \
       "[--mode strong|weak] [--steps S] [--global-batch G] [--session NAME] [--root DIR] [--data-dir D]" \
       "[--bind core|none] [--set key=value ...]" >&2
  exit 2
}
CONFIGS="" RANKS="1,2" STAGES="2" MBS="" MODE=strong STEPS=10 GB="" SESSION="" ROOT=runs DATA="" BIND=core SETS=()
while [ $# -gt 0 ]; do
  case $1 in -h|--help) sed -n '2,/^set -u/p' "$SELF" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;; esac
  [ $# -ge 2 ] || usage
  case $1 in
    --configs) CONFIGS=$2 ;;
    --ranks) RANKS=$2 ;;
    --stages) STAGES=$2 ;;
    --micro-batch) MBS=$2 ;;
    --mode) MODE=$2 ;;
    --steps) STEPS=$2 ;;
    --global-batch) GB=$2 ;;
    --session) SESSION=$2 ;;
    --root) ROOT=$2 ;;
    --data-dir) DATA=$2 ;;
    --bind) BIND=$2 ;;
    --set) SETS+=(--set "$2") ;;
    *) echo "sweep.sh: unknown argument '$1'" >&2; usage ;;
  esac
  shift 2
done
die() { echo "sweep.sh: $*" >&2; exit 2; }
list='^[0-9]+(,[0-9]+)*$'
[ -n "$CONFIGS" ] || usage
[[ $RANKS =~ $list && $STAGES =~ $list && $STEPS =~ ^[1-9][0-9]*$ ]] || die "--ranks, --stages, --steps: numbers (lists: 1,2,4)"
[ -z "$MBS" ] || [[ $MBS =~ $list ]] || die "--micro-batch '$MBS': expected a list like 4,8"
[ -z "$GB" ] || [[ $GB =~ ^[1-9][0-9]*$ ]] || die "--global-batch '$GB': expected a number"
[ "$MODE" = strong ] || [ "$MODE" = weak ] || die "--mode '$MODE': expected strong or weak"
[ "$MODE" = weak ] && [ -n "$GB" ] && die "--global-batch is for --mode strong (weak: micro-batch x ranks)"
[ "$BIND" = core ] || [ "$BIND" = none ] || die "--bind '$BIND': expected core or none"
[ -x "$ZT" ] || die "$ZT: not an executable (build with make, or set ZTRAIN)"
IFS=, read -r -a CFGS <<< "$CONFIGS"
IFS=, read -r -a NS <<< "$RANKS"
IFS=, read -r -a ZS <<< "$STAGES"
for c in "${CFGS[@]}"; do [ -f "$c" ] || die "$c: no such config file"; done
SESSION=${SESSION:-sweep-$MODE-$(date +%Y%m%d-%H%M%S)}
DIR=$ROOT/$SESSION
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
CORES=$(nproc)

# CFG section.key -> its value in the resolved config (`ztrain config`, read once per config below:
# `section = {`, then `  key = value;  # help` lines, then `};`)
declare -A CFGTXT
cfgval() {
  awk -v k="$2" '/^[a-z_]+ = \{/ { sec = $1 "." } /^};/ { sec = "" }
                 sec $1 == k { v = $3; gsub(/[;"]/, "", v); print v; exit }' <<< "${CFGTXT[$1]}"
}
# glob (data.train may be one) -> true when at least one file matches
exists() { compgen -G "$1" > /dev/null; }
make_data() { # DIR VOCAB
  local ntok=$(( (STEPS + 1) * MAXGB * (MAXT + 1) * 2 + 100000 ))
  echo "# synthetic shards: tests/helpers/make_data.py $1 $2 $ntok"
  tests/helpers/make_data.py "$1" "$2" "$ntok" > /dev/null || die "tests/helpers/make_data.py $1 failed"
}

# ---- per config: preset name, micro-batch list, data settings
declare -A MBL DSET PRESET
MAXGB=0 MAXT=0 MINV=""
for c in "${CFGS[@]}"; do
  p=$(basename "$c" .cfg); PRESET[$c]=$p
  CFGTXT[$c]=$("$ZT" config -c "$c" "${SETS[@]}") || die "ztrain refuses $c (see above)"
  MBL[$c]=${MBS:-$(cfgval "$c" train.micro_batch)}
  t=$(cfgval "$c" train.seq_len); v=$(cfgval "$c" model.vocab_size); g=${GB:-$(cfgval "$c" train.global_batch)}
  [ "$t" -gt "$MAXT" ] && MAXT=$t
  for m in ${MBL[$c]//,/ }; do for n in "${NS[@]}"; do [ $((m * n)) -gt "$MAXGB" ] && MAXGB=$((m * n)); done; done
  [ "$g" -gt "$MAXGB" ] && MAXGB=$g
  [ -z "$MINV" ] || [ "$v" -lt "$MINV" ] && MINV=$v
done
for c in "${CFGS[@]}"; do
  p=${PRESET[$c]}; v=$(cfgval "$c" model.vocab_size)
  if [ -n "$DATA" ]; then d=$DATA
  elif exists "$(cfgval "$c" data.train)"; then DSET[$c]=""; continue
  else d=data/$p; echo "# $c: its data ($(cfgval "$c" data.train)) is missing: using data/$p/"; fi
  [ -f "$d/train.bin" ] || make_data "$d" "${MINV:-$v}"
  [ -n "$DATA" ] || [ -f "$d/val.bin" ] || make_data "$d" "$v"
  DSET[$c]="--set data.train=$d/train.bin --set data.val=$d/val.bin --set data.tokenizer="
done

# ---- the plan: every combination ztrain accepts (estimate runs the same checks as train)
PLAN=() NSKIP=0
for c in "${CFGS[@]}"; do
  for z in "${ZS[@]}"; do
    for m in ${MBL[$c]//,/ }; do
      for n in "${NS[@]}"; do
        name=${PRESET[$c]}-r$n-z$z-mb$m
        if [ "$MODE" = weak ]; then g=$((m * n)); else g=${GB:-$(cfgval "$c" train.global_batch)}; fi
        [ -e "$DIR/$name" ] && die "$DIR/$name exists: choose another --session"
        # shellcheck disable=SC2086
        if ! msg=$("$ZT" estimate -c "$c" --ranks "$n" --set zero.stage="$z" --set train.micro_batch="$m" \
                   --set train.global_batch="$g" ${DSET[$c]} "${SETS[@]}" 2>&1 > /dev/null); then
          echo "# skipped $name: $(echo "$msg" | grep -m 1 . )"; NSKIP=$((NSKIP + 1)); continue
        fi
        PLAN+=("$c $z $m $n $g $name")
      done
    done
  done
done
[ ${#PLAN[@]} -gt 0 ] || die "every combination was refused by ztrain ($NSKIP skipped)"
mkdir -p "$DIR" || exit 2
echo "# sweep ($MODE scaling): ${#PLAN[@]} run(s) in $DIR, $STEPS steps each, 1 thread per rank"

# ---- the runs
i=0 NFAIL=0
for entry in "${PLAN[@]}"; do
  read -r c z m n g name <<< "$entry"
  i=$((i + 1))
  mp=(mpirun --bind-to "$BIND" -x OMP_NUM_THREADS -np "$n")
  [ "$n" -gt "$CORES" ] && mp=(mpirun --oversubscribe --bind-to none -x OMP_NUM_THREADS -np "$n")
  log=$DIR/$name.log t0=$(date +%s.%N)
  # shellcheck disable=SC2086
  "${mp[@]}" "$ZT" train -c "$c" --set train.threads=1 --set train.steps="$STEPS" --set train.warmup_steps=1 \
    --set train.log_every=1 --set eval.every=0 --set checkpoint.every=0 --set checkpoint.keep=1 --set sample.every=0 \
    --set zero.stage="$z" --set train.micro_batch="$m" --set train.global_batch="$g" ${DSET[$c]} "${SETS[@]}" \
    --set run.root="$ROOT" --set run.session="$SESSION" --set run.name="$name" > "$log" 2>&1
  rc=$?
  dt=$(echo "$(date +%s.%N) - $t0" | bc)
  if [ $rc -ne 0 ]; then
    NFAIL=$((NFAIL + 1))
    echo "# [$i/${#PLAN[@]}] $name FAILED (exit status $rc, log $log): $({ grep -m 1 -E 'error|ztrain:' "$log" || tail -n 1 "$log"; })"
  else
    printf '# [%d/%d] %s: %d rank(s), ZeRO-%d, micro-batch %d, global batch %d: %.1f s\n' "$i" "${#PLAN[@]}" "$name" \
      "$n" "$z" "$m" "$g" "$dt"
  fi
done
echo
if [ "$NFAIL" -lt ${#PLAN[@]} ]; then
  $PY tools/session_table.py "$DIR"
  $PY tools/plot_session.py "$DIR"
fi
[ "$NSKIP" -eq 0 ] || echo "# $NSKIP combination(s) skipped: ztrain refused them (see above)"
[ "$NFAIL" -eq 0 ] || { echo "sweep.sh: $NFAIL run(s) failed" >&2; exit 1; }
