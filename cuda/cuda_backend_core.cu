// cuda_backend_core.cu — the CUDA backend's host side that its slots stand on (see cuda_backend.h): memory, copies,
// scratch, the stream, the kept op with its fused round_to, and the mirrors; each slot is one launch function of
// cuda_ops.h on the backend's stream (cuda_backend_ops.cu), the lifecycle is cuda_backend.cu. Kernels never see a pointer the host build could not address: slot arguments are device
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
// residual add + LayerNorm whose second term it is, the LayerNorm backward whose dout it is, or the accumulation that
// adds a range holding it (a layer's gradients), that kernel rounds the values as it loads them and (but for the
// in-place GELU backward) writes them back rounded; any other call launches it. Two more calls are kept for the one
// that may follow them (KeptAdamw, KeptSumsq, launched by flush otherwise): the multi-tensor AdamW for the pack16 of
// its parameters, which its launch then writes, and the gradient norm's chunk sums for the clip_scale of exactly them,
// which their launch's last block then computes.
//
// Mirrors (bf16 / fp16 runs; iface/mirror16.h): unpack16 records that its float32 output equals the 2-byte words it
// read (the parameters' window, a layer's activations unpacked from the stash), and the LayerNorm, residual +
// LayerNorm, GELU and fused attention forwards write their rounded output's words beside it (words_for); a linear
// forward / backward (or the LM head's product) whose w or inp is such a buffer multiplies the words instead of
// packing it again. The slots that keep the records (MirrorKeep: the products, LayerNorms, fused attention, GELU, add,
// accumulate, round_to, pack16 / unpack16, the 2-byte loss, zero; cuda_backend_ops.cu) drop the ones their outputs
// overlap; every other slot and memory call drops them all. The bits are those of packing (the words are what
// packing gives); ZT_CUDA_MIRROR=0 turns it off and ZT_CUDA_FUSE_ROUND_STATS=1 prints the operands it saved.
// The activation stash rides on the same records: pack16_ahead names where a layer's internals will be packed and
// their producers write the words there (stash_words), so the pack finds them; unpack16_lazy records the backward's
// unpack without running it (lazy unpacks, below). A linear product is kept too (D_PRODUCT, resolve_product): the
// reader after its round_to that takes words gets its output as words alone, the floats a lazy record; the forwards
// writing into the stash and the GELU backward write words alone as well (words_for).
#include "cuda_backend_internal.h"

namespace ZT_CU_NS {
namespace cub {

// out16: the rounded output also as 2-byte words (words_for's kinds), else nullptr; words_only: those words alone,
// the output's floats not written (floats_optional's kinds); res_alone (D_RLN_FWD): res's words (w16) alone too
void launch_deferred(cu_ctx *x, const Deferred &d0, int prec, uint16_t *out16, bool words_only, bool res_alone) {
    Deferred d = d0;
    if (words_only) {
        ZT_ASSERT(out16 && floats_optional(d));
        if (d.kind == D_RLN_FWD) d.o1 = nullptr; // out
        else d.o0 = nullptr;
    }
    if (res_alone) {
        ZT_ASSERT(d.kind == D_RLN_FWD && d.w16);
        d.o0 = nullptr;
    }
    cudaStream_t s = x->stream;
    switch (d.kind) {
    case D_GELU_FWD:
        zt_cu_gelu_fwd(s, d.o0, d.i0, d.n, prec, d.exact, d.in_round, out16, d.w16 ? dev(d.w16) : nullptr, d.x16,
                       x->prec);
        break;
    case D_PRODUCT: // out16: the rounded output as words alone (take_product_words)
        if (!d.tb) zt_cu_linear_fwd(x->gemm, s, d.o0, d.i0, d.i1, d.i2, d.B, d.C, d.V, d.x16, d.o16, out16);
        else // dinp = dout @ w^T, dout given as words
            zt_cu_matmul16(x->gemm, s, out16 ? static_cast<void *>(out16) : static_cast<void *>(d.o0), out16 != nullptr,
                           d.x16, 1, d.i1, d.B, d.V, d.C, 0, 1, d.o16);
        break;
    case D_GELU_BWD:
        zt_cu_gelu_bwd(s, d.o0, d.i0, d.i1, d.n, prec, d.exact, d.in_round, out16, d.x16, x->prec, d.o16);
        break;
    case D_ROUND:
        zt_cu_round_to(s, d.o0, d.n, d.in_round, d.w16 ? dev(d.w16) : nullptr);
        x->unfused++;
        break;
    case D_ADD: zt_cu_add(s, d.o0, d.i0, d.i1, d.n, prec, d.in_round); break;
    case D_EMBED_FWD: zt_cu_embed_fwd(s, d.o0, d.tok, d.i0, d.i1, d.B, d.T, d.C, prec); break;
    case D_XENT: zt_cu_softmax_xent(s, d.o0, d.o1, d.tok, d.B, d.V, d.Vp, d.f, prec, d.fp); break;
    case D_LN_FWD: zt_cu_layernorm_fwd(s, d.o0, d.o1, d.o2, d.i0, d.i1, d.i2, d.B, d.C, d.f, prec, out16); break;
    case D_LN_BWD:
        zt_cu_layernorm_bwd(s, d.o0, d.o1, d.o2, d.i0, d.i1, d.i2, d.i3, d.i4, d.B, d.C, d.scratch, d.tickets, prec,
                            d.in_round, out16, d.x16, x->prec, d.o16);
        break;
    case D_ATT_FWD:
        zt_cu_attention_fused_fwd(s, d.o0, d.o1, d.i0, d.B, d.T, d.C, d.NH, d.NKV, prec, d.tc, out16, d.in_round,
                                  d.w16 ? dev(d.w16) : nullptr, d.x16);
        break;
    case D_ATT_BWD:
        zt_cu_attention_fused_bwd(s, d.o0, d.o1, d.i0, d.i1, d.i2, d.i3, d.B, d.T, d.C, d.NH, d.NKV, prec, d.tc,
                                  out16, d.x16, d.o16, d.in_round, d.d16);
        break;
    case D_RLN_FWD:
        zt_cu_residual_layernorm_fwd(s, d.o0, d.o1, d.o2, d.o3, d.i0, d.i1, d.i2, d.i3, d.B, d.C, d.f, d.res_prec,
                                     prec, d.in_round, out16, d.w16 ? dev(d.w16) : nullptr, d.x16, d.o16, x->prec);
        break;
    case D_RMS_FWD: zt_cu_rmsnorm_fwd(s, d.o0, d.o1, d.i0, d.i1, d.B, d.C, d.f, prec, out16); break;
    case D_RMS_BWD:
        zt_cu_rmsnorm_bwd(s, d.o0, d.o1, d.i0, d.i1, d.i2, d.i3, d.B, d.C, d.scratch, d.tickets, prec, out16);
        break;
    case D_SWIGLU_FWD: zt_cu_swiglu_fwd(s, d.o0, d.i0, d.B, d.C, prec, out16); break;
    case D_SWIGLU_BWD: zt_cu_swiglu_bwd(s, d.o0, d.i0, d.i1, d.B, d.C, prec, out16); break;
    case D_NONE: break;
    }
}

// the kept update launched, then (words given) the pack16 of nwords >= its total parameters in the same launch
void launch_kept_adamw(cu_ctx *x, uint16_t *words, size_t nwords) {
    if (!x->adamw_kept.on) return;
    const KeptAdamw k = x->adamw_kept;
    x->adamw_kept.on = false;
    zt_cu_adamw_multi(x->stream, dev(k.param), dev(k.grad), dev(k.m), dev(k.v),
                      static_cast<const zt_cu_adamw_seg *>(dev(k.table)), k.ntable, k.total, k.beta1, k.beta2, k.eps,
                      dev(k.hyper), words ? dev(words) : nullptr, nwords, x->prec);
}

// the kept chunk sums launched as they were
void launch_kept_sumsq(cu_ctx *x) {
    if (!x->sumsq_kept.on) return;
    const KeptSumsq k = x->sumsq_kept;
    x->sumsq_kept.on = false;
    zt_cu_sumsq_chunks(x->stream, dev(k.out), dev(k.x), k.n, k.chunk);
}

// launches the kept op, if any, unrounded; every slot and memory call passes here first, and all but those that keep
// the mirrors drop them
void flush(zt_backend *be) {
    cu_ctx *x = ctx_of(be);
    launch_kept_adamw(x, nullptr, 0); // (nothing else is kept with either: each was kept after a flush)
    launch_kept_sumsq(x);
    if (!x->mir_keep) {
        settle_all(x);
        zt_mirror16_clear(&x->mir);
    }
    resolve_product(x);
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

// a kept round_to of exactly (in, n) done by the op d as it loads in (d->in_round) when ok: no launch of its own.
// The words the round_to was to write beside its buffer (w16) the GELU and attention forwards write; any other op
// does not, and their mirror goes
void take_round(zt_backend *be, Deferred *d, const void *in, size_t n, bool ok) {
    cu_ctx *c = ctx_of(be);
    resolve_product(c);
    if (!ok || c->pend.kind != D_ROUND || c->pend.out != in || c->pend.out_n != n) return;
    d->in_round = c->pend.in_round;
    if (c->pend.w16 && (d->kind == D_GELU_FWD || d->kind == D_ATT_FWD)) d->w16 = c->pend.w16;
    else if (c->pend.w16) drop(c, {{c->pend.w16, n * sizeof(uint16_t)}});
    c->pend.kind = D_NONE;
    c->fused++;
}

// A linear product is kept as well (D_PRODUCT, bf16 / fp16 with mirrors: the forward's output, the backward's input
// gradient). The round_to of its output that follows is taken (in_round) without a launch, and the call after that
// decides how it runs: a reader of that output that takes words (the GELU forward and backward, the tensor-core
// attention forward and backward, residual + LayerNorm, the LayerNorm backward) gets it as 2-byte words alone
// (take_product_words: the GEMM rounds its fp32 sums itself; the floats are a lazy mirror of the words, written only
// if some slot reads them); any other call runs the product with float output and keeps the round_to
// (resolve_product: D_ROUND, as before).
void resolve_product(cu_ctx *x) {
    if (x->pend.kind != D_PRODUCT || !x->pend.in_round) return;
    const Deferred d = x->pend;
    launch_deferred(x, d, 0); // the floats
    Deferred r = {};
    r.kind = D_ROUND;
    r.o0 = d.o0; r.n = d.out_n; r.in_round = d.in_round;
    r.out = d.out; r.out_n = d.out_n;
    r.w16 = d.w16;
    x->pend = r;
}

// the words of the kept, rounded product's output when that is exactly (in, n): launched writing only them (into the
// stash pack16_ahead reserved, else a word buffer), recorded as a lazy mirror; else nullptr
const uint16_t *take_product_words(zt_backend *be, const void *in, size_t n) {
    cu_ctx *x = ctx_of(be);
    if (x->pend.kind != D_PRODUCT || !x->pend.in_round || x->pend.out != in || x->pend.out_n != n || !n)
        return nullptr;
    return product_words_now(be);
}

// the kept, rounded product launched writing its output's words alone (take_product_words), their device address
// returned
const uint16_t *product_words_now(zt_backend *be) {
    cu_ctx *x = ctx_of(be);
    const Deferred d = x->pend;
    const size_t n = d.out_n;
    x->pend.kind = D_NONE;
    const float *f = static_cast<const float *>(d.out);
    uint16_t *w = d.w16;
    if (!w) { // (growing the buffer the first time passes flush: the mirrors stay, nothing is kept)
        const int keep = x->mir_keep;
        x->mir_keep = 1;
        w = ring_words(be, f, n, 1, {d.x16, d.o16}); // not where its operands' words are
        x->mir_keep = keep;
    } else if (!zt_mirror16_mark_lazy(&x->mir, f, w, n)) mirror_add(x, f, w, n, 1);
    launch_deferred(x, d, d.in_round, dev(w));
    x->fused++;
    return dev(w);
}

// the stream, after the kept op (every launch goes through it)
cudaStream_t stream_of(zt_backend *be) {
    flush(be);
    return ctx_of(be)->stream;
}


// the words equal to the n floats at p (a model address), translated, or nullptr: then the caller reads the floats,
// written first where a lazy unpack holds them (need)
const uint16_t *mirror_words(zt_backend *be, const float *p, size_t n) {
    const uint16_t *w = find_words(be, p, n);
    if (!w) need(ctx_of(be), {{p, n * sizeof(float)}});
    return w;
}

// the words a mirror says equal the n floats at p (translated; the floats may be a lazy mirror's, not written), or
// nullptr; nothing settled either way (the caller names p among its reads when it reads the floats)
const uint16_t *find_words(zt_backend *be, const float *p, size_t n) {
    cu_ctx *x = ctx_of(be);
    const uint16_t *w = x->mir_on && x->prec != ZT_PREC_FP32 && p && n ? zt_mirror16_find(&x->mir, p, n) : nullptr;
    if (!w) return nullptr;
    x->mir.hits++;
    return dev(w);
}

// whether a round_to of exactly (p, n) is kept (D_ROUND, or taken by a kept product): its words, where a mirror
// names them, are not written yet
bool kept_round_of(zt_backend *be, const void *p, size_t n) {
    const Deferred &d = ctx_of(be)->pend;
    return (d.kind == D_ROUND || (d.kind == D_PRODUCT && d.in_round)) && d.out == p && d.out_n == n;
}

// ------------------------------------------------------------------------------------------ lazy unpacks
// unpack16_lazy records its output as a lazy mirror and launches nothing: the slots that can read the words take
// them (the products, the GELU and LayerNorm backwards' inputs); the unpack runs (settle) only when a slot reads
// the floats (need: the reads a MirrorKeep names, an operand without words), writes part of them or the words
// (drop), or keeps no mirrors (flush: settle_all), or when the record is evicted (mirror_add). The lazy entries a
// call settles run as one launch (zt_cu_unpack16_multi), on the stream at once, before the kept op: the kept op never
// touches a lazy range (its slot settled or dropped what it reads and writes).
static_assert(ZT_MIRROR16_MAX <= kCuUnpackMax, "every lazy entry fits one unpack16_multi launch");

// the unpacks of the lazy entries marked for settling (lazy == 2), as one launch; they stay as plain mirrors
static void settle_marked(cu_ctx *x) {
    zt_cu_unpack_job job = {};
    for (int i = 0; i < x->mir.n; i++) {
        zt_mirror16_entry &e = x->mir.e[i];
        if (e.lazy != 2) continue;
        e.lazy = 0;
        job.out[job.n] = dev(reinterpret_cast<float *>(e.dst));
        job.x[job.n] = dev(reinterpret_cast<const uint16_t *>(e.src));
        job.start[job.n + 1] = job.start[job.n] + e.n;
        job.n++;
    }
    if (!job.n) return;
    zt_cu_unpack16_multi(x->stream, job, x->prec);
    x->lazy_settled += job.n;
}

// a slot reads these ranges as float32
void need(cu_ctx *x, Ranges reads) {
    for (int i = 0; i < x->mir.n; i++) {
        zt_mirror16_entry &e = x->mir.e[i];
        for (const auto &r : reads)
            if (e.lazy && r.first && zt_mirror16_overlap(reinterpret_cast<uintptr_t>(r.first), r.second, e.dst,
                                                         e.n * sizeof(float)))
                e.lazy = 2;
    }
    settle_marked(x);
}

// these ranges are about to be written, in turn: the mirrors reading or naming one go, the lazy ones settled first
// (one launch a range) unless the range covers all of their floats (and none of their words)
void drop(cu_ctx *x, Ranges writes) {
    for (const auto &w : writes) {
        if (!w.first || !w.second) continue;
        const uintptr_t a = reinterpret_cast<uintptr_t>(w.first);
        for (int i = 0; i < x->mir.n; i++) {
            zt_mirror16_entry &e = x->mir.e[i];
            const size_t fb = e.n * sizeof(float);
            const bool words = zt_mirror16_overlap(a, w.second, e.src, e.n * sizeof(uint16_t));
            const bool part = zt_mirror16_overlap(a, w.second, e.dst, fb) && !(a <= e.dst && e.dst + fb <= a + w.second);
            if (e.lazy && (words || part)) e.lazy = 2;
        }
        settle_marked(x);
        zt_mirror16_clobber(&x->mir, w.first, w.second);
    }
}

void settle_all(cu_ctx *x) {
    for (int i = 0; i < x->mir.n; i++)
        if (x->mir.e[i].lazy) x->mir.e[i].lazy = 2;
    settle_marked(x);
}

// a mirror (lazy: an unpack16_lazy's), settling the oldest when it must make room
void mirror_add(cu_ctx *x, const float *dst, const void *src, size_t n, int lazy) {
    if (!n) return;
    if (x->mir.n == ZT_MIRROR16_MAX && x->mir.e[0].lazy) {
        x->mir.e[0].lazy = 2;
        settle_marked(x);
    }
    zt_mirror16_add(&x->mir, dst, src, n);
    x->mir.e[x->mir.n - 1].lazy = lazy;
}

// A LayerNorm (ln1, ln2, ln_f), RMSNorm, GELU, SwiGLU or fused attention output is the next product's input, and in
// the backward their input gradients are the output gradient of the linear before them: the kernel that rounds such
// an output also writes its 2-byte words into one of the backend's word buffers (ring_words), and that is recorded as
// a mirror (a slot writing the output drops it; the next use of the same buffer drops it too). nullptr for other ops,
// without mirrors, and in fp32 runs. Where pack16_ahead reserved the stash for them, the words go there; with only
// given, an op whose floats are optional (floats_optional) is then to write the words alone (*only: the mirror is
// lazy).
uint16_t *words_for(zt_backend *be, const Deferred &d, bool *only) {
    cu_ctx *x = ctx_of(be);
    if (only) *only = false;
    if (!x->mir_on || x->prec == ZT_PREC_FP32 || !d.out_n ||
        !(d.kind == D_LN_FWD || d.kind == D_RLN_FWD || d.kind == D_GELU_FWD || d.kind == D_ATT_FWD ||
          d.kind == D_LN_BWD || d.kind == D_GELU_BWD || d.kind == D_ATT_BWD || d.kind == D_RMS_FWD ||
          d.kind == D_RMS_BWD || d.kind == D_SWIGLU_FWD || d.kind == D_SWIGLU_BWD))
        return nullptr;
    if (uint16_t *w = stash_words(x, d.out, d.out_n)) { // the stash pack16_ahead reserved, instead
        if (only && floats_optional(d) && d.kind != D_GELU_BWD) { // the words alone: the floats a lazy mirror
            zt_mirror16_mark_lazy(&x->mir, static_cast<const float *>(d.out), w, d.out_n);
            *only = true;
        }
        return dev(w);
    }
    // (not where the op reads its input words: an op that reads them after writing some of its own, e.g. the
    // LayerNorm backward's column sums, would read its output). The GELU backward's input gradient writes its words
    // alone there: the product after it reads them (fc's dout), and its floats are overwritten by the next layer's
    const bool lz = only && d.kind == D_GELU_BWD;
    uint16_t *w = ring_words(be, static_cast<const float *>(d.out), d.out_n, lz, {d.x16, d.o16, d.d16});
    if (lz) *only = true;
    return static_cast<uint16_t *>(dev(w));
}

// the kinds whose kernels can write their rounded output's words alone (a forward's output that goes to the stash:
// the products read it as words, the backward from the stash): GELU, LayerNorm, residual + LayerNorm (out) and the
// tensor-core attention forwards; and the GELU backward (words_for)
bool floats_optional(const Deferred &d) {
    return d.kind == D_GELU_FWD || d.kind == D_LN_FWD || d.kind == D_RLN_FWD || (d.kind == D_ATT_FWD && d.tc) ||
           d.kind == D_GELU_BWD;
}

// whether mirror e is a lazy one (floats not written) whose words are in word buffer k
static bool lazy_in_ring(const cu_ctx *x, const zt_mirror16_entry &e, int k) {
    return e.lazy && x->ring[k] &&
           zt_mirror16_overlap(e.src, e.n * sizeof(uint16_t), reinterpret_cast<uintptr_t>(x->ring[k]),
                               x->ring_cap[k] * sizeof(uint16_t));
}
// whether word buffer k holds the words of a lazy mirror
static bool ring_lazy(const cu_ctx *x, int k) {
    for (int i = 0; i < x->mir.n; i++)
        if (lazy_in_ring(x, x->mir.e[i], k)) return true;
    return false;
}
// whether word buffer k holds the device address p (a kept product's operand words)
static bool ring_holds(cu_ctx *x, int k, const void *p) {
    if (!p || !x->ring[k]) return false;
    const uintptr_t a = reinterpret_cast<uintptr_t>(dev(x->ring[k])), q = reinterpret_cast<uintptr_t>(p);
    return q >= a && q < a + x->ring_cap[k] * sizeof(uint16_t);
}

// the lazy mirrors whose words are in the word buffers, settled (one launch)
void settle_rings(cu_ctx *x) {
    for (int i = 0; i < x->mir.n; i++)
        for (int k = 0; k < kRing; k++)
            if (lazy_in_ring(x, x->mir.e[i], k)) x->mir.e[i].lazy = 2;
    settle_marked(x);
}

// a word buffer for the n floats at f (recorded as their mirror; lazy: f not written): the next in turn that holds no
// lazy mirror's words (replacing those would write their floats first), or the next in turn when all do, never one
// that holds an address of avoid (device addresses: the words the writer reads). Four (kRing): in a backward two
// outputs given as words alone wait for their floats to be overwritten (the GELU backward's until the next layer's fc
// projection backward, the qkv product's dinp until the next layer's) while the others take turns. They grow to the
// largest output they serve and count against the memory kept for the CUDA context (docs/gpu-status.md)
uint16_t *ring_words(zt_backend *be, const float *f, size_t n, int lazy, Ptrs avoid) {
    cu_ctx *x = ctx_of(be);
    int k = -1;
    for (int pass = 0; pass < 2 && k < 0; pass++)
        for (int i = 0; i < kRing && k < 0; i++) {
            const int j = (x->ring_next + i) % kRing;
            bool held = false;
            for (const void *p : avoid) held = held || ring_holds(x, j, p);
            if (!held && (pass || !ring_lazy(x, j))) k = j;
        }
    ZT_ASSERT(k >= 0);
    x->ring_next = (k + 1) % kRing;
    drop(x, {{x->ring[k], x->ring_cap[k] * sizeof(uint16_t)}}); // its old words are replaced
    if (n > x->ring_cap[k]) { // grown to the largest need (the first step), then kept
        b_free(be, x->ring[k]);
        x->ring[k] = b_alloc(be, n * sizeof(uint16_t));
        x->ring_cap[k] = n;
    }
    mirror_add(x, f, x->ring[k], n, lazy);
    return static_cast<uint16_t *>(x->ring[k]);
}

// the words pack16_ahead reserved for the n floats at p (inside one of its ranges), or nullptr. Found, they are
// recorded as p's mirror at once, for the op that is to write both (kept or launched now): a slot that writes
// either range later drops it; a slot that keeps no mirrors drops all, as it launches the kept op
uint16_t *stash_words(cu_ctx *x, const void *p, size_t n) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    for (int i = 0; i < x->ntg; i++) {
        const Target &t = x->tg[i];
        const uintptr_t b = reinterpret_cast<uintptr_t>(t.x);
        if (!n || a < b || (a - b) % sizeof(float) != 0 || (a - b) / sizeof(float) + n > t.n) continue;
        uint16_t *w = t.w + (a - b) / sizeof(float);
        drop(x, {{w, n * sizeof(uint16_t)}});
        mirror_add(x, static_cast<const float *>(p), w, n, 0);
        return w;
    }
    return nullptr;
}

// ------------------------------------------------------------------------------------------ memory

void *b_alloc(zt_backend *be, size_t bytes) {
    graph_forbid(ctx_of(be), "alloc");
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
    graph_forbid(ctx_of(be), "free");
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
    graph_forbid(ctx_of(be), "to_device");
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
    graph_forbid(ctx_of(be), "to_host");
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
    const void *tr[3] = {dst, src, reinterpret_cast<const void *>(bytes)};
    zt_trace_bytes(tr, sizeof tr);
#ifdef ZT_HOSTEXEC
    (void)be;
    void *d = dev(dst);
    const void *s = dev(src);
    hx::run_or_record([d, s, bytes]() { memmove(d, s, bytes); });
#else
    ZT_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, ctx_of(be)->stream));
#endif
}

// names what it writes: the mirrors it does not touch stay (the gradient accumulator zeroed as a backward begins
// leaves the forward's lazy mirrors in the stash to be overwritten, not written)
void b_zero(zt_backend *be, void *dst, size_t bytes) {
    MirrorKeep keep(be, {{dst, bytes}});
    flush(be);
    if (!bytes) return;
    const void *tr[2] = {dst, reinterpret_cast<const void *>(bytes)};
    zt_trace_bytes(tr, sizeof tr);
#ifdef ZT_HOSTEXEC
    (void)be;
    void *d = dev(dst);
    hx::run_or_record([d, bytes]() { memset(d, 0, bytes); });
#else
    ZT_CUDA(cudaMemsetAsync(dst, 0, bytes, ctx_of(be)->stream));
#endif
}

void b_sync(zt_backend *be) {
    graph_forbid(ctx_of(be), "sync");
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


} // namespace cub
} // namespace ZT_CU_NS
