// cuda_ops.h — the CUDA backend's kernels as launch functions, one per backend slot (the slot
// semantics are those of src/iface/backend.h, which is the contract: overwrite vs accumulate,
// shapes, optional arguments). cuda_backend.cu turns a backend slot into one of these calls on the
// backend's stream; under the host execution harness (ZT_HOSTEXEC) the pointers are already
// translated to addressable memory and every launch runs on the CPU.
//
// Determinism: no floating-point atomics anywhere (an integer ticket picks the block that sums a grid's partials,
// zt_cu_last_block); every reduction is done by one thread or one
// block in a fixed order (tree reductions with a fixed shape), so the same inputs give the same
// bits on every run, for any grid scheduling. Files: kernels_elem.cu (GELU and the exact GELU, add, accumulate,
// embeddings, softmax + cross-entropy, AdamW, chunked sums of squares, dropout, dequantisation, bias add and
// gradient, row argmax), kernels_norm_attn.cu (LayerNorm, attention forward/backward/decode, causal and
// bidirectional), kernels_attn_fused.cu (attention without the (T, T) matrices), kernels_attn_tc.cu (the same on
// tensor cores), kernels_llama.cu (RMSNorm, rotary embedding, SwiGLU), cuda_gemm.cu (matmul, strided matmul, linear
// layers, one-row products: cuBLASLt on a GPU, a reference GEMM with fp32 accumulation in the host build).
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "zt_cuda_compat.cuh"

// Namespacing: the nvcc build (GPU) and the host build (ZT_HOSTEXEC) of the same sources may be
// linked into one binary, so every declaration here and every definition in the .cu files lives in
// namespace ZT_CU_NS: zt_cu_gpu (nvcc) or zt_cu_host (host execution harness) unless set by the build.
#ifndef ZT_CU_NS
#ifdef ZT_HOSTEXEC
#define ZT_CU_NS zt_cu_host
#else
#define ZT_CU_NS zt_cu_gpu
#endif
#endif

struct zt_adamw_seg; // iface/backend.h: a segment of adamw_multi (offset, n, weight_decay), host memory

namespace ZT_CU_NS {

// ---- last-block reductions: a grid whose blocks each write partial sums, and whose last block to finish sums them
// in a fixed order, in one launch (LayerNorm / RMSNorm backward, linear backward's bias gradient). `tickets` is
// zero-filled device memory of at least kCuTickets words (the backend's, kept): a kernel takes ticket i with
// atomicAdd and the block that draws n - 1 (its grid's n blocks on that ticket) puts it back to 0, so every ticket
// is 0 between launches. Which block sums does not change the sums: the same bits as a second kernel.
constexpr int kCuTickets = 4096;
// every thread of the block calls it after writing its partials: true in the one block that finishes last of the n
// on *ticket (the others' writes are visible to it)
__device__ __forceinline__ bool zt_cu_last_block(unsigned *ticket, unsigned n) {
    __shared__ int last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0 && threadIdx.y == 0) last = atomicAdd(ticket, 1u) == n - 1;
    __syncthreads();
    if (last && threadIdx.x == 0 && threadIdx.y == 0) *ticket = 0;
    __threadfence();
    return last;
}

// ---- kernels_elem.cu
// prec (ZT_PREC_*; default fp32: none) on gelu, add, embed_fwd, softmax_xent, layernorm fwd / bwd (dinp) and the
// fused attention: the op's output as a buffer of that precision stores it (zt_round_prec), the model's round_to
// after the op fused into it (cuda_backend.cu); the same bits as the op followed by zt_cu_round_to.
// out16 / dinp16 / dqkv16 (may be NULL; GELU forward and backward, LayerNorm forward and backward, residual +
// LayerNorm forward, the fused attention's forward and backward, RMSNorm and SwiGLU forward and backward; prec bf16
// / fp16): the rounded output also as
// 2-byte words, one per element at the same index, what packing the output would give (the backend's mirrors read
// them for the product that takes the output next)
// GELU: exact = 1 the encoders' erf form (gelu_erf_*), else the tanh approximation; dinp == dout allowed
// in_round (a precision; 0: none): the input rounded to it first, the round_to before the op fused into it
// (cuda_backend.cu): gelu_fwd then writes inp back rounded; gelu_bwd rounds dout and must run in place (dinp == dout)
// in16 (gelu_fwd with in_round): the rounded input also as words (the words a later pack of it would write)
// inp16 (gelu_fwd without in_round; may be null): inp read as these 2-byte words of inp16_prec instead of its floats
// (the product before it wrote only those: linear_fwd's out_words)
void zt_cu_gelu_fwd(cudaStream_t s, float *out, const float *inp, size_t n, int prec = 0, int exact = 0,
                    int in_round = 0, uint16_t *out16 = nullptr, uint16_t *in16 = nullptr,
                    const uint16_t *inp16 = nullptr, int inp16_prec = 0);
// inp16 (gelu_bwd; may be null): inp read as these 2-byte words of inp16_prec instead of its floats (a lazy unpack16);
// dout16 (may be null; not with in_round): dout read as words of inp16_prec (the product before it wrote only those)
void zt_cu_gelu_bwd(cudaStream_t s, float *dinp, const float *inp, const float *dout, size_t n, int prec = 0,
                    int exact = 0, int in_round = 0, uint16_t *dinp16 = nullptr, const uint16_t *inp16 = nullptr,
                    int inp16_prec = 0, const uint16_t *dout16 = nullptr);
// in_round (a precision; 0: none): b rounded to it first and written back (the round_to of b fused here)
void zt_cu_add(cudaStream_t s, float *out, const float *a, const float *b, size_t n, int prec = 0, int in_round = 0);
// acc += x; with prec (bf16 / fp16) x's elements [r0, r1) are first rounded to it and written back (the round_to of
// that range the backend fuses here)
void zt_cu_accumulate(cudaStream_t s, float *acc, const float *x, size_t n, int prec = 0, size_t r0 = 0,
                      size_t r1 = 0);
// x16 (may be null): the rounded values also as words
void zt_cu_round_to(cudaStream_t s, float *x, size_t n, int prec, uint16_t *x16 = nullptr);
// out[i] = x[i] as bf16 / fp16 bits (round to nearest even: exact for values of the precision); unpack16
// decodes exactly. The GEMMs' packed operands and the 2-byte activation storage
void zt_cu_pack16(cudaStream_t s, uint16_t *out, const float *x, size_t n, int prec);
void zt_cu_unpack16(cudaStream_t s, float *out, const uint16_t *x, size_t n, int prec);
// up to kCuUnpackMax unpack16s in one launch: range k is cnt = start[k + 1] - start[k] words at x[k] into out[k]
// (start[0] = 0; start[n]: the total). The CUDA backend's lazy unpacks, run together (cuda_backend_core.cu settle)
constexpr int kCuUnpackMax = 32;
struct zt_cu_unpack_job {
    int n;
    int pad = 0; // no padding bytes: the launch trace hashes a kernel's arguments (zt_launch_trace.h)
    float *out[kCuUnpackMax];
    const uint16_t *x[kCuUnpackMax];
    size_t start[kCuUnpackMax + 1];
};
void zt_cu_unpack16_multi(cudaStream_t s, const zt_cu_unpack_job &job, int prec);
void zt_cu_embed_fwd(cudaStream_t s, float *out, const int32_t *tokens, const float *wte, const float *wpe, int B,
                     int T, int C, int prec = 0);
// dwte += scatter of dout by token (deterministic: tokens are bucketed, each (token, column) summed
// by one thread in position order); dwpe rows [0, T) overwritten with the sum over B.
// scratch: at least zt_cu_embed_bwd_scratch(B, T) bytes of device memory
size_t zt_cu_embed_bwd_scratch(int B, int T);
void zt_cu_embed_bwd(cudaStream_t s, float *dwte, float *dwpe, const float *dout, const int32_t *tokens, int B,
                     int T, int C, void *scratch);
// a target < 0 is an ignored position: loss 0 and a zero dlogits row (iface/backend.h)
// dscale_at (device memory, may be null): the scale read in a non-zero dscale's place
void zt_cu_softmax_xent(cudaStream_t s, float *losses, float *logits, const int32_t *targets, int N, int V, int Vp,
                        float dscale, int prec = 0, const float *dscale_at = nullptr);
// the same on 2-byte logits of precision prec (iface/backend.h softmax_xent16): widened on load, dlogits rounded
void zt_cu_softmax_xent16(cudaStream_t s, float *losses, uint16_t *logits, const int32_t *targets, int N, int V,
                          int Vp, float dscale, int prec, const float *dscale_at = nullptr);
// ---- kernels_optim.cu: AdamW, adamw_multi, the gradient norm's sums and clip_scale (down to zt_cu_sumsq_clip)
void zt_cu_adamw(cudaStream_t s, float *param, const float *grad, float *m, float *v, size_t n, float lr, float beta1,
                 float beta2, float eps, float weight_decay, float bias_corr1, float bias_corr2, float grad_scale);
// adamw_multi (iface/backend.h) as one launch: a device table of the non-empty segments, each with start (the sum
// of the lengths before it: its first index in the concatenation of all segments), offset (in the shard) and
// weight_decay. zt_cu_adamw_multi_table fills it on the host (out: nseg entries at most) and returns how many
// entries it wrote, *total the elements of all segments; the caller copies it to device memory.
struct zt_cu_adamw_seg {
    size_t start, offset;
    float weight_decay;
};
int zt_cu_adamw_multi_table(const zt_adamw_seg *segs, int nseg, zt_cu_adamw_seg *out, size_t *total);
// one grid over the total elements: element i of the concatenation belongs to the last table entry whose start
// <= i (a binary search), shard index offset + (i - start); then exactly k_adamw's arithmetic (zt_adamw_elem with
// that entry's weight_decay). table: device memory, ntable entries; hyper: device memory, the step's scalars
// (iface/backend.h ZT_HYPER_*), read by the kernel; a NaN gradient scale leaves everything as it was. words (may
// be null; a dense table only: offset == start in every entry; nwords >= total): then the kernel is also
// zt_cu_pack16(words, param, nwords, wprec) after the update, each parameter's word written as it is updated, those
// past total (a shard's tail) and in a skipped step packed as they are
void zt_cu_adamw_multi(cudaStream_t s, float *param, const float *grad, float *m, float *v,
                       const zt_cu_adamw_seg *table, int ntable, size_t total, float beta1, float beta2, float eps,
                       const float *hyper, uint16_t *words = nullptr, size_t nwords = 0, int wprec = 0);
void zt_cu_sumsq_chunks(cudaStream_t s, double *out, const float *x, size_t n, size_t chunk);
// clip_scale (iface/backend.h): one block; the n chunk sums (device memory) added in order, then zt_grad_scale
void zt_cu_clip_scale(cudaStream_t s, float *hyper, double *norm, const double *sums, size_t n, double clip,
                      int skip_nonfinite);
// zt_cu_sumsq_chunks(out, x, n, chunk) then zt_cu_clip_scale of its ceil(n / chunk) sums, in one launch: the grid's
// last block adds them (ticket: a zero word, put back to 0), the same bits
void zt_cu_sumsq_clip(cudaStream_t s, double *out, const float *x, size_t n, size_t chunk, unsigned *ticket,
                      float *hyper, double *norm, double clip, int skip_nonfinite);
// out[i] = zt_dropout_keep(seed, i, p) ? in[i] / (1 - p) : 0 (op_math.h; out == in allowed)
// micro: null, or a device uint64 read as the kernel runs: the seed is then zt_dropout_seed(seed, *micro)
void zt_cu_dropout(cudaStream_t s, float *out, const float *in, size_t n, float p, uint64_t seed,
                   const uint64_t *micro = nullptr);
// out = the decoding of a quantised matrix (core/lora/quant.h): fmt and the section offsets of its layout (the
// host computes them with zt_quant_plan), one thread per element with quant.h's inline decode math
void zt_cu_dequant(cudaStream_t s, float *out, const uint8_t *blob, int fmt, size_t n, size_t cols, size_t codes,
                   size_t absmax, size_t qabsmax, size_t absmax2, size_t mean, size_t scales);
// the encoders' MLM head: out(N, OC) += bias(OC) on every row; dbias(OC) = column sums of dout(N, OC), each column
// by one thread over the rows in order (the cpu backend's bits); idx(N) = each row's lowest column of its maximum
// among [0, V), rows ld floats apart (zt_argmax_better: exact)
void zt_cu_bias_add(cudaStream_t s, float *out, const float *bias, int N, int OC);
void zt_cu_bias_grad(cudaStream_t s, float *dbias, const float *dout, int N, int OC);
void zt_cu_argmax_rows(cudaStream_t s, int32_t *idx, const float *x, int N, int V, int ld);

// ---- kernels_norm_attn.cu
// eps: the LayerNorm epsilon (model.norm_eps)
void zt_cu_layernorm_fwd(cudaStream_t s, float *out, float *mean, float *rstd, const float *inp, const float *w,
                         const float *b, int N, int C, float eps, int prec = 0, uint16_t *out16 = nullptr);
// res = a + bb rounded to res_prec (zt_cu_add's arithmetic, in_round as zt_cu_add's), then zt_cu_layernorm_fwd of
// res, out rounded to prec; res16 (may be null): res also as words of res_prec:
// one launch, the bits of the two launches in sequence. a16, bb16 (may be null; bb16 not with in_round): a, bb read as
// these 2-byte words of wprec instead of their floats (a mirror's, or the words alone of the product before it)
void zt_cu_residual_layernorm_fwd(cudaStream_t s, float *res, float *out, float *mean, float *rstd, const float *a,
                                  const float *bb, const float *w, const float *b, int N, int C, float eps,
                                  int res_prec, int prec = 0, int in_round = 0, uint16_t *out16 = nullptr,
                                  uint16_t *res16 = nullptr, const uint16_t *a16 = nullptr,
                                  const uint16_t *bb16 = nullptr, int wprec = 0);
// dinp += ...; dw, db overwritten (fixed-order partial sums over row blocks, then over the partials), one launch
// scratch: at least zt_cu_layernorm_bwd_scratch(N, C) bytes of device memory; tickets: see kCuTickets; in_round (a
// precision; 0: none): dout rounded to it first and written back (the round_to of dout fused here)
size_t zt_cu_layernorm_bwd_scratch(int N, int C);
// inp16 (may be null): inp read as these 2-byte words of inp16_prec instead of its floats (a lazy unpack16); dout16
// (may be null; not with in_round): dout read as words of inp16_prec (the product before it wrote only those)
void zt_cu_layernorm_bwd(cudaStream_t s, float *dinp, float *dw, float *db, const float *dout, const float *inp,
                         const float *w, const float *mean, const float *rstd, int N, int C, void *scratch,
                         unsigned *tickets, int prec = 0, int in_round = 0, uint16_t *dinp16 = nullptr,
                         const uint16_t *inp16 = nullptr, int inp16_prec = 0, const uint16_t *dout16 = nullptr);
// attention forward / backward: the score and probability products are batched fp32 GEMMs over the heads
// (zt_cu_gemm_strided: cuBLASLt on a GPU), the causal softmax and its backward are row kernels
typedef struct zt_cu_gemm zt_cu_gemm;
void zt_cu_attention_fwd(zt_cu_gemm *g, cudaStream_t s, float *out, float *att, const float *qkv, int B, int T, int C,
                         int NH, int NKV);
// datt: (B, NH, T, T) scratch; holds the gradient of the pre-softmax scores afterwards
void zt_cu_attention_bwd(zt_cu_gemm *g, cudaStream_t s, float *dqkv, float *datt, const float *dout, const float *qkv,
                         const float *att, int B, int T, int C, int NH, int NKV);
// bidirectional attention with the key padding mask kvalid (B, T) (the encoders'): the same GEMMs and row kernels,
// the softmax over each sequence's valid keys (probability exactly 0 at the others; no valid key: out and att 0)
void zt_cu_attention_bidir_fwd(zt_cu_gemm *g, cudaStream_t s, float *out, float *att, const float *qkv,
                               const int32_t *kvalid, int B, int T, int C, int NH, int NKV);
void zt_cu_attention_bidir_bwd(zt_cu_gemm *g, cudaStream_t s, float *dqkv, float *datt, const float *dout,
                               const float *qkv, const float *att, const int32_t *kvalid, int B, int T, int C, int NH,
                               int NKV);
void zt_cu_attention_decode(cudaStream_t s, float *out, float *kcache, float *vcache, const float *qkv, int pos,
                            int maxT, int C, int NH, int NKV);

// ---- kernels_attn_fused.cu: attention without the (T, T) matrices (backend slots attention_fused_*); head sizes
// zt_attention_fused_hs_ok; stats (B, NH, T, 2): each row's softmax maximum and 1 / sum; scratch:
// zt_attention_fused_scratch(B, T, C, NH) floats
// in_round (tc only; a precision, that of tc; 0: none): the round_to before the op fused into it: the forward rounds
// qkv as it loads it and writes it back rounded (and its words into qkv16, when given), the backward dout
// qkv_words (tc only, not with in_round; may be null): qkv read as these words of tc's type instead of its floats (the
// product before it wrote only those: linear_fwd's out_words)
void zt_cu_attention_fused_fwd(cudaStream_t s, float *out, float *stats, const float *qkv, int B, int T, int C,
                               int NH, int NKV, int prec = 0, int tc = 0, uint16_t *out16 = nullptr, int in_round = 0,
                               uint16_t *qkv16 = nullptr, const uint16_t *qkv_words = nullptr);
// dout16 (tc only, not with in_round; may be null): dout read as words of tc's type (the product before it wrote only
// those: the attention projection's dinp)
void zt_cu_attention_fused_bwd(cudaStream_t s, float *dqkv, float *scratch, const float *dout, const float *qkv,
                               const float *out, const float *stats, int B, int T, int C, int NH, int NKV,
                               int prec = 0, int tc = 0, uint16_t *dqkv16 = nullptr, const uint16_t *qkv16 = nullptr,
                               const uint16_t *out16 = nullptr, int in_round = 0, const uint16_t *dout16 = nullptr);
// qkv16, out16 (backward with tc; may be null): qkv, out read as these words of the type tc instead of their floats
// (a lazy unpack16)
// tc: ZT_PREC_BF16 / ZT_PREC_FP16 runs the tensor-core kernels (kernels_attn_tc.cu) with inputs, p and ds in that
// type (the run's precision: its q, k, v and dout are values of it), 0 the fp32 kernels; prec only rounds the
// outputs, so the op then round_to gives the same bits as the op with prec. The backend passes its precision when
// zt_cu_attention_tc(precision): bf16 / fp16 runs unless ZT_CUDA_ATTN_TC=0
bool zt_cu_attention_tc(int prec);
// ---- kernels_attn_tc.cu: the fused attention's forward and, after D = dout . out, its backward's dk / dv and dq
// kernels on tensor cores (prec bf16 or fp16, head sizes 32 and 64; stats as kernels_attn_fused.cu's; no dq parts)
void zt_cu_attn_tc_fwd(cudaStream_t s, float *out, float *stats, const float *qkv, int B, int T, int C, int NH, int NKV,
                       float scale, int prec, int tc, uint16_t *out16, int in_round = 0, uint16_t *qkv16 = nullptr,
                       const uint16_t *qkv_words = nullptr);
void zt_cu_attn_tc_bwd(cudaStream_t s, float *dqkv, const float *D, const float *dout, const float *qkv,
                       const float *stats, int B, int T, int C, int NH, int NKV, float scale, int prec, int tc,
                       uint16_t *dqkv16, const uint16_t *qkv16 = nullptr, int in_round = 0,
                       const uint16_t *dout16 = nullptr);

// ---- kernels_llama.cu: the Llama family's ops (prec on rmsnorm fwd / bwd (dinp) and swiglu fwd / bwd, as above)
void zt_cu_rmsnorm_fwd(cudaStream_t s, float *out, float *rstd, const float *inp, const float *w, int N, int C,
                       float eps, int prec = 0, uint16_t *out16 = nullptr);
// dinp += ...; dw overwritten (fixed-order partial sums over row blocks, then over the partials), one launch
// scratch: at least zt_cu_rmsnorm_bwd_scratch(N, C) bytes of device memory; tickets: see kCuTickets
size_t zt_cu_rmsnorm_bwd_scratch(int N, int C);
void zt_cu_rmsnorm_bwd(cudaStream_t s, float *dinp, float *dw, const float *dout, const float *inp, const float *w,
                       const float *rstd, int N, int C, void *scratch, unsigned *tickets, int prec = 0,
                       uint16_t *dinp16 = nullptr);
// in place on the NH query and NKV key heads of qkv(B, T, (NH + 2 NKV) hs); cs(maxT, hs / 2, 2); inverse: the
// backward's rotation by minus the angle
void zt_cu_rope(cudaStream_t s, float *qkv, const float *cs, int B, int T, int pos0, int NH, int NKV, int hs,
                int inverse);
void zt_cu_swiglu_fwd(cudaStream_t s, float *out, const float *inp, int N, int I, int prec = 0,
                      uint16_t *out16 = nullptr);
void zt_cu_swiglu_bwd(cudaStream_t s, float *dinp, const float *inp, const float *dout, int N, int I, int prec = 0,
                      uint16_t *dinp16 = nullptr);

// ---- cuda_gemm.cu
typedef struct zt_cu_gemm zt_cu_gemm;   // cuBLASLt handle + workspace + pinned algorithms (GPU); nothing (host)
zt_cu_gemm *zt_cu_gemm_create(cudaStream_t s);
void zt_cu_gemm_free(zt_cu_gemm *g);
// the operands' precision (ZT_PREC_*): bf16 / fp16 products run on packed 2-byte operands (cuda_gemm.cu)
void zt_cu_gemm_set_precision(zt_cu_gemm *g, int prec);
void zt_cu_matmul(zt_cu_gemm *g, cudaStream_t s, float *c, const float *a, const float *b, int M, int N, int K, int ta,
                  int tb, float alpha, float beta);
// matmul on sub-matrices (iface/backend.h matmul_ld): a, b, c rows lda, ldb, ldc floats apart (lda >= the stored
// op(a)'s width: K, or M when ta; ldb >= N, or K when tb; ldc >= N); the same arithmetic as zt_cu_matmul on packed
// copies (bf16 / fp16: the strided operands are packed dense); c's columns beyond N are neither read nor written
void zt_cu_matmul_ld(zt_cu_gemm *g, cudaStream_t s, float *c, const float *a, const float *b, int M, int N, int K,
                     int ta, int tb, float alpha, float beta, int lda, int ldb, int ldc);
// inp_words / w_words / dout_words (bf16 / fp16 runs; may be NULL): the operand's 2-byte words as packing would make
// them (the backend's mirrors, iface/mirror16.h), read instead of packing it
// out_words (bf16 / fp16, C > 0; may be NULL): the output as 2-byte words instead of floats, the fp32 sums (bias added)
// rounded to nearest even by the GEMM itself: the words of out followed by round_to, out's floats not written (on a
// GPU where cuBLASLt has no such algorithm: the floats, then a rounding pass that writes the words too)
void zt_cu_linear_fwd(zt_cu_gemm *g, cudaStream_t s, float *out, const float *inp, const float *w, const float *bias,
                      int N, int C, int OC, const uint16_t *inp_words = nullptr, const uint16_t *w_words = nullptr,
                      uint16_t *out_words = nullptr);
// matmul16 (iface/backend.h; the precision is set_precision's, which must be bf16 / fp16; K > 0): a as 2-byte words
// when a16 (the product's packed operand as it is), c as 2-byte words when c16: the fp32 sums rounded to nearest even
// by the GEMM itself (cuBLASLt's output conversion on a GPU, the reference kernel's zt_f32_to_bf16_bits under the
// harness), one launch and no fp32 copy of c; beta 1 (a float32 c only): c += the product (cuBLASLt's beta)
void zt_cu_matmul16(zt_cu_gemm *g, cudaStream_t s, void *c, int c16, const void *a, int a16, const float *b, int M,
                    int N, int K, int ta, int tb, const uint16_t *b_words = nullptr, float beta = 0.0f);
// dbias (may be NULL) = column sums of dout without float atomics: partial sums per row block, then a
// fixed-order sum of the partials by the grid's last block (one launch); scratch: at least
// zt_cu_linear_bwd_scratch(N, OC) bytes; tickets: see kCuTickets
size_t zt_cu_linear_bwd_scratch(int N, int OC);
// elements the bf16 / fp16 products have packed so far in this process (the operand packing's count, for its test)
unsigned long long zt_cu_packed_elems(void);
// the elements of the three packed-operand buffers (a, b, linear_bwd's dout), each at the largest it has grown to in
// this process: the products' own device memory beside the backend's allocations (2 bytes an element)
unsigned long long zt_cu_gemm16_elems(void);
// keep_dout16, keep_w16 (bf16 / fp16, N > 0, not accumulate_dinp; may be null): dinp's product is left to the caller,
// which gets the 2-byte words of dout and w it is to multiply (dinp = dout @ w^T: zt_cu_matmul16 with tb)
void zt_cu_linear_bwd(zt_cu_gemm *g, cudaStream_t s, float *dinp, float *dw, float *dbias, const float *dout,
                      const float *inp, const float *w, int N, int C, int OC, int accumulate_dinp, void *scratch,
                      unsigned *tickets, const uint16_t *inp_words = nullptr, const uint16_t *w_words = nullptr,
                      const uint16_t *dout_words = nullptr, const uint16_t **keep_dout16 = nullptr,
                      const uint16_t **keep_w16 = nullptr);
// c_z(M, N) = alpha * op(a_z) @ op(b_z) + beta * c_z for z < batch, row-major with leading dimensions (row
// strides) lda, ldb, ldc and element strides sa, sb, sc between the batch's matrices; fp32 operands in every
// precision (the set_precision packing does not apply)
void zt_cu_gemm_strided(zt_cu_gemm *g, cudaStream_t s, float *c, const float *a, const float *b, int M, int N, int K,
                        int ta, int tb, int lda, int ldb, int ldc, long long sa, long long sb, long long sc, int batch,
                        float alpha, float beta);
void zt_cu_gemv(cudaStream_t s, float *y, const float *x, const float *w, const float *bias, int C, int OC, int w_t);

} // namespace ZT_CU_NS
