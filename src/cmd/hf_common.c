/* hf_common.c — what the Hugging Face families share (see hf_common.h): the classes ztrain imports and exports,
 * config.json's fields read with one-line refusals, and the tensor map (layouts, the import's gather and checks).
 * The families' own decisions are in hf_llama.c's and hf_bert.c's headers. */
#include "cmd/hf_common.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- the classes */

static const struct hf_class {
    const char *family, *arch, *as;
    int encoder;
} classes[] = {
    {"llama", "LlamaForCausalLM", "a causal LM", 0},
    {"mistral", "MistralForCausalLM", "a causal LM", 0},
    {"qwen2", "Qwen2ForCausalLM", "a causal LM", 0},
    {"bert", "BertForMaskedLM", "a masked LM", 1},
    {"roberta", "RobertaForMaskedLM", "a masked LM", 1},
};
#define N_CLASSES ((int)(sizeof classes / sizeof *classes))

static const struct hf_class *class_of(const char *family, const char *arch) {
    for (int k = 0; k < N_CLASSES; k++)
        if ((family && strcmp(family, classes[k].family) == 0) || (arch && strcmp(arch, classes[k].arch) == 0))
            return &classes[k];
    return NULL;
}

const char *zt_hf_arch(const char *family) {
    const struct hf_class *c = class_of(family, NULL);
    return c ? c->arch : "?";
}

int zt_hf_is_encoder(const char *family) {
    const struct hf_class *c = class_of(family, NULL);
    return c && c->encoder;
}

int zt_hf_family(const zt_json *cj, const char *path, const char **family, char *err, size_t errlen) {
    const zt_json *mt = zt_json_get(cj, "model_type"), *ar = zt_json_get(cj, "architectures");
    const int arr = ar && ar->type == ZT_JSON_ARR;
    const struct hf_class *c = NULL;
    if (mt && mt->type == ZT_JSON_STR) c = class_of(mt->str, NULL);
    else if (arr && ar->n > 0 && ar->items[0].type == ZT_JSON_STR) c = class_of(NULL, ar->items[0].str);
    if (!c) return 0;
    for (int i = 0; arr && i < ar->n; i++)
        if (ar->items[i].type != ZT_JSON_STR || strcmp(ar->items[i].str, c->arch) != 0) {
            zt_errf(err, errlen, "import: %s: architectures [\"%s\"]: ztrain imports %s (model_type \"%s\") as %s "
                    "only", path, ar->items[i].type == ZT_JSON_STR ? ar->items[i].str : "?", c->arch, c->family, c->as);
            return -1;
        }
    if (ar && !arr && ar->type != ZT_JSON_NULL) {
        zt_errf(err, errlen, "import: %s: architectures: expected a list of class names", path);
        return -1;
    }
    *family = c->family;
    return 1;
}

/* ---------------------------------------------------------------- config.json's fields */

/* fields that do not change the function the model computes (a family checks the ones it gives a meaning,
   e.g. BERT's is_decoder, before these are accepted by name) */
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

int zt_hf_bad(const zt_hf_reader *r, const char *fmt, ...) {
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return zt_errf(r->err, r->errlen, "import: %.300s: %s", r->path, msg);
}

int zt_hf_check_keys(const zt_hf_reader *r, int (*family_key)(const void *ctx, const char *key), const void *ctx,
                     const char *arch) {
    if (r->cj->type != ZT_JSON_OBJ) return zt_hf_bad(r, "not a JSON object");
    for (int i = 0; i < r->cj->n; i++) {
        const char *k = r->cj->keys[i];
        int known = family_key(ctx, k);
        for (size_t j = 0; !known && j < sizeof benign_keys / sizeof *benign_keys; j++)
            known = strcmp(k, benign_keys[j]) == 0;
        if (strcmp(k, "quantization_config") == 0)
            return zt_hf_bad(r, "quantization_config: pre-quantised weights are not supported (import the unquantised "
                             "model)");
        if (!known)
            return zt_hf_bad(r, "field \"%.80s\" is not one ztrain implements for %s (it may change the model: refused "
                             "rather than importing a different one)", k, arch);
    }
    const zt_json *ph = zt_json_get(r->cj, "pruned_heads");
    if (ph && !(ph->type == ZT_JSON_OBJ && ph->n == 0) && ph->type != ZT_JSON_NULL)
        return zt_hf_bad(r, "pruned_heads: pruned attention heads are not supported");
    return 0;
}

int zt_hf_get_int(const zt_hf_reader *r, const char *key, int dflt, int lo, int *out) {
    const zt_json *v = zt_json_get(r->cj, key);
    if (!v || v->type == ZT_JSON_NULL) {
        if (dflt < 0) return zt_hf_bad(r, "has no %s", key);
        *out = dflt;
        return 0;
    }
    if (v->type != ZT_JSON_NUM || !v->is_int || v->inum < lo || v->inum > (1 << 30))
        return zt_hf_bad(r, "%s: expected an integer >= %d", key, lo);
    *out = (int)v->inum;
    return 0;
}

int zt_hf_get_num(const zt_hf_reader *r, const char *key, double dflt, int zero_ok, double *out) {
    const zt_json *v = zt_json_get(r->cj, key);
    if (!v || v->type == ZT_JSON_NULL) {
        *out = dflt;
        return 0;
    }
    if (v->type != ZT_JSON_NUM || !(v->num > 0 || (zero_ok && v->num == 0)))
        return zt_hf_bad(r, "%s: expected a number %s 0", key, zero_ok ? ">=" : ">");
    *out = v->num;
    return 0;
}

int zt_hf_get_bool(const zt_hf_reader *r, const char *key, int dflt, int *out) {
    const zt_json *v = zt_json_get(r->cj, key);
    if (!v || v->type == ZT_JSON_NULL) {
        *out = dflt;
        return 0;
    }
    if (v->type != ZT_JSON_BOOL) return zt_hf_bad(r, "%s: expected true or false", key);
    *out = v->num != 0;
    return 0;
}

int zt_hf_set_key(const zt_hf_reader *r, zt_config *c, const char *field, const char *fmt, ...) {
    char kv[256], e[ZT_ERR_BUF];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(kv, sizeof kv, fmt, ap);
    va_end(ap);
    if (zt_config_set(c, kv, e, sizeof e) == 0) return 0;
    const char *m = strncmp(e, "--set: ", 7) == 0 ? e + 7 : e;
    return zt_hf_bad(r, "%s: %.400s", field, m);
}

void zt_hf_shortest(char *buf, size_t n, double x) {
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

/* ---------------------------------------------------------------- tensors */

int zt_hf_map_add(zt_hf_map *out, int n, int zt, int kind, int c0, int64_t d0, int64_t d1, const char *fmt, ...) {
    zt_hf_map *h = &out[n];
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

void zt_hf_canonical_name(const char *name, char *out, size_t n) {
    static const char *const legacy[][2] = {{"LayerNorm.gamma", "LayerNorm.weight"},
                                            {"LayerNorm.beta", "LayerNorm.bias"}};
    const size_t len = strlen(name);
    for (size_t k = 0; k < 2; k++) {
        const size_t l = strlen(legacy[k][0]);
        if (len >= l && strcmp(name + len - l, legacy[k][0]) == 0) {
            snprintf(out, n, "%.*s%s", (int)(len - l), name, legacy[k][1]);
            return;
        }
    }
    snprintf(out, n, "%s", name);
}

int zt_hf_in_map(const zt_hf_map *map, int nmap, const char *name) {
    char canon[160];
    zt_hf_canonical_name(name, canon, sizeof canon);
    for (int r = 0; r < nmap; r++)
        if (strcmp(canon, map[r].name) == 0) return 1;
    return 0;
}

/* the file tensor of map name `name`: under that name, else a legacy name that is it */
static const zt_st_tensor *find(zt_st_file *f, int nf, const char *name, zt_st_file **in) {
    char canon[160];
    for (int k = 0; k < nf; k++) {
        const zt_st_tensor *t = zt_st_find(&f[k], name);
        for (int j = 0; !t && j < f[k].n; j++) {
            zt_hf_canonical_name(f[k].t[j].name, canon, sizeof canon);
            if (strcmp(canon, name) == 0) t = &f[k].t[j];
        }
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

int zt_hf_gather(zt_st_file *f, int nf, const zt_hf_map *map, int nmap, const zt_param_table *pt, int i, float *dst,
                 float *tmp, char *err, size_t errlen) {
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
                           st->name, got, want);
        }
        if (zt_st_read_f32(in, st, tmp, err, errlen)) return 1;
        zt_hf_from_hf(h, t, tmp, dst);
    }
    return 0;
}

int zt_hf_check_tied(zt_st_file *in, const zt_st_tensor *st, int64_t d0, int64_t d1, const float *want,
                     const char *other, const char *why, char *err, size_t errlen) {
    const size_t n = (size_t)d0 * (size_t)(d1 ? d1 : 1);
    if (st->ndim != (d1 ? 2 : 1) || st->shape[0] != d0 || (d1 && st->shape[1] != d1))
        return zt_errf(err, errlen, "import: %s: %s has another shape than %s", in->path, st->name, other);
    float *x = zt_malloc(n * sizeof(float));
    int rc = zt_st_read_f32(in, st, x, err, errlen);
    if (!rc && memcmp(x, want, n * sizeof(float)) != 0)
        rc = zt_errf(err, errlen, "import: %s: %s differs from %s%s", in->path, st->name, other, why);
    free(x);
    return rc;
}
