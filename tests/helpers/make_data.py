#!/usr/bin/python3
"""Writes small token shards for the tests (ztrain shard format, README "Shard file format").

  make_data.py OUT_DIR VOCAB N_TOKENS [--windows-only N --seq T]
A learnable synthetic stream: 64 random "phrases" of 40 tokens repeated in a seeded random order,
so a model's loss falls well below the unigram entropy."""
import struct, sys
import numpy as np

def write(path, toks, vocab):
    width = 2 if vocab <= 65536 else 4
    h = b"ZTSHARD\0" + struct.pack("<IIIIQ", 1, width, vocab, 0xFFFFFFFF, len(toks)) + b"\0" * 32
    with open(path, "wb") as f:
        f.write(h + np.asarray(toks, dtype=np.uint16 if width == 2 else np.uint32).tobytes())

def main():
    out, vocab, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rng = np.random.default_rng(1234)
    phrases = rng.integers(0, vocab, size=(64, 40))
    order = rng.integers(0, 64, size=n // 40 + 2)
    toks = phrases[order].reshape(-1)[:n]
    import os
    os.makedirs(out, exist_ok=True)
    write(os.path.join(out, "train.bin"), toks, vocab)
    write(os.path.join(out, "val.bin"), phrases[rng.integers(0, 64, size=n // 400 + 4)].reshape(-1), vocab)

if __name__ == "__main__":
    main()
