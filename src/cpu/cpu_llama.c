/* cpu_llama.c — the Llama family's ops on the cpu backend: RMSNorm, rotary position embedding and SwiGLU,
 * forward and backward (iface/backend.h). The element formulas are op_math.h's (zt_rms_*, zt_rope_*, zt_swiglu*),
 * the ones the CUDA kernels compile. Every reduction is split over output elements and summed in a fixed order
 * (a row's sum of squares by the thread that owns the row; dw by column blocks, rows in order), so the bits do
 * not depend on the number of threads. */
#include <math.h>
#include <string.h>

#include "cpu/cpu_backend.h"
#include "cpu/cpu_math.h"
#include "util/util.h"

/* ---------------------------------------------------------------- RMSNorm */

static void cpu_rmsnorm_fwd(zt_backend *be, float *out, float *rstd, const float *inp, const float *w, int N, int C,
                            float eps) {
    (void)be;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        float *o = out + (size_t)n * C;
        float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
        for (int c = 0; c < C; c++) ss += x[c] * x[c];
        const float r = zt_rms_rstd(ss, C, eps);
#pragma omp simd
        for (int c = 0; c < C; c++) o[c] = zt_rms_out(x[c], r, w[c]);
        rstd[n] = r;
    }
}

static void cpu_rmsnorm_bwd(zt_backend *be, float *dinp, float *dw, const float *dout, const float *inp,
                            const float *w, const float *rstd, int N, int C) {
    (void)be;
    /* dinp: rows are independent */
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C, *dy = dout + (size_t)n * C;
        float *dx = dinp + (size_t)n * C;
        const float r = rstd[n];
        float s = 0.0f;
#pragma omp simd reduction(+ : s)
        for (int c = 0; c < C; c++) s += (w[c] * dy[c]) * (x[c] * r);
        s /= (float)C;
#pragma omp simd
        for (int c = 0; c < C; c++) dx[c] += zt_rms_dx(x[c], r, w[c], dy[c], s);
    }
    /* dw: each thread owns a block of columns and adds rows in order */
    enum { BLK = 64 };
    const int nblk = (C + BLK - 1) / BLK;
#pragma omp parallel for schedule(static)
    for (int ib = 0; ib < nblk; ib++) {
        const int c0 = ib * BLK, nc = C - c0 < BLK ? C - c0 : BLK;
        float aw[BLK];
        for (int c = 0; c < nc; c++) aw[c] = 0.0f;
        for (int n = 0; n < N; n++) {
            const float *x = inp + (size_t)n * C + c0, *dy = dout + (size_t)n * C + c0;
            const float r = rstd[n];
#pragma omp simd
            for (int c = 0; c < nc; c++) aw[c] += zt_rms_dw(x[c], r, dy[c]);
        }
        memcpy(dw + c0, aw, (size_t)nc * sizeof(float));
    }
}

/* ---------------------------------------------------------------- rotary position embedding */

static void cpu_rope(zt_backend *be, float *qkv, const float *cs, int B, int T, int pos0, int NH, int NKV, int hs,
                     int inverse) {
    (void)be;
    ZT_ASSERT(hs > 0 && hs % 2 == 0 && NH > 0 && NKV > 0 && pos0 >= 0);
    const int half = hs / 2, nrot = NH + NKV; /* the query heads, then the key heads: contiguous */
    const size_t W = (size_t)(NH + 2 * NKV) * hs;
    const float sgn = inverse ? -1.0f : 1.0f;
#pragma omp parallel for schedule(static)
    for (int bt = 0; bt < B * T; bt++) {
        const float *tab = cs + (size_t)(pos0 + bt % T) * half * 2;
        float *row = qkv + (size_t)bt * W;
        for (int h = 0; h < nrot; h++) {
            float *x = row + (size_t)h * hs;
#pragma omp simd
            for (int i = 0; i < half; i++) {
                const float c = tab[2 * i], s = sgn * tab[2 * i + 1];
                const float x1 = x[i], x2 = x[i + half];
                x[i] = zt_rope_lo(x1, x2, c, s);
                x[i + half] = zt_rope_hi(x1, x2, c, s);
            }
        }
    }
}

/* ---------------------------------------------------------------- SwiGLU */

static void cpu_swiglu_fwd(zt_backend *be, float *out, const float *inp, int N, int I) {
    (void)be;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *g = inp + (size_t)n * 2 * I, *u = g + I;
        float *o = out + (size_t)n * I;
#pragma omp simd
        for (int j = 0; j < I; j++) o[j] = zt_swiglu(g[j], u[j]);
    }
}

static void cpu_swiglu_bwd(zt_backend *be, float *dinp, const float *inp, const float *dout, int N, int I) {
    (void)be;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *g = inp + (size_t)n * 2 * I, *u = g + I, *dy = dout + (size_t)n * I;
        float *dg = dinp + (size_t)n * 2 * I, *du = dg + I;
#pragma omp simd
        for (int j = 0; j < I; j++) {
            dg[j] = zt_swiglu_dgate(g[j], u[j], dy[j]);
            du[j] = zt_swiglu_dup(g[j], dy[j]);
        }
    }
}

void zt_cpu_fill_llama(zt_backend_i *i) {
    i->rmsnorm_fwd = cpu_rmsnorm_fwd;
    i->rmsnorm_bwd = cpu_rmsnorm_bwd;
    i->rope = cpu_rope;
    i->swiglu_fwd = cpu_swiglu_fwd;
    i->swiglu_bwd = cpu_swiglu_bwd;
}
