/* estimate.c — `ztrain estimate` and `ztrain hwinfo`. The memory figures come from
 * zt_zero_plan_memory(), the function zt_zero_init() allocates by. */
#include "cmd/estimate.h"

#include <stdlib.h>
#include <string.h>

#include "cmd/cli.h"
#include "core/backend_factory.h"
#include "core/zero.h"
#include "util/util.h"

int zt_cmd_estimate(int argc, char **argv, zt_dist *d) {
    char err[ZT_ERR_BUF];
    const char *ranks_s = NULL;
    zt_cli_opt opts[] = {{"--ranks", 1, &ranks_s}};
    zt_cli cli;
    zt_config c;
    if (zt_cli_parse(&cli, argc, argv, opts, 1, err, sizeof err) || zt_cli_load_config(&cli, &c, err, sizeof err))
        zt_user_error_all("%s", err);
    int N = d->size;
    if (ranks_s) {
        char *end;
        long v = strtol(ranks_s, &end, 10);
        if (*end || v < 1 || v > 1 << 20) zt_user_error_all("--ranks %s: expected a rank count >= 1", ranks_s);
        N = (int)v;
    }
    if (zt_config_validate(&c, N, err, sizeof err)) zt_user_error_all("%s", err);
    zt_model_shape s;
    zt_model_shape_from_config(&c, &s);
    zt_zero_plan p;
    zt_zero_plan_memory(&c, &s, N, &p);
    const double MB = 1.0 / (1 << 20);
    size_t total = p.param_bytes + p.grad_bytes + p.acc_bytes + p.optim_bytes + p.comm_bytes + p.act_bytes + p.ckpt_bytes;
    if (d->rank == 0) {
        printf("config: L%d H%d C%d V%d, %zu params, micro_batch %d x seq_len %d, ZeRO-%d, %d ranks\n", s.n_layer,
               s.n_head, s.n_embd, s.padded_vocab, p.total, c.train.micro_batch, c.train.seq_len, c.zero.stage, N);
        printf("%-24s %12s\n", "memory per rank", "MiB");
        printf("%-24s %12.1f\n", "parameters", p.param_bytes * MB);
        printf("%-24s %12.1f\n", "micro-batch gradients", p.grad_bytes * MB);
        printf("%-24s %12.1f\n", "reduced gradients", p.acc_bytes * MB);
        printf("%-24s %12.1f\n", "optimizer state (m, v)", p.optim_bytes * MB);
        printf("%-24s %12.1f\n", "communication buffers", p.comm_bytes * MB);
        printf("%-24s %12.1f\n", "activations + scratch", p.act_bytes * MB);
        printf("%-24s %12.1f   (host; checkpoint.async = %s)\n", "checkpoint staging", p.ckpt_bytes * MB,
               c.checkpoint.async ? "true: the whole shard" : "false: two 32 MiB halves");
        printf("%-24s %12.1f\n", "total", total * MB);
        if (c.zero.stage == 2)
            printf("stage 2: %d gradient buckets (whole layers, <= %.1f MiB unless one layer is larger: largest %.1f MiB), "
                   "%d in flight + wte/wpe's own\n", p.n_buckets, c.zero.bucket_mb, p.max_bucket * 4.0 * MB, ZT_ZERO_RING);
        printf("FLOPs per token (fwd+bwd): %.4g; per step: %.4g\n", zt_model_flops_per_token(&s, c.train.seq_len),
               zt_model_flops_per_token(&s, c.train.seq_len) * c.train.global_batch * c.train.seq_len);
    }
    return 0;
}

int zt_cmd_hwinfo(int argc, char **argv, zt_dist *d) {
    char err[ZT_ERR_BUF];
    zt_cli cli;
    if (zt_cli_parse(&cli, argc, argv, NULL, 0, err, sizeof err)) zt_user_error_all("%s", err);
    zt_backend *be = zt_backend_create("cpu", zt_dist_default_threads(d), err, sizeof err);
    if (!be) zt_user_error_all("%s", err);
    char desc[256];
    zt_backend_describe(be, desc, sizeof desc);
    double g = zt_backend_measure_sgemm(be, 1024);
    char layout[96];
    zt_dist_layout_string(d, layout, sizeof layout);
    for (int r = 0; r < d->size; r++) {
        if (r == d->rank && d->rank == 0)
            printf("layout: %s\n", layout);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    double *all = zt_calloc((size_t)d->size, sizeof(double));
    MPI_Gather(&g, 1, MPI_DOUBLE, all, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    int info[4] = {d->local_rank, d->node_cores, d->affinity_cores, be->threads};
    int *ai = zt_calloc((size_t)d->size * 4, sizeof(int));
    MPI_Gather(info, 4, MPI_INT, ai, 4, MPI_INT, 0, MPI_COMM_WORLD);
    if (d->rank == 0) {
        char gpus[4096];
        int ng = zt_backend_list_gpus(gpus, sizeof gpus);
        printf("backend: %s\n", desc);
        if (ng > 0) printf("gpus (rank 0's node): %d\n%s", ng, gpus);
        else printf("gpus: none usable (%s)\n", ng == 0 ? "no device" : gpus);
        printf("%6s %6s %10s %10s %8s %14s\n", "rank", "local", "node_cores", "bound_to", "threads", "sgemm_GFLOP/s");
        for (int r = 0; r < d->size; r++)
            printf("%6d %6d %10d %10d %8d %14.1f\n", r, ai[4 * r], ai[4 * r + 1], ai[4 * r + 2], ai[4 * r + 3], all[r]);
    }
    free(all);
    free(ai);
    zt_backend_destroy(be);
    return 0;
}
