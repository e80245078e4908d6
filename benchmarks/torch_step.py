#!/usr/bin/env python3
"""torch_step.py — the PyTorch side of the step benchmark: the same GPT-2 as a ztrain .cfg (n_layer,
n_head, n_embd, padded vocab, block_size), fp32, same B and T, timed forward + backward + global-norm
clipping + AdamW step; prints median ms/step and tokens/s (and --json for machines).

    .venv-ref/bin/python benchmarks/torch_step.py -c inputs/d6.cfg --B 8 --T 128 [--steps 10]
                                                  [--threads 2] [--impl hf|plain] [--json]

Model: Hugging Face transformers' GPT2LMHeadModel (GPT2Config with vocab_size = the padded vocab,
dropout 0, gelu_new, tied LM head) when transformers imports (the reference venv from
scripts/setup-venv.sh), else an equivalent plain torch module (--impl plain forces it; same
parameters and FLOPs, attention through an explicit causal mask as HF's eager path with torch 1.13).
Loss = cross_entropy(logits, targets) over all B*T positions (tokens and targets given separately,
as ztrain). Optimizer: torch.optim.AdamW (betas, eps, weight decay from the config; decay on 2-D
weights only, as ztrain), clip_grad_norm_ to train.grad_clip. Threads: torch.set_num_threads
(Debian's torch uses 1 thread unless told). One warm-up step, then --steps timed steps.
Kernels: the output names the BLAS the step ran (describe_blas() from blas_coretype.py: library, its
OpenBLAS core / MKL instruction set / BLIS arch, OPENBLAS_CORETYPE when set) and ATen's CPU capability;
`make bench` sets OPENBLAS_CORETYPE first when Debian's OpenBLAS misdetects the CPU (blas_coretype.py).
"""
import argparse
import json
import math
import os
import re
import resource
import subprocess
import sys
import time


def parse_cfg(path):
    """The model/train keys of a ztrain .cfg: from `ztrain config -c` (resolved: defaults + file) when
    ./ztrain exists, else from the file itself (libconfig groups, '#' and '//' comments)."""
    text = None
    zt = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "ztrain")
    if os.access(zt, os.X_OK):
        try:
            text = subprocess.run([zt, "config", "-c", path], capture_output=True, text=True, check=True,
                                  timeout=60).stdout
        except (subprocess.SubprocessError, OSError):
            text = None
    if text is None:
        with open(path) as f:
            text = f.read()
    text = re.sub(r"(#|//)[^\n]*", "", text)
    out = {}
    for group, body in re.findall(r"(\w+)\s*[=:]\s*\{([^}]*)\}", text):
        for key, val in re.findall(r"(\w+)\s*[=:]\s*([^;\n]+)", body):
            val = val.strip().rstrip(";").strip().strip('"')
            try:
                val = int(val.rstrip("L"))
            except ValueError:
                try:
                    val = float(val)
                except ValueError:
                    pass
            out[f"{group}.{key}"] = val
    need = ["model.n_layer", "model.n_head", "model.n_embd", "model.vocab_size"]
    missing = [k for k in need if k not in out]
    if missing:
        sys.exit(f"torch_step.py: {path}: missing {', '.join(missing)}")
    out.setdefault("model.block_size", 1024)
    vp = int(out.get("model.padded_vocab", 0) or 0)
    if vp <= 0:
        vp = (out["model.vocab_size"] + 127) // 128 * 128
    out["model.padded_vocab"] = vp
    return out


def build_plain(torch, L, H, C, Vp, block):
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(C, eps=1e-5)
            self.c_attn = nn.Linear(C, 3 * C)
            self.c_proj = nn.Linear(C, C)
            self.ln_2 = nn.LayerNorm(C, eps=1e-5)
            self.c_fc = nn.Linear(C, 4 * C)
            self.mlp_proj = nn.Linear(4 * C, C)
            self.register_buffer("mask", torch.tril(torch.ones(block, block, dtype=torch.bool)), persistent=False)

        def forward(self, x):
            B, T, _ = x.shape
            q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
            q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // H))
            att = att.masked_fill(~self.mask[:T, :T], float("-inf")).softmax(dim=-1)
            y = (att @ v).transpose(1, 2).reshape(B, T, C)
            x = x + self.c_proj(y)
            return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(Vp, C)
            self.wpe = nn.Embedding(block, C)
            self.h = nn.ModuleList(Block() for _ in range(L))
            self.ln_f = nn.LayerNorm(C, eps=1e-5)
            for p in self.parameters():
                if p.dim() == 2:
                    nn.init.normal_(p, std=0.02)

        def forward(self, idx):
            x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
            for b in self.h:
                x = b(x)
            return self.ln_f(x) @ self.wte.weight.t()   # tied LM head

    return GPT()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-c", "--config", required=True)
    ap.add_argument("--B", type=int, default=4)
    ap.add_argument("--T", type=int, default=64)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--impl", choices=["auto", "hf", "plain"], default="auto")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    try:
        import torch
        import torch.nn.functional as F
    except ImportError as e:
        sys.exit(f"torch_step.py: cannot import torch ({e}); use /usr/bin/python3 with Debian's python3-torch "
                 "or .venv-ref/bin/python (scripts/setup-venv.sh)")
    cfg = parse_cfg(a.config)
    L, H, C = cfg["model.n_layer"], cfg["model.n_head"], cfg["model.n_embd"]
    V, Vp, block = cfg["model.vocab_size"], cfg["model.padded_vocab"], cfg["model.block_size"]
    B, T = a.B, a.T
    if T > block:
        sys.exit(f"torch_step.py: --T {T} > block_size {block}")
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    impl = a.impl
    if impl in ("auto", "hf"):
        try:
            import transformers
            from transformers import GPT2Config, GPT2LMHeadModel
            transformers.logging.set_verbosity_error()
            impl = "hf"
        except ImportError:
            if a.impl == "hf":
                sys.exit("torch_step.py: --impl hf needs transformers (scripts/setup-venv.sh, then .venv-ref/bin/python)")
            impl = "plain"
    if impl == "hf":
        conf = GPT2Config(vocab_size=Vp, n_positions=block, n_embd=C, n_layer=L, n_head=H,
                          activation_function="gelu_new", resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                          layer_norm_epsilon=1e-5, tie_word_embeddings=True, use_cache=False)
        model = GPT2LMHeadModel(conf)
        model_desc = f"transformers {transformers.__version__} GPT2LMHeadModel"

        def logits_of(idx):
            return model(input_ids=idx, use_cache=False).logits
    else:
        model = build_plain(torch, L, H, C, Vp, block)
        model_desc = "plain torch module"

        def logits_of(idx):
            return model(idx)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    nparams = sum(p.numel() for p in params)
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    lr = float(cfg.get("train.lr", 6e-4))
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": float(cfg.get("train.weight_decay", 0.1))},
                             {"params": no_decay, "weight_decay": 0.0}], lr=lr,
                            betas=(float(cfg.get("train.beta1", 0.9)), float(cfg.get("train.beta2", 0.95))),
                            eps=float(cfg.get("train.eps", 1e-8)))
    clip = float(cfg.get("train.grad_clip", 1.0))
    g = torch.Generator().manual_seed(5)
    idx = torch.randint(0, V, (B, T), generator=g)
    tgt = torch.randint(0, V, (B, T), generator=g)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(logits_of(idx).view(-1, Vp), tgt.view(-1))
        loss.backward()
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(params, clip)
        opt.step()
        return loss.item()

    step()   # warm-up: allocator, optimizer state
    ms = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        step()
        ms.append((time.perf_counter() - t0) * 1e3)
    ms.sort()
    med = ms[len(ms) // 2]
    tok_s = B * T / (med * 1e-3)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    try:   # the kernels the step ran (blas_coretype.py sits next to this file)
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from blas_coretype import blas_summary, describe_blas
        blas = describe_blas(torch)
        blas_desc = blas_summary(blas)
    except Exception as e:   # naming the kernels must not cost the benchmark
        blas, blas_desc = None, f"? ({e})"
    res = {"config": a.config, "impl": impl, "model": model_desc, "torch": torch.__version__, "params": nparams,
           "B": B, "T": T, "threads": torch.get_num_threads(), "steps": a.steps, "ms_per_step": round(med, 4),
           "ms_min": round(ms[0], 4), "ms_max": round(ms[-1], 4), "tokens_per_s": round(tok_s, 2),
           "peak_rss_bytes": rss, "blas": blas, "blas_desc": blas_desc}
    if a.json:
        print(json.dumps(res))
    else:
        print(f"# torch step benchmark: {a.config}, {res['threads']} thread{'s' if res['threads'] != 1 else ''}, "
              f"torch {torch.__version__}, {model_desc}, fp32, AdamW")
        print(f"# BLAS: {blas_desc}; ATen CPU capability {blas['torch_cpu_capability'] if blas else '?'}")
        print(f"# {'params':>10} {'B':>4} {'T':>5} {'ms/step':>9} {'min':>9} {'max':>9} {'tokens/s':>9} {'rss_MB':>9}")
        print(f"# {'':>10} {'':>4} {'':>5} {'(ms)':>9} {'(ms)':>9} {'(ms)':>9} {'(tok/s)':>9} {'(MB)':>9}")
        print(f"  {nparams:>10} {B:>4} {T:>5} {med:>9.1f} {ms[0]:>9.1f} {ms[-1]:>9.1f} {tok_s:>9.1f} "
              f"{rss / 2**20:>9.0f}")


if __name__ == "__main__":
    main()
