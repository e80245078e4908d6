/* model_acts.c — activation storage: which buffers a micro-batch (B, T) needs under the storage options
 * (recomputation, the 2-byte stash, the fused attention's statistics), their one allocation, and each layer's
 * slot in them. zt_model_act_bytes sizes exactly what zt_model_acts_init allocates. */
#include "core/model/model_internal.h"

#include <stdlib.h>
#include <string.h>

#include "util/util.h"

typedef struct act_slot { void **ptr; size_t elems; } act_slot;

/* act16: one layer's internals in the stash, in this order, each padded to 32 words (64 bytes); their one fp32
   working copy has the same layout (32 floats of padding), so a layer packs and unpacks in one call */
enum { ST_LN1, ST_QKV, ST_ATTY, ST_ATT, ST_RES2, ST_LN2, ST_FCH, ST_FCHG, ST_N };

static size_t pad32(size_t words) { return (words + 31) & ~(size_t)31; }

size_t zt_model_round_up64(size_t bytes) { return (bytes + 63) & ~(size_t)63; }

int zt_model_head_rows(const zt_model_shape *s, const zt_model_opts *o, int N) {
    const int k = s->encoder || o->head_chunks < 1 ? 1 : o->head_chunks;
    return (N + k - 1) / k;
}

int zt_model_att_fused_ok(const zt_model_shape *s, const zt_model_opts *o) {
    return o->att_fused && !s->encoder && zt_attention_fused_hs_ok(s->n_embd / s->n_head); /* no bidirectional one */
}

/* the words of internal k for a micro-batch (B, T) (with the fused attention its statistics stay fp32, per layer,
   outside the stash) */
static size_t stash_words(const zt_model_shape *s, int B, int T, int k, int fused) {
    const size_t BT = (size_t)B * T, C = s->n_embd, Q = zt_shape_qkv(s), F = zt_shape_fc(s), I = s->ffn;
    const size_t att = fused ? 0 : (size_t)B * s->n_head * T * T;
    const size_t w[ST_N] = {BT * C, BT * Q, BT * C, att, BT * C, BT * C, BT * F, BT * I};
    return w[k];
}

/* words per layer in the stash; fch_gelu is recomputed (not kept) under ZT_RECOMPUTE_GELU */
static size_t stash_layer_words(const zt_model_shape *s, int B, int T, zt_recompute rc, int fused) {
    size_t w = 0;
    for (int k = 0; k < ST_N; k++)
        if (k != ST_FCHG || rc == ZT_RECOMPUTE_NONE) w += pad32(stash_words(s, B, T, k, fused));
    return w;
}

/* which per-layer activations are kept for every layer (L copies) and which only for the layer being computed
   (1 copy, recomputed in backward); with act16 the internals have one fp32 copy and L packed ones in the stash */
static int act_slots(zt_acts *a, const zt_model_shape *s, int B, int T, const zt_model_opts *o, act_slot *out) {
    const size_t C = s->n_embd, NH = s->n_head, Vp = s->padded_vocab;
    const size_t Q = zt_shape_qkv(s), F = zt_shape_fc(s), I = s->ffn; /* qkv, the MLP's first linear, its hidden */
    const zt_recompute rc = o->recompute;
    const int pack = o->act16, fused = zt_model_att_fused_ok(s, o);
    const size_t L = rc == ZT_RECOMPUTE_LAYER || pack ? 1 : (size_t)s->n_layer;  /* layer internals */
    const size_t LS = rc == ZT_RECOMPUTE_LAYER ? 1 : (size_t)s->n_layer;         /* LayerNorm statistics */
    const size_t LG = rc == ZT_RECOMPUTE_NONE && !pack ? (size_t)s->n_layer : 1; /* the GELU output */
    const size_t LR = s->n_layer;                                                 /* layer outputs */
    const size_t BT = (size_t)B * T;
    int n = 0;
#define SLOT(p, e) out[n++] = (act_slot){(void **)&a->p, (e)}
    SLOT(encoded, BT * C); /* first: the allocation's base (zt_model_free) */
    if (pack) { /* the one working copy of a layer's internals laid out as its stash: one pack16 / unpack16 a layer */
        float **work[ST_N] = {&a->ln1, &a->qkv, &a->atty, &a->att, &a->residual2, &a->ln2, &a->fch, &a->fch_gelu};
        for (int k = 0; k < ST_N; k++)
            if (stash_words(s, B, T, k, fused) && (k != ST_FCHG || rc == ZT_RECOMPUTE_NONE))
                out[n++] = (act_slot){(void **)work[k], pad32(stash_words(s, B, T, k, fused))};
        if (fused) SLOT(att, LS * B * NH * T * 2);
        if (rc != ZT_RECOMPUTE_NONE) SLOT(fch_gelu, LG * BT * I);
    }
    if (!pack) SLOT(ln1, L * BT * C);
    SLOT(ln1_mean, LS * BT);
    SLOT(ln1_rstd, LS * BT);
    if (!pack) {
        SLOT(qkv, L * BT * Q);
        SLOT(atty, L * BT * C);
        SLOT(att, fused ? LS * B * NH * T * 2 : L * B * NH * T * T); /* statistics, or probabilities */
    }
    SLOT(attproj, BT * C);
    if (!pack) {
        SLOT(residual2, L * BT * C);
        SLOT(ln2, L * BT * C);
    }
    SLOT(ln2_mean, LS * BT);
    SLOT(ln2_rstd, LS * BT);
    if (!pack) {
        SLOT(fch, L * BT * F);
        SLOT(fch_gelu, LG * BT * I);
    }
    SLOT(fcproj, BT * C);
    SLOT(residual3, LR * BT * C);
    SLOT(lnf, BT * C);
    SLOT(lnf_mean, BT);
    SLOT(lnf_rstd, BT);
    const size_t HR = zt_model_head_rows(s, o, (int)BT); /* the logits' rows: a chunk's (train.head_chunks) */
    SLOT(logits, o->logits16 && !s->encoder ? (HR * Vp + 1) / 2 : HR * Vp); /* 2-byte words, or float32 */
    SLOT(losses, BT);
    SLOT(dres, BT * C);
    SLOT(dbt4c, BT * I);
    SLOT(dfc, s->mlp == ZT_MLP_SWIGLU ? BT * F : 0); /* SwiGLU's input gradient (GELU's is in place in dbt4c) */
    SLOT(dbtc, BT * C);
    SLOT(dbtc2, BT * C);
    SLOT(dqkv, BT * Q);
    SLOT(datt, fused ? zt_attention_fused_scratch_for(B, T, (int)C, (int)NH, o->att_tc) : B * NH * T * T);
    SLOT(tokens, BT);   /* int32: same size as float */
    SLOT(targets, BT);
    SLOT(rope_cs, s->pos == ZT_POS_ROPE ? (size_t)s->block_size * (C / NH) : 0); /* (maxT, hs/2, 2) */
    const size_t E = s->encoder ? 1 : 0; /* the encoder's buffers (model_encoder.c) */
    SLOT(emb_sum, E * BT * C);
    SLOT(emb_mean, E * BT);
    SLOT(emb_rstd, E * BT);
    SLOT(hd, E * BT * C);
    SLOT(hdg, E * BT * C);
    SLOT(pos_ids, E * BT);
    SLOT(types, E * BT);
    SLOT(kvalid, E * BT);
    SLOT(argmax, E * BT);
    if (pack) SLOT(stash, (s->n_layer * stash_layer_words(s, B, T, rc, fused) + 1) / 2); /* 2-byte words */
#undef SLOT
    return n;
}

size_t zt_model_act_bytes(const zt_model_shape *s, int B, int T, const zt_model_opts *o) {
    const zt_model_opts none = {0};
    zt_acts a;
    act_slot slots[64] = {{0}};
    int n = act_slots(&a, s, B, T, o ? o : &none, slots);
    size_t total = 0;
    for (int i = 0; i < n; i++) total += zt_model_round_up64(slots[i].elems * sizeof(float));
    return total;
}

size_t zt_model_gemm16_bytes(const zt_model_shape *s, int B, int T) {
    const size_t N = (size_t)B * T, C = (size_t)s->n_embd, Vp = (size_t)s->padded_vocab;
    const size_t a = N * Vp > N * 4 * C ? N * Vp : N * 4 * C, b = Vp * C > 16 * C * C ? Vp * C : 16 * C * C;
    size_t w = zt_shape_qkv(s) > zt_shape_fc(s) ? zt_shape_qkv(s) : zt_shape_fc(s); /* linear_bwd's dout: widest */
    if (w < C) w = C;
    return 2 * (a + b + N * w);
}

void zt_model_acts_init(zt_model *m, zt_backend *be, const zt_model_shape *s, int B, int T) {
    act_slot slots[64] = {{0}};
    int n = act_slots(&m->a, s, B, T, &m->opt, slots);
    m->act_bytes = zt_model_act_bytes(s, B, T, &m->opt);
    char *base = be->i->alloc(be, m->act_bytes);
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        *slots[i].ptr = base + off;
        off += zt_model_round_up64(slots[i].elems * sizeof(float));
    }
    m->losses_host = zt_calloc((size_t)B * T, sizeof(float));
    if (s->encoder) m->ids_host = zt_calloc((size_t)3 * B * T, sizeof(int32_t));
    if (s->pos == ZT_POS_ROPE) { /* the rotary table, made once on the host */
        const size_t ncs = (size_t)s->block_size * (s->n_embd / s->n_head);
        float *cs = zt_malloc(ncs * sizeof(float));
        zt_model_rope_table(s, cs);
        be->i->to_device(be, m->a.rope_cs, cs, ncs * sizeof(float));
        be->i->sync(be);
        free(cs);
    }
}

zt_layer_acts zt_model_layer_slots(zt_model *m, int l) {
    const size_t N = (size_t)m->B * m->T, C = m->s.n_embd, NC = N * C;
    const size_t Q = zt_shape_qkv(&m->s), F = zt_shape_fc(&m->s), I = m->s.ffn;
    const size_t k = zt_model_lay(m, l), g = zt_model_lay_gelu(m, l), ks = zt_model_lay_stats(m, l);
    zt_acts *a = &m->a;
    return (zt_layer_acts){
        .res = l == 0 ? a->encoded : a->residual3 + (size_t)(l - 1) * NC,
        .ln1 = a->ln1 + k * NC, .qkv = a->qkv + k * N * Q, .atty = a->atty + k * NC, .att = zt_model_att_state(m, l),
        .res2 = a->residual2 + k * NC, .ln2 = a->ln2 + k * NC, .fch = a->fch + k * N * F, .fchg = a->fch_gelu + g * N * I,
        .res3 = a->residual3 + (size_t)l * NC,
        .ln1_mean = a->ln1_mean + ks * N, .ln1_rstd = a->ln1_rstd + ks * N,
        .ln2_mean = a->ln2_mean + ks * N, .ln2_rstd = a->ln2_rstd + ks * N,
    };
}

size_t zt_model_lay(const zt_model *m, int l) {
    return m->opt.recompute == ZT_RECOMPUTE_LAYER || m->opt.act16 ? 0 : (size_t)l;
}

size_t zt_model_lay_stats(const zt_model *m, int l) { return m->opt.recompute == ZT_RECOMPUTE_LAYER ? 0 : (size_t)l; }

size_t zt_model_lay_gelu(const zt_model *m, int l) {
    return m->opt.recompute == ZT_RECOMPUTE_NONE && !m->opt.act16 ? (size_t)l : 0;
}

float *zt_model_att_state(const zt_model *m, int l) {
    const size_t B = m->B, NH = m->s.n_head, T = m->T;
    return m->opt.att_fused ? m->a.att + zt_model_lay_stats(m, l) * B * NH * T * 2
                            : m->a.att + zt_model_lay(m, l) * B * NH * T * T;
}

/* calls fn(m, words, x, n) for each of layer l's internals in its stash (words, at the offsets of a full micro-batch)
   and its fp32 working copy (x, n floats of this one) */
typedef void (*stash_fn)(zt_model *m, void *words, float *x, size_t n, int pack);
static void each_internal(zt_model *m, int l, stash_fn fn, int pack) {
    zt_acts *a = &m->a;
    float *src[ST_N] = {a->ln1, a->qkv, a->atty, a->att, a->residual2, a->ln2, a->fch, a->fch_gelu};
    const zt_recompute rc = m->opt.recompute;
    const int fused = m->opt.att_fused;
    uint16_t *w = (uint16_t *)a->stash + (size_t)l * stash_layer_words(&m->s, m->max_B, m->max_T, rc, fused);
    for (int k = 0; k < ST_N; k++) {
        if (k == ST_FCHG && rc != ZT_RECOMPUTE_NONE) continue;
        const size_t n = stash_words(&m->s, m->B, m->T, k, fused);
        if (n) fn(m, w, src[k], n, pack); /* n 0: the fused attention's statistics, not stashed */
        w += pad32(stash_words(&m->s, m->max_B, m->max_T, k, fused));
    }
}

static void pack_one(zt_model *m, void *words, float *x, size_t n, int pack) {
    if (pack) m->be->i->pack16(m->be, words, x, n, m->prec);
    else m->be->i->unpack16(m->be, x, words, n, m->prec);
}

/* the first call tells whether the backend takes them (stash_lazy: 1 until it declines) */
static void unpack_lazy(zt_model *m, void *words, float *x, size_t n, int pack) {
    (void)pack;
    if (m->stash_lazy && !m->be->i->unpack16_lazy(m->be, x, words, n, m->prec)) m->stash_lazy = 0;
}

static void ahead_one(zt_model *m, void *words, float *x, size_t n, int pack) {
    (void)pack;
    if (!m->be->i->pack16_ahead(m->be, words, x, n)) m->stash_ahead = 0;
}

void zt_model_stash_ahead(zt_model *m, int l) {
    m->stash_ahead = m->be->i->pack16_ahead != NULL;
    if (m->stash_ahead) each_internal(m, l, ahead_one, 1);
}

void zt_model_stash_layer(zt_model *m, int l, int pack) {
    zt_backend *be = m->be;
    const zt_backend_i *f = be->i;
    zt_acts *a = &m->a;
    ZT_ASSERT(m->opt.act16 && m->prec != ZT_PREC_FP32);
    const size_t words = stash_layer_words(&m->s, m->max_B, m->max_T, m->opt.recompute, m->opt.att_fused);
    uint16_t *w = (uint16_t *)a->stash + (size_t)l * words;
    /* the working copy is laid out as the stash (act_slots): one call, unless the backend took pack16_ahead's advice
       (then each internal's pack finds its words written already) */
    const int whole = m->B == m->max_B && m->T == m->max_T && !(pack && m->stash_ahead);
    if (pack) m->stash_ahead = 0;
    /* backward: each internal unpacked lazily where the backend can (most are read only as words), but layer 0's,
       which nothing reads after its backward (a lazy unpack would run later anyway, one launch an internal) */
    if (!pack && f->unpack16_lazy && l > 0 && !m->s.encoder) {
        m->stash_lazy = 1;
        each_internal(m, l, unpack_lazy, 0);
        if (m->stash_lazy) return;
    }
    if (whole) {
        if (pack) f->pack16(be, w, a->ln1, words, m->prec);
        else f->unpack16(be, a->ln1, w, words, m->prec);
        return;
    }
    each_internal(m, l, pack_one, pack);
}
