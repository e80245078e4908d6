/* cpu_backend.h — the cpu backend: C + OpenMP + a CBLAS (BLIS by default). */
#ifndef ZT_CPU_BACKEND_H
#define ZT_CPU_BACKEND_H

#include "iface/backend.h"

/* threads <= 0: OMP default. Chooses BLIS kernels from the CPU's features when the user has not
   set BLIS_ARCH_TYPE (must run before the first BLAS call). Sets the process's OpenMP and BLAS
   thread counts. Host memory; destroyed through its destroy slot (the factory's zt_backend_destroy).
   Called by the factory and by the devsim backend, which runs these same ops. */
zt_backend *zt_cpu_backend_create(int threads);
/* "blis 0.9 (skx kernels)" etc. */
const char *zt_cpu_blas_name(void);
/* ops implemented in cpu_ops.c / cpu_attention.c / cpu_decode.c / cpu_llama.c / cpu_encoder.c / cpu_store16.c,
   wired into the vtable by cpu_backend.c */
void zt_cpu_fill_ops(zt_backend_i *i);
void zt_cpu_fill_attention(zt_backend_i *i);
void zt_cpu_fill_decode(zt_backend_i *i);
void zt_cpu_fill_llama(zt_backend_i *i);
void zt_cpu_fill_encoder(zt_backend_i *i);
void zt_cpu_fill_store16(zt_backend_i *i);
/* softmax + cross-entropy of one row of logits x(Vp) with target tgt (iface/backend.h softmax_xent): returns its
   loss, x overwritten with its dlogits unless dscale == 0 (cpu_ops.c; cpu_store16.c runs it on widened rows) */
float zt_cpu_xent_row(float *x, int tgt, int V, int Vp, float dscale);
/* sum(OC) = column sums of x(N, OC), overwritten, each column over rows 0..N-1 in order (linear_bwd's dbias and
   bias_grad: the same bits for any thread count) */
void zt_cpu_colsum(float *sum, const float *x, int N, int OC);

#endif
