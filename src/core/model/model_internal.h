/* model_internal.h — what the model's files (model.h lists them) share with each other; nothing else includes
 * it. Layer l's slot in a per-layer activation buffer, the attention state, the 2-byte stash, the parameter
 * window and a layer's linear maps. */
#ifndef ZT_MODEL_INTERNAL_H
#define ZT_MODEL_INTERNAL_H

#include "core/model/model.h"

/* ---- the forward and backward passes' shorthand (model.c, model_encoder.c; they name m, be and f) */
/* tensor i's data and gradient; NULL for a tensor the description lacks (index -1) */
#define P(i) ((i) >= 0 ? m->w[i] : NULL)
#define G(i) ((i) >= 0 ? m->gptr[i] : NULL)
/* layer l's tensor k (l == n_layer: ln_f) */
#define T_(l, k) zt_param_idx(&m->table, (l), (k))
#define BEFORE(a, b) do { if (m->hooks.before) m->hooks.before(m->hooks.ctx, (a), (b)); } while (0)
#define AFTER(a) do { if (m->hooks.after) m->hooks.after(m->hooks.ctx, (a)); } while (0)
/* bf16/fp16 storage: what an op just wrote, rounded to the working precision (docs/precision.md) */
/* softmax_xent's scale for a mean loss over N positions with d(loss) scale dloss_scale: what the forward and backward
   pass and what zt_model_rows_upload puts on the device for them, the same float */
static inline float zt_model_xent_scale(float dloss_scale, int N) { return dloss_scale / (float)N; }
#define RND(p, n) do { if (m->prec) f->round_to(be, (p), (n), m->prec); } while (0)

/* ---- activation storage (model_acts.c) */
/* one allocation for all activations of a micro-batch (B, T), carved into 64-byte aligned slots */
void zt_model_acts_init(zt_model *m, zt_backend *be, const zt_model_shape *s, int B, int T);
/* whether the fused attention applies: asked for, and the head size is one the fused slots take */
int zt_model_att_fused_ok(const zt_model_shape *s, const zt_model_opts *o);
/* the rows of one chunk of the LM head for N rows (train.head_chunks; N when unchunked) */
int zt_model_head_rows(const zt_model_shape *s, const zt_model_opts *o, int N);
size_t zt_model_round_up64(size_t bytes);
/* layer l's slot in the per-layer buffers: its own, or the one shared copy when recomputed or 2-byte stashed */
size_t zt_model_lay(const zt_model *m, int l);
/* its LayerNorm statistics (fp32, kept per layer unless the whole layer is recomputed) */
size_t zt_model_lay_stats(const zt_model *m, int l);
/* its GELU output: per layer only without recomputation and without the stash */
size_t zt_model_lay_gelu(const zt_model *m, int l);
/* layer l's attention state: its probabilities (B, NH, T, T) in the layer's slot, or (att_fused) its softmax
   statistics (B, NH, T, 2), kept per layer like the LayerNorm statistics */
float *zt_model_att_state(const zt_model *m, int l);
/* layer l's activations: the slot pointers of its stored tensors. An encoder's post-LN layer (model_encoder.c) keeps
   in res2 the attention's residual sum and in ln1 its LayerNorm, the block's first output; in ln2 the MLP's
   residual sum, whose LayerNorm is res3, the layer's output */
typedef struct zt_layer_acts {
    const float *res;  /* the layer's input */
    float *ln1, *qkv, *atty, *att, *res2, *ln2, *fch, *fchg, *res3;
    float *ln1_mean, *ln1_rstd, *ln2_mean, *ln2_rstd;
} zt_layer_acts;
zt_layer_acts zt_model_layer_slots(zt_model *m, int l);
/* act16: layer l's internals from the fp32 working copy into its stash words (pack = 1), or back */
void zt_model_stash_layer(zt_model *m, int l, int pack);
/* act16, before a training forward of layer l: tells the backend where its internals will be packed
   (pack16_ahead), so the ops that write them may write the words there too */
void zt_model_stash_ahead(zt_model *m, int l);

/* ---- parameter storage (model_params.c): with opt.params16, make the window hold what the next ops read
   (no-op when it does, or without params16) */
void zt_model_need_wte(zt_model *m);
/* layer l's weights in the window; next >= 0: the layer the pass reaches after it (sharded: gathered ahead) */
void zt_model_need_layer(zt_model *m, int l, int next);
void zt_model_need_fixed(zt_model *m);

/* bf16/fp16 runs: the gradients of tensors first..last of table pt (the model's, or LoRA's) rounded to the working
   precision, one round_to per run of tensors whose gradients are adjacent in memory (the same bits as one per
   tensor: the rounding is elementwise) */
void zt_model_round_grads(zt_model *m, const zt_param_table *pt, int first, int last);

/* ---- a layer's linear maps (model_linear.c); k is the target (0 qkv, 1 attention projection, 2 fc, 3 fc
   projection) */
/* layer l's target-k weight (in, out): its fp32 tensor, or (QLoRA) its dequantisation into m->wdq */
const float *zt_model_base_w(zt_model *m, int l, int k);
/* y(N, out) += s (dropout(x) A^T) B^T for layer l's target k, when it is adapted */
void zt_model_lora_fwd(zt_model *m, int l, int k, const float *x, float *y);
/* backward of layer l's linear k (weight tensor wt, bias bt; x (N, in) its input, dy (N, out)): dx is
   overwritten; the trained weight's (or the adapter's) gradients written */
void zt_model_linear_bwd(zt_model *m, int l, int k, float *dx, const float *dy, const float *x, int wt, int bt);
/* layer l's first and last trained tensors (their gradients): the layer's, or its adapters' */
void zt_model_layer_tensors(const zt_model *m, int l, int *first, int *last);

/* ---- the encoders (model_encoder.c): forward (after the tokens and targets are on the device) and backward */
/* tokens NULL: a step's row `row` (its ids, tokens and targets uploaded; its argmax and losses left in the rows) */
float zt_model_encoder_forward(zt_model *m, const int32_t *tokens, const int32_t *targets, int B, int T,
                               float dscale, int row);
/* the ids of n rows of B x T tokens (host memory) into row_enc (zt_model_rows_upload) */
void zt_model_encoder_rows_upload(zt_model *m, int n, int B, int T, const int32_t *tokens);
void zt_model_encoder_backward(zt_model *m, float dloss_scale);

#endif
