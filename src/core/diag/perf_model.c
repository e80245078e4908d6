/* perf_model.c — the alpha-beta step-time model (see perf_model.h). The constants of each preset say
 * where they come from; the cpu preset's links were measured on a 2-core AMD EPYC VM with
 * `mpirun -np 2 build/bench/bench_comm` (all-to-all busbw 2.9 GB/s and all-gather 2.5 GB/s
 * from 16 MB up, 2.6 us for 4 KB), its compute rate is the single-thread sgemm rate the caller measures
 * times the fraction a training step reaches (0.8: d6 at 1 thread, 67 of 84 GFLOP/s). */
#include "core/diag/perf_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dist/zero.h"
#include "util/json.h"
#include "util/util.h"

int zt_hw_preset(const char *name, double cpu_sgemm_gflops_per_core, int cores, zt_hw *hw) {
    memset(hw, 0, sizeof *hw);
    snprintf(hw->name, sizeof hw->name, "%s", name);
    if (strcmp(name, "cpu") == 0) {
        hw->flops = 0.8 * cpu_sgemm_gflops_per_core * 1e9; /* per core; scaled by cores per rank below */
        hw->mem_bw = 10e9;
        hw->intra_bw = 2.5e9;       /* MPI over shared memory, ring collectives (bench_comm all_gather) */
        hw->intra_lat = 2.6e-6;
        hw->a2a_bw_factor = 1.15;   /* all-to-all busbw 2.9 GB/s vs all-gather 2.5 (bench_comm, above) */
        hw->rs_bw_factor = 0.34;    /* MPI_Reduce_scatter_block busbw 0.84 GB/s from 16 MB up */
        hw->inter_bw = 25e9 / 8.0;  /* 25 Gbit/s Ethernet per node unless --net says otherwise */
        hw->inter_lat = 20e-6;
        hw->disk_bw = 1.2e9;        /* bench_ckpt.sh: 1.0-1.5 GB/s */
        hw->host_bw = hw->mem_bw / 2; /* devsim's "host link" is a memcpy: each byte read and written */
        hw->host_mem_bw = hw->mem_bw;
        hw->cores_per_node = cores > 0 ? cores : 1;
        return 0;
    }
    /* GPUs: bf16 dense peak x 45% MFU (llm.c / Megatron-class kernels); NVLink busbw ~80% of the
       per-direction link rate; 400 Gbit/s per node between nodes unless --net says otherwise; gradients
       exchanged as the code does: ordered bf16/fp16 in 2 bytes, otherwise fp32 */
    if (strcmp(name, "h100") == 0 || strcmp(name, "h200") == 0) {
        hw->flops = 0.45 * 989e12;
        hw->mem_bw = (strcmp(name, "h100") == 0 ? 3.35e12 : 4.8e12) * 0.8;
        hw->intra_bw = 0.8 * 450e9;
        hw->intra_lat = 6e-6;
        hw->a2a_bw_factor = 0.75;   /* NCCL all-to-all reaches less of NVLink than rings */
        hw->rs_bw_factor = 1.0;     /* NCCL's ring reduce-scatter runs at ring speed */
        hw->inter_bw = 400e9 / 8.0;
        hw->inter_lat = 12e-6;
        hw->disk_bw = 20e9;
        /* zero.offload: each GPU's PCIe Gen5 x16 link, 64 GB/s per direction, ~50 GB/s effective; the host's
           AdamW at a DGX-class node's memory bandwidth (2 sockets x 8 DDR5-4800 channels: 614 GB/s peak, ~480
           sustained) shared by its 8 ranks */
        hw->host_bw = 50e9;
        hw->host_mem_bw = 480e9 / 8;
        hw->cores_per_node = 0;
        return 0;
    }
    return -1;
}

int zt_hw_set_net(zt_hw *hw, const char *spec) {
    char *end;
    double gbit = strtod(spec, &end);
    if (end == spec || gbit <= 0) return -1;
    double lat_us = hw->inter_lat * 1e6;
    if (*end == ',') {
        const char *p = end + 1;
        lat_us = strtod(p, &end);
        if (end == p || lat_us < 0) return -1;
    }
    if (*end) return -1;
    hw->inter_bw = gbit * 1e9 / 8.0;
    hw->inter_lat = lat_us * 1e-6;
    return 0;
}

int zt_hw_set_host(zt_hw *hw, const char *spec) {
    char *end;
    const double link = strtod(spec, &end);
    if (end == spec || !(link > 0)) return -1;
    double mem = hw->host_mem_bw / 1e9;
    if (*end == ',') {
        const char *q = end + 1;
        mem = strtod(q, &end);
        if (end == q || !(mem > 0)) return -1;
    }
    if (*end) return -1;
    hw->host_bw = link * 1e9;
    hw->host_mem_bw = mem * 1e9;
    return 0;
}

double zt_comm_curve_time(const zt_comm_curve *c, double bytes) {
    if (c->n == 0 || bytes <= 0) return c->n == 0 ? -1 : 0;
    if (bytes <= c->bytes[0]) return c->sec[0] * bytes / c->bytes[0];
    if (bytes >= c->bytes[c->n - 1]) return c->sec[c->n - 1] * bytes / c->bytes[c->n - 1];
    int k = 0;
    while (bytes > c->bytes[k + 1]) k++;
    const double f = log(bytes / c->bytes[k]) / log(c->bytes[k + 1] / c->bytes[k]);
    return exp(log(c->sec[k]) + f * (log(c->sec[k + 1]) - log(c->sec[k])));
}

int zt_hw_load_comm(zt_hw *hw, const char *path, char *err, size_t errlen) {
    size_t len = 0;
    char *text = zt_read_file(path, "a bench_comm --json file", &len, err, errlen);
    if (!text) return 1;
    zt_json j;
    char why[160];
    if (zt_json_parse(text, len, &j, why, sizeof why)) {
        free(text);
        return zt_errf(err, errlen, "--comm %s: not bench_comm --json output: %s", path, why);
    }
    free(text);
    const zt_json *ranks = zt_json_get(&j, "ranks"), *nodes = zt_json_get(&j, "nodes"), *res = zt_json_get(&j, "results");
    int bad = 0;
    if (!ranks || !ranks->is_int || ranks->inum < 2 || !res || res->type != ZT_JSON_ARR)
        bad = zt_errf(err, errlen, "--comm %s: expected bench_comm --json output (\"ranks\" >= 2 and \"results\")", path);
    else if (nodes && nodes->is_int && nodes->inum != 1)
        bad = zt_errf(err, errlen, "--comm %s: measured on %lld nodes: expected one node", path, nodes->inum);
    static const char *ops[ZT_CURVE_N] = {"reduce_scatter", "rs_ordered", "rs_owners", "all_gather"};
    zt_comm_curve cv[ZT_CURVE_N];
    memset(cv, 0, sizeof cv);
    for (int i = 0; !bad && i < res->n; i++) {
        const zt_json *r = &res->items[i], *op = zt_json_get(r, "op"), *sz = zt_json_get(r, "size"),
                      *t = zt_json_get(r, "time_us");
        if (!op || op->type != ZT_JSON_STR || !sz || sz->type != ZT_JSON_NUM || !t || t->type != ZT_JSON_NUM ||
            sz->num <= 0 || t->num <= 0) {
            bad = zt_errf(err, errlen, "--comm %s: result %d: expected \"op\", \"size\" > 0 and \"time_us\" > 0", path, i + 1);
            break;
        }
        for (int k = 0; k < ZT_CURVE_N; k++) {
            if (strcmp(op->str, ops[k]) != 0) continue;
            zt_comm_curve *c = &cv[k];
            if (c->n == 32 || (c->n > 0 && sz->num <= c->bytes[c->n - 1])) {
                bad = zt_errf(err, errlen, "--comm %s: %s sizes must ascend (at most 32)", path, ops[k]);
                break;
            }
            c->bytes[c->n] = sz->num;
            c->sec[c->n++] = t->num * 1e-6;
        }
    }
    for (int k = 0; !bad && k < ZT_CURVE_N; k++)
        if (cv[k].n == 0) bad = zt_errf(err, errlen, "--comm %s: has no %s rows (run bench_comm without filters)", path, ops[k]);
    if (!bad) {
        memcpy(hw->curve, cv, sizeof cv);
        hw->comm_ranks = (int)ranks->inum;
    }
    zt_json_free(&j);
    return bad;
}

/* a ring collective (reduce-scatter: factor hw->rs_bw_factor, or all-gather: 1) over `bytes` (the whole
   buffer) */
static double ring_f(const zt_hw *hw, int N, int M, double bytes, double factor) {
    if (N <= 1) return 0;
    double bw = hw->intra_bw * factor, lat = hw->intra_lat;
    if (M > 1) {
        /* one ring crosses each node link once per step of the ring: (N-1)/N of the buffer per node */
        bw = hw->inter_bw < bw ? hw->inter_bw : bw;
        lat = hw->inter_lat;
    }
    return (double)(N - 1) / N * bytes / bw + (N - 1) * lat;
}

static double ring(const zt_hw *hw, int N, int M, double bytes) { return ring_f(hw, N, M, bytes, 1.0); }

/* an all-to-all in which each rank sends bytes/N to every other rank; returns the time, adds the
   bytes one node sends to other nodes */
static double all_to_all(const zt_hw *hw, int N, int M, double bytes, double *inter_bytes) {
    if (N <= 1) return 0;
    const int G = (N + M - 1) / M;
    double t_intra = (double)(G - 1) / N * bytes / (hw->intra_bw * hw->a2a_bw_factor) + (G - 1) * hw->intra_lat;
    double t_inter = 0;
    if (M > 1) {
        double node_bytes = (double)G * (N - G) / N * bytes;
        *inter_bytes += node_bytes;
        t_inter = node_bytes / hw->inter_bw + (N - G) * hw->inter_lat;
    }
    return t_intra > t_inter ? t_intra : t_inter;
}

/* stage 3: one gather of flat elements [a, b) (zero_shard.c): every owner of a part sends it to every other rank;
   the busiest owner's egress or a receiver's ingress bounds it. es: bytes per element; up: optimizer+params, each
   owner's part is first copied up from host memory. Adds the bytes one node sends to other nodes. */
static double gather_time(const zt_hw *hw, int N, int M, size_t S, size_t a, size_t b, double es, int up,
                          double *inter) {
    const int G = (N + M - 1) / M;
    double part = 0, least = (double)(b - a);
    int parts = 0;
    for (int r = 0; r < N; r++) {
        const size_t lo = a > (size_t)r * S ? a : (size_t)r * S, hi = b < (size_t)(r + 1) * S ? b : (size_t)(r + 1) * S;
        const double n = lo < hi ? (double)(hi - lo) : 0;
        parts += n > 0;
        if (n > part) part = n;
        if (n < least) least = n;
    }
    double t = up ? part * es / hw->host_bw : 0;
    if (N <= 1) return t;
    /* the owner of the largest part sends it G-1 times within its node; the rank owning least receives the rest */
    const double egress = (G - 1) * part * es / hw->intra_bw, ingress = ((double)(b - a) - least) * es / hw->intra_bw;
    double x = (egress > ingress ? egress : ingress) + parts * hw->intra_lat;
    if (M > 1) {
        const double node = (N - G) * part * es; /* the busiest owner's node, to the ranks of the others */
        const double ti = node / hw->inter_bw + parts * hw->inter_lat;
        if (ti > x) x = ti;
        *inter += (double)(N - G) * (double)(b - a) * es / M; /* every owner's node, averaged over the nodes */
    }
    return t + x;
}

/* stage 3's gathers of a step into o->pgather_*: wte and the fixed tensors once (blocking), the layers as the
   passes reach them, prefetched one ahead where the hardware can overlap */
static void stage3_gathers(const zt_config *c, const zt_model_shape *s, int N, int M, const zt_hw *hw,
                           const zt_zero_plan *p, int K, double t_layer, int can_overlap, double oversub, double *inter,
                           zt_perf *o) {
    zt_param_table *pt = zt_malloc(sizeof *pt);
    zt_param_table_build(pt, s);
    const double es = zt_config_prec(c) != ZT_PREC_FP32 ? 2.0 : 4.0;
    const int up = zt_zero_offload_of(c) == 2, L = s->n_layer;
    double fixed = 0, elems = 0, li = 0, g = 0;
    int nfixed = 0;
    for (int i = 0; i < pt->n; i++)
        if (i == ZT_P_WTE || pt->t[i].layer < 0) { /* wte, then each fixed tensor (model_params.c fetches each) */
            fixed += gather_time(hw, N, M, p->shard, pt->t[i].offset, pt->t[i].offset + pt->t[i].numel, es, up, inter);
            elems += (double)pt->t[i].numel;
            nfixed++;
        }
    const int last = zt_param_layer_last(pt, 0);
    const size_t l0 = pt->t[zt_param_layer_first(pt, 0)].offset, span = pt->t[last].offset + pt->t[last].numel - l0;
    for (int l = 0; l < L; l++) g += gather_time(hw, N, M, p->shard, l0 + l * span, l0 + (l + 1) * span, es, up, &li);
    g /= L > 0 ? L : 1; /* a layer's gather, on average over the layers' places in the shards */
    const int m = L < 2 ? L : 2;
    const long fwd = L + (long)(K - 1) * (L - m), bwd = (long)K * (L - m);
    const double layers = (double)(fwd + bwd);
    *inter += li / (L > 0 ? L : 1) * layers;
    o->pgathers = fwd + bwd + nfixed;
    o->pgather_fixed_s = fixed * oversub; /* cpu ranks beyond the cores take turns on them */
    o->pgather_s = (fixed + layers * g) * oversub;
    /* exposed: the first layer of the step blocks; the others are prefetched over a layer's forward or backward */
    const double bwd_layer = t_layer * (strcmp(c->train.recompute, "layer") == 0 ? 3.0 : 2.0) / 3.0;
    const double ef = g > t_layer / 3.0 ? g - t_layer / 3.0 : 0, eb = g > bwd_layer ? g - bwd_layer : 0;
    o->pgather_exposed_s = can_overlap ? (fixed + g + (double)(fwd - 1) * ef + (double)bwd * eb) * oversub : o->pgather_s;
    /* 2-byte words are unpacked into the window */
    if (es == 2.0) o->compute_s += (elems + layers * (double)span) * 6.0 / hw->mem_bw;
    free(pt);
}

void zt_perf_predict(const zt_config *c, const zt_model_shape *s, int N, int M, const zt_hw *hw, zt_perf *o) {
    memset(o, 0, sizeof *o);
    if (M < 1) M = 1;
    const int G = (N + M - 1) / M;
    o->ranks_per_node = G;
    zt_zero_plan p;
    zt_zero_plan_memory(c, s, N, &p);
    const int B = c->train.micro_batch, T = c->train.seq_len;
    const int K = c->train.global_batch / (B * N);
    o->micro_per_rank = K;
    /* compute: a rank's rate; on cpu the node's cores are shared by its ranks */
    double rate = hw->flops;
    if (hw->cores_per_node > 0) {
        int threads = c->train.threads > 0 ? c->train.threads : (hw->cores_per_node / G > 0 ? hw->cores_per_node / G : 1);
        double cores = (double)hw->cores_per_node / G < threads ? (double)hw->cores_per_node / G : threads;
        rate = hw->flops * cores;
    }
    size_t lora_params = 0;
    if (c->lora.enabled) {
        zt_lora_cfg lc;
        zt_lora_cfg_from_config(c, &lc);
        lora_params = zt_lora_param_count(s, &lc);
    }
    double flops_tok = zt_model_train_flops_per_token(s, T, lora_params);
    /* one layer's forward + backward of a micro-batch (stage 3's gathers hide behind it): the FLOPs but the LM head's */
    const double t_layer = (flops_tok - 6.0 * s->n_embd * (double)s->padded_vocab) * B * T / rate /
                           (s->n_layer > 0 ? s->n_layer : 1);
    if (strcmp(c->train.recompute, "layer") == 0) flops_tok += zt_model_recompute_flops_per_token(s, T);
    const double flops_micro = flops_tok * (double)B * T;
    const double t_micro = flops_micro / rate;
    o->compute_s = K * t_micro;
    /* 2-byte working parameters (zt_model_opts.params16): every micro-batch unpacks them twice (forward, backward)
       and wte twice more (embedding, LM head): 6 bytes of memory traffic per element unpacked */
    const int params16 = zt_model_opts_from_config(c).params16;
    if (params16 && hw->mem_bw > 0)
        o->compute_s += K * (2.0 * p.total + 2.0 * s->padded_vocab * s->n_embd) * 6.0 / hw->mem_bw;
    o->backward_s = K * t_micro * 2.0 / 3.0;
    /* gradient exchange, per micro-batch: fp32, or (ordered, bf16/fp16) 2-byte words packed before and decoded
       after it (zero.c wire16: 12 bytes of memory traffic per element) */
    const double gbytes = (double)p.padded * 4.0;
    const int ordered = strcmp(c->zero.reduce, "ordered") == 0, wire16 = zt_zero_wire16(c, N);
    const double xbytes = wire16 ? gbytes / 2 : gbytes, wire_s = wire16 ? (double)p.padded * 12.0 / hw->mem_bw : 0;
    /* measured collectives for this rank count on one node (they include the sums and core sharing) */
    const int cal = hw->comm_ranks == N && M == 1 && N > 1;
    /* cpu ranks beyond the node's cores take turns on them: their message progress (busy polling, the
       ordered sums) shares the cores too */
    const double oversub = hw->cores_per_node > 0 && G > hw->cores_per_node ? (double)G / hw->cores_per_node : 1.0;
    double inter = 0, tx = 0;
    if (N > 1 && cal) {
        tx = zt_comm_curve_time(&hw->curve[ordered ? ZT_CURVE_RS_ORDERED : c->zero.stage >= 2 ? ZT_CURVE_RS_OWNERS : ZT_CURVE_RS],
                                xbytes) + wire_s;
    } else if (N > 1) {
        if (ordered) {
            tx = all_to_all(hw, N, M, xbytes, &inter);
            tx += (double)(N + 2) * p.shard * 4.0 / hw->mem_bw + wire_s; /* the owner's sum in rank order */
        } else {
            tx = ring_f(hw, N, M, gbytes, hw->rs_bw_factor);
            if (M > 1) inter += (double)(N - 1) / N * gbytes;
        }
        tx *= oversub;
    }
    o->grad_comm_s = K * tx;
    /* something must move the bytes while the cores compute: a GPU's engines, or a cpu core left idle */
    int threads = c->train.threads > 0 ? c->train.threads : 0;
    if (hw->cores_per_node > 0 && threads == 0) threads = hw->cores_per_node / G > 0 ? hw->cores_per_node / G : 1;
    const int can_overlap = hw->cores_per_node == 0 || G * threads < hw->cores_per_node;
    if (c->zero.stage >= 2 && N > 1 && can_overlap) { /* stage 3's gradients go through stage 2's buckets */
        const int nb = p.n_buckets > 0 ? p.n_buckets : 1;
        const double bwd_micro = t_micro * 2.0 / 3.0;
        double exposed = tx - bwd_micro * (1.0 - 1.0 / nb);
        if (exposed < tx / nb) exposed = tx / nb;
        o->grad_exposed_s = K * exposed;
    } else {
        o->grad_exposed_s = o->grad_comm_s;
    }
    inter *= K;
    if (c->zero.stage == 3) stage3_gathers(c, s, N, M, hw, &p, K, t_layer, can_overlap, oversub, &inter, o);
    /* after the update: parameters (stages 1-2) or the reduced gradient (stage 0), and the norm; stage 3 gathers
       its parameters as it computes (above) */
    if (N > 1) {
        /* stages 1-2 with 2-byte parameters gather the words: half the bytes */
        const double pbytes = c->zero.stage != 0 && params16 ? gbytes / 2 : gbytes;
        if (c->zero.stage < 3) {
            o->gather_s = cal ? zt_comm_curve_time(&hw->curve[ZT_CURVE_ALL_GATHER], pbytes) : ring(hw, N, M, pbytes) * oversub;
            if (M > 1) inter += (double)(N - 1) / N * pbytes;
        }
        o->norm_s = ring(hw, N, M, (double)p.padded / 4096.0 * 8.0);
    }
    const double elems = c->zero.stage == 0 ? (double)p.padded : (double)p.shard;
    o->optim_s = elems * 32.0 / hw->mem_bw;
    const int off = zt_zero_offload_of(c);
    if (off) { /* the update on the host (zero_offload.c): the shard down, AdamW there, the parameters up */
        const int words = zt_config_prec(c) != ZT_PREC_FP32 && (c->zero.stage == 3 || params16);
        const double S = (double)p.shard;
        const double pub = words ? 6.0 : zt_config_prec(c) != ZT_PREC_FP32 ? 16.0 : 0.0; /* pack, or copy + round */
        /* up: the published shard; with optimizer+params the shard stays on the host (the gathers copy it up) */
        const double up = off == 2 ? 0.0 : words ? 2.0 : 4.0;
        o->offload_xfer_s = S * 4.0 / hw->host_bw + S * up / hw->host_bw;
        o->offload_s = o->offload_xfer_s + S * (28.0 + pub) / hw->host_mem_bw;
        o->optim_s = elems * 4.0 / hw->mem_bw; /* the device keeps the norm */
    }
    if (N == 1 && K > 1) o->accum_s = K * (double)p.padded * 12.0 / hw->mem_bw;
    if (c->checkpoint.every > 0) {
        const double ck_bytes = 3.0 * (double)p.total * 4.0;
        const double per_save = c->checkpoint.async ? ck_bytes / N / hw->mem_bw : ck_bytes / hw->disk_bw;
        o->ckpt_s = per_save / (double)c->checkpoint.every;
    }
    o->inter_node_bytes = inter;
    o->step_s = o->compute_s + o->accum_s + o->grad_exposed_s + o->gather_s + o->norm_s + o->optim_s + o->ckpt_s +
                o->pgather_exposed_s + o->offload_s;
    if (N > 1) { /* fixed point: one int64 reduce-scatter per step + the exponents' max (latency) */
        const int nb = p.n_buckets > 0 ? p.n_buckets : 1;
        o->fixed_comm_s = ring_f(hw, N, M, 2.0 * gbytes, hw->rs_bw_factor) + ring(hw, N, M, 8.0 * nb);
        const double bwd_micro = t_micro * 2.0 / 3.0;
        double exposed = o->fixed_comm_s;
        if (c->zero.stage == 2 && can_overlap) {
            exposed = o->fixed_comm_s - bwd_micro * (1.0 - 1.0 / nb);
            if (exposed < o->fixed_comm_s / nb) exposed = o->fixed_comm_s / nb;
        }
        o->fixed_exposed_s = exposed;
        o->fixed_inter_node_bytes = M > 1 ? (double)(N - 1) / N * 2.0 * gbytes + (double)(N - 1) / N * gbytes : 0;
        o->fixed_step_s = o->step_s - o->grad_exposed_s + o->fixed_exposed_s;
    }
    o->tokens_per_s = (double)c->train.global_batch * T / o->step_s;
    /* weak-scaling efficiency: the same per-rank work on 1 rank */
    if (N > 1) {
        zt_config c1 = *c;
        c1.train.global_batch = c->train.global_batch / N;
        zt_hw h1 = *hw;
        if (h1.cores_per_node > 0 && c1.train.threads <= 0) c1.train.threads = hw->cores_per_node / G > 0 ? hw->cores_per_node / G : 1;
        zt_perf one;
        zt_perf_predict(&c1, s, 1, 1, &h1, &one);
        o->efficiency = one.step_s / o->step_s;
    } else {
        o->efficiency = 1.0;
    }
}

/* ---------------------------------------------------------------- one GPU's step from its kernels (perf_model.h) */

int zt_gpu_spec_of(const char *name, zt_gpu_spec *out) {
    if (strcmp(name, "h100") == 0) { *out = (zt_gpu_spec){989e12, 3.35e12, 81559.0 * 1048576}; return 0; }
    if (strcmp(name, "h200") == 0) { *out = (zt_gpu_spec){989e12, 4.8e12, 143771.0 * 1048576}; return 0; }
    return -1;
}

void zt_gpu_step_predict(const zt_gpu_spec *g, double flops, double bytes, long launches, zt_gpu_step *out) {
    out->compute_s = flops / (ZT_GPU_COMPUTE_FRAC * g->bf16_flops);
    out->traffic_s = bytes / (ZT_GPU_BW_FRAC * g->hbm_bw);
    out->launch_s = (double)launches * ZT_GPU_LAUNCH_S;
    out->step_s = (out->compute_s > out->traffic_s ? out->compute_s : out->traffic_s) + out->launch_s;
}
