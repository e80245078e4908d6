// kernels_llama.cu — the Llama family's ops (cuda_ops.h; slot semantics in src/iface/backend.h, the cpu reference
// in src/cpu/): RMSNorm forward / backward, rotary position embedding (in place on the query and key heads of
// qkv, forward and inverse) and SwiGLU forward / backward.
//
// Determinism without atomics, as kernels_norm_attn.cu: every output element is written by one thread, and
// every sum has a fixed shape:
//   - RMSNorm row sums (sum of squares; sum of w dy x in the backward): one warp per row, lane l adds
//     elements l, l+32, ... in order, then a fixed xor butterfly over the lanes;
//   - RMSNorm dw: one thread per (column, block of kRmsRows rows) adds its rows in order into scratch, then (the grid's
//     last block, zt_cu_last_block)
//     one thread per column adds the partials in order (as LayerNorm's dw, db).
// Rotary embedding and SwiGLU are elementwise: one thread per rotated pair / per output element.
// The element formulas come from iface/op_math.h (zt_rms_*, zt_rope_lo / _hi, zt_swiglu*), the ones the cpu
// backend compiles. prec (ZT_PREC_*; default fp32: none): the output as a buffer of that precision stores it,
// the model's round_to after the op fused into it (cuda_backend.cu), as kernels_elem.cu's.
#include <math.h>


#include "cuda_ops.h"
#include "iface/op_math.h"

#include "cuda_check.h"

namespace ZT_CU_NS {
namespace {

#define LL_LAUNCH_CHECK(what) ZT_CUDA_LAUNCH_CHECK(what)

constexpr unsigned kFull = 0xffffffffu;
constexpr int kWarpsPerBlock = 4;        // row kernels: one warp per row, 4 rows per block
constexpr int kRmsRows = 64;             // RMSNorm dw: rows per partial sum
constexpr int kColThreads = 256;         // column kernels: threads per block
constexpr int kElemThreads = 256;        // elementwise kernels: threads per block
constexpr size_t kElemMaxBlocks = 16384; // grid-stride beyond this many blocks

unsigned blocks_for(size_t n, unsigned per) { return (unsigned)((n + per - 1) / per); }

unsigned elem_blocks(size_t n) {
    const size_t b = (n + kElemThreads - 1) / kElemThreads;
    return (unsigned)(b < kElemMaxBlocks ? b : kElemMaxBlocks);
}

#define LL_GRID_STRIDE(i, n)                                                                                         \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
    return v;
}

// ------------------------------------------------------------------------------------ RMSNorm

// one warp per row: rstd from the sum of squares, then out = x * rstd * w
__global__ void __launch_bounds__(32 * kWarpsPerBlock)
    rmsnorm_fwd_kernel(float *out, uint16_t *out16, float *rstd, const float *inp, const float *w, int N, int C,
                       float eps, int prec) {
    const int lane = threadIdx.x % 32;
    const int row = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32;
    if (row >= N) return; // whole warps leave together
    const float *x = inp + (size_t)row * C;
    float s = 0.0f;
    for (int c = lane; c < C; c += 32) s += x[c] * x[c];
    const float r = zt_rms_rstd(warp_sum(s), C, eps);
    float *o = out + (size_t)row * C;
    for (int c = lane; c < C; c += 32) {
        o[c] = zt_round_prec(zt_rms_out(x[c], r, w[c]), prec);
        if (out16) out16[(size_t)row * C + c] = zt_f32_to_bits16(o[c], prec);
    }
    if (lane == 0) rstd[row] = r;
}

// one row's dinp += ... by one warp (lane = its lane), rounded to prec
__device__ __forceinline__ void rmsnorm_bwd_row(float *dx, uint16_t *dx16, const float *dy, const float *x,
                                                const float *w, float r, int C, int prec, int lane) {
    float s = 0.0f;
    for (int c = lane; c < C; c += 32) s += (w[c] * dy[c]) * (x[c] * r);
    const float mean_dnxn = warp_sum(s) / (float)C;
    for (int c = lane; c < C; c += 32) {
        dx[c] = zt_round_prec(dx[c] + zt_rms_dx(x[c], r, w[c], dy[c], mean_dnxn), prec);
        if (dx16) dx16[c] = zt_f32_to_bits16(dx[c], prec);
    }
}

// RMSNorm backward in one launch, as the LayerNorm's (kernels_norm_attn.cu): block p writes the dinp of rows
// [p*kRmsRows, (p+1)*kRmsRows) (one warp per row), then its threads sum their columns' dw terms over those rows in
// order into part (nparts, C); the grid's last block (zt_cu_last_block) sums the partials in order into dw
constexpr int kRmsBwdThreads = 512;
__global__ void __launch_bounds__(kRmsBwdThreads)
    rmsnorm_bwd_kernel(float *dinp, uint16_t *dinp16, float *dw, float *part, unsigned *ticket, const float *dout,
                       const float *inp, const float *w, const float *rstd, int N, int C, int prec) {
    const int p = blockIdx.x, n0 = p * kRmsRows, n1 = min(n0 + kRmsRows, N);
    const int lane = threadIdx.x % 32;
    for (int row = n0 + (int)threadIdx.x / 32; row < n1; row += kRmsBwdThreads / 32)
        rmsnorm_bwd_row(dinp + (size_t)row * C, dinp16 ? dinp16 + (size_t)row * C : nullptr, dout + (size_t)row * C,
                        inp + (size_t)row * C, w, rstd[row], C, prec, lane);
    for (int c = threadIdx.x; c < C; c += kRmsBwdThreads) {
        float aw = 0.0f;
        for (int n = n0; n < n1; n++) aw += zt_rms_dw(inp[(size_t)n * C + c], rstd[n], dout[(size_t)n * C + c]);
        part[(size_t)p * C + c] = aw;
    }
    if (!zt_cu_last_block(ticket, gridDim.x)) return;
    const volatile float *vp = part; // the other blocks' partials
    for (int c = threadIdx.x; c < C; c += kRmsBwdThreads) {
        float aw = 0.0f;
        for (int q = 0; q < (int)gridDim.x; q++) aw += vp[(size_t)q * C + c];
        dw[c] = aw;
    }
}

// N == 0: dw is zero (the cpu backend's result)
__global__ void rmsnorm_bwd_w_zero_kernel(float *dw, int C) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c < C) dw[c] = 0.0f;
}

int rms_parts(int N) { return (N + kRmsRows - 1) / kRmsRows; }

// ------------------------------------------------------------------------------------ rotary embedding

// one thread per rotated pair: (b, t, head among the NH query and NKV key heads, i < hs / 2); a row of qkv is
// W = (NH + 2 NKV) hs floats, head hd's columns start at hd * hs (the key heads follow the query heads)
__global__ void rope_kernel(float *qkv, const float *cs, size_t npairs, int T, int pos0, int nheads, int hs, int W,
                            int inverse) {
    const int half = hs / 2;
    LL_GRID_STRIDE(idx, npairs) {
        const int i = (int)(idx % half);
        const size_t hrow = idx / half; // (b * T + t) * nheads + hd
        const int hd = (int)(hrow % nheads);
        const size_t bt = hrow / nheads;
        const int t = (int)(bt % T);
        const float *a = cs + ((size_t)(pos0 + t) * half + i) * 2;
        const float c = a[0], s = inverse ? -a[1] : a[1];
        float *x = qkv + bt * W + (size_t)hd * hs + i;
        const float x1 = x[0], x2 = x[half];
        x[0] = zt_rope_lo(x1, x2, c, s);
        x[half] = zt_rope_hi(x1, x2, c, s);
    }
}

// ------------------------------------------------------------------------------------ SwiGLU

// one thread per output element (n, i): gate inp[n, i], up inp[n, I + i]
__global__ void swiglu_fwd_kernel(float *out, uint16_t *out16, const float *inp, size_t n, int I, int prec) {
    LL_GRID_STRIDE(idx, n) {
        const size_t row = idx / I;
        const int i = (int)(idx % I);
        const float *x = inp + row * 2 * I;
        out[idx] = zt_round_prec(zt_swiglu(x[i], x[I + i]), prec);
        if (out16) out16[idx] = zt_f32_to_bits16(out[idx], prec);
    }
}

__global__ void swiglu_bwd_kernel(float *dinp, uint16_t *dinp16, const float *inp, const float *dout, size_t n, int I,
                                  int prec) {
    LL_GRID_STRIDE(idx, n) {
        const size_t row = idx / I;
        const int i = (int)(idx % I);
        const float *x = inp + row * 2 * I;
        float *dx = dinp + row * 2 * I;
        const float g = x[i], u = x[I + i], dy = dout[idx];
        dx[i] = zt_round_prec(zt_swiglu_dgate(g, u, dy), prec);
        dx[I + i] = zt_round_prec(zt_swiglu_dup(g, dy), prec);
        if (dinp16) {
            dinp16[row * 2 * I + i] = zt_f32_to_bits16(dx[i], prec);
            dinp16[row * 2 * I + I + i] = zt_f32_to_bits16(dx[I + i], prec);
        }
    }
}

} // namespace

// ------------------------------------------------------------------------------------ launches

void zt_cu_rmsnorm_fwd(cudaStream_t s, float *out, float *rstd, const float *inp, const float *w, int N, int C,
                       float eps, int prec, uint16_t *out16) {
    if (N <= 0 || C <= 0) return;
    ZT_ASSERT(!out16 || prec != 0);
    ZT_LAUNCH(rmsnorm_fwd_kernel, blocks_for(N, kWarpsPerBlock), 32 * kWarpsPerBlock, 0, s, out, out16, rstd, inp, w,
              N, C, eps, prec);
    LL_LAUNCH_CHECK("rmsnorm_fwd_kernel");
}

size_t zt_cu_rmsnorm_bwd_scratch(int N, int C) {
    if (N <= 0 || C <= 0) return 0;
    return (size_t)rms_parts(N) * C * sizeof(float);
}

void zt_cu_rmsnorm_bwd(cudaStream_t s, float *dinp, float *dw, const float *dout, const float *inp, const float *w,
                       const float *rstd, int N, int C, void *scratch, unsigned *tickets, int prec,
                       uint16_t *dinp16) {
    if (C <= 0) return;
    ZT_ASSERT(!dinp16 || prec != 0);
    if (N <= 0) { // nothing to sum
        ZT_ASSERT(N == 0);
        ZT_LAUNCH(rmsnorm_bwd_w_zero_kernel, blocks_for(C, kColThreads), kColThreads, 0, s, dw, C);
        LL_LAUNCH_CHECK("rmsnorm_bwd_w_zero_kernel");
        return;
    }
    ZT_ASSERT(scratch != nullptr && tickets != nullptr);
    ZT_LAUNCH(rmsnorm_bwd_kernel, rms_parts(N), kRmsBwdThreads, 0, s, dinp, dinp16, dw, static_cast<float *>(scratch),
              tickets, dout, inp, w, rstd, N, C, prec);
    LL_LAUNCH_CHECK("rmsnorm_bwd_kernel");
}

void zt_cu_rope(cudaStream_t s, float *qkv, const float *cs, int B, int T, int pos0, int NH, int NKV, int hs,
                int inverse) {
    if (B <= 0 || T <= 0 || hs <= 0) return;
    ZT_ASSERT(NH > 0 && NKV > 0 && hs % 2 == 0 && pos0 >= 0);
    const size_t npairs = (size_t)B * T * (NH + NKV) * (hs / 2);
    ZT_LAUNCH(rope_kernel, elem_blocks(npairs), kElemThreads, 0, s, qkv, cs, npairs, T, pos0, NH + NKV, hs,
              (NH + 2 * NKV) * hs, inverse);
    LL_LAUNCH_CHECK("rope_kernel");
}

void zt_cu_swiglu_fwd(cudaStream_t s, float *out, const float *inp, int N, int I, int prec, uint16_t *out16) {
    if (N <= 0 || I <= 0) return;
    ZT_ASSERT(!out16 || prec != 0);
    const size_t n = (size_t)N * I;
    ZT_LAUNCH(swiglu_fwd_kernel, elem_blocks(n), kElemThreads, 0, s, out, out16, inp, n, I, prec);
    LL_LAUNCH_CHECK("swiglu_fwd_kernel");
}

void zt_cu_swiglu_bwd(cudaStream_t s, float *dinp, const float *inp, const float *dout, int N, int I, int prec,
                      uint16_t *dinp16) {
    if (N <= 0 || I <= 0) return;
    ZT_ASSERT(!dinp16 || prec != 0);
    const size_t n = (size_t)N * I;
    ZT_LAUNCH(swiglu_bwd_kernel, elem_blocks(n), kElemThreads, 0, s, dinp, dinp16, inp, dout, n, I, prec);
    LL_LAUNCH_CHECK("swiglu_bwd_kernel");
}

} // namespace ZT_CU_NS
