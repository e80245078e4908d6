// test_kernels.h — launch wrappers for the harness's test and benchmark kernels (test_kernels.cu).
// Each wrapper launches with ZT_LAUNCH and returns cudaGetLastError(). Pointers are device
// pointers; in the host build device memory is host memory.
#pragma once

#include "zt_cuda_compat.cuh"

// out: 8 unsigned per thread (global linear id order): blockIdx.xyz, threadIdx.xyz, 0xabcd, 0
cudaError_t tk_indices(dim3 grid, dim3 block, unsigned *out);
// out[b] = sum of in[b*256 .. b*256+255], by a tree reduction in shared memory (block 256);
// loop_sync = 0 leaves out the barrier between steps (a race)
cudaError_t tk_block_reduce(int nblocks, int loop_sync, const float *in, float *out);
// out[i] = in[neighbour of i in its block]; sync = 0 leaves the __syncthreads out (a race)
cudaError_t tk_neighbour(int nblocks, int block, int sync, const int *in, int *out);
// per thread, 8 ints: xor-butterfly sum, down-reduce (lane 0 valid), up-scan, broadcast lane 5,
// width-8 xor sum, width-16 idx (lane 3 of segment), down by 1 (edge keeps own), up by 2 (width 8)
cudaError_t tk_shuffles(dim3 grid, dim3 block, const int *in, int *out);
// per thread, 3 values: a float, a double and a bf16 shuffled by xor 1 (bits preserved)
cudaError_t tk_shuffle_types(int nthreads, const float *in, float *outf, double *outd, __nv_bfloat16 *outb);
// per thread, 4 unsigned: ballot(in odd), any(in == 7), all(in >= 0), ballot(lane < 5) & 0x0f0f0f0f (= 0x0f for full warps)
cudaError_t tk_votes(int nblocks, int block, const int *in, unsigned *out);
// threads >= active return; the others: out[i] = in[next active thread of the block]
cudaError_t tk_early_exit(int nblocks, int block, int active, const int *in, int *out);
// per thread, 3 ints: __syncthreads_count(in odd), _and(in >= 0), _or(in == 7)
cudaError_t tk_sync_votes(int nblocks, int block, const int *in, int *out);
// out[i] = in[block reversed] through dynamic shared memory of block*sizeof(float) + extra bytes
cudaError_t tk_dyn_reverse(int nblocks, int block, size_t extra, const float *in, float *out);
// opts the dyn-reverse kernel in to `bytes` of dynamic shared memory
cudaError_t tk_dyn_reverse_optin(int bytes);
// every thread: icount += 1, ucount += 2, fsum += 1.0f, imax/imin of global id, CAS-loop increment
// of cas, exch stores its id; out[i] = value atomicAdd returned on icount
cudaError_t tk_atomics(int nblocks, int block, int *icount, unsigned *ucount, float *fsum, int *imax, int *imin,
                       unsigned long long *cas, int *exch, int *out);
// a template kernel, launched through ZT_LAUNCH((k<T, N>), ...): out[i] = N * i
cudaError_t tk_template(int n, float *out);
// out[i] = float(bf16(in[i])) and float(half(in[i])) converted in device code
cudaError_t tk_convert(int n, const float *in, float *out_bf16, float *out_half);
// kernels that break the rules, for the fatal-error tests: 0 partial mask, 1 deadlock,
// 2 shuffle after a lane exited
cudaError_t tk_misuse(int which);
// an empty kernel launched with any configuration (for the launch-error tests)
cudaError_t tk_config(dim3 grid, dim3 block, size_t shmem);

// benchmark kernels
cudaError_t tk_empty(int nblocks, int block);
cudaError_t tk_gelu(int n, const float *in, float *out);          // elementwise, block 256
// out[i] = in[i] + in[next in block], through shared memory with 2 barriers
cudaError_t tk_two_barriers(int nblocks, int block, const float *in, float *out);
// one block of 256 per row: (x - mean) * rsqrt(var + 1e-5); 4 barriers, 10 shuffles per thread
cudaError_t tk_block_norm(int rows, int cols, const float *in, float *out);
cudaError_t tk_row_softmax(int rows, int cols, const float *in, float *out); // warp per row, block 128
