#!/usr/bin/env bash
# The documentation stays a user's: scripts/check-docs.sh finds no history words, dates outside table captions,
# tracker numbers or references outside the repository in README.md, docs/, src/ and cuda/; README.md is at most
# 300 lines; every relative link in README.md and docs/*.md resolves.
set -u
cd "$(dirname "$0")/../.."
if out=$(scripts/check-docs.sh 2>&1); then
  echo "PASS docs_check ($out)"
else
  echo "FAIL docs_check: $(echo "$out" | head -6 | tr '\n' ' ')"
  exit 1
fi
