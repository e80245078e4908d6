/* tokenizer_hf.c — tokenizer files from elsewhere: Hugging Face tokenizers (tokenizer.json, or a
 * GPT-2 style vocab.json + merges.txt), and zt_tokenizer_load, which tells a ztrain .zttok file (read
 * by tokenizer_file.c) from these. Builds on tokenizer.c (zt_tokenizer_create_cfg), never the other way
 * round. This file builds the tokenizer from the tables tokenizer_hf_read.c reads (vocabulary, merges, added tokens);
 * tokenizer_hf_config.c reads the sections below.
 *
 * The document is parsed by util/json. A tokenizer.json's normalizer, pre_tokenizer, model, decoder
 * and post_processor are read as data into a zt_tok_config (tokenizer.h); exactly these are accepted:
 *   model          BPE (dropout null or 0, no continuing_subword_prefix / end_of_word_suffix), either
 *                  byte-level (byte_fallback false; ignore_merges as given) or, with byte_fallback
 *                  true, SentencePiece-style (the vocab holds <0x00>..<0xFF>); or WordPiece (BERT: with
 *                  normalizer BertNormalizer or null, pre_tokenizer BertPreTokenizer, decoder WordPiece
 *                  with the model's prefix, post_processor null, BertProcessing or a template with one
 *                  token on each side of $A, [CLS] and [SEP]; tokenizer_hf_config.c)
 *   normalizer     null | NFC | Sequence[Prepend("\u2581")?, Replace(" " -> "\u2581")] (Llama 2)
 *   pre_tokenizer  ByteLevel (add_prefix_space false; GPT-2's regex) | Sequence[Split(the Llama 3 or
 *                  Qwen2 regex, Isolated, invert false), ByteLevel(add_prefix_space false, use_regex
 *                  false)] | Metaspace("\u2581", prepend_scheme first/always/never, split false) | null
 *   decoder        ByteLevel or null (byte-level) | Sequence[Replace("\u2581" -> " "), ByteFallback,
 *                  Fuse, Strip(" ", 1, 0)?] (byte_fallback)
 *   post_processor null | ByteLevel | TemplateProcessing (its "single" template: special tokens
 *                  around $A) | BertProcessing (cls $A sep, read as a template) | RobertaProcessing (cls
 *                  and sep only: encode writes neither) | a Sequence of those. One token on each side of $A
 *                  is also the configuration's cls and sep (prepare --mlm frames sequences with them).
 * The padding and mask tokens (zt_tok_config pad, mask) are the tokens "[PAD]" / "<pad>" and "[MASK]" / "<mask>"
 * (BERT's, RoBERTa's) of the vocab or the added tokens, when there are such.
 * Anything else is an error naming the field (exit 2 in the commands). "truncation" and "padding"
 * (batch settings) are ignored, as are added tokens' matching flags (ztrain never matches added
 * tokens in text, tokenizer.h). Byte-level token strings are in GPT-2's bytes_to_unicode alphabet
 * and are mapped back to bytes, so ids equal HF's; SentencePiece-style and WordPiece ones are kept as UTF-8.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "io/tokenizer_hf_internal.h"
#include "util/hashmap.h"
#include "util/json.h"
#include "util/util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>


/* ---------------------------------------------------------------- strings */

/* bytes somewhere else (in the JSON tree or the merges.txt text) */

typedef struct sbuf { char *s; size_t n, cap; } sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        b->cap = 2 * (b->n + n + 1) + 64;
        b->s = zt_realloc(b->s, b->cap);
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}

static void unicode_to_byte(int u2b[324]) {
    for (int i = 0; i < 324; i++) u2b[i] = -1;
    int n = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        u2b[printable ? b : 256 + n++] = b;
    }
}

/* token string -> bytes: through the alphabet when every character is in it, else the raw UTF-8
 * (added special tokens written in plain text) */
static void token_bytes(const int u2b[324], const char *s, size_t n, sbuf *out) {
    out->n = 0;
    sb_put(out, "", 0);
    const uint8_t *p = (const uint8_t *)s;
    for (size_t i = 0; i < n;) {
        uint32_t cp = p[i];
        size_t l = cp < 0x80 ? 1 : cp >= 0xC0 && cp < 0xE0 ? 2 : 0;
        if (l == 2 && i + 1 < n) cp = (cp & 31) << 6 | (p[i + 1] & 63);
        if (l == 0 || i + l > n || cp >= 324 || u2b[cp] < 0) {
            out->n = 0;
            sb_put(out, s, n);
            return;
        }
        char c = (char)u2b[cp];
        sb_put(out, &c, 1);
        i += l;
    }
}

/* ---------------------------------------------------------------- loading */

static char *read_file(const char *path, const char *what, const char *hint, size_t *n, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open %s (%s)%s", path, what, strerror(errno), hint);
        return NULL;
    }
    char *b = NULL;
    size_t len = 0, cap = 0, got;
    do {
        if (cap - len < 65536) {
            cap = 2 * cap + 65536;
            b = zt_realloc(b, cap + 1);
        }
        got = fread(b + len, 1, cap - len, f);
        len += got;
    } while (got > 0);
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        snprintf(err, errlen, "%s: read failed", path);
        free(b);
        return NULL;
    }
    b[len] = 0;
    *n = len;
    return b;
}

static int read_merges_txt(const char *path, hf *h, char *err, size_t errlen) {
    size_t n;
    char *b = read_file(path, "merges file", "; a vocab.json needs merges.txt beside it or --merges PATH", &n, err, errlen);
    if (!b) return 1;
    size_t ln = 0;
    for (char *p = b, *e; p < b + n; p = e + 1) {
        e = memchr(p, '\n', (size_t)(b + n - p));
        if (!e) e = b + n;
        size_t len = (size_t)(e - p);
        ln++;
        if (len && p[len - 1] == '\r') len--;
        if (len == 0 || (len >= 8 && memcmp(p, "#version", 8) == 0)) continue;
        char *sp = memchr(p, ' ', len);
        if (!sp || sp == p || sp + 1 == p + len || memchr(sp + 1, ' ', (size_t)(p + len - sp - 1))) {
            snprintf(err, errlen, "%s:%zu: expected a merge 'a b' (two tokens and one space)", path, ln);
            free(b);
            return 1;
        }
        zt_hf_merge_add(h, p, (size_t)(sp - p), sp + 1, (size_t)(p + len - sp - 1));
    }
    h->merges_txt = b;
    return 0;
}

/* tokens found by their text: the end-of-text token "<|endoftext|>" (the only one GPT-2's configuration looks for),
 * else "<|end_of_text|>" (Llama 3), else "</s>" (Llama 2); the padding token "[PAD]" (BERT), else "<pad>"
 * (RoBERTa); the mask token "[MASK]", else "<mask>" */
enum { NAME_EOT = 0, NAME_PAD = 3, NAME_MASK = 5, N_NAMES = 7 };
static const char *const TOKEN_NAMES[N_NAMES] = {ZT_TOK_EOT_TEXT, "<|end_of_text|>", "</s>", "[PAD]", "<pad>",
                                                 "[MASK]", "<mask>"};

/* the first of names[0..n) found (found: the ids of TOKEN_NAMES) */
static uint32_t first_found(const uint32_t *found, int n) {
    for (int k = 0; k < n; k++)
        if (found[k] != ZT_TOK_NO_EOT) return found[k];
    return ZT_TOK_NO_EOT;
}

static zt_tokenizer *hf_build(hf *h, const zt_tok_config *cfg0, const char *path, const char *mpath, char *err,
                              size_t errlen) {
    zt_tokenizer *t = NULL;
    zt_tok_config cfg = *cfg0;
    const int chars = cfg.model == ZT_TOK_MODEL_CHARS, wp = cfg.model == ZT_TOK_MODEL_WORDPIECE;
    const int gpt2 = !chars && cfg.normalizer == ZT_TOK_NORM_NONE && cfg.pretok == ZT_TOK_PRE_GPT2 &&
                     !cfg.ignore_merges && !cfg.n_begin && !cfg.n_end;
    int u2b[324];
    unicode_to_byte(u2b);
    uint32_t vocab = 0;
    for (size_t i = 0; i < h->nv; i++) vocab = h->vid[i] + 1 > vocab ? h->vid[i] + 1 : vocab;
    for (size_t i = 0; i < h->na; i++) vocab = h->aid[i] + 1 > vocab ? h->aid[i] + 1 : vocab;
    uint8_t **toks = zt_calloc(vocab ? vocab : 1, sizeof *toks);
    uint32_t *lens = zt_calloc(vocab ? vocab : 1, sizeof *lens);
    uint8_t *added = zt_calloc(vocab ? vocab : 1, 1);
    uint32_t (*merges)[3] = zt_malloc((h->nm ? h->nm : 1) * sizeof *merges);
    uint32_t found[N_NAMES];
    for (int k = 0; k < N_NAMES; k++) found[k] = ZT_TOK_NO_EOT;
    zt_hashmap *m = zt_hashmap_create(2 * h->nv + 2); /* token string -> id */
    sbuf tb = {0}, cat = {0};
    for (size_t pass = 0; pass < 2; pass++) { /* model vocab wins over added tokens with the same id */
        size_t cnt = pass ? h->na : h->nv;
        for (size_t i = 0; i < cnt; i++) {
            span s = pass ? h->atok[i] : h->vtok[i];
            uint32_t id = pass ? h->aid[i] : h->vid[i];
            int fresh = 1;
            if (!pass) zt_hashmap_put(m, s.s, s.n, id, &fresh);
            if (!fresh) {
                snprintf(err, errlen, "%s: token '%.*s' appears twice in the vocab", path, (int)(s.n > 40 ? 40 : s.n), s.s);
                goto done;
            }
            for (int k = 0; k < N_NAMES; k++)
                if (s.n == strlen(TOKEN_NAMES[k]) && memcmp(s.s, TOKEN_NAMES[k], s.n) == 0 && found[k] == ZT_TOK_NO_EOT)
                    found[k] = id;
            if (toks[id]) continue;
            if (chars || wp) {
                tb.n = 0;
                sb_put(&tb, s.s, s.n);
            } else {
                token_bytes(u2b, s.s, s.n, &tb);
            }
            toks[id] = zt_malloc(tb.n ? tb.n : 1);
            memcpy(toks[id], tb.s, tb.n);
            lens[id] = (uint32_t)tb.n;
            added[id] = (uint8_t)pass;
        }
    }
    cfg.eot = first_found(found + NAME_EOT, gpt2 ? 1 : 3);
    cfg.pad = first_found(found + NAME_PAD, 2);
    cfg.mask = first_found(found + NAME_MASK, 2);
    /* a configuration other than GPT-2's and WordPiece without a template ends each document with end-of-text */
    cfg.doc_end = !gpt2 && !wp && !cfg.n_begin && !cfg.n_end ? cfg.eot : ZT_TOK_NO_EOT;
    const uint64_t *unk = wp ? zt_hashmap_get(m, h->unk.s, h->unk.n) : NULL;
    if (wp && !unk) {
        snprintf(err, errlen, "%s: model.unk_token '%.*s' is not in model.vocab", path, (int)(h->unk.n > 40 ? 40 : h->unk.n),
                 h->unk.s);
        goto done;
    }
    if (unk) cfg.unk = (uint32_t)*unk;
    cfg.added = added;
    for (size_t r = 0; r < h->nm; r++) {
        span a = h->mg[r][0], b = h->mg[r][1];
        cat.n = 0;
        sb_put(&cat, a.s, a.n);
        sb_put(&cat, b.s, b.n);
        const uint64_t *ia = zt_hashmap_get(m, a.s, a.n), *ib = zt_hashmap_get(m, b.s, b.n),
                       *ic = zt_hashmap_get(m, cat.s, cat.n);
        const char *which = !ia ? "its first token" : !ib ? "its second token" : !ic ? "the merged token" : NULL;
        if (which) {
            snprintf(err, errlen, "%s: merge %zu ('%.*s %.*s'): %s is not in the vocab", mpath ? mpath : path, r + 1,
                     (int)(a.n > 30 ? 30 : a.n), a.s, (int)(b.n > 30 ? 30 : b.n), b.s, which);
            goto done;
        }
        merges[r][0] = (uint32_t)*ia;
        merges[r][1] = (uint32_t)*ib;
        merges[r][2] = (uint32_t)*ic;
    }
    char msg[256];
    t = zt_tokenizer_create_cfg(&cfg, vocab, (const uint8_t *const *)toks, lens, (uint32_t)h->nm,
                                (const uint32_t(*)[3])merges, msg, sizeof msg);
    if (!t) snprintf(err, errlen, "%s: %s%s", path, mpath ? "" : "model: ", msg);
done:
    for (uint32_t i = 0; i < vocab; i++) free(toks[i]);
    free(toks);
    free(lens);
    free(added);
    free(merges);
    free(tb.s);
    free(cat.s);
    zt_hashmap_free(m);
    return t;
}


zt_tokenizer *zt_tokenizer_load_hf(const char *path, const char *merges_path, char *err, size_t errlen) {
    size_t n;
    char *text = read_file(path, "tokenizer file", "", &n, err, errlen);
    if (!text) return NULL;
    hf h;
    memset(&h, 0, sizeof h);
    h.path = path;
    h.text = text;
    if (n >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) h.base = 3;
    zt_json doc;
    zt_json_error je;
    zt_tokenizer *t = NULL;
    char mp[4096];
    if (zt_json_parse_ex(text + h.base, n - h.base, &doc, &je)) {
        char at[48] = "";
        if (!je.eof) snprintf(at, sizeof at, " at byte %zu", h.base + je.off);
        snprintf(err, errlen, "%s:%d: invalid JSON: %s%s", path, je.line, je.what, at);
        free(text);
        return NULL;
    }
    zt_hf_top(&h, &doc);
    zt_tok_config cfg;
    if (!h.bad && h.has_model) zt_hf_config(&h, &cfg);
    if (h.bad) {
        snprintf(err, errlen, "%s", h.msg);
    } else if (h.has_model) { /* tokenizer.json */
        if (h.nv == 0)
            snprintf(err, errlen, "%s: model.vocab is empty", path);
        else
            t = hf_build(&h, &cfg, path, NULL, err, errlen);
    } else if (h.numbers_only && h.members > 0) { /* vocab.json */
        if (!merges_path) {
            const char *slash = strrchr(path, '/');
            snprintf(mp, sizeof mp, "%.*smerges.txt", slash ? (int)(slash - path + 1) : 0, path);
            merges_path = mp;
        }
        zt_tok_config_gpt2(&cfg, ZT_TOK_NO_EOT);
        if (read_merges_txt(merges_path, &h, err, errlen) == 0) t = hf_build(&h, &cfg, path, merges_path, err, errlen);
    } else {
        snprintf(err, errlen, "%s: JSON but neither a tokenizer.json (no \"model\" object) nor a vocab.json "
                 "(an object of token -> id)", path);
    }
    zt_json_free(&doc);
    free(text);
    free(h.merges_txt);
    free(h.vtok);
    free(h.vid);
    free(h.atok);
    free(h.aid);
    free(h.mg);
    return t;
}

/* ---------------------------------------------------------------- any format */

zt_tokenizer *zt_tokenizer_load(const char *path, const char *merges_path, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        zt_errf(err, errlen, "%s: cannot open tokenizer file (%s)", path, strerror(errno));
        return NULL;
    }
    char head[64] = {0};
    size_t n = fread(head, 1, sizeof head - 1, f);
    fclose(f);
    if (n >= strlen(ZT_TOK_MAGIC) && memcmp(head, ZT_TOK_MAGIC, strlen(ZT_TOK_MAGIC)) == 0)
        return zt_tokenizer_load_zttok(path, err, errlen);
    size_t i = 0;
    if (n >= 3 && memcmp(head, "\xEF\xBB\xBF", 3) == 0) i = 3;
    while (i < n && (head[i] == ' ' || head[i] == '\t' || head[i] == '\n' || head[i] == '\r')) i++;
    if (i < n && head[i] == '{') return zt_tokenizer_load_hf(path, merges_path, err, errlen);
    zt_errf(err, errlen,
            "%s: not a tokenizer file (expected a ztrain .zttok file starting '%s', or a Hugging Face "
            "tokenizer.json or vocab.json)", path, ZT_TOK_MAGIC);
    return NULL;
}
