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

#include "ckpt.h"
#include "cli.h"
#include "comm.h"
#include "cpu/cpu_backend.h"
#include "train.h"
#include "util.h"
#include "zero.h"

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
    zt_shape_from_config(c, &s);
    zt_backend *be = zt_cpu_backend_create(1);
    zt_comm *comm = zt_comm_mpi_create();
    zt_zero z;
    memset(&z, 0, sizeof z);
    c->zero.stage = stage;
    zt_zero_plan_memory(c, &s, size, &z.plan);
    z.stage = stage;
    z.N = size;
    z.rank = rank;
    z.be = be;
    z.comm = comm;
    z.lo = (size_t)rank * z.plan.shard;
    z.hi = z.lo + z.plan.shard;
    zt_model m;
    zt_model_init(&m, be, &s, 1, 1, z.plan.padded, 0);
    const size_t nm = stage == 0 ? z.plan.padded : z.plan.shard, total = m.table.total;
    z.m = be->i->alloc(be, nm * sizeof(float));
    z.v = be->i->alloc(be, nm * sizeof(float));
    fill(m.params, total, 1); /* cpu backend: device memory is host memory */
    for (size_t i = 0; i < nm; i++) {
        size_t flat = (stage == 0 ? 0 : z.lo) + i;
        if (flat >= total) break;
        z.m[i] = 1e-3f * (float)((flat * 2654435761u) % 1000);
        z.v[i] = 1e-6f * (float)((flat * 40503u) % 1000);
    }
    const uint64_t hp = fnv(m.params, total * 4), hm = fnv(z.m, nm * 4), hv = fnv(z.v, nm * 4);

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
        if (zt_ckpt_save(dir, 1, &meta, &m, &z, path, sizeof path, err, sizeof err)) zt_user_error_all("%s", err);
        MPI_Barrier(MPI_COMM_WORLD);
        double dt = zt_now() - t0;
        if (dt < wbest) wbest = dt;
        if (rank == 0) drop_cache(path);
        be->i->zero(be, m.params, total * 4);
        be->i->zero(be, z.m, nm * 4);
        be->i->zero(be, z.v, nm * 4);
        zt_ckpt_meta rm;
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = zt_now();
        if (zt_ckpt_load(path, &rm, &m, &z, err, sizeof err)) zt_user_error_all("%s", err);
        MPI_Barrier(MPI_COMM_WORLD);
        dt = zt_now() - t0;
        if (dt < rbest) rbest = dt;
        zt_ckpt_meta_free(&rm);
        long bad = (fnv(m.params, total * 4) != hp) + (fnv(z.m, nm * 4) != hm) + (fnv(z.v, nm * 4) != hv), sum = 0;
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
    be->i->free(be, z.m);
    be->i->free(be, z.v);
    zt_model_free(&m);
    zt_comm_free(comm);
    zt_cpu_backend_free(be);
    free(c);
    MPI_Finalize();
    return wrong ? 1 : 0;
}
