#!/usr/bin/env python3
"""test_lora_export.py — LoRA checkpoints exported for PEFT, GPT-2 and the Llama family, end to end through the CLI.

Run from the repository root with the reference venv: .venv-ref/bin/python tests/e2e/test_lora_export.py
Needs ./ztrain. PASS/FAIL lines; exits non-zero on a failure.

Per case (GPT-2 with rsLoRA on attn.c_attn + mlp.c_proj; Llama with grouped-query attention and rsLoRA on q_proj,
v_proj, down_proj; Qwen2 with plain LoRA on all seven modules and dropout): a tiny random model saved by
transformers is imported (`ztrain import`), LoRA-fine-tuned for 6 steps on the tiny data with `ztrain train`, and
exported twice:
  config_<c>   `ztrain export` (adapters): adapter_config.json's every field against the run's settings: peft_type
               LORA, task_type CAUSAL_LM, r, lora_alpha, lora_dropout, use_rslora (true AND false runs both checked:
               a wrong boolean fails), target_modules (exactly the trained modules), fan_in_fan_out (true for GPT-2's
               Conv1D, false for nn.Linear), bias "none"; and adapter_model.safetensors holds exactly PEFT's names
               and shapes for those modules.
  peft_<c>     PeftModel.from_pretrained(the transformers base, the export) gives the logits of the merged export
               (`ztrain export --merge`, loaded with AutoModelForCausalLM): rel <= 1e-5; and the adapters moved
               the model (the merged logits differ from the base's).
"""
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "helpers"))
import hf_ref_common as common  # noqa: E402
from hf_ref_common import REPO, rel_err, report_fail, report_pass  # noqa: E402

common.require_imports("lora_export_imports", "numpy/torch/transformers/peft/safetensors",
                       "create the venv with scripts/setup-venv.sh", extra=("peft", "safetensors"))
import numpy as np  # noqa: E402
import torch  # noqa: E402
from peft import PeftModel  # noqa: E402
from safetensors import safe_open  # noqa: E402
from transformers import (AutoModelForCausalLM, GPT2Config, GPT2LMHeadModel, LlamaConfig,  # noqa: E402
                          LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM)

ZT = os.path.join(REPO, "ztrain")
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", ZTRAIN_TEST_SGEMM_N="256")


def zt(*args):
    p = subprocess.run([ZT, *args], cwd=REPO, env=ENV, capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout + p.stderr


def base_model(family, seed):
    torch.manual_seed(seed)
    common_kw = dict(vocab_size=256)
    if family == "gpt2":
        m = GPT2LMHeadModel(GPT2Config(n_positions=64, n_embd=64, n_layer=2, n_head=2, resid_pdrop=0.0,
                                       embd_pdrop=0.0, attn_pdrop=0.0, **common_kw))
    else:
        cls, cfg = (LlamaForCausalLM, LlamaConfig) if family == "llama" else (Qwen2ForCausalLM, Qwen2Config)
        extra = dict(attention_bias=False, mlp_bias=False) if family == "llama" else dict(use_sliding_window=False)
        m = cls(cfg(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                    num_key_value_heads=2, max_position_embeddings=64, tie_word_embeddings=False, **extra, **common_kw))
    m.eval()
    return m


def logits(model, tokens):
    with torch.no_grad():
        return model(input_ids=torch.from_numpy(tokens)).logits.double().numpy()


def case(tag, family, lora, tmp):
    base_dir, ck = os.path.join(tmp, f"{tag}-base"), os.path.join(tmp, f"{tag}-base.h5")
    base = base_model(family, 7)
    base.save_pretrained(base_dir, safe_serialization=True)
    rc, out = zt("import", "--safetensors", base_dir, "--out", ck)
    if rc != 0:
        report_fail(f"config_{tag}", f"import exited {rc}: {out.strip()[-300:]}")
        return
    sets = [f"lora.enabled=true", f"lora.base={ck}", f"lora.rank={lora['r']}", f"lora.alpha={lora['alpha']}",
            f"lora.rslora={'true' if lora['rslora'] else 'false'}", f"lora.targets={lora['targets']}",
            f"lora.dropout={lora['dropout']}", "train.steps=6", "train.warmup_steps=0", "train.lr=1e-2",
            f"run.root={tmp}", f"run.name={tag}", "eval.every=0", "model.block_size=64"]
    rc, out = zt("train", "-c", "inputs/tiny.cfg", *[x for s in sets for x in ("--set", s)])
    cks = sorted(os.listdir(os.path.join(tmp, "tests", tag, "checkpoints"))) if rc == 0 else []
    if rc != 0 or not cks:
        report_fail(f"config_{tag}", f"train exited {rc}: {out.strip()[-300:]}")
        return
    last = os.path.join(tmp, "tests", tag, "checkpoints", cks[-1])
    adir, mdir = os.path.join(tmp, f"{tag}-adapters"), os.path.join(tmp, f"{tag}-merged")
    rc1, o1 = zt("export", "--checkpoint", last, "--out", adir)
    rc2, o2 = zt("export", "--checkpoint", last, "--out", mdir, "--merge")
    if rc1 or rc2:
        report_fail(f"config_{tag}", f"export exited {rc1}/{rc2}: {(o1 + o2).strip()[-300:]}")
        return
    # adapter_config.json, every field
    cfg = json.load(open(os.path.join(adir, "adapter_config.json")))
    mods = lora["modules"]
    want = dict(peft_type="LORA", task_type="CAUSAL_LM", r=lora["r"], lora_alpha=lora["alpha"],
                lora_dropout=lora["dropout"], use_rslora=lora["rslora"], fan_in_fan_out=family == "gpt2", bias="none")
    problems = [f"{k} = {cfg.get(k)!r}, the run's {v!r}" for k, v in want.items()
                if not (cfg.get(k) == v and type(cfg.get(k)) is type(v) or (isinstance(v, float) and cfg.get(k) == v))]
    if sorted(cfg.get("target_modules", [])) != sorted(mods):
        problems.append(f"target_modules {cfg.get('target_modules')} != {sorted(mods)}")
    prefix = "base_model.model.transformer.h" if family == "gpt2" else "base_model.model.model.layers"
    want_names = {f"{prefix}.{l}.{m}.lora_{x}.weight" for l in range(2) for m in mods for x in "AB"}
    with safe_open(os.path.join(adir, "adapter_model.safetensors"), "pt") as f:
        names = set(f.keys())
    if names != want_names:
        problems.append(f"adapter tensors {sorted(names - want_names)[:3]} unexpected, {sorted(want_names - names)[:3]} missing")
    if problems:
        report_fail(f"config_{tag}", "; ".join(problems))
    else:
        report_pass(f"config_{tag}", f"peft_type, task_type, r {lora['r']}, lora_alpha {lora['alpha']:g}, lora_dropout "
                    f"{lora['dropout']:g}, use_rslora {str(lora['rslora']).lower()}, fan_in_fan_out "
                    f"{str(family == 'gpt2').lower()}, bias, target_modules {sorted(mods)}, {len(names)} tensors as PEFT names them")
    # PEFT on the exported adapters == the merged export
    tokens = np.random.default_rng(3).integers(0, 256, size=(2, 24)).astype(np.int64)
    lb = logits(base, tokens)
    peft = PeftModel.from_pretrained(base_model(family, 7).from_pretrained(base_dir), adir)
    peft.eval()
    lp = logits(peft, tokens)
    lm = logits(AutoModelForCausalLM.from_pretrained(mdir), tokens)
    r, moved = rel_err(lp, lm), rel_err(lm, lb)
    if r <= 1e-5 and moved > 1e-4:
        report_pass(f"peft_{tag}", f"PeftModel on the exported adapters == the merged export: rel {r:.1e}; the adapters "
                    f"moved the logits by rel {moved:.1e}")
    else:
        report_fail(f"peft_{tag}", f"PEFT vs merged rel {r:.2e} (limit 1e-5), merged vs base rel {moved:.2e} (> 1e-4)")


def main():
    t0 = time.time()
    cases = [("gpt2_rslora", "gpt2", dict(r=4, alpha=8.0, rslora=True, dropout=0.0, targets="qkv,fcproj",
                                          modules=["attn.c_attn", "mlp.c_proj"])),
             ("llama_rslora", "llama", dict(r=4, alpha=8.0, rslora=True, dropout=0.0, targets="q_proj,v_proj,down_proj",
                                            modules=["self_attn.q_proj", "self_attn.v_proj", "mlp.down_proj"])),
             ("qwen2_all", "qwen2", dict(r=2, alpha=4.0, rslora=False, dropout=0.05, targets="all",
                                         modules=["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                                  "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"]))]
    with tempfile.TemporaryDirectory(prefix="zt_lexp_") as tmp:
        for tag, family, lora in cases:
            try:
                case(tag, family, lora, tmp)
            except Exception as e:  # a crash of the CLI or of the comparison fails the case
                report_fail(f"lora_export_{tag}", f"{type(e).__name__}: {e}")
    print(f"# test_lora_export: {time.time() - t0:.1f} s", file=sys.stderr)
    return 1 if common.failures else 0


if __name__ == "__main__":
    sys.exit(main())
