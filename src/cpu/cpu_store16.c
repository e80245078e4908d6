/* cpu_store16.c — the cpu backend's slots on 2-byte storage (iface/backend.h matmul16, softmax_xent16): the
 * reference the other backends are checked against. Each widens its 2-byte operands exactly into float32 scratch,
 * runs the float32 slot's arithmetic (the same code) and rounds what it stores to 2-byte words, so its bits are
 * those of the float32 slot followed by round_to. */
#include "cpu/cpu_backend.h"

#include <stdlib.h>

#include "iface/op_math.h"
#include "util/util.h"


static void cpu_matmul16(zt_backend *be, void *c, int c16, const void *a, int a16, const float *b, int M, int N,
                         int K, int ta, int tb, int prec, float beta) {
    ZT_ASSERT(prec == ZT_PREC_BF16 || prec == ZT_PREC_FP16);
    ZT_ASSERT(beta == 0.0f || (beta == 1.0f && !c16));
    const size_t na = (size_t)M * K, nc = (size_t)M * N;
    float *aw = a16 ? zt_malloc((na ? na : 1) * sizeof(float)) : (float *)a;
    float *cw = c16 ? zt_malloc((nc ? nc : 1) * sizeof(float)) : (float *)c;
    if (a16) {
        const uint16_t *h = a;
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < na; i++) aw[i] = zt_bits16_to_f32(h[i], prec);
    }
    be->i->matmul(be, cw, aw, b, M, N, K, ta, tb, 1.0f, beta);
    if (c16) {
        uint16_t *h = c;
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < nc; i++) h[i] = zt_f32_to_bits16(cw[i], prec);
        free(cw);
    }
    if (a16) free(aw);
}

static void cpu_softmax_xent16(zt_backend *be, float *losses, void *logits, const int32_t *targets, int N, int V,
                               int Vp, float dscale, const float *dscale_at, int prec) {
    (void)be;
    const float ds = zt_xent_dscale(dscale, dscale_at);
    ZT_ASSERT(prec == ZT_PREC_BF16 || prec == ZT_PREC_FP16);
    uint16_t *lg = logits;
#pragma omp parallel
    {
        float *x = zt_malloc((size_t)(Vp > 0 ? Vp : 1) * sizeof(float));
#pragma omp for schedule(static)
        for (int n = 0; n < N; n++) {
            uint16_t *h = lg + (size_t)n * Vp;
            if (targets[n] >= 0) /* an ignored row's logits are never read */
                for (int v = 0; v < Vp; v++) x[v] = zt_bits16_to_f32(h[v], prec);
            losses[n] = zt_cpu_xent_row(x, targets[n], V, Vp, ds);
            if (dscale != 0.0f)
                for (int v = 0; v < Vp; v++) h[v] = zt_f32_to_bits16(x[v], prec);
        }
        free(x);
    }
}

void zt_cpu_fill_store16(zt_backend_i *i) {
    i->matmul16 = cpu_matmul16;
    i->softmax_xent16 = cpu_softmax_xent16;
}
