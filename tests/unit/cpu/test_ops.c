/* test_ops.c — checks every op (memory, matmul, linear, layernorm and attention here; GELU, add,
 * accumulate, embeddings, softmax + cross-entropy, AdamW and chunked norms in test_ops_elementwise.c) of the cpu backend's zt_backend_i against double-precision
 * references written here, on small and awkward shapes. The backend is ZT_TEST_DEVICE's (default cpu;
 * ZT_TEST_DEVICE=devsim runs every case on simulated device memory, see ops_harness.h).
 *
 *  - forward ops: max |ours - ref| <= tol_fwd * (1 + max |ref|), ref computed in double from the
 *    same float inputs ("max err" below is max |ours - ref| / (1 + max |ref|));
 *  - backward ops: against central finite differences (step 1e-5, in double) of the double
 *    reference forward on L = sum(w_out * out), where w_out is the random dout given to the op,
 *    so one backward call gives every input's gradient; max |ours - fd| <= tol_bwd * max |fd|
 *    ("max err" is max |ours - fd| / max |fd|);
 *  - tol_fwd / tol_bwd are per op (the TOL_* tables below and in test_ops_elementwise.c): a small
 *    multiple of the measured fp32 error, so a small formula error fails instead of hiding under a
 *    habitual 1e-5 (GELU's cubic coefficient 0.044715 -> 0.0447 moves gelu_bwd from 1.5e-7 to ~1e-5);
 *  - overwrite / accumulate contracts: outputs that are documented as overwritten are prefilled
 *    with NaN, outputs that accumulate are prefilled with random values, untouched memory
 *    (padded vocabulary columns, dwpe rows >= T) is compared bit for bit;
 *  - thread-count invariance: every case is rerun with 1, 2 and 3 OpenMP/BLAS threads (a fresh
 *    zt_backend_create(device, n) each time) and the outputs must be bit-identical (memcmp);
 *    off the cpu they must also equal the cpu backend's (same arithmetic, same bits).
 *
 * Output: one line per case, `PASS name (max err E)` or `FAIL name: reason`; exit 1 if any failed.
 */
#include "ops_harness.h"

#include "iface/op_math.h"

/* Limits per op, {forward, backward} as normalized errors (see above): about 5x the worst fp32 error
 * measured over this file's cases against the float64 reference (cpu backend, BLIS zen kernels, 2
 * threads; devsim runs the same arithmetic). Measured with ZT_OPS_MEASURE=1; a formula slip such as
 * a changed constant in src/iface/op_math.h moves an op's error by orders of magnitude, rounding
 * changes (another BLAS kernel, another summation order) by far less than 5x. 0: must be exact. */
static const op_tol TOL_EXACT = {0, 0};                  /* memory ops, backend_create */
static const op_tol TOL_MATMUL = {2e-6, 0};              /* fwd measured 4.1e-7 (ta1,tb1,M5,N70,K37) */
static const op_tol TOL_LINEAR_FWD = {1.5e-6, 0};        /* fwd measured 2.6e-7 (N5,C37,OC70,nobias) */
static const op_tol TOL_LINEAR_BWD = {0, 1.5e-6};        /* bwd measured 2.6e-7 (dinp); dw 1.0e-7, dbias 6.5e-8 */
static const op_tol TOL_LAYERNORM_FWD = {5e-7, 0};       /* fwd measured 9.0e-8 (out; mean 3.5e-8, rstd 1.8e-8) */
static const op_tol TOL_LAYERNORM_BWD = {0, 1e-6};       /* bwd measured 1.7e-7 (dw; dinp 6.9e-8, db 6.6e-8) */
static const op_tol TOL_ATTENTION_FWD = {3e-7, 0};       /* fwd measured 5.3e-8 (out; att 3.6e-8) */
static const op_tol TOL_ATTENTION_BWD = {0, 5e-7};       /* bwd measured 1.0e-7 (dqkv) */

/* ================================================================== memory ops */

static void test_memory(void) {
    zt_backend *be = g_be;
    chk k;
    chk_init(&k, TOL_EXACT);
    const size_t n = 1001; /* bytes, not a multiple of 64 */
    unsigned char *h = xmalloc(n), *h2 = xmalloc(n), *zero = xmalloc(n);
    memset(zero, 0, n);
    for (size_t i = 0; i < n; i++) h[i] = (unsigned char)(i * 37 + 11);
    unsigned char *d = be->i->alloc(be, n), *d2 = be->i->alloc(be, n);
    dev_get(be, h2, d, n);
    chk_bits(&k, "alloc zero-filled", h2, zero, n);
    be->i->to_device(be, d, h, n);
    dev_get(be, h2, d, n);
    chk_bits(&k, "to_device/to_host round trip", h2, h, n);
    be->i->copy(be, d2, d, n);
    dev_get(be, h2, d2, n);
    chk_bits(&k, "copy", h2, h, n);
    be->i->zero(be, d2 + 100, 500);
    dev_get(be, h2, d2, n);
    memset(h + 100, 0, 500);
    chk_bits(&k, "zero (a sub-range)", h2, h, n);
    void *d0 = be->i->alloc(be, 0);
    be->i->free(be, d0);
    be->i->free(be, d);
    be->i->free(be, d2);
    be->i->sync(be);
    chk_done(&k, "memory[alloc,to_device,to_host,copy,zero,sync,free]");
    free(h);
    free(h2);
    free(zero);
}

/* ================================================================== matmul */

typedef struct mm_ctx {
    int M, N, K, ta, tb;
    float alpha, beta;
    const float *a, *b, *c0;
} mm_ctx;

static void run_matmul(zt_backend *be, const void *vc, void *out) {
    const mm_ctx *c = vc;
    size_t na = (size_t)c->M * c->K, nb = (size_t)c->K * c->N, nc = (size_t)c->M * c->N;
    float *da = dev_put(be, c->a, na * 4), *db = dev_put(be, c->b, nb * 4), *dc = dev_put(be, c->c0, nc * 4);
    be->i->matmul(be, dc, da, db, c->M, c->N, c->K, c->ta, c->tb, c->alpha, c->beta);
    dev_get(be, out, dc, nc * 4);
    dev_free(be, da);
    dev_free(be, db);
    dev_free(be, dc);
}

static void test_matmul(int M, int N, int K, int ta, int tb, float alpha, float beta) {
    mm_ctx c = {M, N, K, ta, tb, alpha, beta, NULL, NULL, NULL};
    size_t na = (size_t)M * K, nb = (size_t)K * N, nc = (size_t)M * N;
    float *a = frand(na, 1.0, 0.0), *b = frand(nb, 1.0, 0.0);
    /* beta == 0: c's old contents must not matter, NaN included (BLAS semantics) */
    float *c0 = beta != 0.0f ? frand(nc, 1.0, 0.0) : ffill(nc, NAN);
    c.a = a;
    c.b = b;
    c.c0 = c0;
    float *got = xmalloc(nc * 4);
    run_matmul(g_be, &c, got);
    double *ref = xmalloc(nc * sizeof *ref);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0.0;
            for (int p = 0; p < K; p++) {
                double av = ta ? a[(size_t)p * M + i] : a[(size_t)i * K + p];
                double bv = tb ? b[(size_t)j * K + p] : b[(size_t)p * N + j];
                s += av * bv;
            }
            ref[(size_t)i * N + j] = alpha * s + (beta != 0.0f ? (double)beta * c0[(size_t)i * N + j] : 0.0);
        }
    char name[128];
    snprintf(name, sizeof name, "matmul[ta%d,tb%d,M%d,N%d,K%d,alpha%g,beta%g]", ta, tb, M, N, K, (double)alpha,
             (double)beta);
    chk k;
    chk_init(&k, TOL_MATMUL);
    chk_fwd(&k, "c", got, ref, nc);
    chk_done(&k, name);
    check_threads(name, run_matmul, &c, nc * 4);
    free(a);
    free(b);
    free(c0);
    free(got);
    free(ref);
}

/* ================================================================== linear */

typedef struct lin_d {
    int N, C, OC;
    double *inp, *w, *bias; /* bias may be NULL */
} lin_d;

static void lin_ref(const void *vp, double *out) {
    const lin_d *p = vp;
    for (int n = 0; n < p->N; n++)
        for (int o = 0; o < p->OC; o++) {
            double s = p->bias ? p->bias[o] : 0.0;
            for (int c = 0; c < p->C; c++) s += p->inp[(size_t)n * p->C + c] * p->w[(size_t)c * p->OC + o];
            out[(size_t)n * p->OC + o] = s;
        }
}

typedef struct lin_ctx {
    int N, C, OC, acc;
    const float *inp, *w, *bias, *dout, *dinp0;
} lin_ctx;

static void run_linear_fwd(zt_backend *be, const void *vc, void *out) {
    const lin_ctx *c = vc;
    size_t ni = (size_t)c->N * c->C, nw = (size_t)c->C * c->OC, no = (size_t)c->N * c->OC;
    float *nan = ffill(no, NAN);
    float *di = dev_put(be, c->inp, ni * 4), *dw = dev_put(be, c->w, nw * 4);
    float *db = c->bias ? dev_put(be, c->bias, (size_t)c->OC * 4) : NULL;
    float *dout = dev_put(be, nan, no * 4);
    be->i->linear_fwd(be, dout, di, dw, db, c->N, c->C, c->OC);
    dev_get(be, out, dout, no * 4);
    dev_free(be, di);
    dev_free(be, dw);
    if (db) dev_free(be, db);
    dev_free(be, dout);
    free(nan);
}

static void test_linear_fwd(int N, int C, int OC, int with_bias) {
    lin_ctx c = {N, C, OC, 0, NULL, NULL, NULL, NULL, NULL};
    size_t ni = (size_t)N * C, nw = (size_t)C * OC, no = (size_t)N * OC;
    float *inp = frand(ni, 1.0, 0.0), *w = frand(nw, 0.5, 0.0), *bias = with_bias ? frand(OC, 1.0, 0.0) : NULL;
    c.inp = inp;
    c.w = w;
    c.bias = bias;
    float *got = xmalloc(no * 4);
    run_linear_fwd(g_be, &c, got);
    lin_d p = {N, C, OC, f2d(inp, ni), f2d(w, nw), bias ? f2d(bias, OC) : NULL};
    double *ref = xmalloc(no * sizeof *ref);
    lin_ref(&p, ref);
    char name[128];
    snprintf(name, sizeof name, "linear_fwd[N%d,C%d,OC%d,%s]", N, C, OC, with_bias ? "bias" : "nobias");
    chk k;
    chk_init(&k, TOL_LINEAR_FWD);
    chk_fwd(&k, "out", got, ref, no);
    chk_done(&k, name);
    check_threads(name, run_linear_fwd, &c, no * 4);
    free(inp);
    free(w);
    free(bias);
    free(got);
    free(ref);
    free(p.inp);
    free(p.w);
    free(p.bias);
}

/* blob: dinp(N, C) | dw(C, OC) | dbias(OC) (the last left as NaN when no bias) */
static void run_linear_bwd(zt_backend *be, const void *vc, void *out) {
    const lin_ctx *c = vc;
    size_t ni = (size_t)c->N * c->C, nw = (size_t)c->C * c->OC, no = (size_t)c->N * c->OC;
    float *nan = ffill(ni + nw + (size_t)c->OC, NAN);
    float *dinp = dev_put(be, c->acc ? c->dinp0 : nan, ni * 4);
    float *dw = dev_put(be, nan, nw * 4);
    float *dbias = c->bias ? dev_put(be, nan, (size_t)c->OC * 4) : NULL;
    float *ddout = dev_put(be, c->dout, no * 4), *dinpv = dev_put(be, c->inp, ni * 4), *dwv = dev_put(be, c->w, nw * 4);
    be->i->linear_bwd(be, dinp, dw, dbias, ddout, dinpv, dwv, c->N, c->C, c->OC, c->acc);
    float *o = out;
    dev_get(be, o, dinp, ni * 4);
    dev_get(be, o + ni, dw, nw * 4);
    if (dbias) dev_get(be, o + ni + nw, dbias, (size_t)c->OC * 4);
    else memcpy(o + ni + nw, nan, (size_t)c->OC * 4);
    dev_free(be, dinp);
    dev_free(be, dw);
    if (dbias) dev_free(be, dbias);
    dev_free(be, ddout);
    dev_free(be, dinpv);
    dev_free(be, dwv);
    free(nan);
}

static void test_linear_bwd(int N, int C, int OC, int with_bias, int acc) {
    size_t ni = (size_t)N * C, nw = (size_t)C * OC, no = (size_t)N * OC;
    float *inp = frand(ni, 1.0, 0.0), *w = frand(nw, 0.5, 0.0), *bias = with_bias ? frand(OC, 1.0, 0.0) : NULL;
    float *dout = frand(no, 1.0, 0.0), *dinp0 = frand(ni, 1.0, 0.0);
    lin_ctx c = {N, C, OC, acc, inp, w, bias, dout, dinp0};
    size_t nblob = ni + nw + (size_t)OC;
    float *got = xmalloc(nblob * 4);
    run_linear_bwd(g_be, &c, got);
    lin_d p = {N, C, OC, f2d(inp, ni), f2d(w, nw), f2d(bias ? bias : dinp0, bias ? (size_t)OC : 1)};
    if (!bias) {
        free(p.bias);
        p.bias = NULL;
    }
    double *wout = f2d(dout, no), *gi = dzeros(ni), *gw = dzeros(nw), *gb = dzeros(OC);
    fd_grad(&p, lin_ref, p.inp, ni, wout, no, gi);
    fd_grad(&p, lin_ref, p.w, nw, wout, no, gw);
    if (bias) fd_grad(&p, lin_ref, p.bias, OC, wout, no, gb);
    char name[128];
    snprintf(name, sizeof name, "linear_bwd[N%d,C%d,OC%d,%s,accumulate_dinp=%d]", N, C, OC,
             with_bias ? "dbias" : "dbias=NULL", acc);
    chk k;
    chk_init(&k, TOL_LINEAR_BWD);
    chk_bwd(&k, acc ? "dinp (added to the old dinp)" : "dinp (overwritten)", got, acc ? dinp0 : NULL, gi, ni);
    chk_bwd(&k, "dw", got + ni, NULL, gw, nw);
    if (bias) chk_bwd(&k, "dbias", got + ni + nw, NULL, gb, OC);
    chk_done(&k, name);
    check_threads(name, run_linear_bwd, &c, nblob * 4);
    free(inp);
    free(w);
    free(bias);
    free(dout);
    free(dinp0);
    free(got);
    free(p.inp);
    free(p.w);
    free(p.bias);
    free(wout);
    free(gi);
    free(gw);
    free(gb);
}

/* ================================================================== layernorm */

typedef struct ln_d {
    int N, C;
    double *inp, *w, *b;
} ln_d;

static void ln_ref(const ln_d *p, double *out, double *mean, double *rstd) {
    for (int n = 0; n < p->N; n++) {
        const double *x = p->inp + (size_t)n * p->C;
        double m = 0.0, v = 0.0;
        for (int c = 0; c < p->C; c++) m += x[c];
        m /= p->C;
        for (int c = 0; c < p->C; c++) v += (x[c] - m) * (x[c] - m);
        v /= p->C;
        double r = 1.0 / sqrt(v + 1e-5);
        for (int c = 0; c < p->C; c++) out[(size_t)n * p->C + c] = (x[c] - m) * r * p->w[c] + p->b[c];
        if (mean) mean[n] = m;
        if (rstd) rstd[n] = r;
    }
}

static void ln_ref_out(const void *vp, double *out) { ln_ref(vp, out, NULL, NULL); }

typedef struct ln_ctx {
    int N, C;
    const float *inp, *w, *b, *dout, *dinp0;
} ln_ctx;

/* blob: out(N, C) | mean(N) | rstd(N) */
static void run_ln_fwd(zt_backend *be, const void *vc, void *out) {
    const ln_ctx *c = vc;
    size_t nx = (size_t)c->N * c->C;
    float *nan = ffill(nx, NAN);
    float *dx = dev_put(be, c->inp, nx * 4), *dw = dev_put(be, c->w, (size_t)c->C * 4),
          *db = dev_put(be, c->b, (size_t)c->C * 4);
    float *dout = dev_put(be, nan, nx * 4), *dm = dev_put(be, nan, (size_t)c->N * 4),
          *dr = dev_put(be, nan, (size_t)c->N * 4);
    be->i->layernorm_fwd(be, dout, dm, dr, dx, dw, db, c->N, c->C, ZT_LN_EPS);
    float *o = out;
    dev_get(be, o, dout, nx * 4);
    dev_get(be, o + nx, dm, (size_t)c->N * 4);
    dev_get(be, o + nx + c->N, dr, (size_t)c->N * 4);
    dev_free(be, dx);
    dev_free(be, dw);
    dev_free(be, db);
    dev_free(be, dout);
    dev_free(be, dm);
    dev_free(be, dr);
    free(nan);
}

/* blob: dinp(N, C) | dw(C) | db(C); mean/rstd from the backend's own forward */
static void run_ln_bwd(zt_backend *be, const void *vc, void *out) {
    const ln_ctx *c = vc;
    size_t nx = (size_t)c->N * c->C;
    float *nan = ffill(nx, NAN);
    float *dx = dev_put(be, c->inp, nx * 4), *dw = dev_put(be, c->w, (size_t)c->C * 4),
          *db = dev_put(be, c->b, (size_t)c->C * 4);
    float *dy = dev_put(be, NULL, nx * 4), *dm = dev_put(be, NULL, (size_t)c->N * 4),
          *dr = dev_put(be, NULL, (size_t)c->N * 4);
    be->i->layernorm_fwd(be, dy, dm, dr, dx, dw, db, c->N, c->C, ZT_LN_EPS);
    float *ddout = dev_put(be, c->dout, nx * 4), *ddinp = dev_put(be, c->dinp0, nx * 4);
    float *gw = dev_put(be, nan, (size_t)c->C * 4), *gb = dev_put(be, nan, (size_t)c->C * 4);
    be->i->layernorm_bwd(be, ddinp, gw, gb, ddout, dx, dw, dm, dr, c->N, c->C);
    float *o = out;
    dev_get(be, o, ddinp, nx * 4);
    dev_get(be, o + nx, gw, (size_t)c->C * 4);
    dev_get(be, o + nx + c->C, gb, (size_t)c->C * 4);
    void *all[] = {dx, dw, db, dy, dm, dr, ddout, ddinp, gw, gb};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) dev_free(be, all[i]);
    free(nan);
}

static void test_layernorm(int N, int C) {
    size_t nx = (size_t)N * C;
    /* rows with different means and spreads */
    float *inp = xmalloc(nx * 4);
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++)
            inp[(size_t)n * C + c] = (float)((n - 1.5) + (0.3 + 0.7 * n) * zt_rng_normal(&g_rng));
    float *w = frand(C, 0.3, 1.0), *b = frand(C, 0.3, 0.0), *dout = frand(nx, 1.0, 0.0), *dinp0 = frand(nx, 1.0, 0.0);
    ln_ctx c = {N, C, inp, w, b, dout, dinp0};
    ln_d p = {N, C, f2d(inp, nx), f2d(w, C), f2d(b, C)};
    char name[128];

    /* forward */
    float *got = xmalloc((nx + 2 * (size_t)N) * 4);
    run_ln_fwd(g_be, &c, got);
    double *ref = xmalloc(nx * sizeof *ref), *mean = xmalloc(N * sizeof *mean), *rstd = xmalloc(N * sizeof *rstd);
    ln_ref(&p, ref, mean, rstd);
    snprintf(name, sizeof name, "layernorm_fwd[N%d,C%d]", N, C);
    chk k;
    chk_init(&k, TOL_LAYERNORM_FWD);
    chk_fwd(&k, "out", got, ref, nx);
    chk_fwd(&k, "mean", got + nx, mean, N);
    chk_fwd(&k, "rstd", got + nx + N, rstd, N);
    chk_done(&k, name);
    check_threads(name, run_ln_fwd, &c, (nx + 2 * (size_t)N) * 4);

    /* backward */
    float *gotb = xmalloc((nx + 2 * (size_t)C) * 4);
    run_ln_bwd(g_be, &c, gotb);
    double *wout = f2d(dout, nx), *gi = dzeros(nx), *gw = dzeros(C), *gb = dzeros(C);
    fd_grad(&p, ln_ref_out, p.inp, nx, wout, nx, gi);
    fd_grad(&p, ln_ref_out, p.w, C, wout, nx, gw);
    fd_grad(&p, ln_ref_out, p.b, C, wout, nx, gb);
    snprintf(name, sizeof name, "layernorm_bwd[N%d,C%d]", N, C);
    chk_init(&k, TOL_LAYERNORM_BWD);
    chk_bwd(&k, "dinp (added to the old dinp)", gotb, dinp0, gi, nx);
    chk_bwd(&k, "dw (overwritten)", gotb + nx, NULL, gw, C);
    chk_bwd(&k, "db (overwritten)", gotb + nx + C, NULL, gb, C);
    chk_done(&k, name);
    check_threads(name, run_ln_bwd, &c, (nx + 2 * (size_t)C) * 4);

    free(inp);
    free(w);
    free(b);
    free(dout);
    free(dinp0);
    free(p.inp);
    free(p.w);
    free(p.b);
    free(got);
    free(ref);
    free(mean);
    free(rstd);
    free(gotb);
    free(wout);
    free(gi);
    free(gw);
    free(gb);
}

/* ================================================================== attention */

typedef struct att_d {
    int B, T, C, NH;
    double *qkv;
} att_d;

static void att_ref(const att_d *p, double *out, double *att) {
    const int B = p->B, T = p->T, C = p->C, NH = p->NH, hs = C / NH, C3 = 3 * C;
    const double scale = 1.0 / sqrt((double)hs);
    double *s = xmalloc((size_t)T * sizeof *s);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const double *q = p->qkv + ((size_t)b * T + t) * C3 + h * hs;
                double mx = -INFINITY, sum = 0.0;
                for (int t2 = 0; t2 <= t; t2++) {
                    const double *kk = p->qkv + ((size_t)b * T + t2) * C3 + C + h * hs;
                    double d = 0.0;
                    for (int i = 0; i < hs; i++) d += q[i] * kk[i];
                    s[t2] = d * scale;
                    mx = s[t2] > mx ? s[t2] : mx;
                }
                for (int t2 = 0; t2 <= t; t2++) {
                    s[t2] = exp(s[t2] - mx);
                    sum += s[t2];
                }
                for (int t2 = 0; t2 <= t; t2++) s[t2] /= sum;
                if (att) {
                    double *a = att + (((size_t)b * NH + h) * T + t) * T;
                    for (int t2 = 0; t2 < T; t2++) a[t2] = t2 <= t ? s[t2] : 0.0;
                }
                double *o = out + ((size_t)b * T + t) * C + h * hs;
                for (int i = 0; i < hs; i++) {
                    double acc = 0.0;
                    for (int t2 = 0; t2 <= t; t2++) acc += s[t2] * p->qkv[((size_t)b * T + t2) * C3 + 2 * C + h * hs + i];
                    o[i] = acc;
                }
            }
    free(s);
}

static void att_ref_out(const void *vp, double *out) { att_ref(vp, out, NULL); }

typedef struct att_ctx {
    int B, T, C, NH;
    const float *qkv, *dout;
} att_ctx;

/* blob: out(B, T, C) | att(B, NH, T, T) */
static void run_att_fwd(zt_backend *be, const void *vc, void *out) {
    const att_ctx *c = vc;
    size_t nq = (size_t)c->B * c->T * 3 * c->C, no = (size_t)c->B * c->T * c->C,
           na = (size_t)c->B * c->NH * c->T * c->T;
    float *nan = ffill(no + na, NAN);
    float *dq = dev_put(be, c->qkv, nq * 4), *dout = dev_put(be, nan, no * 4), *datt = dev_put(be, nan, na * 4);
    be->i->attention_fwd(be, dout, datt, dq, c->B, c->T, c->C, c->NH, c->NH);
    float *o = out;
    dev_get(be, o, dout, no * 4);
    dev_get(be, o + no, datt, na * 4);
    dev_free(be, dq);
    dev_free(be, dout);
    dev_free(be, datt);
    free(nan);
}

/* blob: dqkv(B, T, 3C) */
static void run_att_bwd(zt_backend *be, const void *vc, void *out) {
    const att_ctx *c = vc;
    size_t nq = (size_t)c->B * c->T * 3 * c->C, no = (size_t)c->B * c->T * c->C,
           na = (size_t)c->B * c->NH * c->T * c->T;
    float *nan = ffill(nq + na, NAN);
    float *dq = dev_put(be, c->qkv, nq * 4), *dy = dev_put(be, NULL, no * 4), *datt = dev_put(be, NULL, na * 4);
    be->i->attention_fwd(be, dy, datt, dq, c->B, c->T, c->C, c->NH, c->NH);
    float *ddout = dev_put(be, c->dout, no * 4), *ddqkv = dev_put(be, nan, nq * 4), *scratch = dev_put(be, nan, na * 4);
    be->i->attention_bwd(be, ddqkv, scratch, ddout, dq, datt, c->B, c->T, c->C, c->NH, c->NH);
    dev_get(be, out, ddqkv, nq * 4);
    void *all[] = {dq, dy, datt, ddout, ddqkv, scratch};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) dev_free(be, all[i]);
    free(nan);
}

static void test_attention(int B, int T, int C, int NH) {
    size_t nq = (size_t)B * T * 3 * C, no = (size_t)B * T * C, na = (size_t)B * NH * T * T;
    float *qkv = frand(nq, 1.0, 0.0), *dout = frand(no, 1.0, 0.0);
    att_ctx c = {B, T, C, NH, qkv, dout};
    att_d p = {B, T, C, NH, f2d(qkv, nq)};
    char name[128];

    float *got = xmalloc((no + na) * 4);
    run_att_fwd(g_be, &c, got);
    double *ref = xmalloc(no * sizeof *ref), *att = xmalloc(na * sizeof *att);
    att_ref(&p, ref, att);
    snprintf(name, sizeof name, "attention_fwd[B%d,T%d,C%d,NH%d]", B, T, C, NH);
    chk k;
    chk_init(&k, TOL_ATTENTION_FWD);
    chk_fwd(&k, "out", got, ref, no);
    chk_fwd(&k, "att (softmax, 0 above the diagonal)", got + no, att, na);
    chk_done(&k, name);
    check_threads(name, run_att_fwd, &c, (no + na) * 4);

    float *gotb = xmalloc(nq * 4);
    run_att_bwd(g_be, &c, gotb);
    double *wout = f2d(dout, no), *gq = dzeros(nq);
    fd_grad(&p, att_ref_out, p.qkv, nq, wout, no, gq);
    snprintf(name, sizeof name, "attention_bwd[B%d,T%d,C%d,NH%d]", B, T, C, NH);
    chk_init(&k, TOL_ATTENTION_BWD);
    chk_bwd(&k, "dqkv (overwritten)", gotb, NULL, gq, nq);
    chk_done(&k, name);
    check_threads(name, run_att_bwd, &c, nq * 4);

    free(qkv);
    free(dout);
    free(p.qkv);
    free(got);
    free(ref);
    free(att);
    free(gotb);
    free(wout);
    free(gq);
}

/* ================================================================== main */

int main(void) {
    double t0 = zt_now();
    harness_init(20240611);
    {
        /* the thread-count checks rely on create(n) setting the OpenMP thread count */
        set_threads(3);
        int n3 = omp_get_max_threads();
        set_threads(2);
        chk k;
        chk_init(&k, TOL_EXACT);
        if (n3 != 3 || omp_get_max_threads() != 2) chk_fail(&k, "zt_backend_create(device, n) does not set n OpenMP threads");
        chk_done(&k, "backend_create[threads]");
    }

    test_memory();

    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            test_matmul(5, 70, 37, ta, tb, 0.7f, 0.3f);
            test_matmul(13, 9, 70, ta, tb, 1.0f, 0.0f);
        }
    test_matmul(67, 130, 101, 0, 1, 1.0f, 0.0f); /* big enough for BLAS to split over threads */
    test_matmul(130, 67, 101, 1, 0, -0.5f, 2.0f);

    test_linear_fwd(5, 37, 70, 1);
    test_linear_fwd(5, 37, 70, 0);
    test_linear_fwd(7, 70, 37, 1);
    test_linear_bwd(5, 37, 70, 1, 0);
    test_linear_bwd(5, 37, 70, 1, 1);
    test_linear_bwd(5, 37, 70, 0, 0);
    test_linear_bwd(4, 21, 130, 1, 1); /* dbias crosses two 64-column blocks */
    test_linear_bwd(13, 37, 70, 1, 1); /* dinp (13, 37): an odd column count, several row blocks */

    test_layernorm(5, 37);
    test_layernorm(4, 130);

    test_attention(2, 7, 15, 3); /* hs = 5 */
    test_attention(1, 9, 12, 4); /* hs = 3 */
    test_attention(3, 1, 6, 2);  /* T = 1 */

    return harness_finish("test_ops", t0);
}
