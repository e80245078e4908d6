/* selftest.h — one definition of "this backend is correct", shared by `ztrain selftest --device D`
 * (run on the first machine that has a GPU) and by `make test` (D = cudasim: the CUDA kernels under
 * the host execution harness; D = devsim).
 *
 *  - ops: every backend op, forward and backward, on seeded random inputs of training-like shapes, in
 *    fp32, bf16 and fp16 (inputs and outputs rounded as the model's buffers store them),
 *    on D and on the cpu backend; a table of normalised errors (NMSE = sum (d - c)^2 / sum c^2, and the
 *    largest |d - c| relative to max |c|) against per-op, per-precision thresholds; each op run twice
 *    on D must give identical bits.
 *  - train: the same short training run (tiny GPT, synthetic tokens, AdamW, ZeRO at the rank count
 *    of the run) on D and on cpu: every step's loss within a relative tolerance; run twice on D:
 *    identical losses and parameters.
 *  - comm: D's communicator with exact integer checks: all-reduce, reduce-scatter, all-gather,
 *    all-to-all, broadcast, grouped send/recv and rooted reduce.
 * Collective over MPI_COMM_WORLD; only rank 0 prints. */
#ifndef ZT_SELFTEST_H
#define ZT_SELFTEST_H

#include <stdio.h>

#include "iface/backend.h"

typedef struct zt_selftest_opts {
    const char *device;
    int threads;          /* <= 0: defaults */
    int train_steps;      /* 0: skip the training check */
    int ops, comm;        /* run those parts */
    int precisions;       /* bit p: check ops and training in precision p (ZT_PREC_*: fp32, bf16, fp16) */
    FILE *out;            /* rank 0's report (others: NULL) */
} zt_selftest_opts;

/* returns the number of failed checks (0 = all passed); -1 with err when D cannot be created */
int zt_selftest_run(const zt_selftest_opts *o, char *err, size_t errlen);
/* the op table in one precision (ZT_PREC_*): dev against cpu; returns the failed rows (selftest_ops.c) */
int zt_selftest_ops(zt_backend *cpu, zt_backend *dev, int prec, FILE *out);
const char *zt_selftest_prec_name(int prec);

#endif
