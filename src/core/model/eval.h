/* eval.h — validation loss over a fixed set of sequences: the first eval.sequences windows of the
 * validation shard in file order. Each rank scores sequences s = rank, rank + size, ... in forward
 * passes of up to train.micro_batch sequences, keeps each sequence's mean token loss (summed in
 * double), and the per-sequence values are gathered and summed in sequence order. The set of
 * sequences, and so the value, does not depend on micro_batch or the rank count (docs/data.md,
 * "Validation"). Used by training (every eval.every steps) and by `ztrain eval`.
 *
 * Loss masks (a target < 0 is ignored: prompt tokens, padding): a sequence's value is its mean loss over its
 * counted targets, and a sequence without one is left out: the loss is the mean over the sequences that have a
 * counted target (each weighs the same, whatever its count), 0 when none has. Without masks every sequence
 * counts T targets, and the value is the mean of the per-sequence means.
 *
 * More sequences than the shard has windows: the count is clamped to the windows (each scored once,
 * never wrapped around and counted twice). zt_eval_count says how many are scored; the
 * callers print the note (rank 0).
 *
 * Encoders (masked LM): each validation window s is masked by core/model/mlm.h with the fixed ZT_MLM_VAL_SEED, so
 * every evaluation scores the same masked positions; the loss is as above over them, and *acc (acc may be NULL) the
 * fraction of all of them whose logits' argmax is the original token (NaN for the decoders).
 *
 * Stopping: an evaluation is many forward passes, so training passes its signal flag and the ranks
 * agree after every pass (one small all-reduce) whether any rank has it set; then every rank stops
 * after the same pass, none leaves a collective the others are in. */
#ifndef ZT_EVAL_H
#define ZT_EVAL_H

#include <signal.h>

#include "core/dist/dist.h"
#include "core/model/model.h"
#include "io/config.h"
#include "io/data.h"

/* the number of validation sequences asked for: eval.sequences, or the obsolete eval.batches x micro_batch */
int zt_eval_sequences(const zt_config *c);
/* the number scored: zt_eval_sequences(c), at most the windows of val */
int zt_eval_count(const zt_config *c, const zt_dataset *val);
/* Collective. 0 with the mean loss in *loss; or 1 on every rank (no loss) when *stop was non-zero on
   some rank after a forward pass. stop may be NULL (never stops early; no per-pass agreement): every
   rank must pass NULL, or every rank a flag. */
int zt_eval_loss(zt_model *m, zt_dataset *val, const zt_config *c, const zt_dist *d, const volatile sig_atomic_t *stop,
                 double *loss, double *acc);

#endif
