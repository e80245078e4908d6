#!/usr/bin/env bash
# tests/fuzz/run.sh SECONDS TARGET... — runs built libFuzzer targets (build/fuzz/fuzz_<t>, see fuzz.mk)
# one after another, each for SECONDS on a fresh copy of its seed corpus (tests/fuzz/seeds/<t>/), with
# its dictionary (tests/fuzz/dicts/<t>.dict) and flags (tests/fuzz/options/<t>.txt) when there are. Prints per target
#   PASS fuzz_<t> (N execs, 0 crashes)
#   FAIL fuzz_<t>: <what> after N execs (input: ..., log: ...) — <first sanitizer or check line>
# and exits non-zero if any failed. A crash, sanitizer report, failed FZ_CHECK, leak, timeout (an input
# running > FUZZ_TIMEOUT s, default 20) or out-of-memory (> FUZZ_RSS_MB, default 2048) is a failure;
# the input that caused it is kept under build/fuzz/artifacts/<t>/.
# Environment: FUZZ_DIR (build/fuzz), FUZZ_TIMEOUT, FUZZ_RSS_MB, FUZZ_ARGS (more libFuzzer flags).
set -u
cd "$(dirname "$0")/../.." || exit 1
secs=${1:?usage: tests/fuzz/run.sh SECONDS TARGET...}
shift
dir=${FUZZ_DIR:-build/fuzz}
nfail=0
# the targets' scratch files (fuzz_common.h) in one directory per run, removed even after a crash
# (a crashing target cannot clean up after itself)
base=/dev/shm; [ -w "$base" ] || base=${TMPDIR:-/tmp}
FUZZ_TMPDIR=$(mktemp -d "$base/ztfuzz-run.XXXXXX") || exit 1
export FUZZ_TMPDIR
trap 'rm -rf "$FUZZ_TMPDIR"' EXIT
for t in "$@"; do
  bin=$dir/fuzz_$t
  if [ ! -x "$bin" ]; then
    echo "FAIL fuzz_$t: $bin not built (make fuzz-build)"
    nfail=$((nfail + 1))
    continue
  fi
  corpus=$dir/corpus/$t art=$dir/artifacts/$t log=$dir/logs/$t.log
  rm -rf "$corpus" "$art"
  mkdir -p "$corpus" "$art" "$dir/logs"
  [ -d "tests/fuzz/seeds/$t" ] && cp -r "tests/fuzz/seeds/$t/." "$corpus/"
  dict=()
  [ -f "tests/fuzz/dicts/$t.dict" ] && dict=(-dict="tests/fuzz/dicts/$t.dict")
  [ -f "tests/fuzz/options/$t.txt" ] && mapfile -t -O ${#dict[@]} dict < <(grep -v -e '^#' -e '^$' "tests/fuzz/options/$t.txt")
  # shellcheck disable=SC2086
  timeout -k 10 $((2 * secs + 120)) "$bin" -max_total_time="$secs" -print_final_stats=1 \
    -timeout="${FUZZ_TIMEOUT:-20}" -rss_limit_mb="${FUZZ_RSS_MB:-2048}" -artifact_prefix="$art/" \
    "${dict[@]}" ${FUZZ_ARGS:-} "$corpus" > "$log" 2>&1
  rc=$?
  execs=$(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
  # after a crash there are no final stats: the last progress line ("#N ...") says how far it got
  [ -n "$execs" ] || execs=$(grep -o '^#[0-9]*' "$log" | tail -1 | tr -d '#')
  execs=${execs:-0}
  crashes=$(find "$art" -type f | wc -l)
  if [ "$rc" -eq 0 ] && [ "$crashes" -eq 0 ]; then
    echo "PASS fuzz_$t ($execs execs, 0 crashes)"
    continue
  fi
  nfail=$((nfail + 1))
  input=$(find "$art" -type f | head -1)
  kind=$(basename "${input:-crash}" | sed 's/-.*//')
  [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] && kind="hang (killed by timeout)"
  why=$(grep -m1 -E 'ERROR: (AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|libFuzzer)|runtime error:|fuzz check failed|ztrain: (rank|error)' "$log" |
        sed -E 's/^==[0-9]+==//; s/ on address 0x[0-9a-f]+ at pc.*//' | cut -c1-240)
  # the innermost frame in ztrain's sources or the targets
  at=$(sed -n '/ERROR: \|fuzz check failed/,$p' "$log" | grep -E '^ +#[0-9]+ ' |
       grep -m1 -oE ' in [A-Za-z_][A-Za-z_0-9]* [^ ]*/(src|tests/fuzz)/[^ ]+' | sed -E 's| in ||; s|[^ ]*/(src\|tests/fuzz)/|\1/|')
  [ -n "$at" ] && why="$why at $at"
  echo "FAIL fuzz_$t: $kind after $execs execs, exit $rc (input: ${input:-none}, log: $log) — ${why:-$(tail -1 "$log" | cut -c1-200)}"
done
exit $(( nfail > 0 ))
