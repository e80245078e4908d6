/* hf_llama.h — the Llama family in Hugging Face's layout (LlamaForCausalLM, MistralForCausalLM,
 * Qwen2ForCausalLM): config.json <-> the config's model.* keys, and ztrain's tensors <-> Hugging Face's
 * names and layouts. Used by cmd/import.c and cmd/export.c (`ztrain import` / `ztrain export`); the decisions on each
 * config.json field are listed in hf_llama.c's header. */
#ifndef ZT_HF_LLAMA_H
#define ZT_HF_LLAMA_H

#include <stddef.h>
#include <stdio.h>

#include "iface/param_table.h"
#include "io/config.h"
#include "io/safetensors.h"
#include "util/json.h"

/* config.json's family: 1 with *family = "llama" | "mistral" | "qwen2" (model_type, else architectures);
   0 when it names none of them (GPT-2, or a model_type the caller refuses); -1 with one line in err when
   model_type and architectures disagree or architectures names another head (e.g. ...ForSequenceClassification) */
int zt_hf_llama_family(const zt_json *cj, const char *path, const char **family, char *err, size_t errlen);

/* the class name of a family: "LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM" ("?" for another) */
const char *zt_hf_llama_arch(const char *family);

/* config.json (cj, read from path) of `family` into model.* of c (every model.* key set but padded_vocab);
   0, or 1 with one line naming the field ztrain does not implement or the value it cannot hold */
int zt_hf_llama_config_in(const zt_json *cj, const char *path, const char *family, zt_config *c, char *err,
                          size_t errlen);

/* config.json for a checkpoint of c / s (model.family llama, mistral or qwen2) as transformers writes it;
   0, or 1 with one line when the description is not one transformers' class for the family has */
int zt_hf_llama_config_out(FILE *f, const zt_config *c, const zt_model_shape *s, const char *torch_dtype, char *err,
                           size_t errlen);

/* how a Hugging Face tensor is held in a ztrain tensor */
typedef enum zt_hf_kind {
    ZT_HF_SAME,  /* equal (RMSNorm weights) */
    ZT_HF_ROWS,  /* HF's V rows are ztrain's first V of Vp (embedding, LM head) */
    ZT_HF_TCOLS, /* HF (n, in) is columns [c0, c0 + n) of ztrain's (in, out), transposed (q|k|v, o, gate|up, down) */
    ZT_HF_SLICE  /* HF (n) is elements [c0, c0 + n) of ztrain's (out) (q|k|v biases) */
} zt_hf_kind;

typedef struct zt_hf_map {
    char name[96];    /* e.g. model.layers.3.self_attn.k_proj.weight */
    int zt;           /* the ztrain table index */
    int kind;         /* zt_hf_kind */
    int c0;           /* ZT_HF_TCOLS / ZT_HF_SLICE: the first column / element */
    int ndim;
    int64_t shape[2]; /* Hugging Face's shape */
} zt_hf_map;

/* at most this many Hugging Face tensors per ztrain tensor */
#define ZT_HF_MAX_PARTS 3

/* the Hugging Face tensors of a Llama-family table, in table order (out: ZT_HF_MAX_PARTS * pt->n rows);
   their count, or -1 with one line when the table has a tensor the family has not (a bias, a LayerNorm) */
int zt_hf_llama_map(const zt_param_table *pt, const zt_model_shape *s, zt_hf_map *out, char *err, size_t errlen);

/* map row h's values from the ztrain tensor t (its numel floats) into hf (h's numel floats), and back into
   the tensor (the rest of zt unchanged: ZT_HF_ROWS' padding rows are left as they are) */
void zt_hf_to_hf(const zt_hf_map *h, const zt_tensor_info *t, const float *zt, float *hf);
void zt_hf_from_hf(const zt_hf_map *h, const zt_tensor_info *t, const float *hf, float *zt);
/* elements of a map row */
size_t zt_hf_numel(const zt_hf_map *h);

/* import: ztrain tensor i (zero-filled into dst, its numel floats) from the nf files: each part present
   with its shape; tmp holds the largest part. 0 or 1 with one line */
int zt_hf_llama_gather(zt_st_file *f, int nf, const zt_hf_map *map, int nmap, const zt_param_table *pt, int i,
                       float *dst, float *tmp, char *err, size_t errlen);
/* import: every tensor in the files is a map row, a rotary inv_freq buffer (recomputed, ignored) or, with a
   tied head, an lm_head.weight equal to the embedding; wte holds the embedding as imported. 0 or 1 with one line */
int zt_hf_llama_check_rest(zt_st_file *f, int nf, const zt_hf_map *map, int nmap, const zt_model_shape *s,
                           const float *wte, const char *what, char *err, size_t errlen);

#endif
