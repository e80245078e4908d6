/* selftest_case.c — building and checking the selftest's op cases (selftest_case.h): the seeded inputs, uploads,
 * and one case run on cpu and twice on the device, rounded to the precision, compared per output. */
#include "core/diag/selftest_case.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "iface/op_math.h"
#include "util/util.h"

/* ------------------------------------------------------------------ building and checking cases */

static zt_rng g_rng;
static int g_prec; /* the precision the current case is checked in (ZT_PREC_*) */

void st_seed(uint64_t seed) { zt_rng_seed(&g_rng, seed); }
uint64_t st_next(void) { return zt_rng_next(&g_rng); }

float *st_up(zt_backend *be, const float *h, size_t n) {
    float *d = be->i->alloc(be, n * sizeof(float));
    if (h) be->i->to_device(be, d, h, n * sizeof(float));
    return d;
}
void st_down(zt_backend *be, float *h, const float *d, size_t n) { be->i->to_host(be, h, d, n * sizeof(float)); }

float *st_rnd(size_t n, float scale) {
    float *x = zt_malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = (float)(zt_rng_normal(&g_rng) * scale);
    return x;
}
float *st_ints(size_t n, int hi) {
    int32_t *x = zt_malloc(n * sizeof(int32_t));
    for (size_t i = 0; i < n; i++) x[i] = (int32_t)(zt_rng_next(&g_rng) % (uint64_t)hi);
    return (float *)x;
}
void st_add_in(st_case *k, float *x, size_t n) { k->in[k->n_in] = x; k->in_n[k->n_in++] = n; }
void st_add_in_int(st_case *k, float *x, size_t n) {
    k->int_in |= 1u << k->n_in;
    st_add_in(k, x, n);
}
void st_add_out(st_case *k, const char *name, size_t n) { k->out_name[k->n_out] = name; k->out_n[k->n_out++] = n; }

typedef struct st_stats { double nmse, rel; } st_stats;

static st_stats compare(const float *d, const float *c, size_t n) {
    double num = 0, den = 0, dmax = 0, cmax = 0;
    for (size_t i = 0; i < n; i++) {
        double e = (double)d[i] - (double)c[i];
        num += e * e;
        den += (double)c[i] * c[i];
        if (fabs(e) > dmax || e != e) dmax = e != e ? INFINITY : fabs(e);
        if (fabs((double)c[i]) > cmax) cmax = fabs((double)c[i]);
    }
    st_stats s = {den > 0 ? num / den : num, cmax > 0 ? dmax / cmax : dmax};
    if (num != num) s.nmse = INFINITY;
    return s;
}


int st_prec(void) { return g_prec; }

/* the outputs of one run of the case on be, rounded by be to the precision (its round_to) */
static void run_rounded(zt_backend *be, st_case *k, st_fn fn, float **outs) {
    fn(be, k, outs);
    if (g_prec == ZT_PREC_FP32 || k->fp32_out) return;
    for (int o = 0; o < k->n_out; o++) {
        /* LayerNorm statistics and the losses stay fp32 in the model too */
        const char *nm = k->out_name[o];
        if (!strcmp(nm, "mean") || !strcmp(nm, "rstd") || !strcmp(nm, "losses")) continue;
        float *d = st_up(be, outs[o], k->out_n[o]);
        be->i->round_to(be, d, k->out_n[o], g_prec);
        st_down(be, outs[o], d, k->out_n[o]);
        be->i->free(be, d);
    }
}

/* runs one case on cpu, D, D; prints one row per output; returns failures */
int st_check_case(st_case *k, st_fn fn, zt_backend *cpu, zt_backend *dev, int prec, FILE *out) {
    g_prec = prec;
    for (int r = 0; r < 3; r++)
        for (int o = 0; o < k->n_out; o++) k->out[r][o] = zt_calloc(k->out_n[o], sizeof(float));
    if (g_prec != ZT_PREC_FP32) /* what a buffer of the precision stores */
        for (int i = 0; i < k->n_in; i++)
            if (!(k->int_in >> i & 1))
                for (size_t j = 0; j < k->in_n[i]; j++)
                    k->in[i][j] = g_prec == ZT_PREC_BF16 ? zt_round_bf16(k->in[i][j]) : zt_round_fp16(k->in[i][j]);
    run_rounded(cpu, k, fn, k->out[0]);
    run_rounded(dev, k, fn, k->out[1]);
    run_rounded(dev, k, fn, k->out[2]);
    /* limits: the op's fp32 ones, or one unit of the precision (file comment) */
    const float unit = (k->fp32_out || g_prec == ZT_PREC_FP32 ? 0.0f : g_prec == ZT_PREC_BF16 ? 0x1p-8f : 0x1p-11f) *
                       (k->units16 > 0.0f ? k->units16 : 1.0f);
    const float nmse_max = k->nmse_max > unit * unit ? k->nmse_max : unit * unit;
    const float rel_max = k->rel_max > unit ? k->rel_max : unit;
    int fails = 0;
    for (int o = 0; o < k->n_out; o++) {
        st_stats s = compare(k->out[1][o], k->out[0][o], k->out_n[o]);
        int det = memcmp(k->out[1][o], k->out[2][o], k->out_n[o] * sizeof(float)) == 0;
        int ok = s.nmse <= nmse_max && s.rel <= rel_max && det;
        fails += !ok;
        if (out)
            fprintf(out, "%-26s %-8s %9zu  %9.2e %9.2e  %9.2e %9.2e  %-4s  %s\n", k->name, k->out_name[o], k->out_n[o],
                    s.nmse, (double)nmse_max, s.rel, (double)rel_max, det ? "yes" : "NO", ok ? "PASS" : "FAIL");
    }
    for (int r = 0; r < 3; r++)
        for (int o = 0; o < k->n_out; o++) free(k->out[r][o]);
    for (int i = 0; i < k->n_in; i++) free(k->in[i]);
    return fails;
}

