/* quant.c — encoding of fp32 tensors into the quantised formats of quant.h (NF4, NF4 with double
 * quantisation, per-row int8), the layout planner and the reference range decoder. The format is
 * specified in quant.h; this file only implements it. */
#include "core/quant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

/* ranges shorter than this decode on the calling thread */
#define ZT_QUANT_PAR_MIN 65536

static size_t align_up(size_t x) { return (x + ZT_QUANT_ALIGN - 1) / ZT_QUANT_ALIGN * ZT_QUANT_ALIGN; }

zt_quant_layout zt_quant_plan(zt_quant_fmt fmt, size_t rows, size_t cols)
{
    zt_quant_layout L;
    L.fmt = fmt;
    L.rows = rows;
    L.cols = cols;
    L.n = rows * cols;
    L.nblocks = L.nblocks2 = 0;
    L.codes = 0;
    L.absmax = L.qabsmax = L.absmax2 = L.mean = L.scales = ZT_QUANT_NONE;
    switch (fmt) {
    case ZT_QUANT_NF4:
        L.nblocks = (L.n + ZT_NF4_BLOCK - 1) / ZT_NF4_BLOCK;
        L.absmax = L.nblocks * (ZT_NF4_BLOCK / 2);
        L.bytes = align_up(L.absmax + 4 * L.nblocks);
        break;
    case ZT_QUANT_NF4_DQ:
        L.nblocks = (L.n + ZT_NF4_BLOCK - 1) / ZT_NF4_BLOCK;
        L.nblocks2 = (L.nblocks + ZT_DQ_BLOCK - 1) / ZT_DQ_BLOCK;
        L.qabsmax = L.nblocks * (ZT_NF4_BLOCK / 2);
        L.absmax2 = align_up(L.qabsmax + L.nblocks);
        L.mean = align_up(L.absmax2 + 4 * L.nblocks2);
        L.bytes = align_up(L.mean + 4);
        break;
    case ZT_QUANT_INT8:
        L.nblocks = rows;
        L.scales = align_up(L.n);
        L.bytes = align_up(L.scales + 4 * rows);
        break;
    default:
        ZT_ASSERT(0 && "unknown quantisation format");
    }
    return L;
}

double zt_quant_bits_per_param(const zt_quant_layout *L) { return L->n ? 8.0 * (double)L->bytes / (double)L->n : 0.0; }

static const char *const fmt_names[] = {"nf4", "nf4_dq", "int8"};

const char *zt_quant_fmt_name(zt_quant_fmt fmt)
{
    return (unsigned)fmt < sizeof fmt_names / sizeof fmt_names[0] ? fmt_names[fmt] : "?";
}

int zt_quant_fmt_parse(const char *name, zt_quant_fmt *fmt)
{
    for (unsigned i = 0; i < sizeof fmt_names / sizeof fmt_names[0]; i++)
        if (strcmp(name, fmt_names[i]) == 0) {
            *fmt = (zt_quant_fmt)i;
            return 0;
        }
    return 1;
}

/* index of the nearest of the 16 NF4 values to x: the first least fabsf(x - v) */
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

void zt_quant_decode(const zt_quant_layout *L, const void *blob, size_t begin, size_t end, float *out)
{
    ZT_ASSERT(begin <= end && end <= L->n);
    if (begin == end) return;
    const uint8_t *base = (const uint8_t *)blob;
    if (L->fmt == ZT_QUANT_INT8) {
        const int8_t *q = (const int8_t *)(base + L->codes);
        const float *sc = (const float *)(base + L->scales);
        size_t r0 = begin / L->cols, r1 = (end - 1) / L->cols + 1;
#pragma omp parallel for schedule(static) if (end - begin >= ZT_QUANT_PAR_MIN)
        for (size_t r = r0; r < r1; r++) {
            size_t lo = r * L->cols > begin ? r * L->cols : begin;
            size_t hi = (r + 1) * L->cols < end ? (r + 1) * L->cols : end;
            for (size_t i = lo; i < hi; i++) out[i - begin] = zt_int8_decode(q, sc, L->cols, r, i - r * L->cols);
        }
        return;
    }
    const uint8_t *codes = base + L->codes;
    const int dq = L->fmt == ZT_QUANT_NF4_DQ;
    const float *absmax = dq ? NULL : (const float *)(base + L->absmax);
    const uint8_t *qa = dq ? base + L->qabsmax : NULL;
    const float *a2 = dq ? (const float *)(base + L->absmax2) : NULL;
    const float mean = dq ? *(const float *)(base + L->mean) : 0.0f;
    size_t b0 = begin / ZT_NF4_BLOCK, b1 = (end - 1) / ZT_NF4_BLOCK + 1;
#pragma omp parallel for schedule(static) if (end - begin >= ZT_QUANT_PAR_MIN)
    for (size_t b = b0; b < b1; b++) {
        float s = dq ? zt_nf4dq_absmax(qa, a2, mean, b) : absmax[b];
        size_t lo = b * ZT_NF4_BLOCK > begin ? b * ZT_NF4_BLOCK : begin;
        size_t hi = (b + 1) * ZT_NF4_BLOCK < end ? (b + 1) * ZT_NF4_BLOCK : end;
        for (size_t i = lo; i < hi; i++) out[i - begin] = zt_nf4_decode(codes, s, i);
    }
}
