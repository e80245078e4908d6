/* model_internal.h — what the model's files (model.h lists them) share with each other; nothing else includes
 * it. Layer l's slot in a per-layer activation buffer, the attention state, the 2-byte stash, the parameter
 * window and a layer's linear maps. */
#ifndef ZT_MODEL_INTERNAL_H
#define ZT_MODEL_INTERNAL_H

#include "core/model/model.h"

/* ---- activation storage (model_acts.c) */
/* one allocation for all activations of a micro-batch (B, T), carved into 64-byte aligned slots */
void zt_model_acts_init(zt_model *m, zt_backend *be, const zt_model_shape *s, int B, int T);
/* whether the fused attention applies: asked for, and the head size is one the fused slots take */
int zt_model_att_fused_ok(const zt_model_shape *s, const zt_model_opts *o);
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
/* act16: layer l's internals from the fp32 working copy into its stash words (pack = 1), or back */
void zt_model_stash_layer(zt_model *m, int l, int pack);

/* ---- parameter storage (model_params.c): with opt.params16, make the window hold what the next ops read
   (no-op when it does, or without params16) */
void zt_model_need_wte(zt_model *m);
/* layer l's weights in the window; next >= 0: the layer the pass reaches after it (sharded: gathered ahead) */
void zt_model_need_layer(zt_model *m, int l, int next);
void zt_model_need_fixed(zt_model *m);

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

#endif
