// cuda_backend_ops.cu — the CUDA backend's slots that launch kernels (src/iface/backend.h's ops): each a call of
// cuda_ops.h's launch functions on the backend's stream, through the kept op and its fused round_to and the mirrors
// of cuda_backend.cu (whose file comment describes both); AdamW's device segment tables.
#include "cuda_backend_internal.h"

#include "iface/backend.h"

namespace ZT_CU_NS {
namespace cub {

// ------------------------------------------------------------------------------------------ ops

#define S stream_of(be)

// floats of qkv (B, T, C + 2 NKV hs) and of the attention's probabilities (B, NH, T, T)
static size_t qkv_floats(int B, int T, int C, int NH, int NKV) {
    return (size_t)B * T * (C + 2 * (size_t)NKV * (C / NH));
}
static size_t att_floats(int B, int T, int NH) { return (size_t)B * NH * T * T; }
// the fused attention's tensor-core type (the run's 2-byte precision), or 0: the fp32 kernels
static int attention_tc(zt_backend *be) { return zt_cu_attention_tc(ctx_of(be)->prec) ? ctx_of(be)->prec : 0; }

void b_matmul(zt_backend *be, float *c, const float *a, const float *b, int M, int N, int K, int ta, int tb,
              float alpha, float beta) {
    zt_cu_matmul(ctx_of(be)->gemm, S, dev(c), dev(a), dev(b), M, N, K, ta, tb, alpha, beta);
}
void b_matmul_ld(zt_backend *be, float *c, const float *a, const float *b, int M, int N, int K, int ta, int tb,
                 float alpha, float beta, int lda, int ldb, int ldc) {
    zt_cu_matmul_ld(ctx_of(be)->gemm, S, dev(c), dev(a), dev(b), M, N, K, ta, tb, alpha, beta, lda, ldb, ldc);
}
void b_linear_fwd(zt_backend *be, float *out, const float *inp, const float *w, const float *bias, int N, int C,
                  int OC) {
    MirrorKeep keep(be, {{out, (size_t)N * OC * sizeof(float)}}, {{bias, (size_t)OC * sizeof(float)}});
    const bool look = N > 0 && C > 0 && OC > 0;
    const uint16_t *iw = look ? mirror_words(be, inp, (size_t)N * C) : nullptr;
    const uint16_t *ww = look ? mirror_words(be, w, (size_t)C * OC) : nullptr;
    cu_ctx *x = ctx_of(be);
    if (look && x->mir_on && x->fuse_round && x->prec != ZT_PREC_FP32) { // kept (cuda_backend_core.cu D_PRODUCT)
        Deferred d = {};
        d.kind = D_PRODUCT;
        d.o0 = dev(out); d.i0 = dev(inp); d.i1 = dev(w); d.i2 = dev(bias); d.x16 = iw; d.o16 = ww;
        d.B = N; d.C = C; d.V = OC;
        d.out = out; d.out_n = (size_t)N * OC;
        defer(be, d);
        return;
    }
    zt_cu_linear_fwd(x->gemm, S, dev(out), dev(inp), dev(w), dev(bias), N, C, OC, iw, ww);
}
void b_linear_bwd(zt_backend *be, float *dinp, float *dw, float *dbias, const float *dout, const float *inp,
                  const float *w, int N, int C, int OC, int accumulate_dinp) {
    MirrorKeep keep(be, {{dinp, (size_t)N * C * sizeof(float)}, {dw, (size_t)C * OC * sizeof(float)},
                         {dbias, (size_t)OC * sizeof(float)}},
                    {{accumulate_dinp ? dinp : nullptr, (size_t)N * C * sizeof(float)}});
    void *sc = scratch(be, zt_cu_linear_bwd_scratch(N, OC));
    unsigned *tk = tickets(be);
    const bool look = N > 0 && C > 0 && OC > 0; // the packing path (bf16 / fp16 checked in mirror_words)
    const uint16_t *iw = look ? mirror_words(be, inp, (size_t)N * C) : nullptr;
    const uint16_t *ww = look ? mirror_words(be, w, (size_t)C * OC) : nullptr;
    const uint16_t *dw16 = look ? mirror_words(be, dout, (size_t)N * OC) : nullptr;
    cu_ctx *x = ctx_of(be);
    // dinp's product kept (D_PRODUCT, tb) for the round_to that follows and the reader of its words
    const bool kd = look && !accumulate_dinp && x->mir_on && x->fuse_round && x->prec != ZT_PREC_FP32;
    const uint16_t *a16 = nullptr, *b16 = nullptr;
    zt_cu_linear_bwd(x->gemm, S, dev(dinp), dev(dw), dev(dbias), dev(dout), dev(inp), dev(w), N, C, OC,
                     accumulate_dinp, sc, tk, iw, ww, dw16, kd ? &a16 : nullptr, kd ? &b16 : nullptr);
    if (!kd) return;
    Deferred d = {};
    d.kind = D_PRODUCT;
    d.o0 = dev(dinp); d.i0 = dev(dout); d.i1 = dev(w); d.x16 = a16; d.o16 = b16; d.tb = 1;
    d.B = N; d.C = OC; d.V = C;
    d.out = dinp; d.out_n = (size_t)N * C;
    defer(be, d);
}
void b_layernorm_fwd(zt_backend *be, float *out, float *mean, float *rstd, const float *inp, const float *w,
                     const float *b, int N, int C, float eps) {
    MirrorKeep keep(be, {{out, (size_t)N * C * sizeof(float)}, {mean, N * sizeof(float)}, {rstd, N * sizeof(float)}},
                    {{inp, (size_t)N * C * sizeof(float)}, {w, C * sizeof(float)}, {b, C * sizeof(float)}});
    Deferred d = {};
    d.kind = D_LN_FWD;
    d.o0 = dev(out); d.o1 = dev(mean); d.o2 = dev(rstd); d.i0 = dev(inp); d.i1 = dev(w); d.i2 = dev(b);
    d.B = N; d.C = C; d.f = eps;
    d.out = out; d.out_n = (size_t)N * C;
    defer(be, d);
}
void b_residual_layernorm_fwd(zt_backend *be, float *res, float *out, float *mean, float *rstd, const float *a,
                              const float *b, const float *w, const float *bias, int N, int C, int prec, float eps) {
    const size_t n = (size_t)N * C;
    const bool ab = b != a && (const float *)b != res && (const float *)b != out;
    // a and b as words where there are some: b's from the product before it (take_product_words), else a mirror's
    // (not while a round_to of b is kept: then the floats, rounded as loaded)
    const uint16_t *bw = ab ? take_product_words(be, b, n) : nullptr;
    if (!bw && ab && !kept_round_of(be, b, n)) bw = find_words(be, b, n);
    const uint16_t *aw = (const float *)a != res && (const float *)a != out ? find_words(be, a, n) : nullptr;
    MirrorKeep keep(be, {{res, n * sizeof(float)}, {out, n * sizeof(float)}, {mean, N * sizeof(float)},
                         {rstd, N * sizeof(float)}},
                    {{aw ? nullptr : a, n * sizeof(float)}, {bw ? nullptr : b, n * sizeof(float)},
                     {w, C * sizeof(float)}, {bias, C * sizeof(float)}});
    Deferred d = {};
    d.x16 = aw; d.o16 = bw;
    d.kind = D_RLN_FWD;
    d.o0 = dev(res); d.o1 = dev(out); d.o2 = dev(mean); d.o3 = dev(rstd);
    d.i0 = dev(a); d.i1 = dev(b); d.i2 = dev(w); d.i3 = dev(bias);
    d.B = N; d.C = C; d.res_prec = prec; d.f = eps; d.res = res;
    d.out = out; d.out_n = (size_t)N * C; // a round_to of the LayerNorm's output is fused, as after layernorm_fwd
    take_round(be, &d, b, (size_t)N * C, ab && !bw);
    cu_ctx *x = ctx_of(be);
    if (prec == x->prec && x->prec != ZT_PREC_FP32) d.w16 = stash_words(x, res, (size_t)N * C); // res's words too
    defer(be, d);
}
void b_layernorm_bwd(zt_backend *be, float *dinp, float *dw, float *db, const float *dout, const float *inp,
                     const float *w, const float *mean, const float *rstd, int N, int C) {
    // dout as the words of the product before it, where that hands them over (take_product_words)
    const uint16_t *pw = dout != dinp && dout != inp ? take_product_words(be, dout, (size_t)N * C) : nullptr;
    MirrorKeep keep(be, {{dinp, (size_t)N * C * sizeof(float)}, {dw, C * sizeof(float)}, {db, C * sizeof(float)}},
                    {{dinp, (size_t)N * C * sizeof(float)}, {pw ? nullptr : dout, (size_t)N * C * sizeof(float)},
                     {w, C * sizeof(float)}, {mean, N * sizeof(float)}, {rstd, N * sizeof(float)}});
    Deferred d = {};
    d.x16 = N > 0 && C > 0 ? mirror_words(be, inp, (size_t)N * C) : nullptr; // inp's words where it has them
    d.o16 = pw;
    d.scratch = scratch(be, zt_cu_layernorm_bwd_scratch(N, C));
    d.tickets = tickets(be);
    d.kind = D_LN_BWD;
    d.o0 = dev(dinp); d.o1 = dev(dw); d.o2 = dev(db);
    d.i0 = dev(dout); d.i1 = dev(inp); d.i2 = dev(w); d.i3 = dev(mean); d.i4 = dev(rstd);
    d.B = N; d.C = C;
    d.out = dinp; d.out_n = (size_t)N * C;
    take_round(be, &d, dout, (size_t)N * C, dout != dinp && dout != inp && !pw);
    defer(be, d);
}
void b_attention_fwd(zt_backend *be, float *out, float *att, const float *qkv, int B, int T, int C, int NH, int NKV) {
    const size_t nq = qkv_floats(B, T, C, NH, NKV), na = att_floats(B, T, NH);
    MirrorKeep keep(be, {{out, (size_t)B * T * C * sizeof(float)}, {att, na * sizeof(float)}}, {{qkv, nq * sizeof(float)}});
    zt_cu_attention_fwd(ctx_of(be)->gemm, S, dev(out), dev(att), dev(qkv), B, T, C, NH, NKV);
}
void b_attention_bwd(zt_backend *be, float *dqkv, float *datt, const float *dout, const float *qkv, const float *att,
                     int B, int T, int C, int NH, int NKV) {
    const size_t nq = qkv_floats(B, T, C, NH, NKV), na = att_floats(B, T, NH);
    MirrorKeep keep(be, {{dqkv, nq * sizeof(float)}, {datt, na * sizeof(float)}},
                    {{dout, (size_t)B * T * C * sizeof(float)}, {qkv, nq * sizeof(float)}, {att, na * sizeof(float)}});
    zt_cu_attention_bwd(ctx_of(be)->gemm, S, dev(dqkv), dev(datt), dev(dout), dev(qkv), dev(att), B, T, C, NH, NKV);
}
void b_attention_bidir_fwd(zt_backend *be, float *out, float *att, const float *qkv, const int32_t *kvalid, int B,
                           int T, int C, int NH, int NKV) {
    zt_cu_attention_bidir_fwd(ctx_of(be)->gemm, S, dev(out), dev(att), dev(qkv), dev(kvalid), B, T, C, NH, NKV);
}
void b_attention_bidir_bwd(zt_backend *be, float *dqkv, float *datt, const float *dout, const float *qkv,
                           const float *att, const int32_t *kvalid, int B, int T, int C, int NH, int NKV) {
    zt_cu_attention_bidir_bwd(ctx_of(be)->gemm, S, dev(dqkv), dev(datt), dev(dout), dev(qkv), dev(att), dev(kvalid), B,
                              T, C, NH, NKV);
}
void b_attention_fused_fwd(zt_backend *be, float *out, float *stats, const float *qkv, int B, int T, int C, int NH,
                           int NKV) {
    const int tc = attention_tc(be);
    // on tensor cores qkv as the words of the product before it, where that hands them over (take_product_words)
    const uint16_t *pw = tc ? take_product_words(be, qkv, qkv_floats(B, T, C, NH, NKV)) : nullptr;
    MirrorKeep keep(be, {{out, (size_t)B * T * C * sizeof(float)}, {stats, (size_t)B * NH * T * 2 * sizeof(float)}},
                    {{pw ? nullptr : qkv, qkv_floats(B, T, C, NH, NKV) * sizeof(float)}});
    Deferred d = {};
    d.kind = D_ATT_FWD;
    d.o0 = dev(out); d.o1 = dev(stats); d.i0 = dev(qkv); d.x16 = pw;
    d.tc = tc;
    d.B = B; d.T = T; d.C = C; d.NH = NH; d.NKV = NKV;
    d.out = out; d.out_n = (size_t)B * T * C;
    // a kept round_to of qkv (after its product) done by the tensor-core kernel as it loads it
    take_round(be, &d, qkv, qkv_floats(B, T, C, NH, NKV), d.tc != 0 && (const float *)qkv != out);
    defer(be, d);
}
void b_attention_fused_bwd(zt_backend *be, float *dqkv, float *scratch, const float *dout, const float *qkv, const float *out,
                           const float *stats, int B, int T, int C, int NH, int NKV) {
    const size_t nq = qkv_floats(B, T, C, NH, NKV), no = (size_t)B * T * C;
    const int tc = attention_tc(be);
    // the tensor-core kernels read qkv and out as their words where they have them, and dout as the words of the
    // product before it where that hands them over; the fp32 kernels the floats
    const uint16_t *pw = tc && dout != out && dout != qkv && (const float *)dout != dqkv
                             ? take_product_words(be, dout, no) : nullptr;
    MirrorKeep keep(be, {{dqkv, nq * sizeof(float)}, {scratch, zt_attention_fused_scratch_for(B, T, C, NH, tc) * sizeof(float)}},
                    {{pw ? nullptr : dout, no * sizeof(float)}, {tc ? nullptr : qkv, nq * sizeof(float)},
                     {tc ? nullptr : out, no * sizeof(float)}, {stats, (size_t)B * NH * T * 2 * sizeof(float)}});
    Deferred d = {};
    d.kind = D_ATT_BWD;
    d.o0 = dev(dqkv); d.o1 = dev(scratch); d.i0 = dev(dout); d.i1 = dev(qkv); d.i2 = dev(out); d.i3 = dev(stats);
    d.tc = tc;
    d.x16 = tc && B > 0 && T > 0 && C > 0 ? mirror_words(be, qkv, nq) : nullptr;
    d.o16 = tc && B > 0 && T > 0 && C > 0 ? mirror_words(be, out, no) : nullptr;
    // a kept round_to of dout (after the projection's backward) done by the tensor-core kernels as they load it
    take_round(be, &d, dout, no, tc != 0 && dout != out && dout != qkv && (const float *)dout != dqkv && !pw);
    d.d16 = pw;
    d.B = B; d.T = T; d.C = C; d.NH = NH; d.NKV = NKV;
    d.out = dqkv; d.out_n = nq;
    defer(be, d);
}
void b_attention_decode(zt_backend *be, float *out, float *kcache, float *vcache, const float *qkv, int pos, int maxT,
                        int C, int NH, int NKV) {
    zt_cu_attention_decode(S, dev(out), dev(kcache), dev(vcache), dev(qkv), pos, maxT, C, NH, NKV);
}
void b_rmsnorm_fwd(zt_backend *be, float *out, float *rstd, const float *inp, const float *w, int N, int C, float eps) {
    MirrorKeep keep(be, {{out, (size_t)N * C * sizeof(float)}, {rstd, N * sizeof(float)}},
                    {{inp, (size_t)N * C * sizeof(float)}, {w, C * sizeof(float)}});
    Deferred d = {};
    d.kind = D_RMS_FWD;
    d.o0 = dev(out); d.o1 = dev(rstd); d.i0 = dev(inp); d.i1 = dev(w);
    d.B = N; d.C = C; d.f = eps;
    d.out = out; d.out_n = (size_t)N * C;
    defer(be, d);
}
void b_rmsnorm_bwd(zt_backend *be, float *dinp, float *dw, const float *dout, const float *inp, const float *w,
                   const float *rstd, int N, int C) {
    MirrorKeep keep(be, {{dinp, (size_t)N * C * sizeof(float)}, {dw, C * sizeof(float)}},
                    {{dinp, (size_t)N * C * sizeof(float)}, {dout, (size_t)N * C * sizeof(float)},
                     {inp, (size_t)N * C * sizeof(float)}, {w, C * sizeof(float)}, {rstd, N * sizeof(float)}});
    Deferred d = {};
    d.scratch = scratch(be, zt_cu_rmsnorm_bwd_scratch(N, C));
    d.tickets = tickets(be);
    d.kind = D_RMS_BWD;
    d.o0 = dev(dinp); d.o1 = dev(dw); d.i0 = dev(dout); d.i1 = dev(inp); d.i2 = dev(w); d.i3 = dev(rstd);
    d.B = N; d.C = C;
    d.out = dinp; d.out_n = (size_t)N * C;
    defer(be, d);
}
void b_rope(zt_backend *be, float *qkv, const float *cs, int B, int T, int pos0, int NH, int NKV, int hs, int inverse) {
    const size_t nq = (size_t)B * T * (NH + 2 * (size_t)NKV) * hs;
    MirrorKeep keep(be, {{qkv, nq * sizeof(float)}}, {{qkv, nq * sizeof(float)}, {cs, (size_t)T * hs * sizeof(float)}});
    zt_cu_rope(S, dev(qkv), dev(cs), B, T, pos0, NH, NKV, hs, inverse);
}
void b_swiglu_fwd(zt_backend *be, float *out, const float *inp, int N, int I) {
    MirrorKeep keep(be, {{out, (size_t)N * I * sizeof(float)}}, {{inp, (size_t)N * 2 * I * sizeof(float)}});
    Deferred d = {};
    d.kind = D_SWIGLU_FWD;
    d.o0 = dev(out); d.i0 = dev(inp);
    d.B = N; d.C = I;
    d.out = out; d.out_n = (size_t)N * I;
    defer(be, d);
}
void b_swiglu_bwd(zt_backend *be, float *dinp, const float *inp, const float *dout, int N, int I) {
    MirrorKeep keep(be, {{dinp, (size_t)N * 2 * I * sizeof(float)}},
                    {{inp, (size_t)N * 2 * I * sizeof(float)}, {dout, (size_t)N * I * sizeof(float)}});
    Deferred d = {};
    d.kind = D_SWIGLU_BWD;
    d.o0 = dev(dinp); d.i0 = dev(inp); d.i1 = dev(dout);
    d.B = N; d.C = I;
    d.out = dinp; d.out_n = (size_t)N * 2 * I;
    defer(be, d);
}
void b_gemv(zt_backend *be, float *y, const float *x, const float *w, const float *bias, int C, int OC, int w_t) {
    zt_cu_gemv(S, dev(y), dev(x), dev(w), dev(bias), C, OC, w_t);
}
// GELU forward (dout nullptr) or backward into out, the tanh approximation or the exact (erf) one
void defer_gelu(zt_backend *be, int exact, float *out, const float *inp, const float *dout, size_t n) {
    // backward reads inp's words where it has them; the input the product before it wrote (forward: inp; backward in
    // place: dout) as its words where it hands them over (take_product_words), else the floats
    const uint16_t *pw = dout ? (dout == out ? take_product_words(be, dout, n) : nullptr)
                              : take_product_words(be, inp, n);
    MirrorKeep keep(be, {{out, n * sizeof(float)}},
                    {{pw ? nullptr : dout ? (const void *)dout : (const void *)inp, n * sizeof(float)}});
    Deferred d = {};
    d.x16 = dout && n ? mirror_words(be, inp, n) : pw;
    d.o16 = dout ? pw : nullptr;
    d.kind = dout ? D_GELU_BWD : D_GELU_FWD;
    d.o0 = dev(out); d.i0 = dev(inp); d.i1 = dev(dout); d.n = n; d.exact = exact;
    d.out = out; d.out_n = n;
    // a kept round_to of exactly this GELU's input (forward: inp; backward in place: dout) is done in its kernel
    take_round(be, &d, dout ? (const void *)dout : (const void *)inp, n, !dout || dout == out);
    defer(be, d);
}
void b_gelu_fwd(zt_backend *be, float *out, const float *inp, size_t n) { defer_gelu(be, 0, out, inp, nullptr, n); }
void b_gelu_bwd(zt_backend *be, float *dinp, const float *inp, const float *dout, size_t n) {
    defer_gelu(be, 0, dinp, inp, dout, n);
}
void b_gelu_erf_fwd(zt_backend *be, float *out, const float *inp, size_t n) { defer_gelu(be, 1, out, inp, nullptr, n); }
void b_gelu_erf_bwd(zt_backend *be, float *dinp, const float *inp, const float *dout, size_t n) {
    defer_gelu(be, 1, dinp, inp, dout, n);
}
void b_bias_add(zt_backend *be, float *out, const float *bias, int N, int OC) {
    zt_cu_bias_add(S, dev(out), dev(bias), N, OC);
}
void b_bias_grad(zt_backend *be, float *dbias, const float *dout, int N, int OC) {
    zt_cu_bias_grad(S, dev(dbias), dev(dout), N, OC);
}
void b_argmax_rows(zt_backend *be, int32_t *idx, const float *x, int N, int V, int ld) {
    zt_cu_argmax_rows(S, dev(idx), dev(x), N, V, ld);
}
void b_add(zt_backend *be, float *out, const float *a, const float *b, size_t n) {
    MirrorKeep keep(be, {{out, n * sizeof(float)}}, {{a, n * sizeof(float)}, {b, n * sizeof(float)}});
    Deferred d = {};
    d.kind = D_ADD;
    d.o0 = dev(out); d.i0 = dev(a); d.i1 = dev(b); d.n = n;
    d.out = out; d.out_n = n;
    take_round(be, &d, b, n, b != a);
    defer(be, d);
}
void b_embed_fwd(zt_backend *be, float *out, const int32_t *tokens, const float *wte, const float *wpe, int B, int T,
                 int C) {
    Deferred d = {};
    d.kind = D_EMBED_FWD;
    d.o0 = dev(out); d.tok = dev(tokens); d.i0 = dev(wte); d.i1 = dev(wpe);
    d.B = B; d.T = T; d.C = C;
    d.out = out; d.out_n = (size_t)B * T * C;
    defer(be, d);
}
void b_embed_bwd(zt_backend *be, float *dwte, float *dwpe, const float *dout, const int32_t *tokens, int B, int T,
                 int C) {
    void *sc = scratch(be, zt_cu_embed_bwd_scratch(B, T));
    zt_cu_embed_bwd(S, dev(dwte), dev(dwpe), dev(dout), dev(tokens), B, T, C, sc);
}
// softmax_xent's scale as launched: with a device scale (dscale non-zero, dscale_at given) the launch takes 1 for
// dscale, a flag, and the scale's device address, so the launch repeats while the scale changes
struct XentScale {
    float f;
    const float *at;
};
XentScale xent_scale(float dscale, const float *dscale_at) {
    const bool at = dscale != 0.0f && dscale_at;
    return {at ? 1.0f : dscale, at ? dev(dscale_at) : nullptr};
}
void b_softmax_xent(zt_backend *be, float *losses, float *logits, const int32_t *targets, int N, int V, int Vp,
                    float dscale, const float *dscale_at) {
    Deferred d = {};
    d.kind = D_XENT;
    d.o0 = dev(losses); d.o1 = dev(logits); d.tok = dev(targets);
    d.B = N; d.V = V; d.Vp = Vp;
    const XentScale xs = xent_scale(dscale, dscale_at);
    d.f = xs.f;
    d.fp = xs.at;
    d.out = dscale != 0.0f ? logits : nullptr; // dlogits; with dscale 0 the logits are left as they were
    d.out_n = (size_t)N * Vp;
    defer(be, d);
}
void b_matmul16(zt_backend *be, void *c, int c16, const void *a, int a16, const float *b, int M, int N, int K, int ta,
                int tb, int prec, float beta) {
    ZT_ASSERT(prec == ctx_of(be)->prec); // the GEMM's operand precision (set_precision)
    ZT_ASSERT(beta == 0.0f || (beta == 1.0f && !c16));
    MirrorKeep keep(be, {{c, (size_t)M * N * (c16 ? sizeof(uint16_t) : sizeof(float))}},
                    {{a16 ? nullptr : a, (size_t)M * K * sizeof(float)},
                     {beta != 0.0f ? c : nullptr, (size_t)M * N * sizeof(float)}});
    const uint16_t *bw = M > 0 && N > 0 && K > 0 ? mirror_words(be, b, (size_t)K * N) : nullptr; // the tied wte
    zt_cu_matmul16(ctx_of(be)->gemm, S, dev(c), c16, dev(a), a16, dev(b), M, N, K, ta, tb, bw, beta);
}
void b_softmax_xent16(zt_backend *be, float *losses, void *logits, const int32_t *targets, int N, int V, int Vp,
                      float dscale, const float *dscale_at, int prec) {
    // names what it reads and writes (its logits are words, never mirrored), so the forward's lazy mirrors in the
    // stash stay, to be overwritten by the backward's unpacks; those in the word buffers are written now (the loss
    // ends a forward: the backward takes its turns in those buffers)
    MirrorKeep keep(be, {{losses, (size_t)N * sizeof(float)}, {logits, (size_t)N * Vp * sizeof(uint16_t)}},
                    {{targets, (size_t)N * sizeof(int32_t)}});
    settle_rings(ctx_of(be));
    const XentScale xs = xent_scale(dscale, dscale_at);
    zt_cu_softmax_xent16(S, dev(losses), static_cast<uint16_t *>(dev(logits)), dev(targets), N, V, Vp, xs.f, prec,
                         xs.at);
}
void b_adamw(zt_backend *be, float *param, const float *grad, float *m, float *v, size_t n, float lr, float beta1,
             float beta2, float eps, float weight_decay, float bias_corr1, float bias_corr2, float grad_scale) {
    zt_cu_adamw(S, dev(param), dev(grad), dev(m), dev(v), n, lr, beta1, beta2, eps, weight_decay, bias_corr1,
                bias_corr2, grad_scale);
}
void free_adamw_tables(zt_backend *be) {
    cu_ctx *x = ctx_of(be);
    for (int i = 0; i < x->adamw_n; i++) {
        b_free(be, x->adamw[i].table);
        free(x->adamw[i].key);
    }
    x->adamw_n = 0;
}
// the cached device table of segs (built and uploaded at its first use)
const AdamwTable &adamw_table(zt_backend *be, const zt_adamw_seg *segs, int nseg) {
    cu_ctx *x = ctx_of(be);
    for (int i = 0; i < x->adamw_n; i++) {
        const AdamwTable &t = x->adamw[i];
        bool same = t.nkey == nseg;
        for (int k = 0; same && k < nseg; k++) // field by field: the caller's padding bytes are not part of the key
            same = t.key[k].offset == segs[k].offset && t.key[k].n == segs[k].n &&
                   t.key[k].weight_decay == segs[k].weight_decay;
        if (same) return t;
    }
    if (x->adamw_n == kAdamwTables) free_adamw_tables(be);
    AdamwTable &t = x->adamw[x->adamw_n];
    t.key = static_cast<zt_adamw_seg *>(zt_malloc((size_t)nseg * sizeof *segs));
    memcpy(t.key, segs, (size_t)nseg * sizeof *segs);
    t.nkey = nseg;
    zt_cu_adamw_seg *host = static_cast<zt_cu_adamw_seg *>(zt_malloc((size_t)nseg * sizeof(zt_cu_adamw_seg)));
    t.ntable = zt_cu_adamw_multi_table(segs, nseg, host, &t.total);
    t.dense = zt_adamw_segs_dense(segs, nseg);
    const size_t bytes = (size_t)t.ntable * sizeof(zt_cu_adamw_seg);
    t.table = nullptr;
    if (bytes) {
        t.table = b_alloc(be, bytes);
#ifdef ZT_HOSTEXEC
        memcpy(dev(t.table), host, bytes);
#else
        // from pageable memory: staged before the call returns, so host may be freed; no stream sync
        ZT_CUDA(cudaMemcpyAsync(t.table, host, bytes, cudaMemcpyHostToDevice, stream_of(be)));
#endif
    }
    free(host);
    x->adamw_n++;
    return t;
}
void b_adamw_multi(zt_backend *be, float *param, const float *grad, float *m, float *v, const zt_adamw_seg *segs,
                   int nseg, float beta1, float beta2, float eps, const float *hyper) {
    flush(be); // as every slot (and the launch counter's model of it, core/diag/count_state.c)
    if (nseg <= 0) return;
    const AdamwTable &t = adamw_table(be, segs, nseg);
    if (t.total == 0) return;
    cu_ctx *x = ctx_of(be);
    x->adamw_kept = KeptAdamw{true, param, m, v, grad, hyper, t.table, t.ntable, t.total, beta1, beta2, eps};
    // kept for the pack16 of exactly its parameters (ZeRO's publish, core/dist/zero.c): a bf16 / fp16 run with the
    // fused rounding, whose table leaves no parameter of the range out
    if (!(x->prec != ZT_PREC_FP32 && x->fuse_round && t.dense)) launch_kept_adamw(x, nullptr, 0);
}
// a kept round_to of a range within x (a layer's gradients as the backward stores them: all of a bucket at stage 2 on
// one rank, or its part when the bucket holds ln_f's too) is done as x is loaded, that range written back rounded:
// the same values as round_to then accumulate, in one launch
void b_accumulate(zt_backend *be, float *acc, const float *x, size_t n) {
    MirrorKeep keep(be, {{acc, n * sizeof(float)}}, {{acc, n * sizeof(float)}, {x, n * sizeof(float)}});
    cu_ctx *c = ctx_of(be);
    resolve_product(c);
    const Deferred &p = c->pend;
    size_t r0;
    if (p.kind == D_ROUND && !p.w16 && x != acc && zt_mirror16_within(x, n, p.out, p.out_n, &r0)) {
        const size_t r1 = r0 + p.out_n;
        const int prec = p.in_round;
        c->pend.kind = D_NONE;
        c->fused++;
        zt_cu_accumulate(S, dev(acc), dev(x), n, prec, r0, r1);
        return;
    }
    zt_cu_accumulate(S, dev(acc), dev(x), n);
}
// kept for the clip_scale of exactly its sums (core/dist/zero.c zt_zero_clip on one rank), done in its launch
void b_sumsq_chunks(zt_backend *be, double *out, const float *x, size_t n, size_t chunk) {
    flush(be);
    if (n == 0) return;
    ctx_of(be)->sumsq_kept = KeptSumsq{true, out, x, n, chunk};
}
void b_clip_scale(zt_backend *be, float *hyper, double *norm, const double *sums, size_t n, double clip,
                  int skip_nonfinite) {
    cu_ctx *c = ctx_of(be);
    const KeptSumsq k = c->sumsq_kept;
    if (k.on && k.out == sums && k.chunk && (k.n + k.chunk - 1) / k.chunk == n) {
        c->sumsq_kept.on = false;
        zt_cu_sumsq_clip(S, dev(k.out), dev(k.x), k.n, k.chunk, tickets(be), dev(hyper), dev(norm), clip,
                         skip_nonfinite);
        return;
    }
    zt_cu_clip_scale(S, dev(hyper), dev(norm), dev(sums), n, clip, skip_nonfinite);
}
void b_set_precision(zt_backend *be, int prec) {
    flush(be); // drops the mirrors
    ctx_of(be)->prec = prec;
    ctx_of(be)->ntg = 0;
    zt_cu_gemm_set_precision(ctx_of(be)->gemm, prec);
}
void b_round_to(zt_backend *be, float *x, size_t n, int prec) {
    MirrorKeep keep(be, {{x, n * sizeof(float)}}, {{x, n * sizeof(float)}});
    cu_ctx *c = ctx_of(be);
    if (c->pend.kind == D_PRODUCT && c->pend.out == x && c->pend.out_n == n && prec == c->prec) {
        c->pend.in_round = prec; // taken: the next call decides how (cuda_backend_core.cu resolve_product)
        c->pend.w16 = stash_words(c, x, n);
        return;
    }
    if (c->pend.kind != D_NONE && c->pend.kind != D_ROUND && c->pend.kind != D_PRODUCT && prec != ZT_PREC_FP32 &&
        c->pend.out == x && c->pend.out_n == n) {
        const Deferred d = c->pend; // the op that wrote x: launched rounding its output, which is all round_to does
        c->pend.kind = D_NONE;
        bool only = false; // the words alone, where they go to the stash (words_for)
        uint16_t *w = prec == c->prec ? words_for(be, d, &only) : nullptr;
        // residual + LayerNorm's res too, where its words go to the stash (recorded then; now lazy): the next
        // residual + LayerNorm reads it as words, the backward unpacks it
        const bool res_alone = only && d.kind == D_RLN_FWD && d.w16 && d.res_prec == c->prec &&
                               zt_mirror16_mark_lazy(&c->mir, static_cast<const float *>(d.res), d.w16, d.out_n);
        launch_deferred(c, d, prec, w, only, res_alone);
        c->fused++;
        return;
    }
    if (prec == ZT_PREC_FP32) return;
    if (c->pend.kind == D_ROUND && c->pend.out == x && c->pend.out_n == n && c->pend.in_round == prec) return;
    flush(be);
    uint16_t *w16 = prec == c->prec ? stash_words(c, x, n) : nullptr; // its words where a pack16_ahead wants them
    if (c->prec != ZT_PREC_FP32 && c->fuse_round) { // kept: the GELU that reads x next rounds it (defer_gelu)
        Deferred d = {};
        d.kind = D_ROUND;
        d.o0 = dev(x); d.n = n; d.in_round = prec;
        d.out = x; d.out_n = n;
        d.w16 = w16;
        c->pend = d;
        return;
    }
    c->unfused++;
    zt_cu_round_to(S, dev(x), n, prec, w16 ? dev(w16) : nullptr);
}
// advice (iface/backend.h): taken in bf16 / fp16 runs with mirrors, where the producers write the words the pack
// would (words_for, b_round_to, b_residual_layernorm_fwd, take_round) and pack16 finds them
int b_pack16_ahead(zt_backend *be, void *words, const float *x, size_t n) {
    cu_ctx *c = ctx_of(be);
    if (!c->mir_on || c->prec == ZT_PREC_FP32 || c->ntg == kTargets) return 0;
    c->tg[c->ntg++] = Target{x, n, static_cast<uint16_t *>(words)};
    return 1;
}
// the stream for a pack16 / unpack16 of floats f (n) and words w (n): a kept round_to or product that reads and
// writes none of that memory stays kept (for the op that reads its output next), the copy running before it in the
// stream; a rounded product that does is launched first writing its output's words alone (product_words_now:
// the reader after the copy finds them as a lazy mirror); anything else kept is launched first. Compared as device
// addresses (the kept op holds them translated)
static bool kept_apart(const Deferred &d, const void *f, const void *w, size_t n) {
    const uintptr_t fa = reinterpret_cast<uintptr_t>(dev(f)), wa = reinterpret_cast<uintptr_t>(dev(w));
    auto apart = [&](const void *p, size_t bytes) {
        const uintptr_t a = reinterpret_cast<uintptr_t>(p);
        return !p || (!zt_mirror16_overlap(a, bytes, fa, n * sizeof(float)) &&
                      !zt_mirror16_overlap(a, bytes, wa, n * sizeof(uint16_t)));
    };
    if (d.kind != D_ROUND && d.kind != D_PRODUCT) return false;
    if (!apart(d.out ? dev(d.out) : nullptr, d.out_n * sizeof(float)) ||
        !apart(d.w16 ? dev(d.w16) : nullptr, d.out_n * sizeof(uint16_t)))
        return false;
    if (d.kind == D_ROUND) return true;
    // the product's operands (one given as words: its floats are not read)
    const size_t nin = (size_t)d.B * d.C, nw = (size_t)d.C * d.V;
    return apart(d.x16 ? nullptr : d.i0, nin * sizeof(float)) && apart(d.o16 ? nullptr : d.i1, nw * sizeof(float)) &&
           apart(d.i2, d.V * sizeof(float)) && apart(d.x16, nin * sizeof(uint16_t)) &&
           apart(d.o16, nw * sizeof(uint16_t));
}
static cudaStream_t stream_past_round(zt_backend *be, const void *f, const void *w, size_t n) {
    cu_ctx *c = ctx_of(be);
    if (kept_apart(c->pend, f, w, n)) return c->stream;
    if (c->pend.kind == D_PRODUCT && c->pend.in_round) product_words_now(be);
    return stream_of(be);
}
// packing x to dst where a mirror says dst holds x's words already writes nothing, and launches nothing (the kept op
// stays kept: a pack16_ahead's range, whose producers wrote or will write the words); every pack16 ends
// pack16_ahead's advice
void b_pack16(zt_backend *be, void *dst, const float *x, size_t n, int prec) {
    cu_ctx *c = ctx_of(be);
    c->ntg = 0;
    if (n && c->mir_on && prec == c->prec && zt_mirror16_find(&c->mir, x, n) == dst) {
        c->packs_skipped++;
        return;
    }
    MirrorKeep keep(be, {{dst, n * sizeof(uint16_t)}}, {{x, n * sizeof(float)}});
    const KeptAdamw &k = c->adamw_kept; // the update that wrote exactly x: its launch writes the words too
    if (k.on && k.param == x && k.total <= n && prec == c->prec) { // (past total: the shard's tail, packed as it is)
        launch_kept_adamw(c, static_cast<uint16_t *>(dst), n);
        c->adamw_words++;
        return;
    }
    zt_cu_pack16(stream_past_round(be, x, dst, n), static_cast<uint16_t *>(dev(dst)), dev(x), n, prec);
}
void b_unpack16(zt_backend *be, float *dst, const void *src, size_t n, int prec) {
    MirrorKeep keep(be, {{dst, n * sizeof(float)}});
    zt_cu_unpack16(stream_past_round(be, dst, src, n), dev(dst), static_cast<const uint16_t *>(dev(src)), n, prec);
    if (prec == ctx_of(be)->prec) mirror_add(ctx_of(be), dst, src, n, 0); // dst now equals the words
}
// unpack16 deferred (lazy mirror, cuda_backend_core.cu) in a bf16 / fp16 run with mirrors, else unpack16
int b_unpack16_lazy(zt_backend *be, float *dst, const void *src, size_t n, int prec) {
    cu_ctx *c = ctx_of(be);
    if (!c->mir_on || prec != c->prec || prec == ZT_PREC_FP32) return 0;
    MirrorKeep keep(be, {{dst, n * sizeof(float)}});
    flush(be);
    mirror_add(c, dst, src, n, 1);
    c->lazy_made++;
    return 1;
}
void b_dropout(zt_backend *be, float *out, const float *in, size_t n, float p, uint64_t seed, const uint64_t *micro) {
    zt_cu_dropout(S, dev(out), dev(in), n, p, seed, micro ? dev(micro) : nullptr);
}
void b_dequant(zt_backend *be, float *out, const void *blob, int fmt, size_t rows, size_t cols) {
    const zt_quant_layout L = zt_quant_plan((zt_quant_fmt)fmt, rows, cols);
    zt_cu_dequant(S, dev(out), static_cast<const uint8_t *>(dev(blob)), fmt, L.n, L.cols, L.codes, L.absmax,
                  L.qabsmax, L.absmax2, L.mean, L.scales);
}

#undef S

} // namespace cub
} // namespace ZT_CU_NS
