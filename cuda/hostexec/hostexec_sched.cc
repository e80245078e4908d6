// hostexec_sched.cc — the host execution harness's block scheduler (see hostexec.h for the model).
//
// Owns: fiber stacks and the context switch, the per-OS-thread worker that runs a launch's blocks,
// the order threads start and resume in, the block barrier, the warp rendezvous (shuffles, votes,
// __syncwarp), deadlock and misuse detection, and the built-in variables' thread-local storage.
//
// Per block, on one OS thread:
//   - threads start in a shuffled warp-major order; a stack context runs them one after another
//     and only when one suspends (barrier / warp operation) does the next start on a fresh stack;
//   - a suspended fiber hands the CPU straight to the next runnable one (no scheduler round trip):
//     first the run queue (fibers a barrier released, in shuffled order; a released warp first),
//     then a new stack for the threads not started yet; the last thread to finish returns to the
//     worker;
//   - nothing runnable, nothing left to start, threads not done: a deadlock, reported and fatal.
#include "hostexec_internal.h"

#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define HX_ASAN 1
#else
#define HX_ASAN 0
#endif

// The hand-written switch is x86-64 only, and returns into another stack, which a CET shadow
// stack (-fcf-protection marks the object as compatible) would reject: use swapcontext there.
#if !defined(HX_UCONTEXT) && (!defined(__x86_64__) || (defined(__CET__) && (__CET__ & 2)))
#define HX_UCONTEXT 1
#endif
#ifdef HX_UCONTEXT
#include <ucontext.h>
#endif

__thread uint3 hx_threadIdx_;
__thread uint3 hx_blockIdx_;
__thread uint3 hx_blockDim_;
__thread uint3 hx_gridDim_;
__thread unsigned char *hx_dyn_smem_;

namespace hx {

// (here, not in hostexec.cc: the scheduler is the lower layer, so the two files do not depend on each other)
void fatal(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("hostexec: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    abort();
}

namespace {

constexpr unsigned kMaxThreads = 1024;
constexpr unsigned kWarp = 32;
constexpr unsigned kMaxWarps = kMaxThreads / kWarp;
constexpr size_t kSmemAlign = 128;

// ---------------------------------------------------------------------------------------------
// Context switch. x86-64: save the six callee-saved registers on the old stack, swap stack
// pointers, pop and return (about as cheap as a function call; MXCSR and the x87 control word are
// not switched: fibers never change them). Elsewhere, or with -DHX_UCONTEXT: swapcontext(3).
#ifndef HX_UCONTEXT
extern "C" void hx_ctx_swap(void **save_sp, void *load_sp);
extern "C" void hx_ctx_entry(void);
asm(R"(
    .text
    .globl hx_ctx_swap
    .hidden hx_ctx_swap
    .type hx_ctx_swap, @function
    .p2align 4
hx_ctx_swap:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size hx_ctx_swap, .-hx_ctx_swap

    .globl hx_ctx_entry
    .hidden hx_ctx_entry
    .type hx_ctx_entry, @function
    .p2align 4
hx_ctx_entry:
    .cfi_startproc
    .cfi_undefined rip
    movq %r12, %rdi
    callq *%r13
    ud2
    .cfi_endproc
    .size hx_ctx_entry, .-hx_ctx_entry
)");

struct Ctx {
    void *sp;
};

void ctx_make(Ctx *c, char *lo, size_t size, void (*fn)(void *), void *arg) {
    // Frame popped by hx_ctx_swap: r15 r14 r13=fn r12=arg rbx rbp, then "ret" into hx_ctx_entry,
    // which leaves rsp 16-byte aligned at its call, as the ABI wants.
    uintptr_t top = (reinterpret_cast<uintptr_t>(lo) + size) & ~uintptr_t(15);
    void **sp = reinterpret_cast<void **>(top - 72);
    sp[0] = nullptr;
    sp[1] = nullptr;
    sp[2] = reinterpret_cast<void *>(fn);
    sp[3] = arg;
    sp[4] = nullptr;
    sp[5] = nullptr;
    sp[6] = reinterpret_cast<void *>(hx_ctx_entry);
    c->sp = sp;
}

inline void ctx_swap(Ctx *from, Ctx *to) { hx_ctx_swap(&from->sp, to->sp); }
#else
struct Ctx {
    ucontext_t uc;
};

void ctx_trampoline(unsigned fn_hi, unsigned fn_lo, unsigned arg_hi, unsigned arg_lo) {
    auto fn = reinterpret_cast<void (*)(void *)>((uintptr_t(fn_hi) << 32) | fn_lo);
    fn(reinterpret_cast<void *>((uintptr_t(arg_hi) << 32) | arg_lo));
    abort();
}

void ctx_make(Ctx *c, char *lo, size_t size, void (*fn)(void *), void *arg) {
    getcontext(&c->uc);
    c->uc.uc_stack.ss_sp = lo;
    c->uc.uc_stack.ss_size = size;
    c->uc.uc_link = nullptr;
    uintptr_t f = reinterpret_cast<uintptr_t>(fn), a = reinterpret_cast<uintptr_t>(arg);
    makecontext(&c->uc, reinterpret_cast<void (*)()>(ctx_trampoline), 4, unsigned(f >> 32), unsigned(f),
                unsigned(a >> 32), unsigned(a));
}

inline void ctx_swap(Ctx *from, Ctx *to) { swapcontext(&from->uc, &to->uc); }
#endif

// AddressSanitizer must be told about stack switches (else: false stack-overflow reports).
inline void swap(Ctx *from, Ctx *to, const void *to_lo, size_t to_size, bool dying) {
#if HX_ASAN
    void *fake = nullptr;
    __sanitizer_start_switch_fiber(dying ? nullptr : &fake, to_lo, to_size);
    ctx_swap(from, to);
    __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#else
    (void)to_lo, (void)to_size, (void)dying;
    ctx_swap(from, to);
#endif
}

// ---------------------------------------------------------------------------------------------
// Worker state: one per OS thread that runs blocks.
enum ThrState : uint8_t { kRunning, kAtBarrier, kAtWarp, kDone };
enum WarpOp : int { kOpSyncwarp, kOpShfl, kOpVote, kOpGather };
const char *const kOpName[] = {"__syncwarp", "__shfl*_sync", "__ballot/any/all_sync", "mma (warp_gather)"};

struct Stack {
    Ctx ctx;
    char *lo; // usable [lo, lo + size); the guard page is just below lo
    size_t size;
    size_t color; // bytes left unused at the top, different per stack: otherwise every stack top
                  // sits at one offset modulo 4 KiB and the hot frames of a warp's 32 fibers
                  // evict each other from the same few L1 sets
    Stack *next_free;
};

struct Thr {
    uint3 tid;
    uint16_t lin; // linear thread index in the block
    uint8_t state;
    Stack *stk; // the stack it runs on (valid once started)
};

struct Warp {
    unsigned size;    // lanes this warp has (the last warp of a block may be partial)
    unsigned full;    // their mask
    unsigned arrived; // lanes waiting in the current rendezvous
    unsigned exited;
    unsigned gen; // rendezvous completed; val[gen & 1] is the one being filled
    unsigned mask;
    int op;
    uint16_t waiters[kWarp];
    uint64_t val[2][kWarp]; // two buffers: a lane may deposit for the next exchange before
                            // a slower lane has read this one
};

} // namespace

// Declared in hostexec_internal.h; all its parts are private to this file.
struct Worker {
    Ctx native;
    const void *native_lo = nullptr;
    size_t native_size = 0;
    size_t stack_bytes = 0;
    std::vector<Stack *> stacks;
    Stack *free_list = nullptr;
    unsigned char *dyn = nullptr;
    size_t dyn_cap = 0;

    // the launch
    const LaunchSpec *L = nullptr;
    uint64_t seq = 0;
    uint64_t seed = 0;
    bool poison = false;
    unsigned n = 0; // threads per block
    dim3 block_cached{0, 0, 0};

    // the block
    unsigned started, done, bar_arrived, bar_gen, rq_head, rq_tail;
    unsigned bar_count[2], bar_part[2];
    uint64_t rng;
    uint16_t perm[kMaxThreads];     // start order
    uint16_t runq[kMaxThreads];     // ring: each thread is in it at most once
    Warp warps[kMaxWarps];
    Thr thr[kMaxThreads];
};

namespace {

__thread Worker *t_worker;
__thread Thr *t_cur; // null outside a kernel

[[noreturn]] void kfail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void kfail(const char *fmt, ...) {
    Worker *W = t_worker;
    Thr *t = t_cur;
    fprintf(stderr, "hostexec: kernel '%s' block (%u,%u,%u) thread (%u,%u,%u): ", W && W->L ? W->L->name : "?",
            hx_blockIdx_.x, hx_blockIdx_.y, hx_blockIdx_.z, t ? t->tid.x : 0, t ? t->tid.y : 0, t ? t->tid.z : 0);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    abort();
}

inline uint32_t rng_next(uint64_t *s) { // splitmix64
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return uint32_t((z ^ (z >> 31)) >> 32);
}

inline void shuffle(uint16_t *a, unsigned n, uint64_t *s) {
    for (unsigned i = n; i > 1; i--) {
        unsigned j = unsigned((uint64_t(rng_next(s)) * i) >> 32);
        uint16_t x = a[i - 1];
        a[i - 1] = a[j];
        a[j] = x;
    }
}

Stack *stack_alloc(Worker *W) {
    if (Stack *s = W->free_list) {
        W->free_list = s->next_free;
        return s;
    }
    size_t page = size_t(sysconf(_SC_PAGESIZE));
    size_t size = (W->stack_bytes + page - 1) / page * page;
    void *base = mmap(nullptr, size + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK,
                      -1, 0);
    if (base == MAP_FAILED) fatal("mmap of a %zu-byte fiber stack failed", size + page);
    if (mprotect(base, page, PROT_NONE) != 0) fatal("mprotect of a fiber stack guard page failed");
    Stack *s = new Stack{};
    s->lo = static_cast<char *>(base) + page;
    s->size = size;
    s->color = W->stacks.size() * 5 * 64 % 4096; // 5 lines apart: all 64 line offsets
    W->stacks.push_back(s);
    return s;
}

void stacks_free(Worker *W) {
    size_t page = size_t(sysconf(_SC_PAGESIZE));
    for (Stack *s : W->stacks) {
        munmap(s->lo - page, s->size + page);
        delete s;
    }
    W->stacks.clear();
    W->free_list = nullptr;
}

Worker *worker_create_once() {
    if (t_worker) return t_worker;
    Worker *W = new Worker();
#if HX_ASAN
    pthread_attr_t attr;
    void *addr = nullptr;
    size_t size = 0;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
        pthread_attr_getstack(&attr, &addr, &size);
        pthread_attr_destroy(&attr);
    }
    W->native_lo = addr;
    W->native_size = size;
#endif
    t_worker = W;
    return W;
}

void worker_destroy(Worker *W) {
    if (!W) return;
    stacks_free(W);
    free(W->dyn);
    delete W;
    if (t_worker == W) t_worker = nullptr;
}

inline void set_current(Thr *t) {
    t_cur = t;
    hx_threadIdx_ = t->tid;
}

inline void runq_push(Worker *W, unsigned lin) { W->runq[W->rq_tail++ & (kMaxThreads - 1)] = uint16_t(lin); }
inline void runq_push_front(Worker *W, unsigned lin) { W->runq[--W->rq_head & (kMaxThreads - 1)] = uint16_t(lin); }

// Warp-major order: warps in a shuffled order, the lanes of each warp shuffled, the warp's lanes
// together. A warp then runs through a chain of shuffles with only its own 32 stacks hot (a
// fully shuffled order keeps all the block's stacks live and is ~2x slower), while the order of
// warps and of lanes within a warp still changes with the seed. `pick(lin)` selects threads.
template <typename Pick, typename Emit>
void warp_major(Worker *W, Pick pick, Emit emit) {
    unsigned nwarps = (W->n + kWarp - 1) / kWarp;
    uint16_t worder[kMaxWarps], lanes[kWarp];
    for (unsigned w = 0; w < nwarps; w++) worder[w] = uint16_t(w);
    if (W->seed) shuffle(worder, nwarps, &W->rng);
    for (unsigned k = 0; k < nwarps; k++) {
        unsigned base = worder[k] * kWarp, m = 0;
        for (unsigned l = 0; l < W->warps[worder[k]].size; l++)
            if (pick(base + l)) lanes[m++] = uint16_t(base + l);
        if (W->seed) shuffle(lanes, m, &W->rng);
        for (unsigned i = 0; i < m; i++) emit(lanes[i]);
    }
}

void ctx_main(void *arg);

[[noreturn]] void deadlock(Worker *W) {
    unsigned at_bar = 0, at_warp = 0;
    for (unsigned i = 0; i < W->n; i++) {
        at_bar += W->thr[i].state == kAtBarrier;
        at_warp += W->thr[i].state == kAtWarp;
    }
    kfail("deadlock: %u thread(s) wait at __syncthreads, %u in warp operations, %u exited, of %u "
          "(a barrier or warp operation that not every thread reaches?)",
          at_bar, at_warp, W->done, W->n);
}

// Give the CPU to the next runnable fiber. `self` is the stack we are on; `dying`: it holds no
// thread any more and will not be resumed (it is already on the free list). Inlined into the
// rendezvous functions: every frame between kernel code and the switch is a cache line more to
// fetch when a fiber resumes.
#define HX_INLINE inline __attribute__((always_inline))
HX_INLINE void dispatch(Worker *W, Stack *self, bool dying) {
    if (W->rq_head != W->rq_tail) {
        Thr *t = &W->thr[W->runq[W->rq_head++ & (kMaxThreads - 1)]];
        t->state = kRunning;
        set_current(t);
        if (t->stk == self) return;
        swap(&self->ctx, &t->stk->ctx, t->stk->lo, t->stk->size, dying);
        return;
    }
    if (W->started < W->n) { // only from a suspended fiber: a finishing one starts them itself
        Stack *s = stack_alloc(W);
#if HX_ASAN
        __asan_unpoison_memory_region(s->lo, s->size); // frames that never returned left poison behind
#endif
        ctx_make(&s->ctx, s->lo, s->size - s->color, ctx_main, s);
        swap(&self->ctx, &s->ctx, s->lo, s->size, dying);
        return;
    }
    if (W->done == W->n) {
        swap(&self->ctx, &W->native, W->native_lo, W->native_size, dying);
        return;
    }
    deadlock(W);
}

void release_block_barrier(Worker *W) {
    unsigned k = W->bar_arrived;
    warp_major(W, [W](unsigned lin) { return W->thr[lin].state == kAtBarrier; },
               [W](unsigned lin) { runq_push(W, lin); });
    W->bar_part[W->bar_gen & 1] = k;
    W->bar_arrived = 0;
    W->bar_gen++;
    W->bar_count[W->bar_gen & 1] = 0;
}

// A released warp goes first: it carries on with its lanes' stacks still in cache.
void release_warp(Worker *W, Warp *w, unsigned base) {
    if (W->seed) shuffle(w->waiters, w->arrived, &W->rng);
    for (unsigned i = 0; i < w->arrived; i++) runq_push_front(W, base + w->waiters[i]);
    w->arrived = 0;
    w->gen++;
}

void thread_exit(Worker *W, Thr *t) {
    t->state = kDone;
    W->done++;
    Warp *w = &W->warps[t->lin / kWarp];
    w->exited++;
    if (w->arrived)
        kfail("thread exits while %u lane(s) of its warp wait in %s (every lane in the mask must take part)",
              w->arrived, kOpName[w->op]);
    if (W->bar_arrived && W->bar_arrived == W->n - W->done) release_block_barrier(W);
}

// A stack context: runs not-yet-started threads back to back until one suspends (then another
// context takes over the start list) or none are left (then it frees itself).
void ctx_main(void *arg) {
#if HX_ASAN
    __sanitizer_finish_switch_fiber(nullptr, nullptr, nullptr);
#endif
    Stack *self = static_cast<Stack *>(arg);
    Worker *W = t_worker;
    while (W->started < W->n) {
        Thr *t = &W->thr[W->perm[W->started++]];
        t->stk = self;
        t->state = kRunning;
        set_current(t);
        W->L->thread_fn(W->L->closure);
        thread_exit(W, t);
    }
    self->next_free = W->free_list;
    W->free_list = self;
    dispatch(W, self, true);
    abort(); // a freed context is never resumed
}

Thr *current(const char *what) {
    Thr *t = t_cur;
    if (!t) fatal("%s called outside a kernel launch", what);
    return t;
}

// Deposit `bits`, wait for the whole warp; returns the buffer the exchange used.
HX_INLINE unsigned warp_rendezvous(Worker *W, Thr *t, unsigned mask, int op, uint64_t bits) {
    Warp *w = &W->warps[t->lin / kWarp];
    if ((mask & w->full) != w->full)
        kfail("%s with mask 0x%08x: only full-warp masks are supported (this warp's lanes: 0x%08x)", kOpName[op], mask,
              w->full);
    if (w->exited)
        kfail("%s while %u lane(s) of this warp have exited (every lane in the mask must take part)", kOpName[op],
              w->exited);
    if (w->arrived == 0) {
        w->op = op;
        w->mask = mask;
    } else if (w->op != op || w->mask != mask) {
        kfail("%s (mask 0x%08x) meets %s (mask 0x%08x) in the same warp", kOpName[op], mask, kOpName[w->op], w->mask);
    }
    unsigned buf = w->gen & 1, lane = t->lin % kWarp;
    w->val[buf][lane] = bits;
    w->waiters[w->arrived++] = uint16_t(lane);
    t->state = kAtWarp;
    if (w->arrived == w->size) release_warp(W, w, t->lin - lane);
    dispatch(W, t->stk, false);
    return buf;
}

// ---------------------------------------------------------------------------------------------
// Blocks and launches.
void run_block(Worker *W, uint64_t b) {
    const LaunchSpec &L = *W->L;
    uint64_t gx = L.grid.x, gy = L.grid.y;
    hx_blockIdx_ = uint3{unsigned(b % gx), unsigned(b / gx % gy), unsigned(b / (gx * gy))};
    W->started = W->done = W->bar_arrived = W->bar_gen = 0;
    W->rq_head = W->rq_tail = 0;
    W->bar_count[0] = W->bar_count[1] = 0;
    W->rng = W->seed ^ (W->seq * 0xd1b54a32d192ed03ull) ^ (b * 0x8cb92ba72f3d8dd7ull);
    rng_next(&W->rng);
    unsigned k = 0;
    warp_major(W, [](unsigned) { return true; }, [W, &k](unsigned lin) { W->perm[k++] = uint16_t(lin); });
    for (unsigned i = 0; i < (W->n + kWarp - 1) / kWarp; i++) W->warps[i].arrived = W->warps[i].exited = W->warps[i].gen = 0;
    if (W->poison && L.shmem) memset(W->dyn, 0xff, L.shmem);

    Stack *s = stack_alloc(W);
#if HX_ASAN
    __asan_unpoison_memory_region(s->lo, s->size);
#endif
    ctx_make(&s->ctx, s->lo, s->size - s->color, ctx_main, s);
    swap(&W->native, &s->ctx, s->lo, s->size, false);
    t_cur = nullptr;
}

void prepare(Worker *W, const LaunchSpec &L, uint64_t seq, const Config &cfg) {
    if (W->stack_bytes != cfg.stack_bytes) {
        stacks_free(W);
        W->stack_bytes = cfg.stack_bytes;
    }
    W->L = &L;
    W->seq = seq;
    W->seed = cfg.seed;
    W->poison = cfg.poison_smem;
    const dim3 &bd = L.block;
    W->n = bd.x * bd.y * bd.z;
    if (bd.x != W->block_cached.x || bd.y != W->block_cached.y || bd.z != W->block_cached.z) {
        for (unsigned i = 0; i < W->n; i++) {
            W->thr[i].tid = uint3{i % bd.x, i / bd.x % bd.y, i / (bd.x * bd.y)};
            W->thr[i].lin = uint16_t(i);
        }
        for (unsigned w = 0; w * kWarp < W->n; w++) {
            unsigned size = W->n - w * kWarp < kWarp ? W->n - w * kWarp : kWarp;
            W->warps[w].size = size;
            W->warps[w].full = size == kWarp ? ~0u : (1u << size) - 1;
        }
        W->block_cached = bd;
    }
    if (L.shmem > W->dyn_cap) {
        free(W->dyn);
        W->dyn_cap = (L.shmem + kSmemAlign - 1) / kSmemAlign * kSmemAlign;
        W->dyn = static_cast<unsigned char *>(aligned_alloc(kSmemAlign, W->dyn_cap));
        if (!W->dyn) fatal("cannot allocate %zu bytes of dynamic shared memory", W->dyn_cap);
    }
    hx_blockDim_ = uint3{bd.x, bd.y, bd.z};
    hx_gridDim_ = uint3{L.grid.x, L.grid.y, L.grid.z};
    hx_dyn_smem_ = W->dyn;
}

} // namespace

// ---------------------------------------------------------------------------------------------
// The seam to hostexec.cc (hostexec_internal.h) and the rendezvous entry points (hostexec.h).
Worker *worker_get(void) { return worker_create_once(); }

void worker_release(void) { worker_destroy(t_worker); }

void worker_run_blocks(Worker *W, const LaunchSpec &L, uint64_t seq, const Config &cfg, std::atomic<uint64_t> &next,
                       uint64_t nblocks) {
    prepare(W, L, seq, cfg);
    for (uint64_t b; (b = next.fetch_add(1, std::memory_order_relaxed)) < nblocks;) run_block(W, b);
}

bool in_kernel(void) { return t_cur != nullptr; }

namespace {
HX_INLINE int block_rendezvous(int pred, int *participants) {
    Thr *t = current("__syncthreads");
    Worker *W = t_worker;
    unsigned buf = W->bar_gen & 1;
    W->bar_count[buf] += pred != 0;
    W->bar_arrived++;
    t->state = kAtBarrier;
    if (W->bar_arrived == W->n - W->done) release_block_barrier(W);
    dispatch(W, t->stk, false);
    *participants = int(W->bar_part[buf]);
    return int(W->bar_count[buf]);
}
} // namespace

void sync_block(void) {
    int n;
    block_rendezvous(0, &n);
}

int sync_block_count(int pred, int *participants) { return block_rendezvous(pred, participants); }

void sync_warp(unsigned mask) {
    Thr *t = current("__syncwarp");
    warp_rendezvous(t_worker, t, mask, kOpSyncwarp, 0);
}

// Lane selection as PTX shfl.sync defines it (c = clamp | segment mask, as CUDA's wrappers pass).
uint64_t shfl(unsigned mask, uint64_t bits, int mode, int lane_arg, int width) {
    Thr *t = current("__shfl*_sync");
    if (width < 1 || width > 32 || (width & (width - 1)))
        kfail("shuffle width %d is not a power of two in 1..32", width);
    Worker *W = t_worker;
    unsigned buf = warp_rendezvous(W, t, mask, kOpShfl, bits);
    int lane = int(t->lin % kWarp), b = lane_arg & 31;
    int segmask = (32 - width) & 31, cval = mode == kShflUp ? 0 : 31;
    int max_lane = (lane & segmask) | (cval & ~segmask), min_lane = lane & segmask;
    int j;
    bool ok;
    switch (mode) {
    case kShflUp: j = lane - b, ok = j >= max_lane; break;
    case kShflDown: j = lane + b, ok = j <= max_lane; break;
    case kShflXor: j = lane ^ b, ok = j <= max_lane; break;
    default: j = min_lane | (b & ~segmask), ok = j <= max_lane; break;
    }
    if (!ok) j = lane;
    const Warp &w = W->warps[t->lin / kWarp];
    if (unsigned(j) >= w.size) return ~0ull; // a lane a partial warp lacks: undefined in CUDA, poison here
    return w.val[buf][j];
}

unsigned ballot(unsigned mask, int pred) {
    Thr *t = current("__ballot_sync");
    Worker *W = t_worker;
    unsigned buf = warp_rendezvous(W, t, mask, kOpVote, pred != 0);
    const Warp &w = W->warps[t->lin / kWarp];
    unsigned r = 0;
    for (unsigned i = 0; i < w.size; i++) r |= unsigned(w.val[buf][i] != 0) << i;
    return r & mask;
}

void warp_gather(unsigned mask, uint64_t bits, uint64_t all[32]) {
    Thr *t = current("warp_gather");
    Worker *W = t_worker;
    unsigned buf = warp_rendezvous(W, t, mask, kOpGather, bits);
    const Warp &w = W->warps[t->lin / kWarp];
    for (unsigned i = 0; i < kWarp; i++) all[i] = i < w.size ? w.val[buf][i] : ~0ull;
}

int vote_all(unsigned mask, int pred) {
    unsigned r = ballot(mask, pred);
    return r == (mask & t_worker->warps[t_cur->lin / kWarp].full);
}

} // namespace hx
