/* config.h — the resolved configuration of a run: ONE schema table (config.c) drives defaults,
 * libconfig parsing, --set overrides, validation, unknown-key errors and `ztrain config`.
 *
 * Every function that can fail on user input returns 0 on success and, on error, a non-zero
 * value with a one-line message in err (naming file:line / key / value and what is expected).
 * The caller (same on every rank) prints it from rank 0 and exits with code 2.
 */
#ifndef ZT_CONFIG_H
#define ZT_CONFIG_H

#include <stdio.h>
#include <stdint.h>

#include "iface/param_table.h"

#define ZT_PATH_MAX 512
#define ZT_NAME_MAX 64
#define ZT_ERR_MAX 1024

typedef struct zt_config {
    char device[ZT_NAME_MAX];       /* "cpu" | "cuda" | "devsim" */
    char comm[ZT_NAME_MAX];         /* "auto" | "mpi" | "nccl" | "devsim" */
    char precision[ZT_NAME_MAX];    /* "fp32" | "bf16" | "fp16" (zt_config_prec: ZT_PREC_*) */
    struct {                        /* fp16's dynamic loss scaling (the names of torch.cuda.amp.GradScaler) */
        double init_scale;          /* the first loss scale */
        double growth_factor;       /* scale *= this after growth_interval finite steps in a row */
        double backoff_factor;      /* scale *= this when a step's gradients overflow (the step is skipped) */
        long growth_interval;
    } fp16;
    struct {
        int n_layer, n_head, n_embd;
        int vocab_size;             /* real tokens */
        int padded_vocab;           /* 0 = auto: vocab_size rounded up to a multiple of 128 */
        int block_size;             /* max sequence length (position embeddings) */
        double init_std;
        /* the block's description (core/model/model.h zt_model_shape_from_config): the family's, or these overrides */
        char family[ZT_NAME_MAX];   /* gpt2 | llama | mistral | qwen2 | bert | roberta */
        int n_kv_head;              /* key/value heads; 0 = n_head */
        int intermediate_size;      /* the MLP's hidden size; 0 = 4 * n_embd (GELU) */
        char norm[ZT_NAME_MAX];     /* auto | layernorm | rmsnorm */
        char position[ZT_NAME_MAX]; /* auto | learned | rope */
        char mlp[ZT_NAME_MAX];      /* auto | gelu | swiglu */
        char bias[ZT_NAME_MAX];     /* auto | none | all | a comma list of qkv, proj, fc, fcproj */
        char tie_embeddings[ZT_NAME_MAX]; /* auto | true | false */
        double norm_eps;            /* 0 = the family's */
        double rope_theta;          /* 0 = the family's */
        char rope_scaling[ZT_NAME_MAX]; /* none | llama3 */
        double rope_factor, rope_low_freq_factor, rope_high_freq_factor;
        int rope_original_max_position;
        int type_vocab_size, pad_id, sep_id, position_offset; /* encoders; -1 = the family's */
    } model;
    struct {
        double prob, mask_frac, random_frac; /* masked LM: selected tokens, and how they are replaced */
        int mask_id, cls_id, sep_id;
    } mlm;
    struct {
        int micro_batch;            /* sequences per micro-batch per rank; 0 = auto until resolved */
        int global_batch;           /* sequences per optimizer step, all ranks */
        int seq_len;
        long steps;
        double lr, min_lr;
        long warmup_steps;
        char schedule[ZT_NAME_MAX]; /* "cosine" | "linear" | "constant" */
        double weight_decay, beta1, beta2, eps, grad_clip;  /* grad_clip 0 = off */
        long seed;
        int threads;                /* 0 = auto: cores on the node / local ranks */
        char recompute[ZT_NAME_MAX]; /* none | gelu | layer (zt_model_opts_from_config) */
        char act_storage[ZT_NAME_MAX]; /* auto | fp32: 2-byte activations in bf16/fp16 (zt_model_opts.act16) */
        char param_storage[ZT_NAME_MAX]; /* auto | precision | fp32: 2-byte working parameters (zt_model_opts.params16) */
        char attention[ZT_NAME_MAX];   /* auto | materialized: fused attention on cuda (zt_model_opts.att_fused) */
        int cuda_graph;             /* 1: a step replayed as one CUDA graph where it can be (core/optim/step_graph.c) */
        int head_chunks;            /* the LM head in this many chunks of rows (zt_model_opts.head_chunks) */
        char mem_limit[ZT_NAME_MAX]; /* per rank for micro_batch auto; "" = available / local ranks */
        int log_every;
    } train;
    struct {
        char train[ZT_PATH_MAX];    /* shard file, glob of shard files, or "W1 PATH1 W2 PATH2 ..." (io/data.h) */
        char val[ZT_PATH_MAX];      /* "" = no validation */
        char tokenizer[ZT_PATH_MAX];/* "" = none (sampling prints token ids) */
        int shuffle;                /* 1: windows in a seeded permutation per epoch; 0: in file order */
        int stream;                 /* 1: data.train is text / JSONL tokenized as read (io/data_stream.h) */
        char field[ZT_NAME_MAX];    /* the JSONL field of the text (stream) */
    } data;
    struct {
        long every;                 /* 0 = only at the end */
        int sequences;              /* validation sequences per evaluation */
        int batches;                /* obsolete: > 0 means batches x micro_batch sequences (zt_eval_sequences) */
    } eval;
    struct {
        long every;                 /* 0 = off */
        int tokens;
        double temperature;
        int top_k;
        char prompt[ZT_PATH_MAX];
    } sample;
    struct {
        int stage;                  /* 0 | 1 | 2 | 3 */
        char offload[ZT_NAME_MAX];  /* "none" | "optimizer" | "optimizer+params" */
        char reduce[ZT_NAME_MAX];   /* "ordered" | "native" */
        double bucket_mb;
        char grad_wire[ZT_NAME_MAX]; /* "auto" | "precision" | "fp32": ordered exchange of bf16/fp16 gradients */
    } zero;
    struct {
        long every;                 /* 0 = only the final one */
        int keep;                   /* 0 = keep all */
        char dir[ZT_PATH_MAX];      /* "" = <run dir>/checkpoints */
        int signal_exit_code;       /* exit code after a signal-triggered checkpoint */
        int async;                  /* background writes from a host staging copy */
        int direct_io;              /* O_DIRECT data writes and reads where allowed */
    } checkpoint;
    struct {
        char root[ZT_PATH_MAX];     /* "runs" */
        char session[ZT_NAME_MAX];  /* "default" */
        char name[ZT_NAME_MAX];     /* "run" */
    } run;
    struct {
        int tensorboard;            /* bool: rank 0 writes <run dir>/tb/events.out.tfevents.* */
    } metrics;
    struct {                        /* LoRA fine-tuning (core/lora/lora.h): adapters on a frozen base */
        int enabled;
        char base[ZT_PATH_MAX];     /* checkpoint holding the frozen base weights (its model.* are used) */
        int rank;                   /* r */
        double alpha;               /* scaling alpha / r (alpha / sqrt(r) with rslora) */
        int rslora;
        double dropout;             /* on the adapter input */
        char targets[ZT_NAME_MAX];  /* comma list of qkv, proj, fc, fcproj, or all (zt_config_lora_targets) */
        char quant[ZT_NAME_MAX];    /* QLoRA: the base's linear weights stored as none | nf4 | nf4_dq | int8 */
    } lora;
} zt_config;

/* defaults from the schema table */
void zt_config_defaults(zt_config *c);
/* defaults, then the libconfig file (path may be NULL), then each "key=value" of sets in order;
   then zt_config_validate(c, 1). */
int zt_config_load(zt_config *c, const char *path, int n_sets, char *const *sets, char *err, size_t errlen);
/* defaults, then a config text in libconfig syntax (e.g. the resolved config a checkpoint stores),
   parsed and checked exactly as a file (messages say "config text:LINE"); then validate(c, 1). */
int zt_config_load_string(zt_config *c, const char *text, char *err, size_t errlen);
/* calls fn(key, value in a, value in b, ctx) for each key (schema order) whose values differ, both
   as libconfig literals (strings quoted); stops at and returns fn's first non-zero result */
typedef int (*zt_config_diff_fn)(const char *key, const char *va, const char *vb, void *ctx);
int zt_config_diff(const zt_config *a, const zt_config *b, zt_config_diff_fn fn, void *ctx);
/* apply one "dotted.key=value" override, typed by the schema */
int zt_config_set(zt_config *c, const char *assignment, char *err, size_t errlen);
/* lora.targets as a bit mask (ZT_LORA_T_* of core/lora/lora.h: 1 qkv, 2 proj, 4 fc, 8 fcproj, then the Llama
   family's 16 q_proj ... 1024 down_proj); 0 and a message
   naming the bad item when the list is not valid */
unsigned zt_config_lora_targets(const char *list, char *err, size_t errlen);
/* precision as ZT_PREC_* (iface/backend.h): 0 fp32, 1 bf16, 2 fp16 */
int zt_config_prec(const zt_config *c);
/* zero.stage with zero.offload and LoRA: 0, or 1 with err naming the keys (config_derive.c) */
int zt_config_check_zero(const zt_config *c, char *err, size_t errlen);

/* ranges and cross-key consistency (n_embd % n_head, seq_len <= block_size,
   global_batch % (micro_batch * world_size), ...). */
int zt_config_validate(const zt_config *c, int world_size, char *err, size_t errlen);
/* the resolved config as a valid libconfig file (groups, one key per line) */
void zt_config_print(const zt_config *c, FILE *f);
/* the same text into a buffer (for checkpoints); returns bytes needed (excluding NUL) */
size_t zt_config_to_string(const zt_config *c, char *buf, size_t len);
/* every key: type, default, range / allowed values, help */
void zt_config_help(FILE *f);
/* Vp actually used: padded_vocab, or vocab_size rounded up to 128 when 0 */
int zt_config_padded_vocab(const zt_config *c);
/* the model's shape and block description: model.family's choices, then the model.* keys that override them;
   0, or 1 with a message naming the key when the combination is not a model ztrain has (config_validate calls it) */
int zt_config_shape(const zt_config *c, zt_model_shape *s, char *err, size_t errlen);
/* an encoder family's masked-LM keys (mlm.*) and what an encoder cannot do (LoRA, sampling); 0 for the decoders */
int zt_config_check_mlm(const zt_config *c, const zt_model_shape *s, char *err, size_t errlen);

#endif
