/* op_math.h — the elementwise math both backends compile: the cpu backend (C, inside OpenMP simd
 * loops) and the CUDA kernels (nvcc, and the host execution harness's C++ build). One definition
 * of each formula, so the CPU tests cover the formulas the GPU runs: exp and tanh, GELU (tanh
 * approximation) and its derivative, erf and the exact GELU (BERT's) with its derivative, argmax's order, the
 * AdamW element update, LayerNorm's and RMSNorm's element forward and backward, the rotary embedding's rotation of a
 * pair, SiLU (SwiGLU) and its derivative, and bf16/fp16 conversions (round to nearest even, as __float2bfloat16_rn /
 * __float2half_rn). The reductions around
 * them (row sums, maxima) are each backend's own: their order is what makes a backend deterministic.
 *
 * Everything here is branch-free float arithmetic; this header must never be compiled with
 * -ffast-math (zt_expf's rounding trick needs the default rounding of adds). Uses nothing. */
#ifndef ZT_OP_MATH_H
#define ZT_OP_MATH_H

#include <math.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define ZT_HD static __host__ __device__ __forceinline__
#else
#define ZT_HD static inline
#endif

#define ZT_GELU_K 0.7978845608028654f /* sqrt(2/pi) */
#define ZT_GELU_C 0.044715f
/* GPT-2's LayerNorm epsilon (model.norm_eps's default for GPT-2; BERT uses 1e-12, RoBERTa 1e-5) */
#define ZT_LN_EPS 1e-5f
#define ZT_SQRT1_2 0.7071067811865476f     /* 1 / sqrt(2) */
#define ZT_INV_SQRT_2PI 0.3989422804014327f /* 1 / sqrt(2 pi) */

ZT_HD float zt_int_bits_to_float(int32_t i) {
    union { int32_t i; float f; } u;
    u.i = i;
    return u.f;
}

ZT_HD uint32_t zt_float_to_bits(float f) {
    union { float f; uint32_t u; } v;
    v.f = f;
    return v.u;
}

/* ~2 ulp exp, the same bits everywhere (no libm): clamp, x = n ln2 + r, minimax polynomial */
ZT_HD float zt_expf(float x) {
    /* clamp to the finite range; exp(-88) ~ 6e-39 (denormal edge) is as good as 0 here */
    x = x < -87.0f ? -87.0f : x;
    x = x > 88.0f ? 88.0f : x;
    /* round to nearest: adding and removing 1.5 * 2^23 (exact in the default rounding mode) */
    float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    return p * zt_int_bits_to_float(((int32_t)n + 127) << 23);
}

/* tanh(x) = sign(x) * (1 - 2 / (exp(2|x|) + 1)) */
ZT_HD float zt_tanhf(float x) {
    float e = zt_expf(2.0f * fabsf(x));
    float t = 1.0f - 2.0f / (e + 1.0f);
    return copysignf(t, x);
}

/* erf in single precision, at most 1.43 ulp (every float; tests/unit/cpu/test_erf.c measures it against erf() in
   double). Only fmaf, +, *, / (each correctly rounded everywhere, and every product that meets a sum an explicit
   fmaf, as in zt_adamw_elem) and zt_expf: the bits of |x| < 1 are the same on every build, those of the tail
   wherever zt_expf's are (the cpu build and nvcc contract its polynomial alike; the harness's g++ -O2 does not).
   Two pieces, split at |x| = 1; the coefficients are minimax fits (Lawson's iteration, float64) rounded to float.
   |x| < 1: erf(x) = x + x q(x^2), q a degree-6 polynomial of erf(x) / x - 1 in x^2 (fit error 2^-29.7) */
ZT_HD float zt_erf_small(float x) {
    const float t = x * x;
    float q = 7.889122935e-05f;
    q = fmaf(q, t, -8.020842215e-04f);
    q = fmaf(q, t, 5.189535674e-03f);
    q = fmaf(q, t, -2.685444430e-02f);
    q = fmaf(q, t, 1.128360033e-01f);
    q = fmaf(q, t, -3.761262596e-01f);
    q = fmaf(q, t, 1.283791661e-01f);
    return fmaf(x, q, x);
}

/* erfc(a) for 1 <= a <= 10 (about 6 ulp, relative): exp(-a^2) R(a), R(a) = erfc(a) exp(a^2) a degree-9 polynomial in
   t = 1 / (1 + 0.4 a) (relative fit error 2^-32.8 over [1, 10]). a^2 = h + l exactly (l by fmaf), so
   exp(-a^2) = exp(-h) (1 - l) to well below an ulp */
ZT_HD float zt_erfc_tail(float a) {
    const float h = a * a, l = fmaf(a, a, -h);
    const float t = 1.0f / fmaf(0.4f, a, 1.0f);
    float r = 6.875356287e-02f;
    r = fmaf(r, t, -2.542085648e-01f);
    r = fmaf(r, t, 2.853706479e-01f);
    r = fmaf(r, t, -1.102563888e-01f);
    r = fmaf(r, t, 1.984202564e-01f);
    r = fmaf(r, t, 1.491189748e-01f);
    r = fmaf(r, t, 2.119941413e-01f);
    r = fmaf(r, t, 2.251279801e-01f);
    r = fmaf(r, t, 2.257156521e-01f);
    r = fmaf(r, t, -1.274663759e-06f);
    const float er = zt_expf(-h) * r;
    return fmaf(-er, l, er);
}

/* erf(a) and erfc(a) = 1 - erf(a) of a >= 0, each by the piece that has it without cancellation (a NaN: both NaN).
   Branch-free: both pieces run on clamped arguments (the tail never sees a NaN or an infinity) and one is chosen.
   erf rounds to 1 from a = 3.92; past a = 9.3 zt_expf's clamp leaves erfc at ~1e-39 rather than smaller */
ZT_HD void zt_erf_pos(float a, float *erf_a, float *erfc_a) {
    const int tail = a >= 1.0f;
    const float s = zt_erf_small(tail ? 0.0f : a);
    const float c = zt_erfc_tail(tail ? (a < 10.0f ? a : 10.0f) : 1.0f);
    *erf_a = tail ? 1.0f - c : s;
    *erfc_a = tail ? c : 1.0f - s;
}

ZT_HD float zt_erff(float x) {
    float e, c;
    zt_erf_pos(fabsf(x), &e, &c);
    return copysignf(e, x);
}

/* 1 + erf(u), for u < 0 as erfc(-u): no cancellation in the left tail (exact GELU of x << 0) */
ZT_HD float zt_one_plus_erff(float u) {
    float e, c;
    zt_erf_pos(fabsf(u), &e, &c);
    return u < 0.0f ? c : 1.0f + e;
}

/* exact GELU (BERT's "gelu"): 0.5 x (1 + erf(x / sqrt 2)) */
ZT_HD float zt_gelu_erf(float x) { return 0.5f * x * zt_one_plus_erff(x * ZT_SQRT1_2); }

/* d gelu_erf(x) / dx = 0.5 (1 + erf(x / sqrt 2)) + x exp(-x^2 / 2) / sqrt(2 pi); the density term with x clamped to
   +-20, where it is below 1e-85 (zt_expf's clamp keeps it finite and tiny: an infinite x gives ~0 or 1; a NaN, clamped
   too, so zt_expf never sees one, comes back through 1 + erf) */
ZT_HD float zt_gelu_erf_grad(float x) {
    const float xc = fabsf(x) <= 20.0f ? x : copysignf(20.0f, x);
    const float pdf = xc * ZT_INV_SQRT_2PI * zt_expf(-0.5f * xc * xc);
    return fmaf(0.5f, zt_one_plus_erff(x * ZT_SQRT1_2), pdf);
}

/* argmax_rows' order: (v, j) beats the best so far (bv, bj) when v is a number and larger, or equal at a lower index.
   Start from (-INFINITY, INT32_MAX): the lowest index of the maximum wins, in any order of comparisons (the CUDA
   kernel's butterfly), a NaN never wins, and a row of NaN only keeps bj = INT32_MAX */
ZT_HD int zt_argmax_better(float v, int32_t j, float bv, int32_t bj) {
    return v == v && (v > bv || (v == bv && j < bj));
}

/* GELU, tanh approximation */
ZT_HD float zt_gelu(float x) {
    float u = ZT_GELU_K * (x + ZT_GELU_C * x * x * x);
    return 0.5f * x * (1.0f + zt_tanhf(u));
}

/* d gelu(x) / dx */
ZT_HD float zt_gelu_grad(float x) {
    float u = ZT_GELU_K * (x + ZT_GELU_C * x * x * x);
    float t = zt_tanhf(u);
    float sech2 = 1.0f - t * t;
    return 0.5f * (1.0f + t) + 0.5f * x * sech2 * ZT_GELU_K * (1.0f + 3.0f * ZT_GELU_C * x * x);
}

/* one AdamW element: updates *param, *m, *v from the gradient g (already scaled). Every product that meets a sum is
   an explicit fused multiply-add, so no compiler is left a choice: GCC (-ffp-contract=fast, the gnu11 default) and
   nvcc (-fmad=true) otherwise fuse a * b + c each where it likes, and the host's update (zero.offload) would differ
   from the device's in the last bit */
ZT_HD void zt_adamw_elem(float *param, float *m, float *v, float g, float lr, float beta1, float beta2, float eps,
                         float weight_decay, float bias_corr1, float bias_corr2) {
    const float gm = (1.0f - beta1) * g, gv = ((1.0f - beta2) * g) * g;
    float mi = fmaf(beta1, *m, gm);
    float vi = fmaf(beta2, *v, gv);
    *m = mi;
    *v = vi;
    float mhat = mi / bias_corr1, vhat = vi / bias_corr2;
    const float step = fmaf(weight_decay, *param, mhat / (sqrtf(vhat) + eps));
    *param = fmaf(-lr, step, *param);
}

/* clip factor as torch.nn.utils.clip_grad_norm_: min(1, clip / (norm + 1e-6)); 1 when clip <= 0 */
ZT_HD float zt_clip_factor(double norm, double clip) {
    if (clip <= 0.0) return 1.0f;
    const double f = clip / (norm + 1e-6);
    return f < 1.0 ? (float)f : 1.0f;
}

/* the update's gradient scale from the sum of squares of the (loss-scaled) gradients: *norm = sqrt(sum) /
   loss_scale, then the clip factor over the loss scale; NaN (the update skips the step) where skip_nonfinite and
   the norm is not finite. The host and every device compute it with this one expression (clip_scale) */
ZT_HD float zt_grad_scale(double sum, float loss_scale, double clip, int skip_nonfinite, double *norm) {
    const double nm = sqrt(sum) / (double)loss_scale;
    *norm = nm;
    if (skip_nonfinite && !isfinite(nm)) return zt_int_bits_to_float(0x7fc00000); /* a quiet NaN */
    return zt_clip_factor(nm, clip) / loss_scale;
}

/* LayerNorm: 1/sqrt(var + eps) from the row's mean square deviation sum over C (eps: model.norm_eps; GPT-2's is
   ZT_LN_EPS) */
ZT_HD float zt_ln_rstd(float sum_sq_dev, int C, float eps) { return 1.0f / sqrtf(sum_sq_dev / (float)C + eps); }
/* out = (x - mean) * rstd * w + b */
ZT_HD float zt_ln_out(float x, float mean, float rstd, float w, float b) { return (x - mean) * rstd * w + b; }
/* dx of one element, given the row means of dn = w*dy and dn*xn (sum_dn / C, sum_dn_xn / C) */
ZT_HD float zt_ln_dx(float x, float mean, float rstd, float w, float dy, float mean_dn, float mean_dn_xn) {
    float xn = (x - mean) * rstd;
    float dn = w * dy;
    return (dn - mean_dn - xn * mean_dn_xn) * rstd;
}

/* RMSNorm: 1/sqrt(mean square + eps) from the row's sum of squares over C */
ZT_HD float zt_rms_rstd(float sum_sq, int C, float eps) { return 1.0f / sqrtf(sum_sq / (float)C + eps); }
/* out = x * rstd * w (transformers' LlamaRMSNorm: weight * (x * rsqrt(variance + eps))) */
ZT_HD float zt_rms_out(float x, float rstd, float w) { return x * rstd * w; }
/* dx of one element, given the row mean of dn * xn (dn = w*dy, xn = x*rstd): (dn - xn * mean_dn_xn) * rstd */
ZT_HD float zt_rms_dx(float x, float rstd, float w, float dy, float mean_dn_xn) {
    float xn = x * rstd;
    float dn = w * dy;
    return (dn - xn * mean_dn_xn) * rstd;
}
/* one row's term of dw: xn * dy */
ZT_HD float zt_rms_dw(float x, float rstd, float dy) { return x * rstd * dy; }

/* rotary position embedding (transformers' rotate_half): the pair (x1, x2) = (x[i], x[i + hs/2]) of a head
   rotated by the angle whose cosine and sine are c, s (s negated: the inverse rotation, rope's backward):
   x1' = x1 c - x2 s, x2' = x2 c + x1 s */
ZT_HD float zt_rope_lo(float x1, float x2, float c, float s) { return x1 * c - x2 * s; }
ZT_HD float zt_rope_hi(float x1, float x2, float c, float s) { return x2 * c + x1 * s; }

/* SiLU (swish): g * sigmoid(g) = g / (1 + exp(-g)); zt_expf's clamp keeps the denominator finite */
ZT_HD float zt_silu(float g) { return g / (1.0f + zt_expf(-g)); }
/* d silu(g) / dg = sigmoid(g) * (1 + g * (1 - sigmoid(g))), with 1 - sigmoid(g) as exp(-g) * sigmoid(g): no
   cancellation where sigmoid(g) rounds to 1 (g > ~17, where g * (1 - sigmoid) still moves the result by ~1e-6) */
ZT_HD float zt_silu_grad(float g) {
    float e = zt_expf(-g);
    float sg = 1.0f / (1.0f + e);
    return sg * (1.0f + g * (e * sg));
}
/* SwiGLU's element: silu(gate) * up */
ZT_HD float zt_swiglu(float g, float u) { return zt_silu(g) * u; }
/* its gradients: d/dgate = dy * up * silu'(gate), d/dup = dy * silu(gate) */
ZT_HD float zt_swiglu_dgate(float g, float u, float dy) { return dy * u * zt_silu_grad(g); }
ZT_HD float zt_swiglu_dup(float g, float dy) { return dy * zt_silu(g); }

/* float -> bf16 bits, round to nearest even (as __float2bfloat16_rn); NaN stays a (quiet) NaN */
ZT_HD uint16_t zt_f32_to_bf16_bits(float f) {
    uint32_t u = zt_float_to_bits(f);
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

ZT_HD float zt_bf16_bits_to_f32(uint16_t h) { return zt_int_bits_to_float((int32_t)((uint32_t)h << 16)); }

/* float -> IEEE binary16 bits, round to nearest even (as __float2half_rn): |x| >= 65520 gives Inf,
   subnormals below 2^-14 are rounded to multiples of 2^-24, NaN stays a (quiet) NaN */
ZT_HD uint16_t zt_f32_to_fp16_bits(float f) {
    const uint32_t u = zt_float_to_bits(f);
    const uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);          /* NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);         /* Inf, or rounds to it */
    if (a >= 0x38800000u) {                                          /* normal: rebias 127 -> 15 */
        const uint32_t r = a + 0x0fffu + ((a >> 13) & 1u) - (112u << 23);
        return (uint16_t)(sign | (r >> 13));
    }
    if (a <= 0x33000000u) return (uint16_t)sign;                     /* <= 2^-25 (the tie goes to 0) */
    /* subnormal: the value in units of 2^-24 is m * 2^(e - 126), rounded to nearest even */
    const uint32_t e = a >> 23, m = (a & 0x007fffffu) | 0x00800000u, sh = 126u - e;
    const uint32_t q = m >> sh, rem = m & ((1u << sh) - 1u), hw = 1u << (sh - 1u);
    return (uint16_t)(sign | (q + (rem > hw || (rem == hw && (q & 1u)))));
}

ZT_HD float zt_fp16_bits_to_f32(uint16_t h) {
    const uint32_t sign = ((uint32_t)h & 0x8000u) << 16, e = ((uint32_t)h >> 10) & 0x1fu, m = (uint32_t)h & 0x3ffu;
    if (e == 0x1fu) return zt_int_bits_to_float((int32_t)(sign | 0x7f800000u | (m << 13)));
    if (e == 0) {
        const float x = (float)m * 5.9604644775390625e-08f; /* m * 2^-24, exact */
        return sign ? -x : x;
    }
    return zt_int_bits_to_float((int32_t)(sign | ((e + 112u) << 23) | (m << 13)));
}

/* float -> fp16 -> float: the value an fp16 buffer stores (Inf past 65504: fp16's overflow) */
ZT_HD float zt_round_fp16(float f) { return zt_fp16_bits_to_f32(zt_f32_to_fp16_bits(f)); }

/* float -> bf16 -> float, round to nearest even (NaN stays NaN) */
ZT_HD float zt_round_bf16(float f) {
    uint32_t u = zt_float_to_bits(f);
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) return f;
    u += 0x7fffu + ((u >> 16) & 1u);
    return zt_int_bits_to_float((int32_t)(u & 0xffff0000u));
}

/* the value a buffer of precision prec (1 bf16, 2 fp16: zt_prec) stores for f; other prec: f itself */
ZT_HD float zt_round_prec(float f, int prec) {
    return prec == 1 ? zt_round_bf16(f) : prec == 2 ? zt_round_fp16(f) : f;
}

/* a value as the 2-byte word of precision prec (1 bf16, else fp16: zt_prec; round to nearest even), and a word back
   (exact): the storage of the 2-byte buffers (pack16, the stash, 2-byte logits and GEMM operands) */
ZT_HD uint16_t zt_f32_to_bits16(float f, int prec) { return prec == 1 ? zt_f32_to_bf16_bits(f) : zt_f32_to_fp16_bits(f); }
ZT_HD float zt_bits16_to_f32(uint16_t h, int prec) { return prec == 1 ? zt_bf16_bits_to_f32(h) : zt_fp16_bits_to_f32(h); }

/* dropout's mask: element i of stream `seed` is kept iff u >= p, u = the top 24 bits of splitmix64's
   finaliser of (seed, i) as a multiple of 2^-24 (exact in fp32): a counter-based hash, so every backend,
   thread count and tiling gives the same mask */
ZT_HD uint64_t zt_mix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* softmax_xent's scale (iface/backend.h): dscale, or where dscale is non-zero and a scale is given in memory
   (dscale_at: a step's, uploaded with its rows), that one */
ZT_HD float zt_xent_dscale(float dscale, const float *dscale_at) {
    return dscale != 0.0f && dscale_at ? *dscale_at : dscale;
}

/* LoRA dropout's seed: base (train.seed and the site, mixed by the model) in global micro-batch `micro` */
ZT_HD uint64_t zt_dropout_seed(uint64_t base, uint64_t micro) {
    const uint64_t x = base + micro * 0xBF58476D1CE4E5B9ull;
    return x ^ (x >> 31);
}

ZT_HD int zt_dropout_keep(uint64_t seed, uint64_t i, float p) {
    const uint32_t b = (uint32_t)(zt_mix64(seed ^ (i * 0xD1B54A32D192ED03ull)) >> 40);
    return (float)b * 5.9604644775390625e-08f >= p;
}

#endif
