#!/usr/bin/env bash
# test: heavy
# Checkpoints end to end on the tiny model with real mpirun (1-4 ranks, 4 oversubscribed):
#  resume_exact          40 steps straight == 20 (--stop-after) + --resume auto + 20: every per-step loss and
#                        params_hash; keep=2 prunes the oldest; `ztrain eval` of the final file == the run's val
#  h5py_*                h5py reads every tensor of /model and /optim/* in its true shape (ztrain's table from
#                        build/tests/model_dump), and the sha256 of /model in table order == the run's params_hash
#  h5dump_reads          h5dump -H parses the file; h5dump -b of a parameter and both moments == h5py's bytes
#  resume_4to2 / 2to3    20 steps on 4 ranks (stage 2) + 20 on 2 (stage 0) == 40 on 1; 2 ranks (stage 1) -> 3
#                        (stage 2) with micro_batch 1, global 6; the final files (params AND moments) are
#                        bit-identical to the 1-rank run's
#  find_latest_*         `latest` naming a broken file, a garbage step file with a higher step and a .tmp are
#                        all skipped by --resume auto
#  sigkill_*             SIGKILL to all ranks while a checkpoint is being written (polled: a .tmp exists), three
#                        times at different moments of the write: `latest` always names a complete file, every
#                        step_*.h5 is complete, and --resume auto finishes bit-identical to an uninterrupted run
#  sigusr1_one / _all    SIGUSR1 to one rank / to all: every rank saves and exits with
#                        checkpoint.signal_exit_code (3); the resumed run is bit-identical to a straight run
#  bad_*                 truncated file, not HDF5, HDF5 but not ztrain, another model shape (resume and eval),
#                        a changed optimizer setting, a full disk (a 600 kB tmpfs as checkpoint.dir; skipped
#                        where no tmpfs can be mounted): exit 2 with one clear line on every rank, no hang,
#                        no file changed; a refused --resume auto of an existing run leaves its config.cfg,
#                        metrics.jsonl, results.json and checkpoints as they were
set -u
cd "$(dirname "$0")/../.."
. tests/helpers/lib.sh
need_tiny_data
H="$PY tests/helpers/ckpt_h5.py"
TABLE=$TMP/table.txt
build/tests/model_dump table --layers 2 --heads 2 --embd 64 --vocab 256 --padded-vocab 256 --block 64 > $TABLE \
  || { fail "setup: build/tests/model_dump table failed (make build-all)"; finish; }
common="-c inputs/tiny.cfg --set train.log_every=1 --set run.root=$TMP --set run.session=ck --set eval.every=0"
R=$TMP/ck
run() { run_named "$@"; }
compare() { compare_runs $R/$1 $R/$2 "$3"; } # run $1 against reference run $2, check named $3
hashof() { $PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["params_hash"].split(":")[1])' "$R/$1/results.json"; }

# ---------------------------------------------------------------- (1) resume exact, pruning, eval
if run s40 1 --set train.steps=40 && run split 1 --set train.steps=40 --stop-after 20 &&
   run split 1 --set train.steps=40 --resume auto; then
  compare split s40 resume_exact
  files=$(cd $R/split/checkpoints && ls | tr '\n' ' ')
  [ "$files" == "latest step_00000025.h5 step_00000040.h5 " ] && [ "$(cat $R/split/checkpoints/latest)" == step_00000040.h5 ] \
    && pass "keep_prunes_oldest (keep=2 after saves at 20, 25, 40: $files)" || fail "keep_prunes_oldest: $files"
  out=$($ZT eval --checkpoint $R/s40/checkpoints/step_00000040.h5 2>&1); vl=$(result $R/s40 final_val_loss)
  if echo "$out" | grep -q "^val loss" && $PY -c "import sys; v=float('$out'.split()[2]); sys.exit(0 if abs(v-$vl) < 6e-7 else 1)"; then
    pass "eval_equals_training_val ($out; training: $vl)"
  else fail "eval_equals_training_val: '$out' vs $vl"; fi
  # the validation set is counted in sequences: the same value whatever micro_batch and rank count
  c40=$R/s40/checkpoints/step_00000040.h5
  v4=$($ZT eval --checkpoint $c40 2>&1 | grep "^val loss")
  v1=$($ZT eval --checkpoint $c40 --set train.micro_batch=1 2>&1 | grep "^val loss")
  v3=$($MPIRUN -np 2 $ZT eval --checkpoint $c40 --set train.micro_batch=3 --set train.global_batch=6 --set eval.sequences=16 2>&1 | grep "^val loss")
  [ -n "$v4" ] && [ "$v4" == "$v1" ] && [ "$v4" == "$v3" ] \
    && pass "val_loss_independent_of_micro_batch_and_ranks ($v4 at micro_batch 4 / 1 / 2 ranks x 3)" \
    || fail "val_loss_independent_of_micro_batch_and_ranks: '$v4' / '$v1' / '$v3'"
else fail "resume_exact: a run failed (see above)"; fi

# ---------------------------------------------------------------- (3) h5py reads the files as they are
f40=$R/s40/checkpoints/step_00000040.h5
msg=$($H verify $f40 $TABLE) && pass "h5py_true_shapes ($msg)" || fail "h5py_true_shapes: $msg"
h=$($H hash $f40 $TABLE 2>&1); want=$(hashof s40)
[ "$h" == "$want" ] && pass "h5py_values_equal_params_hash (sha256 of /model in table order = results.json: ${h:0:16}...)" \
  || fail "h5py_values_equal_params_hash: $h vs $want"
# h5dump (the HDF5 tools' own reader): the whole file's structure, and the bytes of three datasets (a parameter,
# both Adam moments) equal h5py's
if h5dump -H $f40 > $TMP/h5dump.txt 2>&1; then
  bad=""
  for d in /model/h.0.attn.c_attn.weight /optim/exp_avg/ln_f.bias /optim/exp_avg_sq/wpe.weight; do
    rm -f $TMP/h5d.bin
    h5dump -d $d -b LE -o $TMP/h5d.bin $f40 > /dev/null 2>&1 &&
      $PY -c 'import h5py, sys; f = h5py.File(sys.argv[1], "r"); a = f[sys.argv[2]][()]
sys.exit(0 if a.size > 0 and a.astype("<f4").tobytes() == open(sys.argv[3], "rb").read() else 1)' $f40 $d $TMP/h5d.bin ||
      bad="$bad $d"
  done
  n=$(grep -c DATASET $TMP/h5dump.txt)
  [ -z "$bad" ] && [ "$n" -gt 0 ] && pass "h5dump_reads (h5dump -H: $n datasets; h5dump -b of 3 datasets = h5py's bytes)" \
    || fail "h5dump_reads: differs from h5py:$bad ($n datasets in the header dump)"
else fail "h5dump_reads: h5dump -H failed: $(tail -2 $TMP/h5dump.txt)"; fi

# ---------------------------------------------------------------- (2) other rank counts and stages on resume
m2="--set train.micro_batch=2 --set train.global_batch=8 --set train.steps=40"
if run r1 1 $m2 && run r42 4 $m2 --stop-after 20 && run r42 2 $m2 --resume auto --set zero.stage=0; then
  grep -q "saved by 4 ranks" $TMP/r42.log && compare r42 r1 "resume_4to2 (stage 2 -> 0)" || fail "resume_4to2: no 'saved by 4 ranks'"
  msg=$($H same $R/r42/checkpoints/step_00000040.h5 $R/r1/checkpoints/step_00000040.h5) \
    && pass "resume_4to2_files ($msg: params and Adam moments)" || fail "resume_4to2_files: $msg"
else fail "resume_4to2: a run failed"; fi
m1="--set train.micro_batch=1 --set train.global_batch=6 --set train.steps=30"
if run q1 1 $m1 && run q23 2 $m1 --set zero.stage=1 --stop-after 15 && run q23 3 $m1 --resume auto --set zero.stage=2; then
  compare q23 q1 "resume_2to3 (stage 1 -> 2, micro 1, global 6)"
  msg=$($H same $R/q23/checkpoints/step_00000030.h5 $R/q1/checkpoints/step_00000030.h5) \
    && pass "resume_2to3_files ($msg)" || fail "resume_2to3_files: $msg"
else fail "resume_2to3: a run failed"; fi

# ---------------------------------------------------------------- find_latest skips what is not complete
fl=$TMP/fl; mkdir -p $fl; cp $R/split/checkpoints/step_*.h5 $fl/
echo "garbage" > $fl/step_00000099.h5                      # higher step, not HDF5
cp $fl/step_00000040.h5 $fl/step_00000041.h5.tmp           # an interrupted save
for latest in none broken; do
  rm -f $fl/latest; [ $latest == broken ] && echo step_00000099.h5 > $fl/latest
  out=$(timeout 120 $ZT train $common --set train.steps=40 --set run.name=fl --set checkpoint.dir=$fl --resume auto 2>&1)
  echo "$out" | grep -q "resumed from $fl/step_00000040.h5 at step 40" && pass "find_latest_$latest (picked step_00000040.h5 over step_00000099.h5 garbage and a .tmp)" \
    || fail "find_latest_$latest: $(echo "$out" | grep -m1 -E 'resumed|error')"
done

# ---------------------------------------------------------------- (5) SIGKILL during a checkpoint write
big="--set model.n_embd=256 --set train.steps=16 --set checkpoint.keep=2"
kd=$R/kill/checkpoints
build/tests/model_dump table --layers 2 --heads 2 --embd 256 --vocab 256 --padded-vocab 256 --block 64 > $TABLE.big
if run kref 2 $big; then
  hits=0; bad=""
  for delay in 0 0.01 0.05; do
    timeout 300 $MPIRUN -np 2 $ZT train $common $big --set run.name=kill --set checkpoint.every=1 --resume auto >> $TMP/kill.log 2>&1 &
    mp=$!
    ranks=""
    for _ in $(seq 1 600); do ranks=$(ztrain_pids $mp); [ $(echo $ranks | wc -w) -eq 2 ] && break; sleep 0.05; done
    for _ in $(seq 1 30000); do compgen -G "$kd/*.tmp" > /dev/null && break; kill -0 $mp 2>/dev/null || break; sleep 0.002; done
    sleep $delay
    kill -9 $ranks 2>/dev/null
    tmpfile=$(compgen -G "$kd/*.tmp")
    wait $mp 2>/dev/null
    [ -n "$tmpfile" ] && hits=$((hits+1))
    l=$(cat $kd/latest 2>/dev/null)
    if [ -n "$l" ]; then m=$($H verify $kd/$l $TABLE.big 2>&1) || bad="$bad latest=$l: $m;"; fi
    for f in $kd/step_*.h5; do [ -e "$f" ] && { $H verify $f > /dev/null || bad="$bad $(basename $f) incomplete;"; }; done
  done
  if run kill 2 $big --resume auto; then
    [ -z "$bad" ] && [ $hits -ge 1 ] && pass "sigkill_mid_write_invariants ($hits of 3 kills left a partial .tmp; latest and every step_*.h5 complete each time)" \
      || fail "sigkill_mid_write_invariants: hits=$hits $bad"
    compare kill kref "sigkill_resume_exact"
  else fail "sigkill_resume_exact: final --resume auto run failed"; fi
else fail "sigkill: reference run failed"; fi

# ---------------------------------------------------------------- (6) SIGUSR1 to one rank / all ranks
sg="--set train.steps=300 --set checkpoint.signal_exit_code=3 --set checkpoint.every=0"
if run sref 2 $sg; then
  for mode in one all; do
    rm -f $TMP/rc.$mode.*
    timeout 300 $MPIRUN -np 2 sh -c "$ZT train $common $sg --set run.name=sig$mode; echo \$? > $TMP/rc.$mode.\$OMPI_COMM_WORLD_RANK" \
      > $TMP/sig$mode.log 2>&1 &
    mp=$!
    for _ in $(seq 1 600); do
      [ "$(cat $R/sig$mode/metrics.jsonl 2>/dev/null | wc -l)" -ge 3 ] && break; kill -0 $mp 2>/dev/null || break; sleep 0.05
    done
    zp=$(ztrain_pids $mp)
    if [ $mode == one ]; then kill -USR1 $(echo $zp | cut -d' ' -f1); else kill -USR1 $zp; fi
    wait $mp
    rcs="$(cat $TMP/rc.$mode.0 2>/dev/null) $(cat $TMP/rc.$mode.1 2>/dev/null)"
    at=$(grep -o "stopped at step [0-9]*/300: signal received" $TMP/sig$mode.log)
    if [ "$rcs" == "3 3" ] && [ -n "$at" ] && grep -q "checkpoint .*step_" $TMP/sig$mode.log; then
      pass "sigusr1_$mode (every rank saved and exited 3: $at)"
    else fail "sigusr1_$mode: rank exit codes '$rcs', '$at'"; fi
    run sig$mode 2 $sg --resume auto && compare sig$mode sref "sigusr1_${mode}_resume_exact" || fail "sigusr1_${mode}_resume_exact: resume failed"
  done
else fail "sigusr1: reference run failed"; fi

# ---------------------------------------------------------------- (7) bad files: exit 2, one line, nothing changed
B=$TMP/bad; mkdir -p $B
cp $f40 $B/trunc.h5; truncate -s $(( $(stat -c %s $f40) / 2 )) $B/trunc.h5
echo "this is not a checkpoint" > $B/text.h5
$H foreign $B/foreign.h5 > /dev/null
run small 1 --set model.n_embd=32 --set train.steps=2 --set train.warmup_steps=0
small=$R/small/checkpoints/step_00000002.h5
snap() { sha256sum $B/* $R/*/checkpoints/* 2>/dev/null | sort; }
before=$(snap)
expect_error() { # name pattern command...
  local name=$1 pat=$2; shift 2
  local out rc n
  out=$(timeout 120 "$@" 2>&1); rc=$?
  n=$(echo "$out" | grep -c "ztrain: error")
  if [ $rc -eq 2 ] && [ "$n" -eq 1 ] && echo "$out" | grep "ztrain: error" | grep -q -- "$pat"; then
    pass "$name ($(echo "$out" | grep 'ztrain: error' | cut -c1-150))"
  else fail "$name: exit $rc, $n error lines: $(echo "$out" | grep -m2 -E 'error|rror' | tr '\n' ' ')"; fi
}
tr2="$MPIRUN -np 2 $ZT train $common --set run.name=err"
expect_error bad_truncated_resume "truncated" $tr2 --resume $B/trunc.h5
expect_error bad_truncated_eval "truncated" $MPIRUN -np 2 $ZT eval --checkpoint $B/trunc.h5
expect_error bad_not_hdf5 "not an HDF5 file" $tr2 --resume $B/text.h5
expect_error bad_not_ztrain "not a ztrain checkpoint" $tr2 --resume $B/foreign.h5
expect_error bad_shape_resume "model.n_embd is 32 in the checkpoint but 64 in the config" $tr2 --resume $small
expect_error bad_shape_eval "tensor wte.weight has shape (256, 32) but the model expects (256, 64)" \
  $MPIRUN -np 2 $ZT eval --checkpoint $small -c inputs/tiny.cfg
expect_error bad_optimizer_change "train.lr is 0.001 in the checkpoint but 0.002 in the config" \
  $tr2 --set train.steps=40 --set train.lr=0.002 --resume $f40
expect_error bad_missing "cannot open checkpoint" $tr2 --resume $B/nope.h5
# a full disk: one clear line on every rank, no hang, no .tmp left (needs root to mount a small tmpfs)
mkdir -p $TMP/full
if mount -t tmpfs -o size=600k tmpfs $TMP/full 2>/dev/null; then
  expect_error bad_disk_full "No space left on device" \
    $MPIRUN -np 2 $ZT train $common --set run.name=full --set train.steps=2 --set train.warmup_steps=0 --set checkpoint.dir=$TMP/full/ck
  [ -z "$(ls $TMP/full/ck 2>/dev/null)" ] && pass "bad_disk_full_no_leftovers" || fail "bad_disk_full_no_leftovers: $(ls $TMP/full/ck)"
  umount $TMP/full
else echo "SKIP bad_disk_full: cannot mount a tmpfs here (not root?)"; fi
# a refused resume of an existing run must leave that run's files as they were
runfiles() { sha256sum $R/s40/config.cfg $R/s40/metrics.jsonl $R/s40/results.json $R/s40/checkpoints/* 2>/dev/null; }
rb=$(runfiles)
expect_error bad_resume_same_run "train.lr is 0.001 in the checkpoint but 0.002" \
  $MPIRUN -np 2 $ZT train $common --set run.name=s40 --set train.steps=40 --set train.lr=0.002 --resume auto
[ "$(runfiles)" == "$rb" ] && pass "bad_resume_keeps_run_files (config.cfg, metrics.jsonl, results.json, checkpoints of the run unchanged)" \
  || fail "bad_resume_keeps_run_files: changed: $(diff <(echo "$rb") <(runfiles) | grep '^>' | awk '{print $3}' | xargs -n1 basename | tr '\n' ' ')"
# the checkpoint benchmark's own check (#wrong: every buffer after its loads equals what was saved), on 1 and
# 3 ranks of the tiny model: the saver kept over rounds and the load hook that gathers the parameters
for np in 1 3; do
  bj=$($MPIRUN -np $np build/bench/bench_ckpt -c inputs/tiny.cfg --dir $TMP/bck$np --reps 2 --json 2>/dev/null | grep "^{")
  echo "$bj" | $PY -c "import json,sys; d=json.loads(sys.stdin.read()); sys.exit(0 if d['wrong'] == 0 and d['rounds'] == 2 else 1)" 2>/dev/null \
    && pass "bench_ckpt_roundtrip_${np}_ranks (#wrong 0 over a warm-up and 2 rounds)" || fail "bench_ckpt_roundtrip_${np}_ranks: $bj"
done
[ "$(snap)" == "$before" ] && pass "bad_nothing_changed ($(echo "$before" | wc -l) files checksummed before and after)" \
  || fail "bad_nothing_changed: $(diff <(echo "$before") <(snap) | head -3 | tr '\n' ' ')"
finish
