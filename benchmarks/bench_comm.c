/* bench_comm.c — communicator bandwidth, nccl-tests style: ztrain's zt_comm (the factory's "mpi" communicator) for
 * all_reduce, reduce_scatter, all_gather, all_to_all, ztrain's ORDERED reduce-scatter (all_to_all +
 * the N received pieces summed in rank order with the backend's accumulate, as src/core/dist/zero.c does) and
 * stage 2's native exchange (rs_owners: one grouped reduce to each owner, as src/core/dist/zero_bucket.c), each
 * beside the same collective on raw MPI (MPI_Allreduce, MPI_Reduce_scatter_block, MPI_Allgather,
 * MPI_Alltoall; the ordered row is compared with MPI_Reduce_scatter_block, the call it replaces).
 *
 *   mpirun -np 2 build/bench/bench_comm [-b 4K] [-e 256M] [-f 4] [-n ITERS] [-w WARMUP] [--time S]
 *                                      [--threads T] [--ops OP,OP..] [--json | -J]
 *
 * size = bytes of the whole buffer (nccl-tests convention: the per-rank buffer for all-reduce, the
 * N-piece send buffer for reduce-scatter and all-to-all, the N-piece receive buffer for all-gather);
 * count = size / 4 (fp32), rounded down to a multiple of N. time = mean over the timed iterations,
 * max over ranks. algbw = size / time; busbw = algbw * 2(N-1)/N for all-reduce, algbw * (N-1)/N for
 * the others. Each rank's send buffer holds small rank-dependent integers, so every sum is exact and
 * each output element has one expected value computed here independently; #wrong counts the elements
 * of the last timed call's output that differ, summed over ranks (receive buffers start as NaN, so a
 * call that writes nothing is counted). Exit status 1 if anything is wrong.
 * Iterations: after -w warm-up calls, ztrain's and MPI's timed loops alternate -r times and the best
 * mean is kept; -n fixes the loop length, by default it is sized so the -r loops take ~--time seconds. */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "iface/comm.h"
#include "core/dist/backend_factory.h"
#include "core/dist/dist.h"
#include "util/util.h"

typedef enum { OP_ALL_REDUCE, OP_REDUCE_SCATTER, OP_RS_ORDERED, OP_RS_OWNERS, OP_ALL_GATHER, OP_ALL_TO_ALL, OP_N } op_t;
static const char *const op_names[OP_N] = {"all_reduce", "reduce_scatter", "rs_ordered", "rs_owners", "all_gather",
                                           "all_to_all"};
static const char *const raw_names[OP_N] = {"MPI_Allreduce", "MPI_Reduce_scatter_block", "MPI_Reduce_scatter_block",
                                            "MPI_Reduce_scatter_block", "MPI_Allgather", "MPI_Alltoall"};

typedef struct opts {
    size_t min_bytes, max_bytes;
    int factor, iters, warmup, reps, reps_given, threads, json;
    unsigned ops;                   /* bit op: measured (--ops; all by default) */
    double target_s;
} opts;

typedef struct bufs {
    float *send, *recv, *scratch;   /* send(count), recv(count), scratch(count): all-to-all landing for rs_ordered */
    zt_comm *comm;
    zt_backend *be;                 /* accumulate for rs_ordered, as zero.c */
    int rank, n;
} bufs;

typedef struct result {
    double time_us, algbw, busbw;
    long wrong;
} result;

/* the value rank r puts at send[i]: an integer in [-128, 127], so sums over ranks are exact in fp32 */
static inline float fill_val(int r, size_t i) {
    uint32_t h = (uint32_t)(i + 1) * 2654435761u + (uint32_t)r * 97531u;
    return (float)((int)(h >> 24) - 128);
}

static size_t parse_size(const char *s) {
    char *end;
    double v = strtod(s, &end);
    if (*end == 'K' || *end == 'k') v *= 1024;
    else if (*end == 'M' || *end == 'm') v *= 1024 * 1024;
    else if (*end == 'G' || *end == 'g') v *= 1024.0 * 1024 * 1024;
    else if (*end) zt_user_error_all("bench_comm: bad size '%s' (a number of bytes, suffix K, M or G)", s);
    if (v < 4) zt_user_error_all("bench_comm: size '%s' is below one fp32 element", s);
    return (size_t)v;
}

/* one call of op, ztrain's communicator (raw = 0) or MPI directly (raw = 1); count is the total */
static void call_op(bufs *b, op_t op, int raw, size_t count) {
    const size_t piece = count / (size_t)b->n;
    zt_comm *c = b->comm;
    switch (op) {
    case OP_ALL_REDUCE:
        if (raw) ZT_MPI(MPI_Allreduce(b->send, b->recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
        else c->i->all_reduce(c, b->send, b->recv, count, ZT_F32);
        break;
    case OP_REDUCE_SCATTER:
        if (raw) ZT_MPI(MPI_Reduce_scatter_block(b->send, b->recv, (int)piece, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
        else c->i->reduce_scatter(c, b->send, b->recv, piece, ZT_F32);
        break;
    case OP_RS_ORDERED:
        if (raw) {
            ZT_MPI(MPI_Reduce_scatter_block(b->send, b->recv, (int)piece, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
        } else {
            /* zero.c, one micro-step: zero the shard accumulator, all-to-all, add the pieces in rank order */
            b->be->i->zero(b->be, b->recv, piece * sizeof(float));
            c->i->all_to_all(c, b->send, b->scratch, piece, ZT_F32);
            for (int r = 0; r < b->n; r++) b->be->i->accumulate(b->be, b->recv, b->scratch + (size_t)r * piece, piece);
        }
        break;
    case OP_RS_OWNERS:
        if (raw) {
            ZT_MPI(MPI_Reduce_scatter_block(b->send, b->recv, (int)piece, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
        } else {
            /* zero_bucket.c, native: one grouped reduce to each owner of its part, then wait */
            c->i->group_start(c);
            for (int r = 0; r < b->n; r++) c->i->reduce(c, b->send + (size_t)r * piece, b->recv, piece, ZT_F32, r);
            c->i->group_end(c);
            c->i->wait(c, c->i->record(c));
        }
        break;
    case OP_ALL_GATHER:
        if (raw)
            ZT_MPI(MPI_Allgather(b->send, (int)piece, MPI_FLOAT, b->recv, (int)piece, MPI_FLOAT, MPI_COMM_WORLD));
        else c->i->all_gather(c, b->send, b->recv, piece, ZT_F32);
        break;
    case OP_ALL_TO_ALL:
        if (raw) ZT_MPI(MPI_Alltoall(b->send, (int)piece, MPI_FLOAT, b->recv, (int)piece, MPI_FLOAT, MPI_COMM_WORLD));
        else c->i->all_to_all(c, b->send, b->recv, piece, ZT_F32);
        break;
    default: ZT_ASSERT(0);
    }
}

/* elements of this rank's output that differ from the expected value */
static long check(const bufs *b, op_t op, size_t count) {
    const size_t piece = count / (size_t)b->n;
    const int me = b->rank, n = b->n;
    long bad = 0;
    switch (op) {
    case OP_ALL_REDUCE:
        for (size_t i = 0; i < count; i++) {
            long e = 0;
            for (int r = 0; r < n; r++) e += (long)fill_val(r, i);
            bad += b->recv[i] != (float)e;
        }
        break;
    case OP_REDUCE_SCATTER:
    case OP_RS_ORDERED:
    case OP_RS_OWNERS:
        for (size_t j = 0; j < piece; j++) {
            long e = 0;
            for (int r = 0; r < n; r++) e += (long)fill_val(r, (size_t)me * piece + j);
            bad += b->recv[j] != (float)e;
        }
        break;
    case OP_ALL_GATHER:
        for (int r = 0; r < n; r++)
            for (size_t j = 0; j < piece; j++) bad += b->recv[(size_t)r * piece + j] != fill_val(r, j);
        break;
    case OP_ALL_TO_ALL:
        for (int r = 0; r < n; r++)
            for (size_t j = 0; j < piece; j++)
                bad += b->recv[(size_t)r * piece + j] != fill_val(r, (size_t)me * piece + j);
        break;
    default: ZT_ASSERT(0);
    }
    return bad;
}

static double max_over_ranks(double x) {
    double m = x;
    ZT_MPI(MPI_Allreduce(&x, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    return m;
}

/* warm-up calls of one implementation; *iters = the timed-loop length (the same on every rank),
   returns the last warm-up call's time */
static double warm(bufs *b, const opts *o, op_t op, int raw, size_t count, int *iters) {
    double t = 0;
    *iters = o->iters;
    for (int w = 0; w < o->warmup; w++) {
        ZT_MPI(MPI_Barrier(MPI_COMM_WORLD));
        double t0 = zt_now();
        call_op(b, op, raw, count);
        t = max_over_ranks(zt_now() - t0);
    }
    if (o->iters <= 0) {
        long k = t > 0 ? (long)ceil(o->target_s / o->reps / t) : 1000;
        *iters = k < 1 ? 1 : k > 1000 ? 1000 : (int)k;
    }
    return t;
}

/* mean seconds per call over one timed loop, max over ranks */
static double timed_loop(bufs *b, op_t op, int raw, size_t count, int iters) {
    ZT_MPI(MPI_Barrier(MPI_COMM_WORLD));
    double t0 = zt_now();
    for (int it = 0; it < iters; it++) call_op(b, op, raw, count);
    return max_over_ranks((zt_now() - t0) / iters);
}

static result finish(bufs *b, op_t op, size_t count, double t) {
    result r;
    r.time_us = t * 1e6;
    r.algbw = (double)count * sizeof(float) / t * 1e-9;
    double nf = b->n;
    r.busbw = r.algbw * (op == OP_ALL_REDUCE ? 2.0 * (nf - 1) / nf : (nf - 1) / nf);
    long mine = check(b, op, count), all = 0;
    ZT_MPI(MPI_Allreduce(&mine, &all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
    r.wrong = all;
    return r;
}

static void poison(bufs *b, op_t op, size_t count) {
    const size_t out = op == OP_REDUCE_SCATTER || op == OP_RS_ORDERED ? count / (size_t)b->n : count;
    for (size_t i = 0; i < out; i++) b->recv[i] = NAN;
}

/* ztrain's call and raw MPI's, timed loops alternating (--reps of each, best mean kept) so that both
   see the same machine; calls so long that one loop of each exceeds --time run one loop each (timer
   noise is small beside them) unless -r was given: then every size gets its -r loops (the best of
   several single calls of a 500 MB collective: on ranks sharing cores one call can take twice another,
   tests/e2e/test_perf_model.sh). Each output is checked after its own last timed loop. */
static void measure(bufs *b, const opts *o, op_t op, size_t count, result *z, result *r) {
    int it_z, it_r;
    double wz = warm(b, o, op, 0, count, &it_z), wr = warm(b, o, op, 1, count, &it_r);
    int reps = !o->reps_given && wz * it_z + wr * it_r > o->target_s ? 1 : o->reps;
    double tz = 1e30, tr = 1e30, t;
    for (int rep = 0; rep < reps; rep++) {
        int last = rep == reps - 1;
        if (last) poison(b, op, count);
        if ((t = timed_loop(b, op, 0, count, it_z)) < tz) tz = t;
        if (last) *z = finish(b, op, count, tz);
        if (last) poison(b, op, count);
        if ((t = timed_loop(b, op, 1, count, it_r)) < tr) tr = t;
    }
    *r = finish(b, op, count, tr);
}

/* --ops all_gather,rs_owners: the ops measured */
static unsigned parse_ops(const char *list) {
    unsigned m = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int k = 0;
        while (k < OP_N && strcmp(t, op_names[k]) != 0) k++;
        if (k == OP_N)
            zt_user_error_all("bench_comm: --ops: unknown op '%s' (expected a comma-separated list of all_reduce, "
                              "reduce_scatter, rs_ordered, rs_owners, all_gather, all_to_all)", t);
        m |= 1u << k;
    }
    if (!m) zt_user_error_all("bench_comm: --ops '%s' names no op", list);
    return m;
}

static void usage(void) {
    fprintf(stderr, "usage: bench_comm [-b MINBYTES] [-e MAXBYTES] [-f FACTOR] [-n ITERS] [-w WARMUP] [-r REPS]\n"
                    "                  [--time S] [--threads T] [--ops OP,OP..] [--json|-J]\n"
                    "  defaults: -b 4K -e 256M -f 4 -w 1 -r 3 --time 0.15 (loop length for ~0.15 s per\n"
                    "  implementation and size; one loop each where one call exceeds it, unless -r is given),\n"
                    "  1 thread for the ordered sum\n");
}

static void parse(opts *o, int argc, char **argv) {
    *o = (opts){4096, 256u << 20, 4, 0, 1, 3, 0, 1, 0, (1u << OP_N) - 1, 0.15};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int val = 1;
        if (!strcmp(a, "--json") || !strcmp(a, "-J")) { o->json = 1; val = 0; }
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) { if (zt_rank() == 0) usage(); MPI_Finalize(); exit(0); }
        else if (!v) zt_user_error_all("bench_comm: %s needs a value (or is unknown; see --help)", a);
        else if (!strcmp(a, "-b") || !strcmp(a, "--min-bytes")) o->min_bytes = parse_size(v);
        else if (!strcmp(a, "-e") || !strcmp(a, "--max-bytes")) o->max_bytes = parse_size(v);
        else if (!strcmp(a, "-f") || !strcmp(a, "--factor")) o->factor = atoi(v);
        else if (!strcmp(a, "-n") || !strcmp(a, "--iters")) o->iters = atoi(v);
        else if (!strcmp(a, "-w") || !strcmp(a, "--warmup")) o->warmup = atoi(v);
        else if (!strcmp(a, "--time")) o->target_s = atof(v);
        else if (!strcmp(a, "-r") || !strcmp(a, "--reps")) { o->reps = atoi(v); o->reps_given = 1; }
        else if (!strcmp(a, "--threads")) o->threads = atoi(v);
        else if (!strcmp(a, "--ops")) o->ops = parse_ops(v);
        else zt_user_error_all("bench_comm: unknown option %s (see --help)", a);
        i += val;
    }
    if (o->factor < 2) zt_user_error_all("bench_comm: -f must be >= 2");
    if (o->warmup < 0 || o->reps < 1 || o->threads < 1 || o->target_s <= 0)
        zt_user_error_all("bench_comm: bad -w, -r, --threads or --time");
    if (o->iters <= 0 && o->warmup == 0) o->warmup = 1;   /* the auto iteration count needs one timed call */
    if (o->max_bytes < o->min_bytes) o->max_bytes = o->min_bytes;
}

int main(int argc, char **argv) {
    zt_dist d;
    zt_dist_init(&d, &argc, &argv);
    opts o;
    parse(&o, argc, argv);
    const int n = d.size;
    if (o.max_bytes / sizeof(float) / (size_t)n > 0x7fffffff)
        zt_user_error_all("bench_comm: -e %zu: a rank's piece exceeds MPI's int count", o.max_bytes);
    size_t max_count = o.max_bytes / sizeof(float) / (size_t)n * (size_t)n;
    if (max_count == 0) zt_user_error_all("bench_comm: -e %zu is smaller than one element per rank", o.max_bytes);

    bufs b = {0};
    b.rank = d.rank;
    b.n = n;
    char err[ZT_ERR_BUF];
    b.be = zt_backend_create("cpu", o.threads, err, sizeof err);
    b.comm = b.be ? zt_comm_create("mpi", b.be, err, sizeof err) : NULL;
    if (!b.comm) zt_user_error_all("%s", err);
    b.send = b.be->i->alloc(b.be, max_count * sizeof(float));
    b.recv = b.be->i->alloc(b.be, max_count * sizeof(float));
    b.scratch = b.be->i->alloc(b.be, max_count * sizeof(float));
    for (size_t i = 0; i < max_count; i++) b.send[i] = fill_val(d.rank, i);

    char layout[128];
    zt_dist_layout_string(&d, layout, sizeof layout);
    double avg[OP_N][2] = {{0}};
    int nsz[OP_N] = {0};
    long wrong_total = 0;
    if (d.rank == 0 && !o.json) {
        printf("# ztrain comm benchmark: communicator '%s' vs raw MPI, %s, fp32, sum, %d thread%s for the ordered sum\n",
               b.comm->i->name, layout, o.threads, o.threads == 1 ? "" : "s");
        printf("# sizes %zu..%zu B x%d; %s; time = mean per call, max over ranks; busbw factor 2(n-1)/n all_reduce, "
               "(n-1)/n others\n", o.min_bytes, o.max_bytes, o.factor,
               o.iters > 0 ? "fixed iterations" : "iterations for ~--time s per measurement, best of -r loops");
        printf("# rs_ordered = zt all_to_all + rank-order sum (src/core/dist/zero.c); its raw column is MPI_Reduce_scatter_block\n");
        printf("#\n");
        printf("# %11s %11s %5s %-15s %10s %8s %8s %7s  %10s %8s %8s %7s %8s\n", "", "", "", "", "zt_comm:", "", "", "",
               "raw MPI:", "", "", "", "");
        printf("# %11s %11s %5s %-15s %10s %8s %8s %7s  %10s %8s %8s %7s %8s\n", "size", "count", "type", "op", "time",
               "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong", "raw/zt");
        printf("# %11s %11s %5s %-15s %10s %8s %8s %7s  %10s %8s %8s %7s %8s\n", "(B)", "(elements)", "", "", "(us)",
               "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", "(x)");
    }
    if (d.rank == 0 && o.json) printf("{\"ranks\": %d, \"nodes\": %d, \"comm\": \"%s\", \"type\": \"float\", \"threads\": %d, \"results\": [",
                                      n, d.n_nodes, b.comm->i->name, o.threads);
    int first = 1;
    for (int op = 0; op < OP_N; op++) {
        if (!(o.ops >> op & 1)) continue;
        for (size_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= (size_t)o.factor) {
            size_t count = bytes / sizeof(float) / (size_t)n * (size_t)n;
            if (count == 0) continue;
            result z = {0}, r = {0};
            measure(&b, &o, (op_t)op, count, &z, &r);
            avg[op][0] += z.busbw;
            avg[op][1] += r.busbw;
            nsz[op]++;
            wrong_total += z.wrong + r.wrong;
            if (d.rank != 0) continue;
            if (o.json) {
                printf("%s\n  {\"op\": \"%s\", \"raw_op\": \"%s\", \"size\": %zu, \"count\": %zu, \"time_us\": %.3f, "
                       "\"algbw\": %.4f, \"busbw\": %.4f, \"wrong\": %ld, \"raw_time_us\": %.3f, \"raw_algbw\": %.4f, "
                       "\"raw_busbw\": %.4f, \"raw_wrong\": %ld}",
                       first ? "" : ",", op_names[op], raw_names[op], count * sizeof(float), count, z.time_us, z.algbw,
                       z.busbw, z.wrong, r.time_us, r.algbw, r.busbw, r.wrong);
            } else {
                printf("  %11zu %11zu %5s %-15s %10.1f %8.3f %8.3f %7ld  %10.1f %8.3f %8.3f %7ld %8.2f\n",
                       count * sizeof(float), count, "float", op_names[op], z.time_us, z.algbw, z.busbw, z.wrong,
                       r.time_us, r.algbw, r.busbw, r.wrong, r.time_us / z.time_us);
            }
            fflush(stdout);
            first = 0;
        }
    }
    if (d.rank == 0) {
        double all_z = 0, all_r = 0;
        int all_n = 0;
        for (int op = 0; op < OP_N; op++) {
            all_z += avg[op][0];
            all_r += avg[op][1];
            all_n += nsz[op];
            if (nsz[op]) { avg[op][0] /= nsz[op]; avg[op][1] /= nsz[op]; }
        }
        if (all_n) { all_z /= all_n; all_r /= all_n; }
        if (o.json) {
            for (int raw = 0; raw < 2; raw++) {
                printf(raw ? "}, \"avg_raw_busbw\": {" : "\n], \"avg_busbw\": {");
                for (int op = 0, sep = 0; op < OP_N; op++)
                    if (nsz[op]) printf("%s\"%s\": %.4f", sep++ ? ", " : "", op_names[op], avg[op][raw]);
            }
            printf("}, \"avg_busbw_all\": %.4f, \"avg_raw_busbw_all\": %.4f, \"wrong\": %ld}\n", all_z, all_r,
                   wrong_total);
        } else {
            printf("# Out of bounds values : %ld %s\n", wrong_total, wrong_total ? "FAILED" : "OK");
            printf("# Avg bus bandwidth (GB/s, mean over sizes):");
            for (int op = 0, sep = 0; op < OP_N; op++)
                if (nsz[op]) printf("%s %s %.3f (raw %.3f)", sep++ ? "," : "", op_names[op], avg[op][0], avg[op][1]);
            printf("\n");
            printf("# Avg bus bandwidth    : %.3f GB/s zt_comm, %.3f GB/s raw MPI\n", all_z, all_r);
        }
    }
    b.be->i->free(b.be, b.send);
    b.be->i->free(b.be, b.recv);
    b.be->i->free(b.be, b.scratch);
    zt_comm_destroy(b.comm);
    zt_backend_destroy(b.be);
    zt_dist_finalize(&d);
    return wrong_total ? 1 : 0;
}
