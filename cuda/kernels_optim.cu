// kernels_optim.cu — the CUDA backend's optimizer-step kernels (cuda_ops.h): AdamW (per tensor, and all of a shard's
// segments in one launch, which can write the 2-byte parameters too), the gradient norm's chunked sums of squares in
// double, and the step's gradient scale from them (clip_scale, alone or in the sums' last block). Deterministic as
// kernels_elem.cu: no floating-point atomics, each chunk's sum by a fixed tree, the chunk sums added by one thread in
// order. One source, two builds: nvcc (GPU) and g++ against the host execution harness (ZT_HOSTEXEC).
#include "cuda_ops.h"

#include "cuda_check.h"
#include "iface/backend.h"
#include "iface/op_math.h"
#include "kernels_common.cuh"

namespace ZT_CU_NS {

namespace {

constexpr int kChunkThreads = 512;       // sumsq_chunks: one block per chunk (fewer for short chunks)
constexpr int kClipThreads = 256;        // clip_scale: one block, staging kClipTile chunk sums at a time
constexpr int kClipTile = 2048;

__global__ void k_adamw(float *param, const float *grad, float *m, float *v, size_t n, float lr, float beta1,
                        float beta2, float eps, float weight_decay, float bias_corr1, float bias_corr2,
                        float grad_scale) {
    ZT_GRID_STRIDE(i, n) {
        zt_adamw_elem(&param[i], &m[i], &v[i], grad[i] * grad_scale, lr, beta1, beta2, eps, weight_decay, bias_corr1,
                      bias_corr2);
    }
}

// all segments of a shard in one launch (zt_cu_adamw_multi): a grid-stride loop over the concatenation of the
// segments; each element finds its table entry by a binary search over the starts (log2 of ~150 tensors: 8 steps
// of a table that stays in cache), then the same expression as k_adamw, so the bits are those of k_adamw. The
// step's scalars come from hyper (device memory): a NaN gradient scale is a skipped step
__global__ void k_adamw_multi(float *param, const float *grad, float *m, float *v, const zt_cu_adamw_seg *table,
                              int ntable, size_t total, float beta1, float beta2, float eps, const float *hyper,
                              uint16_t *words, size_t nwords, int wprec) {
    const float grad_scale = hyper[ZT_HYPER_GRAD_SCALE];
    const bool skip = isnan(grad_scale);
    if (skip && !words) return;
    const float lr = hyper[ZT_HYPER_LR], bias_corr1 = hyper[ZT_HYPER_BC1], bias_corr2 = hyper[ZT_HYPER_BC2];
    ZT_GRID_STRIDE(i, words ? nwords : total) {
        if (words && (skip || i >= total)) { // packed as it is (the shard's tail; a skipped step)
            words[i] = zt_f32_to_bits16(param[i], wprec);
            continue;
        }
        int a = 0, b = ntable - 1; // the last entry with start <= i (entry 0 starts at 0)
        while (a < b) {
            const int mid = (a + b + 1) / 2;
            if (table[mid].start <= i) a = mid;
            else b = mid - 1;
        }
        const size_t j = table[a].offset + (i - table[a].start);
        zt_adamw_elem(&param[j], &m[j], &v[j], grad[j] * grad_scale, lr, beta1, beta2, eps, table[a].weight_decay,
                      bias_corr1, bias_corr2);
        if (words) words[j] = zt_f32_to_bits16(param[j], wprec); // as k_pack16 (a dense table: j == i)
    }
}

// ---------------------------------------------------------------------------------------------
// Sums of squares in double: one block per chunk.
// this block's chunk's sum of squares into out[blockIdx.x]
__device__ void chunk_sumsq(double *out, const float *x, size_t n, size_t chunk) {
    __shared__ double sh[32];
    const size_t i0 = (size_t)blockIdx.x * chunk, i1 = i0 + chunk < n ? i0 + chunk : n;
    double s = 0.0;
    for (size_t i = i0 + threadIdx.x; i < i1; i += blockDim.x) {
        const double d = (double)x[i];
        s += d * d;
    }
    s = block_reduce(s, sh, 0.0, SumOp());
    if (threadIdx.x == 0) out[blockIdx.x] = s;
}
__global__ void __launch_bounds__(kChunkThreads) k_sumsq_chunks(double *out, const float *x, size_t n, size_t chunk) {
    chunk_sumsq(out, x, n, chunk);
}
// sumsq_chunks then clip_scale of its sums in one launch (zt_cu_sumsq_clip): the grid's last block (its ticket) has
// thread 0 add the chunk sums in order, the sum k_clip_scale makes, then zt_grad_scale
__global__ void __launch_bounds__(kChunkThreads)
    k_sumsq_clip(double *out, const float *x, size_t n, size_t chunk, unsigned *ticket, float *hyper, double *norm,
                 double clip, int skip_nonfinite) {
    chunk_sumsq(out, x, n, chunk);
    if (!zt_cu_last_block(ticket, gridDim.x)) return;
    if (threadIdx.x == 0) {
        double s = 0.0;
        for (unsigned b = 0; b < gridDim.x; b++) s += static_cast<volatile double *>(out)[b];
        hyper[ZT_HYPER_GRAD_SCALE] = zt_grad_scale(s, hyper[ZT_HYPER_LOSS_SCALE], clip, skip_nonfinite, norm);
    }
}

// The step's gradient scale (zt_cu_clip_scale): the chunk sums staged through shared memory a tile at a time and
// added by thread 0 in order, so the sum is the host's sequential one bit for bit; then zt_grad_scale (op_math.h)
__global__ void __launch_bounds__(kClipThreads) k_clip_scale(float *hyper, double *norm, const double *sums,
                                                             size_t n, double clip, int skip_nonfinite) {
    __shared__ double tile[kClipTile];
    double s = 0.0;
    for (size_t t0 = 0; t0 < n; t0 += kClipTile) {
        const size_t m = n - t0 < (size_t)kClipTile ? n - t0 : (size_t)kClipTile;
        for (size_t i = threadIdx.x; i < m; i += blockDim.x) tile[i] = sums[t0 + i];
        __syncthreads();
        if (threadIdx.x == 0)
            for (size_t i = 0; i < m; i++) s += tile[i];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        hyper[ZT_HYPER_GRAD_SCALE] = zt_grad_scale(s, hyper[ZT_HYPER_LOSS_SCALE], clip, skip_nonfinite, norm);
}

} // namespace

void zt_cu_adamw(cudaStream_t s, float *param, const float *grad, float *m, float *v, size_t n, float lr, float beta1,
                 float beta2, float eps, float weight_decay, float bias_corr1, float bias_corr2, float grad_scale) {
    if (n == 0) return;
    ZT_LAUNCH(k_adamw, elem_blocks(n), kElemThreads, 0, s, param, grad, m, v, n, lr, beta1, beta2, eps, weight_decay,
              bias_corr1, bias_corr2, grad_scale);
    check_launch("adamw");
}

int zt_cu_adamw_multi_table(const zt_adamw_seg *segs, int nseg, zt_cu_adamw_seg *out, size_t *total) {
    int k = 0;
    size_t start = 0;
    for (int i = 0; i < nseg; i++) {
        if (!segs[i].n) continue;
        out[k].start = start;
        out[k].offset = segs[i].offset;
        out[k].weight_decay = segs[i].weight_decay;
        start += segs[i].n;
        k++;
    }
    *total = start;
    return k;
}

void zt_cu_adamw_multi(cudaStream_t s, float *param, const float *grad, float *m, float *v,
                       const zt_cu_adamw_seg *table, int ntable, size_t total, float beta1, float beta2, float eps,
                       const float *hyper, uint16_t *words, size_t nwords, int wprec) {
    if (total == 0 || ntable <= 0) return;
    ZT_ASSERT(!words || ((wprec == ZT_PREC_BF16 || wprec == ZT_PREC_FP16) && nwords >= total));
    ZT_LAUNCH(k_adamw_multi, elem_blocks(words ? nwords : total), kElemThreads, 0, s, param, grad, m, v, table, ntable,
              total, beta1, beta2, eps, hyper, words, words ? nwords : 0, wprec);
    check_launch("adamw_multi");
}

void zt_cu_sumsq_chunks(cudaStream_t s, double *out, const float *x, size_t n, size_t chunk) {
    if (n == 0) return;
    if (chunk == 0) zt_panic(__FILE__, __LINE__, "sumsq_chunks: chunk = 0");
    const size_t nc = (n + chunk - 1) / chunk;
    if (nc > 0x7fffffffu) zt_panic(__FILE__, __LINE__, "sumsq_chunks: %zu chunks, at most 2^31 - 1", nc);
    ZT_LAUNCH(k_sumsq_chunks, (unsigned)nc, row_threads(chunk < n ? chunk : n, kChunkThreads), 0, s, out, x, n, chunk);
    check_launch("sumsq_chunks");
}

void zt_cu_sumsq_clip(cudaStream_t s, double *out, const float *x, size_t n, size_t chunk, unsigned *ticket,
                      float *hyper, double *norm, double clip, int skip_nonfinite) {
    if (n == 0 || chunk == 0) zt_panic(__FILE__, __LINE__, "sumsq_clip: n = %zu, chunk = %zu", n, chunk);
    const size_t nc = (n + chunk - 1) / chunk;
    if (nc > 0x7fffffffu) zt_panic(__FILE__, __LINE__, "sumsq_clip: %zu chunks, at most 2^31 - 1", nc);
    ZT_LAUNCH(k_sumsq_clip, (unsigned)nc, row_threads(chunk < n ? chunk : n, kChunkThreads), 0, s, out, x, n, chunk,
              ticket, hyper, norm, clip, skip_nonfinite);
    check_launch("sumsq_clip");
}

void zt_cu_clip_scale(cudaStream_t s, float *hyper, double *norm, const double *sums, size_t n, double clip,
                      int skip_nonfinite) {
    ZT_LAUNCH(k_clip_scale, 1, kClipThreads, 0, s, hyper, norm, sums, n, clip, skip_nonfinite);
    check_launch("clip_scale");
}

} // namespace ZT_CU_NS
