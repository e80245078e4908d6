/* cpu_math.h — the cpu backend's row math: the elementwise formulas come from iface/op_math.h
 * (shared with the CUDA kernels; branch-free, so the compiler vectorizes them inside `omp simd`
 * loops: glibc's expf only vectorizes under -ffast-math, which would also let the compiler reorder
 * the reductions we keep in a fixed order), plus one attention row shared by forward and decoding. */
#ifndef ZT_CPU_MATH_H
#define ZT_CPU_MATH_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "iface/op_math.h"

/* One query row of attention, shared by the forward (cpu_attention.c: causal and bidirectional) and one-token
 * decoding (cpu_decode.c) so they compute the same bits: keys and values of positions 0..n-1 start at k and v,
 * `stride` floats apart; a(n) receives the softmax, o(hs) the output. valid (n ints, NULL: every key) masks keys:
 * a masked key gets probability exactly 0 and adds nothing; with no valid key, a and o are all 0. */
static inline void zt_attention_row_masked(float *o, float *a, const float *q, const float *k, const float *v,
                                           size_t stride, int n, int hs, float scale, const int32_t *valid) {
    float mx = -INFINITY;
    for (int t2 = 0; t2 < n; t2++) {
        if (valid && !valid[t2]) {
            a[t2] = 0.0f;
            continue;
        }
        const float *kr = k + (size_t)t2 * stride;
        float s = 0.0f;
#pragma omp simd reduction(+ : s)
        for (int i = 0; i < hs; i++) s += q[i] * kr[i];
        s *= scale;
        a[t2] = s;
        mx = s > mx ? s : mx;
    }
    float sum = 0.0f;
    for (int t2 = 0; t2 < n; t2++) {
        if (valid && !valid[t2]) continue;
        float e = zt_expf(a[t2] - mx);
        a[t2] = e;
        sum += e;
    }
    float inv = sum > 0.0f ? 1.0f / sum : 0.0f; /* sum >= 1 whenever a key is valid (its maximum's exp is 1) */
    for (int t2 = 0; t2 < n; t2++) a[t2] *= inv;
    for (int i = 0; i < hs; i++) o[i] = 0.0f;
    for (int t2 = 0; t2 < n; t2++) {
        if (valid && !valid[t2]) continue;
        const float *vr = v + (size_t)t2 * stride;
        float w = a[t2];
#pragma omp simd
        for (int i = 0; i < hs; i++) o[i] += w * vr[i];
    }
}

/* the causal row: every one of the n keys */
static inline void zt_attention_row(float *o, float *a, const float *q, const float *k, const float *v, size_t stride,
                                    int n, int hs, float scale) {
    zt_attention_row_masked(o, a, q, k, v, stride, n, hs, scale, NULL);
}

#endif
