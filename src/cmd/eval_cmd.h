/* eval_cmd.h — `ztrain eval`: validation loss of a checkpoint on any number of ranks. */
#ifndef ZT_EVAL_CMD_H
#define ZT_EVAL_CMD_H

#include "core/dist/dist.h"

/* ztrain eval --checkpoint PATH [-c CFG] [--set key=value ...]
   The config is the one stored in the checkpoint (or CFG instead, whose model must match), then
   the --set overrides (e.g. data.val=FILE, eval.sequences=N, train.micro_batch=B). Prints
   "val loss X.XXXXXX (N batches, step S)" on rank 0. */
int zt_cmd_eval(int argc, char **argv, zt_dist *d);

#endif
