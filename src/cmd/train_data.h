/* train_data.h — a training run's data: the training and validation sets opened as the model needs them, the
 * step's batch and count functions (core/optim/step.h), and the data trace (ZTRAIN_TRACE_DATA).
 *
 * Decoders read windows of T + 1 tokens (inputs and the next tokens as targets). Encoders (model.family bert,
 * roberta) read sequences of T tokens (io/data.h zt_dataset_open_mlm) and mask each training sample s, its global
 * index, by core/model/mlm.h with seed train.seed: the masked positions' original tokens are the targets, every
 * other target is -1, and the step's count is the masked positions of the global batch: the count reads the
 * step's samples in order (a data.stream must be read so) and keeps them, masked, for the step's batches. */
#ifndef ZT_TRAIN_DATA_H
#define ZT_TRAIN_DATA_H

#include <stdint.h>
#include <stdio.h>

#include "core/model/mlm.h"
#include "core/optim/step.h"
#include "io/config.h"
#include "io/data.h"
#include "iface/param_table.h"

typedef struct zt_train_data {
    const zt_config *c;
    zt_dataset train, val;
    int has_val;
    FILE *trace;        /* ZTRAIN_TRACE_DATA: this rank's data trace (tests check the order with it) */
    int mlm;            /* an encoder: samples are masked */
    zt_mlm masks;
    int32_t *tok, *tg;  /* mlm: the global batch of step cached_step, masked (global_batch, T) */
    long cached_step;
} zt_train_data;

/* opens data.train (a stream with data.stream) and data.val for the shape s; 0, or 1 with one line in err (every
   rank calls it; the caller ends all ranks on any rank's error) */
int zt_train_data_open(zt_train_data *td, const zt_config *c, const zt_model_shape *s, int rank, char *err,
                       size_t errlen);
/* step.h's batch: global micro-batch j of `step` is samples [step * GB + j * B, + B) of the data order */
void zt_train_data_batch(void *ctx, long step, int j, int32_t *tokens, int32_t *targets);
/* step.h's count, or NULL when every target counts (no loss masks, a decoder) */
zt_step_count_fn zt_train_data_count_fn(const zt_train_data *td);
void zt_train_data_close(zt_train_data *td);

#endif
