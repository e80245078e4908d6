// kernels_attn_fused.cu — causal self-attention that keeps no (T, T) matrix ("fused", flash-style): the
// optional slots attention_fused_fwd / attention_fused_bwd of src/iface/backend.h, for head sizes 32 and 64
// (zt_attention_fused_hs_ok). The materialized attention (kernels_norm_attn.cu) writes scores and
// probabilities of B * NH * T * T floats per layer and reads them back; for GPT-2 124M at 16 x 1024 tokens
// that is 0.8 GB per layer and most of the step's attention time on an H200 (docs/gpu-status.md).
//
// Grouped-query attention (NKV key / value heads, G = NH / NKV query heads each; iface/backend.h's qkv layout):
// query head h reads key / value head h / G; G == 1 is multi-head attention, with the same arithmetic.
// Forward, one block per (query tile of 64 rows, query head, sequence): the query tile stays in shared memory,
// key / value tiles of 64 from 0 to the diagonal stream through it; each row keeps a running maximum m and
// sum l of exp(s - m) (online softmax) and rescales its output when m grows. It writes out and, per row, the
// final m and 1 / l (stats (B, NH, T, 2)): the backward recomputes each probability as
// zt_expf(s - m) * (1 / l), the cpu backend's softmax formula on the same maximum.
// Backward, without atomics (every output element is summed by one thread in a fixed order):
//   1. D_t = dout_t . out_t per row (one warp per row), into the scratch;
//   2. one block per (key tile of 64, key / value head): dk and dv for its keys, summed over the group's query
//      heads in order and, for each, over query tiles of 32 from the diagonal on, rows in order (the cpu
//      backend's order: heads, then t ascending), and each query row's part of dq from these 64 keys, written
//      to the scratch (B, NH, key tiles, T, hs) (zt_attention_fused_scratch);
//   3. dq = the sum of a row's parts over key tiles 0 .. its own, in order (one thread per 4 columns).
// No atomics and no recomputation: 5 tile products, as a flash attention with atomic dq has; the parts cost
// B NH T^2 hs / 64 floats of scratch (GPT-2 124M at 16 x 1024 tokens: 0.8 GB, one layer at a time). (One
// block per query tile recomputing p and dp for dq instead takes 7 products: 54 ms of a 124M step on an H200.)
// Every product is a register-tiled fp32 GEMM on shared memory: 256 threads, thread (ty, tx) = (tid / 16,
// tid % 16) owns a 4 x 4 (or 2 x 4) block of its tile and reads its operands as float4 / float2 from
// layouts where they are contiguous (a tile and, where a product sums over its rows, its transpose; the
// transposes are written with lanes over rows, so the stores do not conflict). The 16 threads of a tile row
// are 16 consecutive lanes: row maxima and sums are xor shuffles over 1, 2, 4, 8.
// Arithmetic is fp32 in every precision, as the materialized attention. (32 x 32 tiles with 2 x 4 blocks
// and scalar loads run at about the speed of the materialized attention on an H200.)
#include <math.h>
#include <stdlib.h>


#include "cuda_ops.h"
#include "iface/backend.h"
#include "iface/op_math.h"

#include "cuda_check.h"

namespace ZT_CU_NS {
namespace {

#define AF_LAUNCH_CHECK(what) ZT_CUDA_LAUNCH_CHECK(what)

constexpr unsigned kFull = 0xffffffffu;
constexpr int kThreads = 256; // (ty, tx) = (tid / 16, tid % 16)
constexpr int kDWarps = 4;    // D kernel: rows (warps) per block

unsigned blocks_for(size_t n, unsigned per) { return (unsigned)((n + per - 1) / per); }

// max / sum over the 16 lanes of a tile row (xor within aligned groups of 16 lanes)
__device__ __forceinline__ float row_max(float v) {
    for (int o = 1; o < 16; o <<= 1) v = fmaxf(v, __shfl_xor_sync(kFull, v, o));
    return v;
}
__device__ __forceinline__ float row_sum(float v) {
    for (int o = 1; o < 16; o <<= 1) v += __shfl_xor_sync(kFull, v, o);
    return v;
}

// N (2 or 4) consecutive floats from 8- / 16-byte aligned memory
template <int N>
__device__ __forceinline__ void ldv(float *r, const float *p) {
    if constexpr (N == 4) {
        const float4 v = *reinterpret_cast<const float4 *>(p);
        r[0] = v.x; r[1] = v.y; r[2] = v.z; r[3] = v.w;
    } else {
        static_assert(N == 2, "ldv: 2 or 4");
        const float2 v = *reinterpret_cast<const float2 *>(p);
        r[0] = v.x; r[1] = v.y;
    }
}
template <int N>
__device__ __forceinline__ void stv(float *p, const float *r) {
    if constexpr (N == 4) *reinterpret_cast<float4 *>(p) = make_float4(r[0], r[1], r[2], r[3]);
    else *reinterpret_cast<float2 *>(p) = make_float2(r[0], r[1]);
}

// R rows r0 .. r0 + R - 1 of one head's HS columns at src (rows `stride` floats apart, 16-byte aligned) into
// shared memory, rows at or past T as zeros: natural dst[r * HS + d], or transposed dst[d * R + r] (lanes over
// rows: conflict-free stores)
template <int HS, int R, bool TR>
__device__ void load_tile(float *dst, const float *src, size_t stride, int r0, int T) {
    for (int idx = threadIdx.x; idx < R * (HS / 4); idx += kThreads) {
        const int r = TR ? idx % R : idx / (HS / 4), d4 = TR ? idx / R : idx % (HS / 4);
        float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (r0 + r < T) v = *reinterpret_cast<const float4 *>(src + (size_t)(r0 + r) * stride + 4 * d4);
        if constexpr (TR) {
            dst[(4 * d4 + 0) * R + r] = v.x;
            dst[(4 * d4 + 1) * R + r] = v.y;
            dst[(4 * d4 + 2) * R + r] = v.z;
            dst[(4 * d4 + 3) * R + r] = v.w;
        } else {
            *reinterpret_cast<float4 *>(dst + r * HS + 4 * d4) = v;
        }
    }
}
template <int HS, int R>
__device__ void load_nat(float *dst, const float *src, size_t stride, int r0, int T) {
    load_tile<HS, R, false>(dst, src, stride, r0, T);
}
template <int HS, int R>
__device__ void load_tr(float *dst, const float *src, size_t stride, int r0, int T) {
    load_tile<HS, R, true>(dst, src, stride, r0, T);
}

// acc[i][j] += sum over k < K of x[k * LX + xi + i] * y[k * LY + yj + j] (k in order): every tile product. The
// scores sum over head dimensions d of transposed tiles (x = QsT, y = KsT: K = HS); the outputs over rows or keys
// of natural ones
template <int K, int LX, int LY, int NI, int NJ>
__device__ __forceinline__ void outer_acc(float (*acc)[NJ], const float *x, const float *y, int xi, int yj) {
    for (int k = 0; k < K; k++) {
        float a[NI], b[NJ];
        ldv<NI>(a, x + k * LX + xi);
        ldv<NJ>(b, y + k * LY + yj);
        for (int i = 0; i < NI; i++)
            for (int j = 0; j < NJ; j++) acc[i][j] += a[i] * b[j];
    }
}

constexpr int kFwdRows = 64, kFwdKeys = 64;

template <int HS>
constexpr int fwd_smem_floats() { return HS * kFwdRows + 2 * HS * kFwdKeys + kFwdKeys * kFwdRows; }

// forward: block (query tile, head, sequence); thread (ty, tx) owns rows 4ty .. 4ty + 3 of the tile, their
// scores with keys 4tx .. 4tx + 3 of each key tile, and output columns DPT tx .. DPT tx + DPT - 1
template <int HS>
__global__ void __launch_bounds__(kThreads)
    attn_fused_fwd_kernel(float *out, uint16_t *out16, float *stats, const float *qkv, int T, int C, int NH, int NKV,
                          float scale, int prec) {
    constexpr int DPT = HS / 16;
    float *QsT = ZT_DYNAMIC_SMEM(float);     // [HS][64]
    float *KsT = QsT + HS * kFwdRows;        // [HS][64]
    float *Vs = KsT + HS * kFwdKeys;         // [64][HS]
    float *PsT = Vs + kFwdKeys * HS;         // [64 keys][64 rows]
    const int q0 = blockIdx.x * kFwdRows, h = blockIdx.y, b = blockIdx.z, KV = NKV * HS, W = C + 2 * KV;
    const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
    const float *seq = qkv + (size_t)b * T * W; // query head h, key / value head h / G
    const float *qb = seq + (size_t)h * HS, *kb = seq + C + (size_t)(h / (NH / NKV)) * HS, *vb = kb + KV;
    load_tr<HS, kFwdRows>(QsT, qb, W, q0, T);
    float m[4], l[4], o[4][DPT];
    for (int i = 0; i < 4; i++) {
        m[i] = -INFINITY;
        l[i] = 0.0f;
        for (int j = 0; j < DPT; j++) o[i][j] = 0.0f;
    }
    const int last = min(q0 + kFwdRows, T) - 1; // the tile's last row: keys 0 .. last
    for (int k0 = 0; k0 <= last; k0 += kFwdKeys) {
        __syncthreads(); // the previous tile's readers of KsT, Vs, PsT are done
        load_tr<HS, kFwdKeys>(KsT, kb, W, k0, T);
        load_nat<HS, kFwdKeys>(Vs, vb, W, k0, T);
        __syncthreads();
        float s[4][4] = {};
        outer_acc<HS, kFwdRows, kFwdKeys, 4, 4>(s, QsT, KsT, 4 * ty, 4 * tx);
        float p[4][4];
        for (int i = 0; i < 4; i++) {
            const int r = q0 + 4 * ty + i;
            float mx = -INFINITY;
            for (int j = 0; j < 4; j++) {
                s[i][j] = k0 + 4 * tx + j <= r ? s[i][j] * scale : -INFINITY;
                mx = fmaxf(mx, s[i][j]);
            }
            const float mnew = fmaxf(m[i], row_max(mx)); // finite: key 0 is in every row's first tile
            const float alpha = m[i] == -INFINITY ? 0.0f : zt_expf(m[i] - mnew);
            float ps = 0.0f;
            for (int j = 0; j < 4; j++) {
                p[i][j] = s[i][j] == -INFINITY ? 0.0f : zt_expf(s[i][j] - mnew);
                ps += p[i][j];
            }
            l[i] = l[i] * alpha + row_sum(ps);
            m[i] = mnew;
            for (int j = 0; j < DPT; j++) o[i][j] *= alpha;
        }
        for (int j = 0; j < 4; j++) {
            const float col[4] = {p[0][j], p[1][j], p[2][j], p[3][j]};
            stv<4>(PsT + (4 * tx + j) * kFwdRows + 4 * ty, col);
        }
        __syncthreads();
        outer_acc<kFwdKeys, kFwdRows, HS, 4, DPT>(o, PsT, Vs, 4 * ty, DPT * tx);
    }
    for (int i = 0; i < 4; i++) {
        const int r = q0 + 4 * ty + i;
        if (r >= T) continue;
        const float inv = 1.0f / l[i];
        float v[DPT];
        for (int j = 0; j < DPT; j++) v[j] = zt_round_prec(o[i][j] * inv, prec);
        const size_t at = ((size_t)b * T + r) * C + (size_t)h * HS + DPT * tx;
        stv<DPT>(out + at, v);
        if (out16)
            for (int j = 0; j < DPT; j++) out16[at + j] = zt_f32_to_bits16(v[j], prec);
        if (tx == 0) {
            float *st = stats + (((size_t)b * NH + h) * T + r) * 2;
            st[0] = m[i];
            st[1] = inv;
        }
    }
}

// one warp per (b, h, t): D = dout . out over the head's hs columns (lane-strided, then a xor butterfly); dout16
// (may be null): dout read as these words of prec
__global__ void __launch_bounds__(32 * kDWarps)
    attn_fused_d_kernel(float *D, const float *dout, const uint16_t *dout16, const float *out, const uint16_t *out16,
                        int prec, int B, int T, int C, int NH, int in_round) {
    const size_t row = (size_t)blockIdx.x * kDWarps + threadIdx.x / 32; // (b * NH + h) * T + t
    if (row >= (size_t)B * NH * T) return;                              // whole warps leave together
    const int lane = threadIdx.x % 32, hs = C / NH;
    const int t = (int)(row % T), h = (int)((row / T) % NH), b = (int)(row / ((size_t)T * NH));
    const size_t off = ((size_t)b * T + t) * C + (size_t)h * hs;
    float s = 0.0f;
    for (int d = lane; d < hs; d += 32) {
        const float d0 = dout16 ? zt_bits16_to_f32(dout16[off + d], prec) : dout[off + d];
        const float dy = in_round ? zt_round_prec(d0, in_round) : d0;
        s += dy * (out16 ? zt_bits16_to_f32(out16[off + d], prec) : out[off + d]);
    }
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(kFull, s, o);
    if (lane == 0) D[row] = s;
}

// rows q0 .. q0 + R - 1's stats (m, 1 / l) and D into shared memory (rows past T: 0)
template <int R>
__device__ void load_row_stats(float *st, const float *stats, const float *D, int q0, int T) {
    for (int r = threadIdx.x; r < R; r += kThreads) {
        const bool ok = q0 + r < T;
        st[r] = ok ? stats[(size_t)(q0 + r) * 2] : 0.0f;
        st[R + r] = ok ? stats[(size_t)(q0 + r) * 2 + 1] : 0.0f;
        st[2 * R + r] = ok ? D[q0 + r] : 0.0f;
    }
}

// The probabilities and score gradients of this thread's NI x NJ block (tile rows ri + i, keys kj + j): from
// the scores s and dout . v products dp, st (the query tile's m, 1 / l, D: 3 x R) and the tile origins
template <int R, int NI, int NJ>
__device__ __forceinline__ void grads(float (*p)[NJ], float (*ds)[NJ], const float (*s)[NJ], const float (*dp)[NJ],
                                      const float *st, int q0, int ri, int k0, int kj, int T, float scale) {
    for (int i = 0; i < NI; i++) {
        const int rr = ri + i, r = q0 + rr;
        for (int j = 0; j < NJ; j++) {
            p[i][j] = r < T && k0 + kj + j <= r ? zt_expf(s[i][j] * scale - st[rr]) * st[R + rr] : 0.0f;
            ds[i][j] = p[i][j] * (dp[i][j] - st[2 * R + rr]) * scale;
        }
    }
}

constexpr int kKvKeys = 64, kKvRows = 32; // dk / dv: keys per block, query rows per step
constexpr int kDsT = kKvRows + 1;          // row stride of the transposed score gradients (odd: no conflicts)

template <int HS>
constexpr int dkdv_smem_floats() {
    return 3 * HS * kKvKeys + 4 * HS * kKvRows + 2 * kKvRows * kKvKeys + kKvKeys * kDsT + 3 * kKvRows;
}

// dk, dv and the parts of dq: block (key tile, key / value head kh, sequence), over the group's query heads
// h = kh G + r, r = 0 .. G-1 in order, and for each their query tiles from the diagonal on. Scores: thread (ty, tx)
// owns query rows 2ty, 2ty + 1 x keys 4tx .. 4tx + 3; dk, dv sums: keys 4ty .. 4ty + 3 x columns DPT tx ..; dq
// parts: query rows 2ty, 2ty + 1 x columns DPT tx .. (dqp: query head h's (key tiles, T, HS) block of the scratch)
template <int HS>
__global__ void __launch_bounds__(kThreads)
    attn_fused_dkdv_kernel(float *dqkv, uint16_t *dqkv16, float *dqp, const float *dout, const float *qkv,
                           const float *stats, const float *D, int T, int C, int NH, int NKV, float scale, int prec) {
    constexpr int DPT = HS / 16;
    float *KsT = ZT_DYNAMIC_SMEM(float);   // [HS][64]
    float *VsT = KsT + HS * kKvKeys;       // [HS][64]
    float *QsT = VsT + HS * kKvKeys;       // [HS][32]
    float *Qs = QsT + HS * kKvRows;        // [32][HS]
    float *dOsT = Qs + HS * kKvRows;       // [HS][32]
    float *dOs = dOsT + HS * kKvRows;      // [32][HS]
    float *Ps = dOs + HS * kKvRows;        // [32][64]
    float *dSs = Ps + kKvRows * kKvKeys;   // [32][64]
    float *Ks = dSs + kKvRows * kKvKeys;   // [64][HS]
    float *dSsT = Ks + HS * kKvKeys;       // [64 keys][kDsT]
    float *st = dSsT + kKvKeys * kDsT;     // [3][32]
    const int k0 = blockIdx.x * kKvKeys, kh = blockIdx.y, b = blockIdx.z, G = NH / NKV, KV = NKV * HS;
    const int W = C + 2 * KV, ty = threadIdx.x / 16, tx = threadIdx.x % 16;
    const float *seq = qkv + (size_t)b * T * W;
    const float *kb = seq + C + (size_t)kh * HS, *vb = kb + KV;
    load_tr<HS, kKvKeys>(KsT, kb, W, k0, T);
    load_tr<HS, kKvKeys>(VsT, vb, W, k0, T);
    load_nat<HS, kKvKeys>(Ks, kb, W, k0, T);
    const int nkt = (T + kKvKeys - 1) / kKvKeys;
    float dk[4][DPT] = {}, dv[4][DPT] = {};
    for (int h = kh * G; h < (kh + 1) * G; h++) { // the group's query heads in order
        const float *qb = seq + (size_t)h * HS;
        const float *dbase = dout + (size_t)b * T * C + (size_t)h * HS;
        const size_t srow = ((size_t)b * NH + h) * T; // this head's first row of stats and D
        float *part = dqp + (((size_t)b * NH + h) * nkt + blockIdx.x) * (size_t)T * HS; // this key tile's parts
        for (int q0 = k0; q0 < T; q0 += kKvRows) { // query tiles from the diagonal on
            __syncthreads();
            load_tr<HS, kKvRows>(QsT, qb, W, q0, T);
            load_nat<HS, kKvRows>(Qs, qb, W, q0, T);
            load_tr<HS, kKvRows>(dOsT, dbase, C, q0, T);
            load_nat<HS, kKvRows>(dOs, dbase, C, q0, T);
            load_row_stats<kKvRows>(st, stats + srow * 2, D + srow, q0, T);
            __syncthreads();
            float s[2][4] = {}, dp[2][4] = {}, p[2][4], ds[2][4];
            outer_acc<HS, kKvRows, kKvKeys, 2, 4>(s, QsT, KsT, 2 * ty, 4 * tx);
            outer_acc<HS, kKvRows, kKvKeys, 2, 4>(dp, dOsT, VsT, 2 * ty, 4 * tx);
            grads<kKvRows, 2, 4>(p, ds, s, dp, st, q0, 2 * ty, k0, 4 * tx, T, scale);
            for (int i = 0; i < 2; i++) {
                stv<4>(Ps + (2 * ty + i) * kKvKeys + 4 * tx, p[i]);
                stv<4>(dSs + (2 * ty + i) * kKvKeys + 4 * tx, ds[i]);
                for (int j = 0; j < 4; j++) dSsT[(4 * tx + j) * kDsT + 2 * ty + i] = ds[i][j];
            }
            __syncthreads();
            // dv[key][d] += p[r][key] dout[r][d]; dk[key][d] += ds[r][key] q[r][d], rows r in order
            outer_acc<kKvRows, kKvKeys, HS, 4, DPT>(dv, Ps, dOs, 4 * ty, DPT * tx);
            outer_acc<kKvRows, kKvKeys, HS, 4, DPT>(dk, dSs, Qs, 4 * ty, DPT * tx);
            // this key tile's part of dq[r][d] = sum over its keys, in order, of ds[r][key] k[key][d]
            float dq[2][DPT] = {};
            for (int k = 0; k < kKvKeys; k++) {
                const float s0 = dSsT[k * kDsT + 2 * ty], s1 = dSsT[k * kDsT + 2 * ty + 1];
                float kv[DPT];
                ldv<DPT>(kv, Ks + k * HS + DPT * tx);
                for (int j = 0; j < DPT; j++) {
                    dq[0][j] += s0 * kv[j];
                    dq[1][j] += s1 * kv[j];
                }
            }
            for (int i = 0; i < 2; i++)
                if (q0 + 2 * ty + i < T) stv<DPT>(part + (size_t)(q0 + 2 * ty + i) * HS + DPT * tx, dq[i]);
        }
    }
    for (int i = 0; i < 4; i++) {
        const int key = k0 + 4 * ty + i;
        if (key >= T) continue;
        const size_t at = ((size_t)b * T + key) * W + C + (size_t)kh * HS + DPT * tx;
        for (int j = 0; j < DPT; j++) {
            dk[i][j] = zt_round_prec(dk[i][j], prec);
            dv[i][j] = zt_round_prec(dv[i][j], prec);
            if (dqkv16) {
                dqkv16[at + j] = zt_f32_to_bits16(dk[i][j], prec);
                dqkv16[at + KV + j] = zt_f32_to_bits16(dv[i][j], prec);
            }
        }
        stv<DPT>(dqkv + at, dk[i]);
        stv<DPT>(dqkv + at + KV, dv[i]);
    }
}

// dq = the sum of a row's parts over key tiles 0 .. its own (tile t / 64), in order: one thread per (b, t, h,
// 4 columns), the parts read as float4; dqkv rows are W = (NH + 2 NKV) HS floats
template <int HS>
__global__ void __launch_bounds__(kThreads)
    attn_fused_dq_sum_kernel(float *dqkv, uint16_t *dqkv16, const float *dqp, int B, int T, int NH, int W, int prec) {
    const size_t idx = (size_t)blockIdx.x * kThreads + threadIdx.x; // ((b * T + t) * NH + h) * HS / 4 + d4
    if (idx >= (size_t)B * T * NH * (HS / 4)) return;
    const int d4 = (int)(idx % (HS / 4)), h = (int)(idx / (HS / 4) % NH);
    const size_t bt = idx / (HS / 4) / NH;
    const int t = (int)(bt % T), b = (int)(bt / T), nkt = (T + kKvKeys - 1) / kKvKeys;
    const float *part = dqp + ((size_t)b * NH + h) * nkt * (size_t)T * HS + (size_t)t * HS + 4 * d4;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int kt = 0; kt <= t / kKvKeys; kt++) {
        float v[4];
        ldv<4>(v, part + (size_t)kt * T * HS);
        for (int j = 0; j < 4; j++) acc[j] += v[j];
    }
    const size_t at = bt * W + (size_t)h * HS + 4 * d4;
    for (int j = 0; j < 4; j++) {
        acc[j] = zt_round_prec(acc[j], prec);
        if (dqkv16) dqkv16[at + j] = zt_f32_to_bits16(acc[j], prec);
    }
    stv<4>(dqkv + at, acc);
}

void check_shape(int B, int T, int C, int NH, int NKV) {
    ZT_ASSERT(NH > 0 && C % NH == 0 && zt_attention_fused_hs_ok(C / NH) && NKV > 0 && NH % NKV == 0);
    ZT_ASSERT(NH <= 65535 && B <= 65535 && (size_t)B * NH * T <= 0x7fffffffu);
}


template <int HS>
void launch_fwd(cudaStream_t s, float *out, uint16_t *out16, float *stats, const float *qkv, int B, int T, int C,
                int NH, int NKV, float scale, int prec) {
    static bool optin = false;
    zt_cu_smem_optin(attn_fused_fwd_kernel<HS>, fwd_smem_floats<HS>() * (int)sizeof(float), &optin,
                     "attn_fused_fwd_kernel");
    ZT_LAUNCH((attn_fused_fwd_kernel<HS>), dim3(blocks_for(T, kFwdRows), NH, B), kThreads,
              fwd_smem_floats<HS>() * sizeof(float), s, out, out16, stats, qkv, T, C, NH, NKV, scale, prec);
    AF_LAUNCH_CHECK("attn_fused_fwd_kernel");
}


template <int HS>
void launch_bwd(cudaStream_t s, float *dqkv, uint16_t *dqkv16, float *dqp, const float *D, const float *dout,
                const float *qkv, const float *stats, int B, int T, int C, int NH, int NKV, float scale, int prec) {
    static bool optin_kv = false;
    zt_cu_smem_optin(attn_fused_dkdv_kernel<HS>, dkdv_smem_floats<HS>() * (int)sizeof(float), &optin_kv,
                     "attn_fused_dkdv_kernel");
    ZT_LAUNCH((attn_fused_dkdv_kernel<HS>), dim3(blocks_for(T, kKvKeys), NKV, B), kThreads,
              dkdv_smem_floats<HS>() * sizeof(float), s, dqkv, dqkv16, dqp, dout, qkv, stats, D, T, C, NH, NKV, scale,
              prec);
    AF_LAUNCH_CHECK("attn_fused_dkdv_kernel");
    ZT_LAUNCH((attn_fused_dq_sum_kernel<HS>), blocks_for((size_t)B * T * NH * (HS / 4), kThreads), kThreads, 0, s,
              dqkv, dqkv16, (const float *)dqp, B, T, NH, C + 2 * NKV * HS, prec);
    AF_LAUNCH_CHECK("attn_fused_dq_sum_kernel");
}

} // namespace

// ------------------------------------------------------------------------------------ launches

namespace {
int g_attention_tc = -1; // -1: not yet read from ZT_CUDA_ATTN_TC
}

bool zt_cu_attention_tc(int prec) {
    if (g_attention_tc < 0) g_attention_tc = zt_attention_tc_on();
    return g_attention_tc && (prec == ZT_PREC_BF16 || prec == ZT_PREC_FP16);
}

void zt_cu_attention_fused_fwd(cudaStream_t s, float *out, float *stats, const float *qkv, int B, int T, int C,
                               int NH, int NKV, int prec, int tc, uint16_t *out16, int in_round, uint16_t *qkv16,
                               const uint16_t *qkv_words) {
    if (B <= 0 || T <= 0 || C <= 0) return;
    check_shape(B, T, C, NH, NKV);
    ZT_ASSERT(!out16 || prec != ZT_PREC_FP32);
    ZT_ASSERT((!in_round && !qkv_words) || tc); // the tensor-core kernels only
    const int hs = C / NH;
    const float scale = 1.0f / sqrtf((float)hs);
    if (tc)
        zt_cu_attn_tc_fwd(s, out, stats, qkv, B, T, C, NH, NKV, scale, prec, tc, out16, in_round, qkv16, qkv_words);
    else if (hs == 64) launch_fwd<64>(s, out, out16, stats, qkv, B, T, C, NH, NKV, scale, prec);
    else launch_fwd<32>(s, out, out16, stats, qkv, B, T, C, NH, NKV, scale, prec);
}

void zt_cu_attention_fused_bwd(cudaStream_t s, float *dqkv, float *scratch, const float *dout, const float *qkv,
                               const float *out, const float *stats, int B, int T, int C, int NH, int NKV,
                               int prec, int tc, uint16_t *dqkv16, const uint16_t *qkv16, const uint16_t *out16,
                               int in_round, const uint16_t *dout16) {
    if (B <= 0 || T <= 0 || C <= 0) return;
    ZT_ASSERT(!dqkv16 || prec != ZT_PREC_FP32);
    ZT_ASSERT((!qkv16 && !out16 && !in_round && !dout16) || tc); // words of the tensor-core kernels' type
    ZT_ASSERT(!dout16 || !in_round);
    check_shape(B, T, C, NH, NKV);
    const int hs = C / NH;
    const float scale = 1.0f / sqrtf((float)hs);
    float *D = scratch, *dqp = scratch + zt_attention_fused_scratch_rows(B, T, NH); // D, then the dq parts (16-byte aligned)
    ZT_LAUNCH(attn_fused_d_kernel, blocks_for((size_t)B * NH * T, kDWarps), 32 * kDWarps, 0, s, D, dout, dout16, out,
              out16, tc, B, T, C, NH, in_round);
    AF_LAUNCH_CHECK("attn_fused_d_kernel");
    if (tc)
        zt_cu_attn_tc_bwd(s, dqkv, D, dout, qkv, stats, B, T, C, NH, NKV, scale, prec, tc, dqkv16, qkv16, in_round,
                          dout16);
    else if (hs == 64) launch_bwd<64>(s, dqkv, dqkv16, dqp, D, dout, qkv, stats, B, T, C, NH, NKV, scale, prec);
    else launch_bwd<32>(s, dqkv, dqkv16, dqp, D, dout, qkv, stats, B, T, C, NH, NKV, scale, prec);
}

} // namespace ZT_CU_NS
