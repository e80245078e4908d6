/* tokenizer_file.c — ztrain's own tokenizer file, .zttok (format in tokenizer.h): save, and load back through
 * zt_tokenizer_create, which checks the tables. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "io/tokenizer_internal.h"
#include "util/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- .zttok files */

static const char *const MODEL_NAME[] = {"bytes", "chars", "wordpiece"};
static const char *const NORM_NAME[] = {"none", "nfc", "bert"};
static const char *const PREFIX_NAME[] = {"none", "nonempty", "first"};
static const char *const PRE_NAME[] = {"gpt2", "llama3", "qwen2", "none", "bert"};

/* an id as the file writes it: -1 for none */
static long long id_or_none(uint32_t id) { return id == ZT_TOK_NO_EOT ? -1LL : (long long)id; }

/* "key ID" with ID in -1..vocab-1 into *id (-1: ZT_TOK_NO_EOT); 0, else -1 */
static int parse_id(const char *line, const char *key, unsigned long long vocab, uint32_t *id) {
    const size_t kl = strlen(key);
    long long v;
    int used = 0;
    if (strncmp(line, key, kl) != 0 || line[kl] != ' ' || sscanf(line + kl, " %lld%n", &v, &used) != 1 ||
        line[kl + (size_t)used] || v < -1 || v >= (long long)vocab)
        return -1;
    *id = v < 0 ? ZT_TOK_NO_EOT : (uint32_t)v;
    return 0;
}

static void put_ids(FILE *f, const char *key, uint32_t n, const uint32_t *ids) {
    fprintf(f, "%s %u", key, n);
    for (uint32_t k = 0; k < n; k++) fprintf(f, " %u", ids[k]);
    fputc('\n', f);
}

int zt_tokenizer_save(const zt_tokenizer *t, const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "w");
    if (!f) {
        zt_errf(err, errlen, "%s: cannot create tokenizer file (%s)", path, strerror(errno));
        return 1;
    }
    const zt_tok_config *c = &t->cfg;
    /* version 4 only where its lines are needed: the other tokenizers' files stay as they were */
    const int v4 = c->pad != ZT_TOK_NO_EOT || c->mask != ZT_TOK_NO_EOT ||
                   (!t->wp && (c->cls != ZT_TOK_NO_EOT || c->sep != ZT_TOK_NO_EOT));
    const int ver = v4 ? 4 : t->simple ? 1 : t->wp ? 3 : 2;
    fprintf(f, "%s %d\nvocab_size %u\neot %lld\n", ZT_TOK_MAGIC, ver, t->vocab, id_or_none(c->eot));
    if (ver >= 2) {
        fprintf(f, "model %s\nnormalizer %s\nprefix %s\npretokenizer %s\nignore_merges %d\nstrip_space %d\n",
                MODEL_NAME[c->model], NORM_NAME[c->normalizer], PREFIX_NAME[c->prefix], PRE_NAME[c->pretok],
                c->ignore_merges != 0, c->strip_space != 0);
        put_ids(f, "begin", c->n_begin, c->begin);
        put_ids(f, "end", c->n_end, c->end);
        fprintf(f, "doc_end %lld\n", id_or_none(c->doc_end));
        if (t->wp) zt_wp_save_lines(f, c); /* its last line is "special CLS SEP" */
        else if (v4) fprintf(f, "special %lld %lld\n", id_or_none(c->cls), id_or_none(c->sep));
        if (v4) fprintf(f, "pad %lld\nmask %lld\n", id_or_none(c->pad), id_or_none(c->mask));
    }
    fprintf(f, "tokens %u\n", t->vocab);
    static const char hex[] = "0123456789abcdef";
    for (uint32_t i = 0; i < t->vocab; i++) {
        size_t n;
        const uint8_t *s = mod_tok(t, i, &n);
        if (ver >= 2 && is_added(t, i)) fputc('+', f);
        if (n == 0) fputc('-', f);
        for (size_t k = 0; k < n; k++) {
            fputc(hex[s[k] >> 4], f);
            fputc(hex[s[k] & 15], f);
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

/* "key NAME" with NAME one of names[0..n): its index, else -1 */
static int parse_name(const char *line, const char *key, const char *const *names, int n) {
    size_t kl = strlen(key);
    if (strncmp(line, key, kl) != 0 || line[kl] != ' ') return -1;
    for (int i = 0; i < n; i++)
        if (strcmp(line + kl + 1, names[i]) == 0) return i;
    return -1;
}

/* "key K id..." with K <= ZT_TOK_MAX_TEMPLATE ids below vocab: 0, else -1 */
static int parse_ids(const char *line, const char *key, unsigned long long vocab, uint32_t *n, uint32_t *ids) {
    size_t kl = strlen(key);
    if (strncmp(line, key, kl) != 0 || line[kl] != ' ') return -1;
    const char *p = line + kl;
    char *e;
    errno = 0;
    unsigned long k = strtoul(p, &e, 10);
    if (e == p || errno || k > ZT_TOK_MAX_TEMPLATE) return -1;
    for (unsigned long i = 0; i < k; i++) {
        p = e;
        if (*p != ' ') return -1;
        unsigned long long v = strtoull(p, &e, 10);
        if (e == p || errno || v >= vocab) return -1;
        ids[i] = (uint32_t)v;
    }
    if (*e) return -1;
    *n = (uint32_t)k;
    return 0;
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
    uint8_t **toks = NULL, *added = NULL;
    uint32_t *lens = NULL, (*merges)[3] = NULL;
    unsigned long long vocab = 0, ntok = 0, nmerge = 0;
    long long eot = -1, doc_end = -1;
    int ver = 0, v;
    char word[32];
    zt_tok_config cfg;
#define BAD(...) do { snprintf(msg, sizeof msg, __VA_ARGS__); zt_errf(err, errlen, "%s:%ld: %s", path, ln, msg); goto done; } while (0)
#define NEXT() do { ln++; if ((len = read_line(f, &line, &cap)) < 0) BAD("unexpected end of file (truncated tokenizer)"); } while (0)
    NEXT();
    if (sscanf(line, "%31s %d", word, &ver) != 2 || strcmp(word, ZT_TOK_MAGIC) != 0)
        BAD("not a ztrain tokenizer file (expected first line '%s %d')", ZT_TOK_MAGIC, ZT_TOK_VERSION);
    if (ver < 1 || ver > 4) BAD("unsupported tokenizer version %d (expected 1, 2, 3 or 4)", ver);
    NEXT();
    if (sscanf(line, "vocab_size %llu", &vocab) != 1 || vocab < (ver >= 3 ? 1 : 256) || vocab > ZT_TOK_MAX_VOCAB)
        BAD("expected 'vocab_size N' with N in %d..%d, got '%.40s'", ver >= 3 ? 1 : 256, ZT_TOK_MAX_VOCAB, line);
    NEXT();
    if (sscanf(line, "eot %lld", &eot) != 1 || eot < -1 || eot >= (long long)vocab)
        BAD("expected 'eot ID' with ID in -1..%llu, got '%.40s'", vocab - 1, line);
    zt_tok_config_gpt2(&cfg, eot < 0 ? ZT_TOK_NO_EOT : (uint32_t)eot);
    if (ver >= 2) {
        NEXT();
        if ((v = parse_name(line, "model", MODEL_NAME, ver >= 3 ? 3 : 2)) < 0)
            BAD("expected 'model bytes|chars%s', got '%.40s'", ver >= 3 ? "|wordpiece" : "", line);
        cfg.model = (zt_tok_model)v;
        NEXT();
        if ((v = parse_name(line, "normalizer", NORM_NAME, ver >= 3 ? 3 : 2)) < 0)
            BAD("expected 'normalizer none|nfc%s', got '%.40s'", ver >= 3 ? "|bert" : "", line);
        cfg.normalizer = (zt_tok_norm)v;
        NEXT();
        if ((v = parse_name(line, "prefix", PREFIX_NAME, 3)) < 0)
            BAD("expected 'prefix none|nonempty|first', got '%.40s'", line);
        cfg.prefix = (zt_tok_prefix)v;
        NEXT();
        if ((v = parse_name(line, "pretokenizer", PRE_NAME, ver >= 3 ? 5 : 4)) < 0)
            BAD("expected 'pretokenizer gpt2|llama3|qwen2|none%s', got '%.40s'", ver >= 3 ? "|bert" : "", line);
        cfg.pretok = (zt_tok_pre)v;
        NEXT();
        if (strcmp(line, "ignore_merges 0") != 0 && strcmp(line, "ignore_merges 1") != 0)
            BAD("expected 'ignore_merges 0|1', got '%.40s'", line);
        cfg.ignore_merges = line[14] == '1';
        NEXT();
        if (strcmp(line, "strip_space 0") != 0 && strcmp(line, "strip_space 1") != 0)
            BAD("expected 'strip_space 0|1', got '%.40s'", line);
        cfg.strip_space = line[12] == '1';
        NEXT();
        if (parse_ids(line, "begin", vocab, &cfg.n_begin, cfg.begin))
            BAD("expected 'begin K ID...' with K <= %d ids below %llu, got '%.40s'", ZT_TOK_MAX_TEMPLATE, vocab, line);
        NEXT();
        if (parse_ids(line, "end", vocab, &cfg.n_end, cfg.end))
            BAD("expected 'end K ID...' with K <= %d ids below %llu, got '%.40s'", ZT_TOK_MAX_TEMPLATE, vocab, line);
        NEXT();
        if (sscanf(line, "doc_end %lld", &doc_end) != 1 || doc_end < -1 || doc_end >= (long long)vocab)
            BAD("expected 'doc_end ID' with ID in -1..%llu, got '%.40s'", vocab - 1, line);
        cfg.doc_end = doc_end < 0 ? ZT_TOK_NO_EOT : (uint32_t)doc_end;
        /* version 3: the WordPiece lines; version 4: those of a WordPiece model, then "special" for any */
        for (int k = 0; ver >= 3 && k < ZT_WP_FILE_LINES; k++) {
            if (ver == 4 && cfg.model != ZT_TOK_MODEL_WORDPIECE && k < ZT_WP_FILE_LINES - 1) continue;
            NEXT();
            if (zt_wp_read_line(k, line, &cfg, (uint32_t)vocab))
                BAD("expected '%s' (tokenizer.h), got '%.40s'", k == 0 ? "wordpiece UNK MAX_CHARS CLEANUP PREFIX_HEX" :
                    k == 1 ? "bert CLEAN CHINESE STRIP LOWER" : "special CLS SEP", line);
        }
        if (ver == 4) {
            NEXT();
            if (parse_id(line, "pad", vocab, &cfg.pad))
                BAD("expected 'pad ID' with ID in -1..%llu, got '%.40s'", vocab - 1, line);
            NEXT();
            if (parse_id(line, "mask", vocab, &cfg.mask))
                BAD("expected 'mask ID' with ID in -1..%llu, got '%.40s'", vocab - 1, line);
        }
        added = zt_calloc(vocab, 1);
        cfg.added = added;
    }
    NEXT();
    if (sscanf(line, "tokens %llu", &ntok) != 1 || ntok != vocab)
        BAD("expected 'tokens %llu', got '%.40s'", vocab, line);
    toks = zt_calloc(vocab, sizeof *toks);
    lens = zt_calloc(vocab, sizeof *lens);
    for (unsigned long long i = 0; i < vocab; i++) {
        NEXT();
        const char *h = line;
        if (added && *h == '+') {
            added[i] = 1;
            h++;
            len--;
        }
        if (strcmp(h, "-") == 0) continue;
        if (len == 0 || len % 2) BAD("token %llu: expected an even number of hex digits or '-'", i);
        toks[i] = zt_malloc((size_t)len / 2);
        lens[i] = (uint32_t)(len / 2);
        for (long k = 0; k < len / 2; k++) {
            int hi = hexval(h[2 * k]), lo = hexval(h[2 * k + 1]);
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
    t = zt_tokenizer_create_cfg(&cfg, (uint32_t)vocab, (const uint8_t *const *)toks, lens, (uint32_t)nmerge,
                                (const uint32_t(*)[3])merges, msg, sizeof msg);
    if (!t) zt_errf(err, errlen, "%s: %s", path, msg);
#undef BAD
#undef NEXT
done:
    if (toks)
        for (unsigned long long i = 0; i < vocab; i++) free(toks[i]);
    free(toks);
    free(lens);
    free(merges);
    free(added);
    free(line);
    fclose(f);
    return t;
}
