/* model.c — the transformer's forward and backward on the backend interface: the ops of each layer in order,
 * the LM head and loss, the gradients in reverse with the backward hooks ZeRO overlaps its reductions with.
 * Never dereferences a device buffer; every op goes through be->i. Storage (model_acts.c, model_params.c) and
 * the linear maps (model_linear.c) are their own files. */
#include "core/model/model_internal.h"

#include <stdlib.h>

#include "iface/op_math.h"
#include "util/util.h"


/* the block's normalisation (model.norm): LayerNorm keeps mean and rstd, RMSNorm rstd; w_idx its weight's index
   (the bias follows it in LayerNorm) */
static void norm_fwd(zt_model *m, float *out, float *mean, float *rstd, const float *inp, int w_idx, int b_idx, int N) {
    const zt_backend_i *f = m->be->i;
    if (m->s.norm == ZT_NORM_RMS) f->rmsnorm_fwd(m->be, out, rstd, inp, P(w_idx), N, m->s.n_embd, m->s.norm_eps);
    else f->layernorm_fwd(m->be, out, mean, rstd, inp, P(w_idx), P(b_idx), N, m->s.n_embd, m->s.norm_eps);
}

/* dinp += ..., the weight's (and LayerNorm's bias') gradient into dw, db */
static void norm_bwd(zt_model *m, float *dinp, float *dw, float *db, const float *dout, const float *inp, int w_idx,
                     const float *mean, const float *rstd, int N) {
    const zt_backend_i *f = m->be->i;
    if (m->s.norm == ZT_NORM_RMS) f->rmsnorm_bwd(m->be, dinp, dw, dout, inp, P(w_idx), rstd, N, m->s.n_embd);
    else f->layernorm_bwd(m->be, dinp, dw, db, dout, inp, P(w_idx), mean, rstd, N, m->s.n_embd);
}

/* the MLP's activation (model.mlp): out(N, I) from the first linear's output fch(N, F) */
static void act_fwd(zt_model *m, float *out, const float *fch, int N) {
    if (m->s.mlp == ZT_MLP_SWIGLU) m->be->i->swiglu_fwd(m->be, out, fch, N, m->s.ffn);
    else if (m->s.mlp == ZT_MLP_GELU_ERF) m->be->i->gelu_erf_fwd(m->be, out, fch, (size_t)N * m->s.ffn);
    else m->be->i->gelu_fwd(m->be, out, fch, (size_t)N * m->s.ffn);
}

/* whether a forward leaves each layer's last residual add to the LayerNorm after it (ln1 of the next layer, ln_f):
   one residual_layernorm_fwd, the same bits as add, round_to and layernorm_fwd */
static int fuse_residual(const zt_model *m) {
    return m->s.norm != ZT_NORM_RMS && m->be->i->residual_layernorm_fwd != NULL;
}

/* the LayerNorm (weight w_idx, bias b_idx) of layer l's output res3[l] into out: with fuse_residual, layer l's residual
   add left to it (res3[l] = res2[l] + fcproj, rounded, written here) */
static void norm_after_layer(zt_model *m, int l, float *out, float *mean, float *rstd, int w_idx, int b_idx, int N) {
    const zt_layer_acts x = zt_model_layer_slots(m, l);
    if (!fuse_residual(m)) {
        norm_fwd(m, out, mean, rstd, x.res3, w_idx, b_idx, N);
        return;
    }
    m->be->i->residual_layernorm_fwd(m->be, x.res3, out, mean, rstd, x.res2, m->a.fcproj, P(w_idx), P(b_idx), N,
                                     m->s.n_embd, m->prec, m->s.norm_eps);
}

/* layer l's forward from its input (the embedding or layer l-1's output). out = 0: a recomputation in
   backward, which rebuilds the internals and leaves the stored output (identical bits) alone */
static void layer_fwd(zt_model *m, int l, int out) {
    zt_backend *be = m->be;
    const zt_backend_i *f = be->i;
    const zt_model_shape *s = &m->s;
    const int C = s->n_embd, NH = s->n_head, NKV = s->n_kv_head, B = m->B, T = m->T, N = B * T;
    const int Q = zt_shape_qkv(s), F = zt_shape_fc(s), I = s->ffn;
    const size_t NC = (size_t)N * C;
    zt_acts *a = &m->a;
    const zt_layer_acts x = zt_model_layer_slots(m, l);
    zt_model_need_layer(m, l, out ? l + 1 : -1); /* a forward pass reaches layer l + 1 next */
    if (out && l > 0) norm_after_layer(m, l - 1, x.ln1, x.ln1_mean, x.ln1_rstd, T_(l, ZT_LN1W), T_(l, ZT_LN1B), N);
    else norm_fwd(m, x.ln1, x.ln1_mean, x.ln1_rstd, x.res, T_(l, ZT_LN1W), T_(l, ZT_LN1B), N);
    RND(x.ln1, NC);
    f->linear_fwd(be, x.qkv, x.ln1, zt_model_base_w(m, l, 0), P(T_(l, ZT_QKVB)), N, C, Q);
    zt_model_lora_fwd(m, l, 0, x.ln1, x.qkv);
    RND(x.qkv, (size_t)N * Q);
    if (s->pos == ZT_POS_ROPE) { /* the queries and keys rotated to their positions, as stored for backward */
        f->rope(be, x.qkv, a->rope_cs, B, T, 0, NH, NKV, C / NH, 0);
        RND(x.qkv, (size_t)N * Q);
    }
    if (m->opt.att_fused) {
        f->attention_fused_fwd(be, x.atty, x.att, x.qkv, B, T, C, NH, NKV);
        RND(x.atty, NC);
    } else {
        f->attention_fwd(be, x.atty, x.att, x.qkv, B, T, C, NH, NKV);
        RND(x.atty, NC);
        RND(x.att, (size_t)B * NH * T * T);
    }
    f->linear_fwd(be, a->attproj, x.atty, zt_model_base_w(m, l, 1), P(T_(l, ZT_ATTPB)), N, C, C);
    zt_model_lora_fwd(m, l, 1, x.atty, a->attproj);
    RND(a->attproj, NC);
    if (s->norm != ZT_NORM_RMS && f->residual_layernorm_fwd) { /* the same bits as the three calls below */
        f->residual_layernorm_fwd(be, x.res2, x.ln2, x.ln2_mean, x.ln2_rstd, x.res, a->attproj, P(T_(l, ZT_LN2W)),
                                  P(T_(l, ZT_LN2B)), N, C, m->prec, m->s.norm_eps);
    } else {
        f->add(be, x.res2, x.res, a->attproj, NC);
        RND(x.res2, NC);
        norm_fwd(m, x.ln2, x.ln2_mean, x.ln2_rstd, x.res2, T_(l, ZT_LN2W), T_(l, ZT_LN2B), N);
    }
    RND(x.ln2, NC);
    f->linear_fwd(be, x.fch, x.ln2, zt_model_base_w(m, l, 2), P(T_(l, ZT_FCB)), N, C, F);
    zt_model_lora_fwd(m, l, 2, x.ln2, x.fch);
    RND(x.fch, (size_t)N * F);
    act_fwd(m, x.fchg, x.fch, N);
    RND(x.fchg, (size_t)N * I);
    if (!out) return; /* backward needs the internals only */
    f->linear_fwd(be, a->fcproj, x.fchg, zt_model_base_w(m, l, 3), P(T_(l, ZT_FCPB)), N, I, C);
    zt_model_lora_fwd(m, l, 3, x.fchg, a->fcproj);
    RND(a->fcproj, NC);
    if (fuse_residual(m)) return; /* the residual add is the next LayerNorm's (norm_after_layer) */
    f->add(be, x.res3, x.res2, a->fcproj, NC);
    RND(x.res3, NC);
}

/* the LM head's weight: wte when tied, else lm_head */
static int head_idx(const zt_model *m) { return m->table.lm_head >= 0 ? m->table.lm_head : ZT_P_WTE; }

/* the mean of N per-position losses: summed in order in double, divided by N */
static float mean_loss(const float *losses, int N) {
    double sum = 0.0;
    for (int i = 0; i < N; i++) sum += losses[i];
    return (float)(sum / N);
}

/* whether the logits are 2-byte words (opt.logits16 in a bf16/fp16 run) */
static int logits16(const zt_model *m) { return m->opt.logits16 && m->prec != ZT_PREC_FP32; }

/* softmax + cross-entropy of the stored logits (N rows, targets tgt) into losses (N); unless dscale == 0 the dlogits
   left in their place, stored in the working precision */
static void xent_rows(zt_model *m, float *losses, const int32_t *tgt, int N, float dscale) {
    zt_backend *be = m->be;
    const zt_backend_i *f = be->i;
    const int V = m->s.vocab_size, Vp = m->s.padded_vocab;
    zt_acts *a = &m->a;
    if (logits16(m)) {
        f->softmax_xent16(be, losses, a->logits, tgt, N, V, Vp, dscale, m->xent_at, m->prec);
        return;
    }
    f->softmax_xent(be, losses, a->logits, tgt, N, V, Vp, dscale, m->xent_at);
    if (dscale != 0.0f) RND(a->logits, (size_t)N * Vp);
}
static void xent(zt_model *m, float *losses, int N, float dscale) { xent_rows(m, losses, m->tgt, N, dscale); }

/* logits(n, Vp) = lnf's rows [r0, r0 + n) @ head(Vp, C)^T, stored in the working precision (2-byte words with
   logits16) */
static void head_logits(zt_model *m, int r0, int n) {
    zt_backend *be = m->be;
    const zt_backend_i *f = be->i;
    const int C = m->s.n_embd, Vp = m->s.padded_vocab;
    const float *x = m->a.lnf + (size_t)r0 * C;
    if (logits16(m)) {
        f->matmul16(be, m->a.logits, 1, x, 0, P(head_idx(m)), n, Vp, C, 0, 1, m->prec, 0.0f);
    } else {
        f->matmul(be, m->a.logits, x, P(head_idx(m)), n, Vp, C, 0, 1, 1.0f, 0.0f);
        RND(m->a.logits, (size_t)n * Vp);
    }
}

/* whether N rows go through the LM head in chunks (train.head_chunks) */
static int head_chunked(const zt_model *m, int N) { return zt_model_head_rows(&m->s, &m->opt, N) < N; }

void zt_model_logits_to_host(zt_model *m, float *out, size_t n) {
    zt_backend *be = m->be;
    ZT_ASSERT(!head_chunked(m, m->B * m->T)); /* a chunked head never holds the micro-batch's logits */
    if (!logits16(m)) {
        be->i->to_host(be, out, m->a.logits, n * sizeof(float));
        return;
    }
    uint16_t *h = zt_malloc((n ? n : 1) * sizeof(uint16_t));
    be->i->to_host(be, h, m->a.logits, n * sizeof(uint16_t));
    for (size_t i = 0; i < n; i++) out[i] = zt_bits16_to_f32(h[i], m->prec);
    free(h);
}

/* row >= 0: the losses stay in loss row `row` on the device (no host sync); returns 0 */
static float forward(zt_model *m, const int32_t *tokens, const int32_t *targets, int B, int T, float dscale, int row) {
    zt_backend *be = m->be;
    const zt_backend_i *f = be->i;
    const int L = m->s.n_layer, C = m->s.n_embd;
    ZT_ASSERT(B <= m->max_B && T <= m->max_T);
    const int N = B * T;
    const size_t NC = (size_t)N * C;
    zt_acts *a = &m->a;
    m->B = B;  /* backward uses the shape of the last forward */
    m->forwards++;
    if (m->lora) {
        m->lora->training = dscale != 0.0f;
        m->lora->row = !tokens && m->rows_micro ? row : -1; /* a step's row whose micro-batch index is uploaded */
    }
    m->T = T;
    if (tokens) {
        f->to_device(be, a->tokens, tokens, (size_t)N * sizeof(int32_t));
        if (targets) f->to_device(be, a->targets, targets, (size_t)N * sizeof(int32_t));
        m->tok = a->tokens;
        m->tgt = a->targets;
    } else { /* a step's row, uploaded before its first launch */
        ZT_ASSERT(row >= 0 && !targets);
        m->tok = m->row_ids + (size_t)row * N;
        m->tgt = m->tok + (size_t)m->loss_nrows * m->max_B * m->max_T;
    }
    /* a step's row with its scale uploaded: softmax_xent reads it there (the same float as dscale / N) */
    m->xent_at = !tokens && m->rows_dscale && dscale != 0.0f ? m->row_dscale + row : NULL;
    const int scored = targets || !tokens; /* targets given, or the row's */
    if (m->s.encoder) {
        const float loss = zt_model_encoder_forward(m, tokens, targets, B, T, dscale, row);
        if (row >= 0 && tokens) m->loss_rows_host[(size_t)row * m->max_B * m->max_T] = loss, m->loss_row_n[row] = -1;
        else if (row >= 0) m->loss_row_n[row] = N;
        return loss;
    }

    zt_model_need_fixed(m); /* 2-byte parameters: the weights into the window as the ops reach them */
    zt_model_need_wte(m);
    f->embed_fwd(be, a->encoded, m->tok, P(ZT_P_WTE), P(m->table.wpe), B, T, C); /* rotary: no wpe */
    RND(a->encoded, NC);
    /* a training forward keeps each layer's internals for backward: packed, or in their per-layer copies */
    m->stashed = m->opt.act16 && dscale != 0.0f;
    for (int l = 0; l < L; l++) {
        if (m->stashed) zt_model_stash_ahead(m, l);
        layer_fwd(m, l, 1);
        if (m->stashed) zt_model_stash_layer(m, l, 1);
    }
    norm_after_layer(m, L - 1, a->lnf, a->lnf_mean, a->lnf_rstd, T_(L, 0), T_(L, 1), N);
    RND(a->lnf, NC);
    zt_model_need_wte(m);
    m->dlogits_ready = 0;
    float *losses = row >= 0 ? m->loss_rows + (size_t)row * m->max_B * m->max_T : a->losses;
    m->head_losses = losses;
    if (head_chunked(m, N)) {
        ZT_ASSERT(scored); /* the micro-batch's logits are never whole */
        if (dscale != 0.0f && row >= 0) { /* a step's micro-batch: its backward runs the head (losses included) */
            m->loss_row_n[row] = N;
            return 0.0f;
        }
        /* the losses alone, chunk by chunk (a backward after this runs the head again, with its gradients) */
        const int R = zt_model_head_rows(&m->s, &m->opt, N);
        for (int r0 = 0; r0 < N; r0 += R) {
            const int n = N - r0 < R ? N - r0 : R;
            head_logits(m, r0, n);
            xent_rows(m, losses + r0, m->tgt + r0, n, 0.0f);
        }
    } else {
        head_logits(m, 0, N); /* logits(N, Vp) = lnf(N, C) @ head(Vp, C)^T */
        if (!scored) return -1.0f;
        /* the loss is fp32 arithmetic on the stored logits; the dlogits it leaves are stored (rounded) */
        xent(m, losses, N, zt_model_xent_scale(dscale, N));
        m->dlogits_ready = dscale != 0.0f;
        m->dlogits_scale = dscale;
    }
    if (row >= 0) {
        m->loss_row_n[row] = N;
        return 0.0f;
    }
    f->to_host(be, m->losses_host, a->losses, (size_t)N * sizeof(float));
    f->sync(be);
    return mean_loss(m->losses_host, N);
}

float zt_model_forward(zt_model *m, const int32_t *tokens, const int32_t *targets, int B, int T) {
    return forward(m, tokens, targets, B, T, 0.0f, -1);
}

float zt_model_forward_train(zt_model *m, const int32_t *tokens, const int32_t *targets, int B, int T,
                             float dloss_scale) {
    return forward(m, tokens, targets, B, T, dloss_scale, -1);
}

void zt_model_loss_rows_alloc(zt_model *m, int n) {
    if (n <= m->loss_nrows) return;
    zt_backend *be = m->be;
    const size_t BT = (size_t)m->max_B * m->max_T;
    if (m->loss_rows) be->i->free(be, m->loss_rows);
    free(m->loss_rows_host);
    free(m->loss_row_n);
    m->loss_rows = be->i->alloc(be, (size_t)n * BT * sizeof(float));
    if (m->row_ids) be->i->free(be, m->row_ids);
    m->row_ids = be->i->alloc(be, 2 * (size_t)n * BT * sizeof(int32_t));
    if (m->row_micro) be->i->free(be, m->row_micro);
    m->row_micro = be->i->alloc(be, (size_t)n * sizeof(uint64_t));
    if (m->row_dscale) be->i->free(be, m->row_dscale);
    m->row_dscale = be->i->alloc(be, (size_t)n * sizeof(float));
    free(m->row_dscale_host);
    m->row_dscale_host = zt_calloc((size_t)n, sizeof(float));
    m->loss_rows_host = zt_calloc((size_t)n * BT, sizeof(float));
    if (m->s.encoder) {
        if (m->row_enc) be->i->free(be, m->row_enc);
        if (m->row_argmax) be->i->free(be, m->row_argmax);
        free(m->row_enc_host);
        m->row_enc = be->i->alloc(be, 3 * (size_t)n * BT * sizeof(int32_t));
        m->row_argmax = be->i->alloc(be, (size_t)n * BT * sizeof(int32_t));
        m->row_enc_host = zt_calloc(3 * (size_t)n * BT, sizeof(int32_t));
    }
    m->loss_row_n = zt_calloc((size_t)n, sizeof(int));
    m->loss_nrows = n;
}

void zt_model_rows_upload(zt_model *m, int n, int B, int T, const int32_t *tokens, const int32_t *targets,
                          const uint64_t *micro, const float *dscale) {
    ZT_ASSERT(n <= m->loss_nrows && B <= m->max_B && T <= m->max_T);
    const size_t cnt = (size_t)n * B * T * sizeof(int32_t);
    m->be->i->to_device(m->be, m->row_ids, tokens, cnt);
    m->be->i->to_device(m->be, m->row_ids + (size_t)m->loss_nrows * m->max_B * m->max_T, targets, cnt);
    if (m->s.encoder) zt_model_encoder_rows_upload(m, n, B, T, tokens);
    m->rows_micro = micro != NULL;
    if (micro) m->be->i->to_device(m->be, m->row_micro, micro, (size_t)n * sizeof(uint64_t));
    m->rows_dscale = dscale != NULL;
    if (dscale) {
        for (int r = 0; r < n; r++) m->row_dscale_host[r] = zt_model_xent_scale(dscale[r], B * T);
        m->be->i->to_device(m->be, m->row_dscale, m->row_dscale_host, (size_t)n * sizeof(float));
    }
}

void zt_model_forward_train_row(zt_model *m, const int32_t *tokens, const int32_t *targets, int B, int T,
                                float dloss_scale, int row) {
    ZT_ASSERT(row >= 0 && row < m->loss_nrows && (targets || !tokens));
    forward(m, tokens, targets, B, T, dloss_scale, row);
}

void zt_model_loss_rows_read(zt_model *m, int n, float *out) {
    ZT_ASSERT(n <= m->loss_nrows);
    const size_t BT = (size_t)m->max_B * m->max_T;
    int last = -1; /* the device rows up to the last decoder row, in one copy */
    for (int r = 0; r < n; r++)
        if (m->loss_row_n[r] >= 0) last = r;
    if (last >= 0) {
        const size_t cnt = (size_t)last * BT + (size_t)m->loss_row_n[last];
        m->be->i->to_host(m->be, m->loss_rows_host, m->loss_rows, cnt * sizeof(float));
    }
    for (int r = 0; r < n; r++)
        out[r] = m->loss_row_n[r] < 0 ? m->loss_rows_host[(size_t)r * BT] : mean_loss(m->loss_rows_host + r * BT,
                                                                                      m->loss_row_n[r]);
}

/* the frozen base's normalisation gradients (LoRA) go to a sink of 2C: weight, then bias */
static float *gnorm(zt_model *m, int i, int bias) {
    if (m->lora) return i >= 0 ? m->lora->sink + (bias ? m->s.n_embd : 0) : NULL;
    return G(i);
}

/* the LM head's backward: its weight's gradient (not LoRA) and dlnf(N, C) into a->dbtc */
static void head_bwd(zt_model *m, int N) {
    zt_backend *be = m->be;
    const zt_backend_i *f = be->i;
    const int C = m->s.n_embd, Vp = m->s.padded_vocab, h = head_idx(m);
    zt_acts *a = &m->a;
    if (!m->lora) {
        BEFORE(h, h);
        /* dhead(Vp, C) = dlogits^T @ lnf (a tied wte: the embedding backward adds to it later; rounded once, after
           it) */
        if (logits16(m)) f->matmul16(be, G(h), 0, a->logits, 1, a->lnf, Vp, C, N, 1, 0, m->prec, 0.0f);
        else f->matmul(be, G(h), a->logits, a->lnf, Vp, C, N, 1, 0, 1.0f, 0.0f);
        if (h != ZT_P_WTE) RND(G(h), m->table.t[h].numel);
    }
    /* dlnf(N, C) = dlogits(N, Vp) @ head(Vp, C) */
    zt_model_need_fixed(m);
    zt_model_need_wte(m);
    if (logits16(m)) f->matmul16(be, a->dbtc, 0, a->logits, 1, P(h), N, C, Vp, 0, 0, m->prec, 0.0f);
    else f->matmul(be, a->dbtc, a->logits, P(h), N, C, Vp, 0, 0, 1.0f, 0.0f);
    RND(a->dbtc, (size_t)N * C);
}

/* head_bwd on chunks of rows (train.head_chunks): per chunk the logits, the loss into head_losses with the dlogits in
   their place (d(mean loss) = dscale per row), the head's weight gradient added (beta 1 after the first chunk) and
   the chunk's rows of dlnf; the gradient is rounded once, after the last chunk */
static void head_bwd_chunks(zt_model *m, int N, float dscale) {
    zt_backend *be = m->be;
    const zt_backend_i *f = be->i;
    const int C = m->s.n_embd, Vp = m->s.padded_vocab, h = head_idx(m), R = zt_model_head_rows(&m->s, &m->opt, N);
    zt_acts *a = &m->a;
    if (!m->lora) BEFORE(h, h);
    zt_model_need_fixed(m);
    zt_model_need_wte(m);
    for (int r0 = 0; r0 < N; r0 += R) {
        const int n = N - r0 < R ? N - r0 : R;
        const float *x = a->lnf + (size_t)r0 * C, beta = r0 > 0 ? 1.0f : 0.0f;
        float *dx = a->dbtc + (size_t)r0 * C;
        head_logits(m, r0, n);
        xent_rows(m, m->head_losses + r0, m->tgt + r0, n, dscale);
        if (!m->lora) { /* dhead(Vp, C) += dlogits^T @ lnf rows */
            if (logits16(m)) f->matmul16(be, G(h), 0, a->logits, 1, x, Vp, C, n, 1, 0, m->prec, beta);
            else f->matmul(be, G(h), a->logits, x, Vp, C, n, 1, 0, 1.0f, beta);
        }
        /* dlnf rows(n, C) = dlogits(n, Vp) @ head(Vp, C) */
        if (logits16(m)) f->matmul16(be, dx, 0, a->logits, 1, P(h), n, C, Vp, 0, 0, m->prec, 0.0f);
        else f->matmul(be, dx, a->logits, P(h), n, C, Vp, 0, 0, 1.0f, 0.0f);
    }
    if (!m->lora && h != ZT_P_WTE) RND(G(h), m->table.t[h].numel);
    RND(a->dbtc, (size_t)N * C);
}

/* layer l's backward: dres holds d(its output) and receives d(its input); its trained gradients written */
static void layer_bwd(zt_model *m, int l) {
    zt_backend *be = m->be;
    const zt_backend_i *f = be->i;
    const zt_model_shape *s = &m->s;
    const int C = s->n_embd, NH = s->n_head, NKV = s->n_kv_head, B = m->B, T = m->T, N = B * T;
    const int Q = zt_shape_qkv(s), F = zt_shape_fc(s), I = s->ffn;
    const size_t NC = (size_t)N * C;
    zt_acts *a = &m->a;
    int first, last;
    zt_model_layer_tensors(m, l, &first, &last);
    BEFORE(first, last);
    const zt_layer_acts x = zt_model_layer_slots(m, l);
    zt_model_need_layer(m, l, l - 1); /* backward reaches layer l - 1 next */
    /* 2-byte storage: the layer's internals back into the working copy (exact) */
    if (m->opt.act16) zt_model_stash_layer(m, l, 0);
    /* recomputation: the same kernels on the same inputs give the same bits as the stored copy */
    if (m->opt.recompute == ZT_RECOMPUTE_LAYER) layer_fwd(m, l, 0);
    else if (m->opt.recompute == ZT_RECOMPUTE_GELU) {
        act_fwd(m, x.fchg, x.fch, N);
        RND(x.fchg, (size_t)N * I); /* as layer_fwd stored it */
    }
    /* MLP: dres = d residual3[l] */
    zt_model_linear_bwd(m, l, 3, a->dbt4c, a->dres, x.fchg, T_(l, ZT_FCPW), T_(l, ZT_FCPB));
    RND(a->dbt4c, (size_t)N * I);
    float *dfc = a->dbt4c; /* GELU: in place */
    if (s->mlp == ZT_MLP_SWIGLU) {
        dfc = a->dfc;
        f->swiglu_bwd(be, dfc, x.fch, a->dbt4c, N, I);
    } else if (s->mlp == ZT_MLP_GELU_ERF) {
        f->gelu_erf_bwd(be, dfc, x.fch, a->dbt4c, (size_t)N * I);
    } else {
        f->gelu_bwd(be, dfc, x.fch, a->dbt4c, (size_t)N * I);
    }
    RND(dfc, (size_t)N * F);
    zt_model_linear_bwd(m, l, 2, a->dbtc, dfc, x.ln2, T_(l, ZT_FCW), T_(l, ZT_FCB));
    RND(a->dbtc, NC);
    norm_bwd(m, a->dres, gnorm(m, T_(l, ZT_LN2W), 0), gnorm(m, T_(l, ZT_LN2B), 1), a->dbtc, x.res2, T_(l, ZT_LN2W),
             x.ln2_mean, x.ln2_rstd, N);
    RND(a->dres, NC);
    /* attention: dres = d residual2[l] */
    zt_model_linear_bwd(m, l, 1, a->dbtc, a->dres, x.atty, T_(l, ZT_ATTPW), T_(l, ZT_ATTPB));
    RND(a->dbtc, NC);
    if (m->opt.att_fused) f->attention_fused_bwd(be, a->dqkv, a->datt, a->dbtc, x.qkv, x.atty, x.att, B, T, C, NH, NKV);
    else f->attention_bwd(be, a->dqkv, a->datt, a->dbtc, x.qkv, x.att, B, T, C, NH, NKV);
    RND(a->dqkv, (size_t)N * Q);
    if (s->pos == ZT_POS_ROPE) { /* back through the rotation: the inverse rotation of the gradient */
        f->rope(be, a->dqkv, a->rope_cs, B, T, 0, NH, NKV, C / NH, 1);
        RND(a->dqkv, (size_t)N * Q);
    }
    zt_model_linear_bwd(m, l, 0, a->dbtc2, a->dqkv, x.ln1, T_(l, ZT_QKVW), T_(l, ZT_QKVB));
    RND(a->dbtc2, NC);
    norm_bwd(m, a->dres, gnorm(m, T_(l, ZT_LN1W), 0), gnorm(m, T_(l, ZT_LN1B), 1), a->dbtc2, x.res, T_(l, ZT_LN1W),
             x.ln1_mean, x.ln1_rstd, N);
    RND(a->dres, NC);
    /* the layer's trained gradients, as a bf16/fp16 gradient buffer stores them */
    zt_model_round_grads(m, zt_model_ttable(m), first, last);
    AFTER(first);
}

/* the embedding's backward: wte (added to the tied LM head's gradient, or begun here) and wpe */
static void embed_bwd(zt_model *m) {
    zt_backend *be = m->be;
    const zt_backend_i *f = be->i;
    const int C = m->s.n_embd, B = m->B, T = m->T, wpe = m->table.wpe;
    zt_acts *a = &m->a;
    if (m->table.lm_head >= 0) { /* untied: the embedding alone writes wte's gradient */
        BEFORE(ZT_P_WTE, wpe >= 0 ? wpe : ZT_P_WTE);
        f->zero(be, G(ZT_P_WTE), m->table.t[ZT_P_WTE].numel * sizeof(float));
    } else if (wpe >= 0) {
        BEFORE(wpe, wpe);
    }
    /* rows of wpe past T get no gradient in this micro-batch */
    if (wpe >= 0 && T < m->s.block_size)
        f->zero(be, G(wpe) + (size_t)T * C, (size_t)(m->s.block_size - T) * C * sizeof(float));
    f->embed_bwd(be, G(ZT_P_WTE), G(wpe), a->dres, m->tok, B, T, C);
    zt_model_round_grads(m, &m->table, ZT_P_WTE, wpe == ZT_P_WTE + 1 ? wpe : ZT_P_WTE);
    if (wpe > ZT_P_WTE + 1) zt_model_round_grads(m, &m->table, wpe, wpe);
    AFTER(0);
}

void zt_model_backward(zt_model *m, float dloss_scale) {
    zt_backend *be = m->be;
    const zt_backend_i *f = be->i;
    const int L = m->s.n_layer, C = m->s.n_embd;
    const int N = m->B * m->T;
    const size_t NC = (size_t)N * C;
    zt_acts *a = &m->a;
    ZT_ASSERT(m->gptr[0]);
    ZT_ASSERT(!m->opt.act16 || m->stashed); /* 2-byte storage: backward follows a training forward */
    if (m->s.encoder) {
        zt_model_encoder_backward(m, dloss_scale);
        return;
    }
    const int lnf = T_(L, 0), lnf_b = T_(L, 1);
    /* (zeroed before the head, so that the round_to of dlnf the head leaves kept goes to ln_f's backward, which reads
       dlnf next) */
    f->zero(be, a->dres, NC * sizeof(float));
    /* dlogits in place of the logits; d(mean loss) = dloss_scale / N per position */
    if (head_chunked(m, N)) {
        head_bwd_chunks(m, N, zt_model_xent_scale(dloss_scale, N));
    } else {
        if (!(m->dlogits_ready && m->dlogits_scale == dloss_scale)) xent(m, a->losses, N, zt_model_xent_scale(dloss_scale, N));
        head_bwd(m, N);
    }
    m->dlogits_ready = 0;
    if (!m->lora) BEFORE(lnf, lnf_b >= 0 ? lnf_b : lnf);
    norm_bwd(m, a->dres, gnorm(m, lnf, 0), gnorm(m, lnf_b, 1), a->dbtc, a->residual3 + (size_t)(L - 1) * NC, lnf,
             a->lnf_mean, a->lnf_rstd, N);
    RND(a->dres, NC);
    if (!m->lora) {
        zt_model_round_grads(m, &m->table, lnf, lnf_b >= 0 ? lnf_b : lnf);
        AFTER(lnf);
    }
    for (int l = L - 1; l >= 0; l--) layer_bwd(m, l);
    if (!m->lora) embed_bwd(m); /* LoRA: the embeddings are frozen, nothing upstream needs dres */
}
