/* quant.c — encoding of fp32 tensors into the quantised formats of iface/quant_format.h (NF4, NF4 with double
 * quantisation, per-row int8). The formats are specified there; this file only implements the encoder. */
#include "core/lora/quant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

static unsigned nf4_nearest(float x)
{
    unsigned best = 0;
    float bd = fabsf(x - zt_nf4_value(0));
    for (unsigned k = 1; k < 16; k++) {
        float d = fabsf(x - zt_nf4_value(k));
        if (d < bd) {
            bd = d;
            best = k;
        }
    }
    return best;
}

/* the same over the 256 values of DQ8 (table built once per encode) */
static unsigned dq8_nearest(const float *dq8, float x)
{
    unsigned best = 0;
    float bd = fabsf(x - dq8[0]);
    for (unsigned k = 1; k < 256; k++) {
        float d = fabsf(x - dq8[k]);
        if (d < bd) {
            bd = d;
            best = k;
        }
    }
    return best;
}

/* first non-finite element, or n */
static size_t first_nonfinite(const float *w, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(w[i])) return i;
    return n;
}

/* NF4 codes of every block into codes[], the fp32 absmax of block b into absmax[b] */
static void nf4_encode_blocks(const float *w, size_t n, size_t nb, uint8_t *codes, float *absmax)
{
#pragma omp parallel for schedule(static)
    for (size_t b = 0; b < nb; b++) {
        size_t lo = b * ZT_NF4_BLOCK, hi = lo + ZT_NF4_BLOCK < n ? lo + ZT_NF4_BLOCK : n;
        float amax = 0.0f;
        for (size_t i = lo; i < hi; i++) amax = fmaxf(amax, fabsf(w[i]));
        uint8_t q[ZT_NF4_BLOCK];
        for (size_t i = lo; i < lo + ZT_NF4_BLOCK; i++)
            q[i - lo] = (uint8_t)(i < hi && amax > 0.0f ? nf4_nearest(w[i] / amax) : 7u);
        for (int k = 0; k < ZT_NF4_BLOCK / 2; k++) codes[b * (ZT_NF4_BLOCK / 2) + k] = (uint8_t)(q[2 * k] << 4 | q[2 * k + 1]);
        absmax[b] = amax;
    }
}

/* QLoRA's double quantisation of the nb constants c[] (quant.h): qa[nb], a2[nb2], *mean */
static void dq_encode(const float *c, size_t nb, size_t nb2, uint8_t *qa, float *a2, float *mean_out)
{
    double sum = 0.0;
    for (size_t b = 0; b < nb; b++) sum += c[b]; /* serial: the one order-dependent step */
    float mean = nb ? (float)(sum / (double)nb) : 0.0f;
    *mean_out = mean;
    float dq8[256];
    for (unsigned k = 0; k < 256; k++) dq8[k] = zt_dq8_value(k);
#pragma omp parallel for schedule(static)
    for (size_t g = 0; g < nb2; g++) {
        size_t lo = g * ZT_DQ_BLOCK, hi = lo + ZT_DQ_BLOCK < nb ? lo + ZT_DQ_BLOCK : nb;
        float amax = 0.0f;
        for (size_t b = lo; b < hi; b++) amax = fmaxf(amax, fabsf(c[b] - mean));
        for (size_t b = lo; b < hi; b++) qa[b] = (uint8_t)dq8_nearest(dq8, amax > 0.0f ? (c[b] - mean) / amax : 0.0f);
        a2[g] = amax;
    }
}

static void int8_encode_rows(const float *w, size_t rows, size_t cols, int8_t *q, float *scales)
{
#pragma omp parallel for schedule(static)
    for (size_t r = 0; r < rows; r++) {
        const float *x = w + r * cols;
        float amax = 0.0f;
        for (size_t c = 0; c < cols; c++) amax = fmaxf(amax, fabsf(x[c]));
        float d = amax / 127.0f;
        int8_t *qr = q + r * cols;
        for (size_t c = 0; c < cols; c++) {
            float v = d > 0.0f ? rintf(x[c] / d) : 0.0f;
            v = v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v;
            qr[c] = (int8_t)v;
        }
        scales[r] = d;
    }
}

int zt_quant_encode(const zt_quant_layout *L, const float *w, void *blob, char *err, size_t errn)
{
    size_t bad = first_nonfinite(w, L->n);
    if (bad < L->n) return zt_errf(err, errn, "element %zu is not finite (%g)", bad, (double)w[bad]);
    uint8_t *base = (uint8_t *)blob;
    memset(base, 0, L->bytes); /* padding is zero: blobs compare byte for byte */
    switch (L->fmt) {
    case ZT_QUANT_NF4:
        nf4_encode_blocks(w, L->n, L->nblocks, base + L->codes, (float *)(base + L->absmax));
        break;
    case ZT_QUANT_NF4_DQ: {
        float *c = zt_malloc((L->nblocks ? L->nblocks : 1) * sizeof(float));
        nf4_encode_blocks(w, L->n, L->nblocks, base + L->codes, c);
        dq_encode(c, L->nblocks, L->nblocks2, base + L->qabsmax, (float *)(base + L->absmax2), (float *)(base + L->mean));
        free(c);
        break;
    }
    case ZT_QUANT_INT8:
        int8_encode_rows(w, L->rows, L->cols, (int8_t *)(base + L->codes), (float *)(base + L->scales));
        break;
    }
    return 0;
}
