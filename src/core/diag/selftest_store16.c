/* selftest_store16.c — the selftest's rows for the 2-byte storage slots (selftest_store16.h). Inputs are drawn from
 * the table's seeded stream and arrive rounded to the precision (st_check_case); a runner packs the 2-byte operand on
 * the host, uploads it, runs the slot and widens the 2-byte outputs back, so the outputs compare as every row's do.
 * Limits: the products at matmul's, softmax + cross-entropy at softmax_xent's (selftest_ops.c), and at least one
 * unit of the precision for what is stored in 2 bytes (st_check_case). */
#include "core/diag/selftest_store16.h"

#include <stdlib.h>

#include "iface/op_math.h"
#include "util/util.h"

/* the LM head's shapes: N rows of C, a vocabulary of V padded to VP (not multiples of a tile) */
enum { HN = 37, HC = 29, HV = 297, HVP = 304 };

static uint16_t *narrow_host(const float *x, size_t n, int prec) {
    uint16_t *h = zt_malloc((n ? n : 1) * sizeof(uint16_t));
    for (size_t i = 0; i < n; i++) h[i] = zt_f32_to_bits16(x[i], prec);
    return h;
}
static void widen_host(float *x, const uint16_t *h, size_t n, int prec) {
    for (size_t i = 0; i < n; i++) x[i] = zt_bits16_to_f32(h[i], prec);
}
/* n 2-byte words of x in new backend memory */
static void *up16(zt_backend *be, const float *x, size_t n, int prec) {
    uint16_t *h = narrow_host(x, n, prec);
    void *d = be->i->alloc(be, (n ? n : 1) * sizeof(uint16_t));
    be->i->to_device(be, d, h, n * sizeof(uint16_t));
    free(h);
    return d;
}
static void down16(zt_backend *be, float *x, const void *d, size_t n, int prec) {
    uint16_t *h = zt_malloc((n ? n : 1) * sizeof(uint16_t));
    be->i->to_host(be, h, d, n * sizeof(uint16_t));
    widen_host(x, h, n, prec);
    free(h);
}

/* (M, N, K, ta, tb, a16, c16) of the three products: logits = lnf @ head^T, dhead = dlogits^T @ lnf,
   dlnf = dlogits @ head */
static const int g_prod[3][7] = {{HN, HVP, HC, 0, 1, 0, 1}, {HVP, HC, HN, 1, 0, 1, 0}, {HN, HC, HVP, 0, 0, 1, 0}};

void st_b_matmul16(st_case *k, int v) {
    static const char *const nm[3] = {"matmul16[logits]", "matmul16[dhead]", "matmul16[dlnf]"};
    const int *p = g_prod[v];
    *k = (st_case){.name = nm[v], .nmse_max = 1e-13f, .rel_max = 2e-5f, .M = p[0], .N = p[1], .K = p[2], .flag = v};
    st_add_in(k, st_rnd((size_t)p[0] * p[2], 1), (size_t)p[0] * p[2]);
    st_add_in(k, st_rnd((size_t)p[2] * p[1], 1), (size_t)p[2] * p[1]);
    st_add_out(k, "c", (size_t)p[0] * p[1]);
}

void st_op_matmul16(zt_backend *be, st_case *k, float **out) {
    const int *p = g_prod[k->flag], prec = st_prec();
    const size_t nc = (size_t)k->M * k->N;
    void *a = p[5] ? up16(be, k->in[0], k->in_n[0], prec) : st_up(be, k->in[0], k->in_n[0]);
    float *b = st_up(be, k->in[1], k->in_n[1]);
    void *c = be->i->alloc(be, nc * (p[6] ? sizeof(uint16_t) : sizeof(float)));
    be->i->matmul16(be, c, p[6], a, p[5], b, k->M, k->N, k->K, p[3], p[4], prec, 0.0f);
    if (p[6]) down16(be, out[0], c, nc, prec);
    else st_down(be, out[0], c, nc);
    be->i->free(be, a); be->i->free(be, b); be->i->free(be, c);
}

void st_b_xent16(st_case *k, int v) {
    (void)v;
    *k = (st_case){.name = "softmax_xent16", .nmse_max = 1e-12f, .rel_max = 2e-6f, .N = HN, .V = HV, .Vp = HVP};
    st_add_in(k, st_rnd((size_t)HN * HVP, 3), (size_t)HN * HVP);
    float *tg = st_ints((size_t)HN, HV);
    for (int n = 0; n < HN; n++)
        if (st_next() % 4 == 0) ((int32_t *)tg)[n] = -1;
    st_add_in_int(k, tg, (size_t)HN);
    st_add_out(k, "losses", (size_t)HN);
    st_add_out(k, "dlogits", (size_t)HN * HVP);
}

void st_op_xent16(zt_backend *be, st_case *k, float **out) {
    const int prec = st_prec();
    void *lg = up16(be, k->in[0], k->in_n[0], prec);
    int32_t *tg = (int32_t *)st_up(be, k->in[1], k->in_n[1]);
    float *losses = st_up(be, NULL, (size_t)k->N);
    be->i->softmax_xent16(be, losses, lg, tg, k->N, k->V, k->Vp, 1.0f / (float)k->N, NULL, prec);
    st_down(be, out[0], losses, k->out_n[0]);
    down16(be, out[1], lg, k->out_n[1], prec);
    be->i->free(be, lg); be->i->free(be, (float *)tg); be->i->free(be, losses);
}
