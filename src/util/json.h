/* json.h — the one JSON reader: a whole document (RFC 8259) parsed into a tree.
 *
 * Used for safetensors headers, a model's config.json and model.safetensors.index.json, and Hugging
 * Face tokenizer.json / vocab.json. Strings are unescaped to UTF-8 (\uXXXX escapes included; a
 * surrogate pair becomes one 4-byte character, a lone surrogate is kept as its 3-byte form, as
 * Python's json does); they may contain NUL bytes, so their lengths are stored. Numbers keep both
 * a double and, when written without fraction or exponent and within int64, the exact integer.
 * Every node remembers the byte offset where it starts, so a caller can point at the line of a
 * value it rejects. Nesting is limited to ZT_JSON_MAX_DEPTH. Errors say what was expected and at
 * which byte; text that ends early says "unexpected end of file (truncated?)".
 */
#ifndef ZT_JSON_H
#define ZT_JSON_H

#include <stddef.h>

#define ZT_JSON_MAX_DEPTH 64

typedef enum { ZT_JSON_NULL, ZT_JSON_BOOL, ZT_JSON_NUM, ZT_JSON_STR, ZT_JSON_ARR, ZT_JSON_OBJ } zt_json_type;

typedef struct zt_json {
    zt_json_type type;
    double num;               /* NUM, BOOL (0/1) */
    long long inum;           /* NUM: exact when is_int */
    int is_int;               /* NUM: no fraction or exponent, and within int64 */
    char *str;                /* STR: UTF-8, NUL-terminated */
    size_t len;               /* STR: bytes in str (it may contain NULs) */
    int n;                    /* ARR / OBJ: children */
    char **keys;              /* OBJ: n keys, NUL-terminated */
    size_t *key_lens;         /* OBJ: their lengths */
    struct zt_json *items;    /* ARR / OBJ: n children, in document order */
    size_t off;               /* byte offset of the value in the text */
} zt_json;

/* where and why a parse failed */
typedef struct zt_json_error {
    size_t off;               /* byte offset into the text */
    int line;                 /* 1-based line of off */
    int eof;                  /* the text ended early (truncated) */
    char what[96];            /* e.g. "expected ',' or '}'" */
} zt_json_error;

/* parses text[0..len) (one value, surrounded by whitespace only) into *out: 0, or non-zero with
 * *e filled (e may be NULL); *out is then empty. zt_json_free(out) after success. */
int zt_json_parse_ex(const char *text, size_t len, zt_json *out, zt_json_error *e);
/* the same, with the error as "byte K: what" in err */
int zt_json_parse(const char *text, size_t len, zt_json *out, char *err, size_t errlen);
/* frees the children and strings of j (not j itself); NULL is fine */
void zt_json_free(zt_json *j);
/* member `key` of an object (the first if repeated), or NULL (also when obj is not an object) */
const zt_json *zt_json_get(const zt_json *obj, const char *key);
/* 1-based line number of byte offset off in text */
int zt_json_line(const char *text, size_t off);

#endif
