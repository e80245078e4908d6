/* tokenizer.c — BPE tokenizers: the tokenizer object, the pre-tokenizers, the document pipeline of a
 * configuration (NFC, prefix, template ids; tokenizer.h), encode (byte-level and SentencePiece-style
 * character words, with a word cache) and decode; ztrain's own .zttok file (format in tokenizer.h) is
 * tokenizer_file.c.
 * Training is in tokenizer_train.c; Hugging Face files and zt_tokenizer_load, which tells the formats
 * apart, are in tokenizer_hf.c. Both build on this file; it uses neither. The merge ranks, the word
 * cache and the character and word vocabularies are util/hashmap maps; NFC is util/unicode's. A WordPiece
 * tokenizer (BERT) is made, encoded and decoded by tokenizer_wordpiece.c, called from here.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#define PCRE2_CODE_UNIT_WIDTH 8
#include "io/tokenizer_internal.h"
#include "util/hashmap.h"
#include "util/unicode.h"
#include "util/util.h"

#include <errno.h>
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

/* \s spelled out as Unicode White_Space (what HF tokenizers' Oniguruma means by \s) */
#define WS "\\t\\n\\x0b\\f\\r \\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}"
/* Llama 3's and Qwen2's Split regexes differ in the digits: \p{N}{1,3} and \p{N} */
#define LLAMA_RE(DIGITS)                                                                                      \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|" DIGITS "| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n]*|[" WS \
    "]*[\\r\\n]+|[" WS "]+(?![^" WS "])|[" WS "]+"
static const char *const PRETOK_RE[3] = {
    [ZT_TOK_PRE_GPT2] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WS "\\p{L}\\p{N}]+|[" WS "]+(?![^" WS
                        "])|[" WS "]+",
    [ZT_TOK_PRE_LLAMA3] = LLAMA_RE("\\p{N}{1,3}"),
    [ZT_TOK_PRE_QWEN2] = LLAMA_RE("\\p{N}"),
};

/* a pre-token that ends this close to the end of the buffer may still change when more text
 * arrives: contractions look 3 characters ahead, and the buffer may end inside a UTF-8 character */
#define PRETOK_MARGIN 4

#define CACHE_MAX_WORD 256
#define CACHE_MAX_SLOTS (1u << 20)
#define CACHE_INLINE (1ull << 63)   /* a cache value that holds its 1 or 2 ids itself */

#define NO_ID ZT_TOK_NO_EOT
#define SPACE_MARK "\xE2\x96\x81"   /* U+2581, SentencePiece's space */

enum { DOC_NEW, DOC_PREFIX, DOC_BODY };   /* the document in progress (configurations other than GPT-2's) */


void zt_tok_config_gpt2(zt_tok_config *c, uint32_t eot) {
    memset(c, 0, sizeof *c);
    c->model = ZT_TOK_MODEL_BYTES;
    c->normalizer = ZT_TOK_NORM_NONE;
    c->prefix = ZT_TOK_PREFIX_NONE;
    c->pretok = ZT_TOK_PRE_GPT2;
    c->eot = eot;
    c->doc_end = ZT_TOK_NO_EOT;
    c->cls = c->sep = c->pad = c->mask = ZT_TOK_NO_EOT;
}

/* ---------------------------------------------------------------- pre-tokenizer */

zt_pretok *zt_pretok_create_kind(zt_tok_pre kind, char *err, size_t errlen) {
    if ((unsigned)kind > ZT_TOK_PRE_QWEN2) {
        zt_errf(err, errlen, "pre-tokenizer kind %d has no regex", (int)kind);
        return NULL;
    }
    int ec;
    PCRE2_SIZE eo;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)PRETOK_RE[kind], PCRE2_ZERO_TERMINATED,
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

zt_pretok *zt_pretok_create(char *err, size_t errlen) { return zt_pretok_create_kind(ZT_TOK_PRE_GPT2, err, errlen); }

void zt_pretok_free(zt_pretok *p) {
    if (!p) return;
    pcre2_match_data_free(p->md);
    pcre2_code_free(p->re);
    free(p);
}

static void pend_put(zt_tokenizer *t, const void *s, size_t n) {
    if (!n) return;
    if (t->pend_n + n > t->pend_cap) {
        t->pend_cap = 2 * (t->pend_n + n) + 4096;
        t->pend = zt_realloc(t->pend, t->pend_cap);
    }
    memcpy(t->pend + t->pend_n, s, n);
    t->pend_n += n;
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


/* "<0xAB>", a byte-fallback token (upper: the form the model looks up; the decoder takes either case):
 * the byte, else -1 */
static int byte_token(const uint8_t *s, size_t n, int upper) {
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
    int v = 0;
    for (int k = 3; k < 5; k++) {
        const int c = s[k];
        const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10
                    : !upper && c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

static int has_mark(const uint8_t *s, size_t n, int at_end) {
    return n >= 3 && memcmp(at_end ? s + n - 3 : s, SPACE_MARK, 3) == 0;
}

static int check_config(const zt_tok_config *c, uint32_t vocab, char *err, size_t errlen) {
    if ((unsigned)c->model > ZT_TOK_MODEL_WORDPIECE || (unsigned)c->normalizer > ZT_TOK_NORM_BERT ||
        (unsigned)c->prefix > ZT_TOK_PREFIX_FIRST || (unsigned)c->pretok > ZT_TOK_PRE_BERT)
        return zt_errf(err, errlen, "unknown model, normalizer, prefix or pre-tokenizer kind");
    if ((c->model == ZT_TOK_MODEL_WORDPIECE) != (c->pretok == ZT_TOK_PRE_BERT) ||
        (c->normalizer == ZT_TOK_NORM_BERT && c->model != ZT_TOK_MODEL_WORDPIECE))
        return zt_errf(err, errlen, "the bert normalizer and pre-tokenizer go with a WordPiece model, and it with them");
    if (c->model == ZT_TOK_MODEL_BYTES && c->pretok == ZT_TOK_PRE_NONE)
        return zt_errf(err, errlen, "a byte-level model needs a pre-tokenizer (gpt2, llama3 or qwen2)");
    if (c->model == ZT_TOK_MODEL_CHARS && c->pretok != ZT_TOK_PRE_NONE)
        return zt_errf(err, errlen, "a byte-fallback (chars) model takes no pre-tokenizer");
    if (c->ignore_merges && c->model != ZT_TOK_MODEL_BYTES)
        return zt_errf(err, errlen, "ignore_merges needs the byte-level model");
    if (c->n_begin > ZT_TOK_MAX_TEMPLATE || c->n_end > ZT_TOK_MAX_TEMPLATE)
        return zt_errf(err, errlen, "more than %d template ids around a document", ZT_TOK_MAX_TEMPLATE);
    for (uint32_t k = 0; k < c->n_begin + c->n_end; k++) {
        uint32_t id = k < c->n_begin ? c->begin[k] : c->end[k - c->n_begin];
        if (id >= vocab) return zt_errf(err, errlen, "template id %u >= vocab size %u", id, vocab);
    }
    if (c->eot != ZT_TOK_NO_EOT && c->eot >= vocab)
        return zt_errf(err, errlen, "end-of-text id %u >= vocab size %u", c->eot, vocab);
    if (c->doc_end != ZT_TOK_NO_EOT && c->doc_end >= vocab)
        return zt_errf(err, errlen, "document-end id %u >= vocab size %u", c->doc_end, vocab);
    const uint32_t special[4] = {c->cls, c->sep, c->pad, c->mask};
    for (int k = 0; k < 4; k++)
        if (special[k] != ZT_TOK_NO_EOT && special[k] >= vocab)
            return zt_errf(err, errlen, "%s id %u >= vocab size %u", k == 0 ? "cls" : k == 1 ? "sep" : k == 2 ? "pad" :
                           "mask", special[k], vocab);
    return 0;
}

/* the chars model's tables: decoded bytes, byte-fallback ids, the character map, and what may be cut */
static int chars_init(zt_tokenizer *t, char *err, size_t errlen) {
    const uint32_t V = t->vocab;
    t->tok_off = zt_malloc((size_t)(V + 1) * sizeof *t->tok_off);
    t->tok_data = zt_malloc(t->mod_off[V] ? t->mod_off[V] : 1);
    uint64_t k = 0;
    for (uint32_t i = 0; i < V; i++) {
        size_t n;
        const uint8_t *s = mod_tok(t, i, &n);
        t->tok_off[i] = k;
        int b = byte_token(s, n, 0);
        if (b >= 0) {
            t->tok_data[k++] = (uint8_t)b;
            continue;
        }
        for (size_t j = 0; j < n;) {
            if (has_mark(s + j, n - j, 0)) {
                t->tok_data[k++] = ' ';
                j += 3;
            } else {
                t->tok_data[k++] = s[j++];
            }
        }
    }
    t->tok_off[V] = k;
    for (int b = 0; b < 256; b++) t->byte_id[b] = NO_ID;
    for (int c = 0; c < 128; c++) t->ascii_id[c] = NO_ID;
    t->space_id = NO_ID;
    t->chars = zt_hashmap_create(1024);
    for (uint32_t i = 0; i < V; i++) {
        size_t n;
        const uint8_t *s = mod_tok(t, i, &n);
        uint32_t cp;
        if (is_added(t, i) || n == 0) continue;
        int b = byte_token(s, n, 1);
        if (b >= 0 && t->byte_id[b] == NO_ID) t->byte_id[b] = i;
        if (zt_utf8_dec(s, n, &cp) != n) continue;
        if (cp < 128) {
            if (t->ascii_id[cp] == NO_ID) t->ascii_id[cp] = i;
        } else {
            zt_hashmap_put(t->chars, s, n, i, NULL);
        }
        if (cp == 0x2581 && t->space_id == NO_ID) t->space_id = i;
    }
    for (int b = 0; b < 256; b++)
        if (t->byte_id[b] == NO_ID)
            return zt_errf(err, errlen, "no byte-fallback token <0x%02X> (byte fallback needs all 256, <0x00>..<0xFF>)", b);
    return 0;
}

/* chars model: the first "units" (a character, or a byte token <0xAB>) of the right-hand tokens of the
 * merges. A word may be cut before a unit no merge can join to what precedes it; and before a space
 * that follows a non-space when no merge joins a token ending in a non-space to one starting with
 * "\u2581" (cut_safe). A unit that some merge joins leftwards is marked: bit 32 of the character
 * map's value, join_ascii (an ASCII character: its token, or its byte token when it has none) and
 * join_byte (the byte token <0xAB>). */
#define JOINS (1ull << 32)
typedef struct joins {
    uint8_t ascii[128], byte[256];
} joins;

static void chars_cuts(zt_tokenizer *t, joins *j) {
    memset(j, 0, sizeof *j);
    t->cut_safe = t->space_id != NO_ID;
    for (uint32_t r = 0; r < t->n_merges; r++) {
        size_t na, nb;
        const uint8_t *a = mod_tok(t, t->merges[r][0], &na), *b = mod_tok(t, t->merges[r][1], &nb);
        if (!has_mark(a, na, 1) && has_mark(b, nb, 0)) t->cut_safe = 0;
        uint32_t cp;
        size_t len = nb ? zt_utf8_dec(b, nb, &cp) : 0;
        if (len == 1) j->ascii[cp] = 1;
        else if (len > 1) {
            uint64_t *v = zt_hashmap_get(t->chars, b, len);
            if (v) *v |= JOINS;
        }
        int bt = nb >= 6 ? byte_token(b, 6, 1) : -1;
        if (bt >= 0) j->byte[bt] = 1;
    }
}

zt_tokenizer *zt_tokenizer_create_cfg(const zt_tok_config *cfg, uint32_t vocab_size, const uint8_t *const *toks,
                                      const uint32_t *lens, uint32_t n_merges, const uint32_t (*merges)[3],
                                      char *err, size_t errlen) {
    const int wp = cfg->model == ZT_TOK_MODEL_WORDPIECE;
    if (vocab_size < (wp ? 1u : 256u) || vocab_size > ZT_TOK_MAX_VOCAB) {
        zt_errf(err, errlen, "vocab size %u out of range (expected %u..%u)", vocab_size, wp ? 1u : 256u, ZT_TOK_MAX_VOCAB);
        return NULL;
    }
    if (check_config(cfg, vocab_size, err, errlen)) return NULL;
    zt_tokenizer *t = zt_calloc(1, sizeof *t);
    t->vocab = vocab_size;
    t->cfg = *cfg;
    if (cfg->added) {
        t->added = zt_malloc(vocab_size);
        memcpy(t->added, cfg->added, vocab_size);
    }
    t->cfg.added = t->added;
    const int chars = cfg->model == ZT_TOK_MODEL_CHARS;
    uint64_t *off = zt_malloc((size_t)(vocab_size + 1) * sizeof *off);
    uint64_t total = 0;
    for (uint32_t i = 0; i < vocab_size; i++) total += toks[i] ? lens[i] : 0;
    uint8_t *data = zt_malloc(total ? total : 1);
    total = 0;
    for (uint32_t i = 0; i < vocab_size; i++) {
        uint32_t len = toks[i] ? lens[i] : 0;
        off[i] = total;
        if (len) memcpy(data + total, toks[i], len);
        total += len;
    }
    off[vocab_size] = total;
    if (chars || wp) {
        t->mod_off = off;
        t->mod_data = data;
        if (wp && n_merges) {
            zt_errf(err, errlen, "a WordPiece model has no merges (got %u)", n_merges);
            goto fail;
        }
        if (chars ? chars_init(t, err, errlen) : zt_wp_init(t, err, errlen)) goto fail;
    } else {
        t->tok_off = off;
        t->tok_data = data;
        for (uint32_t b = 0; b < 256; b++) t->byte_id[b] = NO_ID;
        for (uint32_t i = 0; i < vocab_size; i++)
            if (off[i + 1] - off[i] == 1 && t->byte_id[data[off[i]]] == NO_ID && i != cfg->eot && !is_added(t, i))
                t->byte_id[data[off[i]]] = i;
        for (uint32_t b = 0; b < 256; b++) {
            if (t->byte_id[b] == NO_ID) {
                zt_errf(err, errlen, "no token for the single byte 0x%02x (a byte-level BPE vocab has all 256)", b);
                goto fail;
            }
        }
    }
    t->ranks = zt_hashmap_create(2 * (size_t)n_merges + 2);
    t->merges = zt_malloc((n_merges ? n_merges : 1) * sizeof *t->merges);
    for (uint32_t r = 0; r < n_merges; r++) {
        uint32_t a = merges[r][0], b = merges[r][1], c = merges[r][2];
        if (a >= vocab_size || b >= vocab_size || c >= vocab_size) {
            zt_errf(err, errlen, "merge %u (%u %u -> %u) uses an id >= vocab size %u", r, a, b, c, vocab_size);
            goto fail;
        }
        size_t la, lb, lc;
        const uint8_t *sa = mod_tok(t, a, &la), *sb = mod_tok(t, b, &lb), *sc = mod_tok(t, c, &lc);
        if (lc != la + lb || la == 0 || lb == 0 || memcmp(sc, sa, la) != 0 || memcmp(sc + la, sb, lb) != 0) {
            zt_errf(err, errlen, "merge %u (%u %u -> %u): the result's bytes are not the two tokens' bytes joined",
                    r, a, b, c);
            goto fail;
        }
        t->merges[r][0] = a;
        t->merges[r][1] = b;
        t->merges[r][2] = c;
        zt_hashmap_put_u64(t->ranks, (uint64_t)a << 32 | b, r, NULL); /* a repeated pair keeps its first rank */
    }
    t->n_merges = n_merges;
    if (chars) {
        joins j;
        chars_cuts(t, &j);
        for (int c = 0; c < 128; c++) t->join_ascii[c] = (uint8_t)(t->ascii_id[c] != NO_ID ? j.ascii[c] : j.byte[c]);
        memcpy(t->join_byte, j.byte, sizeof j.byte);
    }
    if (cfg->ignore_merges) {
        t->words = zt_hashmap_create(2 * (size_t)vocab_size);
        for (uint32_t i = 0; i < vocab_size; i++) {
            size_t n;
            const uint8_t *s = mod_tok(t, i, &n);
            if (n && !is_added(t, i)) zt_hashmap_put(t->words, s, n, i, NULL);
        }
    }
    if (cfg->pretok != ZT_TOK_PRE_NONE && cfg->pretok != ZT_TOK_PRE_BERT &&
        !(t->pre = zt_pretok_create_kind(cfg->pretok, err, errlen)))
        goto fail;
    if (cfg->normalizer == ZT_TOK_NORM_NFC) t->nfc = zt_nfc_create();
    t->simple = !chars && cfg->normalizer == ZT_TOK_NORM_NONE && cfg->prefix == ZT_TOK_PREFIX_NONE &&
                cfg->pretok == ZT_TOK_PRE_GPT2 && !cfg->ignore_merges && !cfg->strip_space && !cfg->n_begin &&
                !cfg->n_end && cfg->doc_end == ZT_TOK_NO_EOT;
    return t;
fail:
    zt_tokenizer_free(t);
    return NULL;
}

zt_tokenizer *zt_tokenizer_create(uint32_t vocab_size, const uint8_t *const *toks, const uint32_t *lens,
                                  uint32_t n_merges, const uint32_t (*merges)[3], uint32_t eot,
                                  char *err, size_t errlen) {
    zt_tok_config c;
    zt_tok_config_gpt2(&c, eot);
    return zt_tokenizer_create_cfg(&c, vocab_size, toks, lens, n_merges, merges, err, errlen);
}

void zt_tokenizer_free(zt_tokenizer *t) {
    if (!t) return;
    free(t->added);
    free(t->tok_off);
    free(t->tok_data);
    free(t->mod_off);
    free(t->mod_data);
    free(t->merges);
    zt_hashmap_free(t->chars);
    zt_hashmap_free(t->words);
    zt_hashmap_free(t->ranks);
    zt_nfc_free(t->nfc);
    zt_pretok_free(t->pre);
    zt_wp_free(t->wp);
    free(t->pend);
    zt_hashmap_free(t->cache);
    free(t->cvals);
    free(t->sym);
    free(t->nxt);
    free(t->prv);
    free(t->heap);
    free(t);
}

uint32_t zt_tokenizer_vocab_size(const zt_tokenizer *t) { return t->vocab; }
uint32_t zt_tokenizer_eot(const zt_tokenizer *t) { return t->cfg.eot; }
uint32_t zt_tokenizer_n_merges(const zt_tokenizer *t) { return t->n_merges; }
uint32_t zt_tokenizer_doc_end(const zt_tokenizer *t) { return t->cfg.doc_end; }
const zt_tok_config *zt_tokenizer_config(const zt_tokenizer *t) { return &t->cfg; }

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

static void bpe_scratch(zt_tokenizer *t, size_t n) {
    if (n <= t->scratch_cap) return;
    t->scratch_cap = n;
    t->sym = zt_realloc(t->sym, n * sizeof *t->sym);
    t->nxt = zt_realloc(t->nxt, n * sizeof *t->nxt);
    t->prv = zt_realloc(t->prv, n * sizeof *t->prv);
    t->heap = zt_realloc(t->heap, 2 * n * sizeof *t->heap);
}

/* BPE of the n initial symbols in t->sym: the lowest-rank adjacent pair first, ties by position (a
 * min-heap keyed rank<<32|position; stale entries are skipped when popped), as Hugging Face does */
static void bpe_run(zt_tokenizer *t, size_t n, zt_ids *out) {
    uint32_t *sym = t->sym;
    if (n == 1) {
        zt_ids_push(out, sym[0]);
        return;
    }
    int32_t *nxt = t->nxt, *prv = t->prv;
    uint64_t *heap = t->heap;
    size_t hn = 0;
    for (size_t i = 0; i < n; i++) {
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
        if (sym[i] == NO_ID || j < 0 || merge_rank(t, sym[i], sym[j]) != (int)r) continue;
        sym[i] = t->merges[r][2];
        sym[j] = NO_ID; /* dead */
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

/* byte-level: one symbol per byte */
static void bpe_bytes(zt_tokenizer *t, const uint8_t *w, size_t n, zt_ids *out) {
    if (n == 1) {
        zt_ids_push(out, t->byte_id[w[0]]);
        return;
    }
    bpe_scratch(t, n);
    for (size_t i = 0; i < n; i++) t->sym[i] = t->byte_id[w[i]];
    bpe_run(t, n, out);
}

/* chars model: one symbol per character (a space and U+2581 are "\u2581"), byte tokens for a character
 * outside the vocab and for an invalid byte */
static void bpe_chars(zt_tokenizer *t, const uint8_t *w, size_t n, zt_ids *out) {
    bpe_scratch(t, 3 * n);
    uint32_t *sym = t->sym;
    size_t m = 0;
    for (size_t i = 0; i < n;) {
        const uint8_t c = w[i];
        const uint8_t *bytes = w + i;
        uint32_t id = NO_ID, cp;
        size_t len = 1, nb = 1;
        if (c == ' ') {
            id = t->space_id;
            bytes = (const uint8_t *)SPACE_MARK;
            nb = 3;
        } else if (c < 0x80) {
            id = t->ascii_id[c];
        } else if ((len = zt_utf8_dec(w + i, n - i, &cp)) == 0) {
            len = 1;
        } else {
            nb = len;
            if (cp == 0x2581) {
                id = t->space_id;
            } else {
                const uint64_t *v = zt_hashmap_get(t->chars, w + i, len);
                if (v) id = (uint32_t)*v;
            }
        }
        if (id != NO_ID) sym[m++] = id;
        else
            for (size_t k = 0; k < nb; k++) sym[m++] = t->byte_id[bytes[k]];
        i += len;
    }
    if (m) bpe_run(t, m, out);
}

/* the ids of one pre-token (or word) */
static void word_ids(zt_tokenizer *t, const uint8_t *w, size_t n, zt_ids *out) {
    if (t->cfg.model != ZT_TOK_MODEL_BYTES) {
        (t->wp ? zt_wp_word : bpe_chars)(t, w, n, out);
        return;
    }
    if (t->words) { /* ignore_merges: a pre-token that is a token is that token */
        const uint64_t *v = zt_hashmap_get(t->words, w, n);
        if (v) {
            zt_ids_push(out, (uint32_t)*v);
            return;
        }
    }
    bpe_bytes(t, w, n, out);
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

int zt_tok_encode_word(const uint8_t *w, size_t n, void *ctx) {
    zt_tokenizer *t = ((encode_ctx *)ctx)->t;
    zt_ids *out = ((encode_ctx *)ctx)->out;
    if (n == 0) return 0;
    if (n > CACHE_MAX_WORD) {
        word_ids(t, w, n, out);
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
    word_ids(t, w, n, out);
    cache_insert(t, w, n, out->v + start, out->n - start);
    return 0;
}

/* chars model without a pre-tokenizer: the first position after pos where the document may be cut
 * (chars_cuts), or n. A character cut by the end of a non-final buffer is never a cut point. */
static size_t seg_next(const zt_tokenizer *t, const uint8_t *b, size_t pos, size_t n) {
    uint32_t cp0;
    const size_t len0 = zt_utf8_dec(b + pos, n - pos, &cp0);
    for (size_t i = pos + (len0 ? len0 : 1); i < n;) {
        const uint8_t c = b[i];
        if (c < 0x80) {
            if (c == ' ') {
                if (t->cut_safe && b[i - 1] != ' ' && !(i >= pos + 3 && has_mark(b + i - 3, 3, 0))) return i;
            } else if (!t->join_ascii[c]) {
                return i;
            }
            i++;
            continue;
        }
        uint32_t cp;
        size_t len = zt_utf8_dec(b + i, n - i, &cp);
        if (!len) {
            if (zt_utf8_whole(b, n) <= i) return n; /* a character cut by the end */
            if (!t->join_byte[c]) return i;
            i++;
            continue;
        }
        if (cp == 0x2581) {
            if (t->cut_safe && b[i - 1] != ' ' && !(i >= pos + 3 && has_mark(b + i - 3, 3, 0))) return i;
        } else {
            const uint64_t *v = zt_hashmap_get(t->chars, b + i, len);
            if (v ? !(*v & JOINS) : !t->join_byte[c]) return i;
        }
        i += len;
    }
    return n;
}

/* the words of a chars model's document: cut where seg_next allows; the last one waits for more text
 * (when not final) unless it is longer than ZT_PRETOK_MAX_CARRY */
static size_t seg_split(zt_tokenizer *t, const uint8_t *b, size_t n, int final, encode_ctx *c) {
    size_t pos = 0;
    while (pos < n) {
        size_t q = seg_next(t, b, pos, n);
        if (q == n && !final) {
            if (n - pos <= ZT_PRETOK_MAX_CARRY) return pos;
            q = pos + ZT_PRETOK_MAX_CARRY;
            while (q > pos + 1 && (b[q] & 0xC0) == 0x80) q--;
        }
        zt_tok_encode_word(b + pos, q - pos, c);
        pos = q;
    }
    return pos;
}

void zt_tokenizer_reset(zt_tokenizer *t) {
    t->doc = DOC_NEW;
    t->pend_n = 0;
    if (t->wp) zt_wp_reset(t->wp);
}

/* a configuration other than GPT-2's: template ids, prefix, normalizer into the pending text, which
 * is then pre-tokenized (or cut into words) and encoded; returns the bytes of text consumed */
static size_t encode_doc_chunk(zt_tokenizer *t, const uint8_t *text, size_t n, int final, zt_ids *out) {
    const zt_tok_config *c = &t->cfg;
    if (t->doc == DOC_NEW) {
        for (uint32_t k = 0; k < c->n_begin; k++) zt_ids_push(out, c->begin[k]);
        t->doc = DOC_PREFIX;
    }
    if (t->doc == DOC_PREFIX) {
        int decided = 1, put = 0;
        if (c->prefix == ZT_TOK_PREFIX_NONEMPTY) {
            if (n) put = 1;
            else decided = final;
        } else if (c->prefix == ZT_TOK_PREFIX_FIRST) {
            if (n == 0) decided = final;
            else if (text[0] == ' ') put = 0;
            else if (n < 3 && !final && memcmp(text, SPACE_MARK, n) == 0) decided = 0;
            else put = !has_mark(text, n, 0);
        }
        if (!decided) return 0;
        if (put) pend_put(t, " ", 1);
        t->doc = DOC_BODY;
    }
    size_t cut = n;
    if (c->normalizer == ZT_TOK_NORM_NFC) {
        if (!final) cut = zt_nfc_cut(text, n);
        zt_nfc_append(t->nfc, text, cut, &t->pend, &t->pend_n, &t->pend_cap);
    } else {
        pend_put(t, text, n);
    }
    encode_ctx e = {t, out};
    size_t used = t->pre ? zt_pretok_split(t->pre, t->pend, t->pend_n, final, zt_tok_encode_word, &e)
                         : seg_split(t, t->pend, t->pend_n, final, &e);
    if (used) memmove(t->pend, t->pend + used, t->pend_n - used);
    t->pend_n -= used;
    if (final) {
        for (uint32_t k = 0; k < c->n_end; k++) zt_ids_push(out, c->end[k]);
        zt_tokenizer_reset(t);
    }
    return cut;
}

size_t zt_tokenizer_encode_chunk(zt_tokenizer *t, const uint8_t *text, size_t n, int final, zt_ids *out) {
    encode_ctx c = {t, out};
    if (t->wp) {
        const size_t done = zt_wp_encode_chunk(t, text, n, final, out, zt_tok_encode_word, &c);
        if (final) zt_tokenizer_reset(t);
        return done;
    }
    if (!t->simple) return encode_doc_chunk(t, text, n, final, out);
    return zt_pretok_split(t->pre, text, n, final, zt_tok_encode_word, &c);
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
    if (t->wp) {
        zt_wp_decode(t, ids, n, out, out_len);
        return 0;
    }
    uint8_t *o = zt_realloc(*out, need ? need : 1);
    size_t k = *out_len;
    for (size_t i = 0; i < n; i++) {
        size_t len = (size_t)(t->tok_off[ids[i] + 1] - t->tok_off[ids[i]]);
        memcpy(o + k, t->tok_data + t->tok_off[ids[i]], len);
        k += len;
    }
    if (t->cfg.strip_space && k > *out_len && o[*out_len] == ' ') { /* Llama's Strip decoder */
        memmove(o + *out_len, o + *out_len + 1, k - *out_len - 1);
        k--;
    }
    *out = o;
    *out_len = k;
    return 0;
}
