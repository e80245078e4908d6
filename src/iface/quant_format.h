/* quant_format.h — the quantised formats of frozen base weights (QLoRA, docs/finetuning.md): the three formats,
 * their byte layout and decoding of any element range back to fp32; what a backend's dequant slot includes
 * (encoding is core/lora/quant.h's). The decode math (codebooks, nibble and block arithmetic) is the ZT_HD inline
 * section below, written so the cpu backend and a CUDA kernel decode a tile with the same formulas; it uses
 * nothing but iface/op_math.h (for ZT_HD).
 *
 * Formats (a tensor of n = rows * cols fp32 values, row-major):
 *
 *  NF4     blocks of 64 consecutive elements (flat index; rows do not matter), the last block
 *          partial when 64 does not divide n. Per block: absmax = max |w| (fp32); each element
 *          x = w / absmax (IEEE division; x = 0 when absmax = 0) is coded as the index q of the
 *          nearest of the 16 NormalFloat4 values of the QLoRA paper (zt_nf4_value: -1 .. 1 with
 *          an exact 0 at q = 7): q = the first k with the least fabsf(x - NF4[k]) in fp32.
 *          Decode: NF4[q] * absmax (one fp32 multiply). 0 stays exactly 0, and the element equal
 *          to +-absmax comes back exactly. Two codes per byte, element 2k in the HIGH nibble and
 *          2k+1 in the low one (bitsandbytes' order); the nibbles past n in the last byte(s) of a
 *          partial block hold 7 (zero).
 *  NF4_DQ  NF4 with QLoRA's double quantisation of the constants: the codes are chosen with the
 *          exact fp32 absmax as above, then the nb absmax values c_b are stored in 8 bits:
 *            mean = (float)(sum_b c_b / nb), the sum in double in block order (one per tensor);
 *            per group of 256 consecutive blocks (the last one partial): d_b = c_b - mean (fp32),
 *            a2 = max |d_b| (fp32, stored), x = d_b / a2 (0 when a2 = 0), qa_b = the first k with
 *            the least fabsf(x - DQ8[k]) over the 256 values of zt_dq8_value;
 *            decoded absmax c'_b = fmaf(DQ8[qa_b], a2, mean) (one rounding: explicit fma, so C,
 *            nvcc and a reference agree whatever the compilers contract).
 *          DQ8 is the signed "dynamic tree" 8-bit map of Dettmers' 8-bit optimizers, the map
 *          bitsandbytes quantises absmax with (create_dynamic_map(signed=True)): 0, 1, and for
 *          z = 0..6 leading "exponent" zeros the 2^(6-z) midpoints of 2^(6-z) equal steps of
 *          [0.1, 1] times 10^-z, both signs; sorted ascending, so DQ8[127] = 0, DQ8[255] = 1,
 *          DQ8[254] = 0.99296875, DQ8[0] = -0.99296875 (-1 is not in the map). Each value here
 *          is num / den computed in fp32 with num, den exact integers, i.e. the fp32 nearest the
 *          exact decimal value. NB the decoded c'_b is within a2 * 0.0071 of c_b and can be a
 *          little below 0 for a block whose absmax is far below its group's: that block's values
 *          then decode with flipped sign, still within that error (the paper's scheme, kept).
 *  INT8    per row: absmax = max |w| over the row's cols values; scale d = absmax / 127.0f
 *          (fp32, stored); q = rintf(w / d) (half to even) clamped to [-127, 127], q = 0 when
 *          d = 0; decode q * d, so |w - q d| <= absmax / 254 (+ fp32 rounding). A row is a row of
 *          the matrix as ztrain stores it: for a linear weight w(C, OC) = (in, out), a row is one
 *          input channel (OC values), i.e. the scales are per input channel.
 *
 * Layout of a blob (zt_quant_plan; every section starts at a multiple of 16 bytes, padding is
 * zero, the total is a multiple of 16; nb = ceil(n / 64), nb2 = ceil(nb / 256)):
 *   NF4     codes uint8[32 nb] @0 | absmax fp32[nb]            36 nb bytes (+ padding): 4.5 bits/param
 *   NF4_DQ  codes uint8[32 nb] @0 | qabsmax uint8[nb] | absmax2 fp32[nb2] | mean fp32[1]
 *                                          33 nb + 4 nb2 + 4 bytes (+ padding): 4.127 bits/param
 *                                          (4 + 8/64 + 32/(64*256); 4.1270 for a 768 x 3072 weight)
 *   INT8    q int8[n] @0 | scales fp32[rows]                   n + 4 rows bytes: 8 + 32/cols bits/param
 * Little-endian fp32 as the host stores it; a blob is meant to be copied as a whole to a device
 * and decoded there with the same offsets.
 *
 * Determinism: encoding is elementwise within a block / row plus order-independent maxima; the
 * one sum (the mean) is serial, so blobs are bit-identical for any OpenMP thread count.
 * Encoding refuses non-finite input (the NaN would silently poison a whole block).
 */
#ifndef ZT_QUANT_FORMAT_H
#define ZT_QUANT_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "iface/op_math.h" /* ZT_HD, and fmaf via math.h */

#define ZT_NF4_BLOCK 64    /* elements per NF4 block */
#define ZT_DQ_BLOCK 256    /* NF4 blocks per second-level group of NF4_DQ */
#define ZT_QUANT_ALIGN 16  /* every section's offset is a multiple of this */
#define ZT_QUANT_NONE ((size_t)-1) /* offset of a section a format does not have */

typedef enum zt_quant_fmt {
    ZT_QUANT_NF4 = 0,    /* NF4, fp32 absmax per 64 elements */
    ZT_QUANT_NF4_DQ = 1, /* NF4, absmax double-quantised (QLoRA's storage) */
    ZT_QUANT_INT8 = 2,   /* int8, fp32 scale per row */
} zt_quant_fmt;

/* Where everything lives in a blob; offsets in bytes from the blob's start, ZT_QUANT_NONE for the
   sections a format lacks. The one planning function: sizes and encoding both use it. */
typedef struct zt_quant_layout {
    zt_quant_fmt fmt;
    size_t rows, cols, n; /* n = rows * cols */
    size_t nblocks;       /* NF4*: ceil(n / 64); INT8: rows */
    size_t nblocks2;      /* NF4_DQ: ceil(nblocks / 256); else 0 */
    size_t codes;         /* NF4*: uint8[32 nblocks], two codes a byte; INT8: int8[n] */
    size_t absmax;        /* NF4: fp32[nblocks] */
    size_t qabsmax;       /* NF4_DQ: uint8[nblocks], indices into zt_dq8_value */
    size_t absmax2;       /* NF4_DQ: fp32[nblocks2], the a2 of each group of 256 blocks */
    size_t mean;          /* NF4_DQ: fp32[1] */
    size_t scales;        /* INT8: fp32[rows], d = absmax / 127 */
    size_t bytes;         /* the blob's size */
} zt_quant_layout;

/* layout of a rows x cols fp32 tensor in fmt (NF4 formats see it as flat n = rows * cols) */
zt_quant_layout zt_quant_plan(zt_quant_fmt fmt, size_t rows, size_t cols);
/* storage per parameter in bits (bytes * 8 / n; 0 when n = 0) */
double zt_quant_bits_per_param(const zt_quant_layout *L);
/* "nf4", "nf4_dq", "int8"; and back (0, or 1 for an unknown name) */
const char *zt_quant_fmt_name(zt_quant_fmt fmt);
int zt_quant_fmt_parse(const char *name, zt_quant_fmt *fmt);

/* Decodes elements [begin, end) (flat indices, any alignment, end <= L->n) into out[0 .. end -
   begin). The loop any backend's tile decode must reproduce: zt_nf4_decode / zt_int8_decode per
   element. OpenMP over blocks for large ranges (a nested call inside a parallel region runs
   serially); each element is independent, so the result never depends on the thread count. */
void zt_quant_decode(const zt_quant_layout *L, const void *blob, size_t begin, size_t end, float *out);

/* ---------------------------------------------------------------- inline decode math (C, CUDA) */

/* the 16 NormalFloat4 values (QLoRA, Dettmers et al. 2023, appendix E), q in 0..15 */
ZT_HD float zt_nf4_value(unsigned q) {
    static const float nf4[16] = {
        -1.0f, -0.6961928009986877f, -0.5250730514526367f, -0.39491748809814453f,
        -0.28444138169288635f, -0.18477343022823334f, -0.09105003625154495f, 0.0f,
        0.07958029955625534f, 0.16093020141124725f, 0.24611230194568634f, 0.33791524171829224f,
        0.44070982933044434f, 0.5626170039176941f, 0.7229568362236023f, 1.0f,
    };
    return nf4[q & 15u];
}

/* the 4-bit code of element i (element 2k in the high nibble of byte k) */
ZT_HD unsigned zt_nf4_code(const uint8_t *codes, size_t i) {
    return (unsigned)(codes[i >> 1] >> ((~i & 1u) << 2)) & 15u;
}

/* DQ8[q], q in 0..255 (see the header comment): q = 127 -> 0, 255 -> 1; 128 + p for p in 0..126
   are the positive values in ascending order: p + 1 in [2^k, 2^(k+1)) is step j = p + 1 - 2^k of
   the k-bit fraction at exponent 10^-(6-k): (0.1 + 0.9 (2j+1) / 2^(k+1)) 10^(k-6)
   = (2^(k+1) + 9 (2j+1)) / (2^(k+1) 10^(7-k)); both integers are exact in fp32 (den = 2^8 5^(7-k)),
   so the one division rounds the exact value. 126 - p mirrors to the negative side. */
ZT_HD float zt_dq8_value(unsigned q) {
    q &= 255u;
    if (q == 127u) return 0.0f;
    if (q == 255u) return 1.0f;
    unsigned p = q > 127u ? q - 128u : 126u - q;
    unsigned k = 0;
    while ((p + 1u) >> (k + 1u)) k++;
    unsigned j = p + 1u - (1u << k);
    unsigned num = (2u << k) + 9u * (2u * j + 1u);
    unsigned den = 2u << k;
    for (unsigned e = k; e < 7u; e++) den *= 10u;
    float v = (float)num / (float)den;
    return q > 127u ? v : -v;
}

/* decoded absmax of NF4_DQ block b */
ZT_HD float zt_nf4dq_absmax(const uint8_t *qabsmax, const float *absmax2, float mean, size_t b) {
    return fmaf(zt_dq8_value(qabsmax[b]), absmax2[b / ZT_DQ_BLOCK], mean);
}

/* element i of an NF4 tensor whose block (i / 64) has decoded absmax s */
ZT_HD float zt_nf4_decode(const uint8_t *codes, float s, size_t i) {
    return zt_nf4_value(zt_nf4_code(codes, i)) * s;
}

/* element (r, c) of an INT8 tensor with cols columns */
ZT_HD float zt_int8_decode(const int8_t *q, const float *scales, size_t cols, size_t r, size_t c) {
    return (float)q[r * cols + c] * scales[r];
}

#endif
