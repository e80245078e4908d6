/* hf_common.h — what the Hugging Face families share (cmd/hf_llama.c: LlamaForCausalLM, MistralForCausalLM,
 * Qwen2ForCausalLM; cmd/hf_bert.c: BertForMaskedLM, RobertaForMaskedLM): the class a config.json names, reading
 * its fields with one-line refusals, and the map between ztrain's tensors and Hugging Face's names and layouts
 * that `ztrain import` (cmd/import.c) gathers through and `ztrain export` (cmd/export.c) writes through. */
#ifndef ZT_HF_COMMON_H
#define ZT_HF_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "iface/param_table.h"
#include "io/config.h"
#include "io/safetensors.h"
#include "util/json.h"
#include "util/util.h"

/* ---------------------------------------------------------------- the classes */

/* config.json's family: 1 with *family = "llama" | "mistral" | "qwen2" | "bert" | "roberta" (model_type, else
   architectures; a static string); 0 when it names none of them (GPT-2, or a model_type the caller refuses);
   -1 with one line in err when model_type and architectures disagree or architectures names another head (e.g.
   ...ForSequenceClassification) */
int zt_hf_family(const zt_json *cj, const char *path, const char **family, char *err, size_t errlen);
/* the class name of a family: "LlamaForCausalLM", ..., "BertForMaskedLM", "RobertaForMaskedLM" ("?" for another) */
const char *zt_hf_arch(const char *family);
/* whether a family is one of the encoders (bert, roberta: cmd/hf_bert.c) */
int zt_hf_is_encoder(const char *family);

/* ---------------------------------------------------------------- config.json's fields */

/* a config.json being read (path for the messages, "import: PATH: ...") */
typedef struct zt_hf_reader {
    const zt_json *cj;
    const char *path;
    char *err;
    size_t errlen;
} zt_hf_reader;

/* 1, with "import: PATH: <message>" in r->err */
int zt_hf_bad(const zt_hf_reader *r, const char *fmt, ...) ZT_PRINTF(2, 3);
/* an integer field >= lo; dflt < 0: required; a null value counts as absent. 0 or 1 with one line */
int zt_hf_get_int(const zt_hf_reader *r, const char *key, int dflt, int lo, int *out);
/* a number field > 0 (>= 0 when zero_ok); absent or null: dflt */
int zt_hf_get_num(const zt_hf_reader *r, const char *key, double dflt, int zero_ok, double *out);
/* a boolean field; absent or null: dflt */
int zt_hf_get_bool(const zt_hf_reader *r, const char *key, int dflt, int *out);
/* every field of config.json is the family's (family_key(ctx, key) true) or a generic PretrainedConfig field that
   does not change the function (token ids, torch_dtype, generation defaults, ...); quantization_config and
   pruned_heads other than {} are refused by name, as is any other field (it may change the model) */
int zt_hf_check_keys(const zt_hf_reader *r, int (*family_key)(const void *ctx, const char *key), const void *ctx,
                     const char *arch);
/* one model.* key (fmt: "model.key=value") from config.json's field (named in the message when ztrain's range
   refuses the value) */
int zt_hf_set_key(const zt_hf_reader *r, zt_config *c, const char *field, const char *fmt, ...) ZT_PRINTF(4, 5);
/* x with the fewest digits that read back as x, always with a "." or an exponent, as Python writes a float */
void zt_hf_shortest(char *buf, size_t n, double x);

/* ---------------------------------------------------------------- tensors */

/* how a Hugging Face tensor is held in a ztrain tensor */
typedef enum zt_hf_kind {
    ZT_HF_SAME,  /* equal (norm weights and biases, position embeddings, linear biases) */
    ZT_HF_ROWS,  /* HF's V rows (or V elements) are ztrain's first V of Vp (embedding, LM head, MLM decoder bias) */
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

/* row n of out from ztrain tensor zt (d1 0: a 1-D tensor of d0); n + 1 */
int zt_hf_map_add(zt_hf_map *out, int n, int zt, int kind, int c0, int64_t d0, int64_t d1, const char *fmt, ...)
    ZT_PRINTF(8, 9);
/* map row h's values from the ztrain tensor t (its numel floats) into hf (h's numel floats), and back into
   the tensor (the rest of zt unchanged: ZT_HF_ROWS' padding rows are left as they are) */
void zt_hf_to_hf(const zt_hf_map *h, const zt_tensor_info *t, const float *zt, float *hf);
void zt_hf_from_hf(const zt_hf_map *h, const zt_tensor_info *t, const float *hf, float *zt);
/* elements of a map row */
size_t zt_hf_numel(const zt_hf_map *h);
/* a file's tensor name as transformers loads it: LayerNorm's legacy ".gamma" / ".beta" (the original BERT
   checkpoints' names, which from_pretrained renames) as ".weight" / ".bias"; other names as they are */
void zt_hf_canonical_name(const char *name, char *out, size_t n);

/* import: ztrain tensor i (zero-filled into dst, its numel floats) from the nf files: each part present
   with its shape (found under its name or its legacy one); tmp holds the largest part. 0 or 1 with one line */
int zt_hf_gather(zt_st_file *f, int nf, const zt_hf_map *map, int nmap, const zt_param_table *pt, int i, float *dst,
                 float *tmp, char *err, size_t errlen);
/* import: whether a file tensor is one of the map's (under its name or its legacy one) */
int zt_hf_in_map(const zt_hf_map *map, int nmap, const char *name);
/* import: a tied tensor the file stores anyway (st in `in`): it must have shape (d0, d1) (d1 0: (d0)) and hold
   exactly `want`, the values ztrain keeps in its place (named `other`); else one line ending in `why` */
int zt_hf_check_tied(zt_st_file *in, const zt_st_tensor *st, int64_t d0, int64_t d1, const float *want,
                     const char *other, const char *why, char *err, size_t errlen);

#endif
