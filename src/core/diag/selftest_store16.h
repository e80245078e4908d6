/* selftest_store16.h — the selftest's rows for the slots on 2-byte storage (iface/backend.h matmul16,
 * softmax_xent16: the LM head on 2-byte logits), run in bf16 and fp16 only: each a builder of the case
 * (selftest_case.h) and the runner of the op on one backend, listed in selftest_ops.c's table. v: the variant. */
#ifndef ZT_SELFTEST_STORE16_H
#define ZT_SELFTEST_STORE16_H

#include "core/diag/selftest_case.h"

/* the LM head's three products: v 0 the logits (2-byte c), v 1 dhead (2-byte a, transposed), v 2 dlnf (2-byte a) */
void st_b_matmul16(st_case *k, int v);
void st_op_matmul16(zt_backend *be, st_case *k, float **out);
/* softmax + cross-entropy on 2-byte logits, some targets ignored: losses and the 2-byte dlogits */
void st_b_xent16(st_case *k, int v);
void st_op_xent16(zt_backend *be, st_case *k, float **out);

#endif
