/* cpu_decode.c — incremental (KV-cached) causal attention for one new token on the cpu backend.
 * The sampler keeps, per layer, the keys and values of every position already seen in two caches
 * (maxT, C); a new token appends its k, v at row pos and attends over rows 0..pos.
 *
 * The arithmetic is that of row t = pos of cpu_attention_fwd (cpu_attention.c), loop for loop:
 * the same dot products in the same order, the same max-subtracted zt_expf softmax, the same
 * accumulation of the output over t2 = 0..pos. So a decoded token sees the attention output the
 * full forward computes for that position (test_decode checks the logits end to end).
 * Work is split over heads; each head is computed by one thread, so the result does not depend
 * on the thread count. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_backend.h"
#include "cpu/cpu_math.h"
#include "util.h"

/* scores for positions up to this many stay on the stack; longer contexts use a heap row */
#define DECODE_STACK_T 4096

static void head_decode(float *o, float *a, const float *q, const float *kcache, const float *vcache, int pos, int C,
                        int hs, float scale) {
    float mx = -INFINITY;
    for (int t2 = 0; t2 <= pos; t2++) {
        const float *k = kcache + (size_t)t2 * C;
        float s = 0.0f;
#pragma omp simd reduction(+ : s)
        for (int i = 0; i < hs; i++) s += q[i] * k[i];
        s *= scale;
        a[t2] = s;
        mx = s > mx ? s : mx;
    }
    float sum = 0.0f;
    for (int t2 = 0; t2 <= pos; t2++) {
        float e = zt_expf(a[t2] - mx);
        a[t2] = e;
        sum += e;
    }
    float inv = 1.0f / sum;
    for (int t2 = 0; t2 <= pos; t2++) a[t2] *= inv;
    for (int i = 0; i < hs; i++) o[i] = 0.0f;
    for (int t2 = 0; t2 <= pos; t2++) {
        const float *v = vcache + (size_t)t2 * C;
        float w = a[t2];
#pragma omp simd
        for (int i = 0; i < hs; i++) o[i] += w * v[i];
    }
}

/* qkv(3C) = q | k | v of the token at position pos; kcache, vcache (maxT, C); out(C) */
static void cpu_attention_decode(zt_backend *be, float *out, float *kcache, float *vcache, const float *qkv, int pos,
                                 int maxT, int C, int NH) {
    (void)be;
    ZT_ASSERT(pos >= 0 && pos < maxT && C % NH == 0);
    const int hs = C / NH;
    const float scale = 1.0f / sqrtf((float)hs);
    memcpy(kcache + (size_t)pos * C, qkv + C, (size_t)C * sizeof(float));
    memcpy(vcache + (size_t)pos * C, qkv + 2 * C, (size_t)C * sizeof(float));
#pragma omp parallel for schedule(static)
    for (int h = 0; h < NH; h++) {
        float stack[DECODE_STACK_T];
        float *a = pos < DECODE_STACK_T ? stack : zt_malloc((size_t)(pos + 1) * sizeof(float));
        head_decode(out + h * hs, a, qkv + h * hs, kcache + h * hs, vcache + h * hs, pos, C, hs, scale);
        if (a != stack) free(a);
    }
}

void zt_cpu_fill_decode(zt_backend_i *i) { i->attention_decode = cpu_attention_decode; }
