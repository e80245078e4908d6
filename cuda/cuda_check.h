// cuda_check.h — what every CUDA source of ztrain includes after zt_cuda_compat.cuh: the C utilities
// (errors, zt_panic) with C linkage, the check macros and the shared-memory opt-in (STYLE: one family, printing rank, host,
// file:line and the library's message through zt_panic). ZT_NCCL lives in comm_nccl.cu, its only user.
#pragma once

#include "zt_cuda_compat.cuh"

extern "C" {
#include "util/util.h" // keeps mpi.h's C++ parts out of extern "C" and skips MPI's C++ bindings
}

// a CUDA runtime call that must succeed
#define ZT_CUDA(call)                                                                                          \
    do {                                                                                                       \
        cudaError_t e_ = (call);                                                                               \
        if (e_ != cudaSuccess) zt_panic(__FILE__, __LINE__, "%s: %s", #call, cudaGetErrorString(e_));          \
    } while (0)

// after ZT_LAUNCH: the launch's own error (bad configuration, too much shared memory, ...)
#define ZT_CUDA_LAUNCH_CHECK(what)                                                                             \
    do {                                                                                                       \
        cudaError_t e_ = cudaGetLastError();                                                                   \
        if (e_ != cudaSuccess) zt_panic(__FILE__, __LINE__, "%s: %s", what, cudaGetErrorString(e_));           \
    } while (0)

// opts kernel k in to `bytes` of dynamic shared memory (above 48 KiB a GPU requires it), once per kernel (*done)
template <typename K>
void zt_cu_smem_optin(K *k, int bytes, bool *done, const char *what) {
    if (*done) return;
    const cudaError_t e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    if (e != cudaSuccess)
        zt_panic(__FILE__, __LINE__, "%s: %d bytes of shared memory: %s", what, bytes, cudaGetErrorString(e));
    *done = true;
}
