/* cpu_decode.c — incremental (KV-cached) causal attention for one new token on the cpu backend.
 * The sampler keeps, per layer, the keys and values of every position already seen in two caches
 * (maxT, NKV hs): only the key/value heads (grouped-query attention caches NKV of them, multi-head
 * attention all NH); a new token appends its k, v at row pos and attends over rows 0..pos.
 *
 * The arithmetic is that of row t = pos of cpu_attention_fwd (cpu_attention.c), loop for loop:
 * the same dot products in the same order, the same max-subtracted zt_expf softmax, the same
 * accumulation of the output over t2 = 0..pos. So a decoded token sees the attention output the
 * full forward computes for that position (test_decode checks the logits end to end).
 * Work is split over query heads; each head is computed by one thread, so the result does not depend
 * on the thread count.
 *
 * gemv: the one-row products of a decode step. BLIS (with the small-matrix path off, see
 * cpu_backend.c) packs the whole weight matrix on every call, which for one row costs more than
 * the product itself; these read each weight once. Every y[j] sums over i = 0..C-1 in order (or one
 * `omp simd` dot for the transposed head), whatever the thread count or block split. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_backend.h"
#include "cpu/cpu_math.h"
#include "util/util.h"

/* scores for positions up to this many stay on the stack; longer contexts use a heap row */
#define DECODE_STACK_T 4096
/* below this many multiply-adds an op runs on one thread: a parallel region costs microseconds
   (much more when the cores are shared), more than a small one-token op takes */
#define DECODE_PAR_MIN ((size_t)1 << 16)

/* qkv((NH + 2 NKV) hs) = q | k | v of the token at position pos; kcache, vcache (maxT, NKV hs); out(C) */
static void cpu_attention_decode(zt_backend *be, float *out, float *kcache, float *vcache, const float *qkv, int pos,
                                 int maxT, int C, int NH, int NKV) {
    (void)be;
    ZT_ASSERT(pos >= 0 && pos < maxT && NH > 0 && NKV > 0 && C % NH == 0 && NH % NKV == 0);
    const int hs = C / NH, KV = NKV * hs, G = NH / NKV;
    const float scale = 1.0f / sqrtf((float)hs);
    memcpy(kcache + (size_t)pos * KV, qkv + C, (size_t)KV * sizeof(float));
    memcpy(vcache + (size_t)pos * KV, qkv + C + KV, (size_t)KV * sizeof(float));
#pragma omp parallel for schedule(static) if ((size_t)(pos + 1) * C * 2 >= DECODE_PAR_MIN)
    for (int h = 0; h < NH; h++) {
        float stack[DECODE_STACK_T];
        float *a = pos < DECODE_STACK_T ? stack : zt_malloc((size_t)(pos + 1) * sizeof(float));
        zt_attention_row(out + h * hs, a, qkv + h * hs, kcache + (h / G) * hs, vcache + (h / G) * hs, (size_t)KV,
                         pos + 1, hs, scale);
        if (a != stack) free(a);
    }
}

/* y(OC) = x(C) @ w(C, OC) + bias: threads own blocks of output columns and stream w row by row */
static void gemv_n(float *y, const float *x, const float *w, const float *bias, int C, int OC) {
    enum { BLK = 128 };
    const int nb = (OC + BLK - 1) / BLK;
#pragma omp parallel for schedule(static) if ((size_t)C * OC >= DECODE_PAR_MIN)
    for (int ib = 0; ib < nb; ib++) {
        const int j0 = ib * BLK, n = OC - j0 < BLK ? OC - j0 : BLK;
        float acc[BLK];
        for (int j = 0; j < n; j++) acc[j] = 0.0f;
        for (int i = 0; i < C; i++) {
            const float xi = x[i];
            const float *wr = w + (size_t)i * OC + j0;
#pragma omp simd
            for (int j = 0; j < n; j++) acc[j] += xi * wr[j];
        }
        for (int j = 0; j < n; j++) y[j0 + j] = bias ? acc[j] + bias[j0 + j] : acc[j];
    }
}

/* y(OC) = w(OC, C) @ x(C) (+ bias): one dot product per output row */
static void gemv_t(float *y, const float *x, const float *w, const float *bias, int C, int OC) {
#pragma omp parallel for schedule(static) if ((size_t)C * OC >= DECODE_PAR_MIN)
    for (int j = 0; j < OC; j++) {
        const float *wr = w + (size_t)j * C;
        float s = 0.0f;
#pragma omp simd reduction(+ : s)
        for (int i = 0; i < C; i++) s += x[i] * wr[i];
        y[j] = bias ? s + bias[j] : s;
    }
}

static void cpu_gemv(zt_backend *be, float *y, const float *x, const float *w, const float *bias, int C, int OC,
                     int w_t) {
    (void)be;
    if (w_t) gemv_t(y, x, w, bias, C, OC);
    else gemv_n(y, x, w, bias, C, OC);
}

void zt_cpu_fill_decode(zt_backend_i *i) {
    i->attention_decode = cpu_attention_decode;
    i->gemv = cpu_gemv;
}
