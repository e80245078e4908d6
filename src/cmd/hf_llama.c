/* hf_llama.c — the Llama family in Hugging Face's layout (see hf_llama.h): LlamaForCausalLM,
 * MistralForCausalLM and Qwen2ForCausalLM directories <-> ztrain's model.* keys and parameter table.
 *
 * Tensors (ztrain's layout: iface/param_table.h; tests/e2e/test_hf_llama.py's to_ztrain):
 *   wte.weight (Vp, C)              = model.embed_tokens.weight (V, C) + Vp - V zero rows
 *   lm_head.weight (Vp, C)          = lm_head.weight (V, C) + zero rows        [tie_word_embeddings false]
 *   h.l.ln_1.weight / ln_2.weight   = model.layers.l.input_layernorm / post_attention_layernorm .weight
 *   h.l.attn.c_attn.weight (C, Q)   = [q_proj; k_proj; v_proj].weight^T   (Q = (NH + 2 NKV) hs)
 *   h.l.attn.c_attn.bias (Q)        = [q_proj; k_proj; v_proj].bias        [Qwen2]
 *   h.l.attn.c_proj.weight (C, C)   = o_proj.weight^T
 *   h.l.mlp.c_fc.weight (C, 2I)     = [gate_proj; up_proj].weight^T
 *   h.l.mlp.c_proj.weight (I, C)    = down_proj.weight^T
 *   ln_f.weight                     = model.norm.weight
 * Import also accepts model.layers.l.self_attn.rotary_emb.inv_freq buffers (older transformers saved them; ztrain
 * recomputes them from rope_theta) and, with tie_word_embeddings true, an lm_head.weight equal to the embedding.
 * Any other tensor is an error naming it: nothing is dropped silently.
 *
 * config.json -> model.*: hidden_size -> n_embd, num_hidden_layers -> n_layer, num_attention_heads -> n_head,
 * num_key_value_heads -> n_kv_head, intermediate_size, vocab_size (padded_vocab by ztrain's rule unless -c/--set
 * give one), max_position_embeddings -> block_size, rms_norm_eps -> norm_eps, rope_theta, tie_word_embeddings ->
 * tie_embeddings, rope_scaling {rope_type (or type) "llama3", factor, low_freq_factor, high_freq_factor,
 * original_max_position_embeddings} -> rope_scaling = llama3 and its four keys. The family comes from
 * model_type (else architectures); architectures, when given, must be the family's ...ForCausalLM.
 *
 * Decisions (each refusal is exit 2 with one line naming the field; nothing is written):
 *  - hidden_size, num_hidden_layers, num_attention_heads, intermediate_size and vocab_size are required
 *    (save_pretrained always writes them); an absent optional field takes transformers 4.44's default for the class:
 *    max_position_embeddings 2048 / 131072 / 32768 (Llama / Mistral / Qwen2), num_key_value_heads = heads / 8 / 32,
 *    rms_norm_eps 1e-6, rope_theta 10000, hidden_act silu, tie_word_embeddings false, Mistral's sliding_window 4096.
 *  - hidden_act: "silu" (or "swish", the same function in transformers); anything else is refused.
 *  - head_dim: accepted when null or hidden_size / num_attention_heads; another value is refused.
 *  - rope_scaling: null or rope_type "default" = none; "llama3" on LlamaForCausalLM; any other type (linear, dynamic,
 *    yarn, longrope, ...) or any other key inside it is refused. On Mistral and Qwen2 any scaling is refused
 *    (transformers 4.44's classes ignore the field; newer ones apply it: either way not one model).
 *  - Llama's attention_bias and mlp_bias must be false (ztrain's llama has no biases there).
 *  - Mistral's sliding_window: null, or >= max_position_embeddings, is accepted: a window at least as long as every
 *    sequence ztrain can run (block_size = max_position_embeddings) never masks anything, so it is the same model;
 *    a shorter window is refused (ztrain's attention is full causal). Export writes null.
 *  - Qwen2's use_sliding_window must be false (then sliding_window and max_window_layers have no effect and are
 *    accepted); layer_types, when given, must all be "full_attention".
 *  - pretraining_tp (Llama) is accepted at any value: transformers then computes the same projections in slices and
 *    sums them, the same function (only the rounding order differs). Export writes 1.
 *  - attention_dropout is accepted at any value: dropout is training-time only and ztrain trains without it (as the
 *    GPT-2 import ignores attn_pdrop / resid_pdrop); the model's function is the same. Export writes 0.0.
 *  - quantization_config (pre-quantised weights), pruned_heads other than {} and every field this file does not know
 *    are refused by name: an unknown field may change the model, and a silently different model is the one outcome
 *    ruled out. Fields that do not change the function (token ids, torch_dtype, transformers_version, use_cache,
 *    initializer_range, generation defaults and the other generic PretrainedConfig fields) are accepted;
 *    initializer_range becomes model.init_std (only an init setting), so that an export writes it back.
 *  - export: config.json as transformers 4.44 writes the class's fields; bos_token_id / eos_token_id are null (the
 *    checkpoint does not know its tokenizer's ids); a description the class cannot express (model.norm, position,
 *    mlp or bias overridden away from the family's, llama3 scaling outside Llama) is refused naming the key. */
#include "cmd/hf_llama.h"

#include <string.h>

#include "util/util.h"

/* ---------------------------------------------------------------- the families */

enum { FL = 1, FM = 2, FQ = 4, FALL = 7 };

typedef struct hf_family {
    const char *family;
    unsigned mask;   /* FL, FM or FQ: the fields it has */
    unsigned bias;   /* ZT_BIAS_*: ztrain's description */
    int max_pos;     /* transformers 4.44's default max_position_embeddings */
    int kv_default;  /* its default num_key_value_heads; 0 = num_attention_heads */
} hf_family;

static const hf_family families[] = {
    {"llama", FL, 0, 2048, 0},
    {"mistral", FM, 0, 131072, 8},
    {"qwen2", FQ, ZT_BIAS_QKV, 32768, 32},
};
#define N_FAMILIES ((int)(sizeof families / sizeof *families))

static const hf_family *family_named(const char *name) {
    for (int k = 0; k < N_FAMILIES; k++)
        if (strcmp(name, families[k].family) == 0) return &families[k];
    return NULL;
}

/* ---------------------------------------------------------------- config.json -> model.* */

/* the fields read below, by family */
static const struct { const char *key; unsigned fam; } model_keys[] = {
    {"architectures", FALL}, {"model_type", FALL}, {"hidden_size", FALL}, {"num_hidden_layers", FALL},
    {"num_attention_heads", FALL}, {"num_key_value_heads", FALL}, {"intermediate_size", FALL}, {"vocab_size", FALL},
    {"max_position_embeddings", FALL}, {"rms_norm_eps", FALL}, {"rope_theta", FALL}, {"rope_scaling", FALL},
    {"tie_word_embeddings", FALL}, {"hidden_act", FALL}, {"head_dim", FALL}, {"attention_dropout", FALL},
    {"pretraining_tp", FL}, {"attention_bias", FL}, {"mlp_bias", FL}, {"sliding_window", FM | FQ},
    {"use_sliding_window", FQ}, {"max_window_layers", FQ}, {"layer_types", FQ}};

typedef struct reader {
    zt_hf_reader j; /* config.json */
    const hf_family *f;
} reader;

static int known_key(const void *ctx, const char *key) {
    const hf_family *f = ctx;
    for (size_t i = 0; i < sizeof model_keys / sizeof *model_keys; i++)
        if (strcmp(key, model_keys[i].key) == 0) return (model_keys[i].fam & f->mask) != 0;
    return 0;
}

/* the model's sizes and scalars as config.json gives them */
typedef struct hf_cfg {
    int C, L, H, KV, I, V, T, tied;
    double eps, theta;
    int llama3;
    double factor, lo, hi;
    int orig;
} hf_cfg;

static int read_sizes(const reader *r, hf_cfg *h) {
    const zt_hf_reader *j = &r->j;
    if (zt_hf_get_int(j, "hidden_size", -1, 1, &h->C) || zt_hf_get_int(j, "num_hidden_layers", -1, 1, &h->L) ||
        zt_hf_get_int(j, "num_attention_heads", -1, 1, &h->H) ||
        zt_hf_get_int(j, "intermediate_size", -1, 1, &h->I) || zt_hf_get_int(j, "vocab_size", -1, 2, &h->V) ||
        zt_hf_get_int(j, "max_position_embeddings", r->f->max_pos, 1, &h->T))
        return 1;
    /* absent: the class's default; null: num_attention_heads (as the classes' __init__ do) */
    const zt_json *kv = zt_json_get(j->cj, "num_key_value_heads");
    const int kv_dflt = (kv && kv->type == ZT_JSON_NULL) || !r->f->kv_default ? h->H : r->f->kv_default;
    if (zt_hf_get_int(j, "num_key_value_heads", kv_dflt, 1, &h->KV)) return 1;
    if (zt_hf_get_num(j, "rms_norm_eps", 1e-6, 0, &h->eps) || zt_hf_get_num(j, "rope_theta", 10000.0, 0, &h->theta))
        return 1;
    if (zt_hf_get_bool(j, "tie_word_embeddings", 0, &h->tied)) return 1;
    int hd = 0;
    if (h->C % h->H) return zt_hf_bad(j, "hidden_size %d is not divisible by num_attention_heads %d", h->C, h->H);
    if (zt_hf_get_int(j, "head_dim", h->C / h->H, 1, &hd)) return 1;
    if (hd != h->C / h->H)
        return zt_hf_bad(j, "head_dim = %d: ztrain's heads are hidden_size / num_attention_heads = %d wide", hd,
                         h->C / h->H);
    return 0;
}

/* rope_scaling: null / default = none, llama3 (Llama only) with its four parameters, anything else refused */
static int read_rope_scaling(const reader *r, hf_cfg *h) {
    const zt_hf_reader *j = &r->j;
    const zt_json *rs = zt_json_get(j->cj, "rope_scaling");
    if (!rs || rs->type == ZT_JSON_NULL) return 0;
    if (rs->type != ZT_JSON_OBJ) return zt_hf_bad(j, "rope_scaling: expected null or an object");
    const zt_json *ty = zt_json_get(rs, "rope_type");
    if (!ty) ty = zt_json_get(rs, "type");
    if (!ty || ty->type != ZT_JSON_STR) return zt_hf_bad(j, "rope_scaling: has no rope_type");
    if (strcmp(ty->str, "default") == 0 && rs->n == 1) return 0;
    if (strcmp(ty->str, "llama3") != 0)
        return zt_hf_bad(j, "rope_scaling type \"%.40s\": ztrain implements Llama 3's (\"llama3\") frequency scaling "
                         "only", ty->str);
    if (!(r->f->mask & FL))
        return zt_hf_bad(j, "rope_scaling type \"llama3\" on %s: ztrain applies it to LlamaForCausalLM only",
                         zt_hf_arch(r->f->family));
    static const char *const keys[] = {"rope_type", "type", "factor", "low_freq_factor", "high_freq_factor",
                                       "original_max_position_embeddings"};
    for (int i = 0; i < rs->n; i++) {
        int ok = 0;
        for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) ok |= strcmp(rs->keys[i], keys[k]) == 0;
        if (!ok)
            return zt_hf_bad(j, "rope_scaling.%.60s: not a parameter of llama3 scaling ztrain implements", rs->keys[i]);
    }
    const zt_hf_reader sub = {rs, j->path, j->err, j->errlen};
    h->llama3 = 1;
    if (zt_hf_get_num(&sub, "factor", -1, 0, &h->factor) || zt_hf_get_num(&sub, "low_freq_factor", -1, 0, &h->lo) ||
        zt_hf_get_num(&sub, "high_freq_factor", -1, 0, &h->hi) ||
        zt_hf_get_int(&sub, "original_max_position_embeddings", -1, 1, &h->orig))
        return 1;
    if (h->factor < 0 || h->lo < 0 || h->hi < 0)
        return zt_hf_bad(j, "rope_scaling: llama3 needs factor, low_freq_factor and high_freq_factor");
    return 0;
}

/* the fields that must hold a value ztrain's model has */
static int read_unsupported(const reader *r, const hf_cfg *h) {
    const zt_hf_reader *j = &r->j;
    const zt_json *v = zt_json_get(j->cj, "hidden_act");
    if (v && v->type != ZT_JSON_NULL &&
        (v->type != ZT_JSON_STR || (strcmp(v->str, "silu") != 0 && strcmp(v->str, "swish") != 0)))
        return zt_hf_bad(j, "hidden_act \"%.40s\": ztrain's SwiGLU MLP uses silu",
                         v->type == ZT_JSON_STR ? v->str : "?");
    int b = 0, tp = 1;
    double x;
    if (zt_hf_get_num(j, "attention_dropout", 0, 1, &x)) return 1;
    if (r->f->mask & FL) {
        if (zt_hf_get_bool(j, "attention_bias", 0, &b)) return 1;
        if (b) return zt_hf_bad(j, "attention_bias = true: ztrain's llama has no q, k, v, o biases");
        if (zt_hf_get_bool(j, "mlp_bias", 0, &b)) return 1;
        if (b) return zt_hf_bad(j, "mlp_bias = true: ztrain's llama has no MLP biases");
        if (zt_hf_get_int(j, "pretraining_tp", 1, 1, &tp)) return 1;
    }
    const zt_json *sw = zt_json_get(j->cj, "sliding_window");
    if ((r->f->mask & FM) && !(sw && sw->type == ZT_JSON_NULL)) { /* absent: MistralConfig's 4096 */
        int w = 0;
        if (zt_hf_get_int(j, "sliding_window", 4096, 1, &w)) return 1;
        if (w < h->T)
            return zt_hf_bad(j, "sliding_window = %d: ztrain's attention is full causal (sliding-window attention is "
                             "not implemented; null or >= max_position_embeddings = %d is the same model)", w, h->T);
    }
    if (r->f->mask & FQ) {
        int w = 0;
        if (zt_hf_get_bool(j, "use_sliding_window", 0, &b)) return 1;
        if (b)
            return zt_hf_bad(j, "use_sliding_window = true: ztrain's attention is full causal (sliding-window "
                             "attention is not implemented)");
        if (zt_hf_get_int(j, "sliding_window", 1, 0, &w) || zt_hf_get_int(j, "max_window_layers", 0, 0, &w)) return 1;
        const zt_json *lt = zt_json_get(j->cj, "layer_types");
        for (int i = 0; lt && lt->type == ZT_JSON_ARR && i < lt->n; i++)
            if (lt->items[i].type != ZT_JSON_STR || strcmp(lt->items[i].str, "full_attention") != 0)
                return zt_hf_bad(j, "layer_types[%d] is not \"full_attention\": ztrain's attention is full causal", i);
        if (lt && lt->type != ZT_JSON_ARR && lt->type != ZT_JSON_NULL)
            return zt_hf_bad(j, "layer_types: expected a list");
    }
    return 0;
}

int zt_hf_llama_config_in(const zt_json *cj, const char *path, const char *family, zt_config *c, char *err,
                          size_t errlen) {
    const reader r = {{cj, path, err, errlen}, family_named(family)};
    const zt_hf_reader *j = &r.j;
    hf_cfg h = {0};
    if (!r.f)
        return zt_errf(err, errlen, "import: %s: model family %s is not one of llama, mistral, qwen2", path, family);
    if (zt_hf_check_keys(j, known_key, r.f, zt_hf_arch(family)) || read_sizes(&r, &h) || read_rope_scaling(&r, &h) ||
        read_unsupported(&r, &h))
        return 1;
    int bad_ = zt_hf_set_key(j, c, "model_type", "model.family=%s", family) ||
               zt_hf_set_key(j, c, "hidden_size", "model.n_embd=%d", h.C) ||
               zt_hf_set_key(j, c, "num_hidden_layers", "model.n_layer=%d", h.L) ||
               zt_hf_set_key(j, c, "num_attention_heads", "model.n_head=%d", h.H) ||
               zt_hf_set_key(j, c, "num_key_value_heads", "model.n_kv_head=%d", h.KV) ||
               zt_hf_set_key(j, c, "intermediate_size", "model.intermediate_size=%d", h.I) ||
               zt_hf_set_key(j, c, "vocab_size", "model.vocab_size=%d", h.V) ||
               zt_hf_set_key(j, c, "max_position_embeddings", "model.block_size=%d", h.T) ||
               zt_hf_set_key(j, c, "rms_norm_eps", "model.norm_eps=%.17g", h.eps) ||
               zt_hf_set_key(j, c, "rope_theta", "model.rope_theta=%.17g", h.theta) ||
               zt_hf_set_key(j, c, "tie_word_embeddings", "model.tie_embeddings=%s", h.tied ? "true" : "false") ||
               zt_hf_set_key(j, c, "model_type", "model.norm=auto") ||
               zt_hf_set_key(j, c, "model_type", "model.position=auto") ||
               zt_hf_set_key(j, c, "model_type", "model.mlp=auto") ||
               zt_hf_set_key(j, c, "model_type", "model.bias=auto") ||
               zt_hf_set_key(j, c, "rope_scaling", "model.rope_scaling=%s", h.llama3 ? "llama3" : "none");
    const zt_json *ir = zt_json_get(cj, "initializer_range"); /* kept for the export (ztrain's init_std) */
    if (!bad_ && ir && ir->type == ZT_JSON_NUM && ir->num >= 0 && ir->num <= 10)
        bad_ = zt_hf_set_key(j, c, "initializer_range", "model.init_std=%.17g", ir->num);
    if (!bad_ && h.llama3)
        bad_ = zt_hf_set_key(j, c, "rope_scaling.factor", "model.rope_factor=%.17g", h.factor) ||
               zt_hf_set_key(j, c, "rope_scaling.low_freq_factor", "model.rope_low_freq_factor=%.17g", h.lo) ||
               zt_hf_set_key(j, c, "rope_scaling.high_freq_factor", "model.rope_high_freq_factor=%.17g", h.hi) ||
               zt_hf_set_key(j, c, "rope_scaling.original_max_position_embeddings",
                             "model.rope_original_max_position=%d", h.orig);
    return bad_;
}

/* ---------------------------------------------------------------- model.* -> config.json */

/* 0 when s is the family's description; else 1 naming the model.* key transformers' class cannot express */
static int expressible(const hf_family *f, const zt_config *c, const zt_model_shape *s, char *err, size_t errlen) {
    const char *key = s->norm != ZT_NORM_RMS    ? "model.norm = layernorm"
                      : s->pos != ZT_POS_ROPE   ? "model.position = learned"
                      : s->mlp != ZT_MLP_SWIGLU ? "model.mlp = gelu"
                      : NULL;
    if (key)
        return zt_errf(err, errlen, "export: %s: transformers' %s has RMSNorm, rotary positions and a SwiGLU MLP (this "
                       "checkpoint is not one)", key, zt_hf_arch(f->family));
    if (s->bias != f->bias)
        return zt_errf(err, errlen, "export: model.bias = \"%s\": transformers' %s has %s", c->model.bias,
                       zt_hf_arch(f->family), f->bias ? "biases on q, k and v only" : "no linear biases");
    if (s->rope_factor > 0 && !(f->mask & FL))
        return zt_errf(err, errlen, "export: model.rope_scaling = llama3: ztrain exports it for LlamaForCausalLM only, "
                       "not %s", zt_hf_arch(f->family));
    return 0;
}

static void write_rope_scaling(FILE *f, const zt_model_shape *s) {
    if (s->rope_factor <= 0) {
        fprintf(f, "  \"rope_scaling\": null,\n");
        return;
    }
    char a[32], b[32], d[32];
    zt_hf_shortest(a, sizeof a, s->rope_factor);
    zt_hf_shortest(b, sizeof b, s->rope_high_freq);
    zt_hf_shortest(d, sizeof d, s->rope_low_freq);
    fprintf(f, "  \"rope_scaling\": {\n    \"factor\": %s,\n    \"high_freq_factor\": %s,\n"
               "    \"low_freq_factor\": %s,\n    \"original_max_position_embeddings\": %d,\n"
               "    \"rope_type\": \"llama3\"\n  },\n", a, b, d, s->rope_orig_max);
}

int zt_hf_llama_config_out(FILE *f, const zt_config *c, const zt_model_shape *s, const char *torch_dtype, char *err,
                           size_t errlen) {
    const hf_family *fam = family_named(c->model.family);
    if (!fam) return zt_errf(err, errlen, "export: model.family = %s is not a Llama-family model", c->model.family);
    if (expressible(fam, c, s, err, errlen)) return 1;
    const unsigned m = fam->mask;
    char eps[32], theta[32], std[32];
    zt_hf_shortest(eps, sizeof eps, c->model.norm_eps > 0 ? c->model.norm_eps : (double)s->norm_eps);
    zt_hf_shortest(theta, sizeof theta, s->rope_theta);
    zt_hf_shortest(std, sizeof std, c->model.init_std);
    fprintf(f, "{\n  \"architectures\": [\n    \"%s\"\n  ],\n", zt_hf_arch(fam->family));
    if (m & FL) fprintf(f, "  \"attention_bias\": false,\n");
    fprintf(f, "  \"attention_dropout\": 0.0,\n  \"bos_token_id\": null,\n  \"eos_token_id\": null,\n");
    if (m & FM) fprintf(f, "  \"head_dim\": %d,\n", s->n_embd / s->n_head);
    fprintf(f, "  \"hidden_act\": \"silu\",\n  \"hidden_size\": %d,\n  \"initializer_range\": %s,\n"
               "  \"intermediate_size\": %d,\n  \"max_position_embeddings\": %d,\n", s->n_embd, std, s->ffn,
            s->block_size);
    if (m & FQ) fprintf(f, "  \"max_window_layers\": %d,\n", s->n_layer);
    if (m & FL) fprintf(f, "  \"mlp_bias\": false,\n");
    fprintf(f, "  \"model_type\": \"%s\",\n  \"num_attention_heads\": %d,\n  \"num_hidden_layers\": %d,\n"
               "  \"num_key_value_heads\": %d,\n", fam->family, s->n_head, s->n_layer, s->n_kv_head);
    if (m & FL) fprintf(f, "  \"pretraining_tp\": 1,\n");
    fprintf(f, "  \"rms_norm_eps\": %s,\n", eps);
    if (m & FL) write_rope_scaling(f, s);
    fprintf(f, "  \"rope_theta\": %s,\n", theta);
    if (m & (FM | FQ)) fprintf(f, "  \"sliding_window\": null,\n");
    fprintf(f, "  \"tie_word_embeddings\": %s,\n  \"torch_dtype\": \"%s\",\n  \"use_cache\": true,\n",
            s->tied ? "true" : "false", torch_dtype);
    if (m & FQ) fprintf(f, "  \"use_sliding_window\": false,\n");
    fprintf(f, "  \"vocab_size\": %d\n}\n", s->vocab_size);
    return 0;
}

/* ---------------------------------------------------------------- tensors */

/* the rows of layer tensor t (kind k) */
static int add_layer(zt_hf_map *o, int n, int i, const zt_tensor_info *t, const zt_model_shape *s) {
    static const char *const qkv[] = {"q", "k", "v"};
    const int C = s->n_embd, kvw = s->n_kv_head * (C / s->n_head), I = s->ffn, l = t->layer;
    const int w[3] = {C, kvw, kvw}, c0[3] = {0, C, C + kvw};
    switch (t->kind) {
    case ZT_LN1W: return zt_hf_map_add(o, n, i, ZT_HF_SAME, 0, C, 0, "model.layers.%d.input_layernorm.weight", l);
    case ZT_LN2W:
        return zt_hf_map_add(o, n, i, ZT_HF_SAME, 0, C, 0, "model.layers.%d.post_attention_layernorm.weight", l);
    case ZT_QKVW:
        for (int k = 0; k < 3; k++)
            n = zt_hf_map_add(o, n, i, ZT_HF_TCOLS, c0[k], w[k], C, "model.layers.%d.self_attn.%s_proj.weight", l,
                              qkv[k]);
        return n;
    case ZT_QKVB:
        for (int k = 0; k < 3; k++)
            n = zt_hf_map_add(o, n, i, ZT_HF_SLICE, c0[k], w[k], 0, "model.layers.%d.self_attn.%s_proj.bias", l,
                              qkv[k]);
        return n;
    case ZT_ATTPW: return zt_hf_map_add(o, n, i, ZT_HF_TCOLS, 0, C, C, "model.layers.%d.self_attn.o_proj.weight", l);
    case ZT_FCW:
        n = zt_hf_map_add(o, n, i, ZT_HF_TCOLS, 0, I, C, "model.layers.%d.mlp.gate_proj.weight", l);
        return zt_hf_map_add(o, n, i, ZT_HF_TCOLS, I, I, C, "model.layers.%d.mlp.up_proj.weight", l);
    case ZT_FCPW: return zt_hf_map_add(o, n, i, ZT_HF_TCOLS, 0, C, I, "model.layers.%d.mlp.down_proj.weight", l);
    default: return -1;
    }
}

int zt_hf_llama_map(const zt_param_table *pt, const zt_model_shape *s, zt_hf_map *out, char *err, size_t errlen) {
    int n = 0;
    const int V = s->vocab_size, C = s->n_embd;
    for (int i = 0; i < pt->n && n >= 0; i++) {
        const zt_tensor_info *t = &pt->t[i];
        if (i == ZT_P_WTE) n = zt_hf_map_add(out, n, i, ZT_HF_ROWS, 0, V, C, "model.embed_tokens.weight");
        else if (i == pt->lm_head) n = zt_hf_map_add(out, n, i, ZT_HF_ROWS, 0, V, C, "lm_head.weight");
        else if (strcmp(t->name, "ln_f.weight") == 0)
            n = zt_hf_map_add(out, n, i, ZT_HF_SAME, 0, C, 0, "model.norm.weight");
        else if (t->layer >= 0) n = add_layer(out, n, i, t, s);
        else n = -1;
        if (n < 0) zt_errf(err, errlen, "tensor %s has no place in a Llama-family model", t->name);
    }
    return n;
}

/* ---------------------------------------------------------------- import */

int zt_hf_llama_check_rest(zt_st_file *f, int nf, const zt_hf_map *map, int nmap, const zt_model_shape *s,
                           const float *wte, const char *what, char *err, size_t errlen) {
    for (int k = 0; k < nf; k++)
        for (int j = 0; j < f[k].n; j++) {
            const char *name = f[k].t[j].name;
            int l;
            char tail[64] = "";
            if (zt_hf_in_map(map, nmap, name)) continue;
            if (sscanf(name, "model.layers.%d.self_attn.rotary_emb.%63s", &l, tail) == 2 &&
                strcmp(tail, "inv_freq") == 0)
                continue;
            if (s->tied && strcmp(name, "lm_head.weight") == 0) {
                if (zt_hf_check_tied(&f[k], &f[k].t[j], s->vocab_size, s->n_embd, wte, "model.embed_tokens.weight",
                                     " but config.json says tie_word_embeddings = true", err, errlen))
                    return 1;
                continue;
            }
            return zt_errf(err, errlen, "import: %s: tensor %s is not part of the model config.json describes (%s, %d "
                           "layers%s)", f[k].path, name, what, s->n_layer, s->tied ? ", tied LM head" : "");
        }
    return 0;
}
