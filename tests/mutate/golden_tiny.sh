#!/usr/bin/env bash
# golden_tiny.sh — a pinned end-to-end output, for the mutations no comparison test can see (the data
# order, the sampler's temperature / top-k): trains inputs/tiny.cfg for 30 steps on 1 rank, samples
# 24 ids twice from the checkpoint, and compares with tests/mutate/golden_tiny.txt. Losses and grad
# norms are kept to 4 decimals and the lr exactly, so BLAS kernels / thread counts (last-bit
# differences) do not matter while another batch order or schedule does. Sampled ids could flip on a
# near-tie on another machine: re-record there with `tests/mutate/golden_tiny.sh --record`.
# Run from the repository root (or a mutation tree); ZTRAIN overrides ./ztrain.
set -u
cd "$(dirname "$0")/../.."
ZT=${ZTRAIN:-./ztrain}
GOLD=tests/mutate/golden_tiny.txt
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
[ -f data/tiny/train.bin ] || tests/helpers/make_data.py data/tiny 256 40000 >/dev/null
T=$(mktemp -d /tmp/zt-golden.XXXXXX)
trap 'rm -rf "$T"' EXIT
if ! $ZT train -c inputs/tiny.cfg --set train.steps=30 --set run.root="$T" --set run.name=g --set eval.every=0 \
     --set checkpoint.every=30 > "$T/train.log" 2>&1; then
  echo "FAIL golden_tiny_train: exit $?: $(tail -2 "$T/train.log")"; exit 1
fi
ck=$(ls "$T"/*/g/checkpoints/step_*.h5 | tail -1)
{
  "${ZT_PY:-python3}" - "$T"/*/g/metrics.jsonl <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if "loss" in r and "step" in r:
        print(f"step {r['step']} loss {r['loss']:.4f} grad_norm {r['grad_norm']:.4f} lr {r['lr']!r}")
PY
  echo "sample t0.8 k8: $($ZT sample --checkpoint "$ck" --tokens 24 --temperature 0.8 --top-k 8 --seed 3 --prompt '' --tokenizer none 2>/dev/null)"
  echo "sample t1.5 k0: $($ZT sample --checkpoint "$ck" --tokens 24 --temperature 1.5 --top-k 0 --seed 5 --prompt '' --tokenizer none 2>/dev/null)"
} > "$T/now.txt"
if [ "${1:-}" = "--record" ]; then cp "$T/now.txt" "$GOLD"; echo "recorded $GOLD"; exit 0; fi
if cmp -s "$T/now.txt" "$GOLD"; then
  echo "PASS golden_tiny (30 losses, grad norms, lrs and 2 x 24 sampled ids == $GOLD)"
else
  echo "FAIL golden_tiny: differs from $GOLD: $(diff "$GOLD" "$T/now.txt" | grep '^[<>]' | head -2 | tr '\n' ' ' | cut -c1-300)"
  exit 1
fi
