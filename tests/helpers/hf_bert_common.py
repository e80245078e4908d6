"""hf_bert_common.py — tiny transformers BertForMaskedLM / RobertaForMaskedLM models and their mapping to ztrain's
encoder table (src/iface/param_table.h), for the tests that compare ztrain's encoders with transformers.

sh: family ("bert" | "roberta"), L, H, C, I (intermediate_size), V, Vp, maxT (ztrain's block_size: the positions a
sequence may use; RoBERTa's max_position_embeddings is maxT + pad + 1), types (type_vocab_size), pad, sep (the token
that starts the next token type, -1 none), eps (layer_norm_eps)."""
import numpy as np
import torch
from transformers import BertConfig, BertForMaskedLM, RobertaConfig, RobertaForMaskedLM

from hf_llama_common import flat, grads, values  # noqa: F401 (the tests take them from here too)
from hf_ref_common import shape_args


def hf_config(sh):
    pos = sh["maxT"] + (sh["pad"] + 1 if sh["family"] == "roberta" else 0)
    kw = dict(vocab_size=sh["V"], hidden_size=sh["C"], num_hidden_layers=sh["L"], num_attention_heads=sh["H"],
              intermediate_size=sh["I"], hidden_act="gelu", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
              max_position_embeddings=pos, type_vocab_size=sh["types"], layer_norm_eps=sh["eps"],
              pad_token_id=sh["pad"])
    cfg = BertConfig(**kw) if sh["family"] == "bert" else RobertaConfig(**kw)
    cfg._attn_implementation = "eager"
    return cfg


def make_model(sh, seed):
    """a seeded random model, fp32; LayerNorm weights and biases away from 1 and 0, weights large enough that the
    attention is not uniform"""
    torch.manual_seed(seed)
    cls = BertForMaskedLM if sh["family"] == "bert" else RobertaForMaskedLM
    model = cls(hf_config(sh))
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "LayerNorm" in name or "layer_norm" in name:
                base = 1.0 if name.endswith("weight") else 0.0
                p.copy_(base + 0.1 * torch.randn(p.shape, generator=g))
            elif name.endswith("bias"):
                p.copy_(0.05 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
    model.eval()
    return model


def widened(model, sh):
    """a float64 copy of an fp32 model's exact weights (BERT's code computes in the model's dtype throughout)"""
    m64 = make_model(sh, 0).to(torch.float64)
    with torch.no_grad():
        for (_, p), (_, q) in zip(m64.named_parameters(), model.named_parameters()):
            p.copy_(q.to(torch.float64))
    m64.eval()
    return m64


def zt_sets(sh):
    s = ["model.family=" + sh["family"], f"model.intermediate_size={sh['I']}", f"model.norm_eps={sh['eps']!r}",
         f"model.type_vocab_size={sh['types']}", f"model.pad_id={sh['pad']}", f"model.sep_id={sh['sep']}",
         "mlm.mask_id=4"]
    return [x for kv in s for x in ("--set", kv)]


def dump_args(sh):
    return shape_args(sh) + zt_sets(sh)


def to_ztrain(get, sh):
    """{ztrain tensor name: array in ztrain's layout} from get(hf parameter name) (values or gradients)"""
    V, Vp, C = sh["V"], sh["Vp"], sh["C"]
    b = "bert." if sh["family"] == "bert" else "roberta."
    head = "cls.predictions." if sh["family"] == "bert" else "lm_head."
    ln = "transform.LayerNorm" if sh["family"] == "bert" else "layer_norm"
    dense = "transform.dense" if sh["family"] == "bert" else "dense"
    pad = lambda a: np.concatenate([a, np.zeros((Vp - V,) + a.shape[1:], a.dtype)])  # noqa: E731
    e = b + "embeddings."
    out = {"wte.weight": pad(get(e + "word_embeddings.weight")), "wpe.weight": get(e + "position_embeddings.weight"),
           "tte.weight": get(e + "token_type_embeddings.weight"), "emb_ln.weight": get(e + "LayerNorm.weight"),
           "emb_ln.bias": get(e + "LayerNorm.bias"),
           "head.ln.weight": get(head + ln + ".weight"), "head.ln.bias": get(head + ln + ".bias"),
           "head.dense.weight": get(head + dense + ".weight").T, "head.dense.bias": get(head + dense + ".bias"),
           "head.bias": pad(get(head + "bias"))}
    for l in range(sh["L"]):
        p = f"{b}encoder.layer.{l}."
        a = p + "attention."
        out[f"h.{l}.attn.c_attn.weight"] = np.concatenate([get(a + "self." + x + ".weight")
                                                           for x in ("query", "key", "value")]).T
        out[f"h.{l}.attn.c_attn.bias"] = np.concatenate([get(a + "self." + x + ".bias") for x in ("query", "key", "value")])
        out[f"h.{l}.attn.c_proj.weight"] = get(a + "output.dense.weight").T
        out[f"h.{l}.attn.c_proj.bias"] = get(a + "output.dense.bias")
        out[f"h.{l}.ln_1.weight"] = get(a + "output.LayerNorm.weight")
        out[f"h.{l}.ln_1.bias"] = get(a + "output.LayerNorm.bias")
        out[f"h.{l}.mlp.c_fc.weight"] = get(p + "intermediate.dense.weight").T
        out[f"h.{l}.mlp.c_fc.bias"] = get(p + "intermediate.dense.bias")
        out[f"h.{l}.mlp.c_proj.weight"] = get(p + "output.dense.weight").T
        out[f"h.{l}.mlp.c_proj.bias"] = get(p + "output.dense.bias")
        out[f"h.{l}.ln_2.weight"] = get(p + "output.LayerNorm.weight")
        out[f"h.{l}.ln_2.bias"] = get(p + "output.LayerNorm.bias")
    return out


def token_types(tok, sh):
    """ztrain's token types: the number of sep tokens before each position, at most types - 1"""
    if sh["sep"] < 0 or sh["types"] <= 1:
        return np.zeros_like(tok)
    before = np.cumsum(tok == sh["sep"], axis=1) - (tok == sh["sep"])
    return np.minimum(before, sh["types"] - 1)


def mlm_batches(n, B, T, sh, seed, mask_id=4):
    """n masked-LM batches (tokens, targets), (B, T) int32: sequences of a learnable kind (a random next-token map
    with noise) framed by a sep token in the middle, the last row right-padded; about 25% of the real positions are
    selected (at least one per row), 80% of them replaced by mask_id, 10% by a random token; targets the original
    tokens there, -1 elsewhere"""
    rng = np.random.default_rng(seed)
    V = sh["V"]
    lo = 5  # ids below are the specials (pad, sep, mask, ...)
    nxt = rng.integers(lo, V, size=V)
    out = []
    for _ in range(n):
        tok = np.empty((B, T), dtype=np.int64)
        tok[:, 0] = rng.integers(lo, V, size=B)
        for t in range(1, T):
            noise = rng.random(B) < 0.2
            tok[:, t] = np.where(noise, rng.integers(lo, V, size=B), nxt[tok[:, t - 1]])
        if sh["sep"] >= 0:
            tok[:, T // 2] = sh["sep"]
        real = np.ones((B, T), dtype=bool)
        if B > 1:
            real[-1, T - T // 3:] = False
            tok[-1, T - T // 3:] = sh["pad"]
        sel = (rng.random((B, T)) < 0.25) & real & (tok != sh["sep"])
        for b in range(B):
            if not sel[b].any():
                sel[b, 1] = True
        tgt = np.where(sel, tok, -1)
        u = rng.random((B, T))
        inp = tok.copy()
        inp[sel & (u < 0.8)] = mask_id
        rnd = sel & (u >= 0.8) & (u < 0.9)
        inp[rnd] = rng.integers(lo, V, size=int(rnd.sum()))
        out.append((inp.astype(np.int32), tgt.astype(np.int32)))
    return out


def hf_mlm_loss(model, tok, tgt, sh, reduction="mean"):
    """transformers' MLM loss (cross-entropy over the targets >= 0), with the attention mask of the padding and
    ztrain's token types; RoBERTa's positions are its own (from the padding)"""
    ids = torch.from_numpy(tok.astype(np.int64))
    am = (ids != sh["pad"]).long()
    tt = torch.from_numpy(token_types(tok, sh).astype(np.int64))
    logits = model(input_ids=ids, attention_mask=am, token_type_ids=tt).logits
    labels = torch.from_numpy(tgt.astype(np.int64))
    labels = torch.where(labels < 0, torch.full_like(labels, -100), labels)
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),
                                             ignore_index=-100, reduction=reduction)
    return loss, logits
