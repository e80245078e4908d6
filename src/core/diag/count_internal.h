/* count_internal.h — what the counting decorator's files share (count_state.c: the table and the model of the CUDA
 * backend's kept op, mirrors, stash words and lazy unpacks; backend_count.c: most slots and the decorator's
 * lifecycle; count_attention.c: the attention slots). Not for other files: the public interface is backend_count.h. */
#ifndef ZT_COUNT_INTERNAL_H
#define ZT_COUNT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "core/diag/backend_count.h"
#include "iface/backend.h"
#include "iface/mirror16.h"

/* the op kinds of the table (their names: g_names in backend_count.c) */
enum { K_MATMUL, K_LIN_FWD, K_LIN_BWD, K_GEMM_PACK, K_LN_FWD, K_LN_BWD, K_ATT_FWD, K_ATT_BWD, K_FATT_FWD, K_FATT_BWD,
       K_ATT_DEC, K_GELU_FWD, K_GELU_BWD, K_ADD, K_EMB_FWD, K_EMB_BWD, K_XENT, K_ADAMW, K_ACC, K_SUMSQ, K_COPY, K_ZERO,
       K_ROUND, K_PACK, K_RMS_FWD, K_RMS_BWD, K_ROPE, K_SWIGLU_FWD, K_SWIGLU_BWD, K_GEMV, K_DROPOUT, K_DEQUANT,
       K_RLN_FWD, K_BATT_FWD, K_BATT_BWD, K_GELU_ERF_FWD, K_GELU_ERF_BWD, K_BIAS_ADD, K_BIAS_GRAD, K_ARGMAX, K_N };

#define F4 4.0 /* bytes of a float32 buffer element */

/* count_state.c: the table, and the state of the CUDA backend it models */
extern long cnt_calls[K_N], cnt_launches[K_N], cnt_memops[K_N]; /* per op kind: slot calls, launches, memory calls */
extern double cnt_bytes[K_N];
extern zt_count_totals cnt_tot;
/* the CUDA backend's packed-operand buffers (cuda_gemm.cu h16_buf: 0 a / linear_bwd's inp, 1 b / its w, 2 its dout),
   each the largest operand packed into it since zt_backend_count_begin, in elements */
extern double cnt_h16[3];
void cnt_h16_need(int k, double n);
extern const zt_backend_i *cnt_inner; /* the wrapped backend's slots */
extern int cnt_prec;                  /* set_precision's */
extern int cnt_fuse;                  /* ZT_CUDA_FUSE_ROUND */
extern int cnt_attn_tc;               /* the fused attention on tensor cores in bf16 / fp16 (ZT_CUDA_ATTN_TC) */
/* the op kept for a following round_to (cuda_backend_core.cu Deferred): its output range; its kind when it writes
   its rounded output's words too, else -1 */
extern const void *cnt_pend_out;
extern size_t cnt_pend_n;
extern int cnt_pend, cnt_pend_k;
/* a round_to kept for the op that reads its buffer next (D_ROUND), and the stash words it is to write (or NULL) */
extern const void *cnt_rpend_x, *cnt_rpend_w;
extern size_t cnt_rpend_n;
extern int cnt_rpend, cnt_rpend_prec;
/* the mirrors (iface/mirror16.h): kept across the slots that name what they write (cnt_mkeep ... cnt_mdone) */
extern zt_mirror16 cnt_mir;
extern int cnt_mir_keep, cnt_mir_on;  /* ZT_CUDA_MIRROR */
extern int cnt_ring_next;             /* the word buffer the next producer takes (fake addresses) */
/* pack16_ahead's ranges until the next pack16: floats at x, words at w */
#define N_TARGETS 16
typedef struct cnt_target { const void *x, *w; size_t n; } cnt_target;
extern cnt_target cnt_tg[N_TARGETS];
extern int cnt_ntg;
/* a product kept (cuda_backend_core.cu D_PRODUCT: a linear forward, or a linear backward's dinp): c(M, N) =
   a(M, K) @ b(K, N) (+ bias), a / b
   read from words (iw, ww), its output range, whether its round_to was taken, the stash words that reserved; the
   memory it reads: a, b, bias, and a's and b's words where it reads those */
typedef struct cnt_product {
    int on, rounded, bias, iw, ww;
    double M, N, K;
    const void *out, *w;
    size_t n;
    const void *pi, *pw, *pb, *pi16, *pw16;
    int k; /* the kind it is counted in: K_LIN_FWD, or K_LIN_BWD (dinp = dout @ w^T: a = dout, b = w, both words) */
} cnt_product;
extern cnt_product cnt_lin;
/* the kept residual + LayerNorm's res and the stash words it writes them into (or NULL) */
extern const void *cnt_rln_res, *cnt_rln_rw;

/* a launch of kind k moving bytes; the kept op launched (every slot but a fused round_to); the mirrors a slot reads
   as floats (mneed, settled as one launch by msettle or the next mkeep), writes (mkeep ... mdone; mdrop) or reads as
   words (mfind: 1; mwords: 1 where there are words, nothing settled otherwise); whether a round_to of a range is kept
   (kept_round_of); a record (madd; lazy: an unpack16_lazy's); the stash words reserved for a range, recorded as
   its mirror (stash_words); a kept round_to taken by the op reading in (take_round; take_round_w: words 1 when it
   writes the round's stash words, counted in k); an op kept for a following round_to (defer; defer_words: its rounded
   output is a product's input, written as words by words_for); a word buffer (ring); the kept product
   resolved (lresolve: launched, its round_to kept) or its output handed over as words (take_product_words: 1); one
   GEMM (gemm_pre: operands given as words) */
void cnt_add(int k, long launches, double bytes);
void cnt_flush(void);
extern const void *cnt_adamw_p;
extern double cnt_adamw_n, cnt_adamw_bytes;
extern int cnt_adamw;
extern const void *cnt_sumsq_out;
extern size_t cnt_sumsq_nc;
extern double cnt_sumsq_bytes;
extern int cnt_sumsq;
void cnt_msettle(void);
void cnt_settle_rings(void);
void cnt_mneed(const void *p, double bytes);
void cnt_mdrop(const void *p, size_t bytes);
void cnt_madd(const void *dst, const void *src, size_t n, int lazy);
void cnt_mkeep(const void *p, double bytes);
void cnt_mdone(void);
int cnt_mfind(const float *p, double n);
int cnt_mwords(const float *p, size_t n);
int cnt_kept_round_of(const void *p, size_t n);
const void *cnt_stash_words(const void *p, size_t n);
int cnt_take_round(const void *in, size_t n, int in_place);
int cnt_take_round_w(const void *in, size_t n, int in_place, int words, int k);
void cnt_defer(const void *out, size_t n);
void cnt_defer_words(int k, const void *out, size_t n);
void cnt_defer_words_from(int k, const void *out, size_t n, const void *a0, const void *a1, const void *a2);
void cnt_words_for(int k, const void *out, size_t n);
const void *cnt_ring(const void *out, size_t n, int lazy);
void cnt_lresolve(void);
int cnt_take_product_words(const void *in, size_t n);
void cnt_gemm_pre(int k, double M, double N, double K, int beta, int bias, int a_pre, int b_pre);
void cnt_gemm(int k, double M, double N, double K, int beta, int bias);

/* count_attention.c: the attention slots (materialized, bidirectional, fused, decoding) */
void cnt_att_fwd(zt_backend *be, float *o, float *a, const float *q, int B, int T, int C, int NH, int NKV);
void cnt_att_bwd(zt_backend *be, float *dq, float *da, const float *d, const float *q, const float *a, int B, int T,
                 int C, int NH, int NKV);
void cnt_batt_fwd(zt_backend *be, float *o, float *a, const float *q, const int32_t *kv, int B, int T, int C, int NH,
                  int NKV);
void cnt_batt_bwd(zt_backend *be, float *dq, float *da, const float *d, const float *q, const float *a,
                  const int32_t *kv, int B, int T, int C, int NH, int NKV);
void cnt_fatt_fwd(zt_backend *be, float *o, float *st, const float *q, int B, int T, int C, int NH, int NKV);
void cnt_fatt_bwd(zt_backend *be, float *dq, float *D, const float *d, const float *q, const float *o, const float *st,
                  int B, int T, int C, int NH, int NKV);
void cnt_att_dec(zt_backend *be, float *o, float *kc, float *vc, const float *q, int pos, int maxT, int C, int NH,
                 int NKV);

#endif
