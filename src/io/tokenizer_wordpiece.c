/* tokenizer_wordpiece.c — WordPiece tokenizers (BERT) with the ids of Hugging Face tokenizers: the
 * BertNormalizer (clean_text, handle_chinese_chars, strip_accents, lowercase), the BertPreTokenizer
 * (whitespace, and every punctuation character alone), the WordPiece model (greedy longest match first, the
 * continuing pieces spelled with the "##" prefix; a word longer than max_input_chars_per_word, or with a
 * part no token matches, is one [UNK]) and the WordPiece decoder (pieces joined, spaces between words, HF's
 * cleanup). The rules are at the top of tokenizer.h; the character data (categories, White_Space, NFD,
 * lowercase as HF has them) is util/unicode.h's. tokenizer.c calls in here for a WordPiece configuration
 * (construction, encode, decode; the word cache is its), tokenizer_file.c for the .zttok lines of version 3,
 * and tokenizer_hf*.c reads a tokenizer.json's WordPiece sections into the zt_tok_config.
 *
 * Encoding streams: the normalizer runs over stretches of text that end before a "barrier" character (one
 * whose NFD starts with a starter and that clean_text keeps), so canonical reordering never crosses a
 * stretch; the pre-tokenizer and the model keep the word in progress (its normalized UTF-8 in the
 * tokenizer's pend buffer) across stretches and calls. A word longer than max_word_chars characters is
 * counted, not kept: it is one [UNK] whatever follows.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "io/tokenizer_internal.h"
#include "util/hashmap.h"
#include "util/unicode.h"
#include "util/util.h"

#include <stdlib.h>
#include <string.h>

/* normalize at most this much text at once (scratch: 4 code points a byte); text that has no barrier in
 * this many bytes (a run of combining marks) is cut anyway */
#define WP_BLOCK (64u << 10)

struct zt_wp {
    zt_hashmap *vocab;          /* a model token's string -> id */
    size_t max_len[2];          /* the longest token in bytes; the longest continuation without its prefix */
    size_t prefix_len;
    uint8_t *key;               /* prefix + piece */
    size_t key_cap;
    /* the word in progress (its bytes are t->pend) */
    zt_pretok_fn emit;          /* encodes a finished word (the caller's word cache), set per zt_wp_encode_chunk */
    void *emit_ctx;
    uint32_t word_chars;
    int overlong;
    /* scratch: code points after clean_text / chinese, after NFD, classes */
    uint32_t *a, *b, *tmp;
    uint8_t *cc;
    size_t cap;
};

/* HF's is_chinese_char: the CJK ideograph blocks (its own list, not Unicode data) */
static int is_cjk(uint32_t cp) {
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
           (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

/* zt_uni_bert_class, with ASCII inline: the ASCII symbols are punctuation for BERT (Rust's
 * is_ascii_punctuation) */
static unsigned char_class(uint32_t cp) {
    if (cp >= 0x80) return zt_uni_bert_class(cp);
    if (cp < 0x20 || cp == 0x7F) return ZT_UNI_OTHER | (cp >= 9 && cp <= 13 ? ZT_UNI_SPACE : 0);
    if (cp == ' ') return ZT_UNI_SPACE;
    return (cp >= '0' && cp <= '9') || ((cp | 32) >= 'a' && (cp | 32) <= 'z') ? 0 : ZT_UNI_PUNCT;
}

/* what clean_text drops */
static int cleaned_away(uint32_t cp) {
    return cp == 0 || cp == 0xFFFD || ((char_class(cp) & ZT_UNI_OTHER) && cp != '\t' && cp != '\n' && cp != '\r');
}

/* ---------------------------------------------------------------- the decoder's cleanup */

static const char *const CLEANUP[][2] = {
    {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"},
    {" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"},
};

/* HF's cleanup of one token's text, in place (every replacement is no longer than what it replaces): each
 * pair in turn, every occurrence left to right; returns the new length */
static size_t cleanup(uint8_t *s, size_t n) {
    for (size_t r = 0; r < sizeof CLEANUP / sizeof *CLEANUP; r++) {
        const size_t pl = strlen(CLEANUP[r][0]), rl = strlen(CLEANUP[r][1]);
        size_t w = 0;
        for (size_t i = 0; i < n;) {
            if (i + pl <= n && memcmp(s + i, CLEANUP[r][0], pl) == 0) {
                memmove(s + w, CLEANUP[r][1], rl);
                w += rl;
                i += pl;
            } else {
                s[w++] = s[i++];
            }
        }
        n = w;
    }
    return n;
}

/* ---------------------------------------------------------------- construction */

/* the vocabulary (model tokens), the longest pieces, and what decode writes for a token after another:
 * a continuation without its prefix, any other token after a space, then the cleanup */
int zt_wp_init(zt_tokenizer *t, char *err, size_t errlen) {
    const zt_tok_config *c = &t->cfg;
    const uint32_t V = t->vocab;
    if (c->unk >= V) return zt_errf(err, errlen, "the unknown token's id %u is not below the vocab size %u", c->unk, V);
    if (c->prefix != ZT_TOK_PREFIX_NONE || c->strip_space || c->n_begin || c->n_end || c->doc_end != ZT_TOK_NO_EOT ||
        (c->normalizer != ZT_TOK_NORM_NONE && c->normalizer != ZT_TOK_NORM_BERT) || c->bert > 15 ||
        (c->normalizer == ZT_TOK_NORM_NONE && c->bert) || c->max_word_chars > ZT_TOK_MAX_WORD_CHARS ||
        memchr(c->subword_prefix, 0, sizeof c->subword_prefix) == NULL)
        return zt_errf(err, errlen, "a WordPiece configuration has no prefix, template, document end or strip_space, "
                       "normalizer bert or none, and max_word_chars <= %u", ZT_TOK_MAX_WORD_CHARS);
    if ((c->cls != ZT_TOK_NO_EOT && c->cls >= V) || (c->sep != ZT_TOK_NO_EOT && c->sep >= V))
        return zt_errf(err, errlen, "[CLS] or [SEP] id not below the vocab size %u", V);
    struct zt_wp *w = t->wp = zt_calloc(1, sizeof *w);
    const size_t pl = w->prefix_len = strlen(c->subword_prefix);
    w->vocab = zt_hashmap_create(2 * (size_t)V + 2);
    size_t total = 0;
    for (uint32_t i = 0; i < V; i++) {
        size_t n;
        const uint8_t *s = mod_tok(t, i, &n);
        total += n + 1;
        if (is_added(t, i) || n == 0) continue;
        zt_hashmap_put(w->vocab, s, n, i, NULL);
        if (n > w->max_len[0]) w->max_len[0] = n;
        if (n > pl && memcmp(s, c->subword_prefix, pl) == 0 && n - pl > w->max_len[1]) w->max_len[1] = n - pl;
    }
    t->tok_off = zt_malloc((size_t)(V + 1) * sizeof *t->tok_off);
    t->tok_data = zt_malloc(total ? total : 1);
    uint64_t k = 0;
    for (uint32_t i = 0; i < V; i++) {
        size_t n;
        const uint8_t *s = mod_tok(t, i, &n);
        const uint64_t at = t->tok_off[i] = k;
        if (n >= pl && memcmp(s, c->subword_prefix, pl) == 0) {
            s += pl;
            n -= pl;
        } else {
            t->tok_data[k++] = ' ';
        }
        memcpy(t->tok_data + k, s, n);
        k += n;
        if (c->decode_cleanup) k = at + cleanup(t->tok_data + at, (size_t)(k - at));
    }
    t->tok_off[V] = k;
    return 0;
}

void zt_wp_free(struct zt_wp *w) {
    if (!w) return;
    zt_hashmap_free(w->vocab);
    free(w->key);
    free(w->a);
    free(w->b);
    free(w->tmp);
    free(w->cc);
    free(w);
}

void zt_wp_reset(struct zt_wp *w) {
    w->word_chars = 0;
    w->overlong = 0;
}

/* ---------------------------------------------------------------- the model */

/* greedy longest match first: from each position the longest vocab token (with the prefix after the
 * first piece); no match anywhere makes the whole word one unk */
void zt_wp_word(zt_tokenizer *t, const uint8_t *w, size_t n, zt_ids *out) {
    struct zt_wp *p = t->wp;
    const size_t first = out->n, pl = p->prefix_len;
    if (pl + n > p->key_cap) {
        p->key_cap = 2 * (pl + n) + 64;
        p->key = zt_realloc(p->key, p->key_cap);
    }
    memcpy(p->key, t->cfg.subword_prefix, pl);
    for (size_t start = 0; start < n;) {
        const int cont = start > 0;
        size_t end = n - start > p->max_len[cont] ? start + p->max_len[cont] : n;
        while (end > start && end < n && (w[end] & 0xC0) == 0x80) end--; /* a character boundary */
        const uint64_t *id = NULL;
        while (end > start) {
            if (cont) memcpy(p->key + pl, w + start, end - start);
            if ((id = zt_hashmap_get(p->vocab, cont ? p->key : w + start, end - start + (cont ? pl : 0)))) break;
            do end--; while (end > start && (w[end] & 0xC0) == 0x80);
        }
        if (!id) {
            out->n = first;
            zt_ids_push(out, t->cfg.unk);
            return;
        }
        zt_ids_push(out, (uint32_t)*id);
        start = end;
    }
}

/* ---------------------------------------------------------------- normalizer and pre-tokenizer */

/* the word in progress is done: its ids (one unk when it is too long) */
static void flush(zt_tokenizer *t, zt_ids *out) {
    struct zt_wp *w = t->wp;
    if (w->overlong) {
        zt_ids_push(out, t->cfg.unk);
    } else if (t->pend_n) {
        w->emit(t->pend, t->pend_n, w->emit_ctx);
    }
    t->pend_n = 0;
    zt_wp_reset(w);
}

/* the pre-tokenizer, one normalized character at a time */
static void feed(zt_tokenizer *t, uint32_t cp, zt_ids *out) {
    struct zt_wp *w = t->wp;
    const unsigned cls = char_class(cp);
    uint8_t b[4];
    const size_t len = zt_utf8_enc(cp, b);
    if (cls & (ZT_UNI_SPACE | ZT_UNI_PUNCT)) {
        flush(t, out);
        if (cls & ZT_UNI_PUNCT) w->emit(b, len, w->emit_ctx);
        return;
    }
    if (w->overlong) return;
    if (++w->word_chars > t->cfg.max_word_chars) {
        w->overlong = 1;
        t->pend_n = 0;
        return;
    }
    if (t->pend_n + len > t->pend_cap) {
        t->pend_cap = 2 * (t->pend_n + len) + 256;
        t->pend = zt_realloc(t->pend, t->pend_cap);
    }
    memcpy(t->pend + t->pend_n, b, len);
    t->pend_n += len;
}

/* whether the text may be cut before cp: nothing before it changes with what follows */
static int barrier(const zt_tokenizer *t, uint32_t cp) {
    if ((t->cfg.bert & ZT_TOK_BERT_CLEAN) && cleaned_away(cp)) return 0;
    return !(t->cfg.bert & ZT_TOK_BERT_STRIP) || zt_nfd9_starter(cp);
}

/* where s[0..n) may be cut (after position 0), more text following: before its last barrier, or 0 when
 * there is none; n >= WP_BLOCK without a barrier is cut anyway (before a character cut by the end) */
static size_t cut_at(const zt_tokenizer *t, const uint8_t *s, size_t n) {
    size_t i = zt_utf8_whole(s, n);
    if (!(t->cfg.bert & (ZT_TOK_BERT_CLEAN | ZT_TOK_BERT_STRIP))) return i;
    while (i > 0) {
        size_t p = i - 1;
        while (p > 0 && i - p < 4 && (s[p] & 0xC0) == 0x80) p--;
        uint32_t cp;
        if (zt_utf8_dec(s + p, i - p, &cp) != i - p) { /* an invalid byte: U+FFFD */
            p = i - 1;
            cp = 0xFFFD;
        }
        if (p > 0 && barrier(t, cp)) return p;
        i = p;
    }
    return n >= WP_BLOCK ? zt_utf8_whole(s, n) : 0;
}

/* normalizes s[0..n) (a stretch that starts and ends at barriers, or the document's ends) and feeds it to
 * the pre-tokenizer */
static void stretch(zt_tokenizer *t, const uint8_t *s, size_t n, zt_ids *out) {
    struct zt_wp *w = t->wp;
    const uint32_t f = t->cfg.bert;
    if (4 * n + 4 > w->cap) {
        w->cap = 4 * n + 64;
        w->a = zt_realloc(w->a, w->cap * sizeof *w->a);
        w->b = zt_realloc(w->b, w->cap * sizeof *w->b);
        w->tmp = zt_realloc(w->tmp, w->cap * sizeof *w->tmp);
        w->cc = zt_realloc(w->cc, w->cap);
    }
    uint32_t *a = w->a;
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t len = zt_utf8_dec(s + i, n - i, &cp);
        if (!len) {
            len = 1;
            cp = 0xFFFD;
        }
        i += len;
        if (f & ZT_TOK_BERT_CLEAN) {
            if (cleaned_away(cp)) continue;
            if (char_class(cp) & ZT_UNI_SPACE) cp = ' ';
        }
        if ((f & ZT_TOK_BERT_CHINESE) && is_cjk(cp)) {
            a[k++] = ' ';
            a[k++] = cp;
            cp = ' ';
        }
        a[k++] = cp;
    }
    if (f & ZT_TOK_BERT_STRIP) { /* NFD, then no nonspacing marks */
        const size_t m = zt_nfd9(a, k, w->b, w->cc, w->tmp);
        k = 0;
        for (size_t i = 0; i < m; i++)
            if (w->b[i] < 0x300 || !(zt_uni_bert_class(w->b[i]) & ZT_UNI_MN)) a[k++] = w->b[i];
    }
    for (size_t i = 0; i < k; i++) {
        uint32_t lo[2];
        const size_t m = f & ZT_TOK_BERT_LOWER ? zt_uni_lower(a[i], lo) : (lo[0] = a[i], 1);
        for (size_t j = 0; j < m; j++) feed(t, lo[j], out);
    }
}

size_t zt_wp_encode_chunk(zt_tokenizer *t, const uint8_t *text, size_t n, int final, zt_ids *out, zt_pretok_fn emit,
                          void *ctx) {
    t->wp->emit = emit;
    t->wp->emit_ctx = ctx;
    size_t done = 0;
    while (done < n) {
        const size_t m = n - done;
        const int whole = final && m <= WP_BLOCK;
        const size_t take = whole ? m : cut_at(t, text + done, m < WP_BLOCK ? m : WP_BLOCK);
        if (take == 0) break;
        stretch(t, text + done, take, out);
        done += take;
    }
    if (final) flush(t, out); /* the caller then starts a new document (zt_tokenizer_reset) */
    return done;
}

/* ---------------------------------------------------------------- decode */

void zt_wp_decode(const zt_tokenizer *t, const uint32_t *ids, size_t n, uint8_t **out, size_t *out_len) {
    size_t need = *out_len, first = 0;
    const uint8_t *s = n ? mod_tok(t, ids[0], &first) : NULL;
    need += first;
    for (size_t i = 1; i < n; i++) need += (size_t)(t->tok_off[ids[i] + 1] - t->tok_off[ids[i]]);
    uint8_t *o = zt_realloc(*out, need ? need : 1);
    size_t k = *out_len;
    if (n) { /* the first token as it is (the cleanup aside) */
        memcpy(o + k, s, first);
        k += t->cfg.decode_cleanup ? cleanup(o + k, first) : first;
    }
    for (size_t i = 1; i < n; i++) {
        const size_t len = (size_t)(t->tok_off[ids[i] + 1] - t->tok_off[ids[i]]);
        memcpy(o + k, t->tok_data + t->tok_off[ids[i]], len);
        k += len;
    }
    *out = o;
    *out_len = k;
}

/* ---------------------------------------------------------------- .zttok lines */

void zt_wp_save_lines(FILE *f, const zt_tok_config *c) {
    fprintf(f, "wordpiece %u %u %d ", c->unk, c->max_word_chars, c->decode_cleanup != 0);
    if (!c->subword_prefix[0]) fputc('-', f);
    for (const char *p = c->subword_prefix; *p; p++) fprintf(f, "%02x", (unsigned)(uint8_t)*p);
    fprintf(f, "\nbert %d %d %d %d\nspecial %lld %lld\n", (c->bert & ZT_TOK_BERT_CLEAN) != 0,
            (c->bert & ZT_TOK_BERT_CHINESE) != 0, (c->bert & ZT_TOK_BERT_STRIP) != 0, (c->bert & ZT_TOK_BERT_LOWER) != 0,
            c->cls == ZT_TOK_NO_EOT ? -1LL : (long long)c->cls, c->sep == ZT_TOK_NO_EOT ? -1LL : (long long)c->sep);
}

int zt_wp_read_line(int k, const char *line, zt_tok_config *c, uint32_t vocab) {
    int used = 0;
    if (k == 0) {
        unsigned unk, maxc, clean;
        char hex[2 * sizeof c->subword_prefix + 2];
        if (sscanf(line, "wordpiece %u %u %u %33s%n", &unk, &maxc, &clean, hex, &used) != 4 || line[used] ||
            unk >= vocab || maxc > ZT_TOK_MAX_WORD_CHARS || clean > 1)
            return 1;
        const size_t hl = strcmp(hex, "-") == 0 ? 0 : strlen(hex);
        if (hl % 2 || hl / 2 >= sizeof c->subword_prefix) return 1;
        memset(c->subword_prefix, 0, sizeof c->subword_prefix);
        for (size_t i = 0; i < hl / 2; i++) {
            unsigned v;
            if (sscanf(hex + 2 * i, "%2x", &v) != 1 || v == 0) return 1;
            c->subword_prefix[i] = (char)v;
        }
        c->unk = unk;
        c->max_word_chars = maxc;
        c->decode_cleanup = (int)clean;
        return 0;
    }
    if (k == 1) {
        unsigned v[4];
        if (sscanf(line, "bert %u %u %u %u%n", &v[0], &v[1], &v[2], &v[3], &used) != 4 || line[used]) return 1;
        c->bert = 0;
        for (int i = 0; i < 4; i++) {
            if (v[i] > 1) return 1;
            c->bert |= v[i] << i;
        }
        return 0;
    }
    long long cls, sep;
    if (sscanf(line, "special %lld %lld%n", &cls, &sep, &used) != 2 || line[used] || cls < -1 || sep < -1 ||
        cls >= (long long)vocab || sep >= (long long)vocab)
        return 1;
    c->cls = cls < 0 ? ZT_TOK_NO_EOT : (uint32_t)cls;
    c->sep = sep < 0 ? ZT_TOK_NO_EOT : (uint32_t)sep;
    return 0;
}
