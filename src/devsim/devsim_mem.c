/* devsim_mem.c — devsim's simulated device memory: the reservation, a first-fit allocator over
 * it, and a SIGSEGV reporter that names a host access to device memory before the crash.
 *
 * Blocks are page-granular and each carries one trailing guard page that is never made
 * accessible. Freed blocks go back to PROT_NONE with their pages released (MADV_DONTNEED), so a
 * later allocation of the same addresses reads zeros and a use after free faults. */
#define _GNU_SOURCE
#include "devsim/devsim_mem.h"

#include <execinfo.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

zt_devsim_range zt_devsim_g;

typedef struct block {
    size_t off, pages; /* in pages, from the first device address; pages includes the guard */
    int used;
} block;

static struct {
    pthread_mutex_t mu;
    size_t page;
    size_t top;       /* pages handed out so far (blocks cover [0, top)) */
    block *b;         /* sorted by off, contiguous */
    int nb, cap;
    struct sigaction prev_segv;
} g = {.mu = PTHREAD_MUTEX_INITIALIZER};

static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* ------------------------------------------------------------------ the SIGSEGV reporter */

static void on_segv(int sig, siginfo_t *si, void *uc) {
    uintptr_t a = (uintptr_t)si->si_addr, d = zt_devsim_g.dev;
    if (a - d < zt_devsim_g.span || a - d - zt_devsim_g.span < zt_devsim_g.span) {
        char msg[400];
        int real = a - d >= zt_devsim_g.span;
        int n = snprintf(msg, sizeof msg,
                         "ztrain: rank %d: devsim: %s at %p (device offset %zu): %s\n"
                         "backtrace (the frame after the signal frame is the culprit; addr2line -f -e EXE +OFFSET names it):\n",
                         zt_rank(), real ? "access past a device allocation (guard page) or after its free"
                                         : "host code dereferenced device memory",
                         si->si_addr, (size_t)((a - d) % zt_devsim_g.span),
                         real ? "a backend op ran past the end of its buffer, or used a freed buffer"
                              : "only backend slots may touch backend memory; copy with to_host / to_device");
        if (n > 0 && write(STDERR_FILENO, msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1) < 0) n = 0;
        void *bt[32];
        int nf = backtrace(bt, 32);
        backtrace_symbols_fd(bt, nf, STDERR_FILENO);
    }
    /* hand the fault to whoever had it before (MPI's or the default handler): returning
       re-executes the faulting instruction under the previous disposition */
    sigaction(SIGSEGV, &g.prev_segv, NULL);
    (void)sig;
    (void)uc;
}

/* ------------------------------------------------------------------ reservation */

static void init_once(void) {
    g.page = (size_t)sysconf(_SC_PAGESIZE);
    /* device addresses and real memory: 2 x 256 GiB of address space, nothing committed; smaller
       where the address space is limited (ulimit -v) */
    for (size_t span = (size_t)256 << 30; span >= ((size_t)1 << 30); span /= 2) {
        void *p = mmap(NULL, 2 * span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) continue;
        zt_devsim_g.dev = (uintptr_t)p;
        zt_devsim_g.span = span;
        break;
    }
    if (!zt_devsim_g.span) zt_panic(__FILE__, __LINE__, "devsim: cannot reserve address space for device memory");
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &g.prev_segv);
}

void zt_devsim_mem_init(void) { pthread_once(&g_once, init_once); }

size_t zt_devsim_mem_span(void) { return zt_devsim_g.span; }

/* ------------------------------------------------------------------ errors */

void zt_devsim_not_device(const void *p, const char *where) {
    zt_panic(__FILE__, __LINE__,
             "devsim: %s: %p is not device memory: a host pointer was passed where device memory is expected",
             where, p);
}

void zt_devsim_not_host(const void *p, const char *where) {
    zt_panic(__FILE__, __LINE__,
             "devsim: %s: %p is device memory: a device pointer was passed where host memory is expected", where, p);
}

/* ------------------------------------------------------------------ allocator */

static void insert_block(int at, block b) {
    if (g.nb == g.cap) {
        g.cap = g.cap ? 2 * g.cap : 256;
        g.b = zt_realloc(g.b, (size_t)g.cap * sizeof *g.b);
    }
    memmove(g.b + at + 1, g.b + at, (size_t)(g.nb - at) * sizeof *g.b);
    g.b[at] = b;
    g.nb++;
}

static void remove_block(int at) {
    memmove(g.b + at, g.b + at + 1, (size_t)(g.nb - at - 1) * sizeof *g.b);
    g.nb--;
}

void *zt_devsim_mem_alloc(size_t bytes) {
    zt_devsim_mem_init();
    const size_t data = (bytes + g.page - 1) / g.page, need = (data ? data : 1) + 1; /* + guard */
    pthread_mutex_lock(&g.mu);
    size_t off = (size_t)-1;
    for (int i = 0; i < g.nb; i++) {
        if (g.b[i].used || g.b[i].pages < need) continue;
        off = g.b[i].off;
        if (g.b[i].pages > need) insert_block(i + 1, (block){off + need, g.b[i].pages - need, 0});
        g.b[i].pages = need;
        g.b[i].used = 1;
        break;
    }
    if (off == (size_t)-1) {
        if ((g.top + need) * g.page > zt_devsim_g.span) {
            pthread_mutex_unlock(&g.mu);
            zt_panic(__FILE__, __LINE__, "devsim: out of simulated device memory allocating %zu bytes (%zu GiB reserved)",
                     bytes, zt_devsim_g.span >> 30);
        }
        off = g.top;
        insert_block(g.nb, (block){off, need, 1});
        g.top += need;
    }
    pthread_mutex_unlock(&g.mu);
    char *real = (char *)(zt_devsim_g.dev + zt_devsim_g.span + off * g.page);
    if (mprotect(real, (need - 1) * g.page, PROT_READ | PROT_WRITE) != 0)
        zt_panic(__FILE__, __LINE__, "out of host memory backing %zu bytes of devsim device memory", bytes);
    return (void *)(zt_devsim_g.dev + off * g.page);
}

void zt_devsim_mem_free(void *dev) {
    if (!dev) return;
    uintptr_t a = (uintptr_t)dev - zt_devsim_g.dev;
    if (a >= zt_devsim_g.span) zt_devsim_not_device(dev, "free");
    size_t off = a / g.page;
    pthread_mutex_lock(&g.mu);
    int lo = 0, hi = g.nb - 1, i = -1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (g.b[mid].off == off) { i = mid; break; }
        if (g.b[mid].off < off) lo = mid + 1;
        else hi = mid - 1;
    }
    if (i < 0 || !g.b[i].used || a % g.page) {
        pthread_mutex_unlock(&g.mu);
        zt_panic(__FILE__, __LINE__, "devsim: free of %p, which is not a live device allocation (double free?)", dev);
    }
    char *real = (char *)(zt_devsim_g.dev + zt_devsim_g.span + off * g.page);
    size_t len = (g.b[i].pages - 1) * g.page;
    if (madvise(real, len, MADV_DONTNEED) != 0 || mprotect(real, len, PROT_NONE) != 0)
        zt_panic(__FILE__, __LINE__, "devsim: cannot release device memory at %p", dev);
    g.b[i].used = 0;
    /* coalesce with free neighbours; a free block at the top goes back to the bump pointer */
    if (i + 1 < g.nb && !g.b[i + 1].used) {
        g.b[i].pages += g.b[i + 1].pages;
        remove_block(i + 1);
    }
    if (i > 0 && !g.b[i - 1].used) {
        g.b[i - 1].pages += g.b[i].pages;
        remove_block(i);
        i--;
    }
    if (i == g.nb - 1) {
        g.top = g.b[i].off;
        remove_block(i);
    }
    pthread_mutex_unlock(&g.mu);
}
