#!/usr/bin/env python3
"""test_qlora_llama.py — QLoRA on a Llama base, against an independent quantiser, and sampling a LoRA checkpoint.

Run from the repository root with the reference venv: .venv-ref/bin/python tests/e2e/test_qlora_llama.py
Needs ./ztrain. PASS/FAIL lines; exits non-zero on a failure.

A small Llama (grouped-query attention, SwiGLU, untied head) is trained 6 steps on the tiny data; its checkpoint is
the base. For each of nf4, nf4_dq and int8:
  qlora_<fmt>   8 steps of QLoRA (lora.quant = fmt, PEFT-named targets, dropout) are bit-identical (every loss, the
                adapters' params_hash) to plain LoRA on a copy of the base whose four fused linear weights per block
                were replaced by tests/e2e/test_quant.py's numpy quantise-dequantise of that format: ztrain's QLoRA is
                LoRA on exactly the paper's / bitsandbytes' dequantised weights, and LoRA on the Llama family is
                checked against PEFT by tests/e2e/test_lora_llama.py. The first loss differs from the fp32 base's
                (the quantisation is real) by less than 1%.
  sample_lora   `ztrain sample` of the QLoRA checkpoint (the adapters merged into the dequantised base, decoded with
                the KV cache): greedy twice gives the same 16 tokens, and they differ from the base's own greedy
                tokens only if the adapters moved the model (reported).
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "helpers"))
sys.path.insert(0, HERE)
import hf_ref_common as common  # noqa: E402
from hf_ref_common import REPO, report_fail, report_pass  # noqa: E402

common.require_imports("qlora_llama_imports", "numpy/h5py", "create the venv with scripts/setup-venv.sh",
                       extra=("h5py",))
import h5py  # noqa: E402
import numpy as np  # noqa: E402
import test_quant as tq  # noqa: E402  (its numpy reference quantisers)

ZT = os.path.join(REPO, "ztrain")
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", ZTRAIN_TEST_SGEMM_N="256")
LLAMA = ["model.family=llama", "model.n_head=4", "model.n_kv_head=2", "model.intermediate_size=96"]
LIN = ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")


def zt(*args):
    p = subprocess.run([ZT, *args], cwd=REPO, env=ENV, capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout + p.stderr


def train(tmp, name, *sets):
    s = [*LLAMA, "train.warmup_steps=0", f"run.root={tmp}", f"run.name={name}", "eval.every=0", *sets]
    rc, out = zt("train", "-c", "inputs/tiny.cfg", *[x for kv in s for x in ("--set", kv)])
    losses = [float(x) for x in re.findall(r"^step \d+/\d+ \| loss ([0-9.]+)", out, re.M)]
    h = re.search(r"params_hash sha256:(\w+)", out)
    return rc, out, losses, h.group(1) if h else None


def main():
    t0 = time.time()
    if not os.path.exists(os.path.join(REPO, "data", "tiny", "train.bin")):
        subprocess.run(["/usr/bin/python3", "tests/helpers/make_data.py", "data/tiny", "256", "40000"], cwd=REPO,
                       check=True, capture_output=True)
    with tempfile.TemporaryDirectory(prefix="zt_qll_") as tmp:
        rc, out, _, _ = train(tmp, "base", "train.steps=6")
        cks = sorted(os.listdir(os.path.join(tmp, "tests", "base", "checkpoints"))) if rc == 0 else []
        if not cks:
            report_fail("qlora_base", f"training the base exited {rc}: {out.strip()[-300:]}")
            return 1
        base = os.path.join(tmp, "tests", "base", "checkpoints", cks[-1])
        _, _, fp32_losses, _ = train(tmp, "lora_fp32", f"lora.enabled=true", f"lora.base={base}", "lora.rank=4",
                                     "train.steps=8", "lora.targets=q_proj,v_proj,gate_proj,down_proj")
        lora = ["lora.enabled=true", "lora.rank=4", "lora.alpha=8", "lora.dropout=0.1",
                "lora.targets=q_proj,v_proj,gate_proj,down_proj", "train.steps=8"]
        for fmt in ("nf4", "nf4_dq", "int8"):
            qbase = os.path.join(tmp, f"base_{fmt}.h5")
            shutil.copy(base, qbase)
            with h5py.File(qbase, "r+") as f:
                for l in range(2):
                    for mod in LIN:
                        ds = f[f"model/h.{l}.{mod}.weight"]
                        w = ds[...].astype(np.float32)
                        ds[...] = tq.ref(fmt, w.reshape(-1), w.shape[0], w.shape[1])[1].reshape(w.shape)
            rq, oq, lq, hq = train(tmp, f"q_{fmt}", *lora, f"lora.base={base}", f"lora.quant={fmt}")
            rr, orr, lr_, hr = train(tmp, f"ref_{fmt}", *lora, f"lora.base={qbase}")
            d0 = abs(lq[0] - fp32_losses[0]) / fp32_losses[0] if lq and fp32_losses else -1
            if rq == 0 and rr == 0 and len(lq) == 8 and lq == lr_ and hq == hr and 0 < d0 < 0.01:
                report_pass(f"qlora_{fmt}", f"8 losses and the adapters' params_hash bit-identical to LoRA on the "
                            f"reference-dequantised base ({hq[:16]}...); first loss {d0:.2g} (rel) from the fp32 base's")
            else:
                report_fail(f"qlora_{fmt}", f"rc {rq}/{rr}, losses {lq[:3]} vs {lr_[:3]}, hash {hq} vs {hr}, d0 {d0}; "
                            f"{(oq + orr).strip()[-200:]}")
        qck = sorted(os.listdir(os.path.join(tmp, "tests", "q_nf4_dq", "checkpoints")))
        qck = os.path.join(tmp, "tests", "q_nf4_dq", "checkpoints", qck[-1]) if qck else ""
        greedy = ["--tokenizer", "none", "--prompt", "1 2 3", "--tokens", "16", "--top-k", "1"]
        outs = [zt("sample", "--checkpoint", ck, *greedy) for ck in (qck, qck, base)]
        toks = [next((ln for ln in o.splitlines() if ln.strip() and all(w.isdigit() for w in ln.split())), None)
                for _, o in outs]
        if all(rc == 0 for rc, _ in outs) and toks[0] and toks[0] == toks[1]:
            report_pass("sample_lora", f"greedy from the QLoRA checkpoint twice: {toks[0]}; the base's: {toks[2]} "
                        f"({'differs' if toks[0] != toks[2] else 'same'})")
        else:
            report_fail("sample_lora", f"{[rc for rc, _ in outs]}: {toks}; {outs[0][1].strip()[-200:]}")
    print(f"# test_qlora_llama: {time.time() - t0:.1f} s", file=sys.stderr)
    return 1 if common.failures else 0


if __name__ == "__main__":
    sys.exit(main())
