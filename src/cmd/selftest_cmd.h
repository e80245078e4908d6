/* selftest_cmd.h — the `selftest` command. */
#ifndef ZT_SELFTEST_CMD_H
#define ZT_SELFTEST_CMD_H

#include "core/dist/dist.h"

/* ztrain selftest --device cuda|cudasim|devsim [--steps N] [--only ops|train|comm] [--threads N]
   every op against the cpu backend, a short training run against cpu, determinism, the
   communicator (core/diag/selftest.h). Exit 0 only if every check passes; 1 if any fails; 2 on a user
   error (e.g. no GPU: the CUDA error in one line). */
int zt_cmd_selftest(int argc, char **argv, zt_dist *d);

#endif
