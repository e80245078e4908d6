// test_kernels.cu — the host execution harness's test and benchmark kernels. The same file is
// compiled by nvcc (-arch=sm_80 -c: proves it is valid CUDA) and by g++ -x c++ (runs on the CPU).
#include "test_kernels.h"

// ---------------------------------------------------------------------------------------------
// Indices.
__global__ void k_indices(unsigned *out) {
    unsigned block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    unsigned thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    unsigned *o = out + 8 * (size_t(block) * blockDim.x * blockDim.y * blockDim.z + thread);
    o[0] = blockIdx.x, o[1] = blockIdx.y, o[2] = blockIdx.z;
    o[3] = threadIdx.x, o[4] = threadIdx.y, o[5] = threadIdx.z;
    o[6] = 0xabcd, o[7] = 0;
}
cudaError_t tk_indices(dim3 grid, dim3 block, unsigned *out) {
    ZT_LAUNCH(k_indices, grid, block, 0, 0, out);
    return cudaGetLastError();
}

// ---------------------------------------------------------------------------------------------
// Barriers.
// kLoopSync = false leaves out the barrier between reduction steps (a race after a barrier).
template <bool kLoopSync>
__global__ void k_block_reduce(const float *in, float *out) {
    __shared__ float s[256];
    unsigned t = threadIdx.x;
    s[t] = in[blockIdx.x * 256 + t];
    __syncthreads();
    for (unsigned stride = 128; stride > 0; stride >>= 1) {
        if (t < stride) s[t] += s[t + stride];
        if (kLoopSync) __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = s[0];
}
cudaError_t tk_block_reduce(int nblocks, int loop_sync, const float *in, float *out) {
    if (loop_sync)
        ZT_LAUNCH((k_block_reduce<true>), nblocks, 256, 0, 0, in, out);
    else
        ZT_LAUNCH((k_block_reduce<false>), nblocks, 256, 0, 0, in, out);
    return cudaGetLastError();
}

template <bool kSync>
__global__ void k_neighbour(const int *in, int *out) {
    __shared__ int s[1024];
    unsigned t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    s[t] = in[i];
    if (kSync) __syncthreads();
    out[i] = s[(t + 1) % blockDim.x];
}
cudaError_t tk_neighbour(int nblocks, int block, int sync, const int *in, int *out) {
    if (sync)
        ZT_LAUNCH((k_neighbour<true>), nblocks, block, 0, 0, in, out);
    else
        ZT_LAUNCH((k_neighbour<false>), nblocks, block, 0, 0, in, out);
    return cudaGetLastError();
}

__global__ void k_sync_votes(const int *in, int *out) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = in[i];
    out[3 * i + 0] = __syncthreads_count(v & 1);
    out[3 * i + 1] = __syncthreads_and(v >= 0);
    out[3 * i + 2] = __syncthreads_or(v == 7);
}
cudaError_t tk_sync_votes(int nblocks, int block, const int *in, int *out) {
    ZT_LAUNCH(k_sync_votes, nblocks, block, 0, 0, in, out);
    return cudaGetLastError();
}

// Threads past `active` return at once; the rest meet at a barrier (exited threads count as arrived).
__global__ void k_early_exit(int active, const int *in, int *out) {
    __shared__ int s[1024];
    unsigned t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    if (int(t) >= active) return;
    s[t] = in[i];
    __syncthreads();
    out[i] = s[(t + 1) % unsigned(active)];
}
cudaError_t tk_early_exit(int nblocks, int block, int active, const int *in, int *out) {
    ZT_LAUNCH(k_early_exit, nblocks, block, 0, 0, active, in, out);
    return cudaGetLastError();
}

// ---------------------------------------------------------------------------------------------
// Warp operations.
__global__ void k_shuffles(const int *in, int *out) {
    const unsigned full = 0xffffffffu;
    unsigned block = blockIdx.x + gridDim.x * blockIdx.y;
    unsigned t = threadIdx.x + blockDim.x * threadIdx.y;
    size_t i = size_t(block) * blockDim.x * blockDim.y + t;
    unsigned lane = t % 32;
    int v = in[i];
    int *o = out + 8 * i;

    int x = v;
    for (int m = 16; m > 0; m >>= 1) x += __shfl_xor_sync(full, x, m);
    o[0] = x;
    int d = v;
    for (int m = 16; m > 0; m >>= 1) d += __shfl_down_sync(full, d, m);
    o[1] = lane == 0 ? d : 0;
    int u = v;
    for (int m = 1; m < 32; m <<= 1) {
        int y = __shfl_up_sync(full, u, m);
        if (lane >= unsigned(m)) u += y;
    }
    o[2] = u;
    o[3] = __shfl_sync(full, v, 5);
    int w = v;
    for (int m = 4; m > 0; m >>= 1) w += __shfl_xor_sync(full, w, m, 8);
    o[4] = w;
    o[5] = __shfl_sync(full, v, 3 + 32, 16);
    o[6] = __shfl_down_sync(full, v, 1);
    o[7] = __shfl_up_sync(full, v, 2, 8);
}
cudaError_t tk_shuffles(dim3 grid, dim3 block, const int *in, int *out) {
    ZT_LAUNCH(k_shuffles, grid, block, 0, 0, in, out);
    return cudaGetLastError();
}

__global__ void k_shuffle_types(const float *in, float *outf, double *outd, __nv_bfloat16 *outb) {
    unsigned i = threadIdx.x;
    outf[i] = __shfl_xor_sync(0xffffffffu, in[i], 1);
    outd[i] = __shfl_xor_sync(0xffffffffu, (double)in[i] * 3.0, 1);
    outb[i] = __shfl_xor_sync(0xffffffffu, __float2bfloat16(in[i]), 1);
}
cudaError_t tk_shuffle_types(int nthreads, const float *in, float *outf, double *outd, __nv_bfloat16 *outb) {
    ZT_LAUNCH(k_shuffle_types, 1, nthreads, 0, 0, in, outf, outd, outb);
    return cudaGetLastError();
}

__global__ void k_votes(const int *in, unsigned *out) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x, lane = threadIdx.x % 32;
    int v = in[i];
    out[4 * i + 0] = __ballot_sync(0xffffffffu, v & 1);
    out[4 * i + 1] = __any_sync(0xffffffffu, v == 7);
    out[4 * i + 2] = __all_sync(0xffffffffu, v >= 0);
    __syncwarp();
    out[4 * i + 3] = __ballot_sync(0xffffffffu, lane < 5) & 0x0f0f0f0fu;
}
cudaError_t tk_votes(int nblocks, int block, const int *in, unsigned *out) {
    ZT_LAUNCH(k_votes, nblocks, block, 0, 0, in, out);
    return cudaGetLastError();
}

// ---------------------------------------------------------------------------------------------
// Dynamic shared memory.
__global__ void k_dyn_reverse(const float *in, float *out) {
    float *s = ZT_DYNAMIC_SMEM(float);
    unsigned t = threadIdx.x, n = blockDim.x, i = blockIdx.x * n + t;
    s[t] = in[i];
    __syncthreads();
    out[i] = s[n - 1 - t];
}
cudaError_t tk_dyn_reverse(int nblocks, int block, size_t extra, const float *in, float *out) {
    ZT_LAUNCH(k_dyn_reverse, nblocks, block, block * sizeof(float) + extra, 0, in, out);
    return cudaGetLastError();
}
cudaError_t tk_dyn_reverse_optin(int bytes) {
    return cudaFuncSetAttribute(k_dyn_reverse, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
}

// ---------------------------------------------------------------------------------------------
// Atomics.
__global__ void k_atomics(int *icount, unsigned *ucount, float *fsum, int *imax, int *imin, unsigned long long *cas,
                          int *exch, int *out) {
    int i = int(blockIdx.x * blockDim.x + threadIdx.x);
    out[i] = atomicAdd(icount, 1);
    atomicAdd(ucount, 2u);
    atomicAdd(fsum, 1.0f);
    atomicMax(imax, i);
    atomicMin(imin, i);
    unsigned long long old = *cas, assumed;
    do {
        assumed = old;
        old = atomicCAS(cas, assumed, assumed + 1);
    } while (old != assumed);
    atomicExch(exch, i);
}
cudaError_t tk_atomics(int nblocks, int block, int *icount, unsigned *ucount, float *fsum, int *imax, int *imin,
                       unsigned long long *cas, int *exch, int *out) {
    ZT_LAUNCH(k_atomics, nblocks, block, 0, 0, icount, ucount, fsum, imax, imin, cas, exch, out);
    return cudaGetLastError();
}

// ---------------------------------------------------------------------------------------------
// Templates, conversions.
template <typename T, int N>
__global__ void k_template(int n, T *out) {
    int i = int(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) out[i] = T(N) * T(i);
}
cudaError_t tk_template(int n, float *out) {
    ZT_LAUNCH((k_template<float, 3>), (n + 127) / 128, 128, 0, 0, n, out);
    return cudaGetLastError();
}

__global__ void k_convert(int n, const float *in, float *out_bf16, float *out_half) {
    int i = int(blockIdx.x * blockDim.x + threadIdx.x);
    if (i >= n) return;
    out_bf16[i] = __bfloat162float(__float2bfloat16(in[i]));
    out_half[i] = __half2float(__float2half(in[i]));
}
cudaError_t tk_convert(int n, const float *in, float *out_bf16, float *out_half) {
    ZT_LAUNCH(k_convert, (n + 255) / 256, 256, 0, 0, n, in, out_bf16, out_half);
    return cudaGetLastError();
}

// ---------------------------------------------------------------------------------------------
// Broken kernels (each is a bug on a GPU too: hang or undefined behaviour).
__global__ void k_misuse(int which) {
    unsigned t = threadIdx.x;
    if (which == 0) {
        __syncwarp(0x0000ffffu); // partial mask
    } else if (which == 1) {
        if (t < 16) __syncthreads(); // lanes 0..15 wait here while 16..31 wait at __syncwarp
        else __syncwarp();
    } else {
        if (t == 3) return;
        (void)__shfl_xor_sync(0xffffffffu, 1.0f, 1);
    }
}
cudaError_t tk_misuse(int which) {
    if (which == 3) { // dynamic shared memory that is not a whole number of 16-byte vectors (ztrain's rule)
        static float in[32], out[32];
        return tk_dyn_reverse(1, 1, 4, in, out); // 1 float + 4 bytes = 8 bytes
    }
    ZT_LAUNCH(k_misuse, 1, 32, 0, 0, which);
    return cudaGetLastError();
}

// ---------------------------------------------------------------------------------------------
// Launch configurations; benchmarks.
__global__ void k_empty() {}
cudaError_t tk_config(dim3 grid, dim3 block, size_t shmem) {
    ZT_LAUNCH(k_empty, grid, block, shmem, 0);
    return cudaGetLastError();
}

cudaError_t tk_empty(int nblocks, int block) {
    ZT_LAUNCH(k_empty, nblocks, block, 0, 0);
    return cudaGetLastError();
}

__global__ void k_gelu(int n, const float *in, float *out) {
    int i = int(blockIdx.x * blockDim.x + threadIdx.x);
    if (i >= n) return;
    float x = in[i];
    out[i] = 0.5f * x * (1.0f + tanhf(0.7978845608f * (x + 0.044715f * x * x * x)));
}
cudaError_t tk_gelu(int n, const float *in, float *out) {
    ZT_LAUNCH(k_gelu, (n + 255) / 256, 256, 0, 0, n, in, out);
    return cudaGetLastError();
}

__global__ void k_two_barriers(const float *in, float *out) {
    __shared__ float s[1024];
    unsigned t = threadIdx.x, n = blockDim.x, i = blockIdx.x * n + t;
    s[t] = in[i];
    __syncthreads();
    float v = s[t] + s[(t + 1) % n]; // reads a neighbour's slot
    __syncthreads();                 // ...before anyone overwrites it
    s[(t + 1) % n] = v;
    out[i] = v;
}
cudaError_t tk_two_barriers(int nblocks, int block, const float *in, float *out) {
    ZT_LAUNCH(k_two_barriers, nblocks, block, 0, 0, in, out);
    return cudaGetLastError();
}

// Block-wide sum: butterfly within warps, partial sums through shared memory (2 barriers).
__device__ float block_sum(float v, float *red) {
    unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = (blockDim.x + 31) / 32;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0) red[warp] = v;
    __syncthreads();
    float sum = 0.0f;
    for (unsigned w = 0; w < nwarps; w++) sum += red[w];
    __syncthreads();
    return sum;
}

// One block per row, normalise to mean 0 / variance 1 (the shape of a layernorm forward).
__global__ void k_block_norm(int cols, const float *in, float *out) {
    __shared__ float red[32];
    const float *x = in + size_t(blockIdx.x) * cols;
    float *y = out + size_t(blockIdx.x) * cols;
    float s = 0.0f;
    for (int j = int(threadIdx.x); j < cols; j += int(blockDim.x)) s += x[j];
    float mean = block_sum(s, red) / float(cols);
    float v = 0.0f;
    for (int j = int(threadIdx.x); j < cols; j += int(blockDim.x)) v += (x[j] - mean) * (x[j] - mean);
    float rstd = rsqrtf(block_sum(v, red) / float(cols) + 1e-5f);
    for (int j = int(threadIdx.x); j < cols; j += int(blockDim.x)) y[j] = (x[j] - mean) * rstd;
}
cudaError_t tk_block_norm(int rows, int cols, const float *in, float *out) {
    ZT_LAUNCH(k_block_norm, rows, 256, 0, 0, cols, in, out);
    return cudaGetLastError();
}

// One warp per row: max and sum by butterfly shuffles (the shape of llm.c's softmax kernels).
__global__ void k_row_softmax(int rows, int cols, const float *in, float *out) {
    int warp = int(blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32), lane = int(threadIdx.x % 32);
    if (warp >= rows) return; // whole warps leave together
    const float *x = in + size_t(warp) * cols;
    float m = -INFINITY;
    for (int j = lane; j < cols; j += 32) m = fmaxf(m, x[j]);
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    float sum = 0.0f;
    for (int j = lane; j < cols; j += 32) sum += __expf(x[j] - m);
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    float inv = 1.0f / sum;
    for (int j = lane; j < cols; j += 32) out[size_t(warp) * cols + j] = __expf(x[j] - m) * inv;
}
cudaError_t tk_row_softmax(int rows, int cols, const float *in, float *out) {
    ZT_LAUNCH(k_row_softmax, (rows + 3) / 4, 128, 0, 0, rows, cols, in, out);
    return cudaGetLastError();
}
