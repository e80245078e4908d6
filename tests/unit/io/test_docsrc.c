/* test_docsrc.c — unit tests of src/io/docsrc.c: documents from text and JSON Lines files, plain, gzip and
 * zstd. The expected documents are written out here as literal UTF-8 bytes (not produced by docsrc's own
 * decoder); compressed files are made with zlib's and libzstd's encoders. Every bad input must fail with one
 * line that names the file (and the line number and byte where the format has them). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "check.h"
#include "io/docsrc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

static char g_dir[256];

static char *path_of(const char *name) {
    static char p[8][512];
    static int k;
    k = (k + 1) % 8;
    snprintf(p[k], sizeof p[k], "%s/%s", g_dir, name);
    return p[k];
}

static void write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
    fclose(f);
}

/* gzip members: each of the n_parts pieces its own member, concatenated */
static uint8_t *gzip_bytes(const uint8_t *d, size_t n, int n_parts, size_t *out_n) {
    size_t cap = compressBound((uLong)n) + 64 * (size_t)n_parts + 64, k = 0;
    uint8_t *o = malloc(cap);
    for (int part = 0; part < n_parts; part++) {
        size_t a = n * (size_t)part / (size_t)n_parts, b = n * (size_t)(part + 1) / (size_t)n_parts;
        z_stream z;
        memset(&z, 0, sizeof z);
        deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
        z.next_in = (uint8_t *)d + a;
        z.avail_in = (uInt)(b - a);
        z.next_out = o + k;
        z.avail_out = (uInt)(cap - k);
        deflate(&z, Z_FINISH);
        k = cap - z.avail_out;
        deflateEnd(&z);
    }
    *out_n = k;
    return o;
}

static uint8_t *zstd_bytes(const uint8_t *d, size_t n, int n_parts, size_t *out_n) {
    size_t cap = ZSTD_compressBound(n) + 64 * (size_t)n_parts, k = 0;
    uint8_t *o = malloc(cap);
    for (int part = 0; part < n_parts; part++) {
        size_t a = n * (size_t)part / (size_t)n_parts, b = n * (size_t)(part + 1) / (size_t)n_parts;
        k += ZSTD_compress(o + k, cap - k, d + a, b - a, 3);
    }
    *out_n = k;
    return o;
}

/* the documents of a source, concatenated with a 0xFF byte after each (never in valid UTF-8) */
static int read_all(const char *path, const char *field, uint8_t **out, size_t *out_n, int *n_docs, char *err,
                    size_t errlen) {
    zt_docsrc *s;
    *out = NULL;
    *out_n = 0;
    *n_docs = 0;
    if (zt_docsrc_open(&s, path, field, err, errlen)) return -1;
    size_t cap = 0;
    for (;;) {
        const uint8_t *d;
        size_t n;
        int r = zt_docsrc_next(s, &d, &n, err, errlen);
        if (r < 0) {
            zt_docsrc_close(s);
            return -1;
        }
        if (r == 0) break;
        if (zt_docsrc_index(s) != (uint64_t)*n_docs) {
            snprintf(err, errlen, "index %llu after %d documents", (unsigned long long)zt_docsrc_index(s), *n_docs);
            zt_docsrc_close(s);
            return -1;
        }
        if (*out_n + n + 1 > cap) {
            cap = 2 * (*out_n + n + 1);
            *out = realloc(*out, cap);
        }
        memcpy(*out + *out_n, d, n);
        *out_n += n;
        (*out)[(*out_n)++] = 0xFF;
        (*n_docs)++;
    }
    zt_docsrc_close(s);
    return 0;
}

static void expect_docs(const char *name, const char *path, const char *field, const uint8_t *want, size_t want_n,
                        int want_docs) {
    uint8_t *got;
    size_t n;
    int nd;
    char err[512] = "";
    if (read_all(path, field, &got, &n, &nd, err, sizeof err)) check(0, name, "error: %s", err);
    else if (nd != want_docs) check(0, name, "%d documents (expected %d)", nd, want_docs);
    else if (n != want_n || memcmp(got, want, n) != 0) {
        size_t i = 0;
        while (i < n && i < want_n && got[i] == want[i]) i++;
        check(0, name, "documents differ at byte %zu (got %zu bytes, expected %zu)", i, n, want_n);
    } else check(1, name, NULL);
    free(got);
}

/* the first error of reading every document of path; checks it is one line containing each of the
   NULL-terminated substrings */
static void expect_error(const char *name, const char *path, const char *field, const char *const *subs) {
    uint8_t *got;
    size_t n;
    int nd;
    char err[512] = "";
    int r = read_all(path, field, &got, &n, &nd, err, sizeof err);
    free(got);
    if (r == 0) {
        check(0, name, "no error (read %d documents)", nd);
        return;
    }
    if (strchr(err, '\n')) {
        check(0, name, "the message has more than one line: %s", err);
        return;
    }
    for (const char *const *s = subs; *s; s++)
        if (!strstr(err, *s)) {
            check(0, name, "message lacks '%s': %s", *s, err);
            return;
        }
    check(1, name, NULL);
    if (getenv("ZT_SHOW")) printf("    %s\n", err);
}

static const char JSONL[] =
    "\xEF\xBB\xBF{\"text\": \"plain words\", \"id\": 1}\n"
    "{\"id\": [1, 2.5e-3, {\"a\": null}], \"text\": \"tab\\there \\\"q\\\" back\\\\slash \\/ \\b\\f\\r\\n\"}\r\n"
    "\n"
    "   \t \r\n"
    "{\"text\": \"\\u00e9t\\u00E9 \\u20ac \\ud83d\\ude00 caf\xC3\xA9 \xE4\xB8\xAD \xF0\x9F\x98\x81\"}\n"
    "{\"text\": \"first\", \"meta\": {\"x\": [true, false]}, \"text\": \"last wins\"}\n"
    "{\"te\\u0078t\": \"escaped key\", \"other\": \"\"}\n"
    "{\"text\": \"\"}\n"
    "{\"content\": \"c\", \"text\": \"no newline at the end\"}";
/* the same documents, as bytes, each followed by 0xFF */
static const char WANT[] = "plain words\xFF"
                           "tab\there \"q\" back\\slash / \b\f\r\n\xFF"
                           "\xC3\xA9t\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 caf\xC3\xA9 \xE4\xB8\xAD \xF0\x9F\x98\x81\xFF"
                           "last wins\xFF"
                           "escaped key\xFF"
                           "\xFF"
                           "no newline at the end\xFF";

static void test_formats(void) {
    static const struct {
        const char *name;
        zt_docsrc_kind kind;
        zt_docsrc_comp comp;
    } cases[] = {{"a.jsonl", ZT_DOCSRC_JSONL, ZT_DOCSRC_PLAIN},     {"a.json", ZT_DOCSRC_JSONL, ZT_DOCSRC_PLAIN},
                 {"d/a.jsonl.gz", ZT_DOCSRC_JSONL, ZT_DOCSRC_GZIP}, {"a.json.zst", ZT_DOCSRC_JSONL, ZT_DOCSRC_ZSTD},
                 {"a.jsonl.zst", ZT_DOCSRC_JSONL, ZT_DOCSRC_ZSTD},  {"a.txt.gz", ZT_DOCSRC_TEXT, ZT_DOCSRC_GZIP},
                 {"a.txt.zst", ZT_DOCSRC_TEXT, ZT_DOCSRC_ZSTD},     {"a.txt", ZT_DOCSRC_TEXT, ZT_DOCSRC_PLAIN},
                 {"jsonl", ZT_DOCSRC_TEXT, ZT_DOCSRC_PLAIN},         {"a.jsonl.txt", ZT_DOCSRC_TEXT, ZT_DOCSRC_PLAIN},
                 {"a.gz", ZT_DOCSRC_TEXT, ZT_DOCSRC_GZIP}};
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        zt_docsrc_kind k;
        zt_docsrc_comp c;
        zt_docsrc_format(cases[i].name, &k, &c);
        if (k != cases[i].kind || c != cases[i].comp) {
            check(0, "format_by_name", "%s: kind %d comp %d (expected %d %d)", cases[i].name, k, c, cases[i].kind,
                  cases[i].comp);
            bad = 1;
        }
    }
    if (!bad) check(1, "format_by_name", NULL);
}

static void test_jsonl(void) {
    const size_t n = sizeof JSONL - 1, wn = sizeof WANT - 1;
    write_file(path_of("a.jsonl"), JSONL, n);
    expect_docs("jsonl_documents_and_escapes", path_of("a.jsonl"), NULL, (const uint8_t *)WANT, wn, 7);
    size_t gn, zn;
    uint8_t *gz = gzip_bytes((const uint8_t *)JSONL, n, 3, &gn), *zs = zstd_bytes((const uint8_t *)JSONL, n, 2, &zn);
    write_file(path_of("a.jsonl.gz"), gz, gn);
    write_file(path_of("a.jsonl.zst"), zs, zn);
    expect_docs("jsonl_gzip_three_members", path_of("a.jsonl.gz"), NULL, (const uint8_t *)WANT, wn, 7);
    expect_docs("jsonl_zstd_two_frames", path_of("a.jsonl.zst"), NULL, (const uint8_t *)WANT, wn, 7);

    /* --field: another key; here every line must have it */
    static const char F[] = "{\"content\": \"one\", \"text\": 5}\n{\"content\": \"two\"}\n";
    write_file(path_of("f.jsonl"), F, sizeof F - 1);
    expect_docs("jsonl_other_field", path_of("f.jsonl"), "content", (const uint8_t *)"one\xFFtwo\xFF", 8, 2);

    /* count, seek, index */
    char err[512] = "";
    const char *paths[3] = {path_of("a.jsonl"), path_of("a.jsonl.gz"), path_of("a.jsonl.zst")};
    for (int i = 0; i < 3; i++) {
        zt_docsrc *s;
        uint64_t docs = 0, bytes = 0;
        const uint8_t *d = NULL;
        size_t len = 0;
        int ok = zt_docsrc_open(&s, paths[i], NULL, err, sizeof err) == 0;
        ok = ok && zt_docsrc_count(s, &docs, &bytes, err, sizeof err) == 0 && docs == 7 && bytes == n;
        ok = ok && zt_docsrc_index(s) == UINT64_MAX;
        ok = ok && zt_docsrc_seek(s, 3, err, sizeof err) == 0 && zt_docsrc_next(s, &d, &len, err, sizeof err) == 1 &&
             len == 9 && memcmp(d, "last wins", 9) == 0 && zt_docsrc_index(s) == 3 && zt_docsrc_line(s) == 6;
        ok = ok && zt_docsrc_seek(s, 0, err, sizeof err) == 0 && zt_docsrc_next(s, &d, &len, err, sizeof err) == 1 &&
             len == 11 && zt_docsrc_index(s) == 0 && zt_docsrc_line(s) == 1;
        ok = ok && zt_docsrc_seek(s, 7, err, sizeof err) == 0 && zt_docsrc_next(s, &d, &len, err, sizeof err) == 0;
        ok = ok && zt_docsrc_seek(s, 100, err, sizeof err) == 0 && zt_docsrc_next(s, &d, &len, err, sizeof err) == 0;
        char name[64];
        snprintf(name, sizeof name, "count_seek_index_%s", i == 0 ? "plain" : i == 1 ? "gzip" : "zstd");
        check(ok, name, "docs %llu bytes %llu (expected 7, %zu); err '%s'", (unsigned long long)docs,
              (unsigned long long)bytes, n, err);
        zt_docsrc_close(s);
    }
    free(gz);
    free(zs);
}

/* many documents and one long line (buffers grow and refill across lines), through each format */
static void test_large(void) {
    size_t cap = 8u << 20, n = 0, wn = 0;
    char *j = malloc(cap);
    uint8_t *want = malloc(cap);
    int docs = 0;
    for (int i = 0; i < 30000; i++, docs++) {
        n += (size_t)sprintf(j + n, "{\"n\": %d, \"text\": \"doc %d: caf\\u00e9 %d\"}\n", i, i, i * 7);
        wn += (size_t)sprintf((char *)want + wn, "doc %d: caf\xC3\xA9 %d\xFF", i, i * 7);
    }
    n += (size_t)sprintf(j + n, "{\"text\": \"");
    for (int i = 0; i < 300000; i++) {
        memcpy(j + n, "ab\\n ", 5);
        n += 5;
        memcpy(want + wn, "ab\n ", 4);
        wn += 4;
    }
    n += (size_t)sprintf(j + n, "\"}\n{\"text\": \"after\"}\n");
    want[wn++] = 0xFF;
    memcpy(want + wn, "after\xFF", 6);
    wn += 6;
    docs += 2;
    write_file(path_of("big.jsonl"), j, n);
    size_t gn, zn;
    uint8_t *gz = gzip_bytes((uint8_t *)j, n, 1, &gn), *zs = zstd_bytes((uint8_t *)j, n, 1, &zn);
    write_file(path_of("big.jsonl.gz"), gz, gn);
    write_file(path_of("big.jsonl.zst"), zs, zn);
    expect_docs("large_plain", path_of("big.jsonl"), NULL, want, wn, docs);
    expect_docs("large_gzip", path_of("big.jsonl.gz"), NULL, want, wn, docs);
    expect_docs("large_zstd", path_of("big.jsonl.zst"), NULL, want, wn, docs);

    /* the same bytes as a text file: one document, whole or in pieces */
    write_file(path_of("big.txt"), j, n);
    free(gz);
    free(zs);
    gz = gzip_bytes((uint8_t *)j, n, 2, &gn);
    zs = zstd_bytes((uint8_t *)j, n, 3, &zn);
    write_file(path_of("big.txt.gz"), gz, gn);
    write_file(path_of("big.txt.zst"), zs, zn);
    const char *tp[3] = {path_of("big.txt"), path_of("big.txt.gz"), path_of("big.txt.zst")};
    for (int i = 0; i < 3; i++) {
        char err[512] = "", name[64];
        zt_docsrc *s;
        uint8_t *got = malloc(n + 1);
        size_t k = 0, pieces = 0, biggest = 0;
        int ok = zt_docsrc_open(&s, tp[i], NULL, err, sizeof err) == 0, r = 0;
        const uint8_t *p;
        size_t len;
        while (ok && (r = zt_docsrc_read(s, &p, &len, err, sizeof err)) == 1 && k + len <= n) {
            memcpy(got + k, p, len);
            k += len;
            pieces++;
            if (len > biggest) biggest = len;
        }
        ok = ok && r == 0 && k == n && memcmp(got, j, n) == 0 && biggest <= ZT_DOCSRC_BLOCK && pieces >= 2;
        ok = ok && zt_docsrc_seek(s, 0, err, sizeof err) == 0 && zt_docsrc_next(s, &p, &len, err, sizeof err) == 1 &&
             len == n && memcmp(p, j, n) == 0 && zt_docsrc_next(s, &p, &len, err, sizeof err) == 0;
        snprintf(name, sizeof name, "text_whole_and_pieces_%s", i == 0 ? "plain" : i == 1 ? "gzip" : "zstd");
        check(ok, name, "read %zu of %zu bytes in %zu pieces; err '%s'", k, n, pieces, err);
        zt_docsrc_close(s);
        free(got);
    }
    free(j);
    free(want);
    free(gz);
    free(zs);
}

static void bad_jsonl(const char *name, const char *text, const char *const *subs) {
    char fn[64];
    snprintf(fn, sizeof fn, "%s.jsonl", name);
    write_file(path_of(fn), text, strlen(text));
    expect_error(name, path_of(fn), NULL, subs);
}

static void test_errors(void) {
    const char *ok2 = "{\"text\": \"a\"}\n{\"text\": \"b\"}\n";
    char buf[256];
    snprintf(buf, sizeof buf, "%s{\"text\": \"c\" \"d\"}\n", ok2);
    bad_jsonl("bad_json_missing_comma", buf,
              (const char *[]){"bad_json_missing_comma.jsonl:3: invalid JSON at byte 14 of the line", "expected ',' or '}'", NULL});
    snprintf(buf, sizeof buf, "%s{\"text\": \"c\"\n", ok2);
    bad_jsonl("bad_json_unclosed", buf, (const char *[]){".jsonl:3: invalid JSON at byte 13", NULL});
    bad_jsonl("bad_json_not_object", "[1, 2]\n", (const char *[]){":1: invalid JSON at byte 1", "not a JSON object", NULL});
    bad_jsonl("bad_json_trailing", "{\"text\": \"a\"} x\n", (const char *[]){":1: invalid JSON at byte 15", "more after the object", NULL});
    bad_jsonl("bad_json_escape", "{\"text\": \"a\\qb\"}\n", (const char *[]){":1: invalid JSON at byte 12", "unknown escape", NULL});
    bad_jsonl("bad_json_control", "{\"text\": \"a\tb\"}\n", (const char *[]){":1: invalid JSON at byte 12", "control character", NULL});
    bad_jsonl("bad_json_number", "{\"n\": 01, \"text\": \"a\"}\n", (const char *[]){":1: invalid JSON at byte 8", NULL});
    bad_jsonl("bad_json_literal", "{\"n\": nul, \"text\": \"a\"}\n", (const char *[]){":1: invalid JSON at byte 7", "expected a value", NULL});
    snprintf(buf, sizeof buf, "%s\n{\"txt\": \"c\"}\n", ok2);
    bad_jsonl("bad_missing_field", buf, (const char *[]){"bad_missing_field.jsonl:4: no field \"text\"", "see --field", NULL});
    bad_jsonl("bad_field_number", "{\"text\": 12}\n", (const char *[]){":1: field \"text\" is a number (expected a string)", NULL});
    bad_jsonl("bad_field_array", "{\"text\": [\"a\"]}\n", (const char *[]){":1: field \"text\" is an array", NULL});
    bad_jsonl("bad_field_null", "{\"text\": \"a\", \"text\": null}\n", (const char *[]){":1: field \"text\" is null", NULL});
    snprintf(buf, sizeof buf, "%s{\"text\": \"ok \xC3\x28 no\"}\n", ok2);
    bad_jsonl("bad_utf8", buf, (const char *[]){"bad_utf8.jsonl:3: invalid UTF-8 at byte 14 of the line", NULL});
    bad_jsonl("bad_utf8_overlong", "{\"text\": \"\xC0\xAF\"}\n", (const char *[]){":1: invalid UTF-8 at byte 11", NULL});
    bad_jsonl("bad_utf8_surrogate_bytes", "{\"text\": \"\xED\xA0\x80\"}\n", (const char *[]){":1: invalid UTF-8 at byte 11", NULL});
    bad_jsonl("bad_lone_surrogate", "{\"text\": \"a\\ud83d b\"}\n", (const char *[]){":1: field \"text\" holds a lone surrogate \\uD83D", NULL});
    bad_jsonl("bad_no_documents", "\n  \n\r\n", (const char *[]){"bad_no_documents.jsonl: no documents", NULL});

    /* compressed: truncated, corrupt, wrong suffix, empty */
    size_t n = 0;
    char *j = malloc(1 << 20);
    for (int i = 0; i < 5000; i++) n += (size_t)sprintf(j + n, "{\"text\": \"document number %d\"}\n", i);
    size_t gn, zn;
    uint8_t *gz = gzip_bytes((uint8_t *)j, n, 1, &gn), *zs = zstd_bytes((uint8_t *)j, n, 1, &zn);
    write_file(path_of("trunc.jsonl.gz"), gz, gn / 2);
    expect_error("bad_gzip_truncated", path_of("trunc.jsonl.gz"), NULL, (const char *[]){"trunc.jsonl.gz: truncated gzip data", NULL});
    write_file(path_of("trunc8.jsonl.gz"), gz, gn - 4); /* only the trailer's length is missing */
    expect_error("bad_gzip_trailer_cut", path_of("trunc8.jsonl.gz"), NULL, (const char *[]){"truncated gzip data", NULL});
    for (size_t i = 40; i < 80; i++) gz[i] ^= 0x5A;
    write_file(path_of("corrupt.jsonl.gz"), gz, gn);
    expect_error("bad_gzip_corrupt", path_of("corrupt.jsonl.gz"), NULL, (const char *[]){"corrupt.jsonl.gz: corrupt gzip data (", NULL});
    write_file(path_of("trunc.jsonl.zst"), zs, zn - 7);
    expect_error("bad_zstd_truncated", path_of("trunc.jsonl.zst"), NULL, (const char *[]){"trunc.jsonl.zst: truncated zstd data", NULL});
    for (size_t i = 20; i < 40; i++) zs[i] ^= 0x5A;
    write_file(path_of("corrupt.jsonl.zst"), zs, zn);
    expect_error("bad_zstd_corrupt", path_of("corrupt.jsonl.zst"), NULL, (const char *[]){"corrupt.jsonl.zst: corrupt zstd data (", NULL});
    write_file(path_of("plain.jsonl.gz"), j, n);
    expect_error("bad_not_gzip", path_of("plain.jsonl.gz"), NULL, (const char *[]){"plain.jsonl.gz: not gzip data", NULL});
    write_file(path_of("plain.txt.zst"), j, n);
    expect_error("bad_not_zstd", path_of("plain.txt.zst"), NULL, (const char *[]){"plain.txt.zst: not zstd data", NULL});
    write_file(path_of("empty.jsonl.zst"), "", 0);
    expect_error("bad_empty_zstd", path_of("empty.jsonl.zst"), NULL, (const char *[]){"empty.jsonl.zst: not zstd data (an empty file", NULL});
    write_file(path_of("empty.txt"), "", 0);
    expect_error("bad_empty_text", path_of("empty.txt"), NULL, (const char *[]){"empty.txt: empty input file", NULL});
    uint8_t *e0 = gzip_bytes((const uint8_t *)"", 0, 1, &gn);
    write_file(path_of("empty.txt.gz"), e0, gn);
    expect_error("bad_empty_text_gzip", path_of("empty.txt.gz"), NULL, (const char *[]){"empty.txt.gz: empty input file", NULL});
    expect_error("bad_missing_file", path_of("nope.jsonl"), NULL, (const char *[]){"nope.jsonl: cannot open input file", NULL});
    free(e0);
    free(j);
    free(gz);
    free(zs);
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/zt-docsrc.XXXXXX");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_formats();
    test_jsonl();
    test_large();
    test_errors();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_dir);
    return check_exit_status();
}
