/* zero.c — ZeRO stages 0/1/2: shard map, ordered / native gradient reduction, chunked global norm,
 * sharded AdamW and parameter all-gather (see zero.h). */
#include "core/dist/zero.h"

#include "core/model/sampler.h"
#include "io/data.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

void zt_zero_plan_memory(const zt_config *c, const zt_model_shape *s, int N, zt_zero_plan *p) {
    memset(p, 0, sizeof *p);
    zt_param_table *pt = zt_malloc(sizeof *pt);
    zt_trainable_table_build(c, s, pt); /* GPT-2's, or the LoRA adapters' */
    const zt_shard_layout sl = zt_shard_layout_of(pt->total, N);
    p->total = sl.total;
    p->padded = sl.padded;
    p->shard = sl.shard;
    const int K = c->train.global_batch / c->train.micro_batch;
    const int stage = c->zero.stage;
    const size_t f = sizeof(float);
    p->param_bytes = p->padded * f;
    const int params16 = zt_model_opts_from_config(c).params16;
    if (params16) p->param_bytes = p->padded * 2 + zt_model_wbuf_elems(s) * f; /* the words and the fp32 window */
    if (c->lora.enabled) { /* the frozen base, whole on every rank, besides the adapters (QLoRA: quantised) */
        zt_lora_cfg lc;
        zt_lora_cfg_from_config(c, &lc);
        p->param_bytes += zt_lora_base_bytes(s, lc.quant, NULL, NULL, NULL);
        if (lc.quant >= 0) p->param_bytes += zt_lora_max_weight(s) * f; /* the dequantised weight */
    }
    p->optim_bytes = 2 * (stage == 0 ? p->padded : p->shard) * f;
    /* bf16/fp16: fp32 master weights beside the moments (the working buffers stay float32 containers) */
    p->master_bytes = zt_config_prec(c) != ZT_PREC_FP32 ? p->optim_bytes / 2 : 0;
    if (stage == 2) {
        /* gradients live only in buckets: the ring, wte's own bucket, and the shard accumulator */
        p->n_buckets = zt_zero_bucket_layout(pt, c->zero.bucket_mb, NULL, NULL, &p->max_bucket);
        const size_t wte = zt_zero_wte_bucket(pt); /* wte + wpe: their own bucket */
        p->grad_bytes = (ZT_ZERO_RING * p->max_bucket + wte) * f;
        p->acc_bytes = p->shard * f;
        if (N > 1) {
            const size_t rb = p->max_bucket < p->shard ? p->max_bucket : p->shard;
            const size_t rw = wte < p->shard ? wte : p->shard;
            const int ordered = strcmp(c->zero.reduce, "ordered") == 0;
            if (zt_zero_wire16(c, N)) /* the packed bucket, the N packed parts, one part decoded */
                p->comm_bytes = (ZT_ZERO_RING * p->max_bucket + wte) * 2 + (size_t)N * (ZT_ZERO_RING * rb + rw) * 2 +
                                (ZT_ZERO_RING * rb + rw) * f;
            else p->comm_bytes = (ordered ? (size_t)N : 1) * (ZT_ZERO_RING * rb + rw) * f;
        }
    } else {
        p->grad_bytes = p->padded * f;                     /* one micro-batch's gradient */
        if (zt_zero_grad16(c, N)) p->grad_bytes = zt_model_grad_window_elems(s) * f; /* its fp32 window (words: comm) */
        int alias = N == 1 && K == 1;
        p->acc_bytes = alias ? 0 : (stage == 0 ? p->padded : p->shard) * f;
        p->comm_bytes = N > 1 ? p->padded * f : 0;         /* all-to-all receive buffer */
        if (zt_zero_wire16(c, N)) p->comm_bytes = 2 * p->padded * 2 + p->shard * f; /* packed send + parts, one decoded */
    }
    const zt_model_opts mo = zt_model_opts_from_config(c);
    p->act_bytes = zt_model_act_bytes(s, c->train.micro_batch, c->train.seq_len, &mo);
    if (c->lora.enabled) {
        zt_lora_cfg lc;
        zt_lora_cfg_from_config(c, &lc);
        p->act_bytes += zt_lora_act_bytes(s, &lc, c->train.micro_batch, c->train.seq_len);
    }
    if (zt_config_prec(c) != ZT_PREC_FP32 && (!strcmp(c->device, "cuda") || !strcmp(c->device, "cudasim")))
        p->act_bytes += zt_model_gemm16_bytes(s, c->train.micro_batch, c->train.seq_len); /* packed GEMM operands */
    p->sample_bytes = c->sample.every > 0 ? zt_sampler_bytes(s) : 0; /* decoding during training */
    if (c->sample.every > 0 && params16) p->sample_bytes += p->padded * f; /* the parameters unpacked for it */
    p->ckpt_bytes = zt_ckpt_stage_bytes(p->shard, pt->n, c->checkpoint.async, p->master_bytes > 0); /* host memory */
    p->data_bytes = zt_dataset_plan_bytes(c->data.train, c->train.seq_len) +
                    (c->data.val[0] ? zt_dataset_plan_bytes(c->data.val, c->train.seq_len) : 0);
    free(pt);
}

int zt_zero_wire16(const zt_config *c, int N) {
    const int gpu = !strcmp(c->device, "cuda") || !strcmp(c->device, "cudasim");
    const int want = !strcmp(c->zero.grad_wire, "precision") || (!strcmp(c->zero.grad_wire, "auto") && gpu);
    return want && N > 1 && strcmp(c->zero.reduce, "ordered") == 0 && zt_config_prec(c) != ZT_PREC_FP32;
}

int zt_zero_grad16(const zt_config *c, int N) {
    zt_model_shape s;
    zt_model_shape_from_config(c, &s);
    return zt_zero_wire16(c, N) && c->zero.stage != 2 && !c->lora.enabled && zt_shape_gpt2_layout(&s);
}

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

size_t zt_zero_plan_total(const zt_zero_plan *p) {
    return p->param_bytes + p->grad_bytes + p->acc_bytes + p->optim_bytes + p->master_bytes + p->comm_bytes + p->act_bytes +
           p->ckpt_bytes + p->sample_bytes + p->data_bytes;
}

/* the largest micro-batch (dividing the per-rank batch) whose plan fits `limit` bytes per rank, with
   the config's stage and recompute; 0 if none does. *bytes gets its plan total. */
int zt_zero_fit_micro_batch(const zt_config *c0, const zt_model_shape *s, int N, size_t limit, size_t *bytes) {
    zt_config c = *c0;
    const int per_rank = c.train.global_batch / N;
    for (int mb = per_rank; mb >= 1; mb--) {
        if (per_rank % mb) continue;
        c.train.micro_batch = mb;
        zt_zero_plan p;
        zt_zero_plan_memory(&c, s, N, &p);
        if (zt_zero_plan_total(&p) <= limit) {
            if (bytes) *bytes = zt_zero_plan_total(&p);
            return mb;
        }
    }
    return 0;
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
    const int K = c->train.global_batch / c->train.micro_batch;
    z->micro_steps = K / z->N;
    z->alias_acc = z->plan.acc_bytes == 0;
    z->lo = (size_t)z->rank * z->plan.shard;
    z->hi = z->lo + z->plan.shard;
    const zt_model_opts mo = zt_model_opts_from_config(c);
    if (c->lora.enabled) {
        zt_lora_cfg lc;
        zt_lora_cfg_from_config(c, &lc);
        zt_model_init_lora(m, be, s, c->train.micro_batch, c->train.seq_len, &lc, z->plan.padded, z->stage != 2, &mo);
    } else {
        zt_model_init(m, be, s, c->train.micro_batch, c->train.seq_len, z->plan.padded, z->stage != 2 && !z->grad16,
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
    if (z->stage == 2) zt_zero_buckets_init(z, m, c);
    size_t opt_elems = z->plan.optim_bytes / 2 / sizeof(float);
    z->exp_avg = be->i->alloc(be, opt_elems * sizeof(float));
    z->exp_avg_sq = be->i->alloc(be, opt_elems * sizeof(float));
    if (z->plan.master_bytes) z->master = be->i->alloc(be, z->plan.master_bytes);
    if (z->plan.comm_bytes && z->stage != 2) {
        if (z->wire16) {
            z->send16 = be->i->alloc(be, z->plan.padded * 2);
            z->recv16 = be->i->alloc(be, z->plan.padded * 2);
            z->recv = be->i->alloc(be, z->plan.shard * sizeof(float));
        } else z->recv = be->i->alloc(be, z->plan.comm_bytes);
    }
    z->chunk_sums = be->i->alloc(be, z->plan.padded / ZT_NORM_CHUNK * sizeof(double));
    z->chunk_sums_host = zt_calloc(z->plan.padded / ZT_NORM_CHUNK, sizeof(double));
}

void zt_zero_free(zt_zero *z, zt_model *m) {
    zt_backend *be = z->be;
    if (!be) return;
    if (z->recv) be->i->free(be, z->recv);
    if (z->send16) be->i->free(be, z->send16);
    if (z->recv16) be->i->free(be, z->recv16);
    if (z->gwin) be->i->free(be, z->gwin);
    if (z->buckets) zt_zero_buckets_free(z);
    be->i->free(be, z->exp_avg);
    be->i->free(be, z->exp_avg_sq);
    if (z->master) be->i->free(be, z->master);
    if (z->acc) be->i->free(be, z->acc);
    be->i->free(be, z->chunk_sums);
    free(z->chunk_sums_host);
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
    if (z->stage == 2) {                   /* buckets were posted during backward */
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

double zt_zero_grad_norm(zt_zero *z, zt_model *m) {
    const size_t S = z->plan.shard, nck = S / ZT_NORM_CHUNK;
    double *mine = z->chunk_sums + (size_t)z->rank * nck;
    z->be->i->sumsq_chunks(z->be, mine, shard_grad(z, m), S, ZT_NORM_CHUNK);
    if (z->N > 1) z->comm->i->all_gather(z->comm, mine, z->chunk_sums, nck, ZT_F64);
    /* the chunk sums are combined on the host, in chunk order */
    z->be->i->to_host(z->be, z->chunk_sums_host, z->chunk_sums, nck * (size_t)z->N * sizeof(double));
    double sum = 0.0;
    for (size_t i = 0; i < nck * (size_t)z->N; i++) sum += z->chunk_sums_host[i];
    return sqrt(sum);
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
    if (!m->params16) {
        *base = 0;
        *n = m->padded;
        return m->params;
    }
    *base = master_range(z, n);
    return z->master;
}

void zt_zero_master_init(zt_zero *z, zt_model *m) {
    if (!z->master) return;
    size_t n;
    const size_t base = master_range(z, &n);
    /* with 2-byte parameters the initial values were written into the master weights themselves */
    if (!m->params16) z->be->i->copy(z->be, z->master, zt_model_tparams(m) + base, n * sizeof(float));
    publish_params(z, m);
}

void zt_zero_update(zt_zero *z, zt_model *m, const zt_adamw_hp *hp, long t, float lr, float grad_scale) {
    const size_t S = z->plan.shard;
    const zt_param_table *pt = zt_model_ttable(m);
    float *tp = zt_model_tparams(m);
    if (z->stage == 0) {
        /* every rank holds the full reduced gradient and full optimizer state */
        if (z->N > 1) {
            z->comm->i->all_gather(z->comm, z->acc + z->lo, z->acc, S, ZT_F32);
        }
        const float *g = z->alias_acc ? m->grads : z->acc;
        zt_adamw_update(z->be, pt, 0, z->plan.padded, z->master ? z->master : tp, g, z->exp_avg, z->exp_avg_sq,
                        hp, t, lr, grad_scale);
        if (z->master) publish_params(z, m);
        return;
    }
    zt_adamw_update(z->be, pt, z->lo, z->hi, z->master ? z->master : tp + z->lo, shard_grad(z, m), z->exp_avg,
                    z->exp_avg_sq, hp, t, lr, grad_scale);
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
    return v;
}

zt_ckpt_view zt_zero_init_view(zt_zero *z, zt_model *m) {
    zt_ckpt_view v = zt_model_ckpt_view(m);
    if (!m->params16) return v;
    size_t n;
    v.params_base = v.lo = master_range(z, &n);
    v.hi = v.lo + n;
    v.params = z->master;
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
    if (!z->master && z->N > 1) {
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
    if (z->master) publish_params(z, m);
    else if (z->N > 1 && !z->params_gathered)
        z->comm->i->all_gather(z->comm, zt_model_tparams(m) + z->lo, zt_model_tparams(m), S, ZT_F32);
    z->params_gathered = 0;
}
