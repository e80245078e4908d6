/* count_state.c — the counting decorator's state and its model of the CUDA backend (see backend_count.h,
 * count_internal.h): the table per op kind, the kept op and kept round_to (cuda_backend_core.cu Deferred, D_ROUND),
 * the kept AdamW and chunk sums (KeptAdamw, KeptSumsq),
 * the mirrors with the stash's words (pack16_ahead) and the lazy unpacks, and the GEMM's operand packing and its
 * buffers. The slots (backend_count.c, count_attention.c) call these in the order the backend's slots do, so they
 * take its decisions. */
#include "core/diag/count_internal.h"

#include <stdint.h>

long cnt_calls[K_N];
long cnt_launches[K_N], cnt_memops[K_N];
double cnt_bytes[K_N];
zt_count_totals cnt_tot;
const zt_backend_i *cnt_inner;
int cnt_prec;        /* set_precision's */
int cnt_fuse = 1;    /* ZT_CUDA_FUSE_ROUND */
/* the op cuda_backend.cu keeps for a following round_to (Deferred): its output range, or none */
const void *cnt_pend_out;
size_t cnt_pend_n;
int cnt_pend;
/* a round_to cuda_backend.cu keeps for the GELU that may read its buffer next (D_ROUND), or none */
const void *cnt_rpend_x;
size_t cnt_rpend_n;
int cnt_rpend, cnt_rpend_prec;
/* cuda_backend.cu's mirrors (iface/mirror16.h): float32 buffers equal to 2-byte words, read by the products instead
   of packing; kept across the slots that name what they write (mkeep ... mdone), dropped by any other */
zt_mirror16 cnt_mir;
int cnt_mir_keep, cnt_mir_on = 1; /* ZT_CUDA_MIRROR */
/* the kept op's kind when it is one that writes its rounded output's words too (cuda_backend.cu words_for), else -1;
   the word buffers it takes in turn (fake addresses, only compared) */
int cnt_pend_k = -1, cnt_ring_next;
int cnt_attn_tc = 1; /* ZT_CUDA_ATTN_TC: the fused attention on tensor cores in bf16 / fp16 */
/* pack16_ahead's ranges until the next pack16 (cuda_backend_ops.cu b_pack16_ahead): floats at x, words at w; the
   words the kept round_to writes there (or NULL) */
cnt_target cnt_tg[N_TARGETS];
int cnt_ntg;
const void *cnt_rpend_w;
cnt_product cnt_lin;
const void *cnt_rln_res, *cnt_rln_rw;
/* an adamw_multi cuda_backend.cu keeps for the pack16 of its parameters (KeptAdamw): its parameters (n floats at p)
   and the bytes it moves, or none */
const void *cnt_adamw_p;
double cnt_adamw_n, cnt_adamw_bytes;
int cnt_adamw;
/* a sumsq_chunks cuda_backend.cu keeps for the clip_scale of its sums (KeptSumsq): its sums (nc at out), its bytes */
const void *cnt_sumsq_out;
size_t cnt_sumsq_nc;
double cnt_sumsq_bytes;
int cnt_sumsq;
#define N_RING 4 /* cuda_backend_internal.h kRing */
#define RING_ADDR(k) ((const void *)(((uintptr_t)1 << 62) + ((uintptr_t)(k) << 56)))
#define RING_SPAN ((size_t)1 << 55) /* bytes a word buffer's fake addresses span */


/* the words the op kept for a round_to reads that a word buffer may hold (cuda_backend_core.cu words_for: its
   x16 / o16), set by cnt_defer_words_from; the kept product's operand words (take_product_words) */
static const void *g_avoid[3], *g_pend_from[3]; /* avoided by cnt_ring; the kept op's input words */
void cnt_add(int k, long launches, double bytes) {
    cnt_launches[k] += launches;
    cnt_bytes[k] += bytes;
}

/* the lazy unpacks (cuda_backend_core.cu settle_marked, need, drop, mirror_add): the entries marked (lazy 2) run as
   one launch when settled */
void cnt_msettle(void) {
    double n = 0;
    for (int i = 0; i < cnt_mir.n; i++)
        if (cnt_mir.e[i].lazy == 2) cnt_mir.e[i].lazy = 0, n += (double)cnt_mir.e[i].n;
    if (n > 0) cnt_add(K_PACK, 1, 6.0 * n);
}
/* [p, p + bytes) read as float32: marked, settled with the slot's other reads (mkeep, mfind) */
void cnt_mneed(const void *p, double bytes) {
    if (!p || bytes <= 0) return;
    for (int i = 0; i < cnt_mir.n; i++)
        if (cnt_mir.e[i].lazy && zt_mirror16_overlap((uintptr_t)p, (size_t)bytes, cnt_mir.e[i].dst, cnt_mir.e[i].n * 4))
            cnt_mir.e[i].lazy = 2;
}
/* [p, p + bytes) about to be written */
void cnt_mdrop(const void *p, size_t bytes) {
    cnt_msettle();
    if (!p || !bytes) return;
    const uintptr_t a = (uintptr_t)p;
    for (int i = 0; i < cnt_mir.n; i++) {
        zt_mirror16_entry *e = &cnt_mir.e[i];
        const size_t fb = e->n * 4;
        const int words = zt_mirror16_overlap(a, bytes, e->src, e->n * 2);
        const int part = zt_mirror16_overlap(a, bytes, e->dst, fb) && !(a <= e->dst && e->dst + fb <= a + bytes);
        if (e->lazy && (words || part)) e->lazy = 2;
    }
    cnt_msettle();
    zt_mirror16_clobber(&cnt_mir, p, bytes);
}
void cnt_madd(const void *dst, const void *src, size_t n, int lazy) {
    if (!n) return;
    if (cnt_mir.n == ZT_MIRROR16_MAX && cnt_mir.e[0].lazy) {
        cnt_mir.e[0].lazy = 2;
        cnt_msettle();
    }
    zt_mirror16_add(&cnt_mir, dst, src, n);
    cnt_mir.e[cnt_mir.n - 1].lazy = lazy;
}

/* the words a mirror says equal the n floats at p (lazy or not): 1, read instead of the floats; nothing settled */
int cnt_mwords(const float *p, size_t n) {
    if (!cnt_mir_on || cnt_prec == ZT_PREC_FP32 || !p || !n || !zt_mirror16_find(&cnt_mir, p, n)) return 0;
    cnt_tot.mirror_hits++;
    return 1;
}
/* whether a round_to of exactly (p, n) is kept (D_ROUND, or taken by the kept product) */
int cnt_kept_round_of(const void *p, size_t n) {
    return (cnt_rpend && cnt_rpend_x == p && cnt_rpend_n == n) ||
           (cnt_lin.on && cnt_lin.rounded && cnt_lin.out == p && cnt_lin.n == n);
}
/* the kept product launched: its output as floats, or (words) as 2-byte words alone */
static void lin_launch(int words) {
    cnt_lin.on = 0;
    cnt_gemm_pre(cnt_lin.k, cnt_lin.M, cnt_lin.N, cnt_lin.K, 0, cnt_lin.bias, cnt_lin.iw, cnt_lin.ww);
    if (words) cnt_bytes[cnt_lin.k] -= 2.0 * cnt_lin.M * cnt_lin.N;
}
/* a kept product whose round_to was taken, resolved (cuda_backend_core.cu resolve_product): launched with
   float output, the round_to kept (D_ROUND) */
void cnt_lresolve(void) {
    if (!cnt_lin.on || !cnt_lin.rounded) return;
    lin_launch(0);
    cnt_rpend = 1;
    cnt_rpend_x = cnt_lin.out;
    cnt_rpend_n = cnt_lin.n;
    cnt_rpend_prec = cnt_prec;
    cnt_rpend_w = cnt_lin.w;
}

/* every slot but a fused round_to launches the kept op first (cuda_backend.cu flush): a kept round_to is then its own
   launch, reading and writing its buffer */
void cnt_flush(void) {
    if (cnt_adamw) cnt_add(K_ADAMW, 1, cnt_adamw_bytes); /* the kept update, as it was */
    if (cnt_sumsq) cnt_add(K_SUMSQ, 1, cnt_sumsq_bytes); /* the kept chunk sums, as they were */
    cnt_adamw = cnt_sumsq = 0;
    if (!cnt_mir_keep) {
        for (int i = 0; i < cnt_mir.n; i++)
            if (cnt_mir.e[i].lazy) cnt_mir.e[i].lazy = 2;
        cnt_msettle();
        zt_mirror16_clear(&cnt_mir);
    }
    cnt_lresolve();
    if (cnt_lin.on) lin_launch(0);
    cnt_pend = 0;
    if (cnt_rpend) cnt_add(K_ROUND, 1, F4 * 2.0 * (double)cnt_rpend_n + (cnt_rpend_w ? 2.0 * (double)cnt_rpend_n : 0));
    cnt_rpend = 0;
}
/* the words pack16_ahead reserved for the n floats at p, recorded as its mirror (cuda_backend_core.cu stash_words),
   or NULL */
const void *cnt_stash_words(const void *p, size_t n) {
    const uintptr_t a = (uintptr_t)p;
    for (int i = 0; i < cnt_ntg; i++) {
        const uintptr_t b = (uintptr_t)cnt_tg[i].x;
        if (!n || a < b || (a - b) % 4 != 0 || (a - b) / 4 + n > cnt_tg[i].n) continue;
        const void *w = (const char *)cnt_tg[i].w + (a - b) / 2;
        cnt_mdrop(w, 2 * n);
        cnt_madd(p, w, n, 0);
        return w;
    }
    return NULL;
}
/* a GELU whose input (forward: inp; backward in place: dout) is the kept round_to's buffer takes the rounding: no
   launch for it (the forward's kernel writes its input back: 4 bytes an element more). The words the round_to was
   to write beside it the GELU forward (words: 1, counted in kind k) writes; any other op does not, and their mirror
   goes */
int cnt_take_round_w(const void *in, size_t n, int in_place, int words, int k) {
    cnt_lresolve();
    if (!(cnt_rpend && cnt_rpend_x == in && cnt_rpend_n == n && in_place)) return 0;
    cnt_rpend = 0;
    cnt_tot.fused_rounds++;
    if (cnt_rpend_w && words) cnt_bytes[k] += 2.0 * (double)n;
    else if (cnt_rpend_w) cnt_mdrop(cnt_rpend_w, 2 * n);
    return 1;
}
int cnt_take_round(const void *in, size_t n, int in_place) { return cnt_take_round_w(in, n, in_place, 0, 0); }
/* a slot that keeps the mirrors: each range it writes drops those it overlaps (before its flush); mdone at its end */
void cnt_mkeep(const void *p, double bytes) {
    cnt_mdrop(p, (size_t)bytes); /* the reads marked before it settled first, as one launch */
    cnt_mir_keep = 1;
}
void cnt_mdone(void) { cnt_mir_keep = 0; }
/* an operand (n floats at p) read from words: 1 (not packed); else its floats are read (mneed) */
int cnt_mfind(const float *p, double n) {
    if (cnt_mwords(p, (size_t)n)) return 1;
    cnt_mneed(p, F4 * n);
    cnt_msettle();
    return 0;
}

/* an op cuda_backend.cu defers in bf16/fp16: a round_to of exactly (out, n) next is done inside it */
void cnt_defer(const void *out, size_t n) {
    cnt_rln_res = cnt_rln_rw = NULL;
    cnt_pend_k = -1;
    cnt_pend = cnt_prec != ZT_PREC_FP32 && cnt_fuse;
    cnt_pend_out = out;
    cnt_pend_n = n;
}

/* cnt_defer() for an op whose rounded output is the next product's input (kind k): it writes the words too */
void cnt_defer_words(int k, const void *out, size_t n) { cnt_defer_words_from(k, out, n, NULL, NULL, NULL); }
/* the same for an op that reads input words a0, a1, a2 (a word buffer for its output is not one holding them) */
void cnt_defer_words_from(int k, const void *out, size_t n, const void *a0, const void *a1, const void *a2) {
    cnt_defer(out, n);
    cnt_pend_k = k;
    g_pend_from[0] = a0, g_pend_from[1] = a1, g_pend_from[2] = a2;
}
/* the kept op k rounds its output (out, n) inside: with mirrors its kernel also writes the 2-byte words (2 bytes an
   element more) into the next word buffer, recorded as out's mirror */
void cnt_words_for(int k, const void *out, size_t n) {
    if (!cnt_mir_on || cnt_prec == ZT_PREC_FP32 || !n) return;
    cnt_bytes[k] += 2.0 * n;
    const void *w = cnt_stash_words(out, n);
    if (!w) { /* a word buffer, unless the stash pack16_ahead reserved */
        g_avoid[0] = g_pend_from[0], g_avoid[1] = g_pend_from[1], g_avoid[2] = g_pend_from[2];
        const int lz = k == K_GELU_BWD || k == K_GELU_ERF_BWD; /* the words alone (cuda_backend_core.cu words_for) */
        cnt_ring(out, n, lz);
        if (lz) cnt_bytes[k] -= F4 * n;
        g_avoid[0] = g_avoid[1] = g_avoid[2] = NULL;
        return;
    }
    /* into the stash: the forwards whose floats are optional write the words alone (cuda_backend_core.cu
       floats_optional), their floats a lazy mirror */
    if (k == K_GELU_FWD || k == K_GELU_ERF_FWD || k == K_LN_FWD || k == K_RLN_FWD || (k == K_FATT_FWD && cnt_attn_tc)) {
        zt_mirror16_mark_lazy(&cnt_mir, (const float *)out, w, n);
        cnt_bytes[k] -= F4 * n;
        /* residual + LayerNorm's res too, where its words went to the stash (cuda_backend_ops.cu b_round_to) */
        if (k == K_RLN_FWD && cnt_rln_rw && zt_mirror16_mark_lazy(&cnt_mir, (const float *)cnt_rln_res, cnt_rln_rw, n))
            cnt_bytes[k] -= F4 * n;
    }
}
static int ring_holds(int k, const void *p) {
    return p && (uintptr_t)p >= (uintptr_t)RING_ADDR(k) && (uintptr_t)p < (uintptr_t)RING_ADDR(k) + RING_SPAN;
}
/* whether mirror e is a lazy one whose words are in word buffer k (cuda_backend_core.cu lazy_in_ring) */
static int lazy_in_ring(const zt_mirror16_entry *e, int k) {
    return e->lazy && zt_mirror16_overlap(e->src, e->n * 2, (uintptr_t)RING_ADDR(k), RING_SPAN);
}
/* whether word buffer k holds a lazy mirror's words */
static int ring_lazy(int k) {
    for (int i = 0; i < cnt_mir.n; i++)
        if (lazy_in_ring(&cnt_mir.e[i], k)) return 1;
    return 0;
}
/* the lazy mirrors whose words are in the word buffers, settled (cuda_backend_core.cu settle_rings) */
void cnt_settle_rings(void) {
    for (int i = 0; i < cnt_mir.n; i++)
        for (int k = 0; k < N_RING; k++)
            if (lazy_in_ring(&cnt_mir.e[i], k)) cnt_mir.e[i].lazy = 2;
    cnt_msettle();
}
/* a word buffer (cuda_backend_core.cu ring_words: the next in turn of N_RING holding no lazy mirror's words, else the
   next in turn), recorded as the n floats at out's mirror (lazy: out not written) */
const void *cnt_ring(const void *out, size_t n, int lazy) {
    int k = -1;
    for (int pass = 0; pass < 2 && k < 0; pass++)
        for (int i = 0; i < N_RING && k < 0; i++) {
            const int j = (cnt_ring_next + i) % N_RING;
            if (!ring_holds(j, g_avoid[0]) && !ring_holds(j, g_avoid[1]) && !ring_holds(j, g_avoid[2]) &&
                (pass || !ring_lazy(j)))
                k = j;
        }
    cnt_ring_next = k;
    const void *ring = RING_ADDR(cnt_ring_next);
    cnt_ring_next = (cnt_ring_next + 1) % N_RING;
    cnt_mdrop(ring, RING_SPAN);
    cnt_madd(out, ring, n, lazy);
    return ring;
}
/* the kept, rounded product's output (in, n) handed over as words alone (cuda_backend_core.cu
   take_product_words): 1, the product written as words and recorded as a lazy mirror; else 0 */
int cnt_take_product_words(const void *in, size_t n) {
    if (!(cnt_lin.on && cnt_lin.rounded && cnt_lin.out == in && cnt_lin.n == n && n)) return 0;
    if (!cnt_lin.w) {
        g_avoid[0] = cnt_lin.pi16, g_avoid[1] = cnt_lin.pw16; /* not where its operands' words are */
        cnt_ring(in, n, 1);
        g_avoid[0] = g_avoid[1] = NULL;
    } else if (!zt_mirror16_mark_lazy(&cnt_mir, (const float *)in, cnt_lin.w, n)) cnt_madd(in, cnt_lin.w, n, 1);
    lin_launch(1);
    cnt_tot.fused_rounds++;
    return 1;
}
/* a packed-operand buffer (count_internal.h) grows to hold n elements */
double cnt_h16[3];
void cnt_h16_need(int k, double n) {
    if (n > cnt_h16[k]) cnt_h16[k] = n;
}
/* one GEMM c(M, N) = op(a) @ op(b) (+ bias) (+ beta c) of cuda_gemm.cu's cnt_gemm(): bf16/fp16 pack the operands not
   packed already (a_pre, b_pre) in one launch (4 bytes read and 2 written per element) and multiply the 2-byte
   words; K == 0 runs the reference kernel on c alone */
void cnt_gemm_pre(int k, double M, double N, double K, int beta, int bias, int a_pre, int b_pre) {
    const int packed = cnt_prec != ZT_PREC_FP32 && K > 0;
    double esz = F4;
    if (packed) {
        const double na = a_pre ? 0 : M * K, nb = b_pre ? 0 : K * N;
        cnt_h16_need(0, na);
        cnt_h16_need(1, nb);
        if (na + nb > 0) { /* the operands still to pack, in one launch */
            cnt_add(K_GEMM_PACK, 1, 6.0 * (na + nb));
            cnt_tot.packed += na + nb;
            cnt_calls[K_GEMM_PACK]++;
        }
        esz = 2.0;
    }
    cnt_add(k, 1, esz * (M * K + K * N) + (beta ? F4 * M * N : 0) + (bias ? F4 * N : 0) + F4 * M * N);
}
void cnt_gemm(int k, double M, double N, double K, int beta, int bias) { cnt_gemm_pre(k, M, N, K, beta, bias, 0, 0); }

