/* tokenizer_internal.h — the tokenizer object's fields, shared by tokenizer.c (construction, encode, decode),
 * tokenizer_file.c (the .zttok file) and tokenizer_wordpiece.c (WordPiece); nothing else includes it. */
#ifndef ZT_TOKENIZER_INTERNAL_H
#define ZT_TOKENIZER_INTERNAL_H

#ifndef PCRE2_CODE_UNIT_WIDTH
#define PCRE2_CODE_UNIT_WIDTH 8
#endif
#include <pcre2.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "io/tokenizer.h"
#include "util/hashmap.h"
#include "util/unicode.h"

struct zt_pretok {
    pcre2_code *re;
    pcre2_match_data *md;
};

struct zt_tokenizer {
    zt_tok_config cfg;          /* cfg.added == added */
    uint32_t vocab, n_merges;
    uint8_t *added;             /* per id, or NULL */
    uint64_t *tok_off;          /* (vocab+1) offsets into tok_data: what decode writes */
    uint8_t *tok_data;
    uint64_t *mod_off;          /* chars and WordPiece models: the tokens' strings in the model's alphabet; NULL
                                   otherwise */
    uint8_t *mod_data;
    uint32_t (*merges)[3];      /* (n_merges) left, right, result in rank order */
    uint32_t byte_id[256];      /* bytes model: each byte's token; chars model: its fallback token <0xXX> */
    uint32_t ascii_id[128];     /* chars model: the token of each ASCII character, or NO_ID */
    uint32_t space_id;          /* chars model: the token "\u2581", or NO_ID */
    uint8_t join_ascii[128], join_byte[256]; /* chars model: units a merge joins leftwards (chars_cuts) */
    zt_hashmap *chars;          /* chars model: a character's UTF-8 -> its token */
    zt_hashmap *words;          /* ignore_merges: a model token's bytes -> its id */
    zt_hashmap *ranks;          /* (left<<32|right) -> rank of the merge */
    zt_nfc *nfc;                /* the NFC normalizer, or NULL */
    zt_pretok *pre;             /* NULL for pre-tokenizer none (and bert) */
    struct zt_wp *wp;           /* WordPiece: its vocabulary and the word in progress; NULL otherwise */
    int simple;                 /* GPT-2's configuration: stateless streaming, version 1 file */
    int cut_safe;               /* chars model: cutting before a space that follows a non-space is exact */
    /* the document in progress (not simple) */
    int doc;
    uint8_t *pend;              /* normalized text not yet pre-tokenized */
    size_t pend_n, pend_cap;
    /* word cache: pre-token -> its ids (see cache_insert) */
    zt_hashmap *cache;
    uint32_t *cvals;
    size_t cvals_n, cvals_cap;
    /* BPE scratch */
    uint32_t *sym;
    int32_t *nxt, *prv;
    uint64_t *heap;
    size_t scratch_cap;
};

/* whether id is an added (special) token */
static inline int is_added(const zt_tokenizer *t, uint32_t id) { return t->added && t->added[id]; }

/* a token's string in the model's alphabet */
static inline const uint8_t *mod_tok(const zt_tokenizer *t, uint32_t id, size_t *len) {
    const uint64_t *off = t->mod_off ? t->mod_off : t->tok_off;
    *len = (size_t)(off[id + 1] - off[id]);
    return (t->mod_off ? t->mod_data : t->tok_data) + off[id];
}

/* tokenizer.c: the ids of one word (pre-token) through the word cache, appended to ctx's out */
typedef struct encode_ctx {
    zt_tokenizer *t;
    zt_ids *out;
} encode_ctx;
int zt_tok_encode_word(const uint8_t *w, size_t n, void *ctx);

/* tokenizer_wordpiece.c (WordPiece, tokenizer.h). init: with the tokens' strings in mod_off/mod_data, the
 * vocabulary and what decode writes (tok_off/tok_data); word: one word's ids (the model); encode_chunk and
 * decode: zt_tokenizer_encode_chunk's and zt_tokenizer_decode's (ids already checked) */
int zt_wp_init(zt_tokenizer *t, char *err, size_t errlen);
void zt_wp_free(struct zt_wp *w);
void zt_wp_reset(struct zt_wp *w);
void zt_wp_word(zt_tokenizer *t, const uint8_t *w, size_t n, zt_ids *out);
/* emit(word, len, ctx) encodes each finished word (tokenizer.c's cached word encoder: a callback, so this file
   does not depend on tokenizer.c); a final chunk flushes the last word, the caller then resets */
size_t zt_wp_encode_chunk(zt_tokenizer *t, const uint8_t *text, size_t n, int final, zt_ids *out, zt_pretok_fn emit,
                          void *ctx);
void zt_wp_decode(const zt_tokenizer *t, const uint32_t *ids, size_t n, uint8_t **out, size_t *out_len);
/* the .zttok lines of version 3 (tokenizer.h): write them; read line k (0..ZT_WP_FILE_LINES-1) into c, 0 if
 * it is well formed */
#define ZT_WP_FILE_LINES 3
void zt_wp_save_lines(FILE *f, const zt_tok_config *c);
int zt_wp_read_line(int k, const char *line, zt_tok_config *c, uint32_t vocab);

#endif
