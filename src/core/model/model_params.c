/* model_params.c — parameter storage: the flat parameters and gradients (or QLoRA's quantised base and LoRA's
 * adapters), each tensor's pointers, the 2-byte parameter words with their fp32 window (opt.params16) and the
 * gradient window of the 2-byte exchange, host copies and checkpoint views. */
#include "core/model/model_internal.h"

#include <stdlib.h>
#include <string.h>

#include "core/lora/quant.h"
#include "util/util.h"

static void init_shape(zt_model *m, zt_backend *be, const zt_model_shape *s, int B, int T, const zt_model_opts *o) {
    memset(m, 0, sizeof *m);
    if (o) m->opt = *o;
    m->opt.att_fused = zt_model_att_fused_ok(s, &m->opt);
    m->opt.att_tc = m->opt.att_tc && m->opt.att_fused;
    m->opt.logits16 = m->opt.logits16 && !s->encoder && be->i->matmul16 && be->i->softmax_xent16;
    ZT_ASSERT(!m->opt.att_fused || (be->i->attention_fused_fwd && be->i->attention_fused_bwd));
    ZT_ASSERT(!m->opt.act16 || m->opt.recompute != ZT_RECOMPUTE_LAYER);
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

/* The windows (params16, grad16) are laid out for GPT-2's table (zt_param_gpt2_layout): wte, wpe, the layers,
   ln_f's weight and bias. Layer l's tensors are contiguous in the flat buffer (table order), from here */
static size_t layer_start(const zt_param_table *pt, int l) { return pt->t[zt_param_layer_first(pt, l)].offset; }
static size_t layer_span(const zt_param_table *pt) {
    const zt_tensor_info *last = &pt->t[zt_param_layer_last(pt, 0)];
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
    ZT_ASSERT(zt_param_gpt2_layout(pt));
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
    ZT_ASSERT(zt_param_gpt2_layout(pt));
    const int f = zt_param_idx(pt, m->s.n_layer, 0);
    ptr[0] = wte;
    ptr[1] = wpe;
    ptr[f] = lnf;
    ptr[f + 1] = lnf + m->s.n_embd;
    for (int l = 0; l < m->s.n_layer; l++)
        for (int k = 0; k < ZT_PER_LAYER; k++) {
            const int i = zt_param_idx(pt, l, k);
            ptr[i] = layer + (pt->t[i].offset - layer_start(pt, l));
        }
}

/* params16: the parameters' window (wte and the layers share part 1) */
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

/* opt.sharded: the tensors outside the layers other than wte, in table order (wpe, ln_f, lm_head) */
static int is_fixed(const zt_param_table *pt, int i) { return i != ZT_P_WTE && pt->t[i].layer < 0; }

size_t zt_model_shard_window_elems(const zt_model_shape *s) {
    zt_param_table *pt = zt_malloc(sizeof *pt);
    zt_param_table_build(pt, s);
    size_t n = pt->t[ZT_P_WTE].numel + 2 * layer_span(pt);
    for (int i = 0; i < pt->n; i++)
        if (is_fixed(pt, i)) n += pt->t[i].numel;
    free(pt);
    return n;
}

/* the sharded window: [wte | the fixed tensors | slot 0 | slot 1] (the slots' addresses kept in m->sslot) */
static float *shard_slot(const zt_model *m, int k) { return m->sslot[k]; }
static void point_shard_window(zt_model *m) {
    const zt_param_table *pt = &m->table;
    m->w[ZT_P_WTE] = m->wbuf;
    float *p = m->wbuf + pt->t[ZT_P_WTE].numel;
    for (int i = 0; i < pt->n; i++)
        if (is_fixed(pt, i)) {
            m->w[i] = p;
            p += pt->t[i].numel;
        }
    m->sslot[0] = p;
    m->sslot[1] = p + layer_span(pt);
    m->spend = -1;
    zt_model_params_changed(m);
}
/* layer l's tensors into slot k */
static void point_layer(zt_model *m, int l, int k) {
    const zt_param_table *pt = &m->table;
    float *slot = shard_slot(m, k);
    for (int i = zt_param_layer_first(pt, l); i <= zt_param_layer_last(pt, l); i++)
        m->w[i] = slot + (pt->t[i].offset - layer_start(pt, l));
}
static void fetch(zt_model *m, float *dst, size_t off, size_t n) {
    m->src.finish(m->src.ctx, m->src.start(m->src.ctx, dst, off, n));
}
static void finish_prefetch(zt_model *m) {
    if (m->spend < 0) return;
    m->src.finish(m->src.ctx, m->spend_ticket);
    m->sres[m->spend_slot] = m->spend;
    m->spend = -1;
}
static void shard_need_layer(zt_model *m, int l, int next) {
    const zt_param_table *pt = &m->table;
    const size_t span = layer_span(pt);
    int k = m->sres[0] == l ? 0 : m->sres[1] == l ? 1 : -1;
    if (k < 0 && m->spend == l) {
        k = m->spend_slot;
        finish_prefetch(m);
    }
    if (k < 0) {
        finish_prefetch(m); /* a gather ahead that guessed wrong still completes (every rank made it) */
        k = m->sres[0] < 0 ? 0 : m->sres[1] < 0 ? 1 : 1 - m->slast; /* an empty slot, or the one used longer ago */
        fetch(m, shard_slot(m, k), layer_start(pt, l), span);
        m->sres[k] = l;
    }
    m->slast = k;
    point_layer(m, l, k);
    if (next < 0 || next >= m->s.n_layer || m->sres[1 - k] == next || m->spend >= 0) return;
    m->sres[1 - k] = -1; /* the other slot's layer is done with: its contents are being replaced */
    m->spend = next;
    m->spend_slot = 1 - k;
    m->spend_ticket = m->src.start(m->src.ctx, shard_slot(m, 1 - k), layer_start(pt, next), span);
}

void zt_model_params_changed(zt_model *m) {
    m->wres = -2;
    m->wfix = 0;
    if (!m->opt.sharded) return;
    finish_prefetch(m);
    m->sres[0] = m->sres[1] = -1;
    m->swte = 0;
}

/* opt.params16: tensor [off, off + n) of the words unpacked into dst */
static void unpack_w(zt_model *m, float *dst, size_t off, size_t n) {
    m->be->i->unpack16(m->be, dst, m->params16 + off, n, m->prec);
}
void zt_model_need_wte(zt_model *m) {
    if (m->opt.sharded) {
        if (!m->swte) fetch(m, m->w[ZT_P_WTE], 0, m->table.t[ZT_P_WTE].numel);
        m->swte = 1;
        return;
    }
    if (!m->params16 || m->wres == -1) return;
    unpack_w(m, m->w[0], 0, m->table.t[0].numel);
    m->wres = -1;
}
void zt_model_need_layer(zt_model *m, int l, int next) {
    if (m->opt.sharded) {
        shard_need_layer(m, l, next);
        return;
    }
    if (!m->params16 || m->wres == l) return;
    unpack_w(m, m->wbuf, layer_start(&m->table, l), layer_span(&m->table));
    m->wres = l;
}
void zt_model_need_fixed(zt_model *m) {
    if (m->opt.sharded) {
        for (int i = 0; i < m->table.n && !m->wfix; i++)
            if (is_fixed(&m->table, i)) fetch(m, m->w[i], m->table.t[i].offset, m->table.t[i].numel);
        m->wfix = 1;
        return;
    }
    if (!m->params16 || m->wfix) return;
    const int lnf = zt_param_idx(&m->table, m->s.n_layer, 0);
    unpack_w(m, m->w[1], m->table.t[1].offset, m->table.t[1].numel);
    unpack_w(m, m->w[lnf], m->table.t[lnf].offset, 2 * (size_t)m->s.n_embd);
    m->wfix = 1;
}

void zt_model_tparams_to_host(zt_model *m, size_t off, size_t n, float *host) {
    zt_backend *be = m->be;
    if (m->opt.sharded) { /* collective: gathered into backend memory, then copied */
        float *d = be->i->alloc(be, n * sizeof(float));
        fetch(m, d, off, n);
        be->i->to_host(be, host, d, n * sizeof(float));
        be->i->sync(be);
        be->i->free(be, d);
        return;
    }
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
        host[i] = zt_bits16_to_f32(h, m->prec);
    }
}

float *zt_model_params_f32(zt_model *m) {
    m->forwards++; /* a use between steps (step_graph.h) */
    if (!m->params16 && !m->opt.sharded) return m->params;
    float *p = m->be->i->alloc(m->be, m->padded * sizeof(float));
    if (m->opt.sharded) fetch(m, p, 0, m->padded); /* collective */
    else m->be->i->unpack16(m->be, p, m->params16, m->padded, m->prec);
    return p;
}

void zt_model_params_f32_release(zt_model *m, float *p) {
    if (p && p != m->params) m->be->i->free(m->be, p);
}

int zt_model_init(zt_model *m, zt_backend *be, const zt_model_shape *s, int B, int T, size_t padded,
                  int alloc_grads, const zt_model_opts *o) {
    init_shape(m, be, s, B, T, o);
    m->padded = padded > m->table.total ? padded : m->table.total;
    if (m->opt.sharded) {
        ZT_ASSERT(!m->opt.params16);
        m->wbuf = be->i->alloc(be, zt_model_shard_window_elems(s) * sizeof(float));
        point_shard_window(m);
    } else if (m->opt.params16) {
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
    zt_model_acts_init(m, be, s, B, T);
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
            const zt_tensor_info *t = &m->table.t[zt_param_idx(&m->table, l, zt_lora_target_tensor(k))];
            const zt_quant_layout L = zt_quant_plan((zt_quant_fmt)quant, (size_t)t->shape[0], (size_t)t->shape[1]);
            m->qw[l][k] = be->i->alloc(be, L.bytes);
            m->w[zt_param_idx(&m->table, l, zt_lora_target_tensor(k))] = NULL;
        }
    size_t off = 0;
    for (int i = 0; i < m->table.n; i++)
        if (m->w[i]) {
            m->w[i] = m->params + off;
            off += m->table.t[i].numel;
        }
    m->wdq = be->i->alloc(be, zt_lora_max_weight(s) * sizeof(float));
}

int zt_model_init_lora(zt_model *m, zt_backend *be, const zt_model_shape *s, int B, int T, const zt_lora_cfg *lc,
                       size_t padded, int alloc_grads, const zt_model_opts *o) {
    init_shape(m, be, s, B, T, o);
    ZT_ASSERT(!m->opt.params16); /* the frozen base stays float32 */
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
    lp->n_sites = zt_lora_sites(s, lp->sites);
    const size_t N = (size_t)B * T, C = s->n_embd, r = lc->rank, in_max = (size_t)s->ffn > C ? (size_t)s->ffn : C;
    const size_t elems[4] = {(size_t)s->n_layer * lp->n_sites * N * r, N * r, N * in_max, 2 * C};
    float **slot[4] = {&lp->u, &lp->du, &lp->xd, &lp->sink};
    char *mem = be->i->alloc(be, zt_lora_act_bytes(s, lc, B, T));
    size_t off = 0;
    for (int i = 0; i < 4; i++) {
        *slot[i] = (float *)(mem + off);
        off += zt_model_round_up64(elems[i] * sizeof(float));
    }
    zt_model_acts_init(m, be, s, B, T);
    m->act_bytes += off;
    return 0;
}

const zt_param_table *zt_model_ttable(const zt_model *m) { return m->lora ? &m->lora->table : &m->table; }
float *zt_model_tparams(const zt_model *m) { return m->lora ? m->lora->params : m->params; }

void zt_model_free(zt_model *m) {
    if (!m || !m->be) return;
    zt_backend *be = m->be;
    free(m->losses_host);
    free(m->ids_host);
    free(m->loss_rows_host);
    free(m->loss_row_n);
    if (m->loss_rows) be->i->free(be, m->loss_rows);
    if (m->row_ids) be->i->free(be, m->row_ids);
    if (m->row_micro) be->i->free(be, m->row_micro);
    if (m->row_dscale) be->i->free(be, m->row_dscale);
    free(m->row_dscale_host);
    if (m->row_enc) be->i->free(be, m->row_enc);
    if (m->row_argmax) be->i->free(be, m->row_argmax);
    free(m->row_enc_host);
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

void zt_model_round_grads(zt_model *m, const zt_param_table *pt, int first, int last) {
    if (!m->prec) return;
    for (int i = first; i <= last;) {
        size_t n = pt->t[i].numel;
        int j = i;
        while (j < last && m->gptr[j] && m->gptr[j] + pt->t[j].numel == m->gptr[j + 1]) n += pt->t[++j].numel;
        if (m->gptr[i]) m->be->i->round_to(m->be, m->gptr[i], n, m->prec);
        i = j + 1;
    }
}
