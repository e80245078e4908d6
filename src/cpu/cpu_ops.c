/* cpu_ops.c — the cpu backend's fused OpenMP loops: layernorm, GELU, residual add, embeddings,
 * softmax + cross-entropy, AdamW, accumulation and chunked sums of squares, dropout (op_math.h's
 * counter-based mask) and the dequantisation of a quantised weight (core/lora/quant.h: the format's one
 * definition and decoder, shared with the CUDA kernel through its inline decode math).
 * Every reduction is split over output elements and summed in a fixed order, so the bits do not
 * depend on the number of threads. */
#include <math.h>
#include <string.h>

#include "cpu/cpu_backend.h"
#include "cpu/cpu_math.h"
#include "iface/quant_format.h"
#include "util/util.h"

/* ---------------------------------------------------------------- layernorm */

static void cpu_layernorm_fwd(zt_backend *be, float *out, float *mean, float *rstd, const float *inp,
                              const float *w, const float *b, int N, int C, float eps) {
    (void)be;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        float *o = out + (size_t)n * C;
        float s = 0.0f;
#pragma omp simd reduction(+ : s)
        for (int c = 0; c < C; c++) s += x[c];
        float m = s / (float)C;
        float v = 0.0f;
#pragma omp simd reduction(+ : v)
        for (int c = 0; c < C; c++) {
            float d = x[c] - m;
            v += d * d;
        }
        float r = zt_ln_rstd(v, C, eps);
#pragma omp simd
        for (int c = 0; c < C; c++) o[c] = zt_ln_out(x[c], m, r, w[c], b[c]);
        mean[n] = m;
        rstd[n] = r;
    }
}

static void cpu_layernorm_bwd(zt_backend *be, float *dinp, float *dw, float *db, const float *dout,
                              const float *inp, const float *w, const float *mean, const float *rstd,
                              int N, int C) {
    (void)be;
    /* dinp: rows are independent */
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C, *dy = dout + (size_t)n * C;
        float *dx = dinp + (size_t)n * C;
        float m = mean[n], r = rstd[n];
        float sum_dn = 0.0f, sum_dn_xn = 0.0f;
#pragma omp simd reduction(+ : sum_dn, sum_dn_xn)
        for (int c = 0; c < C; c++) {
            float xn = (x[c] - m) * r;
            float dn = w[c] * dy[c];
            sum_dn += dn;
            sum_dn_xn += dn * xn;
        }
        sum_dn /= (float)C;
        sum_dn_xn /= (float)C;
#pragma omp simd
        for (int c = 0; c < C; c++) dx[c] += zt_ln_dx(x[c], m, r, w[c], dy[c], sum_dn, sum_dn_xn);
    }
    /* dw, db: each thread owns a block of columns and adds rows in order */
    const int blk = 64;
    int nblk = (C + blk - 1) / blk;
#pragma omp parallel for schedule(static)
    for (int ib = 0; ib < nblk; ib++) {
        int c0 = ib * blk, c1 = c0 + blk < C ? c0 + blk : C, nc = c1 - c0;
        float aw[64], ab[64];
        for (int c = 0; c < nc; c++) aw[c] = ab[c] = 0.0f;
        for (int n = 0; n < N; n++) {
            const float *x = inp + (size_t)n * C + c0, *dy = dout + (size_t)n * C + c0;
            float m = mean[n], r = rstd[n];
#pragma omp simd
            for (int c = 0; c < nc; c++) {
                aw[c] += (x[c] - m) * r * dy[c];
                ab[c] += dy[c];
            }
        }
        memcpy(dw + c0, aw, (size_t)nc * sizeof(float));
        memcpy(db + c0, ab, (size_t)nc * sizeof(float));
    }
}

/* ---------------------------------------------------------------- GELU (tanh approximation) */

static void cpu_gelu_fwd(zt_backend *be, float *out, const float *inp, size_t n) {
    (void)be;
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) out[i] = zt_gelu(inp[i]);
}

static void cpu_gelu_bwd(zt_backend *be, float *dinp, const float *inp, const float *dout, size_t n) {
    (void)be;
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) dinp[i] = zt_gelu_grad(inp[i]) * dout[i];
}

static void cpu_add(zt_backend *be, float *out, const float *a, const float *b, size_t n) {
    (void)be;
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

/* ---------------------------------------------------------------- embeddings */

static void cpu_embed_fwd(zt_backend *be, float *out, const int32_t *tokens, const float *wte,
                          const float *wpe, int B, int T, int C) {
    (void)be;
#pragma omp parallel for schedule(static)
    for (int bt = 0; bt < B * T; bt++) {
        const float *e = wte + (size_t)tokens[bt] * C;
        float *o = out + (size_t)bt * C;
        if (!wpe) { /* rotary positions: the token embedding alone */
            memcpy(o, e, (size_t)C * sizeof(float));
            continue;
        }
        const float *p = wpe + (size_t)(bt % T) * C;
#pragma omp simd
        for (int c = 0; c < C; c++) o[c] = e[c] + p[c];
    }
}

static void cpu_embed_bwd(zt_backend *be, float *dwte, float *dwpe, const float *dout,
                          const int32_t *tokens, int B, int T, int C) {
    (void)be;
    /* dwte: a token can repeat, so split over columns and add positions in order */
    const int blk = 32;
    int nblk = (C + blk - 1) / blk;
#pragma omp parallel for schedule(static)
    for (int ib = 0; ib < nblk; ib++) {
        int c0 = ib * blk, c1 = c0 + blk < C ? c0 + blk : C;
        for (int bt = 0; bt < B * T; bt++) {
            float *d = dwte + (size_t)tokens[bt] * C;
            const float *g = dout + (size_t)bt * C;
#pragma omp simd
            for (int c = c0; c < c1; c++) d[c] += g[c];
        }
    }
    if (!dwpe) return; /* rotary positions: no position embedding */
    /* dwpe rows [0, T): sum over the batch, in order */
#pragma omp parallel for schedule(static)
    for (int t = 0; t < T; t++) {
        float *d = dwpe + (size_t)t * C;
        for (int c = 0; c < C; c++) d[c] = 0.0f;
        for (int b = 0; b < B; b++) {
            const float *g = dout + ((size_t)b * T + t) * C;
#pragma omp simd
            for (int c = 0; c < C; c++) d[c] += g[c];
        }
    }
}

/* ---------------------------------------------------------------- softmax + cross-entropy */

float zt_cpu_xent_row(float *x, int tgt, int V, int Vp, float dscale) {
    if (tgt < 0) { /* an ignored position: no loss, no gradient */
        if (dscale != 0.0f)
            for (int v = 0; v < Vp; v++) x[v] = 0.0f;
        return 0.0f;
    }
    float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
    for (int v = 0; v < V; v++) mx = x[v] > mx ? x[v] : mx;
    const float xt = x[tgt];
    float s = 0.0f;
    if (dscale == 0.0f) {
#pragma omp simd reduction(+ : s)
        for (int v = 0; v < V; v++) s += zt_expf(x[v] - mx);
    } else {
        /* one exp per logit: keep exp(x - max) in place, then scale by dscale / sum */
#pragma omp simd reduction(+ : s)
        for (int v = 0; v < V; v++) {
            float e = zt_expf(x[v] - mx);
            x[v] = e;
            s += e;
        }
        const float k = dscale / s;
#pragma omp simd
        for (int v = 0; v < V; v++) x[v] *= k;
        x[tgt] -= dscale;
        for (int v = V; v < Vp; v++) x[v] = 0.0f;
    }
    return logf(s) - (xt - mx);
}

static void cpu_softmax_xent(zt_backend *be, float *losses, float *logits, const int32_t *targets,
                             int N, int V, int Vp, float dscale, const float *dscale_at) {
    (void)be;
    const float ds = zt_xent_dscale(dscale, dscale_at);
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) losses[n] = zt_cpu_xent_row(logits + (size_t)n * Vp, targets[n], V, Vp, ds);
}

/* ---------------------------------------------------------------- optimizer and reductions */

static void cpu_adamw(zt_backend *be, float *param, const float *grad, float *m, float *v, size_t n,
                      float lr, float beta1, float beta2, float eps, float weight_decay,
                      float bias_corr1, float bias_corr2, float grad_scale) {
    (void)be;
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++)
        zt_adamw_elem(&param[i], &m[i], &v[i], grad[i] * grad_scale, lr, beta1, beta2, eps, weight_decay, bias_corr1,
                      bias_corr2);
}

/* the reference: each segment as cpu_adamw (the same OpenMP split of the segment), so the bits do not depend on
   the thread count and equal one adamw call per segment */
static void cpu_adamw_multi(zt_backend *be, float *param, const float *grad, float *m, float *v,
                            const zt_adamw_seg *segs, int nseg, float beta1, float beta2, float eps,
                            const float *hyper) {
    const float gs = hyper[ZT_HYPER_GRAD_SCALE];
    if (isnan(gs)) return; /* a skipped step */
    for (int s = 0; s < nseg; s++) {
        const size_t o = segs[s].offset;
        if (segs[s].n)
            cpu_adamw(be, param + o, grad + o, m + o, v + o, segs[s].n, hyper[ZT_HYPER_LR], beta1, beta2, eps,
                      segs[s].weight_decay, hyper[ZT_HYPER_BC1], hyper[ZT_HYPER_BC2], gs);
    }
}

/* the chunk sums added in order, one thread: the norm does not depend on threads or ranks */
static void cpu_clip_scale(zt_backend *be, float *hyper, double *norm, const double *sums, size_t n, double clip,
                           int skip_nonfinite) {
    (void)be;
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) sum += sums[i];
    hyper[ZT_HYPER_GRAD_SCALE] = zt_grad_scale(sum, hyper[ZT_HYPER_LOSS_SCALE], clip, skip_nonfinite, norm);
}

static void cpu_accumulate(zt_backend *be, float *acc, const float *x, size_t n) {
    (void)be;
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) acc[i] += x[i];
}

static void cpu_sumsq_chunks(zt_backend *be, double *out, const float *x, size_t n, size_t chunk) {
    (void)be;
    size_t nc = (n + chunk - 1) / chunk;
#pragma omp parallel for schedule(static)
    for (size_t c = 0; c < nc; c++) {
        size_t i0 = c * chunk, i1 = i0 + chunk < n ? i0 + chunk : n;
        double s = 0.0;
        for (size_t i = i0; i < i1; i++) s += (double)x[i] * (double)x[i];
        out[c] = s;
    }
}

static void cpu_round_to(zt_backend *be, float *x, size_t n, int prec) {
    (void)be;
    if (prec == ZT_PREC_BF16) {
#pragma omp parallel for simd schedule(static)
        for (size_t i = 0; i < n; i++) x[i] = zt_round_bf16(x[i]);
    } else if (prec == ZT_PREC_FP16) {
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++) x[i] = zt_round_fp16(x[i]);
    }
}

static void cpu_pack16(zt_backend *be, void *dst, const float *x, size_t n, int prec) {
    (void)be;
    uint16_t *d = dst;
    ZT_ASSERT(prec == ZT_PREC_BF16 || prec == ZT_PREC_FP16);
    if (prec == ZT_PREC_BF16) {
#pragma omp parallel for simd schedule(static)
        for (size_t i = 0; i < n; i++) d[i] = zt_f32_to_bf16_bits(x[i]);
    } else {
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++) d[i] = zt_f32_to_fp16_bits(x[i]);
    }
}

static void cpu_unpack16(zt_backend *be, float *dst, const void *src, size_t n, int prec) {
    (void)be;
    const uint16_t *s = src;
    ZT_ASSERT(prec == ZT_PREC_BF16 || prec == ZT_PREC_FP16);
    if (prec == ZT_PREC_BF16) {
#pragma omp parallel for simd schedule(static)
        for (size_t i = 0; i < n; i++) dst[i] = zt_bf16_bits_to_f32(s[i]);
    } else {
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++) dst[i] = zt_fp16_bits_to_f32(s[i]);
    }
}

static void cpu_dropout(zt_backend *be, float *out, const float *in, size_t n, float p, uint64_t seed,
                        const uint64_t *micro) {
    (void)be;
    if (micro) seed = zt_dropout_seed(seed, *micro);
    const float scale = 1.0f / (1.0f - p);
    if (p == 0.0f) {
        if (out != in) memcpy(out, in, n * sizeof(float));
        return;
    }
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) out[i] = zt_dropout_keep(seed, i, p) ? in[i] * scale : 0.0f;
}

/* the one decoder of core/lora/quant.h (the format's single definition) over the whole matrix */
static void cpu_dequant(zt_backend *be, float *out, const void *blob, int fmt, size_t rows, size_t cols) {
    (void)be;
    const zt_quant_layout L = zt_quant_plan((zt_quant_fmt)fmt, rows, cols);
    zt_quant_decode(&L, blob, 0, L.n, out);
}

/* the reference: the two slots' own implementations in sequence */
static void cpu_residual_layernorm_fwd(zt_backend *be, float *res, float *out, float *mean, float *rstd,
                                       const float *a, const float *b, const float *w, const float *bias, int N, int C,
                                       int prec, float eps) {
    const size_t n = (size_t)N * C;
    cpu_add(be, res, a, b, n);
    cpu_round_to(be, res, n, prec);
    cpu_layernorm_fwd(be, out, mean, rstd, res, w, bias, N, C, eps);
}

void zt_cpu_fill_ops(zt_backend_i *i) {
    i->residual_layernorm_fwd = cpu_residual_layernorm_fwd;
    i->layernorm_fwd = cpu_layernorm_fwd;
    i->layernorm_bwd = cpu_layernorm_bwd;
    i->gelu_fwd = cpu_gelu_fwd;
    i->gelu_bwd = cpu_gelu_bwd;
    i->add = cpu_add;
    i->embed_fwd = cpu_embed_fwd;
    i->embed_bwd = cpu_embed_bwd;
    i->softmax_xent = cpu_softmax_xent;
    i->adamw = cpu_adamw;
    i->adamw_multi = cpu_adamw_multi;
    i->accumulate = cpu_accumulate;
    i->sumsq_chunks = cpu_sumsq_chunks;
    i->clip_scale = cpu_clip_scale;
    i->round_to = cpu_round_to;
    i->pack16 = cpu_pack16;
    i->unpack16 = cpu_unpack16;
    i->dropout = cpu_dropout;
    i->dequant = cpu_dequant;
}

/* column sums: each thread owns a block of columns and adds rows in order */
void zt_cpu_colsum(float *sum, const float *x, int N, int OC) {
    const int blk = 64;
    int nblk = (OC + blk - 1) / blk;
#pragma omp parallel for schedule(static)
    for (int ib = 0; ib < nblk; ib++) {
        int c0 = ib * blk, c1 = c0 + blk < OC ? c0 + blk : OC;
        float acc[64];
        for (int c = 0; c < c1 - c0; c++) acc[c] = 0.0f;
        for (int n = 0; n < N; n++) {
            const float *row = x + (size_t)n * OC + c0;
#pragma omp simd
            for (int c = 0; c < c1 - c0; c++) acc[c] += row[c];
        }
        memcpy(sum + c0, acc, (size_t)(c1 - c0) * sizeof(float));
    }
}
