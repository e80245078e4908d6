/* tokenizer_hf.c — Hugging Face GPT-2 style tokenizers: tokenizer.json, or vocab.json + merges.txt.
 *
 * A minimal JSON reader (a cursor, no tree) pulls out what byte-level BPE needs: model.vocab,
 * model.merges ("a b" strings or ["a", "b"] pairs), added_tokens, and enough of the
 * pre-tokenizer/normalizer to refuse tokenizers that would encode differently. Token strings are
 * in GPT-2's bytes_to_unicode alphabet and are mapped back to bytes, so ids equal HF's.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "tokenizer.h"
#include "util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define JSON_MAX_DEPTH 64

/* ---------------------------------------------------------------- strings */

/* an arena of byte strings, referred to by (offset, length) */
typedef struct sref { uint32_t off, len; } sref;
typedef struct arena { char *b; size_t n, cap; } arena;

static sref arena_add(arena *a, const char *s, size_t n)
{
    if (a->n + n > a->cap) {
        a->cap = 2 * (a->n + n) + 4096;
        a->b = zt_realloc(a->b, a->cap);
    }
    memcpy(a->b + a->n, s, n);
    sref r = {(uint32_t)a->n, (uint32_t)n};
    a->n += n;
    return r;
}

typedef struct sbuf { char *s; size_t n, cap; } sbuf;

static void sb_put(sbuf *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        b->cap = 2 * (b->n + n + 1) + 64;
        b->s = zt_realloc(b->s, b->cap);
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}

static void sb_utf8(sbuf *b, uint32_t cp)
{
    char u[4];
    size_t n;
    if (cp < 0x80) { u[0] = (char)cp; n = 1; }
    else if (cp < 0x800) { u[0] = (char)(0xC0 | cp >> 6); u[1] = (char)(0x80 | (cp & 63)); n = 2; }
    else if (cp < 0x10000) {
        u[0] = (char)(0xE0 | cp >> 12); u[1] = (char)(0x80 | (cp >> 6 & 63)); u[2] = (char)(0x80 | (cp & 63)); n = 3;
    } else {
        u[0] = (char)(0xF0 | cp >> 18); u[1] = (char)(0x80 | (cp >> 12 & 63));
        u[2] = (char)(0x80 | (cp >> 6 & 63)); u[3] = (char)(0x80 | (cp & 63)); n = 4;
    }
    sb_put(b, u, n);
}

/* string -> id map (open addressing on an arena) */
typedef struct smap { const arena *a; sref *keys; uint32_t *vals; size_t mask, n; } smap;

static uint64_t hash_str(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

static void smap_init(smap *m, const arena *a, size_t n)
{
    size_t cap = 16;
    while (cap < 2 * n + 2) cap *= 2;
    m->a = a;
    m->keys = zt_malloc(cap * sizeof *m->keys);
    m->vals = zt_malloc(cap * sizeof *m->vals);
    for (size_t i = 0; i < cap; i++) m->keys[i].len = UINT32_MAX;
    m->mask = cap - 1;
    m->n = 0;
}

static size_t smap_slot(const smap *m, const char *s, size_t n)
{
    size_t i = hash_str(s, n) & m->mask;
    while (m->keys[i].len != UINT32_MAX &&
           !(m->keys[i].len == n && memcmp(m->a->b + m->keys[i].off, s, n) == 0))
        i = (i + 1) & m->mask;
    return i;
}

/* 0 if the key was new */
static int smap_put(smap *m, sref k, uint32_t v)
{
    size_t i = smap_slot(m, m->a->b + k.off, k.len);
    if (m->keys[i].len != UINT32_MAX) return 1;
    m->keys[i] = k;
    m->vals[i] = v;
    m->n++;
    return 0;
}

static int smap_get(const smap *m, const char *s, size_t n, uint32_t *v)
{
    size_t i = smap_slot(m, s, n);
    if (m->keys[i].len == UINT32_MAX) return 0;
    *v = m->vals[i];
    return 1;
}

static void smap_free(smap *m)
{
    free(m->keys);
    free(m->vals);
}

/* ---------------------------------------------------------------- JSON cursor */

typedef struct jp {
    const char *s, *p, *end, *path;
    char msg[300];
    int bad, depth;
} jp;

static void jfail(jp *j, const char *fmt, ...) ZT_PRINTF(2, 3);
static void jfail(jp *j, const char *fmt, ...)
{
    if (j->bad) return;
    j->bad = 1;
    int line = 1;
    for (const char *q = j->s; q < j->p && q < j->end; q++) line += *q == '\n';
    char m[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    snprintf(j->msg, sizeof j->msg, "%s:%d: %s", j->path, line, m);
}

static int jpeek(jp *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')) j->p++;
    return j->p < j->end ? (unsigned char)*j->p : -1;
}

static int jeat(jp *j, char c)
{
    int got = jpeek(j);
    if (got != c) {
        if (got < 0) jfail(j, "invalid JSON: unexpected end of file (truncated?)");
        else jfail(j, "invalid JSON: expected '%c' at byte %ld", c, (long)(j->p - j->s));
        return 0;
    }
    j->p++;
    return 1;
}

static int hex4(const char *p, uint32_t *v)
{
    *v = 0;
    for (int i = 0; i < 4; i++) {
        int c = p[i], d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                       : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return 0;
        *v = *v << 4 | (uint32_t)d;
    }
    return 1;
}

/* a JSON string, unescaped to UTF-8, into b (reset first) */
static int jstr(jp *j, sbuf *b)
{
    b->n = 0;
    sb_put(b, "", 0);
    if (!jeat(j, '"')) return 0;
    for (;;) {
        const char *q = j->p;
        while (q < j->end && *q != '"' && *q != '\\') q++;
        sb_put(b, j->p, (size_t)(q - j->p));
        j->p = q;
        if (q >= j->end) {
            jfail(j, "invalid JSON: unterminated string (truncated?)");
            return 0;
        }
        if (*q == '"') {
            j->p++;
            return 1;
        }
        if (q + 1 >= j->end) break;
        char e = q[1];
        j->p = q + 2;
        const char *simple = strchr("\"\\/bfnrt", e);
        if (simple && e) {
            static const char out[] = "\"\\/\b\f\n\r\t";
            sb_put(b, &out[simple - "\"\\/bfnrt"], 1);
            continue;
        }
        uint32_t cp, lo;
        if (e != 'u' || j->end - j->p < 4 || !hex4(j->p, &cp)) break;
        j->p += 4;
        if (cp >= 0xD800 && cp < 0xDC00 && j->end - j->p >= 6 && j->p[0] == '\\' && j->p[1] == 'u' &&
            hex4(j->p + 2, &lo) && lo >= 0xDC00 && lo < 0xE000) {
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            j->p += 6;
        }
        sb_utf8(b, cp);
    }
    jfail(j, "invalid JSON: bad escape in a string");
    return 0;
}

static int jint(jp *j, long long *v)
{
    jpeek(j);
    char *e;
    errno = 0;
    *v = strtoll(j->p, &e, 10);
    if (e == j->p || errno || (e < j->end && (*e == '.' || *e == 'e' || *e == 'E'))) {
        jfail(j, "expected an integer token id");
        return 0;
    }
    j->p = e;
    return 1;
}

static int jskip(jp *j)
{
    int c = jpeek(j);
    if (c == '"') {
        sbuf tmp = {0};
        int ok = jstr(j, &tmp);
        free(tmp.s);
        return ok;
    }
    if (c == '{' || c == '[') {
        if (++j->depth > JSON_MAX_DEPTH) {
            jfail(j, "invalid JSON: nested too deeply");
            return 0;
        }
        char close = c == '{' ? '}' : ']';
        j->p++;
        int first = 1;
        while (!j->bad) {
            if (jpeek(j) == close) {
                j->p++;
                break;
            }
            if (!first && !jeat(j, ',')) return 0;
            first = 0;
            if (c == '{') {
                if (!jskip(j) || !jeat(j, ':')) return 0;
            }
            if (!jskip(j)) return 0;
        }
        j->depth--;
        return !j->bad;
    }
    const char *q = j->p;
    while (q < j->end && (strchr("+-.0123456789eE", *q) || (*q >= 'a' && *q <= 'z'))) q++;
    if (q == j->p) {
        jfail(j, c < 0 ? "invalid JSON: unexpected end of file" : "invalid JSON: unexpected character '%c'", c);
        return 0;
    }
    j->p = q;
    return 1;
}

/* object members: call with *first = 1; returns 1 with the key in k while members remain */
static int jmember(jp *j, sbuf *k, int *first)
{
    if (*first && !jeat(j, '{')) return 0;
    if (jpeek(j) == '}') {
        j->p++;
        return 0;
    }
    if (!*first && !jeat(j, ',')) return 0;
    *first = 0;
    return jstr(j, k) && jeat(j, ':');
}

static int jelem(jp *j, int *first)
{
    if (*first && !jeat(j, '[')) return 0;
    if (jpeek(j) == ']') {
        j->p++;
        return 0;
    }
    if (!*first && !jeat(j, ',')) return 0;
    *first = 0;
    return 1;
}

static int jlit(jp *j, const char *w)
{
    size_t n = strlen(w);
    jpeek(j);
    if ((size_t)(j->end - j->p) >= n && memcmp(j->p, w, n) == 0) {
        j->p += n;
        return 1;
    }
    return 0;
}

/* ---------------------------------------------------------------- HF model */

typedef struct hf {
    arena a;                 /* all strings */
    sref *vtok; uint32_t *vid; size_t nv, capv;     /* model vocab */
    sref *atok; uint32_t *aid; size_t na, capa;     /* added tokens */
    sref (*mg)[2]; size_t nm, capm;                 /* merges as strings */
    int has_model, numbers_only, members;
    char model_type[32], pretok_problem[200], norm_type[64], model_problem[120];
} hf;

static void hf_vocab_add(hf *h, const char *s, size_t n, long long id)
{
    if (h->nv == h->capv) {
        h->capv = h->capv ? 2 * h->capv : 1024;
        h->vtok = zt_realloc(h->vtok, h->capv * sizeof *h->vtok);
        h->vid = zt_realloc(h->vid, h->capv * sizeof *h->vid);
    }
    h->vtok[h->nv] = arena_add(&h->a, s, n);
    h->vid[h->nv++] = (uint32_t)id;
}

static void hf_merge_add(hf *h, const char *a, size_t na, const char *b, size_t nb)
{
    if (h->nm == h->capm) {
        h->capm = h->capm ? 2 * h->capm : 1024;
        h->mg = zt_realloc(h->mg, h->capm * sizeof *h->mg);
    }
    h->mg[h->nm][0] = arena_add(&h->a, a, na);
    h->mg[h->nm][1] = arena_add(&h->a, b, nb);
    h->nm++;
}

static int check_id(jp *j, long long id)
{
    if (id < 0 || id >= ZT_TOK_MAX_VOCAB) {
        jfail(j, "token id %lld out of range (expected 0..%d)", id, ZT_TOK_MAX_VOCAB - 1);
        return 0;
    }
    return 1;
}

static void parse_vocab(jp *j, hf *h)
{
    sbuf k = {0};
    int first = 1;
    long long id;
    while (jmember(j, &k, &first) && jint(j, &id) && check_id(j, id)) hf_vocab_add(h, k.s, k.n, id);
    free(k.s);
}

static void parse_merges(jp *j, hf *h)
{
    sbuf a = {0}, b = {0};
    int first = 1;
    while (!j->bad && jelem(j, &first)) {
        if (jpeek(j) == '[') {
            int f2 = 1;
            if (!jelem(j, &f2) || !jstr(j, &a) || !jelem(j, &f2) || !jstr(j, &b)) {
                jfail(j, "merge %zu: expected a pair [\"a\", \"b\"]", h->nm);
                break;
            }
            if (jelem(j, &f2)) jfail(j, "merge %zu: expected a pair [\"a\", \"b\"], got more", h->nm);
            hf_merge_add(h, a.s, a.n, b.s, b.n);
        } else if (jstr(j, &a)) {
            char *sp = memchr(a.s, ' ', a.n);
            if (!sp || memchr(sp + 1, ' ', a.n - (size_t)(sp + 1 - a.s))) {
                jfail(j, "merge %zu: expected \"a b\" (two tokens and one space)", h->nm);
                break;
            }
            hf_merge_add(h, a.s, (size_t)(sp - a.s), sp + 1, a.n - (size_t)(sp + 1 - a.s));
        }
    }
    free(a.s);
    free(b.s);
}

static void parse_added(jp *j, hf *h)
{
    sbuf k = {0}, v = {0};
    int first = 1;
    while (!j->bad && jelem(j, &first)) {
        int f2 = 1, have_id = 0, have_content = 0;
        long long id = -1;
        while (jmember(j, &k, &f2)) {
            if (strcmp(k.s, "id") == 0) have_id = jint(j, &id) && check_id(j, id);
            else if (strcmp(k.s, "content") == 0) have_content = jstr(j, &v);
            else jskip(j);
        }
        if (j->bad) break;
        if (!have_id || !have_content) {
            jfail(j, "added_tokens entry without \"id\" and \"content\"");
            break;
        }
        if (h->na == h->capa) {
            h->capa = h->capa ? 2 * h->capa : 16;
            h->atok = zt_realloc(h->atok, h->capa * sizeof *h->atok);
            h->aid = zt_realloc(h->aid, h->capa * sizeof *h->aid);
        }
        h->atok[h->na] = arena_add(&h->a, v.s, v.n);
        h->aid[h->na++] = (uint32_t)id;
    }
    free(k.s);
    free(v.s);
}

/* pre_tokenizer: ByteLevel (add_prefix_space false, use_regex true), possibly in a Sequence of one */
static void parse_pretok(jp *j, hf *h, int nested)
{
    if (jlit(j, "null")) {
        if (!nested) snprintf(h->pretok_problem, sizeof h->pretok_problem, "has no pre_tokenizer (expected ByteLevel)");
        return;
    }
    sbuf k = {0}, v = {0};
    int first = 1, n_seq = 0;
    char type[64] = "";
    while (jmember(j, &k, &first)) {
        if (strcmp(k.s, "type") == 0 && jstr(j, &v)) snprintf(type, sizeof type, "%s", v.s);
        else if (strcmp(k.s, "add_prefix_space") == 0 && jlit(j, "true"))
            snprintf(h->pretok_problem, sizeof h->pretok_problem, "uses add_prefix_space=true (not supported)");
        else if (strcmp(k.s, "use_regex") == 0 && jlit(j, "false"))
            snprintf(h->pretok_problem, sizeof h->pretok_problem, "uses ByteLevel with use_regex=false (not supported)");
        else if (strcmp(k.s, "pretokenizers") == 0) {
            int f2 = 1;
            while (!j->bad && jelem(j, &f2)) {
                parse_pretok(j, h, 1);
                n_seq++;
            }
        } else jskip(j);
    }
    if (!j->bad && !h->pretok_problem[0]) {
        if (strcmp(type, "Sequence") == 0 ? n_seq != 1 : strcmp(type, "ByteLevel") != 0)
            snprintf(h->pretok_problem, sizeof h->pretok_problem,
                     "has pre_tokenizer '%s' (only a plain GPT-2 ByteLevel pre-tokenizer is supported)", type);
    }
    free(k.s);
    free(v.s);
}

static void parse_model(jp *j, hf *h)
{
    sbuf k = {0}, v = {0};
    int first = 1;
    while (jmember(j, &k, &first)) {
        if (strcmp(k.s, "type") == 0 && jstr(j, &v)) snprintf(h->model_type, sizeof h->model_type, "%s", v.s);
        else if (strcmp(k.s, "vocab") == 0) parse_vocab(j, h);
        else if (strcmp(k.s, "merges") == 0) parse_merges(j, h);
        else if ((strcmp(k.s, "continuing_subword_prefix") == 0 || strcmp(k.s, "end_of_word_suffix") == 0) &&
                 jpeek(j) == '"') { /* "" (GPT-2's own file) and null are fine */
            if (jstr(j, &v) && v.n)
                snprintf(h->model_problem, sizeof h->model_problem, "uses %s \"%.40s\" (not supported)", k.s, v.s);
        }
        else if (strcmp(k.s, "ignore_merges") == 0 && jlit(j, "true"))
            snprintf(h->model_problem, sizeof h->model_problem, "uses ignore_merges=true (not supported)");
        else if (strcmp(k.s, "byte_fallback") == 0 && jlit(j, "true"))
            snprintf(h->model_problem, sizeof h->model_problem, "uses byte_fallback=true (not byte-level BPE)");
        else jskip(j);
    }
    free(k.s);
    free(v.s);
}

static void parse_top(jp *j, hf *h)
{
    sbuf k = {0}, v = {0};
    int first = 1;
    h->numbers_only = 1;
    while (jmember(j, &k, &first)) {
        int c = jpeek(j);
        h->members++;
        if (c == '-' || (c >= '0' && c <= '9')) {
            long long id;
            if (jint(j, &id) && check_id(j, id)) hf_vocab_add(h, k.s, k.n, id);
            continue;
        }
        h->numbers_only = 0;
        if (strcmp(k.s, "model") == 0 && c == '{') {
            h->has_model = 1;
            parse_model(j, h);
        } else if (strcmp(k.s, "added_tokens") == 0 && c == '[') parse_added(j, h);
        else if (strcmp(k.s, "pre_tokenizer") == 0) parse_pretok(j, h, 0);
        else if (strcmp(k.s, "normalizer") == 0 && c == '{') {
            int f2 = 1;
            snprintf(h->norm_type, sizeof h->norm_type, "?");
            while (jmember(j, &v, &f2)) {
                if (strcmp(v.s, "type") == 0 && jpeek(j) == '"' && jstr(j, &v))
                    snprintf(h->norm_type, sizeof h->norm_type, "%s", v.s);
                else jskip(j);
            }
        } else jskip(j);
    }
    if (!j->bad && jpeek(j) != -1) jfail(j, "invalid JSON: text after the top-level object");
    free(k.s);
    free(v.s);
}

/* ---------------------------------------------------------------- GPT-2 byte alphabet */

/* bytes_to_unicode: printable Latin-1 bytes map to themselves, the other 68 to U+0100.. in order */
static void unicode_to_byte(int u2b[324])
{
    for (int i = 0; i < 324; i++) u2b[i] = -1;
    int n = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        u2b[printable ? b : 256 + n++] = b;
    }
}

/* token string -> bytes: through the alphabet when every character is in it, else the raw UTF-8
 * (added special tokens written in plain text) */
static void token_bytes(const int u2b[324], const char *s, size_t n, sbuf *out)
{
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

static char *read_file(const char *path, const char *what, const char *hint, size_t *n, char *err, size_t errlen)
{
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

static int read_merges_txt(const char *path, hf *h, char *err, size_t errlen)
{
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
        hf_merge_add(h, p, (size_t)(sp - p), sp + 1, (size_t)(p + len - sp - 1));
    }
    free(b);
    return 0;
}

static zt_tokenizer *hf_build(hf *h, const char *path, const char *mpath, char *err, size_t errlen)
{
    zt_tokenizer *t = NULL;
    int u2b[324];
    unicode_to_byte(u2b);
    uint32_t vocab = 0;
    for (size_t i = 0; i < h->nv; i++) vocab = h->vid[i] + 1 > vocab ? h->vid[i] + 1 : vocab;
    for (size_t i = 0; i < h->na; i++) vocab = h->aid[i] + 1 > vocab ? h->aid[i] + 1 : vocab;
    uint8_t **toks = zt_calloc(vocab ? vocab : 1, sizeof *toks);
    uint32_t *lens = zt_calloc(vocab ? vocab : 1, sizeof *lens);
    uint32_t (*merges)[3] = zt_malloc((h->nm ? h->nm : 1) * sizeof *merges);
    uint32_t eot = ZT_TOK_NO_EOT;
    smap m;
    smap_init(&m, &h->a, h->nv);
    sbuf tb = {0}, cat = {0};
    for (size_t pass = 0; pass < 2; pass++) { /* model vocab wins over added tokens with the same id */
        size_t cnt = pass ? h->na : h->nv;
        for (size_t i = 0; i < cnt; i++) {
            sref s = pass ? h->atok[i] : h->vtok[i];
            uint32_t id = pass ? h->aid[i] : h->vid[i];
            const char *str = h->a.b + s.off;
            if (!pass && smap_put(&m, s, id)) {
                snprintf(err, errlen, "%s: token '%.*s' appears twice in the vocab", path, (int)(s.len > 40 ? 40 : s.len), str);
                goto done;
            }
            if (s.len == strlen(ZT_TOK_EOT_TEXT) && memcmp(str, ZT_TOK_EOT_TEXT, s.len) == 0) eot = id;
            if (toks[id]) continue;
            token_bytes(u2b, str, s.len, &tb);
            toks[id] = zt_malloc(tb.n ? tb.n : 1);
            memcpy(toks[id], tb.s, tb.n);
            lens[id] = (uint32_t)tb.n;
        }
    }
    for (size_t r = 0; r < h->nm; r++) {
        sref a = h->mg[r][0], b = h->mg[r][1];
        uint32_t ia, ib, ic;
        cat.n = 0;
        sb_put(&cat, h->a.b + a.off, a.len);
        sb_put(&cat, h->a.b + b.off, b.len);
        const char *which = !smap_get(&m, h->a.b + a.off, a.len, &ia) ? "its first token"
                            : !smap_get(&m, h->a.b + b.off, b.len, &ib) ? "its second token"
                            : !smap_get(&m, cat.s, cat.n, &ic) ? "the merged token" : NULL;
        if (which) {
            snprintf(err, errlen, "%s: merge %zu ('%.*s %.*s'): %s is not in the vocab", mpath ? mpath : path, r + 1,
                     (int)(a.len > 30 ? 30 : a.len), h->a.b + a.off, (int)(b.len > 30 ? 30 : b.len), h->a.b + b.off, which);
            goto done;
        }
        merges[r][0] = ia;
        merges[r][1] = ib;
        merges[r][2] = ic;
    }
    char msg[256];
    t = zt_tokenizer_create(vocab, (const uint8_t *const *)toks, lens, (uint32_t)h->nm,
                            (const uint32_t(*)[3])merges, eot, msg, sizeof msg);
    if (!t) snprintf(err, errlen, "%s: %s", path, msg);
done:
    for (uint32_t i = 0; i < vocab; i++) free(toks[i]);
    free(toks);
    free(lens);
    free(merges);
    free(tb.s);
    free(cat.s);
    smap_free(&m);
    return t;
}

zt_tokenizer *zt_tokenizer_load_hf(const char *path, const char *merges_path, char *err, size_t errlen)
{
    size_t n;
    char *text = read_file(path, "tokenizer file", "", &n, err, errlen);
    if (!text) return NULL;
    hf h;
    memset(&h, 0, sizeof h);
    jp j = {.s = text, .p = text, .end = text + n, .path = path};
    if (n >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) j.p += 3;
    parse_top(&j, &h);
    zt_tokenizer *t = NULL;
    char mp[4096];
    if (j.bad) {
        snprintf(err, errlen, "%s", j.msg);
    } else if (h.has_model) { /* tokenizer.json */
        if (strcmp(h.model_type, "BPE") != 0)
            snprintf(err, errlen, "%s: model type '%s' (expected a byte-level 'BPE' tokenizer)", path, h.model_type);
        else if (h.model_problem[0])
            snprintf(err, errlen, "%s: the BPE model %s", path, h.model_problem);
        else if (h.norm_type[0])
            snprintf(err, errlen, "%s: has a '%s' normalizer (expected none, as GPT-2)", path, h.norm_type);
        else if (h.pretok_problem[0])
            snprintf(err, errlen, "%s: %s", path, h.pretok_problem);
        else if (h.nv == 0)
            snprintf(err, errlen, "%s: model.vocab is empty", path);
        else
            t = hf_build(&h, path, NULL, err, errlen);
    } else if (h.numbers_only && h.members > 0) { /* vocab.json */
        if (!merges_path) {
            const char *slash = strrchr(path, '/');
            snprintf(mp, sizeof mp, "%.*smerges.txt", slash ? (int)(slash - path + 1) : 0, path);
            merges_path = mp;
        }
        if (read_merges_txt(merges_path, &h, err, errlen) == 0) t = hf_build(&h, path, merges_path, err, errlen);
    } else {
        snprintf(err, errlen, "%s: JSON but neither a tokenizer.json (no \"model\" object) nor a vocab.json "
                 "(an object of token -> id)", path);
    }
    free(text);
    free(h.a.b);
    free(h.vtok);
    free(h.vid);
    free(h.atok);
    free(h.aid);
    free(h.mg);
    return t;
}
