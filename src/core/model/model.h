/* model.h — the transformer over the flat parameter buffer (iface/param_table.h), one file per concern:
 *   model.c         forward and backward (the ops in order, through the backend interface)
 *   model_encoder.c the encoders' (BERT, RoBERTa) forward and backward, which model.c hands them to
 *   model_linear.c  a layer's linear maps: the fp32 weight, its QLoRA dequantisation, the LoRA adapters
 *   model_acts.c    activation storage: the slots, recomputation and the 2-byte stash
 *   model_params.c  parameter storage: allocation, the 2-byte parameter and gradient windows, views
 *   model_init.c    seeded weight initialisation, the options a config asks for, shape and FLOPs
 * Memory is planned by the same code that allocates it: zt_model_act_bytes and the window sizes are what
 * zt_model_init allocates (`ztrain estimate` and the start-up memory check use them).
 */
#ifndef ZT_MODEL_H
#define ZT_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include "iface/backend.h"
#include "iface/param_table.h"
#include "core/lora/lora.h"
#include "io/ckpt.h"
#include "io/config.h"

/* activations for one micro-batch (B, T), allocated once. Q = (NH + 2 NKV) hs, the fused query/key/value width;
   F the MLP's first linear's output (4C for GELU, 2 I for SwiGLU), I its hidden size (zt_shape_qkv, zt_shape_fc) */
typedef struct zt_acts {
    float *encoded;   /* (B, T, C) */
    float *ln1;       /* (L, B, T, C) */
    float *ln1_mean, *ln1_rstd; /* (L, B, T); RMSNorm keeps rstd only */
    float *qkv;       /* (L, B, T, Q): after the rotary positions */
    float *atty;      /* (L, B, T, C) */
    float *att;       /* (L, B, NH, T, T) */
    float *attproj;   /* (B, T, C) scratch: not needed by backward */
    float *residual2; /* (L, B, T, C) */
    float *ln2;       /* (L, B, T, C) */
    float *ln2_mean, *ln2_rstd; /* (L, B, T) */
    float *fch;       /* (L, B, T, F) */
    float *fch_gelu;  /* (L, B, T, I): the activation's output (GELU or SwiGLU) */
    float *fcproj;    /* (B, T, C) scratch */
    float *residual3; /* (L, B, T, C) */
    float *lnf;       /* (B, T, C) */
    float *lnf_mean, *lnf_rstd; /* (B, T) */
    float *logits;    /* (B, T, Vp): becomes dlogits in backward */
    float *losses;    /* (B, T) */
    /* backward scratch */
    float *dres;      /* (B, T, C) gradient flowing along the residual stream */
    float *dbt4c;     /* (B, T, I) */
    float *dbtc;      /* (B, T, C) */
    float *dbtc2;     /* (B, T, C) */
    float *dqkv;      /* (B, T, Q) */
    float *dfc;       /* (B, T, F): SwiGLU's input gradient; unused with GELU */
    float *rope_cs;   /* (maxT, hs/2, 2): rotary positions' cos and sin; unused with learned positions */
    float *datt;      /* (B, NH, T, T) */
    void *stash;      /* opt.act16: (L) x each layer's internals as bf16/fp16 words */
    int32_t *tokens;  /* (B, T) device */
    int32_t *targets; /* (B, T) device */
    /* encoders (model_encoder.c), NULL otherwise: the embeddings' sum before their LayerNorm and its statistics,
       the MLM head's dense output and its GELU, per position its position id, token type and whether it is a key
       (not padding), and the argmax of its logits */
    float *emb_sum;   /* (B, T, C) */
    float *emb_mean, *emb_rstd; /* (B, T) */
    float *hd, *hdg;  /* (B, T, C) */
    int32_t *pos_ids, *types, *kvalid, *argmax; /* (B, T) */
} zt_acts;

/* Backward progress, for overlapping gradient communication with the rest of backward:
   before(ctx, first, last): backward is about to write the gradients of tensors [first, last];
   after(ctx, first): the gradients of tensors [first, n) are final for this micro-batch.
   Tensors finish in reverse flat order (lm_head and ln_f, layer L-1, ..., layer 0, wpe, wte); a tied wte is
   written first (LM head) and finished last (embedding). */
typedef struct zt_bwd_hooks {
    void (*before)(void *ctx, int first, int last);
    void (*after)(void *ctx, int first);
    void *ctx;
} zt_bwd_hooks;

/* train.recompute: which activations backward recomputes instead of keeping. GELU: the GELU output (4C per token
   per layer) is recomputed from its input; LAYER: only each layer's output (the residual stream) is kept and
   backward reruns the layer's forward first. Same kernels on the same inputs: bit-identical to NONE. */
typedef enum zt_recompute { ZT_RECOMPUTE_NONE = 0, ZT_RECOMPUTE_GELU = 1, ZT_RECOMPUTE_LAYER = 2 } zt_recompute;

/* How a model stores what training keeps; none of them changes a result bit but head_chunks
   (zt_model_opts_from_config) */
typedef struct zt_model_opts {
    zt_recompute recompute;
    /* 2-byte activations (train.act_storage auto in a bf16/fp16 run, not with LAYER): each layer's internals
       (ln1, qkv, atty, att, residual2, ln2, fch and, without GELU recompute, fch_gelu) are kept for backward as
       2-byte words (pack16) and computed in one fp32 working copy; backward unpacks a layer's words into that copy
       first. They hold values of the precision, so packing is exact. The LayerNorm statistics and the layer
       outputs (residual3) stay fp32 (model_acts.c) */
    int act16;
    /* attention without the (T, T) matrices (train.attention auto on a device with the attention_fused_* slots):
       each layer keeps its softmax statistics, (B, NH, T, 2) fp32, instead of the probabilities, and backward
       recomputes them (iface/backend.h). Applies where the head size is one the slots take
       (zt_attention_fused_hs_ok); the materialized attention runs elsewhere */
    int att_fused;
    /* with att_fused in a bf16 / fp16 run on the CUDA backend: its kernels run on tensor cores (zt_attention_tc_on),
       whose backward takes a value per row of scratch and no dq parts (zt_attention_fused_scratch_for) */
    int att_tc;
    /* 2-byte working parameters (train.param_storage, a bf16/fp16 run without LoRA): params16 holds the words
       and forward / backward unpack each tensor (exact) into one fp32 window as they reach it: wte, then each
       layer, then wte again for the LM head; wpe and ln_f once per update. ZeRO publishes the parameters into
       params16 (pack16 of the master weights) and calls zt_model_params_changed (model_params.c) */
    int params16;
    /* ZeRO-3 (set by core/dist/zero.c, never from a config key alone): the model holds no whole copy of the
       parameters. Its window holds wte, the other tensors outside the layers and two layer slots; forward and
       backward fetch each part through zt_model.src as they reach it (a layer's gather is started one layer ahead
       into the other slot) and fetch it again after the parameters change */
    int sharded;
    /* 2-byte logits (a bf16/fp16 decoder run): the LM head's logits and the dlogits left in their place are 2-byte
       words of the precision (the same values the float32 buffer held after its round_to), made, read and
       overwritten by the matmul16 / softmax_xent16 slots; zt_model_logits_to_host widens them */
    int logits16;
    /* train.head_chunks (decoders): the LM head, the loss and the head's backward run on chunks of
       zt_model_head_rows(max_B * max_T) rows, one after the other, and the logits buffer holds one chunk. The
       only option here that changes bits when set (> 1): the head's weight gradient is the sum over the chunks, in
       chunk order, of each chunk's product (matmul16 / matmul with beta 1), not one product over all rows; the
       logits, losses and dlnf of each row are the ones computed alone (model.c head_chunked) */
    int head_chunks;
} zt_model_opts;

/* where a sharded model's parameters come from: start() begins bringing flat elements [off, off + n) as fp32 into
   backend memory dst and returns a ticket, finish(ticket) completes it. Collective: every rank makes the same
   calls in the same order (the forward and backward of SPMD ranks do) */
typedef struct zt_param_src {
    int (*start)(void *ctx, float *dst, size_t off, size_t n);
    void (*finish)(void *ctx, int ticket);
    void *ctx;
} zt_param_src;

/* the storage options a config asks for (train.recompute, act_storage, attention, param_storage, device) */
zt_model_opts zt_model_opts_from_config(const zt_config *c);

typedef struct zt_model {
    zt_model_shape s;
    zt_param_table table;
    zt_backend *be;
    int max_B, max_T;     /* micro-batch shape the activations were sized for */
    int B, T;             /* shape of the last forward */
    float *params;        /* device, flat (padded; the tail past table.total stays 0); NULL with params16 or sharded */
    uint16_t *params16;   /* opt.params16: the working parameters as bf16/fp16 words, flat (padded). w[i] then
                             point into wbuf, where each tensor is unpacked (exact) right before the ops use it */
    float *wbuf;          /* opt.params16: the fp32 window: [wte, or one layer's 12 tensors | wpe, ln_f] */
    int wres;             /* what the window's first part holds: -2 nothing, -1 wte, l >= 0 layer l */
    int wfix;             /* wpe and ln_f are unpacked (both reset when the parameters change) */
    zt_param_src src;     /* opt.sharded: the gathers */
    float *sslot[2];      /* opt.sharded: the two layer slots in the window */
    int sres[2];          /* opt.sharded: the layer each slot holds (-1 none) */
    int spend, spend_slot, spend_ticket; /* opt.sharded: the layer being prefetched (-1 none), its slot and ticket */
    int swte;             /* opt.sharded: wte is in the window */
    int slast;            /* opt.sharded: the slot used last */
    float *grads;         /* device, flat (padded): one micro-batch's gradient (NULL when every
                             tensor's gradient lives in a bucket buffer: ZeRO-2) */
    float *gptr[ZT_MAX_TENSORS]; /* where backward writes tensor i's gradient (default grads + offset) */
    zt_bwd_hooks hooks;   /* optional */
    size_t padded;        /* elements allocated for params / grads */
    zt_acts a;
    size_t act_bytes;     /* activation + scratch bytes */
    zt_model_opts opt;    /* as given, with att_fused cleared where the head size has no fused attention */
    int stashed;          /* act16: the last forward packed its layers (a training forward) */
    int stash_ahead;      /* act16: the backend took pack16_ahead's advice for the layer being computed */
    int stash_lazy;       /* act16: the backend took unpack16_lazy for the layer being unpacked */
    int prec;             /* ZT_PREC_*: bf16/fp16 round every activation and gradient an op stores (the
                             statistics mean/rstd and the losses stay fp32); set after init */
    float *w[ZT_MAX_TENSORS]; /* base tensor i's data: params + its offset, or (QLoRA) NULL for a quantised linear
                             weight, whose data is qw[layer][target] (params then holds the other tensors, packed) */
    void *qw[ZT_MAX_LAYERS][ZT_LORA_N_TARGETS]; /* QLoRA: the quantised linear weights (backend memory) */
    int qfmt;             /* QLoRA: their zt_quant_fmt; -1 none */
    float *wdq;           /* QLoRA: one dequantised weight (up to 4C x C), made right before each use */
    zt_lora_model *lora;  /* LoRA fine-tuning: params is the frozen base (no gradient), and grads / gptr / the hooks
                             are the adapters' (zt_model_ttable); NULL: every parameter is trained */
    float *losses_host;   /* (B, T) host copy of the last forward's losses */
    float *loss_rows;     /* zt_model_forward_train_row's per-position losses, (loss_nrows, max B*T) backend memory */
    float *loss_rows_host;
    int loss_nrows, *loss_row_n; /* rows allocated; each row's B*T */
    uint64_t *row_micro;  /* backend memory (loss_nrows): the rows' global micro-batch indices (LoRA dropout's masks),
                             uploaded with them when given (rows_micro) */
    int rows_micro;
    int32_t *row_ids;     /* backend memory (2, loss_nrows, max B*T): the rows' tokens, then their targets, uploaded
                             before a step's first launch (zt_model_rows_upload) */
    float *row_dscale;    /* backend memory (loss_nrows): each row's d(loss) scale / (B*T), the softmax_xent scale of
                             its forward and backward, uploaded with the rows when given (rows_dscale) */
    float *row_dscale_host;
    int rows_dscale;
    const float *xent_at; /* the current forward's scale in backend memory (a row's in row_dscale), or NULL */
    const int32_t *tok, *tgt; /* backend memory: the last forward's tokens and targets (a->tokens or a row's) */
    const int32_t *e_pos, *e_type, *e_key; /* encoders, backend memory: the last forward's position ids, token types
                             and keys (a->pos_ids, a->types, a->kvalid, or a row's in row_enc) */
    int32_t *row_enc;     /* encoders, backend memory (loss_nrows, 3, max B*T): the rows' ids, uploaded with them */
    int32_t *row_argmax;  /* encoders, backend memory (loss_nrows, max B*T): the rows' logits' argmax */
    int32_t *row_enc_host; /* encoders: host staging of row_enc, then of row_argmax */
    long forwards;        /* forwards run (any kind) and float32 parameter copies made (zt_model_params_f32): a step
                             graph's replay needs none between steps (core/optim/step_graph.h) */
    int32_t *ids_host;    /* encoders: (3, B, T) host staging of pos_ids, types and kvalid; then the argmax */
    long correct, counted; /* encoders: the last forward with targets: positions with a target (>= 0), and those
                             whose logits' argmax is it (masked-LM accuracy) */
    int dlogits_ready;    /* the last forward left dlogits for dlogits_scale in a.logits */
    float dlogits_scale;
    float *head_losses;   /* where the last decoder forward's per-row losses go (a loss row, or a.losses): a chunked
                             head's backward writes them there */
} zt_model;

/* activation bytes for a micro-batch (B, T), with the same layout zt_model_init allocates (model_acts.c) */
size_t zt_model_act_bytes(const zt_model_shape *s, int B, int T, const zt_model_opts *o);
/* the CUDA backend's packed 2-byte GEMM operands in a bf16/fp16 run (cuda/cuda_gemm.cu): the largest
   op(a) and op(b) of any product, 2 bytes each (the LM head's: logits gradient (B*T, Vp) and wte), and the widest
   linear's output gradient, packed once for linear_bwd's two products */
size_t zt_model_gemm16_bytes(const zt_model_shape *s, int B, int T);

/* ZeRO-3's window (zt_model_opts.sharded): wte, the other tensors outside the layers, two layer slots; fp32 elements */
size_t zt_model_shard_window_elems(const zt_model_shape *s);
/* the window's fp32 elements for a shape (what opt.params16 allocates besides the words) */
size_t zt_model_wbuf_elems(const zt_model_shape *s);
/* ZeRO stages 0-1 with the gradients exchanged as 2-byte words (zero.c grad16): no float32 micro-batch gradient;
   backward writes into an fp32 window [wte | wpe | ln_f | one layer] (wte's gradient is written by the LM head
   and completed by the embedding, so it stays whole) and the after-hook packs each part as it becomes final */
size_t zt_model_grad_window_elems(const zt_model_shape *s);
void zt_model_point_grad_window(zt_model *m, float *win);
/* opt.params16: the words changed (an update, a load): what the window holds is stale */
void zt_model_params_changed(zt_model *m);
/* the trained parameters [off, off + n) as float32 on the host (from the words with opt.params16) */
void zt_model_tparams_to_host(zt_model *m, size_t off, size_t n, float *host);
/* the whole flat parameters as float32 in backend memory: params, or (opt.params16) a copy unpacked into a
   new buffer of `padded` floats, which zt_model_params_f32_release frees (sampling during training) */
float *zt_model_params_f32(zt_model *m);
void zt_model_params_f32_release(zt_model *m, float *p);
/* allocates params (zero), grads and activations on be. params/grads get `padded` >= table.total elements (the
   ZeRO shard padding; 0 = table.total); alloc_grads = 0 skips the gradient. o: NULL = all options off */
int zt_model_init(zt_model *m, zt_backend *be, const zt_model_shape *s, int B, int T, size_t padded,
                  int alloc_grads, const zt_model_opts *o);
/* LoRA: the base parameters (table.total, frozen, no gradient) and the adapters of lc (params zero; `padded`
   elements, like their gradient when alloc_grads) */
int zt_model_init_lora(zt_model *m, zt_backend *be, const zt_model_shape *s, int B, int T, const zt_lora_cfg *lc,
                       size_t padded, int alloc_grads, const zt_model_opts *o);
/* what the optimizer trains: GPT-2's table and params, or (LoRA) the adapters' */
const zt_param_table *zt_model_ttable(const zt_model *m);
float *zt_model_tparams(const zt_model *m);
/* the trained parameters as a checkpoint view (whole, every rank; a writer sets lo/hi) */
zt_ckpt_view zt_model_train_view(zt_model *m);
void zt_model_free(zt_model *m);

/* GPT-2 initialisation: normal(0, std), residual projections std/sqrt(2L), biases 0, LayerNorm
   weights 1, padded wte rows 0. Each block of ZT_INIT_BLOCK elements of each tensor has its own
   seeded stream, so a caller can stage the init through a small buffer. Writes block `block` of
   tensor i into host (ZT_INIT_BLOCK floats) and returns the element count written. */
#define ZT_INIT_BLOCK ((size_t)1 << 20)
size_t zt_model_init_block_host(const zt_param_table *pt, const zt_model_shape *s, int i, size_t block, float *host,
                                float std, uint64_t seed);
/* the whole flat buffer (table.total floats) on the host, block by block (tests, tools) */
void zt_model_init_weights_host(const zt_param_table *pt, const zt_model_shape *s, float *host,
                                float std, uint64_t seed);

/* forward on tokens/targets (B, T) host arrays (targets may be NULL: logits only).
   Returns the mean loss over B*T (or -1 without targets): the sum of the per-position losses divided by B*T, where
   an ignored position (target < 0, a loss mask) contributes 0 and still counts in B*T, so with masks it is not the
   mean over the counted targets (the step and the validation divide by their counts: optim/step.h, eval.h).
   losses_host then holds the per-position losses (0 at ignored positions). T may be <= the allocated T. */
float zt_model_forward(zt_model *m, const int32_t *tokens, const int32_t *targets, int B, int T);
/* training forward: as zt_model_forward, and the same pass over the logits also leaves
   d(dloss_scale * mean loss)/dlogits in place for the backward that follows (one exp per logit) */
float zt_model_forward_train(zt_model *m, const int32_t *tokens, const int32_t *targets, int B, int T,
                             float dloss_scale);
/* device rows for n micro-batches' per-position losses (n * max B*T floats of backend memory; again: a larger n
   replaces them) */
void zt_model_loss_rows_alloc(zt_model *m, int n);
/* a step's micro-batches' inputs into device rows 0..n-1 before any of its work: tokens and targets hold n rows of
   B*T (host memory); two copies (an encoder: a third, the ids made from the tokens). Then zt_model_forward_train_row
   with tokens NULL reads them there, so nothing reaches the device inside the step. micro (may be NULL): the rows'
   global micro-batch indices, one more copy, from which LoRA dropout's masks are made on the device. dscale (may be
   NULL): each row's d(loss) scale, exactly the dloss_scale its zt_model_forward_train_row and zt_model_backward
   will be given; their softmax_xent then reads dscale / (B*T) from the device, so a step whose scale changes (a
   loss mask's count) still repeats its slot calls (a step graph) */
void zt_model_rows_upload(zt_model *m, int n, int B, int T, const int32_t *tokens, const int32_t *targets,
                          const uint64_t *micro, const float *dscale);
/* the training forward of a step's micro-batch `row` that does not wait for the device (no host sync): as
   zt_model_forward_train, but its per-position losses stay in the model's device row `row` (0 <= row <
   loss_nrows) until zt_model_loss_rows_read, and an encoder's predictions (the MLM accuracy) in its argmax row
   until zt_model_rows_accuracy; tokens NULL (and targets NULL): the row's uploaded inputs. With tokens given an
   encoder's forward reads its predictions back and runs as zt_model_forward_train, its mean loss kept for the read */
void zt_model_forward_train_row(zt_model *m, const int32_t *tokens, const int32_t *targets, int B, int T,
                                float dloss_scale, int row);
/* the mean losses of rows 0..n-1, each exactly as zt_model_forward_train returns it (the per-position losses summed
   in order in double, divided by B*T), into out: one copy from the device (it waits for the work issued so far) */
void zt_model_loss_rows_read(zt_model *m, int n, float *out);
/* encoders: over rows 0..n-1 (forwards of uploaded rows), the positions whose target (targets: the n rows of B*T
   uploaded, host memory) is >= 0 added to acc[0], those whose logits' argmax is the target to acc[1]; one copy from
   the device */
void zt_model_rows_accuracy(zt_model *m, int n, int B, int T, const int32_t *targets, long long acc[2]);
/* backward of the last forward with targets; writes m->grads (overwritten, not accumulated).
   dloss_scale multiplies d(mean loss), the returned loss: 1/K for K accumulated micro-batches; each position's
   gradient is scaled by dloss_scale / (B*T), and an ignored position has none. */
void zt_model_backward(zt_model *m, float dloss_scale);

/* the first n logits of the last forward, as float32, into host memory (waits for the device) */
void zt_model_logits_to_host(zt_model *m, float *out, size_t n);

/* the model's parameters as a checkpoint view without optimizer state: loads read the whole
   buffer on every rank; a writer sets lo/hi to its part */
zt_ckpt_view zt_model_ckpt_view(zt_model *m);

/* model shape from a config */
void zt_model_shape_from_config(const zt_config *c, zt_model_shape *s);
/* model FLOPs per token for forward + backward (docs/performance.md): 6 * (non-embedding params)
   + 6 * C * Vp (tied LM head) + 6 * L * C * T (causal attention, the half that is computed); an encoder:
   + 6 C^2 (the MLM head's dense) and 12 L C T (bidirectional attention, the whole T x T) */
double zt_model_flops_per_token(const zt_model_shape *s, int T);
/* a training step's FLOPs per token: zt_model_flops_per_token, or with LoRA (lora_params adapter parameters) the frozen
   base's forward and input gradients only (4 of the 6 per weight) plus the adapters' 6 each */
double zt_model_train_flops_per_token(const zt_model_shape *s, int T, size_t lora_params);
/* the FLOPs per token train.recompute = "layer" adds: every layer's forward again (2 per layer weight and the
   attention's 2 L C T), not the LM head. Not model FLOPs: MFU leaves them out */
double zt_model_recompute_flops_per_token(const zt_model_shape *s, int T);
/* rotary positions: cs(block_size, hs/2, 2) = (cos, sin) of position t times frequency i, theta^(-2i / hs) (with
   Llama 3's scaling when the shape has it), computed in double and rounded once */
void zt_model_rope_table(const zt_model_shape *s, float *cs);

#endif
