/* quant.h — encoding fp32 tensors into the quantised formats of iface/quant_format.h (NF4, NF4 with double
 * quantisation, per-row int8), for QLoRA's frozen base weights. Determinism: encoding is elementwise within a
 * block / row plus order-independent maxima; the one sum (NF4_DQ's mean) is serial, so blobs are bit-identical
 * for any OpenMP thread count. Encoding refuses non-finite input (the NaN would silently poison a whole block). */
#ifndef ZT_QUANT_H
#define ZT_QUANT_H

#include <stddef.h>

#include "iface/quant_format.h"

/* Encodes w[0 .. L->n) into blob[0 .. L->bytes) (every byte written). 0, or 1 with
   "element I is not finite (V)" in err (blob contents then undefined). OpenMP over blocks / rows. */
int zt_quant_encode(const zt_quant_layout *L, const float *w, void *blob, char *err, size_t errn);

#endif
