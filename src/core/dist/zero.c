/* zero.c — ZeRO stages 0-3: shard map, ordered / native gradient reduction, chunked global norm, sharded AdamW and
 * parameter all-gather (see zero.h); stage 3's gathers are zero_shard.c's, the offloaded update zero_offload.c's,
 * the memory plan zero_plan.c's. */
#include "core/dist/zero.h"

#include "core/model/sampler.h"
#include "io/data.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

/* grad16: backward finished tensors [first, g16_done): their window part (contiguous: a layer, ln_f, or wte and
   wpe) packed into send16 at their flat offset */
static void grad16_after(void *ctx, int first) {
    zt_zero *z = ctx;
    zt_model *m = z->g16_model;
    const zt_param_table *pt = &m->table;
    const int last = z->g16_done - 1;
    const size_t off = pt->t[first].offset, n = pt->t[last].offset + pt->t[last].numel - off;
    ZT_ASSERT(m->gptr[last] + pt->t[last].numel == m->gptr[first] + n);
    z->be->i->pack16(z->be, z->send16 + off, m->gptr[first], n, z->prec);
    z->g16_done = first > 0 ? first : pt->n; /* after wte's: the next backward starts from the end */
}

void zt_zero_init(zt_zero *z, const zt_config *c, zt_model *m, zt_backend *be, zt_comm *comm,
                  const zt_model_shape *s) {
    memset(z, 0, sizeof *z);
    z->be = be;
    z->comm = comm;
    z->N = comm->size;
    z->rank = comm->rank;
    z->stage = c->zero.stage;
    z->ordered = strcmp(c->zero.reduce, "ordered") == 0;
    z->prec = zt_config_prec(c);
    z->wire16 = zt_zero_wire16(c, z->N);
    z->grad16 = zt_zero_grad16(c, z->N);
    zt_zero_plan_memory(c, s, z->N, &z->plan);
    zt_zero_offload_init(z, c);
    const int K = c->train.global_batch / c->train.micro_batch;
    z->micro_steps = K / z->N;
    z->alias_acc = z->plan.acc_bytes == 0;
    z->lo = (size_t)z->rank * z->plan.shard;
    z->hi = z->lo + z->plan.shard;
    const zt_model_opts mo = zt_model_opts_from_config(c);
    if (c->lora.enabled) {
        zt_lora_cfg lc;
        zt_lora_cfg_from_config(c, &lc);
        zt_model_init_lora(m, be, s, c->train.micro_batch, c->train.seq_len, &lc, z->plan.padded, z->stage < 2, &mo);
    } else {
        zt_model_init(m, be, s, c->train.micro_batch, c->train.seq_len, z->plan.padded, z->stage < 2 && !z->grad16,
                      &mo);
    }
    if (z->grad16) {
        z->gwin = be->i->alloc(be, z->plan.grad_bytes);
        zt_model_point_grad_window(m, z->gwin);
        z->g16_model = m;
        z->g16_done = m->table.n;
        m->hooks = (zt_bwd_hooks){NULL, grad16_after, z};
    }
    m->prec = z->prec;
    if (m->be->i->set_precision) m->be->i->set_precision(m->be, m->prec); /* e.g. tensor-core GEMMs */
    if (!z->alias_acc) z->acc = be->i->alloc(be, z->plan.acc_bytes);
    if (z->stage >= 2) zt_zero_buckets_init(z, m, c);
    size_t opt_elems = z->plan.optim_bytes / 2 / sizeof(float);
    if (opt_elems) { /* (offloaded: in host memory) */
        z->exp_avg = be->i->alloc(be, opt_elems * sizeof(float));
        z->exp_avg_sq = be->i->alloc(be, opt_elems * sizeof(float));
    }
    if (z->plan.master_bytes) z->master = be->i->alloc(be, z->plan.master_bytes);
    if (z->stage == 3) zt_zero_shard_init(z, m);
    if (z->plan.comm_bytes && z->stage < 2) {
        if (z->wire16) {
            z->send16 = be->i->alloc(be, z->plan.padded * 2);
            z->recv16 = be->i->alloc(be, z->plan.padded * 2);
            z->recv = be->i->alloc(be, z->plan.shard * sizeof(float));
        } else z->recv = be->i->alloc(be, z->plan.comm_bytes);
    }
    z->chunk_sums = be->i->alloc(be, z->plan.padded / ZT_NORM_CHUNK * sizeof(double));
    z->norm = be->i->alloc(be, sizeof(double));
    z->hyper = be->i->alloc(be, ZT_HYPER_N * sizeof(float));
}

void zt_zero_free(zt_zero *z, zt_model *m) {
    zt_backend *be = z->be;
    if (!be) return;
    if (z->recv) be->i->free(be, z->recv);
    if (z->send16) be->i->free(be, z->send16);
    if (z->recv16) be->i->free(be, z->recv16);
    if (z->gwin) be->i->free(be, z->gwin);
    if (z->buckets) zt_zero_buckets_free(z);
    if (z->stage == 3) zt_zero_shard_free(z);
    zt_zero_offload_free(z);
    if (z->exp_avg) be->i->free(be, z->exp_avg);
    if (z->exp_avg_sq) be->i->free(be, z->exp_avg_sq);
    if (z->master) be->i->free(be, z->master);
    if (z->acc) be->i->free(be, z->acc);
    be->i->free(be, z->chunk_sums);
    be->i->free(be, z->norm);
    be->i->free(be, z->hyper);
    zt_model_free(m);
    memset(z, 0, sizeof *z);
}

/* the reduced gradient of this rank's shard */
static float *shard_grad(zt_zero *z, zt_model *m) {
    if (z->alias_acc) return m->grads + z->lo;
    return z->stage == 0 ? z->acc + z->lo : z->acc;
}

void zt_zero_reduce(zt_zero *z, zt_model *m, int mi) {
    zt_backend *be = z->be;
    const size_t S = z->plan.shard;
    if (z->alias_acc) return;              /* 1 rank, 1 micro-batch: acc = 0 + g = g */
    if (z->stage >= 2) {                   /* buckets were posted during backward */
        double t0 = zt_now();
        zt_zero_buckets_finish(z, m, mi);
        z->comm_s += zt_now() - t0;
        return;
    }
    float *acc = shard_grad(z, m);
    if (mi == 0) be->i->zero(be, acc, S * sizeof(float));
    double t0 = zt_now();
    if (z->N == 1) {
        be->i->accumulate(be, acc, m->grads, S);
    } else if (z->ordered) {
        /* owners receive every rank's part of its micro-batch gradient and add them in rank
           order = global micro-batch order (wire16: the parts cross as bf16/fp16 words) */
        if (z->wire16) {
            if (!z->grad16) be->i->pack16(be, z->send16, m->grads, (size_t)z->N * S, z->prec); /* grad16: done */
            z->comm->i->all_to_all(z->comm, z->send16, z->recv16, S * 2, ZT_U8);
        } else {
            z->comm->i->all_to_all(z->comm, m->grads, z->recv, S, ZT_F32);
        }
        z->grad_bytes_sent += (double)(z->N - 1) * S * (z->wire16 ? 2 : sizeof(float));
        zt_zero_add_parts(z, acc, z->recv, z->recv16, S);
    } else {
        z->comm->i->reduce_scatter(z->comm, m->grads, z->recv, S, ZT_F32);
        be->i->accumulate(be, acc, z->recv, S);
    }
    z->comm_s += zt_now() - t0;
}

void zt_zero_step_begin(zt_zero *z, const zt_adamw_hp *hp, long t, float lr, float loss_scale) {
    float h[ZT_HYPER_N];
    zt_adamw_hyper(hp, t, lr, loss_scale, h);
    z->be->i->to_device(z->be, z->hyper, h, sizeof h);
}

void zt_zero_clip(zt_zero *z, zt_model *m, double clip, int skip_nonfinite) {
    const size_t S = z->plan.shard, nck = S / ZT_NORM_CHUNK;
    double *mine = z->chunk_sums + (size_t)z->rank * nck;
    z->be->i->sumsq_chunks(z->be, mine, shard_grad(z, m), S, ZT_NORM_CHUNK);
    if (z->N > 1) z->comm->i->all_gather(z->comm, mine, z->chunk_sums, nck, ZT_F64);
    /* the chunk sums are combined in chunk order, on the device */
    z->be->i->clip_scale(z->be, z->hyper, z->norm, z->chunk_sums, nck * (size_t)z->N, clip, skip_nonfinite);
}

double zt_zero_norm_read(zt_zero *z) {
    double norm;
    z->be->i->to_host(z->be, &norm, z->norm, sizeof norm);
    return norm;
}

/* the flat range the master weights (and moments) cover: this rank's shard, or all of it at stage 0 */
static size_t master_range(const zt_zero *z, size_t *n) {
    *n = z->stage == 0 ? z->plan.padded : z->plan.shard;
    return z->stage == 0 ? 0 : z->lo;
}

/* bf16/fp16: the working parameters from the master weights: this rank's range (stage 0: all of it)
   copied and rounded to the precision, then gathered (stages 1-2) */
static void publish_params(zt_zero *z, zt_model *m) {
    zt_backend *be = z->be;
    if (z->offload) {
        zt_zero_offload_publish(z, m);
        return;
    }
    if (z->stage == 3) {
        zt_zero_shard_publish(z, m);
        return;
    }
    size_t n;
    const size_t base = master_range(z, &n);
    if (m->params16) { /* 2-byte parameters: packing rounds as round_to does; the words are gathered */
        be->i->pack16(be, m->params16 + base, z->master, n, z->prec);
        if (z->stage != 0 && z->N > 1)
            z->comm->i->all_gather(z->comm, m->params16 + z->lo, m->params16, n * sizeof(uint16_t), ZT_U8);
        zt_model_params_changed(m);
        return;
    }
    float *tp = zt_model_tparams(m);
    be->i->copy(be, tp + base, z->master, n * sizeof(float));
    be->i->round_to(be, tp + base, n, z->prec);
    if (z->stage != 0 && z->N > 1) z->comm->i->all_gather(z->comm, tp + z->lo, tp, n, ZT_F32);
}

float *zt_zero_init_target(zt_zero *z, zt_model *m, size_t *base, size_t *n) {
    if (z->offload && (m->params16 || z->stage == 3)) { /* on their way to the host's master weights */
        *base = z->lo;
        *n = z->plan.shard;
        if (!z->init_tmp) z->init_tmp = z->acc ? z->acc : z->be->i->alloc(z->be, *n * sizeof(float));
        return z->init_tmp;
    }
    if (z->stage == 3) {
        *base = z->lo;
        *n = z->plan.shard;
        return z->master ? z->master : z->pshard;
    }
    if (!m->params16) {
        *base = 0;
        *n = m->padded;
        return m->params;
    }
    *base = master_range(z, n);
    return z->master;
}

void zt_zero_master_init(zt_zero *z, zt_model *m) {
    if (z->offload) {
        zt_zero_offload_master_init(z, m);
        return;
    }
    if (z->stage == 3) { /* the values were written into the shard (fp32) or the master weights */
        publish_params(z, m);
        return;
    }
    if (!z->master) return;
    size_t n;
    const size_t base = master_range(z, &n);
    /* with 2-byte parameters the initial values were written into the master weights themselves */
    if (!m->params16) z->be->i->copy(z->be, z->master, zt_model_tparams(m) + base, n * sizeof(float));
    publish_params(z, m);
}

void zt_zero_update(zt_zero *z, zt_model *m, const zt_adamw_hp *hp) {
    const size_t S = z->plan.shard;
    const zt_param_table *pt = zt_model_ttable(m);
    float *tp = zt_model_tparams(m);
    if (z->offload) {
        zt_zero_offload_update(z, m, shard_grad(z, m), hp);
        return;
    }
    if (z->stage == 3) { /* the shard itself (fp32), or the master weights and then the words */
        zt_adamw_update(z->be, pt, z->lo, z->hi, z->master ? z->master : z->pshard, shard_grad(z, m), z->exp_avg,
                        z->exp_avg_sq, hp, z->hyper);
        publish_params(z, m);
        return;
    }
    if (z->stage == 0) {
        /* every rank holds the full reduced gradient and full optimizer state */
        if (z->N > 1) {
            z->comm->i->all_gather(z->comm, z->acc + z->lo, z->acc, S, ZT_F32);
        }
        const float *g = z->alias_acc ? m->grads : z->acc;
        zt_adamw_update(z->be, pt, 0, z->plan.padded, z->master ? z->master : tp, g, z->exp_avg, z->exp_avg_sq,
                        hp, z->hyper);
        if (z->master) publish_params(z, m);
        return;
    }
    zt_adamw_update(z->be, pt, z->lo, z->hi, z->master ? z->master : tp + z->lo, shard_grad(z, m), z->exp_avg,
                    z->exp_avg_sq, hp, z->hyper);
    if (z->master) publish_params(z, m);
    else if (z->N > 1) z->comm->i->all_gather(z->comm, tp + z->lo, tp, S, ZT_F32);
}

zt_ckpt_view zt_zero_ckpt_view(zt_zero *z, zt_model *m) {
    zt_ckpt_view v = zt_model_train_view(m);
    v.lo = z->lo;
    v.hi = z->hi;
    v.exp_avg = z->exp_avg;
    v.exp_avg_sq = z->exp_avg_sq;
    v.optim_base = z->stage == 0 ? 0 : z->lo;
    v.optim_elems = z->stage == 0 ? z->plan.padded : z->plan.shard;
    v.master = z->master;
    if (m->params16) v.model_prec = z->prec; /* /model: the master weights rounded as they are written */
    if (z->stage == 3) { /* the shard: fp32 (the parameters are the master copy), or the master weights rounded */
        v.params = z->master ? NULL : z->pshard;
        v.params_base = z->lo;
        v.padded = 0;
        v.model_prec = z->prec;
    }
    if (z->offload) { /* all of it in host memory; an fp32 run's host master weights ARE its parameters (/model,
                         no /master), a bf16/fp16 run's are written as /master and, rounded, as /model */
        const int fp32 = z->prec == ZT_PREC_FP32;
        v.be = z->host_be;
        v.params = fp32 ? z->h_master : NULL;
        v.params_base = z->lo;
        v.padded = 0;
        v.exp_avg = z->h_m;
        v.exp_avg_sq = z->h_v;
        v.master = fp32 ? NULL : z->h_master;
        v.model_prec = z->prec;
    }
    return v;
}

zt_ckpt_view zt_zero_init_view(zt_zero *z, zt_model *m) {
    zt_ckpt_view v = zt_model_ckpt_view(m);
    size_t base, n;
    float *dst = zt_zero_init_target(z, m, &base, &n);
    if (dst == m->params) return v;
    v.params_base = v.lo = base;
    v.hi = v.lo + n;
    v.params = dst;
    v.range_only = 1;
    return v;
}

static void gather_loaded_params(void *ctx) {
    zt_zero *z = ctx;
    z->comm->i->all_gather(z->comm, z->load_params + z->lo, z->load_params, z->plan.shard, ZT_F32);
    z->params_gathered = 1;
}

zt_ckpt_view zt_zero_load_view(zt_zero *z, zt_model *m) {
    zt_ckpt_view v = zt_zero_ckpt_view(z, m);
    z->params_gathered = 0;
    if (!z->master && z->N > 1 && z->stage < 3 && !z->offload) {
        z->load_params = zt_model_tparams(m);
        v.params_ready = gather_loaded_params;
        v.params_ready_ctx = z;
    }
    return v;
}

void zt_zero_after_load(zt_zero *z, zt_model *m) {
    /* every rank read its shard: gather the full parameters (and stage-0's full moments and master
       weights); with master weights the parameters are made from them */
    const size_t S = z->plan.shard;
    if (z->N > 1 && z->stage == 0) {
        z->comm->i->all_gather(z->comm, z->exp_avg + z->lo, z->exp_avg, S, ZT_F32);
        z->comm->i->all_gather(z->comm, z->exp_avg_sq + z->lo, z->exp_avg_sq, S, ZT_F32);
        if (z->master) z->comm->i->all_gather(z->comm, z->master + z->lo, z->master, S, ZT_F32);
    }
    if (z->master || z->stage == 3 || z->offload) publish_params(z, m);
    else if (z->N > 1 && !z->params_gathered)
        z->comm->i->all_gather(z->comm, zt_model_tparams(m) + z->lo, zt_model_tparams(m), S, ZT_F32);
    z->params_gathered = 0;
}

void zt_zero_poison(zt_zero *z, zt_model *m) {
    const float nan = NAN;
    if (z->offload) {
        z->h_master[0] = nan;
        return;
    }
    /* the state a save writes: the master weights when there are some and the parameters are not kept whole */
    float *dst = z->master && (m->params16 || z->stage == 3) ? z->master
                 : z->stage == 3                             ? (float *)z->pshard
                                                             : zt_model_tparams(m) + z->lo;
    z->be->i->to_device(z->be, dst, &nan, sizeof nan);
    z->be->i->sync(z->be);
}
