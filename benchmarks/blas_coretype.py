#!/usr/bin/env python3
"""blas_coretype.py — which BLAS kernels PyTorch runs on this CPU, and the OPENBLAS_CORETYPE that gives
it (and bench_step's dlopened OpenBLAS) the best ones. Run by benchmarks/run_step_bench.sh (`make bench`)
with the python that runs benchmarks/torch_step.py, before either peer starts.

    python benchmarks/blas_coretype.py [--threads 2] [--n 2048] [--always] [--json] [--env-file F]

Why: an OpenBLAS built with DYNAMIC_ARCH (Debian's) picks its kernels at load time from the CPUID, and
misdetects some CPUs: a recent Xeon came out as "Prescott" (SSE3 kernels, 32.7 GFLOP/s for a 2048
sgemm instead of ~290 with the SkylakeX ones) until OPENBLAS_CORETYPE was set. The variable is read
when the library loads, so a process cannot change its own core: this script measures the core as
detected in-process and the override in a child process (--measure, the internal mode).

What it does:
  1. the BLAS that torch's matmul runs: the libopenblas / libmkl / libblis / libblas mapped in this
     process after a matmul (/proc/self/maps), with its core (openblas_get_corename), config string,
     BLIS arch or MKL version and instruction set; torch's own (ATen) CPU capability.
  2. the OpenBLAS to tune: torch's when torch runs on OpenBLAS, else libopenblas.so.0 (what bench_step
     dlopens), driven through cblas_sgemm on torch's buffers.
  3. the candidate core from /proc/cpuinfo: avx512f+bw+vl+dq -> Cooperlake when avx512_bf16 and the
     library knows the name (SapphireRapids with amx_tile+avx512_fp16, same condition), else SkylakeX;
     avx2+fma -> Zen on AMD (when known), else Haswell; anything else: no candidate. "Knows the name"
     is read from the library file (the core names are strings in it).
  4. when the detected core is a lower ISA tier than the candidate (Prescott/Core2/Nehalem: SSE,
     Sandybridge: AVX, Haswell/Zen: AVX2, SkylakeX: AVX-512, Cooperlake/SapphireRapids: AVX-512 +
     bf16), or with --always when it differs: an n x n x n sgemm (warm-up, then best of up to 5 calls,
     ~1 s) with the detected core and in a child with OPENBLAS_CORETYPE=candidate; the override is kept
     when it is at least 3% faster. An OPENBLAS_CORETYPE already in the environment is the "detected"
     side (so `OPENBLAS_CORETYPE=PRESCOTT blas_coretype.py` shows what happens on a misdetected CPU).
Output: a summary (default), the whole record as one JSON object (--json), and with --env-file F the
variables to export (KEY=VALUE lines; empty when the detected core stays). torch_step.py imports
describe_blas() from here to name, in its own output, the kernels it ran.
"""
import argparse
import ctypes
import json
import os
import re
import subprocess
import sys
import time

# ISA tier of an OpenBLAS core (names lower-cased): what the kernels may use, not the CPU's age.
TIER = {name: t for t, names in enumerate([
    "unknown katmai coppermine northwood prescott banias atom core2 penryn dunnington nehalem athlon opteron "
    "opteron_sse3 barcelona nano bobcat",               # 0: SSE*
    "sandybridge bulldozer piledriver steamroller",      # 1: AVX
    "haswell zen excavator",                             # 2: AVX2 + FMA
    "skylakex",                                          # 3: AVX-512
    "cooperlake sapphirerapids"]) for name in names.split()}  # 4: AVX-512 + bf16
MARGIN = 1.03   # the override must beat the detected core by this factor to be kept


def cpu_info():
    """vendor, model name and the flag set of the first CPU in /proc/cpuinfo (empty off Linux/x86)."""
    info = {"vendor": "", "model": "", "flags": set()}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                k, _, v = line.partition(":")
                k, v = k.strip(), v.strip()
                if k == "vendor_id" and not info["vendor"]:
                    info["vendor"] = v
                elif k == "model name" and not info["model"]:
                    info["model"] = v
                elif k == "flags" and not info["flags"]:
                    info["flags"] = set(v.split())
    except OSError:
        pass
    return info


def mapped_libs():
    """Paths of the shared objects mapped into this process, in load order, without duplicates."""
    out = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                p = line.split()[-1]
                if p.startswith("/") and ".so" in p and p not in out:
                    out.append(p)
    except OSError:
        pass
    return out


def cstr_fn(lib, name):
    """lib.name as a `const char *f(void)`, or None."""
    try:
        fn = getattr(lib, name)
    except AttributeError:
        return None
    fn.restype, fn.argtypes = ctypes.c_char_p, []
    return fn


def openblas_info(path):
    """core, config and thread count of the OpenBLAS at path (already loaded: dlopen returns it)."""
    lib = ctypes.CDLL(path)
    core, conf = cstr_fn(lib, "openblas_get_corename"), cstr_fn(lib, "openblas_get_config")
    d = {"kind": "openblas", "path": path, "core": core().decode() if core else "?",
         "config": conf().decode() if conf else "OpenBLAS"}
    m = re.match(r"OpenBLAS (\S+)", d["config"])
    d["version"] = m.group(1) if m else "?"
    try:
        lib.openblas_get_num_threads.restype = ctypes.c_int
        d["threads"] = lib.openblas_get_num_threads()
    except AttributeError:
        pass
    return d, lib


def mkl_info(paths, torch):
    """MKL's version and the instruction set it dispatches to (mkl_get_version's Processor field), from
    a libmkl* in the process or from libtorch_cpu (pip wheels link MKL statically); else torch's config."""
    class MKLVersion(ctypes.Structure):
        _fields_ = [("major", ctypes.c_int), ("minor", ctypes.c_int), ("update", ctypes.c_int),
                    ("status", ctypes.c_char_p), ("build", ctypes.c_char_p), ("processor", ctypes.c_char_p),
                    ("platform", ctypes.c_char_p)]
    d = {"kind": "mkl", "path": paths[0] if paths else "(linked into libtorch)", "core": "?",
         "mkl_enable_instructions": os.environ.get("MKL_ENABLE_INSTRUCTIONS")}
    for p in paths + [q for q in mapped_libs() if "libtorch_cpu" in q]:
        try:
            fn = ctypes.CDLL(p).mkl_get_version
        except (OSError, AttributeError):
            continue
        v = MKLVersion()
        fn.argtypes, fn.restype = [ctypes.POINTER(MKLVersion)], None
        fn(ctypes.byref(v))
        d["version"] = f"{v.major}.{v.minor}.{v.update}"
        d["core"] = (v.processor or b"?").decode().strip()
        d["config"] = f"MKL {d['version']} {(v.platform or b'').decode().strip()}".strip()
        return d
    m = re.search(r"Math Kernel Library Version ([\w.]+)", torch.__config__.show())
    d["version"] = m.group(1) if m else "?"
    d["config"] = f"MKL {d['version']}"
    return d


def describe_blas(torch):
    """What torch's matmul runs: kind (openblas, mkl, blis, reference, unknown), path, core (OpenBLAS core,
    BLIS arch, MKL instruction set), config/version, and torch's own ATen CPU capability."""
    a = torch.ones(64, 64)
    torch.mm(a, a)   # makes sure the BLAS is loaded and initialised
    libs = mapped_libs()
    base = [(p, os.path.basename(p).lower()) for p in libs]
    mkl = [p for p, b in base if b.startswith("libmkl")]
    if any("openblas" in b for _, b in base):
        d = openblas_info(next(p for p, b in base if "openblas" in b))[0]
    elif mkl or torch.backends.mkl.is_available():
        d = mkl_info(mkl, torch)
    elif any(b.startswith("libblis") for _, b in base):
        p = next(p for p, b in base if b.startswith("libblis"))
        lib = ctypes.CDLL(p)
        ver = cstr_fn(lib, "bli_info_get_version_str")
        d = {"kind": "blis", "path": p, "version": ver().decode() if ver else "?", "core": "?",
             "blis_arch_type": os.environ.get("BLIS_ARCH_TYPE")}
        try:
            lib.bli_arch_query_id.restype = ctypes.c_int
            lib.bli_arch_string.restype, lib.bli_arch_string.argtypes = ctypes.c_char_p, [ctypes.c_int]
            d["core"] = lib.bli_arch_string(lib.bli_arch_query_id()).decode()
        except AttributeError:
            pass
        d["config"] = f"BLIS {d['version']}"
    elif any(b.startswith("libblas.so") for _, b in base):
        p = next(p for p, b in base if b.startswith("libblas.so"))
        d = {"kind": "reference", "path": os.path.realpath(p), "core": "generic", "config": "reference BLAS"}
    else:
        d = {"kind": "unknown", "path": "?", "core": "?", "config": "?"}
    d["coretype_env"] = os.environ.get("OPENBLAS_CORETYPE")
    show = torch.__config__.show()
    m = re.search(r"CPU capability usage: (\S+)", show)
    d["torch_cpu_capability"] = m.group(1) if m else "?"
    d["torch"] = torch.__version__
    return d


def blas_summary(d):
    """One line naming a describe_blas() record, e.g. 'OpenBLAS 0.3.21 Cooperlake kernels (…/libopenblasp-r0.3.21.so)'."""
    name = {"openblas": f"OpenBLAS {d.get('version', '?')}", "mkl": f"MKL {d.get('version', '?')}",
            "blis": f"BLIS {d.get('version', '?')}"}.get(d["kind"], d.get("config", "?"))
    what = "instruction set" if d["kind"] == "mkl" else "arch" if d["kind"] == "blis" else "kernels"
    s = f"{name}, {d['core']} {what} ({d['path']})"
    if d["kind"] == "openblas" and d.get("coretype_env"):
        s += f", OPENBLAS_CORETYPE={d['coretype_env']}"
    if d["kind"] == "mkl" and d.get("mkl_enable_instructions"):
        s += f", MKL_ENABLE_INSTRUCTIONS={d['mkl_enable_instructions']}"
    if d["kind"] == "blis" and d.get("blis_arch_type"):
        s += f", BLIS_ARCH_TYPE={d['blis_arch_type']}"
    return s


def candidate(cpu, lib_path):
    """The best OpenBLAS core name the CPU's flags allow and the library at lib_path knows, with the rule
    that chose it; (None, why) when there is none."""
    fl = cpu["flags"]
    try:
        with open(os.path.realpath(lib_path), "rb") as f:
            blob = f.read()
    except OSError:
        blob = b""

    def known(name):
        return re.search(b"\0" + name.encode() + b"\0", blob, re.I) is not None
    order = []
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= fl:
        if {"amx_tile", "avx512_fp16"} <= fl:
            order.append(("SapphireRapids", "avx512f/bw/vl/dq + amx_tile + avx512_fp16"))
        if "avx512_bf16" in fl:
            order.append(("Cooperlake", "avx512f/bw/vl/dq + avx512_bf16"))
        order.append(("SkylakeX", "avx512f/bw/vl/dq"))
    if {"avx2", "fma"} <= fl:
        if cpu["vendor"] == "AuthenticAMD":
            order.append(("Zen", "AMD, avx2 + fma"))
        order.append(("Haswell", "avx2 + fma"))
    for name, why in order:
        if known(name):
            return name, why
    return None, ("no AVX2/AVX-512 in the CPU flags" if not order else
                  f"the library knows none of {', '.join(n for n, _ in order)}")


def time_sgemm(fn, n, budget=1.0, reps=5):
    """GFLOP/s of fn (one n x n x n sgemm): one warm-up call, then the best of up to reps calls (at
    least 2, stopping once budget seconds have gone)."""
    fn()
    best, start = float("inf"), time.perf_counter()
    for i in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
        if i >= 1 and time.perf_counter() - start > budget:
            break
    return 2.0 * n ** 3 / best * 1e-9


def measure(torch, n, threads):
    """In this process (so with this process's OPENBLAS_CORETYPE): torch's BLAS, the OpenBLAS to tune
    (torch's, or libopenblas.so.0 when torch runs on something else) and its n^3 sgemm GFLOP/s."""
    torch.set_num_threads(threads)
    torch_blas = describe_blas(torch)
    a, b, c = torch.rand(n, n), torch.rand(n, n), torch.empty(n, n)
    rec = {"torch_blas": torch_blas, "n": n, "threads": threads}
    if torch_blas["kind"] == "openblas":
        ob, lib = openblas_info(torch_blas["path"])
        rec["subject"] = "torch"

        def fn():
            torch.mm(a, b, out=c)
    else:
        try:
            ob, lib = openblas_info("libopenblas.so.0")
        except OSError:
            rec.update(subject=None, openblas=None, gflops=None)
            return rec
        ob["path"] = next((p for p in mapped_libs() if "openblas" in os.path.basename(p)), ob["path"])
        rec["subject"] = "libopenblas.so.0 (bench_step's)"
        sg = lib.cblas_sgemm
        sg.restype = None
        sg.argtypes = [ctypes.c_int] * 6 + [ctypes.c_float, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p,
                                            ctypes.c_int, ctypes.c_float, ctypes.c_void_p, ctypes.c_int]

        def fn():   # row-major (101), no transposes (111)
            sg(101, 111, 111, n, n, n, 1.0, a.data_ptr(), n, b.data_ptr(), n, 0.0, c.data_ptr(), n)
    try:
        lib.openblas_set_num_threads.argtypes = [ctypes.c_int]
        lib.openblas_set_num_threads(threads)
        ob["threads"] = threads
    except AttributeError:
        pass
    rec["openblas"] = ob
    rec["gflops"] = round(time_sgemm(fn, n), 1)
    return rec


def probe(torch, n, threads, always):
    cpu = cpu_info()
    base = measure(torch, n, threads)
    ob = base["openblas"]
    isa = [f for f in ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq",
                       "avx512_bf16", "avx512_fp16", "amx_tile") if f in cpu["flags"]]
    res = {"cpu": {"vendor": cpu["vendor"], "model": cpu["model"], "isa": isa}, "n": n, "threads": threads,
           "torch_blas": base["torch_blas"], "subject": base["subject"],
           "openblas_path": ob and ob["path"], "openblas_config": ob and ob["config"],
           "coretype_env": os.environ.get("OPENBLAS_CORETYPE"),
           "core_detected": ob and ob["core"], "gflops_detected": base["gflops"],
           "candidate": None, "rule": None, "core_override": None, "gflops_override": None,
           "coretype": os.environ.get("OPENBLAS_CORETYPE"), "export": {}}
    if not ob:
        res["decision"] = "no OpenBLAS in torch or as libopenblas.so.0: nothing to tune"
        return res
    cand, why = candidate(cpu, ob["path"])
    res["candidate"], res["rule"] = cand, why
    det = ob["core"].lower()
    if cand is None:
        res["decision"] = f"kept the detected core ({why})"
        return res
    if cand.lower() == det or (not always and TIER.get(det, 0) >= TIER.get(cand.lower(), 0)):
        res["decision"] = f"kept the detected core (the flags allow no better: {why} -> {cand})"
        return res
    env = dict(os.environ, OPENBLAS_CORETYPE=cand)
    try:
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--measure", "--n", str(n),
                              "--threads", str(threads)], env=env, capture_output=True, text=True,
                             check=True, timeout=300).stdout
        over = json.loads(out.strip().splitlines()[-1])
    except (subprocess.SubprocessError, OSError, ValueError, IndexError) as e:
        res["decision"] = f"kept the detected core (the run with OPENBLAS_CORETYPE={cand} failed: {e})"
        return res
    res["core_override"] = over["openblas"] and over["openblas"]["core"]
    res["gflops_override"] = over["gflops"]
    if over["gflops"] and over["gflops"] >= MARGIN * base["gflops"]:
        res["coretype"] = cand
        res["export"] = {"OPENBLAS_CORETYPE": cand}
        res["decision"] = (f"OPENBLAS_CORETYPE={cand}: {over['gflops']:.1f} vs {base['gflops']:.1f} GFLOP/s "
                           f"({ob['core']} as detected)")
    else:
        res["decision"] = (f"kept the detected core: OPENBLAS_CORETYPE={cand} gave {over['gflops']} vs "
                           f"{base['gflops']:.1f} GFLOP/s (needs {100 * (MARGIN - 1):.0f}% more)")
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--n", type=int, default=2048)
    ap.add_argument("--always", action="store_true", help="measure the candidate core even when the "
                    "detected one is of the same or a higher tier")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--env-file", help="write the variables to export here (KEY=VALUE lines)")
    ap.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    try:
        import torch
    except ImportError as e:
        sys.exit(f"blas_coretype.py: cannot import torch ({e})")
    if a.measure:
        print(json.dumps(measure(torch, a.n, a.threads)))
        return
    res = probe(torch, a.n, a.threads, a.always)
    if a.env_file:
        with open(a.env_file, "w") as f:
            f.writelines(f"{k}={v}\n" for k, v in res["export"].items())
    if a.json:
        print(json.dumps(res))
        return
    c = res["cpu"]
    print(f"# cpu: {c['model'] or '?'} ({c['vendor'] or '?'}; {' '.join(c['isa']) or 'no AVX'})")
    print(f"# torch {res['torch_blas']['torch']}: BLAS {blas_summary(res['torch_blas'])}; "
          f"ATen CPU capability {res['torch_blas']['torch_cpu_capability']}")
    if res["subject"]:
        env = f", OPENBLAS_CORETYPE={res['coretype_env']} from the environment" if res["coretype_env"] else ""
        print(f"# {res['subject']} OpenBLAS: {res['core_detected']} as detected{env}; "
              f"{res['n']}^3 sgemm, {res['threads']} threads: {res['gflops_detected']:.1f} GFLOP/s")
        if res["candidate"]:
            print(f"# candidate from the flags: {res['candidate']} ({res['rule']})"
                  + (f"; with OPENBLAS_CORETYPE={res['candidate']}: {res['core_override']} kernels, "
                     f"{res['gflops_override']:.1f} GFLOP/s" if res["gflops_override"] else ""))
    print(f"# decision: {res['decision']}")


if __name__ == "__main__":
    main()
