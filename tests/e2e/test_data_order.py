#!/usr/bin/env python3
"""test_data_order.py — the training data order, checked against an independent implementation of the sampler
(src/io/data.h "Order", written again here from its description), and weighted mixtures.

Run from the repository root: python3 tests/e2e/test_data_order.py (numpy). Needs ./ztrain. PASS/FAIL lines.

ztrain train with ZTRAIN_TRACE_DATA writes, per rank, every sample it trains on: step, micro-batch, row, global
sample index, source, window and a checksum of the input tokens. This test computes, for every step over more than
3 epochs of a small dataset, which global samples the step must take (step 0: exactly samples 0 .. GB-1), which
source and window each is (the mixture rule, the keyed Feistel permutation per epoch) and the checksum of that
window's tokens read from the shard files with numpy, and compares every line, on 1 and 2 ranks: a shuffle that
ignores the epoch, a one-batch shift of the data position or a wrong window fails it. Mixtures: the realised shares
in results.json over 10,000 sequences within 1% of the weights, and params_hash equal on 1, 2 and 4 ranks.
"""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "helpers"))
from hf_ref_common import REPO, report_fail, report_pass  # noqa: E402

ZT = os.path.join(REPO, "ztrain")
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", ZTRAIN_TEST_SGEMM_N="256")
M64 = (1 << 64) - 1
T = 32


def mix(z):
    z = (z + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def perm(k, n, key):
    if n <= 1:
        return 0
    bits = 2
    while bits < 64 and (1 << bits) < n:
        bits += 2
    h = bits // 2
    mask = (1 << h) - 1
    x = k
    while True:
        left, right = x >> h, x & mask
        for r in range(6):
            left, right = right, left ^ (mix(key ^ mix(((r << 32) + right) & M64)) & mask)
        x = (left << h) | right
        if x < n:
            return x


def epoch_key(seed, epoch, source):
    return mix(seed ^ (((epoch + 1) * 0xD1B54A32D192ED03) & M64) ^ (((source + 1) * 0x9E3779B97F4A7C15) & M64))


class Sampler:
    """sources: list of (weight, [token arrays of its files in glob order])"""

    def __init__(self, sources, seed, shuffle=True):
        total = sum(w for w, _ in sources)
        self.q = [int(np.floor(w / total * 4294967296.0 + 0.5)) for w, _ in sources]
        self.files = [files for _, files in sources]
        self.wins = [[(len(f) - 1) // T if len(f) > T else 0 for f in files] for files in self.files]
        self.seed, self.shuffle = seed, shuffle
        self.counts, self.next = [0] * len(sources), 0

    def pick(self, s):
        assert s >= self.next
        while True:
            best = max(range(len(self.q)), key=lambda i: (self.q[i] * (self.next + 1) - (self.counts[i] << 32), -i))
            if self.next == s:
                return best, self.counts[best]
            self.counts[best] += 1
            self.next += 1

    def sample(self, s):
        i, k = self.pick(s)
        n = sum(self.wins[i])
        w = perm(k % n, n, epoch_key(self.seed, k // n, i)) if self.shuffle else k % n
        f = 0
        while w >= sum(self.wins[i][:f + 1]):
            f += 1
        off = (w - sum(self.wins[i][:f])) * T
        inp = self.files[i][f][off:off + T].astype(np.uint64)
        csum = int((inp * np.arange(1, T + 1, dtype=np.uint64)).sum() % (1 << 32))
        return i, w, csum


def write_shard(path, tokens, vocab=256):
    hdr = bytearray(64)
    hdr[0:8] = b"ZTSHARD\0"
    hdr[8:12] = (1).to_bytes(4, "little")
    hdr[12:16] = (2).to_bytes(4, "little")
    hdr[16:20] = vocab.to_bytes(4, "little")
    hdr[20:24] = (0xFFFFFFFF).to_bytes(4, "little")
    hdr[24:32] = len(tokens).to_bytes(8, "little")
    with open(path, "wb") as f:
        f.write(bytes(hdr))
        f.write(np.asarray(tokens, dtype="<u2").tobytes())


def train(tmp, name, ranks, data, steps, extra=(), trace=None):
    cmd = ([] if ranks == 1 else ["mpirun", "--oversubscribe", "-np", str(ranks)]) + [
        ZT, "train", "-c", os.path.join(REPO, "inputs/tiny.cfg"), "--set", f"data.train={data}",
        "--set", "data.val=", "--set", f"train.steps={steps}", "--set", f"run.root={tmp}/runs",
        "--set", f"run.name={name}", "--set", "checkpoint.every=0"] + list(extra)
    env = dict(ENV)
    if trace:
        env["ZTRAIN_TRACE_DATA"] = trace
    p = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    return p


def results(tmp, name):
    paths = glob.glob(f"{tmp}/runs/**/{name}*/results.json", recursive=True)
    return json.load(open(sorted(paths)[-1])) if paths else None


def check_trace(tmp, tag, ranks, sampler, steps, gb, mb):
    lines = []
    for r in range(ranks):
        for ln in open(f"{tmp}/trace-{tag}.{r}"):
            lines.append(tuple(int(x) for x in ln.split()))
    lines.sort(key=lambda v: v[3])
    want_n = steps * gb
    got_idx = [v[3] for v in lines]
    if got_idx != list(range(want_n)):
        report_fail(f"data_order_{tag}", f"samples trained on are not exactly 0..{want_n - 1} once each "
                    f"(first: {got_idx[:8]})")
        return
    bad = 0
    for step, j, i, s, src, w, csum in lines:
        if s != step * gb + j * mb + i:
            bad += 1
            if bad == 1:
                report_fail(f"data_order_{tag}", f"step {step} micro-batch {j} row {i} took sample {s}, expected "
                            f"{step * gb + j * mb + i}")
            continue
        ws, ww, wc = sampler.sample(s)
        if (src, w, csum) != (ws, ww, wc):
            bad += 1
            if bad == 1:
                report_fail(f"data_order_{tag}", f"sample {s} (step {step}): source {src} window {w} checksum {csum}; "
                            f"the independent sampler says source {ws} window {ww} checksum {wc}")
    if not bad:
        report_pass(f"data_order_{tag}", f"{want_n} samples over {steps} steps on {ranks} rank(s): every step's "
                    "windows and tokens as the independent sampler's")


def main():
    rng = np.random.default_rng(7)
    with tempfile.TemporaryDirectory() as tmp:
        # one source of 2 files, 9 + 12 = 21 windows: 8 steps x 8 = 64 samples, > 3 epochs
        a0, a1 = rng.integers(0, 256, 9 * T + 1 + 5), rng.integers(0, 256, 12 * T + 1)
        os.makedirs(f"{tmp}/a")
        write_shard(f"{tmp}/a/s0.bin", a0)
        write_shard(f"{tmp}/a/s1.bin", a1)
        b0 = rng.integers(0, 256, 40 * T + 1)
        write_shard(f"{tmp}/b.bin", b0)
        gb, mb, steps = 8, 4, 8
        for ranks in (1, 2):
            tag = f"one_source_{ranks}r"
            p = train(tmp, tag, ranks, f"{tmp}/a/s*.bin", steps, trace=f"{tmp}/trace-{tag}")
            if p.returncode:
                report_fail(f"data_order_{tag}", f"train exited {p.returncode}: {p.stderr.strip()[-400:]}")
                continue
            check_trace(tmp, tag, ranks, Sampler([(1.0, [a0, a1])], 1337), steps, gb, mb)
        tag = "no_shuffle_1r"
        p = train(tmp, tag, 1, f"{tmp}/a/s*.bin", steps, ["--set", "data.shuffle=false"], trace=f"{tmp}/trace-{tag}")
        if p.returncode:
            report_fail(f"data_order_{tag}", f"train exited {p.returncode}: {p.stderr.strip()[-400:]}")
        else:
            check_trace(tmp, tag, 1, Sampler([(1.0, [a0, a1])], 1337, shuffle=False), steps, gb, mb)
        mixture = f"0.7 {tmp}/a/s*.bin 0.3 {tmp}/b.bin"
        tag = "mixture_2r"
        p = train(tmp, tag, 2, mixture, steps, trace=f"{tmp}/trace-{tag}")
        if p.returncode:
            report_fail(f"data_order_{tag}", f"train exited {p.returncode}: {p.stderr.strip()[-400:]}")
        else:
            check_trace(tmp, tag, 2, Sampler([(0.7, [a0, a1]), (0.3, [b0])], 1337), steps, gb, mb)

        # mixture shares over 10,000 sequences (1,250 steps of 8) and 1/2/4 ranks bit-identical
        p = train(tmp, "mix_shares", 1, mixture, 1250)
        if p.returncode:
            report_fail("mixture_shares", f"train exited {p.returncode}: {p.stderr.strip()[-400:]}")
            return
        shares = results(tmp, "mix_shares")["data"]
        hashes = {}
        for ranks in (1, 2, 4):
            p = train(tmp, f"mix_{ranks}r", ranks, mixture, 40, ["--set", "train.micro_batch=2"])
            m = re.search(r"params_hash sha256:([0-9a-f]+)", p.stdout + p.stderr)
            hashes[ranks] = m.group(1) if m and not p.returncode else None
        worst = max(abs(s["share"] - w) for s, w in zip(shares, (0.7, 0.3)))
        n = sum(s["samples"] for s in shares)
        (report_pass if n == 10000 and worst <= 0.01 else report_fail)(
            "mixture_shares", f"{n} sequences: shares {[round(s['share'], 5) for s in shares]} for weights 0.7/0.3, "
            f"largest deviation {worst:.2e} (limit 1e-2)")
        (report_pass if hashes[1] and hashes[1] == hashes[2] == hashes[4] else report_fail)(
            "mixture_ranks_bitwise", f"params_hash after 40 steps (micro_batch 2) on 1/2/4 ranks: "
            f"{[str(h)[:16] for h in hashes.values()]}")

        # resume: 20 steps on 2 ranks (--stop-after) + 20 on 1 rank == 40 straight
        ck = ["--set", "train.micro_batch=2", "--set", "checkpoint.every=20"]
        p1 = train(tmp, "mix_res", 2, mixture, 40, ck + ["--stop-after", "20"])
        p2 = train(tmp, "mix_res", 1, mixture, 40, ck + ["--resume", "auto"])
        m = re.search(r"params_hash sha256:([0-9a-f]+)", p2.stdout + p2.stderr)
        got = m.group(1) if m and not p1.returncode and not p2.returncode else None
        (report_pass if got and got == hashes[1] else report_fail)(
            "mixture_resume", f"20 steps on 2 ranks + resume on 1 rank: {str(got)[:16]}, 40 straight: {str(hashes[1])[:16]}"
            + ("" if got else f" ({(p1.stderr + p2.stderr).strip()[-300:]})"))

        # bad mixtures: exit 2, one line naming the value
        for spec, want in ((f"0 {tmp}/b.bin", "weight \"0\""), (f"-1 {tmp}/b.bin 1 {tmp}/b.bin", "weight \"-1\""),
                           (f"0.5 {tmp}/b.bin 0.5", "has no path"), (f"0.5 {tmp}/b.bin x {tmp}/b.bin", "weight \"x\""),
                           (f"1 {tmp}/nothing*.bin", "no such data file")):
            p = train(tmp, "bad", 1, spec, 10)
            err = p.stderr.strip().splitlines()
            ok = p.returncode == 2 and len(err) == 1 and want in err[0]
            (report_pass if ok else report_fail)(f"mixture_bad[{spec.replace(tmp, '')}]",
                                                  f"exit {p.returncode}: {err[-1] if err else ''}")
    sys.exit(1 if __import__("hf_ref_common").failures else 0)


if __name__ == "__main__":
    main()
