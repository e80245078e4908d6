/* cpu_math.h — branch-free float exp/tanh that the compiler vectorizes inside `omp simd` loops.
 * glibc's expf only vectorizes under -ffast-math, which would also let the compiler reorder the
 * reductions we keep in a fixed order; these give ~2 ulp and the same bits on every thread. */
#ifndef ZT_CPU_MATH_H
#define ZT_CPU_MATH_H

#include <math.h>
#include <stdint.h>

static inline float zt_expf(float x) {
    /* clamp to the finite range; exp(-88) ~ 6e-39 (denormal edge) is as good as 0 here */
    x = x < -87.0f ? -87.0f : x;
    x = x > 88.0f ? 88.0f : x;
    /* x = n*ln2 + r, |r| <= ln2/2 (Cody-Waite split of ln2) */
    /* round to nearest: adding and removing 1.5 * 2^23 (exact in the default rounding mode;
       this file must never be compiled with -ffast-math / -fassociative-math) */
    float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    /* minimax polynomial for exp(r) on [-ln2/2, ln2/2] */
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    union { int32_t i; float f; } scale = {.i = ((int32_t)n + 127) << 23};
    return p * scale.f;
}

static inline float zt_tanhf(float x) {
    /* tanh(x) = sign(x) * (1 - 2 / (exp(2|x|) + 1)) */
    float e = zt_expf(2.0f * __builtin_fabsf(x));
    float t = 1.0f - 2.0f / (e + 1.0f);
    return __builtin_copysignf(t, x);
}

/* One query row of causal attention, shared by the forward (cpu_attention.c) and one-token
 * decoding (cpu_decode.c) so both compute the same bits: keys and values of positions 0..n-1 start
 * at k and v, `stride` floats apart; a(n) receives the softmax, o(hs) the output. */
static inline void zt_attention_row(float *o, float *a, const float *q, const float *k, const float *v, size_t stride,
                                    int n, int hs, float scale) {
    float mx = -INFINITY;
    for (int t2 = 0; t2 < n; t2++) {
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
        float e = zt_expf(a[t2] - mx);
        a[t2] = e;
        sum += e;
    }
    float inv = 1.0f / sum;
    for (int t2 = 0; t2 < n; t2++) a[t2] *= inv;
    for (int i = 0; i < hs; i++) o[i] = 0.0f;
    for (int t2 = 0; t2 < n; t2++) {
        const float *vr = v + (size_t)t2 * stride;
        float w = a[t2];
#pragma omp simd
        for (int i = 0; i < hs; i++) o[i] += w * vr[i];
    }
}

#endif
