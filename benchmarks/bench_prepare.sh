#!/usr/bin/env bash
# bench_prepare.sh — `ztrain prepare` encoding throughput in MB/s on 1 and 2 threads and on 2 MPI ranks, side by
# side with Hugging Face `tokenizers` (Tokenizer.from_file(...).encode_batch, RAYON_NUM_THREADS 1 and 2) on the
# same JSON Lines documents with the same GPT-2-style tokenizer.json, per core for both; checks that ztrain's
# outputs are the same bytes for every thread / rank count and that its ids are HF's.
#   corpus     the Python standard library's .py files (/usr/lib/python3.X, sorted), one document each, as
#              JSON Lines (code and English prose; about 12 MB); made once into $DIR
#   tokenizer  a GPT-2-style byte-level BPE (ByteLevel pre-tokenizer, <|endoftext|>) trained by HF tokenizers on
#              that corpus with vocab_size 50257 (the corpus may give fewer tokens; the table says how many)
#   ztrain     `prepare --input corpus.jsonl --tokenizer gpt2.json --val-fraction 0 --eot-between-docs`; MB/s is
#              the encoding phase prepare reports (document text over its time; the pre-pass over the input
#              and the tokenizer loads not included), the median of REPS runs; "wall" is the whole command
#   HF         encode_batch over the list of documents (reading them and loading the tokenizer not timed),
#              the median of HF_REPS runs
# per core = MB/s / cores used (encoding threads x ranks; each ztrain rank also has a thread that reads the
# input and writes or sends the ids, which shares the cores). MB/CPU-s = MB of text / CPU seconds (user + sys):
# of the whole ztrain command (input pre-pass, tokenizer loads, MPI start included), of encode_batch for HF. The last line is "target met" when ztrain's per-core MB/s at
# 1 thread is at least HF's at 1 thread. Exit 1 when an output differs.
#   benchmarks/bench_prepare.sh        env: DIR (build/bench-prepare), REPS (5), HF_REPS (3), REF (.venv-ref/bin/python)
# Run it alone: the two cores are what is measured.
set -eu
cd "$(dirname "$0")/.."
DIR=${DIR:-build/bench-prepare}
REPS=${REPS:-5}
HF_REPS=${HF_REPS:-3}
REF=${REF:-.venv-ref/bin/python}
ZT=${ZTRAIN:-./ztrain}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
[ -x "$ZT" ] || make --no-print-directory ztrain >/dev/null
"$REF" -c 'import tokenizers' 2>/dev/null || { echo "bench_prepare.sh: $REF cannot import tokenizers (scripts/setup-venv.sh)" >&2; exit 1; }
mkdir -p "$DIR"

# ---- corpus and tokenizer (once)
if [ ! -s "$DIR/corpus.jsonl" ] || [ ! -s "$DIR/gpt2.json" ]; then
  "$REF" - "$DIR" <<'EOF'
import glob, json, os, sys, sysconfig
d = sys.argv[1]
files = sorted(glob.glob(os.path.join(sysconfig.get_paths()["stdlib"], "**", "*.py"), recursive=True))
docs = []
for f in files:
    try:
        docs.append(open(f, encoding="utf-8").read())
    except (UnicodeDecodeError, OSError):
        pass
with open(os.path.join(d, "corpus.jsonl"), "w", encoding="utf-8") as o:
    for t in docs:
        o.write(json.dumps({"text": t}, ensure_ascii=False) + "\n")
from tokenizers import ByteLevelBPETokenizer
hf = ByteLevelBPETokenizer()
hf.train_from_iterator(docs, vocab_size=50257, min_frequency=2, special_tokens=["<|endoftext|>"], show_progress=False)
hf.save(os.path.join(d, "gpt2.json"))
EOF
fi

# ---- HF tokenizers: one process per thread count (rayon reads RAYON_NUM_THREADS once)
hf_run() {
  RAYON_NUM_THREADS=$1 TOKENIZERS_PARALLELISM=true "$REF" - "$DIR" "$HF_REPS" "$1" <<'EOF'
import json, os, statistics, struct, sys, time
from tokenizers import Tokenizer
d, reps, th = sys.argv[1], int(sys.argv[2]), sys.argv[3]
docs = [json.loads(l)["text"] for l in open(os.path.join(d, "corpus.jsonl"), encoding="utf-8")]
nb = sum(len(t.encode("utf-8")) for t in docs)
tok = Tokenizer.from_file(os.path.join(d, "gpt2.json"))
times, cpus = [], []
for _ in range(reps):
    t0, c0 = time.perf_counter(), time.process_time()
    enc = tok.encode_batch(docs)
    times.append(time.perf_counter() - t0)
    cpus.append(time.process_time() - c0)
if th == "1":  # the reference ids, framed as prepare --eot-between-docs frames them
    eot = tok.token_to_id("<|endoftext|>")
    ids = []
    for i, e in enumerate(enc):
        if i: ids.append(eot)
        ids += e.ids
    with open(os.path.join(d, "hf_ids.bin"), "wb") as f:
        f.write(struct.pack("<%dI" % len(ids), *ids))
print(len(docs), nb, statistics.median(times), tok.get_vocab_size(), statistics.median(cpus))
EOF
}
read -r ndocs nbytes hf1 vocab hc1 <<< "$(hf_run 1)"
read -r _ _ hf2 _ hc2 <<< "$(hf_run 2)"

# ---- ztrain: REPS runs per layout; the encoding MB/s prepare prints, and the wall time
zt_run() {  # NAME LAUNCH... : prints "MB/s wall-s cpu-s" (medians)
  local name=$1; shift
  local mbs=() walls=() cpus=() i t
  for i in $(seq "$REPS"); do
    rm -rf "$DIR/out_$name"
    t=$( { TIMEFORMAT='%R %U %S'; time "$@" --input "$DIR/corpus.jsonl" --tokenizer "$DIR/gpt2.json" --val-fraction 0 \
         --eot-between-docs --out-dir "$DIR/out_$name" > "$DIR/$name.out" 2> "$DIR/$name.err"; } 2>&1 ) ||
      { echo "bench_prepare.sh: $name failed: $(grep -m1 ztrain "$DIR/$name.err")" >&2; exit 1; }
    mbs+=("$(sed -n 's/^encoding: .*(\(.*\) MB\/s)$/\1/p' "$DIR/$name.out")")
    read -r real user sys <<< "$t"
    walls+=("$real")
    cpus+=("$(echo "$user + $sys" | bc)")
  done
  local m=$(( (REPS + 1) / 2 ))
  echo "$(printf '%s\n' "${mbs[@]}" | sort -g | sed -n "${m}p") $(printf '%s\n' "${walls[@]}" | sort -g | sed -n "${m}p")" \
       "$(printf '%s\n' "${cpus[@]}" | sort -g | sed -n "${m}p")"
}
read -r z1 w1 c1 <<< "$(zt_run t1 "$ZT" prepare --threads 1)"
read -r z2 w2 c2 <<< "$(zt_run t2 "$ZT" prepare --threads 2)"
read -r zr wr cr <<< "$(zt_run r2 mpirun --oversubscribe --bind-to none -np 2 "$ZT" prepare --threads 1)"

same=yes
for n in t2 r2; do
  for f in train.bin val.bin tokenizer.zttok; do cmp -s "$DIR/out_t1/$f" "$DIR/out_$n/$f" || same="no ($n/$f differs)"; done
done
hf_same=$("$REF" - "$DIR" <<'EOF'
import os, struct, sys
d = sys.argv[1]
b = open(os.path.join(d, "out_t1", "train.bin"), "rb").read()
w, n = struct.unpack_from("<I", b, 12)[0], struct.unpack_from("<Q", b, 24)[0]
got = struct.unpack_from("<%d%s" % (n, "H" if w == 2 else "I"), b, 64)
want = open(os.path.join(d, "hf_ids.bin"), "rb").read()
want = struct.unpack("<%dI" % (len(want) // 4), want)
print("yes (%d ids)" % n if tuple(got) == want else "no (%d ids, HF %d)" % (n, len(want)))
EOF
)

mb=$(echo "scale=3; $nbytes / 1000000" | bc)
cpu=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -n 1)
echo "prepare throughput: $ndocs documents (Python stdlib .py files), $mb MB of text; GPT-2-style tokenizer.json, vocab $vocab"
echo "$(nproc) cores: ${cpu:-unknown CPU}; medians of $REPS ztrain and $HF_REPS HF runs"
printf '%-34s %6s %8s %9s %8s %9s\n' "" "cores" "MB/s" "per core" "wall s" "MB/CPU-s"
row() { printf '%-34s %6s %8.1f %9.1f %8s %9.1f\n' "$1" "$2" "$3" "$(echo "$3 / $2" | bc -l)" "$4" "$(echo "$mb / $5" | bc -l)"; }
row "ztrain prepare --threads 1" 1 "$z1" "$(printf %.2f "$w1")" "$c1"
row "ztrain prepare --threads 2" 2 "$z2" "$(printf %.2f "$w2")" "$c2"
row "mpirun -np 2 ztrain prepare -t 1" 2 "$zr" "$(printf %.2f "$wr")" "$cr"
row "HF tokenizers encode_batch, 1 th" 1 "$(echo "$mb / $hf1" | bc -l)" "$(printf %.2f "$hf1")" "$hc1"
row "HF tokenizers encode_batch, 2 th" 2 "$(echo "$mb / $hf2" | bc -l)" "$(printf %.2f "$hf2")" "$hc2"
echo "outputs identical across 1 / 2 threads and 2 ranks: $same"
echo "ztrain ids equal HF's: $hf_same"
ratio=$(echo "$z1 / ($mb / $hf1)" | bc -l)
if [ "$(echo "$ratio >= 1" | bc)" = 1 ]; then printf 'target met: ztrain per core is %.1fx HF tokenizers per core\n' "$ratio"
else printf 'target missed: ztrain per core is %.2fx HF tokenizers per core\n' "$ratio"; fi
[ "$same" = yes ] && [[ "$hf_same" == yes* ]]
