#!/usr/bin/env bash
# The test runner: runs test programs, counts their `PASS name` / `FAIL name: reason` lines (tests/helpers/
# check.h for the C/C++ ones, tests/helpers/lib.sh for the shell ones), and ends with the line
# `N passed, N failed`. A program that exits non-zero without printing a FAIL line counts as one failure; one
# that times out (900 s) likewise; a test whose program is missing (not built) is one failure.
#
#   tests/run.sh                 every test, in this order:
#                                  1. unit tests: build/tests/NAME for each tests/unit/<module>/NAME.c (NAME = test_*)
#                                  2. CUDA kernel and harness tests: build/tests/NAME for cuda/tests/test_*.cc and
#                                     cuda/hostexec/test_*.cc
#                                  3. end-to-end tests: tests/e2e/test_*.sh and tests/e2e/test_*.py, by name
#   tests/run.sh NAME...         exactly the tests named: NAME is a test's name as listed (test_ops, test_dist.sh,
#                                test_quant.py) or an end-to-end test's name without .sh/.py when no test has
#                                that exact name (test_dist); long tests included
#   tests/run.sh -k PATTERN      the tests whose name contains PATTERN
#   tests/run.sh --list          the names, in order (with -k PATTERN: those matching)
#   ZT_LONG=1 tests/run.sh       also the long tests (make test-long)
# Long tests: an end-to-end test with the line `# test: long` among its first 20 lines (test_long.sh,
# test_perf_model.sh, test_soak.sh, test_step_graph_ranks.sh). They run only with ZT_LONG=1 or when named.
# Tests run ZT_TEST_JOBS at a time (default 2 on 2 cores or more; 1 runs them one by one), each with its own
# TMPDIR; a test's lines are printed when it ends. `# test: heavy` among the first 20 lines starts a test
# before the others (the longest ones, so the run does not end on one); `# test: alone` runs it with no other
# test (one real Slurm on the machine, or a measurement that another test's load would spoil). Shared inputs
# (data/tiny, data/d6) are made by `make build-all`, before any test runs.
# Adding a test: a new tests/unit/<module>/test_*.c (built by make), cuda/tests/test_*.cc, or an executable
# tests/e2e/test_*.sh / test_*.py is picked up as it is; helpers that are not tests live in tests/helpers/.
set -u
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export ZT_PY="${ZT_PY:-$PWD/.venv-ref/bin/python}"

usage() { sed -n '6,18p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
pattern=""; list=0; names=()
while [ $# -gt 0 ]; do
  case "$1" in
    -k) [ $# -ge 2 ] || usage; pattern="$2"; shift 2 ;;
    -k*) pattern="${1#-k}"; shift ;;
    --list|-l) list=1; shift ;;
    -h|--help) usage ;;
    -*) echo "tests/run.sh: unknown option $1" >&2; usage ;;
    *) names+=("$1"); shift ;;
  esac
done

is_long() { head -n 20 "$1" 2>/dev/null | grep -qx '# test: long'; }

# every test, in order: path (what runs) and name (what it is called)
paths=()
shopt -s nullglob
for src in $(find tests/unit -name 'test_*.c' 2>/dev/null | LC_ALL=C sort); do
  paths+=("build/tests/$(basename "$src" .c)")
done
for src in cuda/hostexec/test_*.cc cuda/tests/test_*.cc; do
  paths+=("build/tests/$(basename "$src" .cc)")
done
long=()
for t in $(printf '%s\n' tests/e2e/test_*.sh tests/e2e/test_*.py | LC_ALL=C sort); do
  if is_long "$t"; then long+=("$t"); else paths+=("$t"); fi
done
shopt -u nullglob
[ -n "${ZT_LONG:-}" ] && paths+=("${long[@]}")

tests=()
if [ ${#names[@]} -gt 0 ]; then
  all=("${paths[@]}")
  [ -z "${ZT_LONG:-}" ] && all+=("${long[@]}")
  for n in "${names[@]}"; do
    found=()
    for t in "${all[@]}"; do [ "$(basename "$t")" = "$n" ] && found+=("$t"); done
    if [ ${#found[@]} -eq 0 ]; then
      for t in "${all[@]}"; do
        case "$t" in tests/e2e/*) b=$(basename "$t"); [ "${b%.*}" = "$n" ] && found+=("$t") ;; esac
      done
    fi
    if [ ${#found[@]} -eq 0 ]; then
      echo "tests/run.sh: no test named '$n' (tests/run.sh --list shows them; -k PATTERN matches a part)" >&2
      exit 2
    fi
    tests+=("${found[@]}")
  done
else
  for t in "${paths[@]}"; do
    [ -n "$pattern" ] && [[ "$(basename "$t")" != *"$pattern"* ]] && continue
    tests+=("$t")
  done
fi
if [ "$list" = 1 ]; then
  for t in "${tests[@]}"; do echo "$(basename "$t")  ($t)"; done
  exit 0
fi

logdir=build/test-logs
mkdir -p "$logdir"
# test jobs at once: ZT_TEST_JOBS, else 2 where the machine has 2 cores or more (more would oversubscribe the
# 2- and 4-rank runs many tests make)
jobs=${ZT_TEST_JOBS:-$(( $(nproc 2>/dev/null || echo 1) >= 2 ? 2 : 1 ))}
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || { echo "tests/run.sh: ZT_TEST_JOBS=$jobs: expected a positive integer" >&2; exit 2; }
is_alone() { head -n 20 "$1" 2>/dev/null | grep -qx '# test: alone'; }
is_heavy() { head -n 20 "$1" 2>/dev/null | grep -qx '# test: heavy'; }
# heavy tests start first, so that the last test to start is a short one
ordered=()
for t in "${tests[@]}"; do is_heavy "$t" && ordered+=("$t"); done
for t in "${tests[@]}"; do is_heavy "$t" || ordered+=("$t"); done

# run_one TEST: runs it with its own TMPDIR (Open MPI keeps its session files there: two singleton runs at once
# would share them) and writes its report ($logdir/NAME.report: its PASS/FAIL lines and a summary line) and its
# counts ($logdir/NAME.counts: "passed failed")
run_one() {
  local t=$1 name; name=$(basename "$1")
  local rep="$logdir/$name.report" cmd start rc p f tmpd
  rm -f "$rep" "$logdir/$name.counts"
  case "$t" in
    *.py) cmd=("$ZT_PY" "$t") ;;
    *) cmd=("$t") ;;
  esac
  start=$(date +%s)
  tmpd=$(mktemp -d -p /tmp)
  TMPDIR=$tmpd timeout 900 "${cmd[@]}" > "$logdir/$name.log" 2>&1
  rc=$?
  rm -rf "$tmpd"
  p=$(grep -c '^PASS ' "$logdir/$name.log")
  f=$(grep -c '^FAIL ' "$logdir/$name.log")
  {
    echo "== $name"
    grep -E '^(PASS|FAIL) ' "$logdir/$name.log"
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
      echo "FAIL $name: exited $rc without a FAIL line (log: $logdir/$name.log)"; tail -5 "$logdir/$name.log"; f=1
    fi
    echo "   ($name: $p passed, $f failed, $(( $(date +%s) - start )) s)"
  } > "$rep.tmp"
  echo "$p $f" > "$logdir/$name.counts"
  mv "$rep.tmp" "$rep"
}

passed=0; failed=0
running=()
# report(): prints the reports of the finished tests among those running and keeps the others running
report() {
  local t name still=() p f
  for t in "${running[@]}"; do
    name=$(basename "$t")
    if [ -e "$logdir/$name.report" ]; then
      cat "$logdir/$name.report"
      read -r p f < "$logdir/$name.counts"
      passed=$((passed+p)); failed=$((failed+f))
    else still+=("$t"); fi
  done
  running=("${still[@]}")
}
# wait_below N: waits until fewer than N tests run
wait_below() {
  report
  while [ ${#running[@]} -ge "$1" ]; do
    wait -n 2>/dev/null; [ $? -eq 127 ] && sleep 0.2   # 127: no child left to wait for (its report is there)
    report
  done
}
for t in "${ordered[@]}"; do
  name=$(basename "$t")
  if [ ! -e "$t" ]; then echo "FAIL $name: missing ($t: run make)"; failed=$((failed+1)); continue; fi
  if is_alone "$t"; then wait_below 1; fi
  wait_below "$jobs"
  rm -f "$logdir/$name.report"
  run_one "$t" &
  running+=("$t")
  if is_alone "$t"; then wait_below 1; fi
done
wait_below 1
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
