# demo_corpus.sh — sourced (not run) by scripts/demo.sh and scripts/demo_finetune.sh: the demo's corpus and
# tokenizer, made once and reused while they are complete:
#   demo_corpus      the King James Bible from Debian's bible-kjv (`bible`), one verse per line, verse numbers
#                    removed, one file per book: $D/books/01.txt (Genesis) .. 66.txt (Revelation), and $D/kjv.txt;
#   demo_tokenizer   ./ztrain prepare: a 4096-token byte-level BPE tokenizer ($D/tokenizer.zttok) and token shards
#                    ($D/train.bin, $D/val.bin; the last 5% of every book is validation); sets $baseline, the
#                    unigram baseline loss from $D/prepare.log.
# The caller sets ZT (./ztrain), D (data/demo) and say(); messages name the calling script.

demo_corpus() {
  local me nb
  me=$(basename "$0")
  if [ ! -s "$D/kjv.txt" ] || [ "$(ls "$D"/books/*.txt 2>/dev/null | wc -l)" -ne 66 ]; then
    command -v bible > /dev/null || { echo "$me: the 'bible' program is missing: scripts/install-deps.sh demo (Debian package bible-kjv)" >&2; exit 1; }
    say "corpus: the King James Bible (bible-kjv) -> $D/kjv.txt"
    mkdir -p "$D/books"
    rm -f "$D"/books/*.txt
    # -l100000: one verse per line. Chapter headings ("Genesis 1") start in column 0, verses are
    # indented after their number; a heading ending in " 1" starts a new book.
    bible -l100000 'Gen1:1-Rev22:21' > "$D/kjv.raw"
    awk -v dir="$D/books" '
      /^[^ ].* 1$/ { n++; f = sprintf("%s/%02d.txt", dir, n) }
      n > 0 { sub(/^ +[0-9]+ /, ""); print > f }' "$D/kjv.raw"
    cat "$D"/books/*.txt > "$D/kjv.txt"
    rm -f "$D/kjv.raw"
    nb=$(ls "$D"/books/*.txt | wc -l)
    [ "$nb" -eq 66 ] || { echo "$me: expected 66 books from \`bible\`, got $nb" >&2; exit 1; }
    echo "$(wc -c < "$D/kjv.txt") bytes, $(wc -l < "$D/kjv.txt") lines, $nb books"
  fi
}

demo_tokenizer() {
  local inputs f
  if [ ! -s "$D/train.bin" ] || [ ! -s "$D/tokenizer.zttok" ] || ! grep -q 'unigram baseline loss' "$D/prepare.log" 2>/dev/null; then
    say "prepare: BPE tokenizer (vocab 4096) and token shards"
    inputs=()
    for f in "$D"/books/*.txt; do inputs+=(--input "$f"); done
    "$ZT" prepare "${inputs[@]}" --vocab-size 4096 --val-fraction 0.05 --eot-between-files --out-dir "$D" \
      | tee "$D/prepare.log"
  fi
  baseline=$(sed -n 's/.*unigram baseline loss: \([0-9.]*\).*/\1/p' "$D/prepare.log" | tail -1)
}
