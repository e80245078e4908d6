#!/usr/bin/env python3
"""test_sample_hf.py — greedy `ztrain sample` (the KV-cached decode) of imported models equals transformers' greedy
generation.

Run from the repository root with the reference venv: .venv-ref/bin/python tests/e2e/test_sample_hf.py
Needs ./ztrain. PASS/FAIL lines; exits non-zero on a failure.

For GPT-2, Llama (grouped-query attention, Llama 3's rotary scaling) and Qwen2 (q, k, v biases, multi-query): a tiny
random model (weights scaled up so that the logits are well separated) saved by transformers, `ztrain import`ed, and
`ztrain sample --top-k 1 --tokens 32` from a 5-token prompt given as ids, against `model.generate(do_sample=False,
max_new_tokens=32)`: the 32 new tokens must be the same. The smallest gap between the best and second-best logit
along transformers' path is reported: a near tie (below 1e-4) could flip on summation order alone, and is a FAIL of
the test's own set-up, not of ztrain.
"""
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "helpers"))
import hf_ref_common as common  # noqa: E402
from hf_ref_common import REPO, report_fail, report_pass  # noqa: E402

common.require_imports("sample_hf_imports", "numpy/torch/transformers", "create the venv with scripts/setup-venv.sh")
import torch  # noqa: E402
from transformers import (GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM, Qwen2Config,  # noqa: E402
                          Qwen2ForCausalLM)

ZT = os.path.join(REPO, "ztrain")
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
N_NEW = 32


def build(family, seed):
    torch.manual_seed(seed)
    if family == "gpt2":
        m = GPT2LMHeadModel(GPT2Config(vocab_size=300, n_positions=64, n_embd=64, n_layer=2, n_head=4))
    elif family == "llama3":
        m = LlamaForCausalLM(LlamaConfig(vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                         rope_theta=500000.0, tie_word_embeddings=False,
                                         rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                                                           high_freq_factor=4.0, original_max_position_embeddings=16)))
    else:
        m = Qwen2ForCausalLM(Qwen2Config(vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                         num_attention_heads=4, num_key_value_heads=1, max_position_embeddings=64,
                                         tie_word_embeddings=False, use_sliding_window=False))
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for n, p in m.named_parameters():
            if p.dim() == 2:
                p.copy_(0.2 * torch.randn(p.shape, generator=g))
            elif n.endswith("bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
    m.eval()
    return m


def case(family, seed, tmp):
    model = build(family, seed)
    d, ck = os.path.join(tmp, family), os.path.join(tmp, f"{family}.h5")
    model.save_pretrained(d, safe_serialization=True)
    p = subprocess.run([ZT, "import", "--safetensors", d, "--out", ck], cwd=REPO, env=ENV, capture_output=True,
                       text=True, timeout=120)
    if p.returncode != 0:
        report_fail(f"greedy_{family}", f"import exited {p.returncode}: {(p.stdout + p.stderr).strip()[-300:]}")
        return
    prompt = [7, 123, 45, 299, 3]
    p = subprocess.run([ZT, "sample", "--checkpoint", ck, "--tokenizer", "none", "--prompt",
                        " ".join(map(str, prompt)), "--tokens", str(N_NEW), "--top-k", "1"], cwd=REPO, env=ENV,
                       capture_output=True, text=True, timeout=120)
    lines = [ln for ln in p.stdout.splitlines() if ln.strip() and all(w.isdigit() for w in ln.split())]
    if p.returncode != 0 or not lines:
        report_fail(f"greedy_{family}", f"sample exited {p.returncode}: {(p.stdout + p.stderr).strip()[-300:]}")
        return
    zt_tokens = [int(w) for w in lines[0].split()][len(prompt):]
    model.generation_config.eos_token_id = None  # no early stop: ztrain generates all N_NEW tokens
    model.generation_config.bos_token_id = None
    with torch.no_grad():
        out = model.generate(torch.tensor([prompt]), max_new_tokens=N_NEW, do_sample=False, output_scores=True,
                             return_dict_in_generate=True, pad_token_id=0)
    hf_tokens = out.sequences[0, len(prompt):].tolist()
    gap = min(float(torch.topk(s[0], 2).values[0] - torch.topk(s[0], 2).values[1]) for s in out.scores)
    if gap < 1e-4:
        report_fail(f"greedy_{family}", f"transformers' path has a near tie (best - second {gap:.2e}): change the seed")
    elif zt_tokens == hf_tokens:
        report_pass(f"greedy_{family}", f"{N_NEW} tokens equal to transformers' greedy generation (smallest best-second "
                    f"logit gap {gap:.2e}): {' '.join(map(str, zt_tokens[:10]))} ...")
    else:
        first = next(i for i, (a, b) in enumerate(zip(zt_tokens, hf_tokens)) if a != b) if len(zt_tokens) == len(
            hf_tokens) else -1
        report_fail(f"greedy_{family}", f"first difference at new token {first}: ztrain {zt_tokens[:12]} vs transformers "
                    f"{hf_tokens[:12]}")


def main():
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="zt_samp_") as tmp:
        for family, seed in (("gpt2", 41), ("llama3", 42), ("qwen2", 43)):
            try:
                case(family, seed, tmp)
            except Exception as e:  # a crash of the CLI or the comparison fails the case
                report_fail(f"greedy_{family}", f"{type(e).__name__}: {e}")
    print(f"# test_sample_hf: {time.time() - t0:.1f} s", file=sys.stderr)
    return 1 if common.failures else 0


if __name__ == "__main__":
    sys.exit(main())
