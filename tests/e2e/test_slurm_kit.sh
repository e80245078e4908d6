#!/usr/bin/env bash
# test: alone
# The slurm/ kit on a real Slurm (tests/helpers/slurm_lib.sh: slurmctld + slurmd on this machine), with tiny data:
#  1. slurm/gen_sbatch.sh: a GPU and a CPU script carry the expected #SBATCH and srun lines and parse
#     (bash -n); the generated CPU script, submitted, runs to completion on 2 ranks.
#  2. slurm/preemptible.sbatch (adapted by sed to this node): SIGUSR1 to the batch shell mid-run
#     (scancel --signal=USR1 --batch: --signal=B:USR1@N has tens of seconds of jitter) -> forwarded to
#     the ranks -> checkpoint, exit 3 -> scontrol requeue -> the same job starts again with --resume auto
#     and finishes; its params_hash equals an uninterrupted mpirun run's (bit-identical).
#  3. slurm/sweep.sbatch as an array over 1, 2, 4 ranks: one run directory per element in one session,
#     all with results.json and the same params_hash (ordered reduction).
set -u
cd "$(dirname "$0")/../.."
. tests/helpers/lib.sh
. tests/helpers/slurm_lib.sh
need_tiny_data
T0=$(date +%s)
el() { echo "at $(( $(date +%s) - T0 )) s"; }
ZTABS=$(readlink -f $ZT)
# the uninterrupted reference for 2 (before the daemons start: nothing else on the 2 cores)
PRE_ARGS="--set train.steps=150 --set checkpoint.every=10 --set checkpoint.keep=2 --set eval.every=0 --set run.root=$TMP"
$MPIRUN -np 2 $ZT train -c inputs/tiny.cfg $PRE_ARGS --set run.session=ref --set run.name=ref > $TMP/ref.log 2>&1 \
  || fail "reference_run: $(tail -3 $TMP/ref.log | tr '\n' ' ')"
if ! slurm_start > $TMP/slurm_start.log 2>&1; then
  fail "slurm_start: $(tail -3 $TMP/slurm_start.log | tr '\n' ' ')"
  slurm_stop; finish
fi
trap 'slurm_stop; rm -rf "$TMP"' EXIT
pass "slurm_up ($(el), $(sinfo -h -o '%N %T %c CPUs' | head -1))"

# ---- 1. the generator
G=$TMP/gpu.sbatch
if slurm/gen_sbatch.sh -c inputs/gpt2-124m.cfg --nodes 2 --gpus-per-node 4 --time 12:00:00 --partition gpu --name big > $G 2>$TMP/gen.err \
   && grep -qx '#SBATCH --nodes=2' $G && grep -qx '#SBATCH --ntasks-per-node=4' $G && grep -qx '#SBATCH --gpus-per-node=4' $G \
   && grep -qx '#SBATCH --time=12:00:00' $G && grep -qx '#SBATCH --partition=gpu' $G && grep -qx '#SBATCH --job-name=big' $G \
   && grep -q '^srun --mpi=pmix .* train -c inputs/gpt2-124m.cfg .*--set device=cuda' $G && ! grep -q -- '--requeue' $G && bash -n $G; then
  pass "gen_gpu (2 nodes x 4 GPUs: ntasks-per-node=gpus-per-node=4, device=cuda, bash -n ok)"
else fail "gen_gpu: $(cat $TMP/gen.err) $(grep -E '^#SBATCH|^srun' $G | tr '\n' ' ')"; fi
C=$TMP/cpu.sbatch
if slurm/gen_sbatch.sh -c inputs/tiny.cfg --nodes 1 --ranks-per-node 2 --cpus-per-task 2 --time 00:05:00 --name gencpu --out $C 2>$TMP/gen.err \
   && grep -qx '#SBATCH --ntasks-per-node=2' $C && grep -qx '#SBATCH --cpus-per-task=2' $C && ! grep -q 'gpus-per-node\|device=cuda' $C \
   && grep -q '^srun --mpi=pmix .* train -c inputs/tiny.cfg' $C && bash -n $C; then
  pass "gen_cpu (2 ranks x 2 cpus-per-task, no GPU lines, bash -n ok)"
else fail "gen_cpu: $(cat $TMP/gen.err) $(grep -E '^#SBATCH|^srun' $C 2>/dev/null | tr '\n' ' ')"; fi
P=$TMP/gpre.sbatch
if slurm/gen_sbatch.sh -c inputs/tiny.cfg --nodes 1 --ranks-per-node 2 --time 01:00:00 --preemptible > $P 2>/dev/null \
   && grep -qx '#SBATCH --signal=B:USR1@60' $P && grep -qx '#SBATCH --requeue' $P && grep -q -- '--resume auto' $P \
   && grep -q 'scontrol requeue' $P && grep -q 'trap .* USR1' $P && bash -n $P; then pass "gen_preemptible (signal, requeue, trap, --resume auto)"
else fail "gen_preemptible: $(grep -E '^#SBATCH|^srun' $P | tr '\n' ' ')"; fi
slurm/gen_sbatch.sh -c inputs/tiny.cfg --nodes 1 --gpus-per-node 2 --ranks-per-node 2 --time 00:01:00 >/dev/null 2>&1; rc1=$?
slurm/gen_sbatch.sh -c inputs/tiny.cfg --nodes 1 --ranks-per-node 2 --time 5min >/dev/null 2>&1; rc2=$?
[ $rc1 = 2 ] && [ $rc2 = 2 ] && pass "gen_errors (G and R together, bad --time: exit 2)" || fail "gen_errors: rc $rc1 $rc2"
jid=$(ZTRAIN=$ZTABS sbatch --parsable -o $TMP/gencpu.out $C --set train.steps=8 --set run.root=$TMP --set run.session=gen 2>$TMP/sb.err) \
  || fail "gen_cpu_sbatch: $(cat $TMP/sb.err)"
if [ -n "${jid:-}" ]; then
  slurm_wait $jid 120 || { fail "gen_cpu_job: still in queue after 120 s"; scancel $jid; }
  d=$TMP/gen/gencpu-$jid
  if [ -f $d/results.json ] && [ "$(result $d world_size)" = 2 ]; then pass "gen_cpu_job (job $jid ran: world_size 2, results.json; $(el))"
  else fail "gen_cpu_job: $(tail -3 $TMP/gencpu.out | tr '\n' ' ')"; fi
fi

# ---- 2. the preemption cycle
sed -e 's/^#SBATCH --partition=.*/#SBATCH --partition=debug/' -e '/^#SBATCH --gpus-per-node/d' \
    -e 's/^#SBATCH --ntasks-per-node=.*/#SBATCH --ntasks-per-node=2/' -e 's/^#SBATCH --cpus-per-task=.*/#SBATCH --cpus-per-task=1/' \
    slurm/preemptible.sbatch > $TMP/pre.sbatch
jid=$(ZTRAIN=$ZTABS CFG=inputs/tiny.cfg RUN_NAME=pre DEVICE=cpu sbatch --parsable -o $TMP/pre.out $TMP/pre.sbatch $PRE_ARGS --set run.session=pre 2>$TMP/sb.err) \
  || fail "preempt_sbatch: $(cat $TMP/sb.err)"
if [ -n "${jid:-}" ]; then
  ck=$TMP/pre/pre/checkpoints; sig=""
  for _ in $(seq 1 300); do ls $ck/step_*.h5 >/dev/null 2>&1 && { scancel --signal=USR1 --batch $jid && sig=1; break; }; sleep 0.2; done
  if [ -n "$sig" ]; then pass "preempt_signal_sent (USR1 to the batch shell of job $jid after the first checkpoint; $(el))"
  else fail "preempt_signal_sent: no checkpoint within 60 s: $(tail -3 $TMP/pre.out | tr '\n' ' ')"; fi
  for _ in $(seq 1 120); do grep -q 'requeueing job' $TMP/pre.out 2>/dev/null && break; sleep 0.5; done; tq=$(date +%s)
  # Slurm holds a requeued job ~2 min (BeginTime) before it may start again; the test skips the wait
  for _ in $(seq 1 20); do squeue -h -j $jid -o %T 2>/dev/null | grep -q PENDING && break; sleep 0.5; done
  scontrol update jobid=$jid StartTime=now >/dev/null 2>&1
  for _ in $(seq 1 240); do grep -q 'resumed from' $TMP/pre.out 2>/dev/null && break; sleep 0.5; done; tr=$(date +%s)
  slurm_wait $jid 120 || { fail "preempt_job: still in queue after 120 s"; scancel $jid; }
  if grep -q 'batch shell: SIGUSR1' $TMP/pre.out && grep -q 'ztrain exited with 3' $TMP/pre.out && grep -q 'requeueing job' $TMP/pre.out; then
    pass "preempt_checkpoint_exit3_requeue ($(sed '/ztrain exited with 3/q' $TMP/pre.out | grep -o 'checkpoint [^ ]*step_[0-9]*' | sed -n '$p' | sed 's|.*/||') then exit 3, scontrol requeue)"
  else fail "preempt_checkpoint_exit3_requeue: $(grep -E 'batch shell|exited|requeue' $TMP/pre.out | tr '\n' ' ')"; fi
  rs="$(grep -o 'resumed from [^ ]* at step [0-9]*' $TMP/pre.out | sed 's|from .*/|from |'), ~$(( tr - tq )) s after the requeue"
  if grep -q "start 1 " $TMP/pre.out && [ -n "$rs" ] && grep -q 'ztrain exited with 0' $TMP/pre.out && [ -f $TMP/pre/pre/results.json ] \
     && [ "$(result $TMP/pre/pre steps)" = 150 ] 2>/dev/null; then pass "preempt_resumed (same job $jid restarted, $rs, finished at step 150; $(el))"
  else fail "preempt_resumed: $(grep -E 'start|resum|exited' $TMP/pre.out | tr '\n' ' ')"; fi
  h1=$(result $TMP/pre/pre params_hash 2>/dev/null); h0=$(result $TMP/ref/ref params_hash 2>/dev/null)
  if [ -n "$h0" ] && [ "$h1" = "$h0" ]; then pass "preempt_bitwise (params_hash equals the uninterrupted run: ${h0:0:20}...)"
  else fail "preempt_bitwise: preempted '$h1' vs uninterrupted '$h0'"; fi
fi

# ---- 3. the sweep array
sed -e 's/^#SBATCH --partition=.*/#SBATCH --partition=debug/' -e 's/^#SBATCH --cpus-per-task=.*/#SBATCH --cpus-per-task=1/' \
    slurm/sweep.sbatch > $TMP/sweep.sbatch
jid=$(ZTRAIN=$ZTABS CFG=inputs/tiny.cfg RANKS_LIST="1 2 4" SESSION=sw sbatch --parsable -o "$TMP/sweep-%a.out" $TMP/sweep.sbatch \
      --set train.steps=10 --set train.micro_batch=1 --set train.global_batch=4 --set eval.every=0 --set run.root=$TMP 2>$TMP/sb.err) \
  || fail "sweep_sbatch: $(cat $TMP/sb.err)"
if [ -n "${jid:-}" ]; then
  slurm_wait $jid 120 || { fail "sweep: array still in queue after 120 s"; scancel $jid; }
  ok=1; hs=""
  for n in 1 2 4; do
    if [ -f $TMP/sw/r$n/results.json ] && [ "$(result $TMP/sw/r$n world_size)" = $n ]; then hs="$hs $(result $TMP/sw/r$n params_hash)"
    else ok=0; fail "sweep_r$n: $(tail -2 $TMP/sweep-*.out 2>/dev/null | tr '\n' ' ')"; fi
  done
  [ $ok = 1 ] && pass "sweep_array (array $jid: session sw has r1 r2 r4, world_size 1 2 4, results.json each; $(el))"
  if [ $ok = 1 ] && [ "$(echo $hs | tr ' ' '\n' | sort -u | wc -l)" = 1 ]; then pass "sweep_bitwise (params_hash equal over 1, 2, 4 ranks)"
  else fail "sweep_bitwise: $hs"; fi
fi
echo "total $(( $(date +%s) - T0 )) s"
finish
