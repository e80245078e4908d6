# tests/helpers/lib.sh — helpers for the shell tests: PASS/FAIL lines, running ztrain, reading results.
# Sourced by tests/e2e/test_*.sh; run from the repo root.
ZT=${ZTRAIN:-./ztrain}
TMP=$(mktemp -d /tmp/zt-test.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
NFAIL=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; NFAIL=$((NFAIL+1)); }
finish() { exit $(( NFAIL > 0 )); }
PY=/usr/bin/python3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# training runs measure their sgemm peak on 256 x 256 matrices (src/cmd/train.c): start-up in milliseconds, not
# the 0.3-0.4 s of the 2048 probe a user's run makes (test_train.sh checks that one)
export ZTRAIN_TEST_SGEMM_N=${ZTRAIN_TEST_SGEMM_N:-256}
MPIRUN="mpirun --oversubscribe --bind-to none -x BLIS_ARCH_TYPE -x OMP_NUM_THREADS"
# losses of a run dir's metrics.jsonl, one per line, exactly as printed (%.9g)
losses() { $PY -c 'import json,sys; [print(json.loads(l)["loss"]) for l in open(sys.argv[1])]' "$1/metrics.jsonl"; }
result() { $PY -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1/results.json" "$2"; }
# ensure the tiny synthetic data exists
need_tiny_data() { [ -f data/tiny/train.bin ] || tests/helpers/make_data.py data/tiny 256 40000 >/dev/null; }
# "step loss" per step of a run dir (the last record of each step), then "hash H": two runs are the same
# run when these are equal
run_sig() {
  $PY - "$1" <<'EOF'
import json, sys
d = {}
for l in open(sys.argv[1] + "/metrics.jsonl"):
    r = json.loads(l); d[r["step"]] = r["loss"]
for s in sorted(d): print(s, d[s])
print("hash", json.load(open(sys.argv[1] + "/results.json"))["params_hash"])
EOF
}
# loss_rel_diff DIR_A DIR_B N: the largest relative difference of the two runs' per-step losses (each run must
# have N metrics lines; else an error on stderr and nothing printed)
loss_rel_diff() {
  $PY - "$1/metrics.jsonl" "$2/metrics.jsonl" "$3" <<'EOF'
import json, sys
a = [json.loads(l)["loss"] for l in open(sys.argv[1])]
b = [json.loads(l)["loss"] for l in open(sys.argv[2])]
assert len(a) == len(b) == int(sys.argv[3]), (len(a), len(b))
print(max(abs(x - y) / abs(x) for x, y in zip(a, b)))
EOF
}
# pids of the ztrain processes under process $1 (mpirun may sit under timeout, ranks under sh)
ztrain_pids() {
  local p
  for p in $(pgrep -P "$1"); do
    [ "$(cat /proc/$p/comm 2>/dev/null)" == ztrain ] && echo $p
    ztrain_pids $p
  done
}
# run_named NAME NP ARGS...: `ztrain train $common` on NP ranks as run NAME, log appended to $TMP/NAME.log
# (a resumed run appends to the same log); the caller sets $common (config, run.root, run.session)
run_named() {
  local name=$1 np=$2; shift 2
  timeout 300 $MPIRUN -np $np $ZT train $common --set run.name=$name "$@" >> $TMP/$name.log 2>&1
  local rc=$?
  [ $rc -eq 0 ] || echo "run $name exited $rc: $(grep -m1 'ztrain: error' $TMP/$name.log || tail -1 $TMP/$name.log)" >&2
  return $rc
}
# compare_runs DIR_A DIR_B NAME: PASS NAME when per-step losses and params_hash of A equal B's
compare_runs() {
  local a b
  a=$(run_sig "$1" 2>&1); b=$(run_sig "$2" 2>&1)
  if [ -n "$a" ] && [ "$a" == "$b" ]; then
    pass "$3 ($(echo "$a" | grep -c '^[0-9]') per-step losses and params_hash identical to $(basename "$2"): $(echo "$a" | tail -1 | cut -c1-24)...)"
  else
    fail "$3: differs from $(basename "$2"): $(diff <(echo "$a") <(echo "$b") | head -4 | tr '\n' ' ')"
  fi
}
# asan_env: the sanitizer settings of tests/e2e/test_asan.sh and tests/e2e/test_long.sh (leak check on, MPI's own
# start-up allocations suppressed by tests/helpers/asan.supp, which needs full stacks), and SAN_RE, the lines a
# clean run must not print
asan_env() {
  export ASAN_OPTIONS="detect_leaks=1:fast_unwind_on_malloc=0"
  export LSAN_OPTIONS="suppressions=$PWD/tests/helpers/asan.supp:print_suppressions=0"
  export UBSAN_OPTIONS="print_stacktrace=1"
  SAN_RE='ERROR: (AddressSanitizer|LeakSanitizer)|runtime error|SUMMARY: (Address|Leak|UndefinedBehavior)Sanitizer'
}
