#!/usr/bin/env python3
"""torch_gpt2_gpu.py — the PyTorch peer of benchmarks/bench_gpu_peers.sh: GPT-2 trained on one GPU in bf16
with what PyTorch offers for speed; prints one JSON line (median ms/step, tokens/s, GPU memory).

    python3 benchmarks/torch_gpt2_gpu.py [--n_layer 12 --n_head 12 --n_embd 768 --vocab 50257 --padded_vocab 50304]
        [--B 16] [--T 1024] [--steps 30] [--warmup 5] [--data build/bench-gpu-data/train.bin] [--no-compile]
        [--device cuda|cpu] [--precision bf16|fp32]
    CPU check: --device cpu --n_layer 2 --n_embd 64 --n_head 2 --T 32 --B 2 --steps 3 --no-compile

Model (written here, the shapes of ztrain's inputs/gpt2-*.cfg): token embedding of the padded vocabulary
(50304 rows, the LM head tied to it), learned positions, pre-LayerNorm blocks (LayerNorm eps 1e-5, fused
QKV linear, causal attention through F.scaled_dot_product_attention(is_causal=True), output projection;
MLP 4C with GELU tanh), final LayerNorm; biases everywhere as GPT-2; no dropout. Init N(0, 0.02), the two
residual projections N(0, 0.02 / sqrt(2 L)), biases 0, LayerNorm 1/0. Loss: cross-entropy over the B x T
positions (logits of the padded vocabulary, targets below the real vocabulary).
Precision bf16: parameters, gradients and AdamW state in fp32 (the fp32 master weights of llm.c and ztrain),
the forward and backward under torch.autocast(bfloat16): matmuls and attention in bf16 on tensor cores,
reductions (LayerNorm, softmax, cross-entropy) in fp32 as autocast decides. fp32: no autocast, TF32 off.
torch.compile(model) in its default mode unless --no-compile. Optimizer torch.optim.AdamW(fused=True) (lr
6e-4, betas 0.9/0.95, eps 1e-8, weight decay 0.1 on 2-D weights only, as ztrain), constant learning rate;
clip_grad_norm_(1.0) every step. Data: consecutive B x T + 1 windows of a ztrain token shard (--data),
else seeded random tokens; all steps' batches are put on the device before timing.
Timing: every step ends with torch.cuda.synchronize(); the first --warmup steps (compilation, allocator,
cuBLAS heuristics) are left out; tokens/s = B x T / median ms. Memory: torch.cuda.max_memory_allocated and
max_memory_reserved, and nvidia-smi's memory.used of this GPU read at the end of the run (the process still
holding its memory; CUDA context included).
Where this torch lacks scaled_dot_product_attention (torch < 2.0), attention is the explicit masked softmax
and the JSON says so ("attention": "manual"); without torch.compile (torch < 2.0), --no-compile is implied
and the JSON says "compile": false.
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n_layer", type=int, default=12)
    ap.add_argument("--n_head", type=int, default=12)
    ap.add_argument("--n_embd", type=int, default=768)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--padded_vocab", type=int, default=0, help="default: vocab rounded up to a multiple of 128")
    ap.add_argument("--block_size", type=int, default=1024)
    ap.add_argument("--B", type=int, default=16)
    ap.add_argument("--T", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5, help="steps left out of the timing (at most steps - 1)")
    ap.add_argument("--data", default="", help="a ztrain token shard (2- or 4-byte tokens); default random tokens")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--precision", choices=["bf16", "fp32"], default="bf16")
    ap.add_argument("--no-compile", dest="compile", action="store_false")
    ap.add_argument("--lr", type=float, default=6e-4)
    ap.add_argument("--weight_decay", type=float, default=0.1)
    ap.add_argument("--grad_clip", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=1337)
    a = ap.parse_args(argv)
    if a.padded_vocab <= 0:
        a.padded_vocab = (a.vocab + 127) // 128 * 128
    if a.padded_vocab < a.vocab:
        ap.error(f"--padded_vocab {a.padded_vocab} < --vocab {a.vocab}")
    if a.n_embd % a.n_head:
        ap.error(f"--n_embd {a.n_embd} is not a multiple of --n_head {a.n_head}")
    if a.T > a.block_size:
        ap.error(f"--T {a.T} > --block_size {a.block_size}")
    if a.steps < 2:
        ap.error("--steps must be at least 2 (one left out of the timing, one timed)")
    a.warmup = max(0, min(a.warmup, a.steps - 1))
    return a


def build_model(torch, L, H, C, Vp, block, use_sdpa):
    nn, F = torch.nn, torch.nn.functional

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = nn.Linear(C, 3 * C)
            self.c_proj = nn.Linear(C, C)
            if not use_sdpa:
                self.register_buffer("mask", torch.tril(torch.ones(block, block, dtype=torch.bool)), persistent=False)

        def forward(self, x):
            B, T, _ = x.shape
            q, k, v = self.c_attn(x).split(C, dim=2)
            q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))
            if use_sdpa:
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // H))
                att = att.masked_fill(~self.mask[:T, :T], float("-inf")).softmax(dim=-1)
                y = att @ v
            return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_fc = nn.Linear(C, 4 * C)
            self.c_proj = nn.Linear(4 * C, C)

        def forward(self, x):
            return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(C, eps=1e-5)
            self.attn = Attention()
            self.ln_2 = nn.LayerNorm(C, eps=1e-5)
            self.mlp = MLP()

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(Vp, C)
            self.wpe = nn.Embedding(block, C)
            self.h = nn.ModuleList(Block() for _ in range(L))
            self.ln_f = nn.LayerNorm(C, eps=1e-5)
            self.register_buffer("pos", torch.arange(block), persistent=False)
            for name, p in self.named_parameters():
                if p.dim() == 2:
                    std = 0.02 / math.sqrt(2 * L) if name.endswith("c_proj.weight") else 0.02
                    nn.init.normal_(p, mean=0.0, std=std)
                elif name.endswith(".bias"):
                    nn.init.zeros_(p)

        def forward(self, idx, targets):
            T = idx.shape[1]
            x = self.wte(idx) + self.wpe(self.pos[:T])
            for b in self.h:
                x = b(x)
            logits = F.linear(self.ln_f(x), self.wte.weight)  # the LM head tied to the token embedding
            return F.cross_entropy(logits.view(-1, logits.shape[-1]).float(), targets.reshape(-1))

    return GPT()


def load_tokens(np, path, n):
    """n tokens from the start of a ztrain shard (64-byte header, docs/data.md), repeated if it is shorter."""
    import struct
    with open(path, "rb") as f:
        h = f.read(64)
    if len(h) != 64 or h[:8] != b"ZTSHARD\0":
        sys.exit(f"torch_gpt2_gpu.py: {path}: not a ztrain shard")
    _version, width, vocab, _eot, count = struct.unpack_from("<IIIIQ", h, 8)
    dt = {2: "<u2", 4: "<u4"}.get(width)
    if dt is None or count == 0:
        sys.exit(f"torch_gpt2_gpu.py: {path}: {width}-byte tokens, {count} tokens")
    toks = np.memmap(path, dtype=dt, mode="r", offset=64, shape=(count,))
    reps = -(-n // count)
    return (np.tile(np.asarray(toks[:n]), reps) if reps > 1 else np.asarray(toks[:n])).astype(np.int64)[:n], vocab


def nvidia_smi_used_bytes(torch):
    """nvidia-smi's memory.used of the GPU this process runs on (by UUID where torch gives one, else the first of
    CUDA_VISIBLE_DEVICES, else 0), in bytes; None when nvidia-smi does not answer."""
    sels = []
    try:
        uuid = str(torch.cuda.get_device_properties(0).uuid)
        if uuid:
            sels.append(uuid if uuid.startswith(("GPU-", "MIG-")) else "GPU-" + uuid)
    except Exception:  # a torch without the uuid property
        pass
    sels.append(os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip() or "0")
    for sel in sels:
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", sel],
                                 capture_output=True, text=True, timeout=30)
            if out.returncode == 0 and out.stdout.strip():
                return int(float(out.stdout.split()[0]) * 2**20)
        except (OSError, ValueError, IndexError, subprocess.SubprocessError):
            pass
    return None


def main(argv=None):
    a = parse_args(argv)
    try:
        import numpy as np
        import torch
    except ImportError as e:
        sys.exit(f"torch_gpt2_gpu.py: cannot import torch/numpy ({e})")
    F = torch.nn.functional
    if a.device == "cuda" and not torch.cuda.is_available():
        sys.exit("torch_gpt2_gpu.py: torch.cuda.is_available() is False (use --device cpu for the CPU check)")
    dev = torch.device(a.device)
    torch.manual_seed(a.seed)
    if a.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False   # fp32 products stay fp32 (as ztrain); bf16 runs under autocast
        torch.backends.cudnn.allow_tf32 = False
    use_sdpa = hasattr(F, "scaled_dot_product_attention")
    use_compile = a.compile and hasattr(torch, "compile")
    L, H, C, V, Vp, B, T = a.n_layer, a.n_head, a.n_embd, a.vocab, a.padded_vocab, a.B, a.T

    # data: every step's batch on the device before timing
    n = a.steps * B * T + 1
    if a.data:
        toks, shard_vocab = load_tokens(np, a.data, n)
        if shard_vocab > V:
            sys.exit(f"torch_gpt2_gpu.py: {a.data}: vocab {shard_vocab} > --vocab {V}")
        data = torch.from_numpy(toks)
    else:
        data = torch.randint(0, V, (n,), generator=torch.Generator().manual_seed(a.seed))
    data = data.to(dev)
    # separate tensors (clones), not overlapping views of one buffer: aliased inputs would make torch.compile
    # build graphs around a synthetic base, and different offsets could make it recompile
    xs = [data[i * B * T:(i + 1) * B * T].view(B, T).clone() for i in range(a.steps)]
    ys = [data[i * B * T + 1:(i + 1) * B * T + 1].view(B, T).clone() for i in range(a.steps)]
    del data

    model = build_model(torch, L, H, C, Vp, a.block_size, use_sdpa).to(dev)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    nparams = sum(p.numel() for p in params)
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": a.weight_decay},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    opt_kw = dict(lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
    try:
        opt = torch.optim.AdamW(groups, fused=True, **opt_kw)
        opt_desc = "AdamW(fused=True)"
    except (TypeError, RuntimeError, ValueError) as e:  # a torch without fused AdamW (for this device)
        opt = torch.optim.AdamW(groups, **opt_kw)
        opt_desc = f"AdamW (fused unavailable: {str(e).splitlines()[0][:80]})"
    fwd = torch.compile(model) if use_compile else model
    if a.precision == "bf16":
        def autocast():
            return torch.autocast(device_type=a.device, dtype=torch.bfloat16)
    else:
        import contextlib

        def autocast():
            return contextlib.nullcontext()

    def sync():
        if a.device == "cuda":
            torch.cuda.synchronize()

    def step(i):
        with autocast():
            loss = fwd(xs[i], ys[i])
        loss.backward()
        if a.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(params, a.grad_clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    if a.device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    ms, losses = [], []
    t_start = time.perf_counter()
    for i in range(a.steps):
        sync()
        t0 = time.perf_counter()
        loss = step(i)
        sync()
        ms.append((time.perf_counter() - t0) * 1e3)
        losses.append(loss.item())
        print(f"step {i + 1}/{a.steps} loss {losses[-1]:.6f} {ms[-1]:.2f} ms", file=sys.stderr, flush=True)
    total_s = time.perf_counter() - t_start
    timed = ms[a.warmup:]
    med = statistics.median(timed)
    res = {
        "runner": "pytorch", "torch": torch.__version__, "device": a.device,
        "device_name": torch.cuda.get_device_name(0) if a.device == "cuda" else "cpu",
        "n_layer": L, "n_head": H, "n_embd": C, "vocab": V, "padded_vocab": Vp, "params": nparams,
        "B": B, "T": T, "steps": a.steps, "warmup": a.warmup, "timed_steps": len(timed),
        "precision": ("bf16 autocast, fp32 parameters/gradients/AdamW state" if a.precision == "bf16" else "fp32"),
        "compile": use_compile, "attention": "sdpa" if use_sdpa else "manual", "optimizer": opt_desc,
        "grad_clip": a.grad_clip, "data": a.data or "random",
        "ms_per_step": round(med, 4), "ms_min": round(min(timed), 4), "ms_max": round(max(timed), 4),
        "tokens_per_s": round(B * T / (med * 1e-3), 2), "first_step_ms": round(ms[0], 2), "total_s": round(total_s, 2),
        "loss_first": losses[0], "loss_last": losses[-1],
        "finite": all(math.isfinite(x) for x in losses),
    }
    if a.device == "cuda":
        res["max_memory_allocated_bytes"] = torch.cuda.max_memory_allocated()
        res["max_memory_reserved_bytes"] = torch.cuda.max_memory_reserved()
        res["nvidia_smi_used_bytes"] = nvidia_smi_used_bytes(torch)
    print(json.dumps(res), flush=True)
    return 0 if res["finite"] else 1


if __name__ == "__main__":
    sys.exit(main())
