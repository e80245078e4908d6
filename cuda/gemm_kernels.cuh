// gemm_kernels.cuh — the GEMM path's own kernels (cuda_gemm.cu includes it, and nothing else does): the reference
// GEMM (gemm_ref_kernel), the packing of product operands into 2-byte scratch (pack16_multi_kernel, alone or with
// linear backward's bias column sums in one launch), the column sums, the one-row products of decoding (gemv) and
// the bias broadcast. They sit in an anonymous namespace of cuda_gemm.cu's translation unit, as they did in it.
// Every loop over a register array takes ZT_UNROLL and parameter arrays are read at constant indices, so no kernel
// here uses local memory (tests/e2e/test_cuda_resources.sh).
#pragma once

#include <stdint.h>

#include "cuda_check.h"
#include "iface/backend.h"
#include "iface/op_math.h"

namespace ZT_CU_NS {
namespace {

#define GM_LAUNCH_CHECK(what) ZT_CUDA_LAUNCH_CHECK(what)

constexpr int kColThreads = 256; // column kernels: threads per block
constexpr int kBiasRows = 64;    // dbias: rows per partial sum

unsigned blocks_for(size_t n, unsigned per) { return (unsigned)((n + per - 1) / per); }

// ------------------------------------------------------------------------------------ reference GEMM

// c(M, N) = alpha * op(a) @ op(b) (+ bias(N)) (+ beta * c; c is not read when beta == 0).
// a is stored (M, K), or (K, M) when ta; b is (K, N), or (N, K) when tb. A block computes a BM x BN
// tile of c with (BM/TM) x (BN/TN) threads, each a TM x TN sub-tile, staging BK-deep slices of
// op(a) and op(b) in shared memory (zero-filled past the edges: adding 0 * 0 leaves a sum as it is).
constexpr int kBM = 64, kBN = 64, kBK = 32, kTM = 8, kTN = 8;
constexpr int kGemmThreadsX = kBN / kTN, kGemmThreadsY = kBM / kTM;

// an operand element: fp32 as stored, or a packed bf16 / fp16 (prec) decoded exactly
__device__ __forceinline__ float ld_op(const float *p, size_t i, int prec) {
    (void)prec;
    return p[i];
}
// (the GPU build multiplies packed operands with cuBLASLt; this one only where a strided problem has no algorithm)
__device__ __forceinline__ float ld_op(const uint16_t *p, size_t i, int prec) {
    return zt_bits16_to_f32(p[i], prec);
}

// Leading dimensions (row strides) lda, ldb, ldc and, for batches (blockIdx.z), element strides sa, sb, sc
// between the batch's matrices.
struct GemmLd {
    int lda, ldb, ldc;
    int pad; // 0: no padding bytes, so a launch trace (zt_launch_trace.h) hashes only values
    long long sa, sb, sc;
};

// c's element: fp32 (beta * c added when beta != 0), or a 2-byte word of precision prec rounded to nearest even
// (matmul16's c16: beta is 0)
__device__ __forceinline__ void st_c(float *cp, float v, float beta, int prec) {
    (void)prec;
    if (beta != 0.0f) v += beta * *cp;
    *cp = v;
}
__device__ __forceinline__ void st_c(uint16_t *cp, float v, float beta, int prec) {
    (void)beta;
    *cp = zt_f32_to_bits16(v, prec);
}

template <typename T, typename TC>
__global__ void __launch_bounds__(kGemmThreadsX *kGemmThreadsY)
    gemm_ref_kernel(TC *c, const T *a, const T *b, const float *bias, int M, int N, int K, int ta, int tb,
                    float alpha, float beta, int prec, GemmLd ld) {
    __shared__ float As[kBK][kBM]; // As[k][m] = op(a)[m0 + m][k0 + k]
    a += blockIdx.z * ld.sa;
    b += blockIdx.z * ld.sb;
    c += blockIdx.z * ld.sc;
    const int lda = ld.lda, ldb = ld.ldb, ldc = ld.ldc;
    __shared__ float Bs[kBK][kBN]; // Bs[k][n] = op(b)[k0 + k][n0 + n]
    constexpr int nt = kGemmThreadsX * kGemmThreadsY;
    const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * kGemmThreadsX + tx;
    const int m0 = blockIdx.y * kBM, n0 = blockIdx.x * kBN;
    float acc[kTM][kTN];
    ZT_UNROLL
    for (int i = 0; i < kTM; i++)
        ZT_UNROLL
        for (int j = 0; j < kTN; j++) acc[i][j] = 0.0f;
    for (int k0 = 0; k0 < K; k0 += kBK) {
        // consecutive threads read consecutive addresses for every transpose flag
        for (int idx = tid; idx < kBK * kBM; idx += nt) {
            const int kk = ta ? idx / kBM : idx % kBK, mm = ta ? idx % kBM : idx / kBK;
            const int m = m0 + mm, k = k0 + kk;
            float v = 0.0f;
            if (m < M && k < K) v = ta ? ld_op(a, (size_t)k * lda + m, prec) : ld_op(a, (size_t)m * lda + k, prec);
            As[kk][mm] = v;
        }
        for (int idx = tid; idx < kBK * kBN; idx += nt) {
            const int kk = tb ? idx % kBK : idx / kBN, nn = tb ? idx / kBK : idx % kBN;
            const int n = n0 + nn, k = k0 + kk;
            float v = 0.0f;
            if (n < N && k < K) v = tb ? ld_op(b, (size_t)n * ldb + k, prec) : ld_op(b, (size_t)k * ldb + n, prec);
            Bs[kk][nn] = v;
        }
        __syncthreads();
        for (int kk = 0; kk < kBK; kk++) {
            float af[kTM], bf[kTN];
            ZT_UNROLL
            for (int i = 0; i < kTM; i++) af[i] = As[kk][ty * kTM + i];
            ZT_UNROLL
            for (int j = 0; j < kTN; j++) bf[j] = Bs[kk][tx * kTN + j];
            ZT_UNROLL
            for (int i = 0; i < kTM; i++)
                ZT_UNROLL
                for (int j = 0; j < kTN; j++) acc[i][j] += af[i] * bf[j];
        }
        __syncthreads();
    }
    ZT_UNROLL
    for (int i = 0; i < kTM; i++) {
        const int m = m0 + ty * kTM + i;
        ZT_UNROLL
        for (int j = 0; j < kTN; j++) {
            const int n = n0 + tx * kTN + j;
            if (m >= M || n >= N) continue;
            float v = alpha * acc[i][j];
            if (bias) v += bias[n];
            st_c(c + (size_t)m * ldc + n, v, beta, prec);
        }
    }
}

template <typename T, typename TC = float>
void gemm_ref_ld(cudaStream_t s, TC *c, const T *a, const T *b, const float *bias, int M, int N, int K, int ta,
                 int tb, float alpha, float beta, int prec, const GemmLd &ld, int batch) {
    dim3 grid(blocks_for(N, kBN), blocks_for(M, kBM), batch);
    ZT_ASSERT(grid.y <= 65535 && batch >= 1 && batch <= 65535);
    ZT_LAUNCH((gemm_ref_kernel<T, TC>), grid, dim3(kGemmThreadsX, kGemmThreadsY), 0, s, c, a, b, bias, M, N, K, ta, tb,
              alpha, beta, prec, ld);
    GM_LAUNCH_CHECK("gemm_ref_kernel");
}

// dense operands: the leading dimensions their shapes give
GemmLd dense_ld(int M, int N, int K, int ta, int tb) { return GemmLd{ta ? M : K, tb ? K : N, N, 0, 0, 0, 0}; }

// bf16 / fp16: op(a), op(b) packed dense into g's 2-byte scratch (a16, b16); an operand given packed already (a_pre,
// b_pre non-null: its dense 2-byte words) is used as it is. Returns the leading dimensions of the packed problem
// (dense operands, c's ldc as given). Defined after the handle.
GemmLd pack_operands(zt_cu_gemm *g, cudaStream_t s, const float *a, const float *b, int M, int N, int K, int ta,
                     int tb, const GemmLd &ld, const uint16_t *a_pre, const uint16_t *b_pre, const uint16_t **a16,
                     const uint16_t **b16);

// ------------------------------------------------------------------------------------ small kernels

// Up to kPackMax GEMM operands packed in one launch: matrix k's out (rows, cols), dense = x's rows, ld floats apart,
// as bf16 / fp16 bits (the conversion of k_pack16, kernels_elem.cu: round to nearest even, exact for values of the
// precision). The grid strides over the matrices' elements end to end (start[k]: the first element of matrix k).
constexpr int kPackMax = 3;
struct PackJob {
    int n; // matrices
    int pad = 0; // no padding bytes: a launch trace (zt_launch_trace.h) hashes only values
    uint16_t *out[kPackMax];
    const float *x[kPackMax];
    int cols[kPackMax], ld[kPackMax];
    size_t start[kPackMax + 1]; // start[n]: the total
};
constexpr int kPackThreads = 256;
static_assert(kPackThreads == kColThreads, "pack16_colsum_kernel runs colsum_kernel's blocks at the packing's block size");
constexpr unsigned kPackMaxBlocks = 16384; // grid-stride beyond
// the packing done by block `block` of `nblocks` (kPackThreads threads each)
__device__ __forceinline__ void pack_elems(const PackJob &job, int prec, unsigned block, unsigned nblocks) {
    size_t total = job.start[1];
    ZT_UNROLL
    for (int k = 2; k <= kPackMax; k++)
        if (k <= job.n) total = job.start[k];
    for (size_t i = (size_t)block * kPackThreads + threadIdx.x; i < total; i += (size_t)nblocks * kPackThreads) {
        // the matrix i falls in, its fields read at constant indices (a parameter array indexed at run time is
        // copied to local memory)
        const float *x = job.x[0];
        uint16_t *out = job.out[0];
        int cols = job.cols[0], ld = job.ld[0];
        size_t s0 = 0;
        ZT_UNROLL
        for (int k = 1; k < kPackMax; k++)
            if (k < job.n && i >= job.start[k]) x = job.x[k], out = job.out[k], cols = job.cols[k], ld = job.ld[k],
                                                 s0 = job.start[k];
        const size_t e = i - s0;
        out[e] = zt_f32_to_bits16(x[(e / cols) * ld + e % cols], prec);
    }
}
__global__ void pack16_multi_kernel(PackJob job, int prec) { pack_elems(job, prec, blockIdx.x, gridDim.x); }
// blocks of the pack for a total of n elements (grid-stride beyond kPackMaxBlocks)
unsigned pack_blocks(size_t n) {
    const size_t nb = (n + kPackThreads - 1) / kPackThreads;
    return (unsigned)(nb < kPackMaxBlocks ? nb : kPackMaxBlocks);
}

// elements packed for products in this process (host side; the count wrapper's operand packing is checked against
// it under the harness: zt_cu_packed_elems)
unsigned long long g_packed_elems;
// the largest each of the three packed-operand buffers (h16_buf) has grown to in this process, in elements (checked
// against the count wrapper's model of them under the harness: zt_cu_gemm16_elems)
size_t g_h16_max[3];

// the operands of one or two products packed dense in one launch: add() each (one of no elements is left out), then
// launch()
struct Packs {
    PackJob job = {};
    void add(uint16_t *out, const float *x, int rows, int cols, int ld) {
        const size_t n = (size_t)rows * cols;
        if (n == 0) return;
        ZT_ASSERT(job.n < kPackMax);
        job.out[job.n] = out;
        job.x[job.n] = x;
        job.cols[job.n] = cols;
        job.ld[job.n] = ld;
        job.start[job.n + 1] = job.start[job.n] + n;
        job.n++;
        g_packed_elems += n;
    }
    void launch(cudaStream_t s, int prec) {
        const size_t total = job.start[job.n];
        if (total == 0) return;
        ZT_LAUNCH(pack16_multi_kernel, pack_blocks(total), kPackThreads, 0, s, job, prec);
        GM_LAUNCH_CHECK("pack16_multi_kernel");
    }
};

// dbias in one launch: block (x, p) sums rows [p*kBiasRows, (p+1)*kBiasRows) of its columns in order into
// part(nparts, OC); the last of column block x's nparts blocks to finish (ticket x, zt_cu_last_block) sums the
// partials p = 0, 1, ... in order into out. The sums of a partial kernel and a final kernel: the same bits.
struct ColsumJob {
    float *out, *part;
    unsigned *tickets;
    const float *x;
    int N, OC, cblocks, nparts; // cblocks column blocks of kColThreads, nparts row blocks
    const uint16_t *x16;        // x as 2-byte words of precision prec (x's values exactly), read instead when given
    int prec;
    int pad = 0;                // no padding bytes (zt_launch_trace.h)
};
__device__ __forceinline__ void colsum_block(const ColsumJob &c, int bx, int p) {
    const int j = bx * kColThreads + threadIdx.x;
    const int n0 = p * kBiasRows, n1 = min(n0 + kBiasRows, c.N);
    if (j < c.OC) {
        float acc = 0.0f;
        if (c.x16)
            for (int n = n0; n < n1; n++) acc += zt_bits16_to_f32(c.x16[(size_t)n * c.OC + j], c.prec);
        else
            for (int n = n0; n < n1; n++) acc += c.x[(size_t)n * c.OC + j];
        c.part[(size_t)p * c.OC + j] = acc;
    }
    if (!zt_cu_last_block(c.tickets + bx, (unsigned)c.nparts) || j >= c.OC) return;
    const volatile float *vp = c.part; // the other blocks' partials
    float acc = 0.0f;
    for (int q = 0; q < c.nparts; q++) acc += vp[(size_t)q * c.OC + j];
    c.out[j] = acc;
}
__global__ void colsum_kernel(ColsumJob c) { colsum_block(c, blockIdx.x, blockIdx.y); }
// linear backward's packing and its bias gradient in one launch (both read dout): blocks [0, npack) pack, the rest are
// colsum_kernel's blocks, column block b % cblocks and row block b / cblocks of b = blockIdx.x - npack
__global__ void pack16_colsum_kernel(PackJob job, int prec, ColsumJob c, unsigned npack) {
    if (blockIdx.x < npack) {
        pack_elems(job, prec, blockIdx.x, npack);
        return;
    }
    const unsigned b = blockIdx.x - npack;
    colsum_block(c, (int)(b % (unsigned)c.cblocks), (int)(b / (unsigned)c.cblocks));
}

// N == 0: dbias is zero
__global__ void colsum_zero_kernel(float *out, int OC) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j < OC) out[j] = 0.0f;
}

int bias_parts(int N) { return (N + kBiasRows - 1) / kBiasRows; }

// y(OC) = x(C) @ w(C, OC) (+ bias): one thread per output column, i = 0..C-1 in order (the cpu order)
__global__ void gemv_n_kernel(float *y, const float *x, const float *w, const float *bias, int C, int OC) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= OC) return;
    float acc = 0.0f;
    for (int i = 0; i < C; i++) acc += x[i] * w[(size_t)i * OC + j];
    y[j] = bias ? acc + bias[j] : acc;
}

// y(OC) = w(OC, C) @ x(C) (+ bias): one warp per output row; lane l adds i = l, l+32, ... in order,
// then a fixed xor-butterfly over the lanes
constexpr int kGemvWarps = 4;
__global__ void __launch_bounds__(32 * kGemvWarps)
    gemv_t_kernel(float *y, const float *x, const float *w, const float *bias, int C, int OC) {
    const int j = blockIdx.x * kGemvWarps + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (j >= OC) return; // whole warps leave together
    const float *wr = w + (size_t)j * C;
    float acc = 0.0f;
    for (int i = lane; i < C; i += 32) acc += wr[i] * x[i];
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (lane == 0) y[j] = bias ? acc + bias[j] : acc;
}

#ifndef ZT_HOSTEXEC
// out(N, OC) = bias broadcast over rows: linear_fwd when the bias epilogue has no algorithm
__global__ void bias_broadcast_kernel(float *out, const float *bias, int N, int OC) {
    const size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)N * OC) return;
    out[idx] = bias[idx % OC];
}
#endif

} // namespace
} // namespace ZT_CU_NS
