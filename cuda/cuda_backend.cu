// cuda_backend.cu — the CUDA backend's host side (see cuda_backend.h): lifecycle, device binding,
// memory, copies, and each backend slot as one launch function of cuda_ops.h on the backend's
// stream. Kernels never see a pointer the host build could not address: slot arguments are device
// addresses, translated by dev() (identity on a GPU; devsim's translation under the harness).
//
// Ordering: every op is issued on one stream; to_device copies synchronously from the caller's
// buffer (it may be reused on return), to_host and sync wait for the stream, as iface/backend.h says.
// Scratch for ops that need it (LayerNorm / RMSNorm / linear / embedding backward) is one buffer that grows
// to the largest need the first time a shape is seen, then is reused: no per-step allocation.
//
// Rounding fused into the op (bf16 / fp16 runs): the model follows most ops with a round_to of exactly
// what they wrote (core/model/model.c, RND). After set_precision(bf16 / fp16), an op whose kernels can round
// their own output (gelu and the exact gelu, add, embedding forward, softmax + cross-entropy, LayerNorm and RMSNorm
// forward and their dinp, SwiGLU forward and backward, the fused attention) is not launched at once but kept
// (Deferred); the next call launches it, rounding its output in the kernel when that call is round_to of the op's
// output range in that precision (the round_to then has nothing left to do), unrounded otherwise. Every other slot,
// the memory calls, sync and the communicator's view of the stream launch a kept op first, so work runs in
// call order. The bits are those of the op followed by round_to; ZT_CUDA_FUSE_ROUND=0 turns it off
// (tests/e2e/test_cudasim.sh compares both). Saves one read and write of each such output (on an H200,
// docs/gpu-status.md). A round_to that no op before it can take (after a cuBLASLt product) is kept as well (D_ROUND):
// when the next call is the GELU that reads that buffer (forward: its input, backward in place: its dout), the add /
// residual add + LayerNorm whose second term it is, or the LayerNorm backward whose dout it is, that kernel rounds the
// values as it loads them and (but for the in-place GELU backward) writes them back rounded; any other call launches
// it.
//
// Mirrors (bf16 / fp16 runs; iface/mirror16.h): unpack16 records that its float32 output equals the 2-byte words it
// read (the parameters' window, a layer's activations unpacked from the stash), and the LayerNorm, residual +
// LayerNorm, GELU and fused attention forwards write their rounded output's words beside it (words_for); a linear
// forward / backward (or the LM head's product) whose w or inp is such a buffer multiplies the words instead of
// packing it again. The slots that keep the records
// (MirrorKeep: the products, norms, attention, GELU, add, accumulate, round_to, pack16 / unpack16, zero, copy) drop the
// ones their outputs overlap; every other call drops them all. The bits are those of packing (the words are what
// packing gives); ZT_CUDA_MIRROR=0 turns it off and ZT_CUDA_FUSE_ROUND_STATS=1 prints the operands it saved.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <initializer_list>
#include <utility>

#include "cuda_check.h"
#include "cuda_ops.h"

extern "C" {
#include "iface/mirror16.h"
#include "iface/quant_format.h"
#include "cuda_backend.h"
#ifdef ZT_HOSTEXEC
#include "devsim/devsim_mem.h"
#endif
}

using namespace ZT_CU_NS;

namespace {

// an op kept for the round_to that may follow it: kind, arguments (device memory, translated), and the
// output range (the caller's address and length) a fused round_to must name
enum DKind {
    D_NONE, D_GELU_FWD, D_GELU_BWD, D_ADD, D_EMBED_FWD, D_XENT, D_LN_FWD, D_LN_BWD, D_ATT_FWD, D_ATT_BWD,
    D_RMS_FWD, D_RMS_BWD, D_SWIGLU_FWD, D_SWIGLU_BWD, D_RLN_FWD,
    D_ROUND // a round_to no op before it could take: kept for the GELU / add that reads its buffer next (in_round)
};
struct Deferred {
    DKind kind;
    float *o0, *o1, *o2, *o3;
    const float *i0, *i1, *i2, *i3, *i4;
    const int32_t *tok;
    void *scratch;
    unsigned *tickets; // D_LN_BWD, D_RMS_BWD: the backend's tickets (cuda_ops.h kCuTickets)
    int B, T, C, NH, NKV, V, Vp;
    size_t n;
    float f;      // D_XENT: dscale; D_LN_FWD, D_RLN_FWD, D_RMS_FWD: eps
    int res_prec; // D_RLN_FWD: the residual's rounding (its own argument, not round_to's)
    int tc;       // D_ATT_FWD, D_ATT_BWD: the 2-byte type of the tensor-core kernels (0: the fp32 kernels)
    int exact;    // D_GELU_FWD, D_GELU_BWD: the encoders' erf GELU (gelu_erf_*)
    int in_round; // D_GELU_*, D_ADD, D_RLN_FWD, D_LN_BWD: the precision its input (GELU fwd inp, bwd dout; the add's
                  // second term; LayerNorm backward's dout) is rounded to first; D_ROUND's precision
    const void *out;
    size_t out_n;
};

// adamw_multi's device copy of a segment table (cuda_ops.h zt_cu_adamw_multi_table), keyed by the host table it
// was built from: the optimizer passes the same table every step for its shard [lo, hi), so it is built and
// uploaded at the first call with that table (an allocation and an asynchronous copy) and every later step is the
// kernel's launch alone. A few tables are kept; a new one beyond that frees them all first (never in training)
struct AdamwTable {
    zt_adamw_seg *key; // the host table (nkey entries)
    int nkey;
    void *table;       // device memory: ntable zt_cu_adamw_seg
    int ntable;
    size_t total;
};
constexpr int kAdamwTables = 4;

struct cu_ctx {
    cudaStream_t stream;
    Deferred pend;          // pend.kind == D_NONE: nothing kept
    int prec;               // set_precision's; fp32: nothing is kept
    int fuse_round;         // ZT_CUDA_FUSE_ROUND (default 1)
    long fused, unfused;    // round_to calls done inside the op / by their own pass (ZT_CUDA_FUSE_ROUND_STATS=1 prints)
    zt_cu_gemm *gemm;
    void *scratch;          // device memory
    size_t scratch_bytes;
    void *tickets;          // device memory, kCuTickets zero words (the last-block reductions'), made at first need
    int device;
    char desc[512];
    AdamwTable adamw[kAdamwTables]; // adamw_multi's tables, adamw_n of them
    int adamw_n;
    zt_mirror16 mir;        // float32 buffers equal to 2-byte words (file comment)
    int mir_on;             // ZT_CUDA_MIRROR (default 1), in bf16 / fp16 runs
    int mir_keep;           // inside a slot that names what it writes: flush() keeps the mirrors
    void *ring[2];          // device memory: the 2-byte words producers write beside their rounded output (words_for)
    size_t ring_cap[2];     // words each holds
    int ring_next;
};

cu_ctx *ctx_of(zt_backend *be) { return static_cast<cu_ctx *>(be->ctx); }

// out16: the rounded output also as 2-byte words (LayerNorm, residual + LayerNorm, GELU forward, the fused attention's
// forward; words_for), else nullptr
void launch_deferred(cu_ctx *x, const Deferred &d, int prec, uint16_t *out16 = nullptr) {
    cudaStream_t s = x->stream;
    switch (d.kind) {
    case D_GELU_FWD: zt_cu_gelu_fwd(s, d.o0, d.i0, d.n, prec, d.exact, d.in_round, out16); break;
    case D_GELU_BWD: zt_cu_gelu_bwd(s, d.o0, d.i0, d.i1, d.n, prec, d.exact, d.in_round); break;
    case D_ROUND:
        zt_cu_round_to(s, d.o0, d.n, d.in_round);
        x->unfused++;
        break;
    case D_ADD: zt_cu_add(s, d.o0, d.i0, d.i1, d.n, prec, d.in_round); break;
    case D_EMBED_FWD: zt_cu_embed_fwd(s, d.o0, d.tok, d.i0, d.i1, d.B, d.T, d.C, prec); break;
    case D_XENT: zt_cu_softmax_xent(s, d.o0, d.o1, d.tok, d.B, d.V, d.Vp, d.f, prec); break;
    case D_LN_FWD: zt_cu_layernorm_fwd(s, d.o0, d.o1, d.o2, d.i0, d.i1, d.i2, d.B, d.C, d.f, prec, out16); break;
    case D_LN_BWD:
        zt_cu_layernorm_bwd(s, d.o0, d.o1, d.o2, d.i0, d.i1, d.i2, d.i3, d.i4, d.B, d.C, d.scratch, d.tickets, prec,
                            d.in_round);
        break;
    case D_ATT_FWD:
        zt_cu_attention_fused_fwd(s, d.o0, d.o1, d.i0, d.B, d.T, d.C, d.NH, d.NKV, prec, d.tc, out16);
        break;
    case D_ATT_BWD:
        zt_cu_attention_fused_bwd(s, d.o0, d.o1, d.i0, d.i1, d.i2, d.i3, d.B, d.T, d.C, d.NH, d.NKV, prec, d.tc);
        break;
    case D_RLN_FWD:
        zt_cu_residual_layernorm_fwd(s, d.o0, d.o1, d.o2, d.o3, d.i0, d.i1, d.i2, d.i3, d.B, d.C, d.f, d.res_prec,
                                     prec, d.in_round, out16);
        break;
    case D_RMS_FWD: zt_cu_rmsnorm_fwd(s, d.o0, d.o1, d.i0, d.i1, d.B, d.C, d.f, prec); break;
    case D_RMS_BWD:
        zt_cu_rmsnorm_bwd(s, d.o0, d.o1, d.i0, d.i1, d.i2, d.i3, d.B, d.C, d.scratch, d.tickets, prec);
        break;
    case D_SWIGLU_FWD: zt_cu_swiglu_fwd(s, d.o0, d.i0, d.B, d.C, prec); break;
    case D_SWIGLU_BWD: zt_cu_swiglu_bwd(s, d.o0, d.i0, d.i1, d.B, d.C, prec); break;
    case D_NONE: break;
    }
}

// launches the kept op, if any, unrounded; every slot and memory call passes here first, and all but those that keep
// the mirrors drop them
void flush(zt_backend *be) {
    cu_ctx *x = ctx_of(be);
    if (!x->mir_keep) zt_mirror16_clear(&x->mir);
    if (x->pend.kind == D_NONE) return;
    const Deferred d = x->pend;
    x->pend.kind = D_NONE;
    launch_deferred(x, d, 0);
}

// an op that can round its output: kept for a following round_to in a bf16 / fp16 run, else launched now
void defer(zt_backend *be, const Deferred &d) {
    flush(be);
    cu_ctx *x = ctx_of(be);
    if (x->prec != ZT_PREC_FP32 && x->fuse_round) x->pend = d;
    else launch_deferred(x, d, 0);
}

// a kept round_to of exactly (in, n) done by the op d as it loads in (d->in_round) when ok: no launch of its own
void take_round(zt_backend *be, Deferred *d, const void *in, size_t n, bool ok) {
    cu_ctx *c = ctx_of(be);
    if (!ok || c->pend.kind != D_ROUND || c->pend.out != in || c->pend.out_n != n) return;
    d->in_round = c->pend.in_round;
    c->pend.kind = D_NONE;
    c->fused++;
}

// the stream, after the kept op (every launch goes through it)
cudaStream_t stream_of(zt_backend *be) {
    flush(be);
    return ctx_of(be)->stream;
}

#ifdef ZT_HOSTEXEC
// device address -> the memory kernels and copies use
template <typename T> T *dev(T *p) { return static_cast<T *>(zt_devsim_real(p, "cudasim")); }
template <typename T> const T *dev(const T *p) { return static_cast<const T *>(zt_devsim_real(p, "cudasim")); }
#else
template <typename T> T *dev(T *p) { return p; }
#endif

// For the length of a slot that keeps the mirrors: drops those its outputs (up to 4 ranges: address, bytes) overlap
struct MirrorKeep {
    cu_ctx *x;
    MirrorKeep(zt_backend *be, std::initializer_list<std::pair<const void *, size_t>> writes) : x(ctx_of(be)) {
        for (const auto &w : writes) zt_mirror16_clobber(&x->mir, w.first, w.second);
        x->mir_keep = 1;
    }
    ~MirrorKeep() { x->mir_keep = 0; }
};
// the words equal to the n floats at p (a model address), translated, or nullptr
const uint16_t *mirror_words(zt_backend *be, const float *p, size_t n) {
    cu_ctx *x = ctx_of(be);
    if (!x->mir_on || x->prec == ZT_PREC_FP32 || !p) return nullptr;
    const uint16_t *w = zt_mirror16_find(&x->mir, p, n);
    if (!w) return nullptr;
    x->mir.hits++;
    return dev(w);
}

void *b_alloc(zt_backend *be, size_t bytes);
void b_free(zt_backend *be, void *p);

// A LayerNorm (ln1, ln2, ln_f), GELU or fused attention output is the next product's input: the kernel that rounds
// it also writes its 2-byte words into one of two backend buffers, taken in turn, and that is recorded as a mirror
// (a slot writing the output drops it; the next use of the same buffer drops it too). nullptr for other ops, without
// mirrors, and in fp32 runs.
uint16_t *words_for(zt_backend *be, const Deferred &d) {
    cu_ctx *x = ctx_of(be);
    if (!x->mir_on || x->prec == ZT_PREC_FP32 || !d.out_n ||
        !(d.kind == D_LN_FWD || d.kind == D_RLN_FWD || d.kind == D_GELU_FWD || d.kind == D_ATT_FWD))
        return nullptr;
    const int k = x->ring_next;
    x->ring_next ^= 1;
    zt_mirror16_clobber(&x->mir, x->ring[k], x->ring_cap[k] * sizeof(uint16_t)); // its old words are replaced
    if (d.out_n > x->ring_cap[k]) { // grown to the largest need (the first step), then kept
        b_free(be, x->ring[k]);
        x->ring[k] = b_alloc(be, d.out_n * sizeof(uint16_t));
        x->ring_cap[k] = d.out_n;
    }
    zt_mirror16_add(&x->mir, static_cast<const float *>(d.out), x->ring[k], d.out_n);
    return static_cast<uint16_t *>(dev(x->ring[k]));
}

// ------------------------------------------------------------------------------------------ memory

void *b_alloc(zt_backend *be, size_t bytes) {
    flush(be);
#ifdef ZT_HOSTEXEC
    return zt_devsim_mem_alloc(bytes);
#else
    void *p = nullptr;
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);
    if (e != cudaSuccess)
        zt_panic(__FILE__, __LINE__, "out of GPU memory allocating %zu bytes: %s", bytes, cudaGetErrorString(e));
    ZT_CUDA(cudaMemsetAsync(p, 0, bytes, ctx_of(be)->stream));
    ZT_CUDA(cudaStreamSynchronize(ctx_of(be)->stream));
    return p;
#endif
}

void b_free(zt_backend *be, void *p) {
    flush(be);
    (void)be;
    if (!p) return;
#ifdef ZT_HOSTEXEC
    zt_devsim_mem_free(p);
#else
    ZT_CUDA(cudaStreamSynchronize(ctx_of(be)->stream));
    ZT_CUDA(cudaFree(p));
#endif
}

/* page-locked host memory (zero.offload's master weights and moments): full-speed copies. Under the host
   execution harness it is plain host memory */
void *b_host_alloc(zt_backend *be, size_t bytes) {
    (void)be;
#ifdef ZT_HOSTEXEC
    return zt_calloc(1, bytes ? bytes : 1);
#else
    void *p = NULL;
    ZT_CUDA(cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocDefault));
    memset(p, 0, bytes);
    return p;
#endif
}

void b_host_free(zt_backend *be, void *p) {
    (void)be;
#ifdef ZT_HOSTEXEC
    free(p);
#else
    if (p) ZT_CUDA(cudaFreeHost(p));
#endif
}

void b_to_device(zt_backend *be, void *dst, const void *src, size_t bytes) {
    flush(be);
    if (!bytes) return;
#ifdef ZT_HOSTEXEC
    (void)be;
    zt_devsim_check_host(src, "cudasim to_device (source)");
    memcpy(dev(dst), src, bytes);
#else
    ZT_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, ctx_of(be)->stream));
    ZT_CUDA(cudaStreamSynchronize(ctx_of(be)->stream));
#endif
}

void b_to_host(zt_backend *be, void *dst, const void *src, size_t bytes) {
    flush(be);
    if (!bytes) return;
#ifdef ZT_HOSTEXEC
    (void)be;
    zt_devsim_check_host(dst, "cudasim to_host (destination)");
    memcpy(dst, dev(src), bytes);
#else
    ZT_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, ctx_of(be)->stream));
    ZT_CUDA(cudaStreamSynchronize(ctx_of(be)->stream));
#endif
}

void b_copy(zt_backend *be, void *dst, const void *src, size_t bytes) {
    flush(be);
    if (!bytes || dst == src) return;
#ifdef ZT_HOSTEXEC
    (void)be;
    memmove(dev(dst), dev(src), bytes);
#else
    ZT_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, ctx_of(be)->stream));
#endif
}

void b_zero(zt_backend *be, void *dst, size_t bytes) {
    flush(be);
    if (!bytes) return;
#ifdef ZT_HOSTEXEC
    (void)be;
    memset(dev(dst), 0, bytes);
#else
    ZT_CUDA(cudaMemsetAsync(dst, 0, bytes, ctx_of(be)->stream));
#endif
}

void b_sync(zt_backend *be) {
    flush(be);
#ifdef ZT_HOSTEXEC
    (void)be; // every launch of the harness is synchronous
#else
    ZT_CUDA(cudaStreamSynchronize(ctx_of(be)->stream));
#endif
}

// scratch of at least `bytes`, grown (never shrunk) the first time a larger need is seen
void *scratch(zt_backend *be, size_t bytes) {
    cu_ctx *x = ctx_of(be);
    if (bytes > x->scratch_bytes) {
        b_free(be, x->scratch);
        x->scratch = b_alloc(be, bytes);
        x->scratch_bytes = bytes;
    }
    return dev(x->scratch);
}

// the last-block reductions' tickets (zero between launches: each kernel puts back what it took)
unsigned *tickets(zt_backend *be) {
    cu_ctx *x = ctx_of(be);
    if (!x->tickets) x->tickets = b_alloc(be, kCuTickets * sizeof(unsigned));
    return static_cast<unsigned *>(dev(x->tickets));
}

// ------------------------------------------------------------------------------------------ ops

#define S stream_of(be)

void b_matmul(zt_backend *be, float *c, const float *a, const float *b, int M, int N, int K, int ta, int tb,
              float alpha, float beta) {
    zt_cu_matmul(ctx_of(be)->gemm, S, dev(c), dev(a), dev(b), M, N, K, ta, tb, alpha, beta);
}
void b_matmul_ld(zt_backend *be, float *c, const float *a, const float *b, int M, int N, int K, int ta, int tb,
                 float alpha, float beta, int lda, int ldb, int ldc) {
    zt_cu_matmul_ld(ctx_of(be)->gemm, S, dev(c), dev(a), dev(b), M, N, K, ta, tb, alpha, beta, lda, ldb, ldc);
}
void b_linear_fwd(zt_backend *be, float *out, const float *inp, const float *w, const float *bias, int N, int C,
                  int OC) {
    MirrorKeep keep(be, {{out, (size_t)N * OC * sizeof(float)}});
    const bool look = N > 0 && C > 0 && OC > 0;
    const uint16_t *iw = look ? mirror_words(be, inp, (size_t)N * C) : nullptr;
    const uint16_t *ww = look ? mirror_words(be, w, (size_t)C * OC) : nullptr;
    zt_cu_linear_fwd(ctx_of(be)->gemm, S, dev(out), dev(inp), dev(w), dev(bias), N, C, OC, iw, ww);
}
void b_linear_bwd(zt_backend *be, float *dinp, float *dw, float *dbias, const float *dout, const float *inp,
                  const float *w, int N, int C, int OC, int accumulate_dinp) {
    MirrorKeep keep(be, {{dinp, (size_t)N * C * sizeof(float)}, {dw, (size_t)C * OC * sizeof(float)},
                         {dbias, (size_t)OC * sizeof(float)}});
    void *sc = scratch(be, zt_cu_linear_bwd_scratch(N, OC));
    unsigned *tk = tickets(be);
    const bool look = N > 0 && C > 0 && OC > 0; // the packing path (bf16 / fp16 checked in mirror_words)
    const uint16_t *iw = look ? mirror_words(be, inp, (size_t)N * C) : nullptr;
    const uint16_t *ww = look ? mirror_words(be, w, (size_t)C * OC) : nullptr;
    zt_cu_linear_bwd(ctx_of(be)->gemm, S, dev(dinp), dev(dw), dev(dbias), dev(dout), dev(inp), dev(w), N, C, OC,
                     accumulate_dinp, sc, tk, iw, ww);
}
void b_layernorm_fwd(zt_backend *be, float *out, float *mean, float *rstd, const float *inp, const float *w,
                     const float *b, int N, int C, float eps) {
    MirrorKeep keep(be, {{out, (size_t)N * C * sizeof(float)}, {mean, N * sizeof(float)}, {rstd, N * sizeof(float)}});
    Deferred d = {};
    d.kind = D_LN_FWD;
    d.o0 = dev(out); d.o1 = dev(mean); d.o2 = dev(rstd); d.i0 = dev(inp); d.i1 = dev(w); d.i2 = dev(b);
    d.B = N; d.C = C; d.f = eps;
    d.out = out; d.out_n = (size_t)N * C;
    defer(be, d);
}
void b_residual_layernorm_fwd(zt_backend *be, float *res, float *out, float *mean, float *rstd, const float *a,
                              const float *b, const float *w, const float *bias, int N, int C, int prec, float eps) {
    MirrorKeep keep(be, {{res, (size_t)N * C * sizeof(float)}, {out, (size_t)N * C * sizeof(float)},
                         {mean, N * sizeof(float)}, {rstd, N * sizeof(float)}});
    Deferred d = {};
    d.kind = D_RLN_FWD;
    d.o0 = dev(res); d.o1 = dev(out); d.o2 = dev(mean); d.o3 = dev(rstd);
    d.i0 = dev(a); d.i1 = dev(b); d.i2 = dev(w); d.i3 = dev(bias);
    d.B = N; d.C = C; d.res_prec = prec; d.f = eps;
    d.out = out; d.out_n = (size_t)N * C; // a round_to of the LayerNorm's output is fused, as after layernorm_fwd
    take_round(be, &d, b, (size_t)N * C, b != a && (const float *)b != res && (const float *)b != out);
    defer(be, d);
}
void b_layernorm_bwd(zt_backend *be, float *dinp, float *dw, float *db, const float *dout, const float *inp,
                     const float *w, const float *mean, const float *rstd, int N, int C) {
    MirrorKeep keep(be, {{dinp, (size_t)N * C * sizeof(float)}, {dw, C * sizeof(float)}, {db, C * sizeof(float)}});
    Deferred d = {};
    d.scratch = scratch(be, zt_cu_layernorm_bwd_scratch(N, C));
    d.tickets = tickets(be);
    d.kind = D_LN_BWD;
    d.o0 = dev(dinp); d.o1 = dev(dw); d.o2 = dev(db);
    d.i0 = dev(dout); d.i1 = dev(inp); d.i2 = dev(w); d.i3 = dev(mean); d.i4 = dev(rstd);
    d.B = N; d.C = C;
    d.out = dinp; d.out_n = (size_t)N * C;
    take_round(be, &d, dout, (size_t)N * C, dout != dinp && dout != inp);
    defer(be, d);
}
void b_attention_fwd(zt_backend *be, float *out, float *att, const float *qkv, int B, int T, int C, int NH, int NKV) {
    zt_cu_attention_fwd(ctx_of(be)->gemm, S, dev(out), dev(att), dev(qkv), B, T, C, NH, NKV);
}
void b_attention_bwd(zt_backend *be, float *dqkv, float *datt, const float *dout, const float *qkv, const float *att,
                     int B, int T, int C, int NH, int NKV) {
    zt_cu_attention_bwd(ctx_of(be)->gemm, S, dev(dqkv), dev(datt), dev(dout), dev(qkv), dev(att), B, T, C, NH, NKV);
}
void b_attention_bidir_fwd(zt_backend *be, float *out, float *att, const float *qkv, const int32_t *kvalid, int B,
                           int T, int C, int NH, int NKV) {
    zt_cu_attention_bidir_fwd(ctx_of(be)->gemm, S, dev(out), dev(att), dev(qkv), dev(kvalid), B, T, C, NH, NKV);
}
void b_attention_bidir_bwd(zt_backend *be, float *dqkv, float *datt, const float *dout, const float *qkv,
                           const float *att, const int32_t *kvalid, int B, int T, int C, int NH, int NKV) {
    zt_cu_attention_bidir_bwd(ctx_of(be)->gemm, S, dev(dqkv), dev(datt), dev(dout), dev(qkv), dev(att), dev(kvalid), B,
                              T, C, NH, NKV);
}
void b_attention_fused_fwd(zt_backend *be, float *out, float *stats, const float *qkv, int B, int T, int C, int NH,
                           int NKV) {
    MirrorKeep keep(be, {{out, (size_t)B * T * C * sizeof(float)}, {stats, (size_t)B * NH * T * 2 * sizeof(float)}});
    Deferred d = {};
    d.kind = D_ATT_FWD;
    d.o0 = dev(out); d.o1 = dev(stats); d.i0 = dev(qkv);
    d.tc = zt_cu_attention_tc(ctx_of(be)->prec) ? ctx_of(be)->prec : 0;
    d.B = B; d.T = T; d.C = C; d.NH = NH; d.NKV = NKV;
    d.out = out; d.out_n = (size_t)B * T * C;
    defer(be, d);
}
void b_attention_fused_bwd(zt_backend *be, float *dqkv, float *scratch, const float *dout, const float *qkv, const float *out,
                           const float *stats, int B, int T, int C, int NH, int NKV) {
    MirrorKeep keep(be, {{dqkv, (size_t)B * T * (C + 2 * (size_t)NKV * (C / NH)) * sizeof(float)},
                         {scratch, zt_attention_fused_scratch(B, T, C, NH) * sizeof(float)}});
    Deferred d = {};
    d.kind = D_ATT_BWD;
    d.o0 = dev(dqkv); d.o1 = dev(scratch); d.i0 = dev(dout); d.i1 = dev(qkv); d.i2 = dev(out); d.i3 = dev(stats);
    d.tc = zt_cu_attention_tc(ctx_of(be)->prec) ? ctx_of(be)->prec : 0;
    d.B = B; d.T = T; d.C = C; d.NH = NH; d.NKV = NKV;
    d.out = dqkv; d.out_n = (size_t)B * T * (C + 2 * (size_t)NKV * (C / NH));
    defer(be, d);
}
void b_attention_decode(zt_backend *be, float *out, float *kcache, float *vcache, const float *qkv, int pos, int maxT,
                        int C, int NH, int NKV) {
    zt_cu_attention_decode(S, dev(out), dev(kcache), dev(vcache), dev(qkv), pos, maxT, C, NH, NKV);
}
void b_rmsnorm_fwd(zt_backend *be, float *out, float *rstd, const float *inp, const float *w, int N, int C, float eps) {
    Deferred d = {};
    d.kind = D_RMS_FWD;
    d.o0 = dev(out); d.o1 = dev(rstd); d.i0 = dev(inp); d.i1 = dev(w);
    d.B = N; d.C = C; d.f = eps;
    d.out = out; d.out_n = (size_t)N * C;
    defer(be, d);
}
void b_rmsnorm_bwd(zt_backend *be, float *dinp, float *dw, const float *dout, const float *inp, const float *w,
                   const float *rstd, int N, int C) {
    Deferred d = {};
    d.scratch = scratch(be, zt_cu_rmsnorm_bwd_scratch(N, C));
    d.tickets = tickets(be);
    d.kind = D_RMS_BWD;
    d.o0 = dev(dinp); d.o1 = dev(dw); d.i0 = dev(dout); d.i1 = dev(inp); d.i2 = dev(w); d.i3 = dev(rstd);
    d.B = N; d.C = C;
    d.out = dinp; d.out_n = (size_t)N * C;
    defer(be, d);
}
void b_rope(zt_backend *be, float *qkv, const float *cs, int B, int T, int pos0, int NH, int NKV, int hs, int inverse) {
    zt_cu_rope(S, dev(qkv), dev(cs), B, T, pos0, NH, NKV, hs, inverse);
}
void b_swiglu_fwd(zt_backend *be, float *out, const float *inp, int N, int I) {
    Deferred d = {};
    d.kind = D_SWIGLU_FWD;
    d.o0 = dev(out); d.i0 = dev(inp);
    d.B = N; d.C = I;
    d.out = out; d.out_n = (size_t)N * I;
    defer(be, d);
}
void b_swiglu_bwd(zt_backend *be, float *dinp, const float *inp, const float *dout, int N, int I) {
    Deferred d = {};
    d.kind = D_SWIGLU_BWD;
    d.o0 = dev(dinp); d.i0 = dev(inp); d.i1 = dev(dout);
    d.B = N; d.C = I;
    d.out = dinp; d.out_n = (size_t)N * 2 * I;
    defer(be, d);
}
void b_gemv(zt_backend *be, float *y, const float *x, const float *w, const float *bias, int C, int OC, int w_t) {
    zt_cu_gemv(S, dev(y), dev(x), dev(w), dev(bias), C, OC, w_t);
}
// GELU forward (dout nullptr) or backward into out, the tanh approximation or the exact (erf) one
void defer_gelu(zt_backend *be, int exact, float *out, const float *inp, const float *dout, size_t n) {
    MirrorKeep keep(be, {{out, n * sizeof(float)}});
    Deferred d = {};
    d.kind = dout ? D_GELU_BWD : D_GELU_FWD;
    d.o0 = dev(out); d.i0 = dev(inp); d.i1 = dev(dout); d.n = n; d.exact = exact;
    d.out = out; d.out_n = n;
    // a kept round_to of exactly this GELU's input (forward: inp; backward in place: dout) is done in its kernel
    take_round(be, &d, dout ? (const void *)dout : (const void *)inp, n, !dout || dout == out);
    defer(be, d);
}
void b_gelu_fwd(zt_backend *be, float *out, const float *inp, size_t n) { defer_gelu(be, 0, out, inp, nullptr, n); }
void b_gelu_bwd(zt_backend *be, float *dinp, const float *inp, const float *dout, size_t n) {
    defer_gelu(be, 0, dinp, inp, dout, n);
}
void b_gelu_erf_fwd(zt_backend *be, float *out, const float *inp, size_t n) { defer_gelu(be, 1, out, inp, nullptr, n); }
void b_gelu_erf_bwd(zt_backend *be, float *dinp, const float *inp, const float *dout, size_t n) {
    defer_gelu(be, 1, dinp, inp, dout, n);
}
void b_bias_add(zt_backend *be, float *out, const float *bias, int N, int OC) {
    zt_cu_bias_add(S, dev(out), dev(bias), N, OC);
}
void b_bias_grad(zt_backend *be, float *dbias, const float *dout, int N, int OC) {
    zt_cu_bias_grad(S, dev(dbias), dev(dout), N, OC);
}
void b_argmax_rows(zt_backend *be, int32_t *idx, const float *x, int N, int V, int ld) {
    zt_cu_argmax_rows(S, dev(idx), dev(x), N, V, ld);
}
void b_add(zt_backend *be, float *out, const float *a, const float *b, size_t n) {
    MirrorKeep keep(be, {{out, n * sizeof(float)}});
    Deferred d = {};
    d.kind = D_ADD;
    d.o0 = dev(out); d.i0 = dev(a); d.i1 = dev(b); d.n = n;
    d.out = out; d.out_n = n;
    take_round(be, &d, b, n, b != a);
    defer(be, d);
}
void b_embed_fwd(zt_backend *be, float *out, const int32_t *tokens, const float *wte, const float *wpe, int B, int T,
                 int C) {
    Deferred d = {};
    d.kind = D_EMBED_FWD;
    d.o0 = dev(out); d.tok = dev(tokens); d.i0 = dev(wte); d.i1 = dev(wpe);
    d.B = B; d.T = T; d.C = C;
    d.out = out; d.out_n = (size_t)B * T * C;
    defer(be, d);
}
void b_embed_bwd(zt_backend *be, float *dwte, float *dwpe, const float *dout, const int32_t *tokens, int B, int T,
                 int C) {
    void *sc = scratch(be, zt_cu_embed_bwd_scratch(B, T));
    zt_cu_embed_bwd(S, dev(dwte), dev(dwpe), dev(dout), dev(tokens), B, T, C, sc);
}
void b_softmax_xent(zt_backend *be, float *losses, float *logits, const int32_t *targets, int N, int V, int Vp,
                    float dscale) {
    Deferred d = {};
    d.kind = D_XENT;
    d.o0 = dev(losses); d.o1 = dev(logits); d.tok = dev(targets);
    d.B = N; d.V = V; d.Vp = Vp; d.f = dscale;
    d.out = dscale != 0.0f ? logits : nullptr; // dlogits; with dscale 0 the logits are left as they were
    d.out_n = (size_t)N * Vp;
    defer(be, d);
}
void b_matmul16(zt_backend *be, void *c, int c16, const void *a, int a16, const float *b, int M, int N, int K, int ta,
                int tb, int prec) {
    ZT_ASSERT(prec == ctx_of(be)->prec); // the GEMM's operand precision (set_precision)
    MirrorKeep keep(be, {{c, (size_t)M * N * (c16 ? sizeof(uint16_t) : sizeof(float))}});
    const uint16_t *bw = M > 0 && N > 0 && K > 0 ? mirror_words(be, b, (size_t)K * N) : nullptr; // the tied wte
    zt_cu_matmul16(ctx_of(be)->gemm, S, dev(c), c16, dev(a), a16, dev(b), M, N, K, ta, tb, bw);
}
void b_softmax_xent16(zt_backend *be, float *losses, void *logits, const int32_t *targets, int N, int V, int Vp,
                      float dscale, int prec) {
    zt_cu_softmax_xent16(S, dev(losses), static_cast<uint16_t *>(dev(logits)), dev(targets), N, V, Vp, dscale, prec);
}
void b_adamw(zt_backend *be, float *param, const float *grad, float *m, float *v, size_t n, float lr, float beta1,
             float beta2, float eps, float weight_decay, float bias_corr1, float bias_corr2, float grad_scale) {
    zt_cu_adamw(S, dev(param), dev(grad), dev(m), dev(v), n, lr, beta1, beta2, eps, weight_decay, bias_corr1,
                bias_corr2, grad_scale);
}
void free_adamw_tables(zt_backend *be) {
    cu_ctx *x = ctx_of(be);
    for (int i = 0; i < x->adamw_n; i++) {
        b_free(be, x->adamw[i].table);
        free(x->adamw[i].key);
    }
    x->adamw_n = 0;
}
// the cached device table of segs (built and uploaded at its first use)
const AdamwTable &adamw_table(zt_backend *be, const zt_adamw_seg *segs, int nseg) {
    cu_ctx *x = ctx_of(be);
    for (int i = 0; i < x->adamw_n; i++) {
        const AdamwTable &t = x->adamw[i];
        bool same = t.nkey == nseg;
        for (int k = 0; same && k < nseg; k++) // field by field: the caller's padding bytes are not part of the key
            same = t.key[k].offset == segs[k].offset && t.key[k].n == segs[k].n &&
                   t.key[k].weight_decay == segs[k].weight_decay;
        if (same) return t;
    }
    if (x->adamw_n == kAdamwTables) free_adamw_tables(be);
    AdamwTable &t = x->adamw[x->adamw_n];
    t.key = static_cast<zt_adamw_seg *>(zt_malloc((size_t)nseg * sizeof *segs));
    memcpy(t.key, segs, (size_t)nseg * sizeof *segs);
    t.nkey = nseg;
    zt_cu_adamw_seg *host = static_cast<zt_cu_adamw_seg *>(zt_malloc((size_t)nseg * sizeof(zt_cu_adamw_seg)));
    t.ntable = zt_cu_adamw_multi_table(segs, nseg, host, &t.total);
    const size_t bytes = (size_t)t.ntable * sizeof(zt_cu_adamw_seg);
    t.table = nullptr;
    if (bytes) {
        t.table = b_alloc(be, bytes);
#ifdef ZT_HOSTEXEC
        memcpy(dev(t.table), host, bytes);
#else
        // from pageable memory: staged before the call returns, so host may be freed; no stream sync
        ZT_CUDA(cudaMemcpyAsync(t.table, host, bytes, cudaMemcpyHostToDevice, stream_of(be)));
#endif
    }
    free(host);
    x->adamw_n++;
    return t;
}
void b_adamw_multi(zt_backend *be, float *param, const float *grad, float *m, float *v, const zt_adamw_seg *segs,
                   int nseg, float lr, float beta1, float beta2, float eps, float bias_corr1, float bias_corr2,
                   float grad_scale) {
    flush(be); // as every slot (and the launch counter's model of it, core/diag/backend_count.c)
    if (nseg <= 0) return;
    const AdamwTable &t = adamw_table(be, segs, nseg);
    if (t.total == 0) return;
    zt_cu_adamw_multi(S, dev(param), dev(grad), dev(m), dev(v), static_cast<const zt_cu_adamw_seg *>(dev(t.table)),
                      t.ntable, t.total, lr, beta1, beta2, eps, bias_corr1, bias_corr2, grad_scale);
}
void b_accumulate(zt_backend *be, float *acc, const float *x, size_t n) {
    MirrorKeep keep(be, {{acc, n * sizeof(float)}});
    zt_cu_accumulate(S, dev(acc), dev(x), n);
}
void b_sumsq_chunks(zt_backend *be, double *out, const float *x, size_t n, size_t chunk) {
    zt_cu_sumsq_chunks(S, dev(out), dev(x), n, chunk);
}
void b_set_precision(zt_backend *be, int prec) {
    flush(be); // drops the mirrors
    ctx_of(be)->prec = prec;
    zt_cu_gemm_set_precision(ctx_of(be)->gemm, prec);
}
void b_round_to(zt_backend *be, float *x, size_t n, int prec) {
    MirrorKeep keep(be, {{x, n * sizeof(float)}});
    cu_ctx *c = ctx_of(be);
    if (c->pend.kind != D_NONE && c->pend.kind != D_ROUND && prec != ZT_PREC_FP32 && c->pend.out == x &&
        c->pend.out_n == n) {
        const Deferred d = c->pend; // the op that wrote x: launched rounding its output, which is all round_to does
        c->pend.kind = D_NONE;
        launch_deferred(c, d, prec, prec == c->prec ? words_for(be, d) : nullptr);
        c->fused++;
        return;
    }
    if (prec == ZT_PREC_FP32) return;
    if (c->pend.kind == D_ROUND && c->pend.out == x && c->pend.out_n == n && c->pend.in_round == prec) return;
    flush(be);
    if (c->prec != ZT_PREC_FP32 && c->fuse_round) { // kept: the GELU that reads x next rounds it (defer_gelu)
        Deferred d = {};
        d.kind = D_ROUND;
        d.o0 = dev(x); d.n = n; d.in_round = prec;
        d.out = x; d.out_n = n;
        c->pend = d;
        return;
    }
    c->unfused++;
    zt_cu_round_to(S, dev(x), n, prec);
}
void b_pack16(zt_backend *be, void *dst, const float *x, size_t n, int prec) {
    MirrorKeep keep(be, {{dst, n * sizeof(uint16_t)}});
    zt_cu_pack16(S, static_cast<uint16_t *>(dev(dst)), dev(x), n, prec);
}
void b_unpack16(zt_backend *be, float *dst, const void *src, size_t n, int prec) {
    MirrorKeep keep(be, {{dst, n * sizeof(float)}});
    zt_cu_unpack16(S, dev(dst), static_cast<const uint16_t *>(dev(src)), n, prec);
    if (prec == ctx_of(be)->prec) zt_mirror16_add(&ctx_of(be)->mir, dst, src, n); // dst now equals the words
}
void b_dropout(zt_backend *be, float *out, const float *in, size_t n, float p, uint64_t seed) {
    zt_cu_dropout(S, dev(out), dev(in), n, p, seed);
}
void b_dequant(zt_backend *be, float *out, const void *blob, int fmt, size_t rows, size_t cols) {
    const zt_quant_layout L = zt_quant_plan((zt_quant_fmt)fmt, rows, cols);
    zt_cu_dequant(S, dev(out), static_cast<const uint8_t *>(dev(blob)), fmt, L.n, L.cols, L.codes, L.absmax,
                  L.qabsmax, L.absmax2, L.mean, L.scales);
}

#undef S

void b_describe(zt_backend *be, char *buf, size_t n) { snprintf(buf, n, "%s", ctx_of(be)->desc); }

void b_destroy(zt_backend *be) {
    if (!be) return;
    flush(be);
    cu_ctx *x = ctx_of(be);
    const char *st = getenv("ZT_CUDA_FUSE_ROUND_STATS");
    if (st && strcmp(st, "1") == 0 && (x->fused || x->unfused))
        fprintf(stderr, "%s: %ld round_to fused into the op that wrote the values, %ld as their own pass; %ld product "
                "operands read from 2-byte words without packing\n", be->i->name, x->fused, x->unfused, x->mir.hits);
    b_free(be, x->scratch);
    if (x->tickets) b_free(be, x->tickets);
    for (void *r : x->ring) b_free(be, r);
    free_adamw_tables(be);
    zt_cu_gemm_free(x->gemm);
#ifndef ZT_HOSTEXEC
    cudaStreamDestroy(x->stream);
#endif
    free(x);
    free(be);
}

zt_backend_i make_i(void) {
    zt_backend_i i;
    memset(&i, 0, sizeof i);
#ifdef ZT_HOSTEXEC
    i.name = "cudasim";
#else
    i.name = "cuda";
#endif
    i.mem = ZT_MEM_DEVICE;
    i.destroy = b_destroy;
    i.describe = b_describe;
    i.alloc = b_alloc;
    i.free = b_free;
    i.host_alloc = b_host_alloc;
    i.host_free = b_host_free;
    i.to_device = b_to_device;
    i.to_host = b_to_host;
    i.copy = b_copy;
    i.zero = b_zero;
    i.sync = b_sync;
    i.matmul = b_matmul;
    i.matmul_ld = b_matmul_ld;
    i.linear_fwd = b_linear_fwd;
    i.linear_bwd = b_linear_bwd;
    i.layernorm_fwd = b_layernorm_fwd;
    i.layernorm_bwd = b_layernorm_bwd;
    i.residual_layernorm_fwd = b_residual_layernorm_fwd;
    i.rmsnorm_fwd = b_rmsnorm_fwd;
    i.rmsnorm_bwd = b_rmsnorm_bwd;
    i.rope = b_rope;
    i.swiglu_fwd = b_swiglu_fwd;
    i.swiglu_bwd = b_swiglu_bwd;
    i.attention_fwd = b_attention_fwd;
    i.attention_bwd = b_attention_bwd;
    i.attention_decode = b_attention_decode;
    i.attention_fused_fwd = b_attention_fused_fwd;
    i.attention_fused_bwd = b_attention_fused_bwd;
    i.attention_bidir_fwd = b_attention_bidir_fwd;
    i.attention_bidir_bwd = b_attention_bidir_bwd;
    i.gelu_erf_fwd = b_gelu_erf_fwd;
    i.gelu_erf_bwd = b_gelu_erf_bwd;
    i.bias_add = b_bias_add;
    i.bias_grad = b_bias_grad;
    i.argmax_rows = b_argmax_rows;
    i.gemv = b_gemv;
    i.gelu_fwd = b_gelu_fwd;
    i.gelu_bwd = b_gelu_bwd;
    i.add = b_add;
    i.embed_fwd = b_embed_fwd;
    i.embed_bwd = b_embed_bwd;
    i.softmax_xent = b_softmax_xent;
    i.matmul16 = b_matmul16;
    i.softmax_xent16 = b_softmax_xent16;
    i.adamw = b_adamw;
    i.adamw_multi = b_adamw_multi;
    i.accumulate = b_accumulate;
    i.sumsq_chunks = b_sumsq_chunks;
    i.round_to = b_round_to;
    i.pack16 = b_pack16;
    i.unpack16 = b_unpack16;
    i.dropout = b_dropout;
    i.dequant = b_dequant;
    i.set_precision = b_set_precision;
    return i;
}

const zt_backend_i g_i = make_i();

zt_backend *make_backend(cu_ctx *x, int threads) {
    zt_backend *be = static_cast<zt_backend *>(zt_calloc(1, sizeof *be));
    be->i = &g_i;
    be->ctx = x;
    be->threads = threads;
    x->gemm = zt_cu_gemm_create(x->stream);
    const char *fr = getenv("ZT_CUDA_FUSE_ROUND");
    x->fuse_round = !(fr && strcmp(fr, "0") == 0);
    const char *mr = getenv("ZT_CUDA_MIRROR");
    x->mir_on = !(mr && strcmp(mr, "0") == 0);
    return be;
}

} // namespace

#ifdef ZT_HOSTEXEC

extern "C" zt_backend *zt_cudasim_backend_create(int threads, char *err, size_t errlen) {
    (void)err;
    (void)errlen;
    zt_devsim_mem_init();
    // blocks of a launch spread over `threads` OS threads (the harness's pool); 0 = its default
    hx::Config cfg = hx::config_get();
    if (threads > 0 && cfg.threads != (unsigned)threads) {
        cfg.threads = (unsigned)threads;
        hx::config_set(cfg);
    }
    cu_ctx *x = static_cast<cu_ctx *>(zt_calloc(1, sizeof *x));
    x->stream = nullptr;
    snprintf(x->desc, sizeof x->desc,
             "cudasim: the CUDA kernels run on the CPU by the host execution harness (%u threads), devsim memory",
             hx::config_get().threads);
    return make_backend(x, (int)hx::config_get().threads);
}

#else

extern "C" zt_backend *zt_cuda_backend_create(int threads, char *err, size_t errlen) {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        zt_errf(err, errlen, "device = \"cuda\": no usable GPU: %s",
                e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount found 0 devices");
        return nullptr;
    }
    // local rank -> GPU (CUDA_VISIBLE_DEVICES is applied by the runtime)
    MPI_Comm node;
    int local_rank = 0, local_size = 1;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local_rank);
    MPI_Comm_size(node, &local_size);
    MPI_Comm_free(&node);
    if (local_size > count) {
        zt_errf(err, errlen, "device = \"cuda\": %d ranks on this node but only %d visible GPU%s: start at most one "
                "rank per GPU", local_size, count, count == 1 ? "" : "s");
        return nullptr;
    }
    ZT_CUDA(cudaSetDevice(local_rank));
    cu_ctx *x = static_cast<cu_ctx *>(zt_calloc(1, sizeof *x));
    x->device = local_rank;
    ZT_CUDA(cudaStreamCreateWithFlags(&x->stream, cudaStreamNonBlocking));
    cudaDeviceProp p;
    ZT_CUDA(cudaGetDeviceProperties(&p, local_rank));
    snprintf(x->desc, sizeof x->desc, "cuda: GPU %d %.256s (sm_%d%d, %.1f GiB), cuBLASLt", local_rank, p.name, p.major,
             p.minor, (double)p.totalGlobalMem / (1 << 30));
    return make_backend(x, threads > 0 ? threads : 1);
}

extern "C" int zt_cuda_list_devices(char *buf, size_t n) {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        snprintf(buf, n, "%s", cudaGetErrorString(e));
        return -1;
    }
    size_t used = 0;
    if (n) buf[0] = 0;
    for (int d = 0; d < count && used < n; d++) {
        cudaDeviceProp p;
        if (cudaGetDeviceProperties(&p, d) != cudaSuccess) continue;
        used += (size_t)snprintf(buf + used, n - used, "%d: %s, %.1f GiB, sm_%d%d\n", d, p.name,
                                 (double)p.totalGlobalMem / (1 << 30), p.major, p.minor);
    }
    return count;
}

// for comm_nccl.cu
extern "C" cudaStream_t zt_cuda_backend_stream(zt_backend *be) { return stream_of(be); }

#endif
