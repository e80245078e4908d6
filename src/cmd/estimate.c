/* estimate.c — `ztrain estimate` and `ztrain hwinfo`. The memory figures come from
 * zt_zero_plan_memory(), the function zt_zero_init() allocates by: every component per rank, the device and host
 * bytes, and a table of every ZeRO stage x offload setting the config allows (with a hardware model, each one's
 * predicted step, core/diag/perf_model.h). */
#include "cmd/estimate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/cli.h"
#include "core/dist/backend_factory.h"
#include "core/diag/backend_count.h"
#include "core/diag/perf_model.h"
#include "core/optim/step.h"
#include "core/model/model_load.h"
#include "core/dist/zero.h"
#include "util/util.h"

/* ---------------------------------------------------------------- fitting a memory limit */


/* "24G", "512M", "1.5T", bytes: 0 on error */
static size_t parse_size(const char *v) {
    char *end;
    double x = strtod(v, &end);
    if (end == v || x <= 0) return 0;
    double mul = 1;
    if (*end == 'K' || *end == 'k') mul = 1024.0, end++;
    else if (*end == 'M' || *end == 'm') mul = 1024.0 * 1024, end++;
    else if (*end == 'G' || *end == 'g') mul = 1024.0 * 1024 * 1024, end++;
    else if (*end == 'T' || *end == 't') mul = 1024.0 * 1024 * 1024 * 1024, end++;
    if (*end == 'i') end++;
    if (*end == 'B') end++;
    return *end ? 0 : (size_t)(x * mul);
}

/* MemAvailable of this node (bytes), 0 if unknown */
static size_t mem_available(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    unsigned long long kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
    fclose(f);
    return (size_t)kb * 1024;
}


/* the hardware of the step-time model from the options (checked before anything is printed) */
static void hw_from_options(zt_hw *hwp, int N, int M, const char *hw_name, const char *net, const char *flops,
                            const char *mem_bw, const char *comm, const char *host, zt_dist *d) {
    double sgemm = 0;
    if (strcmp(hw_name, "cpu") == 0 && !flops) { /* the host it runs on: one core's sgemm, measured now */
        char err[ZT_ERR_BUF];
        zt_backend *be = zt_backend_create("cpu", 1, err, sizeof err);
        if (!be) zt_user_error_all("%s", err);
        sgemm = zt_backend_measure_sgemm(be, 1024);
        zt_backend_destroy(be);
    }
    zt_hw hw;
    if (zt_hw_preset(hw_name, sgemm, d->node_cores, &hw))
        zt_user_error_all("--hw / --device %s: expected cpu (the host it runs on, measured), h100 or h200", hw_name);
    if (net && zt_hw_set_net(&hw, net))
        zt_user_error_all("--net %s: expected BANDWIDTH_GBIT[,LATENCY_US] per node, e.g. 400,12", net);
    if (flops) {
        char *end;
        double g = strtod(flops, &end);
        if (*end || g <= 0) zt_user_error_all("--flops %s: expected sustained GFLOP/s per rank (per core on cpu)", flops);
        hw.flops = g * 1e9;
    }
    if (mem_bw) {
        char *end;
        double g = strtod(mem_bw, &end);
        if (*end || g <= 0) zt_user_error_all("--mem-bw %s: expected GB/s per rank for the optimizer's memory traffic", mem_bw);
        hw.mem_bw = g * 1e9;
        if (strcmp(hw_name, "cpu") == 0) { /* devsim's host link and host update run on the same memory */
            hw.host_bw = hw.mem_bw / 2;
            hw.host_mem_bw = hw.mem_bw;
        }
    }
    if (host && zt_hw_set_host(&hw, host))
        zt_user_error_all("--host-bw %s: expected the host link's GB/s per rank and direction[,the host memory's GB/s "
                          "per rank], e.g. 50,60", host);
    if (comm) {
        char err[ZT_ERR_BUF];
        if (zt_hw_load_comm(&hw, comm, err, sizeof err)) zt_user_error_all("%s", err);
        if (hw.comm_ranks != N || M != 1)
            zt_user_error_all("--comm %s: measured on %d ranks of one node, but the prediction is for %d rank%s on %d node%s",
                              comm, hw.comm_ranks, N, N > 1 ? "s" : "", M, M > 1 ? "s" : "");
    }
    *hwp = hw;
}

/* the step-time model (core/diag/perf_model.h) for N ranks on M nodes of hardware `hw` */
static void performance(const zt_config *c, const zt_model_shape *s, int N, int M, const zt_hw *hwp, const char *comm,
                        int json, zt_dist *d) {
    const zt_hw hw = *hwp;
    zt_perf p;
    zt_perf_predict(c, s, N, M, &hw, &p);
    if (d->rank != 0) return;
    if (json) {
        printf("{\"hw\": \"%s\", \"ranks\": %d, \"nodes\": %d, \"stage\": %d, \"reduce\": \"%s\", \"step_s\": %.6g, "
               "\"compute_s\": %.6g, \"accum_s\": %.6g, \"grad_comm_s\": %.6g, \"grad_exposed_s\": %.6g, \"gather_s\": %.6g, \"optim_s\": %.6g, "
               "\"ckpt_s\": %.6g, \"tokens_per_s\": %.6g, \"efficiency\": %.4f, \"inter_node_bytes\": %.6g, "
               "\"fixed_exposed_s\": %.6g, \"fixed_step_s\": %.6g, \"fixed_inter_node_bytes\": %.6g, \"comm_measured\": %s, "
               "\"offload\": \"%s\", \"param_gather_s\": %.6g, \"param_gather_exposed_s\": %.6g, \"param_gathers\": %ld, "
               "\"offload_s\": %.6g, \"offload_xfer_s\": %.6g}\n",
               hw.name, N, M, c->zero.stage, c->zero.reduce, p.step_s, p.compute_s, p.accum_s, p.grad_comm_s, p.grad_exposed_s,
               p.gather_s + p.norm_s, p.optim_s, p.ckpt_s, p.tokens_per_s, p.efficiency, p.inter_node_bytes,
               p.fixed_exposed_s, p.fixed_step_s, p.fixed_inter_node_bytes, hw.comm_ranks ? "true" : "false",
               zt_zero_offload_of(c) ? c->zero.offload : "none", p.pgather_s, p.pgather_exposed_s, p.pgathers, p.offload_s,
               p.offload_xfer_s);
        return;
    }
    printf("performance model (%s, %d ranks on %d node%s, %d per node, %d micro-batch%s per rank per step; "
           "see src/core/diag/perf_model.h):\n", hw.name, N, M, M > 1 ? "s" : "", p.ranks_per_node, p.micro_per_rank,
           p.micro_per_rank > 1 ? "es" : "");
    if (hw.comm_ranks) printf("  collectives: measured (%s)\n", comm);
    printf("  %-34s %10.4f s\n", "compute (forward + backward)", p.compute_s);
    if (p.accum_s > 0) printf("  %-34s %10.4f s\n", "gradient accumulation (1 rank)", p.accum_s);
    printf("  %-34s %10.4f s (%.4f s in flight%s)\n", "gradient exchange, exposed", p.grad_exposed_s, p.grad_comm_s,
           c->zero.stage >= 2 ? ", overlapped with backward" : "");
    if (c->zero.stage == 3)
        printf("  %-34s %10.4f s (%ld gathers, %.4f s in flight; wte and the fixed tensors %.4f s, blocking)\n",
               "parameter gathers, exposed", p.pgather_exposed_s, p.pgathers, p.pgather_s, p.pgather_fixed_s);
    printf("  %-34s %10.4f s\n", c->zero.stage == 3 ? "norm's all-gather" : "all-gathers after the update",
           p.gather_s + p.norm_s);
    printf("  %-34s %10.4f s%s\n", "optimizer", p.optim_s, p.offload_s > 0 ? " (on the device: the norm)" : "");
    if (p.offload_s > 0)
        printf("  %-34s %10.4f s (copies over the host link %.4f s at %.0f GB/s, AdamW at %.0f GB/s)\n",
               "optimizer on the host (offload)", p.offload_s, p.offload_xfer_s, hw.host_bw / 1e9, hw.host_mem_bw / 1e9);
    printf("  %-34s %10.4f s\n", "checkpoint (per step, amortized)", p.ckpt_s);
    printf("  %-34s %10.4f s  -> %.0f tokens/s, weak-scaling efficiency %.1f%%\n", "step", p.step_s, p.tokens_per_s,
           100 * p.efficiency);
    if (M > 1) printf("  inter-node traffic: %.3g GB per node per step at %.0f Gbit/s\n", p.inter_node_bytes / 1e9, hw.inter_bw * 8 / 1e9);
    if (N > 1)
        printf("  exact alternative, int64 fixed-point gradients (a costed design; ztrain keeps ordered): exposed %.4f s, step %.4f s%s\n",
               p.fixed_exposed_s, p.fixed_step_s, M > 1 ? "" : "");
}


/* ---------------------------------------------------------------- one GPU's step, counted without a GPU */

/* step.h's batch source for the counted step: token i % 256 everywhere (any valid tokens do: counts and bytes do not
   depend on values, except the embedding backward's distinct tokens, which are counted as B*T rows) */
static void count_batch(void *ctx, long step, int j, int32_t *tokens, int32_t *targets) {
    (void)step; (void)j;
    const int *n = ctx;
    for (int i = 0; i < *n; i++) tokens[i] = targets[i] = i % 256;
}

static const double MiB = 1.0 / (1 << 20);

/* one GPU's step as counted (gpu_count) */
typedef struct gpu_counted {
    int ok;                     /* counted (1 process) */
    zt_config c;                /* the config counted: one GPU's (1 rank, no offload, the device's storage options) */
    zt_model_shape s;
    const char *device;
    int K;                      /* micro-batches in the step */
    double wall;
    zt_count_totals t;
    zt_count_entry e[ZT_COUNT_MAX_KINDS];
    int ne;
    long long h0, h1, p0, p1, g16; /* the harness's launches and packed elements around the step, its buffers */
} gpu_counted;

/* Runs two training steps of one micro-batch (global_batch = micro_batch, 1 rank) on `device` under the counting
   wrapper (core/diag/backend_count.h): the second's kernel launches and device-memory bytes per op kind, and the
   packed-operand buffers both grew. device "count": no compute at all; "cudasim": the real kernels under the host
   execution harness, whose own count of executed launches is kept beside the wrapper's
   (tests/e2e/test_gpu_budget.sh compares them). */
static void gpu_count(const zt_config *c0, const char *device, const zt_dist *d, gpu_counted *r) {
    char err[ZT_ERR_BUF];
    memset(r, 0, sizeof *r);
    if (d->size != 1) return;
    r->device = device;
    zt_config *c = &r->c;
    *c = *c0;
    /* ZTRAIN_TEST_COUNT_MICRO=K (tests): K micro-batches a step, to see what grows with them */
    const char *km = getenv("ZTRAIN_TEST_COUNT_MICRO");
    r->K = km && atoi(km) > 0 ? atoi(km) : 1;
    c->train.global_batch = r->K * c->train.micro_batch;
    /* the kernels of one GPU's step: an offloaded update runs on the host (and on 1 rank would hold the whole model's
       optimizer state in the memory of the host running the estimate) */
    snprintf(c->zero.offload, sizeof c->zero.offload, "none");
    /* the model's storage options as on a GPU (train.attention, act_storage and param_storage auto) */
    snprintf(c->device, sizeof c->device, "%s", strcmp(device, "count") == 0 ? "cuda" : device);
    if (zt_config_validate(c, 1, err, sizeof err)) zt_user_error_all("counting the GPU step: %s", err);
    zt_backend *be = zt_backend_create(device, 0, err, sizeof err);
    if (!be) zt_user_error_all("--count-device %s: %s", device, err);
    const int wrapped = strcmp(device, "count") != 0; /* the count device counts from its creation */
    if (wrapped) zt_backend_count_begin(be);
    zt_comm *comm = zt_comm_create("auto", be, err, sizeof err);
    if (!comm) zt_user_error_all("--count-device %s: %s", device, err);
    zt_model_shape_from_config(c, &r->s);
    zt_model m;
    zt_zero z;
    zt_zero_init(&z, c, &m, be, comm, &r->s);
    int n = c->train.micro_batch * c->train.seq_len;
    zt_step st;
    zt_step_init(&st, &m, &z, c, count_batch, &n);
    const double t0 = zt_now();
    zt_step_run(&st, 0); /* the first step grows scratch buffers; the second is the steady state counted */
    zt_backend_count_reset();
    r->h0 = zt_backend_harness_launches();
    r->p0 = zt_backend_harness_packed();
    zt_step_run(&st, 1);
    r->h1 = zt_backend_harness_launches();
    r->p1 = zt_backend_harness_packed();
    r->g16 = wrapped ? zt_backend_harness_gemm16() : -1;
    r->wall = zt_now() - t0;
    r->t = zt_backend_count_totals();
    r->ne = zt_backend_count_report(r->e, ZT_COUNT_MAX_KINDS);
    zt_step_free(&st);
    zt_zero_free(&z, &m);
    zt_comm_destroy(comm);
    if (wrapped) zt_backend_count_end(be);
    zt_backend_destroy(be);
    r->ok = 1;
}

/* prints what gpu_count counted, with the step time it predicts on `hw` (h100 / h200, perf_model.h) */
static void gpu_kernels(const gpu_counted *r, const char *hw, const zt_dist *d) {
    if (d->rank != 0) return;
    if (!r->ok) {
        printf("GPU kernels per step: not counted (run `ztrain estimate` as 1 process)\n");
        return;
    }
    const zt_config *c = &r->c;
    const zt_count_totals t = r->t;
    const int wrapped = strcmp(r->device, "count") != 0;
    const long all = t.launches + t.memops;
    if (r->K == 1)
        printf("GPU kernels per step (1 GPU, one micro-batch of %d x %d, %s, device \"%s\" in %.2f s for 2 steps; "
               "core/diag/backend_count.h):\n", c->train.micro_batch, c->train.seq_len, c->precision, r->device,
               r->wall);
    else
        printf("GPU kernels per step (1 GPU, %d micro-batches of %d x %d, %s, device \"%s\" in %.2f s for 2 steps; "
               "core/diag/backend_count.h):\n", r->K, c->train.micro_batch, c->train.seq_len, c->precision, r->device,
               r->wall);
    printf("  kernel launches per step: %ld (%ld kernels and GEMMs + %ld copies and memsets)\n", all, t.launches,
           t.memops);
    if (wrapped && r->h1 >= 0)
        printf("  launches executed by the host execution harness: %lld (the wrapper counted %ld kernels and GEMMs); "
               "elements it packed as product operands: %lld (the wrapper counted %.0f)\n", r->h1 - r->h0, t.launches,
               r->p1 - r->p0, t.packed);
    printf("  HBM traffic per step: %.2f GB (%.0f bytes; host transfers %.3f GB in %ld calls, not counted)\n",
           t.bytes / 1e9, t.bytes, t.host_bytes / 1e9, t.host_xfers);
    printf("  round_to fused into the op before it: %ld; product operands read from 2-byte words, not packed: %ld; "
           "stash packs whose words the ops wrote: %ld; parameter packs the update did: %ld; communicator calls: %ld (not "
           "in the launches)\n",
           t.fused_rounds, t.mirror_hits, t.packs_skipped, t.adamw_words, t.comm_calls);
    if (zt_config_prec(c) != ZT_PREC_FP32) {
        printf("  GEMM operand buffers: %.1f MiB (%.0f 2-byte elements packed for the products: three buffers, each as "
               "large as the largest operand packed into it; the memory plan bounds them at %.1f MiB)",
               2.0 * t.gemm16 * MiB, t.gemm16,
               (double)zt_model_gemm16_bytes(&r->s, c->train.micro_batch, c->train.seq_len) * MiB);
        if (r->g16 >= 0) printf("; the harness's buffers: %lld elements", r->g16);
        printf("\n");
    }
    printf("  host waits per step: %ld (sync and to_host: the gradient norm and the step's losses, read once the update "
           "is queued; none before); copies to the device between its launches: %ld (the inputs go first)\n",
           t.host_waits, t.host_mid);
    printf("  %-22s %7s %9s %7s %10s %16s\n", "op kind (by bytes)", "calls", "launches", "copies", "GB", "bytes");
    for (int i = 0; i < r->ne; i++)
        printf("  %-22s %7ld %9ld %7ld %10.3f %16.0f\n", r->e[i].name, r->e[i].calls, r->e[i].launches,
               r->e[i].memops, r->e[i].bytes / 1e9, r->e[i].bytes);
    zt_gpu_spec g;
    if (hw && zt_gpu_spec_of(hw, &g) == 0) {
        zt_lora_cfg lc;
        zt_lora_cfg_from_config(c, &lc);
        const double flops = zt_model_train_flops_per_token(&r->s, c->train.seq_len,
                                                            c->lora.enabled ? zt_lora_param_count(&r->s, &lc) : 0) *
                             c->train.micro_batch * c->train.seq_len;
        zt_gpu_step p;
        zt_gpu_step_predict(&g, flops, t.bytes, all, &p);
        printf("  predicted step on %s: %.1f ms = max(compute %.1f ms: %.4g FLOP at %.0f%% of %.0f TFLOP/s bf16, "
               "traffic %.1f ms at %.0f%% of %.2f TB/s) + launches %.1f ms (%ld x %.0f us); docs/perf-model.md\n",
               hw, p.step_s * 1e3, p.compute_s * 1e3, flops, 100 * ZT_GPU_COMPUTE_FRAC, g.bf16_flops / 1e12,
               p.traffic_s * 1e3, 100 * ZT_GPU_BW_FRAC, g.hbm_bw / 1e12, p.launch_s * 1e3, all, ZT_GPU_LAUNCH_S * 1e6);
    }
}

/* the memory plan; gemm16 >= 0: the packed GEMM operands as counted for this run's GPU step (bytes), in place of the
   plan's bound on them (zt_zero_plan.gemm16_bytes) wherever estimate prints memory */
static void plan_memory(const zt_config *c, const zt_model_shape *s, int N, double gemm16, zt_zero_plan *p) {
    zt_zero_plan_memory(c, s, N, p);
    if (gemm16 >= 0 && p->gemm16_bytes) {
        p->act_bytes = p->act_bytes - p->gemm16_bytes + (size_t)gemm16;
        p->gemm16_bytes = (size_t)gemm16;
    }
}

/* ---------------------------------------------------------------- ZeRO-3, offload: device and host memory */

/* stage 3's parameter lines: the window and its staging, and the shard (core/dist/zero_plan.c) */
static void print_stage3_params(const zt_config *c, const zt_model_shape *s, const zt_zero_plan *p) {
    const int off = zt_zero_offload_of(c), words = zt_config_prec(c) != ZT_PREC_FP32;
    const double win = (double)zt_model_shard_window_elems(s), es = words ? 2 : 4;
    printf("%-24s %12.1f   (window %.1f: wte, the tensors outside the layers, 2 layer slots", "parameters",
           p->param_bytes * MiB, win * 4 * MiB);
    if (words) printf("; gathered words' landing %.1f", win * 2 * MiB);
    if (off == 2) printf("; own part staged to send %.1f", win * es * MiB);
    if (off) printf("; the initial values on their way to the host %.1f, freed once started", p->shard * 4.0 * MiB);
    printf(")\n");
    if (off == 2)
        printf("%-24s %12.1f   (in host memory: zero.offload = \"optimizer+params\")\n", "parameter shard", 0.0);
    else
        printf("%-24s %12.1f   (%s, this rank's; gathered layer by layer)\n", "parameter shard", p->pshard_bytes * MiB,
               words ? "2-byte words holding the master weights rounded" : "fp32");
}

/* a plan per rank: what the backend holds (on a GPU, its memory) and what lives in host memory (the offloaded state,
   the checkpoint staging, the data's index) */
static void plan_split(const zt_zero_plan *p, double *dev, double *host) {
    const double h = (double)p->ckpt_bytes + (double)p->data_bytes;
    *dev = (double)zt_zero_plan_total(p) - h;
    *host = h + (double)p->offload_bytes;
}

static void print_split(const zt_config *c, const zt_zero_plan *p) {
    double dev, host;
    plan_split(p, &dev, &host);
    const int off = zt_zero_offload_of(c), words = zt_config_prec(c) != ZT_PREC_FP32;
    if (off)
        printf("%-24s %12.1f   (not in the total: master weights, Adam moments, gradient shard, published shard%s; "
               "zero.offload = \"%s\")\n", "offloaded (host memory)", p->offload_bytes * MiB,
               off == 2 && words ? ", parameter shard's words" : off == 2 ? "; the master weights are the shard" : "",
               c->zero.offload);
    else if (strcmp(c->zero.offload, "none") != 0)
        printf("zero.offload = \"%s\" on device \"%s\": its memory is host memory already; nothing moves\n",
               c->zero.offload, c->device);
    printf("per rank: device %.1f MiB, host %.1f MiB (host: %sthe checkpoint staging and the data's index%s)\n",
           dev * MiB, host * MiB, off ? "the offloaded state, " : "",
           strcmp(c->device, "cpu") == 0 || strcmp(c->device, "devsim") == 0 ? "; on this device both are host memory"
                                                                            : "");
}

/* every ZeRO stage x offload the config allows: device and host memory per rank and, with a hardware model, the
   predicted step; `gpu` (h100 / h200) adds whether the device part fits the GPU; gemm16 as plan_memory's */
static void zero_table(const zt_config *c, const zt_model_shape *s, int N, int M, const zt_hw *hw, const char *gpu,
                       double gemm16) {
    static const char *offs[] = {"none", "optimizer", "optimizer+params"};
    zt_gpu_spec g;
    const int fits = gpu && zt_gpu_spec_of(gpu, &g) == 0;
    double dev[12], host[12], step[12];
    int st[12], of[12], n = 0;
    double most = 0;
    for (int stage = 0; stage <= 3; stage++)
        for (int o = 0; o < 3; o++) {
            zt_config t = *c;
            char err[ZT_ERR_BUF];
            t.zero.stage = stage;
            snprintf(t.zero.offload, sizeof t.zero.offload, "%s", offs[o]);
            if (zt_config_check_zero(&t, err, sizeof err)) continue;
            zt_zero_plan p;
            plan_memory(&t, s, N, gemm16, &p);
            plan_split(&p, &dev[n], &host[n]);
            step[n] = 0;
            if (hw) {
                zt_perf pf;
                zt_perf_predict(&t, s, N, M, hw, &pf);
                step[n] = pf.step_s;
            }
            if (dev[n] > most) most = dev[n];
            st[n] = stage;
            of[n++] = o;
        }
    const int gib = most >= 4.0 * (1 << 30);
    const double u = gib ? MiB / 1024 : MiB;
    const char *un = gib ? "GiB" : "MiB";
    printf("ZeRO stage x offload, per rank on %d rank%s (device: what the backend allocates at its peak; host: the "
           "offloaded state, checkpoint staging and data index%s):\n", N, N > 1 ? "s" : "",
           zt_zero_offload_of(c) || strcmp(c->device, "cpu") ? "" : "; device \"cpu\": offload moves nothing");
    char dh[16], hh[16];
    snprintf(dh, sizeof dh, "device %s", un);
    snprintf(hh, sizeof hh, "host %s", un);
    printf("  %-5s %-17s %10s %10s", "stage", "offload", dh, hh);
    if (fits) printf("  %-12s", gpu);
    if (hw) printf(" %10s", "step s");
    printf("\n");
    for (int i = 0; i < n; i++) {
        printf("  %-5d %-17s %10.*f %10.*f", st[i], offs[of[i]], gib ? 2 : 1, dev[i] * u, gib ? 2 : 1, host[i] * u);
        if (fits) printf("  %-12s", dev[i] <= g.hbm_bytes - ZT_GPU_RESERVED_BYTES ? "fits" : "too large");
        if (hw) printf(" %10.4f", step[i]);
        const int mine = st[i] == c->zero.stage && !strcmp(offs[of[i]], c->zero.offload);
        printf("%s\n", mine ? "   <- this config" : "");
    }
    if (fits)
        printf("  (%s: %.0f MiB, %.0f MiB of it kept for the CUDA context, cuBLASLt's workspace and NCCL)\n", gpu,
               g.hbm_bytes * MiB, ZT_GPU_RESERVED_BYTES * MiB);
}

int zt_cmd_estimate(int argc, char **argv, zt_dist *d) {
    char err[ZT_ERR_BUF];
    const char *ranks_s = NULL, *nodes_s = NULL, *hw_s = NULL, *net_s = NULL, *flops_s = NULL, *json_s = NULL,
               *limit_s = NULL, *membw_s = NULL, *comm_s = NULL, *dev_s = NULL, *count_s = NULL, *host_s = NULL;
    zt_cli_opt opts[] = {{"--ranks", 1, &ranks_s}, {"--nodes", 1, &nodes_s}, {"--hw", 1, &hw_s},
                         {"--net", 1, &net_s},     {"--flops", 1, &flops_s}, {"--json", 0, &json_s},
                         {"--mem-limit", 1, &limit_s}, {"--mem-bw", 1, &membw_s}, {"--comm", 1, &comm_s},
                         {"--device", 1, &dev_s}, {"--count-device", 1, &count_s}, {"--host-bw", 1, &host_s}};
    zt_cli cli;
    zt_config c;
    if (zt_cli_parse(&cli, argc, argv, opts, 12, err, sizeof err) || zt_cli_load_config(&cli, &c, err, sizeof err))
        zt_user_error_all("%s", err);
    /* --device is --hw's other name (the device the prediction is for: cpu, h100, h200) */
    if (dev_s && hw_s && strcmp(dev_s, hw_s) != 0)
        zt_user_error_all("--device %s and --hw %s: give one (they name the same thing)", dev_s, hw_s);
    if (dev_s) hw_s = dev_s;
    int N = d->size;
    if (ranks_s) {
        char *end;
        long v = strtol(ranks_s, &end, 10);
        if (*end || v < 1 || v > 1 << 20) zt_user_error_all("--ranks %s: expected a rank count >= 1", ranks_s);
        N = (int)v;
    }
    int M = 1;
    if (nodes_s) {
        char *end;
        long v = strtol(nodes_s, &end, 10);
        if (*end || v < 1 || v > N) zt_user_error_all("--nodes %s: expected a node count from 1 to --ranks (%d)", nodes_s, N);
        M = (int)v;
    }
    if (zt_config_validate(&c, N, err, sizeof err)) zt_user_error_all("%s", err);
    /* LoRA: the model is lora.base's (when the file can be read; else the config's model.*) */
    int base_read = c.lora.enabled && zt_lora_base_shape(&c, err, sizeof err) == 0;
    zt_model_shape s;
    zt_model_shape_from_config(&c, &s);
    const int want_perf = hw_s || nodes_s || net_s || flops_s || json_s || membw_s || comm_s || host_s;
    zt_hw hw;
    if (want_perf) hw_from_options(&hw, N, M, hw_s ? hw_s : "cpu", net_s, flops_s, membw_s, comm_s, host_s, d);
    /* one GPU's kernels: --hw h100 / h200 on the count device, or --count-device count|cudasim; counted first, so
       that the memory below holds the packed-operand buffers the step grew, not their bound */
    if (count_s && strcmp(count_s, "count") != 0 && strcmp(count_s, "cudasim") != 0)
        zt_user_error_all("--count-device %s: expected count (no compute) or cudasim (the kernels under the harness)",
                          count_s);
    const int gpu_hw = hw_s && (strcmp(hw_s, "h100") == 0 || strcmp(hw_s, "h200") == 0);
    const int count_gpu = count_s || (gpu_hw && !json_s);
    gpu_counted *gc = count_gpu ? zt_calloc(1, sizeof *gc) : NULL;
    double gemm16 = -1; /* the packed GEMM operands as counted (bytes), else -1: the plan's bound */
    if (gc) {
        gpu_count(&c, count_s ? count_s : "count", d, gc);
        if (gc->ok && zt_config_prec(&gc->c) != ZT_PREC_FP32) gemm16 = 2.0 * gc->t.gemm16;
    }
    zt_zero_plan p;
    plan_memory(&c, &s, N, gemm16, &p);
    size_t total = zt_zero_plan_total(&p);
    if (d->rank == 0) {
        printf("config: L%d H%d C%d V%d, %zu params, micro_batch %d x seq_len %d, ZeRO-%d, %d ranks\n", s.n_layer,
               s.n_head, s.n_embd, s.padded_vocab, p.total, c.train.micro_batch, c.train.seq_len, c.zero.stage, N);
        printf("%-24s %12s\n", "memory per rank", "MiB");
        const zt_model_opts mo = zt_model_opts_from_config(&c);
        const int off = zt_zero_offload_of(&c);
        if (c.zero.stage == 3) {
            print_stage3_params(&c, &s, &p);
        } else if (mo.params16)
            printf("%-24s %12.1f   (2-byte words %.1f + an fp32 window %.1f%s: train.param_storage = \"%s\")\n",
                   "parameters", p.param_bytes * MiB, p.padded * 2.0 * MiB, zt_model_wbuf_elems(&s) * 4.0 * MiB,
                   off ? " + the initial values staged on their way to the host, freed once started" : "",
                   c.train.param_storage);
        else printf("%-24s %12.1f\n", "parameters", p.param_bytes * MiB);
        if (zt_zero_grad16(&c, N) && c.zero.stage < 2)
            printf("%-24s %12.1f   (an fp32 window: the gradient is 2-byte words, in the communication buffers)\n",
                   "micro-batch gradients", p.grad_bytes * MiB);
        else printf("%-24s %12.1f\n", "micro-batch gradients", p.grad_bytes * MiB);
        printf("%-24s %12.1f\n", "reduced gradients", p.acc_bytes * MiB);
        if (off) printf("%-24s %12.1f   (offloaded to host memory: below)\n", "optimizer state (m, v)", 0.0);
        else printf("%-24s %12.1f\n", "optimizer state (m, v)", p.optim_bytes * MiB);
        if (p.master_bytes)
            printf("%-24s %12.1f   (precision %s: %s)\n", "fp32 master weights", p.master_bytes * MiB, c.precision,
                   mo.params16 ? "gradients in float32 buffers"
                                                             : "parameters and gradients in float32 buffers");
        printf("%-24s %12.1f\n", "communication buffers", p.comm_bytes * MiB);
        printf("%-24s %12.1f", "activations + scratch", p.act_bytes * MiB);
        if (mo.act16) printf("   (kept for backward in 2 bytes: train.act_storage = \"auto\")");
        if (p.gemm16_bytes)
            printf("%s   (with the GEMM operand buffers: %.1f MiB, %s)", mo.act16 ? "\n" : "", p.gemm16_bytes * MiB,
                   gemm16 >= 0 ? "as one step grew them on the count device" : "bounded: --hw h100|h200 counts them");
        printf("\n");
        printf("%-24s %12.1f\n", "sampling in training", p.sample_bytes * MiB);
        printf("%-24s %12.1f   (host; checkpoint.async = %s)\n", "checkpoint staging", p.ckpt_bytes * MiB,
               c.checkpoint.async ? "true: the whole shard" : "false: two 32 MiB halves");
        printf("%-24s %12.3f   (index and the window in use; the shards are memory-mapped, not held)\n", "data",
               p.data_bytes * MiB);
        printf("%-24s %12.1f\n", "total", total * MiB);
        print_split(&c, &p);
        if (c.lora.enabled) {
            zt_config full = c;
            full.lora.enabled = 0;
            zt_zero_plan fp;
            zt_zero_plan_memory(&full, &s, N, &fp);
            printf("LoRA r %d on %s (model %s): %zu trainable params of %zu; full fine-tuning would need %.1f MiB per "
                   "rank (LoRA saves %.1f MiB: no gradients or optimizer state for the base)\n", c.lora.rank,
                   c.lora.targets, base_read ? "from lora.base" : "from model.*: lora.base not readable", p.total,
                   fp.total, zt_zero_plan_total(&fp) * MiB, (zt_zero_plan_total(&fp) - (double)total) * MiB);
        }
        if (c.zero.stage == 2)
            printf("stage 2: %d gradient buckets (whole layers, <= %.1f MiB unless one layer is larger: largest %.1f MiB), "
                   "%d in flight + wte/wpe's own\n", p.n_buckets, c.zero.bucket_mb, p.max_bucket * 4.0 * MiB, ZT_ZERO_RING);
        zt_lora_cfg lc;
        zt_lora_cfg_from_config(&c, &lc);
        const double fpt = zt_model_train_flops_per_token(&s, c.train.seq_len,
                                                          c.lora.enabled ? zt_lora_param_count(&s, &lc) : 0);
        printf("FLOPs per token (fwd+bwd%s): %.4g; per step: %.4g\n", c.lora.enabled ? ", frozen base" : "", fpt,
               fpt * c.train.global_batch * c.train.seq_len);
        zero_table(&c, &s, N, M, want_perf ? &hw : NULL, hw_s, gemm16);
    }
    if (limit_s) {
        size_t limit = parse_size(limit_s);
        if (!limit) zt_user_error_all("--mem-limit %s: expected a size such as 16G, 512M or bytes", limit_s);
        size_t fit_bytes = 0;
        int mb = zt_zero_fit_micro_batch(&c, &s, N, limit, &fit_bytes);
        if (d->rank == 0) {
            if (mb > 0)
                printf("largest micro_batch within %.1f MiB per rank: %d (%.1f MiB; global_batch %d = %d x %d ranks x %d "
                       "accumulation steps)\n", limit * MiB, mb, fit_bytes * MiB, c.train.global_batch, mb, N,
                       c.train.global_batch / (mb * N));
            else
                printf("no micro_batch fits %.1f MiB per rank at ZeRO-%d, recompute %s: even micro_batch 1 needs more "
                       "(try a higher zero.stage, train.recompute = \"layer\", or more ranks)\n",
                       limit * MiB, c.zero.stage, c.train.recompute);
        }
    }
    if (want_perf) performance(&c, &s, N, M, &hw, comm_s, json_s != NULL, d);
    if (gc) gpu_kernels(gc, gpu_hw ? hw_s : NULL, d);
    free(gc);
    return 0;
}

/* "model name" of /proc/cpuinfo and the vector extensions the kernels care about */
static void cpu_info(char *model, size_t mn, char *vec, size_t vn) {
    snprintf(model, mn, "unknown");
    vec[0] = 0;
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[8192];
    int got_model = 0, got_flags = 0;
    while (fgets(line, sizeof line, f) && !(got_model && got_flags)) {
        char *colon = strchr(line, ':');
        if (!colon) continue;
        char *v = colon + 1;
        while (*v == ' ') v++;
        v[strcspn(v, "\n")] = 0;
        if (!got_model && strncmp(line, "model name", 10) == 0) { snprintf(model, mn, "%s", v); got_model = 1; }
        if (!got_flags && strncmp(line, "flags", 5) == 0) {
            static const char *want[] = {"sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512_bf16", "amx_tile"};
            size_t o = 0;
            for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
                char pat[32];
                snprintf(pat, sizeof pat, " %s ", want[i]);
                char padded[8200];
                snprintf(padded, sizeof padded, " %s ", v);
                if (strstr(padded, pat) && o < vn) o += (size_t)snprintf(vec + o, vn - o, "%s%s", o ? " " : "", want[i]);
            }
            got_flags = 1;
        }
    }
    fclose(f);
}

static const char *recompute_name(int r) { return r == 2 ? "layer" : r == 1 ? "gelu" : "none"; }

/* hwinfo -c CFG: the settings to use on the host it runs on, with the memory estimate behind them */
static void recommend(const char *cfg_path, int n_sets, char **sets, const zt_dist *d, size_t avail) {
    char err[ZT_ERR_BUF];
    zt_config c;
    if (zt_config_load(&c, cfg_path, n_sets, sets, err, sizeof err)) zt_user_error_all("%s", err);
    zt_model_shape s;
    zt_model_shape_from_config(&c, &s);
    /* ranks per node: as `ztrain launch` (one rank per up to 8 cores), within what divides the batch */
    const int cores = d->node_cores > 0 ? d->node_cores : 1;
    int ranks = (cores + 7) / 8;
    while (ranks > 1 && c.train.global_batch % ranks) ranks--;
    const int threads = cores / ranks > 0 ? cores / ranks : 1;
    const size_t limit = (size_t)(0.9 * (double)avail / ranks); /* leave 10% of what is available */
    if (d->rank != 0) return;
    if (strcmp(c.device, "cpu") != 0)
        printf("note: %s has device = \"%s\"; this recommendation is for this node's CPUs (device = \"cpu\")\n",
               cfg_path, c.device);
    printf("recommendation for %s on this node (%d cores, %.1f GiB available; 90%% of it split over the ranks):\n",
           cfg_path, cores, avail / (1024.0 * 1024 * 1024));
    /* the cheapest setting that fits: ZeRO stage first (free with ordered reduction on one node), then
       recomputation (costs compute), then the largest micro-batch */
    static const int stages[] = {2, 1, 0};
    for (int rc = 0; rc <= 2; rc++) {
        for (int si = 0; si < 3; si++) {
            zt_config t = c;
            t.zero.stage = ranks > 1 ? stages[si] : 0;
            snprintf(t.train.recompute, sizeof t.train.recompute, "%s", recompute_name(rc));
            size_t bytes = 0;
            int mb = zt_zero_fit_micro_batch(&t, &s, ranks, limit, &bytes);
            if (mb <= 0) continue;
            printf("  ranks per node %d, train.threads %d, zero.stage %d, train.recompute \"%s\", train.micro_batch %d\n"
                   "  (estimate: %.1f MiB per rank of a %.1f MiB share; global_batch %d = %d x %d ranks x %d accumulation steps)\n"
                   "  run: ./ztrain launch -n %d -- train -c %s --set train.micro_batch=%d --set zero.stage=%d%s\n",
                   ranks, threads, t.zero.stage, recompute_name(rc), mb, bytes / 1048576.0, limit / 1048576.0,
                   c.train.global_batch, mb, ranks, c.train.global_batch / (mb * ranks), ranks, cfg_path, mb, t.zero.stage,
                   rc ? (rc == 2 ? " --set train.recompute=layer" : " --set train.recompute=gelu") : "");
            return;
        }
        if (ranks == 1) continue;
    }
    printf("  nothing fits: even micro_batch 1 with ZeRO-2 and train.recompute = \"layer\" needs more than %.1f MiB "
           "per rank (`ztrain estimate -c %s --ranks N` for more ranks or nodes)\n", limit / 1048576.0, cfg_path);
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
    double *all = zt_calloc((size_t)d->size, sizeof(double));
    MPI_Gather(&g, 1, MPI_DOUBLE, all, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    int info[4] = {d->local_rank, d->node_cores, d->affinity_cores, be->threads};
    int *ai = zt_calloc((size_t)d->size * 4, sizeof(int));
    MPI_Gather(info, 4, MPI_INT, ai, 4, MPI_INT, 0, MPI_COMM_WORLD);
    const size_t avail = mem_available();
    if (d->rank == 0) {
        char model[256], vec[256], host[256] = "?", gpus[4096];
        cpu_info(model, sizeof model, vec, sizeof vec);
        gethostname(host, sizeof host);
        long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
        printf("host: %s\n", host);
        printf("cpu: %s, %d cores online, vector extensions: %s\n", model, d->node_cores, vec[0] ? vec : "none known");
        printf("memory: %.1f GiB total, %.1f GiB available\n", (double)pages * psz / (1024.0 * 1024 * 1024),
               avail / (1024.0 * 1024 * 1024));
        printf("layout: %s\n", layout);
        int ng = zt_backend_list_gpus(gpus, sizeof gpus);
        printf("backend: %s\n", desc);
        if (ng > 0) printf("gpus (rank 0's node): %d\n%s", ng, gpus);
        else printf("gpus: none usable (%s)\n", ng == 0 ? "no device" : gpus);
        printf("%6s %6s %10s %10s %8s %14s\n", "rank", "local", "node_cores", "bound_to", "threads", "sgemm_GFLOP/s");
        for (int r = 0; r < d->size; r++)
            printf("%6d %6d %10d %10d %8d %14.1f\n", r, ai[4 * r], ai[4 * r + 1], ai[4 * r + 2], ai[4 * r + 3], all[r]);
    }
    if (cli.config_path) recommend(cli.config_path, cli.n_sets, cli.sets, d, avail);
    free(all);
    free(ai);
    zt_backend_destroy(be);
    return 0;
}
