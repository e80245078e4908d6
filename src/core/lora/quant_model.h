/* quant_model.h — a loaded model's frozen linear weights through a quantised format (QLoRA's base, issue
 * 12): every transformer layer's four linear weights (attn.c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj)
 * are encoded with core/lora/quant.h and replaced by their decoding, so a forward pass computes with exactly
 * the values a quantised base holds. Embeddings (wte is also the tied LM head), LayerNorms and biases
 * stay fp32, as QLoRA keeps non-linear-layer parameters in higher precision. The weights still occupy
 * fp32 buffers here (a dequantise-on-the-fly backend path is the QLoRA step that follows); the report
 * gives the storage the quantised base would take. */
#ifndef ZT_QUANT_MODEL_H
#define ZT_QUANT_MODEL_H

#include <stddef.h>

#include "core/model/model.h"
#include "core/lora/quant.h"

typedef struct zt_quant_report {
    size_t n_quant;          /* parameters in the quantised tensors */
    size_t bytes_quant;      /* their blobs' bytes */
    size_t n_other;          /* parameters kept fp32 */
    double rms_rel;          /* sqrt(sum (w - dq)^2 / sum w^2) over the quantised tensors */
} zt_quant_report;

/* Every rank does the same (the model's parameters are whole on every rank): the result is identical
   everywhere. 0, or 1 with err (a non-finite weight). */
int zt_quant_model_linear(zt_model *m, zt_quant_fmt fmt, zt_quant_report *r, char *err, size_t errn);

#endif
