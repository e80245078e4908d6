/* sampler.c — KV-cached decoding, sampling, prompts, and the samples printed during training
 * (sampler.h). The decode path runs the backend's forward ops on one token; it never dereferences a
 * device buffer (logits come back through to_host). */
#include "core/model/sampler.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/metrics.h"
#include "util/util.h"

/* ---------------------------------------------------------------- the sampler */

struct zt_sampler {
    zt_backend *be;
    zt_model_shape s;
    zt_param_table table;
    /* device */
    float *kcache, *vcache;     /* (L, maxT, NKV hs) each: the key/value heads only */
    float *rope_cs;             /* (maxT, hs/2, 2): rotary positions (NULL with learned positions) */
    float *x, *x2;              /* (C) residual stream */
    float *ln;                  /* (C) */
    float *mean, *rstd;         /* (1) */
    float *qkv;                 /* (Q) */
    float *atty, *proj;         /* (C) */
    float *fch, *fchg;          /* (F), (I): the MLP's first linear and its activation */
    float *logits;              /* (Vp) */
    int32_t *tok;               /* (1) */
    /* host */
    float *logits_host;         /* (Vp) */
    float *top_val;             /* (V) top-k candidates */
    int32_t *top_idx;           /* (V) */
    int32_t *win;               /* (maxT) tokens in the cache, in position order */
    int n_win;
    long tokens_run;
};

static float *dev_floats(zt_backend *be, size_t n) { return be->i->alloc(be, n * sizeof(float)); }

/* one layer's cache of keys (or values) for every position: (maxT, NKV hs) */
static size_t cache_floats(const zt_model_shape *s) {
    return (size_t)s->block_size * s->n_kv_head * (s->n_embd / s->n_head);
}

static size_t rope_floats(const zt_model_shape *s) {
    return s->pos == ZT_POS_ROPE ? (size_t)s->block_size * (s->n_embd / s->n_head) : 0;
}

size_t zt_sampler_bytes(const zt_model_shape *s) {
    const size_t C = s->n_embd, cache = (size_t)s->n_layer * cache_floats(s);
    const size_t acts = 5 * C + (size_t)zt_shape_qkv(s) + (size_t)zt_shape_fc(s) + (size_t)s->ffn;
    return (2 * cache + rope_floats(s) + acts + 2 + (size_t)s->padded_vocab) * sizeof(float) + 1 /* tok */ +
           ((size_t)s->padded_vocab + 2 * (size_t)s->vocab_size + (size_t)s->block_size) * sizeof(float) +
           sizeof(zt_param_table) + sizeof(zt_sampler);
}

zt_sampler *zt_sampler_create(zt_backend *be, const zt_model_shape *s) {
    if (!be->i->attention_decode) return NULL; /* an optional slot: the callers say so */
    zt_sampler *sp = zt_calloc(1, sizeof *sp);
    sp->be = be;
    sp->s = *s;
    zt_param_table_build(&sp->table, s);
    const size_t C = s->n_embd, cache = (size_t)s->n_layer * cache_floats(s);
    sp->kcache = dev_floats(be, cache);
    sp->vcache = dev_floats(be, cache);
    sp->x = dev_floats(be, C);
    sp->x2 = dev_floats(be, C);
    sp->ln = dev_floats(be, C);
    sp->mean = dev_floats(be, 1);
    sp->rstd = dev_floats(be, 1);
    sp->qkv = dev_floats(be, (size_t)zt_shape_qkv(s));
    sp->atty = dev_floats(be, C);
    sp->proj = dev_floats(be, C);
    sp->fch = dev_floats(be, (size_t)zt_shape_fc(s));
    sp->fchg = dev_floats(be, (size_t)s->ffn);
    if (s->pos == ZT_POS_ROPE) {
        float *cs = zt_malloc(rope_floats(s) * sizeof(float));
        zt_model_rope_table(s, cs);
        sp->rope_cs = dev_floats(be, rope_floats(s));
        be->i->to_device(be, sp->rope_cs, cs, rope_floats(s) * sizeof(float));
        be->i->sync(be);
        free(cs);
    }
    sp->logits = dev_floats(be, (size_t)s->padded_vocab);
    sp->tok = be->i->alloc(be, sizeof(int32_t));
    sp->logits_host = zt_malloc((size_t)s->padded_vocab * sizeof(float));
    sp->top_val = zt_malloc((size_t)s->vocab_size * sizeof(float));
    sp->top_idx = zt_malloc((size_t)s->vocab_size * sizeof(int32_t));
    sp->win = zt_malloc((size_t)s->block_size * sizeof(int32_t));
    return sp;
}

void zt_sampler_free(zt_sampler *sp) {
    if (!sp) return;
    zt_backend *be = sp->be;
    void *dev[] = {sp->kcache, sp->vcache, sp->x, sp->x2, sp->ln, sp->mean, sp->rstd, sp->qkv, sp->atty,
                   sp->proj, sp->fch, sp->fchg, sp->logits, sp->tok};
    for (size_t i = sizeof dev / sizeof *dev; i-- > 0;) be->i->free(be, dev[i]);
    if (sp->rope_cs) be->i->free(be, sp->rope_cs);
    free(sp->logits_host);
    free(sp->top_val);
    free(sp->top_idx);
    free(sp->win);
    free(sp);
}

long zt_sampler_tokens_run(const zt_sampler *sp) { return sp->tokens_run; }


/* out(OC) = inp(C) @ w(C, OC) + bias: the backend's one-row product when it has one */
static void lin1(zt_backend *be, float *out, const float *inp, const float *w, const float *bias, int C, int OC) {
    if (be->i->gemv) be->i->gemv(be, out, inp, w, bias, C, OC, 0);
    else be->i->linear_fwd(be, out, inp, w, bias, 1, C, OC);
}

/* the block's normalisation of one row (LayerNorm or RMSNorm: model.norm) */
static void norm1(zt_sampler *sp, float *out, const float *x, const float *w, const float *b) {
    const zt_backend_i *f = sp->be->i;
    if (sp->s.norm == ZT_NORM_RMS) f->rmsnorm_fwd(sp->be, out, sp->rstd, x, w, 1, sp->s.n_embd, sp->s.norm_eps);
    else f->layernorm_fwd(sp->be, out, sp->mean, sp->rstd, x, w, b, 1, sp->s.n_embd, sp->s.norm_eps);
}

/* tensor i's data, NULL for a tensor the description lacks */
static const float *tensor(const zt_sampler *sp, const float *params, int i) {
    return i >= 0 ? params + sp->table.t[i].offset : NULL;
}

const float *zt_sampler_step(zt_sampler *sp, const float *params, int32_t tok, int pos) {
    zt_backend *be = sp->be;
    const zt_backend_i *f = be->i;
    const zt_model_shape *s = &sp->s;
    const int L = s->n_layer, C = s->n_embd, NH = s->n_head, NKV = s->n_kv_head, Vp = s->padded_vocab;
    const int Q = zt_shape_qkv(s), F = zt_shape_fc(s), I = s->ffn, maxT = s->block_size;
    ZT_ASSERT(pos >= 0 && pos < maxT && tok >= 0 && tok < s->vocab_size);
    const size_t lcache = cache_floats(s);
    const zt_param_table *pt = &sp->table;
#define PL(l, k) tensor(sp, params, zt_param_idx(pt, l, k))
    f->to_device(be, sp->tok, &tok, sizeof tok);
    /* wte[tok] + wpe[pos]: embed_fwd of one token whose position row is pos (rotary: wte[tok] alone) */
    f->embed_fwd(be, sp->x, sp->tok, params + pt->t[ZT_P_WTE].offset,
                 pt->wpe >= 0 ? params + pt->t[pt->wpe].offset + (size_t)pos * C : NULL, 1, 1, C);
    for (int l = 0; l < L; l++) {
        norm1(sp, sp->ln, sp->x, PL(l, ZT_LN1W), PL(l, ZT_LN1B));
        lin1(be, sp->qkv, sp->ln, PL(l, ZT_QKVW), PL(l, ZT_QKVB), C, Q);
        if (s->pos == ZT_POS_ROPE) f->rope(be, sp->qkv, sp->rope_cs, 1, 1, pos, NH, NKV, C / NH, 0);
        f->attention_decode(be, sp->atty, sp->kcache + l * lcache, sp->vcache + l * lcache, sp->qkv, pos, maxT, C, NH,
                            NKV);
        lin1(be, sp->proj, sp->atty, PL(l, ZT_ATTPW), PL(l, ZT_ATTPB), C, C);
        f->add(be, sp->x2, sp->x, sp->proj, (size_t)C);
        norm1(sp, sp->ln, sp->x2, PL(l, ZT_LN2W), PL(l, ZT_LN2B));
        lin1(be, sp->fch, sp->ln, PL(l, ZT_FCW), PL(l, ZT_FCB), C, F);
        if (s->mlp == ZT_MLP_SWIGLU) f->swiglu_fwd(be, sp->fchg, sp->fch, 1, I);
        else f->gelu_fwd(be, sp->fchg, sp->fch, (size_t)I);
        lin1(be, sp->proj, sp->fchg, PL(l, ZT_FCPW), PL(l, ZT_FCPB), I, C);
        f->add(be, sp->x, sp->x2, sp->proj, (size_t)C);
    }
    norm1(sp, sp->ln, sp->x, PL(L, 0), PL(L, 1));
#undef PL
    /* logits(1, Vp) = lnf(1, C) @ head(Vp, C)^T, as in the full forward (head: wte, or the untied lm_head) */
    const float *head = params + pt->t[pt->lm_head >= 0 ? pt->lm_head : ZT_P_WTE].offset;
    if (f->gemv) f->gemv(be, sp->logits, sp->ln, head, NULL, C, Vp, 1);
    else f->matmul(be, sp->logits, sp->ln, head, 1, Vp, C, 0, 1, 1.0f, 0.0f);
    f->to_host(be, sp->logits_host, sp->logits, (size_t)Vp * sizeof(float));
    f->sync(be);
    sp->tokens_run++;
    return sp->logits_host;
}

static int32_t argmax(const float *x, int n) {
    int32_t best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* the k largest of x[0..n) into val/idx, descending; ties keep the lower index first */
static int top_k_select(const float *x, int n, int k, float *val, int32_t *idx) {
    int m = 0;
    for (int i = 0; i < n; i++) {
        float v = x[i];
        if (v != v) continue;   /* NaN never wins */
        if (m == k && !(v > val[k - 1])) continue;
        int j = m < k ? m++ : k - 1;
        while (j > 0 && v > val[j - 1]) {
            val[j] = val[j - 1];
            idx[j] = idx[j - 1];
            j--;
        }
        val[j] = v;
        idx[j] = i;
    }
    return m;
}

static int32_t pick(zt_sampler *sp, const float *logits, float temperature, int top_k, zt_rng *rng) {
    const int V = sp->s.vocab_size;
    if (top_k == 1 || temperature <= 0.0f) return argmax(logits, V);
    const float *val = logits;
    const int32_t *idx = NULL;
    int n = V;
    if (top_k > 0 && top_k < V) {
        n = top_k_select(logits, V, top_k, sp->top_val, sp->top_idx);
        if (n == 0) return argmax(logits, V);
        val = sp->top_val;
        idx = sp->top_idx;
    }
    double mx = -INFINITY;
    for (int i = 0; i < n; i++)
        if (val[i] > mx) mx = val[i];
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += val[i] == val[i] ? exp(((double)val[i] - mx) / temperature) : 0.0;
    double u = zt_rng_uniform(rng) * sum, cum = 0.0;
    int chosen = -1;
    for (int i = 0; i < n; i++) {
        if (val[i] != val[i]) continue;
        chosen = i;
        cum += exp(((double)val[i] - mx) / temperature);
        if (cum > u) break;
    }
    if (chosen < 0) return argmax(logits, V);
    return idx ? idx[chosen] : chosen;
}

/* runs tok at the next position, sliding the window first when the cache is full */
static const float *feed(zt_sampler *sp, const float *params, int32_t tok) {
    const int maxT = sp->s.block_size;
    if (sp->n_win == maxT) {
        const int keep = maxT / 2;
        memmove(sp->win, sp->win + maxT - keep, (size_t)keep * sizeof(int32_t));
        for (int j = 0; j < keep; j++) zt_sampler_step(sp, params, sp->win[j], j);
        sp->n_win = keep;
    }
    sp->win[sp->n_win] = tok;
    return zt_sampler_step(sp, params, tok, sp->n_win++);
}

int zt_sampler_generate(zt_sampler *sp, const float *params, const int32_t *prompt, int n_prompt, int n_new,
                        float temperature, int top_k, uint64_t seed, int32_t *out_tokens,
                        void (*on_token)(void *ctx, int32_t tok), void *ctx) {
    if (n_prompt < 1 || n_new < 0 || top_k < 0) return -1;
    for (int i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= sp->s.vocab_size) return -1;
    zt_rng rng;
    zt_rng_seed(&rng, seed);
    sp->n_win = 0;
    sp->tokens_run = 0;
    const int start = n_prompt > sp->s.block_size ? n_prompt - sp->s.block_size : 0;
    const float *lg = NULL;
    for (int i = start; i < n_prompt; i++) lg = feed(sp, params, prompt[i]);
    for (int k = 0; k < n_new; k++) {
        int32_t t = pick(sp, lg, temperature, top_k, &rng);
        if (out_tokens) out_tokens[k] = t;
        if (on_token) on_token(ctx, t);
        if (k + 1 < n_new) lg = feed(sp, params, t);
    }
    return n_new;
}

/* ---------------------------------------------------------------- prompts and tokenizers */

/* "1 2 3" or "1,2,3" -> ids (each < V); returns the count or -1 with err */
static int parse_ids(const char *s, int V, int32_t **out, char *err, size_t errlen) {
    int n = 0, cap = 16;
    int32_t *ids = zt_malloc((size_t)cap * sizeof(int32_t));
    const char *p = s;
    for (;;) {
        while (*p == ' ' || *p == ',' || *p == '\t' || *p == '\n') p++;
        if (!*p) break;
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v >= V || (*end && *end != ' ' && *end != ',' && *end != '\t' && *end != '\n')) {
            snprintf(err, errlen,
                     "--prompt '%.200s': without a tokenizer the prompt is a list of token ids in [0, %d) "
                     "(\"1 2 3\"); give --tokenizer PATH for text", s, V);
            free(ids);
            return -1;
        }
        if (n == cap) ids = realloc(ids, (size_t)(cap *= 2) * sizeof(int32_t));
        ZT_ASSERT(ids);
        ids[n++] = (int32_t)v;
        p = end;
    }
    *out = ids;
    return n;
}

/* loads path and checks its vocab against the model's; NULL with err on failure */
zt_tokenizer *zt_sampler_load_tokenizer(const char *path, int V, char *err, size_t errlen) {
    zt_tokenizer *t = zt_tokenizer_load(path, NULL, err, errlen);
    if (!t) return NULL;
    if ((int)zt_tokenizer_vocab_size(t) != V) {
        snprintf(err, errlen, "tokenizer %s has vocab %u but the model has %d", path, zt_tokenizer_vocab_size(t), V);
        zt_tokenizer_free(t);
        return NULL;
    }
    return t;
}

/* the prompt as ids: encoded text with a tokenizer, a list of ids without; "" = end-of-text */
int zt_sampler_prompt_ids(zt_tokenizer *tok, const char *text, int V, int32_t **out, char *err, size_t errlen) {
    if (!text[0] && tok) { /* a tokenizer that frames text with BOS (Llama) starts from it, as HF's encode("") does */
        zt_ids bos = {0};
        zt_tokenizer_encode(tok, (const uint8_t *)"", 0, &bos);
        if (bos.n) {
            *out = zt_malloc(bos.n * sizeof(int32_t));
            for (size_t i = 0; i < bos.n; i++) (*out)[i] = (int32_t)bos.v[i];
            const int n = (int)bos.n;
            zt_ids_free(&bos);
            return n;
        }
        zt_ids_free(&bos);
    }
    if (!text[0]) {
        uint32_t eot = tok ? zt_tokenizer_eot(tok) : (uint32_t)(V - 1);
        if (eot == ZT_TOK_NO_EOT) {
            snprintf(err, errlen, "the prompt is empty and the tokenizer has no <|endoftext|> to start from: give a prompt");
            return -1;
        }
        *out = zt_malloc(sizeof(int32_t));
        (*out)[0] = (int32_t)eot;
        return 1;
    }
    if (!tok) return parse_ids(text, V, out, err, errlen);
    zt_ids ids = {0};
    zt_tokenizer_encode(tok, (const uint8_t *)text, strlen(text), &ids);
    *out = zt_malloc((ids.n ? ids.n : 1) * sizeof(int32_t));
    for (size_t i = 0; i < ids.n; i++) (*out)[i] = (int32_t)ids.v[i];
    int n = (int)ids.n;
    zt_ids_free(&ids);
    return n;
}


/* ---------------------------------------------------------------- samples during training */

struct zt_train_sample {
    zt_sampler *sp;
    zt_tokenizer *tok;
    int32_t *prompt, *out;
    int n_prompt, n_new, top_k;
    float temperature;
    uint64_t seed;
};

int zt_train_sample_create(zt_train_sample **out, zt_backend *be, const zt_model_shape *s, const zt_config *c,
                           int active, char *err, size_t errlen) {
    *out = NULL;
    if (!active || c->sample.every <= 0) return 0;
    zt_tokenizer *tok = NULL;
    if (c->data.tokenizer[0]) {
        char e[ZT_ERR_BUF];
        if (!(tok = zt_sampler_load_tokenizer(c->data.tokenizer, s->vocab_size, e, sizeof e))) {
            snprintf(err, errlen, "data.tokenizer: %s", e);
            return 1;
        }
    }
    int32_t *prompt = NULL;
    char e[ZT_ERR_BUF];
    int n = zt_sampler_prompt_ids(tok, c->sample.prompt, s->vocab_size, &prompt, e, sizeof e);
    if (n <= 0) {
        snprintf(err, errlen, "sample.prompt = \"%.200s\": %s", c->sample.prompt, n == 0 ? "encodes to no tokens" : e);
        zt_tokenizer_free(tok);
        free(prompt);
        return 1;
    }
    zt_sampler *sp = zt_sampler_create(be, s);
    if (!sp) {
        zt_log("sample.every = %ld: the %s backend cannot decode (no attention_decode): no samples during training\n",
               c->sample.every, be->i->name);
        zt_tokenizer_free(tok);
        free(prompt);
        return 0;
    }
    zt_train_sample *ts = zt_calloc(1, sizeof *ts);
    ts->sp = sp;
    ts->tok = tok;
    ts->prompt = prompt;
    ts->n_prompt = n;
    ts->n_new = c->sample.tokens;
    ts->out = zt_malloc((size_t)ts->n_new * sizeof(int32_t));
    ts->temperature = (float)c->sample.temperature;
    ts->top_k = c->sample.top_k;
    ts->seed = (uint64_t)c->train.seed;
    *out = ts;
    return 0;
}

void zt_sample_during_training(zt_train_sample *ts, struct zt_metrics *mx, const float *params, long step) {
    if (!ts) return;
    double t0 = zt_now();
    zt_sampler_generate(ts->sp, params, ts->prompt, ts->n_prompt, ts->n_new, ts->temperature, ts->top_k,
                        ts->seed + (uint64_t)step, ts->out, NULL, NULL);
    double dt = zt_now() - t0;
    /* prompt + continuation as text (or ids); the text is printed as it is, newlines included */
    char *text = NULL;
    size_t len = 0;
    if (ts->tok) {
        uint8_t *b = NULL;
        char e[ZT_ERR_BUF];
        uint32_t *ids = zt_malloc((size_t)(ts->n_prompt + ts->n_new) * sizeof(uint32_t));
        for (int i = 0; i < ts->n_prompt; i++) ids[i] = (uint32_t)ts->prompt[i];
        for (int i = 0; i < ts->n_new; i++) ids[ts->n_prompt + i] = (uint32_t)ts->out[i];
        if (zt_tokenizer_decode(ts->tok, ids, (size_t)(ts->n_prompt + ts->n_new), &b, &len, e, sizeof e) == 0) {
            text = zt_malloc(len + 1);
            memcpy(text, b, len);
            text[len] = 0;
        }
        free(b);
        free(ids);
    }
    if (!text) {
        size_t cap = (size_t)(ts->n_prompt + ts->n_new) * 12 + 1;
        text = zt_malloc(cap);
        len = 0;
        for (int i = 0; i < ts->n_prompt + ts->n_new; i++)
            len += (size_t)snprintf(text + len, cap - len, "%s%d", i ? " " : "",
                                    i < ts->n_prompt ? ts->prompt[i] : ts->out[i - ts->n_prompt]);
    }
    zt_metrics_note(mx, "sample at step %ld (%d tokens, %.0f tokens/s):\n%s\n", step, ts->n_new,
                    dt > 0 ? ts->n_new / dt : 0.0, text);
    char p[1100];
    zt_metrics_path(mx, "samples.txt", p, sizeof p);
    FILE *f = mx->active ? fopen(p, "a") : NULL;
    if (f) {
        fprintf(f, "=== step %ld\n%s\n", step, text);
        fclose(f);
    }
    free(text);
}

void zt_train_sample_free(zt_train_sample *ts) {
    if (!ts) return;
    zt_sampler_free(ts->sp);
    zt_tokenizer_free(ts->tok);
    free(ts->prompt);
    free(ts->out);
    free(ts);
}

