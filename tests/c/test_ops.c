/* test_ops.c — checks every op of the cpu backend's zt_backend_i against double-precision
 * references written here, on small and awkward shapes.
 *
 *  - forward ops: max |ours - ref| <= 1e-5 * (1 + max |ref|), ref computed in double from the
 *    same float inputs ("max err" below is max |ours - ref| / (1 + max |ref|));
 *  - backward ops: against central finite differences (step 1e-5, in double) of the double
 *    reference forward on L = sum(w_out * out), where w_out is the random dout given to the op,
 *    so one backward call gives every input's gradient; max |ours - fd| <= 1e-4 * max |fd|
 *    ("max err" is max |ours - fd| / max |fd|);
 *  - overwrite / accumulate contracts: outputs that are documented as overwritten are prefilled
 *    with NaN, outputs that accumulate are prefilled with random values, untouched memory
 *    (padded vocabulary columns, dwpe rows >= T) is compared bit for bit;
 *  - thread-count invariance: every case is rerun with 1, 2 and 3 OpenMP/BLAS threads (a fresh
 *    zt_cpu_backend_create(n) each time) and the outputs must be bit-identical (memcmp).
 *
 * Output: one line per case, `PASS name (max err E)` or `FAIL name: reason`; exit 1 if any failed.
 */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cpu/cpu_backend.h"
#include "util.h"

#define FWD_TOL 1e-5
#define BWD_TOL 1e-4
#define FD_H 1e-5

static int g_pass, g_fail;
static zt_backend *g_be; /* the backend under test, 2 threads */
static zt_rng g_rng;

/* ------------------------------------------------------------------ host helpers */

static void *xmalloc(size_t n) { return zt_malloc(n ? n : 1); }

static float *frand(size_t n, double scale, double shift) {
    float *x = xmalloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = (float)(shift + scale * zt_rng_normal(&g_rng));
    return x;
}

static float *ffill(size_t n, float v) {
    float *x = xmalloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = v;
    return x;
}

static double *f2d(const float *x, size_t n) {
    double *y = xmalloc(n * sizeof *y);
    for (size_t i = 0; i < n; i++) y[i] = x[i];
    return y;
}

static double *dzeros(size_t n) {
    double *y = xmalloc(n * sizeof *y);
    for (size_t i = 0; i < n; i++) y[i] = 0.0;
    return y;
}

static double maxabs(const double *x, size_t n) {
    double m = 0.0;
    for (size_t i = 0; i < n; i++) m = fabs(x[i]) > m ? fabs(x[i]) : m;
    return m;
}

static double dot(const double *a, const double *b, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* ------------------------------------------------------------------ device helpers */

static void *dev_put(zt_backend *be, const void *host, size_t bytes) {
    void *d = be->i->alloc(be, bytes);
    if (host) be->i->to_device(be, d, host, bytes);
    return d;
}

static void dev_get(zt_backend *be, void *host, const void *d, size_t bytes) {
    be->i->sync(be);
    be->i->to_host(be, host, d, bytes);
}

static void dev_free(zt_backend *be, void *d) { be->i->free(be, d); }

/* ------------------------------------------------------------------ checking */

typedef struct chk {
    double err;      /* worst normalized error over the parts checked */
    int ok;
    char why[512];
} chk;

static void chk_init(chk *k) {
    k->err = 0.0;
    k->ok = 1;
    k->why[0] = 0;
}

static void chk_fail(chk *k, const char *msg) {
    if (k->ok) snprintf(k->why, sizeof k->why, "%s", msg);
    k->ok = 0;
}

/* pass iff max |got - ref| <= tol * scale; the normalized error is max |got - ref| / scale */
static void chk_arr(chk *k, const char *what, const float *got, const double *ref, size_t n, double tol,
                    double scale) {
    double err = 0.0;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - ref[i]);
        if (isnan(d)) d = INFINITY;
        if (d > err) {
            err = d;
            at = i;
        }
    }
    if (scale <= 0.0) scale = 1e-300;
    double e = err / scale;
    if (e > k->err) k->err = e;
    if (!(err <= tol * scale)) {
        char msg[400];
        snprintf(msg, sizeof msg, "%s: max err %.3e at [%zu] (got %.9g, ref %.9g) > %.0e * %.4g", what, err, at,
                 (double)got[at], ref[at], tol, scale);
        chk_fail(k, msg);
    }
}

/* forward convention: scale 1 + max |ref| */
static void chk_fwd(chk *k, const char *what, const float *got, const double *ref, size_t n) {
    chk_arr(k, what, got, ref, n, FWD_TOL, 1.0 + maxabs(ref, n));
}

/* backward convention: got = base + grad (base NULL: 0), scale max |grad| */
static void chk_bwd(chk *k, const char *what, const float *got, const float *base, const double *grad, size_t n) {
    double *ref = xmalloc(n * sizeof *ref);
    for (size_t i = 0; i < n; i++) ref[i] = (base ? (double)base[i] : 0.0) + grad[i];
    chk_arr(k, what, got, ref, n, BWD_TOL, maxabs(grad, n));
    free(ref);
}

static void chk_bits(chk *k, const char *what, const void *got, const void *want, size_t bytes) {
    if (memcmp(got, want, bytes) != 0) {
        size_t i = 0;
        while (((const unsigned char *)got)[i] == ((const unsigned char *)want)[i]) i++;
        char msg[200];
        snprintf(msg, sizeof msg, "%s: memory that must be left untouched changed at byte %zu", what, i);
        chk_fail(k, msg);
    }
}

static void chk_done(const chk *k, const char *name) {
    if (k->ok) {
        printf("PASS %s (max err %.2e)\n", name, k->err);
        g_pass++;
    } else {
        printf("FAIL %s: %s\n", name, k->why);
        g_fail++;
    }
    fflush(stdout);
}

/* ------------------------------------------------------------------ thread-count invariance */

typedef void (*run_fn)(zt_backend *be, const void *ctx, void *out);

static void set_threads(int nt) { zt_cpu_backend_free(zt_cpu_backend_create(nt)); }

/* rerun one case with 1, 2, 3 threads; the output blobs must be bit-identical */
static void check_threads(const char *name, run_fn run, const void *ctx, size_t bytes) {
    static const int nts[3] = {1, 2, 3};
    unsigned char *buf[3];
    for (int k = 0; k < 3; k++) {
        buf[k] = xmalloc(bytes);
        memset(buf[k], 0x5a, bytes);
        zt_backend *be = zt_cpu_backend_create(nts[k]);
        run(be, ctx, buf[k]);
        zt_cpu_backend_free(be);
    }
    set_threads(2);
    char tname[256];
    snprintf(tname, sizeof tname, "threads:%s", name);
    int ok = 1;
    for (int k = 1; k < 3 && ok; k++) {
        if (memcmp(buf[0], buf[k], bytes) != 0) {
            size_t i = 0;
            while (buf[0][i] == buf[k][i]) i++;
            size_t fi = i / 4;
            float a, b;
            memcpy(&a, buf[0] + fi * 4, 4);
            memcpy(&b, buf[k] + fi * 4, 4);
            printf("FAIL %s: %d threads differ from 1 thread at byte %zu (as float [%zu]: %.9g vs %.9g)\n", tname,
                   nts[k], i, fi, (double)b, (double)a);
            ok = 0;
        }
    }
    if (ok) {
        printf("PASS %s (max err 0: bit-identical with 1, 2, 3 threads)\n", tname);
        g_pass++;
    } else {
        g_fail++;
    }
    fflush(stdout);
    for (int k = 0; k < 3; k++) free(buf[k]);
}

/* ------------------------------------------------------------------ finite differences */

typedef void (*dfwd_fn)(const void *ctx, double *out);

/* grad[i] = dL/dx[i] with L = sum(wout * f(ctx)), by central differences; x is one of ctx's inputs */
static void fd_grad(const void *ctx, dfwd_fn f, double *x, size_t nx, const double *wout, size_t nout,
                    double *grad) {
    double *out = xmalloc(nout * sizeof *out);
    for (size_t i = 0; i < nx; i++) {
        double x0 = x[i];
        x[i] = x0 + FD_H;
        f(ctx, out);
        double lp = dot(wout, out, nout);
        x[i] = x0 - FD_H;
        f(ctx, out);
        double lm = dot(wout, out, nout);
        x[i] = x0;
        grad[i] = (lp - lm) / (2.0 * FD_H);
    }
    free(out);
}

/* ================================================================== memory ops */

static void test_memory(void) {
    zt_backend *be = g_be;
    chk k;
    chk_init(&k);
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
    chk_init(&k);
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
    chk_init(&k);
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
    chk_init(&k);
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
    be->i->layernorm_fwd(be, dout, dm, dr, dx, dw, db, c->N, c->C);
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
    be->i->layernorm_fwd(be, dy, dm, dr, dx, dw, db, c->N, c->C);
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
    chk_init(&k);
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
    chk_init(&k);
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
    be->i->attention_fwd(be, dout, datt, dq, c->B, c->T, c->C, c->NH);
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
    be->i->attention_fwd(be, dy, datt, dq, c->B, c->T, c->C, c->NH);
    float *ddout = dev_put(be, c->dout, no * 4), *ddqkv = dev_put(be, nan, nq * 4), *scratch = dev_put(be, nan, na * 4);
    be->i->attention_bwd(be, ddqkv, scratch, ddout, dq, datt, c->B, c->T, c->C, c->NH);
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
    chk_init(&k);
    chk_fwd(&k, "out", got, ref, no);
    chk_fwd(&k, "att (softmax, 0 above the diagonal)", got + no, att, na);
    chk_done(&k, name);
    check_threads(name, run_att_fwd, &c, (no + na) * 4);

    float *gotb = xmalloc(nq * 4);
    run_att_bwd(g_be, &c, gotb);
    double *wout = f2d(dout, no), *gq = dzeros(nq);
    fd_grad(&p, att_ref_out, p.qkv, nq, wout, no, gq);
    snprintf(name, sizeof name, "attention_bwd[B%d,T%d,C%d,NH%d]", B, T, C, NH);
    chk_init(&k);
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

/* ================================================================== elementwise: gelu, add, accumulate */

static double gelu_d(double x) {
    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

typedef struct ew_ctx {
    size_t n;
    const float *a, *b; /* gelu: a = inp, b = dout; add / accumulate: a, b */
} ew_ctx;

static void run_gelu_fwd(zt_backend *be, const void *vc, void *out) {
    const ew_ctx *c = vc;
    float *nan = ffill(c->n, NAN);
    float *di = dev_put(be, c->a, c->n * 4), *dout = dev_put(be, nan, c->n * 4);
    be->i->gelu_fwd(be, dout, di, c->n);
    dev_get(be, out, dout, c->n * 4);
    dev_free(be, di);
    dev_free(be, dout);
    free(nan);
}

static void run_gelu_bwd(zt_backend *be, const void *vc, void *out) {
    const ew_ctx *c = vc;
    float *nan = ffill(c->n, NAN);
    float *di = dev_put(be, c->a, c->n * 4), *dy = dev_put(be, c->b, c->n * 4), *dx = dev_put(be, nan, c->n * 4);
    be->i->gelu_bwd(be, dx, di, dy, c->n);
    dev_get(be, out, dx, c->n * 4);
    dev_free(be, di);
    dev_free(be, dy);
    dev_free(be, dx);
    free(nan);
}

static void run_add(zt_backend *be, const void *vc, void *out) {
    const ew_ctx *c = vc;
    float *nan = ffill(c->n, NAN);
    float *da = dev_put(be, c->a, c->n * 4), *db = dev_put(be, c->b, c->n * 4), *dout = dev_put(be, nan, c->n * 4);
    be->i->add(be, dout, da, db, c->n);
    dev_get(be, out, dout, c->n * 4);
    dev_free(be, da);
    dev_free(be, db);
    dev_free(be, dout);
    free(nan);
}

static void run_accumulate(zt_backend *be, const void *vc, void *out) {
    const ew_ctx *c = vc;
    float *da = dev_put(be, c->a, c->n * 4), *db = dev_put(be, c->b, c->n * 4);
    be->i->accumulate(be, da, db, c->n);
    dev_get(be, out, da, c->n * 4);
    dev_free(be, da);
    dev_free(be, db);
}

static void test_gelu(size_t n) {
    float *inp = frand(n, 2.5, 0.0), *dout = frand(n, 1.0, 0.0);
    static const float special[] = {0.0f, 1e-4f, -1e-4f, 1e-2f, -1e-2f, 1.0f, -1.0f, 3.0f, -3.0f, 6.0f, -6.0f, 10.0f, -10.0f, 20.0f, -20.0f};
    for (size_t i = 0; i < sizeof special / sizeof special[0] && i < n; i++) inp[i * 7 % n] = special[i];
    ew_ctx c = {n, inp, dout};
    char name[128];

    float *got = xmalloc(n * 4);
    run_gelu_fwd(g_be, &c, got);
    double *ref = xmalloc(n * sizeof *ref);
    for (size_t i = 0; i < n; i++) ref[i] = gelu_d(inp[i]);
    snprintf(name, sizeof name, "gelu_fwd[n%zu]", n);
    chk k;
    chk_init(&k);
    chk_fwd(&k, "out", got, ref, n);
    chk_done(&k, name);
    check_threads(name, run_gelu_fwd, &c, n * 4);

    /* elementwise: the finite difference of each element separately */
    run_gelu_bwd(g_be, &c, got);
    for (size_t i = 0; i < n; i++) {
        double x = inp[i];
        ref[i] = (gelu_d(x + FD_H) - gelu_d(x - FD_H)) / (2.0 * FD_H) * dout[i];
    }
    snprintf(name, sizeof name, "gelu_bwd[n%zu]", n);
    chk_init(&k);
    chk_bwd(&k, "dinp", got, NULL, ref, n);
    chk_done(&k, name);
    check_threads(name, run_gelu_bwd, &c, n * 4);

    free(inp);
    free(dout);
    free(got);
    free(ref);
}

static void test_add_accumulate(size_t n) {
    float *a = frand(n, 1.0, 0.0), *b = frand(n, 3.0, 0.0);
    ew_ctx c = {n, a, b};
    float *got = xmalloc(n * 4);
    double *ref = xmalloc(n * sizeof *ref);
    for (size_t i = 0; i < n; i++) ref[i] = (double)a[i] + b[i];
    char name[128];
    chk k;

    run_add(g_be, &c, got);
    snprintf(name, sizeof name, "add[n%zu]", n);
    chk_init(&k);
    chk_fwd(&k, "out", got, ref, n);
    chk_done(&k, name);
    check_threads(name, run_add, &c, n * 4);

    run_accumulate(g_be, &c, got);
    snprintf(name, sizeof name, "accumulate[n%zu]", n);
    chk_init(&k);
    chk_fwd(&k, "acc", got, ref, n);
    chk_done(&k, name);
    check_threads(name, run_accumulate, &c, n * 4);

    free(a);
    free(b);
    free(got);
    free(ref);
}

/* ================================================================== embeddings */

typedef struct emb_d {
    int B, T, C;
    const int32_t *tok;
    double *wte, *wpe;
} emb_d;

static void emb_ref(const void *vp, double *out) {
    const emb_d *p = vp;
    for (int bt = 0; bt < p->B * p->T; bt++)
        for (int c = 0; c < p->C; c++)
            out[(size_t)bt * p->C + c] = p->wte[(size_t)p->tok[bt] * p->C + c] + p->wpe[(size_t)(bt % p->T) * p->C + c];
}

typedef struct emb_ctx {
    int B, T, C, Vp, maxT;
    const int32_t *tok;
    const float *wte, *wpe, *dout, *dwte0, *dwpe0;
} emb_ctx;

static void run_emb_fwd(zt_backend *be, const void *vc, void *out) {
    const emb_ctx *c = vc;
    size_t no = (size_t)c->B * c->T * c->C;
    float *nan = ffill(no, NAN);
    int32_t *dt = dev_put(be, c->tok, (size_t)c->B * c->T * sizeof(int32_t));
    float *de = dev_put(be, c->wte, (size_t)c->Vp * c->C * 4), *dp = dev_put(be, c->wpe, (size_t)c->maxT * c->C * 4);
    float *dout = dev_put(be, nan, no * 4);
    be->i->embed_fwd(be, dout, dt, de, dp, c->B, c->T, c->C);
    dev_get(be, out, dout, no * 4);
    dev_free(be, dt);
    dev_free(be, de);
    dev_free(be, dp);
    dev_free(be, dout);
    free(nan);
}

/* blob: dwte(Vp, C) | dwpe(maxT, C) */
static void run_emb_bwd(zt_backend *be, const void *vc, void *out) {
    const emb_ctx *c = vc;
    size_t no = (size_t)c->B * c->T * c->C, ne = (size_t)c->Vp * c->C, np = (size_t)c->maxT * c->C;
    int32_t *dt = dev_put(be, c->tok, (size_t)c->B * c->T * sizeof(int32_t));
    float *dy = dev_put(be, c->dout, no * 4), *ge = dev_put(be, c->dwte0, ne * 4), *gp = dev_put(be, c->dwpe0, np * 4);
    be->i->embed_bwd(be, ge, gp, dy, dt, c->B, c->T, c->C);
    float *o = out;
    dev_get(be, o, ge, ne * 4);
    dev_get(be, o + ne, gp, np * 4);
    dev_free(be, dt);
    dev_free(be, dy);
    dev_free(be, ge);
    dev_free(be, gp);
}

static void test_embed(int B, int T, int C, int V, int Vp, int maxT) {
    size_t nbt = (size_t)B * T, no = nbt * C, ne = (size_t)Vp * C, np = (size_t)maxT * C;
    int32_t *tok = xmalloc(nbt * sizeof *tok);
    for (size_t i = 0; i < nbt; i++) tok[i] = (int32_t)(zt_rng_next(&g_rng) % (uint64_t)V);
    /* repeated tokens, within a row and across rows, and the last vocabulary entry */
    tok[0] = 3 % V;
    tok[2] = 3 % V;
    tok[nbt - 1] = 3 % V;
    tok[1] = V - 1;
    if (nbt > 5) tok[5] = V - 1;
    float *wte = frand(ne, 1.0, 0.0), *wpe = frand(np, 1.0, 0.0), *dout = frand(no, 1.0, 0.0);
    float *dwte0 = frand(ne, 1.0, 0.0); /* accumulates (the LM head wrote it first) */
    float *dwpe0 = xmalloc(np * 4);     /* rows [0, T) overwritten: NaN; rows [T, maxT) untouched */
    for (size_t i = 0; i < np; i++) dwpe0[i] = i < (size_t)T * C ? NAN : (float)(1000 + i);
    emb_ctx c = {B, T, C, Vp, maxT, tok, wte, wpe, dout, dwte0, dwpe0};
    emb_d p = {B, T, C, tok, f2d(wte, ne), f2d(wpe, np)};
    char name[128];

    float *got = xmalloc((ne + np) * 4);
    run_emb_fwd(g_be, &c, got);
    double *ref = xmalloc(no * sizeof *ref);
    emb_ref(&p, ref);
    snprintf(name, sizeof name, "embed_fwd[B%d,T%d,C%d,V%d,Vp%d]", B, T, C, V, Vp);
    chk k;
    chk_init(&k);
    chk_fwd(&k, "out", got, ref, no);
    chk_done(&k, name);
    check_threads(name, run_emb_fwd, &c, no * 4);

    run_emb_bwd(g_be, &c, got);
    double *wout = f2d(dout, no), *ge = dzeros(ne), *gp = dzeros(np);
    fd_grad(&p, emb_ref, p.wte, ne, wout, no, ge);
    fd_grad(&p, emb_ref, p.wpe, np, wout, no, gp);
    snprintf(name, sizeof name, "embed_bwd[B%d,T%d,C%d,V%d,Vp%d,maxT%d,repeated tokens]", B, T, C, V, Vp, maxT);
    chk_init(&k);
    chk_bwd(&k, "dwte (added to the old dwte)", got, dwte0, ge, ne);
    chk_bwd(&k, "dwpe rows [0,T) (overwritten)", got + ne, NULL, gp, (size_t)T * C);
    chk_bits(&k, "dwpe rows [T,maxT)", got + ne + (size_t)T * C, dwpe0 + (size_t)T * C, (np - (size_t)T * C) * 4);
    chk_bits(&k, "dwte padded rows [V,Vp)", got + (size_t)V * C, dwte0 + (size_t)V * C, (ne - (size_t)V * C) * 4);
    chk_done(&k, name);
    check_threads(name, run_emb_bwd, &c, (ne + np) * 4);

    free(tok);
    free(wte);
    free(wpe);
    free(dout);
    free(dwte0);
    free(dwpe0);
    free(p.wte);
    free(p.wpe);
    free(got);
    free(ref);
    free(wout);
    free(ge);
    free(gp);
}

/* ================================================================== softmax + cross-entropy */

typedef struct xent_d {
    int N, V, Vp;
    const int32_t *tgt;
    double *logits;
} xent_d;

static void xent_ref(const void *vp, double *losses) {
    const xent_d *p = vp;
    for (int n = 0; n < p->N; n++) {
        const double *x = p->logits + (size_t)n * p->Vp;
        double mx = -INFINITY, s = 0.0;
        for (int v = 0; v < p->V; v++) mx = x[v] > mx ? x[v] : mx;
        for (int v = 0; v < p->V; v++) s += exp(x[v] - mx);
        losses[n] = mx + log(s) - x[p->tgt[n]];
    }
}

typedef struct xent_ctx {
    int N, V, Vp;
    float dscale;
    const int32_t *tgt;
    const float *logits;
} xent_ctx;

/* blob: losses(N) | logits(N, Vp) after the call */
static void run_xent(zt_backend *be, const void *vc, void *out) {
    const xent_ctx *c = vc;
    size_t nl = (size_t)c->N * c->Vp;
    float *nan = ffill(c->N, NAN);
    int32_t *dt = dev_put(be, c->tgt, (size_t)c->N * sizeof(int32_t));
    float *dl = dev_put(be, c->logits, nl * 4), *dloss = dev_put(be, nan, (size_t)c->N * 4);
    be->i->softmax_xent(be, dloss, dl, dt, c->N, c->V, c->Vp, c->dscale);
    float *o = out;
    dev_get(be, o, dloss, (size_t)c->N * 4);
    dev_get(be, o + c->N, dl, nl * 4);
    dev_free(be, dt);
    dev_free(be, dl);
    dev_free(be, dloss);
    free(nan);
}

/* pad: the value in the padded columns [V, Vp) (NaN: they must never be read into the loss) */
static void test_xent(int N, int V, int Vp, double scale, double shift, float pad, float dscale) {
    size_t nl = (size_t)N * Vp;
    float *logits = frand(nl, scale, shift);
    for (int n = 0; n < N; n++)
        for (int v = V; v < Vp; v++) logits[(size_t)n * Vp + v] = pad;
    int32_t *tgt = xmalloc((size_t)N * sizeof *tgt);
    for (int n = 0; n < N; n++) tgt[n] = (int32_t)(zt_rng_next(&g_rng) % (uint64_t)V);
    tgt[0] = V - 1;
    if (N > 1) tgt[1] = 0;
    xent_ctx c = {N, V, Vp, dscale, tgt, logits};
    xent_d p = {N, V, Vp, tgt, f2d(logits, nl)};
    for (size_t i = 0; i < nl; i++)
        if (isnan(p.logits[i])) p.logits[i] = 0.0; /* padded: the reference never reads them */

    float *got = xmalloc((nl + (size_t)N) * 4);
    run_xent(g_be, &c, got);
    double *ref = xmalloc((size_t)N * sizeof *ref);
    xent_ref(&p, ref);
    char name[160];
    snprintf(name, sizeof name, "softmax_xent[N%d,V%d,Vp%d,logits~%g+%gN,pad=%g,dscale=%g]", N, V, Vp, shift, scale,
             (double)pad, (double)dscale);
    chk k;
    chk_init(&k);
    chk_fwd(&k, "losses", got, ref, N);
    double *g = NULL;
    if (dscale == 0.0f) {
        chk_bits(&k, "logits with dscale=0", got + N, logits, nl * 4);
    } else {
        /* dlogits = d(dscale * sum losses)/dlogits; padded columns exactly 0 */
        double *wout = xmalloc((size_t)N * sizeof *wout);
        for (int n = 0; n < N; n++) wout[n] = dscale;
        g = dzeros(nl);
        fd_grad(&p, xent_ref, p.logits, nl, wout, N, g);
        chk_bwd(&k, "dlogits", got + N, NULL, g, nl);
        float *zeros = ffill(nl, 0.0f);
        for (int n = 0; n < N; n++)
            chk_bits(&k, "dlogits padded columns == 0", got + N + (size_t)n * Vp + V, zeros, (size_t)(Vp - V) * 4);
        free(zeros);
        free(wout);
    }
    chk_done(&k, name);
    check_threads(name, run_xent, &c, (nl + (size_t)N) * 4);

    free(logits);
    free(tgt);
    free(p.logits);
    free(got);
    free(ref);
    free(g);
}

/* ================================================================== adamw */

typedef struct adamw_ctx {
    size_t n;
    const float *param, *grad, *m, *v;
    float lr, beta1, beta2, eps, wd, bc1, bc2, gs;
} adamw_ctx;

/* blob: param | m | v */
static void run_adamw(zt_backend *be, const void *vc, void *out) {
    const adamw_ctx *c = vc;
    size_t b = c->n * 4;
    float *dp = dev_put(be, c->param, b), *dg = dev_put(be, c->grad, b), *dm = dev_put(be, c->m, b),
          *dv = dev_put(be, c->v, b);
    be->i->adamw(be, dp, dg, dm, dv, c->n, c->lr, c->beta1, c->beta2, c->eps, c->wd, c->bc1, c->bc2, c->gs);
    float *o = out;
    dev_get(be, o, dp, b);
    dev_get(be, o + c->n, dm, b);
    dev_get(be, o + 2 * c->n, dv, b);
    dev_free(be, dp);
    dev_free(be, dg);
    dev_free(be, dm);
    dev_free(be, dv);
}

static void test_adamw(size_t n, long t, float lr, float eps, float wd, float gs) {
    const float beta1 = 0.9f, beta2 = 0.95f;
    float *param = frand(n, 1.0, 0.0), *grad = frand(n, 0.5, 0.0), *m = frand(n, 0.1, 0.0), *v = frand(n, 0.01, 0.0);
    for (size_t i = 0; i < n; i++) v[i] = fabsf(v[i]) + 1e-6f;
    grad[0] = m[0] = v[0] = 0.0f; /* only the weight decay moves it */
    grad[1] = 0.0f;
    adamw_ctx c = {n, param, grad, m, v, lr, beta1, beta2, eps, wd,
                   (float)(1.0 - pow(beta1, (double)t)), (float)(1.0 - pow(beta2, (double)t)), gs};
    float *got = xmalloc(3 * n * 4);
    run_adamw(g_be, &c, got);
    /* PyTorch AdamW: p -= lr * (mhat / (sqrt(vhat) + eps) + wd * p), mhat = m / bc1, vhat = v / bc2 */
    double *rp = xmalloc(n * sizeof *rp), *rm = xmalloc(n * sizeof *rm), *rv = xmalloc(n * sizeof *rv);
    double *dref = xmalloc(n * sizeof *dref);
    float *dgot = xmalloc(n * 4);
    for (size_t i = 0; i < n; i++) {
        double g = (double)grad[i] * gs;
        rm[i] = (double)beta1 * m[i] + (1.0 - (double)beta1) * g;
        rv[i] = (double)beta2 * v[i] + (1.0 - (double)beta2) * g * g;
        double mhat = rm[i] / c.bc1, vhat = rv[i] / c.bc2;
        dref[i] = -(double)lr * (mhat / (sqrt(vhat) + eps) + (double)wd * param[i]);
        rp[i] = param[i] + dref[i];
        dgot[i] = (float)((double)got[i] - param[i]); /* the difference is exact in double */
    }
    char name[160];
    snprintf(name, sizeof name, "adamw[n%zu,t%ld,lr%g,eps%g,wd%g,grad_scale%g]", n, t, (double)lr, (double)eps,
             (double)wd, (double)gs);
    chk k;
    chk_init(&k);
    chk_fwd(&k, "param", got, rp, n);
    chk_fwd(&k, "m", got + n, rm, n);
    chk_fwd(&k, "v", got + 2 * n, rv, n);
    chk_arr(&k, "param update (new - old)", dgot, dref, n, BWD_TOL, maxabs(dref, n));
    chk_done(&k, name);
    check_threads(name, run_adamw, &c, 3 * n * 4);
    free(param);
    free(grad);
    free(m);
    free(v);
    free(got);
    free(rp);
    free(rm);
    free(rv);
    free(dref);
    free(dgot);
}

/* ================================================================== sumsq_chunks */

typedef struct ssq_ctx {
    size_t n, chunk;
    const float *x;
} ssq_ctx;

/* blob: out(nc + 1) doubles; the extra one is a sentinel that must stay NaN */
static void run_ssq(zt_backend *be, const void *vc, void *out) {
    const ssq_ctx *c = vc;
    size_t nc = (c->n + c->chunk - 1) / c->chunk;
    double *o = out;
    for (size_t i = 0; i <= nc; i++) o[i] = NAN;
    float *dx = dev_put(be, c->x, c->n * 4);
    be->i->sumsq_chunks(be, o, dx, c->n, c->chunk);
    be->i->sync(be);
    dev_free(be, dx);
}

static void test_sumsq(size_t n, size_t chunk) {
    float *x = frand(n, 1.0, 0.0);
    ssq_ctx c = {n, chunk, x};
    size_t nc = (n + chunk - 1) / chunk;
    double *got = xmalloc((nc + 1) * sizeof *got);
    run_ssq(g_be, &c, got);
    char name[128];
    snprintf(name, sizeof name, "sumsq_chunks[n%zu,chunk%zu,%zu chunks]", n, chunk, nc);
    chk k;
    chk_init(&k);
    /* specified: squares in double, summed sequentially within a chunk -> exactly this */
    for (size_t ci = 0; ci < nc; ci++) {
        double s = 0.0;
        size_t i1 = (ci + 1) * chunk < n ? (ci + 1) * chunk : n;
        for (size_t i = ci * chunk; i < i1; i++) s += (double)x[i] * (double)x[i];
        double e = fabs(got[ci] - s) / (1.0 + s);
        if (isnan(e)) e = INFINITY;
        if (e > k.err) k.err = e;
        if (got[ci] != s) {
            char msg[200];
            snprintf(msg, sizeof msg, "chunk %zu: got %.17g, sequential double sum %.17g", ci, got[ci], s);
            chk_fail(&k, msg);
        }
    }
    if (!isnan(got[nc])) chk_fail(&k, "wrote past the last chunk");
    chk_done(&k, name);
    check_threads(name, run_ssq, &c, (nc + 1) * sizeof(double));
    free(x);
    free(got);
}

/* ================================================================== main */

int main(void) {
    double t0 = zt_now();
    zt_rng_seed(&g_rng, 20240611);
    g_be = zt_cpu_backend_create(2);
    {
        /* the thread-count checks rely on create(n) setting the OpenMP thread count */
        set_threads(3);
        int n3 = omp_get_max_threads();
        set_threads(2);
        chk k;
        chk_init(&k);
        if (n3 != 3 || omp_get_max_threads() != 2) chk_fail(&k, "zt_cpu_backend_create(n) does not set n OpenMP threads");
        chk_done(&k, "backend_create[threads]");
    }
    printf("# backend %s, blas %s\n", g_be->i->name, zt_cpu_blas_name());

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

    test_gelu(1003);
    test_add_accumulate(1003);

    test_embed(2, 7, 37, 13, 16, 9);
    test_embed(3, 5, 100, 13, 16, 6);

    test_xent(5, 13, 16, 3.0, 0.0, NAN, 0.0f);
    test_xent(5, 13, 16, 3.0, 0.0, NAN, 0.2f);
    test_xent(5, 13, 16, 1.0, 0.0, 50.0f, 1.0f); /* large finite padding must not enter */
    test_xent(3, 200, 256, 2.0, 100.0, 0.0f, 0.37f); /* logits ~100: needs the max shift */
    test_xent(3, 200, 256, 2.0, -100.0, 0.0f, 0.0f);

    test_adamw(1003, 3, 0.05f, 1e-8f, 0.1f, 0.7f);
    test_adamw(1003, 1000, 0.01f, 1e-3f, 0.0f, 1.0f);

    test_sumsq(1000, 64); /* last chunk partial (40) */
    test_sumsq(50, 64);   /* a single partial chunk */
    test_sumsq(128, 64);  /* exact chunks */
    test_sumsq(1001, 7);

    zt_cpu_backend_free(g_be);
    printf("# test_ops: %d passed, %d failed, %.2f s\n", g_pass, g_fail, zt_now() - t0);
    return g_fail ? 1 : 0;
}
