#!/usr/bin/env bash
# tools/experiment.sh — the classic data-parallel experiment in one command: the same config trained on
# 1 rank and on N ranks (one run directory r<N> each, all in one session), then the session table
# (speedup, scaling efficiency, and whether the losses agree: with zero.reduce = "ordered" they are
# bit-identical, and the table says so) and the PNG plots (tools/plot_session.py) in the session directory.
#   tools/experiment.sh -c CONFIG [--ranks 1,2,4] [--session NAME] [--root DIR] [--set key=value ...]
# It runs in the repository root: CONFIG, --root and the data paths in configs are relative to it.
# Defaults: --ranks 1,2, --root runs, --session exp-<date>-<time>; a session that already holds r<N>
# is refused (ztrain would add -1 to the name). Every rank runs 1 thread (train.threads=1,
# OMP_NUM_THREADS=1) so that ranks, not threads, are what is measured; --set train.threads=T overrides it. mpirun gets --oversubscribe when N > nproc.
# ZTRAIN=path overrides ./ztrain. Each run's output goes to <root>/<session>/r<N>.log.
# Exit status: 0; 2 for a usage error or when ztrain refuses the config (for example a rank count that
# does not divide the global batch: ztrain's message is printed); else the failing run's status.
set -u
SELF=$(readlink -f "$0")
cd "$(dirname "$SELF")/.." || exit 2
ZT=${ZTRAIN:-./ztrain}
PY=/usr/bin/python3
usage() { echo "usage: tools/experiment.sh -c CONFIG [--ranks 1,2,4] [--session NAME] [--root DIR] [--set key=value ...]" >&2; exit 2; }
CFG="" RANKS="1,2" SESSION="exp-$(date +%Y%m%d-%H%M%S)" ROOT="runs" SETS=()
while [ $# -gt 0 ]; do
  case $1 in
    -c|--config) [ $# -ge 2 ] || usage; CFG=$2; shift ;;
    --ranks) [ $# -ge 2 ] || usage; RANKS=$2; shift ;;
    --session) [ $# -ge 2 ] || usage; SESSION=$2; shift ;;
    --root) [ $# -ge 2 ] || usage; ROOT=$2; shift ;;
    --set) [ $# -ge 2 ] || usage; SETS+=(--set "$2"); shift ;;
    -h|--help) sed -n '2,/^set -u/p' "$SELF" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "experiment.sh: unknown argument '$1'" >&2; usage ;;
  esac
  shift
done
[ -n "$CFG" ] || usage
[ -f "$CFG" ] || { echo "experiment.sh: $CFG: no such config file" >&2; exit 2; }
[ -x "$ZT" ] || { echo "experiment.sh: $ZT: not an executable (build with make, or set ZTRAIN)" >&2; exit 2; }
[[ $RANKS =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || { echo "experiment.sh: --ranks '$RANKS': expected a list like 1,2,4" >&2; exit 2; }
IFS=, read -r -a NS <<< "$RANKS"
DIR=$ROOT/$SESSION
for n in "${NS[@]}"; do
  [ -e "$DIR/r$n" ] && { echo "experiment.sh: $DIR/r$n exists: choose another --session (or remove it)" >&2; exit 2; }
done
# every rank count checked before anything runs: `ztrain estimate` validates the config (--set keys,
# global batch vs micro_batch x ranks) with the same code as train, and prints ztrain's own message
for n in "${NS[@]}"; do
  "$ZT" estimate -c "$CFG" --ranks "$n" --set train.threads=1 "${SETS[@]}" > /dev/null || {
    rc=$?; echo "experiment.sh: ztrain refuses $CFG on $n rank(s) (exit status $rc)" >&2; exit $rc; }
done
mkdir -p "$DIR" || exit 2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
CORES=$(nproc)
echo "# experiment: $CFG on ${RANKS//,/, } rank(s), session $DIR"
for n in "${NS[@]}"; do
  over=""; [ "$n" -gt "$CORES" ] && over="--oversubscribe"
  log=$DIR/r$n.log
  t0=$(date +%s.%N)
  # ours before the user's --set (train.threads may be overridden), the run's place after (it may not)
  mpirun $over --bind-to none -x OMP_NUM_THREADS -np "$n" "$ZT" train -c "$CFG" --set train.threads=1 "${SETS[@]}" \
    --set run.root="$ROOT" --set run.session="$SESSION" --set run.name="r$n" > "$log" 2>&1
  rc=$?
  if [ $rc -ne 0 ]; then
    echo "experiment.sh: run r$n ($n rank(s)) failed with exit status $rc (log: $log):" >&2
    # ztrain's own message, without mpirun's boilerplate about the aborted job
    { grep -m 3 -E 'error|ztrain:' "$log" || tail -n 5 "$log"; } | sed 's/^/  /' >&2
    exit $rc
  fi
  printf '# r%s: %s rank(s) done in %.1f s: %s\n' "$n" "$n" "$(echo "$(date +%s.%N) - $t0" | bc)" \
    "$(grep -m 1 '^params_hash' "$log" || echo '(no params_hash line)')"
done
echo
$PY tools/session_table.py "$DIR" || exit $?
$PY tools/plot_session.py "$DIR" || exit $?
