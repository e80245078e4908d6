/* param_table.h — the flat-buffer layout every layer speaks: GPT-2's parameters by name, shape and
 * offset in ONE flat buffer (DESIGN section 3), the index of a layer's tensor, and the one shard
 * formula (padding to N x 4096 elements; rank r owns [r*S, (r+1)*S)). The model computes over it,
 * ZeRO shards it, checkpoints and safetensors name their tensors by it.
 *
 * Order in the flat buffer (Hugging Face GPT-2 names and layouts; linear weights are (in, out) as in
 * GPT-2's Conv1D):
 *   wte.weight (Vp, C), wpe.weight (maxT, C),
 *   for l in 0..L-1: h.l.ln_1.weight (C), h.l.ln_1.bias (C), h.l.attn.c_attn.weight (C, 3C),
 *     h.l.attn.c_attn.bias (3C), h.l.attn.c_proj.weight (C, C), h.l.attn.c_proj.bias (C),
 *     h.l.ln_2.weight (C), h.l.ln_2.bias (C), h.l.mlp.c_fc.weight (C, 4C), h.l.mlp.c_fc.bias (4C),
 *     h.l.mlp.c_proj.weight (4C, C), h.l.mlp.c_proj.bias (C),
 *   ln_f.weight (C), ln_f.bias (C).
 * The LM head is tied to wte. Rows V..Vp-1 of wte are padding: zero at init, they never win a
 * sample and never enter the loss, so their gradient stays zero.
 *
 * Uses: util only. */
#ifndef ZT_PARAM_TABLE_H
#define ZT_PARAM_TABLE_H

#include <stddef.h>

/* The table is a fixed array (it lives inside zt_model, on the stack of the commands): the config's
   range of model.n_layer is [1, ZT_MAX_LAYERS], so a documented value never overflows it. */
#define ZT_MAX_LAYERS 128
#define ZT_MAX_TENSORS (4 + 12 * ZT_MAX_LAYERS)   /* wte, wpe, ZT_PER_LAYER (12) per layer, ln_f x 2 */
#define ZT_SHARD_UNIT 4096   /* shards are whole multiples of this (the grad-norm chunk) */

typedef struct zt_model_shape {
    int n_layer, n_head, n_embd;
    int vocab_size;     /* V: real tokens */
    int padded_vocab;   /* Vp >= V */
    int block_size;     /* maxT */
} zt_model_shape;

typedef struct zt_tensor_info {
    char name[48];
    size_t offset;      /* elements into the flat buffer */
    size_t numel;
    int ndim;
    int shape[2];
    int decay;          /* 1: 2-D weight, gets weight decay */
} zt_tensor_info;

typedef struct zt_param_table {
    int n;
    size_t total;       /* elements */
    int lora_per_layer; /* 0: GPT-2's table; > 0: a LoRA adapter table (core/lora.h), this many tensors per layer */
    zt_tensor_info t[ZT_MAX_TENSORS];
} zt_param_table;

/* a layer's tensors, in flat order */
typedef enum zt_layer_tensor {
    ZT_LN1W, ZT_LN1B, ZT_QKVW, ZT_QKVB, ZT_ATTPW, ZT_ATTPB, ZT_LN2W, ZT_LN2B,
    ZT_FCW, ZT_FCB, ZT_FCPW, ZT_FCPB, ZT_PER_LAYER
} zt_layer_tensor;

_Static_assert(ZT_MAX_TENSORS == 4 + ZT_PER_LAYER * ZT_MAX_LAYERS, "ZT_MAX_TENSORS must hold ZT_MAX_LAYERS layers");

/* table indices of the tensors outside the layers */
enum { ZT_P_WTE = 0, ZT_P_WPE = 1 };

/* table index of layer l's tensor k; l == n_layer gives ln_f (k = 0: weight, 1: bias) */
static inline int zt_param_layer(int l, int k) { return 2 + l * ZT_PER_LAYER + k; }
/* the number of layers of a table */
static inline int zt_param_n_layers(const zt_param_table *pt) { return (pt->n - 4) / ZT_PER_LAYER; }

void zt_param_table_build(zt_param_table *pt, const zt_model_shape *s);
/* index of tensor `name`, or -1 */
int zt_param_find(const zt_param_table *pt, const char *name);

/* The shard formula: the flat buffer of `total` elements padded to a multiple of N x ZT_SHARD_UNIT;
   rank r owns [r * shard, (r + 1) * shard). */
typedef struct zt_shard_layout {
    size_t total, padded, shard;
} zt_shard_layout;
zt_shard_layout zt_shard_layout_of(size_t total, int N);
static inline size_t zt_shard_lo(const zt_shard_layout *l, int rank) { return (size_t)rank * l->shard; }

#endif
