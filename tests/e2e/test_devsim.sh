#!/usr/bin/env bash
# The devsim backend end to end (docs/design.md section 8): training, checkpoints, eval, sample and export
# with every backend buffer in simulated device memory (a host access to one crashes) and the
# devsim communicator (MPI under NCCL's rules). Its arithmetic is the cpu backend's, so every
# result must equal the cpu backend's bit for bit. Tiny model, micro_batch 2 (1, 2 and 4 ranks).
#  train_{1,2}ranks       50 steps, ZeRO-2 ordered, on 1 / 2 ranks: per-step losses (val included)
#                         and params_hash == the cpu run on 1 rank
#  stage{0,1}_2ranks      the same at ZeRO stages 0 and 1 (all-reduce / reduce-scatter paths)
#  resume_2to1 / 2to4     25 steps on 2 ranks (checkpoint) + --resume auto on 1 / 4 ranks to the
#                         end == the cpu run
#  eval / sample / export the devsim checkpoint, read back on devsim (its stored device), gives the
#                         cpu checkpoint's val loss, tokens and safetensors bytes
#  comm_mpi_refused       device=devsim with comm=mpi (host-memory MPI on device memory): exit 2, one line
set -u
cd "$(dirname "$0")/../.."
. tests/helpers/lib.sh
need_tiny_data
common="-c inputs/tiny.cfg --set train.micro_batch=2 --set train.log_every=1 --set run.root=$TMP --set run.session=ds"
R=$TMP/ds
run() { # name np args...   (a resumed run appends to the same log)
  local name=$1 np=$2; shift 2
  timeout 300 $MPIRUN -np $np $ZT train $common --set run.name=$name "$@" >> $TMP/$name.log 2>&1
  local rc=$?
  [ $rc -eq 0 ] || fail "run_$name: exit $rc ($(grep -m1 -E 'ztrain: (error|rank)' $TMP/$name.log || tail -1 $TMP/$name.log))"
  return $rc
}
# every metrics record (loss, grad norm, val loss, as printed), then "hash H"
sig() {
  $PY - "$1" <<'EOF'
import json, sys
for l in open(sys.argv[1] + "/metrics.jsonl"):
    r = json.loads(l)
    print(r["step"], r.get("loss"), r.get("grad_norm"), r.get("val_loss"))
print("hash", json.load(open(sys.argv[1] + "/results.json"))["params_hash"])
EOF
}
compare() { # run reference test-name
  local a b
  a=$(sig $R/$1 2>&1); b=$(sig $R/$2 2>&1)
  if [ -n "$a" ] && [ "$a" == "$b" ]; then
    pass "$3 ($(echo "$a" | grep -c '^[0-9]') records and params_hash identical to $2: $(echo "$a" | tail -1 | cut -c6-30)...)"
  else
    fail "$3: differs from $2: $(diff <(echo "$a") <(echo "$b") | head -4 | tr '\n' ' ')"
  fi
}
t0=$(date +%s)
DS="--set device=devsim"
run cpu 1 --set device=cpu || finish

run ds1 1 $DS && compare ds1 cpu train_1rank
run ds2 2 $DS && compare ds2 cpu train_2ranks
for st in 0 1; do run ds2-s$st 2 $DS --set zero.stage=$st && compare ds2-s$st cpu stage${st}_2ranks; done
if run r21 2 $DS --stop-after 25 && run r21 1 $DS --resume auto; then compare r21 cpu resume_2to1; fi
if run r24 2 $DS --stop-after 25 && run r24 4 $DS --resume auto; then compare r24 cpu resume_2to4; fi

# ---------------------------------------------------------------- eval, sample, export of the checkpoint
CK=checkpoints/step_00000050.h5
dsck=$R/r21/$CK; cpuck=$R/cpu/$CK
if [ -f $dsck ] && [ -f $cpuck ]; then
  grep -q '"devsim"' <($ZT config -c $R/r21/config.cfg) || fail "setup: the devsim run's config does not say devsim"
  a=$($ZT eval --checkpoint $dsck 2>&1); b=$($ZT eval --checkpoint $cpuck 2>&1)
  if echo "$a" | grep -q "^val loss" && [ "$a" == "$b" ]; then pass "eval (devsim checkpoint on devsim == cpu: $a)"
  else fail "eval: devsim '$a' vs cpu '$b'"; fi
  sam="--prompt 1,2,3 --tokens 48 --temperature 0.9 --top-k 20 --seed 7 --tokenizer none"
  a=$($ZT sample --checkpoint $dsck $sam 2>$TMP/sa.err); ra=$?; b=$($ZT sample --checkpoint $cpuck $sam 2>$TMP/sb.err)
  if [ $ra -eq 0 ] && [ -n "$a" ] && [ "$a" == "$b" ]; then pass "sample (48 tokens, T=0.9, top-k 20: devsim == cpu: $(echo $a | cut -c1-40)...)"
  else fail "sample: devsim '$a' ($(tail -1 $TMP/sa.err)) vs cpu '$b'"; fi
  $ZT export --checkpoint $dsck --format safetensors --out $TMP/exp-ds > $TMP/exp-ds.log 2>&1; ra=$?
  $ZT export --checkpoint $cpuck --format safetensors --out $TMP/exp-cpu > $TMP/exp-cpu.log 2>&1
  if [ $ra -eq 0 ] && cmp -s $TMP/exp-ds/model.safetensors $TMP/exp-cpu/model.safetensors; then
    pass "export (devsim model.safetensors == cpu's, $(stat -c %s $TMP/exp-ds/model.safetensors) bytes)"
  else fail "export: rc $ra, model.safetensors differ or missing ($(tail -1 $TMP/exp-ds.log))"; fi
else
  fail "eval/sample/export: no step-50 checkpoint ($dsck, $cpuck)"
fi

# ---------------------------------------------------------------- host-memory MPI on device memory
out=$(timeout 60 $ZT train $common --set run.name=refused $DS --set comm=mpi 2>&1); rc=$?
if [ $rc -eq 2 ] && [ "$(echo "$out" | wc -l)" -eq 1 ] && echo "$out" | grep -q "^ztrain: error: .*comm"; then
  pass "comm_mpi_refused (exit 2: $out)"
else fail "comm_mpi_refused: rc $rc, output: $(echo "$out" | head -3)"; fi
out=$(timeout 120 $MPIRUN -np 2 $ZT train $common --set run.name=refused2 $DS --set comm=mpi 2>&1); rc=$?
n=$(echo "$out" | grep -c "ztrain: error")
[ $rc -ne 0 ] && [ $rc -ne 124 ] && [ "$n" -eq 1 ] && pass "comm_mpi_refused_2ranks (exit $rc, one error line)" \
  || fail "comm_mpi_refused_2ranks: rc $rc, $n error lines"
echo "# test_devsim: $(( $(date +%s) - t0 )) s"
finish
