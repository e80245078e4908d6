/* train.h — the `train` command. */
#ifndef ZT_TRAIN_H
#define ZT_TRAIN_H

#include "core/dist/dist.h"

int zt_cmd_train(int argc, char **argv, zt_dist *d);

#endif
