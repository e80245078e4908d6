#!/usr/bin/env python3
"""parquet_to_jsonl.py — a Parquet file's text column as JSON Lines, the input `ztrain prepare` reads
(docs/data.md, "Parquet").

  tools/parquet_to_jsonl.py IN.parquet OUT.jsonl [--column text] [--field text] [--batch-rows 8192]

One line per row, in row order: {"<field>": <the column's string>} (UTF-8, no ASCII escaping). The file is
streamed batch by batch through its row groups (pyarrow's ParquetFile.iter_batches, only that column read),
so memory is one batch, not the file. OUT ending in .gz is written gzip-compressed. A null cell is
skipped (the count is printed); a column that is not a string type is an error. The output is written to
OUT.tmp and renamed when complete. Needs pyarrow (.venv-ref has it: scripts/setup-venv.sh).

Exit 0, or 2 with one line "parquet_to_jsonl.py: error: <file>: <what is wrong>" on stderr.
"""
import argparse
import gzip
import json
import os
import sys


def fail(msg):
    print(f"parquet_to_jsonl.py: error: {msg}", file=sys.stderr)
    sys.exit(2)


def main():
    ap = argparse.ArgumentParser(description="a Parquet file's text column as JSON Lines for ztrain prepare")
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("--column", default="text", help="the Parquet column with the text (default text)")
    ap.add_argument("--field", default="text", help="the JSON field to write it as (default text)")
    ap.add_argument("--batch-rows", type=int, default=8192, help="rows per batch read (default 8192)")
    a = ap.parse_args()
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as e:
        fail(f"pyarrow is not installed ({e}); scripts/setup-venv.sh puts it in .venv-ref")
    try:
        pf = pq.ParquetFile(a.input)
    except (OSError, pa.ArrowException) as e:
        fail(f"{a.input}: cannot read as Parquet ({str(e).splitlines()[0] if str(e) else type(e).__name__})")
    schema = pf.schema_arrow
    if a.column not in schema.names:
        fail(f"{a.input}: no column '{a.column}' (columns: {', '.join(schema.names)}; see --column)")
    typ = schema.field(a.column).type
    if not (pa.types.is_string(typ) or pa.types.is_large_string(typ)):
        fail(f"{a.input}: column '{a.column}' is {typ} (expected a string column)")
    tmp = a.output + ".tmp"
    rows = nulls = 0
    try:
        opener = gzip.open if a.output.endswith(".gz") else open
        with opener(tmp, "wt", encoding="utf-8", newline="\n") as out:
            for batch in pf.iter_batches(batch_size=a.batch_rows, columns=[a.column]):
                for v in batch.column(0).to_pylist():
                    if v is None:
                        nulls += 1
                        continue
                    out.write(json.dumps({a.field: v}, ensure_ascii=False))
                    out.write("\n")
                    rows += 1
        os.replace(tmp, a.output)
    except (OSError, pa.ArrowException) as e:
        if os.path.exists(tmp):
            os.remove(tmp)
        fail(f"{a.output}: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
    print(f"{a.input}: {rows} rows -> {a.output}" + (f" ({nulls} null cells skipped)" if nulls else ""))


if __name__ == "__main__":
    main()
