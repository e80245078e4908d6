/* backend_factory.h — the one place that knows which backends and communicators exist.
 *
 * Backends: "cpu" (src/cpu/, host memory), "devsim" (src/devsim/: the cpu arithmetic behind
 * device-only pointers, for tests), "cuda" (cuda/, a GPU, when built with CUDA=1), "cudasim" (the same
 * cuda/ kernels run on the CPU by the host execution harness, over devsim memory; always built). Communicators: "mpi"
 * (host memory), "devsim" (MPI under NCCL's rules on devsim memory), "nccl" (device memory, CUDA
 * builds); "auto" picks the one that matches the backend. A pairing whose memory kinds differ is
 * refused with one clear line. Commands, benchmarks and tests reach backends only through here. */
#ifndef ZT_BACKEND_FACTORY_H
#define ZT_BACKEND_FACTORY_H

#include <stddef.h>

#include "iface/backend.h"
#include "iface/comm.h"

/* device: "cpu" | "devsim" | "cuda" | "cudasim"; threads <= 0: the OpenMP default. Returns NULL with one line
   in err when the device is unknown or not usable here. */
zt_backend *zt_backend_create(const char *device, int threads, char *err, size_t errlen);
void zt_backend_destroy(zt_backend *be);               /* accepts NULL */
/* one line naming the backend, its BLAS / kernels and threads */
void zt_backend_describe(zt_backend *be, char *buf, size_t n);

/* kind: "auto" | "mpi" | "devsim" | "nccl", over MPI_COMM_WORLD. NULL + err when the kind is unknown,
   not built, or takes another kind of memory than be hands out. */
zt_comm *zt_comm_create(const char *kind, zt_backend *be, char *err, size_t errlen);
void zt_comm_destroy(zt_comm *c);                     /* accepts NULL */

/* the GPUs this rank sees, one line each, into buf: returns their count; -1 with the CUDA error in buf
   (e.g. no driver); -2 when this ztrain was built without the CUDA backend */
int zt_backend_list_gpus(char *buf, size_t n);

/* best-of-3 GFLOP/s of an (n x n x n) sgemm on this backend: the peak the step is compared to */
double zt_backend_measure_sgemm(zt_backend *be, int n);

#endif
