/* test_tokenizer_wordpiece.c — unit tests of the WordPiece tokenizer (src/io/tokenizer_wordpiece.c): a small
 * vocabulary made here, ids and decodings worked out by hand from the rules at the top of tokenizer.h (greedy
 * longest match first, one [UNK] per word, the BERT normalizer's steps one by one); streaming (any cut of the
 * text into chunks, the unconsumed rest passed again, gives the whole text's ids); the .zttok round trip
 * (version 3); and configurations the constructor refuses. tests/e2e/test_tokenizer_bert.py compares with HF. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "check.h"
#include "io/tokenizer.h"
#include "util/util.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const VOCAB[] = {
    "[UNK]", "[CLS]", "[SEP]", "un", "##aff", "##able", "the", ".", ",", "##s", "a", "##a", "i", "##\xcc\x87",
    "\xe4\xb8\xad", "\xe6\x96\x87", "cat", "e", "##e", "\xc3\xa9", "'", "##x", "x", "##\xcc\x81", "\xc3\x89",
    "do", "not", "n't", "do not", "The", "##\xf0\x9d\x85\xa5", "##\xf0\x9d\x85\xad",
};
#define NV (sizeof VOCAB / sizeof *VOCAB)

static zt_tokenizer *make(uint32_t bert, uint32_t max_chars, int cleanup, char *err) {
    zt_tok_config c;
    zt_tok_config_gpt2(&c, ZT_TOK_NO_EOT);
    c.model = ZT_TOK_MODEL_WORDPIECE;
    c.pretok = ZT_TOK_PRE_BERT;
    c.normalizer = bert ? ZT_TOK_NORM_BERT : ZT_TOK_NORM_NONE;
    c.bert = bert;
    c.unk = 0;
    c.max_word_chars = max_chars;
    c.cls = 1;
    c.sep = 2;
    c.decode_cleanup = cleanup;
    strcpy(c.subword_prefix, "##");
    const uint8_t *toks[NV];
    uint32_t lens[NV];
    for (size_t i = 0; i < NV; i++) {
        toks[i] = (const uint8_t *)VOCAB[i];
        lens[i] = (uint32_t)strlen(VOCAB[i]);
    }
    return zt_tokenizer_create_cfg(&c, NV, toks, lens, 0, NULL, err, 256);
}

static void enc(zt_tokenizer *t, const char *s, zt_ids *o) {
    o->n = 0;
    zt_tokenizer_encode(t, (const uint8_t *)s, strlen(s), o);
}

/* the ids of s, as "3 4 5" */
static int ids_are(zt_tokenizer *t, const char *s, const char *want, char *got, size_t cap) {
    zt_ids o = {0};
    enc(t, s, &o);
    size_t k = 0;
    got[0] = 0;
    for (size_t i = 0; i < o.n && k < cap; i++) k += (size_t)snprintf(got + k, cap - k, "%s%u", i ? " " : "", o.v[i]);
    zt_ids_free(&o);
    return strcmp(got, want) == 0;
}

static int decodes_to(zt_tokenizer *t, const uint32_t *ids, size_t n, const char *want, char *got) {
    uint8_t *o = NULL;
    size_t len = 0;
    char err[256];
    int ok = zt_tokenizer_decode(t, ids, n, &o, &len, err, sizeof err) == 0;
    snprintf(got, 256, "%.*s", (int)len, o ? (const char *)o : "");
    free(o);
    return ok && strcmp(got, want) == 0;
}

static const uint32_t ALL = ZT_TOK_BERT_CLEAN | ZT_TOK_BERT_CHINESE | ZT_TOK_BERT_STRIP | ZT_TOK_BERT_LOWER;

static void by_hand(void) {
    char err[256], got[256];
    zt_tokenizer *t = make(ALL, 9, 1, err);
    check(t != NULL, "wp_create", "%s", err);
    if (!t) return;
    static const char *const cases[][2] = {
        {"unaffable", "3 4 5"},                 /* greedy longest match, continuation pieces */
        {"unaffablex", "0"},                    /* a part without a match: the whole word is one [UNK] */
        {"unaffables", "0"},                    /* 10 characters > max_word_chars 9 */
        {"  The cat,the. ", "6 16 8 6 7"},      /* lowercase; punctuation alone; spaces */
        {"Th\xc3\xa9", "6"},                     /* strip accents: NFD, then no Mn */
        {"\xc3\x89", "17"},                      /* "E" + U+0301 -> "e" */
        {"un\x01" "aff\xe2\x80\x8b", "3 4"},    /* clean_text drops Cc and Cf */
        {"a\tb\xc2\xa0" "a", "10 0 10"},         /* White_Space splits */
        {"\xe4\xb8\xad\xe6\x96\x87", "14 15"},  /* CJK ideographs are words of their own */
        {"\xc4\xb0", "12"},                      /* U+0130: NFD "I" + U+0307, no Mn, lowercase */
        {"do not", "25 26"},
        {"x\xf0\x9d\x85\xad\xcc\x81\x01\xf0\x9d\x85\xa5", "22 30 31"}, /* NFD orders the kept marks by class */
        {"", ""},
        {"\xff" "a", "10"},                      /* invalid UTF-8 reads as U+FFFD, which clean_text drops */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char name[64];
        snprintf(name, sizeof name, "wp_ids_%zu", i);
        check(ids_are(t, cases[i][0], cases[i][1], got, sizeof got), name, "'%s' gave '%s', expected '%s'",
              cases[i][0], got, cases[i][1]);
    }
    const uint32_t d1[] = {3, 4, 5, 8, 6, 7}, d2[] = {4, 3, 9}, d3[] = {25, 27, 28, 20, 10};
    check(decodes_to(t, d1, 6, "unaffable, the.", got), "wp_decode_join_cleanup", "got '%s'", got);
    check(decodes_to(t, d2, 3, "##aff uns", got), "wp_decode_first_continuation", "got '%s'", got);
    check(decodes_to(t, d3, 5, "don't don't ' a", got), "wp_decode_cleanup_rules", "got '%s'", got);
    const zt_tok_config *c = zt_tokenizer_config(t);
    check(c->cls == 1 && c->sep == 2 && c->n_begin == 0 && c->n_end == 0, "wp_cls_sep", "cls %u sep %u", c->cls, c->sep);
    zt_tokenizer_free(t);
    t = make(ZT_TOK_BERT_LOWER, 100, 1, err); /* without strip_accents U+0130 lowercases to "i" + U+0307 */
    check(t && ids_are(t, "\xc4\xb0", "12 13", got, sizeof got), "wp_lowercase_full_mapping", "got '%s'", got);
    zt_tokenizer_free(t);
    t = make(0, 100, 0, err);
    check(t && ids_are(t, "The un\x01" "aff", "29 0", got, sizeof got), "wp_no_normalizer", "got '%s'", got);
    check(t && decodes_to(t, d3, 5, "do n't do not ' a", got), "wp_decode_no_cleanup", "got '%s'", got);
    zt_tokenizer_free(t);
}

/* random text from pieces that stress every step, encoded whole and in random chunks */
static void streaming(void) {
    static const char *const pieces[] = {"un", "aff", "able", " ", "  ", "\t", "\n", ".", ",", "The", "\xc3\xa9",
                                         "e\xcc\x81", "\xcc\x81", "\xcc\x96", "\xe4\xb8\xad", "\x01", "\xe2\x80\x8b",
                                         "\xc4\xb0", "\xff", "\xe2\x82", "\xc2\xa0", "x", "a",
                                         "\xf0\x9d\x85\xa5", "\xf0\x9d\x85\xad"}; /* U+1D165, U+1D16D: Mc, classes 216, 226 */
    uint64_t r = 12345;
    for (uint32_t bert = 0; bert <= ALL; bert++) {
        char err[256];
        zt_tokenizer *t = make(bert, 12, 1, err);
        if (!t) {
            check(0, "wp_streaming", "%s", err);
            return;
        }
        int ok = 1;
        for (int round = 0; round < 20 && ok; round++) {
            char text[20000];
            size_t n = 0;
            while (n < sizeof text - 8) {
                r = r * 6364136223846793005ull + 1442695040888963407ull;
                const char *p = pieces[(r >> 33) % (sizeof pieces / sizeof *pieces)];
                const size_t l = strlen(p);
                if (n + l >= sizeof text - 8) break;
                memcpy(text + n, p, l);
                n += l;
            }
            zt_ids whole = {0}, parts = {0};
            zt_tokenizer_encode(t, (const uint8_t *)text, n, &whole);
            size_t done = 0, have = 0;
            while (done < n || have) {
                r = r * 6364136223846793005ull + 1442695040888963407ull;
                size_t more = 1 + (r >> 33) % (round % 2 ? 700 : 37);
                if (more > n - done) more = n - done;
                have += more;
                done += more;
                const int final = done == n;
                const size_t used = zt_tokenizer_encode_chunk(t, (const uint8_t *)text + done - have, have, final, &parts);
                if (final && used != have) ok = 0;
                have -= used;
                if (final) break;
            }
            ok = ok && whole.n == parts.n && memcmp(whole.v, parts.v, whole.n * sizeof *whole.v) == 0;
            zt_ids_free(&whole);
            zt_ids_free(&parts);
        }
        char name[64];
        snprintf(name, sizeof name, "wp_streaming_flags_%u", bert);
        check(ok, name, "chunked encoding differs from the whole text's");
        zt_tokenizer_free(t);
    }
}

static void file_round_trip(void) {
    char err[256], path[] = "/tmp/zt_wp_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return;
    close(fd);
    zt_tokenizer *t = make(ZT_TOK_BERT_CLEAN | ZT_TOK_BERT_LOWER, 7, 1, err);
    zt_tokenizer *u = NULL;
    if (t && zt_tokenizer_save(t, path, err, sizeof err) == 0) u = zt_tokenizer_load(path, NULL, err, sizeof err);
    check(u != NULL, "wp_zttok_load", "%s", err);
    if (u) {
        const zt_tok_config *a = zt_tokenizer_config(t), *b = zt_tokenizer_config(u);
        const char *text = "The unaffable, cat\xc3\xa9 \xe4\xb8\xad unaffabl";
        zt_ids x = {0}, y = {0};
        enc(t, text, &x);
        enc(u, text, &y);
        check(a->bert == b->bert && a->unk == b->unk && a->max_word_chars == b->max_word_chars && a->cls == b->cls &&
                  a->sep == b->sep && a->decode_cleanup == b->decode_cleanup &&
                  strcmp(a->subword_prefix, b->subword_prefix) == 0 && b->model == ZT_TOK_MODEL_WORDPIECE &&
                  x.n == y.n && memcmp(x.v, y.v, x.n * sizeof *x.v) == 0,
              "wp_zttok_same", "the reloaded tokenizer differs");
        zt_ids_free(&x);
        zt_ids_free(&y);
    }
    zt_tokenizer_free(t);
    zt_tokenizer_free(u);
    unlink(path);
}

static void refused(void) {
    char err[256];
    zt_tok_config c;
    zt_tok_config_gpt2(&c, ZT_TOK_NO_EOT);
    c.model = ZT_TOK_MODEL_WORDPIECE;
    c.pretok = ZT_TOK_PRE_BERT;
    c.unk = 5;
    const uint8_t *toks[2] = {(const uint8_t *)"a", (const uint8_t *)"b"};
    const uint32_t lens[2] = {1, 1}, merges[1][3] = {{0, 1, 1}};
    zt_tokenizer *t = zt_tokenizer_create_cfg(&c, 2, toks, lens, 0, NULL, err, sizeof err);
    check(!t && strstr(err, "unknown token"), "wp_refuse_unk", "%s", t ? "accepted" : err);
    zt_tokenizer_free(t);
    c.unk = 0;
    t = zt_tokenizer_create_cfg(&c, 2, toks, lens, 1, merges, err, sizeof err);
    check(!t && strstr(err, "merges"), "wp_refuse_merges", "%s", t ? "accepted" : err);
    zt_tokenizer_free(t);
    c.pretok = ZT_TOK_PRE_GPT2;
    t = zt_tokenizer_create_cfg(&c, 2, toks, lens, 0, NULL, err, sizeof err);
    check(!t, "wp_refuse_pretok", "%s", t ? "accepted" : err);
    zt_tokenizer_free(t);
}

int main(void) {
    by_hand();
    streaming();
    file_round_trip();
    refused();
    return check_exit_status();
}
