/* backend_count.c — the launch and byte counting decorator (see backend_count.h; the "count" device it wraps is
 * count_device.c). Each slot's count follows the CUDA backend's code path for it (cuda/cuda_backend.cu, the
 * zt_cu_* launchers in cuda/kernels_*.cu and cuda/cuda_gemm.cu): the early returns on empty shapes, one launch per
 * ZT_LAUNCH, one per GEMM (cuBLASLt on a GPU, the reference GEMM kernel under the harness), one operand packing
 * launch before a bf16/fp16 GEMM (linear_bwd packs dout, w and inp in one for both of its products), and the round_to that cuda_backend.cu fuses into the op it follows. */
#include "core/diag/backend_count.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "iface/mirror16.h"
#include "util/util.h"

enum { K_MATMUL, K_LIN_FWD, K_LIN_BWD, K_GEMM_PACK, K_LN_FWD, K_LN_BWD, K_ATT_FWD, K_ATT_BWD, K_FATT_FWD, K_FATT_BWD,
       K_ATT_DEC, K_GELU_FWD, K_GELU_BWD, K_ADD, K_EMB_FWD, K_EMB_BWD, K_XENT, K_ADAMW, K_ACC, K_SUMSQ, K_COPY, K_ZERO,
       K_ROUND, K_PACK, K_RMS_FWD, K_RMS_BWD, K_ROPE, K_SWIGLU_FWD, K_SWIGLU_BWD, K_GEMV, K_DROPOUT, K_DEQUANT,
       K_RLN_FWD, K_BATT_FWD, K_BATT_BWD, K_GELU_ERF_FWD, K_GELU_ERF_BWD, K_BIAS_ADD, K_BIAS_GRAD, K_ARGMAX, K_N };
static const char *g_names[K_N] = {
    "matmul (lm head)", "linear fwd", "linear bwd", "gemm operand packing", "layernorm fwd", "layernorm bwd",
    "attention fwd", "attention bwd", "attention fused fwd", "attention fused bwd", "attention decode", "gelu fwd",
    "gelu bwd", "residual add", "embedding fwd", "embedding bwd", "softmax+xent", "adamw", "accumulate", "grad norm",
    "copy", "zero", "round_to", "pack16/unpack16", "rmsnorm fwd", "rmsnorm bwd", "rope", "swiglu fwd", "swiglu bwd",
    "gemv", "dropout", "dequant", "residual+layernorm fwd", "attention bidir fwd", "attention bidir bwd",
    "gelu_erf fwd", "gelu_erf bwd", "bias add", "bias grad", "argmax rows"};

static long g_calls[K_N], g_launches[K_N], g_memops[K_N];
static double g_bytes[K_N];
static zt_count_totals g_tot;
static const zt_backend_i *g_inner;
static zt_backend_i g_wrapped;
static int g_prec;        /* set_precision's */
static int g_fuse = 1;    /* ZT_CUDA_FUSE_ROUND */
/* the op cuda_backend.cu keeps for a following round_to (Deferred): its output range, or none */
static const void *g_pend_out;
static size_t g_pend_n;
static int g_pend;
/* a round_to cuda_backend.cu keeps for the GELU that may read its buffer next (D_ROUND), or none */
static const void *g_rpend_x;
static size_t g_rpend_n;
static int g_rpend, g_rpend_prec;
/* cuda_backend.cu's mirrors (iface/mirror16.h): float32 buffers equal to 2-byte words, read by the products instead
   of packing; kept across the slots that name what they write (mkeep ... mdone), dropped by any other */
static zt_mirror16 g_mir;
static int g_mir_keep, g_mir_on = 1; /* ZT_CUDA_MIRROR */
/* the kept op's kind when it is one that writes its rounded output's words too (cuda_backend.cu words_for), else -1;
   the two word buffers it takes in turn (fake addresses, only compared) */
static int g_pend_k = -1, g_ring_next;
static int g_attn_tc = 1; /* ZT_CUDA_ATTN_TC: the fused attention on tensor cores in bf16 / fp16 */
/* pack16_ahead's ranges until the next pack16 (cuda_backend_ops.cu b_pack16_ahead): floats at x, words at w; the
   words the kept round_to writes there (or NULL) */
#define N_TARGETS 16
static struct { const void *x, *w; size_t n; } g_tg[N_TARGETS];
static int g_ntg;
static const void *g_rpend_w;
#define RING_ADDR(k) ((const void *)(((uintptr_t)1 << 62) + ((uintptr_t)(k) << 56)))

#define F4 4.0 /* bytes of a float32 buffer element */

static void add(int k, long launches, double bytes) {
    g_launches[k] += launches;
    g_bytes[k] += bytes;
}

/* the lazy unpacks (cuda_backend_core.cu settle_marked, need, drop, mirror_add): the entries marked (lazy 2) run as
   one launch when settled */
static void msettle(void) {
    double n = 0;
    for (int i = 0; i < g_mir.n; i++)
        if (g_mir.e[i].lazy == 2) g_mir.e[i].lazy = 0, n += (double)g_mir.e[i].n;
    if (n > 0) add(K_PACK, 1, 6.0 * n);
}
/* [p, p + bytes) read as float32: marked, settled with the slot's other reads (mkeep, mfind) */
static void mneed(const void *p, double bytes) {
    if (!p || bytes <= 0) return;
    for (int i = 0; i < g_mir.n; i++)
        if (g_mir.e[i].lazy && zt_mirror16_overlap((uintptr_t)p, (size_t)bytes, g_mir.e[i].dst, g_mir.e[i].n * 4))
            g_mir.e[i].lazy = 2;
}
/* [p, p + bytes) about to be written */
static void mdrop(const void *p, size_t bytes) {
    msettle();
    if (!p || !bytes) return;
    const uintptr_t a = (uintptr_t)p;
    for (int i = 0; i < g_mir.n; i++) {
        zt_mirror16_entry *e = &g_mir.e[i];
        const size_t fb = e->n * 4;
        const int words = zt_mirror16_overlap(a, bytes, e->src, e->n * 2);
        const int part = zt_mirror16_overlap(a, bytes, e->dst, fb) && !(a <= e->dst && e->dst + fb <= a + bytes);
        if (e->lazy && (words || part)) e->lazy = 2;
    }
    msettle();
    zt_mirror16_clobber(&g_mir, p, bytes);
}
static void madd(const void *dst, const void *src, size_t n, int lazy) {
    if (!n) return;
    if (g_mir.n == ZT_MIRROR16_MAX && g_mir.e[0].lazy) {
        g_mir.e[0].lazy = 2;
        msettle();
    }
    zt_mirror16_add(&g_mir, dst, src, n);
    g_mir.e[g_mir.n - 1].lazy = lazy;
}

/* every slot but a fused round_to launches the kept op first (cuda_backend.cu flush): a kept round_to is then its own
   launch, reading and writing its buffer */
static void flush(void) {
    if (!g_mir_keep) {
        for (int i = 0; i < g_mir.n; i++)
            if (g_mir.e[i].lazy) g_mir.e[i].lazy = 2;
        msettle();
        zt_mirror16_clear(&g_mir);
    }
    g_pend = 0;
    if (g_rpend) add(K_ROUND, 1, F4 * 2.0 * (double)g_rpend_n + (g_rpend_w ? 2.0 * (double)g_rpend_n : 0));
    g_rpend = 0;
}
/* the words pack16_ahead reserved for the n floats at p (cuda_backend_core.cu target_words), or NULL */
static const void *tg_words(const void *p, size_t n) {
    const uintptr_t a = (uintptr_t)p;
    for (int i = 0; i < g_ntg; i++) {
        const uintptr_t b = (uintptr_t)g_tg[i].x;
        if (n && a >= b && (a - b) % 4 == 0 && (a - b) / 4 + n <= g_tg[i].n)
            return (const char *)g_tg[i].w + (a - b) / 2;
    }
    return NULL;
}
/* the n floats at p equal the words at w once the op writing them has run (cuda_backend_core.cu note_words) */
static void note_words(const void *p, const void *w, size_t n) {
    mdrop(w, 2 * n);
    madd(p, w, n, 0);
}
/* a GELU whose input (forward: inp; backward in place: dout) is the kept round_to's buffer takes the rounding: no
   launch for it (the forward's kernel writes its input back: 4 bytes an element more). The words the round_to was
   to write beside it the GELU forward (words: 1, counted in kind k) writes; any other op does not, and their mirror
   goes */
static int take_round_w(const void *in, size_t n, int in_place, int words, int k) {
    if (!(g_rpend && g_rpend_x == in && g_rpend_n == n && in_place)) return 0;
    g_rpend = 0;
    g_tot.fused_rounds++;
    if (g_rpend_w && words) g_bytes[k] += 2.0 * (double)n;
    else if (g_rpend_w) mdrop(g_rpend_w, 2 * n);
    return 1;
}
static int take_round(const void *in, size_t n, int in_place) { return take_round_w(in, n, in_place, 0, 0); }
/* a slot that keeps the mirrors: each range it writes drops those it overlaps (before its flush); mdone at its end */
static void mkeep(const void *p, double bytes) {
    mdrop(p, (size_t)bytes); /* the reads marked before it settled first, as one launch */
    g_mir_keep = 1;
}
static void mdone(void) { g_mir_keep = 0; }
/* an operand (n floats at p) read from words: 1 (not packed); else its floats are read (mneed) */
static int mfind(const float *p, double n) {
    if (!g_mir_on || g_prec == ZT_PREC_FP32 || !zt_mirror16_find(&g_mir, p, (size_t)n)) {
        mneed(p, F4 * n);
        msettle();
        return 0;
    }
    g_tot.mirror_hits++;
    return 1;
}

/* an op cuda_backend.cu defers in bf16/fp16: a round_to of exactly (out, n) next is done inside it */
static void defer(const void *out, size_t n) {
    g_pend_k = -1;
    g_pend = g_prec != ZT_PREC_FP32 && g_fuse;
    g_pend_out = out;
    g_pend_n = n;
}

/* defer() for an op whose rounded output is the next product's input (kind k): it writes the words too */
static void defer_words(int k, const void *out, size_t n) {
    defer(out, n);
    g_pend_k = k;
}
/* the kept op k rounds its output (out, n) inside: with mirrors its kernel also writes the 2-byte words (2 bytes an
   element more) into the next word buffer, recorded as out's mirror */
static void words_for(int k, const void *out, size_t n) {
    if (!g_mir_on || g_prec == ZT_PREC_FP32 || !n) return;
    g_bytes[k] += 2.0 * n;
    const void *tw = tg_words(out, n);
    if (tw) { /* into the stash pack16_ahead reserved, instead of a word buffer */
        note_words(out, tw, n);
        return;
    }
    const void *ring = RING_ADDR(g_ring_next);
    g_ring_next ^= 1;
    mdrop(ring, (size_t)1 << 55);
    madd(out, ring, n, 0);
}
/* one GEMM c(M, N) = op(a) @ op(b) (+ bias) (+ beta c) of cuda_gemm.cu's gemm(): bf16/fp16 pack the operands not
   packed already (a_pre, b_pre) in one launch (4 bytes read and 2 written per element) and multiply the 2-byte
   words; K == 0 runs the reference kernel on c alone */
static void gemm_pre(int k, double M, double N, double K, int beta, int bias, int a_pre, int b_pre) {
    const int packed = g_prec != ZT_PREC_FP32 && K > 0;
    double esz = F4;
    if (packed) {
        const double na = a_pre ? 0 : M * K, nb = b_pre ? 0 : K * N;
        if (na + nb > 0) { /* the operands still to pack, in one launch */
            add(K_GEMM_PACK, 1, 6.0 * (na + nb));
            g_tot.packed += na + nb;
            g_calls[K_GEMM_PACK]++;
        }
        esz = 2.0;
    }
    add(k, 1, esz * (M * K + K * N) + (beta ? F4 * M * N : 0) + (bias ? F4 * N : 0) + F4 * M * N);
}
static void gemm(int k, double M, double N, double K, int beta, int bias) { gemm_pre(k, M, N, K, beta, bias, 0, 0); }

/* ------------------------------------------------------------------ the counting slots */

static void w_matmul(zt_backend *be, float *c, const float *a, const float *b, int M, int N, int K, int ta, int tb,
                     float al, float bt) {
    flush();
    g_calls[K_MATMUL]++;
    if (M > 0 && N > 0) gemm(K_MATMUL, M, N, K, bt != 0.0f, 0);
    g_inner->matmul(be, c, a, b, M, N, K, ta, tb, al, bt);
}
static void w_matmul_ld(zt_backend *be, float *c, const float *a, const float *b, int M, int N, int K, int ta, int tb,
                        float al, float bt, int lda, int ldb, int ldc) {
    flush();
    g_calls[K_MATMUL]++;
    if (M > 0 && N > 0) gemm(K_MATMUL, M, N, K, bt != 0.0f, 0);
    g_inner->matmul_ld(be, c, a, b, M, N, K, ta, tb, al, bt, lda, ldb, ldc);
}
static void w_linear_fwd(zt_backend *be, float *o, const float *i, const float *w, const float *b, int N, int C, int OC) {
    mneed(b, F4 * OC);
    mkeep(o, F4 * N * OC);
    flush();
    g_calls[K_LIN_FWD]++;
    if (N > 0 && OC > 0) {
        const int look = C > 0; /* inp and w read from words where they mirror them */
        const int iw = look && mfind(i, (double)N * C), ww = look && mfind(w, (double)C * OC);
        gemm_pre(K_LIN_FWD, N, OC, C, 0, b != NULL, iw, ww);
    }
    g_inner->linear_fwd(be, o, i, w, b, N, C, OC);
    mdone();
}
static void w_linear_bwd(zt_backend *be, float *di, float *dw, float *db, const float *d, const float *i, const float *w,
                         int N, int C, int OC, int acc) {
    mneed(acc ? di : NULL, F4 * N * C);
    mkeep(di, F4 * N * C);
    mkeep(dw, F4 * C * OC);
    mkeep(db, F4 * OC);
    flush();
    g_calls[K_LIN_BWD]++;
    if (C > 0 && OC > 0) {
        /* dout, w and inp packed in one launch for both products (none that mirrors words); with a bias, that
           launch also sums dout's columns (partials per 64 rows, summed by the last block of each column block; dout
           read once: as it is packed, or as its words) */
        const int pre = N > 0 && g_prec != ZT_PREC_FP32;
        const double parts = N > 0 ? (N + 63) / 64 : 0;
        if (pre) {
            const double nd = mfind(d, (double)N * OC) ? 0 : (double)N * OC;
            const double nw = mfind(w, (double)C * OC) ? 0 : (double)C * OC, ni = mfind(i, (double)N * C) ? 0 : (double)N * C;
            if (nd + nw + ni > 0) {
                add(K_GEMM_PACK, 1, 6.0 * (nd + nw + ni));
                g_tot.packed += nd + nw + ni;
                g_calls[K_GEMM_PACK]++;
                if (db) add(K_LIN_BWD, 0, (nd ? 0 : 2.0 * N * OC) + F4 * (2.0 * parts * OC + OC));
            } else if (db) { /* nothing to pack: the launch sums dout's columns alone, from its words */
                add(K_LIN_BWD, 1, 2.0 * N * OC + F4 * (2.0 * parts * OC + OC));
            }
        } else if (db) {
            add(K_LIN_BWD, 1, F4 * ((double)N * OC + 2.0 * parts * OC + OC));
        }
        if (N > 0) gemm_pre(K_LIN_BWD, N, C, OC, acc, 0, pre, pre); /* dinp = dout @ w^T */
        gemm_pre(K_LIN_BWD, C, OC, N, 0, 0, pre, pre);               /* dw = inp^T @ dout */
    }
    g_inner->linear_bwd(be, di, dw, db, d, i, w, N, C, OC, acc);
    mdone();
}
static void w_ln_fwd(zt_backend *be, float *o, float *m, float *r, const float *i, const float *w, const float *b, int N,
                     int C, float eps) {
    mneed(i, F4 * N * C);
    mneed(w, F4 * C);
    mneed(b, F4 * C);
    mkeep(o, F4 * N * C);
    mkeep(m, F4 * N);
    mkeep(r, F4 * N);
    flush();
    g_calls[K_LN_FWD]++;
    if (N > 0 && C > 0) add(K_LN_FWD, 1, F4 * (2.0 * N * C + 2.0 * C + 2.0 * N));
    g_inner->layernorm_fwd(be, o, m, r, i, w, b, N, C, eps);
    defer_words(K_LN_FWD, o, (size_t)N * C);
    mdone();
}
/* one launch: a, b, w, bias read; res, out, mean, rstd written (each warp reads back the row of res it just wrote:
   not counted as HBM traffic); the residual's rounding is the kernel's, a round_to of out next is fused as after
   layernorm_fwd */
static void w_rln_fwd(zt_backend *be, float *res, float *o, float *m, float *r, const float *a, const float *b,
                      const float *w, const float *bi, int N, int C, int p, float eps) {
    mneed(a, F4 * N * C);
    mneed(b, F4 * N * C);
    mneed(w, F4 * C);
    mneed(bi, F4 * C);
    mkeep(res, F4 * N * C);
    mkeep(o, F4 * N * C);
    mkeep(m, F4 * N);
    mkeep(r, F4 * N);
    const int took = take_round(b, (size_t)N * C, b != a && b != res && b != o);
    const void *rw = p == g_prec && g_prec != ZT_PREC_FP32 ? tg_words(res, (size_t)N * C) : NULL;
    if (rw) note_words(res, rw, (size_t)N * C); /* res's words too, where a pack16_ahead wants them */
    flush();
    g_calls[K_RLN_FWD]++;
    if (N > 0 && C > 0)
        add(K_RLN_FWD, 1, F4 * (4.0 * N * C + 2.0 * C + 2.0 * N + (took ? (double)N * C : 0)) + (rw ? 2.0 * N * C : 0));
    g_inner->residual_layernorm_fwd(be, res, o, m, r, a, b, w, bi, N, C, p, eps);
    defer_words(K_RLN_FWD, o, (size_t)N * C);
    mdone();
}
/* LayerNorm / RMSNorm backward, one launch (the last block sums the partials): dout, inp, w, the statistics and dinp
   read, dinp written; each block's partials of the weight gradients written and read back by the last block, which
   writes them; nw = 2 (dw, db) or 1 (dw), nstat = 2 (mean, rstd) or 1 */
static void norm_bwd(int k, double N, double C, int nw, int nstat) {
    if (C <= 0) return;
    if (N <= 0) { add(k, 1, F4 * nw * C); return; }
    const double parts = (N + 63) / 64;
    add(k, 1, F4 * (4.0 * N * C + C + nstat * N + 2.0 * parts * nw * C + nw * C));
}
static void w_ln_bwd(zt_backend *be, float *di, float *dw, float *db, const float *d, const float *i, const float *w,
                     const float *m, const float *r, int N, int C) {
    mneed(di, F4 * N * C);
    mneed(d, F4 * N * C);
    mneed(w, F4 * C);
    mneed(m, F4 * N);
    mneed(r, F4 * N);
    mkeep(di, F4 * N * C);
    mkeep(dw, F4 * C);
    mkeep(db, F4 * C);
    const int iw = N > 0 && C > 0 && mfind(i, (double)N * C); /* inp read as its words where it has them */
    const int took = take_round(d, (size_t)N * C, d != di && d != i); /* dout written back rounded */
    flush();
    g_calls[K_LN_BWD]++;
    norm_bwd(K_LN_BWD, N, C, 2, 2);
    if (iw) g_bytes[K_LN_BWD] -= 2.0 * N * C;
    if (took && N > 0 && C > 0) g_bytes[K_LN_BWD] += F4 * (double)N * C;
    g_inner->layernorm_bwd(be, di, dw, db, d, i, w, m, r, N, C);
    defer_words(K_LN_BWD, di, (size_t)N * C);
    mdone();
}
static void w_rms_fwd(zt_backend *be, float *o, float *r, const float *i, const float *w, int N, int C, float eps) {
    mneed(i, F4 * N * C);
    mneed(w, F4 * C);
    mkeep(o, F4 * N * C);
    mkeep(r, F4 * N);
    flush();
    g_calls[K_RMS_FWD]++;
    if (N > 0 && C > 0) add(K_RMS_FWD, 1, F4 * (2.0 * N * C + C + N));
    g_inner->rmsnorm_fwd(be, o, r, i, w, N, C, eps);
    defer_words(K_RMS_FWD, o, (size_t)N * C);
    mdone();
}
static void w_rms_bwd(zt_backend *be, float *di, float *dw, const float *d, const float *i, const float *w,
                      const float *r, int N, int C) {
    mneed(di, F4 * N * C);
    mneed(d, F4 * N * C);
    mneed(i, F4 * N * C);
    mneed(w, F4 * C);
    mneed(r, F4 * N);
    mkeep(di, F4 * N * C);
    mkeep(dw, F4 * C);
    flush();
    g_calls[K_RMS_BWD]++;
    norm_bwd(K_RMS_BWD, N, C, 1, 1);
    g_inner->rmsnorm_bwd(be, di, dw, d, i, w, r, N, C);
    defer_words(K_RMS_BWD, di, (size_t)N * C);
    mdone();
}
static void w_rope(zt_backend *be, float *q, const float *cs, int B, int T, int p0, int NH, int NKV, int hs, int inv) {
    mneed(q, F4 * B * T * (NH + 2.0 * NKV) * hs);
    mneed(cs, F4 * T * hs);
    mkeep(q, F4 * B * T * (NH + 2.0 * NKV) * hs);
    flush();
    g_calls[K_ROPE]++;
    if (B > 0 && T > 0 && hs > 0) add(K_ROPE, 1, F4 * (2.0 * B * T * (NH + NKV) * hs + (double)T * hs));
    g_inner->rope(be, q, cs, B, T, p0, NH, NKV, hs, inv);
    mdone();
}
static void w_swiglu_fwd(zt_backend *be, float *o, const float *i, int N, int I) {
    mneed(i, F4 * N * 2.0 * I);
    mkeep(o, F4 * N * I);
    flush();
    g_calls[K_SWIGLU_FWD]++;
    if (N > 0 && I > 0) add(K_SWIGLU_FWD, 1, F4 * 3.0 * N * I);
    g_inner->swiglu_fwd(be, o, i, N, I);
    defer_words(K_SWIGLU_FWD, o, (size_t)N * I);
    mdone();
}
static void w_swiglu_bwd(zt_backend *be, float *di, const float *i, const float *d, int N, int I) {
    mneed(i, F4 * N * 2.0 * I);
    mneed(d, F4 * N * I);
    mkeep(di, F4 * N * 2.0 * I);
    flush();
    g_calls[K_SWIGLU_BWD]++;
    if (N > 0 && I > 0) add(K_SWIGLU_BWD, 1, F4 * 5.0 * N * I);
    g_inner->swiglu_bwd(be, di, i, d, N, I);
    defer_words(K_SWIGLU_BWD, di, (size_t)N * 2 * I);
    mdone();
}
/* materialized attention: per sequence b and group member r one batched GEMM over the NKV heads for the scores,
   the softmax rows, one batched GEMM per (b, r) for the output (kernels_norm_attn.cu). Bidirectional attention
   (mask: kernel k of the bidir slot) runs the same launches, its row kernels reading the key mask (B, T) too */
static void att_fwd_count(int k, int B, int T, int C, int NH, int NKV, int mask) {
    if (B > 0 && T > 0 && C > 0) {
        const double G = NH / NKV, hs = C / NH, BT = (double)B * T, att = BT * NH * T;
        add(k, (long)(2 * B * G), F4 * (BT * C + BT * NKV * hs * G + att)      /* scores */
                                     + F4 * (att + BT * NKV * hs * G + BT * C)); /* out = att @ v */
        add(k, 1, F4 * 2.0 * att + (mask ? 4.0 * BT : 0));                     /* softmax in place */
    }
}
static void att_bwd_count(int k, int B, int T, int C, int NH, int NKV, int mask) {
    if (B > 0 && T > 0 && C > 0) {
        const double G = NH / NKV, hs = C / NH, BT = (double)B * T, att = BT * NH * T, kv = BT * NKV * hs;
        add(k, (long)(2 * B * G), F4 * (BT * C + kv * G + att)                     /* datt = dout @ v^T */
                                     + F4 * (att + BT * C + kv * (G - 1) + kv * G)); /* dv (+)= att^T @ dout */
        add(k, 1, F4 * 3.0 * att + (mask ? 4.0 * BT : 0));                         /* dpre from att, datt */
        add(k, (long)(2 * B * G), F4 * (att + kv * G + BT * C)                     /* dq = dpre @ k */
                                     + F4 * (att + BT * C + kv * (G - 1) + kv * G)); /* dk (+)= dpre^T @ q */
    }
}
static void w_att_fwd(zt_backend *be, float *o, float *a, const float *q, int B, int T, int C, int NH, int NKV) {
    const double nq = (double)B * T * (C + 2.0 * NKV * (C / NH)), na = (double)B * NH * T * T;
    mneed(q, F4 * nq);
    mkeep(o, F4 * B * T * C);
    mkeep(a, F4 * na);
    flush();
    g_calls[K_ATT_FWD]++;
    att_fwd_count(K_ATT_FWD, B, T, C, NH, NKV, 0);
    g_inner->attention_fwd(be, o, a, q, B, T, C, NH, NKV);
    mdone();
}
static void w_att_bwd(zt_backend *be, float *dq, float *da, const float *d, const float *q, const float *a, int B, int T,
                      int C, int NH, int NKV) {
    const double nq = (double)B * T * (C + 2.0 * NKV * (C / NH)), na = (double)B * NH * T * T;
    mneed(d, F4 * B * T * C);
    mneed(q, F4 * nq);
    mneed(a, F4 * na);
    mkeep(dq, F4 * nq);
    mkeep(da, F4 * na);
    flush();
    g_calls[K_ATT_BWD]++;
    att_bwd_count(K_ATT_BWD, B, T, C, NH, NKV, 0);
    g_inner->attention_bwd(be, dq, da, d, q, a, B, T, C, NH, NKV);
    mdone();
}
static void w_batt_fwd(zt_backend *be, float *o, float *a, const float *q, const int32_t *kv, int B, int T, int C,
                       int NH, int NKV) {
    flush();
    g_calls[K_BATT_FWD]++;
    att_fwd_count(K_BATT_FWD, B, T, C, NH, NKV, 1);
    g_inner->attention_bidir_fwd(be, o, a, q, kv, B, T, C, NH, NKV);
}
static void w_batt_bwd(zt_backend *be, float *dq, float *da, const float *d, const float *q, const float *a,
                       const int32_t *kv, int B, int T, int C, int NH, int NKV) {
    flush();
    g_calls[K_BATT_BWD]++;
    att_bwd_count(K_BATT_BWD, B, T, C, NH, NKV, 1);
    g_inner->attention_bidir_bwd(be, dq, da, d, q, a, kv, B, T, C, NH, NKV);
}
static void w_fatt_fwd(zt_backend *be, float *o, float *st, const float *q, int B, int T, int C, int NH, int NKV) {
    const double nq = (double)B * T * (C + 2.0 * NKV * (C / NH));
    mneed(q, F4 * nq);
    mkeep(o, F4 * B * T * C);
    mkeep(st, F4 * B * NH * T * 2);
    /* on tensor cores a kept round_to of qkv is done as it is loaded: qkv written back (and its words, counted there) */
    const int took = take_round_w(q, (size_t)nq, g_attn_tc && g_prec != ZT_PREC_FP32 && q != o, 1, K_FATT_FWD);
    flush();
    g_calls[K_FATT_FWD]++;
    if (B > 0 && T > 0 && C > 0) {
        const double BT = (double)B * T, W = C + 2.0 * NKV * (C / NH);
        add(K_FATT_FWD, 1, F4 * (BT * W + BT * C + BT * NH * 2) + (took ? F4 * nq : 0));
    }
    g_inner->attention_fused_fwd(be, o, st, q, B, T, C, NH, NKV);
    defer_words(K_FATT_FWD, o, (size_t)B * T * C);
    mdone();
}
/* the fused backward (kernels_attn_fused.cu): D = rowsum(dout * out); dk, dv per 64-key tile with each tile's part
   of dq for the query rows from the tile's first key on written to scratch; dq = the sum of its parts. On tensor cores
   (bf16 / fp16 unless ZT_CUDA_ATTN_TC=0; kernels_attn_tc.cu) no parts: dk, dv, then dq per query tile */
static void w_fatt_bwd(zt_backend *be, float *dq, float *D, const float *d, const float *q, const float *o,
                       const float *st, int B, int T, int C, int NH, int NKV) {
    const int tc = g_attn_tc && g_prec != ZT_PREC_FP32;
    const double nq = (double)B * T * (C + 2.0 * NKV * (C / NH)), no = (double)B * T * C;
    mneed(d, F4 * no);
    mneed(tc ? NULL : q, F4 * nq); /* on tensor cores qkv and out are read as their words where they have them */
    mneed(tc ? NULL : o, F4 * no);
    mneed(st, F4 * B * NH * T * 2);
    mkeep(dq, F4 * nq);
    mkeep(D, F4 * (double)zt_attention_fused_scratch_for(B, T, C, NH, tc));
    const int live = B > 0 && T > 0 && C > 0;
    const int qw = tc && live && mfind(q, nq), ow = tc && live && mfind(o, no);
    /* on tensor cores a kept round_to of dout is done as it is loaded; the dq kernel writes it back */
    const int took = take_round(d, (size_t)no, tc && d != o && d != q && d != dq);
    flush();
    g_calls[K_FATT_BWD]++;
    if (live) {
        const double BT = (double)B * T, hs = C / NH, KV = (double)NKV * hs, W = C + 2.0 * KV, rows = BT * NH;
        double part_rows = 0;
        for (int k0 = 0; k0 < T; k0 += 64) part_rows += T - k0;
        const double parts = (double)B * NH * part_rows * hs;
        add(K_FATT_BWD, 1, F4 * (2.0 * BT * C + rows) - (ow ? 2.0 * BT * C : 0));
        if (tc) { /* qkv read by both kernels: 2 bytes an element as words */
            add(K_FATT_BWD, 1, F4 * (BT * W + BT * C + 3.0 * rows + BT * 2 * KV) - (qw ? 2.0 * BT * W : 0));
            add(K_FATT_BWD, 1, F4 * (BT * W + BT * C + 3.0 * rows + BT * C + (took ? BT * C : 0)) - (qw ? 2.0 * BT * W : 0));
        } else {
            add(K_FATT_BWD, 1, F4 * (BT * W + BT * C + 3.0 * rows + BT * 2 * KV + parts));
            add(K_FATT_BWD, 1, F4 * (parts + BT * C));
        }
    }
    g_inner->attention_fused_bwd(be, dq, D, d, q, o, st, B, T, C, NH, NKV);
    defer_words(K_FATT_BWD, dq, (size_t)B * T * (C + 2 * (size_t)NKV * (C / NH)));
    mdone();
}
static void w_att_dec(zt_backend *be, float *o, float *kc, float *vc, const float *q, int pos, int maxT, int C, int NH,
                      int NKV) {
    flush();
    g_calls[K_ATT_DEC]++;
    if (C > 0) {
        const double KV = (double)NKV * (C / NH);
        add(K_ATT_DEC, NH / NKV > 1 ? 2 : 1, F4 * (C + 2.0 * KV + 2.0 * KV + 2.0 * (pos + 1) * KV + C));
    }
    g_inner->attention_decode(be, o, kc, vc, q, pos, maxT, C, NH, NKV);
}
static void w_gemv(zt_backend *be, float *y, const float *x, const float *w, const float *b, int C, int OC, int wt) {
    flush();
    g_calls[K_GEMV]++;
    if (OC > 0) add(K_GEMV, 1, F4 * (C + (double)C * OC + (b ? OC : 0) + OC));
    g_inner->gemv(be, y, x, w, b, C, OC, wt);
}
/* GELU (tanh or, for the encoders, exact) forward: in, out; backward: in, dout, dinp. One launch over n elements
   (kernels_elem.cu), kept for a fused round_to */
static void gelu_count(int k, size_t n, int arrays) {
    flush();
    g_calls[k]++;
    if (n) add(k, 1, F4 * arrays * n);
}
/* a GELU forward (in: its input) or backward (in: dout, in_place: dinp == dout), taking a kept round_to of in */
static void gelu_count_in(int k, size_t n, int arrays, const void *in, int in_place, int fwd) {
    const int took = take_round_w(in, n, in_place, fwd, k);
    gelu_count(k, n, arrays);
    if (took && fwd && n) g_bytes[k] += F4 * (double)n; /* the input written back rounded */
}
/* GELU forward (dout NULL: reads inp) or backward (reads dout, and inp as its words where it has them) into o */
static void gelu_slot(int k, float *o, const float *i, const float *d, size_t n) {
    mneed(d ? d : i, F4 * n);
    mkeep(o, F4 * n);
    const int iw = d && n && mfind(i, (double)n);
    gelu_count_in(k, n, d ? 3 : 2, d ? d : i, d ? o == d : 1, !d);
    if (iw) g_bytes[k] -= 2.0 * n;
}
static void w_gelu_fwd(zt_backend *be, float *o, const float *i, size_t n) {
    gelu_slot(K_GELU_FWD, o, i, NULL, n);
    g_inner->gelu_fwd(be, o, i, n);
    defer_words(K_GELU_FWD, o, n);
    mdone();
}
static void w_gelu_bwd(zt_backend *be, float *di, const float *i, const float *d, size_t n) {
    gelu_slot(K_GELU_BWD, di, i, d, n);
    g_inner->gelu_bwd(be, di, i, d, n);
    defer_words(K_GELU_BWD, di, n);
    mdone();
}
static void w_gelu_erf_fwd(zt_backend *be, float *o, const float *i, size_t n) {
    gelu_slot(K_GELU_ERF_FWD, o, i, NULL, n);
    g_inner->gelu_erf_fwd(be, o, i, n);
    defer_words(K_GELU_ERF_FWD, o, n);
    mdone();
}
static void w_gelu_erf_bwd(zt_backend *be, float *di, const float *i, const float *d, size_t n) {
    gelu_slot(K_GELU_ERF_BWD, di, i, d, n);
    g_inner->gelu_erf_bwd(be, di, i, d, n);
    defer_words(K_GELU_ERF_BWD, di, n);
    mdone();
}
/* the encoders' MLM head (kernels_elem.cu): one launch each */
static void w_bias_add(zt_backend *be, float *o, const float *b, int N, int OC) {
    flush();
    g_calls[K_BIAS_ADD]++;
    if (N > 0 && OC > 0) add(K_BIAS_ADD, 1, F4 * (2.0 * N * OC + OC));
    g_inner->bias_add(be, o, b, N, OC);
}
/* one thread per column over every row; N == 0 still launches (it writes the zeros) */
static void w_bias_grad(zt_backend *be, float *db, const float *d, int N, int OC) {
    flush();
    g_calls[K_BIAS_GRAD]++;
    if (OC > 0) add(K_BIAS_GRAD, 1, F4 * ((N > 0 ? (double)N * OC : 0) + OC));
    g_inner->bias_grad(be, db, d, N, OC);
}
static void w_argmax(zt_backend *be, int32_t *idx, const float *x, int N, int V, int ld) {
    flush();
    g_calls[K_ARGMAX]++;
    if (N > 0) add(K_ARGMAX, 1, F4 * (double)N * (V > 0 ? V : 0) + 4.0 * N);
    g_inner->argmax_rows(be, idx, x, N, V, ld);
}
static void w_add(zt_backend *be, float *o, const float *a, const float *b, size_t n) {
    mneed(a, F4 * n);
    mneed(b, F4 * n);
    mkeep(o, F4 * n);
    const int took = take_round(b, n, b != a); /* b written back rounded: 4 bytes an element more */
    flush();
    g_calls[K_ADD]++;
    if (n) add(K_ADD, 1, F4 * (3.0 + took) * n);
    g_inner->add(be, o, a, b, n);
    defer(o, n);
    mdone();
}
static void w_emb_fwd(zt_backend *be, float *o, const int32_t *t, const float *wte, const float *wpe, int B, int T, int C) {
    flush();
    g_calls[K_EMB_FWD]++;
    const double n = (double)B * T * C;
    if (n > 0) add(K_EMB_FWD, 1, 4.0 * B * T + F4 * (2.0 * n + (wpe ? (double)T * C : 0)));
    g_inner->embed_fwd(be, o, t, wte, wpe, B, T, C);
    defer(o, (size_t)B * T * C);
}
/* embedding backward (kernels_elem.cu): dwpe, then a bitonic sort of the (token, position) keys padded to a power of
   two P (tiles of 2048 in shared memory, then per stage k one launch per step j >= the tile and a merge of the tiles),
   then dwte by token; every token row is counted as read and written (an upper bound: B*T rows) */
static void w_emb_bwd(zt_backend *be, float *dwte, float *dwpe, const float *d, const int32_t *t, int B, int T, int C) {
    flush();
    g_calls[K_EMB_BWD]++;
    const double N = (double)B * T;
    if (N > 0 && C > 0) {
        if (dwpe) add(K_EMB_BWD, 1, F4 * (N * C + (double)T * C));
        size_t P = 2;
        while (P < (size_t)N) P <<= 1;
        const size_t tile = P < 2048 ? P : 2048;
        add(K_EMB_BWD, 1, 4.0 * N + 8.0 * P);
        for (size_t k = 2 * tile; k <= P; k <<= 1) {
            for (size_t j = k / 2; j >= tile; j >>= 1) add(K_EMB_BWD, 1, 16.0 * P);
            add(K_EMB_BWD, 1, 16.0 * P);
        }
        add(K_EMB_BWD, 1, 8.0 * N + F4 * 3.0 * N * C);
    }
    g_inner->embed_bwd(be, dwte, dwpe, d, t, B, T, C);
}
static void w_xent(zt_backend *be, float *l, float *lg, const int32_t *t, int N, int V, int Vp, float s) {
    flush();
    g_calls[K_XENT]++;
    if (N > 0) add(K_XENT, 1, F4 * ((double)N * V + N + N) + (s != 0.0f ? F4 * (double)N * Vp : 0));
    g_inner->softmax_xent(be, l, lg, t, N, V, Vp, s);
    if (s != 0.0f) defer(lg, (size_t)N * Vp);
    else defer(NULL, (size_t)N * Vp); /* kept, but no round_to can name it */
}
/* matmul16: the LM head's products on 2-byte logits (cuda_gemm.cu zt_cu_matmul16): a 2-byte a is not packed, a 2-byte
   c is written as 2-byte words by the GEMM itself */
static void w_matmul16(zt_backend *be, void *c, int c16, const void *a, int a16, const float *b, int M, int N, int K,
                       int ta, int tb, int prec) {
    mneed(a16 ? NULL : a, F4 * M * K);
    mkeep(c, (c16 ? 2.0 : F4) * M * N);
    flush();
    g_calls[K_MATMUL]++;
    if (M > 0 && N > 0) {
        gemm_pre(K_MATMUL, M, N, K, 0, 0, a16, K > 0 && mfind(b, (double)K * N)); /* b: the tied wte's words */
        if (c16) g_bytes[K_MATMUL] -= 2.0 * M * N; /* counted as a float32 c: 2 bytes an element less */
    }
    g_inner->matmul16(be, c, c16, a, a16, b, M, N, K, ta, tb, prec);
    mdone();
}
/* softmax_xent16: 2-byte logits read, and (dscale != 0) 2-byte dlogits written in place */
static void w_xent16(zt_backend *be, float *l, void *lg, const int32_t *t, int N, int V, int Vp, float s, int prec) {
    flush();
    g_calls[K_XENT]++;
    if (N > 0) add(K_XENT, 1, 2.0 * (double)N * V + F4 * 2.0 * N + (s != 0.0f ? 2.0 * (double)N * Vp : 0));
    g_inner->softmax_xent16(be, l, lg, t, N, V, Vp, s, prec);
}
static void w_adamw(zt_backend *be, float *p, const float *g, float *m, float *v, size_t n, float lr, float b1, float b2,
                    float eps, float wd, float c1, float c2, float gs) {
    flush();
    g_calls[K_ADAMW]++;
    if (n) add(K_ADAMW, 1, F4 * 7.0 * n);
    g_inner->adamw(be, p, g, m, v, n, lr, b1, b2, eps, wd, c1, c2, gs);
}
/* cuda_backend.cu b_adamw_multi: one k_adamw_multi launch over all the segments' elements (its device copy of the
   segment table is cached, uploaded once: no copy per step); counted in the adamw row, the same bytes */
static void w_adamw_multi(zt_backend *be, float *p, const float *g, float *m, float *v, const zt_adamw_seg *segs,
                          int nseg, float lr, float b1, float b2, float eps, float c1, float c2, float gs) {
    flush();
    g_calls[K_ADAMW]++;
    double n = 0;
    for (int s = 0; s < nseg; s++) n += (double)segs[s].n;
    if (n > 0) add(K_ADAMW, 1, F4 * 7.0 * n);
    g_inner->adamw_multi(be, p, g, m, v, segs, nseg, lr, b1, b2, eps, c1, c2, gs);
}
static void w_acc(zt_backend *be, float *a, const float *x, size_t n) {
    mneed(a, F4 * n);
    mneed(x, F4 * n);
    mkeep(a, F4 * n);
    flush();
    g_calls[K_ACC]++;
    if (n) add(K_ACC, 1, F4 * 3.0 * n);
    g_inner->accumulate(be, a, x, n);
    mdone();
}
static void w_sumsq(zt_backend *be, double *o, const float *x, size_t n, size_t c) {
    flush();
    g_calls[K_SUMSQ]++;
    if (n && c) add(K_SUMSQ, 1, F4 * n + 8.0 * ((n + c - 1) / c));
    g_inner->sumsq_chunks(be, o, x, n, c);
}
static void w_copy(zt_backend *be, void *d, const void *s, size_t n) {
    flush();
    g_calls[K_COPY]++;
    if (n && d != s) { g_memops[K_COPY]++; g_bytes[K_COPY] += 2.0 * n; }
    g_inner->copy(be, d, s, n);
}
static void w_zero(zt_backend *be, void *d, size_t n) {
    flush();
    g_calls[K_ZERO]++;
    if (n) { g_memops[K_ZERO]++; g_bytes[K_ZERO] += (double)n; }
    g_inner->zero(be, d, n);
}
static void w_round(zt_backend *be, float *x, size_t n, int p) {
    mneed(x, F4 * n);
    mkeep(x, F4 * n);
    g_calls[K_ROUND]++;
    if (g_pend && p != ZT_PREC_FP32 && g_pend_out == x && g_pend_n == n) { /* inside the op */
        g_tot.fused_rounds++;
        g_pend = 0;
        if (g_pend_k >= 0 && p == g_prec) words_for(g_pend_k, x, n);
    } else if (p != ZT_PREC_FP32 && !(g_rpend && g_rpend_x == x && g_rpend_n == n && g_rpend_prec == p)) {
        flush();
        const void *w = p == g_prec ? tg_words(x, n) : NULL; /* its words too, where a pack16_ahead wants them */
        if (w) note_words(x, w, n);
        if (g_prec != ZT_PREC_FP32 && g_fuse) { /* kept (cuda_backend.cu D_ROUND) */
            g_rpend = 1;
            g_rpend_x = x;
            g_rpend_n = n;
            g_rpend_prec = p;
            g_rpend_w = w;
        } else if (n) {
            add(K_ROUND, 1, F4 * 2.0 * n + (w ? 2.0 * n : 0));
        }
    }
    g_inner->round_to(be, x, n, p);
    mdone();
}
static int w_pack_ahead(zt_backend *be, void *w, const float *x, size_t n) {
    const int take = g_mir_on && g_prec != ZT_PREC_FP32 && g_ntg < N_TARGETS;
    if (take) {
        g_tg[g_ntg].x = x;
        g_tg[g_ntg].w = w;
        g_tg[g_ntg++].n = n;
    }
    g_inner->pack16_ahead(be, w, x, n);
    return take;
}
/* packing x to d where a mirror says d holds x's words already: no launch (cuda_backend_ops.cu b_pack16) */
/* a pack16 / unpack16 of floats f and words w (n): launched before a kept round_to of other memory, which stays kept
   (cuda_backend_ops.cu stream_past_round); anything else kept is launched first */
static void flush_past_round(const void *f, const void *w, size_t n) {
    const uintptr_t o = (uintptr_t)g_rpend_x;
    const size_t ob = 4 * g_rpend_n;
    if (!g_pend && g_rpend && !zt_mirror16_overlap(o, ob, (uintptr_t)f, 4 * n) && !zt_mirror16_overlap(o, ob, (uintptr_t)w, 2 * n))
        return;
    flush();
}
static void w_pack(zt_backend *be, void *d, const float *x, size_t n, int p) {
    g_ntg = 0;
    g_calls[K_PACK]++;
    if (n && g_mir_on && p == g_prec && (const void *)zt_mirror16_find(&g_mir, x, n) == d) {
        g_tot.packs_skipped++; /* nothing launched, the kept op stays kept */
    } else {
        mneed(x, F4 * n);
        mkeep(d, 2.0 * n);
        flush_past_round(x, d, n);
        if (n) add(K_PACK, 1, 6.0 * n);
    }
    g_inner->pack16(be, d, x, n, p);
    mdone();
}
static void w_unpack(zt_backend *be, float *d, const void *x, size_t n, int p) {
    mkeep(d, F4 * n);
    flush_past_round(d, x, n);
    g_calls[K_PACK]++;
    if (n) add(K_PACK, 1, 6.0 * n);
    g_inner->unpack16(be, d, x, n, p);
    if (p == g_prec) madd(d, x, n, 0); /* d now equals the words */
    mdone();
}
/* unpack16_lazy (cuda_backend_ops.cu): a lazy mirror, no launch, in a bf16 / fp16 run with mirrors; else declined */
static int w_unpack_lazy(zt_backend *be, float *d, const void *x, size_t n, int p) {
    if (!g_mir_on || p != g_prec || p == ZT_PREC_FP32) return 0;
    mkeep(d, F4 * n);
    flush();
    g_calls[K_PACK]++;
    g_inner->unpack16_lazy(be, d, x, n, p);
    madd(d, x, n, 1);
    mdone();
    return 1;
}
static void w_dropout(zt_backend *be, float *o, const float *i, size_t n, float p, uint64_t seed) {
    flush();
    g_calls[K_DROPOUT]++;
    if (n && !(p == 0.0f && o == i)) add(K_DROPOUT, 1, F4 * 2.0 * n);
    g_inner->dropout(be, o, i, n, p, seed);
}
/* the encoded blob's bytes are not counted (a QLoRA base: at most a byte per element), only the decoded matrix */
static void w_dequant(zt_backend *be, float *o, const void *blob, int fmt, size_t rows, size_t cols) {
    flush();
    g_calls[K_DEQUANT]++;
    if (rows && cols) add(K_DEQUANT, 1, F4 * (double)rows * cols);
    g_inner->dequant(be, o, blob, fmt, rows, cols);
}
static void w_set_precision(zt_backend *be, int prec) {
    flush();
    g_prec = prec;
    g_ntg = 0;
    if (g_inner->set_precision) g_inner->set_precision(be, prec);
}
/* the memory and host-transfer slots launch the kept op too */
static void *w_alloc(zt_backend *be, size_t n) { flush(); return g_inner->alloc(be, n); }
static void w_free(zt_backend *be, void *p) { flush(); g_inner->free(be, p); }
static void w_sync(zt_backend *be) { flush(); g_tot.host_waits++; g_inner->sync(be); }
static void w_to_device(zt_backend *be, void *d, const void *s, size_t n) {
    flush();
    if (n) { g_tot.host_xfers++; g_tot.host_bytes += (double)n; }
    g_inner->to_device(be, d, s, n);
}
static void w_to_host(zt_backend *be, void *d, const void *s, size_t n) {
    flush();
    g_tot.host_waits++;
    if (n) { g_tot.host_xfers++; g_tot.host_bytes += (double)n; }
    g_inner->to_host(be, d, s, n);
}

void zt_backend_count_begin(zt_backend *be) {
    g_inner = be->i;
    g_wrapped = *be->i;
    zt_backend_i *w = &g_wrapped;
#define WRAP(slot, fn) if (g_inner->slot) w->slot = fn
    WRAP(alloc, w_alloc); WRAP(free, w_free); WRAP(sync, w_sync); WRAP(to_device, w_to_device);
    WRAP(to_host, w_to_host); WRAP(copy, w_copy); WRAP(zero, w_zero);
    WRAP(matmul, w_matmul); WRAP(matmul_ld, w_matmul_ld); WRAP(linear_fwd, w_linear_fwd);
    WRAP(linear_bwd, w_linear_bwd); WRAP(layernorm_fwd, w_ln_fwd); WRAP(layernorm_bwd, w_ln_bwd); WRAP(residual_layernorm_fwd, w_rln_fwd);
    WRAP(rmsnorm_fwd, w_rms_fwd); WRAP(rmsnorm_bwd, w_rms_bwd); WRAP(rope, w_rope);
    WRAP(swiglu_fwd, w_swiglu_fwd); WRAP(swiglu_bwd, w_swiglu_bwd); WRAP(attention_fwd, w_att_fwd);
    WRAP(attention_bwd, w_att_bwd); WRAP(attention_decode, w_att_dec); WRAP(gemv, w_gemv);
    WRAP(gelu_fwd, w_gelu_fwd); WRAP(gelu_bwd, w_gelu_bwd); WRAP(add, w_add); WRAP(embed_fwd, w_emb_fwd);
    WRAP(embed_bwd, w_emb_bwd); WRAP(softmax_xent, w_xent); WRAP(adamw, w_adamw); WRAP(accumulate, w_acc);
    WRAP(adamw_multi, w_adamw_multi); WRAP(matmul16, w_matmul16); WRAP(softmax_xent16, w_xent16);
    WRAP(sumsq_chunks, w_sumsq); WRAP(round_to, w_round); WRAP(pack16, w_pack); WRAP(unpack16, w_unpack);
    WRAP(pack16_ahead, w_pack_ahead); WRAP(unpack16_lazy, w_unpack_lazy);
    WRAP(dropout, w_dropout); WRAP(dequant, w_dequant); WRAP(set_precision, w_set_precision);
    WRAP(attention_fused_fwd, w_fatt_fwd); WRAP(attention_fused_bwd, w_fatt_bwd);
    WRAP(attention_bidir_fwd, w_batt_fwd); WRAP(attention_bidir_bwd, w_batt_bwd); WRAP(gelu_erf_fwd, w_gelu_erf_fwd);
    WRAP(gelu_erf_bwd, w_gelu_erf_bwd); WRAP(bias_add, w_bias_add); WRAP(bias_grad, w_bias_grad);
    WRAP(argmax_rows, w_argmax);
#undef WRAP
    /* set_precision is how the backend learns the run's precision: keep seeing it even where the inner has none */
    w->set_precision = w_set_precision;
    const char *fr = getenv("ZT_CUDA_FUSE_ROUND");
    g_fuse = !(fr && strcmp(fr, "0") == 0);
    const char *mr = getenv("ZT_CUDA_MIRROR");
    g_mir_on = !(mr && strcmp(mr, "0") == 0);
    g_attn_tc = zt_attention_tc_on();
    zt_mirror16_clear(&g_mir);
    g_mir_keep = 0;
    g_pend_k = -1;
    g_ring_next = 0;
    g_ntg = 0;
    g_rpend_w = NULL;
    g_prec = ZT_PREC_FP32;
    g_pend = g_rpend = 0;
    be->i = &g_wrapped;
    zt_backend_count_reset();
}

void zt_backend_count_reset(void) {
    memset(g_calls, 0, sizeof g_calls);
    memset(g_launches, 0, sizeof g_launches);
    memset(g_memops, 0, sizeof g_memops);
    memset(g_bytes, 0, sizeof g_bytes);
    memset(&g_tot, 0, sizeof g_tot);
}

static int by_bytes(const void *a, const void *b) {
    const double x = ((const zt_count_entry *)a)->bytes, y = ((const zt_count_entry *)b)->bytes;
    return (x < y) - (x > y);
}

int zt_backend_count_report(zt_count_entry *out, int max) {
    int n = 0;
    for (int k = 0; k < K_N && n < max; k++)
        if (g_calls[k]) out[n++] = (zt_count_entry){g_names[k], g_calls[k], g_launches[k], g_memops[k], g_bytes[k]};
    qsort(out, (size_t)n, sizeof *out, by_bytes);
    return n;
}

zt_count_totals zt_backend_count_totals(void) {
    zt_count_totals t = g_tot;
    for (int k = 0; k < K_N; k++) {
        t.launches += g_launches[k];
        t.memops += g_memops[k];
        t.bytes += g_bytes[k];
    }
    return t;
}

void zt_backend_count_end(zt_backend *be) {
    if (g_inner && be->i == &g_wrapped) be->i = g_inner;
    g_inner = NULL;
}

void zt_backend_count_comm_call(void) { g_tot.comm_calls++; }
