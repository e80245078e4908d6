/* import.c — `ztrain import` (Hugging Face safetensors -> a ztrain checkpoint at step 0) for GPT2LMHeadModel,
 * through cmd/hf_llama.c LlamaForCausalLM, MistralForCausalLM and Qwen2ForCausalLM, and through cmd/hf_bert.c
 * BertForMaskedLM and RobertaForMaskedLM; `ztrain export` is export.c.
 *
 * Import reads config.json beside the tensors: model_type (else architectures) llama, mistral or qwen2 is the
 * Llama family, bert or roberta an encoder; either's config.json is required and decides the model (every field
 * hf_llama.c / hf_bert.c does not implement is refused by name; the tensors must then have exactly the shapes it
 * gives); anything else is GPT-2, whose
 * shape comes from the tensors (config.json optional, checked against them). Either way model.* of -c CFG is
 * replaced, and --set may not change the model (model.padded_vocab aside). Reads model.safetensors, or shards
 * with model.safetensors.index.json.
 *
 * GPT-2 names: accepted with or without the "transformer." prefix; the attention-mask buffers (h.N.attn.bias /
 * attn.masked_bias) are ignored and an lm_head.weight is accepted only when it equals wte.weight (ztrain ties
 * them); wte is padded back to Vp zero rows, so export -> import is bit-exact.
 *
 * Fine-tuning from an import: give import the training config so the checkpoint stores it,
 *   ztrain import --safetensors gpt2/ --out ft/ckpt/step_00000000.h5 -c finetune.cfg
 *   ztrain train -c finetune.cfg --set checkpoint.dir=ft/ckpt --resume auto
 * (model.* in finetune.cfg is replaced by the tensors' shape; resume then finds the same config,
 * step 0 and zero moments, which is exactly a fresh start from these weights). */
#define _GNU_SOURCE
#include "cmd/export.h"

#include <errno.h>
#include <libgen.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd/cli.h"
#include "cmd/hf_bert.h"
#include "cmd/hf_llama.h"
#include "core/dist/backend_factory.h"
#include "core/model/model_load.h"
#include "io/ckpt.h"
#include "io/safetensors.h"
#include "util/json.h"
#include "util/util.h"

#define PREFIX "transformer."

/* ---------------------------------------------------------------- import: the source files */

#define MAX_SHARDS 64

typedef struct source {
    int n;
    zt_st_file f[MAX_SHARDS];
    char config_json[ZT_PATH_MAX + 64];  /* "" if none */
    char what[ZT_PATH_MAX];              /* for messages */
} source;

/* zt_st_open after the type check (a named pipe would block the open) */
static int st_open_checked(zt_st_file *f, const char *path, char *err, size_t errlen) {
    if (zt_check_input_file(path, "a safetensors file", err, errlen)) return 1;
    return zt_st_open(f, path, err, errlen);
}

static int open_index(source *src, const char *dir, const char *index, char *err, size_t errlen) {
    if (zt_check_input_file(index, "a model.safetensors.index.json file", err, errlen)) return 1;
    FILE *f = fopen(index, "rb");
    if (!f) return snprintf(err, errlen, "%s: cannot open: %s", index, strerror(errno)), 1;
    char *txt = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&txt, &len);
    char buf[65536];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, f)) > 0) fwrite(buf, 1, k, mem);
    fclose(f);
    fclose(mem);
    zt_json j;
    char jerr[256];
    int rc = zt_json_parse(txt, len, &j, jerr, sizeof jerr);
    free(txt);
    if (rc) return snprintf(err, errlen, "%s: not valid JSON (%s)", index, jerr), 1;
    const zt_json *wm = zt_json_get(&j, "weight_map");
    if (!wm || wm->type != ZT_JSON_OBJ) rc = snprintf(err, errlen, "%s: has no weight_map object", index) > 0;
    for (int i = 0; !rc && i < wm->n; i++) {
        const char *file = wm->items[i].type == ZT_JSON_STR ? wm->items[i].str : NULL;
        if (!file || strchr(file, '/')) { rc = snprintf(err, errlen, "%s: bad file name in weight_map", index) > 0; break; }
        char p[ZT_PATH_MAX + 300];
        snprintf(p, sizeof p, "%.*s/%.200s", ZT_PATH_MAX, dir, file);
        int seen = 0;
        for (int s = 0; s < src->n; s++) seen |= strcmp(src->f[s].path, p) == 0;
        if (seen) continue;
        if (src->n == MAX_SHARDS) { rc = snprintf(err, errlen, "%s: more than %d shard files", index, MAX_SHARDS) > 0; break; }
        char e[ZT_ERR_BUF];
        rc = st_open_checked(&src->f[src->n], p, e, sizeof e);
        if (rc) zt_errf(err, errlen, "import: %s names %.200s in its weight_map: %s", index, file, e);
        else src->n++;
    }
    zt_json_free(&j);
    return rc;
}

static int open_source(source *src, const char *arg, char *err, size_t errlen) {
    memset(src, 0, sizeof *src);
    snprintf(src->what, sizeof src->what, "%s", arg);
    struct stat st;
    if (stat(arg, &st) != 0) return snprintf(err, errlen, "import: %s: %s", arg, strerror(errno)), 1;
    if (zt_check_input_file_or_dir(arg, "a safetensors file or a directory holding model.safetensors", err, errlen))
        return 1;
    char dir[ZT_PATH_MAX + 1], p[ZT_PATH_MAX + 64];
    if (S_ISDIR(st.st_mode)) {
        snprintf(dir, sizeof dir, "%s", arg);
        snprintf(p, sizeof p, "%s/model.safetensors", dir);
        if (access(p, R_OK) == 0) {
            if (st_open_checked(&src->f[0], p, err, errlen)) return 1;
            src->n = 1;
        } else {
            snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
            if (access(p, R_OK) != 0)
                return snprintf(err, errlen, "import: %s has no model.safetensors (nor a model.safetensors.index.json)",
                                arg), 1;
            if (open_index(src, dir, p, err, errlen)) return 1;
        }
    } else {
        char cp[ZT_PATH_MAX + 1];
        snprintf(cp, sizeof cp, "%s", arg);
        snprintf(dir, sizeof dir, "%s", dirname(cp));
        if (st_open_checked(&src->f[0], arg, err, errlen)) return 1;
        src->n = 1;
    }
    snprintf(p, sizeof p, "%s/config.json", dir);
    if (access(p, R_OK) == 0) {
        if (zt_check_input_file(p, "a Hugging Face config.json", err, errlen)) return 1;
        snprintf(src->config_json, sizeof src->config_json, "%s", p);
    }
    return 0;
}

static void close_source(source *src) {
    for (int i = 0; i < src->n; i++) zt_st_close(&src->f[i]);
}

/* the file tensor for a ztrain name (with or without "transformer.") */
static const zt_st_tensor *lookup(source *src, const char *name, zt_st_file **file) {
    char pn[160];
    snprintf(pn, sizeof pn, PREFIX "%s", name);
    for (int i = 0; i < src->n; i++) {
        const zt_st_tensor *t = zt_st_find(&src->f[i], pn);
        if (!t) t = zt_st_find(&src->f[i], name);
        if (t) { *file = &src->f[i]; return t; }
    }
    return NULL;
}

static const char *base_name(const char *n) { return strncmp(n, PREFIX, strlen(PREFIX)) == 0 ? n + strlen(PREFIX) : n; }

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* ---------------------------------------------------------------- import: the model's shape */

typedef struct shape_in {
    int L, C, V, T, H;    /* H = 0: unknown */
} shape_in;

static int json_int(const zt_json *cj, const char *key, int *out) {
    const zt_json *v = zt_json_get(cj, key);
    if (!v || v->type != ZT_JSON_NUM || !v->is_int) return 0;
    *out = (int)v->inum;
    return 1;
}

/* shape from the tensors, n_head and consistency from config.json (cj; NULL: none) */
static int infer_shape(source *src, const zt_json *cj, shape_in *sh, char *err, size_t errlen) {
    memset(sh, 0, sizeof *sh);
    zt_st_file *f;
    const zt_st_tensor *wte = lookup(src, "wte.weight", &f), *wpe = lookup(src, "wpe.weight", &f);
    static const char *const needs_config[] = {"model.embed_tokens.weight", "bert.embeddings.word_embeddings.weight",
                                               "roberta.embeddings.word_embeddings.weight"};
    for (size_t i = 0; !wte && i < sizeof needs_config / sizeof *needs_config; i++)
        if (lookup(src, needs_config[i], &f))
            return zt_errf(err, errlen, "import: %s: a %s model (%s) needs its config.json beside the tensors",
                           src->what, i ? "BERT-family" : "Llama-family", needs_config[i]);
    if (!wte || !wpe || wte->ndim != 2 || wpe->ndim != 2)
        return snprintf(err, errlen, "import: %s: no 2-D wte.weight / wpe.weight: not a GPT-2 model", src->what), 1;
    sh->V = (int)wte->shape[0];
    sh->C = (int)wte->shape[1];
    sh->T = (int)wpe->shape[0];
    for (int i = 0; i < src->n; i++)
        for (int k = 0; k < src->f[i].n; k++) {
            int l;
            if (sscanf(base_name(src->f[i].t[k].name), "h.%d.", &l) == 1 && l + 1 > sh->L) sh->L = l + 1;
        }
    if (!cj) return 0;
    int rc = 0;
    const char *cjp = src->config_json;
    const zt_json *v;
    int x;
    if ((v = zt_json_get(cj, "model_type")) && v->type == ZT_JSON_STR && strcmp(v->str, "gpt2") != 0)
        rc = snprintf(err, errlen, "import: %s: model_type \"%s\": ztrain imports gpt2, llama, mistral, qwen2, bert "
                      "and roberta models", cjp, v->str);
    else if (!json_int(cj, "n_head", &sh->H) || sh->H < 1)
        sh->H = 0;
    static const struct { const char *key; size_t off; } same[] = {
        {"n_embd", offsetof(shape_in, C)}, {"n_layer", offsetof(shape_in, L)},
        {"vocab_size", offsetof(shape_in, V)}, {"n_positions", offsetof(shape_in, T)}};
    for (size_t i = 0; !rc && i < sizeof same / sizeof *same; i++) {
        int want = *(int *)((char *)sh + same[i].off);
        if (json_int(cj, same[i].key, &x) && x != want)
            rc = snprintf(err, errlen, "import: %s: %s = %d but the tensors have %d", cjp, same[i].key, x, want);
    }
    if (!rc && (v = zt_json_get(cj, "activation_function")) && v->type == ZT_JSON_STR &&
        strcmp(v->str, "gelu_new") && strcmp(v->str, "gelu_pytorch_tanh"))
        rc = snprintf(err, errlen, "import: %s: activation_function \"%s\": ztrain's GPT-2 uses gelu_new (tanh GELU)",
                      cjp, v->str);
    if (!rc && (v = zt_json_get(cj, "layer_norm_epsilon")) && v->type == ZT_JSON_NUM && fabs(v->num - 1e-5) > 1e-12)
        rc = snprintf(err, errlen, "import: %s: layer_norm_epsilon %g: ztrain's LayerNorm uses 1e-05", cjp, v->num);
    if (!rc && json_int(cj, "n_inner", &x) && x != 4 * sh->C)
        rc = snprintf(err, errlen, "import: %s: n_inner %d: ztrain's MLP is 4 x n_embd = %d", cjp, x, 4 * sh->C);
    if (!rc && (v = zt_json_get(cj, "scale_attn_by_inverse_layer_idx")) && v->type == ZT_JSON_BOOL && v->num)
        rc = snprintf(err, errlen, "import: %s: scale_attn_by_inverse_layer_idx = true is not supported", cjp);
    if (!rc && (v = zt_json_get(cj, "scale_attn_weights")) && v->type == ZT_JSON_BOOL && !v->num)
        rc = snprintf(err, errlen, "import: %s: scale_attn_weights = false is not supported", cjp);
    if (!rc && (v = zt_json_get(cj, "tie_word_embeddings")) && v->type == ZT_JSON_BOOL && !v->num)
        rc = snprintf(err, errlen, "import: %s: tie_word_embeddings = false: ztrain ties the LM head to wte", cjp);
    return rc != 0;
}

/* ---------------------------------------------------------------- import */

static void shape_str(int ndim, const int64_t *d, char *o, size_t n) {
    if (ndim == 1) snprintf(o, n, "(%lld)", (long long)d[0]);
    else if (ndim == 2) snprintf(o, n, "(%lld, %lld)", (long long)d[0], (long long)d[1]);
    else snprintf(o, n, "(%d dimensions)", ndim);
}

/* reads every table tensor into m->params (wte padded with zero rows); checks nothing is left */
static int fill_params(source *src, zt_model *m, zt_backend *be, char *err, size_t errlen) {
    const zt_param_table *pt = &m->table;
    size_t maxn = 1;
    for (int i = 0; i < pt->n; i++) if (pt->t[i].numel > maxn) maxn = pt->t[i].numel;
    float *host = zt_malloc(maxn * sizeof(float)), *lm = NULL;
    int rc = 0;
    for (int i = 0; i < pt->n && !rc; i++) {
        const zt_tensor_info *t = &pt->t[i];
        zt_st_file *f;
        const zt_st_tensor *st = lookup(src, t->name, &f);
        int64_t want[2] = {i == 0 ? m->s.vocab_size : t->shape[0], t->shape[1]};
        char ws[48], hs[48];
        shape_str(t->ndim, want, ws, sizeof ws);
        if (!st) { rc = snprintf(err, errlen, "import: %s: tensor %s is missing (shape %s)", src->what, t->name, ws); break; }
        if (st->ndim != t->ndim || st->shape[0] != want[0] || (t->ndim == 2 && st->shape[1] != want[1])) {
            shape_str(st->ndim, st->shape, hs, sizeof hs);
            rc = snprintf(err, errlen, "import: %s: tensor %s has shape %s but the model expects %s", f->path, st->name,
                          hs, ws);
            break;
        }
        if ((rc = zt_st_read_f32(f, st, host, err, errlen))) break;
        size_t n = (size_t)zt_st_numel(st);
        be->i->to_device(be, m->params + t->offset, host, n * sizeof(float));
        be->i->sync(be);
        if (i == 0) { lm = zt_malloc(n * sizeof(float)); memcpy(lm, host, n * sizeof(float)); }
    }
    /* every other tensor must be a known buffer or the tied head */
    for (int s = 0; s < src->n && !rc; s++)
        for (int k = 0; k < src->f[s].n && !rc; k++) {
            const zt_st_tensor *st = &src->f[s].t[k];
            const char *b = base_name(st->name);
            if (zt_param_find(pt, b) >= 0 || ends_with(b, ".attn.bias") || ends_with(b, ".attn.masked_bias")) continue;
            if (strcmp(st->name, "lm_head.weight") == 0 && lm) {
                size_t n = (size_t)m->s.vocab_size * m->s.n_embd;
                if (zt_st_numel(st) != n || (rc = zt_st_read_f32(&src->f[s], st, host, err, errlen))) {
                    if (!rc) rc = snprintf(err, errlen, "import: %s: lm_head.weight has another shape than wte.weight",
                                           src->f[s].path);
                } else if (memcmp(host, lm, n * sizeof(float)) != 0) {
                    rc = snprintf(err, errlen, "import: %s: lm_head.weight differs from wte.weight: ztrain ties the LM "
                                  "head to the embedding (untied heads are not supported)", src->f[s].path);
                }
                continue;
            }
            rc = snprintf(err, errlen, "import: %s: tensor %s is not part of a GPT-2 model with %d layers",
                          src->f[s].path, st->name, m->s.n_layer);
        }
    free(lm);
    free(host);
    return rc != 0;
}

/* the Llama family or an encoder: every table tensor from its Hugging Face parts (zero padding rows), then the
   files' other tensors (a tied head or decoder must equal what ztrain keeps: wte's V rows, the head's V biases) */
static int fill_hf(source *src, zt_model *m, zt_backend *be, const char *family, int *ignored, char *err,
                   size_t errlen) {
    const zt_param_table *pt = &m->table;
    const int enc = zt_hf_is_encoder(family);
    zt_hf_map *map = zt_calloc((size_t)ZT_HF_MAX_PARTS * pt->n, sizeof *map);
    const int nmap = enc ? zt_hf_bert_map(pt, &m->s, family, map, err, errlen)
                         : zt_hf_llama_map(pt, &m->s, map, err, errlen);
    size_t maxn = 1;
    for (int i = 0; i < pt->n; i++) if (pt->t[i].numel > maxn) maxn = pt->t[i].numel;
    float *dst = zt_malloc(maxn * sizeof(float)), *tmp = zt_malloc(maxn * sizeof(float)), *kept[2] = {NULL, NULL};
    const int keep[2] = {m->s.tied ? ZT_P_WTE : -1, pt->head_bias};
    int rc = nmap < 0;
    for (int i = 0; i < pt->n && !rc; i++) {
        if ((rc = zt_hf_gather(src->f, src->n, map, nmap, pt, i, dst, tmp, err, errlen))) break;
        be->i->to_device(be, m->params + pt->t[i].offset, dst, pt->t[i].numel * sizeof(float));
        be->i->sync(be);
        for (int k = 0; k < 2; k++)
            if (i == keep[k]) {
                kept[k] = zt_malloc(pt->t[i].numel * sizeof(float));
                memcpy(kept[k], dst, pt->t[i].numel * sizeof(float));
            }
    }
    *ignored = 0;
    if (!rc && enc)
        rc = zt_hf_bert_check_rest(src->f, src->n, map, nmap, &m->s, family, kept[0], kept[1], ignored, err, errlen);
    else if (!rc)
        rc = zt_hf_llama_check_rest(src->f, src->n, map, nmap, &m->s, kept[0], zt_hf_arch(family), err, errlen);
    free(kept[0]);
    free(kept[1]);
    free(tmp);
    free(dst);
    free(map);
    return rc != 0;
}

static int set_given(const zt_cli *cli, const char *key) {
    size_t n = strlen(key);
    for (int i = 0; i < cli->n_sets; i++)
        if (strncmp(cli->sets[i], key, n) == 0 && cli->sets[i][n] == '=') return 1;
    return 0;
}

/* model.* of GPT-2 tensors: the shape they and config.json give, GPT-2's description (whatever -c CFG had) */
static int gpt2_config(zt_config *c, const zt_cli *cli, const shape_in *sh, const char *in, char *err, size_t errlen) {
    static const char *const desc[] = {"model.family=gpt2", "model.n_kv_head=0", "model.intermediate_size=0",
                                       "model.norm=auto", "model.position=auto", "model.mlp=auto", "model.bias=auto",
                                       "model.tie_embeddings=auto", "model.norm_eps=0", "model.rope_theta=0",
                                       "model.rope_scaling=none"};
    for (size_t i = 0; i < sizeof desc / sizeof *desc; i++)
        if (zt_config_set(c, desc[i], err, errlen)) return 1;
    c->model.n_layer = sh->L;
    c->model.n_embd = sh->C;
    c->model.vocab_size = sh->V;
    c->model.block_size = sh->T;
    if (sh->H) c->model.n_head = sh->H;
    else if (!cli->config_path && !set_given(cli, "model.n_head"))
        return zt_errf(err, errlen, "import: %s: the tensors do not tell model.n_head: put the model's config.json "
                       "beside them, or pass --set model.n_head=N (or -c CFG)", in);
    return 0;
}

/* config.json beside the tensors, parsed (cj->type NULL when there is none); 0 or 1 with one line */
static int read_config_json(const source *src, zt_json *cj, char *err, size_t errlen) {
    memset(cj, 0, sizeof *cj);
    if (!src->config_json[0]) return 0;
    size_t len = 0;
    char jerr[256], *txt = zt_read_file(src->config_json, "a Hugging Face config.json", &len, err, errlen);
    if (!txt) return 1;
    int rc = zt_json_parse(txt, len, cj, jerr, sizeof jerr);
    free(txt);
    if (rc) return zt_errf(err, errlen, "import: %s: not valid JSON (%s)", src->config_json, jerr);
    return 0;
}

/* the checkpoint's config: CFG (or the defaults), model.* from the files, then --set, which may not change the model
   the files give (only its padding, model.padded_vocab, GPT-2's n_head when nothing else names it, and an encoder's
   model.sep_id, a property of its tokenizer's data rather than of its weights) */
static zt_config *import_config(const zt_cli *cli, const char *in, source *src, const zt_json *cj, const char *family) {
    char err[ZT_ERR_BUF] = "";
    zt_config *c = zt_calloc(1, sizeof *c), *probe = zt_malloc(sizeof *probe);
    shape_in sh = {0};
    int bad = 0;
    if (cli->config_path) bad = zt_config_load(c, cli->config_path, 0, NULL, err, sizeof err);
    else zt_config_defaults(c);
    if (bad) zt_user_error_all("%s", err);
    const int enc = family && zt_hf_is_encoder(family);
    static const char *const not_enc[] = {"model.type_vocab_size=-1", "model.pad_id=-1", "model.sep_id=-1",
                                          "model.position_offset=-1"};
    for (size_t i = 0; !enc && i < sizeof not_enc / sizeof *not_enc; i++) zt_config_set(c, not_enc[i], err, sizeof err);
    if (enc) bad = zt_hf_bert_config_in(cj, src->config_json, family, c, err, sizeof err);
    else if (family) bad = zt_hf_llama_config_in(cj, src->config_json, family, c, err, sizeof err);
    else bad = infer_shape(src, cj->type == ZT_JSON_OBJ ? cj : NULL, &sh, err, sizeof err) ||
               gpt2_config(c, cli, &sh, in, err, sizeof err);
    zt_check_all(bad, err, sizeof err);
    if (c->model.padded_vocab && c->model.padded_vocab < c->model.vocab_size) c->model.padded_vocab = 0;
    if (c->train.seq_len > c->model.block_size) c->train.seq_len = c->model.block_size;
    const int heads_known = family || sh.H;
    *probe = *c;
    if (!heads_known) probe->model.n_head = 1;
    zt_model_shape s0, s1; /* zt_config_shape zeroes them first: memcmp sees no stray padding */
    if (zt_config_shape(probe, &s0, err, sizeof err))
        zt_user_error_all("import: %s: a model ztrain cannot build: %s", family ? src->config_json : in, err);
    for (int i = 0; i < cli->n_sets && !bad; i++) bad = zt_config_set(c, cli->sets[i], err, sizeof err);
    if (!bad) bad = zt_config_validate(c, 1, err, sizeof err);
    if (bad && enc && strncmp(err, "mlm.mask_id", 11) == 0)
        zt_user_error_all("import: %s; give it with --set mlm.mask_id=ID (the tokenizer's [MASK] / <mask> id) or "
                          "-c CFG", err);
    if (bad) zt_user_error_all("%s", err);
    zt_config_shape(c, &s1, err, sizeof err);
    s0.padded_vocab = s1.padded_vocab;
    if (enc) s0.sep_id = s1.sep_id;
    if (!heads_known) s0.n_head = s1.n_head, s0.n_kv_head = s1.n_kv_head;
    if (memcmp(&s0, &s1, sizeof s0) != 0)
        zt_user_error_all("import: --set changes the model the files give (%s: n_layer %d, n_head %d, n_kv_head %d, "
                          "n_embd %d, vocab_size %d, block_size %d%s): only model.padded_vocab (and an encoder's "
                          "model.sep_id) may be set",
                          c->model.family, s0.n_layer, s0.n_head, s0.n_kv_head, s0.n_embd, s0.vocab_size, s0.block_size,
                          heads_known ? "" : "; n_head from you");
    free(probe);
    return c;
}

/* each rank writes its shard of the parameters and zero moments to out (via out.tmp) */
static void write_import(const zt_config *c, zt_model *m, zt_backend *be, const zt_shard_layout *sl, zt_dist *d,
                         const char *out) {
    char err[ZT_ERR_BUF] = "";
    zt_ckpt_view v = zt_model_ckpt_view(m);
    v.lo = zt_shard_lo(sl, d->rank);
    v.hi = v.lo + sl->shard;
    v.optim_base = v.lo;
    v.optim_elems = sl->shard;
    v.exp_avg = be->i->alloc(be, sl->shard * sizeof(float));
    v.exp_avg_sq = be->i->alloc(be, sl->shard * sizeof(float));
    size_t tl = zt_config_to_string(c, NULL, 0);
    char *text = zt_malloc(tl + 1);
    zt_config_to_string(c, text, tl + 1);
    zt_ckpt_meta meta = {0};
    meta.world_size = d->size;
    meta.loss_scale = 1.0f;
    meta.seed = (uint64_t)c->train.seed;
    meta.config_text = text;
    char tmp[ZT_PATH_MAX + 16], parent[ZT_PATH_MAX + 1];
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    snprintf(parent, sizeof parent, "%s", out);
    char *pd = dirname(parent);
    int bad = 0;
    if (d->rank == 0 && zt_mkdirs(pd) != 0)
        bad = zt_errf(err, sizeof err, "import: %s: cannot create: %s", pd, strerror(errno));
    zt_check_all(bad, err, sizeof err);
    if (zt_ckpt_write(tmp, &meta, &v, err, sizeof err)) {
        if (d->rank == 0) unlink(tmp);
        zt_user_error_all("%s", err);
    }
    if (d->rank == 0 && rename(tmp, out) != 0) {
        bad = zt_errf(err, sizeof err, "import: cannot rename %s to %s: %s", tmp, out, strerror(errno));
        unlink(tmp);
    }
    zt_check_all(bad, err, sizeof err);
    free(text);
    be->i->free(be, v.exp_avg);
    be->i->free(be, v.exp_avg_sq);
}

int zt_cmd_import(int argc, char **argv, zt_dist *d) {
    char err[ZT_ERR_BUF] = "";
    const char *in = NULL, *out = NULL, *family = NULL;
    zt_cli_opt opts[] = {{"--safetensors", 1, &in}, {"--out", 1, &out}};
    zt_cli cli;
    if (zt_cli_parse(&cli, argc, argv, opts, 2, err, sizeof err)) zt_user_error_all("%s", err);
    if (!in || !out) zt_user_error_all("import: needs --safetensors FILE_OR_DIR and --out CKPT.h5");
    struct stat ost;
    if (stat(out, &ost) == 0 && !S_ISREG(ost.st_mode))
        zt_user_error_all("import: --out %s: %s (expected the path of the checkpoint file to write, e.g. "
                          "%s/step_00000000.h5)", out, zt_file_kind((unsigned)ost.st_mode), out);
    source *src = zt_calloc(1, sizeof *src);
    zt_json cj;
    int bad = open_source(src, in, err, sizeof err);
    if (!bad) bad = read_config_json(src, &cj, err, sizeof err);
    if (!bad && cj.type == ZT_JSON_OBJ) bad = zt_hf_family(&cj, src->config_json, &family, err, sizeof err) < 0;
    zt_check_all(bad, err, sizeof err);
    zt_config *c = import_config(&cli, in, src, &cj, family);
    zt_json_free(&cj);

    /* the model, with the shard padding of this rank count */
    zt_model_shape s;
    zt_model_shape_from_config(c, &s);
    zt_param_table *pt = zt_malloc(sizeof *pt);
    zt_param_table_build(pt, &s);
    const zt_shard_layout sl = zt_shard_layout_of(pt->total, d->size);
    free(pt);
    zt_backend *be = zt_backend_create(c->device, 1, err, sizeof err);
    if (!be) zt_user_error_all("%s", err);
    zt_model m;
    zt_model_init(&m, be, &s, 1, 1, sl.padded, 0, NULL);
    int ignored = 0;
    bad = family ? fill_hf(src, &m, be, family, &ignored, err, sizeof err) : fill_params(src, &m, be, err, sizeof err);
    zt_check_all(bad, err, sizeof err);
    write_import(c, &m, be, &sl, d, out);
    char left[96] = "";
    if (ignored) snprintf(left, sizeof left, "; %d pooler / next-sentence tensors left out (the MLM model has neither)",
                          ignored);
    if (zt_hf_is_encoder(family ? family : ""))
        zt_log("imported %s: %s n_layer %d, n_head %d, n_embd %d, intermediate %d, vocab %d (padded %d), block %d "
               "(position offset %d), token types %d, pad_id %d, sep_id %d, %zu params -> %s (step 0, zero optimizer "
               "state)%s\n", in, zt_hf_arch(family), s.n_layer, s.n_head, s.n_embd, s.ffn, s.vocab_size,
               s.padded_vocab, s.block_size, s.pos_offset, s.type_vocab, s.pad_id, s.sep_id, m.table.total, out, left);
    else if (family)
        zt_log("imported %s: %s n_layer %d, n_head %d, n_kv_head %d, n_embd %d, intermediate %d, vocab %d (padded %d), "
               "block %d, %s LM head%s, %zu params -> %s (step 0, zero optimizer state)\n", in,
               zt_hf_arch(family), s.n_layer, s.n_head, s.n_kv_head, s.n_embd, s.ffn, s.vocab_size,
               s.padded_vocab, s.block_size, s.tied ? "tied" : "separate",
               s.rope_factor > 0 ? ", llama3 rope scaling" : "", m.table.total, out);
    else
        zt_log("imported %s: GPT-2 n_layer %d, n_head %d, n_embd %d, vocab %d (padded %d), block %d, %zu params -> %s "
               "(step 0, zero optimizer state)\n", in, s.n_layer, s.n_head, s.n_embd, s.vocab_size, s.padded_vocab,
               s.block_size, m.table.total, out);
    zt_model_free(&m);
    zt_backend_destroy(be);
    close_source(src);
    free(src);
    free(c);
    return 0;
}
