/* tokenizer_hf_internal.h — what tokenizer_hf.c (building the tokenizer), tokenizer_hf_read.c (reading a
 * tokenizer.json's vocabulary, merges and added tokens) and tokenizer_hf_config.c (reading its normalizer, pre-tokenizer, model flags, decoder and
 * post-processor into a zt_tok_config) share; nothing else includes it. */
#ifndef ZT_TOKENIZER_HF_INTERNAL_H
#define ZT_TOKENIZER_HF_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "io/tokenizer.h"
#include "util/json.h"
#include "util/util.h"

/* bytes somewhere else (in the JSON tree or the merges.txt text) */
typedef struct span { const char *s; size_t n; } span;

/* a tokenizer.json being read */
typedef struct hf {
    const char *path, *text;  /* the file, for error lines */
    size_t base;              /* bytes before the JSON (a byte order mark) */
    span *vtok; uint32_t *vid; size_t nv, capv;     /* model vocab */
    span *atok; uint32_t *aid; size_t na, capa;     /* added tokens */
    span (*mg)[2]; size_t nm, capm;                 /* merges */
    char *merges_txt;         /* merges.txt, which the merge spans point into */
    span unk;                 /* WordPiece: model.unk_token (its id is found when the vocab is built) */
    int has_model, numbers_only, members, bad;
    const zt_json *model, *normalizer, *pretok, *decoder, *post; /* the tokenizer.json's sections */
    char msg[300];
} hf;

/* tokenizer_hf_read.c: the first error, as "path:line: what" with the line of value v */
void zt_hf_fail(hf *h, const zt_json *v, const char *fmt, ...) ZT_PRINTF(3, 4);
/* an id value (a non-negative integer), or 1 after zt_hf_fail */
int zt_hf_id(hf *h, const zt_json *v, long long *id);
/* the model's vocab (one entry, or the whole object), merges and the added tokens, into h */
void zt_hf_vocab_add(hf *h, const char *s, size_t n, long long id);
/* one merge (a, b) (the spans point into the JSON tree or merges.txt) */
void zt_hf_merge_add(hf *h, const char *a, size_t na, const char *b, size_t nb);
void zt_hf_vocab(hf *h, const zt_json *v);
void zt_hf_merges(hf *h, const zt_json *v);
void zt_hf_added(hf *h, const zt_json *v);
/* tokenizer_hf_config.c: the top-level object's sections into h, then the configuration they describe */
void zt_hf_top(hf *h, const zt_json *top);
void zt_hf_config(hf *h, zt_tok_config *c);

#endif
