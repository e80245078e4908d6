/* cpu_attention.c — causal multi-head self-attention on the cpu backend.
 * Work is split over (batch, head) pairs (and query rows in the forward); each output element is
 * computed by one thread in a fixed order, so results do not depend on the thread count.
 * qkv(B, T, 3C) holds q | k | v; head h uses columns [h*hs, (h+1)*hs) of each. */
#include <math.h>
#include <string.h>

#include "cpu/cpu_backend.h"
#include "cpu/cpu_math.h"

static void cpu_attention_fwd(zt_backend *be, float *out, float *att, const float *qkv,
                              int B, int T, int C, int NH) {
    (void)be;
    const int hs = C / NH, C3 = 3 * C;
    const float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel for collapse(3) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const float *q = qkv + ((size_t)b * T + t) * C3 + h * hs;
                float *a = att + (((size_t)b * NH + h) * T + t) * T;
                const float *k0 = qkv + (size_t)b * T * C3 + C + h * hs;
                zt_attention_row(out + ((size_t)b * T + t) * C + h * hs, a, q, k0, k0 + C, (size_t)C3, t + 1, hs, scale);
                for (int t2 = t + 1; t2 < T; t2++) a[t2] = 0.0f;
            }
}

static void cpu_attention_bwd(zt_backend *be, float *dqkv, float *datt, const float *dout,
                              const float *qkv, const float *att, int B, int T, int C, int NH) {
    (void)be;
    const int hs = C / NH, C3 = 3 * C;
    const float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            /* this (b, h) owns its q, k, v columns of dqkv */
            for (int t = 0; t < T; t++) {
                float *d = dqkv + ((size_t)b * T + t) * C3 + h * hs;
                memset(d, 0, (size_t)hs * sizeof(float));
                memset(d + C, 0, (size_t)hs * sizeof(float));
                memset(d + 2 * C, 0, (size_t)hs * sizeof(float));
            }
            for (int t = 0; t < T; t++) {
                const float *a = att + (((size_t)b * NH + h) * T + t) * T;
                float *da = datt + (((size_t)b * NH + h) * T + t) * T;
                const float *dy = dout + ((size_t)b * T + t) * C + h * hs;
                const float *q = qkv + ((size_t)b * T + t) * C3 + h * hs;
                float *dq = dqkv + ((size_t)b * T + t) * C3 + h * hs;
                /* through out = att @ v */
                for (int t2 = 0; t2 <= t; t2++) {
                    const float *v = qkv + ((size_t)b * T + t2) * C3 + 2 * C + h * hs;
                    float *dv = dqkv + ((size_t)b * T + t2) * C3 + 2 * C + h * hs;
                    float s = 0.0f, w = a[t2];
#pragma omp simd reduction(+ : s)
                    for (int i = 0; i < hs; i++) {
                        s += dy[i] * v[i];
                        dv[i] += w * dy[i];
                    }
                    da[t2] = s;
                }
                /* through the softmax */
                float dot = 0.0f;
                for (int t2 = 0; t2 <= t; t2++) dot += a[t2] * da[t2];
                for (int t2 = 0; t2 <= t; t2++) {
                    float dpre = a[t2] * (da[t2] - dot) * scale;
                    const float *k = qkv + ((size_t)b * T + t2) * C3 + C + h * hs;
                    float *dk = dqkv + ((size_t)b * T + t2) * C3 + C + h * hs;
#pragma omp simd
                    for (int i = 0; i < hs; i++) {
                        dq[i] += dpre * k[i];
                        dk[i] += dpre * q[i];
                    }
                }
            }
        }
}

void zt_cpu_fill_attention(zt_backend_i *i) {
    i->attention_fwd = cpu_attention_fwd;
    i->attention_bwd = cpu_attention_bwd;
}
