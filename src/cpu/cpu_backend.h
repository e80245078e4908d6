/* cpu_backend.h — the cpu backend: C + OpenMP + a CBLAS (BLIS by default). */
#ifndef ZT_CPU_BACKEND_H
#define ZT_CPU_BACKEND_H

#include "backend.h"

/* threads <= 0: OMP default. Chooses BLIS kernels from the CPU's features when the user has not
   set BLIS_ARCH_TYPE (must run before the first BLAS call). */
zt_backend *zt_cpu_backend_create(int threads);
void zt_cpu_backend_free(zt_backend *be);
/* "blis 0.9 (skx kernels)" etc. */
const char *zt_cpu_blas_name(void);
/* ops implemented in cpu_ops.c / cpu_attention.c, wired into the vtable by cpu_backend.c */
void zt_cpu_fill_ops(zt_backend_i *i);
void zt_cpu_fill_attention(zt_backend_i *i);
void zt_cpu_fill_decode(zt_backend_i *i);

#endif
