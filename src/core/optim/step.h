/* step.h — one optimizer step, the one every caller runs: `ztrain train`, the selftest's training check,
 * the step benchmark and the transformers reference dump.
 *
 * A step is: for each of this rank's micro-batches (global micro-batch j = mi * N + rank), the batch, the
 * training forward (which leaves dlogits), backward and the ZeRO reduction; then the global gradient norm,
 * fp16 dynamic loss scaling, the clip factor and the sharded AdamW update with the parameter all-gather;
 * finally the step's loss, the micro-batch losses summed in global micro-batch order on every rank.
 *
 * fp16: the loss is scaled by the scaler's scale for backward and the update unscales the gradients.
 * Gradients that overflowed (a non-finite global norm, the same on every rank) skip the update, multiply the
 * scale by fp16.backoff_factor and set `skipped`; fp16.growth_interval finite steps in a row multiply it by
 * growth_factor (DeepSpeed's and torch.amp's dynamic scaler). A skipped step still counts as a step: the data,
 * the learning-rate schedule and Adam's bias correction follow the step number.
 *
 * Loss masks (count set): the step's loss is the sum of the token losses over the global batch's counted targets
 * divided by their number n (transformers' mean over the labels that are not -100, taken over the whole global
 * batch), and the gradient is its exact gradient. Micro-batch j's forward returns loss_j, the sum of its B*T
 * positions' losses over B*T with ignored positions contributing 0 (zt_model_forward_train), and runs with
 * dscale = loss_scale * (B*T) / n, so every counted token's gradient is weighted loss_scale / n; the step's loss is
 * (sum over j in global order of loss_j) / (n / (B*T)). Micro-batches with more counted targets weigh more, and the
 * value does not depend on the rank count (n is the global batch's, the sums run in global order). With every
 * target counted (n = K*B*T) the dscale, the gradients and the loss are bit-identical to the run without count.
 * A global batch with n = 0: the loss is 0 and every gradient is exactly 0 (each dlogits row is); the update still
 * runs with that zero gradient, as torch.optim.AdamW would (the moments decay, weight decay applies). count NULL:
 * every target is taken to count and each micro-batch's loss is scaled 1/K (the loss is the mean of the K
 * micro-batch losses), as without masks. */
#ifndef ZT_STEP_H
#define ZT_STEP_H

#include "core/optim/step_graph.h"
#include <stdint.h>

#include "core/model/model.h"
#include "core/dist/zero.h"
#include "io/ckpt.h"
#include "io/config.h"

/* fills global micro-batch j of step `step`: tokens and targets, (B, T) each; a target < 0 is an ignored position
   (a loss mask: prompt tokens, padding), which enters neither the loss nor the gradient */
typedef void (*zt_step_batch_fn)(void *ctx, long step, int j, int32_t *tokens, int32_t *targets);
/* the number of targets >= 0 in the whole global batch of step `step` (all K micro-batches, every rank's), the same
   value on every rank: what the batch function's targets will hold, computed without running the model */
typedef uint64_t (*zt_step_count_fn)(void *ctx, long step);

/* fp16 dynamic loss scaling; scale 1 and inactive in fp32/bf16 runs */
typedef struct zt_loss_scaler {
    int active;      /* precision = fp16 */
    float scale;
    long good;       /* finite steps since the scale last changed */
    long skipped;    /* steps skipped for overflowing gradients, whole run (this process) */
} zt_loss_scaler;

typedef struct zt_step {
    zt_model *m;
    zt_zero *z;
    const zt_config *c;
    zt_step_batch_fn batch;
    void *batch_ctx;
    zt_step_count_fn count;   /* optional (NULL: no loss masks), called with batch_ctx once per step on every rank;
                                 set after zt_step_init */
    zt_ckpt_saver *saver;     /* optional: an asynchronous checkpoint's snapshot is taken before the update */
    zt_loss_scaler scaler;
    long overflow_step;       /* fault injection (fp16 tests): at this step rank 0's first micro-batch gets its
                                 loss scaled by a further 2^40, so its gradients overflow as real ones do; -1 none */
    int32_t *tokens, *targets; /* (micro_steps, B, T) host: the step's micro-batches, all read before its first launch */
    float *my_losses;         /* (micro_steps) this rank's micro-batch losses */
    uint64_t *micro;          /* (micro_steps) their global micro-batch indices (LoRA dropout), uploaded with the rows */
    float *dscale;            /* (micro_steps) their d(loss) scales, uploaded with the rows */
    float *all_losses;        /* (K) every rank's, gathered */
    zt_step_graph graph;      /* train.cuda_graph (step_graph.h) */
} zt_step;

typedef struct zt_step_result {
    double loss;              /* mean over the step's K micro-batches, or with count the mean over the counted
                                 targets (see above); the same on every rank */
    uint64_t counted;         /* the targets that entered the loss: count's value, or K*B*T without count */
    double norm;              /* global gradient norm, unscaled; NaN on a skipped step */
    float clip;               /* the clip factor applied (1: none) */
    double lr;
    int skipped;              /* fp16: the gradients overflowed, no update was made */
    float loss_scale;         /* the scale this step's backward used (1 outside fp16) */
    double update_s;          /* norm + update + parameter all-gather, seconds (an asynchronous backend: from the
                                 backward's end of queueing to the update's end, the backward's tail included; a step
                                 replayed as a CUDA graph: the whole step's device time) */
    double snapshot_wait_s;   /* waiting for an asynchronous checkpoint's snapshot */
    /* encoders (masked LM): over the global batch, the positions with a target and those the logits' argmax
       predicted (summed over ranks; 0 0 for the decoders) */
    long long mlm_counted, mlm_correct;
} zt_step_result;

/* m and z initialised by zt_zero_init; c the run's config (batch shape, optimizer, clip, schedule, fp16.*) */
void zt_step_init(zt_step *st, zt_model *m, zt_zero *z, const zt_config *c, zt_step_batch_fn batch, void *ctx);
void zt_step_free(zt_step *st);
/* runs 0-based step `step` (collective: every rank calls it for the same step) */
zt_step_result zt_step_run(zt_step *st, long step);

#endif
