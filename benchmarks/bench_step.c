/* bench_step.c — training-step throughput on one rank: median ms/step, tokens/s, achieved
 * GFLOP/s (docs/performance.md), the host's sgemm GFLOP/s measured in the same run with the same
 * BLAS and threads (square and the model's own shapes), their ratio, a per-op time breakdown and
 * peak RSS. `--json` for machines.
 * The denominator "the fastest BLAS on the host" is measured in the same run too, on the same
 * shapes and thread count: ztrain's own BLIS path (bli_sgemm_ex, rows-only threading, sup off: what
 * the step runs), BLIS through plain cblas_sgemm (its default threading and sup path), OpenBLAS
 * (dlopen libopenblas.so.0, openblas_set_num_threads) and oneDNN's dnnl_sgemm (dlopen libdnnl.so.2,
 * OpenMP threads; Debian's python3-torch depends on it). A library that is not installed is "n/a".
 * The libraries are opened RTLD_LOCAL | RTLD_DEEPBIND so their internal calls never bind to BLIS's
 * exported BLAS symbols.
 *   bench_step -c inputs/gpt2-124m.cfg --B 4 --T 64 [--steps 10] [--threads 2] [--json] */
#define _GNU_SOURCE   /* RTLD_DEEPBIND */
#include <dlfcn.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "core/diag/backend_prof.h"
#include "cmd/cli.h"
#include "iface/comm.h"
#include "core/dist/backend_factory.h"
#include "util/util.h"
#include "core/optim/step.h"
#include "core/dist/zero.h"

#ifdef ZT_BLAS_BLIS
#include <cblas.h>
#endif

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ---- sgemm on every BLAS installed ---- */

enum { IMPL_ZTRAIN, IMPL_BLIS_CBLAS, IMPL_OPENBLAS, IMPL_ONEDNN, N_IMPL };
static const char *const impl_names[N_IMPL] = {"ztrain", "blis_cblas", "openblas", "onednn"};

/* cblas_sgemm's signature with the enums as ints (RowMajor 101, NoTrans 111) */
typedef void (*cblas_sgemm_fn)(int, int, int, int, int, int, float, const float *, int, const float *, int, float,
                               float *, int);
/* dnnl_sgemm: row-major, dims int64, returns a status */
typedef int (*dnnl_sgemm_fn)(char, char, int64_t, int64_t, int64_t, float, const float *, int64_t, const float *,
                             int64_t, float, float *, int64_t);

typedef struct blas_set {
    zt_backend *be;
    cblas_sgemm_fn blis_cblas, openblas;
    dnnl_sgemm_fn dnnl;
    char openblas_desc[256], dnnl_desc[64];
    void *h_openblas, *h_dnnl;
} blas_set;

static void blas_open(blas_set *bs, zt_backend *be, int threads) {
    memset(bs, 0, sizeof *bs);
    bs->be = be;
#ifdef ZT_BLAS_BLIS
    /* the backend has set BLIS's global thread count; ways and sup are left to BLIS */
    bs->blis_cblas = (cblas_sgemm_fn)(void (*)(void))cblas_sgemm;
#endif
    snprintf(bs->openblas_desc, sizeof bs->openblas_desc, "n/a");
    snprintf(bs->dnnl_desc, sizeof bs->dnnl_desc, "n/a");
    bs->h_openblas = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (bs->h_openblas) {
        bs->openblas = (cblas_sgemm_fn)dlsym(bs->h_openblas, "cblas_sgemm");
        void (*set_threads)(int) = (void (*)(int))dlsym(bs->h_openblas, "openblas_set_num_threads");
        char *(*corename)(void) = (char *(*)(void))dlsym(bs->h_openblas, "openblas_get_corename");
        char *(*config)(void) = (char *(*)(void))dlsym(bs->h_openblas, "openblas_get_config");
        if (set_threads) set_threads(threads);
        if (!bs->openblas || !set_threads) bs->openblas = NULL;
        else
            snprintf(bs->openblas_desc, sizeof bs->openblas_desc, "%s, %s kernels", config ? config() : "openblas",
                     corename ? corename() : "?");
    }
    bs->h_dnnl = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (bs->h_dnnl) {
        bs->dnnl = (dnnl_sgemm_fn)dlsym(bs->h_dnnl, "dnnl_sgemm");
        typedef struct { int major, minor, patch; const char *hash; unsigned cpu_runtime, gpu_runtime; } dnnl_ver;
        const dnnl_ver *(*ver)(void) = (const dnnl_ver *(*)(void))dlsym(bs->h_dnnl, "dnnl_version");
        if (bs->dnnl && ver)
            snprintf(bs->dnnl_desc, sizeof bs->dnnl_desc, "oneDNN %d.%d.%d", ver()->major, ver()->minor, ver()->patch);
        else if (bs->dnnl) snprintf(bs->dnnl_desc, sizeof bs->dnnl_desc, "oneDNN");
    }
}

static void blas_close(blas_set *bs) {
    if (bs->h_openblas) dlclose(bs->h_openblas);
    if (bs->h_dnnl) dlclose(bs->h_dnnl);
}

static int blas_has(const blas_set *bs, int impl) {
    return impl == IMPL_ZTRAIN || (impl == IMPL_BLIS_CBLAS && bs->blis_cblas) || (impl == IMPL_OPENBLAS && bs->openblas) ||
           (impl == IMPL_ONEDNN && bs->dnnl);
}

/* row-major c(M, N) = a(M, K) @ b(K, N) */
static void blas_sgemm(const blas_set *bs, int impl, int M, int N, int K, const float *a, const float *b, float *c) {
    switch (impl) {
    case IMPL_ZTRAIN: bs->be->i->matmul(bs->be, c, a, b, M, N, K, 0, 0, 1.0f, 0.0f); break;
    case IMPL_BLIS_CBLAS: bs->blis_cblas(101, 111, 111, M, N, K, 1.0f, a, K, b, N, 0.0f, c, N); break;
    case IMPL_OPENBLAS: bs->openblas(101, 111, 111, M, N, K, 1.0f, a, K, b, N, 0.0f, c, N); break;
    case IMPL_ONEDNN: ZT_ASSERT(bs->dnnl('N', 'N', M, N, K, 1.0f, a, K, b, N, 0.0f, c, N) == 0); break;
    default: ZT_ASSERT(0);
    }
}

/* GFLOP/s of each available BLAS on one shape, 0 for those not installed: one warm-up call each, then
   5 rounds that call every BLAS once in turn, best call kept, so that a burst of other work on the
   machine hits every BLAS alike rather than one of them. Between two BLAS a 0.2 s pause lets the
   previous one's worker threads stop spinning (OpenBLAS's spin for ~2^28 cycles after a call, OpenMP's
   for a while too) so they do not take cores from the next. */
static void gemm_gflops(const blas_set *bs, int M, int N, int K, double out[N_IMPL]) {
    zt_backend *be = bs->be;
    float *a = be->i->alloc(be, (size_t)M * K * 4), *b = be->i->alloc(be, (size_t)K * N * 4);
    float *c = be->i->alloc(be, (size_t)M * N * 4);
    for (size_t i = 0; i < (size_t)M * K; i++) a[i] = (float)(i % 13) * 0.01f;
    for (size_t i = 0; i < (size_t)K * N; i++) b[i] = (float)(i % 7) * 0.01f;
    const struct timespec pause = {0, 200 * 1000 * 1000};
    double best[N_IMPL];
    for (int impl = 0; impl < N_IMPL; impl++) best[impl] = 1e30;
    for (int round = 0; round < 6; round++)
        for (int impl = 0; impl < N_IMPL; impl++) {
            if (!blas_has(bs, impl)) continue;
            nanosleep(&pause, NULL);
            double t0 = zt_now();
            blas_sgemm(bs, impl, M, N, K, a, b, c);
            double dt = zt_now() - t0;
            if (round && dt < best[impl]) best[impl] = dt;   /* round 0 warms up */
        }
    for (int impl = 0; impl < N_IMPL; impl++)
        out[impl] = blas_has(bs, impl) ? 2.0 * M * (double)N * K / best[impl] * 1e-9 : 0;
    be->i->free(be, a);
    be->i->free(be, b);
    be->i->free(be, c);
}

/* step.h's batch source: the same random tokens every micro-batch */
typedef struct fixed_batch { const int32_t *tokens, *targets; size_t n; } fixed_batch;
static void bench_batch(void *ctx, long step, int j, int32_t *tokens, int32_t *targets) {
    (void)step; (void)j;
    const fixed_batch *fb = ctx;
    memcpy(tokens, fb->tokens, fb->n * sizeof(int32_t));
    memcpy(targets, fb->targets, fb->n * sizeof(int32_t));
}

/* a benchmark run's figures, and the sgemm of every BLAS on the step's shapes */
enum { SH_SQ, SH_FC, SH_QKV, SH_HEAD, N_SH };
static const char *const sh_names[N_SH] = {"square", "fc", "qkv", "lm_head"};
typedef struct report {
    const char *config, *desc;
    size_t params;
    int B, T, threads;
    double ms, tok_s, gflops;      /* median ms per step */
    long rss_kb;
    int shp[N_SH][3];
    double g[N_SH][N_IMPL];        /* GFLOP/s per shape and BLAS */
    double peak, best;             /* peak: ztrain's path over shapes; best: every BLAS over shapes */
    int best_impl, best_sh;
    const blas_set *bs;
    int np;                        /* the op breakdown of one timed step (tp seconds) */
    const zt_prof_entry *pe;
    double tp;
} report;

static void print_json(const report *r) {
    printf("{\"config\": \"%s\", \"params\": %zu, \"B\": %d, \"T\": %d, \"threads\": %d, \"blas\": \"%s\", "
           "\"ms_per_step\": %.4f, \"tokens_per_s\": %.2f, \"gflops\": %.2f, \"sgemm_peak_gflops\": %.2f, "
           "\"sgemm_square_gflops\": %.2f, \"frac_peak\": %.4f, \"best_sgemm_gflops\": %.2f, "
           "\"best_sgemm_blas\": \"%s\", \"best_sgemm_shape\": \"%s\", \"frac_best\": %.4f, "
           "\"peak_rss_bytes\": %ld, \"openblas\": \"%s\", \"onednn\": \"%s\", \"sgemm\": {",
           r->config, r->params, r->B, r->T, r->threads, r->desc, r->ms,
           r->tok_s, r->gflops, r->peak, r->g[SH_SQ][IMPL_ZTRAIN], r->gflops / r->peak, r->best, impl_names[r->best_impl], sh_names[r->best_sh],
           r->gflops / r->best, r->rss_kb * 1024L, r->bs->openblas_desc, r->bs->dnnl_desc);
    for (int k = 0; k < N_SH; k++) {
        printf("%s\"%s\": {\"M\": %d, \"N\": %d, \"K\": %d", k ? ", " : "", sh_names[k], r->shp[k][0], r->shp[k][1],
               r->shp[k][2]);
        for (int impl = 0; impl < N_IMPL; impl++) {
            if (blas_has(r->bs, impl)) printf(", \"%s\": %.2f", impl_names[impl], r->g[k][impl]);
            else printf(", \"%s\": null", impl_names[impl]);
        }
        printf("}");
    }
    printf("}, \"breakdown\": {");
    for (int i = 0; i < r->np; i++) printf("%s\"%s\": %.5f", i ? ", " : "", r->pe[i].name, r->pe[i].seconds);
    printf("}}\n");
}

static void print_text(const report *r) {
    printf("# ztrain step benchmark: %s, %d thread%s, %s\n", r->config,
           r->threads, r->threads == 1 ? "" : "s", r->desc);
    printf("# %10s %4s %5s %9s %9s %9s %11s %10s %11s %10s %9s\n", "params", "B", "T", "ms/step", "tokens/s",
           "GFLOP/s", "sgemm_peak", "frac_peak", "best_sgemm", "frac_best", "rss_MB");
    printf("# %10s %4s %5s %9s %9s %9s %11s %10s %11s %10s %9s\n", "", "", "", "(ms)", "(tok/s)", "(GFLOP/s)",
           "(GFLOP/s)", "", "(GFLOP/s)", "", "(MB)");
    printf("  %10zu %4d %5d %9.1f %9.1f %9.1f %11.1f %9.1f%% %11.1f %9.1f%% %9.0f\n", r->params, r->B, r->T, r->ms, r->tok_s,
           r->gflops, r->peak, 100 * r->gflops / r->peak, r->best, 100 * r->gflops / r->best, r->rss_kb / 1024.0);
    printf("# sgemm_peak: ztrain's own BLIS path, best shape; best_sgemm: fastest BLAS x shape below (%s, %s)\n",
           impl_names[r->best_impl], sh_names[r->best_sh]);
    printf("# sgemm GFLOP/s, row-major NN, %d thread%s, best of 5 interleaved calls (openblas: %s; onednn: %s)\n", r->threads,
           r->threads == 1 ? "" : "s", r->bs->openblas_desc, r->bs->dnnl_desc);
    printf("#   %-8s %22s", "shape", "M x N x K");
    for (int impl = 0; impl < N_IMPL; impl++) printf(" %10s", impl_names[impl]);
    printf("\n");
    for (int k = 0; k < N_SH; k++) {
        char dims[48];
        snprintf(dims, sizeof dims, "%d x %d x %d", r->shp[k][0], r->shp[k][1], r->shp[k][2]);
        printf("#   %-8s %22s", sh_names[k], dims);
        for (int impl = 0; impl < N_IMPL; impl++) {
            if (blas_has(r->bs, impl)) printf(" %10.1f", r->g[k][impl]);
            else printf(" %10s", "n/a");
        }
        printf("\n");
    }
    printf("# time breakdown of one step (%.1f ms, every op synchronised):\n", r->tp * 1e3);
    for (int i = 0; i < r->np; i++)
        printf("#   %-18s %8.1f ms %5.1f%%  (%ld calls)\n", r->pe[i].name, r->pe[i].seconds * 1e3, 100 * r->pe[i].seconds / r->tp,
               r->pe[i].calls);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    const char *Bs = "4", *Ts = "64", *steps_s = "10", *threads_s = "0", *json = NULL, *stage_s = "0";
    zt_cli_opt opts[] = {{"--B", 1, &Bs}, {"--T", 1, &Ts}, {"--steps", 1, &steps_s}, {"--threads", 1, &threads_s},
                         {"--json", 0, &json}, {"--stage", 1, &stage_s}};
    zt_cli cli;
    zt_config c;
    char err[ZT_ERR_BUF];
    if (zt_cli_parse(&cli, argc, argv, opts, 6, err, sizeof err) || zt_cli_load_config(&cli, &c, err, sizeof err)) {
        fprintf(stderr, "bench_step: %s\n", err);
        return 2;
    }
    const int B = atoi(Bs), T = atoi(Ts), steps = atoi(steps_s);
    int threads = atoi(threads_s);
    c.train.micro_batch = c.train.global_batch = B;
    c.train.seq_len = T;
    /* one rank: stage 0 (the micro-batch gradient is the reduced one) is what `train` runs best */
    c.zero.stage = atoi(stage_s);
    /* the training step as `train` runs it, at a constant learning rate */
    c.train.lr = 1e-4;
    c.train.warmup_steps = 0;
    snprintf(c.train.schedule, sizeof c.train.schedule, "constant");
    zt_backend *be = zt_backend_create("cpu", threads, err, sizeof err);
    zt_comm *comm = be ? zt_comm_create("mpi", be, err, sizeof err) : NULL;
    if (!comm) {
        fprintf(stderr, "bench_step: %s\n", err);
        return 2;
    }
    threads = be->threads;
    char desc[256];
    zt_backend_describe(be, desc, sizeof desc);
    zt_model_shape s;
    zt_model_shape_from_config(&c, &s);
    zt_model m;
    zt_zero z;
    zt_zero_init(&z, &c, &m, be, comm, &s);
    float *h = zt_calloc(z.plan.padded, sizeof(float));
    zt_model_init_weights_host(&m.table, &s, h, 0.02f, 1);
    be->i->to_device(be, m.params, h, z.plan.padded * sizeof(float));
    free(h);
    int32_t *in = zt_malloc((size_t)B * T * 4), *tg = zt_malloc((size_t)B * T * 4);
    zt_rng r;
    zt_rng_seed(&r, 5);
    for (int i = 0; i < B * T; i++) {
        in[i] = (int32_t)(zt_rng_next(&r) % (uint64_t)s.vocab_size);
        tg[i] = (int32_t)(zt_rng_next(&r) % (uint64_t)s.vocab_size);
    }
    fixed_batch fb = {in, tg, (size_t)B * T};
    zt_step st;
    zt_step_init(&st, &m, &z, &c, bench_batch, &fb);
    zt_step_run(&st, 0); /* warm-up: page faults, BLAS packing buffers */
    double *ms = zt_calloc((size_t)steps, sizeof(double));
    for (int i = 0; i < steps; i++) {
        double t0 = zt_now();
        zt_step_run(&st, i + 1);
        ms[i] = (zt_now() - t0) * 1e3;
    }
    qsort(ms, (size_t)steps, sizeof *ms, cmp_d);
    double med = ms[steps / 2];
    /* breakdown: one more step with every op timed */
    zt_backend_prof_begin(be);
    double tp = zt_now();
    zt_step_run(&st, steps + 1);
    tp = zt_now() - tp;
    zt_prof_entry pe[ZT_PROF_MAX_OPS];
    int np = zt_backend_prof_report(pe, ZT_PROF_MAX_OPS);
    zt_backend_prof_end(be);
    /* the step's peak RSS, before the sgemm tests below allocate their own matrices */
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    /* sgemm in the same run, same threads: ztrain's BLIS path (the step's own) and every other BLAS here */
    const int N = B * T, C = s.n_embd;
    report rp = {.config = cli.config_path ? cli.config_path : "defaults", .desc = desc, .params = m.table.total,
                 .B = B, .T = T, .threads = threads, .ms = med, .rss_kb = ru.ru_maxrss, .np = np, .pe = pe, .tp = tp,
                 .shp = {{2048, 2048, 2048}, {N, zt_shape_fc(&s), C}, {N, zt_shape_qkv(&s), C},
                         {N, s.padded_vocab, C}}};
    blas_set bs;
    blas_open(&bs, be, threads);
    rp.bs = &bs;
    for (int k = 0; k < N_SH; k++) gemm_gflops(&bs, rp.shp[k][0], rp.shp[k][1], rp.shp[k][2], rp.g[k]);
    for (int k = 0; k < N_SH; k++)
        for (int impl = 0; impl < N_IMPL; impl++) {
            if (impl == IMPL_ZTRAIN && rp.g[k][impl] > rp.peak) rp.peak = rp.g[k][impl];
            if (rp.g[k][impl] > rp.best) { rp.best = rp.g[k][impl]; rp.best_impl = impl; rp.best_sh = k; }
        }
    rp.tok_s = N / (med * 1e-3);
    rp.gflops = zt_model_flops_per_token(&s, T) * rp.tok_s * 1e-9;
    if (json) print_json(&rp);
    else print_text(&rp);
    blas_close(&bs);
    free(ms);
    free(in);
    free(tg);
    zt_step_free(&st);
    zt_zero_free(&z, &m);
    zt_comm_destroy(comm);
    zt_backend_destroy(be);
    MPI_Finalize();
    return 0;
}
