/* count_device.c — the "count" device: backend slots that do nothing on fake device addresses, and a 1-rank
 * communicator that moves nothing, for `ztrain estimate`'s launch and byte counts without a GPU (backend_count.h;
 * the counting wrapper is backend_count.c). */
#include "core/diag/backend_count.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

/* ------------------------------------------------------------------ the count device: slots that do nothing */

typedef struct null_ctx { uintptr_t next; } null_ctx;

/* distinct, 256-byte aligned addresses in a range no host allocation uses; never dereferenced */
static void *n_alloc(zt_backend *be, size_t bytes) {
    null_ctx *x = be->ctx;
    void *p = (void *)x->next;
    x->next += ((bytes ? bytes : 1) + 255) & ~(uintptr_t)255;
    return p;
}
static void n_free(zt_backend *be, void *p) { (void)be; (void)p; }
static void n_destroy(zt_backend *be) {
    zt_backend_count_end(be);
    free(be->ctx);
    free(be);
}
static void n_describe(zt_backend *be, char *buf, size_t n) {
    (void)be;
    snprintf(buf, n, "count: no compute, the CUDA backend's launches and device-memory bytes counted per slot");
}
static void n_to_device(zt_backend *be, void *d, const void *s, size_t n) { (void)be; (void)d; (void)s; (void)n; }
/* the host reads zeros: losses 0, a zero gradient norm (finite: the update runs) */
static void n_to_host(zt_backend *be, void *d, const void *s, size_t n) { (void)be; (void)s; memset(d, 0, n); }
static void n_copy(zt_backend *be, void *d, const void *s, size_t n) { (void)be; (void)d; (void)s; (void)n; }
static void n_zero(zt_backend *be, void *d, size_t n) { (void)be; (void)d; (void)n; }
static void n_sync(zt_backend *be) { (void)be; }
static void n_matmul(zt_backend *be, float *c, const float *a, const float *b, int M, int N, int K, int ta, int tb,
                     float al, float bt) { (void)be; (void)c; (void)a; (void)b; (void)M; (void)N; (void)K; (void)ta;
                     (void)tb; (void)al; (void)bt; }
static void n_matmul_ld(zt_backend *be, float *c, const float *a, const float *b, int M, int N, int K, int ta, int tb,
                        float al, float bt, int lda, int ldb, int ldc) {
    (void)lda; (void)ldb; (void)ldc;
    n_matmul(be, c, a, b, M, N, K, ta, tb, al, bt);
}
/* the remaining slots are never looked at by the counting wrapper's callees: one no-op per signature */
static void n_v7(zt_backend *be, float *a, const float *b, const float *c, const float *d, int e, int f, int g) {
    (void)be; (void)a; (void)b; (void)c; (void)d; (void)e; (void)f; (void)g; }
static void n_lbwd(zt_backend *be, float *a, float *b, float *c, const float *d, const float *e, const float *f, int g,
                   int h, int i, int j) { (void)be; (void)a; (void)b; (void)c; (void)d; (void)e; (void)f; (void)g;
                   (void)h; (void)i; (void)j; }
static void n_lnf(zt_backend *be, float *a, float *b, float *c, const float *d, const float *e, const float *f, int g,
                  int h, float i) { (void)be; (void)a; (void)b; (void)c; (void)d; (void)e; (void)f; (void)g; (void)h;
                  (void)i; }
static void n_lnb(zt_backend *be, float *a, float *b, float *c, const float *d, const float *e, const float *f,
                  const float *g, const float *h, int i, int j) { (void)be; (void)a; (void)b; (void)c; (void)d;
                  (void)e; (void)f; (void)g; (void)h; (void)i; (void)j; }
static void n_rmsf(zt_backend *be, float *a, float *b, const float *c, const float *d, int e, int f, float g) {
    (void)be; (void)a; (void)b; (void)c; (void)d; (void)e; (void)f; (void)g; }
static void n_rmsb(zt_backend *be, float *a, float *b, const float *c, const float *d, const float *e, const float *f,
                   int g, int h) { (void)be; (void)a; (void)b; (void)c; (void)d; (void)e; (void)f; (void)g; (void)h; }
static void n_rope(zt_backend *be, float *a, const float *b, int c, int d, int e, int f, int g, int h, int i) {
    (void)be; (void)a; (void)b; (void)c; (void)d; (void)e; (void)f; (void)g; (void)h; (void)i; }
static void n_swf(zt_backend *be, float *a, const float *b, int c, int d) { (void)be; (void)a; (void)b; (void)c; (void)d; }
static void n_swb(zt_backend *be, float *a, const float *b, const float *c, int d, int e) {
    (void)be; (void)a; (void)b; (void)c; (void)d; (void)e; }
static void n_attf(zt_backend *be, float *a, float *b, const float *c, int d, int e, int f, int g, int h) {
    (void)be; (void)a; (void)b; (void)c; (void)d; (void)e; (void)f; (void)g; (void)h; }
static void n_attb(zt_backend *be, float *a, float *b, const float *c, const float *d, const float *e, int f, int g,
                   int h, int i, int j) { (void)be; (void)a; (void)b; (void)c; (void)d; (void)e; (void)f; (void)g;
                   (void)h; (void)i; (void)j; }
static void n_dec(zt_backend *be, float *a, float *b, float *c, const float *d, int e, int f, int g, int h, int i) {
    (void)be; (void)a; (void)b; (void)c; (void)d; (void)e; (void)f; (void)g; (void)h; (void)i; }
static void n_gemv(zt_backend *be, float *a, const float *b, const float *c, const float *d, int e, int f, int g) {
    (void)be; (void)a; (void)b; (void)c; (void)d; (void)e; (void)f; (void)g; }
static void n_e2(zt_backend *be, float *a, const float *b, size_t n) { (void)be; (void)a; (void)b; (void)n; }
static void n_e3(zt_backend *be, float *a, const float *b, const float *c, size_t n) {
    (void)be; (void)a; (void)b; (void)c; (void)n; }
static void n_embf(zt_backend *be, float *a, const int32_t *b, const float *c, const float *d, int e, int f, int g) {
    (void)be; (void)a; (void)b; (void)c; (void)d; (void)e; (void)f; (void)g; }
static void n_embb(zt_backend *be, float *a, float *b, const float *c, const int32_t *d, int e, int f, int g) {
    (void)be; (void)a; (void)b; (void)c; (void)d; (void)e; (void)f; (void)g; }
static void n_xent(zt_backend *be, float *a, float *b, const int32_t *c, int d, int e, int f, float g,
                   const float *h) {
    (void)be; (void)a; (void)b; (void)c; (void)d; (void)e; (void)f; (void)g; (void)h; }
static void n_adamw(zt_backend *be, float *a, const float *b, float *c, float *d, size_t n, float e, float f, float g,
                    float h, float i, float j, float k, float l) { (void)be; (void)a; (void)b; (void)c; (void)d;
                    (void)n; (void)e; (void)f; (void)g; (void)h; (void)i; (void)j; (void)k; (void)l; }
static void n_adamw_multi(zt_backend *be, float *a, const float *b, float *c, float *d, const zt_adamw_seg *s, int n,
                          float e, float f, float g, const float *h) { (void)be; (void)a; (void)b; (void)c; (void)d;
                          (void)s; (void)n; (void)e; (void)f; (void)g; (void)h; }
static void n_clip(zt_backend *be, float *h, double *nm, const double *s, size_t n, double c, int k) {
    (void)be; (void)h; (void)nm; (void)s; (void)n; (void)c; (void)k; }
static void n_sumsq(zt_backend *be, double *a, const float *b, size_t n, size_t c) {
    (void)be; (void)a; (void)b; (void)n; (void)c; }
static void n_round(zt_backend *be, float *a, size_t n, int p) { (void)be; (void)a; (void)n; (void)p; }
static void n_pack(zt_backend *be, void *a, const float *b, size_t n, int p) { (void)be; (void)a; (void)b; (void)n; (void)p; }
static int n_pack_ahead(zt_backend *be, void *w, const float *x, size_t n) {
    (void)be; (void)w; (void)x; (void)n;
    return 0; /* the counting wrapper decides, as the CUDA backend would */
}
static int n_unpack_lazy(zt_backend *be, float *a, const void *b, size_t n, int p) {
    (void)be; (void)a; (void)b; (void)n; (void)p;
    return 1; /* the counting wrapper decides, as the CUDA backend would */
}
static void n_unpack(zt_backend *be, float *a, const void *b, size_t n, int p) {
    (void)be; (void)a; (void)b; (void)n; (void)p; }
static void n_dropout(zt_backend *be, float *a, const float *b, size_t n, float p, uint64_t s, const uint64_t *m) {
    (void)be; (void)a; (void)b; (void)n; (void)p; (void)s; (void)m; }
static void n_dequant(zt_backend *be, float *a, const void *b, int f, size_t r, size_t c) {
    (void)be; (void)a; (void)b; (void)f; (void)r; (void)c; }
static void n_prec(zt_backend *be, int p) { (void)be; (void)p; }
static void n_rln(zt_backend *be, float *a, float *b, float *c, float *d, const float *e, const float *f,
                  const float *g, const float *h, int i, int j, int k, float l) {
    (void)be; (void)a; (void)b; (void)c; (void)d; (void)e; (void)f; (void)g; (void)h; (void)i; (void)j; (void)k;
    (void)l; }
static void n_battf(zt_backend *be, float *a, float *b, const float *c, const int32_t *d, int e, int f, int g, int h,
                    int i) { (void)be; (void)a; (void)b; (void)c; (void)d; (void)e; (void)f; (void)g; (void)h;
                    (void)i; }
static void n_battb(zt_backend *be, float *a, float *b, const float *c, const float *d, const float *e,
                    const int32_t *f, int g, int h, int i, int j, int k) { (void)be; (void)a; (void)b; (void)c; (void)d;
                    (void)e; (void)f; (void)g; (void)h; (void)i; (void)j; (void)k; }
static void n_argmax(zt_backend *be, int32_t *a, const float *b, int c, int d, int e) {
    (void)be; (void)a; (void)b; (void)c; (void)d; (void)e; }
static void n_matmul16(zt_backend *be, void *c, int c16, const void *a, int a16, const float *b, int M, int N, int K,
                       int ta, int tb, int prec, float beta) { (void)be; (void)c; (void)c16; (void)a; (void)a16;
                       (void)b; (void)M; (void)N; (void)K; (void)ta; (void)tb; (void)prec; (void)beta; }
static void n_xent16(zt_backend *be, float *l, void *lg, const int32_t *t, int N, int V, int Vp, float s,
                     const float *sa, int prec) {
    (void)be; (void)l; (void)lg; (void)t; (void)N; (void)V; (void)Vp; (void)s; (void)sa; (void)prec; }
static void n_fattb(zt_backend *be, float *a, float *b, const float *c, const float *d, const float *e, const float *f,
                    int g, int h, int i, int j, int k) { (void)be; (void)a; (void)b; (void)c; (void)d; (void)e; (void)f;
                    (void)g; (void)h; (void)i; (void)j; (void)k; }

/* the same slots as the CUDA backend's (cuda_backend.cu make_i), so the model takes the same paths */
static const zt_backend_i g_null_i = {
    .name = "count", .mem = ZT_MEM_DEVICE, .destroy = n_destroy, .describe = n_describe, .alloc = n_alloc,
    .free = n_free, .to_device = n_to_device, .to_host = n_to_host, .copy = n_copy, .zero = n_zero, .sync = n_sync,
    .matmul = n_matmul, .matmul_ld = n_matmul_ld, .linear_fwd = n_v7, .linear_bwd = n_lbwd, .layernorm_fwd = n_lnf, .residual_layernorm_fwd = n_rln,
    .layernorm_bwd = n_lnb, .rmsnorm_fwd = n_rmsf, .rmsnorm_bwd = n_rmsb, .rope = n_rope, .swiglu_fwd = n_swf,
    .swiglu_bwd = n_swb, .attention_fwd = n_attf, .attention_bwd = n_attb, .attention_decode = n_dec,
    .gemv = n_gemv, .gelu_fwd = n_e2, .gelu_bwd = n_e3, .add = n_e3, .embed_fwd = n_embf, .embed_bwd = n_embb,
    .softmax_xent = n_xent, .adamw = n_adamw, .accumulate = n_e2, .sumsq_chunks = n_sumsq, .clip_scale = n_clip, .round_to = n_round,
    .pack16 = n_pack, .unpack16 = n_unpack, .pack16_ahead = n_pack_ahead, .unpack16_lazy = n_unpack_lazy,
    .dropout = n_dropout, .dequant = n_dequant, .set_precision = n_prec,
    .attention_fused_fwd = n_attf, .attention_fused_bwd = n_fattb, .adamw_multi = n_adamw_multi,
    .attention_bidir_fwd = n_battf, .attention_bidir_bwd = n_battb, .gelu_erf_fwd = n_e2, .gelu_erf_bwd = n_e3,
    .bias_add = n_swf, .bias_grad = n_swf, .argmax_rows = n_argmax, .matmul16 = n_matmul16,
    .softmax_xent16 = n_xent16};

zt_backend *zt_count_null_create(void) {
    zt_backend *be = zt_calloc(1, sizeof *be);
    null_ctx *x = zt_calloc(1, sizeof *x);
    x->next = (uintptr_t)1 << 44; /* 16 TiB: above any heap or mapping of the process (47-bit user space) */
    be->i = &g_null_i;
    be->ctx = x;
    be->threads = 1;
    zt_backend_count_begin(be);
    return be;
}

/* ------------------------------------------------------------------ the count device's communicator */

static void c_destroy(zt_comm *c) { free(c); }
static void c_coll(zt_comm *c, const void *s, void *r, size_t n, zt_dtype t) {
    (void)c; (void)s; (void)r; (void)n; (void)t; zt_backend_count_comm_call(); }
static void c_bcast(zt_comm *c, void *b, size_t n, zt_dtype t, int root) {
    (void)c; (void)b; (void)n; (void)t; (void)root; zt_backend_count_comm_call(); }
static void c_nothing(zt_comm *c) { (void)c; }
static void c_send(zt_comm *c, const void *b, size_t n, zt_dtype t, int p) {
    (void)c; (void)b; (void)n; (void)t; (void)p; zt_backend_count_comm_call(); }
static void c_recv(zt_comm *c, void *b, size_t n, zt_dtype t, int p) {
    (void)c; (void)b; (void)n; (void)t; (void)p; zt_backend_count_comm_call(); }
static void c_reduce(zt_comm *c, const void *s, void *r, size_t n, zt_dtype t, int root) {
    (void)c; (void)s; (void)r; (void)n; (void)t; (void)root; zt_backend_count_comm_call(); }
static zt_comm_event c_record(zt_comm *c) { (void)c; return 1; }
static int c_query(zt_comm *c, zt_comm_event e) { (void)c; (void)e; return 1; }
static void c_wait(zt_comm *c, zt_comm_event e) { (void)c; (void)e; }

static const zt_comm_i g_null_comm_i = {
    .name = "count", .mem = ZT_MEM_DEVICE, .destroy = c_destroy, .all_reduce = c_coll, .reduce_scatter = c_coll,
    .all_gather = c_coll, .all_to_all = c_coll, .broadcast = c_bcast, .barrier = c_nothing, .group_start = c_nothing,
    .send = c_send, .recv = c_recv, .reduce = c_reduce, .group_end = c_nothing, .record = c_record, .query = c_query,
    .wait = c_wait};

zt_comm *zt_count_null_comm_create(zt_backend *be) {
    (void)be;
    zt_comm *c = zt_calloc(1, sizeof *c);
    c->i = &g_null_comm_i;
    c->rank = 0;
    c->size = 1;
    return c;
}
