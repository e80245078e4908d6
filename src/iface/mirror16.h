/* mirror16.h — which float32 device buffers currently equal 2-byte words elsewhere in device memory, so a bf16 /
 * fp16 product can read the words instead of packing the buffer again. Used by the CUDA backend
 * (cuda/cuda_backend_core.cu) and mirrored by the counting wrapper (core/diag/count_state.c), which must take the same
 * decisions to count the same bytes; header-only, C and C++.
 *
 * An entry (dst, src, n) says: the n floats at dst are the words at src, widened; packing dst gives src. unpack16
 * makes one (the working parameters' window from the 2-byte parameters, a layer's activations from their stash).
 * It holds until either range is written: a slot that keeps entries names every range it writes
 * (zt_mirror16_clobber) before it runs; any other slot or memory call clears them all (zt_mirror16_clear).
 * A lazy entry (unpack16_lazy's, or a product that wrote only its rounded output's words) has not written dst yet: its owner writes it (the unpack it deferred) before a
 * slot reads dst as float32, before either range is written (but for a write of all of dst) and before a clear or
 * the entry's eviction; every entry must go through the owner's checks first (cuda_backend_core.cu settle_*). The
 * communicator writes parameters only after the update, which clears them (docs/design.md section 9).
 * Addresses are the model's (device addresses as the slots receive them), compared as byte ranges. */
#ifndef ZT_MIRROR16_H
#define ZT_MIRROR16_H

#include <stddef.h>
#include <stdint.h>

#define ZT_MIRROR16_MAX 32

typedef struct zt_mirror16_entry {
    uintptr_t dst, src; /* dst: n floats; src: n 2-byte words */
    size_t n;
    int lazy;           /* unpack16_lazy's: dst not written yet (the owner writes it before anything reads it as
                           float32, or before the entry goes, unless what goes is all of dst, overwritten) */
} zt_mirror16_entry;

typedef struct zt_mirror16 {
    zt_mirror16_entry e[ZT_MIRROR16_MAX];
    int n;
    long hits; /* operands read from words (for the launch / byte counts and their test) */
} zt_mirror16;

static inline void zt_mirror16_clear(zt_mirror16 *m) { m->n = 0; }

static inline int zt_mirror16_overlap(uintptr_t a, size_t abytes, uintptr_t b, size_t bbytes) {
    return a < b + bbytes && b < a + abytes;
}

/* whether the pn floats at p lie within the n floats at base, at a whole float's offset (*off, in floats) */
static inline int zt_mirror16_within(const void *base, size_t n, const void *p, size_t pn, size_t *off) {
    const uintptr_t a = (uintptr_t)base, b = (uintptr_t)p;
    if (!p || b < a || (b - a) % 4 != 0 || (b - a) / 4 + pn > n) return 0;
    *off = (b - a) / 4;
    return 1;
}

/* [p, p + bytes) is about to be written: the entries that read or name it go */
static inline void zt_mirror16_clobber(zt_mirror16 *m, const void *p, size_t bytes) {
    if (!p || !bytes) return;
    const uintptr_t a = (uintptr_t)p;
    int k = 0;
    for (int i = 0; i < m->n; i++) {
        const zt_mirror16_entry *e = &m->e[i];
        if (zt_mirror16_overlap(a, bytes, e->dst, e->n * 4) || zt_mirror16_overlap(a, bytes, e->src, e->n * 2)) continue;
        m->e[k++] = *e;
    }
    m->n = k;
}

/* after unpack16(dst, src, n) (dst already clobbered as written): dst equals src's words */
static inline void zt_mirror16_add(zt_mirror16 *m, const float *dst, const void *src, size_t n) {
    if (!n) return;
    if (m->n == ZT_MIRROR16_MAX) { /* the oldest goes */
        for (int i = 1; i < m->n; i++) m->e[i - 1] = m->e[i];
        m->n--;
    }
    zt_mirror16_entry *e = &m->e[m->n++];
    e->dst = (uintptr_t)dst;
    e->src = (uintptr_t)src;
    e->n = n;
    e->lazy = 0;
}

/* the entry (dst, src, n) made lazy (dst's floats not written: only the words are): 1, or 0 when it is not there
   (the caller adds it lazy, settling an evicted lazy one first) */
static inline int zt_mirror16_mark_lazy(zt_mirror16 *m, const float *dst, const void *src, size_t n) {
    for (int i = 0; i < m->n; i++)
        if (m->e[i].dst == (uintptr_t)dst && m->e[i].src == (uintptr_t)src && m->e[i].n == n) {
            m->e[i].lazy = 1;
            return 1;
        }
    return 0;
}

/* the words equal to the n floats at p, or NULL */
static inline const uint16_t *zt_mirror16_find(const zt_mirror16 *m, const float *p, size_t n) {
    const uintptr_t a = (uintptr_t)p;
    for (int i = m->n - 1; i >= 0; i--) {
        const zt_mirror16_entry *e = &m->e[i];
        if (a >= e->dst && (a - e->dst) % 4 == 0 && (a - e->dst) / 4 + n <= e->n)
            return (const uint16_t *)(e->src + (a - e->dst) / 2);
    }
    return NULL;
}

#endif
