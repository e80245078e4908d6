// kernels_norm_attn.cu — LayerNorm forward / backward and self-attention forward, backward (causal, and
// bidirectional with a key padding mask: the encoders') and one-token decoding (cuda_ops.h; slot semantics in
// src/iface/backend.h; the cpu reference is src/cpu/cpu_ops.c, cpu_attention.c, cpu_decode.c).
//
// Determinism without float atomics: every output element is written by one thread, and every sum has
// a fixed shape that does not depend on the grid's scheduling:
//   - row reductions (LayerNorm statistics, softmax max / sum, attention dot products): one warp
//     per row; lane l adds elements l, l+32, ... in order, then a fixed xor-butterfly over lanes;
//   - LayerNorm dw, db: one thread per (column, block of kLnRows rows) adds its rows in order into
//     scratch, then the grid's last block (zt_cu_last_block) adds the partials in order, one thread per column;
//   - attention forward / backward: the four kinds of product (q k^T, att v, dout v^T, and dq, dk, dv)
//     are batched fp32 GEMMs over the heads (zt_cu_gemm_strided: cuBLASLt with a pinned algorithm on a
//     GPU, the reference GEMM summing k in order under the harness); between them one warp per row does
//     the softmax over the row's keys (causal: keys 0..t; bidirectional: the valid keys of all T, the others
//     exactly 0), or turns datt into d(pre-softmax) in place; the two directions share every kernel and GEMM.
//     (Batched GEMMs because one warp per row doing every dot product itself takes 90% of a GPT-2 124M step
//     on an H200.) Grouped-query
//     attention (NKV < NH key / value heads): a key / value head's dk, dv sum its query heads' products in
//     head order, each GEMM after the first adding to the one before (beta 1), never with atomics.
// Elementwise formulas come from iface/op_math.h (zt_ln_rstd, zt_ln_out, zt_ln_dx, zt_expf), so
// they are the cpu backend's. Decoding runs one warp per query head over the cache of its key / value
// head (attention_row_warp); the caches hold the NKV key / value heads.
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

// a row's input (a backward's, residual + LayerNorm's res read back): its floats, or the 2-byte words (of precision
// prec) they were unpacked from or stored as
struct RowIn {
    const float *f;
    const uint16_t *w;
    int prec;
    int pad = 0; // no padding bytes: a launch trace (zt_launch_trace.h) hashes only values
    __device__ __forceinline__ float operator[](size_t i) const { return w ? zt_bits16_to_f32(w[i], prec) : f[i]; }
    __device__ __forceinline__ RowIn operator+(size_t o) const { return RowIn{f + o, w ? w + o : nullptr, prec}; }
};

// one row's LayerNorm by one warp (lane = its lane): mean, variance about it, out = (x - mean) rstd w + b rounded to
// prec (and, when o16, as 2-byte words); lane 0 writes the row's mean and rstd. Shared by layernorm_fwd_kernel and
// residual_layernorm_fwd_kernel; X: the row's floats (const float *) or a RowIn
template <typename X>
__device__ __forceinline__ void layernorm_row(float *o, uint16_t *o16, float *mean, float *rstd, X x, const float *w,
                                              const float *b, int C, float eps, int prec, int lane, int row) {
    float s = 0.0f;
    for (int c = lane; c < C; c += 32) s += x[c];
    const float m = warp_sum(s) / (float)C;
    float v = 0.0f;
    for (int c = lane; c < C; c += 32) {
        float d = x[c] - m;
        v += d * d;
    }
    const float r = zt_ln_rstd(warp_sum(v), C, eps);
    for (int c = lane; c < C; c += 32) {
        const float y = zt_round_prec(zt_ln_out(x[c], m, r, w[c], b[c]), prec);
        if (o) o[c] = y; // null: the words alone
        if (o16) o16[c] = zt_f32_to_bits16(y, prec);
    }
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = r;
    }
}

// one warp per row: mean, then the sum of squared deviations (two passes, as the cpu backend)
__global__ void __launch_bounds__(32 * kWarpsPerBlock)
    layernorm_fwd_kernel(float *out, uint16_t *out16, float *mean, float *rstd, const float *inp, const float *w,
                         const float *b, int N, int C, float eps, int prec) {
    const int lane = threadIdx.x % 32;
    const int row = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32;
    if (row >= N) return; // whole warps leave together
    layernorm_row(out ? out + (size_t)row * C : nullptr, out16 ? out16 + (size_t)row * C : nullptr, mean, rstd,
                  inp + (size_t)row * C, w, b, C, eps, prec, lane, row);
}

// the residual add (k_add's arithmetic, rounded to res_prec) and the LayerNorm of its result in one launch: one warp
// per row writes its row of res, then reads it back (each lane its own columns) for layernorm_fwd_kernel's passes.
// a16, bb16 (may be null): a, bb read as these 2-byte words of wprec instead of their floats (bb16 not with in_round)
__global__ void __launch_bounds__(32 * kWarpsPerBlock)
    residual_layernorm_fwd_kernel(float *res, float *out, uint16_t *out16, uint16_t *res16, float *mean, float *rstd,
                                  const float *a, float *bb, const uint16_t *a16, const uint16_t *bb16, int wprec,
                                  const float *w, const float *b, int N, int C, float eps, int res_prec, int prec,
                                  int in_round) {
    const int lane = threadIdx.x % 32;
    const int row = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32;
    if (row >= N) return; // whole warps leave together
    const size_t off = (size_t)row * C;
    for (int c = lane; c < C; c += 32) {
        float y = bb16 ? zt_bits16_to_f32(bb16[off + c], wprec) : bb[off + c];
        if (in_round) bb[off + c] = y = zt_round_prec(y, in_round); // the round_to of bb fused here: written back
        const float xa = a16 ? zt_bits16_to_f32(a16[off + c], wprec) : a[off + c];
        const float r = zt_round_prec(xa + y, res_prec);
        if (res) res[off + c] = r; // null: the words alone (read back from them below)
        if (res16) res16[off + c] = zt_f32_to_bits16(r, res_prec);
    }
    // res read back (each lane its own columns): its floats, or its words
    const RowIn x = res ? RowIn{res + off, nullptr, 0} : RowIn{nullptr, res16 + off, res_prec};
    layernorm_row(out ? out + off : nullptr, out16 ? out16 + off : nullptr, mean, rstd, x, w, b, C, eps, prec, lane,
                  row);
}

// one row's dinp += ... by one warp (lane = its lane), rounded to prec
// dy: dout's row read (floats or words), rounded to in_round when that is set (and then written back to dyw)
__device__ __forceinline__ float dy_at(RowIn dy, size_t c, int in_round) {
    return in_round ? zt_round_prec(dy[c], in_round) : dy[c];
}
__device__ __forceinline__ void layernorm_bwd_row(float *dx, uint16_t *dx16, float *dyw, RowIn dy, RowIn x,
                                                  const float *w, float m, float r, int C, int prec, int lane,
                                                  int in_round) {
    float sdn = 0.0f, sdnxn = 0.0f;
    for (int c = lane; c < C; c += 32) {
        const float d = dy_at(dy, c, in_round);
        if (in_round) dyw[c] = d; // the round_to of dout fused here: written back
        float xn = (x[c] - m) * r;
        float dn = w[c] * d;
        sdn += dn;
        sdnxn += dn * xn;
    }
    const float mean_dn = warp_sum(sdn) / (float)C, mean_dnxn = warp_sum(sdnxn) / (float)C;
    for (int c = lane; c < C; c += 32) {
        const float v = zt_round_prec(dx[c] + zt_ln_dx(x[c], m, r, w[c], dy_at(dy, c, in_round), mean_dn, mean_dnxn),
                                      prec);
        dx[c] = v;
        if (dx16) dx16[c] = zt_f32_to_bits16(v, prec);
    }
}

// LayerNorm backward in one launch. Block p takes rows [p*kLnRows, (p+1)*kLnRows): its warps write those rows' dinp
// (one warp per row, layernorm_bwd_row), then each thread sums its columns' dw, db terms over the block's rows in
// order into part (nparts, 2, C); the last block to finish (its ticket, taken with atomicAdd after a __threadfence,
// is nparts - 1) sums the partials in order p = 0, 1, ... into dw, db and puts the ticket back to 0 (tickets are
// zero between launches). Every sum and its order are those of a partial kernel and a final kernel: the same bits.
constexpr int kLnBwdThreads = 512;
__global__ void __launch_bounds__(kLnBwdThreads)
    layernorm_bwd_kernel(float *dinp, uint16_t *dinp16, float *dw, float *db, float *part, unsigned *ticket,
                         float *dout, RowIn dy, RowIn inp, const float *w, const float *mean, const float *rstd,
                         int N, int C, int prec, int in_round) {
    const int p = blockIdx.x, n0 = p * kLnRows, n1 = min(n0 + kLnRows, N);
    const int lane = threadIdx.x % 32;
    for (int row = n0 + (int)threadIdx.x / 32; row < n1; row += kLnBwdThreads / 32)
        layernorm_bwd_row(dinp + (size_t)row * C, dinp16 ? dinp16 + (size_t)row * C : nullptr, dout + (size_t)row * C,
                          dy + (size_t)row * C, inp + (size_t)row * C, w, mean[row], rstd[row], C, prec, lane,
                          in_round);
    if (in_round) __syncthreads(); // the block's rows of dout, written back by its warps, before the column sums
    for (int c = threadIdx.x; c < C; c += kLnBwdThreads) {
        float aw = 0.0f, ab = 0.0f;
        for (int n = n0; n < n1; n++) {
            const float dy_n = dy_at(dy, (size_t)n * C + c, in_round); // the rounded value either way
            aw += (inp[(size_t)n * C + c] - mean[n]) * rstd[n] * dy_n;
            ab += dy_n;
        }
        part[(size_t)p * 2 * C + c] = aw;
        part[(size_t)p * 2 * C + C + c] = ab;
    }
    if (!zt_cu_last_block(ticket, gridDim.x)) return;
    const volatile float *vp = part; // the other blocks' partials: not through a cache this block may hold
    for (int c = threadIdx.x; c < C; c += kLnBwdThreads) {
        float aw = 0.0f, ab = 0.0f;
        for (int q = 0; q < (int)gridDim.x; q++) {
            aw += vp[(size_t)q * 2 * C + c];
            ab += vp[(size_t)q * 2 * C + C + c];
        }
        dw[c] = aw;
        db[c] = ab;
    }
}

// N == 0: dw, db are zero (the cpu backend's result)
__global__ void layernorm_bwd_wb_zero_kernel(float *dw, float *db, int C) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    dw[c] = 0.0f;
    db[c] = 0.0f;
}

int ln_parts(int N) { return (N + kLnRows - 1) / kLnRows; }

// ------------------------------------------------------------------------------------ attention

// The softmax of a(n) in place for one warp (every lane calls it): lane l holds elements l, l+32, ... and the
// largest of them in mx; the maximum and the sum are warp reductions. Attention's forward and decoding share it.
// valid (n ints; nullptr: every key) masks keys: probability exactly 0, and a row with no valid key all 0.
__device__ void softmax_row_warp(float *a, int n, float mx, const int32_t *valid = nullptr) {
    const int lane = threadIdx.x % 32;
    mx = warp_max(mx);
    float sum = 0.0f;
    for (int t2 = lane; t2 < n; t2 += 32) {
        float e = valid && !valid[t2] ? 0.0f : zt_expf(a[t2] - mx);
        a[t2] = e;
        sum += e;
    }
    sum = warp_sum(sum);
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f; // sum >= 1 whenever a key is valid
    for (int t2 = lane; t2 < n; t2 += 32) a[t2] *= inv;
}

// the keys of row `row` of att (B, NH, T, T), NHT = NH T: causal (kvalid nullptr) keys 0..t, bidirectional all T
// with sequence b's mask
__device__ __forceinline__ int row_keys(const int32_t *kvalid, int row, int T) { return kvalid ? T : row % T + 1; }
__device__ __forceinline__ const int32_t *row_mask(const int32_t *kvalid, int row, int T, int NHT) {
    return kvalid ? kvalid + (size_t)(row / NHT) * T : nullptr;
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

// One warp per (b, h, t) row of att, which holds the scaled scores q_t . k_t2 (the batched GEMM): the softmax
// over the row's keys in place (softmax_row_warp, as decoding), zeros above the diagonal (causal) or at the masked
// keys (bidirectional: kvalid (B, T), NHT = NH T)
__global__ void __launch_bounds__(32 * kWarpsPerBlock)
    attention_softmax_kernel(float *att, int rows, int T, const int32_t *kvalid, int NHT) {
    const int row = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32;
    if (row >= rows) return;
    const int n = row_keys(kvalid, row, T), lane = threadIdx.x % 32;
    const int32_t *valid = row_mask(kvalid, row, T, NHT);
    float *a = att + (size_t)row * T;
    float mx = -INFINITY;
    for (int t2 = lane; t2 < n; t2 += 32)
        if (!valid || valid[t2]) mx = fmaxf(mx, a[t2]);
    softmax_row_warp(a, n, mx, valid);
    for (int t2 = n + lane; t2 < T; t2 += 32) a[t2] = 0.0f;
}

// One warp per (b, h, t) row: datt holds dout_t . v_t2 (the batched GEMM); in place the gradient of the
// pre-softmax score, att * (datt - sum(att * datt)) * scale at the row's keys, and zeros above the diagonal or at
// the masked keys (the products that follow run over whole rows). att is 0 at masked keys: they add 0 to the sum
__global__ void __launch_bounds__(32 * kWarpsPerBlock)
    attention_bwd_dpre_kernel(float *datt, const float *att, int rows, int T, float scale, const int32_t *kvalid,
                              int NHT) {
    const int row = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32;
    if (row >= rows) return;
    const int n = row_keys(kvalid, row, T), lane = threadIdx.x % 32;
    const int32_t *valid = row_mask(kvalid, row, T, NHT);
    const float *a = att + (size_t)row * T;
    float *da = datt + (size_t)row * T;
    float dot = 0.0f;
    for (int t2 = lane; t2 < n; t2 += 32) dot += a[t2] * da[t2];
    dot = warp_sum(dot);
    for (int t2 = lane; t2 < n; t2 += 32) // each lane its own t2
        da[t2] = valid && !valid[t2] ? 0.0f : a[t2] * (da[t2] - dot) * scale;
    for (int t2 = n + lane; t2 < T; t2 += 32) da[t2] = 0.0f;
}

// decoding: the token's k, v (the NKV key / value heads of qkv, KV = NKV hs floats each) at row pos of the caches
__global__ void attention_decode_append_kernel(float *kcache, float *vcache, const float *qkv, int pos, int C, int KV) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < KV; i += gridDim.x * blockDim.x) {
        kcache[(size_t)pos * KV + i] = qkv[C + i];
        vcache[(size_t)pos * KV + i] = qkv[C + KV + i];
    }
}

// one warp per query head h: row pos of the forward over the cache of key / value head h / G (caches (maxT, KV),
// KV = NKV hs). append (multi-head attention, G == 1): the warp first writes its own head's k, v at row pos;
// otherwise attention_decode_append_kernel has (the G query heads of a key / value head are G blocks)
__global__ void __launch_bounds__(32)
    attention_decode_kernel(float *out, float *kcache, float *vcache, const float *qkv, int pos, int C, int NH, int G,
                            int append) {
    const int h = blockIdx.x, hs = C / NH, lane = threadIdx.x, KV = NH / G * hs, j = h / G;
    float *a = ZT_DYNAMIC_SMEM(float); // (pos + 1) scores
    if (append) {
        for (int i = lane; i < hs; i += 32) {
            kcache[(size_t)pos * KV + j * hs + i] = qkv[C + j * hs + i];
            vcache[(size_t)pos * KV + j * hs + i] = qkv[C + KV + j * hs + i];
        }
        __syncwarp(); // the row just written is read by every lane
    }
    const float scale = 1.0f / sqrtf((float)hs);
    attention_row_warp(out + h * hs, a, qkv + h * hs, kcache + j * hs, vcache + j * hs, (size_t)KV, pos + 1, hs, scale);
}

} // namespace

// ------------------------------------------------------------------------------------ launches

void zt_cu_layernorm_fwd(cudaStream_t s, float *out, float *mean, float *rstd, const float *inp, const float *w,
                         const float *b, int N, int C, float eps, int prec, uint16_t *out16) {
    if (N <= 0 || C <= 0) return;
    ZT_ASSERT(!out16 || prec != 0); // words of a 2-byte precision
    ZT_LAUNCH(layernorm_fwd_kernel, blocks_for(N, kWarpsPerBlock), 32 * kWarpsPerBlock, 0, s, out, out16, mean, rstd,
              inp, w, b, N, C, eps, prec);
    NA_LAUNCH_CHECK("layernorm_fwd_kernel");
}

void zt_cu_residual_layernorm_fwd(cudaStream_t s, float *res, float *out, float *mean, float *rstd, const float *a,
                                  const float *bb, const float *w, const float *b, int N, int C, float eps,
                                  int res_prec, int prec, int in_round, uint16_t *out16, uint16_t *res16,
                                  const uint16_t *a16, const uint16_t *bb16, int wprec) {
    if (N <= 0 || C <= 0) return;
    ZT_ASSERT(!out16 || prec != 0); // words of a 2-byte precision
    ZT_ASSERT(!res16 || res_prec != 0);
    ZT_ASSERT((!a16 && !bb16) || (wprec != 0 && !(bb16 && in_round)));
    ZT_ASSERT(res || res16); // res null: its words alone
    // bb is written only when in_round (rounded in place, as the round_to fused here would have)
    ZT_LAUNCH(residual_layernorm_fwd_kernel, blocks_for(N, kWarpsPerBlock), 32 * kWarpsPerBlock, 0, s, res, out,
              out16, res16, mean, rstd, a, const_cast<float *>(bb), a16, bb16, wprec, w, b, N, C, eps, res_prec, prec,
              in_round);
    NA_LAUNCH_CHECK("residual_layernorm_fwd_kernel");
}

size_t zt_cu_layernorm_bwd_scratch(int N, int C) {
    if (N <= 0 || C <= 0) return 0;
    return (size_t)ln_parts(N) * 2 * C * sizeof(float);
}

void zt_cu_layernorm_bwd(cudaStream_t s, float *dinp, float *dw, float *db, const float *dout, const float *inp,
                         const float *w, const float *mean, const float *rstd, int N, int C, void *scratch,
                         unsigned *tickets, int prec, int in_round, uint16_t *dinp16, const uint16_t *inp16,
                         int inp16_prec, const uint16_t *dout16) {
    if (C <= 0) return;
    ZT_ASSERT(!dinp16 || prec != 0);
    ZT_ASSERT(!inp16 || inp16_prec != 0);
    ZT_ASSERT(!dout16 || (inp16_prec != 0 && !in_round));
    if (N <= 0) { // nothing to sum
        ZT_ASSERT(N == 0);
        ZT_LAUNCH(layernorm_bwd_wb_zero_kernel, blocks_for(C, kColThreads), kColThreads, 0, s, dw, db, C);
        NA_LAUNCH_CHECK("layernorm_bwd_wb_zero_kernel");
        return;
    }
    const int nparts = ln_parts(N);
    ZT_ASSERT(scratch != nullptr && tickets != nullptr);
    ZT_ASSERT(!in_round || (dout != dinp && dout != inp));
    // dout is written only when in_round (rounded in place, as the round_to fused here would have)
    ZT_LAUNCH(layernorm_bwd_kernel, nparts, kLnBwdThreads, 0, s, dinp, dinp16, dw, db, static_cast<float *>(scratch),
              tickets, const_cast<float *>(dout), RowIn{dout, dout16, inp16_prec}, RowIn{inp, inp16, inp16_prec}, w,
              mean, rstd, N, C, prec, in_round);
    NA_LAUNCH_CHECK("layernorm_bwd_kernel");
}

// Grouped-query attention: query head h = j G + r (G = NH / NKV) uses key / value head j. A qkv row is W =
// (NH + 2 NKV) hs floats: query heads at columns h hs, key heads at C + j hs, value heads at C + KV + j hs
// (KV = NKV hs). Per sequence b and r < G, one batched product over the NKV query heads r, G + r, 2G + r, ...
// (query / output batch stride G hs, key / value stride hs, att's (T, T) blocks G T^2); with G == 1 that is one
// product over all heads, the multi-head attention's. The products run over whole rows (above the diagonal att
// and d(pre) are zero), fp32 in every precision.
static void attention_shape(int B, int T, int C, int NH, int NKV) {
    ZT_ASSERT(NH > 0 && NKV > 0 && C % NH == 0 && NH % NKV == 0);
    ZT_ASSERT((size_t)B * NH * T <= 0x7fffffff);
}

// kvalid: nullptr causal, else the bidirectional key mask (B, T)
static void attention_fwd(zt_cu_gemm *g, cudaStream_t s, float *out, float *att, const float *qkv,
                          const int32_t *kvalid, int B, int T, int C, int NH, int NKV) {
    if (B <= 0 || T <= 0 || C <= 0) return;
    attention_shape(B, T, C, NH, NKV);
    const size_t rows = (size_t)B * NH * T;
    const int hs = C / NH, G = NH / NKV, KV = NKV * hs, W = C + 2 * KV;
    const long long TT = (long long)T * T;
    const float scale = 1.0f / sqrtf((float)hs);
    for (int b = 0; b < B; b++) // att_h = scale * q_h @ k_j^T
        for (int r = 0; r < G; r++) {
            const float *q = qkv + (size_t)b * T * W;
            zt_cu_gemm_strided(g, s, att + ((size_t)b * NH + r) * TT, q + r * hs, q + C, T, T, hs, 0, 1, W, W, T,
                               (long long)G * hs, hs, G * TT, NKV, scale, 0.0f);
        }
    ZT_LAUNCH(attention_softmax_kernel, blocks_for(rows, kWarpsPerBlock), 32 * kWarpsPerBlock, 0, s, att, (int)rows,
              T, kvalid, NH * T);
    NA_LAUNCH_CHECK("attention_softmax_kernel");
    for (int b = 0; b < B; b++) // out_h = att_h @ v_j
        for (int r = 0; r < G; r++) {
            const float *q = qkv + (size_t)b * T * W;
            zt_cu_gemm_strided(g, s, out + (size_t)b * T * C + r * hs, att + ((size_t)b * NH + r) * TT, q + C + KV, T,
                               hs, T, 0, 0, T, W, C, G * TT, hs, (long long)G * hs, NKV, 1.0f, 0.0f);
        }
}

// dk_j and dv_j sum over the group's query heads r = 0 .. G-1 in order (the cpu backend's order): the product of
// r == 0 overwrites them, the next ones add to them (beta 1), one GEMM after the other on the stream.
static void attention_bwd(zt_cu_gemm *g, cudaStream_t s, float *dqkv, float *datt, const float *dout,
                          const float *qkv, const float *att, const int32_t *kvalid, int B, int T, int C, int NH,
                          int NKV) {
    if (B <= 0 || T <= 0 || C <= 0) return;
    attention_shape(B, T, C, NH, NKV);
    const size_t rows = (size_t)B * NH * T;
    const int hs = C / NH, G = NH / NKV, KV = NKV * hs, W = C + 2 * KV;
    const long long TT = (long long)T * T, Ghs = (long long)G * hs;
    const float scale = 1.0f / sqrtf((float)hs);
    for (int b = 0; b < B; b++)
        for (int r = 0; r < G; r++) {
            const float *q = qkv + (size_t)b * T * W, *dy = dout + (size_t)b * T * C + r * hs;
            const float *a = att + ((size_t)b * NH + r) * TT;
            float *da = datt + ((size_t)b * NH + r) * TT, *d = dqkv + (size_t)b * T * W;
            // datt_h = dout_h @ v_j^T; dv_j (+)= att_h^T @ dout_h
            zt_cu_gemm_strided(g, s, da, dy, q + C + KV, T, T, hs, 0, 1, C, W, T, Ghs, hs, G * TT, NKV, 1.0f, 0.0f);
            zt_cu_gemm_strided(g, s, d + C + KV, a, dy, T, hs, T, 1, 0, T, C, W, G * TT, Ghs, hs, NKV, 1.0f,
                               r ? 1.0f : 0.0f);
        }
    ZT_LAUNCH(attention_bwd_dpre_kernel, blocks_for(rows, kWarpsPerBlock), 32 * kWarpsPerBlock, 0, s, datt, att,
              (int)rows, T, scale, kvalid, NH * T);
    NA_LAUNCH_CHECK("attention_bwd_dpre_kernel");
    for (int b = 0; b < B; b++) // dq_h = dpre_h @ k_j; dk_j (+)= dpre_h^T @ q_h
        for (int r = 0; r < G; r++) {
            const float *q = qkv + (size_t)b * T * W, *da = datt + ((size_t)b * NH + r) * TT;
            float *d = dqkv + (size_t)b * T * W;
            zt_cu_gemm_strided(g, s, d + r * hs, da, q + C, T, hs, T, 0, 0, T, W, W, G * TT, hs, Ghs, NKV, 1.0f, 0.0f);
            zt_cu_gemm_strided(g, s, d + C, da, q + r * hs, T, hs, T, 1, 0, T, W, W, G * TT, Ghs, hs, NKV, 1.0f,
                               r ? 1.0f : 0.0f);
        }
}

void zt_cu_attention_fwd(zt_cu_gemm *g, cudaStream_t s, float *out, float *att, const float *qkv, int B, int T, int C,
                         int NH, int NKV) {
    attention_fwd(g, s, out, att, qkv, nullptr, B, T, C, NH, NKV);
}

void zt_cu_attention_bwd(zt_cu_gemm *g, cudaStream_t s, float *dqkv, float *datt, const float *dout, const float *qkv,
                         const float *att, int B, int T, int C, int NH, int NKV) {
    attention_bwd(g, s, dqkv, datt, dout, qkv, att, nullptr, B, T, C, NH, NKV);
}

void zt_cu_attention_bidir_fwd(zt_cu_gemm *g, cudaStream_t s, float *out, float *att, const float *qkv,
                               const int32_t *kvalid, int B, int T, int C, int NH, int NKV) {
    ZT_ASSERT(kvalid != nullptr);
    attention_fwd(g, s, out, att, qkv, kvalid, B, T, C, NH, NKV);
}

void zt_cu_attention_bidir_bwd(zt_cu_gemm *g, cudaStream_t s, float *dqkv, float *datt, const float *dout,
                               const float *qkv, const float *att, const int32_t *kvalid, int B, int T, int C, int NH,
                               int NKV) {
    ZT_ASSERT(kvalid != nullptr);
    attention_bwd(g, s, dqkv, datt, dout, qkv, att, kvalid, B, T, C, NH, NKV);
}

void zt_cu_attention_decode(cudaStream_t s, float *out, float *kcache, float *vcache, const float *qkv, int pos,
                            int maxT, int C, int NH, int NKV) {
    ZT_ASSERT(pos >= 0 && pos < maxT && NH > 0 && NKV > 0 && C % NH == 0 && NH % NKV == 0);
    if (C <= 0) return;
    const int G = NH / NKV, KV = NKV * (C / NH);
    if (G > 1) { // the key / value heads' row first: the G blocks of a group read it
        ZT_LAUNCH(attention_decode_append_kernel, blocks_for((size_t)KV, 256), 256, 0, s, kcache, vcache, qkv, pos, C,
                  KV);
        NA_LAUNCH_CHECK("attention_decode_append_kernel");
    }
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
    ZT_LAUNCH(attention_decode_kernel, NH, 32, smem, s, out, kcache, vcache, qkv, pos, C, NH, G, G == 1 ? 1 : 0);
    NA_LAUNCH_CHECK("attention_decode_kernel");
}

} // namespace ZT_CU_NS
