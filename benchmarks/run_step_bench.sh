#!/usr/bin/env bash
# run_step_bench.sh — what `make bench` runs: the training step of ztrain against PyTorch and against
# the fastest sgemm of this machine, for (gpt2-124m, B=4, T=64) and (d6, B=8, T=128), fp32, 2 threads.
# For each config: build/bench/bench_step (ztrain's step, and sgemm on ztrain's BLIS path, BLIS's
# own cblas_sgemm, OpenBLAS and oneDNN, same shapes and threads) and benchmarks/torch_step.py (the
# same model in PyTorch: HF GPT2LMHeadModel from .venv-ref when it exists, else a plain torch module
# with /usr/bin/python3). Then one table and each config's sgemm table and per-op breakdown.
#   benchmarks/run_step_bench.sh [--json] [--steps N] [--threads T]
# Best kernels for both peers: first benchmarks/blas_coretype.py (with torch's python, ~3-6 s) finds the
# BLAS torch runs and its OpenBLAS core. Debian's OpenBLAS picks its kernels from the CPUID and misdetects
# some CPUs (a recent Xeon as "Prescott": 32.7 instead of ~290 GFLOP/s for a 2048 sgemm), so when the
# detected core is a lower ISA tier than the CPU's flags allow (AVX-512 -> SkylakeX/Cooperlake, AVX2 ->
# Haswell/Zen) it times a 2048^3 sgemm with OPENBLAS_CORETYPE=that core as well, and exports the variable
# when that is faster: to torch_step.py and to bench_step, whose dlopened OpenBLAS reads it at load.
# ZT_BENCH_CORETYPE=off skips the probe (an OPENBLAS_CORETYPE of yours then stays as it is), =always
# times the flags' core even when the detected one is as good. The output names the kernels each side
# ran ("# kernels:" and "# OpenBLAS core:" lines; "kernels" in --json, and "blas" in each torch record).
# The machine's load average is printed before and after, and for each run the share of CPU time other
# processes took while it ran (other_cpu): compare numbers taken when that is ~0.
set -u
cd "$(dirname "$0")/.."
THREADS=2 STEPS=10 JSON=0
while [ $# -gt 0 ]; do
  case $1 in
    --json) JSON=1 ;;
    --steps) STEPS=$2; shift ;;
    --threads) THREADS=$2; shift ;;
    *) echo "usage: $0 [--json] [--steps N] [--threads T]" >&2; exit 2 ;;
  esac
  shift
done
BENCH=build/bench/bench_step
[ -x "$BENCH" ] || { echo "run_step_bench.sh: $BENCH missing: run make first" >&2; exit 2; }
PY=/usr/bin/python3
TPY=$PY
[ -x .venv-ref/bin/python ] && .venv-ref/bin/python -c "import torch, transformers" 2>/dev/null && TPY=.venv-ref/bin/python
$TPY -c "import torch" 2>/dev/null || { echo "run_step_bench.sh: no python with torch (apt-get install python3-torch)" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=$THREADS
TMP=$(mktemp -d /tmp/zt-stepbench.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
. benchmarks/lib_load.sh # load, cpu_snap, other_pct
LOAD0=$(load)
CORETYPE_MODE=${ZT_BENCH_CORETYPE:-auto}   # auto | always | off
if [ "$CORETYPE_MODE" != off ]; then
  [ $JSON = 1 ] || echo "# blas_coretype ($TPY): torch's BLAS and the OpenBLAS core ..." >&2
  ALWAYS=; [ "$CORETYPE_MODE" = always ] && ALWAYS=--always
  $TPY benchmarks/blas_coretype.py --threads $THREADS $ALWAYS --json --env-file $TMP/blas.env > $TMP/blas.json \
    2> $TMP/blas.err || echo "blas_coretype.py failed (kernels left as detected): $(tail -3 $TMP/blas.err)" >&2
  if [ -s $TMP/blas.env ]; then   # KEY=VALUE lines: OPENBLAS_CORETYPE when the override won
    while IFS='=' read -r k v; do [ -n "$k" ] && export "$k=$v"; done < $TMP/blas.env
  fi
fi
CONFIGS=${ZT_BENCH_CONFIGS:-"gpt2-124m:4:64 d6:8:128"}   # name:B:T (inputs/name.cfg)
rc=0
for spec in $CONFIGS; do
  IFS=: read -r name B T <<< "$spec"
  cfg=inputs/$name.cfg
  # bench_step runs the cpu backend in fp32 whatever the file says (gpt2-124m.cfg is a GPU preset)
  [ $JSON = 1 ] || echo "# $name B=$B T=$T: bench_step ..." >&2
  cpu_snap "$TMP"; s0=$SNAP
  $BENCH -c $cfg --set device=cpu --set precision=fp32 --B $B --T $T --steps $STEPS --threads $THREADS --json \
    > $TMP/$name.zt.json 2> $TMP/$name.zt.err || { echo "bench_step $name failed: $(tail -3 $TMP/$name.zt.err)" >&2; rc=1; }
  cpu_snap "$TMP"; s1=$SNAP; other_pct "$s0" "$s1" > $TMP/$name.zt.other
  [ $JSON = 1 ] || echo "# $name B=$B T=$T: torch_step ($TPY) ..." >&2
  $TPY benchmarks/torch_step.py -c $cfg --B $B --T $T --steps $STEPS --threads $THREADS --json \
    > $TMP/$name.torch.json 2> $TMP/$name.torch.err || { echo "torch_step $name failed: $(tail -3 $TMP/$name.torch.err)" >&2; rc=1; }
  cpu_snap "$TMP"; s2=$SNAP; other_pct "$s1" "$s2" > $TMP/$name.torch.other
done
LOAD1=$(load)
$PY - "$TMP" "$JSON" "$LOAD0" "$LOAD1" $CONFIGS <<'PYEOF'
import json, os, re, sys
tmp, as_json, load0, load1, specs = sys.argv[1], sys.argv[2] == "1", sys.argv[3], sys.argv[4], sys.argv[5:]
def get(p):
    try:
        with open(p) as f:
            return json.loads(f.read())
    except (OSError, ValueError):
        return None
def other(p):
    try:
        return float(open(p).read())
    except (OSError, ValueError):
        return None
rows = []
for spec in specs:
    name, B, T = spec.split(":")
    z, t = get(f"{tmp}/{name}.zt.json"), get(f"{tmp}/{name}.torch.json")
    rows.append({"config": name, "B": int(B), "T": int(T), "ztrain": z, "torch": t,
                 "other_cpu_pct_ztrain": other(f"{tmp}/{name}.zt.other"),
                 "other_cpu_pct_torch": other(f"{tmp}/{name}.torch.other"),
                 "ratio": z["tokens_per_s"] / t["tokens_per_s"] if z and t else None})
z0 = next((r["ztrain"] for r in rows if r["ztrain"]), None)
t0 = next((r["torch"] for r in rows if r["torch"]), None)
probe = get(f"{tmp}/blas.json")
# the kernels each side ran: ztrain's BLIS and bench_step's OpenBLAS (as bench_step reports them, so with the
# exported OPENBLAS_CORETYPE), torch's BLAS (as torch_step reports it), and the probe's detected/override record
def ob_short(desc):
    """'OpenBLAS 0.3.21, Cooperlake kernels' from bench_step's openblas string ("<config>, <core> kernels", the
    library's whole build configuration first): the version, and the core as the last Capitalised word of it."""
    m = re.match(r"OpenBLAS (\S+)", desc or "")
    cores = [w for w in re.split(r"[\s,]+", desc or "") if re.fullmatch(r"[A-Z][a-z]\w*", w) and w != "OpenBLAS"]
    return f"OpenBLAS {m.group(1)}, {cores[-1]} kernels" if m and cores else desc
kernels = {"ztrain": z0 and z0.get("blas"), "bench_step_openblas": z0 and z0.get("openblas"),
           "bench_step_openblas_short": z0 and ob_short(z0.get("openblas")),
           "torch": t0 and t0.get("blas_desc"),
           "torch_cpu_capability": t0 and (t0.get("blas") or {}).get("torch_cpu_capability"),
           "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE"), "probe": probe}
if as_json:
    print(json.dumps({"load_before": load0, "load_after": load1, "kernels": kernels, "results": rows}))
    sys.exit(0)
def f(v, fmt):
    return format(v, fmt) if v is not None else "n/a"
print(f"# ztrain vs PyTorch, one training step (fwd + bwd + clip + AdamW), fp32, "
      f"{z0['threads'] if z0 else '?'} threads; load average before {load0}, after {load1}")
if z0:
    print(f"# ztrain: {z0['blas']}; sgemm denominators: openblas {z0['openblas']}; onednn {z0['onednn']}")
if t0:
    print(f"# torch: {t0['torch']}, {t0['model']}")
print(f"# kernels: ztrain {kernels['ztrain'] or 'n/a'} | bench_step {kernels['bench_step_openblas_short'] or 'n/a'} "
      f"| torch {kernels['torch'] or 'n/a'}, ATen CPU capability {kernels['torch_cpu_capability'] or 'n/a'}")
if probe and probe.get("subject"):
    p = probe
    line = (f"# OpenBLAS core: {p['core_detected']} as detected"
            + (f" (OPENBLAS_CORETYPE={p['coretype_env']} from the environment)" if p["coretype_env"] else "")
            + f", {p['subject']} {p['n']}^3 sgemm {p['threads']} threads {p['gflops_detected']:.1f} GFLOP/s")
    if p["gflops_override"]:
        line += (f"; OPENBLAS_CORETYPE={p['candidate']} ({p['rule']}): {p['core_override']} kernels "
                 f"{p['gflops_override']:.1f} GFLOP/s")
    print(line + f"\n#   -> {p['decision']}" + ("; exported to bench_step and torch_step" if p["export"] else ""))
elif probe:
    print(f"# OpenBLAS core: {probe['decision']}")
else:
    print("# OpenBLAS core: not probed" + (" (ZT_BENCH_CORETYPE=off)" if os.environ.get("ZT_BENCH_CORETYPE") == "off" else
                                          " (blas_coretype.py failed)"))
hdr = ("config", "B", "T", "zt_tok/s", "torch_tok/s", "zt/torch", "zt_GFLOP/s", "best_sgemm", "fraction",
       "zt_rss", "torch_rss", "other_cpu")
units = ("", "", "", "(tok/s)", "(tok/s)", "(x)", "(GFLOP/s)", "(GFLOP/s)", "", "(MB)", "(MB)", "(% zt/torch)")
fmt = "{:<11} {:>3} {:>5} {:>10} {:>11} {:>9} {:>11} {:>11} {:>9} {:>8} {:>9} {:>13}"
print("# " + fmt.format(*hdr))
print("# " + fmt.format(*units))
for r in rows:
    z, t = r["ztrain"] or {}, r["torch"] or {}
    print("  " + fmt.format(r["config"], r["B"], r["T"], f(z.get("tokens_per_s"), ".1f"), f(t.get("tokens_per_s"), ".1f"),
                            f(r["ratio"], ".2f"), f(z.get("gflops"), ".1f"), f(z.get("best_sgemm_gflops"), ".1f"),
                            f(z.get("frac_best") and 100 * z["frac_best"], ".1f") + ("%" if z.get("frac_best") else ""),
                            f(z.get("peak_rss_bytes") and z["peak_rss_bytes"] / 2**20, ".0f"),
                            f(t.get("peak_rss_bytes") and t["peak_rss_bytes"] / 2**20, ".0f"),
                            f(r["other_cpu_pct_ztrain"], ".0f") + "/" + f(r["other_cpu_pct_torch"], ".0f")))
ok = [r for r in rows if r["ratio"]]
if ok:
    print(f"# zt/torch: tokens/s ratio; fraction: ztrain's GFLOP/s (README \"FLOPs\") / best_sgemm, the fastest of "
          f"every BLAS x shape below;\n# other_cpu: share of the machine's CPU time used by other processes while "
          f"bench_step / torch_step ran (trust rows where both are ~0)")
for r in rows:
    z = r["ztrain"]
    if not z:
        continue
    impls = ["ztrain", "blis_cblas", "openblas", "onednn"]
    print(f"#\n# {r['config']} B={r['B']} T={r['T']}: sgemm GFLOP/s, row-major NN, best {z['best_sgemm_gflops']:.1f} "
          f"({z['best_sgemm_blas']}, {z['best_sgemm_shape']}); ztrain's own path peak {z['sgemm_peak_gflops']:.1f}")
    print("#   {:<8} {:>22}".format("shape", "M x N x K") + "".join(f" {i:>10}" for i in impls))
    for sh, v in z["sgemm"].items():
        dims = f"{v['M']} x {v['N']} x {v['K']}"
        print("#   {:<8} {:>22}".format(sh, dims) + "".join(f" {f(v.get(i), '.1f'):>10}" for i in impls))
    tot = sum(z["breakdown"].values())
    print(f"# {r['config']}: per-op time of one step ({z['ms_per_step']:.1f} ms median unprofiled; "
          f"{tot * 1e3:.1f} ms in ops when every op is synchronised)")
    for op, s in sorted(z["breakdown"].items(), key=lambda kv: -kv[1]):
        print(f"#   {op:<18} {s * 1e3:9.1f} ms {100 * s / tot:5.1f}%")
PYEOF
exit $rc
