#!/usr/bin/env bash
# The mutation catalog (tests/mutate/mutations.txt, `make mutate`) stays applicable: every mutation's old text
# occurs exactly once in its file, so a refactor that moves or rewrites mutated code must move its mutations too
# (a stale one would silently test nothing).
set -u
cd "$(dirname "$0")/../.."
/usr/bin/python3 tests/mutate/mutate.py --check
