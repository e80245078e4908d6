/* backend.h — the compute backend interface (ggml-style `_i` struct of function pointers).
 *
 * Every tensor passed to an op is backend memory (`mem` says whether that is host or device
 * memory): code outside a backend never dereferences it, whatever its kind; data crosses with
 * to_device / to_host. Ops are issued in order on one stream and may run asynchronously until
 * a slot that says it syncs (`sync`, `to_host`). Backends are made and destroyed only by the
 * factory (core/dist/backend_factory.h); the devsim backend (src/devsim/) proves the discipline on
 * a machine without a GPU. The cpu backend (src/cpu/) is the reference implementation: deterministic and
 * independent of the thread count (every reduction is split over output elements, never over
 * the summed dimension). Shapes are given in comments as (rows, cols), row-major.
 *
 * Weight layout follows Hugging Face GPT-2 (Conv1D): a linear layer's weight is (in, out),
 * so out = inp @ W + b.
 */
#ifndef ZT_BACKEND_H
#define ZT_BACKEND_H

#include <stddef.h>
#include <stdlib.h>
#include <stdint.h>

typedef struct zt_backend zt_backend;

/* working precision (config `precision`): the values a parameter, activation or gradient buffer
   stores. Buffers are float32 on every backend today; under bf16/fp16 each stored value is rounded
   to the precision (round_to), so the arithmetic is that of bf16/fp16 storage with fp32 math. */
typedef enum zt_prec { ZT_PREC_FP32 = 0, ZT_PREC_BF16 = 1, ZT_PREC_FP16 = 2 } zt_prec;

/* the kind of memory a backend hands out, and a communicator accepts */
typedef enum zt_mem_kind { ZT_MEM_HOST, ZT_MEM_DEVICE } zt_mem_kind;

/* graph's ops */
enum { ZT_GRAPH_TRACE, ZT_GRAPH_CAPTURE, ZT_GRAPH_END, ZT_GRAPH_LAUNCH, ZT_GRAPH_STATE };

/* adamw_multi's and clip_scale's step scalars (backend memory, ZT_HYPER_N floats) */
enum { ZT_HYPER_LR, ZT_HYPER_BC1, ZT_HYPER_BC2, ZT_HYPER_GRAD_SCALE, ZT_HYPER_LOSS_SCALE, ZT_HYPER_N };

/* one segment of adamw_multi: elements [offset, offset + n) of a flat shard, updated with weight_decay */
typedef struct zt_adamw_seg {
    size_t offset;
    size_t n;
    float weight_decay;
} zt_adamw_seg;

/* whether the non-empty segments tile [0, their total) in order (no gap before or between them): then an update of
   them covers every element of that range (a backend may write the range's 2-byte words in the same pass) */
static inline int zt_adamw_segs_dense(const zt_adamw_seg *segs, int nseg) {
    size_t start = 0;
    for (int i = 0; i < nseg; i++) {
        if (!segs[i].n) continue;
        if (segs[i].offset != start) return 0;
        start += segs[i].n;
    }
    return 1;
}

typedef struct zt_backend_i {
    const char *name;
    zt_mem_kind mem;
    /* lifecycle (the factory calls these) */
    void (*destroy)(zt_backend *be);
    /* one line: "cpu: blis 0.9.0 (zen kernels), 2 threads" */
    void (*describe)(zt_backend *be, char *buf, size_t n);
    /* memory */
    void *(*alloc)(zt_backend *be, size_t bytes);        /* zero-filled */
    void (*free)(zt_backend *be, void *p);
    /* optional: host memory the backend copies to and from fastest (page-locked on a GPU: zero.offload's state),
       zero-filled; NULL: plain malloc (core/dist/zero_offload.c) */
    void *(*host_alloc)(zt_backend *be, size_t bytes);
    void (*host_free)(zt_backend *be, void *p);
    /* host -> backend memory; the host buffer may be reused as soon as it returns */
    void (*to_device)(zt_backend *be, void *dst, const void *host_src, size_t bytes);
    /* backend -> host memory; syncs: waits for the work issued before it, the data is there on return */
    void (*to_host)(zt_backend *be, void *host_dst, const void *src, size_t bytes);
    void (*copy)(zt_backend *be, void *dst, const void *src, size_t bytes);
    void (*zero)(zt_backend *be, void *dst, size_t bytes);
    /* waits until every op issued so far is done */
    void (*sync)(zt_backend *be);

    /* c(M, N) = alpha * op(a) @ op(b) + beta * c, row-major; op = transpose when ta / tb */
    void (*matmul)(zt_backend *be, float *c, const float *a, const float *b, int M, int N, int K,
                   int ta, int tb, float alpha, float beta);
    /* matmul on sub-matrices: a, b and c are rows of larger row-major arrays, lda, ldb, ldc floats apart (the
       stored op(a) is (M, K), or (K, M) when ta; likewise b): a column slice of a wider matrix, e.g. a LoRA adapter
       on the key columns of the fused q|k|v projection. The same arithmetic as matmul on packed copies. Optional
       (NULL: LoRA runs only on whole linears, GPT-2's sites) */
    void (*matmul_ld)(zt_backend *be, float *c, const float *a, const float *b, int M, int N, int K, int ta, int tb,
                      float alpha, float beta, int lda, int ldb, int ldc);
    /* out(N, OC) = inp(N, C) @ w(C, OC) + bias(OC); bias may be NULL */
    void (*linear_fwd)(zt_backend *be, float *out, const float *inp, const float *w,
                       const float *bias, int N, int C, int OC);
    /* dinp(N, C) = dout @ w^T (overwritten, or added when accumulate_dinp);
       dw(C, OC) = inp^T @ dout; dbias(OC) = colsum(dout) (both overwritten; dbias may be NULL) */
    void (*linear_bwd)(zt_backend *be, float *dinp, float *dw, float *dbias, const float *dout,
                       const float *inp, const float *w, int N, int C, int OC, int accumulate_dinp);

    /* out(N, C) = LN(inp) * w + b, rstd = 1 / sqrt(var + eps) (model.norm_eps: GPT-2 and RoBERTa 1e-5, BERT 1e-12);
       mean(N), rstd(N) saved for backward */
    void (*layernorm_fwd)(zt_backend *be, float *out, float *mean, float *rstd, const float *inp,
                          const float *w, const float *b, int N, int C, float eps);
    /* dinp(N, C) += ..., dw(C), db(C) overwritten */
    void (*layernorm_bwd)(zt_backend *be, float *dinp, float *dw, float *db, const float *dout,
                          const float *inp, const float *w, const float *mean, const float *rstd,
                          int N, int C);

    /* The Llama family's ops, optional as a set: NULL where a backend lacks them; such a backend runs GPT-2 models
       only, and its attention slots may take NKV == NH alone; a backend with them takes NKV < NH too.
       RMSNorm: out(N, C) = inp * rstd * w, rstd(N) = 1 / sqrt(mean over C of inp^2 + eps), saved for backward */
    void (*rmsnorm_fwd)(zt_backend *be, float *out, float *rstd, const float *inp, const float *w, int N, int C,
                        float eps);
    /* dinp(N, C) += ..., dw(C) overwritten */
    void (*rmsnorm_bwd)(zt_backend *be, float *dinp, float *dw, const float *dout, const float *inp, const float *w,
                        const float *rstd, int N, int C);
    /* rotary position embedding, in place, on the NH query and NKV key heads of qkv(B, T, (NH + 2 NKV) hs) (the
       value heads untouched): element i < hs/2 of a head pairs with i + hs/2 (transformers' rotate_half):
       (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin) with the angle of row t's position pos0 + t and frequency i;
       cs(maxT, hs/2, 2) holds (cos, sin) per (position, i), made on the host. inverse = 1 rotates by minus the
       angle: rope's backward, applied to dqkv */
    void (*rope)(zt_backend *be, float *qkv, const float *cs, int B, int T, int pos0, int NH, int NKV, int hs,
                 int inverse);
    /* SwiGLU: out(N, I) = silu(inp[:, :I]) * inp[:, I:] for inp(N, 2I) = [gate | up], silu(g) = g / (1 + exp(-g)) */
    void (*swiglu_fwd)(zt_backend *be, float *out, const float *inp, int N, int I);
    /* dinp(N, 2I) overwritten: [dgate | dup] */
    void (*swiglu_bwd)(zt_backend *be, float *dinp, const float *inp, const float *dout, int N, int I);

    /* causal self-attention with NH query heads and NKV key/value heads (grouped-query attention; NH % NKV == 0,
       NKV == NH is multi-head attention, NKV == 1 multi-query). hs = C / NH; a qkv row is (NH + 2 NKV) hs wide:
       the NH query heads, then the NKV key heads, then the NKV value heads; query head h attends with key/value
       head h / (NH / NKV). qkv(B, T, (NH + 2 NKV) hs) -> out(B, T, C); att(B, NH, T, T) keeps the softmax */
    void (*attention_fwd)(zt_backend *be, float *out, float *att, const float *qkv,
                          int B, int T, int C, int NH, int NKV);
    /* dqkv (qkv's shape) overwritten; a key/value head's gradient sums over its NH / NKV query heads;
       datt(B, NH, T, T) is scratch */
    void (*attention_bwd)(zt_backend *be, float *dqkv, float *datt, const float *dout,
                          const float *qkv, const float *att, int B, int T, int C, int NH, int NKV);

    /* incremental decoding, one token: appends k, v of qkv((NH + 2 NKV) hs) at row pos of kcache, vcache
       (maxT, NKV hs) (only the key/value heads are cached) and writes out(C) = causal attention of q over
       rows 0..pos (the same arithmetic as row pos of attention_fwd). Optional: NULL when a backend lacks it. */
    void (*attention_decode)(zt_backend *be, float *out, float *kcache, float *vcache, const float *qkv,
                             int pos, int maxT, int C, int NH, int NKV);

    /* one-row products for decoding (optional: NULL = the caller uses linear_fwd / matmul):
       y(OC) = x(C) @ w(C, OC) + bias(OC) (bias may be NULL), or when w_t, y(OC) = w(OC, C) @ x(C)
       (the tied LM head). Each y[j] sums over C in a fixed order: thread-count invariant. */
    void (*gemv)(zt_backend *be, float *y, const float *x, const float *w, const float *bias, int C, int OC,
                 int w_t);

    /* GELU, tanh approximation, elementwise over n */
    void (*gelu_fwd)(zt_backend *be, float *out, const float *inp, size_t n);
    /* dinp = gelu'(inp) * dout */
    void (*gelu_bwd)(zt_backend *be, float *dinp, const float *inp, const float *dout, size_t n);

    /* out = a + b, elementwise */
    void (*add)(zt_backend *be, float *out, const float *a, const float *b, size_t n);
    /* residual add fused with the LayerNorm of its result (optional: NULL = the caller calls add, round_to and
       layernorm_fwd): res(N, C) = a + b rounded to `prec` (exactly add followed by round_to(res, N C, prec);
       ZT_PREC_FP32 leaves it unrounded), then out, mean, rstd = layernorm_fwd of res with eps. The bits equal that
       sequence; out is not rounded (a round_to of out may follow, as after layernorm_fwd) */
    void (*residual_layernorm_fwd)(zt_backend *be, float *res, float *out, float *mean, float *rstd, const float *a,
                                   const float *b, const float *w, const float *bias, int N, int C, int prec,
                                   float eps);

    /* out(B, T, C) = wte[tok] + wpe[t] (wpe NULL: wte[tok], rotary positions); tokens (B, T) int32 on device */
    void (*embed_fwd)(zt_backend *be, float *out, const int32_t *tokens, const float *wte,
                      const float *wpe, int B, int T, int C);
    /* dwte(Vp, C) += scatter of dout by token (accumulates: the LM head wrote it first);
       dwpe(maxT, C) rows [0, T) overwritten with the sum over B (dwpe NULL: none) */
    void (*embed_bwd)(zt_backend *be, float *dwte, float *dwpe, const float *dout,
                      const int32_t *tokens, int B, int T, int C);

    /* Fused softmax + cross-entropy over the first V of Vp columns (padded columns never
       enter the loss). logits(N, Vp) is overwritten with dlogits = (softmax - onehot) * dscale
       (padded columns get 0). losses(N) receives the per-position loss.
       A target < 0 marks an ignored position (a loss mask: prompt or padding): its loss is 0 and
       its dlogits row is all 0; its logits are never read.
       If dscale == 0 only the losses are computed and logits are left as they were.
       dscale_at: NULL, or backend memory holding the scale that replaces a non-zero dscale (then only a flag): a
       step's per-micro-batch scale, uploaded before its work, so the slot calls repeat while it changes (a loss
       mask's count changes it every step; core/optim/step_graph.h). */
    void (*softmax_xent)(zt_backend *be, float *losses, float *logits, const int32_t *targets,
                         int N, int V, int Vp, float dscale, const float *dscale_at);

    /* AdamW on n elements (one tensor's part of a shard).
       param, m, v updated in place; grad read with scale grad_scale (e.g. clip factor). */
    void (*adamw)(zt_backend *be, float *param, const float *grad, float *m, float *v, size_t n,
                  float lr, float beta1, float beta2, float eps, float weight_decay,
                  float bias_corr1, float bias_corr2, float grad_scale);
    /* AdamW over nseg segments of one flat shard in one call. param, grad, m, v are the shard's base pointers
       (backend memory); segs (nseg entries, host memory, nseg 0: nothing to do) names each segment's elements
       [offset, offset + n) within the shard and its weight_decay; segments do not overlap; an n of 0 is allowed.
       hyper (backend memory, ZT_HYPER_N floats) holds the step's learning rate, bias corrections and gradient
       scale: the update reads them when it runs, so a step's scalars need no host wait (a grad scale written by
       clip_scale) and its launches are the same every step. A NaN gradient scale skips the update: no element
       changes. Every element is exactly zt_adamw_elem (op_math.h) with its segment's weight_decay, so the bits
       equal one adamw call per segment with the same values. The optimizer (core/optim/optim.c) passes the same
       table every step: a backend may cache what it derives from it (the CUDA backend: its device copy) */
    void (*adamw_multi)(zt_backend *be, float *param, const float *grad, float *m, float *v,
                        const zt_adamw_seg *segs, int nseg, float beta1, float beta2, float eps, const float *hyper);

    /* acc += x (elementwise), the one addition the ordered reduction makes */
    void (*accumulate)(zt_backend *be, float *acc, const float *x, size_t n);
    /* out[c] = sum of x[c*chunk .. (c+1)*chunk)^2 in double, for c < ceil(n/chunk), summed
       sequentially within a chunk: the norm does not depend on threads or shard bounds.
       out is backend memory (the caller copies the chunk sums to the host when it needs them) */
    void (*sumsq_chunks)(zt_backend *be, double *out, const float *x, size_t n, size_t chunk);
    /* the step's gradient scale from n chunk sums (backend memory, sumsq_chunks' of every rank in flat order):
       sum them in order (double), *norm (backend memory) = sqrt(sum) / hyper[ZT_HYPER_LOSS_SCALE] and
       hyper[ZT_HYPER_GRAD_SCALE] = zt_grad_scale (op_math.h): the clip factor over the loss scale, NaN where
       skip_nonfinite (fp16's loss scaler) and the norm is not finite. No host wait: the update reads it */
    void (*clip_scale)(zt_backend *be, float *hyper, double *norm, const double *sums, size_t n, double clip,
                       int skip_nonfinite);
    /* x[i] = the value a `prec` buffer stores for x[i]: round to nearest even to bf16 or fp16
       (fp16: |x| >= 65520 becomes Inf, its overflow); ZT_PREC_FP32 leaves x alone. Elementwise:
       the same bits on every backend (op_math.h's zt_round_bf16 / zt_round_fp16) */
    void (*round_to)(zt_backend *be, float *x, size_t n, int prec);
    /* dst (n uint16_t, backend memory) = x as bf16 / fp16 bits (prec), round to nearest even as round_to: exact
       for values of that precision, which every activation a bf16/fp16 run stores is; unpack16 decodes them
       exactly. The 2-byte storage of the activations kept for backward (core/model/model.c, train.act_storage) */
    void (*pack16)(zt_backend *be, void *dst, const float *x, size_t n, int prec);
    void (*unpack16)(zt_backend *be, float *dst, const void *src, size_t n, int prec);
    /* optional (NULL: none), advice for a bf16 / fp16 run: the caller will pack16(words, x, n, its precision) once
       the slots it calls next have written [x, x + n) (a layer's activations into their stash, core/model/
       model_acts.c). 1: taken; the slot that stores those values rounded (an op with the round_to after it fused,
       or the round_to) also writes their words at words, and that pack16 then has nothing left to do (the CUDA
       backend: cuda/cuda_backend_ops.cu); 0: not taken. Either way the words after the pack16 are the same; the
       advice ends at the next pack16 */
    int (*pack16_ahead)(zt_backend *be, void *words, const float *x, size_t n);
    /* optional (NULL: the caller uses unpack16): unpack16, whose float32 output a backend may write later, when a
       slot reads it as float32, or never where the slots that read it take the words (the CUDA backend: the
       products, the GELU and LayerNorm backwards' inputs; cuda/cuda_backend_core.cu). Every slot sees unpack16's
       values. For buffers read mostly by such slots (a layer's activations from the stash). Returns 1; 0 where the
       backend declines (then it did nothing, and declines every call until set_precision: the caller unpacks) */
    int (*unpack16_lazy)(zt_backend *be, float *dst, const void *src, size_t n, int prec);
    /* out[i] = keep(seed, i) ? in[i] * (1 / (1 - p)) : 0 (out == in allowed); keep from a counter-based hash
       of (seed, i) (op_math.h), the same mask on every backend and thread count; p == 0 copies. micro: NULL, or
       backend memory holding a uint64 the slot reads as it runs: then the mask's seed is zt_dropout_seed(seed,
       *micro) (the model's LoRA dropout in a step: the micro-batch index uploaded with the step's inputs, so the
       slot's arguments are the same every step and a step graph can hold it) */
    void (*dropout)(zt_backend *be, float *out, const float *in, size_t n, float p, uint64_t seed,
                    const uint64_t *micro);
    /* out(rows, cols) = the decoding of a whole matrix quantised by core/lora/quant.c in format fmt
       (zt_quant_fmt; layout zt_quant_plan(fmt, rows, cols)); blob is backend memory holding the
       encoded bytes. Bit-exact zt_quant_decode on every backend. */
    void (*dequant)(zt_backend *be, float *out, const void *blob, int fmt, size_t rows, size_t cols);
    /* optional (NULL: nothing to do): the run's working precision (zt_prec). From then on the inputs of
       matmul / linear_fwd / linear_bwd hold values of that precision, and a backend may multiply them as
       2-byte operands with fp32 accumulation and fp32 outputs (the CUDA backend: tensor-core GEMMs) */
    void (*set_precision)(zt_backend *be, int prec);

    /* optional (NULL: a step always runs as its slot calls): a training step's device work recorded once and
       replayed as a CUDA graph (cuda/cuda_backend_graph.cu; core/optim/step_graph.c decides when). op (ZT_GRAPH_*):
       TRACE: from now on hash every launch the slots make (kernel, shape, arguments: cuda/zt_launch_trace.h);
       CAPTURE: the same, and record the launches instead of running them (to_host, to_device, sync, alloc and free
       end the program meanwhile: a step graph holds none); END: stop; returns the hash (the capture is kept for
       LAUNCH); LAUNCH: run the kept capture, in order with the other work; STATE (between steps): the host-side state
       that decides the launches the slots make (the kept op, the mirrors, the word buffers, the scratch) brought to
       its canonical form where nothing live depends on it, and its hash. Other ops return 0 */
    uint64_t (*graph)(zt_backend *be, int op);
    /* optional (NULL: sync, then fn(arg) at once): fn(arg) in order with the backend's work, after everything issued
       so far, as cudaLaunchHostFunc is to a stream. While a step graph is captured the call is recorded in its place
       and made again at every replay, with the argbytes bytes at arg copied when it was issued; while a trace is
       under way those bytes (which must hold no padding) are part of the trace. The communicator that reads backend
       memory directly (the devsim one, core/dist/comm_mpi.c) issues its operations this way, so that a step's
       communication is captured with its kernels. The CUDA backend on a GPU has no capture of host calls (NCCL's
       operations are captured as stream work): there a call during a capture ends the program. */
    void (*host_call)(zt_backend *be, void (*fn)(void *arg), const void *arg, size_t argbytes);
    /* optional (NULL: the backend has none): causal self-attention that keeps no (T, T) matrix, for head sizes
       C / NH that zt_attention_fused_hs_ok accepts; heads (NH, NKV) and qkv's layout as attention_fwd.
       Forward: out as attention_fwd; stats(B, NH, T, 2) receives
       each row's softmax maximum m and 1 / sum (fp32 op state: never rounded or packed). Backward: dqkv
       overwritten as attention_bwd, recomputing each probability as zt_expf(s - m) * (1 / sum) from qkv and
       stats; out is the forward's output (as stored), scratch zt_attention_fused_scratch(B, T, C, NH) floats
       (zt_attention_fused_scratch_rows where the CUDA backend runs it on tensor cores: zt_attention_fused_scratch_for).
       The values of attention_fwd / _bwd up to fp32 rounding (the cpu backend has only those). */
    void (*attention_fused_fwd)(zt_backend *be, float *out, float *stats, const float *qkv, int B, int T, int C,
                                int NH, int NKV);
    void (*attention_fused_bwd)(zt_backend *be, float *dqkv, float *scratch, const float *dout, const float *qkv,
                                const float *out, const float *stats, int B, int T, int C, int NH, int NKV);

    /* 2-byte storage of the run's precision prec (ZT_PREC_BF16 / FP16; the value set_precision was given), optional as
       a pair (NULL: the model keeps float32 logits). A 2-byte buffer holds one uint16_t word per element (the bits of
       a bf16 / fp16 value, as pack16 writes them).
       matmul16: c(M, N) = op(a) @ op(b) + beta c (alpha 1, beta 0 or 1) as matmul, where a holds 2-byte words when
       a16 (else float32), b is float32, and c receives 2-byte words rounded to nearest even when c16 (else float32;
       beta 1 only with a float32 c). The bits equal matmul on the widened operands (with that beta) followed by
       round_to (c16): the language model head's logits and its backward's products on them (beta 1: the head's
       weight gradient summed over chunks of rows, train.head_chunks) */
    void (*matmul16)(zt_backend *be, void *c, int c16, const void *a, int a16, const float *b, int M, int N, int K,
                     int ta, int tb, int prec, float beta);
    /* softmax_xent on 2-byte logits (N, Vp): the same arithmetic on the widened values; losses(N) float32; unless
       dscale == 0 the logits are overwritten with dlogits rounded to 2-byte words (softmax_xent then round_to) */
    void (*softmax_xent16)(zt_backend *be, float *losses, void *logits, const int32_t *targets, int N, int V, int Vp,
                           float dscale, const float *dscale_at, int prec);

    /* The encoder family's ops (BERT, RoBERTa: masked-LM training, core/model/model_encoder.c), each optional: NULL
       where a backend lacks it (such a backend trains decoder models only).
       Bidirectional self-attention with a key padding mask: heads (NH, NKV) and qkv's layout as attention_fwd, but
       query row t of sequence b attends to every key t' of sequence b with kvalid[b*T + t'] != 0 (kvalid (B, T)
       int32, backend memory), no causal mask; att(B, NH, T, T) keeps the probabilities (exactly 0 at masked keys); a
       sequence with no valid key gets out 0 and att 0 in its rows. Scale 1/sqrt(hs) as attention_fwd. Split over
       (b, h, t) rows as attention_fwd: thread-invariant */
    void (*attention_bidir_fwd)(zt_backend *be, float *out, float *att, const float *qkv, const int32_t *kvalid,
                                int B, int T, int C, int NH, int NKV);
    /* dqkv overwritten (as attention_bwd: a key/value head's gradient sums over its query heads in head order),
       datt(B, NH, T, T) scratch; masked keys get no gradient */
    void (*attention_bidir_bwd)(zt_backend *be, float *dqkv, float *datt, const float *dout, const float *qkv,
                                const float *att, const int32_t *kvalid, int B, int T, int C, int NH, int NKV);
    /* exact GELU (BERT's "gelu"): out = 0.5 x (1 + erf(x / sqrt 2)), erf by zt_erff (op_math.h), elementwise */
    void (*gelu_erf_fwd)(zt_backend *be, float *out, const float *inp, size_t n);
    /* dinp = gelu_erf'(inp) * dout, gelu_erf'(x) = 0.5 (1 + erf(x/sqrt2)) + x exp(-x^2/2) / sqrt(2 pi)
       (dinp == dout allowed) */
    void (*gelu_erf_bwd)(zt_backend *be, float *dinp, const float *inp, const float *dout, size_t n);
    /* out(N, OC) += bias(OC) on every row (the MLM decoder's bias on the logits, after a matmul) */
    void (*bias_add)(zt_backend *be, float *out, const float *bias, int N, int OC);
    /* dbias(OC) = column sums of dout(N, OC), overwritten; each column summed over rows 0..N-1 in order (fp32): the
       same bits on every backend and thread count */
    void (*bias_grad)(zt_backend *be, float *dbias, const float *dout, int N, int OC);
    /* idx(N) int32 (backend memory) = the lowest column index holding the maximum of row i of x among columns
       [0, V); x rows are ld floats apart (the logits (N, Vp)). A NaN never wins over a number (a row of NaN only: 0).
       Comparisons only: exact on every backend (the MLM accuracy) */
    void (*argmax_rows)(zt_backend *be, int32_t *idx, const float *x, int N, int V, int ld);
} zt_backend_i;

/* the head sizes a backend's attention_fused_* slots must take (the CUDA backend's kernels: cuda/kernels_attn_fused.cu) */
static inline int zt_attention_fused_hs_ok(int hs) { return hs == 32 || hs == 64; }
/* floats of scratch attention_fused_bwd takes: a value per row (B, NH, T), rounded up to 4 (16 bytes), then each
   row's part of dq from every 64-key tile (B, NH, ceil(T / 64), T, C / NH) (cuda/kernels_attn_fused.cu) */
static inline size_t zt_attention_fused_scratch_rows(int B, int T, int NH) { return ((size_t)B * NH * T + 3) & ~(size_t)3; }
static inline size_t zt_attention_fused_scratch(int B, int T, int C, int NH) {
    return zt_attention_fused_scratch_rows(B, T, NH) + (size_t)B * NH * T * (size_t)((T + 63) / 64) * (size_t)(C / NH);
}
/* whether the CUDA backend runs the fused attention on tensor cores in a bf16 / fp16 run (ZT_CUDA_ATTN_TC, default
   on): its backward then takes only zt_attention_fused_scratch_rows of scratch (cuda/kernels_attn_tc.cu: no dq parts) */
static inline int zt_attention_tc_on(void) {
    const char *e = getenv("ZT_CUDA_ATTN_TC");
    return !(e && e[0] == '0' && !e[1]);
}
/* the scratch floats attention_fused_bwd takes: rows only where it runs on tensor cores (tc), else with the parts */
static inline size_t zt_attention_fused_scratch_for(int B, int T, int C, int NH, int tc) {
    return tc ? zt_attention_fused_scratch_rows(B, T, NH) : zt_attention_fused_scratch(B, T, C, NH);
}

struct zt_backend {
    const zt_backend_i *i;
    void *ctx;
    int threads;      /* host threads used by ops (cpu: OpenMP and BLAS threads) */
};

#endif
