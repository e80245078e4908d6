/* config_derive.c — what a loaded config means beyond its keys' values: the precision as ZT_PREC_*, the
 * lora.targets as a mask and the padded vocabulary (the model's storage options are core/model/model.h's
 * zt_model_opts_from_config).
 * Pure functions of a zt_config (config.h); the schema, parsing and validation are config.c's. */
#include "io/config.h"
#include "util/util.h"

#include <string.h>

int zt_config_prec(const zt_config *c) {
    return strcmp(c->precision, "bf16") == 0 ? 1 : strcmp(c->precision, "fp16") == 0 ? 2 : 0;
}

unsigned zt_config_lora_targets(const char *list, char *err, size_t errlen) {
    /* GPT-2's four linears (bits 0-3), then the Llama family's seven PEFT modules (bits 4-10); "all" = every one a
       family has (the model decides which: core/lora/lora.h zt_lora_family_bits) */
    static const char *const names[] = {"qkv", "proj", "fc", "fcproj", "q_proj", "k_proj", "v_proj", "o_proj",
                                        "gate_proj", "up_proj", "down_proj"};
    const int n_names = (int)(sizeof names / sizeof names[0]);
    unsigned mask = 0;
    const char *p = list;
    while (*p) {
        size_t n = strcspn(p, ",");
        unsigned bit = 0;
        if (n == 3 && strncmp(p, "all", 3) == 0) bit = (1u << n_names) - 1;
        for (int i = 0; i < n_names && !bit; i++)
            if (strlen(names[i]) == n && strncmp(p, names[i], n) == 0) bit = 1u << i;
        if (!bit) {
            zt_errf(err, errlen, "lora.targets = \"%s\": \"%.*s\" is not a target (expected a comma list of qkv, proj, "
                    "fc, fcproj (GPT-2), q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj (the Llama family), "
                    "or all)", list, (int)n, p);
            return 0;
        }
        mask |= bit;
        p += n;
        if (*p == ',') p++;
    }
    if (!mask) zt_errf(err, errlen, "lora.targets = \"%s\": empty (expected a comma list of targets, or all)", list);
    return mask;
}

int zt_config_padded_vocab(const zt_config *c) {
    if (c->model.padded_vocab > 0) return c->model.padded_vocab;
    return (c->model.vocab_size + 127) / 128 * 128;
}

/* model.bias: auto (the family's), none, all, or a comma list of qkv, proj, fc, fcproj; -1 when not valid */
static int bias_mask(const char *list, unsigned family) {
    if (strcmp(list, "auto") == 0) return (int)family;
    if (strcmp(list, "none") == 0) return 0;
    if (strcmp(list, "all") == 0) return ZT_BIAS_ALL;
    static const char *const names[] = {"qkv", "proj", "fc", "fcproj"};
    unsigned mask = 0;
    for (const char *p = list; *p;) {
        const size_t n = strcspn(p, ",");
        unsigned bit = 0;
        for (int i = 0; i < 4 && !bit; i++)
            if (strlen(names[i]) == n && strncmp(p, names[i], n) == 0) bit = 1u << i;
        if (!bit) return -1;
        mask |= bit;
        p += n + (p[n] == ',');
    }
    return (int)mask;
}

int zt_config_shape(const zt_config *c, zt_model_shape *s, char *err, size_t errlen) {
    const typeof(c->model) *m = &c->model;
    memset(s, 0, sizeof *s);
    s->n_layer = m->n_layer;
    s->n_head = m->n_head;
    s->n_embd = m->n_embd;
    s->vocab_size = m->vocab_size;
    s->padded_vocab = zt_config_padded_vocab(c);
    s->block_size = m->block_size;
    zt_model_shape_gpt2(s);
    const int bert = strcmp(m->family, "bert") == 0, roberta = strcmp(m->family, "roberta") == 0;
    if (bert || roberta) { /* encoders: GPT-2's block made post-LN and bidirectional, exact GELU, the MLM head */
        s->encoder = 1;
        s->mlp = ZT_MLP_GELU_ERF;
        s->norm_eps = bert ? 1e-12f : 1e-5f;
        s->type_vocab = m->type_vocab_size >= 0 ? m->type_vocab_size : bert ? 2 : 1;
        s->pad_id = m->pad_id >= 0 ? m->pad_id : bert ? 0 : 1;
        s->sep_id = m->sep_id;
        s->pos_offset = m->position_offset >= 0 ? m->position_offset : roberta ? s->pad_id + 1 : 0;
    } else if (strcmp(m->family, "gpt2") != 0) { /* llama, mistral, qwen2 */
        s->norm = ZT_NORM_RMS;
        s->pos = ZT_POS_ROPE;
        s->mlp = ZT_MLP_SWIGLU;
        s->bias = strcmp(m->family, "qwen2") == 0 ? ZT_BIAS_QKV : 0;
        s->tied = 0;
        s->norm_eps = strcmp(m->family, "qwen2") == 0 ? 1e-6f : 1e-5f;
    }
    if (strcmp(m->norm, "auto") != 0) s->norm = strcmp(m->norm, "rmsnorm") == 0 ? ZT_NORM_RMS : ZT_NORM_LAYER;
    if (strcmp(m->position, "auto") != 0) s->pos = strcmp(m->position, "rope") == 0 ? ZT_POS_ROPE : ZT_POS_LEARNED;
    if (strcmp(m->mlp, "auto") != 0)
        s->mlp = strcmp(m->mlp, "swiglu") == 0 ? ZT_MLP_SWIGLU : strcmp(m->mlp, "gelu_exact") == 0 ? ZT_MLP_GELU_ERF
                                                                                                   : ZT_MLP_GELU;
    if (strcmp(m->tie_embeddings, "auto") != 0) s->tied = strcmp(m->tie_embeddings, "true") == 0;
    const int bias = bias_mask(m->bias, s->bias);
    if (bias < 0)
        return zt_errf(err, errlen, "model.bias = \"%s\": expected auto, none, all or a comma list of qkv, proj, fc, "
                       "fcproj", m->bias);
    s->bias = (unsigned)bias;
    if (m->norm_eps > 0) s->norm_eps = (float)m->norm_eps;
    if (m->rope_theta > 0) s->rope_theta = m->rope_theta;
    if (strcmp(m->rope_scaling, "llama3") == 0) {
        s->rope_factor = m->rope_factor;
        s->rope_low_freq = m->rope_low_freq_factor;
        s->rope_high_freq = m->rope_high_freq_factor;
        s->rope_orig_max = m->rope_original_max_position;
    }
    s->n_kv_head = m->n_kv_head > 0 ? m->n_kv_head : m->n_head;
    if (m->n_embd % m->n_head)
        return zt_errf(err, errlen, "model.n_embd = %d is not divisible by model.n_head = %d (each head gets n_embd / "
                       "n_head channels)", m->n_embd, m->n_head);
    if (m->n_head % s->n_kv_head)
        return zt_errf(err, errlen, "model.n_kv_head = %d does not divide model.n_head = %d (each key/value head serves "
                       "a whole group of query heads)", s->n_kv_head, m->n_head);
    if (s->pos == ZT_POS_ROPE && (m->n_embd / m->n_head) % 2)
        return zt_errf(err, errlen, "model.position = rope needs an even head size: n_embd / n_head = %d",
                       m->n_embd / m->n_head);
    if (s->mlp == ZT_MLP_SWIGLU && m->intermediate_size <= 0)
        return zt_errf(err, errlen, "model.intermediate_size = %d: a SwiGLU MLP (model.family = %s) needs its hidden size "
                       "(config.json's intermediate_size)", m->intermediate_size, m->family);
    s->ffn = m->intermediate_size > 0 ? m->intermediate_size : 4 * m->n_embd;
    if (s->encoder) {
        if (s->norm != ZT_NORM_LAYER || s->pos != ZT_POS_LEARNED || s->mlp == ZT_MLP_SWIGLU || !s->tied ||
            s->n_kv_head != s->n_head)
            return zt_errf(err, errlen, "model.family = %s: an encoder has LayerNorm, learned positions, a GELU MLP, "
                           "multi-head attention and the decoder tied to the embeddings (leave model.norm, position, "
                           "mlp, tie_embeddings and n_kv_head at auto)", m->family);
        if (s->pad_id >= s->vocab_size || s->sep_id >= s->vocab_size)
            return zt_errf(err, errlen, "model.pad_id = %d, model.sep_id = %d: must be below model.vocab_size = %d",
                           s->pad_id, s->sep_id, s->vocab_size);
        if (c->train.head_chunks > 1)
            return zt_errf(err, errlen, "train.head_chunks = %d: model.family = %s scores only its masked positions in "
                           "one pass; chunks are for the decoder families (set train.head_chunks = 1)",
                           c->train.head_chunks, m->family);
    } else if (m->type_vocab_size > 0 || m->pad_id >= 0 || m->sep_id >= 0 || m->position_offset >= 0) {
        return zt_errf(err, errlen, "model.type_vocab_size, pad_id, sep_id and position_offset are for the encoder "
                       "families (bert, roberta), not model.family = %s", m->family);
    }
    return 0;
}

int zt_config_check_zero(const zt_config *c, char *err, size_t errlen) {
    const int stage = c->zero.stage, off = strcmp(c->zero.offload, "none") != 0;
    if (stage == 3 && c->lora.enabled)
        return zt_errf(err, errlen, "zero.stage = 3 with lora.enabled = true: LoRA trains adapters on a frozen base that "
                       "every rank holds whole; use zero.stage = 2 (stage 3 shards the parameters of full training)");
    if (off && c->lora.enabled)
        return zt_errf(err, errlen, "zero.offload = \"%s\" with lora.enabled = true: the adapters' optimizer state is "
                       "small and stays with them; use zero.offload = \"none\"", c->zero.offload);
    if (off && stage == 0)
        return zt_errf(err, errlen, "zero.offload = \"%s\" needs zero.stage >= 1 (each rank offloads its shard of the "
                       "optimizer state)", c->zero.offload);
    if (!strcmp(c->zero.offload, "optimizer+params") && stage != 3)
        return zt_errf(err, errlen, "zero.offload = \"optimizer+params\" needs zero.stage = 3 (only stage 3 shards the "
                       "parameters; use zero.offload = \"optimizer\" at stage %d)", stage);
    return 0;
}

int zt_config_check_mlm(const zt_config *c, const zt_model_shape *s, char *err, size_t errlen) {
    if (!s->encoder) return 0;
    const typeof(c->mlm) *o = &c->mlm;
    if (o->mask_id < 0 || o->mask_id >= c->model.vocab_size)
        return zt_errf(err, errlen, "mlm.mask_id = %d: model.family = %s trains a masked language model and needs its "
                       "[MASK] token, an id below model.vocab_size = %d", o->mask_id, c->model.family, c->model.vocab_size);
    if (o->cls_id >= c->model.vocab_size || o->sep_id >= c->model.vocab_size)
        return zt_errf(err, errlen, "mlm.cls_id = %d, mlm.sep_id = %d: must be below model.vocab_size = %d", o->cls_id,
                       o->sep_id, c->model.vocab_size);
    if (o->mask_frac + o->random_frac > 1.0)
        return zt_errf(err, errlen, "mlm.mask_frac + mlm.random_frac = %g: the fractions of the selected tokens must "
                       "sum to at most 1", o->mask_frac + o->random_frac);
    if (c->sample.every > 0)
        return zt_errf(err, errlen, "sample.every = %ld with model.family = %s: an encoder does not generate text (set "
                       "sample.every = 0)", c->sample.every, c->model.family);
    if (c->train.seq_len + s->pos_offset > zt_shape_pos_rows(s))
        return zt_errf(err, errlen, "train.seq_len = %d: more than model.block_size = %d positions",
                       c->train.seq_len, s->block_size);
    return 0;
}
