// cuda_gemm.cu — matrix products of the CUDA backend (cuda_ops.h): matmul, linear forward /
// backward, and the one-row products of decoding (gemv). Row-major throughout, as iface/backend.h.
//
// Two implementations of the GEMM behind one interface:
//   - GPU (nvcc): cuBLASLt, fp32 compute (CUBLAS_COMPUTE_32F: no TF32). Row-major c = op(a) op(b)
//     is column-major c^T = op(b)^T op(a)^T, so b goes in as cuBLASLt's A and a as its B, with the
//     same transpose flags and the row-major leading dimensions. The bias of linear_fwd is the
//     CUBLASLT_EPILOGUE_BIAS epilogue (a vector over the rows of column-major c^T = the columns of
//     c). One handle and one workspace per zt_cu_gemm; each distinct problem (shape, transposes,
//     epilogue, pointer alignments) gets its algorithm from cublasLtMatmulAlgoGetHeuristic once,
//     and the plan (descriptors + algorithm) is kept: the same shape always runs the same algorithm,
//     so results are bitwise reproducible run to run on one GPU model.
//   - host execution harness (ZT_HOSTEXEC): gemm_ref_kernel, a shared-memory tiled kernel with fp32
//     accumulation where each output element is summed over k = 0..K-1 in order. It is valid CUDA
//     too, and the GPU build uses it for the degenerate K == 0 case.
// bf16 / fp16 runs (zt_cu_gemm_set_precision, from the backend's set_precision slot): the products run on 2-byte
// bf16 / fp16 operands with fp32 accumulation: on a GPU cuBLASLt with CUDA_R_16BF / CUDA_R_16F A and B,
// CUBLAS_COMPUTE_32F (tensor cores); under the harness gemm_ref_kernel decodes each element exactly, so its result is
// bit-identical to the fp32 product of the rounded inputs. An operand whose 2-byte words exist (the parameters'
// words, the words an op wrote for the next product: a_pre / b_pre) is read as it is; one held only in a float32
// buffer is packed (round to nearest even, exact for values of the precision) into one of three scratch buffers that
// grow to the largest need and are kept (pack16_multi_kernel: the operands of a product, or of linear backward's two,
// in one launch). c is fp32, or 2-byte words (matmul16's c16).
// matmul_ld (sub-matrices with row strides lda / ldb / ldc, iface/backend.h) is the same path: in fp32 the
// leading dimensions go to the cuBLASLt layouts (the reference kernel takes them as they are: the same sums as
// on packed copies, bit for bit); in bf16 / fp16 the strided sub-matrices are packed dense, so only c keeps its
// stride. Columns of c beyond N are never read or written. On a GPU a strided problem gets its own pinned algorithm
// (the heuristic sees the strides and the alignments), so its bits can differ from those of the product of packed
// copies by fp32 rounding; run to run they are the same.
// The kernels that are not cuBLASLt's (reference GEMM, packing, column sums, gemv) are in gemm_kernels.cuh.
// No GELU epilogue: cuBLASLt's GELU is its own approximation code, not op_math.h's zt_gelu, so the outputs
// would leave the cpu backend's bits, and the model keeps the pre-GELU values for backward anyway; the GELU
// is an elementwise kernel that also does the bf16/fp16 rounding after it (cuda_backend.cu).
// Everything else here is the same in both builds and free of float atomics: dbias by partial column
// sums over blocks of rows then a fixed-order sum of the partials by the last block (one launch); gemv by one thread per output
// column (x @ w) or one warp per output row (w @ x, the tied LM head) in a fixed order.
#include <stdint.h>
#include <stdlib.h>


#include "cuda_ops.h"

#ifndef ZT_HOSTEXEC
#include <cublasLt.h>

#include <array>
#include <map>
#endif

#include "cuda_check.h"
#include "iface/backend.h"
#include "iface/op_math.h"

#include "gemm_kernels.cuh"

namespace ZT_CU_NS {

// ------------------------------------------------------------------------------------ the handle

#ifdef ZT_HOSTEXEC

struct zt_cu_gemm {
    int prec;           // ZT_PREC_*: the operands' precision
    uint16_t *h16[3];   // packed operands a, b and linear_bwd's dout (host memory: the harness runs kernels on the host)
    size_t h16_n[3];
};

zt_cu_gemm *zt_cu_gemm_create(cudaStream_t s) {
    (void)s;
    return static_cast<zt_cu_gemm *>(zt_calloc(1, sizeof(zt_cu_gemm)));
}

void zt_cu_gemm_free(zt_cu_gemm *g) {
    if (!g) return;
    for (int k = 0; k < 3; k++) free(g->h16[k]);
    free(g);
}

namespace {
uint16_t *h16_buf(zt_cu_gemm *g, int k, size_t n) {
    if (n > g->h16_n[k]) {
        free(g->h16[k]);
        g->h16[k] = static_cast<uint16_t *>(zt_malloc(n * sizeof(uint16_t)));
        g->h16_n[k] = n;
        if (n > g_h16_max[k]) g_h16_max[k] = n;
    }
    return g->h16[k];
}

// c = alpha * op(a) @ op(b) (+ bias) (+ beta * c), operands with leading dimensions ld (dense_ld: packed); bf16 /
// fp16: a_pre / b_pre, when given, the operand's packed words (pack_operands)
void gemm(zt_cu_gemm *g, cudaStream_t s, float *c, const float *a, const float *b, const float *bias, int M, int N,
          int K, int ta, int tb, float alpha, float beta, const GemmLd &ld, const uint16_t *a_pre = nullptr,
          const uint16_t *b_pre = nullptr, uint16_t *c16 = nullptr) {
    if (g->prec == ZT_PREC_FP32 || K == 0) {
        ZT_ASSERT(!c16 && !a_pre && !b_pre);
        gemm_ref_ld(s, c, a, b, bias, M, N, K, ta, tb, alpha, beta, ZT_PREC_FP32, ld, 1);
        return;
    }
    const uint16_t *a16, *b16;
    const GemmLd pl = pack_operands(g, s, a, b, M, N, K, ta, tb, ld, a_pre, b_pre, &a16, &b16);
    if (c16) {
        ZT_ASSERT(beta == 0.0f);
        gemm_ref_ld(s, c16, a16, b16, bias, M, N, K, ta, tb, alpha, 0.0f, g->prec, pl, 1);
        return;
    }
    gemm_ref_ld(s, c, a16, b16, bias, M, N, K, ta, tb, alpha, beta, g->prec, pl, 1);
}

// batch products c_z = alpha * op(a_z) @ op(b_z) + beta * c_z with strided operands, fp32 in every precision
void gemm_batched(zt_cu_gemm *g, cudaStream_t s, float *c, const float *a, const float *b, int M, int N, int K, int ta,
                  int tb, const GemmLd &ld, int batch, float alpha, float beta) {
    (void)g;
    gemm_ref_ld(s, c, a, b, nullptr, M, N, K, ta, tb, alpha, beta, ZT_PREC_FP32, ld, batch);
}
} // namespace

#else // cuBLASLt

#define GM_CUDA(call)                                                                                          \
    do {                                                                                                       \
        cudaError_t e_ = (call);                                                                               \
        if (e_ != cudaSuccess) zt_panic(__FILE__, __LINE__, "%s: %s", #call, cudaGetErrorString(e_));          \
    } while (0)
#define GM_CUBLAS(call)                                                                                        \
    do {                                                                                                       \
        cublasStatus_t st_ = (call);                                                                           \
        if (st_ != CUBLAS_STATUS_SUCCESS)                                                                      \
            zt_panic(__FILE__, __LINE__, "%s: %s (%s)", #call, cublasLtGetStatusName(st_),                      \
                     cublasLtGetStatusString(st_));                                                            \
    } while (0)

namespace {

constexpr size_t kWorkspaceBytes = (size_t)32 << 20; // cuBLAS's recommendation for Hopper

// a cuBLASLt product into the launch trace (zt_launch_trace.h): its plan, operands, output, bias and scalars
void trace_matmul(const void *plan, const void *a, const void *b, const void *c, const void *bias, float alpha,
                  float beta) {
    if (!zt_trace_sink) return;
    const void *p[5] = {plan, a, b, c, bias};
    const float f[2] = {alpha, beta};
    zt_trace_bytes(p, sizeof p);
    zt_trace_bytes(f, sizeof f);
}

// one problem: the row-major (ta, tb, M, N, K), whether the bias epilogue is on, the alignment class
// (4, 8 or 16 bytes) of a, b, c and the bias, since the heuristic's choice depends on them, the operand
// precision, for strided operands the leading dimensions, batch count and batch strides, and c's type (fp32, or
// 2-byte words of the operands' precision: matmul16's c16)
typedef std::array<long long, 19> PlanKey;

struct Plan {
    bool ok; // false: no algorithm for this problem (only allowed with the bias epilogue, a batch or strides)
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
};

bool is_dense(const GemmLd &ld, int M, int N, int K, int ta, int tb) {
    const GemmLd d = dense_ld(M, N, K, ta, tb);
    return ld.lda == d.lda && ld.ldb == d.ldb && ld.ldc == d.ldc;
}

int align_class(const void *p) {
    uintptr_t u = reinterpret_cast<uintptr_t>(p);
    return (u % 16 == 0) ? 16 : (u % 8 == 0) ? 8 : 4;
}

} // namespace

struct zt_cu_gemm {
    cublasLtHandle_t lt;
    void *workspace; // kWorkspaceBytes of device memory
    std::map<PlanKey, Plan> plans;
    int prec;            // ZT_PREC_*: the operands' precision
    uint16_t *h16[3];    // packed operands a, b and linear_bwd's dout (device memory, grown to the largest need, kept)
    size_t h16_n[3];
};

zt_cu_gemm *zt_cu_gemm_create(cudaStream_t s) {
    (void)s;
    zt_cu_gemm *g = new zt_cu_gemm();
    GM_CUBLAS(cublasLtCreate(&g->lt));
    GM_CUDA(cudaMalloc(&g->workspace, kWorkspaceBytes));
    return g;
}

void zt_cu_gemm_free(zt_cu_gemm *g) {
    if (!g) return;
    for (auto &kv : g->plans) {
        Plan &p = kv.second;
        cublasLtMatrixLayoutDestroy(p.la);
        cublasLtMatrixLayoutDestroy(p.lb);
        cublasLtMatrixLayoutDestroy(p.lc);
        cublasLtMatmulDescDestroy(p.desc);
    }
    // the workspace may still be in use by issued work
    cudaDeviceSynchronize();
    cudaFree(g->workspace);
    for (int k = 0; k < 3; k++) cudaFree(g->h16[k]);
    cublasLtDestroy(g->lt);
    delete g;
}

namespace {

// The plan for row-major c(M, N) = op(a) @ op(b) (+ bias), made and pinned the first time.
// Column-major view: D'(N, M) = op'(A' = b) @ op'(B' = a), A' stored (N, K) ld N (tb: (K, N) ld K),
// B' stored (K, M) ld K (ta: (M, K) ld M), D' ld N.
// Strided operands (ld, batch): A' ld ldb, B' ld lda, D' ld ldc, and the batch strides as the layouts'
// strided-batch offsets; a batch's alignment class is that of its first pointer and its stride in bytes.
const Plan &get_plan(zt_cu_gemm *g, const void *c, const void *a, const void *b, const float *bias, int M, int N,
                     int K, int ta, int tb, int prec, const GemmLd &ld, int batch, int c16 = 0) {
    const size_t esz = prec == ZT_PREC_FP32 ? sizeof(float) : sizeof(uint16_t);
    const int al_pa = align_class((const char *)a + ld.sa * esz * (batch > 1)),
              al_pb = align_class((const char *)b + ld.sb * esz * (batch > 1)),
              al_pc = align_class((const char *)c + ld.sc * (c16 ? esz : sizeof(float)) * (batch > 1));
    const int al_a0 = align_class(a), al_b0 = align_class(b), al_c0 = align_class(c);
    const int al_ab = al_pa < al_a0 ? al_pa : al_a0, al_bb = al_pb < al_b0 ? al_pb : al_b0,
              al_cb = al_pc < al_c0 ? al_pc : al_c0;
    PlanKey key = {ta, tb, M, N, K, bias != nullptr, al_ab, al_bb, al_cb, bias ? align_class(bias) : 0, prec,
                   ld.lda, ld.ldb, ld.ldc, batch, ld.sa, ld.sb, ld.sc, c16};
    auto it = g->plans.find(key);
    if (it != g->plans.end()) return it->second;

    Plan p = {};
    GM_CUBLAS(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t opa = tb ? CUBLAS_OP_T : CUBLAS_OP_N, opb = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    GM_CUBLAS(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
    GM_CUBLAS(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
    if (bias) {
        cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
        GM_CUBLAS(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
        // the heuristic reads the pointer's alignment
        GM_CUBLAS(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    }
    // operands fp32, or packed bf16 / fp16 (tensor cores); C, D and the bias stay fp32
    const cudaDataType_t ot = prec == ZT_PREC_BF16 ? CUDA_R_16BF : prec == ZT_PREC_FP16 ? CUDA_R_16F : CUDA_R_32F;
    if (bias && prec != ZT_PREC_FP32) {
        cudaDataType_t bt = CUDA_R_32F;
        GM_CUBLAS(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt));
    }
    GM_CUBLAS(cublasLtMatrixLayoutCreate(&p.la, ot, tb ? K : N, tb ? N : K, ld.ldb));
    GM_CUBLAS(cublasLtMatrixLayoutCreate(&p.lb, ot, ta ? M : K, ta ? K : M, ld.lda));
    // c and d: fp32, or (c16) 2-byte words that cuBLASLt rounds the fp32 result to (beta is 0: c is not read)
    GM_CUBLAS(cublasLtMatrixLayoutCreate(&p.lc, c16 ? ot : CUDA_R_32F, N, M, ld.ldc));
    if (batch > 1) {
        const int32_t nb = batch;
        const int64_t st[3] = {ld.sb, ld.sa, ld.sc};
        cublasLtMatrixLayout_t *lay[3] = {&p.la, &p.lb, &p.lc};
        for (int i = 0; i < 3; i++) {
            GM_CUBLAS(cublasLtMatrixLayoutSetAttribute(*lay[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &nb, sizeof nb));
            GM_CUBLAS(cublasLtMatrixLayoutSetAttribute(*lay[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &st[i],
                                                       sizeof st[i]));
        }
    }

    cublasLtMatmulPreference_t pref;
    GM_CUBLAS(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t ws = kWorkspaceBytes;
    GM_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    uint32_t al_a = (uint32_t)al_bb, al_b = (uint32_t)al_ab, al_c = (uint32_t)al_cb;
    GM_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof al_a));
    GM_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof al_b));
    GM_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof al_c));
    GM_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_c, sizeof al_c));
    cublasLtMatmulHeuristicResult_t res = {};
    int found = 0;
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(g->lt, p.desc, p.la, p.lb, p.lc, p.lc, pref, 1, &res, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    p.ok = st == CUBLAS_STATUS_SUCCESS && found > 0 && res.state == CUBLAS_STATUS_SUCCESS;
    if (p.ok) p.algo = res.algo;
    else if (!bias && !c16 && batch == 1 && is_dense(ld, M, N, K, ta, tb))
        zt_panic(__FILE__, __LINE__,
                 "cublasLtMatmulAlgoGetHeuristic: no algorithm for c(%d, %d) = op(a) @ op(b), K %d, ta %d, tb %d: %s", M,
                 N, K, ta, tb, st == CUBLAS_STATUS_SUCCESS ? "none returned" : cublasLtGetStatusString(st));
    return g->plans.emplace(key, p).first->second;
}

uint16_t *h16_buf(zt_cu_gemm *g, int k, size_t n) {
    if (n > g->h16_n[k]) {
        GM_CUDA(cudaFree(g->h16[k])); // stream-ordered: cudaFree waits for work using it
        GM_CUDA(cudaMalloc(&g->h16[k], n * sizeof(uint16_t)));
        g->h16_n[k] = n;
        if (n > g_h16_max[k]) g_h16_max[k] = n;
    }
    return g->h16[k];
}

// c = alpha * op(a) @ op(b) (+ bias) (+ beta * c), operands with leading dimensions ld_in (dense_ld: packed); bf16 /
// fp16: a_pre / b_pre, when given, the operand's packed words (pack_operands)
void gemm(zt_cu_gemm *g, cudaStream_t s, float *c, const float *a_in, const float *b_in, const float *bias, int M,
          int N, int K, int ta, int tb, float alpha, float beta, const GemmLd &ld_in, const uint16_t *a_pre = nullptr,
          const uint16_t *b_pre = nullptr, uint16_t *c16 = nullptr) {
    if (K == 0) { // nothing to multiply; cuBLASLt's k must be positive
        ZT_ASSERT(!c16 && !a_pre && !b_pre);
        gemm_ref_ld(s, c, a_in, b_in, bias, M, N, K, ta, tb, alpha, beta, ZT_PREC_FP32, ld_in, 1);
        return;
    }
    const void *a = a_in, *b = b_in;
    GemmLd dl = ld_in;
    if (g->prec != ZT_PREC_FP32) { // 2-byte operands for the tensor cores
        const uint16_t *a16, *b16;
        dl = pack_operands(g, s, a_in, b_in, M, N, K, ta, tb, ld_in, a_pre, b_pre, &a16, &b16);
        a = a16;
        b = b16;
    }
    if (c16) { // a 2-byte c (matmul16's, linear_fwd's out_words): beta 0, 2-byte operands
        ZT_ASSERT(g->prec != ZT_PREC_FP32 && beta == 0.0f);
        const Plan &pc = get_plan(g, c16, a, b, bias, M, N, K, ta, tb, g->prec, dl, 1, 1);
        if (!pc.ok && bias) { // no algorithm with the bias epilogue and 2-byte d: the floats into c, then rounded
            ZT_ASSERT(c != nullptr);
            gemm(g, s, c, nullptr, nullptr, bias, M, N, K, ta, tb, alpha, 0.0f, dl, (const uint16_t *)a,
                 (const uint16_t *)b);
            zt_cu_round_to(s, c, (size_t)M * N, g->prec, c16);
            return;
        }
        if (!pc.ok) {
            gemm_ref_ld(s, c16, (const uint16_t *)a, (const uint16_t *)b, nullptr, M, N, K, ta, tb, alpha, 0.0f, g->prec,
                        dl, 1);
            return;
        }
        if (bias)
            GM_CUBLAS(cublasLtMatmulDescSetAttribute(pc.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
        trace_matmul(&pc, a, b, c16, bias, alpha, beta);
        GM_CUBLAS(cublasLtMatmul(g->lt, pc.desc, &alpha, b, pc.la, a, pc.lb, &beta, c16, pc.lc, c16, pc.lc, &pc.algo,
                                 g->workspace, kWorkspaceBytes, s));
        return;
    }
    const Plan *p = &get_plan(g, c, a, b, bias, M, N, K, ta, tb, g->prec, dl, 1);
    if (!bias && !p->ok) { // a strided problem with no algorithm (get_plan panics on a dense one): the reference
        if (g->prec == ZT_PREC_FP32)
            gemm_ref_ld(s, c, a_in, b_in, nullptr, M, N, K, ta, tb, alpha, beta, ZT_PREC_FP32, dl, 1);
        else
            gemm_ref_ld(s, c, (const uint16_t *)a, (const uint16_t *)b, nullptr, M, N, K, ta, tb, alpha, beta, g->prec,
                        dl, 1);
        return;
    }
    if (bias && !p->ok) { // no epilogue algorithm for this bias: c = bias, then c += op(a) @ op(b)
        ZT_ASSERT(beta == 0.0f);
        ZT_LAUNCH(bias_broadcast_kernel, blocks_for((size_t)M * N, kColThreads), kColThreads, 0, s, c, bias, M, N);
        GM_LAUNCH_CHECK("bias_broadcast_kernel");
        bias = nullptr;
        beta = 1.0f;
        p = &get_plan(g, c, a, b, nullptr, M, N, K, ta, tb, g->prec, dl, 1);
        ZT_ASSERT(p->ok);
    }
    if (bias)
        GM_CUBLAS(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    trace_matmul(p, a, b, c, bias, alpha, beta);
    GM_CUBLAS(cublasLtMatmul(g->lt, p->desc, &alpha, b, p->la, a, p->lb, &beta, c, p->lc, c, p->lc, &p->algo,
                             g->workspace, kWorkspaceBytes, s));
}

// batch products c_z = alpha * op(a_z) @ op(b_z) + beta * c_z with strided operands, fp32 in every precision
// (attention: its scores and probabilities are fp32 inside the op on every backend)
void gemm_batched(zt_cu_gemm *g, cudaStream_t s, float *c, const float *a, const float *b, int M, int N, int K, int ta,
                  int tb, const GemmLd &ld, int batch, float alpha, float beta) {
    if (K == 0) {
        gemm_ref_ld(s, c, a, b, nullptr, M, N, K, ta, tb, alpha, beta, ZT_PREC_FP32, ld, batch);
        return;
    }
    const Plan &p = get_plan(g, c, a, b, nullptr, M, N, K, ta, tb, ZT_PREC_FP32, ld, batch);
    if (!p.ok) { // no cuBLASLt algorithm for these strides: the reference kernel (same sums, in order)
        gemm_ref_ld(s, c, a, b, nullptr, M, N, K, ta, tb, alpha, beta, ZT_PREC_FP32, ld, batch);
        return;
    }
    trace_matmul(&p, a, b, c, nullptr, alpha, beta);
    GM_CUBLAS(cublasLtMatmul(g->lt, p.desc, &alpha, b, p.la, a, p.lb, &beta, c, p.lc, c, p.lc, &p.algo, g->workspace,
                             kWorkspaceBytes, s));
}

} // namespace

#endif

namespace {
GemmLd pack_operands(zt_cu_gemm *g, cudaStream_t s, const float *a, const float *b, int M, int N, int K, int ta,
                     int tb, const GemmLd &ld, const uint16_t *a_pre, const uint16_t *b_pre, const uint16_t **a16,
                     const uint16_t **b16) {
    Packs pk;
    if (a_pre) *a16 = a_pre;
    else {
        uint16_t *pa = h16_buf(g, 0, (size_t)M * K);
        pk.add(pa, a, ta ? K : M, ta ? M : K, ld.lda);
        *a16 = pa;
    }
    if (b_pre) *b16 = b_pre;
    else {
        uint16_t *pb = h16_buf(g, 1, (size_t)K * N);
        pk.add(pb, b, tb ? N : K, tb ? K : N, ld.ldb);
        *b16 = pb;
    }
    pk.launch(s, g->prec);
    GemmLd pl = dense_ld(M, N, K, ta, tb);
    pl.ldc = ld.ldc;
    return pl;
}
} // namespace

// ------------------------------------------------------------------------------------ launches

void zt_cu_gemm_set_precision(zt_cu_gemm *g, int prec) { g->prec = prec; }

unsigned long long zt_cu_packed_elems(void) { return g_packed_elems; }
unsigned long long zt_cu_gemm16_elems(void) { return g_h16_max[0] + g_h16_max[1] + g_h16_max[2]; }

void zt_cu_matmul(zt_cu_gemm *g, cudaStream_t s, float *c, const float *a, const float *b, int M, int N, int K, int ta,
                  int tb, float alpha, float beta) {
    if (M <= 0 || N <= 0) return;
    gemm(g, s, c, a, b, nullptr, M, N, K, ta, tb, alpha, beta, dense_ld(M, N, K, ta, tb));
}

void zt_cu_matmul_ld(zt_cu_gemm *g, cudaStream_t s, float *c, const float *a, const float *b, int M, int N, int K,
                     int ta, int tb, float alpha, float beta, int lda, int ldb, int ldc) {
    if (M <= 0 || N <= 0) return;
    ZT_ASSERT(lda >= (ta ? M : K) && ldb >= (tb ? K : N) && ldc >= N);
    gemm(g, s, c, a, b, nullptr, M, N, K, ta, tb, alpha, beta, GemmLd{lda, ldb, ldc, 0, 0, 0, 0});
}

void zt_cu_matmul16(zt_cu_gemm *g, cudaStream_t s, void *c, int c16, const void *a, int a16, const float *b, int M,
                    int N, int K, int ta, int tb, const uint16_t *b_words, float beta) {
    if (M <= 0 || N <= 0) return;
    ZT_ASSERT((g->prec == ZT_PREC_BF16 || g->prec == ZT_PREC_FP16) && K > 0);
    ZT_ASSERT(beta == 0.0f || (beta == 1.0f && !c16));
    gemm(g, s, c16 ? nullptr : static_cast<float *>(c), a16 ? nullptr : static_cast<const float *>(a), b, nullptr, M,
         N, K, ta, tb, 1.0f, beta, dense_ld(M, N, K, ta, tb), a16 ? static_cast<const uint16_t *>(a) : nullptr, b_words,
         c16 ? static_cast<uint16_t *>(c) : nullptr);
}

void zt_cu_linear_fwd(zt_cu_gemm *g, cudaStream_t s, float *out, const float *inp, const float *w, const float *bias,
                      int N, int C, int OC, const uint16_t *inp_words, const uint16_t *w_words, uint16_t *out_words) {
    if (N <= 0 || OC <= 0) return;
    if (g->prec == ZT_PREC_FP32 || C == 0) inp_words = w_words = nullptr;
    ZT_ASSERT(!out_words || (g->prec != ZT_PREC_FP32 && C > 0));
    gemm(g, s, out, inp, w, bias, N, OC, C, 0, 0, 1.0f, 0.0f, dense_ld(N, OC, C, 0, 0), inp_words, w_words, out_words);
}

size_t zt_cu_linear_bwd_scratch(int N, int OC) {
    if (N <= 0 || OC <= 0) return 0;
    return (size_t)bias_parts(N) * OC * sizeof(float);
}

void zt_cu_linear_bwd(zt_cu_gemm *g, cudaStream_t s, float *dinp, float *dw, float *dbias, const float *dout,
                      const float *inp, const float *w, int N, int C, int OC, int accumulate_dinp, void *scratch,
                      unsigned *tickets, const uint16_t *inp_words, const uint16_t *w_words,
                      const uint16_t *dout_words, const uint16_t **keep_dout16, const uint16_t **keep_w16) {
    if (C <= 0 || OC <= 0) return;
    const bool keep = keep_dout16 != nullptr;
    ZT_ASSERT(!keep || (keep_w16 && N > 0 && g->prec != ZT_PREC_FP32 && !accumulate_dinp));
    // dinp(N, C) = dout(N, OC) @ w(C, OC)^T; dw(C, OC) = inp(N, C)^T @ dout(N, OC). bf16 / fp16: dout (dense (N, OC)
    // in both products), w and inp packed in one launch for the two
    // dbias: the column sums of dout (colsum_kernel), in the packing's launch when there is one
    // dbias from dout's words when they are given (the same values: 2 bytes an element read instead of 4)
    ColsumJob cj = {dbias, static_cast<float *>(scratch), tickets, dout, N, OC, (int)blocks_for(OC, kColThreads),
                    N > 0 ? bias_parts(N) : 0, g->prec != ZT_PREC_FP32 ? dout_words : nullptr, g->prec};
    if (dbias && N > 0)
        ZT_ASSERT(scratch != nullptr && tickets != nullptr && cj.nparts <= 65535 && cj.cblocks <= kCuTickets);
    bool dbias_done = !dbias;
    const uint16_t *dout16 = nullptr, *w16 = nullptr, *inp16 = nullptr;
    if (N > 0 && g->prec != ZT_PREC_FP32) {
        const uint16_t *pd = dout_words, *pw = w_words, *pi = inp_words;
        Packs pk;
        if (!pd) {
            uint16_t *p = h16_buf(g, 2, (size_t)N * OC);
            pk.add(p, dout, N, OC, OC);
            pd = p;
        }
        if (!pw) {
            uint16_t *p = h16_buf(g, 1, (size_t)C * OC);
            pk.add(p, w, C, OC, OC);
            pw = p;
        }
        if (!pi) {
            uint16_t *p = h16_buf(g, 0, (size_t)N * C);
            pk.add(p, inp, N, C, C);
            pi = p;
        }
        if (dbias) {
            const unsigned npack = pack_blocks(pk.job.start[pk.job.n]);
            ZT_LAUNCH(pack16_colsum_kernel, npack + (unsigned)(cj.cblocks * cj.nparts), kPackThreads, 0, s, pk.job,
                      g->prec, cj, npack);
            GM_LAUNCH_CHECK("pack16_colsum_kernel");
            dbias_done = true;
        } else {
            pk.launch(s, g->prec);
        }
        dout16 = pd, w16 = pw, inp16 = pi;
    }
    if (keep) { // dinp's product is the caller's
        *keep_dout16 = dout16;
        *keep_w16 = w16;
    } else if (N > 0) {
        gemm(g, s, dinp, dout, w, nullptr, N, C, OC, 0, 1, 1.0f, accumulate_dinp ? 1.0f : 0.0f,
             dense_ld(N, C, OC, 0, 1), dout16, w16);
    }
    gemm(g, s, dw, inp, dout, nullptr, C, OC, N, 1, 0, 1.0f, 0.0f, dense_ld(C, OC, N, 1, 0), inp16, dout16);
    if (dbias_done) return;
    if (N <= 0) {
        ZT_LAUNCH(colsum_zero_kernel, blocks_for(OC, kColThreads), kColThreads, 0, s, dbias, OC);
        GM_LAUNCH_CHECK("colsum_zero_kernel");
        return;
    }
    ZT_LAUNCH(colsum_kernel, dim3((unsigned)cj.cblocks, (unsigned)cj.nparts), kColThreads, 0, s, cj);
    GM_LAUNCH_CHECK("colsum_kernel");
}

void zt_cu_gemm_strided(zt_cu_gemm *g, cudaStream_t s, float *c, const float *a, const float *b, int M, int N, int K,
                        int ta, int tb, int lda, int ldb, int ldc, long long sa, long long sb, long long sc, int batch,
                        float alpha, float beta) {
    if (M <= 0 || N <= 0 || batch <= 0) return;
    gemm_batched(g, s, c, a, b, M, N, K, ta, tb, GemmLd{lda, ldb, ldc, 0, sa, sb, sc}, batch, alpha, beta);
}

void zt_cu_gemv(cudaStream_t s, float *y, const float *x, const float *w, const float *bias, int C, int OC, int w_t) {
    if (OC <= 0) return;
    if (w_t) {
        ZT_LAUNCH(gemv_t_kernel, blocks_for(OC, kGemvWarps), 32 * kGemvWarps, 0, s, y, x, w, bias, C, OC);
        GM_LAUNCH_CHECK("gemv_t_kernel");
    } else {
        ZT_LAUNCH(gemv_n_kernel, blocks_for(OC, kColThreads), kColThreads, 0, s, y, x, w, bias, C, OC);
        GM_LAUNCH_CHECK("gemv_n_kernel");
    }
}

} // namespace ZT_CU_NS
