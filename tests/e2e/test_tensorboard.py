#!/usr/bin/env python3
"""test_tensorboard.py — metrics.tensorboard: the event files ztrain writes in C, read back with
TensorBoard's own reader (tensorboard from PyPI in .venv-ref, scripts/setup-venv.sh).

Prints "PASS name (numbers)" or "FAIL name: reason" per case; exits non-zero if any failed.
  run                 a tiny run with metrics.tensorboard = true, 20 steps, eval every 5, stopped with
                      --stop-after 8 and resumed (--resume auto) to the end
  event_files         two event files (events.out.tfevents.*) in the run directory, names in step order,
                      each starting with file_version "brain.Event:2"
  scalars_match       every scalar (train/loss, lr, grad_norm, tokens_per_s, mem_bytes, val/loss) has the
                      steps of metrics.jsonl and its values to float32 rounding (tokens_per_s: 6 printed digits)
  resume_continues    the resumed file's steps continue the first's (9.. after ..8), no step twice
  crc_detected        a flipped data byte / length byte fails TensorBoard's record reader CRC check
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ZT = os.environ.get("ZTRAIN", os.path.join(REPO, "ztrain"))
if not os.path.isabs(ZT):
    ZT = os.path.join(REPO, ZT)
failures = 0


def report(ok, name, msg):
    global failures
    if ok:
        print(f"PASS {name} ({msg})", flush=True)
    else:
        failures += 1
        print(f"FAIL {name}: {msg}", flush=True)


try:
    import numpy as np
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.compat.tensorflow_stub import errors as tb_errors
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import PyRecordReader_New
except ImportError as e:
    report(False, "imports", f"{e} (run scripts/setup-venv.sh: it installs tensorboard into .venv-ref)")
    sys.exit(1)

TMP = tempfile.mkdtemp(prefix="zt-tb.")
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
if not os.path.exists(os.path.join(REPO, "data/tiny/train.bin")):
    subprocess.run([os.path.join(REPO, "tests/helpers/make_data.py"), os.path.join(REPO, "data/tiny"), "256", "40000"],
                   check=True, capture_output=True)


def ztrain(*args):
    p = subprocess.run([ZT, *args], cwd=REPO, env=ENV, capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout + p.stderr


STEPS, EVERY, STOP = 20, 5, 8
common = ["train", "-c", "inputs/tiny.cfg", "--set", f"train.steps={STEPS}", "--set", f"eval.every={EVERY}",
          "--set", "eval.sequences=8", "--set", "metrics.tensorboard=true", "--set", f"run.root={TMP}",
          "--set", "run.session=tb", "--set", "run.name=r"]
rc1, out1 = ztrain(*common, "--stop-after", str(STOP))
rc2, out2 = ztrain(*common, "--resume", "auto")
run = os.path.join(TMP, "tb", "r")
report(rc1 == 0 and rc2 == 0 and "resumed from" in out2, "run",
       f"stopped at {STOP}, resumed to {STEPS}" if rc1 == 0 and rc2 == 0 else f"rc {rc1}/{rc2}: {out1[-300:]} {out2[-300:]}")
if rc1 or rc2:
    sys.exit(1)

# ---- the event files
files = sorted(f for f in os.listdir(run) if "tfevents" in f)
first_steps, versions = [], []
for f in files:
    evs = list(EventFileLoader(os.path.join(run, f)).Load())
    versions.append(evs[0].file_version if evs else "")
    first_steps.append([e.step for e in evs if e.HasField("summary")])
ok = (len(files) == 2 and all(f.startswith("events.out.tfevents.") for f in files)
      and versions == ["brain.Event:2"] * 2)
report(ok, "event_files", f"{files}, file_version {versions}")

# ---- every scalar against metrics.jsonl
rows = [json.loads(line) for line in open(os.path.join(run, "metrics.jsonl"))]
acc = EventAccumulator(run, size_guidance={"scalars": 0})
acc.Reload()
tags = {"train/loss": "loss", "train/lr": "lr", "train/grad_norm": "grad_norm",
        "train/tokens_per_s": "tokens_per_s", "train/mem_bytes": "mem_bytes", "val/loss": "val_loss"}
bad, counts = [], {}
have = set(acc.Tags()["scalars"])
for tag, key in tags.items():
    want = [(r["step"], r[key]) for r in rows if key in r]
    got = [(e.step, e.value) for e in acc.Scalars(tag)] if tag in have else []
    counts[tag] = len(got)
    if [s for s, _ in got] != [s for s, _ in want]:
        bad.append(f"{tag}: steps {[s for s, _ in got]} != {[s for s, _ in want]}")
        continue
    for (s, g), (_, w) in zip(got, want):
        # the file holds float32(value); metrics.jsonl the double with 9 significant digits (%.9g), whose
        # rounding to float32 can land one ulp away: allow half a float32 ulp plus the printing error
        w32 = float(np.float32(w))
        tol = abs(w) * (1e-5 if key == "tokens_per_s" else 2.0**-24 + 1e-8)
        same = g == w32 or abs(g - w) <= tol
        if not same:
            bad.append(f"{tag} step {s}: {g!r} != float32({w!r}) = {w32!r}")
            break
val_steps = [s for s, _ in ((e.step, 0) for e in acc.Scalars("val/loss"))] if "val/loss" in have else []
report(not bad and val_steps == list(range(EVERY, STEPS + 1, EVERY)) and len(rows) == STEPS, "scalars_match",
       "; ".join(bad[:3]) if bad else f"{counts}, val/loss at steps {val_steps}, equal to metrics.jsonl to float32 rounding")

# ---- resume: steps continue, none twice
allsteps = [s for fs in first_steps for s in fs]
ok = (len(first_steps) == 2 and first_steps[0] == list(range(1, STOP + 1))
      and first_steps[1] == list(range(STOP + 1, STEPS + 1)) and len(set(allsteps)) == len(allsteps))
report(ok, "resume_continues",
       f"file 1: steps {first_steps[0][0]}..{first_steps[0][-1]}, file 2: {first_steps[1][0]}..{first_steps[1][-1]}"
       if ok else f"steps per file {first_steps}")


# ---- a corrupted CRC is detected by TensorBoard's record reader
def records(path):
    """(offset of the length, data length) of every TFRecord of a file"""
    out, data, off = [], open(path, "rb").read(), 0
    while off < len(data):
        n, = struct.unpack_from("<Q", data, off)
        out.append((off, n))
        off += 8 + 4 + n + 4
    return out, len(data) == off


def read_all(path):
    """records read by TensorBoard's reader, and the error it stopped with (None: clean end)"""
    r, n = PyRecordReader_New(path, 0, None, None), 0
    try:
        while True:
            r.GetNext()
            n += 1
    except tb_errors.OutOfRangeError:
        return n, None
    except tb_errors.DataLossError as e:
        return n, str(e)


src = os.path.join(run, files[0])
recs, exact = records(src)
clean_n, clean_err = read_all(src)
msgs = []
for what, pos in (("data byte", recs[1][0] + 12 + recs[1][1] // 2), ("length byte", recs[2][0])):
    bad_path = os.path.join(TMP, "corrupt.tfevents")
    shutil.copy(src, bad_path)
    with open(bad_path, "r+b") as f:
        f.seek(pos)
        b = f.read(1)
        f.seek(pos)
        f.write(bytes([b[0] ^ 0x01]))
    n, err = read_all(bad_path)
    msgs.append((what, n, err))
ok = (exact and clean_err is None and clean_n == len(recs) and msgs[0][1] == 1 and msgs[0][2] and "crc" in msgs[0][2]
      and msgs[1][1] == 2 and msgs[1][2] and "crc" in msgs[1][2])
report(ok, "crc_detected",
       f"clean file: {clean_n} records read; flipped {msgs[0][0]} in record 2: stopped after {msgs[0][1]} "
       f"({msgs[0][2]}); flipped {msgs[1][0]} of record 3: stopped after {msgs[1][1]}" if ok
       else f"clean {clean_n}/{len(recs)} {clean_err}; {msgs}")

shutil.rmtree(TMP, ignore_errors=True)
sys.exit(1 if failures else 0)
