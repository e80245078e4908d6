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

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

/* ---------------------------------------------------------------- the families */

enum { FL = 1, FM = 2, FQ = 4, FALL = 7 };

typedef struct hf_family {
    const char *family, *arch;
    unsigned mask;   /* FL, FM or FQ: the fields it has */
    unsigned bias;   /* ZT_BIAS_*: ztrain's description */
    int max_pos;     /* transformers 4.44's default max_position_embeddings */
    int kv_default;  /* its default num_key_value_heads; 0 = num_attention_heads */
} hf_family;

static const hf_family families[] = {
    {"llama", "LlamaForCausalLM", FL, 0, 2048, 0},
    {"mistral", "MistralForCausalLM", FM, 0, 131072, 8},
    {"qwen2", "Qwen2ForCausalLM", FQ, ZT_BIAS_QKV, 32768, 32},
};
#define N_FAMILIES ((int)(sizeof families / sizeof *families))

static const hf_family *family_named(const char *name) {
    for (int k = 0; k < N_FAMILIES; k++)
        if (strcmp(name, families[k].family) == 0) return &families[k];
    return NULL;
}

static const hf_family *family_of_arch(const char *arch) {
    for (int k = 0; k < N_FAMILIES; k++)
        if (strcmp(arch, families[k].arch) == 0) return &families[k];
    return NULL;
}

const char *zt_hf_llama_arch(const char *family) {
    const hf_family *f = family_named(family);
    return f ? f->arch : "?";
}

int zt_hf_llama_family(const zt_json *cj, const char *path, const char **family, char *err, size_t errlen) {
    const zt_json *mt = zt_json_get(cj, "model_type"), *ar = zt_json_get(cj, "architectures");
    const int arr = ar && ar->type == ZT_JSON_ARR;
    const hf_family *f = NULL;
    if (mt && mt->type == ZT_JSON_STR) f = family_named(mt->str);
    else if (arr && ar->n > 0 && ar->items[0].type == ZT_JSON_STR) f = family_of_arch(ar->items[0].str);
    if (!f) return 0;
    for (int i = 0; arr && i < ar->n; i++)
        if (ar->items[i].type != ZT_JSON_STR || strcmp(ar->items[i].str, f->arch) != 0) {
            zt_errf(err, errlen, "import: %s: architectures [\"%s\"]: ztrain imports %s (model_type \"%s\") as a "
                    "causal LM only", path, ar->items[i].type == ZT_JSON_STR ? ar->items[i].str : "?", f->arch, f->family);
            return -1;
        }
    if (ar && !arr && ar->type != ZT_JSON_NULL) {
        zt_errf(err, errlen, "import: %s: architectures: expected a list of class names", path);
        return -1;
    }
    *family = f->family;
    return 1;
}

/* ---------------------------------------------------------------- config.json -> model.* */

/* fields that do not change the function the model computes */
static const char *const benign_keys[] = {
    "_name_or_path", "bos_token_id", "eos_token_id", "pad_token_id", "sep_token_id", "decoder_start_token_id",
    "torch_dtype", "dtype", "transformers_version", "use_cache", "initializer_range", "return_dict",
    "output_hidden_states", "output_attentions", "torchscript", "use_bfloat16", "tf_legacy_loss",
    "chunk_size_feed_forward", "is_encoder_decoder", "is_decoder", "cross_attention_hidden_size",
    "add_cross_attention", "tie_encoder_decoder", "max_length", "min_length", "do_sample", "early_stopping",
    "num_beams", "num_beam_groups", "diversity_penalty", "temperature", "top_k", "top_p", "typical_p",
    "repetition_penalty", "length_penalty", "no_repeat_ngram_size", "encoder_no_repeat_ngram_size", "bad_words_ids",
    "num_return_sequences", "output_scores", "return_dict_in_generate", "forced_bos_token_id", "forced_eos_token_id",
    "remove_invalid_values", "exponential_decay_length_penalty", "suppress_tokens", "begin_suppress_tokens",
    "finetuning_task", "id2label", "label2id", "tokenizer_class", "prefix", "task_specific_params", "problem_type",
    "_attn_implementation_autoset", "attn_implementation", "gradient_checkpointing",
    "pruned_heads" /* checked: {} only */};

/* the fields read below, by family */
static const struct { const char *key; unsigned fam; } model_keys[] = {
    {"architectures", FALL}, {"model_type", FALL}, {"hidden_size", FALL}, {"num_hidden_layers", FALL},
    {"num_attention_heads", FALL}, {"num_key_value_heads", FALL}, {"intermediate_size", FALL}, {"vocab_size", FALL},
    {"max_position_embeddings", FALL}, {"rms_norm_eps", FALL}, {"rope_theta", FALL}, {"rope_scaling", FALL},
    {"tie_word_embeddings", FALL}, {"hidden_act", FALL}, {"head_dim", FALL}, {"attention_dropout", FALL},
    {"pretraining_tp", FL}, {"attention_bias", FL}, {"mlp_bias", FL}, {"sliding_window", FM | FQ},
    {"use_sliding_window", FQ}, {"max_window_layers", FQ}, {"layer_types", FQ}};

typedef struct reader {
    const zt_json *cj;
    const char *path;
    const hf_family *f;
    char *err;
    size_t errlen;
} reader;

static int bad(const reader *r, const char *fmt, ...) ZT_PRINTF(2, 3);
static int bad(const reader *r, const char *fmt, ...) {
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return zt_errf(r->err, r->errlen, "import: %.300s: %s", r->path, msg);
}

static int known_key(const reader *r, const char *key) {
    for (size_t i = 0; i < sizeof model_keys / sizeof *model_keys; i++)
        if (strcmp(key, model_keys[i].key) == 0) return (model_keys[i].fam & r->f->mask) != 0;
    for (size_t i = 0; i < sizeof benign_keys / sizeof *benign_keys; i++)
        if (strcmp(key, benign_keys[i]) == 0) return 1;
    return 0;
}

static int check_keys(const reader *r) {
    if (r->cj->type != ZT_JSON_OBJ) return bad(r, "not a JSON object");
    for (int i = 0; i < r->cj->n; i++) {
        const char *k = r->cj->keys[i];
        if (strcmp(k, "quantization_config") == 0)
            return bad(r, "quantization_config: pre-quantised weights are not supported (import the unquantised "
                       "model)");
        if (!known_key(r, k))
            return bad(r, "field \"%.80s\" is not one ztrain implements for %s (it may change the model: refused "
                       "rather than importing a different one)", k, r->f->arch);
    }
    const zt_json *ph = zt_json_get(r->cj, "pruned_heads");
    if (ph && !(ph->type == ZT_JSON_OBJ && ph->n == 0) && ph->type != ZT_JSON_NULL)
        return bad(r, "pruned_heads: pruned attention heads are not supported");
    return 0;
}

/* an integer field >= lo; dflt < 0: required; a null value counts as absent */
static int get_int(const reader *r, const char *key, int dflt, int lo, int *out) {
    const zt_json *v = zt_json_get(r->cj, key);
    if (!v || v->type == ZT_JSON_NULL) {
        if (dflt < 0) return bad(r, "has no %s", key);
        *out = dflt;
        return 0;
    }
    if (v->type != ZT_JSON_NUM || !v->is_int || v->inum < lo || v->inum > (1 << 30))
        return bad(r, "%s: expected an integer >= %d", key, lo);
    *out = (int)v->inum;
    return 0;
}

/* a number field > 0 (>= 0 when zero_ok) */
static int get_num(const reader *r, const char *key, double dflt, int zero_ok, double *out) {
    const zt_json *v = zt_json_get(r->cj, key);
    if (!v || v->type == ZT_JSON_NULL) {
        *out = dflt;
        return 0;
    }
    if (v->type != ZT_JSON_NUM || !(v->num > 0 || (zero_ok && v->num == 0)))
        return bad(r, "%s: expected a number %s 0", key, zero_ok ? ">=" : ">");
    *out = v->num;
    return 0;
}

static int get_bool(const reader *r, const char *key, int dflt, int *out) {
    const zt_json *v = zt_json_get(r->cj, key);
    if (!v || v->type == ZT_JSON_NULL) {
        *out = dflt;
        return 0;
    }
    if (v->type != ZT_JSON_BOOL) return bad(r, "%s: expected true or false", key);
    *out = v->num != 0;
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
    if (get_int(r, "hidden_size", -1, 1, &h->C) || get_int(r, "num_hidden_layers", -1, 1, &h->L) ||
        get_int(r, "num_attention_heads", -1, 1, &h->H) || get_int(r, "intermediate_size", -1, 1, &h->I) ||
        get_int(r, "vocab_size", -1, 2, &h->V) || get_int(r, "max_position_embeddings", r->f->max_pos, 1, &h->T))
        return 1;
    /* absent: the class's default; null: num_attention_heads (as the classes' __init__ do) */
    const zt_json *kv = zt_json_get(r->cj, "num_key_value_heads");
    const int kv_dflt = (kv && kv->type == ZT_JSON_NULL) || !r->f->kv_default ? h->H : r->f->kv_default;
    if (get_int(r, "num_key_value_heads", kv_dflt, 1, &h->KV)) return 1;
    if (get_num(r, "rms_norm_eps", 1e-6, 0, &h->eps) || get_num(r, "rope_theta", 10000.0, 0, &h->theta)) return 1;
    if (get_bool(r, "tie_word_embeddings", 0, &h->tied)) return 1;
    int hd = 0;
    if (h->C % h->H) return bad(r, "hidden_size %d is not divisible by num_attention_heads %d", h->C, h->H);
    if (get_int(r, "head_dim", h->C / h->H, 1, &hd)) return 1;
    if (hd != h->C / h->H)
        return bad(r, "head_dim = %d: ztrain's heads are hidden_size / num_attention_heads = %d wide", hd, h->C / h->H);
    return 0;
}

/* rope_scaling: null / default = none, llama3 (Llama only) with its four parameters, anything else refused */
static int read_rope_scaling(const reader *r, hf_cfg *h) {
    const zt_json *rs = zt_json_get(r->cj, "rope_scaling");
    if (!rs || rs->type == ZT_JSON_NULL) return 0;
    if (rs->type != ZT_JSON_OBJ) return bad(r, "rope_scaling: expected null or an object");
    const zt_json *ty = zt_json_get(rs, "rope_type");
    if (!ty) ty = zt_json_get(rs, "type");
    if (!ty || ty->type != ZT_JSON_STR) return bad(r, "rope_scaling: has no rope_type");
    if (strcmp(ty->str, "default") == 0 && rs->n == 1) return 0;
    if (strcmp(ty->str, "llama3") != 0)
        return bad(r, "rope_scaling type \"%.40s\": ztrain implements Llama 3's (\"llama3\") frequency scaling only",
                   ty->str);
    if (!(r->f->mask & FL))
        return bad(r, "rope_scaling type \"llama3\" on %s: ztrain applies it to LlamaForCausalLM only", r->f->arch);
    static const char *const keys[] = {"rope_type", "type", "factor", "low_freq_factor", "high_freq_factor",
                                       "original_max_position_embeddings"};
    for (int i = 0; i < rs->n; i++) {
        int ok = 0;
        for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) ok |= strcmp(rs->keys[i], keys[k]) == 0;
        if (!ok) return bad(r, "rope_scaling.%.60s: not a parameter of llama3 scaling ztrain implements", rs->keys[i]);
    }
    const reader sub = {rs, r->path, r->f, r->err, r->errlen};
    h->llama3 = 1;
    if (get_num(&sub, "factor", -1, 0, &h->factor) || get_num(&sub, "low_freq_factor", -1, 0, &h->lo) ||
        get_num(&sub, "high_freq_factor", -1, 0, &h->hi) ||
        get_int(&sub, "original_max_position_embeddings", -1, 1, &h->orig))
        return 1;
    if (h->factor < 0 || h->lo < 0 || h->hi < 0) return bad(r, "rope_scaling: llama3 needs factor, low_freq_factor and "
                                                            "high_freq_factor");
    return 0;
}

/* the fields that must hold a value ztrain's model has */
static int read_unsupported(const reader *r, const hf_cfg *h) {
    const zt_json *v = zt_json_get(r->cj, "hidden_act");
    if (v && v->type != ZT_JSON_NULL &&
        (v->type != ZT_JSON_STR || (strcmp(v->str, "silu") != 0 && strcmp(v->str, "swish") != 0)))
        return bad(r, "hidden_act \"%.40s\": ztrain's SwiGLU MLP uses silu", v->type == ZT_JSON_STR ? v->str : "?");
    int b = 0, tp = 1;
    double x;
    if (get_num(r, "attention_dropout", 0, 1, &x)) return 1;
    if (r->f->mask & FL) {
        if (get_bool(r, "attention_bias", 0, &b)) return 1;
        if (b) return bad(r, "attention_bias = true: ztrain's llama has no q, k, v, o biases");
        if (get_bool(r, "mlp_bias", 0, &b)) return 1;
        if (b) return bad(r, "mlp_bias = true: ztrain's llama has no MLP biases");
        if (get_int(r, "pretraining_tp", 1, 1, &tp)) return 1;
    }
    const zt_json *sw = zt_json_get(r->cj, "sliding_window");
    if ((r->f->mask & FM) && !(sw && sw->type == ZT_JSON_NULL)) { /* absent: MistralConfig's 4096 */
        int w = 0;
        if (get_int(r, "sliding_window", 4096, 1, &w)) return 1;
        if (w < h->T)
            return bad(r, "sliding_window = %d: ztrain's attention is full causal (sliding-window attention is not "
                       "implemented; null or >= max_position_embeddings = %d is the same model)", w, h->T);
    }
    if (r->f->mask & FQ) {
        int w = 0;
        if (get_bool(r, "use_sliding_window", 0, &b)) return 1;
        if (b) return bad(r, "use_sliding_window = true: ztrain's attention is full causal (sliding-window attention "
                          "is not implemented)");
        if (get_int(r, "sliding_window", 1, 0, &w) || get_int(r, "max_window_layers", 0, 0, &w)) return 1;
        const zt_json *lt = zt_json_get(r->cj, "layer_types");
        for (int i = 0; lt && lt->type == ZT_JSON_ARR && i < lt->n; i++)
            if (lt->items[i].type != ZT_JSON_STR || strcmp(lt->items[i].str, "full_attention") != 0)
                return bad(r, "layer_types[%d] is not \"full_attention\": ztrain's attention is full causal", i);
        if (lt && lt->type != ZT_JSON_ARR && lt->type != ZT_JSON_NULL) return bad(r, "layer_types: expected a list");
    }
    return 0;
}

/* one model.* key from config.json's field (its name in the message when ztrain's range refuses the value) */
static int set_key(const reader *r, zt_config *c, const char *field, const char *fmt, ...) ZT_PRINTF(4, 5);
static int set_key(const reader *r, zt_config *c, const char *field, const char *fmt, ...) {
    char kv[256], e[ZT_ERR_BUF];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(kv, sizeof kv, fmt, ap);
    va_end(ap);
    if (zt_config_set(c, kv, e, sizeof e) == 0) return 0;
    const char *m = strncmp(e, "--set: ", 7) == 0 ? e + 7 : e;
    return bad(r, "%s: %.400s", field, m);
}

int zt_hf_llama_config_in(const zt_json *cj, const char *path, const char *family, zt_config *c, char *err,
                          size_t errlen) {
    const reader r = {cj, path, family_named(family), err, errlen};
    hf_cfg h = {0};
    if (!r.f)
        return zt_errf(err, errlen, "import: %s: model family %s is not one of llama, mistral, qwen2", path, family);
    if (check_keys(&r) || read_sizes(&r, &h) || read_rope_scaling(&r, &h) || read_unsupported(&r, &h)) return 1;
    int bad_ = set_key(&r, c, "model_type", "model.family=%s", family) ||
               set_key(&r, c, "hidden_size", "model.n_embd=%d", h.C) ||
               set_key(&r, c, "num_hidden_layers", "model.n_layer=%d", h.L) ||
               set_key(&r, c, "num_attention_heads", "model.n_head=%d", h.H) ||
               set_key(&r, c, "num_key_value_heads", "model.n_kv_head=%d", h.KV) ||
               set_key(&r, c, "intermediate_size", "model.intermediate_size=%d", h.I) ||
               set_key(&r, c, "vocab_size", "model.vocab_size=%d", h.V) ||
               set_key(&r, c, "max_position_embeddings", "model.block_size=%d", h.T) ||
               set_key(&r, c, "rms_norm_eps", "model.norm_eps=%.17g", h.eps) ||
               set_key(&r, c, "rope_theta", "model.rope_theta=%.17g", h.theta) ||
               set_key(&r, c, "tie_word_embeddings", "model.tie_embeddings=%s", h.tied ? "true" : "false") ||
               set_key(&r, c, "model_type", "model.norm=auto") || set_key(&r, c, "model_type", "model.position=auto") ||
               set_key(&r, c, "model_type", "model.mlp=auto") || set_key(&r, c, "model_type", "model.bias=auto") ||
               set_key(&r, c, "rope_scaling", "model.rope_scaling=%s", h.llama3 ? "llama3" : "none");
    const zt_json *ir = zt_json_get(cj, "initializer_range"); /* kept for the export (ztrain's init_std) */
    if (!bad_ && ir && ir->type == ZT_JSON_NUM && ir->num >= 0 && ir->num <= 10)
        bad_ = set_key(&r, c, "initializer_range", "model.init_std=%.17g", ir->num);
    if (!bad_ && h.llama3)
        bad_ = set_key(&r, c, "rope_scaling.factor", "model.rope_factor=%.17g", h.factor) ||
               set_key(&r, c, "rope_scaling.low_freq_factor", "model.rope_low_freq_factor=%.17g", h.lo) ||
               set_key(&r, c, "rope_scaling.high_freq_factor", "model.rope_high_freq_factor=%.17g", h.hi) ||
               set_key(&r, c, "rope_scaling.original_max_position_embeddings", "model.rope_original_max_position=%d",
                       h.orig);
    return bad_;
}

/* ---------------------------------------------------------------- model.* -> config.json */

/* x with the fewest digits that read back as x */
static void shortest(char *buf, size_t n, double x) {
    if (x == floor(x) && fabs(x) < 1e15) { /* 10000.0, 500000.0: as Python writes them */
        snprintf(buf, n, "%.1f", x);
        return;
    }
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, n, "%.*g", p, x);
        if (strtod(buf, NULL) == x) break;
    }
    if (!strpbrk(buf, ".en")) snprintf(buf + strlen(buf), n - strlen(buf), ".0"); /* a float, as Python writes it */
}

/* 0 when s is the family's description; else 1 naming the model.* key transformers' class cannot express */
static int expressible(const hf_family *f, const zt_config *c, const zt_model_shape *s, char *err, size_t errlen) {
    const char *key = s->norm != ZT_NORM_RMS    ? "model.norm = layernorm"
                      : s->pos != ZT_POS_ROPE   ? "model.position = learned"
                      : s->mlp != ZT_MLP_SWIGLU ? "model.mlp = gelu"
                      : NULL;
    if (key)
        return zt_errf(err, errlen, "export: %s: transformers' %s has RMSNorm, rotary positions and a SwiGLU MLP (this "
                       "checkpoint is not one)", key, f->arch);
    if (s->bias != f->bias)
        return zt_errf(err, errlen, "export: model.bias = \"%s\": transformers' %s has %s", c->model.bias, f->arch,
                       f->bias ? "biases on q, k and v only" : "no linear biases");
    if (s->rope_factor > 0 && !(f->mask & FL))
        return zt_errf(err, errlen, "export: model.rope_scaling = llama3: ztrain exports it for LlamaForCausalLM only, "
                       "not %s", f->arch);
    return 0;
}

static void write_rope_scaling(FILE *f, const zt_model_shape *s) {
    if (s->rope_factor <= 0) {
        fprintf(f, "  \"rope_scaling\": null,\n");
        return;
    }
    char a[32], b[32], d[32];
    shortest(a, sizeof a, s->rope_factor);
    shortest(b, sizeof b, s->rope_high_freq);
    shortest(d, sizeof d, s->rope_low_freq);
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
    shortest(eps, sizeof eps, c->model.norm_eps > 0 ? c->model.norm_eps : (double)s->norm_eps);
    shortest(theta, sizeof theta, s->rope_theta);
    shortest(std, sizeof std, c->model.init_std);
    fprintf(f, "{\n  \"architectures\": [\n    \"%s\"\n  ],\n", fam->arch);
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

static int add(zt_hf_map *o, int n, int zt, int kind, int c0, int64_t d0, int64_t d1, const char *fmt, ...)
    ZT_PRINTF(8, 9);
static int add(zt_hf_map *o, int n, int zt, int kind, int c0, int64_t d0, int64_t d1, const char *fmt, ...) {
    zt_hf_map *h = &o[n];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(h->name, sizeof h->name, fmt, ap);
    va_end(ap);
    h->zt = zt;
    h->kind = kind;
    h->c0 = c0;
    h->ndim = d1 ? 2 : 1;
    h->shape[0] = d0;
    h->shape[1] = d1;
    return n + 1;
}

/* the rows of layer tensor t (kind k) */
static int add_layer(zt_hf_map *o, int n, int i, const zt_tensor_info *t, const zt_model_shape *s) {
    static const char *const qkv[] = {"q", "k", "v"};
    const int C = s->n_embd, kvw = s->n_kv_head * (C / s->n_head), I = s->ffn, l = t->layer;
    const int w[3] = {C, kvw, kvw}, c0[3] = {0, C, C + kvw};
    switch (t->kind) {
    case ZT_LN1W: return add(o, n, i, ZT_HF_SAME, 0, C, 0, "model.layers.%d.input_layernorm.weight", l);
    case ZT_LN2W: return add(o, n, i, ZT_HF_SAME, 0, C, 0, "model.layers.%d.post_attention_layernorm.weight", l);
    case ZT_QKVW:
        for (int k = 0; k < 3; k++)
            n = add(o, n, i, ZT_HF_TCOLS, c0[k], w[k], C, "model.layers.%d.self_attn.%s_proj.weight", l, qkv[k]);
        return n;
    case ZT_QKVB:
        for (int k = 0; k < 3; k++)
            n = add(o, n, i, ZT_HF_SLICE, c0[k], w[k], 0, "model.layers.%d.self_attn.%s_proj.bias", l, qkv[k]);
        return n;
    case ZT_ATTPW: return add(o, n, i, ZT_HF_TCOLS, 0, C, C, "model.layers.%d.self_attn.o_proj.weight", l);
    case ZT_FCW:
        n = add(o, n, i, ZT_HF_TCOLS, 0, I, C, "model.layers.%d.mlp.gate_proj.weight", l);
        return add(o, n, i, ZT_HF_TCOLS, I, I, C, "model.layers.%d.mlp.up_proj.weight", l);
    case ZT_FCPW: return add(o, n, i, ZT_HF_TCOLS, 0, C, I, "model.layers.%d.mlp.down_proj.weight", l);
    default: return -1;
    }
}

int zt_hf_llama_map(const zt_param_table *pt, const zt_model_shape *s, zt_hf_map *out, char *err, size_t errlen) {
    int n = 0;
    const int V = s->vocab_size, C = s->n_embd;
    for (int i = 0; i < pt->n && n >= 0; i++) {
        const zt_tensor_info *t = &pt->t[i];
        if (i == ZT_P_WTE) n = add(out, n, i, ZT_HF_ROWS, 0, V, C, "model.embed_tokens.weight");
        else if (i == pt->lm_head) n = add(out, n, i, ZT_HF_ROWS, 0, V, C, "lm_head.weight");
        else if (strcmp(t->name, "ln_f.weight") == 0) n = add(out, n, i, ZT_HF_SAME, 0, C, 0, "model.norm.weight");
        else if (t->layer >= 0) n = add_layer(out, n, i, t, s);
        else n = -1;
        if (n < 0) zt_errf(err, errlen, "tensor %s has no place in a Llama-family model", t->name);
    }
    return n;
}

size_t zt_hf_numel(const zt_hf_map *h) { return (size_t)h->shape[0] * (size_t)(h->ndim == 2 ? h->shape[1] : 1); }

/* dst (cols, rows) = src[:, c0 : c0 + cols]^T for src (rows, ld); blocks of 32 keep both sides in cache */
static void transpose_out(const float *src, int rows, int ld, int c0, int cols, float *dst) {
    for (int r0 = 0; r0 < rows; r0 += 32)
        for (int k0 = 0; k0 < cols; k0 += 32)
            for (int r = r0; r < rows && r < r0 + 32; r++)
                for (int k = k0; k < cols && k < k0 + 32; k++) dst[(size_t)k * rows + r] = src[(size_t)r * ld + c0 + k];
}

/* dst[:, c0 : c0 + cols] = src^T for src (cols, rows), dst (rows, ld) */
static void transpose_in(const float *src, int rows, int ld, int c0, int cols, float *dst) {
    for (int r0 = 0; r0 < rows; r0 += 32)
        for (int k0 = 0; k0 < cols; k0 += 32)
            for (int r = r0; r < rows && r < r0 + 32; r++)
                for (int k = k0; k < cols && k < k0 + 32; k++) dst[(size_t)r * ld + c0 + k] = src[(size_t)k * rows + r];
}

void zt_hf_to_hf(const zt_hf_map *h, const zt_tensor_info *t, const float *zt, float *hf) {
    if (h->kind == ZT_HF_TCOLS) transpose_out(zt, t->shape[0], t->shape[1], h->c0, (int)h->shape[0], hf);
    else memcpy(hf, zt + h->c0, zt_hf_numel(h) * sizeof(float));
}

void zt_hf_from_hf(const zt_hf_map *h, const zt_tensor_info *t, const float *hf, float *zt) {
    if (h->kind == ZT_HF_TCOLS) transpose_in(hf, t->shape[0], t->shape[1], h->c0, (int)h->shape[0], zt);
    else memcpy(zt + h->c0, hf, zt_hf_numel(h) * sizeof(float));
}

/* ---------------------------------------------------------------- import */

static const zt_st_tensor *find(zt_st_file *f, int nf, const char *name, zt_st_file **in) {
    for (int k = 0; k < nf; k++) {
        const zt_st_tensor *t = zt_st_find(&f[k], name);
        if (t) {
            *in = &f[k];
            return t;
        }
    }
    return NULL;
}

static void shape_str(int ndim, const int64_t *d, char *o, size_t n) {
    if (ndim == 1) snprintf(o, n, "(%lld)", (long long)d[0]);
    else if (ndim == 2) snprintf(o, n, "(%lld, %lld)", (long long)d[0], (long long)d[1]);
    else snprintf(o, n, "(%d dimensions)", ndim);
}

int zt_hf_llama_gather(zt_st_file *f, int nf, const zt_hf_map *map, int nmap, const zt_param_table *pt, int i,
                       float *dst, float *tmp, char *err, size_t errlen) {
    const zt_tensor_info *t = &pt->t[i];
    memset(dst, 0, t->numel * sizeof(float));
    for (int r = 0; r < nmap; r++) {
        const zt_hf_map *h = &map[r];
        if (h->zt != i) continue;
        zt_st_file *in;
        const zt_st_tensor *st = find(f, nf, h->name, &in);
        char want[48], got[48];
        shape_str(h->ndim, h->shape, want, sizeof want);
        if (!st) return zt_errf(err, errlen, "import: %s: tensor %s is missing (shape %s)", f[0].path, h->name, want);
        if (st->ndim != h->ndim || st->shape[0] != h->shape[0] || (h->ndim == 2 && st->shape[1] != h->shape[1])) {
            shape_str(st->ndim, st->shape, got, sizeof got);
            return zt_errf(err, errlen, "import: %s: tensor %s has shape %s but config.json's model has %s", in->path,
                           h->name, got, want);
        }
        if (zt_st_read_f32(in, st, tmp, err, errlen)) return 1;
        zt_hf_from_hf(h, t, tmp, dst);
    }
    return 0;
}

/* a tied model's lm_head.weight: allowed when it equals the embedding (V x C floats of wte) */
static int tied_head(zt_st_file *in, const zt_st_tensor *st, const zt_model_shape *s, const float *wte, char *err,
                     size_t errlen) {
    const size_t n = (size_t)s->vocab_size * s->n_embd;
    if (st->ndim != 2 || st->shape[0] != s->vocab_size || st->shape[1] != s->n_embd)
        return zt_errf(err, errlen, "import: %s: lm_head.weight has another shape than model.embed_tokens.weight",
                       in->path);
    float *x = zt_malloc(n * sizeof(float));
    int rc = zt_st_read_f32(in, st, x, err, errlen);
    if (!rc && memcmp(x, wte, n * sizeof(float)) != 0)
        rc = zt_errf(err, errlen, "import: %s: lm_head.weight differs from model.embed_tokens.weight but config.json "
                     "says tie_word_embeddings = true", in->path);
    free(x);
    return rc;
}

int zt_hf_llama_check_rest(zt_st_file *f, int nf, const zt_hf_map *map, int nmap, const zt_model_shape *s,
                           const float *wte, const char *what, char *err, size_t errlen) {
    for (int k = 0; k < nf; k++)
        for (int j = 0; j < f[k].n; j++) {
            const char *name = f[k].t[j].name;
            int known = 0, l;
            char tail[64] = "";
            for (int r = 0; r < nmap && !known; r++) known = strcmp(name, map[r].name) == 0;
            if (known) continue;
            if (sscanf(name, "model.layers.%d.self_attn.rotary_emb.%63s", &l, tail) == 2 &&
                strcmp(tail, "inv_freq") == 0)
                continue;
            if (s->tied && strcmp(name, "lm_head.weight") == 0) {
                if (tied_head(&f[k], &f[k].t[j], s, wte, err, errlen)) return 1;
                continue;
            }
            return zt_errf(err, errlen, "import: %s: tensor %s is not part of the model config.json describes (%s, %d "
                           "layers%s)", f[k].path, name, what, s->n_layer, s->tied ? ", tied LM head" : "");
        }
    return 0;
}
