/* tokenizer.c — byte-level BPE: the tokenizer object, pre-tokenizer, encode (with a word cache),
 * decode, and ztrain's own .zttok file (format in tokenizer.h). Training is in tokenizer_train.c;
 * Hugging Face files and zt_tokenizer_load, which tells the formats apart, are in tokenizer_hf.c.
 * Both build on this file; it uses neither. The merge ranks and the word cache are util/hashmap
 * maps.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#define PCRE2_CODE_UNIT_WIDTH 8
#include "io/tokenizer.h"
#include "util/hashmap.h"
#include "util/util.h"

#include <errno.h>
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

/* \s spelled out as Unicode White_Space (what HF tokenizers' Oniguruma means by \s) */
#define WS "\\t\\n\\x0b\\f\\r \\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}"
static const char *const PRETOK_RE =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WS "\\p{L}\\p{N}]+|[" WS "]+(?![^" WS "])|[" WS "]+";

/* a pre-token that ends this close to the end of the buffer may still change when more text
 * arrives: contractions look 3 characters ahead, and the buffer may end inside a UTF-8 character */
#define PRETOK_MARGIN 4

#define CACHE_MAX_WORD 256
#define CACHE_MAX_SLOTS (1u << 20)
#define CACHE_INLINE (1ull << 63)   /* a cache value that holds its 1 or 2 ids itself */

struct zt_pretok {
    pcre2_code *re;
    pcre2_match_data *md;
};

struct zt_tokenizer {
    uint32_t vocab, eot, n_merges;
    uint64_t *tok_off;          /* (vocab+1) offsets into tok_data */
    uint8_t *tok_data;
    uint32_t (*merges)[3];      /* (n_merges) left, right, result in rank order */
    uint32_t byte_id[256];
    zt_hashmap *ranks;          /* (left<<32|right) -> rank of the merge */
    zt_pretok *pre;
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

void zt_ids_push(zt_ids *a, uint32_t id) {
    if (a->n == a->cap) {
        a->cap = a->cap ? 2 * a->cap : 1024;
        a->v = zt_realloc(a->v, a->cap * sizeof *a->v);
    }
    a->v[a->n++] = id;
}

void zt_ids_free(zt_ids *a) {
    free(a->v);
    a->v = NULL;
    a->n = a->cap = 0;
}

/* ---------------------------------------------------------------- pre-tokenizer */

zt_pretok *zt_pretok_create(char *err, size_t errlen) {
    int ec;
    PCRE2_SIZE eo;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)PRETOK_RE, PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &ec, &eo, NULL);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(ec, msg, sizeof msg);
        zt_errf(err, errlen, "PCRE2 cannot compile the pre-tokenizer regex at offset %zu: %s", (size_t)eo,
                (char *)msg);
        return NULL;
    }
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* optional: without JIT it is just slower */
    zt_pretok *p = zt_calloc(1, sizeof *p);
    p->re = re;
    p->md = pcre2_match_data_create_from_pattern(re, NULL);
    return p;
}

void zt_pretok_free(zt_pretok *p) {
    if (!p) return;
    pcre2_match_data_free(p->md);
    pcre2_code_free(p->re);
    free(p);
}

size_t zt_pretok_split(zt_pretok *p, const uint8_t *text, size_t n, int final, zt_pretok_fn fn, void *ctx) {
    size_t pos = 0;
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(p->md);
    while (pos < n) {
        /* a pre-token that is not final yet is still emitted when keeping it would leave more than
           ZT_PRETOK_MAX_CARRY bytes unconsumed (only a pre-token longer than that is ever cut) */
        const int may_wait = !final && n - pos <= ZT_PRETOK_MAX_CARRY;
        int rc = pcre2_match(p->re, (PCRE2_SPTR)text, n, pos, 0, p->md, NULL);
        size_t ms = n, me = n;
        if (rc >= 0) {
            ms = ov[0];
            me = ov[1];
        } else if (rc != PCRE2_ERROR_NOMATCH) {
            zt_panic(__FILE__, __LINE__, "pcre2_match failed with code %d", rc);
        }
        if (ms > pos) {
            /* bytes no pattern item matches (invalid UTF-8): one pre-token. At the end of a
               non-final buffer they may be the start of a character cut in two. */
            size_t ge = ms;
            if (rc < 0 && !final) {
                if (may_wait) return pos;
                ge = n - PRETOK_MARGIN;
            }
            if (fn(text + pos, ge - pos, ctx)) return ge;
            pos = ge;
            continue;
        }
        if (me + PRETOK_MARGIN > n && may_wait) return pos;
        if (fn(text + ms, me - ms, ctx)) return me;
        pos = me;
    }
    return pos;
}

/* ---------------------------------------------------------------- construction */

static int merge_rank(const zt_tokenizer *t, uint32_t l, uint32_t r) {
    const uint64_t *rank = zt_hashmap_get_u64(t->ranks, (uint64_t)l << 32 | r);
    return rank ? (int)*rank : -1;
}

zt_tokenizer *zt_tokenizer_create(uint32_t vocab_size, const uint8_t *const *toks, const uint32_t *lens,
                                  uint32_t n_merges, const uint32_t (*merges)[3], uint32_t eot,
                                  char *err, size_t errlen) {
    if (vocab_size < 256 || vocab_size > ZT_TOK_MAX_VOCAB) {
        zt_errf(err, errlen, "vocab size %u out of range (expected 256..%u)", vocab_size, ZT_TOK_MAX_VOCAB);
        return NULL;
    }
    if (eot != ZT_TOK_NO_EOT && eot >= vocab_size) {
        zt_errf(err, errlen, "end-of-text id %u >= vocab size %u", eot, vocab_size);
        return NULL;
    }
    zt_tokenizer *t = zt_calloc(1, sizeof *t);
    t->vocab = vocab_size;
    t->eot = eot;
    t->tok_off = zt_malloc((size_t)(vocab_size + 1) * sizeof *t->tok_off);
    uint64_t total = 0;
    for (uint32_t i = 0; i < vocab_size; i++) total += toks[i] ? lens[i] : 0;
    t->tok_data = zt_malloc(total ? total : 1);
    total = 0;
    for (uint32_t b = 0; b < 256; b++) t->byte_id[b] = ZT_TOK_NO_EOT;
    for (uint32_t i = 0; i < vocab_size; i++) {
        uint32_t len = toks[i] ? lens[i] : 0;
        t->tok_off[i] = total;
        if (len) memcpy(t->tok_data + total, toks[i], len);
        if (len == 1 && t->byte_id[toks[i][0]] == ZT_TOK_NO_EOT && i != eot) t->byte_id[toks[i][0]] = i;
        total += len;
    }
    t->tok_off[vocab_size] = total;
    for (uint32_t b = 0; b < 256; b++) {
        if (t->byte_id[b] == ZT_TOK_NO_EOT) {
            zt_errf(err, errlen, "no token for the single byte 0x%02x (a byte-level BPE vocab has all 256)", b);
            zt_tokenizer_free(t);
            return NULL;
        }
    }
    t->ranks = zt_hashmap_create(2 * (size_t)n_merges + 2);
    t->merges = zt_malloc((n_merges ? n_merges : 1) * sizeof *t->merges);
    for (uint32_t r = 0; r < n_merges; r++) {
        uint32_t a = merges[r][0], b = merges[r][1], c = merges[r][2];
        if (a >= vocab_size || b >= vocab_size || c >= vocab_size) {
            zt_errf(err, errlen, "merge %u (%u %u -> %u) uses an id >= vocab size %u", r, a, b, c, vocab_size);
            zt_tokenizer_free(t);
            return NULL;
        }
        uint64_t la = t->tok_off[a + 1] - t->tok_off[a], lb = t->tok_off[b + 1] - t->tok_off[b];
        if (t->tok_off[c + 1] - t->tok_off[c] != la + lb || la == 0 || lb == 0 ||
            memcmp(t->tok_data + t->tok_off[c], t->tok_data + t->tok_off[a], la) != 0 ||
            memcmp(t->tok_data + t->tok_off[c] + la, t->tok_data + t->tok_off[b], lb) != 0) {
            zt_errf(err, errlen, "merge %u (%u %u -> %u): the result's bytes are not the two tokens' bytes joined",
                    r, a, b, c);
            zt_tokenizer_free(t);
            return NULL;
        }
        t->merges[r][0] = a;
        t->merges[r][1] = b;
        t->merges[r][2] = c;
        zt_hashmap_put_u64(t->ranks, (uint64_t)a << 32 | b, r, NULL); /* a repeated pair keeps its first rank */
    }
    t->n_merges = n_merges;
    t->pre = zt_pretok_create(err, errlen);
    if (!t->pre) {
        zt_tokenizer_free(t);
        return NULL;
    }
    return t;
}

void zt_tokenizer_free(zt_tokenizer *t) {
    if (!t) return;
    free(t->tok_off);
    free(t->tok_data);
    free(t->merges);
    zt_hashmap_free(t->ranks);
    zt_pretok_free(t->pre);
    zt_hashmap_free(t->cache);
    free(t->cvals);
    free(t->sym);
    free(t->nxt);
    free(t->prv);
    free(t->heap);
    free(t);
}

uint32_t zt_tokenizer_vocab_size(const zt_tokenizer *t) { return t->vocab; }
uint32_t zt_tokenizer_eot(const zt_tokenizer *t) { return t->eot; }
uint32_t zt_tokenizer_n_merges(const zt_tokenizer *t) { return t->n_merges; }

const uint8_t *zt_tokenizer_token(const zt_tokenizer *t, uint32_t id, size_t *len) {
    if (id >= t->vocab) {
        *len = 0;
        return NULL;
    }
    *len = (size_t)(t->tok_off[id + 1] - t->tok_off[id]);
    return t->tok_data + t->tok_off[id];
}

/* ---------------------------------------------------------------- encode */

static void heap_push(uint64_t *h, size_t *n, uint64_t v) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (h[p] <= v) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = v;
}

static uint64_t heap_pop(uint64_t *h, size_t *n) {
    uint64_t top = h[0], v = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && h[c + 1] < h[c]) c++;
        if (v <= h[c]) break;
        h[i] = h[c];
        i = c;
    }
    if (*n) h[i] = v;
    return top;
}

/* BPE of one pre-token: the lowest-rank adjacent pair first, ties by position (a min-heap keyed
 * rank<<32|position; stale entries are skipped when popped), as Hugging Face does */
static void bpe_word(zt_tokenizer *t, const uint8_t *w, size_t n, zt_ids *out) {
    if (n == 1) {
        zt_ids_push(out, t->byte_id[w[0]]);
        return;
    }
    if (n > t->scratch_cap) {
        t->scratch_cap = n;
        t->sym = zt_realloc(t->sym, n * sizeof *t->sym);
        t->nxt = zt_realloc(t->nxt, n * sizeof *t->nxt);
        t->prv = zt_realloc(t->prv, n * sizeof *t->prv);
        t->heap = zt_realloc(t->heap, 2 * n * sizeof *t->heap);
    }
    uint32_t *sym = t->sym;
    int32_t *nxt = t->nxt, *prv = t->prv;
    uint64_t *heap = t->heap;
    size_t hn = 0;
    for (size_t i = 0; i < n; i++) {
        sym[i] = t->byte_id[w[i]];
        prv[i] = (int32_t)i - 1;
        nxt[i] = i + 1 < n ? (int32_t)i + 1 : -1;
    }
    for (size_t i = 0; i + 1 < n; i++) {
        int r = merge_rank(t, sym[i], sym[i + 1]);
        if (r >= 0) heap_push(heap, &hn, (uint64_t)r << 32 | i);
    }
    while (hn) {
        uint64_t e = heap_pop(heap, &hn);
        uint32_t r = (uint32_t)(e >> 32), i = (uint32_t)e;
        int32_t j = nxt[i];
        if (sym[i] == ZT_TOK_NO_EOT || j < 0 || merge_rank(t, sym[i], sym[j]) != (int)r) continue;
        sym[i] = t->merges[r][2];
        sym[j] = ZT_TOK_NO_EOT; /* dead */
        nxt[i] = nxt[j];
        if (nxt[j] >= 0) prv[nxt[j]] = (int32_t)i;
        /* each merge adds at most 2 entries and removes one: the heap never exceeds 2n */
        if (prv[i] >= 0) {
            int rr = merge_rank(t, sym[prv[i]], sym[i]);
            if (rr >= 0) heap_push(heap, &hn, (uint64_t)rr << 32 | (uint32_t)prv[i]);
        }
        if (nxt[i] >= 0) {
            int rr = merge_rank(t, sym[i], sym[nxt[i]]);
            if (rr >= 0) heap_push(heap, &hn, (uint64_t)rr << 32 | i);
        }
    }
    for (int32_t i = 0; i >= 0; i = nxt[i]) zt_ids_push(out, sym[i]);
}

/* Remembers the ids of pre-token w; a full cache starts over rather than grow without bound.
 * The value is CACHE_INLINE | m << 48 | id1 << 24 | id0 for 1 or 2 ids (ids < 2^24; most words
 * are one or two tokens, and reading them from the value saves a cache miss), else
 * offset << 32 | m with the ids at cvals[offset]. */
static void cache_insert(zt_tokenizer *t, const uint8_t *w, size_t n, const uint32_t *ids, size_t m) {
    if (zt_hashmap_slots_for(t->cache, zt_hashmap_count(t->cache) + 1) > CACHE_MAX_SLOTS) {
        zt_hashmap_clear(t->cache);
        t->cvals_n = 0;
    }
    if (m == 1 || m == 2) {
        const uint64_t v = CACHE_INLINE | (uint64_t)m << 48 | (m > 1 ? (uint64_t)ids[1] << 24 : 0) | ids[0];
        zt_hashmap_put(t->cache, w, n, v, NULL);
        return;
    }
    if (t->cvals_n + m > t->cvals_cap) {
        t->cvals_cap = 2 * (t->cvals_n + m) + 4096;
        t->cvals = zt_realloc(t->cvals, t->cvals_cap * sizeof *t->cvals);
    }
    memcpy(t->cvals + t->cvals_n, ids, m * sizeof *ids);
    zt_hashmap_put(t->cache, w, n, (uint64_t)t->cvals_n << 32 | m, NULL);
    t->cvals_n += m;
}

typedef struct encode_ctx {
    zt_tokenizer *t;
    zt_ids *out;
} encode_ctx;

static int encode_word(const uint8_t *w, size_t n, void *ctx) {
    zt_tokenizer *t = ((encode_ctx *)ctx)->t;
    zt_ids *out = ((encode_ctx *)ctx)->out;
    if (n > CACHE_MAX_WORD) {
        bpe_word(t, w, n, out);
        return 0;
    }
    if (!t->cache) t->cache = zt_hashmap_create(4096);
    const uint64_t *hit = zt_hashmap_get(t->cache, w, n);
    if (hit) {
        const uint64_t v = *hit;
        if (v & CACHE_INLINE) {
            zt_ids_push(out, (uint32_t)v & 0xFFFFFF);
            if ((v >> 48 & 3) > 1) zt_ids_push(out, (uint32_t)(v >> 24) & 0xFFFFFF);
            return 0;
        }
        const uint32_t *ids = t->cvals + (v >> 32);
        for (uint32_t k = 0, m = (uint32_t)v; k < m; k++) zt_ids_push(out, ids[k]);
        return 0;
    }
    size_t start = out->n;
    bpe_word(t, w, n, out);
    cache_insert(t, w, n, out->v + start, out->n - start);
    return 0;
}

size_t zt_tokenizer_encode_chunk(zt_tokenizer *t, const uint8_t *text, size_t n, int final, zt_ids *out) {
    encode_ctx c = {t, out};
    return zt_pretok_split(t->pre, text, n, final, encode_word, &c);
}

void zt_tokenizer_encode(zt_tokenizer *t, const uint8_t *text, size_t n, zt_ids *out) {
    zt_tokenizer_encode_chunk(t, text, n, 1, out);
}

int zt_tokenizer_decode(const zt_tokenizer *t, const uint32_t *ids, size_t n, uint8_t **out,
                        size_t *out_len, char *err, size_t errlen) {
    size_t need = *out_len;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] >= t->vocab) {
            zt_errf(err, errlen, "token %u at index %zu >= vocab size %u", ids[i], i, t->vocab);
            return 1;
        }
        need += (size_t)(t->tok_off[ids[i] + 1] - t->tok_off[ids[i]]);
    }
    uint8_t *o = zt_realloc(*out, need);
    size_t k = *out_len;
    for (size_t i = 0; i < n; i++) {
        size_t len = (size_t)(t->tok_off[ids[i] + 1] - t->tok_off[ids[i]]);
        memcpy(o + k, t->tok_data + t->tok_off[ids[i]], len);
        k += len;
    }
    *out = o;
    *out_len = k;
    return 0;
}

/* ---------------------------------------------------------------- .zttok files */

int zt_tokenizer_save(const zt_tokenizer *t, const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "w");
    if (!f) {
        zt_errf(err, errlen, "%s: cannot create tokenizer file (%s)", path, strerror(errno));
        return 1;
    }
    fprintf(f, "%s %d\nvocab_size %u\neot %lld\ntokens %u\n", ZT_TOK_MAGIC, ZT_TOK_VERSION, t->vocab,
            t->eot == ZT_TOK_NO_EOT ? -1LL : (long long)t->eot, t->vocab);
    static const char hex[] = "0123456789abcdef";
    for (uint32_t i = 0; i < t->vocab; i++) {
        uint64_t a = t->tok_off[i], b = t->tok_off[i + 1];
        if (a == b) fputc('-', f);
        for (uint64_t k = a; k < b; k++) {
            fputc(hex[t->tok_data[k] >> 4], f);
            fputc(hex[t->tok_data[k] & 15], f);
        }
        fputc('\n', f);
    }
    fprintf(f, "merges %u\n", t->n_merges);
    for (uint32_t r = 0; r < t->n_merges; r++)
        fprintf(f, "%u %u %u\n", t->merges[r][0], t->merges[r][1], t->merges[r][2]);
    int bad = ferror(f);
    if (fclose(f) != 0) bad = 1;
    if (bad) {
        zt_errf(err, errlen, "%s: write failed (%s)", path, strerror(errno));
        return 1;
    }
    return 0;
}

/* reads one line (without '\n') into *buf; returns its length or -1 at end of file */
static long read_line(FILE *f, char **buf, size_t *cap) {
    ssize_t n = getline(buf, cap, f);
    if (n < 0) return -1;
    if (n > 0 && (*buf)[n - 1] == '\n') (*buf)[--n] = 0;
    if (n > 0 && (*buf)[n - 1] == '\r') (*buf)[--n] = 0;
    return (long)n;
}

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

zt_tokenizer *zt_tokenizer_load_zttok(const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "r");
    if (!f) {
        zt_errf(err, errlen, "%s: cannot open tokenizer file (%s)", path, strerror(errno));
        return NULL;
    }
    char *line = NULL, msg[300];
    size_t cap = 0;
    long ln = 0, len;
    zt_tokenizer *t = NULL;
    uint8_t **toks = NULL;
    uint32_t *lens = NULL, (*merges)[3] = NULL;
    unsigned long long vocab = 0, ntok = 0, nmerge = 0;
    long long eot = -1;
    int ver = 0;
    char word[32];
#define BAD(...) do { snprintf(msg, sizeof msg, __VA_ARGS__); zt_errf(err, errlen, "%s:%ld: %s", path, ln, msg); goto done; } while (0)
#define NEXT() do { ln++; if ((len = read_line(f, &line, &cap)) < 0) BAD("unexpected end of file (truncated tokenizer)"); } while (0)
    NEXT();
    if (sscanf(line, "%31s %d", word, &ver) != 2 || strcmp(word, ZT_TOK_MAGIC) != 0)
        BAD("not a ztrain tokenizer file (expected first line '%s %d')", ZT_TOK_MAGIC, ZT_TOK_VERSION);
    if (ver != ZT_TOK_VERSION) BAD("unsupported tokenizer version %d (expected %d)", ver, ZT_TOK_VERSION);
    NEXT();
    if (sscanf(line, "vocab_size %llu", &vocab) != 1 || vocab < 256 || vocab > ZT_TOK_MAX_VOCAB)
        BAD("expected 'vocab_size N' with N in 256..%d, got '%.40s'", ZT_TOK_MAX_VOCAB, line);
    NEXT();
    if (sscanf(line, "eot %lld", &eot) != 1 || eot < -1 || eot >= (long long)vocab)
        BAD("expected 'eot ID' with ID in -1..%llu, got '%.40s'", vocab - 1, line);
    NEXT();
    if (sscanf(line, "tokens %llu", &ntok) != 1 || ntok != vocab)
        BAD("expected 'tokens %llu', got '%.40s'", vocab, line);
    toks = zt_calloc(vocab, sizeof *toks);
    lens = zt_calloc(vocab, sizeof *lens);
    for (unsigned long long i = 0; i < vocab; i++) {
        NEXT();
        if (strcmp(line, "-") == 0) continue;
        if (len == 0 || len % 2) BAD("token %llu: expected an even number of hex digits or '-'", i);
        toks[i] = zt_malloc((size_t)len / 2);
        lens[i] = (uint32_t)(len / 2);
        for (long k = 0; k < len / 2; k++) {
            int hi = hexval(line[2 * k]), lo = hexval(line[2 * k + 1]);
            if (hi < 0 || lo < 0) BAD("token %llu: bad hex digit", i);
            toks[i][k] = (uint8_t)(hi << 4 | lo);
        }
    }
    NEXT();
    if (sscanf(line, "merges %llu", &nmerge) != 1 || nmerge > vocab)
        BAD("expected 'merges M' with M <= vocab size, got '%.40s'", line);
    merges = zt_malloc((nmerge ? nmerge : 1) * sizeof *merges);
    for (unsigned long long r = 0; r < nmerge; r++) {
        unsigned long long a, b, c;
        int used = 0;
        NEXT();
        if (sscanf(line, "%llu %llu %llu%n", &a, &b, &c, &used) != 3 || line[used] != 0 || a >= vocab ||
            b >= vocab || c >= vocab)
            BAD("merge %llu: expected three token ids below %llu, got '%.40s'", r, vocab, line);
        merges[r][0] = (uint32_t)a;
        merges[r][1] = (uint32_t)b;
        merges[r][2] = (uint32_t)c;
    }
    ln++;
    while ((len = read_line(f, &line, &cap)) >= 0) {
        if (len > 0) BAD("unexpected text after the last merge");
        ln++;
    }
    t = zt_tokenizer_create((uint32_t)vocab, (const uint8_t *const *)toks, lens, (uint32_t)nmerge,
                            (const uint32_t(*)[3])merges, eot < 0 ? ZT_TOK_NO_EOT : (uint32_t)eot, msg, sizeof msg);
    if (!t) zt_errf(err, errlen, "%s: %s", path, msg);
#undef BAD
#undef NEXT
done:
    if (toks)
        for (unsigned long long i = 0; i < vocab; i++) free(toks[i]);
    free(toks);
    free(lens);
    free(merges);
    free(line);
    fclose(f);
    return t;
}
