/* hf_llama.h — the Llama family in Hugging Face's layout (LlamaForCausalLM, MistralForCausalLM,
 * Qwen2ForCausalLM): config.json <-> the config's model.* keys, and ztrain's tensors <-> Hugging Face's
 * names and layouts. Used by cmd/import.c and cmd/export.c (`ztrain import` / `ztrain export`); the decisions on each
 * config.json field are listed in hf_llama.c's header. What the families share (the class a config.json names,
 * the tensor map and its gather) is cmd/hf_common.h. */
#ifndef ZT_HF_LLAMA_H
#define ZT_HF_LLAMA_H

#include <stddef.h>
#include <stdio.h>

#include "cmd/hf_common.h"

/* config.json (cj, read from path) of `family` into model.* of c (every model.* key set but padded_vocab);
   0, or 1 with one line naming the field ztrain does not implement or the value it cannot hold */
int zt_hf_llama_config_in(const zt_json *cj, const char *path, const char *family, zt_config *c, char *err,
                          size_t errlen);

/* config.json for a checkpoint of c / s (model.family llama, mistral or qwen2) as transformers writes it;
   0, or 1 with one line when the description is not one transformers' class for the family has */
int zt_hf_llama_config_out(FILE *f, const zt_config *c, const zt_model_shape *s, const char *torch_dtype, char *err,
                           size_t errlen);

/* the Hugging Face tensors of a Llama-family table, in table order (out: ZT_HF_MAX_PARTS * pt->n rows);
   their count, or -1 with one line when the table has a tensor the family has not (a bias, a LayerNorm) */
int zt_hf_llama_map(const zt_param_table *pt, const zt_model_shape *s, zt_hf_map *out, char *err, size_t errlen);

/* import: every tensor in the files is a map row, a rotary inv_freq buffer (recomputed, ignored) or, with a
   tied head, an lm_head.weight equal to the embedding; wte holds the embedding as imported. 0 or 1 with one line */
int zt_hf_llama_check_rest(zt_st_file *f, int nf, const zt_hf_map *map, int nmap, const zt_model_shape *s,
                           const float *wte, const char *what, char *err, size_t errlen);

#endif
