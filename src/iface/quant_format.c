/* quant_format.c — the layout planner and the reference range decoder of the quantised formats specified in
 * quant_format.h (the cpu backend's dequant slot runs it; CUDA kernels reproduce it element by element). */
#include "iface/quant_format.h"

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
