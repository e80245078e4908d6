#!/usr/bin/env bash
# Creates .venv-ref: Debian's python3 with its numpy/h5py/torch visible, plus the PyPI references
# the tests compare against (Hugging Face transformers, tokenizers, safetensors, PEFT for LoRA),
# TensorBoard (whose own reader checks the event files ztrain writes) and pyarrow (tools/parquet_to_jsonl.py).
# Idempotent: does nothing when the venv already imports them. Prints the interpreter path.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-ref
PY=/usr/bin/python3
check="import torch, numpy, h5py, transformers, tokenizers, safetensors, regex, tensorboard, accelerate, peft, pyarrow, jinja2"
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "$check" 2>/dev/null; then
  echo "$VENV/bin/python"; exit 0
fi
scripts/install-deps.sh test >&2
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv --system-site-packages "$VENV" >&2
fi
# transformers 4.44 is the last line that supports Debian's torch 1.13
"$VENV/bin/python" -m pip install -q --disable-pip-version-check \
  "transformers==4.44.2" "tokenizers>=0.19,<0.20" "safetensors>=0.4" regex >&2
# jinja2: transformers' apply_chat_template (the chat-template reference of tests/e2e/test_sft.py)
"$VENV/bin/python" -m pip install -q --disable-pip-version-check "jinja2==3.1.6" >&2
# tensorboard 2.19 runs on Python 3.11 with Debian's numpy 1.24 (it leaves numpy alone)
"$VENV/bin/python" -m pip install -q --disable-pip-version-check "tensorboard==2.19.0" >&2
# pyarrow 20.0 imports with Debian's numpy 1.24 (pyarrow 26 needs numpy 2)
"$VENV/bin/python" -m pip install -q --disable-pip-version-check "pyarrow==20.0.0" >&2
# PEFT (LoRA reference, tests/e2e/test_lora_reference.py): peft 0.12 is the line of transformers 4.44.
# Its metadata asks for torch>=1.13.0, which Debian's 1.13.0a0 (a pre-release) does not satisfy, so
# pip would fetch a new torch from PyPI: its dependencies are installed first, explicitly (accelerate
# 0.34 accepts torch>=1.10), and peft itself with --no-deps.
"$VENV/bin/python" -m pip install -q --disable-pip-version-check \
  "accelerate==0.34.2" psutil pyyaml tqdm packaging "huggingface-hub>=0.21" >&2
"$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps "peft==0.12.0" >&2
"$VENV/bin/python" -c "$check" >&2 || { echo "setup-venv.sh: $VENV cannot import the references ($check)" >&2; exit 1; }
echo "$VENV/bin/python"
