/* backend_prof.c — timing decorator over a backend's ops (see backend_prof.h). One profiled
 * backend at a time (the benchmark's). */
#include "core/diag/backend_prof.h"

#include <stdlib.h>
#include <string.h>

#include "util/util.h"

enum { P_MATMUL, P_LINEAR_FWD, P_LINEAR_BWD, P_LN_FWD, P_LN_BWD, P_ATT_FWD, P_ATT_BWD, P_GELU_FWD, P_GELU_BWD,
       P_ADD, P_EMB_FWD, P_EMB_BWD, P_XENT, P_ADAMW, P_ACC, P_SUMSQ, P_COPY, P_ROUND, P_PACK, P_FATT_FWD, P_FATT_BWD,
       P_RMS_FWD, P_RMS_BWD, P_ROPE, P_SWIGLU_FWD, P_SWIGLU_BWD, P_RLN_FWD, P_BATT_FWD, P_BATT_BWD, P_GELU_ERF_FWD,
       P_GELU_ERF_BWD, P_BIAS_ADD, P_BIAS_GRAD, P_ARGMAX, P_N };
static const char *g_names[P_N] = {"matmul (lm head)", "linear fwd", "linear bwd", "layernorm fwd", "layernorm bwd",
                                   "attention fwd", "attention bwd", "gelu fwd", "gelu bwd", "residual add",
                                   "embedding fwd", "embedding bwd", "softmax+xent", "adamw", "accumulate",
                                   "grad norm", "copy/zero", "round_to", "pack16/unpack16",
                                   "attention fused fwd", "attention fused bwd", "rmsnorm fwd", "rmsnorm bwd",
                                   "rope", "swiglu fwd", "swiglu bwd", "residual+layernorm fwd",
                                   "attention bidir fwd", "attention bidir bwd", "gelu_erf fwd", "gelu_erf bwd",
                                   "bias add", "bias grad", "argmax rows"};
static double g_sec[P_N];
static long g_calls[P_N];
static const zt_backend_i *g_inner;
static zt_backend_i g_wrapped;

#define T0(be) g_inner->sync(be); double t0_ = zt_now()
#define T1(be, k) g_inner->sync(be); g_sec[k] += zt_now() - t0_; g_calls[k]++

static void w_matmul(zt_backend *be, float *c, const float *a, const float *b, int M, int N, int K, int ta, int tb,
                     float al, float bt) { T0(be); g_inner->matmul(be, c, a, b, M, N, K, ta, tb, al, bt); T1(be, P_MATMUL); }
static void w_matmul_ld(zt_backend *be, float *c, const float *a, const float *b, int M, int N, int K, int ta, int tb,
                        float al, float bt, int lda, int ldb, int ldc) {
    T0(be); g_inner->matmul_ld(be, c, a, b, M, N, K, ta, tb, al, bt, lda, ldb, ldc); T1(be, P_MATMUL); }
static void w_linear_fwd(zt_backend *be, float *o, const float *i, const float *w, const float *b, int N, int C, int OC) {
    T0(be); g_inner->linear_fwd(be, o, i, w, b, N, C, OC); T1(be, P_LINEAR_FWD); }
static void w_linear_bwd(zt_backend *be, float *di, float *dw, float *db, const float *d, const float *i, const float *w,
                         int N, int C, int OC, int acc) {
    T0(be); g_inner->linear_bwd(be, di, dw, db, d, i, w, N, C, OC, acc); T1(be, P_LINEAR_BWD); }
static void w_ln_fwd(zt_backend *be, float *o, float *m, float *r, const float *i, const float *w, const float *b,
                     int N, int C, float eps) {
    T0(be); g_inner->layernorm_fwd(be, o, m, r, i, w, b, N, C, eps); T1(be, P_LN_FWD); }
static void w_rln_fwd(zt_backend *be, float *res, float *o, float *m, float *r, const float *a, const float *b,
                      const float *w, const float *bi, int N, int C, int p, float eps) {
    T0(be); g_inner->residual_layernorm_fwd(be, res, o, m, r, a, b, w, bi, N, C, p, eps); T1(be, P_RLN_FWD); }
static void w_ln_bwd(zt_backend *be, float *di, float *dw, float *db, const float *d, const float *i, const float *w,
                     const float *m, const float *r, int N, int C) {
    T0(be); g_inner->layernorm_bwd(be, di, dw, db, d, i, w, m, r, N, C); T1(be, P_LN_BWD); }
static void w_rms_fwd(zt_backend *be, float *o, float *r, const float *i, const float *w, int N, int C, float eps) {
    T0(be); g_inner->rmsnorm_fwd(be, o, r, i, w, N, C, eps); T1(be, P_RMS_FWD); }
static void w_rms_bwd(zt_backend *be, float *di, float *dw, const float *d, const float *i, const float *w,
                      const float *r, int N, int C) {
    T0(be); g_inner->rmsnorm_bwd(be, di, dw, d, i, w, r, N, C); T1(be, P_RMS_BWD); }
static void w_rope(zt_backend *be, float *q, const float *cs, int B, int T, int p0, int NH, int NKV, int hs, int inv) {
    T0(be); g_inner->rope(be, q, cs, B, T, p0, NH, NKV, hs, inv); T1(be, P_ROPE); }
static void w_swiglu_fwd(zt_backend *be, float *o, const float *i, int N, int I) {
    T0(be); g_inner->swiglu_fwd(be, o, i, N, I); T1(be, P_SWIGLU_FWD); }
static void w_swiglu_bwd(zt_backend *be, float *di, const float *i, const float *d, int N, int I) {
    T0(be); g_inner->swiglu_bwd(be, di, i, d, N, I); T1(be, P_SWIGLU_BWD); }
static void w_att_fwd(zt_backend *be, float *o, float *a, const float *q, int B, int T, int C, int NH, int NKV) {
    T0(be); g_inner->attention_fwd(be, o, a, q, B, T, C, NH, NKV); T1(be, P_ATT_FWD); }
static void w_att_bwd(zt_backend *be, float *dq, float *da, const float *d, const float *q, const float *a, int B, int T,
                      int C, int NH, int NKV) {
    T0(be); g_inner->attention_bwd(be, dq, da, d, q, a, B, T, C, NH, NKV); T1(be, P_ATT_BWD); }
static void w_batt_fwd(zt_backend *be, float *o, float *a, const float *q, const int32_t *kv, int B, int T, int C,
                       int NH, int NKV) {
    T0(be); g_inner->attention_bidir_fwd(be, o, a, q, kv, B, T, C, NH, NKV); T1(be, P_BATT_FWD); }
static void w_batt_bwd(zt_backend *be, float *dq, float *da, const float *d, const float *q, const float *a,
                       const int32_t *kv, int B, int T, int C, int NH, int NKV) {
    T0(be); g_inner->attention_bidir_bwd(be, dq, da, d, q, a, kv, B, T, C, NH, NKV); T1(be, P_BATT_BWD); }
static void w_fatt_fwd(zt_backend *be, float *o, float *st, const float *q, int B, int T, int C, int NH, int NKV) {
    T0(be); g_inner->attention_fused_fwd(be, o, st, q, B, T, C, NH, NKV); T1(be, P_FATT_FWD); }
static void w_fatt_bwd(zt_backend *be, float *dq, float *D, const float *d, const float *q, const float *o,
                       const float *st, int B, int T, int C, int NH, int NKV) {
    T0(be); g_inner->attention_fused_bwd(be, dq, D, d, q, o, st, B, T, C, NH, NKV); T1(be, P_FATT_BWD); }
static void w_gelu_fwd(zt_backend *be, float *o, const float *i, size_t n) { T0(be); g_inner->gelu_fwd(be, o, i, n); T1(be, P_GELU_FWD); }
static void w_gelu_bwd(zt_backend *be, float *di, const float *i, const float *d, size_t n) {
    T0(be); g_inner->gelu_bwd(be, di, i, d, n); T1(be, P_GELU_BWD); }
static void w_gelu_erf_fwd(zt_backend *be, float *o, const float *i, size_t n) {
    T0(be); g_inner->gelu_erf_fwd(be, o, i, n); T1(be, P_GELU_ERF_FWD); }
static void w_gelu_erf_bwd(zt_backend *be, float *di, const float *i, const float *d, size_t n) {
    T0(be); g_inner->gelu_erf_bwd(be, di, i, d, n); T1(be, P_GELU_ERF_BWD); }
static void w_bias_add(zt_backend *be, float *o, const float *b, int N, int OC) {
    T0(be); g_inner->bias_add(be, o, b, N, OC); T1(be, P_BIAS_ADD); }
static void w_bias_grad(zt_backend *be, float *db, const float *d, int N, int OC) {
    T0(be); g_inner->bias_grad(be, db, d, N, OC); T1(be, P_BIAS_GRAD); }
static void w_argmax(zt_backend *be, int32_t *idx, const float *x, int N, int V, int ld) {
    T0(be); g_inner->argmax_rows(be, idx, x, N, V, ld); T1(be, P_ARGMAX); }
static void w_add(zt_backend *be, float *o, const float *a, const float *b, size_t n) { T0(be); g_inner->add(be, o, a, b, n); T1(be, P_ADD); }
static void w_emb_fwd(zt_backend *be, float *o, const int32_t *t, const float *wte, const float *wpe, int B, int T, int C) {
    T0(be); g_inner->embed_fwd(be, o, t, wte, wpe, B, T, C); T1(be, P_EMB_FWD); }
static void w_emb_bwd(zt_backend *be, float *dwte, float *dwpe, const float *d, const int32_t *t, int B, int T, int C) {
    T0(be); g_inner->embed_bwd(be, dwte, dwpe, d, t, B, T, C); T1(be, P_EMB_BWD); }
static void w_xent(zt_backend *be, float *l, float *lg, const int32_t *t, int N, int V, int Vp, float s,
                   const float *sa) {
    T0(be); g_inner->softmax_xent(be, l, lg, t, N, V, Vp, s, sa); T1(be, P_XENT); }
static void w_matmul16(zt_backend *be, void *c, int c16, const void *a, int a16, const float *b, int M, int N, int K,
                       int ta, int tb, int prec, float beta) {
    T0(be); g_inner->matmul16(be, c, c16, a, a16, b, M, N, K, ta, tb, prec, beta); T1(be, P_MATMUL); }
static void w_xent16(zt_backend *be, float *l, void *lg, const int32_t *t, int N, int V, int Vp, float s,
                     const float *sa, int prec) {
    T0(be); g_inner->softmax_xent16(be, l, lg, t, N, V, Vp, s, sa, prec); T1(be, P_XENT); }
static void w_adamw(zt_backend *be, float *p, const float *g, float *m, float *v, size_t n, float lr, float b1, float b2,
                    float eps, float wd, float c1, float c2, float gs) {
    T0(be); g_inner->adamw(be, p, g, m, v, n, lr, b1, b2, eps, wd, c1, c2, gs); T1(be, P_ADAMW); }
static void w_adamw_multi(zt_backend *be, float *p, const float *g, float *m, float *v, const zt_adamw_seg *segs,
                          int nseg, float b1, float b2, float eps, const float *h) {
    T0(be); g_inner->adamw_multi(be, p, g, m, v, segs, nseg, b1, b2, eps, h); T1(be, P_ADAMW); }
static void w_acc(zt_backend *be, float *a, const float *x, size_t n) { T0(be); g_inner->accumulate(be, a, x, n); T1(be, P_ACC); }
static void w_sumsq(zt_backend *be, double *o, const float *x, size_t n, size_t c) {
    T0(be); g_inner->sumsq_chunks(be, o, x, n, c); T1(be, P_SUMSQ); }
static void w_clip(zt_backend *be, float *h, double *nm, const double *s, size_t n, double c, int k) {
    T0(be); g_inner->clip_scale(be, h, nm, s, n, c, k); T1(be, P_SUMSQ); }
static void w_copy(zt_backend *be, void *d, const void *s, size_t n) { T0(be); g_inner->copy(be, d, s, n); T1(be, P_COPY); }
static void w_zero(zt_backend *be, void *d, size_t n) { T0(be); g_inner->zero(be, d, n); T1(be, P_COPY); }
static void w_round(zt_backend *be, float *x, size_t n, int p) { T0(be); g_inner->round_to(be, x, n, p); T1(be, P_ROUND); }
static void w_pack(zt_backend *be, void *d, const float *x, size_t n, int p) {
    T0(be); g_inner->pack16(be, d, x, n, p); T1(be, P_PACK); }
static void w_unpack(zt_backend *be, float *d, const void *x, size_t n, int p) {
    T0(be); g_inner->unpack16(be, d, x, n, p); T1(be, P_PACK); }

void zt_backend_prof_begin(zt_backend *be) {
    g_inner = be->i;
    g_wrapped = *be->i;
    g_wrapped.matmul = w_matmul;
    if (g_inner->matmul_ld) g_wrapped.matmul_ld = w_matmul_ld;
    g_wrapped.linear_fwd = w_linear_fwd;
    g_wrapped.linear_bwd = w_linear_bwd;
    g_wrapped.layernorm_fwd = w_ln_fwd;
    g_wrapped.layernorm_bwd = w_ln_bwd;
    if (g_inner->residual_layernorm_fwd) g_wrapped.residual_layernorm_fwd = w_rln_fwd;
    if (g_inner->rmsnorm_fwd) g_wrapped.rmsnorm_fwd = w_rms_fwd;
    if (g_inner->rmsnorm_bwd) g_wrapped.rmsnorm_bwd = w_rms_bwd;
    if (g_inner->rope) g_wrapped.rope = w_rope;
    if (g_inner->swiglu_fwd) g_wrapped.swiglu_fwd = w_swiglu_fwd;
    if (g_inner->swiglu_bwd) g_wrapped.swiglu_bwd = w_swiglu_bwd;
    g_wrapped.attention_fwd = w_att_fwd;
    g_wrapped.attention_bwd = w_att_bwd;
    if (g_inner->attention_fused_fwd) g_wrapped.attention_fused_fwd = w_fatt_fwd;
    if (g_inner->attention_fused_bwd) g_wrapped.attention_fused_bwd = w_fatt_bwd;
    if (g_inner->attention_bidir_fwd) g_wrapped.attention_bidir_fwd = w_batt_fwd;
    if (g_inner->attention_bidir_bwd) g_wrapped.attention_bidir_bwd = w_batt_bwd;
    if (g_inner->gelu_erf_fwd) g_wrapped.gelu_erf_fwd = w_gelu_erf_fwd;
    if (g_inner->gelu_erf_bwd) g_wrapped.gelu_erf_bwd = w_gelu_erf_bwd;
    if (g_inner->bias_add) g_wrapped.bias_add = w_bias_add;
    if (g_inner->bias_grad) g_wrapped.bias_grad = w_bias_grad;
    if (g_inner->argmax_rows) g_wrapped.argmax_rows = w_argmax;
    if (g_inner->matmul16) g_wrapped.matmul16 = w_matmul16;
    if (g_inner->softmax_xent16) g_wrapped.softmax_xent16 = w_xent16;
    g_wrapped.gelu_fwd = w_gelu_fwd;
    g_wrapped.gelu_bwd = w_gelu_bwd;
    g_wrapped.add = w_add;
    g_wrapped.embed_fwd = w_emb_fwd;
    g_wrapped.embed_bwd = w_emb_bwd;
    g_wrapped.softmax_xent = w_xent;
    g_wrapped.adamw = w_adamw;
    g_wrapped.adamw_multi = w_adamw_multi;
    g_wrapped.accumulate = w_acc;
    g_wrapped.sumsq_chunks = w_sumsq;
    g_wrapped.clip_scale = w_clip;
    g_wrapped.copy = w_copy;
    g_wrapped.zero = w_zero;
    g_wrapped.round_to = w_round;
    g_wrapped.pack16 = w_pack;
    g_wrapped.unpack16 = w_unpack;
    be->i = &g_wrapped;
    zt_backend_prof_reset();
}

void zt_backend_prof_reset(void) {
    memset(g_sec, 0, sizeof g_sec);
    memset(g_calls, 0, sizeof g_calls);
}

static int by_time(const void *a, const void *b) {
    double x = ((const zt_prof_entry *)a)->seconds, y = ((const zt_prof_entry *)b)->seconds;
    return (x < y) - (x > y);
}

int zt_backend_prof_report(zt_prof_entry *out, int max) {
    int n = 0;
    for (int k = 0; k < P_N && n < max; k++)
        if (g_calls[k]) out[n++] = (zt_prof_entry){g_names[k], g_sec[k], g_calls[k]};
    qsort(out, (size_t)n, sizeof *out, by_time);
    return n;
}

void zt_backend_prof_end(zt_backend *be) {
    if (g_inner) be->i = g_inner;
    g_inner = NULL;
}
