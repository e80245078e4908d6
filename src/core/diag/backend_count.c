/* backend_count.c — the launch and byte counting decorator (see backend_count.h; the "count" device it wraps is
 * count_device.c). Each slot's count follows the CUDA backend's code path for it (cuda/cuda_backend.cu, the
 * zt_cu_* launchers in cuda/kernels_*.cu and cuda/cuda_gemm.cu): the early returns on empty shapes, one launch per
 * ZT_LAUNCH, one per GEMM (cuBLASLt on a GPU, the reference GEMM kernel under the harness), one operand packing
 * launch before a bf16/fp16 GEMM (linear_bwd packs dout, w and inp in one for both of its products), and the
 * round_to that cuda_backend.cu fuses into the op it follows. The state and the model of the backend's decisions are
 * count_state.c's, the attention slots count_attention.c's (what they share: count_internal.h). */
#include "core/diag/backend_count.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "iface/mirror16.h"
#include "util/util.h"
#include "core/diag/count_internal.h"

static const char *g_names[K_N] = {
    "matmul (lm head)", "linear fwd", "linear bwd", "gemm operand packing", "layernorm fwd", "layernorm bwd",
    "attention fwd", "attention bwd", "attention fused fwd", "attention fused bwd", "attention decode", "gelu fwd",
    "gelu bwd", "residual add", "embedding fwd", "embedding bwd", "softmax+xent", "adamw", "accumulate", "grad norm",
    "copy", "zero", "round_to", "pack16/unpack16", "rmsnorm fwd", "rmsnorm bwd", "rope", "swiglu fwd", "swiglu bwd",
    "gemv", "dropout", "dequant", "residual+layernorm fwd", "attention bidir fwd", "attention bidir bwd",
    "gelu_erf fwd", "gelu_erf bwd", "bias add", "bias grad", "argmax rows"};

static zt_backend_i g_wrapped;

/* ------------------------------------------------------------------ the counting slots */

/* the words (model addresses) the last slot's kernel reads, for cnt_defer_words_from: its input x16 and o16 */
static const void *g_from[2];
/* the words a mirror holds for the n floats at p, or NULL */
static const void *words_at(const void *p, size_t n) {
    return cnt_mir_on && cnt_prec != ZT_PREC_FP32 && p && n ? zt_mirror16_find(&cnt_mir, p, n) : NULL;
}
static void w_matmul(zt_backend *be, float *c, const float *a, const float *b, int M, int N, int K, int ta, int tb,
                     float al, float bt) {
    cnt_flush();
    cnt_calls[K_MATMUL]++;
    if (M > 0 && N > 0) cnt_gemm(K_MATMUL, M, N, K, bt != 0.0f, 0);
    cnt_inner->matmul(be, c, a, b, M, N, K, ta, tb, al, bt);
}
static void w_matmul_ld(zt_backend *be, float *c, const float *a, const float *b, int M, int N, int K, int ta, int tb,
                        float al, float bt, int lda, int ldb, int ldc) {
    cnt_flush();
    cnt_calls[K_MATMUL]++;
    if (M > 0 && N > 0) cnt_gemm(K_MATMUL, M, N, K, bt != 0.0f, 0);
    cnt_inner->matmul_ld(be, c, a, b, M, N, K, ta, tb, al, bt, lda, ldb, ldc);
}
static void w_linear_fwd(zt_backend *be, float *o, const float *i, const float *w, const float *b, int N, int C, int OC) {
    cnt_mneed(b, F4 * OC);
    cnt_mkeep(o, F4 * N * OC);
    cnt_flush();
    cnt_calls[K_LIN_FWD]++;
    if (N > 0 && OC > 0) {
        const int look = C > 0; /* inp and w read from words where they mirror them */
        const int iw = look && cnt_mfind(i, (double)N * C), ww = look && cnt_mfind(w, (double)C * OC);
        if (look && cnt_mir_on && cnt_fuse && cnt_prec != ZT_PREC_FP32) { /* kept (cnt_lin) */
            const cnt_product p = {1, 0, b != NULL, iw, ww, N, OC, C, o, NULL, (size_t)N * OC, i, w, b,
                                   iw ? zt_mirror16_find(&cnt_mir, i, (size_t)N * C) : NULL,
                                   ww ? zt_mirror16_find(&cnt_mir, w, (size_t)C * OC) : NULL, K_LIN_FWD};
            cnt_lin = p;
        } else {
            cnt_gemm_pre(K_LIN_FWD, N, OC, C, 0, b != NULL, iw, ww);
        }
    }
    cnt_inner->linear_fwd(be, o, i, w, b, N, C, OC);
    cnt_mdone();
}
static void w_linear_bwd(zt_backend *be, float *di, float *dw, float *db, const float *d, const float *i, const float *w,
                         int N, int C, int OC, int acc) {
    cnt_mneed(acc ? di : NULL, F4 * N * C);
    cnt_mkeep(di, F4 * N * C);
    cnt_mkeep(dw, F4 * C * OC);
    cnt_mkeep(db, F4 * OC);
    cnt_flush();
    cnt_calls[K_LIN_BWD]++;
    if (C > 0 && OC > 0) {
        /* dout, w and inp packed in one launch for both products (none that mirrors words); with a bias, that
           launch also sums dout's columns (partials per 64 rows, summed by the last block of each column block; dout
           read once: as it is packed, or as its words) */
        const int pre = N > 0 && cnt_prec != ZT_PREC_FP32;
        const double parts = N > 0 ? (N + 63) / 64 : 0;
        /* dinp's product kept (cnt_lin, the backend's D_PRODUCT with tb), its operands' words where they mirror */
        const int keep = N > 0 && !acc && cnt_mir_on && cnt_fuse && cnt_prec != ZT_PREC_FP32;
        const void *dwd = keep ? zt_mirror16_find(&cnt_mir, d, (size_t)N * OC) : NULL;
        const void *wwd = keep ? zt_mirror16_find(&cnt_mir, w, (size_t)C * OC) : NULL;
        if (pre) {
            const double nd = cnt_mfind(d, (double)N * OC) ? 0 : (double)N * OC;
            const double nw = cnt_mfind(w, (double)C * OC) ? 0 : (double)C * OC, ni = cnt_mfind(i, (double)N * C) ? 0 : (double)N * C;
            cnt_h16_need(2, nd);
            cnt_h16_need(1, nw);
            cnt_h16_need(0, ni);
            if (nd + nw + ni > 0) {
                cnt_add(K_GEMM_PACK, 1, 6.0 * (nd + nw + ni));
                cnt_tot.packed += nd + nw + ni;
                cnt_calls[K_GEMM_PACK]++;
                if (db) cnt_add(K_LIN_BWD, 0, (nd ? 0 : 2.0 * N * OC) + F4 * (2.0 * parts * OC + OC));
            } else if (db) { /* nothing to pack: the launch sums dout's columns alone, from its words */
                cnt_add(K_LIN_BWD, 1, 2.0 * N * OC + F4 * (2.0 * parts * OC + OC));
            }
        } else if (db) {
            cnt_add(K_LIN_BWD, 1, F4 * ((double)N * OC + 2.0 * parts * OC + OC));
        }
        cnt_gemm_pre(K_LIN_BWD, C, OC, N, 0, 0, pre, pre); /* dw = inp^T @ dout */
        if (keep) {
            const cnt_product p = {1, 0, 0, 1, 1, N, C, OC, di, NULL, (size_t)N * C, d, w, NULL, dwd, wwd, K_LIN_BWD};
            cnt_lin = p;
        } else if (N > 0) {
            cnt_gemm_pre(K_LIN_BWD, N, C, OC, acc, 0, pre, pre); /* dinp = dout @ w^T */
        }
    }
    cnt_inner->linear_bwd(be, di, dw, db, d, i, w, N, C, OC, acc);
    cnt_mdone();
}
static void w_ln_fwd(zt_backend *be, float *o, float *m, float *r, const float *i, const float *w, const float *b, int N,
                     int C, float eps) {
    cnt_mneed(i, F4 * N * C);
    cnt_mneed(w, F4 * C);
    cnt_mneed(b, F4 * C);
    cnt_mkeep(o, F4 * N * C);
    cnt_mkeep(m, F4 * N);
    cnt_mkeep(r, F4 * N);
    cnt_flush();
    cnt_calls[K_LN_FWD]++;
    if (N > 0 && C > 0) cnt_add(K_LN_FWD, 1, F4 * (2.0 * N * C + 2.0 * C + 2.0 * N));
    cnt_inner->layernorm_fwd(be, o, m, r, i, w, b, N, C, eps);
    cnt_defer_words(K_LN_FWD, o, (size_t)N * C);
    cnt_mdone();
}
/* one launch: a, b, w, bias read; res, out, mean, rstd written (each warp reads back the row of res it just wrote:
   not counted as HBM traffic); the residual's rounding is the kernel's, a round_to of out next is fused as after
   layernorm_fwd */
static void w_rln_fwd(zt_backend *be, float *res, float *o, float *m, float *r, const float *a, const float *b,
                      const float *w, const float *bi, int N, int C, int p, float eps) {
    /* a and b read as words where there are some (b's handed over by the product before it, else a mirror's, but
       not while a round_to of b is kept): 2 bytes an element, not 4 */
    const size_t n = (size_t)N * C;
    const int ab = b != a && b != res && b != o;
    int bw = ab && cnt_take_product_words(b, n);
    if (!bw && ab && !cnt_kept_round_of(b, n)) bw = cnt_mwords(b, n);
    const int aw = a != res && a != o && cnt_mwords(a, n);
    const void *from_a = aw ? words_at(a, n) : NULL, *from_b = bw ? words_at(b, n) : NULL; /* x16, o16 */
    cnt_mneed(aw ? NULL : a, F4 * N * C);
    cnt_mneed(bw ? NULL : b, F4 * N * C);
    cnt_mneed(w, F4 * C);
    cnt_mneed(bi, F4 * C);
    cnt_mkeep(res, F4 * N * C);
    cnt_mkeep(o, F4 * N * C);
    cnt_mkeep(m, F4 * N);
    cnt_mkeep(r, F4 * N);
    const int took = cnt_take_round(b, n, ab && !bw);
    /* res's words too, where a pack16_ahead wants them */
    const void *rw = p == cnt_prec && cnt_prec != ZT_PREC_FP32 ? cnt_stash_words(res, (size_t)N * C) : NULL;
    cnt_flush();
    cnt_calls[K_RLN_FWD]++;
    if (N > 0 && C > 0)
        cnt_add(K_RLN_FWD, 1, F4 * (4.0 * N * C + 2.0 * C + 2.0 * N + (took ? (double)N * C : 0)) + (rw ? 2.0 * N * C : 0) -
                                  2.0 * (aw + bw) * (double)N * C);
    cnt_inner->residual_layernorm_fwd(be, res, o, m, r, a, b, w, bi, N, C, p, eps);
    cnt_defer_words_from(K_RLN_FWD, o, (size_t)N * C, from_a, from_b, NULL);
    cnt_rln_res = res, cnt_rln_rw = rw;
    cnt_mdone();
}
/* LayerNorm / RMSNorm backward, one launch (the last block sums the partials): dout, inp, w, the statistics and dinp
   read, dinp written; each block's partials of the weight gradients written and read back by the last block, which
   writes them; nw = 2 (dw, db) or 1 (dw), nstat = 2 (mean, rstd) or 1 */
static void norm_bwd(int k, double N, double C, int nw, int nstat) {
    if (C <= 0) return;
    if (N <= 0) { cnt_add(k, 1, F4 * nw * C); return; }
    const double parts = (N + 63) / 64;
    cnt_add(k, 1, F4 * (4.0 * N * C + C + nstat * N + 2.0 * parts * nw * C + nw * C));
}
static void w_ln_bwd(zt_backend *be, float *di, float *dw, float *db, const float *d, const float *i, const float *w,
                     const float *m, const float *r, int N, int C) {
    /* dout as the product's words where it hands them over (2 bytes an element, not 4) */
    const int dw16 = d != di && d != i && cnt_take_product_words(d, (size_t)N * C);
    g_from[1] = dw16 ? words_at(d, (size_t)N * C) : NULL; /* the backend's o16 */
    cnt_mneed(di, F4 * N * C);
    cnt_mneed(dw16 ? NULL : d, F4 * N * C);
    cnt_mneed(w, F4 * C);
    cnt_mneed(m, F4 * N);
    cnt_mneed(r, F4 * N);
    cnt_mkeep(di, F4 * N * C);
    cnt_mkeep(dw, F4 * C);
    cnt_mkeep(db, F4 * C);
    const int iw = N > 0 && C > 0 && cnt_mfind(i, (double)N * C); /* inp read as its words where it has them */
    g_from[0] = iw ? words_at(i, (size_t)N * C) : NULL;
    const int took = cnt_take_round(d, (size_t)N * C, d != di && d != i && !dw16); /* dout written back rounded */
    cnt_flush();
    cnt_calls[K_LN_BWD]++;
    norm_bwd(K_LN_BWD, N, C, 2, 2);
    if (iw) cnt_bytes[K_LN_BWD] -= 2.0 * N * C;
    if (dw16) cnt_bytes[K_LN_BWD] -= 2.0 * N * C;
    if (took && N > 0 && C > 0) cnt_bytes[K_LN_BWD] += F4 * (double)N * C;
    cnt_inner->layernorm_bwd(be, di, dw, db, d, i, w, m, r, N, C);
    cnt_defer_words_from(K_LN_BWD, di, (size_t)N * C, g_from[0], g_from[1], NULL);
    cnt_mdone();
}
static void w_rms_fwd(zt_backend *be, float *o, float *r, const float *i, const float *w, int N, int C, float eps) {
    cnt_mneed(i, F4 * N * C);
    cnt_mneed(w, F4 * C);
    cnt_mkeep(o, F4 * N * C);
    cnt_mkeep(r, F4 * N);
    cnt_flush();
    cnt_calls[K_RMS_FWD]++;
    if (N > 0 && C > 0) cnt_add(K_RMS_FWD, 1, F4 * (2.0 * N * C + C + N));
    cnt_inner->rmsnorm_fwd(be, o, r, i, w, N, C, eps);
    cnt_defer_words(K_RMS_FWD, o, (size_t)N * C);
    cnt_mdone();
}
static void w_rms_bwd(zt_backend *be, float *di, float *dw, const float *d, const float *i, const float *w,
                      const float *r, int N, int C) {
    cnt_mneed(di, F4 * N * C);
    cnt_mneed(d, F4 * N * C);
    cnt_mneed(i, F4 * N * C);
    cnt_mneed(w, F4 * C);
    cnt_mneed(r, F4 * N);
    cnt_mkeep(di, F4 * N * C);
    cnt_mkeep(dw, F4 * C);
    cnt_flush();
    cnt_calls[K_RMS_BWD]++;
    norm_bwd(K_RMS_BWD, N, C, 1, 1);
    cnt_inner->rmsnorm_bwd(be, di, dw, d, i, w, r, N, C);
    cnt_defer_words(K_RMS_BWD, di, (size_t)N * C);
    cnt_mdone();
}
static void w_rope(zt_backend *be, float *q, const float *cs, int B, int T, int p0, int NH, int NKV, int hs, int inv) {
    cnt_mneed(q, F4 * B * T * (NH + 2.0 * NKV) * hs);
    cnt_mneed(cs, F4 * T * hs);
    cnt_mkeep(q, F4 * B * T * (NH + 2.0 * NKV) * hs);
    cnt_flush();
    cnt_calls[K_ROPE]++;
    if (B > 0 && T > 0 && hs > 0) cnt_add(K_ROPE, 1, F4 * (2.0 * B * T * (NH + NKV) * hs + (double)T * hs));
    cnt_inner->rope(be, q, cs, B, T, p0, NH, NKV, hs, inv);
    cnt_mdone();
}
static void w_swiglu_fwd(zt_backend *be, float *o, const float *i, int N, int I) {
    cnt_mneed(i, F4 * N * 2.0 * I);
    cnt_mkeep(o, F4 * N * I);
    cnt_flush();
    cnt_calls[K_SWIGLU_FWD]++;
    if (N > 0 && I > 0) cnt_add(K_SWIGLU_FWD, 1, F4 * 3.0 * N * I);
    cnt_inner->swiglu_fwd(be, o, i, N, I);
    cnt_defer_words(K_SWIGLU_FWD, o, (size_t)N * I);
    cnt_mdone();
}
static void w_swiglu_bwd(zt_backend *be, float *di, const float *i, const float *d, int N, int I) {
    cnt_mneed(i, F4 * N * 2.0 * I);
    cnt_mneed(d, F4 * N * I);
    cnt_mkeep(di, F4 * N * 2.0 * I);
    cnt_flush();
    cnt_calls[K_SWIGLU_BWD]++;
    if (N > 0 && I > 0) cnt_add(K_SWIGLU_BWD, 1, F4 * 5.0 * N * I);
    cnt_inner->swiglu_bwd(be, di, i, d, N, I);
    cnt_defer_words(K_SWIGLU_BWD, di, (size_t)N * 2 * I);
    cnt_mdone();
}
static void w_gemv(zt_backend *be, float *y, const float *x, const float *w, const float *b, int C, int OC, int wt) {
    cnt_flush();
    cnt_calls[K_GEMV]++;
    if (OC > 0) cnt_add(K_GEMV, 1, F4 * (C + (double)C * OC + (b ? OC : 0) + OC));
    cnt_inner->gemv(be, y, x, w, b, C, OC, wt);
}
/* GELU (tanh or, for the encoders, exact) forward: in, out; backward: in, dout, dinp. One launch over n elements
   (kernels_elem.cu), kept for a fused round_to */
static void gelu_count(int k, size_t n, int arrays) {
    cnt_flush();
    cnt_calls[k]++;
    if (n) cnt_add(k, 1, F4 * arrays * n);
}
/* a GELU forward (in: its input) or backward (in: dout, in_place: dinp == dout), taking a kept round_to of in */
static void gelu_count_in(int k, size_t n, int arrays, const void *in, int in_place, int fwd) {
    const int took = cnt_take_round_w(in, n, in_place, fwd, k);
    gelu_count(k, n, arrays);
    if (took && fwd && n) cnt_bytes[k] += F4 * (double)n; /* the input written back rounded */
}
/* GELU forward (dout NULL: reads inp) or backward (reads dout, and inp as its words where it has them) into o */
static void gelu_slot(int k, float *o, const float *i, const float *d, size_t n) {
    /* the product before it hands over its words: the forward's inp, the backward's dout (in place) */
    const int pw = d ? d == o && cnt_take_product_words(d, n) : cnt_take_product_words(i, n);
    const void *pww = pw ? words_at(d ? d : i, n) : NULL;
    cnt_mneed(pw ? NULL : d ? d : i, F4 * n);
    cnt_mkeep(o, F4 * n);
    const int iw = d && n && cnt_mfind(i, (double)n);
    g_from[0] = d ? (iw ? words_at(i, n) : NULL) : pww; /* the backend's x16, o16 */
    g_from[1] = d ? pww : NULL;
    gelu_count_in(k, n, d ? 3 : 2, d ? d : i, d ? o == d : 1, !d);
    cnt_bytes[k] -= 2.0 * n * (iw + pw); /* each input read as words: 2 bytes an element, not 4 */
}
static void w_gelu_fwd(zt_backend *be, float *o, const float *i, size_t n) {
    gelu_slot(K_GELU_FWD, o, i, NULL, n);
    cnt_inner->gelu_fwd(be, o, i, n);
    cnt_defer_words_from(K_GELU_FWD, o, n, g_from[0], g_from[1], NULL);
    cnt_mdone();
}
static void w_gelu_bwd(zt_backend *be, float *di, const float *i, const float *d, size_t n) {
    gelu_slot(K_GELU_BWD, di, i, d, n);
    cnt_inner->gelu_bwd(be, di, i, d, n);
    cnt_defer_words_from(K_GELU_BWD, di, n, g_from[0], g_from[1], NULL);
    cnt_mdone();
}
static void w_gelu_erf_fwd(zt_backend *be, float *o, const float *i, size_t n) {
    gelu_slot(K_GELU_ERF_FWD, o, i, NULL, n);
    cnt_inner->gelu_erf_fwd(be, o, i, n);
    cnt_defer_words_from(K_GELU_ERF_FWD, o, n, g_from[0], g_from[1], NULL);
    cnt_mdone();
}
static void w_gelu_erf_bwd(zt_backend *be, float *di, const float *i, const float *d, size_t n) {
    gelu_slot(K_GELU_ERF_BWD, di, i, d, n);
    cnt_inner->gelu_erf_bwd(be, di, i, d, n);
    cnt_defer_words_from(K_GELU_ERF_BWD, di, n, g_from[0], g_from[1], NULL);
    cnt_mdone();
}
/* the encoders' MLM head (kernels_elem.cu): one launch each */
static void w_bias_add(zt_backend *be, float *o, const float *b, int N, int OC) {
    cnt_flush();
    cnt_calls[K_BIAS_ADD]++;
    if (N > 0 && OC > 0) cnt_add(K_BIAS_ADD, 1, F4 * (2.0 * N * OC + OC));
    cnt_inner->bias_add(be, o, b, N, OC);
}
/* one thread per column over every row; N == 0 still launches (it writes the zeros) */
static void w_bias_grad(zt_backend *be, float *db, const float *d, int N, int OC) {
    cnt_flush();
    cnt_calls[K_BIAS_GRAD]++;
    if (OC > 0) cnt_add(K_BIAS_GRAD, 1, F4 * ((N > 0 ? (double)N * OC : 0) + OC));
    cnt_inner->bias_grad(be, db, d, N, OC);
}
static void w_argmax(zt_backend *be, int32_t *idx, const float *x, int N, int V, int ld) {
    cnt_flush();
    cnt_calls[K_ARGMAX]++;
    if (N > 0) cnt_add(K_ARGMAX, 1, F4 * (double)N * (V > 0 ? V : 0) + 4.0 * N);
    cnt_inner->argmax_rows(be, idx, x, N, V, ld);
}
static void w_add(zt_backend *be, float *o, const float *a, const float *b, size_t n) {
    cnt_mneed(a, F4 * n);
    cnt_mneed(b, F4 * n);
    cnt_mkeep(o, F4 * n);
    const int took = cnt_take_round(b, n, b != a); /* b written back rounded: 4 bytes an element more */
    cnt_flush();
    cnt_calls[K_ADD]++;
    if (n) cnt_add(K_ADD, 1, F4 * (3.0 + took) * n);
    cnt_inner->add(be, o, a, b, n);
    cnt_defer(o, n);
    cnt_mdone();
}
static void w_emb_fwd(zt_backend *be, float *o, const int32_t *t, const float *wte, const float *wpe, int B, int T, int C) {
    cnt_flush();
    cnt_calls[K_EMB_FWD]++;
    const double n = (double)B * T * C;
    if (n > 0) cnt_add(K_EMB_FWD, 1, 4.0 * B * T + F4 * (2.0 * n + (wpe ? (double)T * C : 0)));
    cnt_inner->embed_fwd(be, o, t, wte, wpe, B, T, C);
    cnt_defer(o, (size_t)B * T * C);
}
/* embedding backward (kernels_elem.cu): dwpe, then a bitonic sort of the (token, position) keys padded to a power of
   two P (tiles of 2048 in shared memory, then per stage k one launch per step j >= the tile and a merge of the tiles),
   then dwte by token; every token row is counted as read and written (an upper bound: B*T rows) */
static void w_emb_bwd(zt_backend *be, float *dwte, float *dwpe, const float *d, const int32_t *t, int B, int T, int C) {
    cnt_flush();
    cnt_calls[K_EMB_BWD]++;
    const double N = (double)B * T;
    if (N > 0 && C > 0) {
        if (dwpe) cnt_add(K_EMB_BWD, 1, F4 * (N * C + (double)T * C));
        size_t P = 2;
        while (P < (size_t)N) P <<= 1;
        const size_t tile = P < 2048 ? P : 2048;
        cnt_add(K_EMB_BWD, 1, 4.0 * N + 8.0 * P);
        for (size_t k = 2 * tile; k <= P; k <<= 1) {
            for (size_t j = k / 2; j >= tile; j >>= 1) cnt_add(K_EMB_BWD, 1, 16.0 * P);
            cnt_add(K_EMB_BWD, 1, 16.0 * P);
        }
        cnt_add(K_EMB_BWD, 1, 8.0 * N + F4 * 3.0 * N * C);
    }
    cnt_inner->embed_bwd(be, dwte, dwpe, d, t, B, T, C);
}
static void w_xent(zt_backend *be, float *l, float *lg, const int32_t *t, int N, int V, int Vp, float s, const float *sa) {
    cnt_flush();
    cnt_calls[K_XENT]++;
    if (N > 0) cnt_add(K_XENT, 1, F4 * ((double)N * V + N + N) + (s != 0.0f ? F4 * (double)N * Vp : 0));
    cnt_inner->softmax_xent(be, l, lg, t, N, V, Vp, s, sa);
    if (s != 0.0f) cnt_defer(lg, (size_t)N * Vp);
    else cnt_defer(NULL, (size_t)N * Vp); /* kept, but no round_to can name it */
}
/* matmul16: the LM head's products on 2-byte logits (cuda_gemm.cu zt_cu_matmul16): a 2-byte a is not packed, a 2-byte
   c is written as 2-byte words by the GEMM itself */
static void w_matmul16(zt_backend *be, void *c, int c16, const void *a, int a16, const float *b, int M, int N, int K,
                       int ta, int tb, int prec, float beta) {
    cnt_mneed(a16 ? NULL : a, F4 * M * K);
    if (beta != 0.0f) cnt_mneed(c, F4 * M * N);
    cnt_mkeep(c, (c16 ? 2.0 : F4) * M * N);
    cnt_flush();
    cnt_calls[K_MATMUL]++;
    if (M > 0 && N > 0) {
        cnt_gemm_pre(K_MATMUL, M, N, K, 0, 0, a16, K > 0 && cnt_mfind(b, (double)K * N)); /* b: the tied wte's words */
        if (c16) cnt_bytes[K_MATMUL] -= 2.0 * M * N; /* counted as a float32 c: 2 bytes an element less */
        if (beta != 0.0f) cnt_bytes[K_MATMUL] += F4 * M * N; /* c read too */
    }
    cnt_inner->matmul16(be, c, c16, a, a16, b, M, N, K, ta, tb, prec, beta);
    cnt_mdone();
}
/* softmax_xent16: 2-byte logits read, and (dscale != 0) 2-byte dlogits written in place */
static void w_xent16(zt_backend *be, float *l, void *lg, const int32_t *t, int N, int V, int Vp, float s,
                     const float *sa, int prec) {
    cnt_mneed(t, 4.0 * N);
    cnt_mkeep(l, F4 * N); /* keeps the mirrors but the word buffers' lazy ones (cuda_backend_ops.cu b_softmax_xent16) */
    cnt_mkeep(lg, 2.0 * N * Vp);
    cnt_settle_rings();
    cnt_flush();
    cnt_calls[K_XENT]++;
    if (N > 0) cnt_add(K_XENT, 1, 2.0 * (double)N * V + F4 * 2.0 * N + (s != 0.0f ? 2.0 * (double)N * Vp : 0));
    cnt_inner->softmax_xent16(be, l, lg, t, N, V, Vp, s, sa, prec);
    cnt_mdone();
}
static void w_adamw(zt_backend *be, float *p, const float *g, float *m, float *v, size_t n, float lr, float b1, float b2,
                    float eps, float wd, float c1, float c2, float gs) {
    cnt_flush();
    cnt_calls[K_ADAMW]++;
    if (n) cnt_add(K_ADAMW, 1, F4 * 7.0 * n);
    cnt_inner->adamw(be, p, g, m, v, n, lr, b1, b2, eps, wd, c1, c2, gs);
}
/* cuda_backend.cu b_adamw_multi: one k_adamw_multi launch over all the segments' elements (its device copy of the
   segment table is cached, uploaded once: no copy per step); counted in the adamw row, the same bytes. Kept (bf16 /
   fp16 with the fused rounding, segments that tile the range from its start in order) for the pack16 of its
   parameters, which it then does itself (w_pack) */
static void w_adamw_multi(zt_backend *be, float *p, const float *g, float *m, float *v, const zt_adamw_seg *segs,
                          int nseg, float b1, float b2, float eps, const float *h) {
    cnt_flush();
    cnt_calls[K_ADAMW]++;
    double n = 0;
    for (int s = 0; s < nseg; s++) n += (double)segs[s].n;
    if (n > 0) {
        cnt_adamw = 1, cnt_adamw_p = p, cnt_adamw_n = n, cnt_adamw_bytes = F4 * 7.0 * n;
        if (!(cnt_prec != ZT_PREC_FP32 && cnt_fuse && zt_adamw_segs_dense(segs, nseg))) cnt_flush();
    }
    cnt_inner->adamw_multi(be, p, g, m, v, segs, nseg, b1, b2, eps, h);
}
static void w_acc(zt_backend *be, float *a, const float *x, size_t n) {
    cnt_mneed(a, F4 * n);
    cnt_mneed(x, F4 * n);
    cnt_mkeep(a, F4 * n);
    /* a kept round_to of a range within x (cuda_backend_ops.cu b_accumulate): done inside, that range written back
       rounded (4 bytes an element of it more) */
    cnt_lresolve();
    double took = 0;
    size_t off;
    if (cnt_rpend && !cnt_rpend_w && x != a && zt_mirror16_within(x, n, cnt_rpend_x, cnt_rpend_n, &off)) {
        cnt_rpend = 0;
        cnt_tot.fused_rounds++;
        took = (double)cnt_rpend_n;
    }
    cnt_flush();
    cnt_calls[K_ACC]++;
    if (n) cnt_add(K_ACC, 1, F4 * (3.0 * n + took));
    cnt_inner->accumulate(be, a, x, n);
    cnt_mdone();
}
/* cuda_backend_ops.cu b_sumsq_chunks: kept (cnt_sumsq) for the clip_scale of exactly its sums, which its launch then
   does; any other slot launches it as it was (cnt_flush) */
static void w_sumsq(zt_backend *be, double *o, const float *x, size_t n, size_t c) {
    cnt_flush();
    cnt_calls[K_SUMSQ]++;
    if (n && c) cnt_sumsq = 1, cnt_sumsq_out = o, cnt_sumsq_nc = (n + c - 1) / c, cnt_sumsq_bytes = F4 * n + 8.0 * ((n + c - 1) / c);
    cnt_inner->sumsq_chunks(be, o, x, n, c);
}
/* cuda_backend_ops.cu b_clip_scale: one single-block launch reading the chunk sums and the step's scalars, writing
   the norm and the gradient scale (in the kept sumsq_chunks' launch when they are its sums); the norm's row */
static void w_clip(zt_backend *be, float *h, double *nm, const double *s, size_t n, double c, int k) {
    const int fused = cnt_sumsq && cnt_sumsq_out == (const void *)s && cnt_sumsq_nc == n;
    if (fused) cnt_add(K_SUMSQ, 0, cnt_sumsq_bytes), cnt_sumsq = 0;
    cnt_flush();
    cnt_add(K_SUMSQ, 1, 8.0 * n + 8.0 + F4 * 3.0);
    cnt_inner->clip_scale(be, h, nm, s, n, c, k);
}
static void w_copy(zt_backend *be, void *d, const void *s, size_t n) {
    cnt_flush();
    cnt_calls[K_COPY]++;
    if (n && d != s) { cnt_memops[K_COPY]++; cnt_bytes[K_COPY] += 2.0 * n; }
    cnt_inner->copy(be, d, s, n);
}
static void w_zero(zt_backend *be, void *d, size_t n) {
    cnt_mkeep(d, (double)n); /* keeps the mirrors it does not write (cuda_backend_core.cu b_zero) */
    cnt_flush();
    cnt_calls[K_ZERO]++;
    if (n) { cnt_memops[K_ZERO]++; cnt_bytes[K_ZERO] += (double)n; }
    cnt_inner->zero(be, d, n);
    cnt_mdone();
}
static void w_round(zt_backend *be, float *x, size_t n, int p) {
    cnt_mneed(x, F4 * n);
    cnt_mkeep(x, F4 * n);
    cnt_calls[K_ROUND]++;
    if (cnt_lin.on && cnt_lin.out == x && cnt_lin.n == n && p == cnt_prec) { /* taken by the kept product */
        cnt_lin.rounded = 1;
        cnt_lin.w = cnt_stash_words(x, n);
    } else if (cnt_pend && p != ZT_PREC_FP32 && cnt_pend_out == x && cnt_pend_n == n) { /* inside the op */
        cnt_tot.fused_rounds++;
        cnt_pend = 0;
        if (cnt_pend_k >= 0 && p == cnt_prec) cnt_words_for(cnt_pend_k, x, n);
    } else if (p != ZT_PREC_FP32 && !(cnt_rpend && cnt_rpend_x == x && cnt_rpend_n == n && cnt_rpend_prec == p)) {
        cnt_flush();
        const void *w = p == cnt_prec ? cnt_stash_words(x, n) : NULL; /* its words too, where a pack16_ahead wants them */
        if (cnt_prec != ZT_PREC_FP32 && cnt_fuse) { /* kept (cuda_backend.cu D_ROUND) */
            cnt_rpend = 1;
            cnt_rpend_x = x;
            cnt_rpend_n = n;
            cnt_rpend_prec = p;
            cnt_rpend_w = w;
        } else if (n) {
            cnt_add(K_ROUND, 1, F4 * 2.0 * n + (w ? 2.0 * n : 0));
        }
    }
    cnt_inner->round_to(be, x, n, p);
    cnt_mdone();
}
static int w_pack_ahead(zt_backend *be, void *w, const float *x, size_t n) {
    const int take = cnt_mir_on && cnt_prec != ZT_PREC_FP32 && cnt_ntg < N_TARGETS;
    if (take) {
        cnt_tg[cnt_ntg].x = x;
        cnt_tg[cnt_ntg].w = w;
        cnt_tg[cnt_ntg++].n = n;
    }
    cnt_inner->pack16_ahead(be, w, x, n);
    return take;
}
/* packing x to d where a mirror says d holds x's words already: no launch (cuda_backend_ops.cu b_pack16) */
/* a pack16 / unpack16 of floats f and words w (n): launched before a kept round_to of other memory, which stays kept
   (cuda_backend_ops.cu stream_past_round); anything else kept is launched first */
/* whether [p, p + bytes) misses the floats f (n) and the words w (n) */
static int apart(const void *p, double bytes, const void *f, const void *w, size_t n) {
    return !p || (!zt_mirror16_overlap((uintptr_t)p, (size_t)bytes, (uintptr_t)f, 4 * n) &&
                  !zt_mirror16_overlap((uintptr_t)p, (size_t)bytes, (uintptr_t)w, 2 * n));
}
static int lin_apart(const void *f, const void *w, size_t n) {
    const cnt_product *l = &cnt_lin;
    const double ni = l->M * l->K, nw = l->K * l->N;
    return apart(l->out, F4 * l->n, f, w, n) && apart(l->w, 2.0 * l->n, f, w, n) &&
           apart(l->iw ? NULL : l->pi, F4 * ni, f, w, n) && apart(l->ww ? NULL : l->pw, F4 * nw, f, w, n) &&
           apart(l->pb, F4 * l->N, f, w, n) && apart(l->pi16, 2.0 * ni, f, w, n) && apart(l->pw16, 2.0 * nw, f, w, n);
}
/* cuda_backend_ops.cu stream_past_round: a kept round_to or product apart from the copy's memory stays kept; a
   rounded product that is not is launched first, writing its output's words alone */
static void flush_past_round(const void *f, const void *w, size_t n) {
    if (cnt_lin.on && lin_apart(f, w, n)) return;
    if (cnt_lin.on && cnt_lin.rounded) cnt_take_product_words(cnt_lin.out, cnt_lin.n); /* its words alone, now */
    if (!cnt_pend && cnt_rpend && apart(cnt_rpend_x, F4 * cnt_rpend_n, f, w, n) &&
        apart(cnt_rpend_w, 2.0 * cnt_rpend_n, f, w, n))
        return;
    cnt_flush();
}
static void w_pack(zt_backend *be, void *d, const float *x, size_t n, int p) {
    cnt_ntg = 0;
    cnt_calls[K_PACK]++;
    if (n && cnt_mir_on && p == cnt_prec && (const void *)zt_mirror16_find(&cnt_mir, x, n) == d) {
        cnt_tot.packs_skipped++; /* nothing launched, the kept op stays kept */
    } else if (cnt_adamw && cnt_adamw_p == (const void *)x && cnt_adamw_n <= (double)n && p == cnt_prec) {
        /* the update writes the words too, and packs the floats past its parameters (a shard's tail): no launch */
        cnt_mneed(x, F4 * n);
        cnt_mkeep(d, 2.0 * n);
        cnt_add(K_ADAMW, 1, cnt_adamw_bytes + 2.0 * n + 4.0 * ((double)n - cnt_adamw_n));
        cnt_adamw = 0;
        cnt_tot.adamw_words++;
    } else {
        cnt_mneed(x, F4 * n);
        cnt_mkeep(d, 2.0 * n);
        flush_past_round(x, d, n);
        if (n) cnt_add(K_PACK, 1, 6.0 * n);
    }
    cnt_inner->pack16(be, d, x, n, p);
    cnt_mdone();
}
static void w_unpack(zt_backend *be, float *d, const void *x, size_t n, int p) {
    cnt_mkeep(d, F4 * n);
    flush_past_round(d, x, n);
    cnt_calls[K_PACK]++;
    if (n) cnt_add(K_PACK, 1, 6.0 * n);
    cnt_inner->unpack16(be, d, x, n, p);
    if (p == cnt_prec) cnt_madd(d, x, n, 0); /* d now equals the words */
    cnt_mdone();
}
/* unpack16_lazy (cuda_backend_ops.cu): a lazy mirror, no launch, in a bf16 / fp16 run with mirrors; else declined */
static int w_unpack_lazy(zt_backend *be, float *d, const void *x, size_t n, int p) {
    if (!cnt_mir_on || p != cnt_prec || p == ZT_PREC_FP32) return 0;
    cnt_mkeep(d, F4 * n);
    cnt_flush();
    cnt_calls[K_PACK]++;
    cnt_inner->unpack16_lazy(be, d, x, n, p);
    cnt_madd(d, x, n, 1);
    cnt_mdone();
    return 1;
}
static void w_dropout(zt_backend *be, float *o, const float *i, size_t n, float p, uint64_t seed,
                      const uint64_t *micro) {
    cnt_flush();
    cnt_calls[K_DROPOUT]++;
    if (n && !(p == 0.0f && o == i)) cnt_add(K_DROPOUT, 1, F4 * 2.0 * n + (p != 0.0f && micro ? 8.0 : 0.0));
    cnt_inner->dropout(be, o, i, n, p, seed, micro);
}
/* the encoded blob's bytes are not counted (a QLoRA base: at most a byte per element), only the decoded matrix */
static void w_dequant(zt_backend *be, float *o, const void *blob, int fmt, size_t rows, size_t cols) {
    cnt_flush();
    cnt_calls[K_DEQUANT]++;
    if (rows && cols) cnt_add(K_DEQUANT, 1, F4 * (double)rows * cols);
    cnt_inner->dequant(be, o, blob, fmt, rows, cols);
}
static void w_set_precision(zt_backend *be, int prec) {
    cnt_flush();
    cnt_prec = prec;
    cnt_ntg = 0;
    if (cnt_inner->set_precision) cnt_inner->set_precision(be, prec);
}
/* launches and memory calls counted so far, and that number at the last wait (host_mid) */
static long g_at_wait;
static long queued_so_far(void) {
    long n = 0;
    for (int k = 0; k < K_N; k++) n += cnt_launches[k] + cnt_memops[k];
    return n;
}
/* the memory and host-transfer slots launch the kept op too */
static void *w_alloc(zt_backend *be, size_t n) { cnt_flush(); return cnt_inner->alloc(be, n); }
static void w_free(zt_backend *be, void *p) { cnt_flush(); cnt_inner->free(be, p); }
static void w_sync(zt_backend *be) {
    cnt_flush();
    cnt_tot.host_waits++;
    g_at_wait = queued_so_far();
    cnt_inner->sync(be);
}
/* the host call waits for the device as a sync does (the count device captures nothing) */
static void w_host_call(zt_backend *be, void (*fn)(void *), const void *arg, size_t argbytes) {
    cnt_flush();
    cnt_tot.host_waits++;
    g_at_wait = queued_so_far();
    cnt_inner->host_call(be, fn, arg, argbytes);
}
static void w_to_device(zt_backend *be, void *d, const void *s, size_t n) {
    cnt_flush();
    if (n) { cnt_tot.host_xfers++; cnt_tot.host_bytes += (double)n; }
    if (n && queued_so_far() != g_at_wait) cnt_tot.host_mid++;
    cnt_inner->to_device(be, d, s, n);
}
static void w_to_host(zt_backend *be, void *d, const void *s, size_t n) {
    cnt_flush();
    cnt_tot.host_waits++;
    g_at_wait = queued_so_far();
    if (n) { cnt_tot.host_xfers++; cnt_tot.host_bytes += (double)n; }
    cnt_inner->to_host(be, d, s, n);
}

void zt_backend_count_begin(zt_backend *be) {
    cnt_inner = be->i;
    g_wrapped = *be->i;
    zt_backend_i *w = &g_wrapped;
#define WRAP(slot, fn) if (cnt_inner->slot) w->slot = fn
    WRAP(alloc, w_alloc); WRAP(free, w_free); WRAP(sync, w_sync); WRAP(host_call, w_host_call); WRAP(to_device, w_to_device);
    WRAP(to_host, w_to_host); WRAP(copy, w_copy); WRAP(zero, w_zero);
    WRAP(matmul, w_matmul); WRAP(matmul_ld, w_matmul_ld); WRAP(linear_fwd, w_linear_fwd);
    WRAP(linear_bwd, w_linear_bwd); WRAP(layernorm_fwd, w_ln_fwd); WRAP(layernorm_bwd, w_ln_bwd); WRAP(residual_layernorm_fwd, w_rln_fwd);
    WRAP(rmsnorm_fwd, w_rms_fwd); WRAP(rmsnorm_bwd, w_rms_bwd); WRAP(rope, w_rope);
    WRAP(swiglu_fwd, w_swiglu_fwd); WRAP(swiglu_bwd, w_swiglu_bwd); WRAP(attention_fwd, cnt_att_fwd);
    WRAP(attention_bwd, cnt_att_bwd); WRAP(attention_decode, cnt_att_dec); WRAP(gemv, w_gemv);
    WRAP(gelu_fwd, w_gelu_fwd); WRAP(gelu_bwd, w_gelu_bwd); WRAP(add, w_add); WRAP(embed_fwd, w_emb_fwd);
    WRAP(embed_bwd, w_emb_bwd); WRAP(softmax_xent, w_xent); WRAP(adamw, w_adamw); WRAP(accumulate, w_acc);
    WRAP(adamw_multi, w_adamw_multi); WRAP(matmul16, w_matmul16); WRAP(softmax_xent16, w_xent16);
    WRAP(sumsq_chunks, w_sumsq); WRAP(clip_scale, w_clip); WRAP(round_to, w_round); WRAP(pack16, w_pack); WRAP(unpack16, w_unpack);
    WRAP(pack16_ahead, w_pack_ahead); WRAP(unpack16_lazy, w_unpack_lazy);
    WRAP(dropout, w_dropout); WRAP(dequant, w_dequant); WRAP(set_precision, w_set_precision);
    WRAP(attention_fused_fwd, cnt_fatt_fwd); WRAP(attention_fused_bwd, cnt_fatt_bwd);
    WRAP(attention_bidir_fwd, cnt_batt_fwd); WRAP(attention_bidir_bwd, cnt_batt_bwd); WRAP(gelu_erf_fwd, w_gelu_erf_fwd);
    WRAP(gelu_erf_bwd, w_gelu_erf_bwd); WRAP(bias_add, w_bias_add); WRAP(bias_grad, w_bias_grad);
    WRAP(argmax_rows, w_argmax);
#undef WRAP
    /* set_precision is how the backend learns the run's precision: keep seeing it even where the inner has none */
    w->set_precision = w_set_precision;
    const char *fr = getenv("ZT_CUDA_FUSE_ROUND");
    cnt_fuse = !(fr && strcmp(fr, "0") == 0);
    const char *mr = getenv("ZT_CUDA_MIRROR");
    cnt_mir_on = !(mr && strcmp(mr, "0") == 0);
    cnt_attn_tc = zt_attention_tc_on();
    zt_mirror16_clear(&cnt_mir);
    cnt_mir_keep = 0;
    cnt_pend_k = -1;
    memset(&cnt_lin, 0, sizeof cnt_lin);
    cnt_ring_next = 0;
    cnt_ntg = 0;
    cnt_rpend_w = NULL;
    cnt_prec = ZT_PREC_FP32;
    cnt_pend = cnt_rpend = cnt_adamw = cnt_sumsq = 0;
    memset(cnt_h16, 0, sizeof cnt_h16);
    be->i = &g_wrapped;
    zt_backend_count_reset();
}

void zt_backend_count_reset(void) {
    memset(cnt_calls, 0, sizeof cnt_calls);
    memset(cnt_launches, 0, sizeof cnt_launches);
    memset(cnt_memops, 0, sizeof cnt_memops);
    memset(cnt_bytes, 0, sizeof cnt_bytes);
    memset(&cnt_tot, 0, sizeof cnt_tot);
    g_at_wait = 0;
}

static int by_bytes(const void *a, const void *b) {
    const double x = ((const zt_count_entry *)a)->bytes, y = ((const zt_count_entry *)b)->bytes;
    return (x < y) - (x > y);
}

int zt_backend_count_report(zt_count_entry *out, int max) {
    int n = 0;
    for (int k = 0; k < K_N && n < max; k++)
        if (cnt_calls[k]) out[n++] = (zt_count_entry){g_names[k], cnt_calls[k], cnt_launches[k], cnt_memops[k], cnt_bytes[k]};
    qsort(out, (size_t)n, sizeof *out, by_bytes);
    return n;
}

zt_count_totals zt_backend_count_totals(void) {
    zt_count_totals t = cnt_tot;
    t.gemm16 = cnt_h16[0] + cnt_h16[1] + cnt_h16[2];
    for (int k = 0; k < K_N; k++) {
        t.launches += cnt_launches[k];
        t.memops += cnt_memops[k];
        t.bytes += cnt_bytes[k];
    }
    return t;
}

void zt_backend_count_end(zt_backend *be) {
    if (cnt_inner && be->i == &g_wrapped) be->i = cnt_inner;
    cnt_inner = NULL;
}

void zt_backend_count_comm_call(void) { cnt_tot.comm_calls++; }
