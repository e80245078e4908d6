/* selftest_encoder.c — the selftest's rows for the encoder family's slots (selftest_encoder.h): builders draw their
 * inputs from the table's seeded stream (selftest_case.h), runners upload them, run the op and download every output.
 * Limits as selftest_ops.c's: attention and the exact GELU at the materialised attention's and GELU's (their
 * arithmetic differs between backends only by rounding: batched GEMMs, the harness's uncontracted zt_expf); the bias
 * ops and argmax must be bit-identical (nmse 0). Masks: sequence 0 padded at the end, sequence 1 with every third
 * key masked, sequence 2 with no valid key (its rows must be 0 on both backends). */
#include "core/diag/selftest_encoder.h"

#include <math.h>
#include <stdlib.h>

#include "util/util.h"

/* three sequences of 19 tokens, C 72 (not a multiple of 32) */
enum { EB = 3, ET = 19, EC = 72, EN = EB * ET, EV = 251, EVP = 256 };

/* the key mask (B, T) as int32 bits */
static float *bidir_mask(void) {
    int32_t *m = zt_malloc((size_t)EN * sizeof(int32_t));
    for (int t = 0; t < ET; t++) {
        m[t] = t < 13;
        m[ET + t] = t % 3 != 1;
        m[2 * ET + t] = 0;
    }
    return (float *)m;
}

/* v 0 multi-head (3 heads), v 1 grouped-query (6 query heads on 2); the backward's case adds dout (drawn after qkv) */
static void bidir_case(st_case *k, int v, int bwd) {
    static const char *const nm[2][2] = {{"attention_bidir_fwd", "attention_bidir_fwd[gqa]"},
                                         {"attention_bidir_bwd", "attention_bidir_bwd[gqa]"}};
    *k = (st_case){.name = nm[bwd][v], .nmse_max = 1e-12f, .rel_max = 2e-6f, .B = EB, .T = ET, .C = EC,
                   .NH = v ? 6 : 3, .NKV = v ? 2 : 0};
    const size_t nq = (size_t)EN * qkv_width(k);
    st_add_in(k, st_rnd(nq, 1), nq);
    st_add_in_int(k, bidir_mask(), (size_t)EN);
    if (bwd) {
        st_add_in(k, st_rnd((size_t)EN * EC, 1), (size_t)EN * EC);
        st_add_out(k, "dqkv", nq);
    } else {
        st_add_out(k, "out", (size_t)EN * EC);
        st_add_out(k, "att", (size_t)EB * k->NH * ET * ET);
    }
}

void st_b_attention_bidir_fwd(st_case *k, int v) { bidir_case(k, v, 0); }
void st_b_attention_bidir_bwd(st_case *k, int v) { bidir_case(k, v, 1); }

void st_op_attention_bidir_fwd(zt_backend *be, st_case *k, float **out) {
    float *qkv = st_up(be, k->in[0], k->in_n[0]), *o = st_up(be, NULL, k->out_n[0]);
    float *att = st_up(be, NULL, k->out_n[1]);
    int32_t *kv = (int32_t *)st_up(be, k->in[1], k->in_n[1]);
    be->i->attention_bidir_fwd(be, o, att, qkv, kv, k->B, k->T, k->C, k->NH, kv_heads(k));
    st_down(be, out[0], o, k->out_n[0]); st_down(be, out[1], att, k->out_n[1]);
    float *bufs[] = {qkv, o, att, (float *)kv};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) be->i->free(be, bufs[i]);
}

/* in: qkv, mask, dout; att from this backend's own forward */
void st_op_attention_bidir_bwd(zt_backend *be, st_case *k, float **out) {
    float *qkv = st_up(be, k->in[0], k->in_n[0]), *dout = st_up(be, k->in[2], k->in_n[2]);
    int32_t *kv = (int32_t *)st_up(be, k->in[1], k->in_n[1]);
    const size_t natt = (size_t)k->B * k->NH * k->T * k->T;
    float *o = st_up(be, NULL, k->in_n[2]), *att = st_up(be, NULL, natt), *datt = st_up(be, NULL, natt);
    float *dqkv = st_up(be, NULL, k->out_n[0]);
    be->i->attention_bidir_fwd(be, o, att, qkv, kv, k->B, k->T, k->C, k->NH, kv_heads(k));
    be->i->attention_bidir_bwd(be, dqkv, datt, dout, qkv, att, kv, k->B, k->T, k->C, k->NH, kv_heads(k));
    st_down(be, out[0], dqkv, k->out_n[0]);
    float *bufs[] = {qkv, dout, (float *)kv, o, att, datt, dqkv};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) be->i->free(be, bufs[i]);
}

void st_b_gelu_erf(st_case *k, int v) {
    (void)v;
    *k = (st_case){.name = "gelu_erf", .nmse_max = 1e-13f, .rel_max = 1e-6f};
    const size_t n = (size_t)EN * 4 * EC + 7;
    st_add_in(k, st_rnd(n, 3), n); /* into both tails: the exp's side (|x| > sqrt 2) and erfc's (x < -sqrt 2) */
    st_add_in(k, st_rnd(n, 1), n);
    st_add_out(k, "fwd", n);
    st_add_out(k, "bwd", n);
    st_add_out(k, "inplace", n);
}

void st_op_gelu_erf(zt_backend *be, st_case *k, float **out) {
    const size_t n = k->in_n[0];
    float *x = st_up(be, k->in[0], n), *d = st_up(be, k->in[1], n), *y = st_up(be, NULL, n), *dx = st_up(be, NULL, n);
    be->i->gelu_erf_fwd(be, y, x, n);
    be->i->gelu_erf_bwd(be, dx, x, d, n);
    st_down(be, out[0], y, n); st_down(be, out[1], dx, n);
    be->i->gelu_erf_bwd(be, d, x, d, n);
    st_down(be, out[2], d, n);
    be->i->free(be, x); be->i->free(be, d); be->i->free(be, y); be->i->free(be, dx);
}

void st_b_bias(st_case *k, int v) {
    (void)v;
    *k = (st_case){.name = "bias_add, bias_grad", .nmse_max = 0, .rel_max = 0, .N = EN, .OC = EVP + 3};
    const size_t n = (size_t)EN * k->OC;
    st_add_in(k, st_rnd(n, 3), n);
    st_add_in(k, st_rnd((size_t)k->OC, 1), (size_t)k->OC);
    st_add_in(k, st_rnd(n, 1), n);
    st_add_out(k, "add", n);
    st_add_out(k, "grad", (size_t)k->OC);
}

/* in: logits (added to in place), bias, dout */
void st_op_bias(zt_backend *be, st_case *k, float **out) {
    float *lg = st_up(be, k->in[0], k->in_n[0]), *b = st_up(be, k->in[1], k->in_n[1]);
    float *dout = st_up(be, k->in[2], k->in_n[2]), *db = st_up(be, NULL, k->out_n[1]);
    be->i->bias_add(be, lg, b, k->N, k->OC);
    be->i->bias_grad(be, db, dout, k->N, k->OC);
    st_down(be, out[0], lg, k->out_n[0]); st_down(be, out[1], db, k->out_n[1]);
    be->i->free(be, lg); be->i->free(be, b); be->i->free(be, dout); be->i->free(be, db);
}

/* logits (N, Vp): repeated maxima (the lowest column must win), NaN (never wins: one at column 0, one row of NaN
   only), a row of -inf, large values in the padded columns [V, Vp) (never read) */
void st_b_argmax_rows(st_case *k, int v) {
    (void)v;
    *k = (st_case){.name = "argmax_rows", .nmse_max = 0, .rel_max = 0, .fp32_out = 1, .N = EN, .V = EV, .Vp = EVP};
    float *x = st_rnd((size_t)EN * EVP, 2);
    for (int n = 0; n < EN; n++) {
        float *r = x + (size_t)n * EVP;
        for (int j = EV; j < EVP; j++) r[j] = 1e30f;
        if (n % 4 == 1) r[(n * 7) % EV] = r[(n * 13 + 50) % EV] = r[(n * 3 + 100) % EV] = 9.0f;
        if (n % 5 == 2) r[0] = NAN;
        if (n % 7 == 3) r[(n * 11) % EV] = NAN;
    }
    for (int j = 0; j < EV; j++) {
        x[(size_t)(EN - 1) * EVP + j] = NAN;
        x[(size_t)(EN - 2) * EVP + j] = j % 9 ? -INFINITY : NAN;
    }
    st_add_in(k, x, (size_t)EN * EVP);
    st_add_out(k, "idx", (size_t)EN);
}

/* the indices come back as int32 and are compared as floats (exact below 2^24) */
void st_op_argmax_rows(zt_backend *be, st_case *k, float **out) {
    float *x = st_up(be, k->in[0], k->in_n[0]);
    int32_t *idx = be->i->alloc(be, (size_t)k->N * sizeof(int32_t));
    int32_t *h = zt_malloc((size_t)k->N * sizeof(int32_t));
    be->i->argmax_rows(be, idx, x, k->N, k->V, k->Vp);
    be->i->to_host(be, h, idx, (size_t)k->N * sizeof(int32_t));
    for (int n = 0; n < k->N; n++) out[0][n] = (float)h[n];
    free(h);
    be->i->free(be, x); be->i->free(be, idx);
}
