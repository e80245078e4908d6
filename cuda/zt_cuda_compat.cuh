// zt_cuda_compat.cuh — the one header every ztrain CUDA source includes. Under nvcc it is the CUDA
// toolkit; under a host C++ compiler it is the host execution harness (cuda/hostexec/hostexec.h),
// which runs each launch on the CPU so CI can compare kernels with the cpu backend without a GPU.
//
// Rules for kernel authors (the host build enforces them; see cuda/hostexec/README.md):
//   - Launch only with ZT_LAUNCH(kernel, grid, block, shmem_bytes, stream, args...), then check
//     cudaGetLastError() as usual. Wrap a template kernel in parentheses: ZT_LAUNCH((k<float, 4>), ...).
//     Pass nullptr, not 0, for a null pointer argument.
//   - Static shared memory: `__shared__ T a[N];` inside the kernel. Dynamic shared memory:
//     `T *s = ZT_DYNAMIC_SMEM(T);` (never `extern __shared__`). Above 48 KiB, opt in with
//     cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) as on a GPU.
//   - Warp operations (__shfl*_sync, __ballot_sync, __any_sync, __all_sync, __syncwarp) with the full
//     mask 0xffffffff and every lane of the warp taking part; blocks whose size is not a multiple of
//     32 are fine (the last warp is partial). Lane = linear thread index % 32.
//   - No spin-waiting on another thread or block, no grid-wide sync, no dynamic parallelism,
//     no cooperative groups, no inline PTX, no textures: anything the harness lacks fails to
//     compile in the host build, which is the signal to add it there or to write the kernel
//     differently. Use only the intrinsics listed in hostexec.h.
//   - Do not rely on warp-synchronous execution without __syncwarp (threads of a warp are
//     independent fibers here, as under Volta's independent thread scheduling), nor on the
//     order blocks run in; float atomicAdd sums are order-dependent (deterministic on the host
//     only with ZT_HOSTEXEC_THREADS=1).
//   - `#ifdef ZT_HOSTEXEC` marks the host build; do not test __CUDA_ARCH__ to tell them apart.
//   - A loop over a register array (mma fragments, accumulators) takes ZT_UNROLL: indexed by a loop nvcc did not
//     unroll, the array lives in local memory (ptxas's "stack frame"; tests/e2e/test_cuda_resources.sh fails on it).
#pragma once

#ifdef __CUDACC__

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <utility>

#include "zt_launch_trace.h"

// <<<>>> through one function, so the launch trace (zt_launch_trace.h) sees every launch's arguments, converted to
// the kernel's parameter types as the launch converts them
template <typename... P, typename... A>
inline void zt_launch_(void (*kernel)(P...), dim3 grid, dim3 block, size_t shmem, cudaStream_t stream, A &&...args) {
    static_assert(sizeof...(A) == sizeof...(P), "ZT_LAUNCH: wrong number of kernel arguments");
    if (zt_trace_sink) zt_trace_launch(reinterpret_cast<const void *>(kernel), grid, block, shmem, static_cast<P>(args)...);
    kernel<<<grid, block, shmem, stream>>>(std::forward<A>(args)...);
}
#define ZT_LAUNCH(kernel, grid, block, shmem, stream, ...) zt_launch_(kernel, grid, block, shmem, stream, __VA_ARGS__)
#define ZT_UNROLL _Pragma("unroll")

// All extern __shared__ arrays alias one another, so one name with one type serves every kernel.
template <typename T>
__device__ __forceinline__ T *zt_dynamic_smem_() {
    extern __shared__ __align__(16) unsigned char zt_dyn_smem_[];
    return reinterpret_cast<T *>(zt_dyn_smem_);
}
#define ZT_DYNAMIC_SMEM(type) (zt_dynamic_smem_<type>())

#else

#include "hostexec/hostexec.h"

#define ZT_LAUNCH(kernel, grid, block, shmem, stream, ...) ZT_HX_LAUNCH(kernel, grid, block, shmem, stream, __VA_ARGS__)
#define ZT_UNROLL

#endif
