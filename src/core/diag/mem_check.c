/* mem_check.c — the up-front memory check of a run (see mem_check.h). */
#include "core/diag/mem_check.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/model/model.h"
#include "util/util.h"

/* "123", "1.5G", "512 MiB": bytes, 0 when it does not parse */
size_t zt_mem_parse_size(const char *s) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || !(v > 0)) return 0;
    while (*end == ' ') end++;
    double k = 1;
    switch (*end) {
    case 'k': case 'K': k = 1024.0; break;
    case 'm': case 'M': k = 1024.0 * 1024; break;
    case 'g': case 'G': k = 1024.0 * 1024 * 1024; break;
    case 't': case 'T': k = 1024.0 * 1024 * 1024 * 1024; break;
    case 0: break;
    default: return 0;
    }
    if (*end) {
        end++;
        if (*end == 'i' || *end == 'I') end++;
        if (*end == 'b' || *end == 'B') end++;
        if (*end) return 0;
    }
    v *= k;
    return v >= 1.8e19 ? (size_t)-1 : (size_t)v;
}

/* a number from a one-line file (cgroup v2), 0 if absent or "max" */
static size_t read_number_file(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char buf[64] = "";
    size_t v = 0;
    if (fgets(buf, sizeof buf, f) && strncmp(buf, "max", 3) != 0) v = (size_t)strtoull(buf, NULL, 10);
    fclose(f);
    return v;
}

size_t zt_mem_available(const char **source) {
    const char *src = NULL;
    size_t avail = 0;
    const char *env = getenv("ZTRAIN_MEM_LIMIT");
    if (env && env[0] && (avail = zt_mem_parse_size(env)) > 0) {
        if (source) *source = "ZTRAIN_MEM_LIMIT";
        return avail;
    }
    FILE *f = fopen("/proc/meminfo", "r");
    if (f) {
        char line[256];
        unsigned long long kb;
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
                avail = (size_t)kb * 1024;
                src = "MemAvailable in /proc/meminfo";
                break;
            }
        fclose(f);
    }
    /* a container's limit is below what the machine has free */
    size_t max = read_number_file("/sys/fs/cgroup/memory.max"), cur = read_number_file("/sys/fs/cgroup/memory.current");
    if (max > 0) {
        size_t room = max > cur ? max - cur : 0;
        if (!avail || room < avail) {
            avail = room;
            src = "the cgroup's memory.max - memory.current";
        }
    }
    if (source) *source = src;
    return avail;
}

void zt_mem_fmt(double b, char *buf, size_t n) {
    static const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    int u = 0;
    while (b >= 1024 && u < 6) { b /= 1024; u++; }
    snprintf(buf, n, u ? "%.1f %s" : "%.0f %s", b, unit[u]);
}

int zt_mem_check_plan(const zt_zero_plan *p, int zero_stage, int local_ranks, int host_only, size_t avail,
                      const char *source, const char *host, char *err, size_t errlen) {
    if (avail == 0) return 0;
    /* in double: a huge config must not wrap around to a small size */
    const double params = (double)p->param_bytes + (double)p->pshard_bytes, grads = (double)p->grad_bytes + p->acc_bytes,
                 optim = (double)p->optim_bytes + (double)p->master_bytes;
    const double dev = params + grads + optim + (double)p->comm_bytes + (double)p->act_bytes + (double)p->sample_bytes;
    const double off = (double)p->offload_bytes, ck = (double)p->ckpt_bytes;
    const double per_rank = (host_only ? 0 : dev) + off + ck;
    const int nr = local_ranks > 0 ? local_ranks : 1;
    const double need = per_rank * nr;
    if (need <= (double)avail) return 0;
    char t[8][24], a[24], r[24], parts[320], offl[96] = "";
    const double v[8] = {params, grads, optim, (double)p->comm_bytes, (double)p->act_bytes, off, ck, need};
    for (int i = 0; i < 8; i++) zt_mem_fmt(v[i], t[i], sizeof t[i]);
    zt_mem_fmt((double)avail, a, sizeof a);
    zt_mem_fmt(per_rank, r, sizeof r);
    if (off > 0) snprintf(offl, sizeof offl, "offloaded optimizer state %s, ", t[5]);
    if (host_only) /* a GPU holds the rest: only what lives in host memory is counted here */
        snprintf(parts, sizeof parts, "%scheckpoint staging %s", offl, t[6]);
    else
        snprintf(parts, sizeof parts, "parameters %s, gradients %s, optimizer %s, communication %s, activations %s, "
                 "%scheckpoint staging %s", t[0], t[1], t[2], t[3], t[4], offl, t[6]);
    const char *h = host ? host : "this node";
    /* what to change: the offloaded state first when it is what does not fit */
    const char *hint = off > 0 && (need - off * nr) <= (double)avail
                           ? "zero.offload = \"none\" (the optimizer state on the device), "
                       : zero_stage < 2 ? "zero.stage = 2 (sharded gradients and optimizer), "
                                        : "";
    return zt_errf(err, errlen,
                   "the run does not fit in %smemory: %s planned per rank%s (%s) x %d rank%s on %s = %s, but %s has %s "
                   "(%s); use more nodes (fewer ranks per node), %sa smaller model or a smaller train.micro_batch or "
                   "train.seq_len (`ztrain estimate -c CFG --ranks N` prints the plan)",
                   host_only ? "host " : "", r, host_only ? " in host memory" : "", parts, nr, nr == 1 ? "" : "s", h,
                   t[7], h, a, source ? source : "?", hint);
}

/* the activations' dominant terms in double: the plan's size_t products wrap for absurd shapes
   (micro_batch x seq_len^2 x heads x layers beyond 2^64 bytes) */
static double approx_act_bytes(const zt_config *c, const zt_model_shape *s) {
    const double L = s->n_layer, C = s->n_embd, NH = s->n_head, Vp = s->padded_vocab;
    const double B = c->train.micro_batch, T = c->train.seq_len, BT = B * T;
    return 4.0 * (L * BT * 17 * C + (L + 1) * B * NH * T * T + BT * Vp + BT * 12 * C);
}

void zt_mem_check(const zt_config *c, const zt_model_shape *s, const zt_dist *d) {
    char err[ZT_ERR_BUF] = "";
    const double approx = approx_act_bytes(c, s);
    if (approx > 1e18) { /* beyond any machine, and beyond what size_t arithmetic may hold */
        char a[24];
        zt_mem_fmt(approx, a, sizeof a);
        zt_user_error_all("the run does not fit in memory: its activations alone are about %s per rank "
                          "(train.micro_batch = %d x train.seq_len = %d, model.n_layer = %d, model.n_head = %d, "
                          "model.n_embd = %d); lower train.micro_batch or train.seq_len", a, c->train.micro_batch,
                          c->train.seq_len, s->n_layer, s->n_head, s->n_embd);
    }
    zt_zero_plan p;
    zt_zero_plan_memory(c, s, d->size, &p);
    const char *source = NULL;
    const size_t avail = zt_mem_available(&source);
    /* a real GPU holds everything but the checkpoint staging; devsim and cudasim keep "device" memory
       in host memory */
    const int host_only = strcmp(c->device, "cuda") == 0;
    int bad = zt_mem_check_plan(&p, c->zero.stage, d->local_size, host_only, avail, source, d->host, err, sizeof err);
    zt_check_all(bad, err, sizeof err);
}

int zt_mem_auto_micro_batch(zt_config *c, const zt_model_shape *s, int N, int local_ranks, char *note, size_t nn,
                            char *err, size_t errlen) {
    if (c->train.micro_batch > 0) return 0;
    size_t limit = 0;
    const char *from = "train.mem_limit";
    if (c->train.mem_limit[0]) {
        limit = zt_mem_parse_size(c->train.mem_limit);
        if (!limit)
            return zt_errf(err, errlen, "train.mem_limit = \"%s\": expected a size such as 8G, 512M or bytes",
                           c->train.mem_limit);
    } else {
        const char *source = NULL;
        const size_t avail = zt_mem_available(&source);
        if (!avail)
            return zt_errf(err, errlen, "train.micro_batch = \"auto\": the available memory is unknown here: set "
                                        "train.mem_limit (per rank)");
        limit = (size_t)(0.9 * (double)avail / (local_ranks > 0 ? local_ranks : 1));
        from = source;
    }
    size_t bytes = 0;
    const int mb = zt_zero_fit_micro_batch(c, s, N, limit, &bytes);
    char l[24], b[24];
    zt_mem_fmt((double)limit, l, sizeof l);
    if (mb <= 0) {
        zt_config one = *c;
        one.train.micro_batch = 1;
        zt_zero_plan p;
        zt_zero_plan_memory(&one, s, N, &p);
        zt_mem_fmt((double)zt_zero_plan_total(&p), b, sizeof b);
        return zt_errf(err, errlen, "train.micro_batch = \"auto\": not even micro_batch 1 fits: it needs %s per rank, "
                       "the limit is %s (from %s); raise zero.stage, set train.recompute = \"layer\" or use more ranks",
                       b, l, from);
    }
    zt_mem_fmt((double)bytes, b, sizeof b);
    c->train.micro_batch = mb;
    snprintf(note, nn, "micro_batch auto: %d (%s per rank planned within %s from %s; %d accumulation step%s)", mb, b,
             l, from, c->train.global_batch / (mb * N), c->train.global_batch / (mb * N) > 1 ? "s" : "");
    return 0;
}
