/* model_linear.c — a layer's linear maps as forward and backward use them: the frozen or trained fp32 weight, a
 * QLoRA base weight dequantised right before each use, and the LoRA adapters (dropout by a counter-based mask of
 * the global micro-batch, so every rank count draws the same). */
#include "core/model/model_internal.h"

#include "iface/op_math.h"
#include "util/util.h"

/* layer l's target-k linear weight (in, out): its fp32 tensor, or (QLoRA) its dequantisation into m->wdq */
const float *zt_model_base_w(zt_model *m, int l, int k) {
    const int ti = zt_param_idx(&m->table, l, zt_lora_target_tensor(k));
    if (!m->qw[l][k]) return m->w[ti];
    const zt_tensor_info *t = &m->table.t[ti];
    m->be->i->dequant(m->be, m->wdq, m->qw[l][k], m->qfmt, (size_t)t->shape[0], (size_t)t->shape[1]);
    if (m->prec) m->be->i->round_to(m->be, m->wdq, t->numel, m->prec);
    return m->wdq;
}

/* the dropout stream of layer l's site j in the current global micro-batch: zt_dropout_seed of the site's base and
   the micro-batch index, the index read on the device where the forward's row has it there (zt_model.row_micro: a
   step's slot calls are then the same every step), else given by value */
static void dropout_site(zt_model *m, float *out, const float *in, size_t n, int l, int j) {
    const zt_lora_model *lp = m->lora;
    const uint64_t base = lp->seed * 0x9E3779B97F4A7C15ull + (uint64_t)(l * lp->n_sites + j) * 0x94D049BB133111EBull;
    if (lp->row >= 0) m->be->i->dropout(m->be, out, in, n, lp->cfg.dropout, base, m->row_micro + lp->row);
    else m->be->i->dropout(m->be, out, in, n, lp->cfg.dropout, zt_dropout_seed(base, (uint64_t)lp->micro), NULL);
}

/* the adapter's input: x, or dropout(x) in lp->xd */
static const float *lora_input(zt_model *m, int l, int j, const float *x, size_t n) {
    zt_lora_model *lp = m->lora;
    if (lp->cfg.dropout <= 0.0f || !lp->training) return x;
    dropout_site(m, lp->xd, x, n, l, j);
    if (m->prec) m->be->i->round_to(m->be, lp->xd, n, m->prec);
    return lp->xd;
}

static float *lora_u(const zt_model *m, int l, int j) {
    return m->lora->u + (size_t)(l * m->lora->n_sites + j) * (size_t)m->max_B * m->max_T * m->lora->cfg.rank;
}

/* c = alpha op(a) op(b) + beta c where a (when ta: its transpose) or c is the site's column slice of a (N, out)
   matrix: matmul when the site is the whole output (GPT-2's), else matmul_ld with that row stride */
static void site_matmul(zt_backend *be, const zt_lora_site *st, int out, float *c, const float *a, const float *b,
                        int M, int N, int K, int ta, int tb, float alpha, float beta, int lda, int ldb, int ldc) {
    if (st->cols == out) be->i->matmul(be, c, a, b, M, N, K, ta, tb, alpha, beta);
    else be->i->matmul_ld(be, c, a, b, M, N, K, ta, tb, alpha, beta, lda, ldb, ldc);
}

void zt_model_lora_fwd(zt_model *m, int l, int k, const float *x, float *y) {
    zt_lora_model *lp = m->lora;
    if (!lp) return;
    zt_backend *be = m->be;
    const int N = m->B * m->T, r = lp->cfg.rank;
    int in, out;
    zt_lora_target_dims(&m->s, k, &in, &out);
    for (int j = 0; j < lp->n_sites; j++) {
        const zt_lora_site *st = &lp->sites[j];
        const int ai = st->k == k ? zt_lora_index(&lp->cfg, &m->s, l, j) : -1;
        if (ai < 0) continue;
        const float *A = lp->params + lp->table.t[ai].offset, *Bw = lp->params + lp->table.t[ai + 1].offset;
        float *u = lora_u(m, l, j);
        const float *xin = lora_input(m, l, j, x, (size_t)N * in);
        be->i->matmul(be, u, xin, A, N, r, in, 0, 1, 1.0f, 0.0f);
        if (m->prec) be->i->round_to(be, u, (size_t)N * r, m->prec);
        /* y[:, col0 .. col0 + cols) += s u B^T */
        site_matmul(be, st, out, y + st->col0, u, Bw, N, st->cols, r, 0, 1, lp->scale, 1.0f, r, r, out);
    }
}

/* backward of layer l's linear k (weight tensor wt, bias bt; x (N, in) its input, dy (N, out)): dx is
   overwritten. Full training: linear_bwd. LoRA: dx through the frozen W, and for each adapted site (dy_j its
   columns of dy) the adapter's gradients dB = s dy_j^T u, du = s dy_j B, dA = du^T dropout(x), and its part of dx,
   du A (through the dropout) */
void zt_model_linear_bwd(zt_model *m, int l, int k, float *dx, const float *dy, const float *x, int wt, int bt) {
    zt_backend *be = m->be;
    const zt_backend_i *f = be->i;
    const int N = m->B * m->T;
    int in, out;
    zt_lora_target_dims(&m->s, k, &in, &out);
    const float *W = zt_model_base_w(m, l, k);
    zt_lora_model *lp = m->lora;
    if (!lp) {
        f->linear_bwd(be, dx, m->gptr[wt], bt >= 0 ? m->gptr[bt] : NULL, dy, x, W, N, in, out, 0); /* bt -1: no bias */
        return;
    }
    f->matmul(be, dx, dy, W, N, in, out, 0, 1, 1.0f, 0.0f);
    const int r = lp->cfg.rank;
    for (int j = 0; j < lp->n_sites; j++) {
        const zt_lora_site *st = &lp->sites[j];
        const int ai = st->k == k ? zt_lora_index(&lp->cfg, &m->s, l, j) : -1;
        if (ai < 0) continue;
        const float *A = lp->params + lp->table.t[ai].offset, *Bw = lp->params + lp->table.t[ai + 1].offset;
        const float *u = lora_u(m, l, j), *dyj = dy + st->col0;
        site_matmul(be, st, out, m->gptr[ai + 1], dyj, u, st->cols, r, N, 1, 0, lp->scale, 0.0f, out, r, r);
        site_matmul(be, st, out, lp->du, dyj, Bw, N, r, st->cols, 0, 0, lp->scale, 0.0f, out, r, r);
        if (m->prec) f->round_to(be, lp->du, (size_t)N * r, m->prec);
        const float *xin = lora_input(m, l, j, x, (size_t)N * in);
        f->matmul(be, m->gptr[ai], lp->du, xin, r, in, N, 1, 0, 1.0f, 0.0f);
        if (lp->cfg.dropout <= 0.0f || !lp->training) {
            f->matmul(be, dx, lp->du, A, N, in, r, 0, 0, 1.0f, 1.0f);
        } else {
            f->matmul(be, lp->xd, lp->du, A, N, in, r, 0, 0, 1.0f, 0.0f);
            dropout_site(m, lp->xd, lp->xd, (size_t)N * in, l, j);
            f->add(be, dx, dx, lp->xd, (size_t)N * in);
        }
    }
}

/* layer l's first and last trained tensors (their gradients): GPT-2's layer, or its adapters */
void zt_model_layer_tensors(const zt_model *m, int l, int *first, int *last) {
    if (!m->lora) {
        *first = zt_param_layer_first(&m->table, l);
        *last = zt_param_layer_last(&m->table, l);
        return;
    }
    const int P = m->lora->table.lora_per_layer;
    *first = l * P;
    *last = l * P + P - 1;
}
