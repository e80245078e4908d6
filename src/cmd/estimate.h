/* estimate.h — `ztrain estimate` (memory per rank and FLOPs for a config at N ranks, from the same
 * planning code that allocates) and `ztrain hwinfo`. */
#ifndef ZT_ESTIMATE_H
#define ZT_ESTIMATE_H

#include "core/dist/dist.h"

int zt_cmd_estimate(int argc, char **argv, zt_dist *d);
int zt_cmd_hwinfo(int argc, char **argv, zt_dist *d);

#endif
