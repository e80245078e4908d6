#!/usr/bin/env python3
"""cuda-resources.py — what ptxas reported for each CUDA kernel: registers, stack frame, spills, shared memory.

    scripts/cuda-resources.py [--check] [--arch sm_90] FILE...      (FILE: build/cuda/NAME.ptxas, `make cuda`)

Reads the `nvcc -Xptxas -v` reports the GPU build keeps (cuda/backend.mk) and prints one line per kernel and
architecture. With --check it exits 1, naming each kernel, when any kernel uses local memory: a stack frame (a
register array indexed by a loop nvcc did not unroll lives there: ZT_UNROLL, zt_cuda_compat.cuh), spill stores or
loads, or a cumulative stack (a called function's frame). Local memory goes through the L1 cache and device memory,
so an accumulator kept there turns a tensor-core loop into a memory-bound one.
"""
import re
import shutil
import subprocess
import sys

ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(sm_\d+a?)'")
PROPS = re.compile(r"Function properties for (\S+)")
FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
USED = re.compile(r"Used (\d+) registers")
CUMUL = re.compile(r"(\d+) bytes cumulative stack size")
SMEM = re.compile(r"(\d+) bytes smem")


def parse(text):
    """kernels as dicts (name, arch, regs, stack, spill_st, spill_ld, cumul, smem), in the report's order"""
    out, cur, props_of = [], None, None
    for line in text.splitlines():
        m = ENTRY.search(line)
        if m:
            cur = dict(name=m.group(1), arch=m.group(2), regs=None, stack=0, spill_st=0, spill_ld=0, cumul=0, smem=0)
            out.append(cur)
            props_of = None
            continue
        m = PROPS.search(line)
        if m:
            props_of = m.group(1)
            continue
        m = FRAME.search(line)
        if m and cur is not None and props_of == cur["name"]:
            cur["stack"], cur["spill_st"], cur["spill_ld"] = (int(g) for g in m.groups())
            continue
        m = USED.search(line)
        if m and cur is not None and cur["regs"] is None:
            cur["regs"] = int(m.group(1))
            c, s = CUMUL.search(line), SMEM.search(line)
            cur["cumul"] = int(c.group(1)) if c else 0
            cur["smem"] = int(s.group(1)) if s else 0
    return out


def demangle(names):
    if not names or not shutil.which("c++filt"):
        return names
    r = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True)
    got = r.stdout.splitlines()
    return got if r.returncode == 0 and len(got) == len(names) else names


def short(name):
    """the kernel's name and template arguments, without namespaces and parameter list"""
    name = re.sub(r"\(anonymous namespace\)::|zt_cu_gpu::|ZT_CU_NS::", "", name)
    depth, cut = 0, len(name)
    for i, ch in enumerate(name):  # the parameter list: the first '(' outside template brackets
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0:
            cut = i
            break
    return name[:cut]


def main(argv):
    check, arch, files = False, None, []
    it = iter(argv)
    for a in it:
        if a == "--check":
            check = True
        elif a == "--arch":
            arch = next(it, None)
        elif a.startswith("-"):
            print(f"cuda-resources.py: unknown option {a}", file=sys.stderr)
            return 2
        else:
            files.append(a)
    if not files:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    kernels = []
    for f in files:
        try:
            text = open(f).read()
        except OSError as e:
            print(f"cuda-resources.py: {f}: {e.strerror}", file=sys.stderr)
            return 2
        for k in parse(text):
            k["file"] = f
            kernels.append(k)
    if arch:
        kernels = [k for k in kernels if k["arch"] == arch]
    if not kernels:
        print("cuda-resources.py: no kernel in the reports (were they written by nvcc -Xptxas -v?)", file=sys.stderr)
        return 2
    for k, d in zip(kernels, demangle([k["name"] for k in kernels])):
        k["short"] = short(d)
    bad = [k for k in kernels if k["stack"] or k["spill_st"] or k["spill_ld"] or k["cumul"]]
    print(f"{'arch':6} {'regs':>4} {'stack':>5} {'spill':>9} {'smem':>6}  kernel")
    for k in kernels:
        print(f"{k['arch']:6} {k['regs'] or 0:4d} {max(k['stack'], k['cumul']):5d} "
              f"{k['spill_st']:4d}/{k['spill_ld']:<4d} {k['smem']:6d}  {k['short']}")
    print(f"{len(kernels)} kernels, {len(bad)} with local memory (stack frame or spills)")
    if check and bad:
        for k in bad:
            print(f"cuda-resources.py: {k['short']} ({k['arch']}, {k['file']}): {k['stack']} bytes stack frame, "
                  f"{k['spill_st']} bytes spill stores, {k['spill_ld']} bytes spill loads, {k['cumul']} bytes "
                  "cumulative stack: local memory", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
