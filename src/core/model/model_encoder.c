/* model_encoder.c — the encoders' forward and backward (BERT, RoBERTa: zt_model_shape.encoder) on the backend
 * interface: the embeddings (word + token type + position, then a LayerNorm), post-LN layers with bidirectional
 * attention that never attends to padding, and the masked-LM head (dense, exact GELU, LayerNorm, the decoder tied
 * to the word embeddings plus its own bias). The loss is the cross-entropy at the positions whose target is >= 0
 * (the masked ones: core/model/mlm.h); the forward also counts where the logits' argmax is the target.
 *
 * Per position, made on the host from the tokens: whether it is a key (not model.pad_id), its token type (the
 * number of sep_id tokens before it, at most type_vocab - 1; 0 without sep_id) and its position id: t + pos_offset
 * (BERT), or with pos_offset > 0 transformers' RoBERTa rule, pad_id + (the non-padding tokens up to and including
 * it) for a token and pad_id for padding. A training step makes them for all its micro-batches and uploads them with
 * their tokens (zt_model_rows_upload); its forwards keep their argmax and losses in device rows, counted after the
 * step (zt_model_rows_accuracy), so nothing in a step waits for the device. Nothing a padding position computes
 * reaches a loss: it is never a key (probability exactly 0) and never a target, so its gradients are exactly 0, as
 * transformers' padding_idx rows.
 * Dropout is not applied (a run without dropout, transformers' model.eval() arithmetic).
 *
 * Same storage rules as model.c: every op's output is rounded to the working precision (RND), the layer slots of
 * model_acts.c (zt_model_layer_slots says what an encoder keeps in each), recomputation and the 2-byte stash as
 * the decoders have them; the backward hooks see the tensors finish in reverse flat order. */
#include "core/model/model_internal.h"

#include <string.h>

#include "util/util.h"


/* res = a + b rounded, out = LayerNorm(res) with the weight at index w (its bias follows) */
static void add_norm(zt_model *m, float *res, float *out, float *mean, float *rstd, const float *a, const float *b,
                     int w, int N) {
    zt_backend *be = m->be;
    const zt_backend_i *f = be->i;
    const int C = m->s.n_embd;
    if (f->residual_layernorm_fwd) {
        f->residual_layernorm_fwd(be, res, out, mean, rstd, a, b, P(w), P(w + 1), N, C, m->prec, m->s.norm_eps);
    } else {
        f->add(be, res, a, b, (size_t)N * C);
        RND(res, (size_t)N * C);
        f->layernorm_fwd(be, out, mean, rstd, res, P(w), P(w + 1), N, C, m->s.norm_eps);
    }
}

/* the host-made ids of a micro-batch's B x T tokens (see the file comment): position ids, token types, keys */
static void make_ids(const zt_model_shape *s, const int32_t *tokens, int B, int T, int32_t *pos, int32_t *type,
                     int32_t *key) {
    for (int b = 0; b < B; b++) {
        int seps = 0, real = 0;
        for (int t = 0; t < T; t++) {
            const size_t i = (size_t)b * T + t;
            const int pad = tokens[i] == s->pad_id;
            real += !pad;
            key[i] = !pad;
            type[i] = s->sep_id < 0 || s->type_vocab <= 1 ? 0 : seps < s->type_vocab - 1 ? seps : s->type_vocab - 1;
            seps += s->sep_id >= 0 && tokens[i] == s->sep_id;
            pos[i] = s->pos_offset > 0 ? (pad ? s->pad_id : s->pad_id + real) : t + s->pos_offset;
        }
    }
}

/* a micro-batch's ids into the device (the activations' buffers), for the forward that follows */
static void put_ids(zt_model *m, const int32_t *tokens, int B, int T) {
    const size_t N = (size_t)B * T;
    int32_t *pos = m->ids_host, *type = pos + N, *key = type + N;
    make_ids(&m->s, tokens, B, T, pos, type, key);
    const zt_backend_i *f = m->be->i;
    f->to_device(m->be, m->a.pos_ids, pos, N * sizeof(int32_t));
    f->to_device(m->be, m->a.types, type, N * sizeof(int32_t));
    f->to_device(m->be, m->a.kvalid, key, N * sizeof(int32_t));
    m->e_pos = m->a.pos_ids, m->e_type = m->a.types, m->e_key = m->a.kvalid;
}

/* row r's ids in row_enc (host staging or device): (3, max B*T) a row, position ids, types and keys N apart */
static int32_t *row_ids_at(const zt_model *m, int32_t *base, int r) {
    return base + (size_t)r * 3 * m->max_B * m->max_T;
}

void zt_model_encoder_rows_upload(zt_model *m, int n, int B, int T, const int32_t *tokens) {
    const size_t N = (size_t)B * T;
    for (int r = 0; r < n; r++) {
        int32_t *pos = row_ids_at(m, m->row_enc_host, r);
        make_ids(&m->s, tokens + r * N, B, T, pos, pos + N, pos + 2 * N);
    }
    m->be->i->to_device(m->be, m->row_enc, m->row_enc_host, (size_t)n * 3 * m->max_B * m->max_T * sizeof(int32_t));
}

void zt_model_rows_accuracy(zt_model *m, int n, int B, int T, const int32_t *targets, long long acc[2]) {
    const size_t N = (size_t)B * T, BT = (size_t)m->max_B * m->max_T;
    ZT_ASSERT(m->s.encoder && n <= m->loss_nrows);
    if (n <= 0) return;
    m->be->i->to_host(m->be, m->row_enc_host, m->row_argmax, ((size_t)(n - 1) * BT + N) * sizeof(int32_t));
    for (int r = 0; r < n; r++)
        for (size_t i = 0; i < N; i++) {
            const int32_t t = targets[r * N + i];
            acc[0] += t >= 0;
            acc[1] += t >= 0 && m->row_enc_host[r * BT + i] == t;
        }
}

/* layer l's forward (post-LN). out = 0: a recomputation in backward (the output is rewritten with the same bits) */
static void layer_fwd(zt_model *m, int l, int out) {
    zt_backend *be = m->be;
    const zt_backend_i *f = be->i;
    const zt_model_shape *s = &m->s;
    const int C = s->n_embd, NH = s->n_head, NKV = s->n_kv_head, B = m->B, T = m->T, N = B * T;
    const int Q = zt_shape_qkv(s), F = zt_shape_fc(s), I = s->ffn;
    const size_t NC = (size_t)N * C;
    zt_acts *a = &m->a;
    const zt_layer_acts x = zt_model_layer_slots(m, l);
    zt_model_need_layer(m, l, out ? l + 1 : -1);
    f->linear_fwd(be, x.qkv, x.res, zt_model_base_w(m, l, 0), P(T_(l, ZT_QKVB)), N, C, Q);
    RND(x.qkv, (size_t)N * Q);
    f->attention_bidir_fwd(be, x.atty, x.att, x.qkv, m->e_key, B, T, C, NH, NKV);
    RND(x.atty, NC);
    RND(x.att, (size_t)B * NH * T * T);
    f->linear_fwd(be, a->attproj, x.atty, zt_model_base_w(m, l, 1), P(T_(l, ZT_ATTPB)), N, C, C);
    RND(a->attproj, NC);
    add_norm(m, x.res2, x.ln1, x.ln1_mean, x.ln1_rstd, x.res, a->attproj, T_(l, ZT_LN1W), N);
    RND(x.ln1, NC);
    f->linear_fwd(be, x.fch, x.ln1, zt_model_base_w(m, l, 2), P(T_(l, ZT_FCB)), N, C, F);
    RND(x.fch, (size_t)N * F);
    f->gelu_erf_fwd(be, x.fchg, x.fch, (size_t)N * I);
    RND(x.fchg, (size_t)N * I);
    f->linear_fwd(be, a->fcproj, x.fchg, zt_model_base_w(m, l, 3), P(T_(l, ZT_FCPB)), N, I, C);
    RND(a->fcproj, NC);
    add_norm(m, x.ln2, x.res3, x.ln2_mean, x.ln2_rstd, x.ln1, a->fcproj, T_(l, ZT_LN2W), N);
    RND(x.res3, NC);
}

float zt_model_encoder_forward(zt_model *m, const int32_t *tokens, const int32_t *targets, int B, int T,
                               float dscale, int row) {
    zt_backend *be = m->be;
    const zt_backend_i *f = be->i;
    const zt_model_shape *s = &m->s;
    const zt_param_table *pt = &m->table;
    const int L = s->n_layer, C = s->n_embd, V = s->vocab_size, Vp = s->padded_vocab, N = B * T;
    const size_t NC = (size_t)N * C;
    zt_acts *a = &m->a;
    if (tokens) put_ids(m, tokens, B, T);
    else { /* a step's row: its ids uploaded before the step's first launch */
        const int32_t *ids = row_ids_at(m, m->row_enc, row);
        m->e_pos = ids, m->e_type = ids + N, m->e_key = ids + 2 * (size_t)N;
    }
    zt_model_need_fixed(m);
    zt_model_need_wte(m);
    /* transformers' order: word + token type, then + position; stored once, then its LayerNorm */
    f->embed_fwd(be, a->emb_sum, m->tok, P(ZT_P_WTE), NULL, B, T, C);
    if (pt->tte >= 0) {
        f->embed_fwd(be, a->hd, m->e_type, P(pt->tte), NULL, B, T, C);
        f->add(be, a->emb_sum, a->emb_sum, a->hd, NC);
    }
    f->embed_fwd(be, a->hd, m->e_pos, P(pt->wpe), NULL, B, T, C);
    f->add(be, a->emb_sum, a->emb_sum, a->hd, NC);
    RND(a->emb_sum, NC);
    f->layernorm_fwd(be, a->encoded, a->emb_mean, a->emb_rstd, a->emb_sum, P(pt->emb_ln), P(pt->emb_ln + 1), N, C,
                     s->norm_eps);
    RND(a->encoded, NC);
    m->stashed = m->opt.act16 && dscale != 0.0f;
    for (int l = 0; l < L; l++) {
        layer_fwd(m, l, 1);
        if (m->stashed) zt_model_stash_layer(m, l, 1);
    }
    /* the MLM head: dense, GELU, LayerNorm, the tied decoder and its bias */
    const float *res = a->residual3 + (size_t)(L - 1) * NC;
    const int hln = T_(L, 0);
    f->linear_fwd(be, a->hd, res, P(pt->head_dense), P(pt->head_dense + 1), N, C, C);
    RND(a->hd, NC);
    f->gelu_erf_fwd(be, a->hdg, a->hd, NC);
    RND(a->hdg, NC);
    f->layernorm_fwd(be, a->lnf, a->lnf_mean, a->lnf_rstd, a->hdg, P(hln), P(hln + 1), N, C, s->norm_eps);
    RND(a->lnf, NC);
    zt_model_need_wte(m);
    f->matmul(be, a->logits, a->lnf, P(ZT_P_WTE), N, Vp, C, 0, 1, 1.0f, 0.0f);
    f->bias_add(be, a->logits, P(pt->head_bias), N, Vp);
    RND(a->logits, (size_t)N * Vp);
    m->dlogits_ready = 0;
    m->correct = m->counted = 0;
    if (tokens && !targets) return -1.0f;
    /* accuracy: the argmax of the stored logits against the targets, before the loss overwrites them; a step's row
       keeps its argmax and losses on the device (zt_model_rows_accuracy, zt_model_loss_rows_read) */
    const size_t BT = (size_t)m->max_B * m->max_T;
    int32_t *argmax = tokens ? a->argmax : m->row_argmax + (size_t)row * BT;
    float *losses = tokens ? a->losses : m->loss_rows + (size_t)row * BT;
    f->argmax_rows(be, argmax, a->logits, N, V, Vp);
    f->softmax_xent(be, losses, a->logits, m->tgt, N, V, Vp, zt_model_xent_scale(dscale, N), m->xent_at);
    if (dscale != 0.0f) RND(a->logits, (size_t)N * Vp);
    m->dlogits_ready = dscale != 0.0f;
    m->dlogits_scale = dscale;
    if (!tokens) return 0.0f;
    f->to_host(be, m->ids_host, a->argmax, (size_t)N * sizeof(int32_t));
    f->to_host(be, m->losses_host, a->losses, (size_t)N * sizeof(float));
    f->sync(be);
    double sum = 0.0;
    for (int i = 0; i < N; i++) {
        sum += m->losses_host[i];
        m->counted += targets[i] >= 0;
        m->correct += targets[i] >= 0 && m->ids_host[i] == targets[i];
    }
    return (float)(sum / N);
}

/* layer l's backward: dres holds d(its output) and receives d(its input) */
static void layer_bwd(zt_model *m, int l) {
    zt_backend *be = m->be;
    const zt_backend_i *f = be->i;
    const zt_model_shape *s = &m->s;
    const int C = s->n_embd, NH = s->n_head, NKV = s->n_kv_head, B = m->B, T = m->T, N = B * T;
    const int Q = zt_shape_qkv(s), I = s->ffn;
    const size_t NC = (size_t)N * C;
    zt_acts *a = &m->a;
    int first, last;
    zt_model_layer_tensors(m, l, &first, &last);
    BEFORE(first, last);
    const zt_layer_acts x = zt_model_layer_slots(m, l);
    zt_model_need_layer(m, l, l - 1);
    if (m->opt.act16) zt_model_stash_layer(m, l, 0);
    if (m->opt.recompute == ZT_RECOMPUTE_LAYER) layer_fwd(m, l, 0);
    else if (m->opt.recompute == ZT_RECOMPUTE_GELU) {
        f->gelu_erf_fwd(be, x.fchg, x.fch, (size_t)N * I);
        RND(x.fchg, (size_t)N * I);
    }
    /* the MLP's LayerNorm: dbtc = d(its residual sum), which flows to the MLP and to ln1 */
    f->zero(be, a->dbtc, NC * sizeof(float));
    f->layernorm_bwd(be, a->dbtc, G(T_(l, ZT_LN2W)), G(T_(l, ZT_LN2B)), a->dres, x.ln2, P(T_(l, ZT_LN2W)), x.ln2_mean,
                     x.ln2_rstd, N, C);
    RND(a->dbtc, NC);
    zt_model_linear_bwd(m, l, 3, a->dbt4c, a->dbtc, x.fchg, T_(l, ZT_FCPW), T_(l, ZT_FCPB));
    RND(a->dbt4c, (size_t)N * I);
    f->gelu_erf_bwd(be, a->dbt4c, x.fch, a->dbt4c, (size_t)N * I);
    RND(a->dbt4c, (size_t)N * I);
    zt_model_linear_bwd(m, l, 2, a->dbtc2, a->dbt4c, x.ln1, T_(l, ZT_FCW), T_(l, ZT_FCB));
    RND(a->dbtc2, NC);
    f->add(be, a->dbtc2, a->dbtc2, a->dbtc, NC); /* d ln1 */
    RND(a->dbtc2, NC);
    /* the attention's LayerNorm: dres = d(its residual sum), which flows to the attention and to the input */
    f->zero(be, a->dres, NC * sizeof(float));
    f->layernorm_bwd(be, a->dres, G(T_(l, ZT_LN1W)), G(T_(l, ZT_LN1B)), a->dbtc2, x.res2, P(T_(l, ZT_LN1W)),
                     x.ln1_mean, x.ln1_rstd, N, C);
    RND(a->dres, NC);
    zt_model_linear_bwd(m, l, 1, a->dbtc, a->dres, x.atty, T_(l, ZT_ATTPW), T_(l, ZT_ATTPB));
    RND(a->dbtc, NC);
    f->attention_bidir_bwd(be, a->dqkv, a->datt, a->dbtc, x.qkv, x.att, m->e_key, B, T, C, NH, NKV);
    RND(a->dqkv, (size_t)N * Q);
    zt_model_linear_bwd(m, l, 0, a->dbtc2, a->dqkv, x.res, T_(l, ZT_QKVW), T_(l, ZT_QKVB));
    RND(a->dbtc2, NC);
    f->add(be, a->dres, a->dres, a->dbtc2, NC);
    RND(a->dres, NC);
    zt_model_round_grads(m, &m->table, first, last);
    AFTER(first);
}

void zt_model_encoder_backward(zt_model *m, float dloss_scale) {
    zt_backend *be = m->be;
    const zt_backend_i *f = be->i;
    const zt_model_shape *s = &m->s;
    const zt_param_table *pt = &m->table;
    const int L = s->n_layer, C = s->n_embd, V = s->vocab_size, Vp = s->padded_vocab, B = m->B, T = m->T;
    const int N = B * T, hln = T_(L, 0);
    const size_t NC = (size_t)N * C;
    zt_acts *a = &m->a;
    ZT_ASSERT(!m->lora);
    if (!(m->dlogits_ready && m->dlogits_scale == dloss_scale)) {
        f->softmax_xent(be, a->losses, a->logits, m->tgt, N, V, Vp, zt_model_xent_scale(dloss_scale, N), m->xent_at);
        RND(a->logits, (size_t)N * Vp);
    }
    m->dlogits_ready = 0;
    /* the head: the decoder's bias and (tied) wte's first part, then back through LayerNorm, GELU and dense */
    BEFORE(ZT_P_WTE, ZT_P_WTE);
    BEFORE(hln, pt->n - 1);
    f->bias_grad(be, G(pt->head_bias), a->logits, N, Vp);
    f->matmul(be, G(ZT_P_WTE), a->logits, a->lnf, Vp, C, N, 1, 0, 1.0f, 0.0f);
    zt_model_need_fixed(m);
    zt_model_need_wte(m);
    f->matmul(be, a->dbtc, a->logits, P(ZT_P_WTE), N, C, Vp, 0, 0, 1.0f, 0.0f);
    RND(a->dbtc, NC);
    f->zero(be, a->dbtc2, NC * sizeof(float));
    f->layernorm_bwd(be, a->dbtc2, G(hln), G(hln + 1), a->dbtc, a->hdg, P(hln), a->lnf_mean, a->lnf_rstd, N, C);
    RND(a->dbtc2, NC);
    f->gelu_erf_bwd(be, a->dbtc2, a->hd, a->dbtc2, NC);
    RND(a->dbtc2, NC);
    f->linear_bwd(be, a->dres, G(pt->head_dense), G(pt->head_dense + 1), a->dbtc2, a->residual3 + (size_t)(L - 1) * NC,
                  P(pt->head_dense), N, C, C, 0);
    RND(a->dres, NC);
    zt_model_round_grads(m, pt, hln, pt->n - 1);
    AFTER(hln);
    for (int l = L - 1; l >= 0; l--) layer_bwd(m, l);
    /* the embeddings: back through their LayerNorm, then scattered to word, token-type and position rows */
    const int first_layer = zt_param_layer_first(pt, 0);
    BEFORE(1, first_layer - 1);
    f->zero(be, a->dbtc, NC * sizeof(float));
    f->layernorm_bwd(be, a->dbtc, G(pt->emb_ln), G(pt->emb_ln + 1), a->dres, a->emb_sum, P(pt->emb_ln), a->emb_mean,
                     a->emb_rstd, N, C);
    RND(a->dbtc, NC);
    f->embed_bwd(be, G(ZT_P_WTE), NULL, a->dbtc, m->tok, B, T, C);
    f->zero(be, G(pt->wpe), pt->t[pt->wpe].numel * sizeof(float));
    f->embed_bwd(be, G(pt->wpe), NULL, a->dbtc, m->e_pos, B, T, C);
    if (pt->tte >= 0) {
        f->zero(be, G(pt->tte), pt->t[pt->tte].numel * sizeof(float));
        f->embed_bwd(be, G(pt->tte), NULL, a->dbtc, m->e_type, B, T, C);
    }
    zt_model_round_grads(m, pt, 0, first_layer - 1);
    AFTER(0);
}
