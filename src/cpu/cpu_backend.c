/* cpu_backend.c — cpu backend lifecycle, memory, BLAS kernel choice, matmul and linear layers (and the column sums
 * of a bias gradient, which the encoders' bias_grad shares). Element-wise and reduction ops live in cpu_ops.c,
 * attention in cpu_attention.c, the Llama and encoder families' ops in cpu_llama.c and cpu_encoder.c. */
#include "cpu/cpu_backend.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

#ifdef ZT_BLAS_BLIS
#include <blis.h>
#endif
#include <cblas.h>

static char g_blas_name[96] = "unknown";
static int g_blas_threads = 1;

const char *zt_cpu_blas_name(void) { return g_blas_name; }

static void choose_blas_kernels(void) {
#ifdef ZT_BLAS_BLIS
    /* Debian's BLIS does not recognise recent CPUs and falls back to generic kernels (~5x slower).
       BLIS_ARCH_TYPE holds the numeric arch_t id; pick it from the CPU's features unless set. */
    if (!getenv("BLIS_ARCH_TYPE")) {
        __builtin_cpu_init();
        int id = -1;
        if (__builtin_cpu_supports("avx512f")) id = BLIS_ARCH_SKX;
        else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
            id = __builtin_cpu_is("amd") ? BLIS_ARCH_ZEN : BLIS_ARCH_HASWELL;
        if (id >= 0) {
            char v[16];
            snprintf(v, sizeof v, "%d", id);
            setenv("BLIS_ARCH_TYPE", v, 1);
        }
    }
    bli_init();
    snprintf(g_blas_name, sizeof g_blas_name, "blis %s (%s kernels)", bli_info_get_version_str(),
             bli_arch_string(bli_arch_query_id()));
#else
    snprintf(g_blas_name, sizeof g_blas_name, "cblas (openblas)");
#endif
}

static void set_blas_threads(int n) {
#ifdef ZT_BLAS_BLIS
    bli_thread_set_num_threads(n);
    g_blas_threads = n;
#else
    (void)n;
#endif
}

static void *cpu_alloc(zt_backend *be, size_t bytes) {
    (void)be;
    void *p = NULL;
    size_t n = (bytes + 63) & ~(size_t)63;
    if (posix_memalign(&p, 64, n ? n : 64) != 0 || !p)
        zt_panic(__FILE__, __LINE__, "out of host memory allocating %zu bytes", bytes);
    memset(p, 0, n);
    return p;
}
static void cpu_free(zt_backend *be, void *p) { (void)be; free(p); }
static void cpu_copy(zt_backend *be, void *dst, const void *src, size_t bytes) {
    (void)be;
    if (dst != src && bytes) memcpy(dst, src, bytes);
}
static void cpu_zero(zt_backend *be, void *dst, size_t bytes) { (void)be; memset(dst, 0, bytes); }
static void cpu_sync(zt_backend *be) { (void)be; }

static void cpu_destroy(zt_backend *be) { free(be); }

static void cpu_describe(zt_backend *be, char *buf, size_t n) {
    snprintf(buf, n, "cpu: %s, %d thread%s", g_blas_name, be->threads, be->threads == 1 ? "" : "s");
}

/* Row-major c(M, N) = alpha * op(a) @ op(b) + beta * c.
 * With BLIS the call goes through bli_sgemm_ex with our own runtime: only the ic loop (rows of c)
 * is split over threads and the small-matrix ("sup") path is off. BLIS's defaults also split
 * columns, and its sup kernels then compute edge columns with a different FMA order depending on
 * where thread boundaries fall: bits changed with 1 / 2 / 3 threads whenever N % 8 != 0
 * (tests/unit/cpu/test_ops.c). Splitting rows only, every element is computed the same way. */
/* with row strides lda, ldb, ldc (floats between the rows of the stored a, b, c) */
static void sgemm_rm_ld(int ta, int tb, int M, int N, int K, float alpha, const float *a, int lda, const float *b,
                        int ldb, float beta, float *c, int ldc) {
#ifdef ZT_BLAS_BLIS
    rntm_t rntm = BLIS_RNTM_INITIALIZER;
    bli_rntm_set_ways(1, 1, g_blas_threads, 1, 1, &rntm);
    bli_rntm_disable_l3_sup(&rntm);
    bli_sgemm_ex(ta ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE, tb ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE, M, N, K, &alpha,
                 (float *)a, lda, 1, (float *)b, ldb, 1, &beta, c, ldc, 1, NULL, &rntm);
#else
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, alpha, a, lda,
                b, ldb, beta, c, ldc);
#endif
}

/* packed operands: a is stored (K, M) when transposed, else (M, K); likewise b */
static void sgemm_rm(int ta, int tb, int M, int N, int K, float alpha, const float *a, const float *b, float beta,
                     float *c) {
    sgemm_rm_ld(ta, tb, M, N, K, alpha, a, ta ? M : K, b, tb ? K : N, beta, c, N);
}

static void cpu_matmul(zt_backend *be, float *c, const float *a, const float *b, int M, int N, int K,
                       int ta, int tb, float alpha, float beta) {
    (void)be;
    sgemm_rm(ta, tb, M, N, K, alpha, a, b, beta, c);
}

static void cpu_matmul_ld(zt_backend *be, float *c, const float *a, const float *b, int M, int N, int K, int ta,
                          int tb, float alpha, float beta, int lda, int ldb, int ldc) {
    (void)be;
    sgemm_rm_ld(ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
}

static void cpu_linear_fwd(zt_backend *be, float *out, const float *inp, const float *w, const float *bias,
                           int N, int C, int OC) {
    (void)be;
    float beta = 0.0f;
    if (bias) {
#pragma omp parallel for schedule(static)
        for (int n = 0; n < N; n++) memcpy(out + (size_t)n * OC, bias, (size_t)OC * sizeof(float));
        beta = 1.0f;
    }
    sgemm_rm(0, 0, N, OC, C, 1.0f, inp, w, beta, out);
}

static void cpu_linear_bwd(zt_backend *be, float *dinp, float *dw, float *dbias, const float *dout,
                           const float *inp, const float *w, int N, int C, int OC, int accumulate_dinp) {
    (void)be;
    /* dinp(N, C) = dout(N, OC) @ w(C, OC)^T */
    sgemm_rm(0, 1, N, C, OC, 1.0f, dout, w, accumulate_dinp ? 1.0f : 0.0f, dinp);
    /* dw(C, OC) = inp(N, C)^T @ dout(N, OC) */
    sgemm_rm(1, 0, C, OC, N, 1.0f, inp, dout, 0.0f, dw);
    if (dbias) zt_cpu_colsum(dbias, dout, N, OC);
}

static zt_backend_i g_cpu_i;

zt_backend *zt_cpu_backend_create(int threads) {
    choose_blas_kernels();
    if (threads > 0) omp_set_num_threads(threads);
    else threads = omp_get_max_threads();
    set_blas_threads(threads);
    if (!g_cpu_i.name) {
        g_cpu_i.name = "cpu";
        g_cpu_i.mem = ZT_MEM_HOST;
        g_cpu_i.destroy = cpu_destroy;
        g_cpu_i.describe = cpu_describe;
        g_cpu_i.alloc = cpu_alloc;
        g_cpu_i.free = cpu_free;
        g_cpu_i.to_device = cpu_copy;
        g_cpu_i.to_host = cpu_copy;
        g_cpu_i.copy = cpu_copy;
        g_cpu_i.zero = cpu_zero;
        g_cpu_i.matmul_ld = cpu_matmul_ld;
        g_cpu_i.sync = cpu_sync;
        g_cpu_i.matmul = cpu_matmul;
        g_cpu_i.linear_fwd = cpu_linear_fwd;
        g_cpu_i.linear_bwd = cpu_linear_bwd;
        zt_cpu_fill_ops(&g_cpu_i);
        zt_cpu_fill_attention(&g_cpu_i);
        zt_cpu_fill_decode(&g_cpu_i);
        zt_cpu_fill_llama(&g_cpu_i);
        zt_cpu_fill_encoder(&g_cpu_i);
        zt_cpu_fill_store16(&g_cpu_i);
    }
    zt_backend *be = zt_calloc(1, sizeof *be);
    be->i = &g_cpu_i;
    be->threads = threads;
    return be;
}

