#!/usr/bin/env python3
"""test_lora_fd.py — LoRA adapter gradients against central finite differences of the loss, with dropout on
the adapter input (the case the PEFT reference cannot check: PEFT draws its masks from torch's generator).

Drives build/tests/model_dump lora-fwdbwd (a training forward with lora.dropout: the same mask in every
call, seed 1234) on a small random model: one coordinate of each A and B tensor (16: every target, both layers),
d loss / d theta ~ (L(theta + h) - L(theta - h)) / 2h in float32 with h = 1e-2 (each loss a separate run).
Pass: |analytic - fd| <= 3e-3 * max|analytic over the checked coordinates| + 5% of |fd| for each coordinate,
for dropout 0.3 and, as a control, 0. A backward that used another mask than the forward (or dropped the
1/(1-p) scale) is off by the size of the gradient itself.
"""
import atexit
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MD = os.path.join(REPO, "build", "tests", "model_dump")
SHAPE = ["--layers", "2", "--heads", "2", "--embd", "32", "--vocab", "50", "--padded-vocab", "64", "--block", "16",
         "--threads", "1"]
LORA = ["--lora-rank", "4", "--lora-alpha", "16", "--lora-targets", "all"]
B, T = 2, 8
TMP = tempfile.mkdtemp(prefix="zt-lorafd.")
atexit.register(shutil.rmtree, TMP, True)  # removed however the test ends
failures = 0


def run(*args):
    p = subprocess.run([MD, *args], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, ZT_TEST_DEVICE="cpu"))
    if p.returncode != 0:
        raise RuntimeError(f"model_dump {' '.join(args[:1])} exited {p.returncode}: {p.stderr.strip()[-300:]}")
    return p.stdout


def table(args):
    rows = [l.split() for l in run("lora-table", *SHAPE, *args).splitlines() if l.startswith("tensor")]
    return [(r[1], int(r[2]), int(r[3])) for r in rows], int(run("lora-table", *SHAPE, *args).split()[-1])


tab, total = table(LORA)
gt = [l.split() for l in run("table", *SHAPE).splitlines() if l.startswith("tensor")]
base_total = sum(int(r[3]) for r in gt)
rng = np.random.default_rng(5)
W = (rng.standard_normal(base_total) * 0.2).astype(np.float32)
for r in gt:  # LayerNorm weights 1
    if ".ln_" in r[1] and r[1].endswith(".weight") or r[1].startswith("ln_f.weight"):
        W[int(r[2]):int(r[2]) + int(r[3])] = 1.0
wpath = os.path.join(TMP, "w.bin")
W.tofile(wpath)
tok = rng.integers(0, 50, size=(2, B, T)).astype(np.int32)
tpath = os.path.join(TMP, "tok.bin")
tok.tofile(tpath)
A0 = (rng.standard_normal(total) * 0.2).astype(np.float32)


def loss_grad(ad, p):
    apath, opath = os.path.join(TMP, "a.bin"), os.path.join(TMP, "o.bin")
    ad.astype(np.float32).tofile(apath)
    run("lora-fwdbwd", *SHAPE, *LORA, "--lora-dropout", str(p), "--B", str(B), "--T", str(T), "--weights", wpath,
        "--adapters", apath, "--tokens", tpath, "--out", opath)
    o = np.fromfile(opath, dtype=np.float32)
    return float(o[0]), o[1 + B * T * 64:]


coords = []
pick = np.random.default_rng(9)
for name, off, n in tab:  # one coordinate of each adapter tensor
    if len(coords) < 24:
        coords.append((name, off + int(pick.integers(0, n))))
coords = coords[:24]
for p in (0.3, 0.0):
    try:
        L0, g = loss_grad(A0, p)
        h = 1e-2
        worst, msgs = 0.0, []
        scale = max(abs(float(g[c])) for _, c in coords)
        for name, c in coords:
            ap, am = A0.copy(), A0.copy()
            ap[c] += h
            am[c] -= h
            fd = (loss_grad(ap, p)[0] - loss_grad(am, p)[0]) / (2 * h)
            err = abs(float(g[c]) - fd)
            lim = 3e-3 * scale + 0.05 * abs(fd)
            worst = max(worst, err / lim)
            if err > lim:
                msgs.append(f"{name}[{c}]: analytic {g[c]:.5g} vs fd {fd:.5g}")
        name = f"fd_dropout_{p}"
        if msgs:
            failures += 1
            print(f"FAIL {name}: {'; '.join(msgs[:4])}", flush=True)
        else:
            print(f"PASS {name} ({len(coords)} adapter coordinates (A and B of every target, both layers): "
                  f"|analytic - central difference| within {worst:.2f} of the limit; loss {L0:.5f})", flush=True)
    except Exception as e:  # noqa: BLE001
        failures += 1
        print(f"FAIL fd_dropout_{p}: {type(e).__name__}: {e}", flush=True)
sys.exit(1 if failures else 0)
