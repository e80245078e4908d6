#!/usr/bin/env bash
# test: alone
# `ztrain launch` inside a real Slurm allocation (tests/helpers/slurm_lib.sh starts slurmctld + slurmd on this
# machine): sbatch jobs of 2 and 4 tasks whose script is just `ztrain launch -- train ...`; launch must
# see the allocation, run `srun --mpi=pmix` with its layout, and the run must record world_size and the
# job's SLURM_JOB_ID in results.json. Also the --dry-run line inside the allocation.
set -u
cd "$(dirname "$0")/../.."
. tests/helpers/lib.sh
. tests/helpers/slurm_lib.sh
need_tiny_data
if ! slurm_start > $TMP/slurm_start.log 2>&1; then
  fail "slurm_start: $(tail -3 $TMP/slurm_start.log | tr '\n' ' ')"
  slurm_stop; finish
fi
trap 'slurm_stop; rm -rf "$TMP"' EXIT
pass "slurm_up ($(sinfo -h -o '%N %T %c CPUs' | head -1))"
ZTABS=$(readlink -f $ZT)
for n in 2 4; do
  cat > $TMP/job$n.sh <<JOB
#!/bin/bash
#SBATCH -n $n
#SBATCH -o $TMP/job$n.out
cd $PWD
$ZTABS launch --dry-run -- train -c inputs/tiny.cfg > $TMP/dry$n.txt 2>&1
exec $ZTABS launch -- train -c inputs/tiny.cfg --set train.steps=6 --set train.micro_batch=1 --set train.global_batch=4 \
  --set run.root=$TMP --set run.session=sl --set run.name=n$n
JOB
  jid=$(sbatch --parsable $TMP/job$n.sh 2>$TMP/sbatch$n.err) || { fail "sbatch_$n: $(cat $TMP/sbatch$n.err)"; continue; }
  if ! slurm_wait "$jid" 240; then fail "job_$n: still queued/running after 240 s"; scancel "$jid"; continue; fi
  r=$TMP/sl/n$n/results.json
  if [ -f "$r" ] && [ "$(result $TMP/sl/n$n world_size)" = "$n" ] && grep -q "\"SLURM_JOB_ID\": \"$jid\"" "$r"; then
    pass "launch_in_allocation_${n}_tasks (job $jid: world_size $n, SLURM_JOB_ID recorded, params_hash $(result $TMP/sl/n$n params_hash | cut -c1-20)...)"
  else
    fail "launch_in_allocation_${n}_tasks: job $jid: $(tail -3 $TMP/job$n.out 2>/dev/null | tr '\n' ' ')"
  fi
  if grep -q "^srun --mpi=pmix -n $n " $TMP/dry$n.txt; then pass "dry_run_in_allocation_$n ($(grep '^srun' $TMP/dry$n.txt | cut -c1-60)...)"
  else fail "dry_run_in_allocation_$n: $(cat $TMP/dry$n.txt | tr '\n' ' ')"; fi
done
# the same run on 2 and 4 ranks: identical parameters (ordered reduction), launched by Slurm
if [ -f $TMP/sl/n2/results.json ] && [ -f $TMP/sl/n4/results.json ] && \
   [ "$(result $TMP/sl/n2 params_hash)" = "$(result $TMP/sl/n4 params_hash)" ]; then
  pass "slurm_2_vs_4_ranks_bitwise (params_hash equal)"
else fail "slurm_2_vs_4_ranks_bitwise: params_hash differ or missing"; fi
finish
