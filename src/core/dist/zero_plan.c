/* zero_plan.c — the memory plan of ZeRO stages 0-3 with and without optimizer offload: what zt_zero_init allocates,
 * per rank, component by component (zero.h's zt_zero_plan), for `ztrain estimate`, the up-front memory check and
 * the run's own memory line. */
#include "core/dist/zero.h"

#include "core/model/sampler.h"
#include "io/data.h"

#include <stdlib.h>
#include <string.h>

#include "util/util.h"

int zt_zero_offload_of(const zt_config *c) {
    if (!strcmp(c->device, "cpu")) return 0; /* the state is in host memory already: nothing moves */
    return !strcmp(c->zero.offload, "optimizer+params") ? 2 : !strcmp(c->zero.offload, "optimizer") ? 1 : 0;
}

size_t zt_zero_offload_pub_bytes(int stage, int prec, int params16, int offload, size_t shard) {
    if (prec == ZT_PREC_FP32) return 0;                             /* published as they are */
    if (stage == 3) return offload == 1 ? shard * 2 : 0;             /* words packed on the host, or straight into the shard */
    return params16 ? shard * 2 : shard * sizeof(float);            /* words, or the rounded fp32 copy */
}

int zt_zero_wire16(const zt_config *c, int N) {
    const int gpu = !strcmp(c->device, "cuda") || !strcmp(c->device, "cudasim");
    const int want = !strcmp(c->zero.grad_wire, "precision") || (!strcmp(c->zero.grad_wire, "auto") && gpu);
    return want && N > 1 && strcmp(c->zero.reduce, "ordered") == 0 && zt_config_prec(c) != ZT_PREC_FP32;
}

int zt_zero_grad16(const zt_config *c, int N) {
    zt_model_shape s;
    zt_model_shape_from_config(c, &s);
    return zt_zero_wire16(c, N) && c->zero.stage < 2 && !c->lora.enabled && zt_shape_gpt2_layout(&s);
}

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
    const int prec = zt_config_prec(c);
    if (stage == 3) { /* this rank's shard (2-byte words in bf16/fp16), the window the layers are gathered into
                         (wte, the other tensors outside the layers, two layer slots) and, with words, their staging */
        const size_t win = zt_model_shard_window_elems(s);
        const size_t es = prec != ZT_PREC_FP32 ? 2 : f;
        p->param_bytes = win * f + (prec != ZT_PREC_FP32 ? win * 2 : 0);
        p->pshard_bytes = p->shard * es;
        if (zt_zero_offload_of(c) == 2) p->param_bytes += win * es; /* the own part staged for sending */
    }
    p->optim_bytes = 2 * (stage == 0 ? p->padded : p->shard) * f;
    /* bf16/fp16: fp32 master weights beside the moments (the working buffers stay float32 containers) */
    p->master_bytes = prec != ZT_PREC_FP32 ? p->optim_bytes / 2 : 0;
    if (zt_zero_offload_of(c)) { /* host memory: master weights (fp32 too: the host's copy of the shard), moments,
                                    the gradient shard, the published shard (and with +params the parameter shard) */
        p->offload_bytes = p->optim_bytes + p->shard * f /* master */ + p->shard * f /* gradient */ +
                           zt_zero_offload_pub_bytes(stage, prec, params16, zt_zero_offload_of(c), p->shard);
        if (zt_zero_offload_of(c) == 2) { /* the shard in host memory: its words (fp32: the master weights are it) */
            if (prec != ZT_PREC_FP32) p->offload_bytes += p->pshard_bytes;
            p->pshard_bytes = 0;
        }
        p->optim_bytes = 0;
        p->master_bytes = 0;
    }
    if (stage >= 2) {
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
    /* offload: the initial values staged in backend memory on their way to the host's master weights
       (zt_zero_init_target): through the reduced-gradient shard, unused then, or where there is none (1 rank, 1
       micro-batch, stage 1) a buffer of their own, freed after zt_zero_master_init */
    if (zt_zero_offload_of(c) && (stage == 3 || params16) && p->acc_bytes == 0) p->param_bytes += p->shard * f;
    const zt_model_opts mo = zt_model_opts_from_config(c);
    p->act_bytes = zt_model_act_bytes(s, c->train.micro_batch, c->train.seq_len, &mo);
    if (c->lora.enabled) {
        zt_lora_cfg lc;
        zt_lora_cfg_from_config(c, &lc);
        p->act_bytes += zt_lora_act_bytes(s, &lc, c->train.micro_batch, c->train.seq_len);
    }
    p->gemm16_bytes = 0;
    if (zt_config_prec(c) != ZT_PREC_FP32 && (!strcmp(c->device, "cuda") || !strcmp(c->device, "cudasim")))
        p->gemm16_bytes = zt_model_gemm16_bytes(s, c->train.micro_batch, c->train.seq_len); /* packed GEMM operands */
    p->act_bytes += p->gemm16_bytes;
    p->sample_bytes = c->sample.every > 0 ? zt_sampler_bytes(s) : 0; /* decoding during training */
    if (c->sample.every > 0 && (params16 || stage == 3)) p->sample_bytes += p->padded * f; /* the parameters unpacked for it */
    /* host memory; the saver stages master weights as a fourth group when there are some (offloaded ones too; an
       fp32 run's offloaded master weights are its /model) */
    p->ckpt_bytes = zt_ckpt_stage_bytes(p->shard, pt->n, c->checkpoint.async,
                                        p->master_bytes > 0 || (p->offload_bytes > 0 && prec != ZT_PREC_FP32));
    p->data_bytes = zt_dataset_plan_bytes(c->data.train, c->train.seq_len) +
                    (c->data.val[0] ? zt_dataset_plan_bytes(c->data.val, c->train.seq_len) : 0);
    free(pt);
}

size_t zt_zero_plan_total(const zt_zero_plan *p) {
    return p->param_bytes + p->pshard_bytes + p->grad_bytes + p->acc_bytes + p->optim_bytes + p->master_bytes +
           p->comm_bytes + p->act_bytes + p->ckpt_bytes + p->sample_bytes + p->data_bytes;
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


void zt_zero_log_memory(const zt_zero *z, const zt_config *c) {
    const zt_zero_plan *p = &z->plan;
    const double MB = 1.0 / (1 << 20);
    zt_log("memory/rank: params %.1f MB, grads %.1f MB, reduced grads %.1f MB, optimizer %.1f MB, "
           "comm %.1f MB, activations %.1f MB\n",
           p->param_bytes * MB, p->grad_bytes * MB, p->acc_bytes * MB, p->optim_bytes * MB, p->comm_bytes * MB,
           p->act_bytes * MB);
    if (c->zero.stage == 3)
        zt_log("ZeRO-3: parameter shard %.1f MB; every layer gathered before its forward and its backward\n",
               (p->pshard_bytes + (z->offload == 2 ? p->shard * z->pes : 0)) * MB);
    if (z->offload)
        zt_log("zero.offload = %s: %.1f MB of host memory per rank (master weights, Adam moments, gradient shard%s); "
               "the update runs on the host\n", c->zero.offload, p->offload_bytes * MB,
               z->offload == 2 ? ", parameter shard" : "");
    else if (strcmp(c->zero.offload, "none"))
        zt_log("zero.offload = %s on the cpu backend: the optimizer state is in host memory already; nothing moves\n",
               c->zero.offload);
}
