#!/usr/bin/env bash
# test: long
# The session tools (tools/: session_table.py, compare_sessions.py, plot_session.py, experiment.sh) and
# benchmarks/sweep.sh on tiny runs, checked against the run directories themselves:
#  1. tools/experiment.sh on inputs/tiny.cfg, 1, 2 and 4 ranks: the table has 3 rows, says bit-identical,
#     the 1-rank speedup is 1.00 and each row's speedup and efficiency equal tokens/s ratios recomputed
#     here from results.json; the four PNGs are real images (PNG magic, decoded by matplotlib, > 100x100).
#  2. a loss changed by sed in r2's metrics.jsonl: the verdict is no longer bit-identical, r2's row shows
#     the exact difference, r4's still agrees.
#  3. compare_sessions.py: a copy of the session (one run renamed) against the changed one.
#  4. errors: a missing or empty session, an invalid results.json (exit 2, one line naming the file); a
#     rank count that does not divide the global batch (ztrain's message, exit 2, nothing run).
#  5. benchmarks/sweep.sh: tiny, ranks 1,2 x ZeRO stages 1,2 (4 runs, strong), and a weak-scaling pair.
#   tests/e2e/test_tools.sh        (from the repo root; ~40 s on 2 cores)
set -u
cd "$(dirname "$0")/../.." || exit 2
. tests/helpers/lib.sh
need_tiny_data
T0=$(date +%s)
$PY -c 'import matplotlib' 2>/dev/null || { fail "matplotlib: /usr/bin/python3 has no matplotlib (apt-get install python3-matplotlib)"; finish; }
# VALUE of column NAME in the row of run RUN of a text table on stdin (columns are right-aligned under
# their names, so a value ends where its name ends: safe with spaces inside cells like "L2 C64")
cell() { $PY -c '
import sys
name, run = sys.argv[1], sys.argv[2]
lines = sys.stdin.read().splitlines()
head = next(l for l in lines if l.startswith("# run "))
end = head.index(" " + name + " ") + len(name) + 1 if (" " + name + " ") in head else head.rindex(" " + name) + len(name) + 1
row = next(l for l in lines if l.startswith("  ") and l.split()[0] == run)
print(row[:end].split()[-1])' "$1" "$2"; }

# ---- 1. the experiment
S=$TMP/exp
ZTRAIN=$ZT tools/experiment.sh -c inputs/tiny.cfg --ranks 1,2,4 --root $TMP --session exp --set train.micro_batch=2 \
  --set train.steps=20 --set eval.every=10 > $TMP/exp.out 2>&1
rc=$?
if [ $rc = 0 ] && [ -f $S/r1/results.json ] && [ -f $S/r2/results.json ] && [ -f $S/r4/results.json ]; then
  pass "experiment_runs (1, 2, 4 ranks into session exp in $(( $(date +%s) - T0 )) s)"
else fail "experiment_runs: exit $rc: $(tail -5 $TMP/exp.out | tr '\n' ' ')"; finish; fi
tools/session_table.py $S > $TMP/table.txt 2>&1
nrows=$(grep -c '^  r[0-9]' $TMP/table.txt)
[ "$nrows" = 3 ] && grep -q '^  r1 ' $TMP/table.txt && grep -q '^  r4 ' $TMP/table.txt \
  && pass "table_rows (3 rows: r1 r2 r4)" || fail "table_rows: $nrows rows: $(cat $TMP/table.txt)"
if grep -q '^# losses: bit-identical' $TMP/table.txt && [ "$(cell losses r2 < $TMP/table.txt)" = bit-identical ] \
   && [ "$(cell losses r4 < $TMP/table.txt)" = bit-identical ] && grep -q '^# strong scaling' $TMP/table.txt \
   && [ "$(result $S/r1 params_hash)" = "$(result $S/r4 params_hash)" ]; then
  pass "table_bit_identical (verdict line and the r2, r4 rows; params_hash equal in results.json; strong scaling)"
else fail "table_bit_identical: $(grep -E '^# (losses|strong|weak)' $TMP/table.txt | tr '\n' ' ')"; fi
# expected speedup and efficiency, from results.json, formatted as the table does (2 decimals)
ok=1 got=""
for n in 1 2 4; do
  want=$($PY -c 'import json,sys; t1 = json.load(open(sys.argv[1]))["tokens_per_s"]; tn = json.load(open(sys.argv[2]))["tokens_per_s"]
n = int(sys.argv[3]); print(f"{tn / t1:.2f} {tn / t1 / n:.2f}")' $S/r1/results.json $S/r$n/results.json $n)
  have="$(cell speedup r$n < $TMP/table.txt) $(cell effic r$n < $TMP/table.txt)"
  got="$got r$n: $have (expected $want);"
  [ "$have" = "$want" ] || ok=0
done
[ "$(cell speedup r1 < $TMP/table.txt)" = 1.00 ] || ok=0
[ $ok = 1 ] && pass "table_speedup_efficiency (${got# })" || fail "table_speedup_efficiency:$got"
grep -q '^# losses: bit-identical' $TMP/exp.out && pass "experiment_prints_table" || fail "experiment_prints_table: $(tail -3 $TMP/exp.out)"
# the PNGs: magic bytes, decoded by matplotlib, big enough to read
pngs=$($PY -c '
import sys, os
import matplotlib; matplotlib.use("Agg")
import matplotlib.image as mi
bad, ok = [], []
for name in ("loss_vs_step", "loss_vs_tokens", "throughput", "scaling"):
    p = os.path.join(sys.argv[1], name + ".png")
    if not os.path.isfile(p):
        bad.append(name + ": missing"); continue
    magic = open(p, "rb").read(8)
    shape = mi.imread(p).shape
    size = os.path.getsize(p)
    if magic != b"\x89PNG\r\n\x1a\n" or shape[0] <= 100 or shape[1] <= 100 or size < 5000:
        bad.append(f"{name}: magic {magic!r} shape {shape} {size} bytes")
    else:
        ok.append(f"{name} {shape[1]}x{shape[0]}")
print("ok " + ", ".join(ok) if not bad else "bad " + "; ".join(bad))' $S 2>&1)
[[ $pngs == ok* ]] && pass "plots (${pngs#ok })" || fail "plots: $pngs"

# ---- 2. one loss changed: no longer bit-identical, and the difference is the one made
cp -r $S $TMP/exp_copy
old=$($PY -c 'import json,sys; print([json.loads(l)["loss"] for l in open(sys.argv[1]) if json.loads(l)["step"] == 5][0])' $S/r1/metrics.jsonl)
sed -i '/"step": 5,/s/"loss": [^,]*/"loss": 9.5/' $S/r2/metrics.jsonl
want=$($PY -c "print(f'{abs(9.5 - $old):.2e}')")
tools/session_table.py $S > $TMP/table2.txt 2>&1
if grep -q '^# losses: NOT identical' $TMP/table2.txt && ! grep '^# losses' $TMP/table2.txt | grep -q bit-identical \
   && [ "$(cell losses r2 < $TMP/table2.txt)" = "$want" ] && [ "$(cell losses r4 < $TMP/table2.txt)" = bit-identical ]; then
  pass "table_detects_difference (r2 step 5 loss set to 9.5: verdict NOT identical, r2 max|dL| $want, r4 still bit-identical)"
else fail "table_detects_difference: want r2 $want: $(grep -E '^# losses|^  r2' $TMP/table2.txt | tr '\n' ' ')"; fi
tools/session_table.py $S --json | $PY -c 'import json,sys; d = json.load(sys.stdin); sys.exit(not (d["bit_identical"] is False and len(d["runs"]) == 3))' \
  && pass "table_json (3 runs, bit_identical false)" || fail "table_json"
tools/session_table.py $S --csv | $PY -c 'import csv,sys; r = list(csv.DictReader(sys.stdin)); sys.exit(not (len(r) == 3 and r[0]["speedup"] == "1.0"))' \
  && pass "table_csv (3 rows, raw speedup 1.0 for r1)" || fail "table_csv"
tools/session_table.py $S --markdown | grep -q '^| r4 | L2 C64 | 4 |' && pass "table_markdown" || fail "table_markdown"

# ---- 3. two sessions: the unchanged copy (r4 renamed: matched by ranks/stage/micro-batch) vs the changed one
mv $TMP/exp_copy/r4 $TMP/exp_copy/four
tools/compare_sessions.py $TMP/exp_copy $S > $TMP/cmp.txt 2>&1; rc=$?
if [ $rc = 0 ] && [ "$(grep -c '^  ' $TMP/cmp.txt)" = 3 ] && grep -q '^  four  *r4  *key ' $TMP/cmp.txt \
   && grep -q '^  r1 .* 1\.000 .* bit-identical$' $TMP/cmp.txt && grep -q "^  r2 .* 1\\.000 .* max|dL| $want\$" $TMP/cmp.txt \
   && grep -q 'geometric mean 1.000 over 3' $TMP/cmp.txt; then
  pass "compare_sessions (3 pairs, four<->r4 by key, tokens/s ratio 1.000, r2 max|dL| $want, r1 bit-identical)"
else fail "compare_sessions: exit $rc: $(cat $TMP/cmp.txt)"; fi

# ---- 4. errors: exit 2, one line, naming the file
err_case() { # NAME EXPECTED_TEXT cmd...
  local name=$1 want=$2; shift 2
  "$@" > $TMP/err.out 2> $TMP/err.txt; local rc=$?
  if [ $rc = 2 ] && [ "$(wc -l < $TMP/err.txt)" = 1 ] && grep -qF -- "$want" $TMP/err.txt && [ ! -s $TMP/err.out ]; then
    pass "$name (exit 2: $(cat $TMP/err.txt))"
  else fail "$name: exit $rc, stderr: $(cat $TMP/err.txt | tr '\n' ' ')"; fi
}
err_case error_missing_session "$TMP/nope" tools/session_table.py $TMP/nope
mkdir -p $TMP/empty
err_case error_empty_session "$TMP/empty" tools/plot_session.py $TMP/empty
mkdir -p $TMP/bad && cp -r $TMP/exp_copy/r1 $TMP/bad/r1 && echo '{"world_size": 1, "tokens_per_s": ' > $TMP/bad/r1/results.json
err_case error_invalid_json "$TMP/bad/r1/results.json: invalid JSON" tools/session_table.py $TMP/bad
err_case error_compare_invalid_json "$TMP/bad/r1/results.json" tools/compare_sessions.py $S $TMP/bad
tools/experiment.sh -c inputs/tiny.cfg --ranks 1,3 --root $TMP --session bad3 --set train.steps=5 > $TMP/e3.out 2>&1; rc=$?
[ $rc = 2 ] && grep -q 'ztrain: error: train.global_batch = 8 is not a multiple' $TMP/e3.out && [ ! -e $TMP/bad3/r1 ] \
  && pass "experiment_refused_rank_count (3 ranks: ztrain's message, exit 2, nothing run)" \
  || fail "experiment_refused_rank_count: exit $rc: $(cat $TMP/e3.out | tr '\n' ' ')"

# ---- 5. the sweep: strong (2 ranks x 2 stages) and weak
benchmarks/sweep.sh --configs inputs/tiny.cfg --ranks 1,2 --stages 1,2 --steps 5 --root $TMP --session sw > $TMP/sw.out 2>&1; rc=$?
runs=$(ls -d $TMP/sw/*/ 2>/dev/null | wc -l)
st=$(for d in $TMP/sw/*/; do echo "$(result $d world_size)/$(result $d zero_stage)"; done | sort | xargs)
if [ $rc = 0 ] && [ "$runs" = 4 ] && [ "$st" = "1/1 1/2 2/1 2/2" ] && [ "$(grep -c '^  tiny-r' $TMP/sw.out)" = 4 ] \
   && grep -q '^# losses: bit-identical' $TMP/sw.out && grep -q '^# strong scaling' $TMP/sw.out && [ -f $TMP/sw/scaling.png ]; then
  pass "sweep_strong (4 runs, ranks/stage $st, table with 4 rows, bit-identical, scaling.png)"
else fail "sweep_strong: exit $rc, $runs runs ($st): $(tail -5 $TMP/sw.out | tr '\n' ' ')"; fi
benchmarks/sweep.sh --configs inputs/tiny.cfg --ranks 1,2 --stages 2 --micro-batch 2 --mode weak --steps 3 --root $TMP \
  --session wk > $TMP/wk.out 2>&1; rc=$?
gb="$(result $TMP/wk/tiny-r1-z2-mb2 global_batch 2>/dev/null) $(result $TMP/wk/tiny-r2-z2-mb2 global_batch 2>/dev/null)"
[ $rc = 0 ] && [ "$gb" = "2 4" ] && grep -q '^# weak scaling' $TMP/wk.out \
  && pass "sweep_weak (global batch 2 on 1 rank, 4 on 2 ranks; the table says weak scaling)" \
  || fail "sweep_weak: exit $rc, global batches '$gb': $(tail -5 $TMP/wk.out | tr '\n' ' ')"
echo "total $(( $(date +%s) - T0 )) s"
finish
