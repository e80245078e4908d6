/* cuda_backend.h — the C entry points of the CUDA backend (cuda/), for core/dist/backend_factory.c only.
 *
 * One source, two builds. With nvcc (make CUDA=1) it is the GPU backend "cuda": cudaMalloc'd device
 * memory, one compute stream, cuBLASLt matmuls, the kernels of cuda/ (.cu files), the NCCL communicator
 * (comm_nccl.cu). Compiled by the host C++ compiler against the host execution harness
 * (cuda/hostexec/) it is "cudasim": the SAME kernels and backend code, every launch run on the CPU,
 * memory from devsim's device-memory discipline (src/devsim/devsim_mem.h: the host cannot read it,
 * kernels get it translated), matmuls through the harness's reference GEMM kernel. cudasim is
 * always built, so `make test` executes every CUDA kernel against the cpu backend. */
#ifndef ZT_CUDA_BACKEND_H
#define ZT_CUDA_BACKEND_H

#include <stddef.h>

#include "iface/backend.h"
#include "iface/comm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* the host execution build (always linked) */
zt_backend *zt_cudasim_backend_create(int threads, char *err, size_t errlen);

#ifdef ZT_HAVE_CUDA
/* the GPU build: the local rank's GPU (local rank i -> visible device i; more ranks on a node than
   visible GPUs is an error); NULL + one line in err when no GPU can be used */
zt_backend *zt_cuda_backend_create(int threads, char *err, size_t errlen);
/* NCCL over the backend's stream (iface/comm.h); NULL + err on failure */
zt_comm *zt_comm_nccl_create(zt_backend *be, char *err, size_t errlen);
/* one line per visible GPU into buf ("0: NVIDIA H100 80GB HBM3, 79.1 GiB, sm_90\n"); returns the count
   or -1 with the CUDA error in buf */
int zt_cuda_list_devices(char *buf, size_t n);
#endif

#ifdef __cplusplus
}
#endif

#endif
