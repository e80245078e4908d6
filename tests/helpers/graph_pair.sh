# graph_pair.sh — sourced by the step-graph tests (tests/e2e/test_step_graph*.sh) after lib.sh: the tiny cudasim run
# they share ($common) and pair, a run with and without train.cuda_graph compared.
common="-c inputs/tiny.cfg --set device=cudasim --set run.root=$TMP --set run.session=g --set data.train=data/tiny/train.bin
        --set data.val=data/tiny/val.bin --set sample.every=0 --set eval.every=0 --set train.steps=12
        --set train.micro_batch=2 --set train.global_batch=4"
# pair NAME NP ARGS...: the run with and without graphs; PASS when identical and (1 rank) at least MIN replays
pair() {
  local name=$1 np=$2 min=$3; shift 3
  run_named $name-eager $np "$@" || { fail "$name: the run without graphs failed"; return; }
  run_named $name-graph $np "$@" --set train.cuda_graph=true || { fail "$name: the run with graphs failed"; return; }
  local a b rep
  a=$(run_sig $TMP/g/$name-eager); b=$(run_sig $TMP/g/$name-graph)
  rep=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1])).get("graph_replays", "none"))' \
        $TMP/g/$name-graph/results.json)
  local ok=0
  if [ "$min" = none ]; then [ "$rep" = none ] && ok=1; else [ "$rep" != none ] && [ "$rep" -ge "$min" ] && ok=1; fi
  if [ -n "$a" ] && [ "$a" == "$b" ] && [ $ok = 1 ]; then
    pass "$name ($(echo "$a" | grep -c '^[0-9]') per-step losses and params_hash identical with and without graphs; steps replayed: $rep)"
  else
    fail "$name: replays $rep (want >= $min); $(diff <(echo "$a") <(echo "$b") | head -4 | tr '\n' ' ')"
  fi
}
