# tests/helpers/slurm_lib.sh — a real Slurm on this machine for the tests (RECIPES: slurmctld + slurmd + munged,
# one node named after `hostname`, CPUs=8 so oversubscribed jobs fit), started and stopped by the test.
# Sourced after tests/helpers/lib.sh (uses $TMP). slurm_start returns non-zero with a reason when it cannot run
# (not root, packages missing); slurm_stop kills exactly the daemons it started.
slurm_start() {
  [ "$(id -u)" = 0 ] || { echo "not root"; return 1; }
  for b in slurmctld slurmd munged sbatch squeue scontrol; do
    command -v $b >/dev/null 2>&1 || [ -x /usr/sbin/$b ] || { echo "$b missing (scripts/install-deps.sh slurm)"; return 1; }
  done
  SL=$TMP/slurm; mkdir -p $SL/state $SL/spool /run/munge
  chown munge:munge /run/munge 2>/dev/null
  [ -f /etc/munge/munge.key ] || { /usr/sbin/mungekey -c >/dev/null 2>&1 || create-munge-key >/dev/null 2>&1; }
  chmod 755 $TMP; chown munge:munge $SL; chmod 755 $SL; touch $SL/munged.log; chown munge:munge $SL/munged.log
  runuser -u munge -- /usr/sbin/munged --pid-file=$SL/munged.pid --log-file=$SL/munged.log --socket=$SL/munge.socket \
    || { echo "munged did not start: $(tail -2 $SL/munged.log)"; return 1; }
  local h; h=$(hostname)
  cat > $SL/slurm.conf <<CONF
ClusterName=zttest
SlurmctldHost=$h(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$SL/munge.socket
CredType=cred/munge
StateSaveLocation=$SL/state
SlurmdSpoolDir=$SL/spool
SlurmctldPidFile=$SL/slurmctld.pid
SlurmdPidFile=$SL/slurmd.pid
SlurmctldLogFile=$SL/slurmctld.log
SlurmdLogFile=$SL/slurmd.log
SlurmctldPort=16817
SlurmdPort=16818
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
MpiDefault=pmix
MailProg=/bin/true
ReturnToService=2
KillWait=5
NodeName=$h NodeAddr=127.0.0.1 CPUs=8 RealMemory=16000 State=UNKNOWN
PartitionName=debug Nodes=$h Default=YES MaxTime=INFINITE State=UP
CONF
  export SLURM_CONF=$SL/slurm.conf
  slurmctld -D -f $SLURM_CONF > $SL/slurmctld.out 2>&1 & SLURMCTLD_PID=$!
  slurmd -D -f $SLURM_CONF > $SL/slurmd.out 2>&1 & SLURMD_PID=$!
  for _ in $(seq 1 40); do
    sinfo -h -o %T 2>/dev/null | grep -q idle && return 0
    sleep 0.5
  done
  echo "node not idle after 20 s: $(tail -3 $SL/slurmctld.log 2>/dev/null | tr '\n' ' ') $(tail -3 $SL/slurmd.log 2>/dev/null | tr '\n' ' ')"
  return 1
}
slurm_stop() {
  [ -n "${SLURMD_PID:-}" ] && kill $SLURMD_PID 2>/dev/null
  [ -n "${SLURMCTLD_PID:-}" ] && kill $SLURMCTLD_PID 2>/dev/null
  [ -f "${SL:-/nonexistent}/munged.pid" ] && kill "$(cat $SL/munged.pid)" 2>/dev/null
  wait 2>/dev/null
  SLURMD_PID=""; SLURMCTLD_PID=""
}
# waits for job $1 to leave the queue (at most $2 seconds)
slurm_wait() {
  for _ in $(seq 1 $(( $2 * 2 ))); do
    squeue -h -j "$1" 2>/dev/null | grep -q . || return 0
    sleep 0.5
  done
  return 1
}
