/* devsim_mem.h — devsim's simulated device memory (internal to src/devsim/).
 *
 * One reservation of 2 * span bytes, all PROT_NONE at first: device addresses are the first half,
 * and the real memory of device address d is d + span in the second half. An allocation makes
 * only its real pages readable and writable, so host code that dereferences a device address
 * faults whatever the allocation, and backend code that runs past the end of an allocation hits
 * a guard page. Translation is one subtraction, one comparison and one addition. */
#ifndef ZT_DEVSIM_MEM_H
#define ZT_DEVSIM_MEM_H

#include <stddef.h>
#include <stdint.h>

#include "util/util.h"

/* set once by zt_devsim_mem_init(), read-only afterwards; span 0 until then (nothing translates) */
typedef struct zt_devsim_range {
    uintptr_t dev;   /* first device address */
    size_t span;     /* bytes of device addresses; real = dev + span */
} zt_devsim_range;
extern zt_devsim_range zt_devsim_g;

/* reserves the address ranges and installs the SIGSEGV reporter (idempotent, thread-safe) */
void zt_devsim_mem_init(void);
/* page-granular, zero-filled; a unique address even for 0 bytes */
void *zt_devsim_mem_alloc(size_t bytes);
/* dev must be a live allocation's address (else panics); NULL is ignored */
void zt_devsim_mem_free(void *dev);
/* bytes reserved for device memory */
size_t zt_devsim_mem_span(void);

ZT_NORETURN void zt_devsim_not_device(const void *p, const char *where);
ZT_NORETURN void zt_devsim_not_host(const void *p, const char *where);

/* the real address of device address p (NULL -> NULL); anything else panics naming `where` */
static inline void *zt_devsim_real(const void *p, const char *where) {
    if (!p) return NULL;
    if ((uintptr_t)p - zt_devsim_g.dev >= zt_devsim_g.span) zt_devsim_not_device(p, where);
    return (char *)p + zt_devsim_g.span;
}

/* host memory given to to_device / to_host must not be device memory */
static inline void zt_devsim_check_host(const void *p, const char *where) {
    if ((uintptr_t)p - zt_devsim_g.dev < zt_devsim_g.span) zt_devsim_not_host(p, where);
}

#endif
