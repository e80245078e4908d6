/* bench_ckpt.c — checkpoint write and read time of a model with its Adam state on N ranks (run under
 * mpirun), through the real API: a checkpoint saver as training keeps one (zt_ckpt_saver_begin: each
 * rank's ZeRO shard, flush to disk, rename, `latest`) and zt_ckpt_load (read of the shard + all-gather of the
 * parameters). Prints nccl-tests-style rows (benchmarks/bench_ckpt.sh adds `dd` beside them):
 *   ranks  op  bytes  time  GB/s  #wrong
 * bytes = the tensor bytes of the file (params + exp_avg + exp_avg_sq, fp32); #wrong = buffers whose
 * content after the load differs from what was saved (params, m, v on every rank; must be 0).
 * Before each read the page cache of the file is dropped (posix_fadvise DONTNEED after the fsync'd
 * write), so reads come from the disk as after a restart.
 * Rounds: one warm-up round (not counted), then R rounds; times are medians over the rounds. With --dd
 * each round also runs `dd` (rank 0, the others waiting) writing the same bytes to DIR with
 * conv=fdatasync and reading them back cold, ztrain first in odd rounds and dd first in even ones, and
 * the JSON gives the median of each round's dd / ztrain time ratio (this disk's own speed swings by 2x
 * within a minute, so only runs seconds apart are compared); for reads, the median over pairs of rounds
 * (one of each order) of the pair's geometric mean, and the medians of each order alone.
 *   mpirun -np N build/bench/bench_ckpt [-c inputs/gpt2-124m.cfg] [--dir DIR] [--reps R] [--stage S] [--dd]
 *                                       [--header] [--json] */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/cli.h"
#include "core/dist/backend_factory.h"
#include "core/dist/zero.h"
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

/* the load's params_ready hook, as zt_zero_load_view sets it: the parameter all-gather while the moments are
   still being read */
typedef struct gather_ctx { zt_comm *comm; float *params; size_t lo, shard; } gather_ctx;
static void gather_params(void *ctx) {
    gather_ctx *g = ctx;
    g->comm->i->all_gather(g->comm, g->params + g->lo, g->params, g->shard, ZT_F32);
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
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
    const char *dir = "build/bench-ckpt", *reps_s = "3", *stage_s = "2", *header = NULL, *json = NULL, *dd = NULL;
    zt_cli_opt opts[] = {{"--dir", 1, &dir}, {"--reps", 1, &reps_s}, {"--stage", 1, &stage_s},
                         {"--header", 0, &header}, {"--json", 0, &json}, {"--dd", 0, &dd}};
    zt_cli cli;
    char err[ZT_ERR_BUF];
    zt_config *c = zt_calloc(1, sizeof *c);
    if (zt_cli_parse(&cli, argc, argv, opts, 6, err, sizeof err) || zt_cli_load_config(&cli, c, err, sizeof err))
        zt_user_error_all("%s", err);
    if (!cli.config_path) zt_user_error_all("bench_ckpt: -c CFG (e.g. inputs/gpt2-124m.cfg)");
    const int reps = atoi(reps_s), stage = atoi(stage_s);
    if (reps < 1) zt_user_error_all("bench_ckpt: --reps %s: expected a round count >= 1", reps_s);

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
    zt_model_init(&m, be, &s, 1, 1, plan.padded, 0, NULL);
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
    gather_ctx gc = {comm, m.params, v.lo, plan.shard};
    if (size > 1) {
        v.params_ready = gather_params;
        v.params_ready_ctx = &gc;
    }

    char text[65536];
    zt_config_to_string(c, text, sizeof text);
    zt_ckpt_meta meta = {0};
    meta.world_size = size;
    meta.loss_scale = 1.0f;
    meta.config_text = text;
    const double bytes = 3.0 * (double)total * 4;
    /* round 0 is a warm-up (not counted): on a virtual machine the first use of guest memory the host has
       not backed yet (page cache included) runs at a fraction of the disk's speed: measured here, the
       first load of a fresh process 3.4-4.1 s, the next ones 1.1-1.7 s. dd gets the same warm-up. */
    enum { ZW, ZR, DW, DR, DWD, ZL, NT }; /* ZL: the read without the all-gather */
    double *t = zt_calloc((size_t)(reps + 1) * NT, sizeof(double)); /* per round: ztrain write, read, dd ... */
    long wrong = 0;
    char path[ZT_PATH_MAX + 64], prev[ZT_PATH_MAX + 64] = "", ddpath[ZT_PATH_MAX + 64], cmd[3 * ZT_PATH_MAX];
    snprintf(ddpath, sizeof ddpath, "%s/dd.bin", dir);
    if (rank == 0 && mkdir(dir, 0755) != 0 && errno != EEXIST) zt_user_error("bench_ckpt: cannot create %s", dir);
    /* one saver for all rounds, as a training run keeps one (its staging buffer and writer thread are reused);
       keep = 0: the previous round's file is removed by this loop, outside the timed save (in training the
       saver prunes in the background after publishing) */
    zt_ckpt_saver *sv = zt_ckpt_saver_create(&v, 0, 1);
    for (int r = 0; r <= reps; r++) {
        double *tr = t + (size_t)r * NT;
        meta.step = r + 1;
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = zt_now();
        if (zt_ckpt_saver_begin(sv, dir, 0, &meta, &v, path, sizeof path, err, sizeof err)) zt_user_error_all("%s", err);
        MPI_Barrier(MPI_COMM_WORLD);
        tr[ZW] = zt_now() - t0;
        /* keep one checkpoint on the disk: the previous round's goes */
        if (rank == 0 && prev[0]) {
            snprintf(cmd, sizeof cmd, "rm -rf '%s'", prev);
            if (system(cmd) != 0) zt_user_error("bench_ckpt: %s failed", cmd);
        }
        snprintf(prev, sizeof prev, "%s", path);
        /* reads of this file, cold: ztrain's load and (with --dd) dd's, ztrain first in odd rounds. Both read
           the same bytes where ztrain wrote them; the second reader of a round may reuse page-cache memory the
           first one had the host back (on this VM a first use of memory is slow), so the order alternates */
        for (int part = 0; part < 2; part++) {
            if ((part == 0) == (r % 2 == 1)) {
                if (rank == 0) drop_cache(path);
                be->i->zero(be, m.params, total * 4);
                be->i->zero(be, exp_avg, nm * 4);
                be->i->zero(be, exp_avg_sq, nm * 4);
                zt_ckpt_meta rm;
                MPI_Barrier(MPI_COMM_WORLD);
                t0 = zt_now();
                if (zt_ckpt_load(path, &rm, &v, err, sizeof err)) zt_user_error_all("%s", err);
                MPI_Barrier(MPI_COMM_WORLD);
                tr[ZL] = zt_now() - t0;
                /* as training: the parameters were gathered by the hook during the load; stage 0's moments now */
                if (size > 1 && stage == 0) {
                    comm->i->all_gather(comm, exp_avg + v.lo, exp_avg, plan.shard, ZT_F32);
                    comm->i->all_gather(comm, exp_avg_sq + v.lo, exp_avg_sq, plan.shard, ZT_F32);
                }
                MPI_Barrier(MPI_COMM_WORLD);
                tr[ZR] = zt_now() - t0;
                zt_ckpt_meta_free(&rm);
                long bad = (fnv(m.params, total * 4) != hp) + (fnv(exp_avg, nm * 4) != hm) +
                           (fnv(exp_avg_sq, nm * 4) != hv), sum = 0;
                MPI_Allreduce(&bad, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
                wrong += sum;
            } else if (dd && rank == 0) {
                drop_cache(path);
                t0 = zt_now();
                snprintf(cmd, sizeof cmd, "dd if='%s' of=/dev/null bs=16M status=none", path);
                if (system(cmd) != 0) zt_user_error("bench_ckpt: %s failed", cmd);
                tr[DR] = zt_now() - t0;
            }
        }
        /* dd writes of the same bytes by rank 0 while the others wait: through the page cache with
           conv=fdatasync, and with O_DIRECT (as ztrain writes) */
        MPI_Barrier(MPI_COMM_WORLD);
        if (dd && rank == 0)
            for (int k = 0; k < 2; k++) {
                t0 = zt_now();
                snprintf(cmd, sizeof cmd, "dd if=/dev/zero of='%s' bs=16M count=%.0f iflag=count_bytes %s "
                         "status=none", ddpath, bytes, k ? "oflag=direct conv=fdatasync" : "conv=fdatasync");
                if (system(cmd) != 0) zt_user_error("bench_ckpt: %s failed", cmd);
                tr[k ? DWD : DW] = zt_now() - t0;
                unlink(ddpath);
            }
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0)
            fprintf(stderr, "bench_ckpt: round %d%s: write %.3f s (dd %.3f, dd direct %.3f), read %.3f s (load %.3f + "
                    "gather; dd %.3f)\n", r, r == 0 ? " (warm-up)" : "", tr[ZW], tr[DW], tr[DWD], tr[ZR], tr[ZL], tr[DR]);
    }
    /* medians over rounds 1..reps of the times and of each round's dd / ztrain ratios */
    enum { Q_W, Q_R, Q_WD, NQ };
    double med[NT], ratio[NQ];
    double *col = zt_calloc((size_t)reps, sizeof(double));
    for (int k = 0; k < NT + NQ; k++) {
        for (int r = 1; r <= reps; r++) {
            const double *tr = t + (size_t)r * NT;
            col[r - 1] = k < NT ? tr[k] : k == NT + Q_W ? tr[DW] / tr[ZW] : k == NT + Q_R ? tr[DR] / tr[ZR] : tr[DWD] / tr[ZW];
        }
        qsort(col, (size_t)reps, sizeof(double), cmp_double);
        const double mv = reps % 2 ? col[reps / 2] : 0.5 * (col[reps / 2 - 1] + col[reps / 2]);
        if (k < NT) med[k] = mv;
        else ratio[k - NT] = mv;
    }
    /* reads: the order matters on this VM (the first reader of a round pays for the page-cache memory the
       host backs; the second reuses it), so the read ratio is taken over pairs of rounds (2p-1: ztrain first,
       2p: dd first) as the geometric mean of the pair, which weighs both orders equally; median over pairs.
       The medians of each order alone are reported beside it */
    const int pairs = reps / 2;
    double first[2] = {0, 0}; /* median ratio with ztrain reading first / dd reading first */
    if (pairs > 0) {
        for (int q = 0; q < 3; q++) {
            for (int p = 0; p < pairs; p++) {
                const double *a = t + (size_t)(2 * p + 1) * NT, *b = t + (size_t)(2 * p + 2) * NT;
                col[p] = q == 0 ? sqrt(a[DR] / a[ZR] * (b[DR] / b[ZR])) : q == 1 ? a[DR] / a[ZR] : b[DR] / b[ZR];
            }
            qsort(col, (size_t)pairs, sizeof(double), cmp_double);
            const double mv = pairs % 2 ? col[pairs / 2] : 0.5 * (col[pairs / 2 - 1] + col[pairs / 2]);
            if (q == 0) ratio[Q_R] = mv;
            else first[q - 1] = mv;
        }
    }
    free(col);
    if (rank == 0) {
        if (json) {
            printf("{\"ranks\": %d, \"stage\": %d, \"params\": %zu, \"bytes\": %.0f, \"rounds\": %d, \"write_s\": %.4f, "
                   "\"write_GBps\": %.4f, \"read_s\": %.4f, \"read_GBps\": %.4f", size, stage, total, bytes, reps, med[ZW],
                   bytes / med[ZW] * 1e-9, med[ZR], bytes / med[ZR] * 1e-9);
            if (dd) {
                printf(", \"dd_write_s\": %.4f, \"dd_direct_write_s\": %.4f, \"dd_read_s\": %.4f, \"write_frac_dd\": %.4f, "
                       "\"write_frac_dd_direct\": %.4f, \"read_frac_dd\": %.4f", med[DW], med[DWD], med[DR], ratio[Q_W],
                       ratio[Q_WD], ratio[Q_R]);
                printf(", \"read_frac_dd_ztrain_first\": %.4f, \"read_frac_dd_dd_first\": %.4f", first[0], first[1]);
                const char *names[3] = {"write_frac_dd_rounds", "write_frac_dd_direct_rounds", "read_frac_dd_rounds"};
                for (int q = 0; q < 3; q++) {
                    printf(", \"%s\": [", names[q]);
                    for (int r = 1; r <= reps; r++) {
                        const double *tr = t + (size_t)r * NT;
                        printf("%s%.4f", r > 1 ? ", " : "", q == 0 ? tr[DW] / tr[ZW] : q == 1 ? tr[DWD] / tr[ZW] : tr[DR] / tr[ZR]);
                    }
                    printf("]");
                }
            }
            printf(", \"wrong\": %ld}\n", wrong);
        } else {
            if (header)
                printf("#%6s %6s %-9s %14s %9s %9s %8s\n#%6s %6s %-9s %14s %9s %9s %8s\n", "ranks", "stage", "op",
                       "bytes", "time", "bw", "#wrong", "", "", "", "(B)", "(s)", "(GB/s)", "");
            printf(" %6d %6d %-9s %14.0f %9.3f %9.3f %8ld\n", size, stage, "write", bytes, med[ZW],
                   bytes / med[ZW] * 1e-9, wrong);
            printf(" %6d %6d %-9s %14.0f %9.3f %9.3f %8ld\n", size, stage, "read", bytes, med[ZR], bytes / med[ZR] * 1e-9,
                   wrong);
        }
        fflush(stdout);
    }
    free(t);
    zt_ckpt_saver_destroy(sv);
    be->i->free(be, exp_avg);
    be->i->free(be, exp_avg_sq);
    zt_model_free(&m);
    zt_comm_destroy(comm);
    zt_backend_destroy(be);
    free(c);
    MPI_Finalize();
    return wrong ? 1 : 0;
}
