#!/usr/bin/env bash
# gpu-check.sh — the GPU verification, one command on a machine with a GPU, from the repository root:
#   scripts/gpu-check.sh OUTDIR [BUNDLE]
# BUNDLE (default .gpu) is what scripts/gpu-bundle.sh packed (the GPU build and its libraries); without
# one, ./build/ztrain-cuda with the machine's own libraries. It writes to OUTDIR, each step under a
# time limit so the whole check ends within about 8 minutes whatever hangs (1 GPU):
#   env.txt       the machine: nvidia-smi, CPU, OS, the libraries the binary resolved
#   selftest.txt  ztrain hwinfo, then ztrain selftest --device cuda (every op vs cpu in fp32/bf16/fp16,
#                 20 training steps vs cpu, two runs bitwise, NCCL exact checks), and with several GPUs the
#                 same with one rank per GPU (mpirun, the bundle's own)
#   bench.txt     benchmarks/bench_gpu.sh: GPT-2 124M/350M tokens/s and MFU, bf16 and fp32, and each run's
#                 op profile of its last step (ZTRAIN_OP_PROFILE); 12 steps per run (was 20 before the peers
#                 below joined the check, to keep it within its 8 minutes); then 124M bf16 again with the fp32
#                 attention kernels and no mirrors (ZT_CUDA_ATTN_TC=0 ZT_CUDA_MIRROR=0), the same GPU's before,
#                 and with the step replayed as one CUDA graph (train.cuda_graph = true)
#   peers.txt     benchmarks/bench_gpu_peers.sh --steps 20: GPT-2 124M bf16, ztrain against llm.c (LLMC=/path/to/
#                 llm.c, or the train_gpt2cu the bundle carries; skipped without either) and PyTorch (torch.compile;
#                 skipped without a Python that imports torch with CUDA), in what is left of the 8 minutes after
#                 the resume check and memcheck are reserved for
#   resume.txt    tiny model in bf16 on the GPU: 12 steps straight == 6 + --resume auto + 6 (params_hash) ==
#                 12 steps with train.cuda_graph = true; the LM head in 3 chunks within 1e-3 of the straight losses;
#                 QLoRA with dropout on its step-6 checkpoint, the same params_hash with and without the graph,
#                 through the device checkpoint path (staged reads and writes); then the masked-LM preset
#                 inputs/mlm-fast.cfg for 20 steps on synthetic tokens (tokens/s, MLM accuracy line), and again with
#                 the step as a CUDA graph (the same params_hash)
#   sanitizer.txt compute-sanitizer memcheck over the op checks in every precision (where the tool is there)
#   runs.tgz      the benchmark runs' logs and metrics.jsonl, the peers' logs (peers/gpt2-124m/)
# GPU_CHECK_BENCH="--models gpt2-124m --precisions bf16" narrows the benchmark (default: --steps 12, all).
# docs/gpu-status.md records what it printed on the GPUs it ran on.
set -u
OUTDIR=${1:?usage: $0 OUTDIR [BUNDLE]}
B=${2:-.gpu}
mkdir -p "$OUTDIR"
if [ -f "$B/env.sh" ]; then source "$B/env.sh"; else ZTRAIN=$PWD/build/ztrain-cuda; fi
export ZTRAIN
T0=$(date +%s)
rm -rf /tmp/zt-gpucheck-runs
step() { echo "== $1 ($(($(date +%s) - T0)) s)"; }
{
  step env; date -u; nvidia-smi; uname -a; grep -m2 -E '^(NAME|VERSION)=' /etc/os-release
  grep -m1 'model name' /proc/cpuinfo; nproc; free -g | head -2
  ldd "$ZTRAIN"
} > "$OUTDIR/env.txt" 2>&1
{
  step hwinfo; timeout 30 "$ZTRAIN" hwinfo; echo "hwinfo rc=$?"
  step selftest; timeout 60 "$ZTRAIN" selftest --device cuda; echo "selftest rc=$?"
  NG=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  if [ "$NG" -gt 1 ]; then # one rank per GPU: NCCL across the GPUs, ZeRO over them
    step "selftest on $NG GPUs"
    timeout 120 mpirun --bind-to none -np "$NG" "$ZTRAIN" selftest --device cuda; echo "selftest $NG GPUs rc=$?"
  fi
} > "$OUTDIR/selftest.txt" 2>&1
grep -E "FAIL|^selftest|rc=|GPU|max relative|two runs|^comm|^train" "$OUTDIR/selftest.txt"
{
  step bench
  ZTRAIN_OP_PROFILE=1 BENCH_ROOT=/tmp/zt-gpucheck-runs timeout 90 benchmarks/bench_gpu.sh ${GPU_CHECK_BENCH:---steps 12}
  echo "bench rc=$?"
  for f in /tmp/zt-gpucheck-runs/*.log; do echo "-- $(basename "$f")"; sed -n '/^op profile/,$p' "$f"; done
  # the same GPT-2 124M bf16 step with the fp32 attention kernels and every operand packed (ZT_CUDA_ATTN_TC=0,
  # ZT_CUDA_MIRROR=0): the before of the tensor-core attention and the mirrors, on the same GPU in the same call
  step "bench without tensor-core attention and mirrors"
  ZT_CUDA_ATTN_TC=0 ZT_CUDA_MIRROR=0 ZTRAIN_OP_PROFILE=1 BENCH_ROOT=/tmp/zt-gpucheck-runs/before timeout 40 \
    benchmarks/bench_gpu.sh --models gpt2-124m --precisions bf16 --steps 12
  echo "bench before rc=$?"
  for f in /tmp/zt-gpucheck-runs/before/*.log; do echo "-- before/$(basename "$f")"; sed -n '/^op profile/,$p' "$f"; done
  # the same step replayed as one CUDA graph (train.cuda_graph; its "step graph:" line says how many steps replayed)
  step "bench with the step as a CUDA graph"
  BENCH_EXTRA="--set train.cuda_graph=true" BENCH_ROOT=/tmp/zt-gpucheck-runs/graph timeout 40 \
    benchmarks/bench_gpu.sh --models gpt2-124m --precisions bf16 --steps 12
  echo "bench graph rc=$?"
  grep -h "step graph:" /tmp/zt-gpucheck-runs/graph/*.log
} > "$OUTDIR/bench.txt" 2>&1
cat "$OUTDIR/bench.txt"
{
  # what is left of 8 minutes once the resume and masked-LM checks (125 s) and memcheck (60 s) are set aside, and a
  # few seconds
  P=$((480 - ($(date +%s) - T0) - 215)); [ "$P" -lt 60 ] && P=60
  step "peers (budget $P s)"
  PEERS_BUDGET_S=$P BENCH_ROOT=/tmp/zt-gpucheck-runs/peers timeout $((P + 20)) benchmarks/bench_gpu_peers.sh \
    --steps 20 ${LLMC:+--llmc "$LLMC"}
  echo "peers rc=$?"
} > "$OUTDIR/peers.txt" 2>&1
cat "$OUTDIR/peers.txt"
{
  step resume
  PY=/usr/bin/python3; $PY -c "import numpy" 2>/dev/null || PY=python3
  $PY tests/helpers/make_data.py /tmp/zt-gpucheck-data 256 40000 >/dev/null
  common="-c inputs/tiny.cfg --set device=cuda --set precision=bf16 --set data.train=/tmp/zt-gpucheck-data/train.bin
    --set data.val=/tmp/zt-gpucheck-data/val.bin --set run.root=/tmp/zt-gpucheck-runs --set run.session=resume
    --set train.steps=12 --set checkpoint.every=6 --set eval.every=6"
  timeout 20 "$ZTRAIN" train $common --set run.name=straight 2>&1 | tail -4
  timeout 20 "$ZTRAIN" train $common --set run.name=split --stop-after 6 2>&1 | tail -2
  timeout 20 "$ZTRAIN" train $common --set run.name=split --resume auto 2>&1 | tail -4
  h1=$(grep -h params_hash /tmp/zt-gpucheck-runs/resume/straight/results.json)
  h2=$(grep -h params_hash /tmp/zt-gpucheck-runs/resume/split/results.json)
  [ -n "$h1" ] && [ "$h1" == "$h2" ] && echo "resume: PASS (identical params_hash)" || echo "resume: FAIL ($h1 / $h2)"
  # the same 12 steps with the step replayed as a CUDA graph (train.cuda_graph): the same params_hash
  timeout 20 "$ZTRAIN" train $common --set run.name=graph --set train.cuda_graph=true 2>&1 | grep -E "step graph|hash"
  h3=$(grep -h params_hash /tmp/zt-gpucheck-runs/resume/graph/results.json)
  [ -n "$h1" ] && [ "$h1" == "$h3" ] && echo "graph: PASS (identical params_hash)" || echo "graph: FAIL ($h1 / $h3)"
  # the LM head in 3 chunks (train.head_chunks: cuBLASLt's beta 1 into the head's gradient): the same losses as the
  # straight run within 1e-3 (only the head's gradient is summed in another order)
  timeout 20 "$ZTRAIN" train $common --set run.name=chunks --set train.head_chunks=3 --set checkpoint.every=0 2>&1 | tail -1
  $PY - /tmp/zt-gpucheck-runs/resume/straight/metrics.jsonl /tmp/zt-gpucheck-runs/resume/chunks/metrics.jsonl <<'PYEOF'
import json, sys
try:
    a, b = ([json.loads(l)["loss"] for l in open(p)] for p in sys.argv[1:3])
    d = max(abs(x - y) / abs(x) for x, y in zip(a, b)) if len(a) == len(b) == 12 else None
except Exception as e:
    d = None
print(f"head_chunks: {'PASS' if d is not None and d <= 1e-3 else 'FAIL'} (max rel loss diff {d} over 12 steps)")
PYEOF
  # QLoRA with dropout on the straight run's step-6 checkpoint, with and without the step as a CUDA graph (its masks'
  # micro-batch index read on the device): the same params_hash
  lq="--set lora.enabled=true --set lora.rank=4 --set lora.alpha=8 --set lora.targets=all --set lora.quant=nf4_dq
    --set lora.dropout=0.1 --set lora.base=/tmp/zt-gpucheck-runs/resume/straight/checkpoints/step_00000006.h5
    --set checkpoint.every=0 --set eval.every=0"
  timeout 20 "$ZTRAIN" train $common $lq --set run.name=qlora 2>&1 | tail -1
  timeout 20 "$ZTRAIN" train $common $lq --set run.name=qlora-graph --set train.cuda_graph=true 2>&1 | grep -E "step graph|hash"
  h4=$(grep -h params_hash /tmp/zt-gpucheck-runs/resume/qlora/results.json)
  h5=$(grep -h params_hash /tmp/zt-gpucheck-runs/resume/qlora-graph/results.json)
  [ -n "$h4" ] && [ "$h4" == "$h5" ] && echo "qlora_dropout_graph: PASS (identical params_hash)" ||
    echo "qlora_dropout_graph: FAIL ($h4 / $h5)"
  # masked LM: inputs/mlm-fast.cfg (BERT 4 layers, C 256, 128 x 128 tokens per step) on synthetic tokens, 20 steps
  step mlm
  $PY tests/helpers/make_data.py /tmp/zt-gpucheck-mlm 30522 3000000 >/dev/null
  timeout 45 "$ZTRAIN" train -c inputs/mlm-fast.cfg --set train.global_batch=128 --set train.steps=20 \
    --set train.warmup_steps=2 --set data.train=/tmp/zt-gpucheck-mlm/train.bin --set data.val=/tmp/zt-gpucheck-mlm/val.bin \
    --set eval.every=20 --set eval.sequences=256 --set checkpoint.every=0 --set run.root=/tmp/zt-gpucheck-runs \
    --set run.session=mlm --set run.name=mlm-fast 2>&1 | tail -4
  echo "mlm rc=$?"
  # the same with the step as a CUDA graph: the masks change each step's d(loss) scale, read from the device
  timeout 45 "$ZTRAIN" train -c inputs/mlm-fast.cfg --set train.global_batch=128 --set train.steps=20 \
    --set train.warmup_steps=2 --set data.train=/tmp/zt-gpucheck-mlm/train.bin --set data.val=/tmp/zt-gpucheck-mlm/val.bin \
    --set eval.every=20 --set eval.sequences=256 --set checkpoint.every=0 --set run.root=/tmp/zt-gpucheck-runs \
    --set run.session=mlm --set run.name=mlm-graph --set train.cuda_graph=true 2>&1 | grep -E "step graph|hash"
  h6=$(grep -h params_hash /tmp/zt-gpucheck-runs/mlm/mlm-fast/results.json)
  h7=$(grep -h params_hash /tmp/zt-gpucheck-runs/mlm/mlm-graph/results.json)
  [ -n "$h6" ] && [ "$h6" == "$h7" ] && echo "mlm_graph: PASS (identical params_hash)" || echo "mlm_graph: FAIL ($h6 / $h7)"
} > "$OUTDIR/resume.txt" 2>&1
cat "$OUTDIR/resume.txt"
tar czf "$OUTDIR/runs.tgz" --exclude="*.h5" --exclude="*.bin" -C /tmp zt-gpucheck-runs 2>/dev/null
if command -v compute-sanitizer >/dev/null; then
  {
    step memcheck
    timeout 60 compute-sanitizer --tool memcheck --print-limit 50 "$ZTRAIN" selftest --device cuda --only ops
    echo "memcheck rc=$?"
  } > "$OUTDIR/sanitizer.txt" 2>&1
  grep -E '^== |ERROR SUMMARY|rc=|FAIL|Invalid' "$OUTDIR/sanitizer.txt" | head -40
fi
step done
