/* zero.h — ZeRO stages 0/1/2 over the flat buffer: the shard map, the gradient reduction
 * (ordered or native), the chunked global norm, the sharded AdamW update and the parameter
 * all-gather (docs/design.md sections 3-4).
 *
 * The flat buffer is padded to a multiple of N*4096 elements; rank r owns [r*S, (r+1)*S).
 * Ordered reduction: after every micro-step each rank sends each owner that owner's part of its
 * micro-batch gradient (all-to-all) and the owner adds the N parts in rank order, i.e. in global
 * micro-batch order j = m*N + r: exactly the additions one rank makes accumulating K micro-batches
 * alone, so losses and parameters are bit-identical for any N. */
#ifndef ZT_ZERO_H
#define ZT_ZERO_H

#include <stddef.h>

#include "iface/backend.h"
#include "iface/comm.h"
#include "io/ckpt.h"
#include "io/config.h"
#include "core/model/model.h"
#include "core/optim/optim.h"

#define ZT_ZERO_RING 2   /* stage 2: bucket buffers in flight at once (besides wte's) */

typedef struct zt_zero_plan {
    size_t total, padded, shard;      /* elements */
    int n_buckets;                    /* stage 2 */
    size_t max_bucket;                /* elements, largest bucket other than wte's */
    size_t param_bytes, grad_bytes, acc_bytes, optim_bytes, comm_bytes, act_bytes;
    size_t gemm16_bytes;              /* within act_bytes (cuda / cudasim, bf16/fp16): the bound on the CUDA backend's
                                         packed GEMM operands (zt_model_gemm16_bytes); ztrain estimate counts them */
    size_t master_bytes;              /* bf16/fp16: fp32 master weights (shard; stage 0: padded) */
    size_t sample_bytes;              /* sampling during training (sample.every > 0): KV caches, buffers */
    size_t ckpt_bytes;                /* checkpoint staging (host memory; whole shard with checkpoint.async) */
    size_t pshard_bytes;              /* stage 3: this rank's shard of the parameters (2-byte words in bf16/fp16;
                                         0 when offloaded with optimizer+params) */
    size_t offload_bytes;             /* zero.offload: host memory for the master weights, moments, the gradient
                                         shard and the published shard (optim_bytes and master_bytes are then 0);
                                         not part of zt_zero_plan_total */
    size_t data_bytes;                /* the data's index and the window in use (io/data.h: the corpus is mapped,
                                         its pages are let go after each window) */
} zt_zero_plan;

#define ZT_ZERO_GATHERS 4 /* stage 3: gathers in flight at once (a layer ahead, plus blocking ones) */

/* stage 3: one gather of flat elements into backend memory (zero_shard.c) */
typedef struct zt_zero_gather {
    int used, temp;           /* temp: words staged in a buffer of its own (a destination outside the window) */
    zt_comm_event ev;
    float *dst;
    void *words;              /* 2-byte words received, unpacked into dst at finish (NULL: fp32 received in dst) */
    size_t n;
} zt_zero_gather;

typedef struct zt_zero {
    int stage, ordered, N, rank;
    zt_zero_plan plan;
    size_t lo, hi;            /* this rank's shard of the flat buffer */
    zt_backend *be;
    zt_comm *comm;
    float *acc;               /* reduced gradient: shard (stage 1-2) or padded (stage 0, gathered) */
    float *exp_avg, *exp_avg_sq; /* Adam moments: shard (1-2) or padded (0) */
    float *master;            /* bf16/fp16: fp32 master weights, laid out as the moments (NULL in fp32) */
    float *load_params;       /* zt_zero_load_view: the parameters the load's hook gathers */
    int params_gathered;      /* the hook gathered them (zt_zero_after_load does not again) */
    int prec;                 /* ZT_PREC_* */
    float *recv;              /* (N, shard) all-to-all receive buffer (ordered, N > 1); with wire16 one shard:
                                 each rank's part decoded there before it is added */
    /* ordered, bf16/fp16, N > 1: the gradients cross in 2 bytes. They hold values of the precision (backward
       rounds what it stores), so pack16 / unpack16 are exact and the owner's fp32 sums in rank order are the
       same additions as with 4 bytes: bit-identical, half the bytes on the wire (config zero.grad_wire) */
    int wire16;
    uint16_t *send16, *recv16; /* stages 0-1: the packed micro-batch gradient (padded) and the (N, shard) parts */
    /* stages 0-1 with wire16 (not LoRA): send16 is where the micro-batch gradient lives; backward writes into an
       fp32 window (zt_model_point_grad_window) and the after-hook packs each part into send16 as it becomes final
       (exact, as above), so there is no float32 micro-batch gradient */
    int grad16;
    float *gwin;
    zt_model *g16_model;
    int g16_done;             /* tensors [g16_done, n) of this backward are packed */
    double *chunk_sums;       /* backend memory, (padded / 4096): every rank's grad-norm chunk sums */
    double *norm;             /* backend memory: the step's gradient norm (clip_scale) */
    float *hyper;             /* backend memory: the step's scalars (ZT_HYPER_N, iface/backend.h) */
    int alias_acc;            /* N == 1, K == 1: the micro-batch gradient IS the reduced one */
    struct zt_bucket *buckets; /* stage 2: in backward order (bucket 0 = the last tensors) */
    int n_buckets;
    float *bucket_mem[ZT_ZERO_RING + 1];   /* ring slots, then wte's own buffer */
    float *recv_mem[ZT_ZERO_RING + 1];
    uint16_t *send16_mem[ZT_ZERO_RING + 1], *recv16_mem[ZT_ZERO_RING + 1]; /* wire16: the packed bucket, its parts */
    int next_mi, in_micro;
    int no_poll;              /* stage 2: a bucket is absorbed only when it must be (its ring slot wanted, the
                                 micro-step's end), never as soon as a poll finds it done: every step then makes the
                                 same launches in the same order, as a step graph needs (core/optim/step_graph.c) */
    double comm_wait_s;       /* time blocked waiting for bucket communication (exposed) */
    double comm_flight_s;     /* time buckets spent in flight (post -> seen complete) */
    int micro_steps;          /* K / N */
    /* stage 3 (zero_shard.c): this rank's parameters, fp32 or (bf16/fp16) 2-byte words; backend memory, or host
       memory with optimizer+params offload */
    void *pshard;
    size_t pes;               /* its element size: 4 or 2 */
    uint16_t *gstage;         /* words: where gathers land before they are unpacked, laid out as the model's window */
    void *sendstage;          /* optimizer+params: this rank's part copied to backend memory to be sent (as gstage) */
    float *wbase;             /* the model's window (gathers into it use the staging at the same offset) */
    size_t wlen;
    zt_zero_gather gathers[ZT_ZERO_GATHERS];
    long gathers_done;        /* test hook ZTRAIN_TEST_KILL_GATHER: gathers started so far */
    double gather_bytes;      /* parameter bytes this rank received in gathers, whole run */
    double gather_wait_s;     /* time blocked finishing them (not hidden behind compute) */
    /* zero.offload (zero_offload.c): the master weights, moments, the gradient shard and the published shard in
       host memory, updated by a cpu backend */
    int offload;              /* 0 none, 1 optimizer, 2 optimizer+params */
    zt_backend *host_be;
    float *h_master, *h_m, *h_v, *h_grad, *h_pub;
    float *init_tmp;          /* offload with a shard-only init target: the initial values on their way to h_master
                                 (acc when there is one, else a buffer of its own) */
    double offload_s;         /* time in the host update (copies included), whole run */
    double comm_s, comm_hidden_s;
    double grad_bytes_sent;   /* gradient bytes this rank sent to other ranks (ordered exchange), whole run */
} zt_zero;

/* stage 3 (zero_shard.c): allocate the shard and the staging, and make the model fetch through the gathers */
void zt_zero_shard_init(zt_zero *z, zt_model *m);
void zt_zero_shard_free(zt_zero *z);
/* stage 3: the parameter shard changed (an update, a load): publish (bf16/fp16: pack the master weights into the
   words) and mark the model's window stale */
void zt_zero_shard_publish(zt_zero *z, zt_model *m);
/* zero.offload (zero_offload.c) */
void zt_zero_offload_init(zt_zero *z, const zt_config *c);
void zt_zero_offload_free(zt_zero *z);
/* the update on the host: the gradient shard copied down, AdamW on the host's master weights and moments, the
   parameters published (copied up, all-gathered at stages 1-2, the shard at stage 3); the step's scalars (z->hyper)
   copied down with the gradient, so a skipped step (a NaN gradient scale) changes nothing there either */
void zt_zero_offload_update(zt_zero *z, zt_model *m, const float *grad, const zt_adamw_hp *hp);
/* the host master weights made from the parameters a run starts from, then published */
void zt_zero_offload_master_init(zt_zero *z, zt_model *m);
void zt_zero_offload_publish(zt_zero *z, zt_model *m);
/* fault injection (tests): a NaN in the state a save writes, this rank's first element */
void zt_zero_poison(zt_zero *z, zt_model *m);

/* stage 2 (zero_bucket.c): build the buckets, point the model's gradients at bucket buffers and
   install the backward hooks that post each bucket's reduction as soon as it is final */
void zt_zero_buckets_init(zt_zero *z, zt_model *m, const zt_config *c);
void zt_zero_buckets_free(zt_zero *z);
/* stage 2: finish micro-step mi's outstanding bucket reductions */
void zt_zero_buckets_finish(zt_zero *z, zt_model *m, int mi);
/* elements of the bucket with its own buffer (wte + wpe; 0 for a LoRA adapter table) */
size_t zt_zero_wte_bucket(const zt_param_table *pt);
/* ordered: acc(L) += the N ranks' parts in rank order, from recv (N, L), or (wire16) each decoded from recv16
   (N, L) into recv (L) first (stages 0-1 and stage 2's buckets) */
void zt_zero_add_parts(zt_zero *z, float *acc, float *recv, const uint16_t *recv16, size_t L);
/* bucket layout for a table (shared by the plan and the init) */
int zt_zero_bucket_layout(const zt_param_table *pt, double bucket_mb, int *first, int *last, size_t *max_bucket);

/* the run's memory lines (rank 0): the plan's components, the parameter shard at stage 3, the offloaded state */
void zt_zero_log_memory(const zt_zero *z, const zt_config *c);
/* zero.offload's host buffer for publishing the parameters (rounded fp32 or 2-byte words), bytes; 0 where the
   master weights are published as they are (fp32 at stages 1-2) or packed straight into the shard */
size_t zt_zero_offload_pub_bytes(int stage, int prec, int params16, int offload, size_t shard);
/* zero.offload as 0 none, 1 optimizer, 2 optimizer+params (0 on the cpu backend, whose memory is the host's) */
int zt_zero_offload_of(const zt_config *c);
/* whether a config's gradients cross in 2 bytes on N ranks (zt_zero.wire16) */
int zt_zero_wire16(const zt_config *c, int N);
/* whether they also live only as 2-byte words between backward and the exchange (zt_zero.grad16: stages 0-1) */
int zt_zero_grad16(const zt_config *c, int N);
/* memory per rank for a config at N ranks: the same function sizes what zt_zero_init allocates */
/* the plan's bytes per rank, all components */
size_t zt_zero_plan_total(const zt_zero_plan *p);
/* the largest micro-batch dividing global_batch / N whose plan fits `limit` bytes per rank (with the
   config's stage and recompute), its plan total in *bytes; 0 when not even 1 fits */
int zt_zero_fit_micro_batch(const zt_config *c, const zt_model_shape *s, int N, size_t limit, size_t *bytes);
void zt_zero_plan_memory(const zt_config *c, const zt_model_shape *s, int N, zt_zero_plan *p);
/* allocates the model (params/grads padded) and the zero state */
void zt_zero_init(zt_zero *z, const zt_config *c, zt_model *m, zt_backend *be, zt_comm *comm,
                  const zt_model_shape *s);
void zt_zero_free(zt_zero *z, zt_model *m);
/* after micro-step mi's backward (mi = 0..micro_steps-1): reduce m->grads into acc */
void zt_zero_reduce(zt_zero *z, zt_model *m, int mi);
/* before the step's work is queued: its scalars (zt_adamw_hyper: update t, learning rate lr, loss scale) */
void zt_zero_step_begin(zt_zero *z, const zt_adamw_hp *hp, long t, float lr, float loss_scale);
/* after the last micro-step, queued without a host wait: the global gradient norm (chunked, the same on every
   rank) and from it the update's gradient scale (clip_scale: clip factor for `clip`, NaN where skip_nonfinite and
   the norm is not finite, which makes zt_zero_update skip the step) */
void zt_zero_clip(zt_zero *z, zt_model *m, double clip, int skip_nonfinite);
/* the norm zt_zero_clip computed, divided by the loss scale (waits for the device) */
double zt_zero_norm_read(zt_zero *z);
/* bf16/fp16, after the parameters were initialised (the same on every rank): the master weights
   take this rank's range of them, and the parameters become their rounding. No-op in fp32. */
void zt_zero_master_init(zt_zero *z, zt_model *m);
/* where a run's initial fp32 parameters go before zt_zero_master_init: the flat params (base 0, n padded), or
   with 2-byte parameters (zt_model_opts.params16) the master weights, which hold flat elements [base, base + n) */
float *zt_zero_init_target(zt_zero *z, zt_model *m, size_t *base, size_t *n);
/* the view --init-from loads the weights through (into zt_zero_init_target's buffer), then zt_zero_master_init */
zt_ckpt_view zt_zero_init_view(zt_zero *z, zt_model *m);
/* AdamW on this rank's shard (of the master weights when there are some) with the step's scalars
   (zt_zero_step_begin, zt_zero_clip), then all-gather parameters (rounded to the precision) */
void zt_zero_update(zt_zero *z, zt_model *m, const zt_adamw_hp *hp);

/* checkpoints: the view of this rank's shard and moments (io/ckpt.h), and after a load of it, the
   all-gather of the parameters (and of stage 0's full moments) that makes every rank whole */
zt_ckpt_view zt_zero_ckpt_view(zt_zero *z, zt_model *m);
/* the same view for zt_ckpt_load, with the parameter all-gather hooked to run while the moments are still
   being read (fp32 on several ranks; with master weights the parameters are made after the load); then
   zt_zero_after_load as always */
zt_ckpt_view zt_zero_load_view(zt_zero *z, zt_model *m);
void zt_zero_after_load(zt_zero *z, zt_model *m);

#endif
