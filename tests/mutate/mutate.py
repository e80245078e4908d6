#!/usr/bin/env python3
"""mutate.py — mutation testing: do the tests catch small, plausible bugs?

    tests/mutate/mutate.py [--list FILE] [--only NAME,...] [--keep-going]      (make mutate)

For each entry of tests/mutate/mutations.txt (format described there): the repository's source
(tracked and untracked, not ignored: src/ cuda/ tests/ inputs/ scripts/ benchmarks/ Makefile; .venv-ref
and data/ symlinked) is mirrored into build/mutate/tree once (unchanged files keep their mtimes, so its
build/ is reused and only what changed recompiles), the one file is mutated there (the original text
must occur exactly once, else the mutation is "stale"), `make -j2 build-all` rebuilds it, and the
entry's tests run there in order until one fails ("caught") or all pass ("SURVIVED"). The file is then
restored. Prints a table "mutation | file | caught by | time" and exits 1 if any mutation survived,
was stale or did not build. The real tree is never modified.
"""
import argparse
import os
import shutil
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TREE = os.path.join(REPO, "build", "mutate", "tree")
DIRS = ["src", "cuda", "tests", "inputs", "scripts", "benchmarks", "Makefile"]
LINKS = [".venv-ref", "data"]


def parse(path):
    """entries separated by blank lines; lines `key: value`; `#` starts a comment line.
    keys: name, file, old, new, tests (a `tests/run.sh -k` pattern, or `cmd:` + a shell command run in the tree;
    several separated by ` ; `). In old/new, \\n is a newline and \\t a tab."""
    entries, cur = [], {}
    lines = open(path).read().split("\n") + [""]
    for ln, line in enumerate(lines, 1):
        if line.startswith("#"):
            continue
        if not line.strip():
            if cur:
                entries.append(cur)
                cur = {}
            continue
        key, sep, val = line.partition(": ")
        if not sep:
            key, sep, val = line.rstrip().partition(":")
        if key not in ("name", "file", "old", "new", "tests") or key in cur:
            sys.exit(f"{path}:{ln}: bad line {line!r}")
        if key in ("old", "new"):
            val = val.replace("\\n", "\n").replace("\\t", "\t")
        cur[key] = val
        cur.setdefault("line", ln)
    for e in entries:
        miss = [k for k in ("name", "file", "old", "new", "tests") if k not in e]
        if miss:
            sys.exit(f"{path}:{e['line']}: entry lacks {miss}")
    return entries


def source_files():
    out = subprocess.run(["git", "ls-files", "-z", "-co", "--exclude-standard", "--"] + DIRS, cwd=REPO,
                         capture_output=True, check=True).stdout.decode()
    return sorted({f for f in out.split("\0") if f and os.path.isfile(os.path.join(REPO, f))})


def sync_tree():
    """mirror the source into TREE; rewrite only files whose bytes differ (keeps build/ reusable)"""
    os.makedirs(TREE, exist_ok=True)
    n = 0
    for f in source_files():
        src, dst = os.path.join(REPO, f), os.path.join(TREE, f)
        data = open(src, "rb").read()
        if os.path.isfile(dst) and open(dst, "rb").read() == data:
            continue
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        with open(dst, "wb") as fh:
            fh.write(data)
        shutil.copymode(src, dst)
        n += 1
    for l in LINKS:
        dst = os.path.join(TREE, l)
        if not os.path.lexists(dst) and os.path.exists(os.path.join(REPO, l)):
            os.symlink(os.path.join(REPO, l), dst)
    return n


def sh(cmd, log, timeout=900):
    with open(log, "ab") as fh:
        fh.write(f"\n$ {cmd}\n".encode())
        fh.flush()
        try:
            return subprocess.run(cmd, shell=True, cwd=TREE, stdout=fh, stderr=subprocess.STDOUT,
                                  timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            fh.write(b"\n(timed out)\n")
            return 124


def build(log):
    return sh("make -j2 build-all", log, timeout=1800) == 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--list", default=os.path.join(REPO, "tests", "mutate", "mutations.txt"))
    ap.add_argument("--only", default="", help="comma-separated mutation names")
    ap.add_argument("--check", action="store_true",
                    help="only check that each mutation's old text occurs exactly once in its file (no build)")
    args = ap.parse_args()
    entries = parse(args.list)
    if args.check:
        stale = 0
        for e in entries:
            path = os.path.join(REPO, e["file"])
            cnt = open(path).read().count(e["old"]) if os.path.isfile(path) else 0
            if cnt != 1:
                stale += 1
                print(f"FAIL mutation_{e['name']}: its old text occurs {cnt} times in {e['file']} (expected once)")
        print(("PASS" if not stale else "FAIL") + f" mutation_catalog_current ({len(entries) - stale} of {len(entries)} "
              "mutations apply to the current sources)")
        return 1 if stale else 0
    if args.only:
        want = set(args.only.split(","))
        entries = [e for e in entries if e["name"] in want]
    t_all = time.time()
    logdir = os.path.join(REPO, "build", "mutate", "logs")
    os.makedirs(logdir, exist_ok=True)
    n = sync_tree()
    base_log = os.path.join(logdir, "_baseline.log")
    open(base_log, "w").close()
    t0 = time.time()
    if not build(base_log):
        print(f"mutate: the unmutated tree does not build (log {os.path.relpath(base_log, REPO)})")
        return 2
    print(f"# tree {os.path.relpath(TREE, REPO)}: {n} files refreshed, built in {time.time() - t0:.0f} s; "
          f"{len(entries)} mutations", flush=True)
    rows, bad = [], 0
    for e in entries:
        t1 = time.time()
        log = os.path.join(logdir, e["name"] + ".log")
        open(log, "w").close()
        path = os.path.join(TREE, e["file"])
        orig = open(path).read() if os.path.isfile(path) else None
        cnt = orig.count(e["old"]) if orig is not None else 0
        if cnt != 1:
            result = f"STALE (original text found {cnt} times)"
            bad += 1
        else:
            with open(path, "w") as fh:
                fh.write(orig.replace(e["old"], e["new"]))
            try:
                if not build(log):
                    result = "BUILD FAILED (fix the mutation)"
                    bad += 1
                else:
                    result = None
                    for t in [x.strip() for x in e["tests"].split(" ; ") if x.strip()]:
                        # ZT_LONG: a pattern may name a `make test-long` test (test_precision)
                        cmd = t[4:].strip() if t.startswith("cmd:") else f"ZT_LONG=1 tests/run.sh -k {t}"
                        if sh(cmd, log) != 0:
                            result = t
                            break
                    if result is None:
                        result = "SURVIVED"
                        bad += 1
            finally:
                with open(path, "w") as fh:
                    fh.write(orig)
        dt = time.time() - t1
        rows.append((e["name"], e["file"], result, dt))
        print(f"# {e['name']}: {result} ({dt:.0f} s)", flush=True)
    # restore the unmutated build so the next run starts clean
    build(base_log)
    w0 = max([8] + [len(r[0]) for r in rows])
    w1 = max([4] + [len(r[1]) for r in rows])
    w2 = max([9] + [len(r[2]) for r in rows])
    print(f"\n{'mutation':<{w0}} | {'file':<{w1}} | {'caught by':<{w2}} | time")
    print(f"{'-' * w0}-|-{'-' * w1}-|-{'-' * w2}-|------")
    for r in rows:
        print(f"{r[0]:<{w0}} | {r[1]:<{w1}} | {r[2]:<{w2}} | {r[3]:4.0f} s")
    caught = len(rows) - bad
    print(f"\n{caught}/{len(rows)} caught, {bad} survived/stale/unbuildable, {time.time() - t_all:.0f} s in all "
          f"(logs: {os.path.relpath(logdir, REPO)}/)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
