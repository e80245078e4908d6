/* eval.h — validation loss: the first eval.batches micro-batches of validation windows in file
 * order, spread round-robin over ranks and combined in micro-batch order, so the value is the same
 * for any number of ranks. Used by training (every eval.every steps) and by `ztrain eval`. */
#ifndef ZT_EVAL_H
#define ZT_EVAL_H

#include "core/dist.h"
#include "core/model.h"
#include "io/config.h"
#include "io/data.h"

double zt_eval_loss(zt_model *m, zt_dataset *val, const zt_config *c, const zt_dist *d);

#endif
