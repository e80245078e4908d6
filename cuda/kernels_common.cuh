// kernels_common.cuh — what the elementwise and optimizer kernel files share (kernels_elem.cu,
// kernels_optim.cu): the launch check, grid sizes, the fixed-tree block reduction and the grid-stride loop. Inline
// definitions, one copy per file that includes it.
#pragma once

#include "cuda_ops.h"

#include "cuda_check.h"

namespace ZT_CU_NS {

constexpr int kElemThreads = 256;        // elementwise ops: threads per block
constexpr size_t kElemMaxBlocks = 16384; // grid-stride beyond this many blocks
constexpr unsigned kFull = 0xffffffffu;

inline void check_launch(const char *what) { ZT_CUDA_LAUNCH_CHECK(what); }

// threads for a block that strides over len elements: a multiple of 32 in [32, max_threads]
inline unsigned row_threads(size_t len, unsigned max_threads) {
    return len >= max_threads ? max_threads : len <= 32 ? 32u : (unsigned)(len + 31) / 32 * 32;
}

inline unsigned elem_blocks(size_t n) {
    size_t b = (n + kElemThreads - 1) / kElemThreads;
    return (unsigned)(b < kElemMaxBlocks ? b : kElemMaxBlocks);
}

// ---------------------------------------------------------------------------------------------
// Block reductions with a fixed tree. blockDim.x is a multiple of 32 (at most 1024); sh holds 32
// partials. Every lane of a warp ends with the same bits (a + b == b + a), and every warp reduces
// the per-warp partials the same way, so every thread returns the block's result.
struct SumOp {
    template <typename T>
    __device__ T operator()(T a, T b) const { return a + b; }
};
struct MaxOp {
    __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

template <typename T, typename Op>
__device__ T warp_reduce(T v, Op op) {
    for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(kFull, v, o));
    return v;
}

template <typename T, typename Op>
__device__ T block_reduce(T v, T *sh, T identity, Op op) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
    v = warp_reduce(v, op);
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    v = warp_reduce(lane < nwarps ? sh[lane] : identity, op);
    __syncthreads(); // sh may be reused by the next reduction
    return v;
}

// a grid-stride loop over [0, n)
#define ZT_GRID_STRIDE(i, n)                                                                          \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

} // namespace ZT_CU_NS
