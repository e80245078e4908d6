/* step.c — one optimizer step (step.h): micro-batches, reduction, norm, loss scaling, clipping, update. The
 * micro-batches' forward and backward, the norm, the clip factor and the update never wait for the device: the
 * norm and the losses are read once, after the update. */
#include "core/optim/step.h"

#include <math.h>
#include <mpi.h>
#include <stdlib.h>

#include "core/optim/optim.h"
#include "iface/op_math.h"
#include "util/util.h"

void zt_step_init(zt_step *st, zt_model *m, zt_zero *z, const zt_config *c, zt_step_batch_fn batch, void *ctx) {
    *st = (zt_step){.m = m, .z = z, .c = c, .batch = batch, .batch_ctx = ctx, .overflow_step = -1};
    const size_t BT = (size_t)c->train.micro_batch * c->train.seq_len;
    const int K = c->train.global_batch / c->train.micro_batch;
    st->tokens = zt_malloc((size_t)z->micro_steps * BT * sizeof(int32_t)); /* every micro-batch's, read first */
    st->targets = zt_malloc((size_t)z->micro_steps * BT * sizeof(int32_t));
    st->my_losses = zt_calloc((size_t)z->micro_steps, sizeof(float));
    st->micro = zt_calloc((size_t)z->micro_steps, sizeof(uint64_t));
    st->dscale = zt_calloc((size_t)z->micro_steps, sizeof(float));
    zt_model_loss_rows_alloc(m, z->micro_steps); /* the micro-batches' losses stay on the device until the step ends */
    st->all_losses = zt_calloc((size_t)K, sizeof(float));
    st->scaler.active = zt_config_prec(c) == ZT_PREC_FP16;
    st->scaler.scale = st->scaler.active ? (float)c->fp16.init_scale : 1.0f;
    zt_step_graph_init(st);
}

void zt_step_free(zt_step *st) {
    if (!st) return;
    free(st->tokens);
    free(st->targets);
    free(st->my_losses);
    free(st->all_losses);
    free(st->micro);
    free(st->dscale);
    st->micro = NULL;
    st->dscale = NULL;
    st->tokens = st->targets = NULL;
    st->my_losses = st->all_losses = NULL;
}

/* each micro-batch's d(loss) scale: 1/K of the mean, or (loss masks) B*T / n, so a counted token weighs 1/n (computed
   in double and rounded once: with n = K*B*T exactly scale / K); n = 0 (count): every dlogits row is 0 */
static float dloss_scale(const zt_step *st, uint64_t n) {
    const zt_config *c = st->c;
    const int B = c->train.micro_batch, T = c->train.seq_len, K = c->train.global_batch / B;
    return st->count && n > 0 ? (float)((double)st->scaler.scale * ((double)B * T) / (double)n)
                              : st->scaler.scale / (float)K;
}

/* this rank's micro-batch mi's d(loss) scale: ds0, or (fault injection) an overflow at the step's first */
static float micro_dscale(const zt_step *st, long step, int mi, float ds0) {
    return step + 1 == st->overflow_step && st->z->rank == 0 && mi == 0 ? ds0 * 1099511627776.0f : ds0;
}

/* the step's micro-batches read, and their inputs (with their d(loss) scales) uploaded before its first launch */
static void read_inputs(zt_step *st, long step, float ds0) {
    const int B = st->c->train.micro_batch, T = st->c->train.seq_len, N = st->z->N, r = st->z->rank;
    const size_t BT = (size_t)B * T;
    const int ms = st->z->micro_steps;
    for (int mi = 0; mi < ms; mi++)
        st->batch(st->batch_ctx, step, mi * N + r, st->tokens + mi * BT, st->targets + mi * BT);
    /* LoRA dropout: the masks' global micro-batch indices go with the rows (the same slot calls every step) */
    const int K = st->c->train.global_batch / B, drop = st->m->lora && st->m->lora->cfg.dropout > 0.0f;
    for (int mi = 0; drop && mi < ms; mi++) st->micro[mi] = (uint64_t)step * (uint64_t)K + (uint64_t)(mi * N + r);
    for (int mi = 0; mi < ms; mi++) st->dscale[mi] = micro_dscale(st, step, mi, ds0);
    zt_model_rows_upload(st->m, ms, B, T, st->tokens, st->targets, drop ? st->micro : NULL, st->dscale);
}

/* forward, backward and reduction of this rank's micro-batches, each with its d(loss) scale (read_inputs) */
static void micro_batches(zt_step *st, long step) {
    const zt_config *c = st->c;
    const int B = c->train.micro_batch, T = c->train.seq_len, K = c->train.global_batch / B;
    const int N = st->z->N, r = st->z->rank;
    for (int mi = 0; mi < st->z->micro_steps; mi++) {
        const int j = mi * N + r;
        if (st->m->lora) st->m->lora->micro = step * K + j; /* dropout masks: by global micro-batch */
        zt_model_forward_train_row(st->m, NULL, NULL, B, T, st->dscale[mi], mi);
        zt_model_backward(st->m, st->dscale[mi]);
        zt_zero_reduce(st->z, st->m, mi);
    }
}

/* fp16: after a finite step, the scale grows once growth_interval of them came in a row */
static void scaler_finite(zt_loss_scaler *sc, const zt_config *c) {
    if (sc->active && ++sc->good >= c->fp16.growth_interval) {
        sc->scale = (float)(sc->scale * c->fp16.growth_factor);
        sc->good = 0;
    }
}

static void scaler_overflow(zt_loss_scaler *sc, const zt_config *c) {
    sc->skipped++;
    sc->good = 0;
    sc->scale = (float)(sc->scale * c->fp16.backoff_factor);
}

/* the step's loss: micro-batch losses summed in global micro-batch order, on every rank (all of them must see a
   non-finite loss at the same step); divided by K, or (loss masks) by n / (B*T), n counted targets (0: loss 0) */
static double step_loss(zt_step *st, uint64_t n) {
    const int K = st->c->train.global_batch / st->c->train.micro_batch, N = st->z->N, ms = st->z->micro_steps;
    MPI_Allgather(st->my_losses, ms, MPI_FLOAT, st->all_losses, ms, MPI_FLOAT, MPI_COMM_WORLD);
    double loss = 0;
    for (int j = 0; j < K; j++) loss += st->all_losses[(j % N) * ms + j / N];
    if (!st->count) return loss / K;
    if (n == 0) return 0.0;
    return loss / ((double)n / ((double)st->c->train.micro_batch * st->c->train.seq_len));
}

zt_step_result zt_step_run(zt_step *st, long step) {
    const zt_config *c = st->c;
    zt_step_result r = {.loss_scale = st->scaler.scale, .clip = 1.0f, .lr = zt_lr_at(c, step)};
    const zt_adamw_hp hp = {(float)c->train.beta1, (float)c->train.beta2, (float)c->train.eps,
                            (float)c->train.weight_decay};
    r.counted = st->count ? st->count(st->batch_ctx, step)
                          : (uint64_t)c->train.global_batch * (uint64_t)c->train.seq_len;
    zt_zero_step_begin(st->z, &hp, step + 1, (float)r.lr, st->scaler.scale);
    const float ds0 = dloss_scale(st, r.counted);
    read_inputs(st, step, ds0);
    double t0 = zt_now();
    /* an asynchronous checkpoint's snapshot of the parameters and moments must be taken before the update: with a
       step graph before the step's work, else while the micro-batches run */
    if (st->saver && st->graph.on) r.snapshot_wait_s = zt_ckpt_saver_wait_snapshot(st->saver);
    /* the step key: what the step's slot calls take by value and may change from step to step (the d(loss) scales
       are read from the device, uploaded with the rows; the fp16 loss scale stays in the key) */
    const uint64_t key =
        ((uint64_t)zt_float_to_bits(st->scaler.scale) << 1 | (uint64_t)(step + 1 == st->overflow_step)) + 1;
    if (!zt_step_graph_run(st, key)) {
        micro_batches(st, step);
        /* the norm, the clip factor and the update are queued behind the backward: the device decides whether an fp16
           step is skipped (a NaN gradient scale); the host reads the norm once the update is done */
        t0 = zt_now();
        zt_zero_clip(st->z, st->m, c->train.grad_clip, st->scaler.active);
        if (st->saver && !st->graph.on) {
            const double w0 = zt_now();
            r.snapshot_wait_s = zt_ckpt_saver_wait_snapshot(st->saver);
            t0 += zt_now() - w0;
        }
        zt_zero_update(st->z, st->m, &hp);
        zt_step_graph_end(st, step);
    }
    double norm = zt_zero_norm_read(st->z);
    r.update_s = zt_now() - t0;
    if (st->scaler.active && !isfinite(norm)) {
        r.skipped = 1;
        scaler_overflow(&st->scaler, c);
        norm = NAN;
    } else {
        r.clip = zt_clip_factor(norm, c->train.grad_clip);
        scaler_finite(&st->scaler, c);
    }
    r.norm = norm;
    zt_model_loss_rows_read(st->m, st->z->micro_steps, st->my_losses);
    r.loss = step_loss(st, r.counted);
    if (st->m->s.encoder) { /* the masked-LM accuracy's counts over the global batch */
        long long acc[2] = {0, 0};
        zt_model_rows_accuracy(st->m, st->z->micro_steps, c->train.micro_batch, c->train.seq_len, st->targets, acc);
        MPI_Allreduce(MPI_IN_PLACE, acc, 2, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
        r.mlm_counted = acc[0];
        r.mlm_correct = acc[1];
    }
    return r;
}
