/* lora.h — LoRA adapters (Hu et al. 2021, as Hugging Face PEFT implements them) on a block's linear layers,
 * over a frozen base.
 *
 * For a targeted linear y = x W + b (W (in, out), Conv1D layout) the adapted layer is
 *     y = x W + b + s * (dropout(x) A^T) B^T,   A (r, in), B (out, r),
 * s = alpha / r, or alpha / sqrt(r) with rank-stabilised scaling (lora.rslora). A starts as PEFT's
 * kaiming_uniform(a = sqrt(5)) = U(-1/sqrt(in), 1/sqrt(in)), B as zero: step 0 is the base model.
 *
 * Sites: an adapter sits on one PEFT module, which is the output columns [col0, col0 + cols) of one of the block's
 * four fused linears (zt_lora_site). GPT-2's four linears are a site each (attn.c_attn, attn.c_proj, mlp.c_fc,
 * mlp.c_proj, the whole output); the Llama family's seven are PEFT's q_proj, k_proj and v_proj (the query, key
 * and value columns of the fused projection), o_proj, gate_proj and up_proj (the two halves of the fused first MLP
 * linear) and down_proj: each with its own A (r, in) and B (cols, r), as PEFT trains them.
 *
 * The adapters are a second flat buffer with a table of their own (names h.<l>.<module>.lora_A / lora_B, per
 * layer the targeted sites in that order, A then B; shapes are PEFT's lora_A.weight / lora_B.weight). The
 * model's trainable set (zt_model_ttable) is that table: ZeRO reduces, shards and updates only it, and
 * checkpoints hold only it, with the base named by lora.base and fingerprinted (lora_base_hash).
 * The base has no gradient buffer and no optimizer state.
 *
 * QLoRA (lora.quant = nf4 | nf4_dq | int8): the base's four linear weights per layer are stored in that
 * format (core/lora/quant.h) and dequantised by the backend into one scratch weight right before each use,
 * forward and backward; the other base tensors stay fp32. The fingerprint is the fp32 base's.
 *
 * Dropout masks are a hash of (train.seed, global micro-batch, layer, target, element): the same on any
 * rank count. Uses: iface, io/config, util. */
#ifndef ZT_LORA_H
#define ZT_LORA_H

#include <stddef.h>
#include <stdint.h>

#include "iface/backend.h"
#include "iface/param_table.h"
#include "io/config.h"

/* lora.targets bits (io/config.h zt_config_lora_targets): GPT-2's linears, then the Llama family's PEFT modules.
   ZT_LORA_N_TARGETS is the number of fused linears of a block (0 qkv, 1 attention projection, 2 fc, 3 fc projection) */
enum { ZT_LORA_T_QKV = 1, ZT_LORA_T_PROJ = 2, ZT_LORA_T_FC = 4, ZT_LORA_T_FCPROJ = 8, ZT_LORA_N_TARGETS = 4 };
enum { ZT_LORA_T_Q = 16, ZT_LORA_T_K = 32, ZT_LORA_T_V = 64, ZT_LORA_T_O = 128, ZT_LORA_T_GATE = 256, ZT_LORA_T_UP = 512,
       ZT_LORA_T_DOWN = 1024 };
#define ZT_LORA_MAX_SITES 7

/* one PEFT module: the output columns [col0, col0 + cols) of fused linear k */
typedef struct zt_lora_site {
    int k, col0, cols;
    unsigned bit;            /* its lora.targets bit */
    const char *module;      /* its name below the layer: "attn.c_attn", "self_attn.q_proj", "mlp.down_proj", ... */
} zt_lora_site;

/* the sites of a shape's family, in table order; returns their number (GPT-2 4, the Llama family 7) */
int zt_lora_sites(const zt_model_shape *s, zt_lora_site sites[ZT_LORA_MAX_SITES]);
/* the lora.targets bits a shape's family has */
unsigned zt_lora_family_bits(const zt_model_shape *s);
/* the family's target names, for messages ("qkv, proj, fc, fcproj" or "q_proj, ..., down_proj") */
const char *zt_lora_family_names(const zt_model_shape *s);

typedef struct zt_lora_cfg {
    int rank;
    float alpha, dropout;
    int rslora;
    unsigned targets;       /* ZT_LORA_T_* mask */
    int quant;              /* QLoRA: the base's linear weights as zt_quant_fmt (core/lora/quant.h); -1: fp32 */
} zt_lora_cfg;

/* the adapter state a LoRA model carries (zt_model.lora) */
typedef struct zt_lora_model {
    zt_lora_cfg cfg;
    float scale;             /* s */
    zt_param_table table;    /* the adapters */
    float *params;           /* device, `padded` elements */
    size_t padded;
    zt_lora_site sites[ZT_LORA_MAX_SITES];
    int n_sites;
    float *u;                /* (L, n_sites, B*T, r): dropout(x) A^T of each adapted site, kept for dB */
    float *du;               /* (B*T, r) */
    float *xd;               /* (B*T, max in): dropout(x), then the adapter's part of dx */
    float *sink;             /* (2C): LayerNorm weight/bias gradients of the frozen base, discarded */
    uint64_t seed;           /* dropout: train.seed ... */
    long micro;              /* ... and the global micro-batch index of the next forward (set by the trainer) */
    int training;            /* the last forward was a training one (dropout applies) */
    int row;                 /* the last forward's step row (zt_model_forward_train_row of a row uploaded with its
                                micro-batch index: the masks' index is read on the device, zt_model.row_micro);
                                -1: micro, by value */
} zt_lora_model;

void zt_lora_cfg_from_config(const zt_config *c, zt_lora_cfg *lc);
float zt_lora_scale(const zt_lora_cfg *lc);
/* the base weight of fused linear k (0 qkv, 1 proj, 2 fc, 3 fcproj): its ZT_* layer tensor, in and out features */
int zt_lora_target_tensor(int k);
void zt_lora_target_dims(const zt_model_shape *s, int k, int *in, int *out);
/* the largest in * out of the fused linears (QLoRA's dequantised scratch weight) */
size_t zt_lora_max_weight(const zt_model_shape *s);
void zt_lora_table_build(zt_param_table *pt, const zt_model_shape *s, const zt_lora_cfg *lc);
/* table index of layer l's site-j A (its B is the next), or -1 when site j is not targeted */
int zt_lora_index(const zt_lora_cfg *lc, const zt_model_shape *s, int l, int j);
/* the adapters' parameters (the table's total, without building it) */
size_t zt_lora_param_count(const zt_model_shape *s, const zt_lora_cfg *lc);
/* adapter tensors per layer */
int zt_lora_per_layer(const zt_lora_cfg *lc, const zt_model_shape *s);
/* the table the optimizer trains for a config: GPT-2's, or the adapters' (lora.enabled) */
void zt_trainable_table_build(const zt_config *c, const zt_model_shape *s, zt_param_table *pt);

/* initial adapters on the host (table.total floats): A uniform as PEFT, B zero, seeded per tensor */
void zt_lora_init_host(const zt_param_table *pt, uint64_t seed, float *host);
/* merged weights on the host: each targeted W (in, out) of the GPT-2 flat buffer `base` += s (B A)^T */
void zt_lora_merge_host(const zt_param_table *bt, float *base, const zt_model_shape *s, const zt_lora_cfg *lc,
                        const float *adapters);
/* activation bytes the adapters add for a micro-batch (B, T) */
size_t zt_lora_act_bytes(const zt_model_shape *s, const zt_lora_cfg *lc, int B, int T);
/* QLoRA: bytes of the frozen base on the device: the fp32 tensors that stay (embeddings, LayerNorms, biases)
   in *fp32_elems, the quantised linear weights in *quant_bytes over *quant_params values; total returned
   (without quantisation: every tensor in fp32) */
size_t zt_lora_base_bytes(const zt_model_shape *s, int quant, size_t *fp32_elems, size_t *quant_bytes,
                          size_t *quant_params);
/* QLoRA: in place on the host, each linear weight of a GPT-2 flat buffer replaced by its quantise-dequantise
   (what training computed with) */
void zt_lora_quant_roundtrip_host(const zt_param_table *bt, float *base, const zt_model_shape *s, int quant);
/* fingerprint of a base: FNV-1a over the float bits of n elements of backend memory; _update continues one
   (start from ZT_LORA_HASH0) over the next elements of the flat buffer */
#define ZT_LORA_HASH0 0xcbf29ce484222325ull
uint64_t zt_lora_hash(zt_backend *be, const float *dev, size_t n);
void zt_lora_hash_update(uint64_t *h, zt_backend *be, const float *dev, size_t n);

#endif
