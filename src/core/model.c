/* model.c — GPT-2 on the backend interface: parameter table, weight init, activations, forward
 * and backward. Never dereferences a device buffer; every op goes through be->i. */
#include "core/model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/quant.h"
#include "iface/op_math.h"
#include "util/util.h"


size_t zt_model_init_block_host(const zt_param_table *pt, const zt_model_shape *s, int i, size_t block, float *p,
                                float std, uint64_t seed) {
    const zt_tensor_info *t = &pt->t[i];
    const size_t off = block * ZT_INIT_BLOCK;
    ZT_ASSERT(off < t->numel);
    const size_t n = t->numel - off < ZT_INIT_BLOCK ? t->numel - off : ZT_INIT_BLOCK;
    const char *nm = t->name;
    size_t len = strlen(nm);
    if (len > 5 && strcmp(nm + len - 5, ".bias") == 0) {
        memset(p, 0, n * sizeof(float));
        return n;
    }
    if (strstr(nm, "ln_") != NULL) {
        for (size_t j = 0; j < n; j++) p[j] = 1.0f;
        return n;
    }
    const float sd = strstr(nm, "c_proj.weight") ? std / sqrtf(2.0f * (float)s->n_layer) : std;
    /* the padded rows of wte stay 0 */
    size_t real = i == 0 ? (size_t)s->vocab_size * s->n_embd : t->numel;
    zt_rng r;
    zt_rng_seed(&r, seed * 0x9E3779B97F4A7C15ull + ((uint64_t)i << 32) + block + 1);
    for (size_t j = 0; j < n; j++) p[j] = off + j < real ? (float)(zt_rng_normal(&r) * sd) : 0.0f;
    return n;
}

void zt_model_init_weights_host(const zt_param_table *pt, const zt_model_shape *s, float *host,
                                float std, uint64_t seed) {
    for (int i = 0; i < pt->n; i++)
        for (size_t off = 0; off < pt->t[i].numel; off += ZT_INIT_BLOCK)
            zt_model_init_block_host(pt, s, i, off / ZT_INIT_BLOCK, host + pt->t[i].offset + off, std, seed);
}

/* ---------------------------------------------------------------- activations */

typedef struct act_slot { void **ptr; size_t elems; } act_slot;

/* ZT_ACT_PACK16: one layer's internals in the stash, in this order, each padded to 32 words (64 bytes) */
enum { ST_LN1, ST_QKV, ST_ATTY, ST_ATT, ST_RES2, ST_LN2, ST_FCH, ST_FCHG, ST_N };

static size_t pad32(size_t words) { return (words + 31) & ~(size_t)31; }

/* the words of internal k for a micro-batch (B, T); recompute: the ZT_* flags (with ZT_ATT_FUSED the
   attention's statistics stay fp32, per layer, outside the stash) */
static size_t stash_words(const zt_model_shape *s, int B, int T, int k, int recompute) {
    const size_t BT = (size_t)B * T, C = s->n_embd;
    const size_t att = recompute & ZT_ATT_FUSED ? 0 : (size_t)B * s->n_head * T * T;
    const size_t w[ST_N] = {BT * C, BT * 3 * C, BT * C, att, BT * C, BT * C, BT * 4 * C, BT * 4 * C};
    return w[k];
}

/* words per layer in the stash; fch_gelu is recomputed (not kept) under ZT_RECOMPUTE_GELU */
static size_t stash_layer_words(const zt_model_shape *s, int B, int T, int recompute) {
    size_t w = 0;
    for (int k = 0; k < ST_N; k++)
        if (k != ST_FCHG || (recompute & 3) == ZT_RECOMPUTE_NONE) w += pad32(stash_words(s, B, T, k, recompute));
    return w;
}

/* ZT_ATT_FUSED applies where the head size is one the fused slots take (elsewhere: the materialized attention) */
static int att_fused(const zt_model_shape *s, int recompute) {
    return (recompute & ZT_ATT_FUSED) && zt_attention_fused_hs_ok(s->n_embd / s->n_head);
}

/* recompute (ZT_RECOMPUTE_*): which per-layer activations are kept for every layer (L copies) and which
   only for the layer being computed (1 copy, recomputed in backward); with ZT_ACT_PACK16 the internals
   have one fp32 copy and L packed ones in the stash */
static int act_slots(zt_acts *a, const zt_model_shape *s, int B, int T, int recompute, act_slot *out) {
    const size_t C = s->n_embd, NH = s->n_head, Vp = s->padded_vocab;
    const int rc = recompute & 3, pack = (recompute & ZT_ACT_PACK16) != 0, fused = att_fused(s, recompute);
    const size_t L = rc == ZT_RECOMPUTE_LAYER || pack ? 1 : (size_t)s->n_layer;  /* layer internals */
    const size_t LS = rc == ZT_RECOMPUTE_LAYER ? 1 : (size_t)s->n_layer;         /* LayerNorm statistics */
    const size_t LG = rc == ZT_RECOMPUTE_NONE && !pack ? (size_t)s->n_layer : 1; /* the GELU output */
    const size_t LR = s->n_layer;                                                 /* layer outputs */
    const size_t BT = (size_t)B * T;
    int n = 0;
#define SLOT(p, e) out[n++] = (act_slot){(void **)&a->p, (e)}
    SLOT(encoded, BT * C);
    SLOT(ln1, L * BT * C);
    SLOT(ln1_mean, LS * BT);
    SLOT(ln1_rstd, LS * BT);
    SLOT(qkv, L * BT * 3 * C);
    SLOT(atty, L * BT * C);
    SLOT(att, fused ? LS * B * NH * T * 2 : L * B * NH * T * T); /* statistics, or probabilities */
    SLOT(attproj, BT * C);
    SLOT(residual2, L * BT * C);
    SLOT(ln2, L * BT * C);
    SLOT(ln2_mean, LS * BT);
    SLOT(ln2_rstd, LS * BT);
    SLOT(fch, L * BT * 4 * C);
    SLOT(fch_gelu, LG * BT * 4 * C);
    SLOT(fcproj, BT * C);
    SLOT(residual3, LR * BT * C);
    SLOT(lnf, BT * C);
    SLOT(lnf_mean, BT);
    SLOT(lnf_rstd, BT);
    SLOT(logits, BT * Vp);
    SLOT(losses, BT);
    SLOT(dres, BT * C);
    SLOT(dbt4c, BT * 4 * C);
    SLOT(dbtc, BT * C);
    SLOT(dbtc2, BT * C);
    SLOT(dqkv, BT * 3 * C);
    SLOT(datt, fused ? zt_attention_fused_scratch(B, T, (int)C, (int)NH) : B * NH * T * T);
    SLOT(tokens, BT);   /* int32: same size as float */
    SLOT(targets, BT);
    if (pack) SLOT(stash, (s->n_layer * stash_layer_words(s, B, T, rc | (fused ? ZT_ATT_FUSED : 0)) + 1) / 2); /* 2-byte words */
#undef SLOT
    return n;
}

static size_t round_up64(size_t bytes) { return (bytes + 63) & ~(size_t)63; }

size_t zt_model_gemm16_bytes(const zt_model_shape *s, int B, int T) {
    const size_t N = (size_t)B * T, C = (size_t)s->n_embd, Vp = (size_t)s->padded_vocab;
    const size_t a = N * Vp > N * 4 * C ? N * Vp : N * 4 * C, b = Vp * C > 16 * C * C ? Vp * C : 16 * C * C;
    return 2 * (a + b);
}

size_t zt_model_act_bytes(const zt_model_shape *s, int B, int T, int recompute) {
    zt_acts a;
    act_slot slots[64] = {{0}};
    int n = act_slots(&a, s, B, T, recompute, slots);
    size_t total = 0;
    for (int i = 0; i < n; i++) total += round_up64(slots[i].elems * sizeof(float));
    return total;
}

int zt_model_init(zt_model *m, zt_backend *be, const zt_model_shape *s, int B, int T, size_t padded,
                  int alloc_grads) {
    return zt_model_init_recompute(m, be, s, B, T, padded, alloc_grads, ZT_RECOMPUTE_NONE);
}

static void init_acts(zt_model *m, zt_backend *be, const zt_model_shape *s, int B, int T, int recompute) {
    /* one allocation for all activations, carved into 64-byte aligned slots */
    act_slot slots[64] = {{0}};
    int n = act_slots(&m->a, s, B, T, recompute, slots);
    m->act_bytes = zt_model_act_bytes(s, B, T, recompute);
    char *base = be->i->alloc(be, m->act_bytes);
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        *slots[i].ptr = base + off;
        off += round_up64(slots[i].elems * sizeof(float));
    }
    m->losses_host = zt_calloc((size_t)B * T, sizeof(float));
}

static void init_shape(zt_model *m, zt_backend *be, const zt_model_shape *s, int B, int T, int recompute) {
    memset(m, 0, sizeof *m);
    m->recompute = recompute & 3;
    m->pack16 = (recompute & ZT_ACT_PACK16) != 0;
    m->att_fused = att_fused(s, recompute);
    ZT_ASSERT(!m->att_fused || (be->i->attention_fused_fwd && be->i->attention_fused_bwd));
    ZT_ASSERT(!m->pack16 || m->recompute != ZT_RECOMPUTE_LAYER);
    m->s = *s;
    m->be = be;
    m->B = m->max_B = B;
    m->T = m->max_T = T;
    zt_param_table_build(&m->table, s);
    m->qfmt = -1;
}

/* every tensor's data pointer into the flat params */
static void point_tensors(zt_model *m) {
    for (int i = 0; i < m->table.n; i++) m->w[i] = m->params + m->table.t[i].offset;
}

/* ZT_PARAM_PACK16: layer l's tensors are contiguous in the flat buffer (table order), from here */
static size_t layer_start(const zt_param_table *pt, int l) { return pt->t[zt_param_layer(l, 0)].offset; }
static size_t layer_span(const zt_param_table *pt) {
    const zt_tensor_info *last = &pt->t[zt_param_layer(0, ZT_PER_LAYER - 1)];
    return last->offset + last->numel - layer_start(pt, 0);
}

/* the window: part 1 holds wte (the embedding, the LM head) or one layer, part 2 wpe then ln_f's weight and bias */
static size_t wbuf_part1(const zt_param_table *pt) {
    return pt->t[0].numel > layer_span(pt) ? pt->t[0].numel : layer_span(pt);
}

/* the fp32 elements of a window for a shape: the parameters' (wte or one layer, then wpe and ln_f) or, grads = 1,
   the gradients' (wte, wpe, ln_f and one layer: wte's gradient stays whole while the layers pass through) */
static size_t window_elems(const zt_model_shape *s, int grads) {
    zt_param_table *pt = zt_malloc(sizeof *pt);
    zt_param_table_build(pt, s);
    const size_t fixed = pt->t[1].numel + 2 * (size_t)s->n_embd;
    const size_t n = grads ? pt->t[0].numel + layer_span(pt) + fixed : wbuf_part1(pt) + fixed;
    free(pt);
    return n;
}
size_t zt_model_wbuf_elems(const zt_model_shape *s) { return window_elems(s, 0); }
size_t zt_model_grad_window_elems(const zt_model_shape *s) { return window_elems(s, 1); }

/* tensor pointers (w or gptr) into a window: wte, wpe and ln_f where given, every layer's tensors into the one
   layer slot at their offsets from the layer's start (contiguous, as in the flat buffer) */
static void point_into(const zt_model *m, float **ptr, float *wte, float *wpe, float *lnf, float *layer) {
    const zt_param_table *pt = &m->table;
    const int f = 2 + m->s.n_layer * ZT_PER_LAYER;
    ptr[0] = wte;
    ptr[1] = wpe;
    ptr[f] = lnf;
    ptr[f + 1] = lnf + m->s.n_embd;
    for (int l = 0; l < m->s.n_layer; l++)
        for (int k = 0; k < ZT_PER_LAYER; k++) {
            const int i = zt_param_layer(l, k);
            ptr[i] = layer + (pt->t[i].offset - layer_start(pt, l));
        }
}

/* ZT_PARAM_PACK16: the parameters' window (wte and the layers share part 1) */
static void point_window(zt_model *m) {
    float *fix = m->wbuf + wbuf_part1(&m->table);
    point_into(m, m->w, m->wbuf, fix, fix + m->table.t[1].numel, m->wbuf);
    zt_model_params_changed(m);
}

void zt_model_point_grad_window(zt_model *m, float *win) {
    ZT_ASSERT(!m->grads && !m->lora);
    float *wpe = win + m->table.t[0].numel, *lnf = wpe + m->table.t[1].numel;
    point_into(m, m->gptr, win, wpe, lnf, lnf + 2 * (size_t)m->s.n_embd);
}

void zt_model_params_changed(zt_model *m) {
    m->wres = -2;
    m->wfix = 0;
}

/* ZT_PARAM_PACK16: make the window hold what the next ops read (no-op when it does, or without params16) */
static void unpack_w(zt_model *m, float *dst, size_t off, size_t n) {
    m->be->i->unpack16(m->be, dst, m->params16 + off, n, m->prec);
}
static void need_wte(zt_model *m) {
    if (!m->params16 || m->wres == -1) return;
    unpack_w(m, m->w[0], 0, m->table.t[0].numel);
    m->wres = -1;
}
static void need_layer(zt_model *m, int l) {
    if (!m->params16 || m->wres == l) return;
    unpack_w(m, m->wbuf, layer_start(&m->table, l), layer_span(&m->table));
    m->wres = l;
}
static void need_fixed(zt_model *m) {
    if (!m->params16 || m->wfix) return;
    const int lnf = 2 + m->s.n_layer * ZT_PER_LAYER;
    unpack_w(m, m->w[1], m->table.t[1].offset, m->table.t[1].numel);
    unpack_w(m, m->w[lnf], m->table.t[lnf].offset, 2 * (size_t)m->s.n_embd);
    m->wfix = 1;
}

void zt_model_tparams_to_host(zt_model *m, size_t off, size_t n, float *host) {
    zt_backend *be = m->be;
    if (!m->params16) {
        be->i->to_host(be, host, zt_model_tparams(m) + off, n * sizeof(float));
        be->i->sync(be);
        return;
    }
    /* the words into the upper half of host's bytes, decoded upwards in place: float i (bytes 4i..4i+4) never
       reaches a word not yet read (word j >= i sits at 2n + 2j >= 4i + 2), and word i is read before float i
       is written. No second buffer */
    char *w = (char *)host + n * sizeof(uint16_t);
    be->i->to_host(be, w, m->params16 + off, n * sizeof(uint16_t));
    be->i->sync(be);
    for (size_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, w + i * sizeof h, sizeof h); /* through memcpy: the bytes are also float storage */
        host[i] = m->prec == ZT_PREC_BF16 ? zt_bf16_bits_to_f32(h) : zt_fp16_bits_to_f32(h);
    }
}

float *zt_model_params_f32(zt_model *m) {
    if (!m->params16) return m->params;
    float *p = m->be->i->alloc(m->be, m->padded * sizeof(float));
    m->be->i->unpack16(m->be, p, m->params16, m->padded, m->prec);
    return p;
}

void zt_model_params_f32_release(zt_model *m, float *p) {
    if (p && p != m->params) m->be->i->free(m->be, p);
}

int zt_model_init_recompute(zt_model *m, zt_backend *be, const zt_model_shape *s, int B, int T, size_t padded,
                            int alloc_grads, int recompute) {
    init_shape(m, be, s, B, T, recompute);
    m->padded = padded > m->table.total ? padded : m->table.total;
    if (recompute & ZT_PARAM_PACK16) {
        m->params16 = be->i->alloc(be, m->padded * sizeof(uint16_t));
        m->wbuf = be->i->alloc(be, zt_model_wbuf_elems(s) * sizeof(float));
        point_window(m);
    } else {
        m->params = be->i->alloc(be, m->padded * sizeof(float));
        point_tensors(m);
    }
    if (alloc_grads) {
        m->grads = be->i->alloc(be, m->padded * sizeof(float));
        for (int i = 0; i < m->table.n; i++) m->gptr[i] = m->grads + m->table.t[i].offset;
    }
    init_acts(m, be, s, B, T, recompute);
    return 0;
}

/* QLoRA: params holds the base tensors other than the linear weights, packed in table order; each linear
   weight gets its quantised blob */
static void init_quant_base(zt_model *m, zt_backend *be, int quant) {
    const zt_model_shape *s = &m->s;
    size_t fp32 = 0;
    zt_lora_base_bytes(s, quant, &fp32, NULL, NULL);
    m->qfmt = quant;
    m->padded = fp32;
    m->params = be->i->alloc(be, fp32 * sizeof(float));
    for (int i = 0; i < m->table.n; i++) m->w[i] = (float *)1; /* marked: stays fp32 */
    for (int l = 0; l < s->n_layer; l++)
        for (int k = 0; k < ZT_LORA_N_TARGETS; k++) {
            const zt_tensor_info *t = &m->table.t[zt_param_layer(l, zt_lora_target_tensor(k))];
            const zt_quant_layout L = zt_quant_plan((zt_quant_fmt)quant, (size_t)t->shape[0], (size_t)t->shape[1]);
            m->qw[l][k] = be->i->alloc(be, L.bytes);
            m->w[zt_param_layer(l, zt_lora_target_tensor(k))] = NULL;
        }
    size_t off = 0;
    for (int i = 0; i < m->table.n; i++)
        if (m->w[i]) {
            m->w[i] = m->params + off;
            off += m->table.t[i].numel;
        }
    m->wdq = be->i->alloc(be, (size_t)4 * s->n_embd * s->n_embd * sizeof(float));
}

int zt_model_init_lora(zt_model *m, zt_backend *be, const zt_model_shape *s, int B, int T, const zt_lora_cfg *lc,
                       size_t padded, int alloc_grads, int recompute) {
    ZT_ASSERT(!(recompute & ZT_PARAM_PACK16)); /* the frozen base stays float32 */
    init_shape(m, be, s, B, T, recompute);
    if (lc->quant >= 0) {
        init_quant_base(m, be, lc->quant);
    } else {
        m->padded = m->table.total;
        m->params = be->i->alloc(be, m->padded * sizeof(float));
        point_tensors(m);
    }
    zt_lora_model *lp = m->lora = zt_calloc(1, sizeof *lp);
    lp->cfg = *lc;
    lp->scale = zt_lora_scale(lc);
    zt_lora_table_build(&lp->table, s, lc);
    lp->padded = padded > lp->table.total ? padded : lp->table.total;
    lp->params = be->i->alloc(be, lp->padded * sizeof(float));
    if (alloc_grads) {
        m->grads = be->i->alloc(be, lp->padded * sizeof(float));
        for (int i = 0; i < lp->table.n; i++) m->gptr[i] = m->grads + lp->table.t[i].offset;
    }
    const size_t N = (size_t)B * T, C = s->n_embd, r = lc->rank;
    const size_t elems[4] = {(size_t)s->n_layer * ZT_LORA_N_TARGETS * N * r, N * r, N * 4 * C, 2 * C};
    float **slot[4] = {&lp->u, &lp->du, &lp->xd, &lp->sink};
    char *mem = be->i->alloc(be, zt_lora_act_bytes(s, lc, B, T));
    size_t off = 0;
    for (int i = 0; i < 4; i++) {
        *slot[i] = (float *)(mem + off);
        off += round_up64(elems[i] * sizeof(float));
    }
    init_acts(m, be, s, B, T, recompute);
    m->act_bytes += off;
    return 0;
}

const zt_param_table *zt_model_ttable(const zt_model *m) { return m->lora ? &m->lora->table : &m->table; }
float *zt_model_tparams(const zt_model *m) { return m->lora ? m->lora->params : m->params; }

void zt_model_free(zt_model *m) {
    if (!m || !m->be) return;
    zt_backend *be = m->be;
    free(m->losses_host);
    if (m->a.encoded) be->i->free(be, m->a.encoded);
    for (int l = 0; l < m->s.n_layer; l++)
        for (int k = 0; k < ZT_LORA_N_TARGETS; k++)
            if (m->qw[l][k]) be->i->free(be, m->qw[l][k]);
    if (m->wdq) be->i->free(be, m->wdq);
    if (m->lora) {
        if (m->lora->u) be->i->free(be, m->lora->u);
        if (m->lora->params) be->i->free(be, m->lora->params);
        free(m->lora);
    }
    if (m->grads) be->i->free(be, m->grads);
    if (m->params) be->i->free(be, m->params);
    if (m->params16) be->i->free(be, m->params16);
    if (m->wbuf) be->i->free(be, m->wbuf);
    memset(m, 0, sizeof *m);
}

/* ---------------------------------------------------------------- forward / backward */

#define P(i) (m->w[i])
#define G(i) (m->gptr[i])
#define BEFORE(a, b) do { if (m->hooks.before) m->hooks.before(m->hooks.ctx, (a), (b)); } while (0)
#define AFTER(a) do { if (m->hooks.after) m->hooks.after(m->hooks.ctx, (a)); } while (0)
/* bf16/fp16 storage: what an op just wrote, rounded to the working precision (DESIGN: mixed precision) */
#define RND(p, n) do { if (m->prec) f->round_to(be, (p), (n), m->prec); } while (0)

/* layer l's target-k linear weight (in, out): its fp32 tensor, or (QLoRA) its dequantisation into m->wdq */
static const float *base_w(zt_model *m, int l, int k) {
    const int ti = zt_param_layer(l, zt_lora_target_tensor(k));
    if (!m->qw[l][k]) return m->w[ti];
    const zt_tensor_info *t = &m->table.t[ti];
    m->be->i->dequant(m->be, m->wdq, m->qw[l][k], m->qfmt, (size_t)t->shape[0], (size_t)t->shape[1]);
    if (m->prec) m->be->i->round_to(m->be, m->wdq, t->numel, m->prec);
    return m->wdq;
}

/* ---------------------------------------------------------------- LoRA adapters (lora.h) */

/* the dropout stream of layer l's target k in the current global micro-batch */
static uint64_t drop_seed(const zt_lora_model *lp, int l, int k) {
    uint64_t x = lp->seed * 0x9E3779B97F4A7C15ull + (uint64_t)lp->micro * 0xBF58476D1CE4E5B9ull +
                 (uint64_t)(l * ZT_LORA_N_TARGETS + k) * 0x94D049BB133111EBull;
    x ^= x >> 31;
    return x;
}

/* the adapter's input: x, or dropout(x) in lp->xd */
static const float *lora_input(zt_model *m, int l, int k, const float *x, size_t n) {
    zt_lora_model *lp = m->lora;
    if (lp->cfg.dropout <= 0.0f || !lp->training) return x;
    m->be->i->dropout(m->be, lp->xd, x, n, lp->cfg.dropout, drop_seed(lp, l, k));
    if (m->prec) m->be->i->round_to(m->be, lp->xd, n, m->prec);
    return lp->xd;
}

static float *lora_u(const zt_model *m, int l, int k) {
    return m->lora->u + (size_t)(l * ZT_LORA_N_TARGETS + k) * (size_t)m->max_B * m->max_T * m->lora->cfg.rank;
}

/* y(N, out) += s (dropout(x) A^T) B^T for layer l's target k, when it is adapted */
static void lora_fwd(zt_model *m, int l, int k, const float *x, float *y) {
    zt_lora_model *lp = m->lora;
    if (!lp) return;
    const int ai = zt_lora_index(&lp->cfg, l, k);
    if (ai < 0) return;
    zt_backend *be = m->be;
    const int N = m->B * m->T, r = lp->cfg.rank;
    int in, out;
    zt_lora_target_dims(&m->s, k, &in, &out);
    const float *A = lp->params + lp->table.t[ai].offset, *Bw = lp->params + lp->table.t[ai + 1].offset;
    float *u = lora_u(m, l, k);
    const float *xin = lora_input(m, l, k, x, (size_t)N * in);
    be->i->matmul(be, u, xin, A, N, r, in, 0, 1, 1.0f, 0.0f);
    if (m->prec) be->i->round_to(be, u, (size_t)N * r, m->prec);
    be->i->matmul(be, y, u, Bw, N, out, r, 0, 1, lp->scale, 1.0f);
}

/* backward of layer l's linear k (weight tensor wt, bias bt; x (N, in) its input, dy (N, out)): dx is
   overwritten. Full training: linear_bwd. LoRA: dx through the frozen W, and the adapter's gradients
   dB = s dy^T u, du = s dy B, dA = du^T dropout(x), and its part of dx, du A (through the dropout) */
static void lin_bwd(zt_model *m, int l, int k, float *dx, const float *dy, const float *x, int wt, int bt) {
    zt_backend *be = m->be;
    const zt_backend_i *f = be->i;
    const int N = m->B * m->T;
    int in, out;
    zt_lora_target_dims(&m->s, k, &in, &out);
    const float *W = base_w(m, l, k);
    zt_lora_model *lp = m->lora;
    if (!lp) {
        f->linear_bwd(be, dx, m->gptr[wt], m->gptr[bt], dy, x, W, N, in, out, 0);
        return;
    }
    f->matmul(be, dx, dy, W, N, in, out, 0, 1, 1.0f, 0.0f);
    const int ai = zt_lora_index(&lp->cfg, l, k), r = lp->cfg.rank;
    if (ai < 0) return;
    const float *A = lp->params + lp->table.t[ai].offset, *Bw = lp->params + lp->table.t[ai + 1].offset;
    const float *u = lora_u(m, l, k);
    f->matmul(be, m->gptr[ai + 1], dy, u, out, r, N, 1, 0, lp->scale, 0.0f);
    f->matmul(be, lp->du, dy, Bw, N, r, out, 0, 0, lp->scale, 0.0f);
    if (m->prec) f->round_to(be, lp->du, (size_t)N * r, m->prec);
    const float *xin = lora_input(m, l, k, x, (size_t)N * in);
    f->matmul(be, m->gptr[ai], lp->du, xin, r, in, N, 1, 0, 1.0f, 0.0f);
    if (lp->cfg.dropout <= 0.0f || !lp->training) {
        f->matmul(be, dx, lp->du, A, N, in, r, 0, 0, 1.0f, 1.0f);
    } else {
        f->matmul(be, lp->xd, lp->du, A, N, in, r, 0, 0, 1.0f, 0.0f);
        f->dropout(be, lp->xd, lp->xd, (size_t)N * in, lp->cfg.dropout, drop_seed(lp, l, k));
        f->add(be, dx, dx, lp->xd, (size_t)N * in);
    }
}

/* layer l's first and last trained tensors (their gradients): GPT-2's layer, or its adapters */
static void layer_tensors(const zt_model *m, int l, int *first, int *last) {
    if (!m->lora) {
        *first = zt_param_layer(l, 0);
        *last = zt_param_layer(l, ZT_PER_LAYER - 1);
        return;
    }
    const int P = m->lora->table.lora_per_layer;
    *first = l * P;
    *last = l * P + P - 1;
}

/* the layer's slot in the per-layer buffers: its own, or the one shared copy when recomputed or packed */
static size_t lay(const zt_model *m, int l) {
    return m->recompute == ZT_RECOMPUTE_LAYER || m->pack16 ? 0 : (size_t)l;
}
/* its LayerNorm statistics (fp32, kept per layer unless the whole layer is recomputed) */
static size_t lay_stats(const zt_model *m, int l) { return m->recompute == ZT_RECOMPUTE_LAYER ? 0 : (size_t)l; }
/* its GELU output: per layer only without recomputation and packing */
static size_t lay_gelu(const zt_model *m, int l) {
    return m->recompute == ZT_RECOMPUTE_NONE && !m->pack16 ? (size_t)l : 0;
}

/* layer l's attention state: its probabilities (B, NH, T, T) in the layer's slot, or (ZT_ATT_FUSED) its softmax
   statistics (B, NH, T, 2), kept per layer like the LayerNorm statistics */
static float *att_state(const zt_model *m, int l) {
    const size_t B = m->B, NH = m->s.n_head, T = m->T;
    return m->att_fused ? m->a.att + lay_stats(m, l) * B * NH * T * 2 : m->a.att + lay(m, l) * B * NH * T * T;
}

/* ZT_ACT_PACK16: layer l's internals from the fp32 working copy into its stash words (pack = 1), or back */
static void stash_layer(zt_model *m, int l, int pack) {
    zt_backend *be = m->be;
    const zt_backend_i *f = be->i;
    zt_acts *a = &m->a;
    ZT_ASSERT(m->pack16 && m->prec != ZT_PREC_FP32);
    float *src[ST_N] = {a->ln1, a->qkv, a->atty, a->att, a->residual2, a->ln2, a->fch, a->fch_gelu};
    const int flags = m->recompute | (m->att_fused ? ZT_ATT_FUSED : 0);
    uint16_t *w = (uint16_t *)a->stash + (size_t)l * stash_layer_words(&m->s, m->max_B, m->max_T, flags);
    for (int k = 0; k < ST_N; k++) {
        if (k == ST_FCHG && m->recompute != ZT_RECOMPUTE_NONE) continue;
        const size_t n = stash_words(&m->s, m->B, m->T, k, flags);
        if (n && pack) f->pack16(be, w, src[k], n, m->prec); /* n 0: ZT_ATT_FUSED's statistics, not stashed */
        else if (n) f->unpack16(be, src[k], w, n, m->prec);
        w += pad32(stash_words(&m->s, m->max_B, m->max_T, k, flags));
    }
}

/* layer l's forward from its input (the embedding or layer l-1's output). out = 0: a recomputation in
   backward, which rebuilds the internals and leaves the stored output (identical bits) alone */
static void layer_fwd(zt_model *m, int l, int out) {
    zt_backend *be = m->be;
    const zt_backend_i *f = be->i;
    const int C = m->s.n_embd, NH = m->s.n_head, B = m->B, T = m->T, N = B * T;
    const size_t NC = (size_t)N * C, k = lay(m, l), g = lay_gelu(m, l), ks = lay_stats(m, l);
    zt_acts *a = &m->a;
    const float *res = l == 0 ? a->encoded : a->residual3 + (size_t)(l - 1) * NC;
    float *ln1 = a->ln1 + k * NC, *qkv = a->qkv + k * NC * 3, *atty = a->atty + k * NC;
    float *att = att_state(m, l);
    float *res2 = a->residual2 + k * NC, *ln2 = a->ln2 + k * NC;
    float *fch = a->fch + k * NC * 4, *fchg = a->fch_gelu + g * NC * 4, *res3 = a->residual3 + (size_t)l * NC;
    need_layer(m, l);
    f->layernorm_fwd(be, ln1, a->ln1_mean + ks * N, a->ln1_rstd + ks * N, res, P(zt_param_layer(l, ZT_LN1W)),
                     P(zt_param_layer(l, ZT_LN1B)), N, C);
    RND(ln1, NC);
    f->linear_fwd(be, qkv, ln1, base_w(m, l, 0), P(zt_param_layer(l, ZT_QKVB)), N, C, 3 * C);
    lora_fwd(m, l, 0, ln1, qkv);
    RND(qkv, NC * 3);
    if (m->att_fused) {
        f->attention_fused_fwd(be, atty, att, qkv, B, T, C, NH);
        RND(atty, NC);
    } else {
        f->attention_fwd(be, atty, att, qkv, B, T, C, NH);
        RND(atty, NC);
        RND(att, (size_t)B * NH * T * T);
    }
    f->linear_fwd(be, a->attproj, atty, base_w(m, l, 1), P(zt_param_layer(l, ZT_ATTPB)), N, C, C);
    lora_fwd(m, l, 1, atty, a->attproj);
    RND(a->attproj, NC);
    f->add(be, res2, res, a->attproj, NC);
    RND(res2, NC);
    f->layernorm_fwd(be, ln2, a->ln2_mean + ks * N, a->ln2_rstd + ks * N, res2, P(zt_param_layer(l, ZT_LN2W)),
                     P(zt_param_layer(l, ZT_LN2B)), N, C);
    RND(ln2, NC);
    f->linear_fwd(be, fch, ln2, base_w(m, l, 2), P(zt_param_layer(l, ZT_FCB)), N, C, 4 * C);
    lora_fwd(m, l, 2, ln2, fch);
    RND(fch, NC * 4);
    f->gelu_fwd(be, fchg, fch, NC * 4);
    RND(fchg, NC * 4);
    if (!out) return; /* backward needs the internals only */
    f->linear_fwd(be, a->fcproj, fchg, base_w(m, l, 3), P(zt_param_layer(l, ZT_FCPB)), N, 4 * C, C);
    lora_fwd(m, l, 3, fchg, a->fcproj);
    RND(a->fcproj, NC);
    f->add(be, res3, res2, a->fcproj, NC);
    RND(res3, NC);
}

static float forward(zt_model *m, const int32_t *tokens, const int32_t *targets, int B, int T, float dscale) {
    zt_backend *be = m->be;
    const zt_backend_i *f = be->i;
    const int L = m->s.n_layer, C = m->s.n_embd;
    const int V = m->s.vocab_size, Vp = m->s.padded_vocab;
    ZT_ASSERT(B <= m->max_B && T <= m->max_T);
    const int N = B * T;
    const size_t NC = (size_t)N * C;
    zt_acts *a = &m->a;
    m->B = B;  /* backward uses the shape of the last forward */
    if (m->lora) m->lora->training = dscale != 0.0f;
    m->T = T;
    f->to_device(be, a->tokens, tokens, (size_t)N * sizeof(int32_t));
    if (targets) f->to_device(be, a->targets, targets, (size_t)N * sizeof(int32_t));

    need_fixed(m); /* ZT_PARAM_PACK16: the weights into the window as the ops reach them */
    need_wte(m);
    f->embed_fwd(be, a->encoded, a->tokens, P(0), P(1), B, T, C);
    RND(a->encoded, NC);
    /* a training forward keeps each layer's internals for backward: packed, or in their per-layer copies */
    m->stashed = m->pack16 && dscale != 0.0f;
    for (int l = 0; l < L; l++) {
        layer_fwd(m, l, 1);
        if (m->stashed) stash_layer(m, l, 1);
    }
    const float *res = a->residual3 + (size_t)(L - 1) * NC;
    const int lnf = 2 + L * ZT_PER_LAYER;
    f->layernorm_fwd(be, a->lnf, a->lnf_mean, a->lnf_rstd, res, P(lnf), P(lnf + 1), N, C);
    RND(a->lnf, NC);
    /* logits(N, Vp) = lnf(N, C) @ wte(Vp, C)^T */
    need_wte(m);
    f->matmul(be, a->logits, a->lnf, P(0), N, Vp, C, 0, 1, 1.0f, 0.0f);
    RND(a->logits, (size_t)N * Vp);
    m->dlogits_ready = 0;
    if (!targets) return -1.0f;
    /* the loss is fp32 arithmetic on the stored logits; the dlogits it leaves are stored (rounded) */
    f->softmax_xent(be, a->losses, a->logits, a->targets, N, V, Vp, dscale / (float)N);
    if (dscale != 0.0f) RND(a->logits, (size_t)N * Vp);
    m->dlogits_ready = dscale != 0.0f;
    m->dlogits_scale = dscale;
    f->to_host(be, m->losses_host, a->losses, (size_t)N * sizeof(float));
    f->sync(be);
    double sum = 0.0;
    for (int i = 0; i < N; i++) sum += m->losses_host[i];
    return (float)(sum / N);
}

float zt_model_forward(zt_model *m, const int32_t *tokens, const int32_t *targets, int B, int T) {
    return forward(m, tokens, targets, B, T, 0.0f);
}

float zt_model_forward_train(zt_model *m, const int32_t *tokens, const int32_t *targets, int B, int T,
                             float dloss_scale) {
    return forward(m, tokens, targets, B, T, dloss_scale);
}

void zt_model_backward(zt_model *m, float dloss_scale) {
    zt_backend *be = m->be;
    const zt_backend_i *f = be->i;
    const int L = m->s.n_layer, C = m->s.n_embd, NH = m->s.n_head;
    const int V = m->s.vocab_size, Vp = m->s.padded_vocab;
    const int B = m->B, T = m->T, N = B * T;
    const size_t NC = (size_t)N * C;
    zt_acts *a = &m->a;
    ZT_ASSERT(m->gptr[0]);
    ZT_ASSERT(!m->pack16 || m->stashed); /* 2-byte storage: backward follows a training forward */
    const int lnf = 2 + L * ZT_PER_LAYER;
    const int lora = m->lora != NULL;
    /* the frozen base's LayerNorm weight and bias gradients (LoRA) go to a sink */
#define GLN(i) (lora ? m->lora->sink + ((i) % 2 ? C : 0) : G(i))

    /* dlogits in place of the logits; d(mean loss) = dloss_scale / N per position */
    if (!(m->dlogits_ready && m->dlogits_scale == dloss_scale)) {
        f->softmax_xent(be, a->losses, a->logits, a->targets, N, V, Vp, dloss_scale / (float)N);
        RND(a->logits, (size_t)N * Vp);
    }
    m->dlogits_ready = 0;
    if (!lora) {
        BEFORE(0, 0);
        /* dwte(Vp, C) = dlogits^T @ lnf (the embedding backward adds to it later; rounded once, after it) */
        f->matmul(be, G(0), a->logits, a->lnf, Vp, C, N, 1, 0, 1.0f, 0.0f);
    }
    /* dlnf(N, C) = dlogits(N, Vp) @ wte(Vp, C) */
    need_fixed(m);
    need_wte(m);
    f->matmul(be, a->dbtc, a->logits, P(0), N, C, Vp, 0, 0, 1.0f, 0.0f);
    RND(a->dbtc, NC);
    f->zero(be, a->dres, NC * sizeof(float));
    if (!lora) BEFORE(lnf, lnf + 1);
    f->layernorm_bwd(be, a->dres, GLN(lnf), GLN(lnf + 1), a->dbtc, a->residual3 + (size_t)(L - 1) * NC, P(lnf),
                     a->lnf_mean, a->lnf_rstd, N, C);
    RND(a->dres, NC);
    if (!lora) {
        RND(G(lnf), (size_t)C);
        RND(G(lnf + 1), (size_t)C);
        AFTER(lnf);
    }
    for (int l = L - 1; l >= 0; l--) {
        int first, last;
        layer_tensors(m, l, &first, &last);
        BEFORE(first, last);
        const float *res_in = l == 0 ? a->encoded : a->residual3 + (size_t)(l - 1) * NC;
        const size_t k = lay(m, l), g = lay_gelu(m, l), ks = lay_stats(m, l);
        float *ln1 = a->ln1 + k * NC, *qkv = a->qkv + k * NC * 3, *atty = a->atty + k * NC;
        float *att = att_state(m, l);
        float *res2 = a->residual2 + k * NC, *ln2 = a->ln2 + k * NC;
        float *fch = a->fch + k * NC * 4, *fchg = a->fch_gelu + g * NC * 4;
        need_layer(m, l);
        /* 2-byte storage: the layer's internals back into the working copy (exact) */
        if (m->pack16) stash_layer(m, l, 0);
        /* recomputation: the same kernels on the same inputs give the same bits as the stored copy */
        if (m->recompute == ZT_RECOMPUTE_LAYER) layer_fwd(m, l, 0);
        else if (m->recompute == ZT_RECOMPUTE_GELU) {
            f->gelu_fwd(be, fchg, fch, NC * 4);
            RND(fchg, NC * 4); /* as layer_fwd stored it */
        }
        /* MLP: dres = d residual3[l] */
        lin_bwd(m, l, 3, a->dbt4c, a->dres, fchg, zt_param_layer(l, ZT_FCPW), zt_param_layer(l, ZT_FCPB));
        RND(a->dbt4c, NC * 4);
        f->gelu_bwd(be, a->dbt4c, fch, a->dbt4c, NC * 4);
        RND(a->dbt4c, NC * 4);
        lin_bwd(m, l, 2, a->dbtc, a->dbt4c, ln2, zt_param_layer(l, ZT_FCW), zt_param_layer(l, ZT_FCB));
        RND(a->dbtc, NC);
        f->layernorm_bwd(be, a->dres, GLN(zt_param_layer(l, ZT_LN2W)), GLN(zt_param_layer(l, ZT_LN2B)), a->dbtc, res2,
                         P(zt_param_layer(l, ZT_LN2W)), a->ln2_mean + ks * N, a->ln2_rstd + ks * N, N, C);
        RND(a->dres, NC);
        /* attention: dres = d residual2[l] */
        lin_bwd(m, l, 1, a->dbtc, a->dres, atty, zt_param_layer(l, ZT_ATTPW), zt_param_layer(l, ZT_ATTPB));
        RND(a->dbtc, NC);
        if (m->att_fused) f->attention_fused_bwd(be, a->dqkv, a->datt, a->dbtc, qkv, atty, att, B, T, C, NH);
        else f->attention_bwd(be, a->dqkv, a->datt, a->dbtc, qkv, att, B, T, C, NH);
        RND(a->dqkv, NC * 3);
        lin_bwd(m, l, 0, a->dbtc2, a->dqkv, ln1, zt_param_layer(l, ZT_QKVW), zt_param_layer(l, ZT_QKVB));
        RND(a->dbtc2, NC);
        f->layernorm_bwd(be, a->dres, GLN(zt_param_layer(l, ZT_LN1W)), GLN(zt_param_layer(l, ZT_LN1B)), a->dbtc2,
                         res_in, P(zt_param_layer(l, ZT_LN1W)), a->ln1_mean + ks * N, a->ln1_rstd + ks * N, N, C);
        RND(a->dres, NC);
        /* the layer's trained gradients, as a bf16/fp16 gradient buffer stores them */
        if (m->prec)
            for (int ti = first; ti <= last; ti++)
                f->round_to(be, G(ti), zt_model_ttable(m)->t[ti].numel, m->prec);
        AFTER(first);
    }
#undef GLN
    if (lora) return; /* the embeddings are frozen: nothing upstream needs dres */
    BEFORE(1, 1);
    /* rows of wpe past T get no gradient in this micro-batch */
    if (T < m->s.block_size)
        f->zero(be, G(1) + (size_t)T * C, (size_t)(m->s.block_size - T) * C * sizeof(float));
    f->embed_bwd(be, G(0), G(1), a->dres, a->tokens, B, T, C);
    RND(G(0), m->table.t[0].numel);
    RND(G(1), m->table.t[1].numel);
    AFTER(0);
}

void zt_model_shape_from_config(const zt_config *c, zt_model_shape *s) {
    s->n_layer = c->model.n_layer;
    s->n_head = c->model.n_head;
    s->n_embd = c->model.n_embd;
    s->vocab_size = c->model.vocab_size;
    s->padded_vocab = zt_config_padded_vocab(c);
    s->block_size = c->model.block_size;
}

double zt_model_flops_per_token(const zt_model_shape *s, int T) {
    const double C = s->n_embd, L = s->n_layer;
    const double per_layer = 12.0 * C * C + 13.0 * C;   /* qkv, proj, fc, fcproj weights + biases + LNs */
    return 6.0 * (L * per_layer + 2.0 * C) + 6.0 * C * s->padded_vocab + 6.0 * L * C * T;
}

zt_ckpt_view zt_model_train_view(zt_model *m) {
    zt_ckpt_view v = zt_model_ckpt_view(m);
    if (m->lora) {
        v.table = &m->lora->table;
        v.params = m->lora->params;
        v.padded = m->lora->padded;
        v.hi = m->lora->table.total;
    }
    return v;
}

zt_ckpt_view zt_model_ckpt_view(zt_model *m) {
    zt_ckpt_view v;
    memset(&v, 0, sizeof v);
    v.table = &m->table;
    v.shape = &m->s;
    v.be = m->be;
    v.params = m->params;
    v.padded = m->padded;
    v.lo = 0;
    v.hi = m->table.total;
    return v;
}
