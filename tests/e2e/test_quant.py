#!/usr/bin/env python3
"""test_quant.py — ztrain's quantisation formats (src/core/lora/quant.c, through build/tests/quant_tool)
against an independent numpy implementation written here from the QLoRA paper (Dettmers et al.
2023) and the format description in src/core/lora/quant.h.

Run from anywhere with a python3 that has numpy (Debian's python3-numpy, or .venv-ref/bin/python),
after `make build/tests/quant_tool`. Prints "PASS name (numbers)" or "FAIL name: reason" per case;
exits non-zero if any failed.

The reference: the NF4 codebook as the literal table of the paper; x = w / absmax per 64-block
and the code by argmin of |x - NF4| (numpy's first minimum: ties go to the lower index, the rule
quant.h states); double quantisation with the mean of the absmax values (a serial double sum, as
specified), 256-block absmax of (c - mean), argmin over the 8-bit dynamic map, which is built here
from its definition with exact rationals; the decoded absmax fma(DQ8[q], a2, mean) rounded once,
computed with exact rationals. Everything the C code computes is then an IEEE fp32 operation that
numpy performs identically, so the comparison is exact: blobs byte for byte (codes, constants,
padding), decodings bit for bit, tolerance 0. Code ties (two codebook values equally near in fp32)
are counted and reported; both sides resolve them the same documented way.

Cases, for a normal, a heavy-tailed (Student t, 3 dof) and an outlier/zero-block tensor of
27 x 2371 = 64 * 1000 + 17 elements (a partial last NF4 block, 4 DQ groups), in nf4, nf4_dq, int8:
  <data>_<fmt>_layout     the tool's offsets and size == the layout computed here from quant.h's text
  <data>_<fmt>_blob       the blob == the reference blob, byte for byte (first difference named)
  <data>_<fmt>_dequant    the tool's decoding == the reference decoding, bit for bit
and: tables (NF4 and DQ8 as the decoder computes them), thread-count invariance (1 vs 2 OpenMP
threads), empty input, refused input (NaN, wrong size), and the RMS error on N(0, 1) 768 x 768
(NF4 / std in [0.089, 0.095]: measured 0.0921; the same NF4 with blocks of 32 / 128 / 256 gives
0.0874 / 0.0957 / 0.0989 and uniform int4 absmax-64 0.108; int8 per-row below NF4 / 5; double
quantisation costs < 1%).
"""
import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import time
from fractions import Fraction

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.path.join(REPO, "build", "tests", "quant_tool")
FAILS = 0


def report(ok, name, msg):
    global FAILS
    if ok:
        print(f"PASS {name} ({msg})", flush=True)
    else:
        FAILS += 1
        print(f"FAIL {name}: {msg}", flush=True)


try:
    import numpy as np
except Exception as e:  # a missing reference is a failure, with what is missing
    report(False, "imports", f"{type(e).__name__}: {e} (install python3-numpy)")
    sys.exit(1)

if not os.access(TOOL, os.X_OK):
    report(False, "quant_tool", f"{TOOL} is missing: build it with `make build/tests/quant_tool`")
    sys.exit(1)

f32 = np.float32
TMP = tempfile.mkdtemp(prefix="zt-quant.")
atexit.register(shutil.rmtree, TMP, True)  # removed however the test ends
T0 = time.time()

# NormalFloat4, QLoRA paper appendix E (the 16 values; -1 .. 1, exact 0 at index 7)
NF4 = np.array([-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
                -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
                0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224,
                0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0], dtype=f32)


def f32_round(fr):
    """the fp32 nearest the rational fr, ties to even"""
    c = f32(float(fr))  # within one fp32 step of the answer (double rounding)
    best = None
    for x in (c, np.nextafter(c, f32(np.inf)), np.nextafter(c, f32(-np.inf))):
        key = (abs(Fraction(float(x)) - fr), int(np.array(x, dtype=f32).view(np.uint32)) & 1)
        if best is None or key < best[0]:
            best = (key, x)
    return best[1]


def dq8_table():
    """the signed dynamic-tree 8-bit map: 0, 1, and for z = 0..6 the midpoints of the 2^(6-z)
    equal steps of [0.1, 1] scaled by 10^-z, with both signs; ascending; fp32 nearest"""
    vals = [Fraction(0), Fraction(1)]
    for z in range(7):
        steps = 2 ** (6 - z)
        for j in range(steps):
            lo = Fraction(1, 10) + Fraction(9, 10) * Fraction(j, steps)
            hi = Fraction(1, 10) + Fraction(9, 10) * Fraction(j + 1, steps)
            v = (lo + hi) / 2 / 10 ** z
            vals += [v, -v]
    vals.sort()
    assert len(vals) == 256
    return np.array([f32_round(v) for v in vals], dtype=f32)


DQ8 = dq8_table()


def fma32(a, b, c):
    """fp32 fma elementwise: a * b + c exactly, rounded once"""
    cf = Fraction(float(c))
    return np.array([f32_round(Fraction(x) * Fraction(y) + cf) for x, y in zip(a.tolist(), b.tolist())], dtype=f32)


def nearest(x, table):
    """argmin |x - table| in fp32 (first minimum), and how many elements had a tie for the minimum"""
    d = np.abs(x[..., None] - table)
    q = d.argmin(axis=-1)
    s = np.sort(d, axis=-1)
    return q, int(np.count_nonzero(s[..., 0] == s[..., 1]))


def al(x):
    return (x + 15) // 16 * 16


def layout(fmt, rows, cols):
    n = rows * cols
    nb = (n + 63) // 64
    L = dict(fmt=fmt, rows=rows, cols=cols, n=n, nblocks=0, nblocks2=0, codes=0, absmax=-1, qabsmax=-1,
             absmax2=-1, mean=-1, scales=-1)
    if fmt == "nf4":
        L.update(nblocks=nb, absmax=32 * nb, bytes=al(36 * nb))
    elif fmt == "nf4_dq":
        nb2 = (nb + 255) // 256
        a2 = al(33 * nb)
        L.update(nblocks=nb, nblocks2=nb2, qabsmax=32 * nb, absmax2=a2, mean=al(a2 + 4 * nb2))
        L["bytes"] = al(L["mean"] + 4)
    else:
        L.update(nblocks=rows, scales=al(n), bytes=al(al(n) + 4 * rows))
    return L


def ref_nf4(w, dq):
    """reference blob sections and decoding of NF4 (dq: with double quantisation); w flat fp32"""
    n = w.size
    nb = (n + 63) // 64
    blocks = np.zeros(nb * 64, dtype=f32)
    blocks[:n] = w
    blocks = blocks.reshape(nb, 64)  # padding: zeros -> x = 0 -> code 7
    absmax = np.abs(blocks).max(axis=1) if nb else np.zeros(0, f32)
    safe = np.where(absmax > 0, absmax, f32(1))
    x = np.where(absmax[:, None] > 0, blocks / safe[:, None], f32(0)).astype(f32)
    codes, ties = nearest(x, NF4)
    codes = codes.astype(np.uint8)
    packed = ((codes[:, 0::2] << 4) | codes[:, 1::2]).astype(np.uint8)
    sec = {"codes": packed.tobytes()}
    if not dq:
        scale = absmax
        sec["absmax"] = absmax.astype("<f4").tobytes()
    else:
        s = 0.0
        for c in absmax.tolist():  # serial double sum in block order, as specified
            s += c
        mean = f32(s / nb) if nb else f32(0)
        nb2 = (nb + 255) // 256
        dev = np.zeros(nb2 * 256, dtype=f32)
        dev[:nb] = absmax - mean
        dev = dev.reshape(nb2, 256)
        a2 = np.abs(dev).max(axis=1) if nb2 else np.zeros(0, f32)
        safe2 = np.where(a2 > 0, a2, f32(1))
        x2 = np.where(a2[:, None] > 0, dev / safe2[:, None], f32(0)).astype(f32)
        q2, ties2 = nearest(x2, DQ8)
        qa = q2.reshape(-1)[:nb].astype(np.uint8)
        ties += ties2
        scale = fma32(DQ8[qa], np.repeat(a2, 256)[:nb], mean)
        sec.update(qabsmax=qa.tobytes(), absmax2=a2.astype("<f4").tobytes(), mean=np.array([mean], "<f4").tobytes())
    deq = (NF4[codes] * scale[:, None]).astype(f32).reshape(-1)[:n]
    return sec, deq, ties


def ref_int8(w, rows, cols):
    W = w.reshape(rows, cols)
    amax = np.abs(W).max(axis=1) if cols else np.zeros(rows, f32)
    d = (amax / f32(127)).astype(f32)
    safe = np.where(d > 0, d, f32(1))
    q = np.where(d[:, None] > 0, np.clip(np.rint(W / safe[:, None]), -127, 127), 0).astype(np.int8)
    deq = (q.astype(f32) * d[:, None]).astype(f32).reshape(-1)
    r = W / safe[:, None]
    halves = int(np.count_nonzero((d[:, None] > 0) & (np.abs(r - np.floor(r)) == f32(0.5))))  # rint's ties
    return {"codes": q.tobytes(), "scales": d.astype("<f4").tobytes()}, deq, halves


def ref(fmt, w, rows, cols):
    """(reference blob bytes, decoding, ties)"""
    L = layout(fmt, rows, cols)
    sec, deq, ties = ref_int8(w, rows, cols) if fmt == "int8" else ref_nf4(w, fmt == "nf4_dq")
    blob = bytearray(L["bytes"])
    for k, v in sec.items():
        blob[L[k]:L[k] + len(v)] = v
    return bytes(blob), deq, ties


def tool(*args, env=None):
    p = subprocess.run([TOOL, *map(str, args)], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, **(env or {})))
    return p.returncode, p.stdout + p.stderr


def run_tool(fmt, w, rows, cols, tag, env=None):
    """(layout dict from the tool's line, blob bytes, decoding) or raises with the tool's output"""
    src, bl, dq = (os.path.join(TMP, f"{tag}.{e}") for e in ("in.f32", "blob", "out.f32"))
    w.astype("<f4").tofile(src)
    rc, out = tool("encode", fmt, rows, cols, src, bl, dq, env=env)
    if rc != 0:
        raise RuntimeError(f"quant_tool exited {rc}: {out.strip()}")
    line = [s for s in out.splitlines() if s.startswith("layout ")][0]
    kv = dict(s.split("=", 1) for s in line.split()[1:])
    L = {k: (v if k == "fmt" else float(v) if k == "bits_per_param" else int(v)) for k, v in kv.items()}
    return L, open(bl, "rb").read(), np.fromfile(dq, dtype="<f4")


def section_of(L, off):
    names = [(L[k], k) for k in ("codes", "absmax", "qabsmax", "absmax2", "mean", "scales") if L[k] >= 0]
    return max((o, k) for o, k in names if o <= off)[1] if any(o <= off for o, _ in names) else "?"


def compare(name, fmt, w, rows, cols):
    """the three cases for one tensor and format; returns the tool's decoding"""
    want_blob, want_dq, ties = ref(fmt, w, rows, cols)
    try:
        L, blob, dq = run_tool(fmt, w, rows, cols, name)
    except Exception as e:
        report(False, f"{name}_{fmt}_layout", str(e))
        return None
    want_L = layout(fmt, rows, cols)
    diff = {k: (L.get(k), v) for k, v in want_L.items() if L.get(k) != v}
    report(not diff, f"{name}_{fmt}_layout",
           f"{L['bytes']} bytes, {L['bits_per_param']:.4f} bits/param" if not diff else f"tool vs reference: {diff}")
    if blob == want_blob:
        report(True, f"{name}_{fmt}_blob", f"{len(blob)} bytes identical, {ties} exact ties (same rule both sides)")
    else:
        m = min(len(blob), len(want_blob))
        i = next((k for k in range(m) if blob[k] != want_blob[k]), m)
        report(False, f"{name}_{fmt}_blob", f"sizes {len(blob)}/{len(want_blob)}, first difference at byte {i} "
               f"(section {section_of(want_L, i)}): tool {blob[i:i + 4].hex()} reference {want_blob[i:i + 4].hex()}")
    same = dq.size == want_dq.size and np.array_equal(dq.view(np.uint32), want_dq.view(np.uint32))
    if same:
        err = float(np.sqrt(np.mean((dq.astype(np.float64) - w) ** 2)) / np.std(w)) if w.size else 0.0
        report(True, f"{name}_{fmt}_dequant", f"{dq.size} values bit-identical, RMS error / std {err:.5f}")
    else:
        bad = np.nonzero(dq.view(np.uint32) != want_dq.view(np.uint32))[0] if dq.size == want_dq.size else [0]
        i = int(bad[0])
        report(False, f"{name}_{fmt}_dequant", f"{len(bad)} values differ; first at {i}: tool {dq[i]!r} reference "
               f"{want_dq[i]!r} (w {w[i]!r})" if dq.size == want_dq.size else f"sizes {dq.size}/{want_dq.size}")
    return dq


def main():
    # the tables the decoder computes
    p = os.path.join(TMP, "t.f32")
    rc, out = tool("table", "nf4", p)
    t = np.fromfile(p, dtype="<f4") if rc == 0 else None
    ok = rc == 0 and t.size == 16 and np.array_equal(t.view(np.uint32), NF4.view(np.uint32))
    report(ok, "table_nf4", "16 values == the paper's" if ok else
           (out if rc else f"decoder {t.tolist()} != paper {NF4.tolist()}"))
    rc, out = tool("table", "dq8", p)
    t = np.fromfile(p, dtype="<f4") if rc == 0 else None
    ok = rc == 0 and t.size == 256 and np.array_equal(t.view(np.uint32), DQ8.view(np.uint32))
    report(ok, "table_dq8", "256 values == the exact construction, fp32 nearest" if ok else
           (out if rc else f"first difference at {int(np.nonzero(t != DQ8)[0][0])}"))

    rng = np.random.default_rng(12)
    rows, cols = 27, 2371  # 64017 = 64 * 1000 + 17
    n = rows * cols
    data = {
        "normal": (rng.standard_normal(n) * 0.02).astype(f32),
        "student_t": (rng.standard_t(3, n) * 0.02).astype(f32),
    }
    w = (rng.standard_normal(n) * 0.02).astype(f32)
    w[rng.choice(n, 60, replace=False)] *= 300  # outliers
    w[64 * 10:64 * 13] = 0  # three zero blocks
    w[64 * 20:64 * 22] = -np.abs(w[64 * 20:64 * 22])  # negative blocks
    w[64 * 30:64 * 31] = NF4[np.arange(64) % 16] * f32(0.25)  # codebook values exactly
    w[-17:] = 1e-6  # the partial block: tiny values
    data["outliers"] = w
    for name, w in data.items():
        for fmt in ("nf4", "nf4_dq", "int8"):
            compare(name, fmt, w, rows, cols)

    # thread-count invariance of the blob (OpenMP over blocks / rows)
    w = data["student_t"]
    for fmt in ("nf4_dq", "int8"):
        try:
            a = run_tool(fmt, w, rows, cols, "t1", env={"OMP_NUM_THREADS": "1"})[1]
            b = run_tool(fmt, w, rows, cols, "t2", env={"OMP_NUM_THREADS": "2"})[1]
            report(a == b, f"threads_{fmt}", "blobs identical with 1 and 2 threads" if a == b else "blobs differ")
        except Exception as e:
            report(False, f"threads_{fmt}", str(e))

    # empty input
    for fmt in ("nf4", "nf4_dq", "int8"):
        try:
            L, blob, dq = run_tool(fmt, np.zeros(0, f32), 0, 0, "empty")
            want, _, _ = ref(fmt, np.zeros(0, f32), 0, 0)
            report(blob == want and dq.size == 0, f"empty_{fmt}", f"{len(blob)} bytes")
        except Exception as e:
            report(False, f"empty_{fmt}", str(e))

    # refused input: exit 2, one error line
    bad = np.ones(100, f32)
    bad[42] = np.nan
    src = os.path.join(TMP, "bad.f32")
    bad.tofile(src)
    rc, out = tool("encode", "nf4_dq", 1, 100, src, os.path.join(TMP, "b.blob"), os.path.join(TMP, "b.f32"))
    report(rc == 2 and "element 42 is not finite" in out, "refuse_nan", out.strip())
    rc, out = tool("encode", "nf4", 3, 7, src, os.path.join(TMP, "b.blob"), os.path.join(TMP, "b.f32"))
    report(rc == 2 and "expected 3 x 7 fp32" in out, "refuse_wrong_size", out.strip())

    # RMS error on N(0, 1) data, reference and tool (identical by the cases above, so one number each)
    w = rng.standard_normal(768 * 768).astype(f32)
    errs = {}
    for fmt in ("nf4", "nf4_dq", "int8"):
        dq = compare("normal768", fmt, w, 768, 768)
        errs[fmt] = float(np.sqrt(np.mean((dq.astype(np.float64) - w) ** 2)) / np.std(w)) if dq is not None else 1.0
    ok = 0.089 <= errs["nf4"] <= 0.095 and errs["nf4"] <= errs["nf4_dq"] <= errs["nf4"] * 1.01 and \
        errs["int8"] < errs["nf4"] / 5
    report(ok, "rms_error_normal", f"RMS error / std on N(0,1) 768x768: nf4 {errs['nf4']:.5f}, "
           f"nf4_dq {errs['nf4_dq']:.5f}, int8 {errs['int8']:.5f} (nf4 bound [0.089, 0.095])")
    print(f"   ({time.time() - T0:.1f} s)")


if __name__ == "__main__":  # tests/e2e/test_lora.py imports the reference (ref) from here
    main()
    sys.exit(1 if FAILS else 0)
