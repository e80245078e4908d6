// cuda_backend_internal.h — what the CUDA backend's host side shares between its files: cuda_backend_core.cu
// (memory, the kept op and its fused round_to, the mirrors), cuda_backend_ops.cu (the backend slots that launch
// kernels) and cuda_backend.cu (the slot table and lifecycle). Included by those three only; everything is in
// namespace ZT_CU_NS::cub.
#pragma once

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

namespace ZT_CU_NS {
namespace cub {

// an op kept for the round_to that may follow it: kind, arguments (device memory, translated), and the
// output range (the caller's address and length) a fused round_to must name
enum DKind {
    D_NONE, D_GELU_FWD, D_GELU_BWD, D_ADD, D_EMBED_FWD, D_XENT, D_LN_FWD, D_LN_BWD, D_ATT_FWD, D_ATT_BWD,
    D_RMS_FWD, D_RMS_BWD, D_SWIGLU_FWD, D_SWIGLU_BWD, D_RLN_FWD,
    D_ROUND,   // a round_to no op before it could take: kept for the GELU / add that reads its buffer next (in_round)
    D_PRODUCT  // a product (with mirrors): a linear forward, or a linear backward's dinp (tb); its round_to taken
               // (in_round), kept for the reader of its words
};
struct Deferred {
    DKind kind;
    float *o0, *o1, *o2, *o3;
    const float *i0, *i1, *i2, *i3, *i4;
    const int32_t *tok;
    void *scratch;
    unsigned *tickets; // D_LN_BWD, D_RMS_BWD: the backend's tickets (cuda_ops.h kCuTickets)
    int B, T, C, NH, NKV, V, Vp; // D_PRODUCT: c(M, N) = a(M, K) @ b(K, N) (+ bias): M, K, N as B, C, V
    int tb;                      // D_PRODUCT: b stored (N, K) (the linear backward's dinp = dout @ w^T)
    size_t n;
    float f;      // D_XENT: dscale; D_LN_FWD, D_RLN_FWD, D_RMS_FWD: eps
    const float *fp; // D_XENT: the scale read in dscale's place (device), else null
    int res_prec; // D_RLN_FWD: the residual's rounding (its own argument, not round_to's)
    const void *res; // D_RLN_FWD: res (the caller's address)
    int tc;       // D_ATT_FWD, D_ATT_BWD: the 2-byte type of the tensor-core kernels (0: the fp32 kernels)
    int exact;    // D_GELU_FWD, D_GELU_BWD: the encoders' erf GELU (gelu_erf_*)
    int in_round; // D_GELU_*, D_ADD, D_RLN_FWD, D_LN_BWD, D_ATT_*: the precision its input (GELU fwd inp, bwd dout;
                  // the add's second term; LayerNorm backward's dout; attention's qkv, its backward's dout) is rounded
                  // to first; D_ROUND's precision
    const void *out;
    size_t out_n;
    const uint16_t *x16; // D_GELU_*, D_LN_BWD: inp read as these words (device) instead of its floats, else null;
                         // D_ATT_FWD, D_ATT_BWD: qkv's; D_PRODUCT: a's (a mirror's, or packed), multiplied instead of
                         // packing a
    const uint16_t *d16; // D_ATT_BWD: dout's words (a product's alone), read instead of its floats, else null
    const uint16_t *o16; // D_ATT_BWD: out's words, read instead of its floats, else null; D_PRODUCT: b's; D_RLN_FWD:
                         // b's (x16: a's); D_GELU_BWD, D_LN_BWD: dout's (a product's words alone)
    uint16_t *w16; // words a pack16_ahead reserved (model address): D_ROUND's buffer's, D_GELU_FWD's and D_ATT_FWD's
                   // rounded input's (in_round), D_RLN_FWD's res, D_PRODUCT's rounded output; written beside them
                   // (stash_words), else nullptr
};

// pack16_ahead's advice: the n floats at x will be packed to w (model addresses)
struct Target {
    const float *x;
    size_t n;
    uint16_t *w;
};
constexpr int kTargets = 16;
constexpr int kRing = 4; // word buffers (ring_words)

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
    bool dense;        // the segments tile [0, total) of the shard in order (offset == start): no gaps
};
constexpr int kAdamwTables = 4;

// a sumsq_chunks kept for the clip_scale of its sums that may follow (one rank: nothing gathers them between), which
// its launch then does (b_clip_scale); any other call launches it as it was (flush). Model addresses
struct KeptSumsq {
    bool on;
    double *out;
    const float *x;
    size_t n, chunk;
};

// an adamw_multi kept for the pack16 of its parameters that may follow (b_adamw_multi: a bf16 / fp16 run, a dense
// table): that pack16 is done by the update's own launch, which writes the 2-byte words as it writes each
// parameter (b_pack16); any other call launches it as it was (flush). Model addresses, translated at the launch
struct KeptAdamw {
    bool on;
    float *param, *m, *v;
    const float *grad, *hyper;
    const void *table; // device memory (the cached AdamwTable's)
    int ntable;
    size_t total;
    float beta1, beta2, eps;
};

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
    KeptAdamw adamw_kept;   // adamw_kept.on: an update kept for its parameters' pack16
    KeptSumsq sumsq_kept;   // sumsq_kept.on: chunk sums kept for the clip_scale of exactly them
    long adamw_words;       // pack16 calls done by the update that wrote their floats
    zt_mirror16 mir;        // float32 buffers equal to 2-byte words (file comment)
    int mir_on;             // ZT_CUDA_MIRROR (default 1), in bf16 / fp16 runs
    int mir_keep;           // inside a slot that names what it writes: flush() keeps the mirrors
    void *ring[kRing];      // device memory: the 2-byte words producers write beside their rounded output (words_for)
    size_t ring_cap[kRing]; // words each holds
    int ring_next;
    Target tg[kTargets];    // pack16_ahead's, until the next pack16
    int ntg;
    long packs_skipped;     // pack16 calls that found their words written already
    long lazy_made, lazy_settled; // unpack16_lazy calls, and the unpacks of them that ran (settle)
    void *graph;            // cuda_backend_graph.cu's GraphState, made at the first graph call
    uint64_t trace;         // the launch trace while one is under way (zt_trace_sink points here)
    int capturing;          // a step graph's capture is under way
};

inline cu_ctx *ctx_of(zt_backend *be) { return static_cast<cu_ctx *>(be->ctx); }

// device address -> the memory kernels and copies use
#ifdef ZT_HOSTEXEC
// device address -> the memory kernels and copies use
template <typename T> T *dev(T *p) { return static_cast<T *>(zt_devsim_real(p, "cudasim")); }
template <typename T> const T *dev(const T *p) { return static_cast<const T *>(zt_devsim_real(p, "cudasim")); }
#else
template <typename T> T *dev(T *p) { return p; }
#endif

using Ranges = std::initializer_list<std::pair<const void *, size_t>>; // (address, bytes)
using Ptrs = std::initializer_list<const void *>;
void need(cu_ctx *x, Ranges reads);
void drop(cu_ctx *x, Ranges writes);

// For the length of a slot that keeps the mirrors: the lazy unpacks of what it reads as float32 (reads) run first,
// then the mirrors its outputs (writes) overlap go (drop)
struct MirrorKeep {
    cu_ctx *x;
    MirrorKeep(zt_backend *be, Ranges writes, Ranges reads = {}) : x(ctx_of(be)) {
        need(x, reads);
        drop(x, writes);
        x->mir_keep = 1;
    }
    ~MirrorKeep() { x->mir_keep = 0; }
};
// ---- cuda_backend_core.cu
void launch_deferred(cu_ctx *x, const Deferred &d, int prec, uint16_t *out16 = nullptr, bool words_only = false,
                     bool res_alone = false);
bool floats_optional(const Deferred &d);
void flush(zt_backend *be);
void defer(zt_backend *be, const Deferred &d);
void take_round(zt_backend *be, Deferred *d, const void *in, size_t n, bool ok);
const uint16_t *take_product_words(zt_backend *be, const void *in, size_t n);
const uint16_t *product_words_now(zt_backend *be);
void resolve_product(cu_ctx *x);
cudaStream_t stream_of(zt_backend *be);
const uint16_t *mirror_words(zt_backend *be, const float *p, size_t n);
const uint16_t *find_words(zt_backend *be, const float *p, size_t n);
bool kept_round_of(zt_backend *be, const void *p, size_t n);
uint16_t *words_for(zt_backend *be, const Deferred &d, bool *only = nullptr);
uint16_t *stash_words(cu_ctx *x, const void *p, size_t n);
uint16_t *ring_words(zt_backend *be, const float *f, size_t n, int lazy, Ptrs avoid = {});
void mirror_add(cu_ctx *x, const float *dst, const void *src, size_t n, int lazy);
void settle_all(cu_ctx *x);
void settle_rings(cu_ctx *x);
void *b_alloc(zt_backend *be, size_t bytes);
void b_free(zt_backend *be, void *p);
void *b_host_alloc(zt_backend *be, size_t bytes);
void b_host_free(zt_backend *be, void *p);
void b_to_device(zt_backend *be, void *dst, const void *src, size_t bytes);
void b_to_host(zt_backend *be, void *dst, const void *src, size_t bytes);
void b_copy(zt_backend *be, void *dst, const void *src, size_t bytes);
void b_zero(zt_backend *be, void *dst, size_t bytes);
void b_sync(zt_backend *be);
void *scratch(zt_backend *be, size_t bytes);
unsigned *tickets(zt_backend *be);

// ---- cuda_backend_ops.cu: the slots that launch kernels
void b_matmul(zt_backend *be, float *c, const float *a, const float *b, int M, int N, int K, int ta, int tb,
              float alpha, float beta);
void b_matmul_ld(zt_backend *be, float *c, const float *a, const float *b, int M, int N, int K, int ta, int tb,
                 float alpha, float beta, int lda, int ldb, int ldc);
void b_linear_fwd(zt_backend *be, float *out, const float *inp, const float *w, const float *bias, int N, int C,
                  int OC);
void b_linear_bwd(zt_backend *be, float *dinp, float *dw, float *dbias, const float *dout, const float *inp,
                  const float *w, int N, int C, int OC, int accumulate_dinp);
void b_layernorm_fwd(zt_backend *be, float *out, float *mean, float *rstd, const float *inp, const float *w,
                     const float *b, int N, int C, float eps);
void b_residual_layernorm_fwd(zt_backend *be, float *res, float *out, float *mean, float *rstd, const float *a,
                              const float *b, const float *w, const float *bias, int N, int C, int prec, float eps);
void b_layernorm_bwd(zt_backend *be, float *dinp, float *dw, float *db, const float *dout, const float *inp,
                     const float *w, const float *mean, const float *rstd, int N, int C);
void b_attention_fwd(zt_backend *be, float *out, float *att, const float *qkv, int B, int T, int C, int NH, int NKV);
void b_attention_bwd(zt_backend *be, float *dqkv, float *datt, const float *dout, const float *qkv, const float *att,
                     int B, int T, int C, int NH, int NKV);
void b_attention_bidir_fwd(zt_backend *be, float *out, float *att, const float *qkv, const int32_t *kvalid, int B,
                           int T, int C, int NH, int NKV);
void b_attention_bidir_bwd(zt_backend *be, float *dqkv, float *datt, const float *dout, const float *qkv,
                           const float *att, const int32_t *kvalid, int B, int T, int C, int NH, int NKV);
void b_attention_fused_fwd(zt_backend *be, float *out, float *stats, const float *qkv, int B, int T, int C, int NH,
                           int NKV);
void b_attention_fused_bwd(zt_backend *be, float *dqkv, float *scratch, const float *dout, const float *qkv, const float *out,
                           const float *stats, int B, int T, int C, int NH, int NKV);
void b_attention_decode(zt_backend *be, float *out, float *kcache, float *vcache, const float *qkv, int pos, int maxT,
                        int C, int NH, int NKV);
void b_rmsnorm_fwd(zt_backend *be, float *out, float *rstd, const float *inp, const float *w, int N, int C, float eps);
void b_rmsnorm_bwd(zt_backend *be, float *dinp, float *dw, const float *dout, const float *inp, const float *w,
                   const float *rstd, int N, int C);
void b_rope(zt_backend *be, float *qkv, const float *cs, int B, int T, int pos0, int NH, int NKV, int hs, int inverse);
void b_swiglu_fwd(zt_backend *be, float *out, const float *inp, int N, int I);
void b_swiglu_bwd(zt_backend *be, float *dinp, const float *inp, const float *dout, int N, int I);
void b_gemv(zt_backend *be, float *y, const float *x, const float *w, const float *bias, int C, int OC, int w_t);
void b_gelu_fwd(zt_backend *be, float *out, const float *inp, size_t n);
void b_gelu_bwd(zt_backend *be, float *dinp, const float *inp, const float *dout, size_t n);
void b_gelu_erf_fwd(zt_backend *be, float *out, const float *inp, size_t n);
void b_gelu_erf_bwd(zt_backend *be, float *dinp, const float *inp, const float *dout, size_t n);
void b_bias_add(zt_backend *be, float *out, const float *bias, int N, int OC);
void b_bias_grad(zt_backend *be, float *dbias, const float *dout, int N, int OC);
void b_argmax_rows(zt_backend *be, int32_t *idx, const float *x, int N, int V, int ld);
void b_add(zt_backend *be, float *out, const float *a, const float *b, size_t n);
void b_embed_fwd(zt_backend *be, float *out, const int32_t *tokens, const float *wte, const float *wpe, int B, int T,
                 int C);
void b_embed_bwd(zt_backend *be, float *dwte, float *dwpe, const float *dout, const int32_t *tokens, int B, int T,
                 int C);
void b_softmax_xent(zt_backend *be, float *losses, float *logits, const int32_t *targets, int N, int V, int Vp,
                    float dscale, const float *dscale_at);
void b_matmul16(zt_backend *be, void *c, int c16, const void *a, int a16, const float *b, int M, int N, int K, int ta,
                int tb, int prec, float beta);
void b_softmax_xent16(zt_backend *be, float *losses, void *logits, const int32_t *targets, int N, int V, int Vp,
                      float dscale, const float *dscale_at, int prec);
void b_adamw(zt_backend *be, float *param, const float *grad, float *m, float *v, size_t n, float lr, float beta1,
             float beta2, float eps, float weight_decay, float bias_corr1, float bias_corr2, float grad_scale);
void free_adamw_tables(zt_backend *be);
void launch_kept_adamw(cu_ctx *x, uint16_t *words, size_t nwords);
void launch_kept_sumsq(cu_ctx *x);
const AdamwTable &adamw_table(zt_backend *be, const zt_adamw_seg *segs, int nseg);
void b_adamw_multi(zt_backend *be, float *param, const float *grad, float *m, float *v, const zt_adamw_seg *segs,
                   int nseg, float beta1, float beta2, float eps, const float *hyper);
void b_accumulate(zt_backend *be, float *acc, const float *x, size_t n);
void b_sumsq_chunks(zt_backend *be, double *out, const float *x, size_t n, size_t chunk);
uint64_t b_graph(zt_backend *be, int op);
void b_host_call(zt_backend *be, void (*fn)(void *), const void *arg, size_t argbytes);
void graph_free(cu_ctx *x);
// the memory and host-transfer calls a step graph's capture cannot hold (cuda_backend_graph.cu) end the program
inline void graph_forbid(const cu_ctx *x, const char *what) {
    if (x->capturing)
        zt_panic(__FILE__, __LINE__, "%s during a step graph's capture (a step graph holds no host transfer, wait or "
                 "allocation)", what);
}
void b_clip_scale(zt_backend *be, float *hyper, double *norm, const double *sums, size_t n, double clip,
                  int skip_nonfinite);
void b_set_precision(zt_backend *be, int prec);
void b_round_to(zt_backend *be, float *x, size_t n, int prec);
int b_pack16_ahead(zt_backend *be, void *words, const float *x, size_t n);
void b_pack16(zt_backend *be, void *dst, const float *x, size_t n, int prec);
void b_unpack16(zt_backend *be, float *dst, const void *src, size_t n, int prec);
int b_unpack16_lazy(zt_backend *be, float *dst, const void *src, size_t n, int prec);
void b_dropout(zt_backend *be, float *out, const float *in, size_t n, float p, uint64_t seed, const uint64_t *micro);
void b_dequant(zt_backend *be, float *out, const void *blob, int fmt, size_t rows, size_t cols);

} // namespace cub
} // namespace ZT_CU_NS
