#!/usr/bin/env bash
# `ztrain launch`: the commands it would run (--dry-run) for each layout and environment, its user
# errors (exit 2, one line), and real runs on 1 and 2 ranks through mpirun.
set -u
cd "$(dirname "$0")/../.."
. tests/helpers/lib.sh
need_tiny_data
EXE=$(readlink -f $ZT)
CORES=$(nproc)
# the launcher must set the root variables itself: not inherited from lib.sh
unset OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM
ROOTENV=""
[ "$(id -u)" -eq 0 ] && ROOTENV="OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "

# dry NAME EXPECTED_CMD [launch args...]: exit 0, a "# layout:" line, the command as the last line
dry() {
  local name=$1 want=$2; shift 2
  local out rc
  out=$($ZT launch "$@" 2>$TMP/err); rc=$?
  local cmd layout
  cmd=$(echo "$out" | tail -1); layout=$(echo "$out" | grep '^# layout: ')
  if [ $rc -eq 0 ] && [ -n "$layout" ] && [ "$cmd" == "$want" ]; then pass "$name ($layout | $cmd)"
  else fail "$name: rc $rc, got [$out] $(cat $TMP/err), want [$want]"; fi
}
# err NAME PATTERN [launch args...]: exit 2, exactly one line on stderr that matches PATTERN
err() {
  local name=$1 pat=$2; shift 2
  $ZT launch "$@" > $TMP/out 2> $TMP/err; local rc=$?
  if [ $rc -eq 2 ] && [ "$(wc -l < $TMP/err)" -eq 1 ] && grep -q -- "$pat" $TMP/err; then pass "$name (exit 2: $(cat $TMP/err))"
  else fail "$name: rc $rc, stderr [$(cat $TMP/err)], want exit 2 and one line matching '$pat'"; fi
}

T="train -c inputs/tiny.cfg"
# --- no -n: the CPU layout (one rank per up to 8 cores) with its reason
ranks=$(( (CORES + 7) / 8 )); th=$(( CORES / ranks ))
bind=core; [ $th -gt 1 ] && bind=none
dry no_n "${ROOTENV}mpirun -np $ranks --bind-to $bind $EXE $T" --dry-run -- $T
if $ZT launch --dry-run -- $T | grep -q "^# layout: $ranks rank.* x $th thread.* on $CORES core.*one rank per up to 8 cores"; then
  pass "no_n_reason ($($ZT launch --dry-run -- $T | head -1))"
else fail "no_n_reason: $($ZT launch --dry-run -- $T | head -1)"; fi
# --- -n 1 / 2 / 4: threads = cores / ranks decide the binding; more ranks than cores oversubscribe
for n in 1 2 4; do
  t=$(( CORES / n )); [ $t -lt 1 ] && t=1
  b="--bind-to core"; [ $t -gt 1 ] && b="--bind-to none"
  [ $n -gt $CORES ] && b="--bind-to none --oversubscribe"
  dry n$n "${ROOTENV}mpirun -np $n $b $EXE $T" -n $n --dry-run -- $T
done
# --- arguments are shell-quoted
dry quoting "${ROOTENV}mpirun -np 2 $( [ $CORES -ge 2 ] && echo "--bind-to core" || echo "--bind-to none --oversubscribe") $EXE train -c inputs/tiny.cfg --set 'sample.prompt=it'\\''s a b'" \
  -n 2 --dry-run -- train -c inputs/tiny.cfg --set "sample.prompt=it's a b"
# --- as root: the Open MPI variables first; as another user: none
if [ "$(id -u)" -eq 0 ]; then
  if $ZT launch -n 2 --dry-run -- $T | tail -1 | grep -q '^OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun '; then
    pass "root_env (the command starts with OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)"
  else fail "root_env: $($ZT launch -n 2 --dry-run -- $T | tail -1)"; fi
  if command -v setpriv > /dev/null; then
    out=$(cd / && setpriv --reuid=65534 --regid=65534 --clear-groups $EXE launch -n 2 --dry-run -- $T 2>&1 | tail -1)
    case "$out" in
      "mpirun -np 2 "*) pass "non_root (no OMPI_ALLOW_RUN_AS_ROOT for uid 65534: $out)" ;;
      *) fail "non_root: $out" ;;
    esac
  fi
fi
# --- a hostfile: several nodes, ranks per node by ppr
printf "node1 slots=2\n# a comment\n\nnode2 slots=2\n" > $TMP/hosts
X=""; [ -n "$ROOTENV" ] && X=" -x OMPI_ALLOW_RUN_AS_ROOT -x OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"
pb="core"; [ $(( CORES / 2 )) -gt 1 ] && pb=none; [ 2 -gt $CORES ] && pb="none --oversubscribe"
dry hostfile_per_node "${ROOTENV}mpirun -np 4 --hostfile $TMP/hosts --map-by ppr:2:node --bind-to $pb$X $EXE $T" \
  --nodes $TMP/hosts --per-node 2 --dry-run -- $T
# -n 3 over 2 hosts: up to 2 ranks per node, Open MPI places them by the hostfile's slots
dry hostfile_n "${ROOTENV}mpirun -np 3 --hostfile $TMP/hosts --bind-to $pb$X $EXE $T" --nodes $TMP/hosts -n 3 --dry-run -- $T
err hostfile_missing "cannot read the hostfile" --nodes $TMP/no-such-hosts --dry-run -- $T
# --- inside a Slurm allocation: srun --mpi=pmix with the allocation's tasks (a stand-in srun on PATH)
mkdir -p $TMP/bin; printf '#!/bin/sh\necho "fake srun $*"\n' > $TMP/bin/srun; chmod +x $TMP/bin/srun
out=$(SLURM_JOB_ID=4242 SLURM_NTASKS=4 SLURM_JOB_NUM_NODES=2 PATH=$TMP/bin:$PATH $ZT launch --dry-run -- $T)
if [ "$(echo "$out" | tail -1)" == "srun --mpi=pmix -n 4 $EXE $T" ] && echo "$out" | grep -q "^# layout: Slurm job 4242: 4 ranks on 2 nodes"; then
  pass "slurm ($(echo $out))"
else fail "slurm: $out"; fi
out=$(SLURM_JOB_ID=4242 SLURM_NTASKS=4 SLURM_JOB_NUM_NODES=2 PATH=$TMP/bin:$PATH $ZT launch --dry-run --per-node 2 -- $T | tail -1)
[ "$out" == "srun --mpi=pmix --ntasks-per-node=2 $EXE $T" ] && pass "slurm_per_node ($out)" || fail "slurm_per_node: $out"
# the real exec goes to srun (the stand-in prints its arguments): exec, not a dry run
out=$(SLURM_JOB_ID=4242 SLURM_NTASKS=2 PATH=$TMP/bin:$PATH $ZT launch -- $T | tail -1)
[ "$out" == "fake srun --mpi=pmix -n 2 $EXE $T" ] && pass "slurm_exec (execs srun: $out)" || fail "slurm_exec: $out"
# --- user errors
mkdir -p $TMP/empty
out=$(PATH=$TMP/empty $ZT launch -n 2 --dry-run -- $T 2>&1); rc=$?
if [ $rc -eq 2 ] && [ "$(echo "$out" | wc -l)" -eq 1 ] && echo "$out" | grep -q "no MPI launcher on PATH"; then
  pass "no_launcher (exit 2: $out)"
else fail "no_launcher: rc $rc: $out"; fi
err nothing_after_dashes "nothing to run after" -n 2 --
err no_dashes "nothing to run after" -n 2
err bad_n "expected a positive integer" -n zero -- $T
err unknown_option "unknown option" --frobnicate -- $T

# --- real runs through mpirun: world_size in results.json; the child's exit code passes through
for n in 1 2; do
  $ZT launch -n $n -- train -c inputs/tiny.cfg --set train.steps=4 --set train.warmup_steps=1 --set run.root=$TMP --set run.session=real \
    --set run.name=n$n > $TMP/real$n.log 2>&1; rc=$?
  ws=$(result $TMP/real/n$n world_size 2>/dev/null)
  if [ $rc -eq 0 ] && [ "$ws" == "$n" ] && [ "$(wc -l < $TMP/real/n$n/metrics.jsonl)" -eq 4 ]; then
    pass "run_n$n (launch -n $n: exit 0, results.json world_size $ws, 4 metrics lines)"
  else fail "run_n$n: rc $rc world_size '$ws'"; tail -5 $TMP/real$n.log; fi
done
if [ -f $TMP/real/n1/results.json ] && [ "$(result $TMP/real/n1 params_hash)" == "$(result $TMP/real/n2 params_hash)" ]; then
  pass "run_bitwise (1 and 2 ranks through launch give the same params_hash)"
else fail "run_bitwise: params_hash differs between -n 1 and -n 2"; fi
$ZT launch -n 1 -- train -c inputs/tiny.cfg --set train.lrr=1 > $TMP/bad.log 2>&1; rc=$?
[ $rc -eq 2 ] && pass "exit_code (a config error in the child exits 2 through mpirun)" || { fail "exit_code: rc $rc"; tail -3 $TMP/bad.log; }
finish
