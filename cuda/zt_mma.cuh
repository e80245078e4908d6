// zt_mma.cuh — the warp-wide tensor-core product ztrain's kernels use: PTX mma.sync.aligned.m16n8k16 with bf16
// or fp16 inputs and fp32 accumulation (sm_80 and later), and its emulation in the host execution harness.
//
// One warp computes D (16 x 8, fp32) = A (16 x 16) B (16 x 8) + C. Each lane holds fragments, as the PTX ISA's
// "matrix fragments for mma.m16n8k16 with floating point type" specify; with g = lane / 4, t = lane % 4 and a
// 32-bit word holding two 2-byte values (the lower index in the low half):
//   A: a[r] holds row g + 8 (r % 2), columns k = 2t + 8 (r / 2) and k + 1        (4 words)
//   B: b[r] holds rows k = 2t + 8 r and k + 1, column g                           (2 words)
//   C, D: c[r] is row g + 8 (r / 2), column 2t + r % 2                            (4 floats)
// So an accumulator pair (c[0], c[1]) of one n-tile and (c[0], c[1]) of the next are a row's four A values of a
// 16-wide k step (flash attention keeps probabilities in registers this way: zt_mma_acc_to_a).
//
// Arithmetic: the GPU's tensor core sums the 16 products in an order and internal precision of its own; the
// harness sums them exactly enough (double) and adds C, one rounding to float. Kernels built on this are
// compared with the cpu backend by error, not bits (cuda/tests); both builds are deterministic.
// Every lane of the warp must call it together (as for any warp operation in the harness).
#pragma once

#include <stdint.h>

#include "zt_cuda_compat.cuh"

// two values already representable in the 2-byte type (or to be rounded to nearest even) as one fragment word
template <bool FP16>
__device__ __forceinline__ uint32_t zt_mma_pack(float lo, float hi) {
    if constexpr (FP16) return (uint32_t)__half_as_ushort(__float2half_rn(lo)) | (uint32_t)__half_as_ushort(__float2half_rn(hi)) << 16;
    else
        return (uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(lo)) |
               (uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(hi)) << 16;
}

template <bool FP16>
__device__ __forceinline__ float zt_mma_lo(uint32_t w) {
    if constexpr (FP16) return __half2float(__ushort_as_half((unsigned short)(w & 0xffffu)));
    else return __bfloat162float(__ushort_as_bfloat16((unsigned short)(w & 0xffffu)));
}
template <bool FP16>
__device__ __forceinline__ float zt_mma_hi(uint32_t w) {
    if constexpr (FP16) return __half2float(__ushort_as_half((unsigned short)(w >> 16)));
    else return __bfloat162float(__ushort_as_bfloat16((unsigned short)(w >> 16)));
}

// d = a b + c (d may alias c)
template <bool FP16>
__device__ __forceinline__ void zt_mma16816(float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4]) {
#ifdef ZT_HOSTEXEC
    uint64_t A01[32], A23[32], B01[32];
    hx::warp_gather(0xffffffffu, (uint64_t)a[0] | (uint64_t)a[1] << 32, A01);
    hx::warp_gather(0xffffffffu, (uint64_t)a[2] | (uint64_t)a[3] << 32, A23);
    hx::warp_gather(0xffffffffu, (uint64_t)b[0] | (uint64_t)b[1] << 32, B01);
    const int lane = (int)(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) % 32;
    const int g = lane / 4, t = lane % 4;
    // element (row, k) of A and (k, col) of B from the lanes that hold them
    auto aval = [&](int row, int k) {
        const int r = (row >= 8) + 2 * (k >= 8), src = (row % 8) * 4 + (k % 8) / 2;
        const uint64_t pair = r < 2 ? A01[src] : A23[src];
        const uint32_t w = (uint32_t)(pair >> (32 * (r % 2)));
        return (double)(k % 2 ? zt_mma_hi<FP16>(w) : zt_mma_lo<FP16>(w));
    };
    auto bval = [&](int k, int col) {
        const int r = k >= 8, src = col * 4 + (k % 8) / 2;
        const uint32_t w = (uint32_t)(B01[src] >> (32 * r));
        return (double)(k % 2 ? zt_mma_hi<FP16>(w) : zt_mma_lo<FP16>(w));
    };
    float out[4];
    for (int r = 0; r < 4; r++) {
        const int row = g + 8 * (r / 2), col = 2 * t + r % 2;
        double s = 0.0;
        for (int k = 0; k < 16; k++) s += aval(row, k) * bval(k, col);
        out[r] = (float)(s + (double)c[r]);
    }
    for (int r = 0; r < 4; r++) d[r] = out[r];
#else
    if constexpr (FP16) {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%10,%11,%12,%13};\n"
                     : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]),
                       "f"(c[2]), "f"(c[3]));
    } else {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%10,%11,%12,%13};\n"
                     : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]),
                       "f"(c[2]), "f"(c[3]));
    }
#endif
}

// The A fragment of one 16-wide k step from the accumulators of the two 8-wide n-tiles that cover it
// (acc0: columns k0 .. k0 + 7, acc1: k0 + 8 .. k0 + 15), each value rounded to the 2-byte type
template <bool FP16>
__device__ __forceinline__ void zt_mma_acc_to_a(uint32_t a[4], const float acc0[4], const float acc1[4]) {
    a[0] = zt_mma_pack<FP16>(acc0[0], acc0[1]);
    a[1] = zt_mma_pack<FP16>(acc0[2], acc0[3]);
    a[2] = zt_mma_pack<FP16>(acc1[0], acc1[1]);
    a[3] = zt_mma_pack<FP16>(acc1[2], acc1[3]);
}
