/* param_table.h — the flat-buffer layout every layer speaks: the model's parameters by name, shape and
 * offset in ONE flat buffer (docs/design.md section 3), the index of a layer's tensor, and the one shard
 * formula (padding to N x 4096 elements; rank r owns [r*S, (r+1)*S)). The model computes over it,
 * ZeRO shards it, checkpoints and safetensors name their tensors by it.
 *
 * The model is described by data (zt_model_shape): GPT-2 (LayerNorm with biases, learned positions, GELU MLP,
 * tied LM head) and the Llama family (RMSNorm, rotary positions, SwiGLU, grouped-query attention, biases only
 * where the family has them (Qwen2: q, k, v), a separate LM head) are two descriptions of one block.
 * Order in the flat buffer (GPT-2's Hugging Face names; linear weights are (in, out) as in GPT-2's Conv1D;
 * a tensor the description lacks is not in the table):
 *   wte.weight (Vp, C), wpe.weight (maxT, C) [learned positions],
 *   for l in 0..L-1: h.l.ln_1.weight (C), h.l.ln_1.bias (C) [LayerNorm],
 *     h.l.attn.c_attn.weight (C, Q) with Q = (NH + 2 NKV) hs: the query, key and value heads side by side,
 *     h.l.attn.c_attn.bias (Q) [bias], h.l.attn.c_proj.weight (C, C), h.l.attn.c_proj.bias (C) [bias],
 *     h.l.ln_2.weight (C), h.l.ln_2.bias (C) [LayerNorm], h.l.mlp.c_fc.weight (C, F) with F = 4C (GELU) or
 *     2 I (SwiGLU: gate then up), h.l.mlp.c_fc.bias (F) [bias], h.l.mlp.c_proj.weight (I, C) (I = 4C for
 *     GELU), h.l.mlp.c_proj.bias (C) [bias],
 *   ln_f.weight (C), ln_f.bias (C) [LayerNorm], lm_head.weight (Vp, C) [untied].
 * An encoder (BERT, RoBERTa: zt_model_shape.encoder) has wte, wpe (block_size + pos_offset rows), tte.weight
 * (type_vocab, C) [type_vocab > 0], emb_ln.weight, emb_ln.bias (C); the layers as above, with ln_1 the LayerNorm
 * after the attention's residual sum and ln_2 the one after the MLP's (post-LN); then the MLM head:
 * head.ln.weight, head.ln.bias (C) in ln_f's place, head.dense.weight (C, C), head.dense.bias (C), head.bias (Vp).
 * A tied LM head is wte. Rows V..Vp-1 of wte (and lm_head) are padding: zero at init, they never win a
 * sample and never enter the loss, so their gradient stays zero.
 *
 * Uses: util only. */
#ifndef ZT_PARAM_TABLE_H
#define ZT_PARAM_TABLE_H

#include <stddef.h>

/* The table is a fixed array (it lives inside zt_model, on the stack of the commands): the config's
   range of model.n_layer is [1, ZT_MAX_LAYERS], so a documented value never overflows it. */
#define ZT_MAX_LAYERS 128
/* wte, wpe, ZT_PER_LAYER (12) per layer, ln_f x 2, lm_head; an encoder: wte, wpe, tte, emb_ln x 2, the layers,
   head.ln x 2, head.dense x 2, head.bias */
#define ZT_MAX_TENSORS (10 + 12 * ZT_MAX_LAYERS)
#define ZT_SHARD_UNIT 4096   /* shards are whole multiples of this (the grad-norm chunk) */

typedef enum zt_norm_kind { ZT_NORM_LAYER = 0, ZT_NORM_RMS = 1 } zt_norm_kind;
typedef enum zt_pos_kind { ZT_POS_LEARNED = 0, ZT_POS_ROPE = 1 } zt_pos_kind;
/* GELU: the tanh approximation (GPT-2); GELU_ERF: the exact one (BERT, RoBERTa) */
typedef enum zt_mlp_kind { ZT_MLP_GELU = 0, ZT_MLP_SWIGLU = 1, ZT_MLP_GELU_ERF = 2 } zt_mlp_kind;
/* which linear layers carry a bias (zt_model_shape.bias) */
enum { ZT_BIAS_QKV = 1, ZT_BIAS_PROJ = 2, ZT_BIAS_FC = 4, ZT_BIAS_FCPROJ = 8, ZT_BIAS_ALL = 15 };

typedef struct zt_model_shape {
    int n_layer, n_head, n_embd;
    int vocab_size;     /* V: real tokens */
    int padded_vocab;   /* Vp >= V */
    int block_size;     /* maxT */
    /* the block's description: zt_model_shape_gpt2 sets GPT-2's, core/model/model.h's zt_model_shape_from_config the
       config's (model.family and the keys that override it) */
    int n_kv_head;      /* key/value heads: n_head (multi-head), fewer (grouped-query), 1 (multi-query) */
    int ffn;            /* the MLP's hidden size: 4C (GPT-2), intermediate_size (SwiGLU) */
    int norm, pos, mlp; /* zt_norm_kind, zt_pos_kind, zt_mlp_kind */
    unsigned bias;      /* ZT_BIAS_*: the linear layers with a bias (LayerNorm always has one, RMSNorm never) */
    int tied;           /* the LM head is wte */
    float norm_eps;     /* the normalisation's epsilon: GPT-2 1e-5, Llama 1e-5, Qwen2 1e-6, BERT 1e-12 */
    double rope_theta;  /* rotary base */
    /* Llama 3's rotary frequency scaling (rope_scaling.rope_type "llama3"): factor 0 = none */
    double rope_factor, rope_low_freq, rope_high_freq;
    int rope_orig_max;  /* original_max_position_embeddings */
    /* encoders (BERT, RoBERTa), 0 in the decoders: bidirectional attention with a key padding mask, post-LN blocks
       (x = LN1(x + attention(x)); x = LN2(x + mlp(x))), a LayerNorm on the embeddings, and the MLM head
       (dense + GELU + LayerNorm, then the tied decoder with its own bias) in place of ln_f and the LM head */
    int encoder;
    int type_vocab;     /* token-type embedding rows (0: none) */
    int pos_offset;     /* position t uses wpe row t + pos_offset (wpe has block_size + pos_offset rows) */
    int pad_id;         /* the padding token: never attended to (-1: none) */
    int sep_id;         /* a token's type is the number of sep_id tokens before it (-1: every token type 0) */
} zt_model_shape;

/* GPT-2's description of the block (the shape's sizes are left as they are) */
void zt_model_shape_gpt2(zt_model_shape *s);
/* the width of the fused query/key/value projection's output, (NH + 2 NKV) * hs, and of the MLP's first linear */
static inline int zt_shape_qkv(const zt_model_shape *s) {
    return (s->n_head + 2 * s->n_kv_head) * (s->n_embd / s->n_head);
}
static inline int zt_shape_fc(const zt_model_shape *s) { return s->mlp == ZT_MLP_SWIGLU ? 2 * s->ffn : s->ffn; }
/* rows of wpe: block_size, plus an encoder's position offset */
static inline int zt_shape_pos_rows(const zt_model_shape *s) { return s->block_size + s->pos_offset; }

typedef struct zt_tensor_info {
    char name[48];
    size_t offset;      /* elements into the flat buffer */
    size_t numel;
    int ndim;
    int shape[2];
    int decay;          /* 1: 2-D weight, gets weight decay */
    short layer, kind;  /* a layer's tensor: its layer and zt_layer_tensor; -1 -1 outside the layers */
} zt_tensor_info;

typedef struct zt_param_table {
    int n;
    size_t total;       /* elements */
    int lora_per_layer; /* 0: the model's table; > 0: a LoRA adapter table (core/lora/lora.h), this many tensors per layer */
    int n_layer;        /* the model's table: its layers */
    int wpe, lm_head;   /* indices of wpe and lm_head, -1 when the description has none */
    /* encoders, -1 otherwise: the token-type embeddings, the embedding LayerNorm's weight (its bias follows), the
       MLM head's dense weight (its bias follows) and the decoder's bias (Vp). The head's LayerNorm is in ln_f's
       place (row n_layer of idx) */
    int tte, emb_ln, head_dense, head_bias;
    /* index of layer l's tensor k (zt_layer_tensor), -1 when absent; row n_layer: ln_f's weight (k 0) and bias */
    short idx[ZT_MAX_LAYERS + 1][12];
    zt_tensor_info t[ZT_MAX_TENSORS];
} zt_param_table;

/* a layer's tensors, in flat order */
typedef enum zt_layer_tensor {
    ZT_LN1W, ZT_LN1B, ZT_QKVW, ZT_QKVB, ZT_ATTPW, ZT_ATTPB, ZT_LN2W, ZT_LN2B,
    ZT_FCW, ZT_FCB, ZT_FCPW, ZT_FCPB, ZT_PER_LAYER
} zt_layer_tensor;

_Static_assert(ZT_MAX_TENSORS == 10 + ZT_PER_LAYER * ZT_MAX_LAYERS, "ZT_MAX_TENSORS must hold ZT_MAX_LAYERS layers");

/* table index of wte (always first) */
enum { ZT_P_WTE = 0 };

/* table index of layer l's tensor k, -1 when the description has none; l == n_layer gives ln_f (k = 0: weight,
   1: bias) */
static inline int zt_param_idx(const zt_param_table *pt, int l, int k) { return pt->idx[l][k]; }
/* the first tensor of layer l (ln_1's weight); l == n_layer: ln_f's weight */
static inline int zt_param_layer_first(const zt_param_table *pt, int l) { return pt->idx[l][0]; }
/* the last tensor of layer l (the one before the next layer's first) */
static inline int zt_param_layer_last(const zt_param_table *pt, int l) { return pt->idx[l + 1][0] - 1; }
/* GPT-2's layout (wte, wpe, layers, ln_f weight and bias, the LM head tied): what the 2-byte parameter and
   gradient windows of core/model/model_params.c assume */
int zt_param_gpt2_layout(const zt_param_table *pt);
/* whether a shape's table has GPT-2's layout (zt_param_gpt2_layout) */
static inline int zt_shape_gpt2_layout(const zt_model_shape *s) {
    return s->pos == ZT_POS_LEARNED && s->tied && s->norm == ZT_NORM_LAYER && s->bias == ZT_BIAS_ALL && !s->encoder;
}

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
