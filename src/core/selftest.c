/* selftest.c — backend self-test against the cpu backend (see selftest.h).
 *
 * Each op check is one function that, given a backend, uploads the case's host inputs, runs the op
 * and downloads every output; it runs on cpu (the reference), on D, and on D again (determinism).
 * Thresholds are per op and precision and sit at about 10x the errors measured under the host execution
 * harness (README "GPU status" has the table); a GPU's cuBLASLt and fused multiply-adds change the
 * rounding, not the size, of these errors.
 *
 * Precisions: in bf16/fp16 each op sees inputs rounded to the precision (what its buffers store) and
 * each backend rounds its own outputs with its round_to, as the model does (core/model.c); the fp32
 * master-weight ops (adamw, the norm's chunk sums) keep fp32 outputs. Both backends round nearly equal
 * fp32 values, so an output differs by at most one unit of the precision where the fp32 values straddle
 * a rounding boundary: the limits are one unit (bf16 2^-8, fp16 2^-11) of the largest output. */
#include "core/selftest.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend_factory.h"
#include "core/model.h"
#include "core/model_load.h"
#include "core/optim.h"
#include "core/quant.h"
#include "core/step.h"
#include "core/zero.h"
#include "iface/op_math.h"
#include "util/util.h"

/* ------------------------------------------------------------------ cases */

#define MAXIO 4

typedef struct st_case {
    const char *name;
    float nmse_max, rel_max;             /* thresholds (fp32) */
    int fp32_out;                        /* outputs stay fp32 in every precision (master-weight ops) */
    unsigned int_in;                     /* bit i: input i holds int32 (tokens): never rounded */
    int n_in;
    float *in[6];                        /* host inputs (float or int32 bit patterns) */
    size_t in_n[6];
    int n_out;
    const char *out_name[MAXIO];
    size_t out_n[MAXIO];
    float *out[3][MAXIO];                /* [run][output]: run 0 = cpu, 1 = D, 2 = D again */
    int B, T, C, NH, N, OC, M, K, V, Vp, flag;
} st_case;

static float *up(zt_backend *be, const float *h, size_t n) {
    float *d = be->i->alloc(be, n * sizeof(float));
    if (h) be->i->to_device(be, d, h, n * sizeof(float));
    return d;
}
static void down(zt_backend *be, float *h, const float *d, size_t n) { be->i->to_host(be, h, d, n * sizeof(float)); }

typedef void (*st_fn)(zt_backend *be, st_case *k, float **out);

/* inputs: in[0..] as listed per op; outputs written into out[] (host) */
static void op_matmul(zt_backend *be, st_case *k, float **out) {
    float *a = up(be, k->in[0], k->in_n[0]), *b = up(be, k->in[1], k->in_n[1]), *c = up(be, k->in[2], k->in_n[2]);
    be->i->matmul(be, c, a, b, k->M, k->N, k->K, k->flag & 1, (k->flag >> 1) & 1, 0.75f, 0.5f);
    down(be, out[0], c, k->out_n[0]);
    be->i->free(be, a); be->i->free(be, b); be->i->free(be, c);
}
static void op_linear_fwd(zt_backend *be, st_case *k, float **out) {
    float *inp = up(be, k->in[0], k->in_n[0]), *w = up(be, k->in[1], k->in_n[1]), *bias = up(be, k->in[2], k->in_n[2]);
    float *o = up(be, NULL, k->out_n[0]);
    be->i->linear_fwd(be, o, inp, w, bias, k->N, k->C, k->OC);
    down(be, out[0], o, k->out_n[0]);
    be->i->free(be, inp); be->i->free(be, w); be->i->free(be, bias); be->i->free(be, o);
}
static void op_linear_bwd(zt_backend *be, st_case *k, float **out) {
    float *dout = up(be, k->in[0], k->in_n[0]), *inp = up(be, k->in[1], k->in_n[1]), *w = up(be, k->in[2], k->in_n[2]);
    float *dinp = up(be, k->in[3], k->in_n[3]); /* accumulated into */
    float *dw = up(be, NULL, k->out_n[1]), *db = up(be, NULL, k->out_n[2]);
    be->i->linear_bwd(be, dinp, dw, db, dout, inp, w, k->N, k->C, k->OC, 1);
    down(be, out[0], dinp, k->out_n[0]); down(be, out[1], dw, k->out_n[1]); down(be, out[2], db, k->out_n[2]);
    be->i->free(be, dout); be->i->free(be, inp); be->i->free(be, w); be->i->free(be, dinp); be->i->free(be, dw);
    be->i->free(be, db);
}
static void op_layernorm_fwd(zt_backend *be, st_case *k, float **out) {
    float *inp = up(be, k->in[0], k->in_n[0]), *w = up(be, k->in[1], k->in_n[1]), *b = up(be, k->in[2], k->in_n[2]);
    float *o = up(be, NULL, k->out_n[0]), *mean = up(be, NULL, k->out_n[1]), *rstd = up(be, NULL, k->out_n[2]);
    be->i->layernorm_fwd(be, o, mean, rstd, inp, w, b, k->N, k->C);
    down(be, out[0], o, k->out_n[0]); down(be, out[1], mean, k->out_n[1]); down(be, out[2], rstd, k->out_n[2]);
    be->i->free(be, inp); be->i->free(be, w); be->i->free(be, b); be->i->free(be, o); be->i->free(be, mean);
    be->i->free(be, rstd);
}
static void op_layernorm_bwd(zt_backend *be, st_case *k, float **out) {
    /* in: dout, inp, w, dinp(acc), then mean/rstd computed by this backend's own forward */
    float *dout = up(be, k->in[0], k->in_n[0]), *inp = up(be, k->in[1], k->in_n[1]), *w = up(be, k->in[2], k->in_n[2]);
    float *dinp = up(be, k->in[3], k->in_n[3]), *b = up(be, NULL, (size_t)k->C);
    float *o = up(be, NULL, k->in_n[1]), *mean = up(be, NULL, (size_t)k->N), *rstd = up(be, NULL, (size_t)k->N);
    float *dw = up(be, NULL, (size_t)k->C), *db = up(be, NULL, (size_t)k->C);
    be->i->layernorm_fwd(be, o, mean, rstd, inp, w, b, k->N, k->C);
    be->i->layernorm_bwd(be, dinp, dw, db, dout, inp, w, mean, rstd, k->N, k->C);
    down(be, out[0], dinp, k->out_n[0]); down(be, out[1], dw, k->out_n[1]); down(be, out[2], db, k->out_n[2]);
    float *bufs[] = {dout, inp, w, dinp, b, o, mean, rstd, dw, db};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) be->i->free(be, bufs[i]);
}
static void op_attention_fwd(zt_backend *be, st_case *k, float **out) {
    float *qkv = up(be, k->in[0], k->in_n[0]), *o = up(be, NULL, k->out_n[0]), *att = up(be, NULL, k->out_n[1]);
    be->i->attention_fwd(be, o, att, qkv, k->B, k->T, k->C, k->NH);
    down(be, out[0], o, k->out_n[0]); down(be, out[1], att, k->out_n[1]);
    be->i->free(be, qkv); be->i->free(be, o); be->i->free(be, att);
}
static void op_attention_bwd(zt_backend *be, st_case *k, float **out) {
    /* in: qkv, dout; att from this backend's own forward */
    float *qkv = up(be, k->in[0], k->in_n[0]), *dout = up(be, k->in[1], k->in_n[1]);
    size_t natt = (size_t)k->B * k->NH * k->T * k->T;
    float *o = up(be, NULL, k->in_n[1]), *att = up(be, NULL, natt), *datt = up(be, NULL, natt);
    float *dqkv = up(be, NULL, k->out_n[0]);
    be->i->attention_fwd(be, o, att, qkv, k->B, k->T, k->C, k->NH);
    be->i->attention_bwd(be, dqkv, datt, dout, qkv, att, k->B, k->T, k->C, k->NH);
    down(be, out[0], dqkv, k->out_n[0]);
    float *bufs[] = {qkv, dout, o, att, datt, dqkv};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) be->i->free(be, bufs[i]);
}
/* the fused attention (iface/backend.h attention_fused_*) where the backend has it, else the materialized one:
   the device's fused kernels against the cpu backend's attention */
static void op_attention_fused_fwd(zt_backend *be, st_case *k, float **out) {
    float *qkv = up(be, k->in[0], k->in_n[0]), *o = up(be, NULL, k->out_n[0]);
    const size_t natt = be->i->attention_fused_fwd ? (size_t)k->B * k->NH * k->T * 2 : (size_t)k->B * k->NH * k->T * k->T;
    float *att = up(be, NULL, natt);
    if (be->i->attention_fused_fwd) be->i->attention_fused_fwd(be, o, att, qkv, k->B, k->T, k->C, k->NH);
    else be->i->attention_fwd(be, o, att, qkv, k->B, k->T, k->C, k->NH);
    down(be, out[0], o, k->out_n[0]);
    be->i->free(be, qkv); be->i->free(be, o); be->i->free(be, att);
}
static void op_attention_fused_bwd(zt_backend *be, st_case *k, float **out) {
    float *qkv = up(be, k->in[0], k->in_n[0]), *dout = up(be, k->in[1], k->in_n[1]);
    const int fused = be->i->attention_fused_bwd != NULL;
    const size_t natt = fused ? (size_t)k->B * k->NH * k->T * 2 : (size_t)k->B * k->NH * k->T * k->T;
    const size_t nd = fused ? zt_attention_fused_scratch(k->B, k->T, k->C, k->NH) : natt;
    float *o = up(be, NULL, k->in_n[1]), *att = up(be, NULL, natt), *datt = up(be, NULL, nd);
    float *dqkv = up(be, NULL, k->out_n[0]);
    if (fused) {
        be->i->attention_fused_fwd(be, o, att, qkv, k->B, k->T, k->C, k->NH);
        be->i->attention_fused_bwd(be, dqkv, datt, dout, qkv, o, att, k->B, k->T, k->C, k->NH);
    } else {
        be->i->attention_fwd(be, o, att, qkv, k->B, k->T, k->C, k->NH);
        be->i->attention_bwd(be, dqkv, datt, dout, qkv, att, k->B, k->T, k->C, k->NH);
    }
    down(be, out[0], dqkv, k->out_n[0]);
    float *bufs[] = {qkv, dout, o, att, datt, dqkv};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) be->i->free(be, bufs[i]);
}
static void op_attention_decode(zt_backend *be, st_case *k, float **out) {
    /* in: qkv rows (T, 3C): run positions 0..T-1 one at a time; out: every position's output */
    const size_t C = (size_t)k->C;
    float *kc = up(be, NULL, (size_t)k->T * C), *vc = up(be, NULL, (size_t)k->T * C), *q = up(be, NULL, 3 * C);
    float *o = up(be, NULL, C);
    for (int t = 0; t < k->T; t++) {
        be->i->to_device(be, q, k->in[0] + (size_t)t * 3 * C, 3 * C * sizeof(float));
        be->i->attention_decode(be, o, kc, vc, q, t, k->T, k->C, k->NH);
        down(be, out[0] + (size_t)t * C, o, C);
    }
    be->i->free(be, kc); be->i->free(be, vc); be->i->free(be, q); be->i->free(be, o);
}
static void op_gemv(zt_backend *be, st_case *k, float **out) {
    float *x = up(be, k->in[0], k->in_n[0]), *w = up(be, k->in[1], k->in_n[1]), *bias = up(be, k->in[2], k->in_n[2]);
    float *y = up(be, NULL, k->out_n[0]);
    be->i->gemv(be, y, x, w, k->flag ? NULL : bias, k->C, k->OC, k->flag);
    down(be, out[0], y, k->out_n[0]);
    be->i->free(be, x); be->i->free(be, w); be->i->free(be, bias); be->i->free(be, y);
}
static void op_gelu(zt_backend *be, st_case *k, float **out) {
    float *x = up(be, k->in[0], k->in_n[0]), *d = up(be, k->in[1], k->in_n[1]), *y = up(be, NULL, k->in_n[0]);
    float *dx = up(be, NULL, k->in_n[0]);
    be->i->gelu_fwd(be, y, x, k->in_n[0]);
    be->i->gelu_bwd(be, dx, x, d, k->in_n[0]);
    down(be, out[0], y, k->out_n[0]); down(be, out[1], dx, k->out_n[1]);
    be->i->free(be, x); be->i->free(be, d); be->i->free(be, y); be->i->free(be, dx);
}
static void op_add_acc(zt_backend *be, st_case *k, float **out) {
    float *a = up(be, k->in[0], k->in_n[0]), *b = up(be, k->in[1], k->in_n[1]), *o = up(be, NULL, k->in_n[0]);
    be->i->add(be, o, a, b, k->in_n[0]);
    be->i->accumulate(be, a, b, k->in_n[0]);
    down(be, out[0], o, k->out_n[0]); down(be, out[1], a, k->out_n[1]);
    be->i->free(be, a); be->i->free(be, b); be->i->free(be, o);
}
static void op_embed(zt_backend *be, st_case *k, float **out) {
    /* in: tokens (int32 bits), wte, wpe, dout, dwte(acc) */
    int32_t *tok = (int32_t *)up(be, k->in[0], k->in_n[0]);
    float *wte = up(be, k->in[1], k->in_n[1]), *wpe = up(be, k->in[2], k->in_n[2]), *dout = up(be, k->in[3], k->in_n[3]);
    float *dwte = up(be, k->in[4], k->in_n[4]), *dwpe = up(be, NULL, k->in_n[2]), *o = up(be, NULL, k->in_n[3]);
    be->i->embed_fwd(be, o, tok, wte, wpe, k->B, k->T, k->C);
    be->i->embed_bwd(be, dwte, dwpe, dout, tok, k->B, k->T, k->C);
    down(be, out[0], o, k->out_n[0]); down(be, out[1], dwte, k->out_n[1]); down(be, out[2], dwpe, k->out_n[2]);
    float *bufs[] = {(float *)tok, wte, wpe, dout, dwte, dwpe, o};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) be->i->free(be, bufs[i]);
}
static void op_softmax_xent(zt_backend *be, st_case *k, float **out) {
    /* in: logits (N, Vp), targets; out: losses, dlogits */
    float *lg = up(be, k->in[0], k->in_n[0]), *losses = up(be, NULL, (size_t)k->N);
    int32_t *tg = (int32_t *)up(be, k->in[1], k->in_n[1]);
    be->i->softmax_xent(be, losses, lg, tg, k->N, k->V, k->Vp, 1.0f / (float)k->N);
    down(be, out[0], losses, k->out_n[0]); down(be, out[1], lg, k->out_n[1]);
    be->i->free(be, lg); be->i->free(be, losses); be->i->free(be, (float *)tg);
}
static void op_adamw(zt_backend *be, st_case *k, float **out) {
    float *p = up(be, k->in[0], k->in_n[0]), *g = up(be, k->in[1], k->in_n[1]), *m = up(be, k->in[2], k->in_n[2]);
    float *v = up(be, k->in[3], k->in_n[3]);
    be->i->adamw(be, p, g, m, v, k->in_n[0], 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.19f, 0.0975f, 0.5f);
    down(be, out[0], p, k->out_n[0]); down(be, out[1], m, k->out_n[1]); down(be, out[2], v, k->out_n[2]);
    be->i->free(be, p); be->i->free(be, g); be->i->free(be, m); be->i->free(be, v);
}
static void op_sumsq(zt_backend *be, st_case *k, float **out) {
    const size_t chunk = 4096, nc = (k->in_n[0] + chunk - 1) / chunk;
    float *x = up(be, k->in[0], k->in_n[0]);
    double *o = be->i->alloc(be, nc * sizeof(double));
    double *h = zt_malloc(nc * sizeof(double));
    be->i->sumsq_chunks(be, o, x, k->in_n[0], chunk);
    be->i->to_host(be, h, o, nc * sizeof(double));
    for (size_t c = 0; c < nc; c++) out[0][c] = (float)h[c];
    free(h);
    be->i->free(be, x); be->i->free(be, o);
}

static void op_dropout(zt_backend *be, st_case *k, float **out) {
    float *x = up(be, k->in[0], k->in_n[0]), *y = up(be, NULL, k->in_n[0]);
    be->i->dropout(be, y, x, k->in_n[0], 0.25f, 0x5eedull);
    be->i->dropout(be, x, x, k->in_n[0], 0.5f, 77); /* in place */
    down(be, out[0], y, k->out_n[0]); down(be, out[1], x, k->out_n[1]);
    be->i->free(be, x); be->i->free(be, y);
}
static void op_dequant(zt_backend *be, st_case *k, float **out) {
    /* in: the encoded blob (as 32-bit words); flag = zt_quant_fmt, M x N the matrix */
    float *blob = up(be, k->in[0], k->in_n[0]), *w = up(be, NULL, (size_t)k->M * k->N);
    be->i->dequant(be, w, blob, k->flag, (size_t)k->M, (size_t)k->N);
    down(be, out[0], w, k->out_n[0]);
    be->i->free(be, blob); be->i->free(be, w);
}

/* ------------------------------------------------------------------ building and checking cases */

static zt_rng g_rng;

static float *rnd(size_t n, float scale) {
    float *x = zt_malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = (float)(zt_rng_normal(&g_rng) * scale);
    return x;
}
static float *ints(size_t n, int hi) {
    int32_t *x = zt_malloc(n * sizeof(int32_t));
    for (size_t i = 0; i < n; i++) x[i] = (int32_t)(zt_rng_next(&g_rng) % (uint64_t)hi);
    return (float *)x;
}
static void add_in(st_case *k, float *x, size_t n) { k->in[k->n_in] = x; k->in_n[k->n_in++] = n; }
static void add_in_int(st_case *k, float *x, size_t n) {
    k->int_in |= 1u << k->n_in;
    add_in(k, x, n);
}
static void add_out(st_case *k, const char *name, size_t n) { k->out_name[k->n_out] = name; k->out_n[k->n_out++] = n; }

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

static int g_prec; /* the precision run_ops checks (ZT_PREC_*) */

/* the outputs of one run of the case on be, rounded by be to the precision (its round_to) */
static void run_rounded(zt_backend *be, st_case *k, st_fn fn, float **outs) {
    fn(be, k, outs);
    if (g_prec == ZT_PREC_FP32 || k->fp32_out) return;
    for (int o = 0; o < k->n_out; o++) {
        /* LayerNorm statistics and the losses stay fp32 in the model too */
        const char *nm = k->out_name[o];
        if (!strcmp(nm, "mean") || !strcmp(nm, "rstd") || !strcmp(nm, "losses")) continue;
        float *d = up(be, outs[o], k->out_n[o]);
        be->i->round_to(be, d, k->out_n[o], g_prec);
        down(be, outs[o], d, k->out_n[o]);
        be->i->free(be, d);
    }
}

/* runs one case on cpu, D, D; prints one row per output; returns failures */
static int check_case(st_case *k, st_fn fn, zt_backend *cpu, zt_backend *dev, FILE *out) {
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
    const float unit = k->fp32_out || g_prec == ZT_PREC_FP32 ? 0.0f : g_prec == ZT_PREC_BF16 ? 0x1p-8f : 0x1p-11f;
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

static const char *prec_name(int p) { return p == ZT_PREC_BF16 ? "bf16" : p == ZT_PREC_FP16 ? "fp16" : "fp32"; }

static int run_ops(zt_backend *cpu, zt_backend *dev, int prec, FILE *out) {
    if (dev->i->set_precision) dev->i->set_precision(dev, prec); /* bf16/fp16: 2-byte GEMM operands */
    zt_rng_seed(&g_rng, 1234);
    g_prec = prec;
    /* training-like shapes with awkward sizes: C not a multiple of 32, T not of the block */
    const int B = 2, T = 19, C = 72, NH = 3, N = B * T, V = 251, Vp = 256;
    int fails = 0;
    if (out)
        fprintf(out, "%-26s %-8s %9s  %9s %9s  %9s %9s  %-4s  %s\n%-26s %-8s %9s  %9s %9s  %9s %9s  %-4s\n", "op", "output",
                "elements", "nmse", "limit", "max rel", "limit", "det", "", "", "", "", "", prec_name(prec), "",
                prec_name(prec), "");
    /* matmul: every transpose combination */
    for (int f = 0; f < 4; f++) {
        st_case k = {0};
        char *nm = zt_malloc(32);
        snprintf(nm, 32, "matmul[%c%c]", f & 1 ? 'T' : 'N', f & 2 ? 'T' : 'N');
        k.name = nm; k.nmse_max = 1e-12f; k.rel_max = 2e-6f; k.flag = f; k.M = 37; k.N = 45; k.K = 70;
        add_in(&k, rnd((size_t)k.M * k.K, 1), (size_t)k.M * k.K);
        add_in(&k, rnd((size_t)k.K * k.N, 1), (size_t)k.K * k.N);
        add_in(&k, rnd((size_t)k.M * k.N, 1), (size_t)k.M * k.N);
        add_out(&k, "c", (size_t)k.M * k.N);
        fails += check_case(&k, op_matmul, cpu, dev, out);
        free(nm);
    }
    {
        st_case k = {.name = "linear_fwd", .nmse_max = 1e-12f, .rel_max = 2e-6f};
        k.N = N; k.C = C; k.OC = 3 * C;
        add_in(&k, rnd((size_t)N * C, 1), (size_t)N * C);
        add_in(&k, rnd((size_t)C * 3 * C, 0.1f), (size_t)C * 3 * C);
        add_in(&k, rnd((size_t)3 * C, 0.1f), (size_t)3 * C);
        add_out(&k, "out", (size_t)N * 3 * C);
        fails += check_case(&k, op_linear_fwd, cpu, dev, out);
    }
    {
        st_case k = {.name = "linear_bwd", .nmse_max = 1e-12f, .rel_max = 2e-6f};
        k.N = N; k.C = 4 * C; k.OC = C;
        add_in(&k, rnd((size_t)N * C, 1), (size_t)N * C);
        add_in(&k, rnd((size_t)N * 4 * C, 1), (size_t)N * 4 * C);
        add_in(&k, rnd((size_t)4 * C * C, 0.1f), (size_t)4 * C * C);
        add_in(&k, rnd((size_t)N * 4 * C, 1), (size_t)N * 4 * C);
        add_out(&k, "dinp", (size_t)N * 4 * C);
        add_out(&k, "dw", (size_t)4 * C * C);
        add_out(&k, "dbias", (size_t)C);
        fails += check_case(&k, op_linear_bwd, cpu, dev, out);
    }
    {
        st_case k = {.name = "layernorm_fwd", .nmse_max = 1e-12f, .rel_max = 2e-6f};
        k.N = N; k.C = C;
        add_in(&k, rnd((size_t)N * C, 2), (size_t)N * C);
        add_in(&k, rnd((size_t)C, 1), (size_t)C);
        add_in(&k, rnd((size_t)C, 1), (size_t)C);
        add_out(&k, "out", (size_t)N * C);
        add_out(&k, "mean", (size_t)N);
        add_out(&k, "rstd", (size_t)N);
        fails += check_case(&k, op_layernorm_fwd, cpu, dev, out);
    }
    {
        st_case k = {.name = "layernorm_bwd", .nmse_max = 1e-12f, .rel_max = 2e-6f};
        k.N = N; k.C = C;
        add_in(&k, rnd((size_t)N * C, 1), (size_t)N * C);
        add_in(&k, rnd((size_t)N * C, 2), (size_t)N * C);
        add_in(&k, rnd((size_t)C, 1), (size_t)C);
        add_in(&k, rnd((size_t)N * C, 1), (size_t)N * C);
        add_out(&k, "dinp", (size_t)N * C);
        add_out(&k, "dw", (size_t)C);
        add_out(&k, "db", (size_t)C);
        fails += check_case(&k, op_layernorm_bwd, cpu, dev, out);
    }
    {
        st_case k = {.name = "attention_fwd", .nmse_max = 1e-12f, .rel_max = 2e-6f};
        k.B = B; k.T = T; k.C = C; k.NH = NH;
        add_in(&k, rnd((size_t)N * 3 * C, 1), (size_t)N * 3 * C);
        add_out(&k, "out", (size_t)N * C);
        add_out(&k, "att", (size_t)B * NH * T * T);
        fails += check_case(&k, op_attention_fwd, cpu, dev, out);
    }
    {
        st_case k = {.name = "attention_bwd", .nmse_max = 1e-12f, .rel_max = 2e-6f};
        k.B = B; k.T = T; k.C = C; k.NH = NH;
        add_in(&k, rnd((size_t)N * 3 * C, 1), (size_t)N * 3 * C);
        add_in(&k, rnd((size_t)N * C, 1), (size_t)N * C);
        add_out(&k, "dqkv", (size_t)N * 3 * C);
        fails += check_case(&k, op_attention_bwd, cpu, dev, out);
    }
    /* the fused attention: head sizes 64 and 32, several query / key tiles (32 and 64) and a partial last one */
    for (int hc = 0; hc < 2 && dev->i->attention_fused_fwd; hc++) {
        const int fB = 2, fT = hc ? 77 : 150, fNH = hc ? 3 : 2, fC = hc ? 96 : 128, fN = fB * fT;
        st_case k = {.name = hc ? "attention_fused_fwd[hs32]" : "attention_fused_fwd", .nmse_max = 1e-12f, .rel_max = 2e-6f};
        k.B = fB; k.T = fT; k.C = fC; k.NH = fNH;
        add_in(&k, rnd((size_t)fN * 3 * fC, 1), (size_t)fN * 3 * fC);
        add_out(&k, "out", (size_t)fN * fC);
        fails += check_case(&k, op_attention_fused_fwd, cpu, dev, out);
        st_case kb = {.name = hc ? "attention_fused_bwd[hs32]" : "attention_fused_bwd", .nmse_max = 1e-12f, .rel_max = 2e-6f};
        kb.B = fB; kb.T = fT; kb.C = fC; kb.NH = fNH;
        add_in(&kb, rnd((size_t)fN * 3 * fC, 1), (size_t)fN * 3 * fC);
        add_in(&kb, rnd((size_t)fN * fC, 1), (size_t)fN * fC);
        add_out(&kb, "dqkv", (size_t)fN * 3 * fC);
        fails += check_case(&kb, op_attention_fused_bwd, cpu, dev, out);
    }
    if (cpu->i->attention_decode && dev->i->attention_decode) {
        st_case k = {.name = "attention_decode", .nmse_max = 1e-12f, .rel_max = 2e-6f};
        k.T = T; k.C = C; k.NH = NH;
        add_in(&k, rnd((size_t)T * 3 * C, 1), (size_t)T * 3 * C);
        add_out(&k, "out", (size_t)T * C);
        fails += check_case(&k, op_attention_decode, cpu, dev, out);
    } else if (out) {
        fprintf(out, "%-26s not supported by this backend (optional)\n", "attention_decode");
    }
    for (int wt = 0; wt < 2 && cpu->i->gemv && dev->i->gemv; wt++) {
        st_case k = {.name = wt ? "gemv[w_t]" : "gemv", .nmse_max = 1e-12f, .rel_max = 2e-6f};
        k.C = C; k.OC = wt ? Vp : 3 * C; k.flag = wt;
        add_in(&k, rnd((size_t)C, 1), (size_t)C);
        add_in(&k, rnd((size_t)C * k.OC, 0.1f), (size_t)C * k.OC);
        add_in(&k, rnd((size_t)k.OC, 0.1f), (size_t)k.OC);
        add_out(&k, "y", (size_t)k.OC);
        fails += check_case(&k, op_gemv, cpu, dev, out);
    }
    {
        st_case k = {.name = "gelu", .nmse_max = 1e-13f, .rel_max = 1e-6f};
        const size_t n = (size_t)N * 4 * C + 7;
        add_in(&k, rnd(n, 2), n);
        add_in(&k, rnd(n, 1), n);
        add_out(&k, "fwd", n);
        add_out(&k, "bwd", n);
        fails += check_case(&k, op_gelu, cpu, dev, out);
    }
    {
        st_case k = {.name = "add, accumulate", .nmse_max = 0, .rel_max = 0};
        const size_t n = (size_t)N * C + 5;
        add_in(&k, rnd(n, 1), n);
        add_in(&k, rnd(n, 1), n);
        add_out(&k, "add", n);
        add_out(&k, "acc", n);
        fails += check_case(&k, op_add_acc, cpu, dev, out);
    }
    {
        st_case k = {.name = "embed_fwd, embed_bwd", .nmse_max = 1e-13f, .rel_max = 1e-6f};
        k.B = B; k.T = T; k.C = C;
        add_in_int(&k, ints((size_t)N, 13), (size_t)N); /* few distinct tokens: repeats in the scatter */
        add_in(&k, rnd((size_t)Vp * C, 1), (size_t)Vp * C);
        add_in(&k, rnd((size_t)T * C, 1), (size_t)T * C);
        add_in(&k, rnd((size_t)N * C, 1), (size_t)N * C);
        add_in(&k, rnd((size_t)Vp * C, 1), (size_t)Vp * C);
        add_out(&k, "out", (size_t)N * C);
        add_out(&k, "dwte", (size_t)Vp * C);
        add_out(&k, "dwpe", (size_t)T * C);
        fails += check_case(&k, op_embed, cpu, dev, out);
    }
    {
        st_case k = {.name = "softmax_xent", .nmse_max = 1e-12f, .rel_max = 2e-6f};
        k.N = N; k.V = V; k.Vp = Vp;
        add_in(&k, rnd((size_t)N * Vp, 3), (size_t)N * Vp);
        add_in_int(&k, ints((size_t)N, V), (size_t)N);
        add_out(&k, "losses", (size_t)N);
        add_out(&k, "dlogits", (size_t)N * Vp);
        fails += check_case(&k, op_softmax_xent, cpu, dev, out);
    }
    {
        st_case k = {.name = "adamw", .nmse_max = 1e-13f, .rel_max = 1e-6f, .fp32_out = 1};
        const size_t n = 10007;
        add_in(&k, rnd(n, 1), n);
        add_in(&k, rnd(n, 1), n);
        add_in(&k, rnd(n, 0.1f), n);
        float *v = rnd(n, 0.1f);
        for (size_t i = 0; i < n; i++) v[i] = v[i] * v[i];
        add_in(&k, v, n);
        add_out(&k, "param", n);
        add_out(&k, "exp_avg", n);
        add_out(&k, "exp_avg_sq", n);
        fails += check_case(&k, op_adamw, cpu, dev, out);
    }
    {
        /* the same counter-based mask on every backend: bit-identical */
        st_case k = {.name = "dropout", .nmse_max = 0, .rel_max = 0};
        const size_t n = 30011;
        add_in(&k, rnd(n, 1), n);
        add_out(&k, "p0.25", n);
        add_out(&k, "p0.5_inplace", n);
        fails += check_case(&k, op_dropout, cpu, dev, out);
    }
    for (int f = 0; f < 3; f++) { /* QLoRA's base weights: the same decoding on every backend (bit-identical) */
        static const char *const nm[3] = {"dequant[nf4]", "dequant[nf4_dq]", "dequant[int8]"};
        st_case k = {.name = nm[f], .nmse_max = 0, .rel_max = 0, .fp32_out = 1, .int_in = 1, .flag = f, .M = 67, .N = 300};
        const zt_quant_layout L = zt_quant_plan((zt_quant_fmt)f, (size_t)k.M, (size_t)k.N);
        float *w = rnd(L.n, 0.1f), *blob = zt_calloc(L.bytes / 4, sizeof(float));
        char e[128];
        if (zt_quant_encode(&L, w, blob, e, sizeof e)) zt_panic(__FILE__, __LINE__, "%s", e);
        free(w);
        add_in(&k, blob, L.bytes / 4);
        add_out(&k, "w", L.n);
        fails += check_case(&k, op_dequant, cpu, dev, out);
    }
    {
        st_case k = {.name = "sumsq_chunks", .nmse_max = 1e-13f, .rel_max = 1e-6f, .fp32_out = 1};
        const size_t n = 3 * 4096 + 1001;
        add_in(&k, rnd(n, 1), n);
        add_out(&k, "chunks", 4);
        fails += check_case(&k, op_sumsq, cpu, dev, out);
    }
    return fails;
}

/* ------------------------------------------------------------------ training */

/* `steps` AdamW steps of a tiny GPT on synthetic tokens on device `dev`; losses[steps] and the
   final parameters' hash (rank 0's host copy); *params16: the working parameters were 2-byte words (the config's
   train.param_storage "auto": on cuda/cudasim in bf16/fp16) */
/* step.h's batch source: a learnable stream, token t+1 = (token t * 5 + 3) mod V with noise, seeded by (step, j) */
static void selftest_batch(void *ctx, long step, int j, int32_t *in, int32_t *tg) {
    const int n = *(const int *)ctx; /* B * T */
    zt_rng r;
    zt_rng_seed(&r, (uint64_t)step * 1000 + (uint64_t)j);
    for (int i = 0; i < n + 1; i++) {
        int32_t prev = i ? in[i - 1] : (int32_t)(zt_rng_next(&r) % 97);
        int32_t t = zt_rng_uniform(&r) < 0.8 ? (prev * 5 + 3) % 97 : (int32_t)(zt_rng_next(&r) % 97);
        if (i < n) in[i] = i ? t : prev;
        if (i) tg[i - 1] = i < n ? in[i] : t;
    }
}

static void train_run(const char *device, int threads, int steps, int prec, int lora, double *losses, uint64_t *hash,
                      int *params16) {
    char err[ZT_ERR_BUF];
    zt_config c;
    if (zt_config_load_string(&c, "", err, sizeof err)) zt_panic(__FILE__, __LINE__, "%s", err);
    const int N = zt_world();
    c.model.n_layer = 2; c.model.n_head = 2; c.model.n_embd = 64; /* head size 32: fused attention on cuda */ c.model.vocab_size = 97; c.model.block_size = 16;
    c.train.micro_batch = 2; c.train.seq_len = 16; c.train.global_batch = 2 * N * 2; c.zero.stage = 2;
    c.train.steps = steps; c.train.lr = 3e-3; c.train.warmup_steps = 0; snprintf(c.train.schedule, sizeof c.train.schedule, "constant");
    c.train.beta1 = 0.9; c.train.beta2 = 0.95; c.train.eps = 1e-8; c.train.weight_decay = 0.1; c.train.grad_clip = 1.0;
    snprintf(c.device, sizeof c.device, "%s", device);
    snprintf(c.precision, sizeof c.precision, "%s", prec_name(prec));
    if (lora) { /* QLoRA with dropout: adapters r 4 on an nf4_dq base */
        c.lora.enabled = 1;
        snprintf(c.lora.base, sizeof c.lora.base, "selftest");
        c.lora.rank = 4;
        c.lora.alpha = 8;
        c.lora.dropout = 0.1;
        snprintf(c.lora.quant, sizeof c.lora.quant, "nf4_dq");
    }
    zt_backend *be = zt_backend_create(device, threads, err, sizeof err);
    zt_comm *comm = be ? zt_comm_create("auto", be, err, sizeof err) : NULL;
    if (!comm) zt_user_error_all("%s", err);
    zt_model_shape s;
    zt_model_shape_from_config(&c, &s);
    zt_model m;
    zt_zero z;
    zt_zero_init(&z, &c, &m, be, comm, &s);
    *params16 = m.params16 != NULL;
    float *h = zt_calloc(z.plan.padded > m.table.total ? z.plan.padded : m.table.total, sizeof(float));
    zt_model_init_weights_host(&m.table, &s, h, 0.02f, 7);
    if (lora) {
        float *flat = be->i->alloc(be, m.table.total * sizeof(float));
        be->i->to_device(be, flat, h, m.table.total * sizeof(float));
        if (zt_lora_base_set(&m, flat, err, sizeof err)) zt_panic(__FILE__, __LINE__, "%s", err);
        be->i->free(be, flat);
        zt_lora_init_host(&m.lora->table, 7, h);
        be->i->to_device(be, m.lora->params, h, m.lora->table.total * sizeof(float));
        m.lora->seed = 7;
    } else { /* the flat parameters, or (2-byte parameters: cuda with train.param_storage auto) the master's range */
        size_t base, n;
        float *dst = zt_zero_init_target(&z, &m, &base, &n);
        be->i->to_device(be, dst, h + base, n * sizeof(float));
    }
    zt_zero_master_init(&z, &m);
    zt_step st;
    int bt = c.train.micro_batch * c.train.seq_len;
    zt_step_init(&st, &m, &z, &c, selftest_batch, &bt);
    for (int step = 0; step < steps; step++) losses[step] = zt_step_run(&st, step).loss;
    zt_step_free(&st);
    const size_t tn = zt_model_ttable(&m)->total; /* what was trained */
    zt_model_tparams_to_host(&m, 0, tn, h);
    uint64_t fnv = 1469598103934665603ull;
    const unsigned char *p = (const unsigned char *)h;
    for (size_t i = 0; i < tn * sizeof(float); i++) fnv = (fnv ^ p[i]) * 1099511628211ull;
    *hash = fnv;
    free(h);
    zt_zero_free(&z, &m);
    zt_comm_destroy(comm);
    zt_backend_destroy(be);
}

static int run_train(const char *device, int threads, int steps, int prec, int lora, FILE *out) {
    double *lc = zt_calloc((size_t)steps, sizeof(double)), *l1 = zt_calloc((size_t)steps, sizeof(double));
    double *l2 = zt_calloc((size_t)steps, sizeof(double));
    uint64_t hc, h1, h2;
    int p16 = 0;
    train_run("cpu", threads, steps, prec, lora, lc, &hc, &p16);
    train_run(device, threads, steps, prec, lora, l1, &h1, &p16);
    train_run(device, threads, steps, prec, lora, l2, &h2, &p16);
    /* relative, per step: measured under the harness (README "GPU status"): fp32 5.7e-8, bf16 5.6e-4, fp16
       8.5e-5 (a last-bit difference of the fp32 GEMMs flips a bf16/fp16 rounding now and then; on cuda and
       cudasim the fused attention keeps its probabilities fp32 where the cpu backend stores them rounded) */
    const double tol = prec == ZT_PREC_BF16 ? 2e-3 : prec == ZT_PREC_FP16 ? 2e-4 : 1e-5;
    double worst = 0;
    for (int i = 0; i < steps; i++) {
        double r = fabs(l1[i] - lc[i]) / fabs(lc[i]);
        if (!(r <= worst)) worst = r;
    }
    int same = memcmp(l1, l2, (size_t)steps * sizeof(double)) == 0 && h1 == h2;
    int fails = !(worst <= tol) + !same + !(lc[steps - 1] < lc[0]);
    if (out) {
        fprintf(out, "\ntrain: tiny GPT (L2 C64 V97), %d ranks, ZeRO-2 ordered, %d steps, %s%s%s\n", zt_world(), steps,
                prec_name(prec), p16 ? " (2-byte working parameters)" : "",
                lora ? ", QLoRA (r 4, nf4_dq base, dropout 0.1)" : "");
        fprintf(out, "  loss step 1 / %d: cpu %.6f / %.6f, %s %.6f / %.6f\n", steps, lc[0], lc[steps - 1], device, l1[0],
                l1[steps - 1]);
        fprintf(out, "  %-40s %.2e (limit %.0e)  %s\n", "max relative loss difference vs cpu", worst, tol,
                worst <= tol ? "PASS" : "FAIL");
        fprintf(out, "  %-40s %s  %s\n", "two runs: identical losses and params", same ? "yes" : "NO",
                same ? "PASS" : "FAIL");
        fprintf(out, "  %-40s %s  %s\n", "loss decreases (cpu)", lc[steps - 1] < lc[0] ? "yes" : "NO",
                lc[steps - 1] < lc[0] ? "PASS" : "FAIL");
    }
    free(lc);
    free(l1);
    free(l2);
    return fails;
}

/* ------------------------------------------------------------------ communicator */

static int run_comm(const char *device, int threads, FILE *out) {
    char err[ZT_ERR_BUF];
    zt_backend *be = zt_backend_create(device, threads, err, sizeof err);
    zt_comm *c = be ? zt_comm_create("auto", be, err, sizeof err) : NULL;
    if (!c) zt_user_error_all("%s", err);
    const int R = c->size, me = c->rank;
    const size_t n = 1000;
    float *h = zt_malloc(n * (size_t)R * sizeof(float)), *g = zt_malloc(n * (size_t)R * sizeof(float));
    float *d = up(be, NULL, n * (size_t)R), *e = up(be, NULL, n * (size_t)R);
    long wrong[7] = {0};
    /* values are small integers: every sum is exact in fp32 */
#define FILL(expr) do { for (size_t i = 0; i < n * (size_t)R; i++) h[i] = (float)(expr); \
    be->i->to_device(be, d, h, n * (size_t)R * sizeof(float)); } while (0)
    FILL((me + 1) * (int)(i % 7));
    c->i->all_reduce(c, d, e, n, ZT_F32);
    down(be, g, e, n);
    for (size_t i = 0; i < n; i++) wrong[0] += g[i] != (float)(R * (R + 1) / 2 * (int)(i % 7));
    c->i->reduce_scatter(c, d, e, n, ZT_F32);
    down(be, g, e, n);
    for (size_t i = 0; i < n; i++) wrong[1] += g[i] != (float)(R * (R + 1) / 2 * (int)((me * n + i) % 7));
    FILL(me * 10000 + (int)i);
    c->i->all_gather(c, d, e, n, ZT_F32);
    down(be, g, e, n * (size_t)R);
    for (size_t i = 0; i < n * (size_t)R; i++) wrong[2] += g[i] != (float)((int)(i / n) * 10000 + (int)(i % n));
    c->i->all_to_all(c, d, e, n, ZT_F32);
    down(be, g, e, n * (size_t)R);
    for (size_t i = 0; i < n * (size_t)R; i++) wrong[3] += g[i] != (float)((int)(i / n) * 10000 + (int)(me * n + i % n));
    if (me == 0) FILL(42 + (int)(i % 11));
    c->i->broadcast(c, d, n, ZT_F32, 0);
    down(be, g, d, n);
    for (size_t i = 0; i < n; i++) wrong[4] += g[i] != (float)(42 + (int)(i % 11));
    /* grouped point-to-point: rank r sends r+1 elements ... a ring with unequal sizes */
    FILL(me * 100 + (int)(i % 50));
    const int to = (me + 1) % R, from = (me + R - 1) % R;
    c->i->group_start(c);
    c->i->send(c, d, (size_t)me + 1, ZT_F32, to);
    c->i->recv(c, e, (size_t)from + 1, ZT_F32, from);
    c->i->group_end(c);
    c->i->wait(c, c->i->record(c));
    down(be, g, e, (size_t)from + 1);
    for (int i = 0; i <= from; i++) wrong[5] += g[i] != (float)(from * 100 + i % 50);
    /* rooted reduce to the last rank */
    FILL(me + 1);
    c->i->group_start(c);
    c->i->reduce(c, d, e, n, ZT_F32, R - 1);
    c->i->group_end(c);
    zt_comm_event ev = c->i->record(c);
    while (!c->i->query(c, ev)) {}
    c->i->wait(c, ev);
    if (me == R - 1) {
        down(be, g, e, n);
        for (size_t i = 0; i < n; i++) wrong[6] += g[i] != (float)(R * (R + 1) / 2);
    }
#undef FILL
    long all[7];
    MPI_Allreduce(wrong, all, 7, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    static const char *names[7] = {"all_reduce", "reduce_scatter", "all_gather", "all_to_all", "broadcast",
                                   "grouped send/recv", "grouped reduce"};
    int fails = 0;
    if (out) fprintf(out, "\ncomm: %s over %d rank%s, exact integer checks (#wrong)\n", c->i->name, R, R == 1 ? "" : "s");
    for (int k = 0; k < 7; k++) {
        fails += all[k] != 0;
        if (out) fprintf(out, "  %-20s %8ld  %s\n", names[k], all[k], all[k] ? "FAIL" : "PASS");
    }
    free(h);
    free(g);
    be->i->free(be, d);
    be->i->free(be, e);
    zt_comm_destroy(c);
    zt_backend_destroy(be);
    return fails;
}

int zt_selftest_run(const zt_selftest_opts *o, char *err, size_t errlen) {
    zt_backend *dev = zt_backend_create(o->device, o->threads, err, errlen);
    if (zt_any_failed(dev == NULL, err, errlen)) return -1;
    zt_backend *cpu = zt_backend_create("cpu", o->threads, err, errlen);
    FILE *out = o->out;
    int fails = 0;
    if (out) {
        char d1[256], d2[256];
        zt_backend_describe(dev, d1, sizeof d1);
        zt_backend_describe(cpu, d2, sizeof d2);
        fprintf(out, "ztrain selftest: %s\n  against %s\n\n", d1, d2);
    }
    for (int p = 0; p < 3; p++)
        if (o->ops && (o->precisions >> p & 1)) {
            if (out && p) fprintf(out, "\n");
            fails += run_ops(cpu, dev, p, out);
        }
    zt_backend_destroy(dev);
    zt_backend_destroy(cpu);
    for (int p = 0; p < 3; p++)
        if (o->train_steps > 0 && (o->precisions >> p & 1)) fails += run_train(o->device, o->threads, o->train_steps, p, 0, out);
    if (o->train_steps > 0 && (o->precisions & 1)) /* (Q)LoRA, fp32: half the steps */
        fails += run_train(o->device, o->threads, o->train_steps > 1 ? o->train_steps / 2 : 1, ZT_PREC_FP32, 1, out);
    if (o->comm) fails += run_comm(o->device, o->threads, out);
    if (out) fprintf(out, "\nselftest %s: %d check%s failed\n", fails ? "FAILED" : "passed", fails, fails == 1 ? "" : "s");
    return fails;
}
