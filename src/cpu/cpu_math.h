/* cpu_math.h — branch-free float exp/tanh that the compiler vectorizes inside `omp simd` loops.
 * glibc's expf only vectorizes under -ffast-math, which would also let the compiler reorder the
 * reductions we keep in a fixed order; these give ~2 ulp and the same bits on every thread. */
#ifndef ZT_CPU_MATH_H
#define ZT_CPU_MATH_H

#include <stdint.h>
#include <string.h>

static inline float zt_expf(float x) {
    /* clamp to the finite range; exp(-88) ~ 6e-39 (denormal edge) is as good as 0 here */
    x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
    /* x = n*ln2 + r, |r| <= ln2/2 (Cody-Waite split of ln2) */
    float n = __builtin_roundevenf(x * 1.44269504088896341f);
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
    int32_t e = ((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &e, sizeof scale);
    return p * scale;
}

static inline float zt_tanhf(float x) {
    /* tanh(x) = sign(x) * (1 - 2 / (exp(2|x|) + 1)) */
    float ax = x < 0 ? -x : x;
    float e = zt_expf(2.0f * ax);
    float t = 1.0f - 2.0f / (e + 1.0f);
    return x < 0 ? -t : t;
}

#endif
