# tests/lib.sh — helpers for the shell tests: PASS/FAIL lines, running ztrain, reading results.
# Sourced by tests/test_*.sh; run from the repo root.
ZT=${ZTRAIN:-./ztrain}
TMP=$(mktemp -d /tmp/zt-test.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
NFAIL=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; NFAIL=$((NFAIL+1)); }
finish() { exit $(( NFAIL > 0 )); }
PY=/usr/bin/python3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN="mpirun --oversubscribe --bind-to none -x BLIS_ARCH_TYPE -x OMP_NUM_THREADS"
# losses of a run dir's metrics.jsonl, one per line, exactly as printed (%.9g)
losses() { $PY -c 'import json,sys; [print(json.loads(l)["loss"]) for l in open(sys.argv[1])]' "$1/metrics.jsonl"; }
result() { $PY -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1/results.json" "$2"; }
# ensure the tiny synthetic data exists
need_tiny_data() { [ -f data/tiny/train.bin ] || tests/make_data.py data/tiny 256 40000 >/dev/null; }
