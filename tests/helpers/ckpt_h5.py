#!/usr/bin/python3
"""ckpt_h5.py — h5py's view of ztrain checkpoints, for tests/e2e/test_ckpt.sh (Debian's python3 + h5py).

  ckpt_h5.py verify CKPT [TABLE]   a complete ztrain checkpoint: root attrs, /model and
                                     /optim/exp_avg{,_sq} with every tensor of TABLE (the output of
                                     `model_dump table`) in its true shape, float32, wte's padded rows 0
  ckpt_h5.py hash CKPT TABLE       sha256 of /model's tensors concatenated in TABLE order as float32
                                     (ztrain's params_hash of the same parameters)
  ckpt_h5.py same A B              every dataset of A equals B's bit for bit (and the same names)
  ckpt_h5.py foreign OUT           writes an HDF5 file that is not a ztrain checkpoint
Prints one line; exit 0 on success, 1 otherwise (the line says why)."""
import hashlib
import sys

import h5py
import numpy as np


def table(path):
    rows = []
    for line in open(path):
        f = line.split()
        if f and f[0] == "tensor":
            ndim = int(f[4])
            rows.append((f[1], int(f[2]), int(f[3]), (int(f[5]),) if ndim == 1 else (int(f[5]), int(f[6]))))
    return rows


def datasets(h):
    out = {}
    h.visititems(lambda name, obj: out.__setitem__(name, obj) if isinstance(obj, h5py.Dataset) else None)
    return out


def verify(path, tpath=None):
    with h5py.File(path, "r") as h:
        a = h.attrs
        fmt = a.get("format")
        fmt = fmt.decode() if isinstance(fmt, bytes) else fmt
        if fmt != "ztrain":
            return f"format attr is {fmt!r}"
        for k in ("version", "step", "samples_seen", "tokens_seen", "world_size", "loss_scale", "seed", "config",
                  "created", "complete"):
            if k not in a:
                return f"root attr {k} missing"
        if int(a["complete"]) != 1:
            return "complete != 1"
        cfg = a["config"].decode() if isinstance(a["config"], bytes) else a["config"]
        if "n_embd" not in cfg:
            return "config attr does not look like a ztrain config"
        n = 0
        if tpath:
            for grp in ("model", "optim/exp_avg", "optim/exp_avg_sq"):
                if grp not in h:
                    return f"group /{grp} missing"
                names = set(h[grp].keys())
                tab = table(tpath)
                if names != {t[0] for t in tab}:
                    return f"/{grp} tensors differ from the table: {sorted(names ^ {t[0] for t in tab})[:4]}"
                for name, _, numel, shape in tab:
                    d = h[grp][name]
                    if d.shape != shape or d.dtype != np.float32:
                        return f"/{grp}/{name} is {d.shape} {d.dtype}, table says {shape} float32"
                    d[...]
                    n += 1
            wte = h["model/wte.weight"]
            V = int(wte.attrs["vocab_size"])
            if V != int(a["vocab_size"]) or np.any(wte[V:] != 0):
                return "wte padded rows are not zero / vocab_size attr inconsistent"
        return f"ok: step {int(a['step'])}, world_size {int(a['world_size'])}, {n} tensors read in their true shapes"


def flat_hash(path, tpath):
    with h5py.File(path, "r") as h:
        parts = [np.ascontiguousarray(h["model"][name][...], dtype=np.float32).reshape(-1) for name, *_ in table(tpath)]
    return hashlib.sha256(np.concatenate(parts).tobytes()).hexdigest()


def same(pa, pb):
    with h5py.File(pa, "r") as a, h5py.File(pb, "r") as b:
        da, db = datasets(a), datasets(b)
        if set(da) != set(db):
            return f"different datasets: {sorted(set(da) ^ set(db))[:4]}"
        for k in sorted(da):
            x, y = da[k][...], db[k][...]
            if x.shape != y.shape or x.tobytes() != y.tobytes():
                return f"{k} differs (max |diff| {np.abs(x.astype(np.float64) - y).max():.3g})"
        return f"ok: {len(da)} datasets bit-identical"


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    try:
        if cmd == "verify":
            msg = verify(*args)
        elif cmd == "hash":
            print(flat_hash(*args))
            return 0
        elif cmd == "same":
            msg = same(*args)
        elif cmd == "foreign":
            with h5py.File(args[0], "w") as h:
                h.create_dataset("model/wte.weight", data=np.zeros((4, 4), np.float32))
                h.attrs["note"] = "not a ztrain checkpoint"
            msg = "ok"
        else:
            msg = f"unknown command {cmd}"
    except Exception as e:  # an unreadable file is a failed check, with its reason
        msg = f"{type(e).__name__}: {e}"
    print(msg)
    return 0 if msg.startswith("ok") else 1


if __name__ == "__main__":
    sys.exit(main())
