/* hf_bert.c — the encoders in Hugging Face's layout (see hf_bert.h): BertForMaskedLM and RobertaForMaskedLM
 * directories <-> ztrain's model.* keys and encoder table. P below is "bert" or "roberta"; the MLM head H is
 * "cls.predictions" (BERT, its dense and LayerNorm under H.transform) or "lm_head" (RoBERTa, H.dense, H.layer_norm).
 *
 * Tensors (ztrain's layout: iface/param_table.h; tests/helpers/hf_bert_common.py's to_ztrain):
 *   wte.weight (Vp, C)                 = P.embeddings.word_embeddings.weight (V, C) + Vp - V zero rows
 *   wpe.weight (block_size + off, C)   = P.embeddings.position_embeddings.weight (max_position_embeddings rows)
 *   tte.weight (type_vocab_size, C)    = P.embeddings.token_type_embeddings.weight
 *   emb_ln.weight / bias               = P.embeddings.LayerNorm.weight / bias
 *   h.l.attn.c_attn.weight (C, 3C)     = [query; key; value].weight^T of P.encoder.layer.l.attention.self
 *   h.l.attn.c_attn.bias (3C)          = [query; key; value].bias
 *   h.l.attn.c_proj.weight / bias      = P.encoder.layer.l.attention.output.dense.weight^T / bias
 *   h.l.ln_1.weight / bias             = P.encoder.layer.l.attention.output.LayerNorm.weight / bias
 *   h.l.mlp.c_fc.weight (C, I) / bias  = P.encoder.layer.l.intermediate.dense.weight^T / bias
 *   h.l.mlp.c_proj.weight (I, C) / bias = P.encoder.layer.l.output.dense.weight^T / bias
 *   h.l.ln_2.weight / bias             = P.encoder.layer.l.output.LayerNorm.weight / bias
 *   head.dense.weight (C, C) / bias    = H(.transform).dense.weight^T / bias
 *   head.ln.weight / bias              = H.transform.LayerNorm / H.layer_norm .weight / bias
 *   head.bias (Vp)                     = H.bias (V) + Vp - V zeros
 * The decoder (H.decoder.weight) is the word embedding: save_pretrained leaves it and H.decoder.bias (the same
 * parameter as H.bias) out of the file, and export does the same. Import accepts them when a file has them anyway
 * and they equal the word embeddings / H.bias; a decoder that differs is refused (ztrain ties it). Import also
 * accepts the original BERT checkpoints' LayerNorm names (.gamma / .beta, which from_pretrained renames), the
 * position_ids / token_type_ids buffers (ignored), and the pooler (P.pooler.dense.*) and next-sentence head
 * (cls.seq_relationship.*) of a pre-training checkpoint: BertForMaskedLM has neither, transformers drops them on
 * load, and import drops them too and says how many. Any other tensor is an error naming it.
 *
 * config.json -> model.*: hidden_size -> n_embd, num_hidden_layers -> n_layer, num_attention_heads -> n_head,
 * intermediate_size, vocab_size (padded_vocab by ztrain's rule unless -c/--set give one), layer_norm_eps ->
 * norm_eps, type_vocab_size, pad_token_id -> pad_id, sep_token_id (when given) -> sep_id, initializer_range ->
 * init_std; max_position_embeddings -> block_size = max_position_embeddings - position_offset, where
 * position_offset is 0 (BERT) or pad_token_id + 1 (RoBERTa numbers its positions from there). The family comes from
 * model_type (else architectures); architectures, when given, must be the family's ...ForMaskedLM.
 *
 * Decisions (each refusal is exit 2 with one line naming the file, the field, its value and what is supported):
 *  - hidden_size, num_hidden_layers, num_attention_heads, intermediate_size and vocab_size are required; an absent
 *    optional field takes transformers 4.44's default for the class (max_position_embeddings 512, type_vocab_size 2,
 *    layer_norm_eps 1e-12, pad_token_id 0 (BERT) / 1 (RoBERTa), hidden_act gelu, position_embedding_type absolute).
 *  - intermediate_size may be any size: ztrain's GELU MLP takes model.intermediate_size (4C is only the default).
 *  - hidden_act must be "gelu" (transformers' exact, erf GELU; ztrain's gelu_exact); gelu_new, relu, ... are refused.
 *  - position_embedding_type must be "absolute" (relative_key, relative_key_query are not implemented).
 *  - is_decoder and add_cross_attention must be false (a causal or cross-attending BERT is another model);
 *    tie_word_embeddings must be true (ztrain's decoder is the word embedding).
 *  - type_vocab_size >= 1 and pad_token_id an id below vocab_size (null is refused: the encoders need a padding
 *    token, and RoBERTa's positions count from it); max_position_embeddings must leave RoBERTa a position.
 *  - hidden_dropout_prob, attention_probs_dropout_prob and classifier_dropout are accepted at any value and
 *    ignored: ztrain trains without dropout (the function of the model is the same); classifier_dropout belongs to
 *    the classification heads, not the MLM model. Export writes transformers' defaults (0.1, 0.1, null), so that
 *    a further fine-tune in transformers gets the class's usual dropout.
 *  - chunk_size_feed_forward is accepted at any value: transformers then applies the MLP to chunks of positions,
 *    the same function per position (export writes the default, 0).
 *  - Everything else hf_common.c's list of generic fields does not name (and quantization_config, pruned_heads)
 *    is refused by name.
 *  - export: config.json as transformers 4.44 writes BertConfig / RobertaConfig; RoBERTa's bos_token_id /
 *    eos_token_id are null (the checkpoint does not know its tokenizer's ids); a description the class cannot
 *    express (model.mlp = gelu (tanh), biases overridden, no token types, a position_offset other than the
 *    family's) is refused naming the key. */
#include "cmd/hf_bert.h"

#include <string.h>

/* ---------------------------------------------------------------- the two classes */

typedef struct enc_family {
    const char *family;  /* model_type, and the encoder's prefix P */
    const char *head;    /* the MLM head H: its bias is H.bias, the tied decoder H.decoder */
    const char *dense;   /* the head's dense layer */
    const char *ln;      /* the head's LayerNorm */
    int pad_default;     /* transformers 4.44's pad_token_id */
    int offset_by_pad;   /* positions start at pad_token_id + 1 */
} enc_family;

static const enc_family families[] = {
    {"bert", "cls.predictions", "cls.predictions.transform.dense", "cls.predictions.transform.LayerNorm", 0, 0},
    {"roberta", "lm_head", "lm_head.dense", "lm_head.layer_norm", 1, 1},
};

static const enc_family *family_named(const char *name) {
    for (size_t k = 0; k < sizeof families / sizeof *families; k++)
        if (strcmp(name, families[k].family) == 0) return &families[k];
    return NULL;
}

/* ---------------------------------------------------------------- config.json -> model.* */

static const char *const model_keys[] = {
    "architectures", "model_type", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
    "vocab_size", "max_position_embeddings", "type_vocab_size", "layer_norm_eps", "hidden_act",
    "position_embedding_type", "hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout",
    "tie_word_embeddings"};

static int known_key(const void *ctx, const char *key) {
    (void)ctx;
    for (size_t i = 0; i < sizeof model_keys / sizeof *model_keys; i++)
        if (strcmp(key, model_keys[i]) == 0) return 1;
    return 0;
}

/* the model's sizes as config.json gives them */
typedef struct enc_cfg {
    int C, L, H, I, V, P, types, pad, sep, offset; /* sep -1: config.json does not say */
    double eps;
} enc_cfg;

static int read_sizes(const zt_hf_reader *j, const enc_family *f, enc_cfg *h) {
    const zt_json *pad = zt_json_get(j->cj, "pad_token_id"), *sep = zt_json_get(j->cj, "sep_token_id");
    if (pad && pad->type == ZT_JSON_NULL)
        return zt_hf_bad(j, "pad_token_id null: ztrain's encoders need the padding token's id (supported: an id; "
                         "padding is never attended to%s)", f->offset_by_pad ? ", and positions count from it" : "");
    if (zt_hf_get_int(j, "hidden_size", -1, 1, &h->C) || zt_hf_get_int(j, "num_hidden_layers", -1, 1, &h->L) ||
        zt_hf_get_int(j, "num_attention_heads", -1, 1, &h->H) ||
        zt_hf_get_int(j, "intermediate_size", -1, 1, &h->I) || zt_hf_get_int(j, "vocab_size", -1, 2, &h->V) ||
        zt_hf_get_int(j, "max_position_embeddings", 512, 1, &h->P) ||
        zt_hf_get_int(j, "type_vocab_size", 2, 1, &h->types) ||
        zt_hf_get_int(j, "pad_token_id", f->pad_default, 0, &h->pad) ||
        zt_hf_get_num(j, "layer_norm_eps", 1e-12, 0, &h->eps))
        return 1;
    h->sep = -1;
    if (sep && sep->type != ZT_JSON_NULL && zt_hf_get_int(j, "sep_token_id", 0, 0, &h->sep)) return 1;
    if (h->C % h->H) return zt_hf_bad(j, "hidden_size %d is not divisible by num_attention_heads %d", h->C, h->H);
    if (h->pad >= h->V || h->sep >= h->V)
        return zt_hf_bad(j, "pad_token_id = %d, sep_token_id = %d: ids below vocab_size = %d", h->pad, h->sep, h->V);
    h->offset = f->offset_by_pad ? h->pad + 1 : 0;
    if (h->P <= h->offset)
        return zt_hf_bad(j, "max_position_embeddings = %d leaves no position after RoBERTa's first, pad_token_id + 1 "
                         "= %d", h->P, h->offset);
    return 0;
}

/* a string field that must be `want` when present */
static int only_string(const zt_hf_reader *j, const char *key, const char *want, const char *supported) {
    const zt_json *v = zt_json_get(j->cj, key);
    if (!v || (v->type == ZT_JSON_STR && strcmp(v->str, want) == 0)) return 0;
    if (v->type != ZT_JSON_STR) return zt_hf_bad(j, "%s: not a string (supported: \"%s\")", key, want);
    return zt_hf_bad(j, "%s \"%.40s\": %s", key, v->str, supported);
}

/* the fields that must hold a value ztrain's model has; the ones accepted at any value are read for their type */
static int read_unsupported(const zt_hf_reader *j) {
    int dec = 0, cross = 0, tied = 1, chunk = 0;
    double p;
    if (only_string(j, "hidden_act", "gelu", "ztrain's encoders use the exact (erf) GELU, \"gelu\"") ||
        only_string(j, "position_embedding_type", "absolute", "ztrain's encoders have absolute (learned) positions, "
                    "\"absolute\"") ||
        zt_hf_get_bool(j, "is_decoder", 0, &dec) || zt_hf_get_bool(j, "add_cross_attention", 0, &cross) ||
        zt_hf_get_bool(j, "tie_word_embeddings", 1, &tied) || zt_hf_get_num(j, "hidden_dropout_prob", 0, 1, &p) ||
        zt_hf_get_num(j, "attention_probs_dropout_prob", 0, 1, &p) ||
        zt_hf_get_num(j, "classifier_dropout", 0, 1, &p) ||
        zt_hf_get_int(j, "chunk_size_feed_forward", 0, 0, &chunk))
        return 1;
    if (dec) return zt_hf_bad(j, "is_decoder = true: ztrain's encoders attend both ways (supported: false)");
    if (cross) return zt_hf_bad(j, "add_cross_attention = true: cross-attention is not supported (supported: false)");
    if (!tied)
        return zt_hf_bad(j, "tie_word_embeddings = false: ztrain's MLM decoder is the word embedding (supported: "
                         "true)");
    return 0;
}

int zt_hf_bert_config_in(const zt_json *cj, const char *path, const char *family, zt_config *c, char *err,
                         size_t errlen) {
    const zt_hf_reader r = {cj, path, err, errlen}, *j = &r;
    const enc_family *f = family_named(family);
    enc_cfg h = {0};
    if (!f) return zt_errf(err, errlen, "import: %s: model family %s is not one of bert, roberta", path, family);
    if (zt_hf_check_keys(j, known_key, f, zt_hf_arch(family)) || read_sizes(j, f, &h) || read_unsupported(j))
        return 1;
    /* (config.json's field, the model.* key, its value); sep_id only when config.json gives it */
    const struct { const char *field, *key; int v; } ints[] = {
        {"hidden_size", "n_embd", h.C}, {"num_hidden_layers", "n_layer", h.L}, {"num_attention_heads", "n_head", h.H},
        {"intermediate_size", "intermediate_size", h.I}, {"vocab_size", "vocab_size", h.V},
        {"max_position_embeddings", "block_size", h.P - h.offset},
        {"max_position_embeddings", "position_offset", h.offset},
        {"type_vocab_size", "type_vocab_size", h.types}, {"pad_token_id", "pad_id", h.pad},
        {"sep_token_id", "sep_id", h.sep}};
    /* the description's keys at the family's choices, whatever -c CFG had */
    static const char *const desc[] = {"n_kv_head=0", "norm=auto", "position=auto", "mlp=auto", "bias=auto",
                                       "tie_embeddings=auto", "rope_theta=0", "rope_scaling=none"};
    int bad = zt_hf_set_key(j, c, "model_type", "model.family=%s", family) ||
              zt_hf_set_key(j, c, "layer_norm_eps", "model.norm_eps=%.17g", h.eps);
    for (size_t i = 0; !bad && i < sizeof ints / sizeof *ints; i++)
        if (ints[i].v >= 0) bad = zt_hf_set_key(j, c, ints[i].field, "model.%s=%d", ints[i].key, ints[i].v);
    for (size_t i = 0; !bad && i < sizeof desc / sizeof *desc; i++)
        bad = zt_hf_set_key(j, c, "model_type", "model.%s", desc[i]);
    const zt_json *ir = zt_json_get(cj, "initializer_range"); /* kept for the export (ztrain's init_std) */
    if (!bad && ir && ir->type == ZT_JSON_NUM && ir->num >= 0 && ir->num <= 10)
        bad = zt_hf_set_key(j, c, "initializer_range", "model.init_std=%.17g", ir->num);
    return bad;
}

/* ---------------------------------------------------------------- model.* -> config.json */

/* 0 when s is what the class holds; else 1 naming the model.* key */
static int expressible(const enc_family *f, const zt_model_shape *s, char *err, size_t errlen) {
    const char *arch = zt_hf_arch(f->family);
    const int offset = f->offset_by_pad ? s->pad_id + 1 : 0;
    if (!s->encoder || s->norm != ZT_NORM_LAYER || s->pos != ZT_POS_LEARNED || !s->tied || s->n_kv_head != s->n_head)
        return zt_errf(err, errlen, "export: model.family = %s but the checkpoint is not an encoder with LayerNorm, "
                       "learned positions, multi-head attention and a tied decoder", f->family);
    if (s->mlp != ZT_MLP_GELU_ERF)
        return zt_errf(err, errlen, "export: model.mlp = gelu (tanh): transformers' %s uses the exact GELU "
                       "(gelu_exact)", arch);
    if (s->bias != ZT_BIAS_ALL)
        return zt_errf(err, errlen, "export: model.bias: transformers' %s has a bias on every linear layer", arch);
    if (s->type_vocab < 1)
        return zt_errf(err, errlen, "export: model.type_vocab_size = 0: transformers' %s always has token type "
                       "embeddings (train with type_vocab_size >= 1)", arch);
    if (s->pos_offset != offset)
        return zt_errf(err, errlen, "export: model.position_offset = %d: transformers' %s numbers positions from %d%s",
                       s->pos_offset, arch, offset, f->offset_by_pad ? " (pad_id + 1)" : "");
    return 0;
}

int zt_hf_bert_config_out(FILE *f, const zt_config *c, const zt_model_shape *s, const char *torch_dtype, char *err,
                          size_t errlen) {
    const enc_family *fam = family_named(c->model.family);
    if (!fam)
        return zt_errf(err, errlen, "export: model.family = %s is not an encoder (bert, roberta)", c->model.family);
    if (expressible(fam, s, err, errlen)) return 1;
    char eps[32], std[32];
    zt_hf_shortest(eps, sizeof eps, c->model.norm_eps > 0 ? c->model.norm_eps : (double)s->norm_eps);
    zt_hf_shortest(std, sizeof std, c->model.init_std);
    fprintf(f, "{\n  \"architectures\": [\n    \"%s\"\n  ],\n  \"attention_probs_dropout_prob\": 0.1,\n",
            zt_hf_arch(fam->family));
    if (fam->offset_by_pad) fprintf(f, "  \"bos_token_id\": null,\n");
    fprintf(f, "  \"classifier_dropout\": null,\n");
    if (fam->offset_by_pad) fprintf(f, "  \"eos_token_id\": null,\n");
    fprintf(f, "  \"hidden_act\": \"gelu\",\n  \"hidden_dropout_prob\": 0.1,\n  \"hidden_size\": %d,\n"
               "  \"initializer_range\": %s,\n  \"intermediate_size\": %d,\n  \"layer_norm_eps\": %s,\n"
               "  \"max_position_embeddings\": %d,\n  \"model_type\": \"%s\",\n  \"num_attention_heads\": %d,\n"
               "  \"num_hidden_layers\": %d,\n  \"pad_token_id\": %d,\n  \"position_embedding_type\": \"absolute\",\n",
            s->n_embd, std, s->ffn, eps, zt_shape_pos_rows(s), fam->family, s->n_head, s->n_layer, s->pad_id);
    if (s->sep_id >= 0) fprintf(f, "  \"sep_token_id\": %d,\n", s->sep_id);
    fprintf(f, "  \"torch_dtype\": \"%s\",\n  \"type_vocab_size\": %d,\n  \"use_cache\": true,\n"
               "  \"vocab_size\": %d\n}\n", torch_dtype, s->type_vocab, s->vocab_size);
    return 0;
}

/* ---------------------------------------------------------------- tensors */

/* a layer's tensors under P.encoder.layer.l, by zt_layer_tensor (c_attn's are attention.self.{query,key,value}) */
static const struct {
    const char *name;
    int kind;
} layer_rows[ZT_PER_LAYER] = {
    {"attention.output.LayerNorm.weight", ZT_HF_SAME}, {"attention.output.LayerNorm.bias", ZT_HF_SAME},
    {"attention.self", ZT_HF_TCOLS},                   {"attention.self", ZT_HF_SLICE},
    {"attention.output.dense.weight", ZT_HF_TCOLS},    {"attention.output.dense.bias", ZT_HF_SAME},
    {"output.LayerNorm.weight", ZT_HF_SAME},           {"output.LayerNorm.bias", ZT_HF_SAME},
    {"intermediate.dense.weight", ZT_HF_TCOLS},        {"intermediate.dense.bias", ZT_HF_SAME},
    {"output.dense.weight", ZT_HF_TCOLS},              {"output.dense.bias", ZT_HF_SAME},
};

/* the whole of ztrain tensor t as one Hugging Face tensor: its shape (ZT_HF_ROWS: V rows; ZT_HF_TCOLS transposed) */
static int add_whole(zt_hf_map *o, int n, int i, const zt_tensor_info *t, int kind, int V, const char *prefix,
                     const char *name) {
    const int tr = kind == ZT_HF_TCOLS;
    const int64_t d0 = kind == ZT_HF_ROWS ? V : t->shape[tr], d1 = t->ndim == 1 ? 0 : t->shape[!tr];
    return zt_hf_map_add(o, n, i, kind, 0, d0, d1, "%s.%s", prefix, name);
}

static int add_layer(zt_hf_map *o, int n, int i, const zt_tensor_info *t, const enc_family *f, int C) {
    static const char *const qkv[] = {"query", "key", "value"};
    const int k = t->kind;
    char prefix[64], part[64];
    snprintf(prefix, sizeof prefix, "%s.encoder.layer.%d", f->family, t->layer);
    if (k != ZT_QKVW && k != ZT_QKVB) return add_whole(o, n, i, t, layer_rows[k].kind, 0, prefix, layer_rows[k].name);
    for (int q = 0; q < 3; q++) {
        snprintf(part, sizeof part, "%s.%s.%s", layer_rows[k].name, qkv[q], k == ZT_QKVW ? "weight" : "bias");
        n = zt_hf_map_add(o, n, i, layer_rows[k].kind, q * C, C, k == ZT_QKVW ? C : 0, "%s.%s", prefix, part);
    }
    return n;
}

int zt_hf_bert_map(const zt_param_table *pt, const zt_model_shape *s, const char *family, zt_hf_map *out, char *err,
                   size_t errlen) {
    const enc_family *f = family_named(family);
    if (!f || !s->encoder) {
        zt_errf(err, errlen, "model.family = %s is not an encoder (bert, roberta)", family);
        return -1;
    }
    const struct {
        int i;
        const char *prefix, *name;
        int kind;
    } rows[] = {
        {ZT_P_WTE, f->family, "embeddings.word_embeddings.weight", ZT_HF_ROWS},
        {pt->wpe, f->family, "embeddings.position_embeddings.weight", ZT_HF_SAME},
        {pt->tte, f->family, "embeddings.token_type_embeddings.weight", ZT_HF_SAME},
        {pt->emb_ln, f->family, "embeddings.LayerNorm.weight", ZT_HF_SAME},
        {pt->emb_ln + 1, f->family, "embeddings.LayerNorm.bias", ZT_HF_SAME},
        {zt_param_idx(pt, s->n_layer, 0), f->ln, "weight", ZT_HF_SAME},
        {zt_param_idx(pt, s->n_layer, 1), f->ln, "bias", ZT_HF_SAME},
        {pt->head_dense, f->dense, "weight", ZT_HF_TCOLS},
        {pt->head_dense + 1, f->dense, "bias", ZT_HF_SAME},
        {pt->head_bias, f->head, "bias", ZT_HF_ROWS},
    };
    int n = 0;
    for (int i = 0; i < pt->n && n >= 0; i++) {
        const zt_tensor_info *t = &pt->t[i];
        const int before = n;
        if (t->layer >= 0) n = add_layer(out, n, i, t, f, s->n_embd);
        for (size_t r = 0; r < sizeof rows / sizeof *rows && n == before; r++)
            if (rows[r].i == i) n = add_whole(out, n, i, t, rows[r].kind, s->vocab_size, rows[r].prefix, rows[r].name);
        if (n == before) {
            zt_errf(err, errlen, "tensor %s has no place in %s", t->name, zt_hf_arch(family));
            n = -1;
        }
    }
    return n;
}

/* ---------------------------------------------------------------- import */

/* "X.Y" with X = prefix: Y, else NULL */
static const char *under(const char *name, const char *prefix) {
    const size_t n = strlen(prefix);
    return strncmp(name, prefix, n) == 0 && name[n] == '.' ? name + n + 1 : NULL;
}

int zt_hf_bert_check_rest(zt_st_file *f, int nf, const zt_hf_map *map, int nmap, const zt_model_shape *s,
                          const char *family, const float *wte, const float *head_bias, int *ignored, char *err,
                          size_t errlen) {
    const enc_family *fam = family_named(family);
    char wname[64], bname[64];
    snprintf(wname, sizeof wname, "%s.embeddings.word_embeddings.weight", family);
    snprintf(bname, sizeof bname, "%s.bias", fam->head);
    *ignored = 0;
    for (int k = 0; k < nf; k++)
        for (int j = 0; j < f[k].n; j++) {
            const zt_st_tensor *st = &f[k].t[j];
            const char *base = under(st->name, family), *head = under(st->name, fam->head);
            if (zt_hf_in_map(map, nmap, st->name)) continue;
            if (base && (!strcmp(base, "embeddings.position_ids") || !strcmp(base, "embeddings.token_type_ids")))
                continue;
            if ((base && under(base, "pooler")) || under(st->name, "cls.seq_relationship")) {
                ++*ignored;
                continue;
            }
            int bad = 0;
            if (head && strcmp(head, "decoder.weight") == 0)
                bad = zt_hf_check_tied(&f[k], st, s->vocab_size, s->n_embd, wte, wname, ": ztrain's MLM decoder is "
                                       "the word embedding (tie_word_embeddings; untied decoders are not supported)",
                                       err, errlen);
            else if (head && strcmp(head, "decoder.bias") == 0)
                bad = zt_hf_check_tied(&f[k], st, s->vocab_size, 0, head_bias, bname,
                                       ": ztrain's decoder bias is that one tensor", err, errlen);
            else
                bad = zt_errf(err, errlen, "import: %s: tensor %s is not part of the model config.json describes (%s, "
                              "%d layers)", f[k].path, st->name, zt_hf_arch(family), s->n_layer);
            if (bad) return 1;
        }
    return 0;
}
