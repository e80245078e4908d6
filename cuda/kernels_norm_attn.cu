// kernels_norm_attn.cu — LayerNorm forward / backward and causal self-attention forward, backward
// and one-token decoding (cuda_ops.h; slot semantics in src/iface/backend.h; the cpu reference is
// src/cpu/cpu_ops.c, cpu_attention.c, cpu_decode.c).
//
// Determinism without atomics: every output element is written by one thread, and every sum has
// a fixed shape that does not depend on the grid's scheduling:
//   - row reductions (LayerNorm statistics, softmax max / sum, attention dot products): one warp
//     per row; lane l adds elements l, l+32, ... in order, then a fixed xor-butterfly over lanes;
//   - LayerNorm dw, db: one thread per (column, block of LN_ROWS rows) adds its rows in order into
//     scratch, then one thread per column adds the partials in order;
//   - attention forward / backward: the four kinds of product (q k^T, att v, dout v^T, and dq, dk, dv)
//     are batched fp32 GEMMs over the heads (zt_cu_gemm_strided: cuBLASLt with a pinned algorithm on a
//     GPU, the reference GEMM summing k in order under the harness); between them one warp per row does
//     the causal softmax, or turns datt into d(pre-softmax) in place. (Until run on an H200 these were
//     one warp per row doing every dot product itself: 90% of a GPT-2 124M step.)
// Elementwise formulas come from iface/op_math.h (zt_ln_rstd, zt_ln_out, zt_ln_dx, zt_expf), so
// they are the cpu backend's. Decoding runs one warp per head over the cache (attention_row_warp).
#include <math.h>


#include "cuda_ops.h"
#include "iface/op_math.h"

#include "cuda_check.h"

namespace ZT_CU_NS {
namespace {

#define NA_LAUNCH_CHECK(what) ZT_CUDA_LAUNCH_CHECK(what)

constexpr unsigned kFull = 0xffffffffu;
constexpr int kWarpsPerBlock = 4;  // row kernels: one warp per row, 4 rows per block
constexpr int kLnRows = 64;        // LayerNorm dw / db: rows per partial sum
constexpr int kColThreads = 256;   // column kernels: threads per block

unsigned blocks_for(size_t n, unsigned per) { return (unsigned)((n + per - 1) / per); }

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFull, v, o));
    return v;
}

// ------------------------------------------------------------------------------------ LayerNorm

// one warp per row: mean, then the sum of squared deviations (two passes, as the cpu backend)
__global__ void __launch_bounds__(32 * kWarpsPerBlock)
    layernorm_fwd_kernel(float *out, float *mean, float *rstd, const float *inp, const float *w, const float *b,
                         int N, int C, int prec) {
    const int lane = threadIdx.x % 32;
    const int row = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32;
    if (row >= N) return; // whole warps leave together
    const float *x = inp + (size_t)row * C;
    float s = 0.0f;
    for (int c = lane; c < C; c += 32) s += x[c];
    const float m = warp_sum(s) / (float)C;
    float v = 0.0f;
    for (int c = lane; c < C; c += 32) {
        float d = x[c] - m;
        v += d * d;
    }
    const float r = zt_ln_rstd(warp_sum(v), C);
    float *o = out + (size_t)row * C;
    for (int c = lane; c < C; c += 32) o[c] = zt_round_prec(zt_ln_out(x[c], m, r, w[c], b[c]), prec);
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = r;
    }
}

// dinp += ..., one warp per row
__global__ void __launch_bounds__(32 * kWarpsPerBlock)
    layernorm_bwd_dinp_kernel(float *dinp, const float *dout, const float *inp, const float *w, const float *mean,
                              const float *rstd, int N, int C, int prec) {
    const int lane = threadIdx.x % 32;
    const int row = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32;
    if (row >= N) return;
    const float *x = inp + (size_t)row * C, *dy = dout + (size_t)row * C;
    const float m = mean[row], r = rstd[row];
    float sdn = 0.0f, sdnxn = 0.0f;
    for (int c = lane; c < C; c += 32) {
        float xn = (x[c] - m) * r;
        float dn = w[c] * dy[c];
        sdn += dn;
        sdnxn += dn * xn;
    }
    const float mean_dn = warp_sum(sdn) / (float)C, mean_dnxn = warp_sum(sdnxn) / (float)C;
    float *dx = dinp + (size_t)row * C;
    for (int c = lane; c < C; c += 32) dx[c] = zt_round_prec(dx[c] + zt_ln_dx(x[c], m, r, w[c], dy[c], mean_dn, mean_dnxn), prec);
}

// partial sums of dw, db over rows [p*kLnRows, (p+1)*kLnRows): part (nparts, 2, C), p = blockIdx.y
__global__ void layernorm_bwd_wb_partial_kernel(float *part, const float *dout, const float *inp, const float *mean,
                                                const float *rstd, int N, int C) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    const int p = blockIdx.y, n0 = p * kLnRows, n1 = min(n0 + kLnRows, N);
    float aw = 0.0f, ab = 0.0f;
    for (int n = n0; n < n1; n++) {
        float dy = dout[(size_t)n * C + c];
        aw += (inp[(size_t)n * C + c] - mean[n]) * rstd[n] * dy;
        ab += dy;
    }
    part[(size_t)p * 2 * C + c] = aw;
    part[(size_t)p * 2 * C + C + c] = ab;
}

__global__ void layernorm_bwd_wb_final_kernel(float *dw, float *db, const float *part, int nparts, int C) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float aw = 0.0f, ab = 0.0f;
    for (int p = 0; p < nparts; p++) {
        aw += part[(size_t)p * 2 * C + c];
        ab += part[(size_t)p * 2 * C + C + c];
    }
    dw[c] = aw;
    db[c] = ab;
}

int ln_parts(int N) { return (N + kLnRows - 1) / kLnRows; }

// ------------------------------------------------------------------------------------ attention

// The softmax of a(n) in place for one warp (every lane calls it): lane l holds elements l, l+32, ... and the
// largest of them in mx; the maximum and the sum are warp reductions. Attention's forward and decoding share it.
__device__ void softmax_row_warp(float *a, int n, float mx) {
    const int lane = threadIdx.x % 32;
    mx = warp_max(mx);
    float sum = 0.0f;
    for (int t2 = lane; t2 < n; t2 += 32) {
        float e = zt_expf(a[t2] - mx);
        a[t2] = e;
        sum += e;
    }
    const float inv = 1.0f / warp_sum(sum);
    for (int t2 = lane; t2 < n; t2 += 32) a[t2] *= inv;
}

// One query row of causal attention for one warp (every lane calls it): keys and values of
// positions 0..n-1 start at k and v, `stride` floats apart; a(n) receives the softmax (the warp's
// scratch: global or shared memory), o(hs) the output. Lane l scores keys l, l+32, ... (each dot
// product over hs in order), the softmax sum is a warp sum, and lane l sums output dims l, l+32, ...
// over t2 = 0..n-1 in order.
__device__ void attention_row_warp(float *o, float *a, const float *q, const float *k, const float *v, size_t stride,
                                   int n, int hs, float scale) {
    const int lane = threadIdx.x % 32;
    float mx = -INFINITY;
    for (int t2 = lane; t2 < n; t2 += 32) {
        const float *kr = k + (size_t)t2 * stride;
        float s = 0.0f;
        for (int i = 0; i < hs; i++) s += q[i] * kr[i];
        s *= scale;
        a[t2] = s;
        mx = fmaxf(mx, s);
    }
    softmax_row_warp(a, n, mx);
    __syncwarp(); // every lane reads the whole row below
    for (int i = lane; i < hs; i += 32) {
        float acc = 0.0f;
        for (int t2 = 0; t2 < n; t2++) acc += a[t2] * v[(size_t)t2 * stride + i];
        o[i] = acc;
    }
}

// One warp per (b, h, t) row of att, which holds the scaled scores q_t . k_t2 (the batched GEMM): the causal
// softmax over t2 <= t in place (softmax_row_warp, as decoding), zeros above the diagonal.
__global__ void __launch_bounds__(32 * kWarpsPerBlock) attention_softmax_kernel(float *att, int rows, int T) {
    const int row = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32;
    if (row >= rows) return;
    const int n = row % T + 1, lane = threadIdx.x % 32;
    float *a = att + (size_t)row * T;
    float mx = -INFINITY;
    for (int t2 = lane; t2 < n; t2 += 32) mx = fmaxf(mx, a[t2]);
    softmax_row_warp(a, n, mx);
    for (int t2 = n + lane; t2 < T; t2 += 32) a[t2] = 0.0f;
}

// One warp per (b, h, t) row: datt holds dout_t . v_t2 (the batched GEMM); in place the gradient of the
// pre-softmax score, att * (datt - sum(att * datt)) * scale for t2 <= t, and zeros above the diagonal (the
// products that follow run over whole rows).
__global__ void __launch_bounds__(32 * kWarpsPerBlock)
    attention_bwd_dpre_kernel(float *datt, const float *att, int rows, int T, float scale) {
    const int row = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32;
    if (row >= rows) return;
    const int n = row % T + 1, lane = threadIdx.x % 32;
    const float *a = att + (size_t)row * T;
    float *da = datt + (size_t)row * T;
    float dot = 0.0f;
    for (int t2 = lane; t2 < n; t2 += 32) dot += a[t2] * da[t2];
    dot = warp_sum(dot);
    for (int t2 = lane; t2 < n; t2 += 32) da[t2] = a[t2] * (da[t2] - dot) * scale; // each lane its own t2
    for (int t2 = n + lane; t2 < T; t2 += 32) da[t2] = 0.0f;
}

// one warp per head: append this head's k, v at row pos, then row pos of the forward over the cache
__global__ void __launch_bounds__(32)
    attention_decode_kernel(float *out, float *kcache, float *vcache, const float *qkv, int pos, int C, int NH) {
    const int h = blockIdx.x, hs = C / NH, lane = threadIdx.x;
    float *a = ZT_DYNAMIC_SMEM(float); // (pos + 1) scores
    for (int i = lane; i < hs; i += 32) {
        kcache[(size_t)pos * C + h * hs + i] = qkv[C + h * hs + i];
        vcache[(size_t)pos * C + h * hs + i] = qkv[2 * C + h * hs + i];
    }
    __syncwarp(); // the row just written is read by every lane
    const float scale = 1.0f / sqrtf((float)hs);
    attention_row_warp(out + h * hs, a, qkv + h * hs, kcache + h * hs, vcache + h * hs, (size_t)C, pos + 1, hs, scale);
}

} // namespace

// ------------------------------------------------------------------------------------ launches

void zt_cu_layernorm_fwd(cudaStream_t s, float *out, float *mean, float *rstd, const float *inp, const float *w,
                         const float *b, int N, int C, int prec) {
    if (N <= 0 || C <= 0) return;
    ZT_LAUNCH(layernorm_fwd_kernel, blocks_for(N, kWarpsPerBlock), 32 * kWarpsPerBlock, 0, s, out, mean, rstd, inp,
              w, b, N, C, prec);
    NA_LAUNCH_CHECK("layernorm_fwd_kernel");
}

size_t zt_cu_layernorm_bwd_scratch(int N, int C) {
    if (N <= 0 || C <= 0) return 0;
    return (size_t)ln_parts(N) * 2 * C * sizeof(float);
}

void zt_cu_layernorm_bwd(cudaStream_t s, float *dinp, float *dw, float *db, const float *dout, const float *inp,
                         const float *w, const float *mean, const float *rstd, int N, int C, void *scratch, int prec) {
    if (C <= 0) return;
    if (N <= 0) { // nothing to sum: dw, db are zero (the cpu backend's result)
        ZT_ASSERT(N == 0);
        ZT_LAUNCH(layernorm_bwd_wb_final_kernel, blocks_for(C, kColThreads), kColThreads, 0, s, dw, db,
                  (const float *)nullptr, 0, C);
        NA_LAUNCH_CHECK("layernorm_bwd_wb_final_kernel");
        return;
    }
    ZT_LAUNCH(layernorm_bwd_dinp_kernel, blocks_for(N, kWarpsPerBlock), 32 * kWarpsPerBlock, 0, s, dinp, dout, inp, w,
              mean, rstd, N, C, prec);
    NA_LAUNCH_CHECK("layernorm_bwd_dinp_kernel");
    const int nparts = ln_parts(N);
    ZT_ASSERT(scratch != nullptr && nparts <= 65535);
    float *part = static_cast<float *>(scratch);
    ZT_LAUNCH(layernorm_bwd_wb_partial_kernel, dim3(blocks_for(C, kColThreads), nparts), kColThreads, 0, s, part,
              dout, inp, mean, rstd, N, C);
    NA_LAUNCH_CHECK("layernorm_bwd_wb_partial_kernel");
    ZT_LAUNCH(layernorm_bwd_wb_final_kernel, blocks_for(C, kColThreads), kColThreads, 0, s, dw, db,
              (const float *)part, nparts, C);
    NA_LAUNCH_CHECK("layernorm_bwd_wb_final_kernel");
}

// Per sequence b, one batched product over the NH heads (head h's q, k, v are columns [h*hs, (h+1)*hs) of
// the q | k | v thirds of qkv: leading dimension 3C, batch stride hs; att's (T, T) blocks: batch stride T*T).
// The products run over whole rows (above the diagonal att and d(pre) are zero), fp32 in every precision.
void zt_cu_attention_fwd(zt_cu_gemm *g, cudaStream_t s, float *out, float *att, const float *qkv, int B, int T, int C,
                         int NH) {
    if (B <= 0 || T <= 0 || C <= 0) return;
    ZT_ASSERT(NH > 0 && C % NH == 0);
    const size_t rows = (size_t)B * NH * T;
    ZT_ASSERT(rows <= 0x7fffffff);
    const int hs = C / NH, C3 = 3 * C;
    const long long TT = (long long)T * T;
    const float scale = 1.0f / sqrtf((float)hs);
    for (int b = 0; b < B; b++) { // att_h = scale * q_h @ k_h^T
        const float *q = qkv + (size_t)b * T * C3;
        zt_cu_gemm_strided(g, s, att + (size_t)b * NH * TT, q, q + C, T, T, hs, 0, 1, C3, C3, T, hs, hs, TT, NH, scale,
                           0.0f);
    }
    ZT_LAUNCH(attention_softmax_kernel, blocks_for(rows, kWarpsPerBlock), 32 * kWarpsPerBlock, 0, s, att, (int)rows,
              T);
    NA_LAUNCH_CHECK("attention_softmax_kernel");
    for (int b = 0; b < B; b++) { // out_h = att_h @ v_h
        const float *q = qkv + (size_t)b * T * C3;
        zt_cu_gemm_strided(g, s, out + (size_t)b * T * C, att + (size_t)b * NH * TT, q + 2 * C, T, hs, T, 0, 0, T, C3,
                           C, TT, hs, hs, NH, 1.0f, 0.0f);
    }
}

void zt_cu_attention_bwd(zt_cu_gemm *g, cudaStream_t s, float *dqkv, float *datt, const float *dout, const float *qkv,
                         const float *att, int B, int T, int C, int NH) {
    if (B <= 0 || T <= 0 || C <= 0) return;
    ZT_ASSERT(NH > 0 && C % NH == 0);
    const size_t rows = (size_t)B * NH * T;
    ZT_ASSERT(rows <= 0x7fffffff);
    const int hs = C / NH, C3 = 3 * C;
    const long long TT = (long long)T * T;
    const float scale = 1.0f / sqrtf((float)hs);
    for (int b = 0; b < B; b++) {
        const float *q = qkv + (size_t)b * T * C3, *dy = dout + (size_t)b * T * C, *a = att + (size_t)b * NH * TT;
        float *da = datt + (size_t)b * NH * TT, *d = dqkv + (size_t)b * T * C3;
        // datt_h = dout_h @ v_h^T; dv_h = att_h^T @ dout_h
        zt_cu_gemm_strided(g, s, da, dy, q + 2 * C, T, T, hs, 0, 1, C, C3, T, hs, hs, TT, NH, 1.0f, 0.0f);
        zt_cu_gemm_strided(g, s, d + 2 * C, a, dy, T, hs, T, 1, 0, T, C, C3, TT, hs, hs, NH, 1.0f, 0.0f);
    }
    ZT_LAUNCH(attention_bwd_dpre_kernel, blocks_for(rows, kWarpsPerBlock), 32 * kWarpsPerBlock, 0, s, datt, att,
              (int)rows, T, scale);
    NA_LAUNCH_CHECK("attention_bwd_dpre_kernel");
    for (int b = 0; b < B; b++) { // dq_h = dpre_h @ k_h; dk_h = dpre_h^T @ q_h
        const float *q = qkv + (size_t)b * T * C3, *da = datt + (size_t)b * NH * TT;
        float *d = dqkv + (size_t)b * T * C3;
        zt_cu_gemm_strided(g, s, d, da, q + C, T, hs, T, 0, 0, T, C3, C3, TT, hs, hs, NH, 1.0f, 0.0f);
        zt_cu_gemm_strided(g, s, d + C, da, q, T, hs, T, 1, 0, T, C3, C3, TT, hs, hs, NH, 1.0f, 0.0f);
    }
}

void zt_cu_attention_decode(cudaStream_t s, float *out, float *kcache, float *vcache, const float *qkv, int pos,
                            int maxT, int C, int NH) {
    ZT_ASSERT(pos >= 0 && pos < maxT && NH > 0 && C % NH == 0);
    if (C <= 0) return;
    // (pos + 1) scores, rounded up to whole 16-byte vectors: nvcc reads the scores with 16-byte shared loads
    // wherever it can, and compute-sanitizer (memcheck, on an H200) flagged the tail vector of an unrounded
    // allocation as out of bounds (pos 0..2)
    const size_t smem = (size_t)((pos + 4) & ~3) * sizeof(float);
    if (smem > 48 * 1024) { // above the default limit, opt in (as a GPU requires)
        cudaError_t e = cudaFuncSetAttribute(attention_decode_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             (int)smem);
        if (e != cudaSuccess)
            zt_panic(__FILE__, __LINE__, "attention_decode: %zu bytes of shared memory for pos %d: %s", smem, pos,
                     cudaGetErrorString(e));
    }
    ZT_LAUNCH(attention_decode_kernel, NH, 32, smem, s, out, kcache, vcache, qkv, pos, C, NH);
    NA_LAUNCH_CHECK("attention_decode_kernel");
}

} // namespace ZT_CU_NS
