/* bench_ckpt.c — checkpoint write and read time of a model with its Adam state on N ranks (run under
 * mpirun), through the real API: zt_ckpt_save (collective parallel-HDF5 write of each rank's ZeRO
 * shard, flush to disk, rename, `latest`) and zt_ckpt_load (read of the shard + all-gather of the
 * parameters). Prints nccl-tests-style rows (benchmarks/bench_ckpt.sh adds `dd` beside them):
 *   ranks  op  bytes  time  GB/s  #wrong
 * bytes = the tensor bytes of the file (params + exp_avg + exp_avg_sq, fp32); #wrong = buffers whose
 * content after the load differs from what was saved (params, m, v on every rank; must be 0).
 * Before each read the page cache of the file is dropped (posix_fadvise DONTNEED after the fsync'd
 * write), so reads come from the disk as after a restart.
 *   mpirun -np N build/bench/bench_ckpt [-c inputs/gpt2-124m.cfg] [--dir DIR] [--reps R] [--stage S]
 *                                       [--header] [--json] */
#define _GNU_SOURCE
#include <fcntl.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/cli.h"
#include "core/backend_factory.h"
#include "core/zero.h"
#include "io/ckpt.h"
#include "util/util.h"

static uint64_t fnv(const void *p, size_t n) {
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static void drop_cache(const char *path) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) return;
    fdatasync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
}

static void fill(float *p, size_t n, uint64_t seed) {
    zt_rng r;
    zt_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) p[i] = (float)zt_rng_uniform(&r) - 0.5f;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    zt_util_set_rank(rank, size, "bench");
    const char *dir = "build/bench-ckpt", *reps_s = "3", *stage_s = "2", *header = NULL, *json = NULL;
    zt_cli_opt opts[] = {{"--dir", 1, &dir}, {"--reps", 1, &reps_s}, {"--stage", 1, &stage_s},
                         {"--header", 0, &header}, {"--json", 0, &json}};
    zt_cli cli;
    char err[ZT_ERR_BUF];
    zt_config *c = zt_calloc(1, sizeof *c);
    if (zt_cli_parse(&cli, argc, argv, opts, 5, err, sizeof err) || zt_cli_load_config(&cli, c, err, sizeof err))
        zt_user_error_all("%s", err);
    if (!cli.config_path) zt_user_error_all("bench_ckpt: -c CFG (e.g. inputs/gpt2-124m.cfg)");
    const int reps = atoi(reps_s), stage = atoi(stage_s);

    /* the model and a zero state laid out as zt_zero_init does, without gradients or buffers the
       checkpoint does not touch (they would only take memory from the page cache) */
    zt_model_shape s;
    zt_model_shape_from_config(c, &s);
    /* the cpu backend: its memory is host memory, so the fill and the checks read it directly */
    zt_backend *be = zt_backend_create("cpu", 1, err, sizeof err);
    zt_comm *comm = be ? zt_comm_create("mpi", be, err, sizeof err) : NULL;
    if (!comm) zt_user_error_all("%s", err);
    c->zero.stage = stage;
    zt_zero_plan plan;
    zt_zero_plan_memory(c, &s, size, &plan);
    zt_model m;
    zt_model_init(&m, be, &s, 1, 1, plan.padded, 0);
    zt_ckpt_view v = zt_model_ckpt_view(&m);
    v.lo = (size_t)rank * plan.shard;
    v.hi = v.lo + plan.shard;
    v.optim_base = stage == 0 ? 0 : v.lo;
    v.optim_elems = stage == 0 ? plan.padded : plan.shard;
    const size_t nm = v.optim_elems, total = m.table.total;
    float *exp_avg = be->i->alloc(be, nm * sizeof(float)), *exp_avg_sq = be->i->alloc(be, nm * sizeof(float));
    v.exp_avg = exp_avg;
    v.exp_avg_sq = exp_avg_sq;
    fill(m.params, total, 1);
    for (size_t i = 0; i < nm; i++) {
        size_t flat = v.optim_base + i;
        if (flat >= total) break;
        exp_avg[i] = 1e-3f * (float)((flat * 2654435761u) % 1000);
        exp_avg_sq[i] = 1e-6f * (float)((flat * 40503u) % 1000);
    }
    const uint64_t hp = fnv(m.params, total * 4), hm = fnv(exp_avg, nm * 4), hv = fnv(exp_avg_sq, nm * 4);

    char text[65536];
    zt_config_to_string(c, text, sizeof text);
    zt_ckpt_meta meta = {0};
    meta.world_size = size;
    meta.loss_scale = 1.0f;
    meta.config_text = text;
    const double bytes = 3.0 * (double)total * 4;
    double wbest = 1e30, rbest = 1e30;
    long wrong = 0;
    char path[ZT_PATH_MAX + 64];
    for (int r = 0; r < reps; r++) {
        meta.step = r + 1;
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = zt_now();
        if (zt_ckpt_save(dir, 1, &meta, &v, path, sizeof path, err, sizeof err)) zt_user_error_all("%s", err);
        MPI_Barrier(MPI_COMM_WORLD);
        double dt = zt_now() - t0;
        if (dt < wbest) wbest = dt;
        if (rank == 0) drop_cache(path);
        be->i->zero(be, m.params, total * 4);
        be->i->zero(be, exp_avg, nm * 4);
        be->i->zero(be, exp_avg_sq, nm * 4);
        zt_ckpt_meta rm;
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = zt_now();
        if (zt_ckpt_load(path, &rm, &v, err, sizeof err)) zt_user_error_all("%s", err);
        /* as zt_zero_after_load: the parameters (and stage 0's moments) gathered from the shards */
        if (size > 1) {
            comm->i->all_gather(comm, m.params + v.lo, m.params, plan.shard, ZT_F32);
            if (stage == 0) {
                comm->i->all_gather(comm, exp_avg + v.lo, exp_avg, plan.shard, ZT_F32);
                comm->i->all_gather(comm, exp_avg_sq + v.lo, exp_avg_sq, plan.shard, ZT_F32);
            }
        }
        MPI_Barrier(MPI_COMM_WORLD);
        dt = zt_now() - t0;
        if (dt < rbest) rbest = dt;
        zt_ckpt_meta_free(&rm);
        long bad = (fnv(m.params, total * 4) != hp) + (fnv(exp_avg, nm * 4) != hm) + (fnv(exp_avg_sq, nm * 4) != hv), sum = 0;
        MPI_Allreduce(&bad, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
        wrong += sum;
    }
    if (rank == 0) {
        if (json) {
            printf("{\"ranks\": %d, \"stage\": %d, \"params\": %zu, \"bytes\": %.0f, \"write_s\": %.4f, "
                   "\"write_GBps\": %.4f, \"read_s\": %.4f, \"read_GBps\": %.4f, \"wrong\": %ld}\n",
                   size, stage, total, bytes, wbest, bytes / wbest * 1e-9, rbest, bytes / rbest * 1e-9, wrong);
        } else {
            if (header)
                printf("#%6s %6s %-9s %14s %9s %9s %8s\n#%6s %6s %-9s %14s %9s %9s %8s\n", "ranks", "stage", "op",
                       "bytes", "time", "bw", "#wrong", "", "", "", "(B)", "(s)", "(GB/s)", "");
            printf(" %6d %6d %-9s %14.0f %9.3f %9.3f %8ld\n", size, stage, "write", bytes, wbest,
                   bytes / wbest * 1e-9, wrong);
            printf(" %6d %6d %-9s %14.0f %9.3f %9.3f %8ld\n", size, stage, "read", bytes, rbest, bytes / rbest * 1e-9,
                   wrong);
        }
        fflush(stdout);
    }
    be->i->free(be, exp_avg);
    be->i->free(be, exp_avg_sq);
    zt_model_free(&m);
    zt_comm_destroy(comm);
    zt_backend_destroy(be);
    free(c);
    MPI_Finalize();
    return wrong ? 1 : 0;
}
