/* selftest_ops.c — the selftest's op table (selftest.h): every backend op, forward and backward, on seeded
 * random inputs, on the cpu backend and twice on the device, compared per output.
 *
 * Each row is a builder (name, thresholds, shape, inputs, outputs) and a runner that, given a backend, uploads
 * the case's host inputs, runs the op and downloads every output. Thresholds are per op and precision and sit
 * at about 10x the errors measured under the host execution harness (docs/gpu-status.md has the table); a
 * GPU's cuBLASLt and fused multiply-adds change the rounding, not the size, of these errors.
 *
 * Precisions: in bf16/fp16 each op sees inputs rounded to the precision (what its buffers store) and each
 * backend rounds its own outputs with its round_to, as the model does (core/model/model.c); the fp32 master-weight
 * ops (adamw, the norm's chunk sums) keep fp32 outputs. Both backends round nearly equal fp32 values, so an
 * output differs by at most one unit of the precision where the fp32 values straddle a rounding boundary: the
 * limits are one unit (bf16 2^-8, fp16 2^-11) of the largest output. */
#include "core/diag/selftest.h"
#include "core/diag/selftest_case.h"
#include "core/diag/selftest_encoder.h"
#include "core/diag/selftest_store16.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/lora/quant.h"
#include "iface/op_math.h"
#include "util/util.h"


/* inputs: in[0..] as listed per op; outputs written into out[] (host) */
static void op_matmul(zt_backend *be, st_case *k, float **out) {
    float *a = st_up(be, k->in[0], k->in_n[0]), *b = st_up(be, k->in[1], k->in_n[1]), *c = st_up(be, k->in[2], k->in_n[2]);
    be->i->matmul(be, c, a, b, k->M, k->N, k->K, k->flag & 1, (k->flag >> 1) & 1, 0.75f, 0.5f);
    st_down(be, out[0], c, k->out_n[0]);
    be->i->free(be, a); be->i->free(be, b); be->i->free(be, c);
}
/* matmul_ld's strides and first columns (of a, b, c) from the case's shape and transposes (matmul_ld_ld) */
static void matmul_ld_ld(const st_case *k, int ld[3], int off[3]);
static void op_matmul_ld(zt_backend *be, st_case *k, float **out) {
    int ld[3], off[3];
    matmul_ld_ld(k, ld, off);
    float *a = st_up(be, k->in[0], k->in_n[0]), *b = st_up(be, k->in[1], k->in_n[1]), *c = st_up(be, k->in[2], k->in_n[2]);
    be->i->matmul_ld(be, c + off[2], a + off[0], b + off[1], k->M, k->N, k->K, k->flag & 1, (k->flag >> 1) & 1, 0.75f,
                     0.5f, ld[0], ld[1], ld[2]);
    st_down(be, out[0], c, k->out_n[0]);
    be->i->free(be, a); be->i->free(be, b); be->i->free(be, c);
}
static void op_linear_fwd(zt_backend *be, st_case *k, float **out) {
    float *inp = st_up(be, k->in[0], k->in_n[0]), *w = st_up(be, k->in[1], k->in_n[1]), *bias = st_up(be, k->in[2], k->in_n[2]);
    float *o = st_up(be, NULL, k->out_n[0]);
    be->i->linear_fwd(be, o, inp, w, bias, k->N, k->C, k->OC);
    st_down(be, out[0], o, k->out_n[0]);
    be->i->free(be, inp); be->i->free(be, w); be->i->free(be, bias); be->i->free(be, o);
}
static void op_linear_bwd(zt_backend *be, st_case *k, float **out) {
    float *dout = st_up(be, k->in[0], k->in_n[0]), *inp = st_up(be, k->in[1], k->in_n[1]), *w = st_up(be, k->in[2], k->in_n[2]);
    float *dinp = st_up(be, k->in[3], k->in_n[3]); /* accumulated into */
    float *dw = st_up(be, NULL, k->out_n[1]), *db = st_up(be, NULL, k->out_n[2]);
    be->i->linear_bwd(be, dinp, dw, db, dout, inp, w, k->N, k->C, k->OC, 1);
    st_down(be, out[0], dinp, k->out_n[0]); st_down(be, out[1], dw, k->out_n[1]); st_down(be, out[2], db, k->out_n[2]);
    be->i->free(be, dout); be->i->free(be, inp); be->i->free(be, w); be->i->free(be, dinp); be->i->free(be, dw);
    be->i->free(be, db);
}
/* flag 1: BERT's epsilon 1e-12 (b_layernorm_fwd_eps), else GPT-2's */
static void op_layernorm_fwd(zt_backend *be, st_case *k, float **out) {
    float *inp = st_up(be, k->in[0], k->in_n[0]), *w = st_up(be, k->in[1], k->in_n[1]), *b = st_up(be, k->in[2], k->in_n[2]);
    float *o = st_up(be, NULL, k->out_n[0]), *mean = st_up(be, NULL, k->out_n[1]), *rstd = st_up(be, NULL, k->out_n[2]);
    be->i->layernorm_fwd(be, o, mean, rstd, inp, w, b, k->N, k->C, k->flag ? 1e-12f : ZT_LN_EPS);
    st_down(be, out[0], o, k->out_n[0]); st_down(be, out[1], mean, k->out_n[1]); st_down(be, out[2], rstd, k->out_n[2]);
    be->i->free(be, inp); be->i->free(be, w); be->i->free(be, b); be->i->free(be, o); be->i->free(be, mean);
    be->i->free(be, rstd);
}
/* the residual add fused with the LayerNorm of its result (optional slot; without it the three calls it stands for):
   flag: the residual's rounding (ZT_PREC_*) */
static void op_residual_layernorm_fwd(zt_backend *be, st_case *k, float **out) {
    const size_t n = (size_t)k->N * k->C;
    float *a = st_up(be, k->in[0], k->in_n[0]), *bb = st_up(be, k->in[1], k->in_n[1]);
    float *w = st_up(be, k->in[2], k->in_n[2]), *b = st_up(be, k->in[3], k->in_n[3]);
    float *res = st_up(be, NULL, n), *o = st_up(be, NULL, n), *mean = st_up(be, NULL, (size_t)k->N);
    float *rstd = st_up(be, NULL, (size_t)k->N);
    if (be->i->residual_layernorm_fwd) {
        be->i->residual_layernorm_fwd(be, res, o, mean, rstd, a, bb, w, b, k->N, k->C, k->flag, ZT_LN_EPS);
    } else {
        be->i->add(be, res, a, bb, n);
        be->i->round_to(be, res, n, k->flag);
        be->i->layernorm_fwd(be, o, mean, rstd, res, w, b, k->N, k->C, ZT_LN_EPS);
    }
    st_down(be, out[0], res, k->out_n[0]); st_down(be, out[1], o, k->out_n[1]); st_down(be, out[2], mean, k->out_n[2]);
    st_down(be, out[3], rstd, k->out_n[3]);
    float *bufs[] = {a, bb, w, b, res, o, mean, rstd};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) be->i->free(be, bufs[i]);
}
static void op_layernorm_bwd(zt_backend *be, st_case *k, float **out) {
    /* in: dout, inp, w, dinp(acc), then mean/rstd computed by this backend's own forward */
    float *dout = st_up(be, k->in[0], k->in_n[0]), *inp = st_up(be, k->in[1], k->in_n[1]), *w = st_up(be, k->in[2], k->in_n[2]);
    float *dinp = st_up(be, k->in[3], k->in_n[3]), *b = st_up(be, NULL, (size_t)k->C);
    float *o = st_up(be, NULL, k->in_n[1]), *mean = st_up(be, NULL, (size_t)k->N), *rstd = st_up(be, NULL, (size_t)k->N);
    float *dw = st_up(be, NULL, (size_t)k->C), *db = st_up(be, NULL, (size_t)k->C);
    be->i->layernorm_fwd(be, o, mean, rstd, inp, w, b, k->N, k->C, ZT_LN_EPS);
    be->i->layernorm_bwd(be, dinp, dw, db, dout, inp, w, mean, rstd, k->N, k->C);
    st_down(be, out[0], dinp, k->out_n[0]); st_down(be, out[1], dw, k->out_n[1]); st_down(be, out[2], db, k->out_n[2]);
    float *bufs[] = {dout, inp, w, dinp, b, o, mean, rstd, dw, db};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) be->i->free(be, bufs[i]);
}
static void op_attention_fwd(zt_backend *be, st_case *k, float **out) {
    float *qkv = st_up(be, k->in[0], k->in_n[0]), *o = st_up(be, NULL, k->out_n[0]), *att = st_up(be, NULL, k->out_n[1]);
    be->i->attention_fwd(be, o, att, qkv, k->B, k->T, k->C, k->NH, kv_heads(k));
    st_down(be, out[0], o, k->out_n[0]); st_down(be, out[1], att, k->out_n[1]);
    be->i->free(be, qkv); be->i->free(be, o); be->i->free(be, att);
}
static void op_attention_bwd(zt_backend *be, st_case *k, float **out) {
    /* in: qkv, dout; att from this backend's own forward */
    float *qkv = st_up(be, k->in[0], k->in_n[0]), *dout = st_up(be, k->in[1], k->in_n[1]);
    size_t natt = (size_t)k->B * k->NH * k->T * k->T;
    float *o = st_up(be, NULL, k->in_n[1]), *att = st_up(be, NULL, natt), *datt = st_up(be, NULL, natt);
    float *dqkv = st_up(be, NULL, k->out_n[0]);
    be->i->attention_fwd(be, o, att, qkv, k->B, k->T, k->C, k->NH, kv_heads(k));
    be->i->attention_bwd(be, dqkv, datt, dout, qkv, att, k->B, k->T, k->C, k->NH, kv_heads(k));
    st_down(be, out[0], dqkv, k->out_n[0]);
    float *bufs[] = {qkv, dout, o, att, datt, dqkv};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) be->i->free(be, bufs[i]);
}
/* the fused attention (iface/backend.h attention_fused_*) where the backend has it, else the materialized one:
   the device's fused kernels against the cpu backend's attention */
static void op_attention_fused_fwd(zt_backend *be, st_case *k, float **out) {
    float *qkv = st_up(be, k->in[0], k->in_n[0]), *o = st_up(be, NULL, k->out_n[0]);
    const size_t natt = be->i->attention_fused_fwd ? (size_t)k->B * k->NH * k->T * 2 : (size_t)k->B * k->NH * k->T * k->T;
    float *att = st_up(be, NULL, natt);
    if (be->i->attention_fused_fwd) be->i->attention_fused_fwd(be, o, att, qkv, k->B, k->T, k->C, k->NH, kv_heads(k));
    else be->i->attention_fwd(be, o, att, qkv, k->B, k->T, k->C, k->NH, kv_heads(k));
    st_down(be, out[0], o, k->out_n[0]);
    be->i->free(be, qkv); be->i->free(be, o); be->i->free(be, att);
}
static void op_attention_fused_bwd(zt_backend *be, st_case *k, float **out) {
    float *qkv = st_up(be, k->in[0], k->in_n[0]), *dout = st_up(be, k->in[1], k->in_n[1]);
    const int fused = be->i->attention_fused_bwd != NULL;
    const size_t natt = fused ? (size_t)k->B * k->NH * k->T * 2 : (size_t)k->B * k->NH * k->T * k->T;
    const size_t nd = fused ? zt_attention_fused_scratch(k->B, k->T, k->C, k->NH) : natt;
    float *o = st_up(be, NULL, k->in_n[1]), *att = st_up(be, NULL, natt), *datt = st_up(be, NULL, nd);
    float *dqkv = st_up(be, NULL, k->out_n[0]);
    if (fused) {
        be->i->attention_fused_fwd(be, o, att, qkv, k->B, k->T, k->C, k->NH, kv_heads(k));
        be->i->attention_fused_bwd(be, dqkv, datt, dout, qkv, o, att, k->B, k->T, k->C, k->NH, kv_heads(k));
    } else {
        be->i->attention_fwd(be, o, att, qkv, k->B, k->T, k->C, k->NH, kv_heads(k));
        be->i->attention_bwd(be, dqkv, datt, dout, qkv, att, k->B, k->T, k->C, k->NH, kv_heads(k));
    }
    st_down(be, out[0], dqkv, k->out_n[0]);
    float *bufs[] = {qkv, dout, o, att, datt, dqkv};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) be->i->free(be, bufs[i]);
}
static void op_attention_decode(zt_backend *be, st_case *k, float **out) {
    /* in: qkv rows (T, W): run positions 0..T-1 one at a time; out: every position's output; caches (T, NKV hs) */
    const size_t C = (size_t)k->C, W = qkv_width(k), KV = (size_t)kv_heads(k) * (C / (size_t)k->NH);
    float *kc = st_up(be, NULL, (size_t)k->T * KV), *vc = st_up(be, NULL, (size_t)k->T * KV), *q = st_up(be, NULL, W);
    float *o = st_up(be, NULL, C);
    for (int t = 0; t < k->T; t++) {
        be->i->to_device(be, q, k->in[0] + (size_t)t * W, W * sizeof(float));
        be->i->attention_decode(be, o, kc, vc, q, t, k->T, k->C, k->NH, kv_heads(k));
        st_down(be, out[0] + (size_t)t * C, o, C);
    }
    be->i->free(be, kc); be->i->free(be, vc); be->i->free(be, q); be->i->free(be, o);
}
/* the Llama family's ops (optional as a set: NEED_LLAMA) */
static void op_rmsnorm_fwd(zt_backend *be, st_case *k, float **out) {
    float *inp = st_up(be, k->in[0], k->in_n[0]), *w = st_up(be, k->in[1], k->in_n[1]);
    float *o = st_up(be, NULL, k->out_n[0]), *rstd = st_up(be, NULL, k->out_n[1]);
    be->i->rmsnorm_fwd(be, o, rstd, inp, w, k->N, k->C, 1e-5f);
    st_down(be, out[0], o, k->out_n[0]); st_down(be, out[1], rstd, k->out_n[1]);
    be->i->free(be, inp); be->i->free(be, w); be->i->free(be, o); be->i->free(be, rstd);
}
static void op_rmsnorm_bwd(zt_backend *be, st_case *k, float **out) {
    /* in: dout, inp, w, dinp(acc); rstd from this backend's own forward */
    float *dout = st_up(be, k->in[0], k->in_n[0]), *inp = st_up(be, k->in[1], k->in_n[1]), *w = st_up(be, k->in[2], k->in_n[2]);
    float *dinp = st_up(be, k->in[3], k->in_n[3]), *o = st_up(be, NULL, k->in_n[1]), *rstd = st_up(be, NULL, (size_t)k->N);
    float *dw = st_up(be, NULL, (size_t)k->C);
    be->i->rmsnorm_fwd(be, o, rstd, inp, w, k->N, k->C, 1e-5f);
    be->i->rmsnorm_bwd(be, dinp, dw, dout, inp, w, rstd, k->N, k->C);
    st_down(be, out[0], dinp, k->out_n[0]); st_down(be, out[1], dw, k->out_n[1]);
    float *bufs[] = {dout, inp, w, dinp, o, rstd, dw};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) be->i->free(be, bufs[i]);
}
static void op_rope(zt_backend *be, st_case *k, float **out) {
    /* in: qkv (rotated in place), cs; flag = inverse */
    float *qkv = st_up(be, k->in[0], k->in_n[0]), *cs = st_up(be, k->in[1], k->in_n[1]);
    be->i->rope(be, qkv, cs, k->B, k->T, k->pos0, k->NH, kv_heads(k), k->C / k->NH, k->flag);
    st_down(be, out[0], qkv, k->out_n[0]);
    be->i->free(be, qkv); be->i->free(be, cs);
}
static void op_swiglu_fwd(zt_backend *be, st_case *k, float **out) {
    float *inp = st_up(be, k->in[0], k->in_n[0]), *o = st_up(be, NULL, k->out_n[0]);
    be->i->swiglu_fwd(be, o, inp, k->N, k->I);
    st_down(be, out[0], o, k->out_n[0]);
    be->i->free(be, inp); be->i->free(be, o);
}
static void op_swiglu_bwd(zt_backend *be, st_case *k, float **out) {
    float *inp = st_up(be, k->in[0], k->in_n[0]), *dout = st_up(be, k->in[1], k->in_n[1]), *dinp = st_up(be, NULL, k->out_n[0]);
    be->i->swiglu_bwd(be, dinp, inp, dout, k->N, k->I);
    st_down(be, out[0], dinp, k->out_n[0]);
    be->i->free(be, inp); be->i->free(be, dout); be->i->free(be, dinp);
}
static void op_gemv(zt_backend *be, st_case *k, float **out) {
    float *x = st_up(be, k->in[0], k->in_n[0]), *w = st_up(be, k->in[1], k->in_n[1]), *bias = st_up(be, k->in[2], k->in_n[2]);
    float *y = st_up(be, NULL, k->out_n[0]);
    be->i->gemv(be, y, x, w, k->flag ? NULL : bias, k->C, k->OC, k->flag);
    st_down(be, out[0], y, k->out_n[0]);
    be->i->free(be, x); be->i->free(be, w); be->i->free(be, bias); be->i->free(be, y);
}
static void op_gelu(zt_backend *be, st_case *k, float **out) {
    float *x = st_up(be, k->in[0], k->in_n[0]), *d = st_up(be, k->in[1], k->in_n[1]), *y = st_up(be, NULL, k->in_n[0]);
    float *dx = st_up(be, NULL, k->in_n[0]);
    be->i->gelu_fwd(be, y, x, k->in_n[0]);
    be->i->gelu_bwd(be, dx, x, d, k->in_n[0]);
    st_down(be, out[0], y, k->out_n[0]); st_down(be, out[1], dx, k->out_n[1]);
    be->i->free(be, x); be->i->free(be, d); be->i->free(be, y); be->i->free(be, dx);
}
static void op_add_acc(zt_backend *be, st_case *k, float **out) {
    float *a = st_up(be, k->in[0], k->in_n[0]), *b = st_up(be, k->in[1], k->in_n[1]), *o = st_up(be, NULL, k->in_n[0]);
    be->i->add(be, o, a, b, k->in_n[0]);
    be->i->accumulate(be, a, b, k->in_n[0]);
    st_down(be, out[0], o, k->out_n[0]); st_down(be, out[1], a, k->out_n[1]);
    be->i->free(be, a); be->i->free(be, b); be->i->free(be, o);
}
static void op_embed(zt_backend *be, st_case *k, float **out) {
    /* in: tokens (int32 bits), wte, wpe, dout, dwte(acc) */
    int32_t *tok = (int32_t *)st_up(be, k->in[0], k->in_n[0]);
    float *wte = st_up(be, k->in[1], k->in_n[1]), *wpe = st_up(be, k->in[2], k->in_n[2]), *dout = st_up(be, k->in[3], k->in_n[3]);
    float *dwte = st_up(be, k->in[4], k->in_n[4]), *dwpe = st_up(be, NULL, k->in_n[2]), *o = st_up(be, NULL, k->in_n[3]);
    be->i->embed_fwd(be, o, tok, wte, wpe, k->B, k->T, k->C);
    be->i->embed_bwd(be, dwte, dwpe, dout, tok, k->B, k->T, k->C);
    st_down(be, out[0], o, k->out_n[0]); st_down(be, out[1], dwte, k->out_n[1]); st_down(be, out[2], dwpe, k->out_n[2]);
    float *bufs[] = {(float *)tok, wte, wpe, dout, dwte, dwpe, o};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) be->i->free(be, bufs[i]);
}
static void op_softmax_xent(zt_backend *be, st_case *k, float **out) {
    /* in: logits (N, Vp), targets; out: losses, dlogits */
    float *lg = st_up(be, k->in[0], k->in_n[0]), *losses = st_up(be, NULL, (size_t)k->N);
    int32_t *tg = (int32_t *)st_up(be, k->in[1], k->in_n[1]);
    be->i->softmax_xent(be, losses, lg, tg, k->N, k->V, k->Vp, 1.0f / (float)k->N, NULL);
    st_down(be, out[0], losses, k->out_n[0]); st_down(be, out[1], lg, k->out_n[1]);
    be->i->free(be, lg); be->i->free(be, losses); be->i->free(be, (float *)tg);
}
static void op_adamw(zt_backend *be, st_case *k, float **out) {
    float *p = st_up(be, k->in[0], k->in_n[0]), *g = st_up(be, k->in[1], k->in_n[1]), *m = st_up(be, k->in[2], k->in_n[2]);
    float *v = st_up(be, k->in[3], k->in_n[3]);
    be->i->adamw(be, p, g, m, v, k->in_n[0], 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.19f, 0.0975f, 0.5f);
    st_down(be, out[0], p, k->out_n[0]); st_down(be, out[1], m, k->out_n[1]); st_down(be, out[2], v, k->out_n[2]);
    be->i->free(be, p); be->i->free(be, g); be->i->free(be, m); be->i->free(be, v);
}
/* adamw_multi over the segments of st_adamw_segs (gaps between them: those elements must stay as they were) */
static const zt_adamw_seg st_adamw_segs[] = {
    {0, 1, 0.1f}, {1, 0, 0.1f}, {5, 3000, 0.0f}, {3005, 4001, 0.1f}, {7006, 2999, 0.05f}, {10005, 1, 0.0f}};
static void op_adamw_multi(zt_backend *be, st_case *k, float **out) {
    float *p = st_up(be, k->in[0], k->in_n[0]), *g = st_up(be, k->in[1], k->in_n[1]), *m = st_up(be, k->in[2], k->in_n[2]);
    float *v = st_up(be, k->in[3], k->in_n[3]);
    const int ns = (int)(sizeof st_adamw_segs / sizeof st_adamw_segs[0]);
    float hyper[ZT_HYPER_N] = {1e-3f, 0.19f, 0.0975f, 0.5f, 1.0f};
    float *h = st_up(be, hyper, ZT_HYPER_N);
    be->i->adamw_multi(be, p, g, m, v, st_adamw_segs, ns, 0.9f, 0.95f, 1e-8f, h);
    hyper[ZT_HYPER_GRAD_SCALE] = zt_int_bits_to_float(0x7fc00000); /* a skipped step changes nothing */
    be->i->to_device(be, h, hyper, sizeof hyper);
    be->i->adamw_multi(be, p, g, m, v, st_adamw_segs, ns, 0.9f, 0.95f, 1e-8f, h);
    st_down(be, out[0], p, k->out_n[0]); st_down(be, out[1], m, k->out_n[1]); st_down(be, out[2], v, k->out_n[2]);
    be->i->free(be, p); be->i->free(be, g); be->i->free(be, m); be->i->free(be, v); be->i->free(be, h);
}
/* clip_scale over the squares of the inputs as chunk sums (flag: 0 clipped, 1 clip off, 2 an infinite sum with
   the skip: NaN); out: the norm, the gradient scale (either not finite: written as -1) */
static void op_clip_scale(zt_backend *be, st_case *k, float **out) {
    const size_t n = k->in_n[0];
    double *hs = zt_malloc(n * sizeof(double)), norm;
    for (size_t i = 0; i < n; i++) hs[i] = (double)k->in[0][i] * k->in[0][i];
    if (k->flag == 2) hs[n / 2] = HUGE_VAL;
    double *sums = be->i->alloc(be, n * sizeof(double)), *nd = be->i->alloc(be, sizeof(double));
    be->i->to_device(be, sums, hs, n * sizeof(double));
    float hyper[ZT_HYPER_N] = {0, 0, 0, 1.0f, 1024.0f};
    float *h = st_up(be, hyper, ZT_HYPER_N);
    be->i->clip_scale(be, h, nd, sums, n, k->flag == 1 ? 0.0 : 1e-3, 1);
    be->i->to_host(be, hyper, h, sizeof hyper);
    be->i->to_host(be, &norm, nd, sizeof norm);
    out[0][0] = isfinite(norm) ? (float)norm : -1.0f;
    out[1][0] = isnan(hyper[ZT_HYPER_GRAD_SCALE]) ? -1.0f : hyper[ZT_HYPER_GRAD_SCALE];
    free(hs);
    be->i->free(be, sums); be->i->free(be, nd); be->i->free(be, h);
}
static void op_sumsq(zt_backend *be, st_case *k, float **out) {
    const size_t chunk = 4096, nc = (k->in_n[0] + chunk - 1) / chunk;
    float *x = st_up(be, k->in[0], k->in_n[0]);
    double *o = be->i->alloc(be, nc * sizeof(double));
    double *h = zt_malloc(nc * sizeof(double));
    be->i->sumsq_chunks(be, o, x, k->in_n[0], chunk);
    be->i->to_host(be, h, o, nc * sizeof(double));
    for (size_t c = 0; c < nc; c++) out[0][c] = (float)h[c];
    free(h);
    be->i->free(be, x); be->i->free(be, o);
}

static void op_dropout(zt_backend *be, st_case *k, float **out) {
    float *x = st_up(be, k->in[0], k->in_n[0]), *y = st_up(be, NULL, k->in_n[0]);
    be->i->dropout(be, y, x, k->in_n[0], 0.25f, 0x5eedull, NULL);
    be->i->dropout(be, x, x, k->in_n[0], 0.5f, 77, NULL); /* in place */
    st_down(be, out[0], y, k->out_n[0]); st_down(be, out[1], x, k->out_n[1]);
    be->i->free(be, x); be->i->free(be, y);
}
static void op_dequant(zt_backend *be, st_case *k, float **out) {
    /* in: the encoded blob (as 32-bit words); flag = zt_quant_fmt, M x N the matrix */
    float *blob = st_up(be, k->in[0], k->in_n[0]), *w = st_up(be, NULL, (size_t)k->M * k->N);
    be->i->dequant(be, w, blob, k->flag, (size_t)k->M, (size_t)k->N);
    st_down(be, out[0], w, k->out_n[0]);
    be->i->free(be, blob); be->i->free(be, w);
}

const char *zt_selftest_prec_name(int p) { return p == ZT_PREC_BF16 ? "bf16" : p == ZT_PREC_FP16 ? "fp16" : "fp32"; }

/* ------------------------------------------------------------------ the op table */

/* training-like shapes with awkward sizes: C not a multiple of 32, T not of the block */
enum { SB = 2, ST = 19, SC = 72, SNH = 3, SN = SB * ST, SV = 251, SVP = 256 };

/* each case's builder: name, thresholds, shape, inputs (drawn from st_rnd and st_ints in order) and outputs; v = the variant */
typedef void (*st_build)(st_case *k, int v);

static void b_matmul(st_case *k, int f) {
    static const char *const nm[4] = {"matmul[NN]", "matmul[TN]", "matmul[NT]", "matmul[TT]"};
    *k = (st_case){.name = nm[f], .nmse_max = 1e-12f, .rel_max = 2e-6f, .flag = f, .M = 37, .N = 45, .K = 70};
    st_add_in(k, st_rnd((size_t)k->M * k->K, 1), (size_t)k->M * k->K);
    st_add_in(k, st_rnd((size_t)k->K * k->N, 1), (size_t)k->K * k->N);
    st_add_in(k, st_rnd((size_t)k->M * k->N, 1), (size_t)k->M * k->N);
    st_add_out(k, "c", (size_t)k->M * k->N);
}
/* matmul_ld: matmul's shape on column slices of wider arrays (a LoRA site's slice of the fused q|k|v projection):
   each operand starts a few columns into rows that run past its width; the output is all of c, so the columns
   outside the slice must come back as they went in */
static void matmul_ld_ld(const st_case *k, int ld[3], int off[3]) {
    const int ta = k->flag & 1, tb = (k->flag >> 1) & 1;
    off[0] = 3; off[1] = 1; off[2] = 2;
    ld[0] = (ta ? k->M : k->K) + 3 + 5;
    ld[1] = (tb ? k->K : k->N) + 1 + 12;
    ld[2] = k->N + 2 + 7;
}
static void b_matmul_ld(st_case *k, int f) {
    static const char *const nm[4] = {"matmul_ld[NN]", "matmul_ld[TN]", "matmul_ld[NT]", "matmul_ld[TT]"};
    *k = (st_case){.name = nm[f], .nmse_max = 1e-12f, .rel_max = 2e-6f, .flag = f, .M = 37, .N = 45, .K = 70};
    int ld[3], off[3];
    matmul_ld_ld(k, ld, off);
    const size_t na = (size_t)(f & 1 ? k->K : k->M) * ld[0], nb = (size_t)(f & 2 ? k->N : k->K) * ld[1],
                 nc = (size_t)k->M * ld[2];
    st_add_in(k, st_rnd(na, 1), na);
    st_add_in(k, st_rnd(nb, 1), nb);
    st_add_in(k, st_rnd(nc, 1), nc);
    st_add_out(k, "c", nc);
}
static void b_linear_fwd(st_case *k, int v) {
    (void)v;
    *k = (st_case){.name = "linear_fwd", .nmse_max = 1e-12f, .rel_max = 2e-6f, .N = SN, .C = SC, .OC = 3 * SC};
    st_add_in(k, st_rnd((size_t)SN * SC, 1), (size_t)SN * SC);
    st_add_in(k, st_rnd((size_t)SC * 3 * SC, 0.1f), (size_t)SC * 3 * SC);
    st_add_in(k, st_rnd((size_t)3 * SC, 0.1f), (size_t)3 * SC);
    st_add_out(k, "out", (size_t)SN * 3 * SC);
}
static void b_linear_bwd(st_case *k, int v) {
    (void)v;
    *k = (st_case){.name = "linear_bwd", .nmse_max = 1e-12f, .rel_max = 2e-6f, .N = SN, .C = 4 * SC, .OC = SC};
    st_add_in(k, st_rnd((size_t)SN * SC, 1), (size_t)SN * SC);
    st_add_in(k, st_rnd((size_t)SN * 4 * SC, 1), (size_t)SN * 4 * SC);
    st_add_in(k, st_rnd((size_t)4 * SC * SC, 0.1f), (size_t)4 * SC * SC);
    st_add_in(k, st_rnd((size_t)SN * 4 * SC, 1), (size_t)SN * 4 * SC);
    st_add_out(k, "dinp", (size_t)SN * 4 * SC);
    st_add_out(k, "dw", (size_t)4 * SC * SC);
    st_add_out(k, "dbias", (size_t)SC);
}
static void b_layernorm_fwd(st_case *k, int v) {
    (void)v;
    *k = (st_case){.name = "layernorm_fwd", .nmse_max = 1e-12f, .rel_max = 2e-6f, .N = SN, .C = SC};
    st_add_in(k, st_rnd((size_t)SN * SC, 2), (size_t)SN * SC);
    st_add_in(k, st_rnd((size_t)SC, 1), (size_t)SC);
    st_add_in(k, st_rnd((size_t)SC, 1), (size_t)SC);
    st_add_out(k, "out", (size_t)SN * SC);
    st_add_out(k, "mean", (size_t)SN);
    st_add_out(k, "rstd", (size_t)SN);
}
/* BERT's epsilon on rows of variance ~1e-10, where it decides rstd (GPT-2's 1e-5 would give 1/300 of it) */
static void b_layernorm_fwd_eps(st_case *k, int v) {
    (void)v;
    *k = (st_case){.name = "layernorm_fwd[eps 1e-12]", .nmse_max = 1e-12f, .rel_max = 2e-6f, .N = SN, .C = SC,
                   .flag = 1};
    st_add_in(k, st_rnd((size_t)SN * SC, 1e-5f), (size_t)SN * SC);
    st_add_in(k, st_rnd((size_t)SC, 1), (size_t)SC);
    st_add_in(k, st_rnd((size_t)SC, 1), (size_t)SC);
    st_add_out(k, "out", (size_t)SN * SC);
    st_add_out(k, "mean", (size_t)SN);
    st_add_out(k, "rstd", (size_t)SN);
}
static void b_residual_layernorm_fwd(st_case *k, int v) {
    *k = (st_case){.name = v ? "residual_layernorm_fwd[bf16 residual]" : "residual_layernorm_fwd", .nmse_max = 1e-12f,
                   .rel_max = 2e-6f, .N = SN, .C = SC, .flag = v ? ZT_PREC_BF16 : ZT_PREC_FP32};
    st_add_in(k, st_rnd((size_t)SN * SC, 2), (size_t)SN * SC);
    st_add_in(k, st_rnd((size_t)SN * SC, 1), (size_t)SN * SC);
    st_add_in(k, st_rnd((size_t)SC, 1), (size_t)SC);
    st_add_in(k, st_rnd((size_t)SC, 1), (size_t)SC);
    st_add_out(k, "res", (size_t)SN * SC);
    st_add_out(k, "out", (size_t)SN * SC);
    st_add_out(k, "mean", (size_t)SN);
    st_add_out(k, "rstd", (size_t)SN);
}
static void b_layernorm_bwd(st_case *k, int v) {
    (void)v;
    *k = (st_case){.name = "layernorm_bwd", .nmse_max = 1e-12f, .rel_max = 2e-6f, .N = SN, .C = SC};
    st_add_in(k, st_rnd((size_t)SN * SC, 1), (size_t)SN * SC);
    st_add_in(k, st_rnd((size_t)SN * SC, 2), (size_t)SN * SC);
    st_add_in(k, st_rnd((size_t)SC, 1), (size_t)SC);
    st_add_in(k, st_rnd((size_t)SN * SC, 1), (size_t)SN * SC);
    st_add_out(k, "dinp", (size_t)SN * SC);
    st_add_out(k, "dw", (size_t)SC);
    st_add_out(k, "db", (size_t)SC);
}
static void b_attention_fwd(st_case *k, int v) {
    (void)v;
    *k = (st_case){.name = "attention_fwd", .nmse_max = 1e-12f, .rel_max = 2e-6f, .B = SB, .T = ST, .C = SC, .NH = SNH};
    st_add_in(k, st_rnd((size_t)SN * 3 * SC, 1), (size_t)SN * 3 * SC);
    st_add_out(k, "out", (size_t)SN * SC);
    st_add_out(k, "att", (size_t)SB * SNH * ST * ST);
}
static void b_attention_bwd(st_case *k, int v) {
    (void)v;
    *k = (st_case){.name = "attention_bwd", .nmse_max = 1e-12f, .rel_max = 2e-6f, .B = SB, .T = ST, .C = SC, .NH = SNH};
    st_add_in(k, st_rnd((size_t)SN * 3 * SC, 1), (size_t)SN * 3 * SC);
    st_add_in(k, st_rnd((size_t)SN * SC, 1), (size_t)SN * SC);
    st_add_out(k, "dqkv", (size_t)SN * 3 * SC);
}
/* the fused attention: head sizes 64 (v 0) and 32 (v 1), several query / key tiles (32 and 64) and a partial
   last one; v 2, 3: grouped-query attention (hs 64, 4 query heads on 2 key/value heads; hs 32, multi-query);
   forward and backward draw their inputs in this order (fwd 0, bwd 0, fwd 1, bwd 1) */
static void fused_shape(st_case *k, int v) {
    static const int B[4] = {2, 2, 2, 1}, T[4] = {150, 77, 100, 77}, NH[4] = {2, 3, 4, 4}, NKV[4] = {0, 0, 2, 1},
                     C[4] = {128, 96, 256, 128};
    k->B = B[v]; k->T = T[v]; k->NH = NH[v]; k->NKV = NKV[v]; k->C = C[v];
}
/* bf16 / fp16: 8 units of the precision. The CUDA backend runs the fused attention on tensor cores there, rounding
   p and ds to the precision inside the op as flash attention does (cuda/kernels_attn_tc.cu): measured under the
   harness up to 1.7 units (max rel: bf16 out 3.3e-3, dqkv 5.1e-3; fp16 4.1e-4, 8.3e-4) */
#define FUSED_UNITS16 8.0f
static void b_attention_fused_fwd(st_case *k, int v) {
    static const char *const nm[4] = {"attention_fused_fwd", "attention_fused_fwd[hs32]", "attention_fused_fwd[gqa]",
                                      "attention_fused_fwd[mqa,hs32]"};
    *k = (st_case){.name = nm[v], .nmse_max = 1e-12f, .rel_max = 2e-6f, .units16 = FUSED_UNITS16};
    fused_shape(k, v);
    const size_t n = (size_t)k->B * k->T * k->C, nq = (size_t)k->B * k->T * qkv_width(k);
    st_add_in(k, st_rnd(nq, 1), nq);
    st_add_out(k, "out", n);
}
static void b_attention_fused_bwd(st_case *k, int v) {
    static const char *const nm[4] = {"attention_fused_bwd", "attention_fused_bwd[hs32]", "attention_fused_bwd[gqa]",
                                      "attention_fused_bwd[mqa,hs32]"};
    *k = (st_case){.name = nm[v], .nmse_max = 1e-12f, .rel_max = 2e-6f, .units16 = FUSED_UNITS16};
    fused_shape(k, v);
    const size_t n = (size_t)k->B * k->T * k->C, nq = (size_t)k->B * k->T * qkv_width(k);
    st_add_in(k, st_rnd(nq, 1), nq);
    st_add_in(k, st_rnd(n, 1), n);
    st_add_out(k, "dqkv", nq);
}
static void b_attention_decode(st_case *k, int v) {
    (void)v;
    *k = (st_case){.name = "attention_decode", .nmse_max = 1e-12f, .rel_max = 2e-6f, .T = ST, .C = SC, .NH = SNH};
    st_add_in(k, st_rnd((size_t)ST * 3 * SC, 1), (size_t)ST * 3 * SC);
    st_add_out(k, "out", (size_t)ST * SC);
}
/* grouped-query attention (materialised and decoding): v 0 = 6 query heads on 2 key/value heads, v 1 = multi-query */
static void gqa_shape(st_case *k, int v) {
    k->B = SB; k->T = ST; k->C = SC; k->NH = 6; k->NKV = v ? 1 : 2;
}
static void b_attention_fwd_gqa(st_case *k, int v) {
    *k = (st_case){.name = v ? "attention_fwd[mqa]" : "attention_fwd[gqa]", .nmse_max = 1e-12f, .rel_max = 2e-6f};
    gqa_shape(k, v);
    const size_t nq = (size_t)SN * qkv_width(k);
    st_add_in(k, st_rnd(nq, 1), nq);
    st_add_out(k, "out", (size_t)SN * SC);
    st_add_out(k, "att", (size_t)SB * k->NH * ST * ST);
}
static void b_attention_bwd_gqa(st_case *k, int v) {
    *k = (st_case){.name = v ? "attention_bwd[mqa]" : "attention_bwd[gqa]", .nmse_max = 1e-12f, .rel_max = 2e-6f};
    gqa_shape(k, v);
    const size_t nq = (size_t)SN * qkv_width(k);
    st_add_in(k, st_rnd(nq, 1), nq);
    st_add_in(k, st_rnd((size_t)SN * SC, 1), (size_t)SN * SC);
    st_add_out(k, "dqkv", nq);
}
static void b_attention_decode_gqa(st_case *k, int v) {
    *k = (st_case){.name = v ? "attention_decode[mqa]" : "attention_decode[gqa]", .nmse_max = 1e-12f, .rel_max = 2e-6f};
    gqa_shape(k, v);
    k->B = 0;
    const size_t nq = (size_t)ST * qkv_width(k);
    st_add_in(k, st_rnd(nq, 1), nq);
    st_add_out(k, "out", (size_t)ST * SC);
}
static void b_rmsnorm_fwd(st_case *k, int v) {
    (void)v;
    *k = (st_case){.name = "rmsnorm_fwd", .nmse_max = 1e-12f, .rel_max = 2e-6f, .N = SN, .C = SC};
    st_add_in(k, st_rnd((size_t)SN * SC, 2), (size_t)SN * SC);
    st_add_in(k, st_rnd((size_t)SC, 1), (size_t)SC);
    st_add_out(k, "out", (size_t)SN * SC);
    st_add_out(k, "rstd", (size_t)SN);
}
static void b_rmsnorm_bwd(st_case *k, int v) {
    (void)v;
    *k = (st_case){.name = "rmsnorm_bwd", .nmse_max = 1e-12f, .rel_max = 2e-6f, .N = SN, .C = SC};
    st_add_in(k, st_rnd((size_t)SN * SC, 1), (size_t)SN * SC);
    st_add_in(k, st_rnd((size_t)SN * SC, 2), (size_t)SN * SC);
    st_add_in(k, st_rnd((size_t)SC, 1), (size_t)SC);
    st_add_in(k, st_rnd((size_t)SN * SC, 1), (size_t)SN * SC);
    st_add_out(k, "dinp", (size_t)SN * SC);
    st_add_out(k, "dw", (size_t)SC);
}
/* rope on grouped-query qkv rows from position 3 (v 1: the inverse, rope's backward); cs as the model makes it */
static void b_rope(st_case *k, int inv) {
    *k = (st_case){.name = inv ? "rope[inverse]" : "rope", .nmse_max = 1e-13f, .rel_max = 1e-6f, .B = SB, .T = ST,
                   .C = SC, .NH = 6, .NKV = 2, .pos0 = 3, .flag = inv};
    const int hs = SC / 6, half = hs / 2, maxT = 3 + ST;
    const size_t nq = (size_t)SN * qkv_width(k);
    float *cs = zt_malloc((size_t)maxT * hs * sizeof(float));
    for (int p = 0; p < maxT; p++)
        for (int i = 0; i < half; i++) {
            const double a = p * pow(10000.0, -2.0 * i / hs);
            cs[((size_t)p * half + i) * 2] = (float)cos(a);
            cs[((size_t)p * half + i) * 2 + 1] = (float)sin(a);
        }
    st_add_in(k, st_rnd(nq, 1), nq);
    st_add_in(k, cs, (size_t)maxT * hs);
    st_add_out(k, "qkv", nq);
}
static void b_swiglu_fwd(st_case *k, int v) {
    (void)v;
    *k = (st_case){.name = "swiglu_fwd", .nmse_max = 1e-13f, .rel_max = 1e-6f, .N = SN, .I = 2 * SC + 5};
    const size_t n = (size_t)SN * 2 * k->I;
    st_add_in(k, st_rnd(n, 3), n);
    st_add_out(k, "out", n / 2);
}
static void b_swiglu_bwd(st_case *k, int v) {
    (void)v;
    *k = (st_case){.name = "swiglu_bwd", .nmse_max = 1e-13f, .rel_max = 1e-6f, .N = SN, .I = 2 * SC + 5};
    const size_t n = (size_t)SN * 2 * k->I;
    st_add_in(k, st_rnd(n, 3), n);
    st_add_in(k, st_rnd(n / 2, 1), n / 2);
    st_add_out(k, "dinp", n);
}
static void b_gemv(st_case *k, int wt) {
    *k = (st_case){.name = wt ? "gemv[w_t]" : "gemv", .nmse_max = 1e-12f, .rel_max = 2e-6f, .C = SC,
                   .OC = wt ? SVP : 3 * SC, .flag = wt};
    st_add_in(k, st_rnd((size_t)SC, 1), (size_t)SC);
    st_add_in(k, st_rnd((size_t)SC * k->OC, 0.1f), (size_t)SC * k->OC);
    st_add_in(k, st_rnd((size_t)k->OC, 0.1f), (size_t)k->OC);
    st_add_out(k, "y", (size_t)k->OC);
}
static void b_gelu(st_case *k, int v) {
    (void)v;
    *k = (st_case){.name = "gelu", .nmse_max = 1e-13f, .rel_max = 1e-6f};
    const size_t n = (size_t)SN * 4 * SC + 7;
    st_add_in(k, st_rnd(n, 2), n);
    st_add_in(k, st_rnd(n, 1), n);
    st_add_out(k, "fwd", n);
    st_add_out(k, "bwd", n);
}
static void b_add_acc(st_case *k, int v) {
    (void)v;
    *k = (st_case){.name = "add, accumulate", .nmse_max = 0, .rel_max = 0};
    const size_t n = (size_t)SN * SC + 5;
    st_add_in(k, st_rnd(n, 1), n);
    st_add_in(k, st_rnd(n, 1), n);
    st_add_out(k, "add", n);
    st_add_out(k, "acc", n);
}
static void b_embed(st_case *k, int v) {
    (void)v;
    *k = (st_case){.name = "embed_fwd, embed_bwd", .nmse_max = 1e-13f, .rel_max = 1e-6f, .B = SB, .T = ST, .C = SC};
    st_add_in_int(k, st_ints((size_t)SN, 13), (size_t)SN); /* few distinct tokens: repeats in the scatter */
    st_add_in(k, st_rnd((size_t)SVP * SC, 1), (size_t)SVP * SC);
    st_add_in(k, st_rnd((size_t)ST * SC, 1), (size_t)ST * SC);
    st_add_in(k, st_rnd((size_t)SN * SC, 1), (size_t)SN * SC);
    st_add_in(k, st_rnd((size_t)SVP * SC, 1), (size_t)SVP * SC);
    st_add_out(k, "out", (size_t)SN * SC);
    st_add_out(k, "dwte", (size_t)SVP * SC);
    st_add_out(k, "dwpe", (size_t)ST * SC);
}
static void b_softmax_xent(st_case *k, int v) {
    (void)v;
    *k = (st_case){.name = "softmax_xent", .nmse_max = 1e-12f, .rel_max = 2e-6f, .N = SN, .V = SV, .Vp = SVP};
    st_add_in(k, st_rnd((size_t)SN * SVP, 3), (size_t)SN * SVP);
    st_add_in_int(k, st_ints((size_t)SN, SV), (size_t)SN);
    st_add_out(k, "losses", (size_t)SN);
    st_add_out(k, "dlogits", (size_t)SN * SVP);
}
/* loss masks: about a third of the targets ignored (-1, and one -100), whose rows' logits are never read: their
   losses and dlogits rows must be exact zeros on both backends, the others as softmax_xent's */
static void b_softmax_xent_masked(st_case *k, int v) {
    b_softmax_xent(k, v);
    k->name = "softmax_xent[masked]";
    int32_t *tg = (int32_t *)k->in[1];
    for (int n = 0; n < SN; n++)
        if (st_next() % 3 == 0) tg[n] = -1;
    tg[SN - 1] = -100;
}
static void b_adamw(st_case *k, int v) {
    (void)v;
    *k = (st_case){.name = "adamw", .nmse_max = 1e-13f, .rel_max = 1e-6f, .fp32_out = 1};
    const size_t n = 10007;
    st_add_in(k, st_rnd(n, 1), n);
    st_add_in(k, st_rnd(n, 1), n);
    st_add_in(k, st_rnd(n, 0.1f), n);
    float *sq = st_rnd(n, 0.1f);
    for (size_t i = 0; i < n; i++) sq[i] = sq[i] * sq[i];
    st_add_in(k, sq, n);
    st_add_out(k, "param", n);
    st_add_out(k, "exp_avg", n);
    st_add_out(k, "exp_avg_sq", n);
}
/* adamw's inputs; op_adamw_multi's segments (several decays, an empty and two 1-element segments, gaps) */
static void b_adamw_multi(st_case *k, int v) {
    b_adamw(k, v);
    k->name = "adamw_multi";
}
/* the same counter-based mask on every backend: bit-identical */
static void b_dropout(st_case *k, int v) {
    (void)v;
    *k = (st_case){.name = "dropout", .nmse_max = 0, .rel_max = 0};
    const size_t n = 30011;
    st_add_in(k, st_rnd(n, 1), n);
    st_add_out(k, "p0.25", n);
    st_add_out(k, "p0.5_inplace", n);
}
/* QLoRA's base weights: the same decoding on every backend (bit-identical) */
static void b_dequant(st_case *k, int f) {
    static const char *const nm[3] = {"dequant[nf4]", "dequant[nf4_dq]", "dequant[int8]"};
    *k = (st_case){.name = nm[f], .nmse_max = 0, .rel_max = 0, .fp32_out = 1, .int_in = 1, .flag = f, .M = 67, .N = 300};
    const zt_quant_layout L = zt_quant_plan((zt_quant_fmt)f, (size_t)k->M, (size_t)k->N);
    float *w = st_rnd(L.n, 0.1f), *blob = zt_calloc(L.bytes / 4, sizeof(float));
    char e[128];
    if (zt_quant_encode(&L, w, blob, e, sizeof e)) zt_panic(__FILE__, __LINE__, "%s", e);
    free(w);
    st_add_in(k, blob, L.bytes / 4);
    st_add_out(k, "w", L.n);
}
static void b_clip_scale(st_case *k, int v) {
    static const char *const nm[3] = {"clip_scale", "clip_scale[off]", "clip_scale[inf]"};
    *k = (st_case){.name = nm[v], .nmse_max = 0, .rel_max = 0, .fp32_out = 1, .flag = v};
    const size_t n = 30011;
    st_add_in(k, st_rnd(n, 3), n);
    st_add_out(k, "norm", 1);
    st_add_out(k, "grad_scale", 1);
}
static void b_sumsq(st_case *k, int v) {
    (void)v;
    *k = (st_case){.name = "sumsq_chunks", .nmse_max = 1e-13f, .rel_max = 1e-6f, .fp32_out = 1};
    const size_t n = 3 * 4096 + 1001;
    st_add_in(k, st_rnd(n, 1), n);
    st_add_out(k, "chunks", 4);
}

/* which backends a row needs: every backend has the required slots; the others are optional. The Llama set
   (rmsnorm_*, rope, swiglu_*) is optional as a whole, and a backend that has it takes NKV < NH in its attention
   slots (iface/backend.h): the grouped-query rows need it on the device (and decoding / the fused slots as well) */
enum { NEED_NONE, NEED_FUSED_DEV, NEED_DECODE, NEED_GEMV, NEED_LLAMA, NEED_LLAMA_DECODE, NEED_LLAMA_FUSED_DEV,
       NEED_MATMUL_LD, NEED_ADAMW_MULTI, NEED_ENCODER, NEED_STORE16 };

typedef struct st_row {
    st_build build;
    st_fn run;
    int variants;
    int need;
    const char *what; /* named in the "not supported" line */
} st_row;

/* the table, in the order the rows run (the seeded inputs are drawn in this order) */
static const st_row g_rows[] = {
    {b_matmul, op_matmul, 4, NEED_NONE, NULL},
    {b_linear_fwd, op_linear_fwd, 1, NEED_NONE, NULL},
    {b_linear_bwd, op_linear_bwd, 1, NEED_NONE, NULL},
    {b_layernorm_fwd, op_layernorm_fwd, 1, NEED_NONE, NULL},
    {b_layernorm_bwd, op_layernorm_bwd, 1, NEED_NONE, NULL},
    {b_attention_fwd, op_attention_fwd, 1, NEED_NONE, NULL},
    {b_attention_bwd, op_attention_bwd, 1, NEED_NONE, NULL},
    {NULL, NULL, 2, NEED_FUSED_DEV, NULL}, /* attention_fused_fwd / _bwd, interleaved per head size (run_ops) */
    {b_attention_decode, op_attention_decode, 1, NEED_DECODE, NULL},
    {b_gemv, op_gemv, 2, NEED_GEMV, NULL},
    {b_gelu, op_gelu, 1, NEED_NONE, NULL},
    {b_add_acc, op_add_acc, 1, NEED_NONE, NULL},
    {b_embed, op_embed, 1, NEED_NONE, NULL},
    {b_softmax_xent, op_softmax_xent, 1, NEED_NONE, NULL},
    {b_adamw, op_adamw, 1, NEED_NONE, NULL},
    {b_dropout, op_dropout, 1, NEED_NONE, NULL},
    {b_dequant, op_dequant, 3, NEED_NONE, NULL},
    {b_sumsq, op_sumsq, 1, NEED_NONE, NULL},
    /* the Llama family's: last, so the rows above draw the inputs they always drew */
    {b_rmsnorm_fwd, op_rmsnorm_fwd, 1, NEED_LLAMA, "rmsnorm_fwd"},
    {b_rmsnorm_bwd, op_rmsnorm_bwd, 1, NEED_LLAMA, "rmsnorm_bwd"},
    {b_rope, op_rope, 2, NEED_LLAMA, "rope"},
    {b_swiglu_fwd, op_swiglu_fwd, 1, NEED_LLAMA, "swiglu_fwd"},
    {b_swiglu_bwd, op_swiglu_bwd, 1, NEED_LLAMA, "swiglu_bwd"},
    {b_attention_fwd_gqa, op_attention_fwd, 2, NEED_LLAMA, "attention_fwd[gqa]"},
    {b_attention_bwd_gqa, op_attention_bwd, 2, NEED_LLAMA, "attention_bwd[gqa]"},
    {b_attention_decode_gqa, op_attention_decode, 2, NEED_LLAMA_DECODE, "attention_decode[gqa]"},
    {NULL, NULL, 2, NEED_LLAMA_FUSED_DEV, "attention_fused_*[gqa]"}, /* fused fwd / bwd [gqa], [mqa,hs32] (run_ops) */
    /* strided sub-matrices (LoRA on column slices): after every row above, which draw what they always drew */
    {b_matmul_ld, op_matmul_ld, 4, NEED_MATMUL_LD, "matmul_ld"},
    /* loss masks (ignored targets): last, for the same reason */
    {b_softmax_xent_masked, op_softmax_xent, 1, NEED_NONE, NULL},
    /* all segments of a shard in one call (optional slot): last, for the same reason */
    {b_adamw_multi, op_adamw_multi, 1, NEED_ADAMW_MULTI, "adamw_multi"},
    /* the residual add + LayerNorm slot (optional; without it the calls it fuses): last, for the same reason */
    {b_residual_layernorm_fwd, op_residual_layernorm_fwd, 2, NEED_NONE, NULL},
    /* the encoders' (BERT, RoBERTa; selftest_encoder.c): LayerNorm's epsilon, then the encoder family's slots, optional
       as a set; last, for the same reason */
    {b_layernorm_fwd_eps, op_layernorm_fwd, 1, NEED_NONE, NULL},
    {st_b_attention_bidir_fwd, st_op_attention_bidir_fwd, 2, NEED_ENCODER, "attention_bidir_fwd"},
    {st_b_attention_bidir_bwd, st_op_attention_bidir_bwd, 2, NEED_ENCODER, "attention_bidir_bwd"},
    {st_b_gelu_erf, st_op_gelu_erf, 1, NEED_ENCODER, "gelu_erf_fwd, gelu_erf_bwd"},
    {st_b_bias, st_op_bias, 1, NEED_ENCODER, "bias_add, bias_grad"},
    {st_b_argmax_rows, st_op_argmax_rows, 1, NEED_ENCODER, "argmax_rows"},
    /* 2-byte logits (bf16 / fp16 only; selftest_store16.c): last, for the same reason */
    {st_b_matmul16, st_op_matmul16, 3, NEED_STORE16, "matmul16"},
    {st_b_xent16, st_op_xent16, 1, NEED_STORE16, "softmax_xent16"},
    /* the step's gradient scale on the device: last, for the same reason */
    {b_clip_scale, op_clip_scale, 3, NEED_NONE, NULL},
};

static int has_llama(const zt_backend *be) {
    const zt_backend_i *f = be->i;
    return f->rmsnorm_fwd && f->rmsnorm_bwd && f->rope && f->swiglu_fwd && f->swiglu_bwd;
}

/* the encoder family's slots (iface/backend.h), each optional, checked as a set */
static int has_encoder(const zt_backend_i *f) {
    return f->attention_bidir_fwd && f->attention_bidir_bwd && f->gelu_erf_fwd && f->gelu_erf_bwd && f->bias_add &&
           f->bias_grad && f->argmax_rows;
}

static int row_supported(const st_row *r, const zt_backend *cpu, const zt_backend *dev) {
    switch (r->need) {
    case NEED_FUSED_DEV: return dev->i->attention_fused_fwd != NULL;
    case NEED_DECODE: return cpu->i->attention_decode && dev->i->attention_decode;
    case NEED_GEMV: return cpu->i->gemv && dev->i->gemv;
    case NEED_LLAMA: return has_llama(cpu) && has_llama(dev);
    case NEED_LLAMA_DECODE: return has_llama(cpu) && has_llama(dev) && cpu->i->attention_decode && dev->i->attention_decode;
    case NEED_LLAMA_FUSED_DEV: return has_llama(cpu) && has_llama(dev) && dev->i->attention_fused_fwd != NULL;
    case NEED_MATMUL_LD: return cpu->i->matmul_ld && dev->i->matmul_ld;
    case NEED_ADAMW_MULTI: return cpu->i->adamw_multi && dev->i->adamw_multi;
    case NEED_ENCODER: return has_encoder(cpu->i) && has_encoder(dev->i);
    case NEED_STORE16: return cpu->i->matmul16 && dev->i->matmul16 && cpu->i->softmax_xent16 && dev->i->softmax_xent16;
    default: return 1;
    }
}

static int run_case(st_build build, st_fn run, int v, zt_backend *cpu, zt_backend *dev, int prec, FILE *out) {
    st_case k;
    build(&k, v);
    return st_check_case(&k, run, cpu, dev, prec, out);
}

int zt_selftest_ops(zt_backend *cpu, zt_backend *dev, int prec, FILE *out) {
    if (dev->i->set_precision) dev->i->set_precision(dev, prec); /* bf16/fp16: 2-byte GEMM operands */
    st_seed(1234);
    int fails = 0;
    if (out)
        fprintf(out, "%-26s %-8s %9s  %9s %9s  %9s %9s  %-4s  %s\n%-26s %-8s %9s  %9s %9s  %9s %9s  %-4s\n", "op", "output",
                "elements", "nmse", "limit", "max rel", "limit", "det", "", "", "", "", "", zt_selftest_prec_name(prec), "",
                zt_selftest_prec_name(prec), "");
    for (size_t i = 0; i < sizeof g_rows / sizeof g_rows[0]; i++) {
        const st_row *r = &g_rows[i];
        if (r->need == NEED_STORE16 && prec == ZT_PREC_FP32) continue; /* 2-byte storage: bf16 / fp16 runs only */
        if (!row_supported(r, cpu, dev)) {
            if (r->need == NEED_DECODE && out)
                fprintf(out, "%-26s not supported by this backend (optional)\n", "attention_decode");
            else if (r->what && out && (r->need != NEED_LLAMA_FUSED_DEV || dev->i->attention_fused_fwd))
                fprintf(out, "%-26s not supported by this backend (optional)\n", r->what);
            continue;
        }
        for (int v = 0; v < r->variants; v++) {
            if (r->need == NEED_FUSED_DEV || r->need == NEED_LLAMA_FUSED_DEV) {
                const int fv = r->need == NEED_LLAMA_FUSED_DEV ? 2 + v : v;
                fails += run_case(b_attention_fused_fwd, op_attention_fused_fwd, fv, cpu, dev, prec, out);
                fails += run_case(b_attention_fused_bwd, op_attention_fused_bwd, fv, cpu, dev, prec, out);
            } else {
                fails += run_case(r->build, r->run, v, cpu, dev, prec, out);
            }
        }
    }
    return fails;
}
