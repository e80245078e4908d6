#!/usr/bin/env bash
# Streaming (data.stream = true): text and JSON Lines files tokenized as they are read, against prepared shards.
#  stream_eq_prepared_{txt,jsonl}  20 steps (1.6 epochs) streaming the files == 20 steps on the shard `ztrain
#                                  prepare --val-fraction 0 --eot-between-files` makes of them, data.shuffle = false
#                                  (params_hash and every loss)
#  stream_ranks                    the stream on 2 ranks == on 1 rank (params_hash)
#  stream_resume_mid_document      10 steps (--stop-after) + --resume auto on 2 ranks == 20 straight on 1; the
#                                  checkpoint's position is inside a document (stream_token > 0), read with h5py
#  stream_bad_*                    a malformed JSON line (its line number named), data.stream without a tokenizer:
#                                  exit 2, one line
set -u
cd "$(dirname "$0")/../.."
. tests/helpers/lib.sh
common="--set run.root=$TMP --set run.session=s --set data.val= --set eval.every=0 --set train.log_every=1 \
  --set model.vocab_size=512 --set data.shuffle=false --set train.steps=20 --set checkpoint.every=0"
$PY - "$TMP" <<'PY'
import json, random, sys
tmp = sys.argv[1]
rng = random.Random(5)
words = ["alpha", "beta", "gamma", "delta", "river", "stone", "light", "cloud", "north", "quiet", "ember", "tide",
         "7", "42", "é", "über", "naïve", "日本", "—", "\n"]
docs = [" ".join(rng.choice(words) for _ in range(rng.randint(5, 120))) for _ in range(60)]
for i in range(3):   # three text files, one document each
    open(f"{tmp}/part{i}.txt", "w").write(" ".join(docs[i * 20:(i + 1) * 20]))
with open(f"{tmp}/docs.jsonl", "w") as f:
    for d in docs:
        f.write(json.dumps({"id": 1, "text": d}) + "\n")
with open(f"{tmp}/bad.jsonl", "w") as f:
    f.write(json.dumps({"text": docs[0]}) + "\n" + json.dumps({"text": docs[1]}) + "\n" + '{"text": "oops\n')
PY
$ZT prepare --input $TMP/part0.txt --vocab-size 400 --out-dir $TMP/tok > $TMP/tok.log 2>&1 || fail "stream_setup: tokenizer"
TOK=$TMP/tok/tokenizer.zttok

# stream_case NAME FILES... : prepare the files, train on the shard and on the stream, compare
stream_case() {
  local name=$1; shift
  local inputs="" f
  for f in "$@"; do inputs="$inputs --input $f"; done
  if ! $ZT prepare $inputs --tokenizer $TOK --val-fraction 0 --eot-between-files --out-dir $TMP/p-$name \
       > $TMP/p-$name.log 2>&1; then
    fail "stream_eq_prepared_$name: prepare failed: $(grep -m1 error $TMP/p-$name.log)"; return
  fi
  run_named sh-$name 1 -c inputs/tiny.cfg $common --set data.train=$TMP/p-$name/train.bin || { fail "stream_eq_prepared_$name: shard run"; return; }
  local glob="$TMP/part*.txt"; [ $name = jsonl ] && glob=$TMP/docs.jsonl
  run_named st-$name 1 -c inputs/tiny.cfg $common --set data.stream=true --set "data.train=$glob" \
    --set data.tokenizer=$TOK || { fail "stream_eq_prepared_$name: stream run"; return; }
  local a b
  a=$(result $TMP/s/sh-$name params_hash); b=$(result $TMP/s/st-$name params_hash)
  if [ "$a" = "$b" ] && [ "$(losses $TMP/s/sh-$name)" = "$(losses $TMP/s/st-$name)" ]; then
    pass "stream_eq_prepared_$name (20 steps, $(grep -o 'train [0-9]*' $TMP/p-$name.log) tokens: params_hash ${a:7:16} and every loss equal)"
  else
    fail "stream_eq_prepared_$name: params_hash $a (shard) vs $b (stream)"
  fi
}
stream_case txt $TMP/part0.txt $TMP/part1.txt $TMP/part2.txt
stream_case jsonl $TMP/docs.jsonl

sj="--set data.stream=true --set data.train=$TMP/docs.jsonl --set data.tokenizer=$TOK"
if run_named st-2r 2 -c inputs/tiny.cfg $common $sj; then
  a=$(result $TMP/s/st-jsonl params_hash); b=$(result $TMP/s/st-2r params_hash)
  [ "$a" = "$b" ] && pass "stream_ranks (2 ranks == 1 rank: ${a:7:16})" || fail "stream_ranks: $a vs $b"
else
  fail "stream_ranks: the 2-rank run failed"
fi

# resume in the middle of a document, on another rank count
if run_named st-res 1 -c inputs/tiny.cfg $common $sj --set checkpoint.every=10 --stop-after 10 &&
   run_named st-res 2 -c inputs/tiny.cfg $common $sj --set checkpoint.every=10 --resume auto; then
  ck=$(ls $TMP/s/st-res/checkpoints/step_*10.h5 2>/dev/null | head -1)
  pos=$($PY -c "import h5py,sys; a=h5py.File(sys.argv[1],'r').attrs; print(*(int(a[k]) for k in ('stream_file','stream_doc','stream_token','stream_epoch')))" "$ck" 2>&1)
  a=$(result $TMP/s/st-jsonl params_hash); b=$(result $TMP/s/st-res params_hash)
  tokpos=$(echo "$pos" | awk '{print $3}')
  if [ "$a" = "$b" ] && [ "${tokpos:-0}" -gt 0 ] 2>/dev/null; then
    pass "stream_resume_mid_document (10 on 1 rank + 10 on 2 == 20 straight; saved position file/doc/token/epoch: $pos)"
  else
    fail "stream_resume_mid_document: params_hash $a vs $b, position '$pos'"
  fi
else
  fail "stream_resume_mid_document: a run failed: $(grep -m1 error $TMP/st-res.log)"
fi

# bad input
$ZT train -c inputs/tiny.cfg $common --set run.name=bad1 --set data.stream=true --set data.train=$TMP/bad.jsonl \
  --set data.tokenizer=$TOK > $TMP/bad1.out 2> $TMP/bad1.err
rc=$?
[ $rc = 2 ] && [ "$(grep -c . $TMP/bad1.err)" = 1 ] && grep -q "bad.jsonl:3" $TMP/bad1.err \
  && pass "stream_bad_json (exit 2: $(cat $TMP/bad1.err))" || fail "stream_bad_json: exit $rc: $(head -2 $TMP/bad1.err | tr '\n' ' ')"
$ZT train -c inputs/tiny.cfg $common --set run.name=bad2 --set data.stream=true --set data.train=$TMP/docs.jsonl \
  > $TMP/bad2.out 2> $TMP/bad2.err
rc=$?
[ $rc = 2 ] && [ "$(grep -c . $TMP/bad2.err)" = 1 ] && grep -q "needs data.tokenizer" $TMP/bad2.err \
  && pass "stream_bad_no_tokenizer (exit 2: $(cat $TMP/bad2.err))" || fail "stream_bad_no_tokenizer: exit $rc: $(head -2 $TMP/bad2.err | tr '\n' ' ')"
finish
