// kernels_attn_fused.cu — causal self-attention that keeps no (T, T) matrix ("fused", flash-style): the
// optional slots attention_fused_fwd / attention_fused_bwd of src/iface/backend.h, for head sizes 32 and 64
// (zt_attention_fused_hs_ok). The materialized attention (kernels_norm_attn.cu) writes scores and
// probabilities of B * NH * T * T floats per layer and reads them back; for GPT-2 124M at 16 x 1024 tokens
// that is 0.8 GB per layer and most of the step's attention time on an H200 (README "GPU status").
//
// Forward, one block per (query tile of 32 rows, head, sequence): the query tile stays in shared memory,
// key / value tiles 0 .. the diagonal stream through it; each row keeps a running maximum m and sum l of
// exp(s - m) (online softmax) and rescales its output when m grows. It writes out and, per row, the final m
// and 1 / l (stats (B, NH, T, 2)): the backward recomputes each probability as zt_expf(s - m) * (1 / l),
// the cpu backend's softmax formula on the same maximum.
// Backward, without atomics (every output element is summed by one thread in a fixed order):
//   1. D_t = dout_t . out_t per row (one warp per row), into the scratch (B, NH, T);
//   2. one block per key tile: dk and dv for its 32 keys, summed over the query tiles from the diagonal on,
//      rows in order (the cpu backend's order: t ascending);
//   3. one block per query tile: dq for its 32 rows, summed over key tiles 0 .. the diagonal.
// Blocks 2 and 3 recompute p and dp = dout . v for their tiles with the same code, so both see the same bits;
// the price of no atomics is recomputing q k^T and dout v^T once more (7 tile products instead of 5).
// Thread layout of a block (128 threads): row group g = tid / 8 owns tile rows 2g, 2g + 1; column group
// c = tid % 8 owns tile columns c, c + 8, c + 16, c + 24 and head dimensions c, c + 8, ... The 8 threads of a
// row group are consecutive lanes: row maxima and sums are xor shuffles over 1, 2, 4. Shared tiles are padded
// to HS + 1 floats a row (no bank conflicts between the rows read at one head dimension).
// Arithmetic is fp32 in every precision, as the materialized attention.
#include <math.h>


#include "cuda_ops.h"
#include "iface/backend.h"
#include "iface/op_math.h"

#include "cuda_check.h"

namespace ZT_CU_NS {
namespace {

#define AF_LAUNCH_CHECK(what) ZT_CUDA_LAUNCH_CHECK(what)

constexpr unsigned kFull = 0xffffffffu;
constexpr int kTile = 32;     // query rows and key columns per tile
constexpr int kThreads = 128; // 16 row groups x 8 column groups
constexpr int kDWarps = 4;    // D kernel: rows (warps) per block

unsigned blocks_for(size_t n, unsigned per) { return (unsigned)((n + per - 1) / per); }

// max / sum over the 8 lanes of a row group (xor within aligned groups of 8 lanes)
__device__ __forceinline__ float group_max(float v) {
    for (int o = 1; o < 8; o <<= 1) v = fmaxf(v, __shfl_xor_sync(kFull, v, o));
    return v;
}
__device__ __forceinline__ float group_sum(float v) {
    for (int o = 1; o < 8; o <<= 1) v += __shfl_xor_sync(kFull, v, o);
    return v;
}

// dst = rows r0 .. r0 + kTile - 1 of one head's HS columns starting at src (rows `stride` floats apart);
// rows at or past T are zero
template <int HS>
__device__ void load_tile(float (*dst)[HS + 1], const float *src, size_t stride, int r0, int T) {
    for (int idx = threadIdx.x; idx < kTile * HS; idx += kThreads) {
        const int r = idx / HS, d = idx % HS;
        dst[r][d] = r0 + r < T ? src[(size_t)(r0 + r) * stride + d] : 0.0f;
    }
}

// this thread's 2 x 4 entries of the tile products a b^T (rows 2g + i of a, rows c + 8j of b), over d in order
template <int HS>
__device__ __forceinline__ void tile_dots(float s[2][4], const float (*a)[HS + 1], const float (*b)[HS + 1], int g,
                                          int c) {
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 4; j++) s[i][j] = 0.0f;
    for (int d = 0; d < HS; d++) {
        const float a0 = a[2 * g][d], a1 = a[2 * g + 1][d];
        for (int j = 0; j < 4; j++) {
            const float bv = b[c + 8 * j][d];
            s[0][j] += a0 * bv;
            s[1][j] += a1 * bv;
        }
    }
}

template <int HS>
__global__ void __launch_bounds__(kThreads)
    attn_fused_fwd_kernel(float *out, float *stats, const float *qkv, int T, int C, int NH, float scale) {
    __shared__ float Qs[kTile][HS + 1], Ks[kTile][HS + 1], Vs[kTile][HS + 1], Ps[kTile][kTile + 1];
    constexpr int ND = HS / 8;
    const int q0 = blockIdx.x * kTile, h = blockIdx.y, b = blockIdx.z, C3 = 3 * C;
    const int g = threadIdx.x / 8, c = threadIdx.x % 8;
    const float *base = qkv + (size_t)b * T * C3 + (size_t)h * HS;
    load_tile<HS>(Qs, base, C3, q0, T);
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f}, o[2][ND];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < ND; j++) o[i][j] = 0.0f;
    const int last = min(q0 + kTile, T) - 1; // the tile's last row: keys 0 .. last
    for (int k0 = 0; k0 <= last; k0 += kTile) {
        __syncthreads(); // the previous tile's readers of Ks, Vs, Ps are done
        load_tile<HS>(Ks, base + C, C3, k0, T);
        load_tile<HS>(Vs, base + 2 * C, C3, k0, T);
        __syncthreads();
        float s[2][4];
        tile_dots<HS>(s, Qs, Ks, g, c);
        for (int i = 0; i < 2; i++) {
            const int r = q0 + 2 * g + i;
            float mx = -INFINITY;
            for (int j = 0; j < 4; j++) {
                s[i][j] = k0 + c + 8 * j <= r ? s[i][j] * scale : -INFINITY;
                mx = fmaxf(mx, s[i][j]);
            }
            const float mnew = fmaxf(m[i], group_max(mx)); // finite: key 0 is in every row's first tile
            const float alpha = m[i] == -INFINITY ? 0.0f : zt_expf(m[i] - mnew);
            float ps = 0.0f;
            for (int j = 0; j < 4; j++) {
                const float p = s[i][j] == -INFINITY ? 0.0f : zt_expf(s[i][j] - mnew);
                Ps[2 * g + i][c + 8 * j] = p;
                ps += p;
            }
            l[i] = l[i] * alpha + group_sum(ps);
            m[i] = mnew;
            for (int j = 0; j < ND; j++) o[i][j] *= alpha;
        }
        __syncthreads();
        for (int k = 0; k < kTile; k++) {
            const float p0 = Ps[2 * g][k], p1 = Ps[2 * g + 1][k];
            for (int j = 0; j < ND; j++) {
                const float v = Vs[k][c + 8 * j];
                o[0][j] += p0 * v;
                o[1][j] += p1 * v;
            }
        }
    }
    for (int i = 0; i < 2; i++) {
        const int r = q0 + 2 * g + i;
        if (r >= T) continue;
        const float inv = 1.0f / l[i];
        float *orow = out + ((size_t)b * T + r) * C + (size_t)h * HS;
        for (int j = 0; j < ND; j++) orow[c + 8 * j] = o[i][j] * inv;
        if (c == 0) {
            float *st = stats + (((size_t)b * NH + h) * T + r) * 2;
            st[0] = m[i];
            st[1] = inv;
        }
    }
}

// one warp per (b, h, t): D = dout . out over the head's HS columns (lane-strided, then a xor butterfly)
__global__ void __launch_bounds__(32 * kDWarps)
    attn_fused_d_kernel(float *D, const float *dout, const float *out, int B, int T, int C, int NH) {
    const size_t row = (size_t)blockIdx.x * kDWarps + threadIdx.x / 32; // (b * NH + h) * T + t
    if (row >= (size_t)B * NH * T) return;                              // whole warps leave together
    const int lane = threadIdx.x % 32, hs = C / NH;
    const int t = (int)(row % T), h = (int)((row / T) % NH), b = (int)(row / ((size_t)T * NH));
    const size_t off = ((size_t)b * T + t) * C + (size_t)h * hs;
    float s = 0.0f;
    for (int d = lane; d < hs; d += 32) s += dout[off + d] * out[off + d];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(kFull, s, o);
    if (lane == 0) D[row] = s;
}

// The probabilities p and the score gradients ds = p (dp - D) scale of one (query tile q0, key tile k0)
// pair into Ps, Ds (either may be null): the same bits in both backward kernels.
template <int HS>
__device__ void tile_grads(float (*Ps)[kTile + 1], float (*Ds)[kTile + 1], const float (*Qs)[HS + 1],
                           const float (*dOs)[HS + 1], const float (*Ks)[HS + 1], const float (*Vs)[HS + 1],
                           const float *st_m, const float *st_inv, const float *st_D, int q0, int k0, int T, float scale,
                           int g, int c) {
    float s[2][4], dp[2][4];
    tile_dots<HS>(s, Qs, Ks, g, c);
    tile_dots<HS>(dp, dOs, Vs, g, c);
    for (int i = 0; i < 2; i++) {
        const int rr = 2 * g + i, r = q0 + rr;
        for (int j = 0; j < 4; j++) {
            const int kk = c + 8 * j;
            const float p = r < T && k0 + kk <= r ? zt_expf(s[i][j] * scale - st_m[rr]) * st_inv[rr] : 0.0f;
            if (Ps) Ps[rr][kk] = p;
            Ds[rr][kk] = p * (dp[i][j] - st_D[rr]) * scale;
        }
    }
}

// the tile's per-row stats (m, 1 / l) and D into shared memory (rows past T: 0)
__device__ void load_row_stats(float *st_m, float *st_inv, float *st_D, const float *stats, const float *D, int q0,
                               int T) {
    for (int r = threadIdx.x; r < kTile; r += kThreads) {
        const bool ok = q0 + r < T;
        st_m[r] = ok ? stats[(size_t)(q0 + r) * 2] : 0.0f;
        st_inv[r] = ok ? stats[(size_t)(q0 + r) * 2 + 1] : 0.0f;
        st_D[r] = ok ? D[q0 + r] : 0.0f;
    }
}

template <int HS>
__global__ void __launch_bounds__(kThreads)
    attn_fused_dkdv_kernel(float *dqkv, const float *dout, const float *qkv, const float *stats, const float *D, int T,
                           int C, int NH, float scale) {
    __shared__ float Ks[kTile][HS + 1], Vs[kTile][HS + 1], Qs[kTile][HS + 1], dOs[kTile][HS + 1];
    __shared__ float Ps[kTile][kTile + 1], Ds[kTile][kTile + 1];
    __shared__ float st_m[kTile], st_inv[kTile], st_D[kTile];
    constexpr int ND = HS / 8;
    const int k0 = blockIdx.x * kTile, h = blockIdx.y, b = blockIdx.z, C3 = 3 * C;
    const int g = threadIdx.x / 8, c = threadIdx.x % 8;
    const float *base = qkv + (size_t)b * T * C3 + (size_t)h * HS;
    const float *dbase = dout + (size_t)b * T * C + (size_t)h * HS;
    const size_t srow = ((size_t)b * NH + h) * T; // this head's first row of stats and D
    load_tile<HS>(Ks, base + C, C3, k0, T);
    load_tile<HS>(Vs, base + 2 * C, C3, k0, T);
    float dk[2][ND], dv[2][ND];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < ND; j++) dk[i][j] = dv[i][j] = 0.0f;
    for (int q0 = k0; q0 < T; q0 += kTile) { // query tiles from the diagonal on (tiles are aligned: q0 = k0 first)
        __syncthreads();
        load_tile<HS>(Qs, base, C3, q0, T);
        load_tile<HS>(dOs, dbase, C, q0, T);
        load_row_stats(st_m, st_inv, st_D, stats + srow * 2, D + srow, q0, T);
        __syncthreads();
        tile_grads<HS>(Ps, Ds, Qs, dOs, Ks, Vs, st_m, st_inv, st_D, q0, k0, T, scale, g, c);
        __syncthreads();
        // dv[key][d] += p[r][key] dout[r][d]; dk[key][d] += ds[r][key] q[r][d], rows r in order
        for (int r = 0; r < kTile; r++) {
            const float p0 = Ps[r][2 * g], p1 = Ps[r][2 * g + 1], s0 = Ds[r][2 * g], s1 = Ds[r][2 * g + 1];
            for (int j = 0; j < ND; j++) {
                const float dy = dOs[r][c + 8 * j], q = Qs[r][c + 8 * j];
                dv[0][j] += p0 * dy;
                dv[1][j] += p1 * dy;
                dk[0][j] += s0 * q;
                dk[1][j] += s1 * q;
            }
        }
    }
    for (int i = 0; i < 2; i++) {
        const int key = k0 + 2 * g + i;
        if (key >= T) continue;
        float *row = dqkv + ((size_t)b * T + key) * C3 + (size_t)h * HS;
        for (int j = 0; j < ND; j++) {
            row[C + c + 8 * j] = dk[i][j];
            row[2 * C + c + 8 * j] = dv[i][j];
        }
    }
}

template <int HS>
__global__ void __launch_bounds__(kThreads)
    attn_fused_dq_kernel(float *dqkv, const float *dout, const float *qkv, const float *stats, const float *D, int T,
                         int C, int NH, float scale) {
    __shared__ float Qs[kTile][HS + 1], dOs[kTile][HS + 1], Ks[kTile][HS + 1], Vs[kTile][HS + 1];
    __shared__ float Ds[kTile][kTile + 1];
    __shared__ float st_m[kTile], st_inv[kTile], st_D[kTile];
    constexpr int ND = HS / 8;
    const int q0 = blockIdx.x * kTile, h = blockIdx.y, b = blockIdx.z, C3 = 3 * C;
    const int g = threadIdx.x / 8, c = threadIdx.x % 8;
    const float *base = qkv + (size_t)b * T * C3 + (size_t)h * HS;
    const size_t srow = ((size_t)b * NH + h) * T;
    load_tile<HS>(Qs, base, C3, q0, T);
    load_tile<HS>(dOs, dout + (size_t)b * T * C + (size_t)h * HS, C, q0, T);
    load_row_stats(st_m, st_inv, st_D, stats + srow * 2, D + srow, q0, T);
    float dq[2][ND];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < ND; j++) dq[i][j] = 0.0f;
    const int last = min(q0 + kTile, T) - 1;
    for (int k0 = 0; k0 <= last; k0 += kTile) {
        __syncthreads();
        load_tile<HS>(Ks, base + C, C3, k0, T);
        load_tile<HS>(Vs, base + 2 * C, C3, k0, T);
        __syncthreads();
        tile_grads<HS>(nullptr, Ds, Qs, dOs, Ks, Vs, st_m, st_inv, st_D, q0, k0, T, scale, g, c);
        __syncthreads();
        for (int k = 0; k < kTile; k++) { // dq[r][d] += ds[r][key] k[key][d], keys in order
            const float s0 = Ds[2 * g][k], s1 = Ds[2 * g + 1][k];
            for (int j = 0; j < ND; j++) {
                const float kv = Ks[k][c + 8 * j];
                dq[0][j] += s0 * kv;
                dq[1][j] += s1 * kv;
            }
        }
    }
    for (int i = 0; i < 2; i++) {
        const int r = q0 + 2 * g + i;
        if (r >= T) continue;
        float *row = dqkv + ((size_t)b * T + r) * C3 + (size_t)h * HS;
        for (int j = 0; j < ND; j++) row[c + 8 * j] = dq[i][j];
    }
}

void check_shape(int B, int T, int C, int NH) {
    ZT_ASSERT(NH > 0 && C % NH == 0 && zt_attention_fused_hs_ok(C / NH));
    ZT_ASSERT(NH <= 65535 && B <= 65535 && (size_t)B * NH * T <= 0x7fffffffu);
}

} // namespace

// ------------------------------------------------------------------------------------ launches

void zt_cu_attention_fused_fwd(cudaStream_t s, float *out, float *stats, const float *qkv, int B, int T, int C,
                               int NH) {
    if (B <= 0 || T <= 0 || C <= 0) return;
    check_shape(B, T, C, NH);
    const int hs = C / NH;
    const float scale = 1.0f / sqrtf((float)hs);
    const dim3 grid(blocks_for(T, kTile), NH, B);
    if (hs == 64)
        ZT_LAUNCH((attn_fused_fwd_kernel<64>), grid, kThreads, 0, s, out, stats, qkv, T, C, NH, scale);
    else
        ZT_LAUNCH((attn_fused_fwd_kernel<32>), grid, kThreads, 0, s, out, stats, qkv, T, C, NH, scale);
    AF_LAUNCH_CHECK("attn_fused_fwd_kernel");
}

void zt_cu_attention_fused_bwd(cudaStream_t s, float *dqkv, float *D, const float *dout, const float *qkv,
                               const float *out, const float *stats, int B, int T, int C, int NH) {
    if (B <= 0 || T <= 0 || C <= 0) return;
    check_shape(B, T, C, NH);
    const int hs = C / NH;
    const float scale = 1.0f / sqrtf((float)hs);
    ZT_LAUNCH(attn_fused_d_kernel, blocks_for((size_t)B * NH * T, kDWarps), 32 * kDWarps, 0, s, D, dout, out, B, T, C,
              NH);
    AF_LAUNCH_CHECK("attn_fused_d_kernel");
    const dim3 grid(blocks_for(T, kTile), NH, B);
    if (hs == 64) {
        ZT_LAUNCH((attn_fused_dkdv_kernel<64>), grid, kThreads, 0, s, dqkv, dout, qkv, stats, (const float *)D, T, C,
                  NH, scale);
        AF_LAUNCH_CHECK("attn_fused_dkdv_kernel");
        ZT_LAUNCH((attn_fused_dq_kernel<64>), grid, kThreads, 0, s, dqkv, dout, qkv, stats, (const float *)D, T, C, NH,
                  scale);
    } else {
        ZT_LAUNCH((attn_fused_dkdv_kernel<32>), grid, kThreads, 0, s, dqkv, dout, qkv, stats, (const float *)D, T, C,
                  NH, scale);
        AF_LAUNCH_CHECK("attn_fused_dkdv_kernel");
        ZT_LAUNCH((attn_fused_dq_kernel<32>), grid, kThreads, 0, s, dqkv, dout, qkv, stats, (const float *)D, T, C, NH,
                  scale);
    }
    AF_LAUNCH_CHECK("attn_fused_dq_kernel");
}

} // namespace ZT_CU_NS
