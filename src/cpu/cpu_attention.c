/* cpu_attention.c — self-attention on the cpu backend, multi-head and grouped-query: causal (the decoders) and
 * bidirectional with a key padding mask (the encoders: BERT, RoBERTa). One implementation of each direction serves
 * both; the mask is NULL for causal attention, whose arithmetic is exactly that of the causal code alone.
 * A qkv row holds the NH query heads, then the NKV key heads, then the NKV value heads, hs = C / NH
 * floats each; query head h attends with key/value head h / (NH / NKV) (iface/backend.h). With
 * NKV == NH this is GPT-2's q | k | v of 3C, and the arithmetic is that of multi-head attention.
 * Work is split over (batch, head) pairs (and query rows in the forward); each output element is
 * computed by one thread in a fixed order, so results do not depend on the thread count. In the
 * backward a (batch, key/value head) pair owns its key/value columns and those of its query heads:
 * dk, dv sum over the group's query heads in head order, then rows in order. */
#include <math.h>
#include <string.h>

#include "cpu/cpu_backend.h"
#include "cpu/cpu_math.h"
#include "util/util.h"

/* the keys row t of sequence b attends to: causal (kvalid NULL) keys 0..t, else the valid ones of all T */
static inline int keys_of(const int32_t *kvalid, int T, int t) { return kvalid ? T : t + 1; }
static inline const int32_t *valid_of(const int32_t *kvalid, int b, int T) {
    return kvalid ? kvalid + (size_t)b * T : NULL;
}

static void attention_fwd(float *out, float *att, const float *qkv, const int32_t *kvalid, int B, int T, int C,
                          int NH, int NKV) {
    ZT_ASSERT(NH > 0 && NKV > 0 && C % NH == 0 && NH % NKV == 0);
    const int hs = C / NH, W = (NH + 2 * NKV) * hs, G = NH / NKV;
    const float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel for collapse(3) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const float *q = qkv + ((size_t)b * T + t) * W + h * hs;
                float *a = att + (((size_t)b * NH + h) * T + t) * T;
                const float *k0 = qkv + (size_t)b * T * W + C + (h / G) * hs;
                const int n = keys_of(kvalid, T, t);
                zt_attention_row_masked(out + ((size_t)b * T + t) * C + h * hs, a, q, k0, k0 + NKV * hs, (size_t)W, n,
                                        hs, scale, valid_of(kvalid, b, T));
                for (int t2 = n; t2 < T; t2++) a[t2] = 0.0f;
            }
}

static void attention_bwd(float *dqkv, float *datt, const float *dout, const float *qkv, const float *att,
                          const int32_t *kvalid, int B, int T, int C, int NH, int NKV) {
    ZT_ASSERT(NH > 0 && NKV > 0 && C % NH == 0 && NH % NKV == 0);
    const int hs = C / NH, W = (NH + 2 * NKV) * hs, G = NH / NKV, KV = NKV * hs;
    const float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int kh = 0; kh < NKV; kh++) {
            /* this (b, kh) owns the k, v columns of key/value head kh and the q columns of its G query heads */
            for (int t = 0; t < T; t++) {
                float *d = dqkv + ((size_t)b * T + t) * W;
                memset(d + kh * G * hs, 0, (size_t)G * hs * sizeof(float));
                memset(d + C + kh * hs, 0, (size_t)hs * sizeof(float));
                memset(d + C + KV + kh * hs, 0, (size_t)hs * sizeof(float));
            }
            const int32_t *valid = valid_of(kvalid, b, T); /* masked keys: no gradient, datt 0 */
            for (int h = kh * G; h < (kh + 1) * G; h++)
            for (int t = 0; t < T; t++) {
                const int n = keys_of(kvalid, T, t);
                const float *a = att + (((size_t)b * NH + h) * T + t) * T;
                float *da = datt + (((size_t)b * NH + h) * T + t) * T;
                const float *dy = dout + ((size_t)b * T + t) * C + h * hs;
                const float *q = qkv + ((size_t)b * T + t) * W + h * hs;
                float *dq = dqkv + ((size_t)b * T + t) * W + h * hs;
                /* through out = att @ v */
                for (int t2 = 0; t2 < n; t2++) {
                    if (valid && !valid[t2]) {
                        da[t2] = 0.0f;
                        continue;
                    }
                    const float *v = qkv + ((size_t)b * T + t2) * W + C + KV + kh * hs;
                    float *dv = dqkv + ((size_t)b * T + t2) * W + C + KV + kh * hs;
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
                for (int t2 = 0; t2 < n; t2++) dot += a[t2] * da[t2];
                for (int t2 = 0; t2 < n; t2++) {
                    if (valid && !valid[t2]) continue;
                    float dpre = a[t2] * (da[t2] - dot) * scale;
                    const float *k = qkv + ((size_t)b * T + t2) * W + C + kh * hs;
                    float *dk = dqkv + ((size_t)b * T + t2) * W + C + kh * hs;
#pragma omp simd
                    for (int i = 0; i < hs; i++) {
                        dq[i] += dpre * k[i];
                        dk[i] += dpre * q[i];
                    }
                }
            }
        }
}

static void cpu_attention_fwd(zt_backend *be, float *out, float *att, const float *qkv, int B, int T, int C, int NH,
                              int NKV) {
    (void)be;
    attention_fwd(out, att, qkv, NULL, B, T, C, NH, NKV);
}

static void cpu_attention_bwd(zt_backend *be, float *dqkv, float *datt, const float *dout, const float *qkv,
                              const float *att, int B, int T, int C, int NH, int NKV) {
    (void)be;
    attention_bwd(dqkv, datt, dout, qkv, att, NULL, B, T, C, NH, NKV);
}

static void cpu_attention_bidir_fwd(zt_backend *be, float *out, float *att, const float *qkv, const int32_t *kvalid,
                                    int B, int T, int C, int NH, int NKV) {
    (void)be;
    ZT_ASSERT(kvalid != NULL);
    attention_fwd(out, att, qkv, kvalid, B, T, C, NH, NKV);
}

static void cpu_attention_bidir_bwd(zt_backend *be, float *dqkv, float *datt, const float *dout, const float *qkv,
                                    const float *att, const int32_t *kvalid, int B, int T, int C, int NH, int NKV) {
    (void)be;
    ZT_ASSERT(kvalid != NULL);
    attention_bwd(dqkv, datt, dout, qkv, att, kvalid, B, T, C, NH, NKV);
}

void zt_cpu_fill_attention(zt_backend_i *i) {
    i->attention_fwd = cpu_attention_fwd;
    i->attention_bwd = cpu_attention_bwd;
    i->attention_bidir_fwd = cpu_attention_bidir_fwd;
    i->attention_bidir_bwd = cpu_attention_bidir_bwd;
}
