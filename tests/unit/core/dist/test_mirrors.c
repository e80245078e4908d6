/* test_mirrors.c — the CUDA backend's mirrors (iface/mirror16.h, cuda/cuda_backend.cu) through the backend interface
 * on cudasim: after unpack16 a bf16 product reads the 2-byte words instead of packing the float32 buffer, and every
 * write to either side must end that. Each scenario runs on a cudasim backend with mirrors and on one made with
 * ZT_CUDA_MIRROR=0; the outputs must be the same bits (the words are what packing gives), and the harness's count of
 * packed elements (zt_backend_harness_packed) shows which path ran:
 *   hit       unpack16(X <- W), linear_fwd and linear_bwd with w = X and inp = an unpacked buffer: nothing but dout
 *             packed (the words read);
 *   add       then X changed by add + round_to (slots that name what they write): the product sees the new X;
 *   src       then the words W rewritten by pack16 from other values: the product packs X (its old values);
 *   copy      then X overwritten by copy (a slot that drops every mirror): the new X;
 *   to_device then X overwritten from the host: the new X;
 *   matmul    then X overwritten by matmul (no mirror kept): the new X;
 *   offset    a product on a sub-range of X (w = X + k): the words at the same offset;
 *   producer  inp = layernorm_fwd's output, rounded (the round_to fused into it: it writes the words too): not packed;
 *   producer_overwritten  the same, then the output changed by add + round_to: packed.
 * And pack16_ahead (the activation stash): six ranges advised, written by a LayerNorm (its round_to fused), a
 * round_to kept and launched by the next slot, a round_to taken by the GELU that reads its buffer, the GELU's output,
 * and residual + LayerNorm (res and out); the stash after pack16 of each range must be the same words as without
 * mirrors, where every pack launches, and with mirrors the packs launch nothing (stash: 6 launches fewer;
 * stash_overwritten: one range changed by add + round_to after its producer, so its pack launches: 5 fewer).
 * And unpack16_lazy (the backward's stash): X unpacked lazily from words W, then
 *   lazy_products        the products take X's words: the unpack never runs;
 *   lazy_word_readers    GELU and LayerNorm backward with inp = X read the words: never runs;
 *   lazy_overwritten     X unpacked lazily again, whole, from other words: neither runs;
 *   lazy_read            add reads X as floats: it runs first;
 *   lazy_memory_call     zero of part of X (a memory call that writes part of it): it runs first, the rest of X kept;
 *   lazy_words_rewritten pack16 into W: it runs first, X keeps the old values;
 * each then overwrites X whole (unpack16 from other words, as the next layer's backward does). The outputs (add's
 * capture X) must be the same bits as without mirrors (where the backend declines and the test unpacks);
 * with mirrors one launch fewer where the unpack never runs, the same launches where it runs.
 * And a product's output handed over as words (linear_fwd with a bias, round_to, gelu_fwd reading it: the GEMM writes
 * only the rounded words, the floats are a lazy mirror), the GELU's output then multiplied:
 *   product_words             add then reads the product's floats: they are written first, one launch more than
 *                             without mirrors (where the GELU rounds the floats it reads);
 *   product_words_overwritten the floats overwritten whole first (unpack16): never written, the same launches;
 *   product_bwd / product_bwd_overwritten the same for the linear backward's input gradient, read as words by the
 *                             LayerNorm backward after its round_to.
 * In the stash scenario the GELU's input is such a product: the sync that ends it writes its floats (one launch); and
 * the LayerNorm, GELU and residual + LayerNorm write their stashed outputs' words alone (their floats lazy mirrors),
 * so stash_overwritten's add, which reads r[4]'s floats, writes them first (one launch).
 * Each scenario's values differ by order 1 between the stale and the right operand, so a stale read cannot pass.
 * Output: `PASS name` / `FAIL name: reason`; exit 1 if any failed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/diag/backend_count.h"
#include "core/dist/backend_factory.h"
#include "iface/backend.h"
#include "iface/op_math.h"
#include "util/util.h"

#include "check.h"

enum { N = 24, C = 40, OC = 36 };
static zt_rng g_rng;

static zt_backend *make(int mirrors)
{
    char err[ZT_ERR_BUF];
    if (!mirrors) setenv("ZT_CUDA_MIRROR", "0", 1);
    zt_backend *be = zt_backend_create("cudasim", 1, err, sizeof err);
    unsetenv("ZT_CUDA_MIRROR");
    if (!be) {
        check_fail("backend_create cudasim: %s", err);
        exit(1);
    }
    be->i->set_precision(be, ZT_PREC_BF16);
    return be;
}

static void fill(float *x, size_t n, float scale, float shift)
{
    for (size_t i = 0; i < n; i++) x[i] = zt_round_bf16(shift + scale * (float)zt_rng_normal(&g_rng));
}

typedef struct io {
    float w[C * OC], w2[C * OC], inp[N * C], dout[N * OC]; /* host inputs (bf16 values) */
    float out[N * OC], dinp[N * C], dw[C * OC];           /* host outputs */
    long long packed;                                       /* elements the harness packed in the scenario */
} io;

/* one scenario on be: X (C x OC floats, the "window") unpacked from words of io->w, then `what` happens, then
   out = inp @ X[off ..] (forward) and the backward's dinp, dw with inp unpacked from words too */
static void scenario(zt_backend *be, const char *what, io *s, size_t off)
{
    const size_t nx = (size_t)C * OC + off;
    float *X = be->i->alloc(be, nx * sizeof(float)), *I = be->i->alloc(be, (size_t)N * C * sizeof(float));
    float *host = zt_calloc(nx, sizeof(float));
    uint16_t *hw = zt_calloc(nx, sizeof(uint16_t)), *hi = zt_calloc((size_t)N * C, sizeof(uint16_t));
    for (size_t i = 0; i < (size_t)C * OC; i++) hw[off + i] = zt_f32_to_bf16_bits(s->w[i]);
    for (size_t i = 0; i < (size_t)N * C; i++) hi[i] = zt_f32_to_bf16_bits(s->inp[i]);
    void *W = be->i->alloc(be, nx * sizeof(uint16_t)), *WI = be->i->alloc(be, (size_t)N * C * sizeof(uint16_t));
    float *Y = be->i->alloc(be, nx * sizeof(float)), *D = be->i->alloc(be, (size_t)N * OC * sizeof(float));
    float *O = be->i->alloc(be, (size_t)N * OC * sizeof(float)), *DI = be->i->alloc(be, (size_t)N * C * sizeof(float));
    float *DW = be->i->alloc(be, (size_t)C * OC * sizeof(float));
    for (size_t i = 0; i < (size_t)C * OC; i++) host[off + i] = s->w2[i];
    be->i->to_device(be, Y, host, nx * sizeof(float)); /* the other values */
    be->i->to_device(be, W, hw, nx * sizeof(uint16_t));
    be->i->to_device(be, WI, hi, (size_t)N * C * sizeof(uint16_t));
    be->i->to_device(be, D, s->dout, (size_t)N * OC * sizeof(float));
    be->i->unpack16(be, X, W, nx, ZT_PREC_BF16);
    be->i->unpack16(be, I, WI, (size_t)N * C, ZT_PREC_BF16);
    if (!strcmp(what, "add")) { /* X = round(X + Y) by slots that name what they write (inp's mirror stays) */
        be->i->add(be, X, X, Y, nx);
        be->i->round_to(be, X, nx, ZT_PREC_BF16);
    } else if (!strcmp(what, "src")) { /* the words rewritten (aware pack16): X keeps its values */
        be->i->pack16(be, W, Y, nx, ZT_PREC_BF16);
    } else if (!strcmp(what, "copy")) {
        be->i->copy(be, X, Y, nx * sizeof(float));
    } else if (!strcmp(what, "to_device")) {
        be->i->to_device(be, X, host, nx * sizeof(float));
    } else if (!strcmp(what, "matmul")) { /* X(1 x nx) = ones(1 x 1) @ Y(1 x nx) */
        float *one = be->i->alloc(be, sizeof(float));
        const float h1 = 1.0f;
        be->i->to_device(be, one, &h1, sizeof h1);
        be->i->unpack16(be, X, W, nx, ZT_PREC_BF16);
        be->i->unpack16(be, I, WI, (size_t)N * C, ZT_PREC_BF16);
        be->i->matmul(be, X, one, Y, 1, (int)nx, 1, 0, 0, 1.0f, 0.0f);
        be->i->free(be, one);
    }
    const long long p0 = zt_backend_harness_packed();
    be->i->linear_fwd(be, O, I, X + off, NULL, N, C, OC);
    be->i->linear_bwd(be, DI, DW, NULL, D, I, X + off, N, C, OC, 0);
    s->packed = zt_backend_harness_packed() - p0;
    be->i->to_host(be, s->out, O, sizeof s->out);
    be->i->to_host(be, s->dinp, DI, sizeof s->dinp);
    be->i->to_host(be, s->dw, DW, sizeof s->dw);
    void *bufs[] = {X, I, W, WI, Y, D, O, DI, DW};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) be->i->free(be, bufs[i]);
    free(host);
    free(hw);
    free(hi);
}

/* inp produced by layernorm_fwd + round_to (fused: the kernel writes the words), optionally overwritten by add +
   round_to; w from the host (packed); then the forward and backward products as in scenario() */
static void producer(zt_backend *be, int overwrite, io *s)
{
    const size_t ni = (size_t)N * C;
    float *X = be->i->alloc(be, ni * sizeof(float)), *L = be->i->alloc(be, ni * sizeof(float));
    float *lw = be->i->alloc(be, C * sizeof(float)), *lb = be->i->alloc(be, C * sizeof(float));
    float *st = be->i->alloc(be, 2 * N * sizeof(float)), *W = be->i->alloc(be, (size_t)C * OC * sizeof(float));
    float *D = be->i->alloc(be, (size_t)N * OC * sizeof(float)), *O = be->i->alloc(be, (size_t)N * OC * sizeof(float));
    float *DI = be->i->alloc(be, ni * sizeof(float)), *DW = be->i->alloc(be, (size_t)C * OC * sizeof(float));
    float hw[C], hb[C]; /* the same on both backends */
    for (int i = 0; i < C; i++) hw[i] = zt_round_bf16(1.0f + 0.01f * i), hb[i] = zt_round_bf16(0.01f * (i % 7));
    be->i->to_device(be, X, s->inp, ni * sizeof(float));
    be->i->to_device(be, lw, hw, sizeof hw);
    be->i->to_device(be, lb, hb, sizeof hb);
    be->i->to_device(be, W, s->w, (size_t)C * OC * sizeof(float));
    be->i->to_device(be, D, s->dout, (size_t)N * OC * sizeof(float));
    be->i->layernorm_fwd(be, L, st, st + N, X, lw, lb, N, C, 1e-5f);
    be->i->round_to(be, L, ni, ZT_PREC_BF16);
    if (overwrite) {
        be->i->add(be, L, L, X, ni);
        be->i->round_to(be, L, ni, ZT_PREC_BF16);
    }
    const long long p0 = zt_backend_harness_packed();
    be->i->linear_fwd(be, O, L, W, NULL, N, C, OC);
    be->i->linear_bwd(be, DI, DW, NULL, D, L, W, N, C, OC, 0);
    s->packed = zt_backend_harness_packed() - p0;
    be->i->to_host(be, s->out, O, sizeof s->out);
    be->i->to_host(be, s->dinp, DI, sizeof s->dinp);
    be->i->to_host(be, s->dw, DW, sizeof s->dw);
    void *bufs[] = {X, L, lw, lb, st, W, D, O, DI, DW};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) be->i->free(be, bufs[i]);
}

/* the pack16_ahead scenario (file comment) on be: the stash's words into st (6 N C), the harness's launches */
static long long stash(zt_backend *be, int overwrite, const io *s, uint16_t *st)
{
    const size_t n = (size_t)N * C, nb = n * sizeof(float);
    float *X = be->i->alloc(be, nb), *Y = be->i->alloc(be, nb), *R = be->i->alloc(be, 6 * nb);
    float *W = be->i->alloc(be, (size_t)C * C * sizeof(float)), *lw = be->i->alloc(be, C * sizeof(float));
    float *lb = be->i->alloc(be, C * sizeof(float)), *stat = be->i->alloc(be, 2 * N * sizeof(float));
    float *O = be->i->alloc(be, nb), *scratch = be->i->alloc(be, 2 * nb); /* not advised */
    uint16_t *S = be->i->alloc(be, 6 * n * sizeof(uint16_t));
    float hw[C], hb[C];
    for (int i = 0; i < C; i++) hw[i] = zt_round_bf16(1.0f + 0.01f * i), hb[i] = zt_round_bf16(0.01f * (i % 7));
    static float hy[N * C]; /* other values: dout's, cycled */
    for (size_t i = 0; i < n; i++) hy[i] = s->dout[i % ((size_t)N * OC)];
    be->i->to_device(be, X, s->inp, nb);
    be->i->to_device(be, Y, hy, nb);
    be->i->to_device(be, W, s->w, (size_t)C * C * sizeof(float));
    be->i->to_device(be, lw, hw, sizeof hw);
    be->i->to_device(be, lb, hb, sizeof hb);
    const long long l0 = zt_backend_harness_launches();
    float *r[6];
    for (int k = 0; k < 6; k++) {
        r[k] = R + k * n;
        if (be->i->pack16_ahead) be->i->pack16_ahead(be, S + k * n, r[k], n);
    }
    be->i->layernorm_fwd(be, r[0], stat, stat + N, X, lw, lb, N, C, 1e-5f); /* round_to fused: words */
    be->i->round_to(be, r[0], n, ZT_PREC_BF16);
    be->i->linear_fwd(be, r[1], r[0], W, NULL, N, C, C);
    be->i->round_to(be, r[1], n, ZT_PREC_BF16); /* kept: the GELU takes it and writes r[1]'s words */
    be->i->gelu_fwd(be, r[2], r[1], n);
    be->i->round_to(be, r[2], n, ZT_PREC_BF16);
    be->i->residual_layernorm_fwd(be, r[3], r[4], stat, stat + N, X, Y, lw, lb, N, C, ZT_PREC_BF16, 1e-5f);
    be->i->round_to(be, r[4], n, ZT_PREC_BF16);
    if (overwrite) {
        be->i->add(be, r[4], r[4], X, n);
        be->i->round_to(be, r[4], n, ZT_PREC_BF16);
    }
    be->i->linear_fwd(be, r[5], r[4], W, NULL, N, C, C);
    be->i->round_to(be, r[5], n, ZT_PREC_BF16); /* kept: launched by the next slot, with r[5]'s words */
    be->i->linear_fwd(be, O, r[2], scratch, NULL, N, C, C);
    for (int k = 0; k < 6; k++) be->i->pack16(be, S + k * n, r[k], n, ZT_PREC_BF16);
    be->i->sync(be);
    const long long launches = zt_backend_harness_launches() - l0;
    be->i->to_host(be, st, S, 6 * n * sizeof(uint16_t));
    void *bufs[] = {X, Y, R, W, lw, lb, stat, O, scratch, S};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) be->i->free(be, bufs[i]);
    return launches;
}

/* the unpack16_lazy scenario `what` (file comment) on be: X's floats and the outputs into out (3 N C + C C floats); returns
   the harness's launches */
static long long lazy(zt_backend *be, const char *what, const io *s, float *out)
{
    const size_t n = (size_t)N * C, nb = n * sizeof(float);
    float *X = be->i->alloc(be, nb), *Y = be->i->alloc(be, nb), *Z = be->i->alloc(be, 2 * nb);
    float *W = be->i->alloc(be, (size_t)C * C * sizeof(float)), *lw = be->i->alloc(be, C * sizeof(float));
    float *st = be->i->alloc(be, 2 * N * sizeof(float)), *dwb = be->i->alloc(be, (size_t)C * C * sizeof(float));
    uint16_t *hw = zt_calloc(n, sizeof(uint16_t)), *hw2 = zt_calloc(n, sizeof(uint16_t));
    static float hy[N * C]; /* other values: dout's, cycled */
    for (size_t i = 0; i < n; i++) hy[i] = s->dout[i % ((size_t)N * OC)];
    for (size_t i = 0; i < n; i++) hw[i] = zt_f32_to_bf16_bits(s->inp[i]), hw2[i] = zt_f32_to_bf16_bits(hy[i]);
    uint16_t *WX = be->i->alloc(be, n * sizeof(uint16_t)), *W2 = be->i->alloc(be, n * sizeof(uint16_t));
    float hst[2 * N], hl[C];
    for (int i = 0; i < N; i++) hst[i] = 0.01f * (float)i, hst[N + i] = 1.0f + 0.001f * (float)i;
    for (int i = 0; i < C; i++) hl[i] = zt_round_bf16(1.0f + 0.01f * (float)i);
    be->i->to_device(be, WX, hw, n * sizeof(uint16_t));
    be->i->to_device(be, W2, hw2, n * sizeof(uint16_t));
    be->i->to_device(be, Y, hy, nb);
    be->i->to_device(be, W, s->w, (size_t)C * C * sizeof(float));
    be->i->to_device(be, st, hst, sizeof hst);
    be->i->to_device(be, lw, hl, sizeof hl);
    be->i->zero(be, Z, 2 * nb);
    be->i->zero(be, dwb, (size_t)C * C * sizeof(float));
    be->i->sync(be);
    const long long l0 = zt_backend_harness_launches();
    if (!be->i->unpack16_lazy(be, X, WX, n, ZT_PREC_BF16)) be->i->unpack16(be, X, WX, n, ZT_PREC_BF16);
    if (!strcmp(what, "lazy_products")) {
        be->i->linear_fwd(be, Z, X, W, NULL, N, C, C);
        be->i->linear_bwd(be, Z + n, dwb, NULL, Y, X, W, N, C, C, 0);
    } else if (!strcmp(what, "lazy_word_readers")) {
        be->i->gelu_bwd(be, Z, X, Y, n);
        be->i->layernorm_bwd(be, Z + n, dwb, dwb + C, Y, X, lw, st, st + N, N, C);
    } else if (!strcmp(what, "lazy_overwritten")) {
        if (!be->i->unpack16_lazy(be, X, W2, n, ZT_PREC_BF16)) be->i->unpack16(be, X, W2, n, ZT_PREC_BF16);
        be->i->linear_fwd(be, Z, X, W, NULL, N, C, C);
    } else if (!strcmp(what, "lazy_read")) {
        be->i->add(be, Z, X, Y, n);
    } else if (!strcmp(what, "lazy_memory_call")) {
        be->i->zero(be, X + 5, 7 * sizeof(float));
        be->i->add(be, Z, X, Y, n);
    } else if (!strcmp(what, "lazy_words_rewritten")) {
        be->i->pack16(be, WX, Y, n, ZT_PREC_BF16);
        be->i->add(be, Z, X, Y, n);
    }
    /* X overwritten whole (as the next layer's unpack does): a lazy unpack not run by now never runs */
    be->i->unpack16(be, X, W2, n, ZT_PREC_BF16);
    be->i->sync(be);
    const long long launches = zt_backend_harness_launches() - l0;
    be->i->to_host(be, out, X, nb);
    be->i->to_host(be, out + n, Z, 2 * nb);
    be->i->to_host(be, out + 3 * n, dwb, (size_t)C * C * sizeof(float));
    void *bufs[] = {X, Y, Z, W, lw, st, dwb, WX, W2};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) be->i->free(be, bufs[i]);
    free(hw);
    free(hw2);
    return launches;
}

/* the product-words scenario (file comment) on be: the product's floats, the GELU's, the second product's and add's
   outputs into out (4 N OC floats); returns the harness's launches */
static long long product(zt_backend *be, int overwrite, const io *s, float *out)
{
    const size_t n = (size_t)N * OC, nb = n * sizeof(float);
    float *X = be->i->alloc(be, (size_t)N * C * sizeof(float)), *W = be->i->alloc(be, (size_t)C * OC * sizeof(float));
    float *W2 = be->i->alloc(be, (size_t)OC * OC * sizeof(float)), *bias = be->i->alloc(be, OC * sizeof(float));
    float *F = be->i->alloc(be, nb), *G = be->i->alloc(be, nb), *O = be->i->alloc(be, nb), *Z = be->i->alloc(be, nb);
    float *Y = be->i->alloc(be, nb);
    uint16_t *WY = be->i->alloc(be, n * sizeof(uint16_t)), *hy = zt_calloc(n, sizeof(uint16_t));
    float hb[OC];
    for (int i = 0; i < OC; i++) hb[i] = zt_round_bf16(0.1f * (float)(i % 5) - 0.2f);
    for (size_t i = 0; i < n; i++) hy[i] = zt_f32_to_bf16_bits(s->dout[(i * 7) % n]);
    be->i->to_device(be, X, s->inp, (size_t)N * C * sizeof(float));
    be->i->to_device(be, W, s->w, (size_t)C * OC * sizeof(float));
    be->i->to_device(be, W2, s->w2, (size_t)OC * OC * sizeof(float)); /* OC * OC <= C * OC */
    be->i->to_device(be, bias, hb, sizeof hb);
    be->i->to_device(be, Y, s->dout, nb);
    be->i->to_device(be, WY, hy, n * sizeof(uint16_t));
    be->i->sync(be);
    const long long l0 = zt_backend_harness_launches();
    be->i->linear_fwd(be, F, X, W, bias, N, C, OC);
    be->i->round_to(be, F, n, ZT_PREC_BF16);
    be->i->gelu_fwd(be, G, F, n);
    be->i->round_to(be, G, n, ZT_PREC_BF16);
    be->i->linear_fwd(be, O, G, W2, NULL, N, OC, OC);
    if (overwrite) be->i->unpack16(be, F, WY, n, ZT_PREC_BF16);
    be->i->add(be, Z, F, Y, n);
    be->i->sync(be);
    const long long launches = zt_backend_harness_launches() - l0;
    float *res[] = {F, G, O, Z};
    for (int k = 0; k < 4; k++) be->i->to_host(be, out + k * n, res[k], nb);
    void *bufs[] = {X, W, W2, bias, F, G, O, Z, Y, WY};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) be->i->free(be, bufs[i]);
    free(hy);
    return launches;
}

/* a product-words scenario's verdict: the outputs (what) the same bits with mirrors (la launches) as without (lb),
   and more launches with them */
static void check_words_alone(const char *name, const char *what, int same, long long la, long long lb, int more)
{
    if (same && la - lb == more)
        check_pass("mirrors_%s (%s and the outputs the same bits as without mirrors; %lld launches against %lld)", name,
                   what, la, lb);
    else
        check_fail("mirrors_%s: %s; %lld launches with mirrors, %lld without (expected %d more)", name,
                   same ? "same bits" : "an output differs from the run without mirrors", la, lb, more);
}

/* the backward product-words scenario on be: linear_bwd's dinp (N x C) rounded and read by layernorm_bwd as its
   dout, then (overwrite) dinp overwritten by unpack16, then add reads it; dinp, dw, the LayerNorm's outputs and add's
   into out (3 N C + C OC + 2 C floats); returns the harness's launches */
static long long product_bwd(zt_backend *be, int overwrite, const io *s, float *out)
{
    const size_t n = (size_t)N * C;
    float *X = be->i->alloc(be, n * sizeof(float)), *W = be->i->alloc(be, (size_t)C * OC * sizeof(float));
    float *D = be->i->alloc(be, (size_t)N * OC * sizeof(float)), *DI = be->i->alloc(be, n * sizeof(float));
    float *DW = be->i->alloc(be, (size_t)C * OC * sizeof(float)), *Z = be->i->alloc(be, n * sizeof(float));
    float *lw = be->i->alloc(be, 2 * C * sizeof(float)), *st = be->i->alloc(be, 2 * N * sizeof(float));
    float *Q = be->i->alloc(be, n * sizeof(float));
    uint16_t *WY = be->i->alloc(be, n * sizeof(uint16_t)), *hy = zt_calloc(n, sizeof(uint16_t));
    float hl[2 * C], hst[2 * N];
    for (int i = 0; i < C; i++) hl[i] = zt_round_bf16(1.0f + 0.01f * (float)i), hl[C + i] = 0.0f;
    for (int i = 0; i < N; i++) hst[i] = 0.01f * (float)i, hst[N + i] = 1.0f + 0.001f * (float)i;
    for (size_t i = 0; i < n; i++) hy[i] = zt_f32_to_bf16_bits(s->dout[(i * 5) % ((size_t)N * OC)]);
    be->i->to_device(be, X, s->inp, n * sizeof(float));
    be->i->to_device(be, W, s->w, (size_t)C * OC * sizeof(float));
    be->i->to_device(be, D, s->dout, (size_t)N * OC * sizeof(float));
    be->i->to_device(be, lw, hl, sizeof hl);
    be->i->to_device(be, st, hst, sizeof hst);
    be->i->to_device(be, WY, hy, n * sizeof(uint16_t));
    be->i->zero(be, Z, n * sizeof(float));
    be->i->sync(be);
    const long long l0 = zt_backend_harness_launches();
    be->i->linear_bwd(be, DI, DW, NULL, D, X, W, N, C, OC, 0);
    be->i->round_to(be, DI, n, ZT_PREC_BF16);
    be->i->layernorm_bwd(be, Z, lw, lw + C, DI, X, lw, st, st + N, N, C);
    if (overwrite) be->i->unpack16(be, DI, WY, n, ZT_PREC_BF16);
    be->i->add(be, Q, DI, X, n);
    be->i->sync(be);
    const long long launches = zt_backend_harness_launches() - l0;
    be->i->to_host(be, out, DI, n * sizeof(float));
    be->i->to_host(be, out + n, Z, n * sizeof(float));
    be->i->to_host(be, out + 2 * n, Q, n * sizeof(float));
    be->i->to_host(be, out + 3 * n, DW, (size_t)C * OC * sizeof(float));
    be->i->to_host(be, out + 3 * n + (size_t)C * OC, lw, 2 * C * sizeof(float));
    void *bufs[] = {X, W, D, DI, DW, Z, lw, st, Q, WY};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) be->i->free(be, bufs[i]);
    free(hy);
    return launches;
}

int main(void)
{
    zt_rng_seed(&g_rng, 20261128);
    zt_backend *on = make(1), *off = make(0);
    static io base;
    fill(base.w, (size_t)C * OC, 1.0f, 0.0f);
    fill(base.w2, (size_t)C * OC, 1.0f, 3.0f); /* order 1 away from w */
    fill(base.inp, (size_t)N * C, 1.0f, 0.0f);
    fill(base.dout, (size_t)N * OC, 1.0f, 0.0f);
    /* scenario, sub-range offset, whether X's and inp's words are read (not packed) with mirrors on */
    static const struct { const char *what; size_t off; int hit_x, hit_i; } sc[] = {
        {"hit", 0, 1, 1},       {"add", 0, 0, 1},    {"src", 0, 0, 1},       {"copy", 0, 0, 0},
        {"to_device", 0, 0, 0}, {"matmul", 0, 0, 0}, {"offset", 7 * OC, 1, 1}, {"producer", 0, 0, 1},
        {"producer_overwritten", 0, 0, 0}};
    for (size_t k = 0; k < sizeof sc / sizeof *sc; k++) {
        static io a, b;
        a = base, b = base;
        if (!strncmp(sc[k].what, "producer", 8)) {
            producer(on, sc[k].what[8] != 0, &a);
            producer(off, sc[k].what[8] != 0, &b);
        } else {
            scenario(on, sc[k].what, &a, sc[k].off);
            scenario(off, sc[k].what, &b, sc[k].off);
        }
        const int same = !memcmp(a.out, b.out, sizeof a.out) && !memcmp(a.dinp, b.dinp, sizeof a.dinp) &&
                         !memcmp(a.dw, b.dw, sizeof a.dw);
        /* without mirrors: dout, and w and inp for the forward and again for the backward; with: what is not read */
        const long long all = 2LL * N * C + 2LL * C * OC + (long long)N * OC;
        const long long want = all - (sc[k].hit_x ? 2LL * C * OC : 0) - (sc[k].hit_i ? 2LL * N * C : 0);
        const int paths = b.packed == all && a.packed == want;
        if (same && paths)
            check_pass("mirrors_%s (out, dinp, dw the same bits as without mirrors; packed %lld elements against "
                       "%lld)", sc[k].what, a.packed, b.packed);
        else
            check_fail("mirrors_%s: %s; packed %lld with mirrors (expected %lld), %lld without (expected %lld)",
                       sc[k].what, same ? "same bits" : "outputs differ from the run without mirrors", a.packed, want,
                       b.packed, all);
    }
    for (int ow = 0; ow < 2; ow++) {
        static uint16_t sa[6 * N * C], sb[6 * N * C];
        const long long la = stash(on, ow, &base, sa), lb = stash(off, ow, &base, sb);
        /* less the sync's unpack, and with the overwrite the add's (file comment) */
        const int same = !memcmp(sa, sb, sizeof sa), want = ow ? 3 : 5;
        const char *name = ow ? "stash_overwritten" : "stash";
        if (same && lb - la == want)
            check_pass("mirrors_%s (the stash's words the same as without mirrors; %lld launches against %lld)", name,
                       la, lb);
        else
            check_fail("mirrors_%s: %s; %lld launches with mirrors, %lld without (expected %d fewer)", name,
                       same ? "same words" : "the stash differs from the run without mirrors", la, lb, want);
    }
    /* launches saved: one per lazy unpack that never runs */
    static const struct { const char *what; int fewer; } lz[] = {
        {"lazy_products", 1}, {"lazy_word_readers", 1}, {"lazy_overwritten", 2},
        {"lazy_read", 0},     {"lazy_memory_call", 0},  {"lazy_words_rewritten", 0}};
    for (size_t k = 0; k < sizeof lz / sizeof *lz; k++) {
        static float oa[3 * N * C + C * C], ob[3 * N * C + C * C];
        const long long la = lazy(on, lz[k].what, &base, oa), lb = lazy(off, lz[k].what, &base, ob);
        const int same = !memcmp(oa, ob, sizeof oa), fewer = lz[k].fewer;
        if (same && lb - la == fewer)
            check_pass("mirrors_%s (X and the outputs the same bits as without mirrors; %lld launches against %lld)",
                       lz[k].what, la, lb);
        else
            check_fail("mirrors_%s: %s; %lld launches with mirrors, %lld without (expected %d fewer)", lz[k].what,
                       same ? "same bits" : "X or an output differs from the run without mirrors", la, lb, fewer);
    }
    /* a product's words alone: the floats written (one launch more) when read, never when overwritten first */
    for (int ow = 0; ow < 2; ow++) {
        static float oa[4 * N * OC], ob[4 * N * OC];
        const long long la = product(on, ow, &base, oa), lb = product(off, ow, &base, ob);
        check_words_alone(ow ? "product_words_overwritten" : "product_words", "the product's floats",
                          !memcmp(oa, ob, sizeof oa), la, lb, ow ? 0 : 1);
    }
    for (int ow = 0; ow < 2; ow++) {
        static float oa[3 * N * C + C * OC + 2 * C], ob[3 * N * C + C * OC + 2 * C];
        const long long la = product_bwd(on, ow, &base, oa), lb = product_bwd(off, ow, &base, ob);
        check_words_alone(ow ? "product_bwd_overwritten" : "product_bwd", "dinp, dw", !memcmp(oa, ob, sizeof oa), la,
                          lb, ow ? 0 : 1);
    }
    zt_backend_destroy(on);
    zt_backend_destroy(off);
    printf("# test_mirrors: %d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
