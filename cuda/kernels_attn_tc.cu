// kernels_attn_tc.cu — the fused causal attention (kernels_attn_fused.cu's slots and contract) with its products
// on tensor cores: mma.sync m16n8k16, bf16 or fp16 inputs, fp32 accumulation (zt_mma.cuh), for bf16 / fp16 runs,
// head sizes 32 and 64. kernels_attn_fused.cu picks it (zt_cu_attention_tc) and keeps the fp32 kernels as the
// reference and the fallback (fp32 runs, ZT_CUDA_ATTN_TC=0).
//
// What it computes, and where it rounds (flash attention's choices, as FlashAttention-2 and cuDNN make them):
// q, k, v and dout are read as the run's 2-byte values (they are rounded already; the conversion is exact); the
// probabilities p and score gradients ds are rounded to the 2-byte type where they enter a product (p v, p^T dout,
// ds k, ds^T q); scores, softmax statistics (m, 1 / l, summed from the unrounded p), D = dout . out, the output
// before its final rounding, and dk, dv and dq are fp32. Stats are laid out as the fp32 kernels' (the backward's D
// kernel is theirs). So the results differ from the fp32 kernels and the
// cpu backend by the 2-byte rounding of p and ds and the tensor core's summation: cuda/tests/test_kernels_attn_tc.cc
// measures that error against the cpu backend on the same inputs, and checks two runs give the same bits.
//
// Forward: block (query tile of 64, query head, sequence), 4 warps; warp w owns query rows 16w .. 16w + 15 of the
// tile and keeps their q fragments, scores (16 x 64 per key tile), online-softmax m and l and output accumulator in
// registers; key tiles of 64 from 0 to the diagonal pass through shared memory (k natural, v transposed, so both
// B fragments are pairs of adjacent words). Its p becomes the A fragment of p v without leaving registers.
// Backward, without atomics, in two kernels after D = dout . out:
//   dk, dv: block (key tile of 64, key / value head, sequence), warp w owns keys 16w .. 16w + 15 and keeps their k
//   and v fragments and dk, dv accumulators; for each query head of the group and each query tile of 64 from the
//   diagonal on: s^T = k q^T and dp^T = v dout^T, p^T and ds^T in registers, dv += p^T dout, dk += ds^T q;
//   dq: block (query tile of 64, query head, sequence), warp w owns query rows 16w .. 16w + 15; for each key tile
//   from 0 to the diagonal: s = q k^T and dp = dout v^T again, p and ds by the same formula, dq += ds k.
// Query tiles, heads and key tiles are summed in order: deterministic. Recomputing s and dp for dq (7 products
// where the fp32 kernels take 5) costs tensor-core time; the fp32 kernels' per-key-tile dq parts instead cost
// B NH T^2 hs / 64 floats written and read through device memory (GPT-2 124M at 16 x 1024: 0.86 GB a layer).
// Registers: every loop over fragments and accumulators takes ZT_UNROLL and each kernel may use up to 255 registers
// (__launch_bounds__(128, 1)), so nothing lives in local memory (tests/e2e/test_cuda_resources.sh). At head size 64 on
// sm_90 the forward takes 177, dk / dv 238, dq 174: 2 blocks of 4 warps per SM for the forward, where 128 registers
// and 8 spilled bytes gave 4 (which is faster has not been measured on a GPU).
#include <math.h>

#include "cuda_ops.h"
#include "iface/backend.h"
#include "iface/op_math.h"
#include "zt_mma.cuh"

#include "cuda_check.h"

namespace ZT_CU_NS {
namespace {

constexpr unsigned kFull = 0xffffffffu;
constexpr int kTcThreads = 128; // 4 warps
constexpr int kTile = 64;       // query rows / keys per tile
constexpr int kPad = 8;         // 2-byte words of padding per shared-memory row: fragment loads hit 32 banks

unsigned blocks_for(size_t n, unsigned per) { return (unsigned)((n + per - 1) / per); }

// 4 elements of a row as 2-byte words of type ty: from floats (16-byte aligned), or words as they are (8-byte aligned)
__device__ __forceinline__ void words4_at(uint16_t w[4], const float *src, int ty) {
    const float4 v = *reinterpret_cast<const float4 *>(src);
    w[0] = zt_f32_to_bits16(v.x, ty), w[1] = zt_f32_to_bits16(v.y, ty);
    w[2] = zt_f32_to_bits16(v.z, ty), w[3] = zt_f32_to_bits16(v.w, ty);
}
__device__ __forceinline__ void words4_at(uint16_t w[4], const uint16_t *src, int ty) {
    (void)ty;
    const uint2 v = *reinterpret_cast<const uint2 *>(src);
    w[0] = (uint16_t)(v.x & 0xffffu), w[1] = (uint16_t)(v.x >> 16), w[2] = (uint16_t)(v.y & 0xffffu);
    w[3] = (uint16_t)(v.y >> 16);
}

// rows r0 .. r0 + kTile - 1 of one head's HS columns at src (rows `stride` elements apart: floats, or the 2-byte words
// of type ty a lazy unpack left) into shared memory as 2-byte words, rows at or past T as zeros: natural
// dst[r * (HS + kPad) + d] or transposed dst[d * (kTile + kPad) + r]
template <int HS, bool TR, typename S>
__device__ void load16(uint16_t *dst, const S *src, size_t stride, int r0, int T, int ty) {
    for (int idx = threadIdx.x; idx < kTile * (HS / 4); idx += kTcThreads) {
        const int r = TR ? idx % kTile : idx / (HS / 4), d4 = TR ? idx / kTile : idx % (HS / 4);
        uint16_t w[4] = {0, 0, 0, 0};
        if (r0 + r < T) words4_at(w, src + (size_t)(r0 + r) * stride + 4 * d4, ty);
        if constexpr (TR) {
            ZT_UNROLL
            for (int i = 0; i < 4; i++) dst[(4 * d4 + i) * (kTile + kPad) + r] = w[i];
        } else {
            uint32_t *d = reinterpret_cast<uint32_t *>(dst + r * (HS + kPad) + 4 * d4);
            d[0] = (uint32_t)w[0] | (uint32_t)w[1] << 16;
            d[1] = (uint32_t)w[2] | (uint32_t)w[3] << 16;
        }
    }
}

// a tile load16 read from floats written back as its words' values (a round_to fused into the kernel: the rounding
// to nearest even of the conversion), and the words themselves at the same element offsets of dst16 (may be null):
// rows r0 .. below T, from natural sm[r * (HS + kPad) + d] or transposed sm[d * (kTile + kPad) + r]
template <int HS, bool TR>
__device__ void store_back(float *dst, uint16_t *dst16, const uint16_t *sm, size_t stride, int r0, int T, int ty) {
    for (int idx = threadIdx.x; idx < kTile * HS; idx += kTcThreads) {
        const int r = idx / HS, d = idx % HS;
        if (r0 + r >= T) continue;
        const uint16_t w = TR ? sm[d * (kTile + kPad) + r] : sm[r * (HS + kPad) + d];
        const size_t at = (size_t)(r0 + r) * stride + d;
        dst[at] = zt_bits16_to_f32(w, ty);
        if (dst16) dst16[at] = w;
    }
}

// the 32-bit word (two adjacent 2-byte values) at row r, column c (even) of a shared array with `ld` words per row
__device__ __forceinline__ uint32_t word(const uint16_t *base, int ld, int r, int c) {
    return *reinterpret_cast<const uint32_t *>(base + r * ld + c);
}

// A fragment of rows r0 .. r0 + 15, columns c0 .. c0 + 15 (zt_mma.cuh's layout)
__device__ __forceinline__ void frag_a(uint32_t a[4], const uint16_t *base, int ld, int r0, int c0) {
    const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    ZT_UNROLL
    for (int r = 0; r < 4; r++) a[r] = word(base, ld, r0 + g + 8 * (r % 2), c0 + 2 * t + 8 * (r / 2));
}
// B fragment (k = c0 .. c0 + 15, n = n0 .. n0 + 7) from an array holding B transposed: row n, columns k
__device__ __forceinline__ void frag_b(uint32_t b[2], const uint16_t *base, int ld, int n0, int c0) {
    const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    b[0] = word(base, ld, n0 + g, c0 + 2 * t);
    b[1] = word(base, ld, n0 + g, c0 + 8 + 2 * t);
}

// the A fragments of warp w's 16 rows (16 w ..) of a tile held natural in shared memory, KS 16-wide steps
template <int KS>
__device__ __forceinline__ void warp_frags(uint32_t (*a)[4], const uint16_t *tile, int ld) {
    ZT_UNROLL
    for (int ks = 0; ks < KS; ks++) frag_a(a[ks], tile, ld, 16 * (int)(threadIdx.x / 32), 16 * ks);
}

// The two products every kernel here is made of, for a warp's 16 rows:
// a 16 x 8 block of A B^T: acc = the sum over KS 16-wide steps of A's fragments a[ks] times B's rows n0 .. n0 + 7
// (Bs holds B as rows of k, ld words apart)
template <int KS, bool FP16>
__device__ __forceinline__ void tile_dot(float acc[4], const uint32_t (*a)[4], const uint16_t *Bs, int ld, int n0) {
    ZT_UNROLL
    for (int r = 0; r < 4; r++) acc[r] = 0.0f;
    ZT_UNROLL
    for (int ks = 0; ks < KS; ks++) {
        uint32_t bf[2];
        frag_b(bf, Bs, ld, n0, 16 * ks);
        zt_mma16816<FP16>(acc, a[ks], bf, acc);
    }
}
// out (16 x 8 NT) += X (16 x 64, the accumulators of 8 n-tiles, each rounded to the 2-byte type as an A fragment)
// times a 64 x 8 NT matrix held transposed in Bt (row n, 64 columns k, lt words apart)
template <int NT, bool FP16>
__device__ __forceinline__ void acc_times(float (*out)[4], const float (*x)[4], const uint16_t *Bt, int lt) {
    ZT_UNROLL
    for (int ks = 0; ks < kTile / 16; ks++) {
        uint32_t xa[4];
        zt_mma_acc_to_a<FP16>(xa, x[2 * ks], x[2 * ks + 1]);
        ZT_UNROLL
        for (int n = 0; n < NT; n++) {
            uint32_t bf[2];
            frag_b(bf, Bt, lt, 8 * n, 16 * ks);
            zt_mma16816<FP16>(out[n], xa, bf, out[n]);
        }
    }
}

// two adjacent outputs at dst[at], dst[at + 1] rounded to prec, and their words when dst16
__device__ __forceinline__ void store2(float *dst, uint16_t *dst16, size_t at, float a, float b, int prec) {
    a = zt_round_prec(a, prec);
    b = zt_round_prec(b, prec);
    if (dst) *reinterpret_cast<float2 *>(dst + at) = make_float2(a, b); // null: the words alone
    if (dst16)
        *reinterpret_cast<uint32_t *>(dst16 + at) =
            (uint32_t)zt_f32_to_bits16(a, prec) | (uint32_t)zt_f32_to_bits16(b, prec) << 16;
}

// max / sum over the 4 lanes that share a fragment row (t = lane % 4)
__device__ __forceinline__ float quad_max(float v) {
    v = fmaxf(v, __shfl_xor_sync(kFull, v, 1));
    return fmaxf(v, __shfl_xor_sync(kFull, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
    v += __shfl_xor_sync(kFull, v, 1);
    return v + __shfl_xor_sync(kFull, v, 2);
}

template <int HS>
constexpr int fwd_smem_bytes() { return 2 * (2 * kTile * (HS + kPad) + HS * (kTile + kPad)); }

// in_round: qkv's round_to fused here (its values rounded as loaded): block (query tile i, head h) writes its q tile
// back rounded, and for the first head of a group the k and v tile i (its diagonal); qkv16 (may be null) gets their
// words too. Other blocks may read those tiles meanwhile: old or new values round to the same words.
// Q: qkv's element, float or (the product before it handed over its words alone) uint16_t: then no in_round
template <int HS, bool FP16, typename Q>
__global__ void __launch_bounds__(kTcThreads, 1)
    attn_tc_fwd_kernel(float *out, uint16_t *out16, float *stats, const Q *qkv, uint16_t *qkv16, int in_round, int T,
                       int C, int NH, int NKV, float scale, int prec) {
    constexpr int LD = HS + kPad, LT = kTile + kPad, NT = HS / 8, KS = HS / 16;
    constexpr int TY = FP16 ? ZT_PREC_FP16 : ZT_PREC_BF16; // the inputs' 2-byte type (prec only rounds the outputs)
    uint16_t *Qs = ZT_DYNAMIC_SMEM(uint16_t); // [64][LD]
    uint16_t *Ks = Qs + kTile * LD;           // [64][LD]
    uint16_t *Vt = Ks + kTile * LD;           // [HS][LT]
    const int q0 = blockIdx.x * kTile, h = blockIdx.y, b = blockIdx.z, KV = NKV * HS, W = C + 2 * KV;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const Q *seq = qkv + (size_t)b * T * W;
    // in_round (float qkv only): the floats written back rounded
    float *back = in_round ? const_cast<float *>(reinterpret_cast<const float *>(seq)) : nullptr;
    const size_t qo = (size_t)h * HS, ko = C + (size_t)(h / (NH / NKV)) * HS; // q's and k's columns; v's: ko + KV
    const Q *qb = seq + qo, *kb = seq + ko, *vb = kb + KV;
    uint16_t *seq16 = qkv16 ? qkv16 + (size_t)b * T * W : nullptr;
    load16<HS, false>(Qs, qb, W, q0, T, TY);
    __syncthreads();
    if (back) store_back<HS, false>(back + qo, seq16 ? seq16 + qo : nullptr, Qs, W, q0, T, TY);
    uint32_t qa[KS][4];
    warp_frags<KS>(qa, Qs, LD);
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f}, o[NT][4] = {};
    const int row0 = q0 + 16 * warp + g; // this lane's rows: row0 (c[0], c[1]) and row0 + 8 (c[2], c[3])
    const int last = min(q0 + kTile, T) - 1;
    for (int k0 = 0; k0 <= last; k0 += kTile) {
        __syncthreads(); // the previous tile's readers of Ks, Vt are done
        load16<HS, false>(Ks, kb, W, k0, T, TY);
        load16<HS, true>(Vt, vb, W, k0, T, TY);
        __syncthreads();
        if (back && k0 == q0 && h % (NH / NKV) == 0) {
            store_back<HS, false>(back + ko, seq16 ? seq16 + ko : nullptr, Ks, W, k0, T, TY);
            store_back<HS, true>(back + ko + KV, seq16 ? seq16 + ko + KV : nullptr, Vt, W, k0, T, TY);
        }
        float s[8][4];
        ZT_UNROLL
        for (int j = 0; j < 8; j++) tile_dot<KS, FP16>(s[j], qa, Ks, LD, 8 * j);
        float mx[2] = {-INFINITY, -INFINITY};
        ZT_UNROLL
        for (int j = 0; j < 8; j++)
            ZT_UNROLL
            for (int r = 0; r < 4; r++) {
                const int row = row0 + 8 * (r / 2), key = k0 + 8 * j + 2 * t + r % 2;
                s[j][r] = key <= row ? s[j][r] * scale : -INFINITY;
                mx[r / 2] = fmaxf(mx[r / 2], s[j][r]);
            }
        float alpha[2], ps[2] = {0.0f, 0.0f};
        ZT_UNROLL
        for (int i = 0; i < 2; i++) {
            const float mnew = fmaxf(m[i], quad_max(mx[i])); // finite: key 0 is in every row's first tile
            alpha[i] = m[i] == -INFINITY ? 0.0f : zt_expf(m[i] - mnew);
            m[i] = mnew;
        }
        ZT_UNROLL
        for (int j = 0; j < 8; j++)
            ZT_UNROLL
            for (int r = 0; r < 4; r++) {
                const int i = r / 2;
                s[j][r] = s[j][r] == -INFINITY ? 0.0f : zt_expf(s[j][r] - m[i]); // now p
                ps[i] += s[j][r];
            }
        ZT_UNROLL
        for (int i = 0; i < 2; i++) l[i] = l[i] * alpha[i] + quad_sum(ps[i]);
        ZT_UNROLL
        for (int n = 0; n < NT; n++)
            ZT_UNROLL
            for (int r = 0; r < 4; r++) o[n][r] *= alpha[r / 2];
        acc_times<NT, FP16>(o, s, Vt, LT); // o += p v
    }
    ZT_UNROLL
    for (int i = 0; i < 2; i++) {
        const int row = row0 + 8 * i;
        if (row >= T) continue;
        const float inv = 1.0f / l[i];
        const size_t at = ((size_t)b * T + row) * C + (size_t)h * HS + 2 * t;
        ZT_UNROLL
        for (int n = 0; n < NT; n++) store2(out, out16, at + 8 * n, o[n][2 * i] * inv, o[n][2 * i + 1] * inv, prec);
        if (t == 0) {
            float *st = stats + (((size_t)b * NH + h) * T + row) * 2;
            st[0] = m[i];
            st[1] = inv;
        }
    }
}

template <int HS>
constexpr int bwd_smem_bytes() { return 2 * (4 * kTile * (HS + kPad) + 2 * HS * (kTile + kPad)) + 3 * kTile * 4; }

// Q: qkv's element, float or (read from a lazy unpack's words) uint16_t
template <int HS, bool FP16, typename Q>
__global__ void __launch_bounds__(kTcThreads, 1)
    attn_tc_dkdv_kernel(float *dqkv, uint16_t *dqkv16, const float *dout, const uint16_t *dout16, const Q *qkv,
                        const float *stats, const float *D, int T, int C, int NH, int NKV, float scale, int prec) {
    constexpr int LD = HS + kPad, LT = kTile + kPad, NT = HS / 8, KS = HS / 16;
    constexpr int TY = FP16 ? ZT_PREC_FP16 : ZT_PREC_BF16; // the inputs' 2-byte type (prec only rounds the outputs)
    uint16_t *Ks = ZT_DYNAMIC_SMEM(uint16_t); // [64 keys][LD]
    uint16_t *Vs = Ks + kTile * LD;           // [64 keys][LD]
    uint16_t *Qs = Vs + kTile * LD;           // [64 rows][LD]
    uint16_t *dOs = Qs + kTile * LD;          // [64 rows][LD]
    uint16_t *Qt = dOs + kTile * LD;          // [HS][LT rows]
    uint16_t *dOt = Qt + HS * LT;             // [HS][LT rows]
    float *st = reinterpret_cast<float *>(dOt + HS * LT); // m, 1 / l, D of the query tile's rows: [3][64]
    const int k0 = blockIdx.x * kTile, kh = blockIdx.y, b = blockIdx.z, G = NH / NKV, KV = NKV * HS;
    const int W = C + 2 * KV, warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const Q *seq = qkv + (size_t)b * T * W;
    const Q *kb = seq + C + (size_t)kh * HS, *vb = kb + KV;
    load16<HS, false>(Ks, kb, W, k0, T, TY);
    load16<HS, false>(Vs, vb, W, k0, T, TY);
    __syncthreads();
    uint32_t ka[KS][4], va[KS][4];
    warp_frags<KS>(ka, Ks, LD);
    warp_frags<KS>(va, Vs, LD);
    const int key0 = k0 + 16 * warp + g; // this lane's keys: key0 (c[0], c[1]) and key0 + 8 (c[2], c[3])
    float dk[NT][4] = {}, dv[NT][4] = {};
    for (int h = kh * G; h < (kh + 1) * G; h++) { // the group's query heads in order
        const Q *qb = seq + (size_t)h * HS;
        const size_t doff = (size_t)b * T * C + (size_t)h * HS; // dout's head h (floats, or words: dout16)
        const size_t srow = ((size_t)b * NH + h) * T;
        for (int q0 = k0; q0 < T; q0 += kTile) { // query tiles from the diagonal on
            __syncthreads();
            load16<HS, false>(Qs, qb, W, q0, T, TY);
            load16<HS, true>(Qt, qb, W, q0, T, TY);
            if (dout16) {
                load16<HS, false>(dOs, dout16 + doff, C, q0, T, TY);
                load16<HS, true>(dOt, dout16 + doff, C, q0, T, TY);
            } else {
                load16<HS, false>(dOs, dout + doff, C, q0, T, TY);
                load16<HS, true>(dOt, dout + doff, C, q0, T, TY);
            }
            for (int r = threadIdx.x; r < kTile; r += kTcThreads) {
                const bool ok = q0 + r < T;
                st[r] = ok ? stats[(srow + q0 + r) * 2] : 0.0f;
                st[kTile + r] = ok ? stats[(srow + q0 + r) * 2 + 1] : 0.0f;
                st[2 * kTile + r] = ok ? D[srow + q0 + r] : 0.0f;
            }
            __syncthreads();
            // p^T and ds^T of this warp's 16 keys x the tile's 64 query rows (n-tile j: rows 8j .. 8j + 7)
            float p[8][4], ds[8][4];
            ZT_UNROLL
            for (int j = 0; j < 8; j++) {
                tile_dot<KS, FP16>(p[j], ka, Qs, LD, 8 * j);   // s^T
                tile_dot<KS, FP16>(ds[j], va, dOs, LD, 8 * j); // dp^T
                ZT_UNROLL
                for (int r = 0; r < 4; r++) {
                    const int rr = 8 * j + 2 * t + r % 2, row = q0 + rr, key = key0 + 8 * (r / 2);
                    const float pv = row < T && key <= row ? zt_expf(p[j][r] * scale - st[rr]) * st[kTile + rr] : 0.0f;
                    p[j][r] = pv;
                    ds[j][r] = pv * (ds[j][r] - st[2 * kTile + rr]) * scale;
                }
            }
            acc_times<NT, FP16>(dv, p, dOt, LT); // dv += p^T dout, over the tile's query rows
            acc_times<NT, FP16>(dk, ds, Qt, LT); // dk += ds^T q
        }
    }
    ZT_UNROLL
    for (int i = 0; i < 2; i++) {
        const int key = key0 + 8 * i;
        if (key >= T) continue;
        const size_t at = ((size_t)b * T + key) * W + C + (size_t)kh * HS + 2 * t;
        ZT_UNROLL
        for (int n = 0; n < NT; n++) {
            store2(dqkv, dqkv16, at + 8 * n, dk[n][2 * i], dk[n][2 * i + 1], prec);
            store2(dqkv, dqkv16, at + KV + 8 * n, dv[n][2 * i], dv[n][2 * i + 1], prec);
        }
    }
}

template <int HS>
constexpr int dq_smem_bytes() { return 2 * (4 * kTile * (HS + kPad) + HS * (kTile + kPad)); }

// dq: block (query tile of 64, query head, sequence); warp w owns query rows 16w .. 16w + 15 and keeps their q and
// dout fragments, their m, 1 / l and D, and the dq accumulator; key tiles of 64 from 0 to the diagonal pass through
// shared memory (k and v natural for s = q k^T and dp = dout v^T, k transposed for dq += ds k). p and ds are
// recomputed as the dk / dv kernel computes them (the same products, the same formula), ds rounded to the 2-byte
// type as it enters the product
template <int HS, bool FP16, typename Q>
__global__ void __launch_bounds__(kTcThreads, 1)
    attn_tc_dq_kernel(float *dqkv, uint16_t *dqkv16, float *dout, const uint16_t *dout16, const Q *qkv,
                      const float *stats, const float *D, int T, int C, int NH, int NKV, float scale, int prec,
                      int in_round) {
    constexpr int LD = HS + kPad, LT = kTile + kPad, NT = HS / 8, KS = HS / 16;
    constexpr int TY = FP16 ? ZT_PREC_FP16 : ZT_PREC_BF16;
    uint16_t *Qs = ZT_DYNAMIC_SMEM(uint16_t); // [64 rows][LD]
    uint16_t *dOs = Qs + kTile * LD;          // [64 rows][LD]
    uint16_t *Ks = dOs + kTile * LD;          // [64 keys][LD]
    uint16_t *Vs = Ks + kTile * LD;           // [64 keys][LD]
    uint16_t *Kt = Vs + kTile * LD;           // [HS][LT keys]
    const int q0 = blockIdx.x * kTile, h = blockIdx.y, b = blockIdx.z, KV = NKV * HS, W = C + 2 * KV;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const Q *seq = qkv + (size_t)b * T * W;
    const Q *qb = seq + (size_t)h * HS, *kb = seq + C + (size_t)(h / (NH / NKV)) * HS, *vb = kb + KV;
    load16<HS, false>(Qs, qb, W, q0, T, TY);
    if (dout16) load16<HS, false>(dOs, dout16 + (size_t)b * T * C + (size_t)h * HS, C, q0, T, TY);
    else load16<HS, false>(dOs, dout + (size_t)b * T * C + (size_t)h * HS, C, q0, T, TY);
    __syncthreads();
    // in_round: dout's round_to fused here (D and the dk / dv kernel, before, rounded it as they loaded it): this
    // block's tile of it written back rounded; no other block of this launch reads it
    if (in_round) store_back<HS, false>(dout + (size_t)b * T * C + (size_t)h * HS, nullptr, dOs, C, q0, T, TY);
    uint32_t qa[KS][4], da[KS][4];
    warp_frags<KS>(qa, Qs, LD);
    warp_frags<KS>(da, dOs, LD);
    const int row0 = q0 + 16 * warp + g; // this lane's rows: row0 (c[0], c[1]) and row0 + 8 (c[2], c[3])
    float m[2], il[2], dd[2];
    ZT_UNROLL
    for (int i = 0; i < 2; i++) {
        const int row = row0 + 8 * i;
        const size_t sr = ((size_t)b * NH + h) * T + row;
        m[i] = row < T ? stats[sr * 2] : 0.0f;
        il[i] = row < T ? stats[sr * 2 + 1] : 0.0f;
        dd[i] = row < T ? D[sr] : 0.0f;
    }
    float dq[NT][4] = {};
    const int last = min(q0 + kTile, T) - 1;
    for (int k0 = 0; k0 <= last; k0 += kTile) {
        __syncthreads(); // the previous tile's readers are done
        load16<HS, false>(Ks, kb, W, k0, T, TY);
        load16<HS, false>(Vs, vb, W, k0, T, TY);
        load16<HS, true>(Kt, kb, W, k0, T, TY);
        __syncthreads();
        float ds[8][4];
        ZT_UNROLL
        for (int j = 0; j < 8; j++) {
            float s[4], dp[4];
            tile_dot<KS, FP16>(s, qa, Ks, LD, 8 * j);
            tile_dot<KS, FP16>(dp, da, Vs, LD, 8 * j);
            ZT_UNROLL
            for (int r = 0; r < 4; r++) {
                const int i = r / 2, row = row0 + 8 * i, key = k0 + 8 * j + 2 * t + r % 2;
                const float pv = row < T && key <= row ? zt_expf(s[r] * scale - m[i]) * il[i] : 0.0f;
                ds[j][r] = pv * (dp[r] - dd[i]) * scale;
            }
        }
        acc_times<NT, FP16>(dq, ds, Kt, LT); // dq += ds k
    }
    ZT_UNROLL
    for (int i = 0; i < 2; i++) {
        const int row = row0 + 8 * i;
        if (row >= T) continue;
        const size_t at = ((size_t)b * T + row) * W + (size_t)h * HS + 2 * t;
        ZT_UNROLL
        for (int n = 0; n < NT; n++) store2(dqkv, dqkv16, at + 8 * n, dq[n][2 * i], dq[n][2 * i + 1], prec);
    }
}


template <int HS, bool FP16, typename Q>
void fwd_on(cudaStream_t s, float *out, uint16_t *out16, float *stats, const Q *qkv, uint16_t *qkv16, int in_round,
            int B, int T, int C, int NH, int NKV, float scale, int prec) {
    static bool optin = false;
    zt_cu_smem_optin(attn_tc_fwd_kernel<HS, FP16, Q>, fwd_smem_bytes<HS>(), &optin, "attn_tc_fwd_kernel");
    // qkv is written only when in_round (rounded in place, as the round_to fused here would have)
    ZT_LAUNCH((attn_tc_fwd_kernel<HS, FP16, Q>), dim3(blocks_for(T, kTile), NH, B), kTcThreads, fwd_smem_bytes<HS>(),
              s, out, out16, stats, qkv, qkv16, in_round, T, C, NH, NKV, scale, prec);
    ZT_CUDA_LAUNCH_CHECK("attn_tc_fwd_kernel");
}
// qkv_words: qkv read as these words instead of its floats when given
template <int HS, bool FP16>
void fwd(cudaStream_t s, float *out, uint16_t *out16, float *stats, const float *qkv, const uint16_t *qkv_words,
         uint16_t *qkv16, int in_round, int B, int T, int C, int NH, int NKV, float scale, int prec) {
    if (qkv_words) fwd_on<HS, FP16>(s, out, out16, stats, qkv_words, qkv16, in_round, B, T, C, NH, NKV, scale, prec);
    else fwd_on<HS, FP16>(s, out, out16, stats, qkv, qkv16, in_round, B, T, C, NH, NKV, scale, prec);
}

template <int HS, bool FP16, typename Q>
void bwd_on(cudaStream_t s, float *dqkv, uint16_t *dqkv16, const float *D, const float *dout, const uint16_t *dout16,
            const Q *qkv, const float *stats, int B, int T, int C, int NH, int NKV, float scale, int prec,
            int in_round) {
    static bool optin = false, optin_dq = false;
    zt_cu_smem_optin(attn_tc_dkdv_kernel<HS, FP16, Q>, bwd_smem_bytes<HS>(), &optin, "attn_tc_dkdv_kernel");
    ZT_LAUNCH((attn_tc_dkdv_kernel<HS, FP16, Q>), dim3(blocks_for(T, kTile), NKV, B), kTcThreads, bwd_smem_bytes<HS>(),
              s, dqkv, dqkv16, dout, dout16, qkv, stats, D, T, C, NH, NKV, scale, prec);
    ZT_CUDA_LAUNCH_CHECK("attn_tc_dkdv_kernel");
    zt_cu_smem_optin(attn_tc_dq_kernel<HS, FP16, Q>, dq_smem_bytes<HS>(), &optin_dq, "attn_tc_dq_kernel");
    // dout is written only when in_round (rounded in place, as the round_to fused here would have)
    ZT_LAUNCH((attn_tc_dq_kernel<HS, FP16, Q>), dim3(blocks_for(T, kTile), NH, B), kTcThreads, dq_smem_bytes<HS>(), s,
              dqkv, dqkv16, const_cast<float *>(dout), dout16, qkv, stats, D, T, C, NH, NKV, scale, prec, in_round);
    ZT_CUDA_LAUNCH_CHECK("attn_tc_dq_kernel");
}

// qkv16: qkv's words, read instead of its floats when given; dout16: dout's
template <int HS, bool FP16>
void bwd(cudaStream_t s, float *dqkv, uint16_t *dqkv16, const float *D, const float *dout, const uint16_t *dout16,
         const float *qkv, const uint16_t *qkv16, const float *stats, int B, int T, int C, int NH, int NKV, float scale,
         int prec, int in_round) {
    if (qkv16)
        bwd_on<HS, FP16>(s, dqkv, dqkv16, D, dout, dout16, qkv16, stats, B, T, C, NH, NKV, scale, prec, in_round);
    else bwd_on<HS, FP16>(s, dqkv, dqkv16, D, dout, dout16, qkv, stats, B, T, C, NH, NKV, scale, prec, in_round);
}

} // namespace

void zt_cu_attn_tc_fwd(cudaStream_t s, float *out, float *stats, const float *qkv, int B, int T, int C, int NH, int NKV,
                       float scale, int prec, int tc, uint16_t *out16, int in_round, uint16_t *qkv16,
                       const uint16_t *qkv_words) {
    const int hs = C / NH;
    ZT_ASSERT((tc == ZT_PREC_BF16 || tc == ZT_PREC_FP16) && (hs == 32 || hs == 64));
    ZT_ASSERT((!in_round || in_round == tc) && (!qkv16 || in_round)); // rounded to the type of the conversion
    ZT_ASSERT(!qkv_words || !in_round);                                // words are rounded already
    const bool h16 = tc == ZT_PREC_FP16;
    if (hs == 64)
        (h16 ? fwd<64, true> : fwd<64, false>)(s, out, out16, stats, qkv, qkv_words, qkv16, in_round, B, T, C, NH,
                                                NKV, scale, prec);
    else (h16 ? fwd<32, true> : fwd<32, false>)(s, out, out16, stats, qkv, qkv_words, qkv16, in_round, B, T, C, NH,
                                                 NKV, scale, prec);
}

void zt_cu_attn_tc_bwd(cudaStream_t s, float *dqkv, const float *D, const float *dout, const float *qkv,
                       const float *stats, int B, int T, int C, int NH, int NKV, float scale, int prec, int tc,
                       uint16_t *dqkv16, const uint16_t *qkv16, int in_round, const uint16_t *dout16) {
    const int hs = C / NH;
    ZT_ASSERT((tc == ZT_PREC_BF16 || tc == ZT_PREC_FP16) && (hs == 32 || hs == 64));
    ZT_ASSERT(!in_round || in_round == tc); // rounded to the type of the conversion
    ZT_ASSERT(!dout16 || !in_round);
    const bool h16 = tc == ZT_PREC_FP16;
    if (hs == 64)
        (h16 ? bwd<64, true> : bwd<64, false>)(s, dqkv, dqkv16, D, dout, dout16, qkv, qkv16, stats, B, T, C, NH, NKV,
                                                scale, prec, in_round);
    else (h16 ? bwd<32, true> : bwd<32, false>)(s, dqkv, dqkv16, D, dout, dout16, qkv, qkv16, stats, B, T, C, NH,
                                                 NKV, scale, prec, in_round);
}

} // namespace ZT_CU_NS
