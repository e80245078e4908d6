/* test_ops_lora.c — the two backend ops LoRA / QLoRA fine-tuning adds (iface/backend.h):
 *
 *  dropout  out[i] = zt_dropout_keep(seed, i, p) ? in[i] * (1.0f / (1.0f - p)) : 0 (op_math.h's mask):
 *           n = 1e6 at p = 0.1 and 0.5: the kept fraction within 5 sigma of 1 - p (and the pairs of
 *           neighbours kept within 5 sigma of (1 - p)^2: no lag-1 correlation), every kept value
 *           exactly in * scale, every dropped one exactly +0.0f, the mask exactly op_math.h's; the
 *           same seed gives the same bits, seed + 1 another mask (differing on 2p(1-p) n +- 5 sigma
 *           positions); in place == out of place; p = 0 an exact copy (-0, Inf, NaN, denormals
 *           included) in and out of place; p = 1 drops everything; n = 0, 1, 7; bit-identical
 *           with 1, 2 and 3 threads; the masks of two (seed, p) pairs equal known answers computed
 *           independently in Python;
 *  dequant  a whole quantised matrix (core/lora/quant.h; blob uploaded with to_device) == zt_quant_decode
 *           bit for bit, NF4 / NF4_DQ / INT8 on 1x1, 3x70, 64x64, 5x1000 and 300x257 (two NF4_DQ
 *           groups), weights with outliers, an all-zero block and a negative block; the words after
 *           the output untouched; bit-identical with 1, 2 and 3 threads.
 *
 * Devices: every case on cpu, devsim (simulated device memory: a host access to a backend buffer
 * crashes) and cudasim (the CUDA kernels under the host execution harness); off the cpu every output
 * must also equal the cpu backend's bits. ZT_TEST_DEVICE=NAME runs one device only; the case names
 * carry "NAME:" off the cpu. Output: `PASS name` / `FAIL name: reason`; exit 1 if any failed.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dist/backend_factory.h"
#include "core/lora/quant.h"
#include "iface/backend.h"
#include "iface/op_math.h"
#include "util/util.h"

#include "check.h"

static const char *g_dev = "cpu"; /* g_tag (check.h): "<device>:" off the cpu */
static zt_rng g_rng;

static zt_backend *make_backend(const char *dev, int nt)
{
    char err[ZT_ERR_BUF];
    zt_backend *be = zt_backend_create(dev, nt, err, sizeof err);
    if (!be) {
        check_fail("backend_create: %s", err);
        exit(1);
    }
    return be;
}

static void name_of(char *buf, size_t n, const char *fmt, ...) ZT_PRINTF(3, 4);
static void name_of(char *buf, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, n, fmt, ap);
    va_end(ap);
}

static size_t words_differ(const void *a, const void *b, size_t nwords)
{
    size_t d = 0;
    for (size_t i = 0; i < nwords; i++) d += memcmp((const char *)a + 4 * i, (const char *)b + 4 * i, 4) != 0;
    return d;
}

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* ------------------------------------------------------------------ dropout */

/* out = dropout(in) on be (in place when inplace), through backend memory */
static void run_dropout(zt_backend *be, float *out, const float *in, size_t n, float p, uint64_t seed, int inplace)
{
    const size_t bytes = n ? n * sizeof(float) : 4;
    float *din = be->i->alloc(be, bytes);
    be->i->to_device(be, din, in, n * sizeof(float));
    float *dout = din;
    if (!inplace) {
        dout = be->i->alloc(be, bytes);
        float *nan = zt_malloc(bytes);
        for (size_t i = 0; i < n; i++) nan[i] = NAN;
        be->i->to_device(be, dout, nan, n * sizeof(float));
        free(nan);
    }
    be->i->dropout(be, dout, din, n, p, seed, NULL);
    be->i->sync(be);
    be->i->to_host(be, out, dout, n * sizeof(float));
    if (!inplace) be->i->free(be, dout);
    be->i->free(be, din);
}

/* inputs with no zeros, so a dropped element is told from a kept one by its value alone */
static float *nonzero_normal(size_t n)
{
    float *x = zt_malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) {
        float v = (float)zt_rng_normal(&g_rng);
        x[i] = v == 0.0f ? 1.0f : v;
    }
    return x;
}

static void test_dropout_stats(zt_backend *be, const float *x, size_t n, float p)
{
    const uint64_t seed = 0x10AAull + (uint64_t)(p * 100.0f);
    const float scale = 1.0f / (1.0f - p);
    float *y = zt_malloc(n * sizeof *y), *y2 = zt_malloc(n * sizeof *y2), *z = zt_malloc(n * sizeof *z);
    char nm[160];
    run_dropout(be, y, x, n, p, seed, 0);

    /* values: kept exactly in * scale, dropped exactly +0; the mask is op_math.h's */
    size_t kept = 0, pairs = 0, badval = 0, badmask = 0, first = (size_t)-1;
    for (size_t i = 0; i < n; i++) {
        const int k = y[i] != 0.0f;
        kept += (size_t)k;
        if (i + 1 < n) pairs += (size_t)(k && y[i + 1] != 0.0f);
        const int ok = k ? bits(y[i]) == bits(x[i] * scale) : bits(y[i]) == 0u;
        if (!ok && first == (size_t)-1) first = i;
        badval += (size_t)!ok;
        badmask += (size_t)(k != zt_dropout_keep(seed, i, p));
    }
    const double q = 1.0 - (double)p, frac = (double)kept / (double)n, sig = sqrt(q * (1.0 - q) / (double)n);
    name_of(nm, sizeof nm, "dropout_kept_fraction[p=%.1f,n=%zu]", (double)p, n);
    check(fabs(frac - q) <= 5.0 * sig, nm, "kept %.6f, expected %.6f +- 5 * %.2e", frac, q, sig);
    printf("# %s%s: kept %.6f (1 - p = %.1f; %.2f sigma)\n", g_tag, nm, frac, q, (frac - q) / sig);
    const double q2 = q * q, pf = (double)pairs / (double)(n - 1), sig2 = sqrt(q2 * (1.0 - q2) / (double)(n - 1));
    name_of(nm, sizeof nm, "dropout_neighbours_independent[p=%.1f]", (double)p);
    /* 5 sigma of the binomial, widened 2x for the overlap of neighbouring pairs */
    check(fabs(pf - q2) <= 10.0 * sig2, nm, "both of i, i+1 kept %.6f, expected %.6f +- 10 * %.2e", pf, q2, sig2);
    name_of(nm, sizeof nm, "dropout_values[p=%.1f]", (double)p);
    check(badval == 0, nm, "%zu of %zu elements neither in * %.9g nor +0 (first [%zu]: in %.9g, out %.9g)", badval, n,
          (double)scale, first, first < n ? (double)x[first] : 0.0, first < n ? (double)y[first] : 0.0);
    name_of(nm, sizeof nm, "dropout_mask_is_op_math[p=%.1f]", (double)p);
    check(badmask == 0, nm, "%zu of %zu mask bits differ from zt_dropout_keep", badmask, n);

    /* the same seed: the same bits; the next seed: another mask, about 2p(1-p) n positions apart */
    run_dropout(be, y2, x, n, p, seed, 0);
    size_t d = words_differ(y, y2, n);
    name_of(nm, sizeof nm, "dropout_same_seed_same_bits[p=%.1f]", (double)p);
    check(d == 0, nm, "%zu words differ", d);
    run_dropout(be, y2, x, n, p, seed + 1, 0);
    size_t md = 0;
    for (size_t i = 0; i < n; i++) md += (size_t)((y[i] != 0.0f) != (y2[i] != 0.0f));
    const double r = 2.0 * (double)p * q, fr = (double)md / (double)n, sr = sqrt(r * (1.0 - r) / (double)n);
    name_of(nm, sizeof nm, "dropout_other_seed_other_mask[p=%.1f]", (double)p);
    check(fabs(fr - r) <= 5.0 * sr, nm, "masks of seeds %llu, %llu differ at %.6f of positions, expected %.6f +- 5 * %.2e",
          (unsigned long long)seed, (unsigned long long)seed + 1, fr, r, sr);
    printf("# %s%s: masks differ at %.6f of positions (expected %.4f)\n", g_tag, nm, fr, r);

    /* in place == out of place */
    run_dropout(be, z, x, n, p, seed, 1);
    d = words_differ(y, z, n);
    name_of(nm, sizeof nm, "dropout_inplace[p=%.1f]", (double)p);
    check(d == 0, nm, "in place differs from out of place in %zu words", d);
    free(y);
    free(y2);
    free(z);
}

static void test_dropout_edges(zt_backend *be)
{
    char nm[160];
    /* p = 0: an exact copy, whatever the values */
    const size_t n = 4099;
    float *x = nonzero_normal(n), *y = zt_malloc(n * sizeof *y), *z = zt_malloc(n * sizeof *z);
    static const float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e-40f, -1e-45f, 3.4e38f, -1.0f};
    for (size_t i = 0; i < sizeof special / sizeof special[0]; i++) x[i * 97] = special[i];
    run_dropout(be, y, x, n, 0.0f, 99, 0);
    run_dropout(be, z, x, n, 0.0f, 99, 1);
    size_t d = words_differ(x, y, n), d2 = words_differ(x, z, n);
    name_of(nm, sizeof nm, "dropout_p0_exact_copy[n=%zu]", n);
    check(d == 0 && d2 == 0, nm, "%zu words differ out of place, %zu in place", d, d2);

    /* p = 1: u < 1 always, so nothing is kept */
    run_dropout(be, y, x, n, 1.0f, 5, 0);
    size_t nz = 0;
    for (size_t i = 0; i < n; i++) nz += bits(y[i]) != 0u;
    name_of(nm, sizeof nm, "dropout_p1_drops_all");
    check(nz == 0, nm, "%zu of %zu elements not +0", nz, n);

    /* known answers, computed independently (Python, from op_math.h's definition: splitmix64's finaliser
       of seed ^ i * 0xD1B54A32D192ED03, top 24 bits * 2^-24 >= p): bit i = element i of 0..63 kept. A
       changed hash would make every earlier LoRA run irreproducible. */
    static const struct { uint64_t seed; float p; uint64_t mask; } kat[] = {
        {42, 0.5f, 0x18e954dba3f2b0f7ull}, {7, 0.1f, 0xfffffdfff3ffffffull}};
    for (size_t t = 0; t < sizeof kat / sizeof kat[0]; t++) {
        float ones[64];
        for (int i = 0; i < 64; i++) ones[i] = 1.0f;
        run_dropout(be, y, ones, 64, kat[t].p, kat[t].seed, 0);
        uint64_t m = 0;
        for (int i = 0; i < 64; i++) m |= (uint64_t)(y[i] != 0.0f) << i;
        name_of(nm, sizeof nm, "dropout_known_mask[seed=%llu,p=%.1f]", (unsigned long long)kat[t].seed, (double)kat[t].p);
        check(m == kat[t].mask, nm, "mask of elements 0..63 %#018llx, expected %#018llx", (unsigned long long)m,
              (unsigned long long)kat[t].mask);
    }

    /* tiny n: the mask of element i does not depend on n */
    run_dropout(be, y, x, n, 0.5f, 1234, 0);
    for (size_t m = 0; m <= 7; m += m ? 6 : 1) { /* 0, 1, 7 */
        float a[8];
        memset(a, 0, sizeof a);
        run_dropout(be, a, x, m, 0.5f, 1234, 0);
        d = words_differ(a, y, m);
        name_of(nm, sizeof nm, "dropout_small_n[n=%zu]", m);
        check(d == 0, nm, "%zu of %zu words differ from the first %zu of a run over n = %zu", d, m, m, n);
    }
    free(x);
    free(y);
    free(z);
}

/* ------------------------------------------------------------------ dequant */

typedef struct qcase {
    zt_quant_fmt fmt;
    size_t rows, cols;
    zt_quant_layout L;
    uint8_t *blob;
} qcase;

static float *weights(size_t n)
{
    float *w = zt_malloc((n ? n : 1) * sizeof *w);
    for (size_t i = 0; i < n; i++) w[i] = (float)(0.02 * zt_rng_normal(&g_rng));
    if (n > 10) w[n / 3] = 0.9f;             /* outliers */
    if (n > 10) w[n - 1] = -1.7f;
    if (n >= 192)
        for (size_t i = 64; i < 128; i++) w[i] = 0.0f; /* an all-zero NF4 block */
    if (n >= 256)
        for (size_t i = 128; i < 192; i++) w[i] = -fabsf(w[i]) - 1e-3f; /* a negative block */
    return w;
}

static qcase qcase_make(zt_quant_fmt fmt, size_t rows, size_t cols)
{
    qcase c = {.fmt = fmt, .rows = rows, .cols = cols};
    c.L = zt_quant_plan(fmt, rows, cols);
    c.blob = zt_malloc(c.L.bytes);
    float *w = weights(c.L.n);
    char err[256];
    if (zt_quant_encode(&c.L, w, c.blob, err, sizeof err)) {
        check_fail("encode: %s", err);
        exit(1);
    }
    free(w);
    return c;
}

#define GUARD 16
/* out[0 .. n + GUARD) after dequant on be (out's tail pre-filled with a pattern the op must not touch) */
static void run_dequant(zt_backend *be, float *out, const qcase *c)
{
    const size_t n = c->L.n, ob = (n + GUARD) * sizeof(float);
    float *pat = zt_malloc(ob);
    memset(pat, 0xA5, ob);
    uint8_t *dblob = be->i->alloc(be, c->L.bytes);
    be->i->to_device(be, dblob, c->blob, c->L.bytes);
    float *dout = be->i->alloc(be, ob);
    be->i->to_device(be, dout, pat, ob);
    be->i->dequant(be, dout, dblob, (int)c->fmt, c->rows, c->cols);
    be->i->sync(be);
    be->i->to_host(be, out, dout, ob);
    be->i->free(be, dout);
    be->i->free(be, dblob);
    free(pat);
}

static void test_dequant(zt_backend *be, zt_quant_fmt fmt, size_t rows, size_t cols)
{
    qcase c = qcase_make(fmt, rows, cols);
    const size_t n = c.L.n;
    float *ref = zt_malloc((n + GUARD) * sizeof *ref), *got = zt_malloc((n + GUARD) * sizeof *got);
    zt_quant_decode(&c.L, c.blob, 0, n, ref);
    run_dequant(be, got, &c);
    size_t d = words_differ(got, ref, n), first = 0;
    while (first < n && bits(got[first]) == bits(ref[first])) first++;
    size_t guard = 0;
    for (size_t i = n; i < n + GUARD; i++) guard += bits(got[i]) != 0xA5A5A5A5u;
    char nm[160];
    name_of(nm, sizeof nm, "dequant[%s,%zux%zu]", zt_quant_fmt_name(fmt), rows, cols);
    check(d == 0 && guard == 0, nm, "%zu of %zu words differ from zt_quant_decode (first [%zu]: %.9g vs %.9g), %zu guard words written",
          d, n, first, first < n ? (double)got[first] : 0.0, first < n ? (double)ref[first] : 0.0, guard);
    printf("# %s%s: %zu of %zu words differ from zt_quant_decode\n", g_tag, nm, d, n);
    free(ref);
    free(got);
    free(c.blob);
}

/* ------------------------------------------------------------------ thread counts (and the cpu backend) */

static void thread_invariance(void)
{
    static const int nts[3] = {1, 2, 3};
    const size_t n = 100003;
    float *x = nonzero_normal(n);
    qcase qc[3] = {qcase_make(ZT_QUANT_NF4, 300, 257), qcase_make(ZT_QUANT_NF4_DQ, 300, 257),
                   qcase_make(ZT_QUANT_INT8, 300, 257)};
    const size_t qn = qc[0].L.n + GUARD;
    const int vs_cpu = strcmp(g_dev, "cpu") != 0, nb = vs_cpu ? 4 : 3;
    float *dr[4], *dq[4][3];
    for (int k = 0; k < nb; k++) {
        zt_backend *be = make_backend(k < 3 ? g_dev : "cpu", k < 3 ? nts[k] : 2);
        dr[k] = zt_malloc(n * sizeof(float));
        run_dropout(be, dr[k], x, n, 0.3f, 0xC0FFEEull, 0);
        for (int f = 0; f < 3; f++) {
            dq[k][f] = zt_malloc(qn * sizeof(float));
            run_dequant(be, dq[k][f], &qc[f]);
        }
        zt_backend_destroy(be);
    }
    char nm[160];
    for (int op = 0; op < 4; op++) {
        size_t dt = 0, dc = 0;
        for (int k = 1; k < 3; k++)
            dt += op == 0 ? words_differ(dr[0], dr[k], n) : words_differ(dq[0][op - 1], dq[k][op - 1], qn);
        if (vs_cpu) dc = op == 0 ? words_differ(dr[1], dr[3], n) : words_differ(dq[1][op - 1], dq[3][op - 1], qn);
        if (op == 0) name_of(nm, sizeof nm, "threads:dropout[p=0.3,n=%zu]", n);
        else name_of(nm, sizeof nm, "threads:dequant[%s,300x257]", zt_quant_fmt_name((zt_quant_fmt)(op - 1)));
        check(dt == 0 && dc == 0, nm, "%zu words differ between 1, 2 and 3 threads, %zu from the cpu backend", dt, dc);
    }
    for (int k = 0; k < nb; k++) {
        free(dr[k]);
        for (int f = 0; f < 3; f++) free(dq[k][f]);
    }
    for (int f = 0; f < 3; f++) free(qc[f].blob);
    free(x);
}

/* ------------------------------------------------------------------ off the cpu: the cpu backend's bits */

static void vs_cpu_bits(zt_backend *be)
{
    if (strcmp(g_dev, "cpu") == 0) return;
    zt_backend *cpu = make_backend("cpu", 2);
    const size_t n = 1000000;
    float *x = nonzero_normal(n), *a = zt_malloc(n * sizeof *a), *b = zt_malloc(n * sizeof *b);
    char nm[160];
    for (int k = 0; k < 2; k++) {
        const float p = k ? 0.5f : 0.1f;
        run_dropout(cpu, a, x, n, p, 42, 0);
        run_dropout(be, b, x, n, p, 42, 0);
        size_t d = words_differ(a, b, n);
        name_of(nm, sizeof nm, "dropout_eq_cpu[p=%.1f,n=%zu]", (double)p, n);
        check(d == 0, nm, "%zu words differ from the cpu backend", d);
    }
    free(x);
    free(a);
    free(b);
    zt_backend_destroy(cpu);
}

static void run_device(const char *dev)
{
    g_dev = dev;
    if (strcmp(dev, "cpu") != 0) snprintf(g_tag, sizeof g_tag, "%s:", dev);
    else g_tag[0] = 0;
    zt_rng_seed(&g_rng, 20261124);
    const double t0 = zt_now();
    const int f0 = g_fail;
    zt_backend *be = make_backend(dev, 2);
    char desc[256];
    zt_backend_describe(be, desc, sizeof desc);
    printf("# backend %s\n", desc);

    const size_t n = 1000000;
    float *x = nonzero_normal(n);
    test_dropout_stats(be, x, n, 0.1f);
    test_dropout_stats(be, x, n, 0.5f);
    free(x);
    test_dropout_edges(be);
    vs_cpu_bits(be);

    static const size_t shapes[][2] = {{1, 1}, {3, 70}, {64, 64}, {5, 1000}, {300, 257}};
    for (int f = 0; f < 3; f++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            test_dequant(be, (zt_quant_fmt)f, shapes[s][0], shapes[s][1]);
    zt_backend_destroy(be);
    thread_invariance();
    printf("# %s: %d failed, %.2f s\n", dev, g_fail - f0, zt_now() - t0);
    fflush(stdout);
}

int main(void)
{
    const char *d = getenv("ZT_TEST_DEVICE");
    if (d && *d) {
        run_device(d);
    } else {
        static const char *const devs[] = {"cpu", "devsim", "cudasim"};
        for (size_t i = 0; i < sizeof devs / sizeof devs[0]; i++) run_device(devs[i]);
    }
    printf("# test_ops_lora: %d failed\n", g_fail);
    return g_fail ? 1 : 0;
}
