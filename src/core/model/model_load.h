/* model_load.h — the one routine that opens a checkpoint for the commands that only read it (eval,
 * sample, export): its config (the stored one, or a -c file whose model must match), the --set
 * overrides, a backend from the factory (the config's device), and the model with the checkpoint's
 * weights. Every user error ends every rank with one line (exit 2). Collective. */
#ifndef ZT_MODEL_LOAD_H
#define ZT_MODEL_LOAD_H

#include "core/model/model.h"
#include "io/config.h"

typedef struct zt_loaded_model {
    zt_config *c;
    zt_model_shape s;
    zt_backend *be;
    zt_model m;                  /* a LoRA checkpoint: the base with the adapters merged in */
    long step;
    /* a LoRA checkpoint (c->lora.enabled): its adapters on the host, their table and settings */
    float *adapters;
    zt_param_table *lora_table;
    zt_lora_cfg lora;
} zt_loaded_model;

typedef struct zt_load_opts {
    const char *config_path;     /* NULL: the checkpoint's stored config */
    char *const *sets;           /* "key=value" overrides */
    int n_sets;
    int threads;                 /* <= 0: the backend's default */
    int B, T;                    /* activations for micro-batches of B x T (0: the config's train.micro_batch/seq_len) */
} zt_load_opts;

/* the config only: stored (or -c) + --set, validated for 1 rank; 0 or 1 with one line in err */
int zt_loaded_config(const char *path, const zt_load_opts *o, zt_config *c, char *err, size_t errlen);
void zt_loaded_model_open(zt_loaded_model *lm, const char *path, const zt_load_opts *o);
void zt_loaded_model_close(zt_loaded_model *lm);

/* LoRA: model.* of c from the config stored in lora.base (the adapters' shape is the base's). NOT collective. */
int zt_lora_base_shape(zt_config *c, char *err, size_t errlen);
/* LoRA: the weights of lora.base into m->params (whole, every rank; collective) and their fingerprint */
/* LoRA: a base given as a GPT-2 flat buffer in backend memory (table.total) into the model (QLoRA: quantised) */
int zt_lora_base_set(zt_model *m, const float *flat, char *err, size_t errlen);
int zt_lora_base_load(zt_model *m, const zt_config *c, uint64_t *hash, char *err, size_t errlen);

#endif
