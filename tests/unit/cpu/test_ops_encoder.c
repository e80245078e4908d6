/* test_ops_encoder.c — the encoder family's ops of the backend interface (iface/backend.h; BERT, RoBERTa): the
 * exact GELU, the bias add / gradient of the MLM decoder, the row argmax, and LayerNorm's epsilon (BERT's 1e-12);
 * bidirectional attention is test_ops_llama.c's (with the grouped-query attention it shares). The conventions
 * are test_ops.c's (ops_harness.h): ZT_TEST_DEVICE picks the backend (default cpu; devsim runs the same cases on
 * simulated device memory and must equal the cpu bit for bit);
 *
 *  - forward ops against double-precision references written here from the same float inputs:
 *    max |ours - ref| <= tol_fwd * (1 + max |ref|);
 *  - backward ops against central finite differences of the double reference forward on L = sum(w_out * out)
 *    (w_out = the random dout given to the op): max |ours - fd| <= tol_bwd * max |fd|;
 *  - exact where the slot promises it: the bias ops are single roundings / in-order sums (compared bit for bit with
 *    the same float arithmetic written here), argmax is exact (tests/helpers/argmax_cases.h's rows), the in-place
 *    GELU backward equals the out-of-place one, the fused residual + LayerNorm equals its three calls;
 *  - thread-count invariance: each case rerun with 1, 2 and 3 threads, bit-identical (memcmp).
 *
 * ZT_OPS_MEASURE=1 prints every part's error and limit. Output: one line per case, PASS/FAIL (check.h). */
#include "ops_harness.h"

#include "argmax_cases.h"

#include "iface/op_math.h"

/* Limits {forward, backward} as normalized errors: about 5x the worst fp32 error measured over this file's cases
 * against the float64 reference (cpu backend, 2 threads; devsim runs the same arithmetic), ZT_OPS_MEASURE=1. */
static const op_tol TOL_GELU_ERF = {1.5e-7, 5e-7}; /* fwd measured 3.0e-8, bwd 9.6e-8 (the central difference's) */
static const op_tol TOL_LN_EPS = {5e-7, 0};       /* fwd measured 1.0e-7 (rstd, relative; out 4.7e-8, mean 7.0e-8) */

/* ================================================================== exact GELU */

typedef struct gelu_ctx {
    size_t n;
    const float *x, *dout;
} gelu_ctx;

typedef struct gelu_d {
    size_t n;
    double *x;
} gelu_d;

static double gelu_erf_d(double x) { return 0.5 * x * erfc(-x / sqrt(2.0)); }

static void gelu_erf_ref(const void *vp, double *out) {
    const gelu_d *p = vp;
    for (size_t i = 0; i < p->n; i++) out[i] = gelu_erf_d(p->x[i]);
}

/* blob: out(n) | dinp(n) | dinp computed in place over dout(n) */
static void run_gelu_erf(zt_backend *be, const void *vc, void *out) {
    const gelu_ctx *c = vc;
    const size_t n = c->n;
    float *nan = ffill(n, NAN);
    float *dx = dev_put(be, c->x, n * 4), *dy = dev_put(be, nan, n * 4), *dd = dev_put(be, c->dout, n * 4);
    float *di = dev_put(be, nan, n * 4);
    be->i->gelu_erf_fwd(be, dy, dx, n);
    be->i->gelu_erf_bwd(be, di, dx, dd, n);
    float *o = out;
    dev_get(be, o, dy, n * 4);
    dev_get(be, o + n, di, n * 4);
    be->i->gelu_erf_bwd(be, dd, dx, dd, n);
    dev_get(be, o + 2 * n, dd, n * 4);
    void *all[] = {dx, dy, dd, di};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) dev_free(be, all[i]);
    free(nan);
}

static void test_gelu_erf(size_t n) {
    float *x = frand(n, 3.0, 0.0), *dout = frand(n, 1.0, 0.0);
    if (n > 4) x[0] = -12.0f, x[1] = 12.0f, x[2] = 0.0f, x[3] = -0.0f; /* both tails and the signed zeros */
    gelu_ctx c = {n, x, dout};
    gelu_d p = {n, f2d(x, n)};
    char name[96];
    snprintf(name, sizeof name, "gelu_erf[n%zu]", n);
    float *got = xmalloc(3 * n * 4);
    run_gelu_erf(g_be, &c, got);
    double *ref = xmalloc(n * sizeof *ref), *wout = f2d(dout, n), *g = dzeros(n);
    gelu_erf_ref(&p, ref);
    /* elementwise: fd_grad's gradient of sum(w out) is w * gelu'(x), here by one central difference per element */
    for (size_t i = 0; i < n; i++)
        g[i] = wout[i] * (gelu_erf_d(p.x[i] + FD_H) - gelu_erf_d(p.x[i] - FD_H)) / (2.0 * FD_H);
    chk k;
    chk_init(&k, TOL_GELU_ERF);
    chk_fwd(&k, "gelu_erf out", got, ref, n);
    chk_bwd(&k, "gelu_erf dinp", got + n, NULL, g, n);
    if (memcmp(got + n, got + 2 * n, n * 4) != 0) chk_fail(&k, "gelu_erf_bwd in place (dinp == dout) differs");
    chk_done(&k, name);
    check_threads(name, run_gelu_erf, &c, 3 * n * 4);
    void *fr[] = {x, dout, p.x, got, ref, wout, g};
    for (size_t i = 0; i < sizeof fr / sizeof fr[0]; i++) free(fr[i]);
}

/* ================================================================== bias add and gradient */

typedef struct bias_ctx {
    int N, OC;
    const float *out0, *bias, *dout;
} bias_ctx;

/* blob: out0 + bias (N, OC) | dbias(OC) (prefilled with NaN: overwritten) */
static void run_bias(zt_backend *be, const void *vc, void *out) {
    const bias_ctx *c = vc;
    const size_t n = (size_t)c->N * c->OC;
    float *nan = ffill((size_t)c->OC, NAN);
    float *d0 = dev_put(be, c->out0, n * 4 + 4), *db = dev_put(be, c->bias, (size_t)c->OC * 4);
    float *dd = dev_put(be, c->dout, n * 4 + 4), *dg = dev_put(be, nan, (size_t)c->OC * 4);
    be->i->bias_add(be, d0, db, c->N, c->OC);
    be->i->bias_grad(be, dg, dd, c->N, c->OC);
    float *o = out;
    dev_get(be, o, d0, n * 4);
    dev_get(be, o + n, dg, (size_t)c->OC * 4);
    void *all[] = {d0, db, dd, dg};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) dev_free(be, all[i]);
    free(nan);
}

static void test_bias(int N, int OC) {
    const size_t n = (size_t)N * OC;
    float *out0 = frand(n + 1, 3.0, 0.0), *bias = frand((size_t)OC, 1.0, 0.0), *dout = frand(n + 1, 1.0, 0.0);
    bias_ctx c = {N, OC, out0, bias, dout};
    char name[96];
    snprintf(name, sizeof name, "bias_add, bias_grad[N%d,OC%d]", N, OC);
    float *got = xmalloc((n + (size_t)OC) * 4), *want = xmalloc((n + (size_t)OC) * 4);
    run_bias(g_be, &c, got);
    for (size_t i = 0; i < n; i++) want[i] = out0[i] + bias[i % (size_t)OC];
    for (int j = 0; j < OC; j++) {
        float s = 0.0f; /* rows in order, in fp32: the slot's promise */
        for (int r = 0; r < N; r++) s += dout[(size_t)r * OC + j];
        want[n + (size_t)j] = s;
    }
    chk k;
    chk_init(&k, (op_tol){0, 0});
    chk_bits(&k, "bias_add out (+= bias) and bias_grad (rows in order)", got, want, (n + (size_t)OC) * 4);
    chk_done(&k, name);
    check_threads(name, run_bias, &c, (n + (size_t)OC) * 4);
    void *fr[] = {out0, bias, dout, got, want};
    for (size_t i = 0; i < sizeof fr / sizeof fr[0]; i++) free(fr[i]);
}

/* ================================================================== row argmax */

typedef struct argmax_ctx {
    int N, V, ld;
    const float *x;
} argmax_ctx;

static void run_argmax(zt_backend *be, const void *vc, void *out) {
    const argmax_ctx *c = vc;
    float *dx = dev_put(be, c->x, (size_t)c->N * c->ld * 4);
    int32_t *fill = xmalloc((size_t)c->N * 4);
    for (int i = 0; i < c->N; i++) fill[i] = -7;
    int32_t *di = dev_put(be, fill, (size_t)c->N * 4);
    be->i->argmax_rows(be, di, dx, c->N, c->V, c->ld);
    dev_get(be, out, di, (size_t)c->N * 4);
    dev_free(be, dx);
    dev_free(be, di);
    free(fill);
}

/* tests/helpers/argmax_cases.h's rows over random values */
static void test_argmax(int N, int V, int ld) {
    float *x = frand((size_t)N * ld, 2.0, 0.0);
    argmax_cases_fill(x, N, V, ld);
    argmax_ctx c = {N, V, ld, x};
    int32_t *got = xmalloc((size_t)N * 4), *want = xmalloc((size_t)N * 4);
    run_argmax(g_be, &c, got);
    for (int r = 0; r < N; r++) { /* the first column holding the largest number; none: 0 */
        const float *row = x + (size_t)r * ld;
        int best = -1;
        for (int j = 0; j < V; j++)
            if (!isnan(row[j]) && (best < 0 || row[j] > row[best])) best = j;
        want[r] = best < 0 ? 0 : best;
    }
    char name[96];
    snprintf(name, sizeof name, "argmax_rows[N%d,V%d,ld%d]", N, V, ld);
    chk k;
    chk_init(&k, (op_tol){0, 0});
    chk_bits(&k, "argmax idx (the lowest column of the maximum; NaN never wins)", got, want, (size_t)N * 4);
    chk_done(&k, name);
    check_threads(name, run_argmax, &c, (size_t)N * 4);
    free(x);
    free(got);
    free(want);
}

/* ================================================================== LayerNorm's epsilon */

typedef struct lneps_ctx {
    int N, C;
    float eps;
    const float *inp, *w, *b, *a2;
} lneps_ctx;

/* blob: out(N, C) | mean(N) | rstd(N) of layernorm_fwd, then res | out | mean | rstd of residual_layernorm_fwd
   of inp = a2 + (inp - a2) (fp32: its residual is inp's value up to a rounding) */
static void run_lneps(zt_backend *be, const void *vc, void *out) {
    const lneps_ctx *c = vc;
    const size_t nx = (size_t)c->N * c->C, N = (size_t)c->N;
    float *dx = dev_put(be, c->inp, nx * 4), *dw = dev_put(be, c->w, (size_t)c->C * 4),
          *db = dev_put(be, c->b, (size_t)c->C * 4), *da = dev_put(be, c->a2, nx * 4);
    float *o = dev_put(be, NULL, (2 * nx + 2 * N) * 4), *o2 = dev_put(be, NULL, (2 * nx + 2 * N) * 4);
    be->i->layernorm_fwd(be, o, o + nx, o + nx + N, dx, dw, db, c->N, c->C, c->eps);
    if (be->i->residual_layernorm_fwd)
        be->i->residual_layernorm_fwd(be, o2, o2 + nx, o2 + 2 * nx, o2 + 2 * nx + N, dx, da, dw, db, c->N, c->C,
                                      ZT_PREC_BF16, c->eps);
    float *h = out;
    dev_get(be, h, o, (nx + 2 * N) * 4);
    dev_get(be, h + nx + 2 * N, o2, (2 * nx + 2 * N) * 4);
    void *all[] = {dx, dw, db, da, o, o2};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) dev_free(be, all[i]);
}

/* rows of variance ~1e-10 (BERT's 1e-12 decides rstd; GPT-2's 1e-5 would make it 300x smaller) against a double
   reference with the same eps; the fused residual + LayerNorm (bf16 residual) against add, round_to and
   layernorm_fwd with that eps, bit for bit */
static void test_ln_eps(int N, int C, float eps) {
    const size_t nx = (size_t)N * C;
    float *inp = frand(nx, 1e-5, 0.0), *w = frand((size_t)C, 0.3, 1.0), *b = frand((size_t)C, 0.3, 0.0);
    float *a2 = frand(nx, 1e-5, 0.0);
    lneps_ctx c = {N, C, eps, inp, w, b, a2};
    const size_t nb = 3 * nx + 4 * (size_t)N;
    float *got = xmalloc(nb * 4);
    run_lneps(g_be, &c, got);
    double *ref = xmalloc(nx * sizeof *ref), *mean = xmalloc((size_t)N * sizeof *mean);
    double *rstd = xmalloc((size_t)N * sizeof *rstd);
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        double m = 0.0, v = 0.0;
        for (int j = 0; j < C; j++) m += x[j];
        m /= C;
        for (int j = 0; j < C; j++) v += (x[j] - m) * (x[j] - m);
        const double r = 1.0 / sqrt(v / C + (double)eps);
        for (int j = 0; j < C; j++) ref[(size_t)n * C + j] = (x[j] - m) * r * w[j] + b[j];
        mean[n] = m;
        rstd[n] = r;
    }
    char name[96];
    snprintf(name, sizeof name, "layernorm_fwd[N%d,C%d,eps%g]", N, C, (double)eps);
    chk k;
    chk_init(&k, TOL_LN_EPS);
    chk_fwd(&k, "layernorm out", got, ref, nx);
    chk_arr(&k, "layernorm mean (relative to its largest)", got + nx, mean, (size_t)N, k.tol.fwd,
            maxabs(mean, (size_t)N));
    chk_arr(&k, "layernorm rstd (relative)", got + nx + N, rstd, (size_t)N, k.tol.fwd, maxabs(rstd, (size_t)N));
    if (g_be->i->residual_layernorm_fwd) { /* the slot's promise: exactly add, round_to(bf16), layernorm_fwd(eps) */
        const float *r2 = got + nx + 2 * (size_t)N;
        float *want = xmalloc((2 * nx + 2 * (size_t)N) * 4);
        for (size_t i = 0; i < nx; i++) want[i] = zt_round_bf16(inp[i] + a2[i]);
        lneps_ctx c2 = {N, C, eps, want, w, b, a2};
        float *g2 = xmalloc(nb * 4);
        run_lneps(g_be, &c2, g2);
        memcpy(want + nx, g2, (nx + 2 * (size_t)N) * 4);
        chk_bits(&k, "residual_layernorm_fwd (res, out, mean, rstd) vs add + round_to + layernorm_fwd", r2, want,
                 (2 * nx + 2 * (size_t)N) * 4);
        free(want);
        free(g2);
    }
    chk_done(&k, name);
    check_threads(name, run_lneps, &c, nb * 4);
    void *fr[] = {inp, w, b, a2, got, ref, mean, rstd};
    for (size_t i = 0; i < sizeof fr / sizeof fr[0]; i++) free(fr[i]);
}

/* ================================================================== main */

int main(void) {
    double t0 = zt_now();
    harness_init(20251127);
    const zt_backend_i *f = g_be->i;
    if (!f->gelu_erf_fwd || !f->gelu_erf_bwd || !f->bias_add || !f->bias_grad || !f->argmax_rows) {
        check_fail("%s backend lacks an encoder slot (gelu_erf_fwd/bwd, bias_add, bias_grad, argmax_rows)", g_dev);
        return harness_finish("test_ops_encoder", t0);
    }

    test_gelu_erf(1);
    test_gelu_erf(1000);
    test_gelu_erf(100003); /* several threads' share */

    test_bias(5, 37);
    test_bias(67, 130); /* dbias crosses three 64-column blocks */
    test_bias(0, 70);   /* no rows: dbias is zeros */

    test_argmax(14, 37, 37);
    test_argmax(29, 251, 256); /* the padded logits of an MLM head */
    test_argmax(7, 1, 4);

    test_ln_eps(5, 37, 1e-12f);
    test_ln_eps(4, 130, 1e-5f);

    return harness_finish("test_ops_encoder", t0);
}
