/* test_decode.c — the KV-cached decode path (core/model/sampler.c, cpu_decode.c) against the full forward
 * (model.c): logits at every position, greedy generation == argmax of the full forward, padded
 * vocab rows never sampled, determinism for a seed, top-k, the sliding window, thread invariance.
 * Weights are random everywhere (biases and LayerNorm parameters too) so every op matters.
 * The backend is ZT_TEST_DEVICE's (default cpu; "devsim": simulated device memory, names prefixed
 * "devsim:"; the last case then also requires the devsim tokens to equal the cpu backend's).
 * One `PASS name ...` / `FAIL name: reason` line per case; exit 1 if any failed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dist/backend_factory.h"
#include "core/model/model.h"
#include "core/model/sampler.h"
#include "util/util.h"
#include "check.h"

static const char *g_dev = "cpu"; /* ZT_TEST_DEVICE; g_tag (check.h) is "<device>:" off the cpu */

static zt_backend *make_backend(const char *dev, int threads) {
    char err[ZT_ERR_BUF];
    zt_backend *be = zt_backend_create(dev, threads, err, sizeof err);
    if (!be) {
        check_fail("backend_create: %s", err);
        exit(1);
    }
    return be;
}

typedef struct fixture {
    zt_backend *be;
    zt_model_shape s;
    zt_model m;
    float *host;   /* the parameters, on the host */
} fixture;

/* the block of fixture_init's next model: GPT-2's (family NULL), or a Llama-family description */
static const char *g_family;
static int g_nkv;

static void describe(zt_model_shape *s) {
    zt_model_shape_gpt2(s);
    if (!g_family) return;
    s->n_kv_head = g_nkv;
    s->ffn = 3 * s->n_embd / 2;
    s->norm = ZT_NORM_RMS;
    s->pos = ZT_POS_ROPE;
    s->mlp = ZT_MLP_SWIGLU;
    s->bias = strcmp(g_family, "qwen2") == 0 ? ZT_BIAS_QKV : 0;
    s->tied = 0;
    s->norm_eps = 1e-6f;
}

static void fixture_init(fixture *fx, zt_backend *be, int L, int NH, int C, int V, int Vp, int maxT, uint64_t seed) {
    fx->be = be;
    fx->s = (zt_model_shape){.n_layer = L, .n_head = NH, .n_embd = C, .vocab_size = V, .padded_vocab = Vp,
                             .block_size = maxT};
    describe(&fx->s);
    zt_model_init(&fx->m, be, &fx->s, 1, maxT, 0, 0, NULL);
    const size_t n = fx->m.table.total;
    fx->host = zt_malloc(n * sizeof(float));
    zt_rng r;
    zt_rng_seed(&r, seed);
    for (int i = 0; i < fx->m.table.n; i++) {
        const zt_tensor_info *t = &fx->m.table.t[i];
        const int ln_w = strstr(t->name, "ln_") && strstr(t->name, ".weight");
        for (size_t j = 0; j < t->numel; j++) {
            float g = (float)zt_rng_normal(&r);
            fx->host[t->offset + j] = ln_w ? 1.0f + 0.2f * g : (i < 2 ? 0.5f : 0.15f) * g;
        }
    }
    /* padded wte (and lm_head) rows stay zero, as training keeps them */
    memset(fx->host + (size_t)V * C, 0, (size_t)(Vp - V) * C * sizeof(float));
    if (fx->m.table.lm_head >= 0)
        memset(fx->host + fx->m.table.t[fx->m.table.lm_head].offset + (size_t)V * C, 0,
               (size_t)(Vp - V) * C * sizeof(float));
    be->i->to_device(be, fx->m.params, fx->host, n * sizeof(float));
}

static void fixture_free(fixture *fx) {
    zt_model_free(&fx->m);
    free(fx->host);
}

/* full-forward logits (T, Vp) of tokens[0..T) on the host */
static float *full_logits(fixture *fx, const int32_t *tokens, int T) {
    zt_model_forward(&fx->m, tokens, NULL, 1, T);
    const size_t n = (size_t)T * fx->s.padded_vocab;
    float *h = zt_malloc(n * sizeof(float));
    zt_model_logits_to_host(&fx->m, h, n);
    fx->be->i->sync(fx->be);
    return h;
}

static void random_tokens(int32_t *t, int n, int V, uint64_t seed) {
    zt_rng r;
    zt_rng_seed(&r, seed);
    for (int i = 0; i < n; i++) t[i] = (int32_t)(zt_rng_next(&r) % (uint64_t)V);
}

static int argmax_v(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

/* decode logits at every position == full forward logits, within 1e-5 of the largest |logit|: the
   backend's one-row products (gemv) sum in another order than the BLAS of the full forward */
static void test_logits(const char *name, zt_backend *be, int L, int NH, int C, int V, int Vp, int maxT) {
    fixture fx;
    fixture_init(&fx, be, L, NH, C, V, Vp, maxT, 11);
    int32_t *tok = zt_malloc((size_t)maxT * sizeof(int32_t));
    random_tokens(tok, maxT, V, 5);
    float *ref = full_logits(&fx, tok, maxT);
    zt_sampler *sp = zt_sampler_create(be, &fx.s);
    double maxdiff = 0, maxref = 0;
    int worst = -1;
    for (int t = 0; t < maxT; t++) {
        const float *lg = zt_sampler_step(sp, fx.m.params, tok[t], t);
        for (int v = 0; v < Vp; v++) {
            double dd = fabs((double)lg[v] - ref[(size_t)t * Vp + v]);
            if (dd > maxdiff) { maxdiff = dd; worst = t; }
            if (fabs(ref[(size_t)t * Vp + v]) > maxref) maxref = fabs(ref[(size_t)t * Vp + v]);
        }
    }
    if (maxdiff <= 1e-5 * (maxref > 1 ? maxref : 1))
        check_pass("%s (L%d H%d C%d V%d Vp%d T%d: decode logits == full forward at all %d positions, max |diff| %.2e, "
             "max |logit| %.1f)", name, L, NH, C, V, Vp, maxT, maxT, maxdiff, maxref);
    else check_fail("%s: max |diff| %.3e at position %d (max |logit| %.2f)", name, maxdiff, worst, maxref);
    zt_sampler_free(sp);
    free(ref);
    free(tok);
    fixture_free(&fx);
}

/* greedy (top_k = 1) generation: every token is the argmax of the full forward on the sequence so far */
static void test_greedy(zt_backend *be) {
    fixture fx;
    fixture_init(&fx, be, 2, 4, 64, 300, 384, 64, 21);
    const int np = 5, nn = 40;
    int32_t seq[64];
    random_tokens(seq, np, 300, 9);
    zt_sampler *sp = zt_sampler_create(be, &fx.s);
    int32_t badtok[1] = {300};
    int rej = zt_sampler_generate(sp, fx.m.params, seq, 0, 1, 1.0f, 1, 0, NULL, NULL, NULL) == -1 &&
              zt_sampler_generate(sp, fx.m.params, badtok, 1, 1, 1.0f, 1, 0, NULL, NULL, NULL) == -1;
    if (rej) check_pass("bad_input_rejected (empty prompt and a token id >= V: generate returns -1)");
    else check_fail("bad_input_rejected: generate accepted an empty prompt or an id >= V");
    int rc = zt_sampler_generate(sp, fx.m.params, seq, np, nn, 0.7f, 1, 123, seq + np, NULL, NULL);
    float *ref = full_logits(&fx, seq, np + nn);
    int bad = -1;
    for (int k = 0; k < nn && bad < 0; k++)
        if (argmax_v(ref + (size_t)(np + k - 1) * 384, 300) != seq[np + k]) bad = k;
    if (rc == nn && bad < 0)
        check_pass("greedy_equals_argmax (%d tokens with top_k=1: each is the argmax of the full forward's logits)", nn);
    else check_fail("greedy_equals_argmax: rc=%d, token %d differs", rc, bad);
    free(ref);
    zt_sampler_free(sp);
    fixture_free(&fx);
}

/* padded rows made irresistible (huge wte rows): never sampled, whatever temperature / top_k */
static void test_padded(zt_backend *be) {
    fixture fx;
    const int V = 200, Vp = 256, C = 32;
    fixture_init(&fx, be, 1, 2, C, V, Vp, 32, 31);
    for (int v = V; v < Vp; v++)
        for (int c = 0; c < C; c++) fx.host[(size_t)v * C + c] = 50.0f * fx.host[(size_t)(v - V) * C + c];
    for (int v = V; v < Vp; v++)   /* mirror each real row so some padded logit is huge and positive */
        if (v % 2)
            for (int c = 0; c < C; c++) fx.host[(size_t)v * C + c] = -fx.host[(size_t)(v - 1) * C + c];
    fx.be->i->to_device(be, fx.m.params, fx.host, fx.m.table.total * sizeof(float));
    int32_t p[1] = {3};
    float *ref = full_logits(&fx, p, 1);
    int am = argmax_v(ref, Vp);
    zt_sampler *sp = zt_sampler_create(be, &fx.s);
    int32_t out[100];
    int ok = am >= V, cases = 0;
    const struct { float temp; int k; } cfg[] = {{1.0f, 0}, {5.0f, 0}, {1.0f, 1}, {2.0f, 50}, {1.0f, 1000}};
    for (size_t c = 0; c < sizeof cfg / sizeof *cfg; c++) {
        zt_sampler_generate(sp, fx.m.params, p, 1, 100, cfg[c].temp, cfg[c].k, 7 + c, out, NULL, NULL);
        for (int i = 0; i < 100; i++) ok &= out[i] >= 0 && out[i] < V;
        cases++;
    }
    if (ok) check_pass("padded_rows_never_sampled (full-forward argmax is padded row %d; %d x 100 samples all < V=%d)", am,
                 cases, V);
    else check_fail("padded_rows_never_sampled: argmax %d, a sampled id >= V=%d (or the padded rows did not dominate)", am, V);
    free(ref);
    zt_sampler_free(sp);
    fixture_free(&fx);
}

/* same seed -> same tokens, other seed -> other tokens; top-k restricts to the k best */
static void test_seed_topk(zt_backend *be) {
    fixture fx;
    fixture_init(&fx, be, 2, 2, 32, 100, 128, 32, 41);
    zt_sampler *sp = zt_sampler_create(be, &fx.s);
    int32_t p[2] = {1, 2}, a[50], b[50], c[50];
    zt_sampler_generate(sp, fx.m.params, p, 2, 50, 1.0f, 0, 1, a, NULL, NULL);
    zt_sampler_generate(sp, fx.m.params, p, 2, 50, 1.0f, 0, 1, b, NULL, NULL);
    zt_sampler_generate(sp, fx.m.params, p, 2, 50, 1.0f, 0, 2, c, NULL, NULL);
    int same = memcmp(a, b, sizeof a) == 0, differ = memcmp(a, c, sizeof a) != 0;
    if (same && differ) check_pass("seed_determinism (seed 1 twice: identical 50 tokens; seed 2: different)");
    else check_fail("seed_determinism: same-seed identical %d, other-seed different %d", same, differ);

    /* top-k: with k=3 every token is among the 3 largest logits of the full forward at its position */
    int32_t seq[32] = {1, 2};
    zt_sampler_generate(sp, fx.m.params, seq, 2, 30, 1.5f, 3, 5, seq + 2, NULL, NULL);
    float *ref = full_logits(&fx, seq, 32);
    int bad = -1, distinct_rank = 0;
    for (int k = 0; k < 30 && bad < 0; k++) {
        const float *l = ref + (size_t)(1 + k) * 128;
        float x = l[seq[2 + k]];
        int above = 0;
        for (int v = 0; v < 100; v++) above += l[v] > x;
        if (above >= 3) bad = k;
        if (above > 0) distinct_rank = 1;
    }
    if (bad < 0 && distinct_rank) check_pass("top_k (k=3, T=1.5: all 30 tokens among the 3 best of the full forward, not all argmax)");
    else check_fail("top_k: token %d outside the top 3 (or every token was the argmax: %d)", bad, !distinct_rank);
    free(ref);
    zt_sampler_free(sp);
    fixture_free(&fx);
}

/* past block_size the window slides: the tokens after a slide are the greedy continuation of the
   last block_size/2 tokens, computed from scratch */
static void test_slide(zt_backend *be) {
    fixture fx;
    const int maxT = 16, V = 50;
    fixture_init(&fx, be, 1, 2, 32, V, 128, maxT, 51);
    zt_sampler *sp = zt_sampler_create(be, &fx.s);
    int32_t p[3] = {4, 5, 6}, out[40];
    int rc = zt_sampler_generate(sp, fx.m.params, p, 3, 40, 1.0f, 1, 0, out, NULL, NULL);
    /* full sequence; the token after position 15 (index 16) was chosen from window seq[8..16) + ... */
    int32_t seq[43];
    memcpy(seq, p, sizeof p);
    memcpy(seq + 3, out, sizeof out);
    /* first slide happens when feeding seq[16]: the window becomes seq[8..16], so seq[17] is the
       greedy choice after seq[8..17) */
    float *ref = full_logits(&fx, seq + 8, 9);
    int want = argmax_v(ref + (size_t)8 * 128, V);
    long run = zt_sampler_tokens_run(sp);
    /* tokens run: 42 positions fed (3 prompt + 39 generated) plus 8 re-run per slide */
    if (rc == 40 && want == seq[17] && run > 42)
        check_pass("slide (block_size %d, 43 tokens: after the window slides the greedy token is the argmax over the last "
             "%d tokens; %ld token passes)", maxT, maxT / 2, run);
    else check_fail("slide: rc %d, token %d vs %d, %ld passes", rc, seq[17], want, run);
    /* a prompt longer than block_size keeps its last block_size tokens */
    int32_t longp[20], o1[5], o2[5];
    random_tokens(longp, 20, V, 3);
    zt_sampler_generate(sp, fx.m.params, longp, 20, 5, 1.0f, 0, 9, o1, NULL, NULL);
    zt_sampler_generate(sp, fx.m.params, longp + 4, 16, 5, 1.0f, 0, 9, o2, NULL, NULL);
    if (memcmp(o1, o2, sizeof o1) == 0) check_pass("long_prompt (a 20-token prompt with block_size 16 == its last 16 tokens)");
    else check_fail("long_prompt: outputs differ");
    free(ref);
    zt_sampler_free(sp);
    fixture_free(&fx);
}

/* 60 tokens sampled on be from fixture fx's weights (which may live on another backend of the same device) */
static void sample60(zt_backend *be, fixture *fx, int32_t *out) {
    int32_t p[1] = {7};
    zt_sampler *sp = zt_sampler_create(be, &fx->s);
    zt_sampler_generate(sp, fx->m.params, p, 1, 60, 1.0f, 0, 3, out, NULL, NULL);
    zt_sampler_free(sp);
}

int main(void) {
    const char *d = getenv("ZT_TEST_DEVICE");
    if (d && *d) g_dev = d;
    if (strcmp(g_dev, "cpu") != 0) snprintf(g_tag, sizeof g_tag, "%s:", g_dev);
    zt_backend *be = make_backend(g_dev, 2);
    char desc[256];
    zt_backend_describe(be, desc, sizeof desc);
    printf("# backend %s\n", desc);
    test_logits("decode_logits_small", be, 2, 4, 64, 300, 384, 64);
    test_logits("decode_logits_hs48", be, 3, 2, 96, 1000, 1024, 96);
    /* the Llama family: RMSNorm, rotary positions, SwiGLU, grouped-query (2 kv heads) and multi-query attention,
       q/k/v biases (qwen2), an untied LM head */
    g_family = "llama", g_nkv = 2;
    test_logits("decode_logits_llama_gqa", be, 2, 4, 64, 300, 384, 64);
    g_family = "qwen2", g_nkv = 1;
    test_logits("decode_logits_qwen2_mqa", be, 2, 4, 64, 300, 384, 48);
    g_family = NULL;
    test_greedy(be);
    test_padded(be);
    test_seed_topk(be);
    test_slide(be);
    /* thread invariance of the decode path: 1 thread gives the same tokens as 2 */
    {
        fixture fx;
        fixture_init(&fx, be, 2, 4, 64, 300, 384, 64, 61);
        int32_t a[60], b[60];
        sample60(be, &fx, a);
        zt_backend *be1 = make_backend(g_dev, 1);
        sample60(be1, &fx, b);
        zt_backend_destroy(be1);
        if (memcmp(a, b, sizeof a) == 0) check_pass("threads (60 sampled tokens identical with 2 and 1 threads)");
        else check_fail("threads: 1 and 2 threads sampled different tokens");
        fixture_free(&fx);
        /* off the cpu: the same weights and seed on the cpu backend give the same tokens */
        if (strcmp(g_dev, "cpu") != 0) {
            zt_backend *cpu = make_backend("cpu", 2);
            fixture fc;
            fixture_init(&fc, cpu, 2, 4, 64, 300, 384, 64, 61);
            int32_t c[60];
            sample60(cpu, &fc, c);
            if (memcmp(a, c, sizeof a) == 0) check_pass("equals_cpu (60 sampled tokens identical to the cpu backend's)");
            else check_fail("equals_cpu: %s and cpu sampled different tokens", g_dev);
            fixture_free(&fc);
            zt_backend_destroy(cpu);
        }
    }
    zt_backend_destroy(be);
    return g_fail ? 1 : 0;
}
