/* bench_step.c — training-step throughput on one rank: median ms/step, tokens/s, achieved
 * GFLOP/s (README "FLOPs"), this machine's sgemm GFLOP/s measured in the same run with the same
 * BLAS and threads (square and the model's own shapes), their ratio, a per-op time breakdown and
 * peak RSS. `--json` for machines.
 *   bench_step -c inputs/gpt2-124m.cfg --B 4 --T 64 [--steps 10] [--threads 2] [--json] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "backend_prof.h"
#include "cli.h"
#include "comm.h"
#include "cpu/cpu_backend.h"
#include "train.h"
#include "util.h"
#include "zero.h"

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double gemm_gflops(zt_backend *be, int M, int N, int K) {
    float *a = be->i->alloc(be, (size_t)M * K * 4), *b = be->i->alloc(be, (size_t)K * N * 4);
    float *c = be->i->alloc(be, (size_t)M * N * 4);
    for (size_t i = 0; i < (size_t)M * K; i++) a[i] = (float)(i % 13) * 0.01f;
    for (size_t i = 0; i < (size_t)K * N; i++) b[i] = (float)(i % 7) * 0.01f;
    double best = 1e30;
    for (int it = 0; it < 5; it++) {
        double t0 = zt_now();
        be->i->matmul(be, c, a, b, M, N, K, 0, 0, 1.0f, 0.0f);
        double dt = zt_now() - t0;
        if (it && dt < best) best = dt;
    }
    be->i->free(be, a);
    be->i->free(be, b);
    be->i->free(be, c);
    return 2.0 * M * (double)N * K / best * 1e-9;
}

static void one_step(zt_model *m, zt_zero *z, const zt_config *c, const int32_t *in, const int32_t *tg, long t) {
    zt_adamw_hp hp = {(float)c->train.beta1, (float)c->train.beta2, (float)c->train.eps, (float)c->train.weight_decay};
    zt_model_forward_train(m, in, tg, m->max_B, m->max_T, 1.0f);
    zt_model_backward(m, 1.0f);
    zt_zero_reduce(z, m, 0);
    double norm = zt_zero_grad_norm(z, m);
    zt_zero_update(z, m, &hp, t, 1e-4f, zt_clip_factor(norm, 1.0));
    m->be->i->sync(m->be);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    const char *Bs = "4", *Ts = "64", *steps_s = "10", *threads_s = "0", *json = NULL;
    zt_cli_opt opts[] = {{"--B", 1, &Bs}, {"--T", 1, &Ts}, {"--steps", 1, &steps_s}, {"--threads", 1, &threads_s},
                         {"--json", 0, &json}};
    zt_cli cli;
    zt_config c;
    char err[ZT_ERR_BUF];
    if (zt_cli_parse(&cli, argc, argv, opts, 5, err, sizeof err) || zt_cli_load_config(&cli, &c, err, sizeof err)) {
        fprintf(stderr, "bench_step: %s\n", err);
        return 2;
    }
    const int B = atoi(Bs), T = atoi(Ts), steps = atoi(steps_s);
    int threads = atoi(threads_s);
    c.train.micro_batch = c.train.global_batch = B;
    c.train.seq_len = T;
    c.zero.stage = 2;
    zt_backend *be = zt_cpu_backend_create(threads);
    threads = be->threads;
    zt_comm *comm = zt_comm_mpi_create();
    zt_model_shape s;
    zt_shape_from_config(&c, &s);
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
    one_step(&m, &z, &c, in, tg, 1); /* warm-up: page faults, BLAS packing buffers */
    double *ms = zt_calloc((size_t)steps, sizeof(double));
    for (int i = 0; i < steps; i++) {
        double t0 = zt_now();
        one_step(&m, &z, &c, in, tg, i + 2);
        ms[i] = (zt_now() - t0) * 1e3;
    }
    qsort(ms, (size_t)steps, sizeof *ms, cmp_d);
    double med = ms[steps / 2];
    /* breakdown: one more step with every op timed */
    zt_backend_prof_begin(be);
    double tp = zt_now();
    one_step(&m, &z, &c, in, tg, steps + 2);
    tp = zt_now() - tp;
    zt_prof_entry pe[ZT_PROF_MAX_OPS];
    int np = zt_backend_prof_report(pe, ZT_PROF_MAX_OPS);
    zt_backend_prof_end(be);
    /* sgemm in the same run, same BLAS and threads */
    const int N = B * T, C = s.n_embd;
    double g_sq = gemm_gflops(be, 2048, 2048, 2048);
    double g_fc = gemm_gflops(be, N, 4 * C, C);
    double g_qkv = gemm_gflops(be, N, 3 * C, C);
    double g_head = gemm_gflops(be, N, s.padded_vocab, C);
    double peak = g_sq;
    if (g_fc > peak) peak = g_fc;
    if (g_qkv > peak) peak = g_qkv;
    if (g_head > peak) peak = g_head;
    double fpt = zt_flops_per_token(&s, T);
    double tok_s = N / (med * 1e-3);
    double gflops = fpt * tok_s * 1e-9;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    if (json) {
        printf("{\"config\": \"%s\", \"params\": %zu, \"B\": %d, \"T\": %d, \"threads\": %d, \"blas\": \"%s\", "
               "\"ms_per_step\": %.4f, \"tokens_per_s\": %.2f, \"gflops\": %.2f, \"sgemm_peak_gflops\": %.2f, "
               "\"sgemm_square_gflops\": %.2f, \"frac_peak\": %.4f, \"peak_rss_bytes\": %ld, \"breakdown\": {",
               cli.config_path ? cli.config_path : "defaults", m.table.total, B, T, threads, zt_cpu_blas_name(), med,
               tok_s, gflops, peak, g_sq, gflops / peak, ru.ru_maxrss * 1024L);
        for (int i = 0; i < np; i++) printf("%s\"%s\": %.5f", i ? ", " : "", pe[i].name, pe[i].seconds);
        printf("}}\n");
    } else {
        printf("# ztrain step benchmark: %s, %d thread%s, %s\n", cli.config_path ? cli.config_path : "defaults",
               threads, threads == 1 ? "" : "s", zt_cpu_blas_name());
        printf("# %10s %4s %5s %9s %9s %9s %11s %10s %9s\n", "params", "B", "T", "ms/step", "tokens/s", "GFLOP/s",
               "sgemm_peak", "frac_peak", "rss_MB");
        printf("  %10zu %4d %5d %9.1f %9.1f %9.1f %11.1f %9.1f%% %9.0f\n", m.table.total, B, T, med, tok_s, gflops,
               peak, 100 * gflops / peak, ru.ru_maxrss / 1024.0);
        printf("# sgemm GFLOP/s: 2048^3 %.1f | (%d x %d x %d) %.1f | (%d x %d x %d) %.1f | lm head (%d x %d x %d) %.1f\n",
               g_sq, N, 4 * C, C, g_fc, N, 3 * C, C, g_qkv, N, s.padded_vocab, C, g_head);
        printf("# time breakdown of one step (%.1f ms, every op synchronised):\n", tp * 1e3);
        for (int i = 0; i < np; i++)
            printf("#   %-18s %8.1f ms %5.1f%%  (%ld calls)\n", pe[i].name, pe[i].seconds * 1e3, 100 * pe[i].seconds / tp,
                   pe[i].calls);
    }
    free(ms);
    free(in);
    free(tg);
    zt_zero_free(&z, &m);
    zt_comm_free(comm);
    zt_cpu_backend_free(be);
    MPI_Finalize();
    return 0;
}
