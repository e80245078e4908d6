/* hf_bert.h — the encoders in Hugging Face's layout (BertForMaskedLM, RobertaForMaskedLM): config.json <-> the
 * config's model.* keys, and ztrain's encoder table (iface/param_table.h) <-> Hugging Face's names and layouts.
 * Used by cmd/import.c and cmd/export.c; the decisions on each config.json field are listed in hf_bert.c's header.
 * What the families share (the class a config.json names, the tensor map and its gather) is cmd/hf_common.h. */
#ifndef ZT_HF_BERT_H
#define ZT_HF_BERT_H

#include <stddef.h>
#include <stdio.h>

#include "cmd/hf_common.h"

/* config.json (cj, read from path) of `family` (bert | roberta) into model.* of c (every model.* key that describes
   the model; padded_vocab, and sep_id unless config.json gives sep_token_id, as -c / --set have them);
   0, or 1 with one line naming the field ztrain does not implement or the value it cannot hold */
int zt_hf_bert_config_in(const zt_json *cj, const char *path, const char *family, zt_config *c, char *err,
                         size_t errlen);

/* config.json for a checkpoint of c / s (model.family bert or roberta) as transformers writes it; 0, or 1 with one
   line naming the model.* key when the description is not one transformers' class has */
int zt_hf_bert_config_out(FILE *f, const zt_config *c, const zt_model_shape *s, const char *torch_dtype, char *err,
                          size_t errlen);

/* the Hugging Face tensors of an encoder table (model.family `family`), in table order (out: ZT_HF_MAX_PARTS *
   pt->n rows); their count, or -1 with one line when the table has a tensor the class has not */
int zt_hf_bert_map(const zt_param_table *pt, const zt_model_shape *s, const char *family, zt_hf_map *out, char *err,
                   size_t errlen);

/* import: every tensor in the files is a map row, a position_ids / token_type_ids buffer (ignored), the decoder's
   weight equal to the word embeddings (wte: V x C as imported) or its bias equal to the head's (head_bias: V), or
   the pooler / next-sentence head that a pre-training checkpoint carries and the MLM model does not use (counted in
   *ignored, not imported). 0 or 1 with one line */
int zt_hf_bert_check_rest(zt_st_file *f, int nf, const zt_hf_map *map, int nmap, const zt_model_shape *s,
                          const char *family, const float *wte, const float *head_bias, int *ignored, char *err,
                          size_t errlen);

#endif
