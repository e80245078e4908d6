#!/usr/bin/env bash
# test: long
# test_fuzz.sh — a short libFuzzer run of every input-format target (tests/fuzz/, `make fuzz` for
# longer runs): builds build/fuzz/fuzz_<t> if needed (clang, libFuzzer), then runs each target for
# ZT_FUZZ_SECONDS (default 1 in make test: every seed, then a second of new inputs; `make fuzz` runs longer) on a fresh copy of its seed corpus, one after another:
#   PASS fuzz_<t> (N execs, 0 crashes)
#   FAIL fuzz_<t>: crash|leak|timeout|oom after N execs (input: build/fuzz/artifacts/<t>/..., log: ...) — why
# A sanitizer report (ASan, UBSan, LeakSanitizer), a failed check of the target's own invariants, a
# timeout or running out of memory is a FAIL. Every seed is run first, so the seeds are regression inputs.
cd "$(dirname "$0")/../.." || exit 1
source tests/helpers/lib.sh
secs=${ZT_FUZZ_SECONDS:-1}
targets=${ZT_FUZZ_TARGETS:-"json config shard tokenizer tokenizer_hf tokenizer_train hashmap safetensors ckpt"}

if ! command -v "${FUZZ_CC:-clang}" > /dev/null; then
  fail "fuzz: ${FUZZ_CC:-clang} not found (Debian: apt-get install clang libclang-rt-14-dev; scripts/install-deps.sh test does)"
  finish
fi
bins=$(for t in $targets; do printf 'build/fuzz/fuzz_%s ' "$t"; done)
# shellcheck disable=SC2086
if ! make --no-print-directory -s -f tests/fuzz/fuzz.mk -j"${JOBS:-2}" $bins > "$TMP/build.log" 2>&1; then
  fail "fuzz: building the targets failed: $(grep -m1 -E 'error|undefined reference|cannot find' "$TMP/build.log" | cut -c1-200)"
  finish
fi
# shellcheck disable=SC2086
tests/fuzz/run.sh "$secs" $targets > "$TMP/run.out"
while IFS= read -r line; do
  case "$line" in
    PASS\ *) pass "${line#PASS }" ;;
    FAIL\ *) fail "${line#FAIL }" ;;
  esac
done < "$TMP/run.out"
finish
