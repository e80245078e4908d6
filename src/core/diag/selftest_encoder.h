/* selftest_encoder.h — the selftest's rows for the encoder family's backend slots (BERT, RoBERTa: iface/backend.h
 * attention_bidir_*, gelu_erf_*, bias_add, bias_grad, argmax_rows): each a builder of the case (selftest_case.h) and
 * the runner of the op on one backend, listed in selftest_ops.c's table. v: the variant. */
#ifndef ZT_SELFTEST_ENCODER_H
#define ZT_SELFTEST_ENCODER_H

#include "core/diag/selftest_case.h"

/* bidirectional attention with a key padding mask: v 0 multi-head, v 1 grouped-query (6 query heads on 2) */
void st_b_attention_bidir_fwd(st_case *k, int v);
void st_op_attention_bidir_fwd(zt_backend *be, st_case *k, float **out);
void st_b_attention_bidir_bwd(st_case *k, int v);
void st_op_attention_bidir_bwd(zt_backend *be, st_case *k, float **out);
/* the exact GELU forward, backward, and backward in place (dinp == dout) */
void st_b_gelu_erf(st_case *k, int v);
void st_op_gelu_erf(zt_backend *be, st_case *k, float **out);
/* bias_add on logits and bias_grad of a gradient (bit-identical: single roundings, rows summed in order) */
void st_b_bias(st_case *k, int v);
void st_op_bias(zt_backend *be, st_case *k, float **out);
/* argmax_rows with ties, NaN, infinities and padded columns (exact) */
void st_b_argmax_rows(st_case *k, int v);
void st_op_argmax_rows(zt_backend *be, st_case *k, float **out);

#endif
