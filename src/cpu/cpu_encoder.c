/* cpu_encoder.c — the encoder family's elementwise and row ops on the cpu backend (iface/backend.h; BERT, RoBERTa):
 * the exact GELU forward and backward (op_math.h's zt_gelu_erf*, the formulas the CUDA kernels compile), the MLM
 * decoder's bias on the logits and its gradient, and each row's argmax (the masked-LM accuracy). Bidirectional
 * attention is cpu_attention.c's. Every output element is computed by one thread, and the bias gradient's column
 * sums add rows in order (zt_cpu_colsum), so the bits do not depend on the number of threads. */
#include "cpu/cpu_backend.h"
#include "cpu/cpu_math.h"

static void cpu_gelu_erf_fwd(zt_backend *be, float *out, const float *inp, size_t n) {
    (void)be;
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) out[i] = zt_gelu_erf(inp[i]);
}

/* dinp may be dout: each element reads its dout before writing its dinp */
static void cpu_gelu_erf_bwd(zt_backend *be, float *dinp, const float *inp, const float *dout, size_t n) {
    (void)be;
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) dinp[i] = zt_gelu_erf_grad(inp[i]) * dout[i];
}

static void cpu_bias_add(zt_backend *be, float *out, const float *bias, int N, int OC) {
    (void)be;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        float *o = out + (size_t)n * OC;
#pragma omp simd
        for (int c = 0; c < OC; c++) o[c] += bias[c];
    }
}

static void cpu_bias_grad(zt_backend *be, float *dbias, const float *dout, int N, int OC) {
    (void)be;
    zt_cpu_colsum(dbias, dout, N, OC);
}

/* one row by one thread, columns in order (zt_argmax_better: the same winner as any order of comparisons) */
static void cpu_argmax_rows(zt_backend *be, int32_t *idx, const float *x, int N, int V, int ld) {
    (void)be;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *r = x + (size_t)n * ld;
        float bv = -INFINITY;
        int32_t bj = INT32_MAX;
        for (int32_t j = 0; j < V; j++)
            if (zt_argmax_better(r[j], j, bv, bj)) {
                bv = r[j];
                bj = j;
            }
        idx[n] = bj == INT32_MAX ? 0 : bj;
    }
}

void zt_cpu_fill_encoder(zt_backend_i *i) {
    i->gelu_erf_fwd = cpu_gelu_erf_fwd;
    i->gelu_erf_bwd = cpu_gelu_erf_bwd;
    i->bias_add = cpu_bias_add;
    i->bias_grad = cpu_bias_grad;
    i->argmax_rows = cpu_argmax_rows;
}
