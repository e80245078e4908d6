/* sample.c — KV-cached decoding (sample.h), the `sample` command, and samples during training.
 * The decode path runs the backend's forward ops on one token; it never dereferences a device
 * buffer except through to_host. */
#include "sample.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "ckpt.h"
#include "cli.h"
#include "cpu/cpu_backend.h"
#include "metrics.h"
#include "tokenizer.h"
#include "train.h"
#include "util.h"

/* ---------------------------------------------------------------- the sampler */

struct zt_sampler {
    zt_backend *be;
    zt_model_shape s;
    zt_param_table table;
    /* device */
    float *kcache, *vcache;     /* (L, maxT, C) each */
    float *x, *x2;              /* (C) residual stream */
    float *ln;                  /* (C) */
    float *mean, *rstd;         /* (1) */
    float *qkv;                 /* (3C) */
    float *atty, *proj;         /* (C) */
    float *fch, *fchg;          /* (4C) */
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

zt_sampler *zt_sampler_create(zt_backend *be, const zt_model_shape *s) {
    ZT_ASSERT(be->i->attention_decode != NULL);
    zt_sampler *sp = zt_calloc(1, sizeof *sp);
    sp->be = be;
    sp->s = *s;
    zt_model_build_table(&sp->table, s);
    const size_t C = s->n_embd, cache = (size_t)s->n_layer * s->block_size * C;
    sp->kcache = dev_floats(be, cache);
    sp->vcache = dev_floats(be, cache);
    sp->x = dev_floats(be, C);
    sp->x2 = dev_floats(be, C);
    sp->ln = dev_floats(be, C);
    sp->mean = dev_floats(be, 1);
    sp->rstd = dev_floats(be, 1);
    sp->qkv = dev_floats(be, 3 * C);
    sp->atty = dev_floats(be, C);
    sp->proj = dev_floats(be, C);
    sp->fch = dev_floats(be, 4 * C);
    sp->fchg = dev_floats(be, 4 * C);
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
    free(sp->logits_host);
    free(sp->top_val);
    free(sp->top_idx);
    free(sp->win);
    free(sp);
}

long zt_sampler_tokens_run(const zt_sampler *sp) { return sp->tokens_run; }

/* layer l's tensor k (model.h order: wte, wpe, then ZT_PER_LAYER tensors per layer, then ln_f) */
#define PL(l, k) (params + sp->table.t[2 + (l) * ZT_PER_LAYER + (k)].offset)

/* out(OC) = inp(C) @ w(C, OC) + bias: the backend's one-row product when it has one */
static void lin1(zt_backend *be, float *out, const float *inp, const float *w, const float *bias, int C, int OC) {
    if (be->i->gemv) be->i->gemv(be, out, inp, w, bias, C, OC, 0);
    else be->i->linear_fwd(be, out, inp, w, bias, 1, C, OC);
}

const float *zt_sampler_step(zt_sampler *sp, const float *params, int32_t tok, int pos) {
    zt_backend *be = sp->be;
    const zt_backend_i *f = be->i;
    const int L = sp->s.n_layer, C = sp->s.n_embd, NH = sp->s.n_head, Vp = sp->s.padded_vocab;
    const int maxT = sp->s.block_size;
    ZT_ASSERT(pos >= 0 && pos < maxT && tok >= 0 && tok < sp->s.vocab_size);
    const size_t lcache = (size_t)maxT * C;
    f->to_device(be, sp->tok, &tok, sizeof tok);
    /* wte[tok] + wpe[pos]: embed_fwd of one token whose position row is pos */
    f->embed_fwd(be, sp->x, sp->tok, params + sp->table.t[0].offset, params + sp->table.t[1].offset + (size_t)pos * C,
                 1, 1, C);
    for (int l = 0; l < L; l++) {
        f->layernorm_fwd(be, sp->ln, sp->mean, sp->rstd, sp->x, PL(l, ZT_LN1W), PL(l, ZT_LN1B), 1, C);
        lin1(be, sp->qkv, sp->ln, PL(l, ZT_QKVW), PL(l, ZT_QKVB), C, 3 * C);
        f->attention_decode(be, sp->atty, sp->kcache + l * lcache, sp->vcache + l * lcache, sp->qkv, pos, maxT, C, NH);
        lin1(be, sp->proj, sp->atty, PL(l, ZT_ATTPW), PL(l, ZT_ATTPB), C, C);
        f->add(be, sp->x2, sp->x, sp->proj, (size_t)C);
        f->layernorm_fwd(be, sp->ln, sp->mean, sp->rstd, sp->x2, PL(l, ZT_LN2W), PL(l, ZT_LN2B), 1, C);
        lin1(be, sp->fch, sp->ln, PL(l, ZT_FCW), PL(l, ZT_FCB), C, 4 * C);
        f->gelu_fwd(be, sp->fchg, sp->fch, (size_t)4 * C);
        lin1(be, sp->proj, sp->fchg, PL(l, ZT_FCPW), PL(l, ZT_FCPB), 4 * C, C);
        f->add(be, sp->x, sp->x2, sp->proj, (size_t)C);
    }
    const int lnf = 2 + L * ZT_PER_LAYER;
    f->layernorm_fwd(be, sp->ln, sp->mean, sp->rstd, sp->x, params + sp->table.t[lnf].offset,
                     params + sp->table.t[lnf + 1].offset, 1, C);
    /* logits(1, Vp) = lnf(1, C) @ wte(Vp, C)^T, as in the full forward */
    if (f->gemv) f->gemv(be, sp->logits, sp->ln, params + sp->table.t[0].offset, NULL, C, Vp, 1);
    else f->matmul(be, sp->logits, sp->ln, params + sp->table.t[0].offset, 1, Vp, C, 0, 1, 1.0f, 0.0f);
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
static zt_tokenizer *load_tokenizer(const char *path, int V, char *err, size_t errlen) {
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
static int prompt_ids(zt_tokenizer *tok, const char *text, int V, int32_t **out, char *err, size_t errlen) {
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

/* ---------------------------------------------------------------- `ztrain sample` */

typedef struct stream_ctx {
    zt_tokenizer *tok;
    double t_first;     /* when the first new token was chosen (the prompt is done) */
    int n;
} stream_ctx;

static void on_stream(void *p, int32_t id) {
    stream_ctx *s = p;
    if (s->n++ == 0) s->t_first = zt_now();
    if (s->tok) {
        size_t len = 0;
        const uint8_t *b = zt_tokenizer_token(s->tok, (uint32_t)id, &len);
        if (len) fwrite(b, 1, len, stdout);
    } else {
        printf(" %d", id);
    }
    fflush(stdout);
}

/* the checkpoint's resolved config, parsed by the one schema */
static int config_from_text(const char *text, const char *ckpt, zt_config *c, char *err, size_t errlen) {
    if (!text || !text[0]) {
        snprintf(err, errlen, "%s: the checkpoint has no config attribute (not written by ztrain?)", ckpt);
        return 1;
    }
    char cerr[ZT_ERR_BUF] = "";
    if (zt_config_load_string(c, text, cerr, sizeof cerr)) {
        snprintf(err, errlen, "%s: the checkpoint's config does not parse: %s", ckpt, cerr);
        return 1;
    }
    return 0;
}

static int parse_num(const char *opt, const char *s, double lo, double hi, int integer, double *out, char *err,
                     size_t errlen) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno || !(v >= lo && v <= hi) || (integer && v != floor(v))) {
        snprintf(err, errlen, "%s %s: expected %s in [%.15g, %.15g]", opt, s, integer ? "an integer" : "a number", lo, hi);
        return 1;
    }
    *out = v;
    return 0;
}

/* ranks other than 0 wait here without spinning a core while rank 0 generates */
static void quiet_barrier(void) {
    MPI_Request req;
    MPI_Ibarrier(MPI_COMM_WORLD, &req);
    int done = 0;
    struct timespec ts = {0, 2000000};
    for (;;) {
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (done) break;
        nanosleep(&ts, NULL);
    }
}

int zt_cmd_sample(int argc, char **argv, zt_dist *d) {
    char err[ZT_ERR_BUF] = "";
    const char *ck_s = NULL, *prompt_s = NULL, *tokens_s = NULL, *temp_s = NULL, *topk_s = NULL, *seed_s = NULL,
               *tok_s = NULL, *threads_s = NULL;
    zt_cli_opt opts[] = {{"--checkpoint", 1, &ck_s}, {"--prompt", 1, &prompt_s},   {"--tokens", 1, &tokens_s},
                         {"--temperature", 1, &temp_s}, {"--top-k", 1, &topk_s},   {"--seed", 1, &seed_s},
                         {"--tokenizer", 1, &tok_s},    {"--threads", 1, &threads_s}};
    zt_cli cli;
    if (zt_cli_parse(&cli, argc, argv, opts, (int)(sizeof opts / sizeof *opts), err, sizeof err))
        zt_user_error_all("%s", err);
    if (cli.config_path || cli.n_sets)
        zt_user_error_all("sample takes its model and config from the checkpoint: use --checkpoint PATH (no -c/--set)");
    if (!ck_s) zt_user_error_all("sample: --checkpoint PATH (a checkpoint file or a checkpoint directory) is required");
    double v_tokens = 0, v_temp = 0, v_topk = 0, v_seed = 0, v_threads = 0;
    if ((tokens_s && parse_num("--tokens", tokens_s, 1, 1 << 24, 1, &v_tokens, err, sizeof err)) ||
        (temp_s && parse_num("--temperature", temp_s, 0, 100, 0, &v_temp, err, sizeof err)) ||
        (topk_s && parse_num("--top-k", topk_s, 0, 1 << 24, 1, &v_topk, err, sizeof err)) ||
        (seed_s && parse_num("--seed", seed_s, 0, 9007199254740992.0, 1, &v_seed, err, sizeof err)) ||
        (threads_s && parse_num("--threads", threads_s, 1, 4096, 1, &v_threads, err, sizeof err)))
        zt_user_error_all("%s", err);

    /* which file: a directory means its newest complete checkpoint (rank 0 decides for all) */
    char path[ZT_PATH_MAX + 128];
    snprintf(path, sizeof path, "%s", ck_s);
    struct stat st;
    int bad = 0;
    if (d->rank == 0 && stat(ck_s, &st) == 0 && S_ISDIR(st.st_mode) && zt_ckpt_find_latest(ck_s, path, sizeof path)) {
        snprintf(err, sizeof err, "%s: no complete checkpoint in this directory", ck_s);
        bad = 1;
    }
    zt_dist_check(d, bad, err, sizeof err);
    MPI_Bcast(path, sizeof path, MPI_CHAR, 0, MPI_COMM_WORLD);

    zt_ckpt_meta meta = {0};
    zt_config *c = zt_calloc(1, sizeof *c);
    bad = zt_ckpt_read_meta(path, &meta, err, sizeof err);
    if (!bad) bad = config_from_text(meta.config_text, path, c, err, sizeof err);
    zt_ckpt_meta_free(&meta);
    zt_dist_check(d, bad, err, sizeof err);

    zt_model_shape s;
    zt_shape_from_config(c, &s);
    const int threads = threads_s ? (int)v_threads : zt_dist_default_threads(d);
    zt_backend *be = zt_cpu_backend_create(threads);
    zt_model m;
    zt_model_init(&m, be, &s, 1, 1, 0, 0);
    if (zt_ckpt_load(path, &meta, &m, NULL, err, sizeof err)) zt_user_error_all("%s", err);
    const long step = meta.step;
    zt_ckpt_meta_free(&meta);

    /* rank 0: tokenizer and prompt */
    const char *tok_path = tok_s ? tok_s : c->data.tokenizer;
    if (strcmp(tok_path, "none") == 0) tok_path = "";
    zt_tokenizer *tok = NULL;
    int32_t *prompt = NULL;
    int n_prompt = 0;
    const char *prompt_text = prompt_s ? prompt_s : c->sample.prompt;
    bad = 0;
    if (d->rank == 0) {
        if (tok_path[0] && !(tok = load_tokenizer(tok_path, s.vocab_size, err, sizeof err))) bad = 1;
        if (!bad && (n_prompt = prompt_ids(tok, prompt_text, s.vocab_size, &prompt, err, sizeof err)) < 0) bad = 1;
        if (!bad && n_prompt == 0) {
            snprintf(err, sizeof err, "--prompt '%.200s' encodes to no tokens", prompt_text);
            bad = 1;
        }
    }
    zt_dist_check(d, bad, err, sizeof err);

    if (d->rank == 0) {
        const int n_new = tokens_s ? (int)v_tokens : c->sample.tokens;
        const float temperature = temp_s ? (float)v_temp : (float)c->sample.temperature;
        const int top_k = topk_s ? (int)v_topk : c->sample.top_k;
        const uint64_t seed = seed_s ? (uint64_t)v_seed : (uint64_t)c->train.seed;
        zt_sampler *sp = zt_sampler_create(be, &s);
        stream_ctx sc = {tok, 0, 0};
        if (tok) fputs(prompt_text, stdout);
        else
            for (int i = 0; i < n_prompt; i++) printf("%s%d", i ? " " : "", prompt[i]);
        fflush(stdout);
        double t0 = zt_now();
        int rc = zt_sampler_generate(sp, m.params, prompt, n_prompt, n_new, temperature, top_k, seed, NULL, on_stream,
                                     &sc);
        double t1 = zt_now();
        ZT_ASSERT(rc == n_new);
        printf("\n");
        fflush(stdout);
        /* the first token comes after the prompt's pass; the rest each cost one decode step */
        double gen_s = t1 - sc.t_first, pre_s = sc.t_first - t0;
        fprintf(stderr,
                "ztrain sample: %s (step %ld, %zu params, %d thread%s): prompt %d tokens in %.3f s; %d tokens "
                "generated in %.3f s: %.1f tokens/s\n",
                path, step, m.table.total, threads, threads == 1 ? "" : "s", n_prompt, pre_s, n_new, t1 - t0,
                gen_s > 0 && n_new > 1 ? (n_new - 1) / gen_s : n_new / (t1 - t0));
        zt_sampler_free(sp);
    }
    quiet_barrier();
    free(prompt);
    zt_tokenizer_free(tok);
    zt_model_free(&m);
    zt_cpu_backend_free(be);
    free(c);
    return 0;
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
        if (!(tok = load_tokenizer(c->data.tokenizer, s->vocab_size, e, sizeof e))) {
            snprintf(err, errlen, "data.tokenizer: %s", e);
            return 1;
        }
    }
    int32_t *prompt = NULL;
    char e[ZT_ERR_BUF];
    int n = prompt_ids(tok, c->sample.prompt, s->vocab_size, &prompt, e, sizeof e);
    if (n <= 0) {
        snprintf(err, errlen, "sample.prompt = \"%.200s\": %s", c->sample.prompt, n == 0 ? "encodes to no tokens" : e);
        zt_tokenizer_free(tok);
        free(prompt);
        return 1;
    }
    zt_train_sample *ts = zt_calloc(1, sizeof *ts);
    ts->sp = zt_sampler_create(be, s);
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
