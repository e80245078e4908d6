/* ops_harness.h — the shared harness of the op tests (test_ops.c, test_ops_elementwise.c):
 * host/device helpers, the checkers, the thread-count invariance check and finite differences.
 * See test_ops.c for the tolerances and what each check means. Included once per test program.
 *
 * The backend under test comes from the factory: ZT_TEST_DEVICE (default "cpu"; "devsim" runs the
 * same cases on simulated device memory, where any host access to a device buffer crashes). Data
 * crosses only through to_device / to_host: the harness never dereferences a backend buffer.
 * Off the cpu, every PASS/FAIL name is prefixed with the device ("devsim:matmul[...]") and the
 * thread-invariance check also requires the outputs to equal the cpu backend's bit for bit. */
#ifndef ZT_OPS_HARNESS_H
#define ZT_OPS_HARNESS_H

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/dist/backend_factory.h"
#include "iface/backend.h"
#include "util/util.h"

/* Each op's limits (forward: normalized by 1 + max |ref|; backward: by max |grad|) live in a table
 * next to its tests (test_ops.c, test_ops_elementwise.c): a small multiple of the worst fp32 error
 * measured over the cases, the measured value beside it. ZT_OPS_MEASURE=1 prints every part's
 * error and limit ("# measure case part err limit") to re-measure after changing an op. */
typedef struct op_tol {
    double fwd, bwd;
} op_tol;
#define FD_H 1e-5

static zt_backend *g_be; /* the backend under test, 2 threads */
static zt_rng g_rng;
static const char *g_dev = "cpu"; /* ZT_TEST_DEVICE; g_tag (check.h): "" on the cpu, else "<device>:" */

/* ------------------------------------------------------------------ backends (through the factory) */

/* the device under test with nt threads; the factory's create sets the OpenMP / BLAS thread count */
static inline zt_backend *make_backend(const char *dev, int nt) {
    char err[ZT_ERR_BUF];
    zt_backend *be = zt_backend_create(dev, nt, err, sizeof err);
    if (!be) {
        check_fail("backend_create: %s", err);
        exit(1);
    }
    return be;
}

/* reads ZT_TEST_DEVICE, seeds the RNG, makes g_be (2 threads) and prints what runs */
static inline void harness_init(uint64_t seed) {
    const char *d = getenv("ZT_TEST_DEVICE");
    if (d && *d) g_dev = d;
    if (strcmp(g_dev, "cpu") != 0) snprintf(g_tag, sizeof g_tag, "%s:", g_dev);
    zt_rng_seed(&g_rng, seed);
    g_be = make_backend(g_dev, 2);
    char desc[256];
    zt_backend_describe(g_be, desc, sizeof desc);
    printf("# backend %s\n", desc);
}

static inline int harness_finish(const char *prog, double t0) {
    zt_backend_destroy(g_be);
    printf("# %s%s: %d passed, %d failed, %.2f s\n", g_tag, prog, g_pass, g_fail, zt_now() - t0);
    return g_fail ? 1 : 0;
}

/* ------------------------------------------------------------------ host helpers */

static inline void *xmalloc(size_t n) { return zt_malloc(n ? n : 1); }

static inline float *frand(size_t n, double scale, double shift) {
    float *x = xmalloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = (float)(shift + scale * zt_rng_normal(&g_rng));
    return x;
}

static inline float *ffill(size_t n, float v) {
    float *x = xmalloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = v;
    return x;
}

static inline double *f2d(const float *x, size_t n) {
    double *y = xmalloc(n * sizeof *y);
    for (size_t i = 0; i < n; i++) y[i] = x[i];
    return y;
}

static inline double *dzeros(size_t n) {
    double *y = xmalloc(n * sizeof *y);
    for (size_t i = 0; i < n; i++) y[i] = 0.0;
    return y;
}

static inline double maxabs(const double *x, size_t n) {
    double m = 0.0;
    for (size_t i = 0; i < n; i++) m = fabs(x[i]) > m ? fabs(x[i]) : m;
    return m;
}

static inline double dot(const double *a, const double *b, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* ------------------------------------------------------------------ device helpers */

static inline void *dev_put(zt_backend *be, const void *host, size_t bytes) {
    void *d = be->i->alloc(be, bytes);
    if (host) be->i->to_device(be, d, host, bytes);
    return d;
}

static inline void dev_get(zt_backend *be, void *host, const void *d, size_t bytes) {
    be->i->sync(be);
    be->i->to_host(be, host, d, bytes);
}

static inline void dev_free(zt_backend *be, void *d) { be->i->free(be, d); }

/* ------------------------------------------------------------------ checking */

typedef struct chk {
    double err;      /* worst normalized error over the parts checked */
    int ok;
    op_tol tol;      /* the op's limits */
    char why[512];
} chk;

static inline void chk_init(chk *k, op_tol tol) {
    k->err = 0.0;
    k->ok = 1;
    k->tol = tol;
    k->why[0] = 0;
}

static inline void chk_fail(chk *k, const char *msg) {
    if (k->ok) snprintf(k->why, sizeof k->why, "%s", msg);
    k->ok = 0;
}

/* pass iff max |got - ref| <= tol * scale; the normalized error is max |got - ref| / scale */
static inline void chk_arr(chk *k, const char *what, const float *got, const double *ref, size_t n, double tol,
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
    const char *ms = getenv("ZT_OPS_MEASURE");
    if (ms && *ms && *ms != '0') printf("# measure %s %.3e (limit %.1e)\n", what, e, tol);
    if (!(err <= tol * scale)) {
        char msg[400];
        snprintf(msg, sizeof msg, "%s: max err %.3e at [%zu] (got %.9g, ref %.9g) > %.1e * %.4g", what, err, at,
                 (double)got[at], ref[at], tol, scale);
        chk_fail(k, msg);
    }
}

/* forward convention: scale 1 + max |ref| */
static inline void chk_fwd(chk *k, const char *what, const float *got, const double *ref, size_t n) {
    chk_arr(k, what, got, ref, n, k->tol.fwd, 1.0 + maxabs(ref, n));
}

/* backward convention: got = base + grad (base NULL: 0), scale max |grad| */
static inline void chk_bwd(chk *k, const char *what, const float *got, const float *base, const double *grad, size_t n) {
    double *ref = xmalloc(n * sizeof *ref);
    for (size_t i = 0; i < n; i++) ref[i] = (base ? (double)base[i] : 0.0) + grad[i];
    chk_arr(k, what, got, ref, n, k->tol.bwd, maxabs(grad, n));
    free(ref);
}

static inline void chk_bits(chk *k, const char *what, const void *got, const void *want, size_t bytes) {
    if (memcmp(got, want, bytes) != 0) {
        size_t i = 0;
        while (((const unsigned char *)got)[i] == ((const unsigned char *)want)[i]) i++;
        char msg[200];
        snprintf(msg, sizeof msg, "%s: memory that must be left untouched changed at byte %zu", what, i);
        chk_fail(k, msg);
    }
}

static inline void chk_done(const chk *k, const char *name) {
    if (k->ok) check_pass("%s (max err %.2e)", name, k->err);
    else check_fail("%s: %s", name, k->why);
}

/* ------------------------------------------------------------------ thread-count invariance */

typedef void (*run_fn)(zt_backend *be, const void *ctx, void *out);

static inline void set_threads(int nt) { zt_backend_destroy(make_backend(g_dev, nt)); }

static inline void report_diff(const char *tname, const char *what, const unsigned char *want,
                               const unsigned char *got, size_t bytes) {
    (void)bytes;
    size_t i = 0;
    while (want[i] == got[i]) i++;
    size_t fi = i / 4;
    float a, b;
    memcpy(&a, want + fi * 4, 4);
    memcpy(&b, got + fi * 4, 4);
    check_fail("%s: %s at byte %zu (as float [%zu]: %.9g vs %.9g)", tname, what, i, fi, (double)b, (double)a);
}

/* rerun one case with 1, 2, 3 threads; the output blobs must be bit-identical (and, off the cpu,
   equal to the cpu backend's with 2 threads: same arithmetic, same bits) */
static inline void check_threads(const char *name, run_fn run, const void *ctx, size_t bytes) {
    static const int nts[3] = {1, 2, 3};
    const int vs_cpu = strcmp(g_dev, "cpu") != 0, nb = vs_cpu ? 4 : 3;
    unsigned char *buf[4];
    for (int k = 0; k < nb; k++) {
        buf[k] = xmalloc(bytes);
        memset(buf[k], 0x5a, bytes);
        zt_backend *be = make_backend(k < 3 ? g_dev : "cpu", k < 3 ? nts[k] : 2);
        run(be, ctx, buf[k]);
        zt_backend_destroy(be);
    }
    set_threads(2);
    char tname[256], what[64];
    snprintf(tname, sizeof tname, "threads:%s", name);
    int ok = 1;
    for (int k = 1; k < 3 && ok; k++) {
        if (memcmp(buf[0], buf[k], bytes) != 0) {
            snprintf(what, sizeof what, "%d threads differ from 1 thread", nts[k]);
            report_diff(tname, what, buf[0], buf[k], bytes);
            ok = 0;
        }
    }
    if (ok && vs_cpu && memcmp(buf[3], buf[1], bytes) != 0) {
        snprintf(what, sizeof what, "%s differs from the cpu backend", g_dev);
        report_diff(tname, what, buf[3], buf[1], bytes);
        ok = 0;
    }
    if (ok) check_pass("%s (max err 0: bit-identical with 1, 2, 3 threads%s)", tname, vs_cpu ? " and with the cpu backend" : "");
    for (int k = 0; k < nb; k++) free(buf[k]);
}

/* ------------------------------------------------------------------ finite differences */

typedef void (*dfwd_fn)(const void *ctx, double *out);

/* grad[i] = dL/dx[i] with L = sum(wout * f(ctx)), by central differences; x is one of ctx's inputs */
static inline void fd_grad(const void *ctx, dfwd_fn f, double *x, size_t nx, const double *wout, size_t nout,
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


#endif
