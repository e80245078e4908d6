"""hf_llama_common.py — what the Llama-family reference tests share (not a test itself): transformers' Llama,
Mistral and Qwen2 models made tiny and seeded, their float64 twins with transformers' fp32 islands made float64
(RMSNorm's upcast, the eager softmax's dtype=float32, the rotary frequencies and angles), and the mapping of their
parameters (or gradients) onto ztrain's table (the q|k|v and gate|up projections fused, linears as (in, out), the
embedding and LM head padded to Vp rows). Used by tests/e2e/test_hf_llama.py and tests/e2e/test_lora_llama.py.
"""
import math
import types

import numpy as np
import torch
import torch.nn.functional as F
from transformers import (LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM, Qwen2Config,
                          Qwen2ForCausalLM)

from hf_ref_common import shape_args


_softmax = F.softmax


def _softmax64(x, dim=None, _stacklevel=3, dtype=None):
    """transformers' eager attention asks for dtype=float32: in a float64 model keep float64"""
    if dtype == torch.float32 and x.dtype == torch.float64:
        dtype = torch.float64
    return _softmax(x, dim=dim, dtype=dtype)


torch.nn.functional.softmax = _softmax64


def _rms_forward64(self, x):
    """RMSNorm without its fp32 upcast (LlamaRMSNorm.forward computes in float32 whatever the dtype)"""
    return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon))


def inv_freq64(cfg):
    """transformers' rotary frequencies (default and rope_type llama3) in float64"""
    hs = cfg.hidden_size // cfg.num_attention_heads
    inv = 1.0 / (cfg.rope_theta ** (torch.arange(0, hs, 2, dtype=torch.float64) / hs))
    rs = cfg.rope_scaling
    if rs and rs.get("rope_type", rs.get("type")) == "llama3":
        factor, lo, hi, orig = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"], rs["original_max_position_embeddings"]
        wavelen = 2 * math.pi / inv
        low_wavelen, high_wavelen = orig / lo, orig / hi
        scaled = torch.where(wavelen > low_wavelen, inv / factor, inv)
        smooth = (orig / wavelen - lo) / (hi - lo)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
        inv = torch.where(medium, smoothed, scaled)
    return inv


def _rotary_forward64(self, x, position_ids=None, seq_len=None):
    """both interfaces of transformers 4.44: (x, position_ids) -> (B, T, hs) tables (Llama, Mistral), and
    (x, seq_len) -> (seq_len, hs) tables indexed by position later (Qwen2)"""
    inv = self.zt_inv64
    if position_ids is None:
        freqs = torch.arange(seq_len, dtype=torch.float64)[:, None] * inv[None, :]
    else:
        freqs = position_ids[:, :, None].to(torch.float64) * inv[None, None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


def make_f64(model):
    """model (already float64) with RMSNorm, rotary embeddings and the softmax computed in float64"""
    for mod in model.modules():
        cls = type(mod).__name__
        if cls.endswith("RMSNorm"):
            mod.forward = types.MethodType(_rms_forward64, mod)
        elif cls.endswith("RotaryEmbedding"):
            mod.zt_inv64 = inv_freq64(model.config)
            mod.forward = types.MethodType(_rotary_forward64, mod)
    return model


# ----------------------------------------------------------------------------------- the models

FAMILIES = {"llama": (LlamaConfig, LlamaForCausalLM), "mistral": (MistralConfig, MistralForCausalLM),
            "qwen2": (Qwen2Config, Qwen2ForCausalLM)}


def hf_config(sh):
    cfg_cls, _ = FAMILIES[sh["family"]]
    kw = dict(vocab_size=sh["V"], hidden_size=sh["C"], intermediate_size=sh["I"], num_hidden_layers=sh["L"],
              num_attention_heads=sh["H"], num_key_value_heads=sh["KV"], max_position_embeddings=sh["maxT"],
              rms_norm_eps=sh["eps"], rope_theta=sh["theta"], tie_word_embeddings=False, hidden_act="silu",
              attention_dropout=0.0, rope_scaling=sh.get("rope_scaling"))
    if sh["family"] == "llama":
        kw.update(attention_bias=False, mlp_bias=False)
    elif sh["family"] == "mistral":
        kw.update(sliding_window=None)
    else:
        kw.update(use_sliding_window=False)
    cfg = cfg_cls(**kw)
    cfg._attn_implementation = "eager"
    return cfg


def make_model(sh, seed, dtype=torch.float32):
    torch.manual_seed(seed)
    model = FAMILIES[sh["family"]][1](hf_config(sh))
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            elif name.endswith("bias"):
                p.copy_(0.05 * torch.randn(p.shape, generator=g))
            else:
                std = 0.04 if ("o_proj" in name or "down_proj" in name) else 0.1
                p.copy_(std * torch.randn(p.shape, generator=g))
    if dtype != torch.float32:
        model = make_f64(model.to(dtype))
    model.eval()
    return model


def widened(model, sh):
    """a float64 copy (with make_f64) of an fp32 model's exact weights"""
    m64 = make_model(sh, 0, torch.float64)
    with torch.no_grad():
        for (_, p), (_, q) in zip(m64.named_parameters(), model.named_parameters()):
            p.copy_(q.to(torch.float64))
    return m64


def zt_sets(sh):
    s = ["model.family=" + sh["family"], f"model.n_kv_head={sh['KV']}", f"model.intermediate_size={sh['I']}",
         f"model.norm_eps={sh['eps']!r}", f"model.rope_theta={sh['theta']!r}"]
    rs = sh.get("rope_scaling")
    if rs:
        s += ["model.rope_scaling=llama3", f"model.rope_factor={rs['factor']!r}",
              f"model.rope_low_freq_factor={rs['low_freq_factor']!r}",
              f"model.rope_high_freq_factor={rs['high_freq_factor']!r}",
              f"model.rope_original_max_position={rs['original_max_position_embeddings']}"]
    return [x for kv in s for x in ("--set", kv)]


def dump_args(sh):
    return shape_args(sh) + zt_sets(sh)


def to_ztrain(get, sh):
    """{ztrain tensor name: array in ztrain's layout} from get(hf parameter name) (values or gradients)"""
    V, Vp, C = sh["V"], sh["Vp"], sh["C"]
    pad = lambda a: np.concatenate([a, np.zeros((Vp - V, C), a.dtype)])  # noqa: E731
    out = {"wte.weight": pad(get("model.embed_tokens.weight")), "ln_f.weight": get("model.norm.weight"),
           "lm_head.weight": pad(get("lm_head.weight"))}
    for l in range(sh["L"]):
        p = f"model.layers.{l}."
        a = p + "self_attn."
        out[f"h.{l}.ln_1.weight"] = get(p + "input_layernorm.weight")
        out[f"h.{l}.attn.c_attn.weight"] = np.concatenate([get(a + x + "_proj.weight") for x in "qkv"]).T
        if sh["family"] == "qwen2":
            out[f"h.{l}.attn.c_attn.bias"] = np.concatenate([get(a + x + "_proj.bias") for x in "qkv"])
        out[f"h.{l}.attn.c_proj.weight"] = get(a + "o_proj.weight").T
        out[f"h.{l}.ln_2.weight"] = get(p + "post_attention_layernorm.weight")
        out[f"h.{l}.mlp.c_fc.weight"] = np.concatenate([get(p + "mlp.gate_proj.weight"), get(p + "mlp.up_proj.weight")]).T
        out[f"h.{l}.mlp.c_proj.weight"] = get(p + "mlp.down_proj.weight").T
    return out


def values(model):
    ps = dict(model.named_parameters())
    return lambda n: ps[n].detach().to(torch.float64).numpy()


def grads(model):
    ps = dict(model.named_parameters())
    return lambda n: ps[n].grad.detach().to(torch.float64).numpy()


def flat(d, ts, total):
    w = np.zeros(total, dtype=np.float32)
    for name, o, numel, _, _ in ts:
        w[o:o + numel] = d[name].astype(np.float32).ravel()
    return w
