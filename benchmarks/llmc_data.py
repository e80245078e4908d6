#!/usr/bin/env python3
"""llmc_data.py — converts a ztrain token shard into llm.c's GPT-2 token file, for benchmarks/bench_gpu_peers.sh.

    llmc_data.py SRC.bin DST.bin          SRC: a ztrain shard (docs/data.md "Shard file format") of 2-byte tokens
    llmc_data.py --read FILE              prints FILE's llm.c header fields as JSON (and checks its size)

llm.c's format (karpathy/llm.c, dev/data/data_common.py write_datafile, read by llmc/dataloader.h
dataloader_load_shard_): a header of 256 little-endian int32, header[0] = 20240520 (the magic of the GPT-2
format), header[1] = 1 (version), header[2] = the number of tokens, the rest 0; then the tokens as uint16.
llm.c checks the magic, the version and that the file is exactly 1024 + 2 x count bytes long, and asserts a
shard has at least B x T + 1 tokens (per process). The token count is an int32 there: below 2^31.
"""
import json
import os
import struct
import sys

import numpy as np

LLMC_MAGIC, LLMC_VERSION, LLMC_HEADER_INTS = 20240520, 1, 256
ZT_MAGIC, ZT_HEADER_BYTES = b"ZTSHARD\0", 64


def read_ztrain_shard(path):
    """The tokens of a ztrain shard (memory-mapped) after checking its header."""
    with open(path, "rb") as f:
        h = f.read(ZT_HEADER_BYTES)
    if len(h) != ZT_HEADER_BYTES or h[:8] != ZT_MAGIC:
        sys.exit(f"llmc_data.py: {path}: not a ztrain shard (no ZTSHARD header)")
    version, width, vocab, _eot, count = struct.unpack_from("<IIIIQ", h, 8)
    flags, example_len = struct.unpack_from("<II", h, 32) if version >= 2 else (0, 0)
    if version not in (1, 2):
        sys.exit(f"llmc_data.py: {path}: shard version {version} (1 or 2 expected)")
    if width != 2 or vocab > 65536:
        sys.exit(f"llmc_data.py: {path}: {width}-byte tokens, vocab {vocab}: llm.c's GPT-2 format holds uint16 tokens only")
    if flags & 1 or example_len:
        sys.exit(f"llmc_data.py: {path}: a shard with a loss mask or fixed-length examples has no llm.c equivalent")
    size = os.path.getsize(path)
    if size != ZT_HEADER_BYTES + 2 * count:
        sys.exit(f"llmc_data.py: {path}: {size} bytes, the header says {count} tokens ({ZT_HEADER_BYTES + 2 * count} bytes)")
    return np.memmap(path, dtype="<u2", mode="r", offset=ZT_HEADER_BYTES, shape=(count,))


def write_llmc(path, toks):
    n = len(toks)
    if not 0 < n < 2**31:
        sys.exit(f"llmc_data.py: {n} tokens: llm.c's header holds 1 .. 2^31-1")
    header = np.zeros(LLMC_HEADER_INTS, dtype="<i4")
    header[0], header[1], header[2] = LLMC_MAGIC, LLMC_VERSION, n
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(header.tobytes())
        step = 1 << 24  # copy in pieces: the source is memory-mapped
        for i in range(0, n, step):
            f.write(np.asarray(toks[i:i + step], dtype="<u2").tobytes())
    os.replace(tmp, path)


def read_llmc(path):
    """Header fields of an llm.c token file, checked as llm.c's dataloader checks them."""
    header = np.fromfile(path, dtype="<i4", count=LLMC_HEADER_INTS)
    if len(header) != LLMC_HEADER_INTS:
        sys.exit(f"llmc_data.py: {path}: shorter than llm.c's 1024-byte header")
    size = os.path.getsize(path)
    n = int(header[2])
    return {"magic": int(header[0]), "version": int(header[1]), "tokens": n,
            "header_rest_zero": bool(not header[3:].any()), "bytes": size,
            "size_ok": size == 4 * LLMC_HEADER_INTS + 2 * n,
            "ok": int(header[0]) == LLMC_MAGIC and int(header[1]) == LLMC_VERSION and n > 0
            and size == 4 * LLMC_HEADER_INTS + 2 * n}


def main():
    a = sys.argv[1:]
    if len(a) == 2 and a[0] == "--read":
        r = read_llmc(a[1])
        print(json.dumps(r))
        sys.exit(0 if r["ok"] else 1)
    if len(a) != 2 or a[0].startswith("-"):
        sys.exit("usage: llmc_data.py SRC.bin DST.bin | llmc_data.py --read FILE")
    toks = read_ztrain_shard(a[0])
    write_llmc(a[1], toks)
    r = read_llmc(a[1])
    if not r["ok"] or r["tokens"] != len(toks):
        sys.exit(f"llmc_data.py: {a[1]}: written file does not read back: {r}")
    print(f"llmc_data.py: {a[0]} -> {a[1]}: {len(toks)} tokens")


if __name__ == "__main__":
    main()
