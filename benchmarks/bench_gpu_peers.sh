#!/usr/bin/env bash
# bench_gpu_peers.sh — ztrain against llm.c and PyTorch on ONE GPU, in one call: the same GPT-2 (shapes from
# inputs/MODEL.cfg: n_layer, n_head, n_embd, vocab, padded vocab), micro-batch B x T (16 x 1024), bf16, the same
# synthetic GPT-2-vocabulary tokens (tests/helpers/make_data.py, as benchmarks/bench_gpu.sh), STEPS steps each:
#   ztrain   $ZTRAIN (default build/ztrain-cuda) train -c inputs/MODEL.cfg, as bench_gpu.sh runs it (1 rank)
#   llm.c    train_gpt2cu, built from an llm.c checkout (LLMC=/path/to/llm.c or --llmc PATH; never part of this
#            repository; skipped with a line saying so without one): make train_gpt2cu NO_MULTI_GPU=1 NO_USE_MPI=1
#            (cuDNN off, llm.c's default) GPU_COMPUTE_CAPABILITY=<the GPU's>; random init -e dL (d12, d24), the
#            tokens converted to llm.c's .bin by benchmarks/llmc_data.py; no validation beyond llm.c's one batch at
#            the first and last step (-v 1000000 -m 1), no sampling (-s 0), no checkpoints (-n 0), no HellaSwag
#            (-h 0); no recompute (-r 0, as llm.c's scripts/run_gpt2_124M.sh; ztrain recomputes nothing either), master
#            weights and GELU fusion at llm.c's defaults (-w 1 -ge 0); LLMC_EXTRA adds flags
#   PyTorch  benchmarks/torch_gpt2_gpu.py (torch.compile default mode, scaled_dot_product_attention, fused AdamW,
#            bf16 autocast over fp32 parameters, grad clip 1.0) under the first Python that imports torch with CUDA
#            (TORCH_PY=PATH picks one); if torch.compile fails, once more without it (the row says "eager")
# Each runner has its own timeout and the whole run a budget (PEERS_BUDGET_S, default 360 s for GPT-2 124M, 600
# for larger): a runner that fails or runs out of time prints one line and the others still run.
# Output: one table: tokens/s and ms/step (median over steps WARMUP+1..STEPS, tokens/s = B x T / median ms, the
# same for all three), MFU (ztrain's FLOPs per token for the model: 6 x the layers' weights + 6 C Vp + 6 L C T,
# docs/performance.md, x tokens/s / the GPU's dense bf16 peak: H100/H200 989 TFLOP/s, A100 312, PEAK_TFLOPS
# overrides), GPU GiB (the peak of nvidia-smi's memory.used sampled every 250 ms during the run: one measure for
# all three; the notes add ztrain's NVML figure and torch's max_memory_allocated), the ratios ztrain/llm.c and
# ztrain/PyTorch of tokens/s. Raw logs stay in BENCH_ROOT/MODEL/ (default build/bench-gpu-peers/MODEL/):
# ztrain.log and runs/ztrain/metrics.jsonl, llmc-build.log, llmc.log, torch.json, torch.log, *.mem, table.txt.
# Without a GPU (nvidia-smi lists none) it says so and exits 0, having measured nothing.
#   benchmarks/bench_gpu_peers.sh [--model gpt2-124m|gpt2-350m] [--steps 30] [--warmup 5] [--B 16] [--T 1024]
#                                 [--llmc PATH]
#   benchmarks/bench_gpu_peers.sh --build-llmc PATH   only builds PATH/train_gpt2cu (needs nvcc, not a GPU; for the
#                                 GPU's compute capability LLMC_SM, default 90), for a GPU machine without nvcc
#   benchmarks/bench_gpu_peers.sh --summarize DIR     prints the table again from a run's folder (BENCH_ROOT/MODEL)
# LLMC_BIN=PATH runs that train_gpt2cu instead of building one. Per-runner limits (seconds): PEERS_T_ZTRAIN (60),
# PEERS_T_LLMC_BUILD (120), PEERS_T_LLMC (60), PEERS_T_TORCH (180), doubled for models above 124M.
# docs/gpu-status.md ("Peers on one GPU") says what has been measured with it.
set -u
ORIG=$PWD
cd "$(dirname "$0")/.."
abspath() { case $1 in /*) echo "$1" ;; *) echo "$ORIG/$1" ;; esac; }
MODEL=gpt2-124m STEPS=30 WARMUP=5 B=16 T=1024 MODE=run SUMDIR=""
LLMC=${LLMC:-}
usage() { echo "usage: $0 [--model NAME] [--steps N] [--warmup N] [--B N] [--T N] [--llmc PATH] | --build-llmc PATH | --summarize DIR" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case $1 in
    --model) MODEL=${2:-}; shift ;;
    --steps) STEPS=${2:-}; shift ;;
    --warmup) WARMUP=${2:-}; shift ;;
    --B) B=${2:-}; shift ;;
    --T) T=${2:-}; shift ;;
    --llmc) LLMC=${2:-}; shift ;;
    --build-llmc) MODE=build; LLMC=${2:-}; shift ;;
    --summarize) MODE=summarize; SUMDIR=${2:-}; shift ;;
    *) usage ;;
  esac
  [ $# -gt 0 ] || usage
  shift
done
PY=/usr/bin/python3
$PY -c "import numpy" 2>/dev/null || PY=python3
[ -n "$LLMC" ] && LLMC=$(abspath "$LLMC")

# ---- the table, from a run's folder: meta.txt, NAME.status, the runners' logs (also --summarize DIR) ----------
summarize() {
  $PY - "$1" <<'PYEOF'
import json, os, re, statistics, sys
d = sys.argv[1]
meta = dict(l.rstrip("\n").split("=", 1) for l in open(os.path.join(d, "meta.txt")) if "=" in l)
B, T, warm, steps = int(meta["B"]), int(meta["T"]), int(meta["warmup"]), int(meta["steps"])
fpt, peak = float(meta["fpt"]), float(meta["peak"])
try:
    idle = f"{float(meta.get('idle_mib', '')) / 1024:.1f} GiB"
except ValueError:
    idle = "n/a"

def status(r):
    try:
        return open(os.path.join(d, r + ".status")).readline().strip() or "failed: no status"
    except OSError:
        return "skipped: not run"

def mem_gib(r):
    try:
        vals = [float(x) for x in open(os.path.join(d, r + ".mem")).read().split() if re.fullmatch(r"[0-9.]+", x)]
    except OSError:
        vals = []
    return max(vals) / 1024 if vals else None

def ztrain():
    rd = os.path.join(d, "runs", "ztrain")
    recs = {}
    for l in open(os.path.join(rd, "metrics.jsonl")):
        s = json.loads(l)
        recs[s["step"]] = s
    ms = [recs[k]["step_ms"] for k in sorted(recs) if k > warm]
    if not ms:
        raise ValueError(f"no steps after {warm} in metrics.jsonl")
    nvml = max((s.get("gpu_mem_bytes", -1) for s in recs.values()), default=-1)
    notes = []
    if nvml > 0:
        notes.append(f"NVML {nvml / 2**30:.1f} GiB (metrics.jsonl)")
    try:
        notes.append(f"results.json {json.load(open(os.path.join(rd, 'results.json')))['tokens_per_s']:,.0f} tok/s (steps 2..N)")
    except (OSError, KeyError, ValueError):
        pass
    return statistics.median(ms), len(ms), "; ".join(notes)

STEP_RE = re.compile(r"^step\s+(\d+)/(\d+) \|.*\|\s*([0-9.]+) ms \|\s*(-?[0-9.]+)% bf16 MFU \|\s*([0-9.]+) tok/s")

def llmc():
    rows = [m for m in (STEP_RE.match(l) for l in open(os.path.join(d, "llmc.log"), errors="replace")) if m]
    timed = [m for m in rows if int(m.group(1)) > warm]
    if not timed:
        raise ValueError(f"no llm.c step lines after step {warm} ({len(rows)} step lines)")
    own = statistics.median(float(m.group(4)) for m in timed)
    return statistics.median(float(m.group(3)) for m in timed), len(timed), f"llm.c's own MFU {own:.1f}% (its FLOPs count, its peak table)"

def torch_(name):
    lines = [l for l in open(os.path.join(d, name)) if l.startswith("{")]
    if not lines:
        raise ValueError(f"no JSON line in {name}")
    r = json.loads(lines[-1])
    notes = [f"torch {r['torch']}", "compile" if r["compile"] else "eager", r["attention"], r["optimizer"]]
    if r.get("max_memory_allocated_bytes"):
        notes.append(f"max_allocated {r['max_memory_allocated_bytes'] / 2**30:.1f} GiB, reserved {r['max_memory_reserved_bytes'] / 2**30:.1f}")
    return r["ms_per_step"], r["timed_steps"], ", ".join(notes)

runners = [("ztrain", "ztrain", ztrain), ("llm.c", "llmc", llmc), ("PyTorch", "torch", None)]
print(f"# {meta['model']} (L{meta['L']} H{meta['H']} C{meta['C']} Vp{meta['VP']}), B {B} x T {T}, bf16, 1 GPU: {meta['gpu']}; "
      f"{steps} steps, median ms/step over steps {warm + 1}..{steps}; tokens/s = B x T / median")
print(f"# MFU = {fpt / 1e6:.1f} MFLOP/token (ztrain's count) x tokens/s / {peak:g} TFLOP/s dense bf16; "
      f"GPU_GiB: peak nvidia-smi memory.used during the run (idle before: {idle})")
print(f"{'runner':<16} {'tokens/s':>10} {'ms/step':>9} {'MFU%':>6} {'GPU_GiB':>8}  notes")
tok = {}
for label, key, fn in runners:
    st = status(key)
    if not st.startswith("ok"):
        print(f"{label:<16} {st}")
        continue
    try:
        if key == "torch":
            eager = "eager" in st
            ms, n, notes = torch_("torch-eager.json" if eager else "torch.json")
            if eager:
                label += " (eager)"
                notes += "; " + st[2:].strip(" ()")
        else:
            ms, n, notes = fn()
    except (OSError, ValueError, KeyError) as e:
        print(f"{label:<16} failed: cannot read its log: {e}")
        continue
    ts = B * T / (ms * 1e-3)
    tok[key] = ts
    mfu = f"{100 * fpt * ts / (peak * 1e12):6.1f}" if peak > 0 else f"{'n/a':>6}"
    g = mem_gib(key)
    gs = f"{g:8.1f}" if g is not None else f"{'n/a':>8}"
    print(f"{label:<16} {ts:10.0f} {ms:9.1f} {mfu} {gs}  {notes}")
ratio = lambda k: f"{tok['ztrain'] / tok[k]:.2f}" if "ztrain" in tok and k in tok else "n/a"
print(f"tokens/s ratios: ztrain/llm.c {ratio('llmc')}, ztrain/PyTorch {ratio('torch')}")
PYEOF
}

if [ "$MODE" == summarize ]; then
  [ -f "$(abspath "$SUMDIR")/meta.txt" ] || { echo "bench_gpu_peers.sh: $SUMDIR: no meta.txt (not a run's folder)" >&2; exit 2; }
  summarize "$(abspath "$SUMDIR")"; exit $?
fi

# ---- llm.c: nvcc, the build, the libraries its binary needs -----------------------------------------------------
find_nvcc() {
  local c
  for c in "$(command -v nvcc 2>/dev/null)" "${CUDA_HOME:-/nonexistent}/bin/nvcc" /usr/local/cuda/bin/nvcc \
           $(ls -d /usr/local/cuda-*/bin/nvcc 2>/dev/null | sort -V -r); do
    [ -n "$c" ] && [ -x "$c" ] && { echo "$c"; return 0; }
  done
  return 1
}
# llmc_build TIMEOUT SM LOG: make train_gpt2cu in $LLMC for compute capability SM (e.g. 90; empty: nvcc's default)
llmc_build() {
  local t=$1 sm=$2 log=$3 nvcc nvdir cuda lib dir ldflags=()
  nvcc=$(find_nvcc) || { echo "no nvcc found (PATH, CUDA_HOME, /usr/local/cuda*)" > "$log"; return 1; }
  nvdir=$(dirname "$nvcc"); cuda=$(dirname "$nvdir")
  mkdir -p "$LLMC/build" || return 1
  # CUDA 13 changed cudaMemAdvise's last argument from a device number to a cudaMemLocation; llm.c (llmc/cuda_utils.cuh)
  # passes a number. This pre-included overload keeps its call compiling; it does nothing before CUDA 13.
  cat > "$LLMC/build/ztrain_bench_compat.h" <<'EOF'
/* written by ztrain's benchmarks/bench_gpu_peers.sh, pre-included (nvcc -include) into llm.c's build */
#include <cuda_runtime.h>
#if defined(CUDART_VERSION) && CUDART_VERSION >= 13000
static inline cudaError_t cudaMemAdvise(const void *p, size_t n, enum cudaMemoryAdvise a, int device) {
    struct cudaMemLocation loc;
    loc.type = device == cudaCpuDeviceId ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice;
    loc.id = device == cudaCpuDeviceId ? 0 : device;
    return cudaMemAdvise(p, n, a, loc);
}
#endif
EOF
  # llm.c's Makefile links -lnvidia-ml: the driver has libnvidia-ml.so.1 (the CUDA toolkit a link-only libnvidia-ml.so
  # under stubs/),
  # rarely the unversioned name the linker looks for; point the linker at one, or leave NVML out when there is none
  # (llm.c uses NVML only where nvml.h is there, for -lg)
  lib=""
  for c in "$cuda/lib64/stubs/libnvidia-ml.so" "$cuda"/targets/*/lib/stubs/libnvidia-ml.so \
           "$(ldconfig -p 2>/dev/null | awk '/libnvidia-ml\.so\.1 .*x86-64/ {print $NF; exit}')" \
           /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1 /usr/lib64/libnvidia-ml.so.1; do
    [ -n "$c" ] && [ -e "$c" ] && { lib=$c; break; }
  done
  if [ -n "$lib" ]; then
    dir=$LLMC/build/ztrain_bench_nvml; mkdir -p "$dir"; ln -sf "$lib" "$dir/libnvidia-ml.so"
  else
    ldflags=(NVCC_LDFLAGS="-lcublas -lcublasLt")
  fi
  {
    echo "# $nvcc ($("$nvcc" --version | grep -o 'release [0-9.]*')), GPU_COMPUTE_CAPABILITY=${sm:-default}, NVML for the link: ${lib:-none}"
    PATH="$nvdir:$PATH" LIBRARY_PATH="${dir:-}${LIBRARY_PATH:+:$LIBRARY_PATH}" timeout "$t" \
      make -C "$LLMC" train_gpt2cu NO_MULTI_GPU=1 NO_USE_MPI=1 USE_CUDNN=0 ${sm:+GPU_COMPUTE_CAPABILITY=$sm} \
      NVCC_INCLUDES="-include $LLMC/build/ztrain_bench_compat.h" ${ldflags[@]+"${ldflags[@]}"}
  } > "$log" 2>&1
  local rc=$?
  [ $rc -eq 124 ] && echo "timed out after $t s" >> "$log"
  [ $rc -eq 0 ] && [ -x "$LLMC/train_gpt2cu" ]
}
# the directories holding the libraries BINARY lacks (ldd "not found"), from the CUDA installs and /usr/lib, /opt
missing_lib_dirs() {
  local l p
  for l in $(ldd "$1" 2>/dev/null | awk '/not found/ {print $1}'); do
    p=$(find /usr/local/cuda*/ /usr/lib /usr/local/lib /opt -name "$l" 2>/dev/null | head -1)
    [ -n "$p" ] && printf ':%s' "$(dirname "$p")"
  done
}

if [ "$MODE" == build ]; then
  [ -f "$LLMC/train_gpt2.cu" ] || { echo "bench_gpu_peers.sh: $LLMC: not an llm.c checkout (no train_gpt2.cu)" >&2; exit 2; }
  if llmc_build 600 "${LLMC_SM:-90}" "$LLMC/build/ztrain_bench_build.log"; then
    echo "bench_gpu_peers.sh: built $LLMC/train_gpt2cu for sm_${LLMC_SM:-90} (log: $LLMC/build/ztrain_bench_build.log)"; exit 0
  fi
  echo "bench_gpu_peers.sh: llm.c build failed: $(grep -m1 -iE 'error|not found' "$LLMC/build/ztrain_bench_build.log" || tail -1 "$LLMC/build/ztrain_bench_build.log")" >&2
  exit 1
fi

# ---- the model, the GPU, the budget ----------------------------------------------------------------------------
CFG=inputs/$MODEL.cfg
[[ $MODEL =~ ^[A-Za-z0-9._-]+$ ]] && [ -f "$CFG" ] || { echo "bench_gpu_peers.sh: no inputs/$MODEL.cfg" >&2; exit 2; }
for v in "$STEPS" "$WARMUP" "$B" "$T"; do [[ $v =~ ^[0-9]+$ ]] || usage; done
[ "$STEPS" -gt "$WARMUP" ] && [ "$B" -gt 0 ] && [ "$T" -gt 0 ] || { echo "bench_gpu_peers.sh: need --steps > --warmup, B and T > 0" >&2; exit 2; }
cfgkey() { sed -n "s/^[[:space:]]*$1[[:space:]]*=[[:space:]]*\([0-9.eE+-]*\)L\{0,1\}[[:space:]]*;.*/\1/p" "$CFG" | head -1; }
L=$(cfgkey n_layer) H=$(cfgkey n_head) C=$(cfgkey n_embd) V=$(cfgkey vocab_size) VP=$(cfgkey padded_vocab)
BLOCK=$(cfgkey block_size) LR=$(cfgkey lr)
for v in "$L" "$H" "$C" "$V"; do [[ $v =~ ^[0-9]+$ ]] || { echo "bench_gpu_peers.sh: $CFG: n_layer/n_head/n_embd/vocab_size not found" >&2; exit 2; }; done
[[ ${VP:-0} =~ ^[0-9]+$ ]] && [ "${VP:-0}" -gt 0 ] || VP=$(( (V + 127) / 128 * 128 ))
[[ ${BLOCK:-} =~ ^[0-9]+$ ]] || BLOCK=1024
LR=${LR:-6e-4}
fam=$(sed -n 's/^[[:space:]]*family[[:space:]]*=[[:space:]]*"\([a-z0-9]*\)".*/\1/p' "$CFG" | head -1)
[ "${fam:-gpt2}" == gpt2 ] || { echo "bench_gpu_peers.sh: $CFG: model.family \"$fam\": the peers run GPT-2 only" >&2; exit 2; }
[ "$T" -le "$BLOCK" ] || { echo "bench_gpu_peers.sh: --T $T > block_size $BLOCK" >&2; exit 2; }
FPT=$(( 72 * L * C * C + 6 * C * VP + 6 * L * C * T ))   # ztrain's zt_model_flops_per_token for GPT-2 (Q 3C, F 4C)

NG=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "$NG" -eq 0 ]; then echo "bench_gpu_peers.sh: no GPU here (nvidia-smi lists none): nothing measured"; exit 0; fi
GI=${CUDA_VISIBLE_DEVICES:-0}; GI=${GI%%,*}; GI=${GI:-0}
name=$(nvidia-smi --query-gpu=name --format=csv,noheader -i "$GI" 2>/dev/null | head -1)
[ -n "$name" ] || { GI=0; name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); }
case "$name" in
  *H100*|*H200*) peak=989 ;;
  *A100*) peak=312 ;;
  *) peak=0 ;;
esac
peak=${PEAK_TFLOPS:-$peak}
sm=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader -i "$GI" 2>/dev/null | head -1 | tr -d ' .')
[[ $sm =~ ^[0-9]+$ ]] || case "$name" in *H100*|*H200*) sm=90 ;; *A100*) sm=80 ;; *) sm="" ;; esac

big=1; [ "$L" -gt 12 ] && big=2
BUDGET=${PEERS_BUDGET_S:-$((big == 1 ? 360 : 600))}
T0=$SECONDS
left() { echo $((BUDGET - (SECONDS - T0))); }
# limit CAP: the runner's timeout, CAP (doubled above 124M) cut to what is left of the budget
limit() { local c=$(($1 * big)) l; l=$(left); [ "$c" -lt "$l" ] && echo "$c" || echo "$l"; }

ZT=$(abspath "${ZTRAIN:-$PWD/build/ztrain-cuda}")
ROOT=$(abspath "${BENCH_ROOT:-$PWD/build/bench-gpu-peers}")
RD=$ROOT/$MODEL
mkdir -p "$RD" || exit 2
rm -rf "$RD/runs" "$RD"/*.status "$RD"/*.mem "$RD"/*.log "$RD"/*.json "$RD/table.txt"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# llm.c and torch run without the libraries of a ztrain bundle (scripts/gpu-bundle.sh's env.sh puts its lib/ first)
PEER_LDPATH=$(echo ":${LD_LIBRARY_PATH:-}:" | sed "s#:$(dirname "$ZT")/lib:#:#g; s#^:##; s#:\$##")
idle=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i "$GI" 2>/dev/null | head -1)
cat > "$RD/meta.txt" <<EOF
model=$MODEL
L=$L
H=$H
C=$C
V=$V
VP=$VP
B=$B
T=$T
steps=$STEPS
warmup=$WARMUP
fpt=$FPT
peak=$peak
gpu=$name
idle_mib=${idle:-nan}
EOF
status() { echo "$2" > "$RD/$1.status"; echo "  $1: $2"; }
# nvidia-smi memory.used (MiB) of the GPU every 250 ms while a runner runs, into RD/NAME.mem
mem_start() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i "$GI" -lms 250 > "$RD/$1.mem" 2>/dev/null & MEMPID=$!; }
mem_stop() { kill "$MEMPID" 2>/dev/null; wait "$MEMPID" 2>/dev/null; }
# why RC TIMEOUT LOG REGEX: one line on a runner that failed: the time-out, or the first line of LOG matching REGEX
why() {
  if [ "$1" -eq 124 ] || [ "$1" -eq 137 ]; then echo "timed out after $2 s"; return; fi
  echo "exit $1: $(firstline "$3" "$4")"
}
lastline() {  # lastline LOG REGEX: LOG's last line matching REGEX (a Python traceback's exception), else its last line
  local l; l=$(grep -iE "$2" "$1" 2>/dev/null | tail -1); [ -n "$l" ] || l=$(grep -vE '^[-=*[:space:]]*$' "$1" 2>/dev/null | tail -1)
  echo "${l:0:160}"
}
firstline() {  # firstline LOG REGEX: LOG's first line matching REGEX (and the next if it ends in ':'), else its last line
  local l; l=$(grep -m1 -A1 -iE "$2" "$1" 2>/dev/null | head -2)
  case $l in *:$'\n'*) l=${l/$'\n'/ } ;; *) l=${l%%$'\n'*} ;; esac
  [ -n "$l" ] || l=$(grep -vE '^[-=*[:space:]]*$' "$1" 2>/dev/null | tail -1)
  echo "${l:0:160}"
}

echo "# bench_gpu_peers.sh: $MODEL on $name (GPU $GI), B $B x T $T, $STEPS steps; budget $BUDGET s; logs in $RD"
DATA=build/bench-gpu-data   # bench_gpu.sh's tokens
[ -f $DATA/train.bin ] || $PY tests/helpers/make_data.py $DATA 50257 20000000 >/dev/null || { echo "bench_gpu_peers.sh: make_data.py failed" >&2; exit 2; }
DATA=$PWD/$DATA

# ---- 1. ztrain ----------------------------------------------------------------------------------------------------
t=$(limit "${PEERS_T_ZTRAIN:-60}")
if [ ! -x "$ZT" ]; then
  status ztrain "failed: $ZT is not an executable (make cuda, or ZTRAIN=)"
elif [ "$t" -lt 15 ]; then
  status ztrain "skipped: time budget spent"
else
  launch=""; command -v mpirun >/dev/null && launch="mpirun --bind-to none -np 1"
  mem_start ztrain
  timeout "$t" $launch "$ZT" train -c "$CFG" --set precision=bf16 --set train.steps="$STEPS" \
    --set train.micro_batch="$B" --set train.global_batch="$B" --set train.seq_len="$T" \
    --set data.train="$DATA/train.bin" --set data.val="$DATA/val.bin" --set eval.every=0 --set eval.sequences=16 \
    --set train.log_every=1 --set train.warmup_steps=2 --set checkpoint.every=0 --set sample.every=0 \
    --set run.root="$RD" --set run.session=runs --set run.name=ztrain ${BENCH_EXTRA:-} > "$RD/ztrain.log" 2>&1
  rc=$?
  mem_stop
  if [ $rc -eq 0 ] && [ -s "$RD/runs/ztrain/metrics.jsonl" ]; then status ztrain ok
  else status ztrain "failed: $(why $rc "$t" "$RD/ztrain.log" 'error|exited|terminated|not found|killed')"; fi
fi

# ---- which Python has torch with CUDA (before llm.c, so that llm.c leaves PyTorch its share of the budget) -------
TPY=""
for c in ${TORCH_PY:-python3 /usr/bin/python3 .venv-ref/bin/python}; do
  command -v "$c" >/dev/null || [ -x "$c" ] || continue
  if LD_LIBRARY_PATH=$PEER_LDPATH timeout 30 "$c" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 3)' >/dev/null 2>&1; then
    TPY=$c; break
  fi
done

# ---- 2. llm.c -----------------------------------------------------------------------------------------------------
if [ -z "$LLMC" ] && [ -z "${LLMC_BIN:-}" ]; then
  status llmc "skipped: no llm.c checkout given (LLMC=/path/to/llm.c or --llmc PATH)"
elif [ -z "${LLMC_BIN:-}" ] && [ ! -f "$LLMC/train_gpt2.cu" ]; then
  status llmc "failed: $LLMC is not an llm.c checkout (no train_gpt2.cu)"
elif ! case "$L:$C:$H" in 6:384:6|12:768:12|24:1024:16|36:1280:20|48:1600:25) true ;; *) false ;; esac; then
  status llmc "skipped: llm.c's -e d$L is not L$L C$C H$H"
elif [ "$V:$VP" != "50257:50304" ]; then
  status llmc "skipped: llm.c's GPT-2 has vocab 50257 padded to 50304, $CFG says $V/$VP"
else
  # llm.c may use at most half of what is left when PyTorch comes after it
  share=$(left); [ -n "$TPY" ] && share=$((share / 2))
  llmc_end=$((SECONDS + share))
  bin=${LLMC_BIN:-}
  if [ -z "$bin" ]; then
    bt=$(limit "${PEERS_T_LLMC_BUILD:-120}"); [ "$bt" -gt $((llmc_end - SECONDS - 20)) ] && bt=$((llmc_end - SECONDS - 20))
    if ! find_nvcc >/dev/null && [ -x "$LLMC/train_gpt2cu" ]; then
      bin=$LLMC/train_gpt2cu; echo "no nvcc here: running the train_gpt2cu already built in $LLMC" > "$RD/llmc-build.log"
    elif [ "$bt" -lt 10 ]; then
      status llmc "skipped: time budget spent"
    elif llmc_build "$bt" "$sm" "$RD/llmc-build.log"; then
      bin=$LLMC/train_gpt2cu
    else
      status llmc "failed: build: $(firstline "$RD/llmc-build.log" 'error|not found|timed out')"
    fi
  fi
  if [ -n "$bin" ]; then
    bin=$(abspath "$bin")
    t=$(limit "${PEERS_T_LLMC:-60}"); [ "$t" -gt $((llmc_end - SECONDS)) ] && t=$((llmc_end - SECONDS))
    for s in train val; do   # the same tokens in llm.c's format (dev/data/data_common.py write_datafile)
      if [ ! -f "$DATA/llmc_$s.bin" ] || [ "$DATA/$s.bin" -nt "$DATA/llmc_$s.bin" ]; then
        $PY benchmarks/llmc_data.py "$DATA/$s.bin" "$DATA/llmc_$s.bin" >> "$RD/llmc-build.log" 2>&1
      fi
    done
    if [ ! -f "$DATA/llmc_val.bin" ]; then
      status llmc "failed: benchmarks/llmc_data.py: $(tail -1 "$RD/llmc-build.log")"
    elif [ "$t" -lt 15 ]; then
      status llmc "skipped: time budget spent"
    else
      ldp="$PEER_LDPATH$(missing_lib_dirs "$bin")"
      mem_start llmc
      ( cd "$RD" && LD_LIBRARY_PATH=${ldp#:} exec timeout "$t" "$bin" \
          -i "$DATA/llmc_train.bin" -j "$DATA/llmc_val.bin" -e "d$L" -b "$B" -t "$T" -x "$STEPS" \
          -v 1000000 -m 1 -s 0 -n 0 -h 0 -y 0 -r 0 -l "$LR" -c 0.1 -u 2 -q 0.1 ${LLMC_EXTRA:-} ) > "$RD/llmc.log" 2>&1
      rc=$?
      mem_stop
      if [ $rc -eq 0 ] && grep -q '^step ' "$RD/llmc.log"; then status llmc ok
      else status llmc "failed: $(why $rc "$t" "$RD/llmc.log" 'error|assert|bad|not found')"; fi
    fi
  fi
fi

# ---- 3. PyTorch ---------------------------------------------------------------------------------------------------
torch_run() {  # torch_run TIMEOUT OUT.json [--no-compile]
  LD_LIBRARY_PATH=$PEER_LDPATH timeout "$1" "$TPY" benchmarks/torch_gpt2_gpu.py --n_layer "$L" --n_head "$H" \
    --n_embd "$C" --vocab "$V" --padded_vocab "$VP" --block_size "$BLOCK" --B "$B" --T "$T" --steps "$STEPS" \
    --warmup "$WARMUP" --data "$DATA/train.bin" ${3:-} > "$RD/$2" 2>> "$RD/torch.log"
}
t=$(limit "${PEERS_T_TORCH:-180}")
if [ -z "$TPY" ]; then
  status torch "skipped: no Python here imports torch with CUDA (tried ${TORCH_PY:-python3 /usr/bin/python3 .venv-ref/bin/python}; TORCH_PY=)"
elif [ "$t" -lt 20 ]; then
  status torch "skipped: time budget spent"
else
  echo "# $TPY" > "$RD/torch.log"
  mem_start torch
  torch_run "$t" torch.json; rc=$?
  mem_stop
  if [ $rc -eq 0 ] && grep -q '^{' "$RD/torch.json"; then status torch ok
  else
    first=$([ $rc -eq 124 ] || [ $rc -eq 137 ] && echo "timed out after $t s" || echo "exit $rc: $(lastline "$RD/torch.log" 'error|exception|^torch_gpt2_gpu')")
    t=$(limit 90)
    if [ "$t" -ge 20 ]; then   # torch.compile's toolchain (Triton, a C compiler, Python headers) may be what failed
      echo "# again with --no-compile" >> "$RD/torch.log"
      mem_start torch
      torch_run "$t" torch-eager.json --no-compile; rc=$?
      mem_stop
      if [ $rc -eq 0 ] && grep -q '^{' "$RD/torch-eager.json"; then status torch "ok (eager: torch.compile run failed: $first)"
      else status torch "failed: with torch.compile: $first; without: $([ $rc -eq 124 ] && echo "timed out after $t s" || echo "exit $rc: $(lastline "$RD/torch.log" 'error|exception|^torch_gpt2_gpu')")"; fi
    else
      status torch "failed: $first"
    fi
  fi
fi

echo
summarize "$RD" | tee "$RD/table.txt"
echo "(raw logs: $RD; $((SECONDS - T0)) s)"
