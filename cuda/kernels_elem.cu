// kernels_elem.cu — the CUDA backend's elementwise and row kernels (cuda_ops.h, "kernels_elem.cu"):
// GELU forward/backward (tanh approximation, or the encoders' exact erf form), add, accumulate, embeddings
// forward/backward, fused softmax + cross-entropy, the MLM decoder's bias add and gradient, each row's argmax (AdamW
// and the gradient norm: kernels_optim.cu). One source, two builds: nvcc (GPU) and g++ against the host execution harness
// (ZT_HOSTEXEC), which runs every launch on the CPU.
//
// Determinism: no floating-point atomics. Elementwise ops are grid-stride loops, 4 elements a thread with 128-bit
// loads and stores where every pointer is 16-byte aligned (the heaviest ones: add, accumulate, round_to, GELU,
// pack16 / unpack16), else one; every reduction is done by one block with a fixed tree (per-thread strided partials, a
// warp xor-butterfly, then the per-warp partials by the same butterfly) or by one thread in a fixed
// order, so the bits never depend on block scheduling. The bias gradient is one thread per column adding the rows in
// order (the cpu backend's zt_cpu_colsum: the same bits); argmax is one warp per row whose lanes' candidates meet in
// a butterfly under zt_argmax_better, a total order (larger value, then lower index; NaN never wins), so the
// winner is the cpu's whatever the order of comparisons. The elementwise formulas are
// src/iface/op_math.h's, shared with the cpu backend.
//
// Embedding backward (dwte += scatter by token) — the choice: the B*T positions are sorted on the
// device by the key (token << 32 | position), a bitonic sort of the keys padded to a power of two
// (tiles of 2048 keys sorted in shared memory, the larger merge steps one launch each). The keys
// are unique, so the sorted order, and with it the result, is the same for any schedule. Then each
// (first position of a token, column) is one thread that adds that token's positions in position
// order onto dwte's value: the same additions in the same order as the cpu backend, so dwte is
// bit-identical to it. Work is proportional to B*T*C; the longest serial chain is the count of the
// most frequent token (as in llm.c's bucketed wte backward). Scratch: 8 bytes per padded position.
#include "cuda_ops.h"

#include "cuda_check.h"
#include "iface/backend.h"
#include "kernels_common.cuh"
#include "iface/op_math.h"
#include "iface/quant_format.h"


namespace ZT_CU_NS {

namespace {

constexpr int kRowThreads = 512;         // softmax_xent: one block per row (fewer for short rows)
constexpr int kSortTile = 2048;          // embed_bwd: keys sorted in shared memory by one block of kSortTile / 2
constexpr int kEmbedSeg = 32;            // embed_bwd: sorted positions whose tokens one dwte block starts
constexpr int kArgmaxWarps = 4;          // argmax_rows: one warp per row, 4 rows per block
constexpr int kColThreads = 256;         // bias_grad: one thread per column


// the 4-element vectors of an elementwise call over n elements: n / 4 when every pointer given is aligned to its
// vector (16 bytes for float, 8 for 2-byte words: align), else 0; and the blocks for them and the tail
bool aligned(const void *p, size_t align) { return p == nullptr || reinterpret_cast<uintptr_t>(p) % align == 0; }
size_t vec4_count(size_t n, const void *a, const void *b = nullptr, const void *c = nullptr, size_t align_c = 16) {
    return aligned(a, 16) && aligned(b, 16) && aligned(c, align_c) ? n / 4 : 0;
}
unsigned vec4_blocks(size_t n, size_t n4) { return elem_blocks(n4 > n - 4 * n4 ? n4 : n - 4 * n4); }


// ---------------------------------------------------------------------------------------------
// Elementwise (ZT_GRID_STRIDE: kernels_common.cuh).

// prec (ZT_PREC_*, here and below): the output as a buffer of that precision stores it (zt_round_prec; fp32:
// unchanged), the round_to that follows the op fused into it (cuda_backend.cu)
// exact (uniform over the launch): BERT's erf GELU instead of the tanh approximation. dinp may be dout: each
// thread reads its element's dout before writing its dinp
// 128-bit accesses: an elementwise kernel takes n4 vectors of 4 elements (float4; uint2 for 2-byte words) when
// every pointer of the call is 16-byte aligned (n4 = n / 4, computed on the host: vec4_count), then elements
// [4 n4, n) one by one. The same formula on each element either way: the same bits.
__device__ __forceinline__ float4 ld4(const float *p, size_t k) { return reinterpret_cast<const float4 *>(p)[k]; }
__device__ __forceinline__ void st4(float *p, size_t k, float4 v) { reinterpret_cast<float4 *>(p)[k] = v; }
#define ZT_TAIL(i, n4, n) ZT_GRID_STRIDE(t_##i, (n) - 4 * (n4)) if (const size_t i = 4 * (n4) + t_##i; true)

__device__ __forceinline__ float gelu_f(float x, int exact) { return exact ? zt_gelu_erf(x) : zt_gelu(x); }
__device__ __forceinline__ float gelu_g(float x, int exact) { return exact ? zt_gelu_erf_grad(x) : zt_gelu_grad(x); }

// 4 words (one uint2) widened: the float4 they are the 2-byte form of
__device__ __forceinline__ float4 unwords4(uint2 w, int prec) {
    return make_float4(zt_bits16_to_f32((uint16_t)(w.x & 0xffffu), prec), zt_bits16_to_f32((uint16_t)(w.x >> 16), prec),
                       zt_bits16_to_f32((uint16_t)(w.y & 0xffffu), prec), zt_bits16_to_f32((uint16_t)(w.y >> 16), prec));
}
// 4 values' 2-byte words as one uint2 (out16's vector store)
__device__ __forceinline__ uint2 words4(float4 y, int prec) {
    return make_uint2((uint32_t)zt_f32_to_bits16(y.x, prec) | (uint32_t)zt_f32_to_bits16(y.y, prec) << 16,
                      (uint32_t)zt_f32_to_bits16(y.z, prec) | (uint32_t)zt_f32_to_bits16(y.w, prec) << 16);
}

// in_round (a precision, 0: none): the round_to of the GELU's input that the backend fuses into its consumer
// (cuda_backend.cu): forward rounds inp on load and writes it back rounded (it is stored for backward), backward
// rounds dout on load (in place: dinp == dout, so its rounded value is overwritten anyway)
// out16 (prec bf16 / fp16): the output also as 2-byte words (4 a thread as one uint2 on the vector path)
// in16 (with in_round): the rounded input also as words
// inp16 (may be null; not with in_round): inp read as these words (of precision wprec) instead of the floats
__global__ void k_gelu_fwd(float *out, float *inp, const uint16_t *inp16, uint16_t *out16, uint16_t *in16, size_t n,
                           size_t n4, int prec, int exact, int in_round, int wprec) {
    ZT_GRID_STRIDE(k, n4) {
        float4 x = inp16 ? unwords4(reinterpret_cast<const uint2 *>(inp16)[k], wprec) : ld4(inp, k);
        if (in_round) {
            x = make_float4(zt_round_prec(x.x, in_round), zt_round_prec(x.y, in_round), zt_round_prec(x.z, in_round),
                            zt_round_prec(x.w, in_round));
            st4(inp, k, x);
            if (in16) reinterpret_cast<uint2 *>(in16)[k] = words4(x, in_round);
        }
        const float4 y = make_float4(zt_round_prec(gelu_f(x.x, exact), prec), zt_round_prec(gelu_f(x.y, exact), prec),
                                     zt_round_prec(gelu_f(x.z, exact), prec), zt_round_prec(gelu_f(x.w, exact), prec));
        if (out) st4(out, k, y); // null: the words alone
        if (out16) reinterpret_cast<uint2 *>(out16)[k] = words4(y, prec);
    }
    ZT_TAIL(i, n4, n) {
        float x = inp16 ? zt_bits16_to_f32(inp16[i], wprec) : inp[i];
        if (in_round) inp[i] = x = zt_round_prec(x, in_round);
        if (in16) in16[i] = zt_f32_to_bits16(x, in_round);
        const float y = zt_round_prec(gelu_f(x, exact), prec);
        if (out) out[i] = y;
        if (out16) out16[i] = zt_f32_to_bits16(y, prec);
    }
}

// inp16, dout16 (may be null; dout16 not with in_round): inp, dout read as these words (of precision wprec) instead of
// the floats
__global__ void k_gelu_bwd(float *dinp, const float *inp, const uint16_t *inp16, const float *dout,
                           const uint16_t *dout16, uint16_t *dinp16, size_t n, size_t n4, int prec, int exact,
                           int in_round, int wprec) {
    ZT_GRID_STRIDE(k, n4) {
        const float4 x = inp16 ? unwords4(reinterpret_cast<const uint2 *>(inp16)[k], wprec) : ld4(inp, k);
        const float4 d0 = dout16 ? unwords4(reinterpret_cast<const uint2 *>(dout16)[k], wprec) : ld4(dout, k);
        const float4 d = in_round ? make_float4(zt_round_prec(d0.x, in_round), zt_round_prec(d0.y, in_round),
                                                zt_round_prec(d0.z, in_round), zt_round_prec(d0.w, in_round))
                                  : d0;
        const float4 y = make_float4(zt_round_prec(gelu_g(x.x, exact) * d.x, prec), zt_round_prec(gelu_g(x.y, exact) * d.y, prec),
                                     zt_round_prec(gelu_g(x.z, exact) * d.z, prec), zt_round_prec(gelu_g(x.w, exact) * d.w, prec));
        if (dinp) st4(dinp, k, y); // null: the words alone
        if (dinp16) reinterpret_cast<uint2 *>(dinp16)[k] = words4(y, prec);
    }
    ZT_TAIL(i, n4, n) {
        const float d0 = dout16 ? zt_bits16_to_f32(dout16[i], wprec) : dout[i];
        const float d = in_round ? zt_round_prec(d0, in_round) : d0;
        const float x = inp16 ? zt_bits16_to_f32(inp16[i], wprec) : inp[i];
        const float y = zt_round_prec(gelu_g(x, exact) * d, prec);
        if (dinp) dinp[i] = y;
        if (dinp16) dinp16[i] = zt_f32_to_bits16(y, prec);
    }
}

// out(N, OC) += bias(OC), n = N OC elements
__global__ void k_bias_add(float *out, const float *bias, size_t n, int OC) {
    ZT_GRID_STRIDE(i, n) out[i] += bias[i % (size_t)OC];
}

// dbias[c] = dout[0][c] + dout[1][c] + ... in row order, one thread per column (neighbours read neighbours)
__global__ void k_bias_grad(float *dbias, const float *dout, int N, int OC) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= OC) return;
    float acc = 0.0f;
    for (int r = 0; r < N; r++) acc += dout[(size_t)r * OC + c];
    dbias[c] = acc;
}

// one warp per row of x (rows ld floats apart): lane l scans columns l, l+32, ... of [0, V)
__global__ void __launch_bounds__(32 * kArgmaxWarps) k_argmax_rows(int32_t *idx, const float *x, int N, int V, int ld) {
    const int lane = threadIdx.x % 32, row = blockIdx.x * kArgmaxWarps + threadIdx.x / 32;
    if (row >= N) return; // whole warps leave together
    const float *r = x + (size_t)row * ld;
    float bv = -INFINITY;
    int32_t bj = INT32_MAX;
    for (int32_t j = lane; j < V; j += 32)
        if (zt_argmax_better(r[j], j, bv, bj)) bv = r[j], bj = j;
    for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(kFull, bv, o);
        const int32_t oj = __shfl_xor_sync(kFull, bj, o);
        if (zt_argmax_better(ov, oj, bv, bj)) bv = ov, bj = oj;
    }
    if (lane == 0) idx[row] = bj == INT32_MAX ? 0 : bj;
}

// in_round (a precision, 0: none): b rounded to it first and written back (the round_to of b fused here), before out
__global__ void k_add(float *out, const float *a, float *b, size_t n, size_t n4, int prec, int in_round) {
    ZT_GRID_STRIDE(k, n4) {
        const float4 x = ld4(a, k);
        float4 y = ld4(b, k);
        if (in_round) {
            y = make_float4(zt_round_prec(y.x, in_round), zt_round_prec(y.y, in_round), zt_round_prec(y.z, in_round),
                            zt_round_prec(y.w, in_round));
            st4(b, k, y);
        }
        st4(out, k, make_float4(zt_round_prec(x.x + y.x, prec), zt_round_prec(x.y + y.y, prec),
                                zt_round_prec(x.z + y.z, prec), zt_round_prec(x.w + y.w, prec)));
    }
    ZT_TAIL(i, n4, n) {
        const float ai = a[i];
        float y = b[i];
        if (in_round) b[i] = y = zt_round_prec(y, in_round);
        out[i] = zt_round_prec(ai + y, prec);
    }
}

// x's elements [r0, r1) rounded to prec (0: none) as they are loaded and written back rounded (a round_to of that
// range fused here); acc += x
__global__ void k_accumulate(float *acc, float *x, size_t n, size_t n4, int prec, size_t r0, size_t r1) {
    ZT_GRID_STRIDE(k, n4) {
        const float4 a = ld4(acc, k);
        float4 y = ld4(x, k);
        if (prec && 4 * k + 4 > r0 && 4 * k < r1) {
            float *e = &y.x;
            for (int l = 0; l < 4; l++)
                if (4 * k + l >= r0 && 4 * k + l < r1) e[l] = zt_round_prec(e[l], prec);
            st4(x, k, y);
        }
        st4(acc, k, make_float4(a.x + y.x, a.y + y.y, a.z + y.z, a.w + y.w));
    }
    ZT_TAIL(i, n4, n) {
        float y = x[i];
        if (prec && i >= r0 && i < r1) x[i] = y = zt_round_prec(y, prec);
        acc[i] += y;
    }
}

// x16 (may be null): the rounded values also as words
__global__ void k_round(float *x, uint16_t *x16, size_t n, size_t n4, int prec) {
    ZT_GRID_STRIDE(k, n4) {
        const float4 v = ld4(x, k);
        const float4 y = make_float4(zt_round_prec(v.x, prec), zt_round_prec(v.y, prec), zt_round_prec(v.z, prec),
                                     zt_round_prec(v.w, prec));
        st4(x, k, y);
        if (x16) reinterpret_cast<uint2 *>(x16)[k] = words4(y, prec);
    }
    ZT_TAIL(i, n4, n) {
        x[i] = zt_round_prec(x[i], prec);
        if (x16) x16[i] = zt_f32_to_bits16(x[i], prec);
    }
}

// 4 words a vector: out (uint2) 8-byte aligned, x 16-byte aligned
__global__ void k_pack16(uint16_t *out, const float *x, size_t n, size_t n4, int prec) {
    ZT_GRID_STRIDE(k, n4) {
        const float4 v = ld4(x, k);
        uint2 w;
        w.x = (unsigned)zt_f32_to_bits16(v.x, prec) | (unsigned)zt_f32_to_bits16(v.y, prec) << 16;
        w.y = (unsigned)zt_f32_to_bits16(v.z, prec) | (unsigned)zt_f32_to_bits16(v.w, prec) << 16;
        reinterpret_cast<uint2 *>(out)[k] = w;
    }
    ZT_TAIL(i, n4, n) out[i] = zt_f32_to_bits16(x[i], prec);
}

__global__ void k_unpack16(float *out, const uint16_t *x, size_t n, size_t n4, int prec) {
    ZT_GRID_STRIDE(k, n4) {
        const uint2 w = reinterpret_cast<const uint2 *>(x)[k];
        st4(out, k, make_float4(zt_bits16_to_f32((uint16_t)(w.x & 0xffffu), prec), zt_bits16_to_f32((uint16_t)(w.x >> 16), prec),
                                zt_bits16_to_f32((uint16_t)(w.y & 0xffffu), prec), zt_bits16_to_f32((uint16_t)(w.y >> 16), prec)));
    }
    ZT_TAIL(i, n4, n) out[i] = zt_bits16_to_f32(x[i], prec);
}

// several unpack16s in one launch: the grid strides over the ranges' elements end to end (range k's first element is
// start[k]; binary search), each element k_unpack16's conversion
__global__ void k_unpack16_multi(zt_cu_unpack_job job, int prec) {
    const size_t total = job.start[job.n];
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        int lo = 0, hi = job.n - 1; // the range k with start[k] <= i < start[k + 1]
        while (lo < hi) {
            const int mid = (lo + hi + 1) / 2;
            if (job.start[mid] <= i) lo = mid;
            else hi = mid - 1;
        }
        const size_t e = i - job.start[lo];
        job.out[lo][e] = zt_bits16_to_f32(job.x[lo][e], prec);
    }
}

__global__ void k_add_zero_copy(float *out, const float *in, size_t n) {
    ZT_GRID_STRIDE(i, n) out[i] = in[i];
}

__global__ void k_dropout(float *out, const float *in, size_t n, float p, float scale, uint64_t seed,
                          const uint64_t *micro) {
    const uint64_t sd = micro ? zt_dropout_seed(seed, *micro) : seed;
    ZT_GRID_STRIDE(i, n) out[i] = zt_dropout_keep(sd, i, p) ? in[i] * scale : 0.0f;
}

// element i of a quantised matrix: the formulas of zt_quant_decode (core/lora/quant.c) per element
__global__ void k_dequant(float *out, const uint8_t *blob, int fmt, size_t n, size_t cols, size_t codes, size_t absmax,
                          size_t qabsmax, size_t absmax2, size_t mean_off, size_t scales) {
    ZT_GRID_STRIDE(i, n) {
        if (fmt == ZT_QUANT_INT8) {
            out[i] = zt_int8_decode((const int8_t *)(blob + codes), (const float *)(blob + scales), cols, i / cols,
                                    i % cols);
            continue;
        }
        const size_t b = i / ZT_NF4_BLOCK;
        const float sc = fmt == ZT_QUANT_NF4_DQ
                             ? zt_nf4dq_absmax(blob + qabsmax, (const float *)(blob + absmax2),
                                               *(const float *)(blob + mean_off), b)
                             : ((const float *)(blob + absmax))[b];
        out[i] = zt_nf4_decode(blob + codes, sc, i);
    }
}


// ---------------------------------------------------------------------------------------------
// Embeddings.
__global__ void k_embed_fwd(float *out, const int32_t *tokens, const float *wte, const float *wpe, int T, int C,
                            size_t n, int prec) {
    ZT_GRID_STRIDE(i, n) {
        const size_t bt = i / (size_t)C, c = i % (size_t)C, t = bt % (size_t)T;
        const float e = wte[(size_t)tokens[bt] * C + c];
        out[i] = zt_round_prec(wpe != nullptr ? e + wpe[t * C + c] : e, prec); // no wpe: rotary positions
    }
}

// dwpe(t, c) = sum over b in order, starting from 0 (as the cpu backend)
__global__ void k_embed_dwpe(float *dwpe, const float *dout, int B, int T, int C) {
    const size_t TC = (size_t)T * C;
    ZT_GRID_STRIDE(i, TC) {
        float d = 0.0f;
        for (int b = 0; b < B; b++) d += dout[(size_t)b * TC + i];
        dwpe[i] = d;
    }
}

__device__ __forceinline__ uint64_t embed_key(int32_t token, unsigned pos) {
    return ((uint64_t)(uint32_t)token << 32) | pos;
}

// compare-exchange of a[i], a[l] (i < l) towards ascending (asc) or descending order
__device__ __forceinline__ void bitonic_cmpx(uint64_t *a, unsigned i, unsigned l, bool asc) {
    const uint64_t x = a[i], y = a[l];
    if ((x > y) == asc) {
        a[i] = y;
        a[l] = x;
    }
}

// The bitonic network's steps that stay inside one tile of 2 * blockDim.x keys, in shared memory:
// stages k = k_lo .. k_hi (powers of two), each with j = min(k, tile) / 2 .. 1. With tokens, the
// tile's keys are first built from the tokens (positions >= N are padding, ~0, sorting last).
__global__ void __launch_bounds__(kSortTile / 2)
    k_bitonic_tile(uint64_t *keys, const int32_t *tokens, unsigned N, unsigned k_lo, unsigned k_hi) {
    __shared__ uint64_t s[kSortTile];
    const unsigned tile = 2 * blockDim.x, base = blockIdx.x * tile, t = threadIdx.x;
    for (unsigned i = t; i < tile; i += blockDim.x) {
        const unsigned g = base + i;
        s[i] = tokens != nullptr ? (g < N ? embed_key(tokens[g], g) : ~(uint64_t)0) : keys[g];
    }
    __syncthreads();
    for (unsigned k = k_lo; k <= k_hi; k <<= 1) {
        for (unsigned j = (k < tile ? k : tile) / 2; j > 0; j >>= 1) {
            const unsigned i = ((t & ~(j - 1)) << 1) | (t & (j - 1));
            bitonic_cmpx(s, i, i + j, ((base + i) & k) == 0);
            __syncthreads();
        }
    }
    for (unsigned i = t; i < tile; i += blockDim.x) keys[base + i] = s[i];
}

// one step (k, j) of the bitonic network with j >= tile, over all P keys (half = P / 2 pairs)
__global__ void k_bitonic_step(uint64_t *keys, unsigned half, unsigned k, unsigned j) {
    ZT_GRID_STRIDE(t_, half) {
        const unsigned t = (unsigned)t_;
        const unsigned i = ((t & ~(j - 1)) << 1) | (t & (j - 1));
        bitonic_cmpx(keys, i, i + j, (i & k) == 0);
    }
}

// dwte: block (x, y) takes the sorted positions [x * kEmbedSeg, +kEmbedSeg) and columns
// [y * blockDim.x, +blockDim.x). For each of those positions that is its token's first, the thread
// of column c adds every position of that token (in position order: the keys hold the position
// below the token) onto dwte(token, c). Each (token, column) belongs to exactly one thread.
__global__ void k_embed_dwte(float *dwte, const float *dout, const uint64_t *keys, unsigned N, int C) {
    const int c = blockIdx.y * blockDim.x + threadIdx.x;
    if (c >= C) return; // no barriers below
    const unsigned s0 = blockIdx.x * kEmbedSeg, s1 = s0 + kEmbedSeg < N ? s0 + kEmbedSeg : N;
    for (unsigned s = s0; s < s1; s++) {
        const uint32_t tok = (uint32_t)(keys[s] >> 32);
        if (s > 0 && (uint32_t)(keys[s - 1] >> 32) == tok) continue; // not the token's first position
        float *d = dwte + (size_t)tok * C + c;
        float acc = *d;
        for (unsigned u = s; u < N; u++) {
            const uint64_t key = keys[u];
            if ((uint32_t)(key >> 32) != tok) break;
            acc += dout[(size_t)(uint32_t)key * C + c];
        }
        *d = acc;
    }
}

// ---------------------------------------------------------------------------------------------
// Softmax + cross-entropy: one block per row. A target < 0 is an ignored position: loss 0 and (dscale != 0) a
// row of zeros; the whole block leaves before any barrier, so none is left waiting. The logits' storage S: float32
// (the dlogits rounded to prec when the round_to after the op is fused: prec 0 leaves them unrounded), or 2-byte
// words of precision prec (softmax_xent16), widened exactly on load and rounded on store.
__device__ __forceinline__ float xent_ld(const float *x, int v, int prec) {
    (void)prec;
    return x[v];
}
__device__ __forceinline__ float xent_ld(const uint16_t *x, int v, int prec) {
    return zt_bits16_to_f32(x[v], prec);
}
__device__ __forceinline__ void xent_st(float *x, int v, float d, int prec) { x[v] = zt_round_prec(d, prec); }
__device__ __forceinline__ void xent_st(uint16_t *x, int v, float d, int prec) {
    x[v] = zt_f32_to_bits16(d, prec);
}
template <typename S>
__global__ void __launch_bounds__(kRowThreads)
    k_softmax_xent(float *losses, S *logits, const int32_t *targets, int V, int Vp, float dscale,
                   const float *dscale_at, int prec) {
    __shared__ float sh[32];
    dscale = zt_xent_dscale(dscale, dscale_at); // the scale on the device (a flag was passed)
    const size_t row = blockIdx.x;
    S *x = logits + row * (size_t)Vp;
    const int tgt = targets[row];
    if (tgt < 0) {
        if (threadIdx.x == 0) losses[row] = 0.0f;
        if (dscale != 0.0f)
            for (int v = threadIdx.x; v < Vp; v += blockDim.x) xent_st(x, v, 0.0f, prec);
        return;
    }
    const float xt = xent_ld(x, tgt, prec); // read before any thread overwrites the row (after the reductions' barriers)
    float mx = -INFINITY;
    for (int v = threadIdx.x; v < V; v += blockDim.x) mx = fmaxf(mx, xent_ld(x, v, prec));
    mx = block_reduce(mx, sh, -INFINITY, MaxOp());
    float s = 0.0f;
    for (int v = threadIdx.x; v < V; v += blockDim.x) s += zt_expf(xent_ld(x, v, prec) - mx);
    s = block_reduce(s, sh, 0.0f, SumOp());
    if (threadIdx.x == 0) losses[row] = logf(s) - (xt - mx);
    if (dscale != 0.0f) {
        const float k = dscale / s;
        for (int v = threadIdx.x; v < Vp; v += blockDim.x) {
            float d = 0.0f;
            if (v < V) {
                d = zt_expf(xent_ld(x, v, prec) - mx) * k;
                if (v == tgt) d -= dscale;
            }
            xent_st(x, v, d, prec);
        }
    }
}


#undef ZT_GRID_STRIDE

size_t embed_sort_len(int B, int T) {
    size_t n = (size_t)B * (size_t)T, p = 2;
    while (p < n) p <<= 1;
    return p;
}

} // namespace

// ---------------------------------------------------------------------------------------------
// Launch functions (cuda_ops.h).

void zt_cu_gelu_fwd(cudaStream_t s, float *out, const float *inp, size_t n, int prec, int exact, int in_round,
                    uint16_t *out16, uint16_t *in16, const uint16_t *inp16, int inp16_prec) {
    if (n == 0) return;
    ZT_ASSERT(!out16 || prec != ZT_PREC_FP32);
    ZT_ASSERT(!in16 || in_round != ZT_PREC_FP32);
    ZT_ASSERT(!inp16 || (inp16_prec != ZT_PREC_FP32 && !in_round));
    ZT_ASSERT(out || out16);
    const size_t n4 =
        aligned(in16, 8) && aligned(inp16, 8) ? vec4_count(n, out, inp16 ? nullptr : inp, out16, 8) : 0;
    // inp is written only when in_round (rounded in place, as the round_to fused here would have)
    ZT_LAUNCH(k_gelu_fwd, vec4_blocks(n, n4), kElemThreads, 0, s, out, const_cast<float *>(inp), inp16, out16, in16, n,
              n4, prec, exact, in_round, inp16_prec);
    check_launch("gelu_fwd");
}

void zt_cu_gelu_bwd(cudaStream_t s, float *dinp, const float *inp, const float *dout, size_t n, int prec, int exact,
                    int in_round, uint16_t *dinp16, const uint16_t *inp16, int inp16_prec, const uint16_t *dout16) {
    if (n == 0) return;
    ZT_ASSERT(!in_round || dinp == dout || !dinp); // (null dinp: the words alone, in place of dout)
    ZT_ASSERT(!dinp16 || prec != ZT_PREC_FP32);
    ZT_ASSERT(dinp || dinp16);
    ZT_ASSERT((!inp16 && !dout16) || inp16_prec != ZT_PREC_FP32);
    ZT_ASSERT(!dout16 || !in_round);
    const size_t n4 = aligned(dinp16, 8) && aligned(inp16, 8) && aligned(dout16, 8)
                          ? vec4_count(n, dinp, inp16 ? nullptr : inp, dout16 ? nullptr : dout)
                          : 0;
    ZT_LAUNCH(k_gelu_bwd, vec4_blocks(n, n4), kElemThreads, 0, s, dinp, inp, inp16, dout, dout16, dinp16, n, n4, prec,
              exact, in_round, inp16_prec);
    check_launch("gelu_bwd");
}

void zt_cu_bias_add(cudaStream_t s, float *out, const float *bias, int N, int OC) {
    if (N <= 0 || OC <= 0) return;
    const size_t n = (size_t)N * OC;
    ZT_LAUNCH(k_bias_add, elem_blocks(n), kElemThreads, 0, s, out, bias, n, OC);
    check_launch("bias_add");
}

void zt_cu_bias_grad(cudaStream_t s, float *dbias, const float *dout, int N, int OC) {
    if (OC <= 0) return; // N == 0 still launches: dbias becomes zeros (the cpu backend's result)
    ZT_LAUNCH(k_bias_grad, (unsigned)((OC + kColThreads - 1) / kColThreads), kColThreads, 0, s, dbias, dout,
              N < 0 ? 0 : N, OC);
    check_launch("bias_grad");
}

void zt_cu_argmax_rows(cudaStream_t s, int32_t *idx, const float *x, int N, int V, int ld) {
    if (N <= 0) return;
    ZT_LAUNCH(k_argmax_rows, (unsigned)((N + kArgmaxWarps - 1) / kArgmaxWarps), 32 * kArgmaxWarps, 0, s, idx, x, N,
              V, ld);
    check_launch("argmax_rows");
}

void zt_cu_add(cudaStream_t s, float *out, const float *a, const float *b, size_t n, int prec, int in_round) {
    if (n == 0) return;
    const size_t n4 = vec4_count(n, out, a, b);
    // b is written only when in_round (rounded in place, as the round_to fused here would have)
    ZT_LAUNCH(k_add, vec4_blocks(n, n4), kElemThreads, 0, s, out, a, const_cast<float *>(b), n, n4, prec, in_round);
    check_launch("add");
}

void zt_cu_accumulate(cudaStream_t s, float *acc, const float *x, size_t n, int prec, size_t r0, size_t r1) {
    if (n == 0) return;
    ZT_ASSERT(!prec || (r0 <= r1 && r1 <= n));
    if (!prec) r0 = r1 = 0;
    const size_t n4 = vec4_count(n, acc, x);
    // x is written only within [r0, r1) with prec (rounded in place, as the round_to fused here would have)
    ZT_LAUNCH(k_accumulate, vec4_blocks(n, n4), kElemThreads, 0, s, acc, const_cast<float *>(x), n, n4, prec, r0, r1);
    check_launch("accumulate");
}

void zt_cu_embed_fwd(cudaStream_t s, float *out, const int32_t *tokens, const float *wte, const float *wpe, int B,
                     int T, int C, int prec) {
    const size_t n = (size_t)B * T * C;
    if (n == 0) return;
    ZT_LAUNCH(k_embed_fwd, elem_blocks(n), kElemThreads, 0, s, out, tokens, wte, wpe, T, C, n, prec);
    check_launch("embed_fwd");
}

size_t zt_cu_embed_bwd_scratch(int B, int T) { return embed_sort_len(B, T) * sizeof(uint64_t); }

void zt_cu_embed_bwd(cudaStream_t s, float *dwte, float *dwpe, const float *dout, const int32_t *tokens, int B,
                     int T, int C, void *scratch) {
    const size_t N = (size_t)B * T;
    if (N == 0 || C <= 0) return;
    if (N > (1u << 30)) zt_panic(__FILE__, __LINE__, "embed_bwd: B*T = %zu positions, at most 2^30", N);
    // dwpe rows [0, T): overwritten with the sum over b (no dwpe: rotary positions)
    if (dwpe != nullptr) {
        ZT_LAUNCH(k_embed_dwpe, elem_blocks((size_t)T * C), kElemThreads, 0, s, dwpe, dout, B, T, C);
        check_launch("embed_bwd (dwpe)");
    }
    // sort (token, position) keys: tiles in shared memory, then per larger stage k the steps with
    // j >= tile one launch each and the rest inside tiles
    uint64_t *keys = static_cast<uint64_t *>(scratch);
    const unsigned P = (unsigned)embed_sort_len(B, T), tile = P < (unsigned)kSortTile ? P : (unsigned)kSortTile;
    ZT_LAUNCH(k_bitonic_tile, P / tile, tile / 2, 0, s, keys, tokens, (unsigned)N, 2u, tile);
    check_launch("embed_bwd (sort tiles)");
    for (unsigned k = 2 * tile; k <= P; k <<= 1) {
        for (unsigned j = k / 2; j >= tile; j >>= 1) {
            ZT_LAUNCH(k_bitonic_step, elem_blocks(P / 2), kElemThreads, 0, s, keys, P / 2, k, j);
            check_launch("embed_bwd (sort step)");
        }
        ZT_LAUNCH(k_bitonic_tile, P / tile, tile / 2, 0, s, keys, nullptr, (unsigned)N, k, k);
        check_launch("embed_bwd (sort merge)");
    }
    // dwte += by token
    const int bx = C >= 256 ? 256 : (C + 31) / 32 * 32;
    const dim3 grid((unsigned)((N + kEmbedSeg - 1) / kEmbedSeg), (unsigned)((C + bx - 1) / bx));
    ZT_LAUNCH(k_embed_dwte, grid, bx, 0, s, dwte, dout, keys, (unsigned)N, C);
    check_launch("embed_bwd (dwte)");
}

void zt_cu_softmax_xent(cudaStream_t s, float *losses, float *logits, const int32_t *targets, int N, int V, int Vp,
                        float dscale, int prec, const float *dscale_at) {
    if (N <= 0) return;
    ZT_LAUNCH((k_softmax_xent<float>), (unsigned)N, row_threads((size_t)(V > Vp ? V : Vp), kRowThreads), 0, s, losses,
              logits, targets, V, Vp, dscale, dscale_at, prec);
    check_launch("softmax_xent");
}

void zt_cu_softmax_xent16(cudaStream_t s, float *losses, uint16_t *logits, const int32_t *targets, int N, int V,
                          int Vp, float dscale, int prec, const float *dscale_at) {
    if (N <= 0) return;
    ZT_ASSERT(prec == ZT_PREC_BF16 || prec == ZT_PREC_FP16);
    ZT_LAUNCH((k_softmax_xent<uint16_t>), (unsigned)N, row_threads((size_t)(V > Vp ? V : Vp), kRowThreads), 0, s,
              losses, logits, targets, V, Vp, dscale, dscale_at, prec);
    check_launch("softmax_xent16");
}


void zt_cu_round_to(cudaStream_t s, float *x, size_t n, int prec, uint16_t *x16) {
    if (n == 0 || prec == ZT_PREC_FP32) return;
    const size_t n4 = vec4_count(n, x, nullptr, x16, 8);
    ZT_LAUNCH(k_round, vec4_blocks(n, n4), kElemThreads, 0, s, x, x16, n, n4, prec);
    check_launch("round_to");
}

void zt_cu_pack16(cudaStream_t s, uint16_t *out, const float *x, size_t n, int prec) {
    if (n == 0) return;
    ZT_ASSERT(prec == ZT_PREC_BF16 || prec == ZT_PREC_FP16);
    const size_t n4 = vec4_count(n, x, nullptr, out, 8);
    ZT_LAUNCH(k_pack16, vec4_blocks(n, n4), kElemThreads, 0, s, out, x, n, n4, prec);
    check_launch("pack16");
}

void zt_cu_unpack16(cudaStream_t s, float *out, const uint16_t *x, size_t n, int prec) {
    if (n == 0) return;
    ZT_ASSERT(prec == ZT_PREC_BF16 || prec == ZT_PREC_FP16);
    const size_t n4 = vec4_count(n, out, nullptr, x, 8);
    ZT_LAUNCH(k_unpack16, vec4_blocks(n, n4), kElemThreads, 0, s, out, x, n, n4, prec);
    check_launch("unpack16");
}

void zt_cu_unpack16_multi(cudaStream_t s, const zt_cu_unpack_job &job, int prec) {
    ZT_ASSERT(job.n >= 0 && job.n <= kCuUnpackMax);
    if (job.n == 0 || job.start[job.n] == 0) return;
    ZT_ASSERT(prec == ZT_PREC_BF16 || prec == ZT_PREC_FP16);
    ZT_LAUNCH(k_unpack16_multi, elem_blocks(job.start[job.n]), kElemThreads, 0, s, job, prec);
    check_launch("unpack16_multi");
}

void zt_cu_dropout(cudaStream_t s, float *out, const float *in, size_t n, float p, uint64_t seed,
                   const uint64_t *micro) {
    if (n == 0) return;
    const float scale = 1.0f / (1.0f - p);
    if (p == 0.0f) {
        if (out != in) ZT_LAUNCH(k_add_zero_copy, elem_blocks(n), kElemThreads, 0, s, out, in, n);
    } else {
        ZT_LAUNCH(k_dropout, elem_blocks(n), kElemThreads, 0, s, out, in, n, p, scale, seed, micro);
    }
    check_launch("dropout");
}

void zt_cu_dequant(cudaStream_t s, float *out, const uint8_t *blob, int fmt, size_t n, size_t cols, size_t codes,
                   size_t absmax, size_t qabsmax, size_t absmax2, size_t mean, size_t scales) {
    if (n == 0) return;
    ZT_LAUNCH(k_dequant, elem_blocks(n), kElemThreads, 0, s, out, blob, fmt, n, cols, codes, absmax, qabsmax, absmax2,
              mean, scales);
    check_launch("dequant");
}


} // namespace ZT_CU_NS
