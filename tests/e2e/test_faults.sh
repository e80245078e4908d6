#!/usr/bin/env bash
# test: heavy
# test_faults.sh — bad input gets a clear error and nothing is lost (docs/design.md section 7). Every case runs
# one command on bad input and asserts:
#   - exit code 2 (not 0, not a signal: no abort, no core dump, no timeout),
#   - exactly one "ztrain: error" line, naming the file / key / value (the case's pattern),
#   - every rank gone when the command returns, within the case's time bound (ranks carry a tag in
#     their environment; none may be left), 1 rank or 2-3 under $MPIRUN,
#   - nothing modified: the fixtures and the run root (every path, type, size and sha256) are the same
#     before and after, so a refused run creates no run directory, no 0-byte file, and leaves an
#     earlier run's files as they were.
# Groups: input file types (named pipes, directories, devices: checked before any open), run directory
# files (early failure, disk full, read-only root), phase length, documented ranges and memory, paths
# outside run.root, rank/host in rank-local errors, the run directory's lock, then CLI, config, data,
# tokenizer, checkpoint, safetensors and rank-count cases. Not repeated here: what test_config.sh,
# test_prepare.sh, test_ckpt.sh and test_export.py already check.
set -u
cd "$(dirname "$0")/../.."
. tests/helpers/lib.sh
need_tiny_data
T0=$(date +%s)
ZTA=$(readlink -f "$ZT")
HOST=$(hostname)
F=$TMP/fx; R=$TMP/runs; mkdir -p $F $R
TLIM=${ZT_FAULT_TIMEOUT:-40}
NCASE=0

# ---------------------------------------------------------------- helpers
# snap PATH...: every path under them with type and size, and the sha256 of every regular file
snap() {
  local p
  for p in "$@"; do
    if [ ! -e "$p" ]; then echo "absent $p"; continue; fi
    find "$p" -printf '%y %p %s\n' | sort
    find "$p" -type f -exec sha256sum {} + | sort
  done
}
# processes still carrying tag $1 in their environment (one grep over /proc: cheap)
tagged() {
  local f
  for f in $(grep -lzx "ZT_FAULT_TAG=$1" /proc/[0-9]*/environ 2>/dev/null); do
    f=${f#/proc/}; [ "${f%/environ}" != self ] && echo "${f%/environ}"
  done
}
# the ztrain processes among them
tagged_ztrain() { local p; for p in $(tagged $1); do [[ "$(cat /proc/$p/comm 2>/dev/null)" == ztrain* ]] && echo $p; done; }
WATCH="$F $R"
# fault NAME NP PATTERN CMD...: CMD on NP ranks (1: as it is; 2, 3: under $MPIRUN) must fail as above;
# PATTERN is a fixed string the error line must contain. $WATCH (default: fixtures and run root) must
# be unchanged. Sets $out (the output file).
fault() {
  local name=$1 np=$2 pat=$3; shift 3
  local tag="zf$$-$NCASE" before after rc left n line t1
  NCASE=$((NCASE + 1))
  out=$TMP/$name.out
  before=$(snap $WATCH)
  t1=${EPOCHREALTIME/,/.}
  if [ "$np" -gt 1 ]; then
    ZT_FAULT_TAG=$tag timeout -k 3 $TLIM $MPIRUN -x ZT_FAULT_TAG -np $np "$@" > $out 2>&1
  else
    ZT_FAULT_TAG=$tag timeout -k 3 $TLIM "$@" > $out 2>&1
  fi
  rc=$?
  local dt=$(awk -v a=$t1 -v b=${EPOCHREALTIME/,/.} 'BEGIN { printf "%.1f", b - a }')
  # every rank must be gone (a singleton's orted may linger a moment: only ztrain processes count)
  for _ in $(seq 1 30); do left=$(tagged_ztrain $tag); [ -z "$left" ] && break; sleep 0.1; done
  [ -n "$left" ] && kill -9 $left 2>/dev/null
  after=$(snap $WATCH)
  n=$(grep -c "ztrain: error" $out)
  line=$(grep -m1 "ztrain: error" $out)
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then fail "$name: timed out after ${TLIM} s (hang): $(tail -c 300 $out | tr '\n' ' ')"
  elif [ -n "$left" ]; then fail "$name: ranks still running after the command returned: pids $left"
  elif [ $rc -ne 2 ]; then fail "$name: exit code $rc, expected 2: $(grep -m2 -iE 'error|assert|abort|signal' $out | tr '\n' ' ' | cut -c1-300)"
  elif grep -qiE "assertion failed|core dumped|Segmentation fault|signal [0-9]+ \(|runtime error:|AddressSanitizer" $out; then
    fail "$name: crashed: $(grep -m1 -iE 'assertion|core|Segmentation|signal|runtime error|Sanitizer' $out)"
  elif [ "$n" -ne 1 ]; then fail "$name: $n 'ztrain: error' lines, expected 1: $(grep 'ztrain: error' $out | cut -c1-200 | tr '\n' '|')"
  elif ! grep "ztrain: error" $out | grep -qF -- "$pat"; then fail "$name: the error line lacks '$pat': $line"
  elif [ "$before" != "$after" ]; then fail "$name: files changed: $(diff <(echo "$before") <(echo "$after") | grep '^[<>]' | head -3 | tr '\n' ' ')"
  elif compgen -G "core*" > /dev/null || compgen -G "$F/core*" > /dev/null; then fail "$name: a core file appeared: $(ls core* $F/core* 2>/dev/null)"
  else pass "$name (${np} rank$([ $np -gt 1 ] && echo s), ${dt} s: $(echo "$line" | cut -c1-170))"; fi
}
# ok NAME CMD...: CMD must exit 0 (set-up steps and the accepted side of a limit)
ok() {
  local name=$1; shift
  out=$TMP/$name.out
  timeout -k 3 $TLIM "$@" > $out 2>&1
  local rc=$?
  [ $rc -eq 0 ] && return 0
  fail "$name: exit $rc: $(grep -m1 'ztrain: error' $out || tail -2 $out | tr '\n' ' ')"
  return 1
}

# ---------------------------------------------------------------- fixtures
tiny="-c inputs/tiny.cfg --set run.root=$R --set run.session=s --set train.threads=1"
mkfifo $F/fifo
mkdir -p $F/dir $F/stdir
mkfifo $F/stdir/model.safetensors
printf 'In the beginning was the word, and the word was with the text.\nThe text was long enough.\n%.0s' $(seq 1 40) > $F/ok.txt
$PY - $F <<'EOF'
import struct, sys, os
d = sys.argv[1]
def shard(name, toks, vocab, magic=b"ZTSHARD\0", count=None, width=2, cut=0):
    n = len(toks) if count is None else count
    h = magic + struct.pack("<IIIIQ", 1, width, vocab, 0xFFFFFFFF, n) + b"\0" * 32
    body = b"".join(struct.pack("<H" if width == 2 else "<I", t) for t in toks)
    data = h + body
    open(os.path.join(d, name), "wb").write(data[:len(data) - cut] if cut else data)
toks = [(i * 7) % 200 for i in range(4000)]
shard("magic.bin", toks, 256, magic=b"NOTSHARD")
shard("bigvocab.bin", toks, 50257)                       # vocab larger than the model's 256
shard("trunc.bin", toks, 256, cut=1000)                  # header says 4000 tokens
shard("short.bin", toks[:20], 256)                       # fewer tokens than one sequence of 32 (+1)
shard("badtok.bin", toks[:100] + [300] + toks[:100], 256)  # token 300 >= the header's vocab 256
open(os.path.join(d, "empty.bin"), "wb").close()
# safetensors: a header length beyond the file, a 3-byte file, a header that is not JSON
open(os.path.join(d, "hdrlen.safetensors"), "wb").write(struct.pack("<Q", 10**12) + b"{}")
open(os.path.join(d, "tiny.safetensors"), "wb").write(b"abc")
open(os.path.join(d, "notjson.safetensors"), "wb").write(struct.pack("<Q", 8) + b"not json")
EOF
# a tokenizer and a truncated copy; a checkpoint of a 2-step run (the run "good": its files are watched)
ok setup_prepare $ZT prepare --input $F/ok.txt --vocab-size 300 --out-dir $F/prep --val-fraction 0.1 || finish
head -c $(( $(stat -c %s $F/prep/tokenizer.zttok) / 2 )) $F/prep/tokenizer.zttok > $F/trunc.zttok
ok setup_run $ZT train $tiny --set run.name=good --set train.steps=2 --set train.warmup_steps=0 --set eval.every=0 || finish
CK=$R/s/good/checkpoints/step_00000002.h5
[ -f $CK ] || { fail "setup: no checkpoint $CK"; finish; }

# ================================================================ 1. input types: no hang, one line
fault type_config_fifo 1 "$F/fifo: a named pipe (FIFO), not a regular file" $ZT config -c $F/fifo
fault type_config_dir 1 "$F/dir: a directory, not a regular file" $ZT config -c $F/dir
fault type_config_devzero 1 "/dev/zero: a character device" $ZT config -c /dev/zero
printf '@include "%s"\n' $F/fifo > $F/include_fifo.cfg
fault type_config_include_fifo 1 "include_fifo.cfg:1: @include: $F/fifo: a named pipe" $ZT config -c $F/include_fifo.cfg
printf '@include "%s"\n' $F/dir > $F/include_dir.cfg
fault type_config_include_dir 1 "@include: $F/dir: a directory" $ZT train -c $F/include_dir.cfg
fault type_train_shard_fifo 2 "data.train: $F/fifo: a named pipe" $ZT train $tiny --set data.train=$F/fifo
fault type_val_shard_dir 1 "data.val: $F/dir: a directory" $ZT train $tiny --set data.val=$F/dir
fault type_shard_glob_fifo 1 "$F/fifo: a named pipe (FIFO), not a regular file (expected a ztrain token shard" \
  $ZT train $tiny --set "data.train=$F/fif[o]"
fault type_tokenizer_fifo 2 "data.tokenizer: $F/fifo: a named pipe" $ZT train $tiny --set data.tokenizer=$F/fifo --set sample.every=1
fault type_resume_fifo 2 "$F/fifo" $ZT train $tiny --set run.name=good --resume $F/fifo
fault type_init_from_dir 1 "$F/dir" $ZT train $tiny --set run.name=ft --init-from $F/dir
fault type_eval_fifo 2 "$F/fifo" $ZT eval --checkpoint $F/fifo
fault type_sample_fifo 2 "$F/fifo: a named pipe" $ZT sample --checkpoint $F/fifo
fault type_sample_tokenizer_fifo 1 "$F/fifo: a named pipe" $ZT sample --checkpoint $CK --tokenizer $F/fifo
fault type_export_fifo 2 "$F/fifo: a named pipe" $ZT export --checkpoint $F/fifo --out $F/exp
fault type_import_fifo 1 "$F/fifo: a named pipe" $ZT import --safetensors $F/fifo --out $F/imp.h5
fault type_import_dir_member_fifo 1 "$F/stdir/model.safetensors: a named pipe" $ZT import --safetensors $F/stdir --out $F/imp.h5
fault type_prepare_input_fifo 1 "$F/fifo: a named pipe" $ZT prepare --input $F/fifo --vocab-size 300 --out-dir $F/po
fault type_prepare_input_dir 1 "$F/dir: a directory" $ZT prepare --input $F/dir --vocab-size 300 --out-dir $F/po
fault type_prepare_tokenizer_fifo 1 "$F/fifo: a named pipe" $ZT prepare --input $F/ok.txt --tokenizer $F/fifo --out-dir $F/po
fault type_prepare_decode_fifo 1 "$F/fifo: a named pipe" $ZT prepare --tokenizer $F/prep/tokenizer.zttok --decode $F/fifo --text-out $F/x.txt
fault type_prepare_encode_devzero 1 "/dev/zero: a character device" $ZT prepare --tokenizer $F/prep/tokenizer.zttok --encode /dev/zero --ids-out $F/x.bin

# ================================================================ 2. run directory files
# a run refused after its directory was chosen leaves nothing: no directory, no 0-byte config.cfg / metrics.jsonl
fault rundir_refused_new_run 2 "not an HDF5 file" $ZT train $tiny --set run.name=fresh --resume $F/ok.txt
# ... and an existing run keeps its files exactly (checksummed by fault)
fault rundir_refused_keeps_run 1 "$F/empty.bin" $ZT train $tiny --set run.name=good --resume $F/empty.bin
# disk full while a run is starting (a 4 KiB tmpfs as run.root; needs root): one line, no 0-byte file left
mkdir -p $TMP/full
if mount -t tmpfs -o size=4k tmpfs $TMP/full 2>/dev/null; then
  WATCH="$F $R"
  fault rundir_disk_full 2 "No space left on device" $ZT train $tiny --set run.root=$TMP/full --set train.steps=2 --set train.warmup_steps=0
  z=$(find $TMP/full -type f -size 0)
  [ -z "$z" ] && pass "rundir_disk_full_no_empty_files (nothing 0-byte left in run.root: $(find $TMP/full | wc -l) paths)" \
    || fail "rundir_disk_full_no_empty_files: $z"
  umount $TMP/full
  mkdir -p $TMP/ro
  if mount -t tmpfs -o size=64k,ro tmpfs $TMP/ro 2>/dev/null; then
    fault rundir_readonly_root 1 "$TMP/ro/s: cannot create the run directory: Read-only file system" $ZT train $tiny --set run.root=$TMP/ro
    umount $TMP/ro
  fi
else
  echo "SKIP rundir_disk_full / rundir_readonly_root: cannot mount a tmpfs here (not root?)"
fi
touch $F/afile
fault rundir_root_is_file 1 "$F/afile/s: cannot create the run directory" $ZT train $tiny --set run.root=$F/afile

# ================================================================ 3. phases that would run unreasonably long
fault phase_eval_batches_overflow 1 "eval.batches = 1073741824 x train.micro_batch = 4" $ZT train $tiny --set eval.batches=1073741824
# more validation sequences than data.val has windows: clamped with a note, the run ends normally
if ok phase_eval_sequences_clamped $ZT train $tiny --set run.name=evclamp --set train.steps=1 --set train.warmup_steps=0 \
     --set eval.sequences=1000000000 --set checkpoint.every=0; then
  grep -q "eval.sequences" $out && pass "phase_eval_sequences_clamped ($(grep -m1 'eval.sequences' $out | cut -c1-150))" \
    || fail "phase_eval_sequences_clamped: no note naming eval.sequences"
fi
rm -rf $R/s/evclamp

# ================================================================ 4. documented ranges match the real limits
fault range_n_layer_above_limit 1 "model.n_layer = 129: must be <= 128" $ZT train $tiny --set model.n_layer=129
ok range_n_layer_at_limit $ZT estimate $tiny --set model.n_layer=128 && pass "range_n_layer_at_limit (estimate builds the 128-layer table)"
fault mem_model_too_big 2 "does not fit in memory" $ZT train $tiny --set model.n_layer=128 --set model.n_embd=16384 --set model.n_head=128
fault mem_configured_limit 2 "but $HOST has 1.0 MiB (ZTRAIN_MEM_LIMIT)" env ZTRAIN_MEM_LIMIT=1M $ZT train $tiny
fault mem_absurd_activations 1 "its activations alone are about" $ZT train $tiny --set data.val= --set model.n_layer=128 \
  --set model.n_embd=4096 --set model.n_head=64 --set model.block_size=32768 --set train.seq_len=32768 \
  --set train.micro_batch=1048576 --set train.global_batch=1048576

# ================================================================ 5. paths outside the session
fault path_name_dotdot 2 "run.name = \"..\": must be a plain directory name" $ZT train $tiny --set run.name=..
fault path_session_dotdot 1 "run.session = \"../escape\"" $ZT train $tiny --set run.session=../escape
fault path_name_slash 1 "run.name = \"a/b\"" $ZT train $tiny --set run.name=a/b
fault path_name_dot 1 "run.name = \".\"" $ZT train $tiny --set run.name=.
[ ! -e $TMP/escape ] && pass "path_nothing_outside (no $TMP/escape)" || fail "path_nothing_outside: $TMP/escape exists"

# ================================================================ 6. rank-local errors say which rank and host
# rank 1 is started with another --set: its config differs from rank 0's
fault rank_config_differs 2 "rank 1 on $HOST: the config differs from rank 0's: train.lr = 0.002 here but 0.001" \
  sh -c 'x=; [ "$OMPI_COMM_WORLD_RANK" = 1 ] && x="--set train.lr=0.002"; exec '"$ZTA train $tiny"' $x'
# rank 1 runs where data/tiny/train.bin (a relative path) does not exist: a node without the file
mkdir -p $TMP/elsewhere/inputs; cp inputs/tiny.cfg $TMP/elsewhere/inputs/
fault rank_missing_shard 2 "rank 1 on $HOST: data/tiny/train.bin: no such data file" \
  sh -c '[ "$OMPI_COMM_WORLD_RANK" = 1 ] && cd '"$TMP/elsewhere"'; exec '"$ZTA train $tiny"
# the singleton's rank-local error stays plain: sample cannot write its output
fault rank_singleton_plain 1 "ztrain: error: sample: cannot write the generated text to stdout" \
  sh -c "$ZTA sample --checkpoint $CK --tokens 4 > /dev/full"

# ================================================================ 7. one run per run directory: run.lock
lockdir=$R/s/locked
ZT_FAULT_TAG=lockowner$$ timeout -k 3 120 $ZT train $tiny --set run.name=locked --set train.steps=100000 \
  --set eval.every=0 --set checkpoint.every=0 > $TMP/lockowner.out 2>&1 &
owner=$!
for _ in $(seq 1 200); do [ -s $lockdir/metrics.jsonl ] && break; sleep 0.05; done
opid=$(tagged_ztrain lockowner$$ | head -1)
if [ -s $lockdir/run.lock ] && grep -q "host $HOST pid $opid" $lockdir/run.lock; then
  pass "lock_taken (run.lock: $(cat $lockdir/run.lock))"
  WATCH="$F"   # the owner is writing its own files
  fault lock_second_run_refused 2 "$lockdir is in use by another ztrain run: pid $opid on $HOST" \
    $ZT train $tiny --set run.name=locked --set train.steps=100000 --set eval.every=0 --set checkpoint.every=0 --resume auto
  WATCH="$F $R"
else fail "lock_taken: run.lock is '$(cat $lockdir/run.lock 2>/dev/null)', owner pid '$opid'"; fi
kill -9 $(tagged_ztrain lockowner$$) 2>/dev/null; wait $owner 2>/dev/null
# the owner died without releasing it: the next run takes the lock over with a note, and releases it at exit
if ok lock_stale_taken_over $ZT train $tiny --set run.name=locked --set train.steps=1 --set train.warmup_steps=0 \
     --set eval.every=0 --set checkpoint.every=0 --resume auto; then
  grep -q "taking over a stale lock of pid $opid on $HOST" $out && [ ! -e $lockdir/run.lock ] \
    && pass "lock_stale_taken_over ($(grep -m1 'stale lock' $out | cut -c1-140); released at exit)" \
    || fail "lock_stale_taken_over: $(grep -m1 'lock' $out) / run.lock left: $(cat $lockdir/run.lock 2>/dev/null)"
fi
# a lock naming another host cannot be checked from here: refused, naming that host
echo "host node-elsewhere pid 4242 since 2024-01-01T00:00:00Z" > $lockdir/run.lock
fault lock_other_host_refused 2 "pid 4242 on node-elsewhere" $ZT train $tiny --set run.name=locked --set train.steps=1 \
  --set train.warmup_steps=0 --resume auto
rm -rf $lockdir
[ ! -e $R/s/good/run.lock ] && pass "lock_released_after_run (no run.lock in a finished run)" || fail "lock_released_after_run"

# ================================================================ 8. more bad input, by area
# --- CLI
fault cli_stop_after_zero 1 "--stop-after 0" $ZT train $tiny --stop-after 0
fault cli_time_limit_negative 1 "--time-limit -5" $ZT train $tiny --time-limit -5
fault cli_resume_no_value 1 "--resume: expected a value" $ZT train $tiny --resume
fault cli_init_and_resume 1 "--init-from and --resume exclude each other" $ZT train $tiny --init-from $CK --resume auto
fault cli_sample_tokens_zero 1 "--tokens 0" $ZT sample --checkpoint $CK --tokens 0
fault cli_sample_temperature_text 1 "--temperature hot" $ZT sample --checkpoint $CK --temperature hot
fault cli_sample_topk_negative 1 "--top-k -1" $ZT sample --checkpoint $CK --top-k -1
fault cli_eval_no_checkpoint 1 "--checkpoint PATH is required" $ZT eval
fault cli_export_out_is_file 1 "--out $F/ok.txt: a regular file, not a directory" $ZT export --checkpoint $CK --out $F/ok.txt
fault cli_import_out_is_dir 1 "--out $F/dir: a directory" $ZT import --safetensors $F/hdrlen.safetensors --out $F/dir
# --- config
fault cfg_missing_file_2ranks 2 "$F/nope.cfg: cannot open" $ZT train -c $F/nope.cfg
fault cfg_unknown_key_2ranks 2 "unknown key 'data.trian' (did you mean 'data.train'?)" $ZT train $tiny --set data.trian=x
fault cfg_bool_bad_value 1 "checkpoint.async: expected true or false, got 'maybe'" $ZT train $tiny --set checkpoint.async=maybe
fault cfg_negative_stage 1 "zero.stage = -1: must be >= 0" $ZT train $tiny --set zero.stage=-1
fault cfg_negative_micro_batch 1 "train.micro_batch = -4: must be >= 0" $ZT train $tiny --set train.micro_batch=-4
fault cfg_negative_seed 1 "train.seed = -1: must be >= 0" $ZT train $tiny --set train.seed=-1
fault cfg_zero_temperature 1 "sample.temperature = 0: must be > 0" $ZT train $tiny --set sample.temperature=0
fault cfg_string_for_int 1 "model.n_embd: expected an integer, got 'wide'" $ZT train $tiny --set model.n_embd=wide
printf 'model = {\n  n_layer = ;\n};\n' > $F/syntax.cfg
fault cfg_syntax_2ranks 2 "syntax.cfg:2: syntax error" $ZT train -c $F/syntax.cfg
: > $F/empty.cfg
fault cfg_empty_file_no_data 1 "data.train is empty" $ZT train -c $F/empty.cfg --set run.root=$R
fault cfg_precision_unknown 1 "precision: 'fp8' is not one of fp32, bf16, fp16" $ZT train $tiny --set precision=fp8
# --- data
fault data_bad_magic 2 "$F/magic.bin: not a ztrain shard (bad magic)" $ZT train $tiny --set data.train=$F/magic.bin
fault data_vocab_exceeds_model 2 "$F/bigvocab.bin: shard vocab size 50257 is larger than model.vocab_size 256" $ZT train $tiny --set data.train=$F/bigvocab.bin
fault data_truncated 1 "$F/trunc.bin: truncated" $ZT train $tiny --set data.train=$F/trunc.bin
fault data_too_short 1 "too few tokens for one sequence of 32" $ZT train $tiny --set data.train=$F/short.bin
fault data_token_out_of_range 1 "$F/badtok.bin: token 300 at index 100 >= the shard's vocab size 256" $ZT train $tiny --set data.val=$F/badtok.bin
fault data_empty_file 1 "$F/empty.bin: not a ztrain shard (0 bytes" $ZT train $tiny --set data.train=$F/empty.bin
fault data_glob_no_match 1 "$F/none-*.bin: no such data file" $ZT train $tiny --set "data.train=$F/none-*.bin"
fault data_eval_bad_val 1 "$F/magic.bin: not a ztrain shard" $ZT eval --checkpoint $CK --set data.val=$F/magic.bin
# --- tokenizer
fault tok_truncated_train 2 "data.tokenizer: $F/trunc.zttok" $ZT train $tiny --set data.tokenizer=$F/trunc.zttok --set sample.every=1
fault tok_truncated_sample 1 "$F/trunc.zttok" $ZT sample --checkpoint $CK --tokenizer $F/trunc.zttok
fault tok_vocab_exceeds_model 1 "$F/prep/tokenizer.zttok" $ZT sample --checkpoint $CK --tokenizer $F/prep/tokenizer.zttok
fault tok_garbage_sample 1 "$F/ok.txt: not a tokenizer file" $ZT sample --checkpoint $CK --tokenizer $F/ok.txt
# --- checkpoint
fault ck_missing_eval 1 "$F/nope.h5" $ZT eval --checkpoint $F/nope.h5
fault ck_dir_without_checkpoints 1 "$F/dir: no complete checkpoint in this directory" $ZT sample --checkpoint $F/dir
fault ck_empty_file_export 1 "$F/empty.bin" $ZT export --checkpoint $F/empty.bin --out $F/exp
fault ck_init_from_other_shape 2 "shape" $ZT train $tiny --set run.name=ft --set model.n_embd=32 --init-from $CK
# --- safetensors
fault st_header_length 1 "$F/hdrlen.safetensors: not a safetensors file (header length 1000000000000 for a 10-byte file)" \
  $ZT import --safetensors $F/hdrlen.safetensors --out $F/imp.h5
fault st_too_short 2 "$F/tiny.safetensors: not a safetensors file (shorter than its 8-byte header length)" \
  $ZT import --safetensors $F/tiny.safetensors --out $F/imp.h5
fault st_header_not_json 1 "$F/notjson.safetensors: not a safetensors file (header is not a JSON object" \
  $ZT import --safetensors $F/notjson.safetensors --out $F/imp.h5
fault st_dir_without_model 1 "$F/dir has no model.safetensors" $ZT import --safetensors $F/dir --out $F/imp.h5
# --- rank counts
fault ranks_3_global_batch 3 "train.global_batch = 8 is not a multiple of train.micro_batch * world size = 4 * 3 = 12" $ZT train $tiny
fault ranks_2_micro_batch 2 "train.global_batch = 8 is not a multiple of train.micro_batch * world size = 8 * 2 = 16" \
  $ZT train $tiny --set train.micro_batch=8
fault ranks_3_estimate_ranks 1 "4 * 3 = 12" $ZT estimate $tiny --ranks 3

echo "($NCASE fault cases in $(( $(date +%s) - T0 )) s)"
finish
