/* eval.h — validation loss over a fixed set of sequences: the first eval.sequences windows of the
 * validation shard in file order (window s % W). Each rank scores sequences s = rank, rank + size, ...
 * in forward passes of up to train.micro_batch sequences, keeps each sequence's mean token loss
 * (summed in double), and the per-sequence values are gathered and summed in sequence order. The set
 * of sequences, and so the value, does not depend on micro_batch or the rank count (README
 * "Sampling of training data"). Used by training (every eval.every steps) and by `ztrain eval`. */
#ifndef ZT_EVAL_H
#define ZT_EVAL_H

#include "core/dist.h"
#include "core/model.h"
#include "io/config.h"
#include "io/data.h"

/* the number of validation sequences: eval.sequences, or the obsolete eval.batches x micro_batch */
int zt_eval_sequences(const zt_config *c);
double zt_eval_loss(zt_model *m, zt_dataset *val, const zt_config *c, const zt_dist *d);

#endif
