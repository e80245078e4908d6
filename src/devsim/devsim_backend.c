/* devsim_backend.c — the devsim backend's slots (see devsim.h): each translates its pointer
 * arguments to real memory and calls the cpu backend's slot of the same name, so the arithmetic
 * (and its bits) is the cpu backend's. Memory comes from devsim_mem.c. */
#include "devsim/devsim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_backend.h"
#include "devsim/devsim_mem.h"
#include "util/util.h"

#define CPU(be) ((zt_backend *)(be)->ctx)
/* the real address of a device pointer argument; a host pointer panics naming the slot */
#define D(p) zt_devsim_real((p), __func__)

void *zt_devsim_host_ptr(const void *dev) { return zt_devsim_real(dev, "zt_devsim_host_ptr"); }

/* ------------------------------------------------------------------ lifecycle and memory */

static void ds_destroy(zt_backend *be) {
    zt_backend *cpu = CPU(be);
    cpu->i->destroy(cpu);
    free(be);
}

static void ds_describe(zt_backend *be, char *buf, size_t n) {
    char inner[200];
    CPU(be)->i->describe(CPU(be), inner, sizeof inner);
    snprintf(buf, n, "devsim: simulated device memory (%zu GiB reserved, host access faults) over %s",
             zt_devsim_mem_span() >> 30, inner);
}

static void *ds_alloc(zt_backend *be, size_t bytes) {
    (void)be;
    return zt_devsim_mem_alloc(bytes);
}

static void ds_free(zt_backend *be, void *p) {
    (void)be;
    zt_devsim_mem_free(p);
}

static double g_h2d, g_d2h; /* zt_devsim_transfers */
void zt_devsim_transfers(double *h2d, double *d2h) {
    *h2d = g_h2d;
    *d2h = g_d2h;
}

static void ds_to_device(zt_backend *be, void *dst, const void *host_src, size_t bytes) {
    (void)be;
    zt_devsim_check_host(host_src, __func__);
    g_h2d += (double)bytes;
    if (bytes) memcpy(D(dst), host_src, bytes);
}

static void ds_to_host(zt_backend *be, void *host_dst, const void *src, size_t bytes) {
    (void)be;
    zt_devsim_check_host(host_dst, __func__);
    g_d2h += (double)bytes;
    if (bytes) memcpy(host_dst, D(src), bytes);
}

static void ds_copy(zt_backend *be, void *dst, const void *src, size_t bytes) {
    CPU(be)->i->copy(CPU(be), D(dst), D(src), bytes);
}

static void ds_zero(zt_backend *be, void *dst, size_t bytes) { CPU(be)->i->zero(CPU(be), D(dst), bytes); }

static void ds_sync(zt_backend *be) { CPU(be)->i->sync(CPU(be)); }

/* ------------------------------------------------------------------ compute: translate, then the cpu slot */

static void ds_matmul(zt_backend *be, float *c, const float *a, const float *b, int M, int N, int K, int ta, int tb,
                      float alpha, float beta) {
    CPU(be)->i->matmul(CPU(be), D(c), D(a), D(b), M, N, K, ta, tb, alpha, beta);
}

static void ds_matmul_ld(zt_backend *be, float *c, const float *a, const float *b, int M, int N, int K, int ta,
                         int tb, float alpha, float beta, int lda, int ldb, int ldc) {
    CPU(be)->i->matmul_ld(CPU(be), D(c), D(a), D(b), M, N, K, ta, tb, alpha, beta, lda, ldb, ldc);
}

static void ds_linear_fwd(zt_backend *be, float *out, const float *inp, const float *w, const float *bias, int N,
                          int C, int OC) {
    CPU(be)->i->linear_fwd(CPU(be), D(out), D(inp), D(w), D(bias), N, C, OC);
}

static void ds_linear_bwd(zt_backend *be, float *dinp, float *dw, float *dbias, const float *dout, const float *inp,
                          const float *w, int N, int C, int OC, int accumulate_dinp) {
    CPU(be)->i->linear_bwd(CPU(be), D(dinp), D(dw), D(dbias), D(dout), D(inp), D(w), N, C, OC, accumulate_dinp);
}

static void ds_layernorm_fwd(zt_backend *be, float *out, float *mean, float *rstd, const float *inp, const float *w,
                             const float *b, int N, int C, float eps) {
    CPU(be)->i->layernorm_fwd(CPU(be), D(out), D(mean), D(rstd), D(inp), D(w), D(b), N, C, eps);
}

static void ds_residual_layernorm_fwd(zt_backend *be, float *res, float *out, float *mean, float *rstd, const float *a,
                                      const float *b, const float *w, const float *bias, int N, int C, int prec,
                                      float eps) {
    CPU(be)->i->residual_layernorm_fwd(CPU(be), D(res), D(out), D(mean), D(rstd), D(a), D(b), D(w), D(bias), N, C,
                                       prec, eps);
}

static void ds_layernorm_bwd(zt_backend *be, float *dinp, float *dw, float *db, const float *dout, const float *inp,
                             const float *w, const float *mean, const float *rstd, int N, int C) {
    CPU(be)->i->layernorm_bwd(CPU(be), D(dinp), D(dw), D(db), D(dout), D(inp), D(w), D(mean), D(rstd), N, C);
}

static void ds_rmsnorm_fwd(zt_backend *be, float *out, float *rstd, const float *inp, const float *w, int N, int C,
                           float eps) {
    CPU(be)->i->rmsnorm_fwd(CPU(be), D(out), D(rstd), D(inp), D(w), N, C, eps);
}

static void ds_rmsnorm_bwd(zt_backend *be, float *dinp, float *dw, const float *dout, const float *inp, const float *w,
                           const float *rstd, int N, int C) {
    CPU(be)->i->rmsnorm_bwd(CPU(be), D(dinp), D(dw), D(dout), D(inp), D(w), D(rstd), N, C);
}

static void ds_rope(zt_backend *be, float *qkv, const float *cs, int B, int T, int pos0, int NH, int NKV, int hs,
                    int inverse) {
    CPU(be)->i->rope(CPU(be), D(qkv), D(cs), B, T, pos0, NH, NKV, hs, inverse);
}

static void ds_swiglu_fwd(zt_backend *be, float *out, const float *inp, int N, int I) {
    CPU(be)->i->swiglu_fwd(CPU(be), D(out), D(inp), N, I);
}

static void ds_swiglu_bwd(zt_backend *be, float *dinp, const float *inp, const float *dout, int N, int I) {
    CPU(be)->i->swiglu_bwd(CPU(be), D(dinp), D(inp), D(dout), N, I);
}

static void ds_attention_fwd(zt_backend *be, float *out, float *att, const float *qkv, int B, int T, int C, int NH,
                             int NKV) {
    CPU(be)->i->attention_fwd(CPU(be), D(out), D(att), D(qkv), B, T, C, NH, NKV);
}

static void ds_attention_bwd(zt_backend *be, float *dqkv, float *datt, const float *dout, const float *qkv,
                             const float *att, int B, int T, int C, int NH, int NKV) {
    CPU(be)->i->attention_bwd(CPU(be), D(dqkv), D(datt), D(dout), D(qkv), D(att), B, T, C, NH, NKV);
}

/* the encoder family's (optional): the key mask is device memory too */
static void ds_attention_bidir_fwd(zt_backend *be, float *out, float *att, const float *qkv, const int32_t *kvalid,
                                   int B, int T, int C, int NH, int NKV) {
    CPU(be)->i->attention_bidir_fwd(CPU(be), D(out), D(att), D(qkv), D(kvalid), B, T, C, NH, NKV);
}

static void ds_attention_bidir_bwd(zt_backend *be, float *dqkv, float *datt, const float *dout, const float *qkv,
                                   const float *att, const int32_t *kvalid, int B, int T, int C, int NH, int NKV) {
    CPU(be)->i->attention_bidir_bwd(CPU(be), D(dqkv), D(datt), D(dout), D(qkv), D(att), D(kvalid), B, T, C, NH, NKV);
}

static void ds_gelu_erf_fwd(zt_backend *be, float *out, const float *inp, size_t n) {
    CPU(be)->i->gelu_erf_fwd(CPU(be), D(out), D(inp), n);
}

static void ds_gelu_erf_bwd(zt_backend *be, float *dinp, const float *inp, const float *dout, size_t n) {
    CPU(be)->i->gelu_erf_bwd(CPU(be), D(dinp), D(inp), D(dout), n);
}

static void ds_bias_add(zt_backend *be, float *out, const float *bias, int N, int OC) {
    CPU(be)->i->bias_add(CPU(be), D(out), D(bias), N, OC);
}

static void ds_bias_grad(zt_backend *be, float *dbias, const float *dout, int N, int OC) {
    CPU(be)->i->bias_grad(CPU(be), D(dbias), D(dout), N, OC);
}

static void ds_argmax_rows(zt_backend *be, int32_t *idx, const float *x, int N, int V, int ld) {
    CPU(be)->i->argmax_rows(CPU(be), D(idx), D(x), N, V, ld);
}

static void ds_attention_decode(zt_backend *be, float *out, float *kcache, float *vcache, const float *qkv, int pos,
                                int maxT, int C, int NH, int NKV) {
    CPU(be)->i->attention_decode(CPU(be), D(out), D(kcache), D(vcache), D(qkv), pos, maxT, C, NH, NKV);
}

static void ds_gemv(zt_backend *be, float *y, const float *x, const float *w, const float *bias, int C, int OC,
                    int w_t) {
    CPU(be)->i->gemv(CPU(be), D(y), D(x), D(w), D(bias), C, OC, w_t);
}

static void ds_gelu_fwd(zt_backend *be, float *out, const float *inp, size_t n) {
    CPU(be)->i->gelu_fwd(CPU(be), D(out), D(inp), n);
}

static void ds_gelu_bwd(zt_backend *be, float *dinp, const float *inp, const float *dout, size_t n) {
    CPU(be)->i->gelu_bwd(CPU(be), D(dinp), D(inp), D(dout), n);
}

static void ds_add(zt_backend *be, float *out, const float *a, const float *b, size_t n) {
    CPU(be)->i->add(CPU(be), D(out), D(a), D(b), n);
}

static void ds_embed_fwd(zt_backend *be, float *out, const int32_t *tokens, const float *wte, const float *wpe, int B,
                         int T, int C) {
    CPU(be)->i->embed_fwd(CPU(be), D(out), D(tokens), D(wte), D(wpe), B, T, C);
}

static void ds_embed_bwd(zt_backend *be, float *dwte, float *dwpe, const float *dout, const int32_t *tokens, int B,
                         int T, int C) {
    CPU(be)->i->embed_bwd(CPU(be), D(dwte), D(dwpe), D(dout), D(tokens), B, T, C);
}

static void ds_softmax_xent(zt_backend *be, float *losses, float *logits, const int32_t *targets, int N, int V,
                            int Vp, float dscale, const float *dscale_at) {
    CPU(be)->i->softmax_xent(CPU(be), D(losses), D(logits), D(targets), N, V, Vp, dscale,
                             dscale_at ? D(dscale_at) : NULL);
}

static void ds_matmul16(zt_backend *be, void *c, int c16, const void *a, int a16, const float *b, int M, int N, int K,
                        int ta, int tb, int prec, float beta) {
    CPU(be)->i->matmul16(CPU(be), D(c), c16, D(a), a16, D(b), M, N, K, ta, tb, prec, beta);
}

static void ds_softmax_xent16(zt_backend *be, float *losses, void *logits, const int32_t *targets, int N, int V,
                              int Vp, float dscale, const float *dscale_at, int prec) {
    CPU(be)->i->softmax_xent16(CPU(be), D(losses), D(logits), D(targets), N, V, Vp, dscale,
                               dscale_at ? D(dscale_at) : NULL, prec);
}

static void ds_adamw(zt_backend *be, float *param, const float *grad, float *m, float *v, size_t n, float lr,
                     float beta1, float beta2, float eps, float weight_decay, float bias_corr1, float bias_corr2,
                     float grad_scale) {
    CPU(be)->i->adamw(CPU(be), D(param), D(grad), D(m), D(v), n, lr, beta1, beta2, eps, weight_decay, bias_corr1,
                      bias_corr2, grad_scale);
}

/* the segment table is host data: only the shard's base pointers are translated */
static void ds_adamw_multi(zt_backend *be, float *param, const float *grad, float *m, float *v,
                           const zt_adamw_seg *segs, int nseg, float beta1, float beta2, float eps,
                           const float *hyper) {
    if (nseg <= 0) return;
    CPU(be)->i->adamw_multi(CPU(be), D(param), D(grad), D(m), D(v), segs, nseg, beta1, beta2, eps, D(hyper));
}

static void ds_accumulate(zt_backend *be, float *acc, const float *x, size_t n) {
    CPU(be)->i->accumulate(CPU(be), D(acc), D(x), n);
}

static void ds_sumsq_chunks(zt_backend *be, double *out, const float *x, size_t n, size_t chunk) {
    CPU(be)->i->sumsq_chunks(CPU(be), D(out), D(x), n, chunk);
}

static void ds_clip_scale(zt_backend *be, float *hyper, double *norm, const double *sums, size_t n, double clip,
                          int skip_nonfinite) {
    CPU(be)->i->clip_scale(CPU(be), D(hyper), D(norm), D(sums), n, clip, skip_nonfinite);
}

static void ds_round_to(zt_backend *be, float *x, size_t n, int prec) { CPU(be)->i->round_to(CPU(be), D(x), n, prec); }
static void ds_pack16(zt_backend *be, void *dst, const float *x, size_t n, int prec) {
    CPU(be)->i->pack16(CPU(be), D(dst), D(x), n, prec);
}
static void ds_unpack16(zt_backend *be, float *dst, const void *src, size_t n, int prec) {
    CPU(be)->i->unpack16(CPU(be), D(dst), D(src), n, prec);
}

static void ds_dropout(zt_backend *be, float *out, const float *in, size_t n, float p, uint64_t seed,
                       const uint64_t *micro) {
    CPU(be)->i->dropout(CPU(be), D(out), D(in), n, p, seed, micro ? D(micro) : NULL);
}

static void ds_dequant(zt_backend *be, float *out, const void *blob, int fmt, size_t rows, size_t cols) {
    CPU(be)->i->dequant(CPU(be), D(out), D(blob), fmt, rows, cols);
}

/* ------------------------------------------------------------------ create */

static zt_backend_i g_devsim_i;

zt_backend *zt_devsim_backend_create(int threads) {
    zt_backend *cpu = zt_cpu_backend_create(threads);
    zt_devsim_mem_init();
    if (!g_devsim_i.name) {
        const zt_backend_i *c = cpu->i;
        zt_backend_i *i = &g_devsim_i;
        i->mem = ZT_MEM_DEVICE;
        i->destroy = ds_destroy;
        i->describe = ds_describe;
        i->alloc = ds_alloc;
        i->free = ds_free;
        i->to_device = ds_to_device;
        i->to_host = ds_to_host;
        i->copy = ds_copy;
        i->zero = ds_zero;
        i->sync = ds_sync;
        i->matmul = ds_matmul;
        i->matmul_ld = ds_matmul_ld;
        i->linear_fwd = ds_linear_fwd;
        i->linear_bwd = ds_linear_bwd;
        i->layernorm_fwd = ds_layernorm_fwd;
        i->layernorm_bwd = ds_layernorm_bwd;
        i->attention_fwd = ds_attention_fwd;
        i->attention_bwd = ds_attention_bwd;
        /* optional slots stay optional */
        i->residual_layernorm_fwd = c->residual_layernorm_fwd ? ds_residual_layernorm_fwd : NULL;
        i->rmsnorm_fwd = c->rmsnorm_fwd ? ds_rmsnorm_fwd : NULL;
        i->rmsnorm_bwd = c->rmsnorm_bwd ? ds_rmsnorm_bwd : NULL;
        i->rope = c->rope ? ds_rope : NULL;
        i->swiglu_fwd = c->swiglu_fwd ? ds_swiglu_fwd : NULL;
        i->swiglu_bwd = c->swiglu_bwd ? ds_swiglu_bwd : NULL;
        i->attention_decode = c->attention_decode ? ds_attention_decode : NULL;
        i->gemv = c->gemv ? ds_gemv : NULL;
        i->attention_bidir_fwd = c->attention_bidir_fwd ? ds_attention_bidir_fwd : NULL;
        i->attention_bidir_bwd = c->attention_bidir_bwd ? ds_attention_bidir_bwd : NULL;
        i->gelu_erf_fwd = c->gelu_erf_fwd ? ds_gelu_erf_fwd : NULL;
        i->gelu_erf_bwd = c->gelu_erf_bwd ? ds_gelu_erf_bwd : NULL;
        i->bias_add = c->bias_add ? ds_bias_add : NULL;
        i->bias_grad = c->bias_grad ? ds_bias_grad : NULL;
        i->argmax_rows = c->argmax_rows ? ds_argmax_rows : NULL;
        i->gelu_fwd = ds_gelu_fwd;
        i->gelu_bwd = ds_gelu_bwd;
        i->add = ds_add;
        i->embed_fwd = ds_embed_fwd;
        i->embed_bwd = ds_embed_bwd;
        i->softmax_xent = ds_softmax_xent;
        i->matmul16 = ds_matmul16;
        i->softmax_xent16 = ds_softmax_xent16;
        i->adamw = ds_adamw;
        i->adamw_multi = ds_adamw_multi;
        i->accumulate = ds_accumulate;
        i->sumsq_chunks = ds_sumsq_chunks;
        i->clip_scale = ds_clip_scale;
        i->round_to = ds_round_to;
        i->pack16 = ds_pack16;
        i->unpack16 = ds_unpack16;
        i->dropout = ds_dropout;
        i->dequant = ds_dequant;
        i->name = "devsim";   /* last: the table is complete once name is set */
    }
    zt_backend *be = zt_calloc(1, sizeof *be);
    be->i = &g_devsim_i;
    be->ctx = cpu;
    be->threads = cpu->threads;
    return be;
}
