/* test_util.c — unit tests of the helpers in src/util/: the JSON reader (json.c), the hash map
 * (hashmap.c) and the progress display's pure parts (progress.c).
 *
 *  - JSON: valid documents (every type, nesting, key order, offsets of values), string escapes
 *    (\uXXXX, surrogate pairs, a lone surrogate, \u0000 inside a string), 64-bit integers (exact
 *    past 2^53, the int64 limits, one past them), and invalid documents: each must fail with the
 *    documented message at the right byte and line, and truncated text must say "unexpected end of
 *    file";
 *  - hash map: 200k keys of 0..40 bytes (NULs included) against a reference kept here, growth,
 *    put of a present key, uint64_t keys equal to their 8 bytes, iteration, filter (survivors,
 *    compacted long keys, slot count), clear, the growth rule of zt_hashmap_slots_for;
 *  - progress: the bar string, ETA formatting, when plain lines are due.
 *
 * Output: one line per case, `PASS name` or `FAIL name: reason`; exit 1 if any failed.
 */
#include "util/hashmap.h"
#include "util/json.h"
#include "util/progress.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

/* ================================================================== JSON */

static int parse(const char *text, zt_json *j, zt_json_error *e) { return zt_json_parse_ex(text, strlen(text), j, e); }

static void test_json_valid(void)
{
    const char *doc = "{\"a\": [1, -2.5, true, false, null, \"x\"],\n \"b\": {\"c\": {}, \"d\": []}, \"a\": 7}";
    zt_json j;
    zt_json_error e;
    int rc = parse(doc, &j, &e);
    if (rc) {
        check(0, "json_valid_document", "parse failed: byte %zu: %s", e.off, e.what);
        return;
    }
    const zt_json *a = zt_json_get(&j, "a"), *b = zt_json_get(&j, "b");
    int ok = j.type == ZT_JSON_OBJ && j.n == 3 && strcmp(j.keys[0], "a") == 0 && strcmp(j.keys[2], "a") == 0 &&
             j.key_lens[1] == 1 && a == &j.items[0] && a->type == ZT_JSON_ARR && a->n == 6 &&
             a->items[0].type == ZT_JSON_NUM && a->items[0].is_int && a->items[0].inum == 1 &&
             a->items[1].type == ZT_JSON_NUM && !a->items[1].is_int && a->items[1].num == -2.5 &&
             a->items[2].type == ZT_JSON_BOOL && a->items[2].num == 1 && a->items[3].type == ZT_JSON_BOOL &&
             a->items[3].num == 0 && a->items[4].type == ZT_JSON_NULL && a->items[5].type == ZT_JSON_STR &&
             strcmp(a->items[5].str, "x") == 0 && a->items[5].len == 1 && b && b->type == ZT_JSON_OBJ &&
             zt_json_get(b, "c")->type == ZT_JSON_OBJ && zt_json_get(b, "c")->n == 0 &&
             zt_json_get(b, "d")->type == ZT_JSON_ARR && zt_json_get(b, "d")->n == 0 && !zt_json_get(&j, "z") &&
             !zt_json_get(a, "a") && a->off == 6 && a->items[1].off == 10 && zt_json_line(doc, b->off) == 2 &&
             j.items[2].inum == 7;
    check(ok, "json_valid_document", "a tree field differs from the document");
    zt_json_free(&j);
    zt_json_free(NULL);

    /* scalars at the top level, whitespace around, a text that is not NUL-terminated */
    const char buf[] = {' ', '4', '2', ' ', '\n', 'x'};
    ok = zt_json_parse_ex(buf, 5, &j, &e) == 0 && j.type == ZT_JSON_NUM && j.inum == 42;
    zt_json_free(&j);
    ok = ok && parse("\t\"s\"\r\n", &j, &e) == 0 && j.type == ZT_JSON_STR && strcmp(j.str, "s") == 0;
    zt_json_free(&j);
    const int deep_ok_n = ZT_JSON_MAX_DEPTH;
    char deep[2 * ZT_JSON_MAX_DEPTH + 1];
    memset(deep, '[', (size_t)deep_ok_n);
    memset(deep + deep_ok_n, ']', (size_t)deep_ok_n);
    deep[2 * deep_ok_n] = 0;
    ok = ok && parse(deep, &j, &e) == 0;
    zt_json_free(&j);
    check(ok, "json_scalars_and_depth", "a top-level scalar, an unterminated buffer or %d nested arrays failed",
          ZT_JSON_MAX_DEPTH);
}

static void test_json_escapes(void)
{
    zt_json j;
    zt_json_error e;
    /* "\"\\/\b\f\n\r\t", e-acute, euro, U+1F600 as a surrogate pair, a NUL, a lone high surrogate */
    const char *doc = "\"\\\"\\\\\\/\\b\\f\\n\\r\\t|\\u00e9|\\u20AC|\\ud83d\\ude00|a\\u0000b|\\ud800x\"";
    const char want[] = "\"\\/\b\f\n\r\t|\xC3\xA9|\xE2\x82\xAC|\xF0\x9F\x98\x80|a\0b|\xED\xA0\x80x";
    int rc = parse(doc, &j, &e);
    int ok = rc == 0 && j.type == ZT_JSON_STR && j.len == sizeof want - 1 && memcmp(j.str, want, j.len) == 0 &&
             j.str[j.len] == 0;
    check(ok, "json_string_escapes", "rc %d, got %zu bytes (expected %zu)", rc, rc ? 0 : j.len, sizeof want - 1);
    zt_json_free(&j);
    /* raw UTF-8 (and bytes that are not UTF-8) pass through; keys are unescaped too */
    rc = parse("{\"k\\u0041\xC3\xA9\": \"\xFF\xFE\"}", &j, &e);
    ok = rc == 0 && j.n == 1 && j.key_lens[0] == 4 && memcmp(j.keys[0], "kA\xC3\xA9", 4) == 0 &&
         j.items[0].len == 2 && memcmp(j.items[0].str, "\xFF\xFE", 2) == 0;
    check(ok, "json_raw_bytes_and_keys", "rc %d", rc);
    zt_json_free(&j);
}

static void test_json_numbers(void)
{
    static const struct {
        const char *text;
        int is_int;
        long long inum;
        double num;
    } cases[] = {
        {"0", 1, 0, 0},
        {"-0", 1, 0, 0},
        {"9007199254740993", 1, 9007199254740993LL, 9007199254740992.0}, /* 2^53 + 1: exact only as an integer */
        {"9223372036854775807", 1, 9223372036854775807LL, 9223372036854775807.0},
        {"-9223372036854775808", 1, (-9223372036854775807LL - 1), -9223372036854775808.0},
        {"9223372036854775808", 0, 0, 9223372036854775808.0},             /* one past int64: a double only */
        {"-9223372036854775809", 0, 0, -9223372036854775809.0},
        {"123456789012345678901234567890", 0, 0, 123456789012345678901234567890.0},
        {"1.5", 0, 0, 1.5},
        {"-2.25e2", 0, 0, -225},
        {"1E+3", 0, 0, 1000},
        {"5e-1", 0, 0, 0.5},
        {"1.0", 0, 0, 1},
    };
    int bad = 0;
    char why[200] = "";
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        zt_json j;
        zt_json_error e;
        int rc = parse(cases[i].text, &j, &e);
        if (rc || j.type != ZT_JSON_NUM || j.is_int != cases[i].is_int || (j.is_int && j.inum != cases[i].inum) ||
            j.num != cases[i].num) {
            if (!bad++)
                snprintf(why, sizeof why, "%s: rc %d is_int %d inum %lld num %.17g", cases[i].text, rc, j.is_int, j.inum,
                         j.num);
        }
        zt_json_free(&j);
    }
    check(!bad, "json_numbers_and_int64", "%d of %zu wrong, first %s", bad, sizeof cases / sizeof *cases, why);
}

static void test_json_invalid(void)
{
    static const struct {
        const char *text;
        size_t off;
        int line, eof;
        const char *what;     /* the message starts with this */
    } cases[] = {
        {"", 0, 1, 1, "unexpected end of file"},
        {"   ", 3, 1, 1, "unexpected end of file"},
        {"{", 1, 1, 1, "unexpected end of file"},
        {"{\"a\": [1, 2", 11, 1, 1, "unexpected end of file"},
        {"[\"abc", 5, 1, 1, "unexpected end of file inside a string"},
        {"[\"ab\\", 5, 1, 1, "unexpected end of file inside a string"},
        {"tru", 3, 1, 1, "unexpected end of file"},
        {"[1,]", 3, 1, 0, "unexpected character ']'"},
        {"{\"a\":1,}", 7, 1, 0, "expected a string (an object key)"},
        {"{\"a\" 1}", 5, 1, 0, "expected ':' after an object key"},
        {"[1 2]", 3, 1, 0, "expected ',' or ']'"},
        {"{\"a\":1 \"b\":2}", 7, 1, 0, "expected ',' or '}'"},
        {"{1:2}", 1, 1, 0, "expected a string (an object key)"},
        {"01", 0, 1, 0, "bad number (leading zero)"},
        {"-", 1, 1, 1, "unexpected end of file"},
        {"-x", 0, 1, 0, "bad number"},
        {"1.", 2, 1, 1, "unexpected end of file"},
        {"1.e5", 0, 1, 0, "bad number (no digit after '.')"},
        {"1e", 2, 1, 1, "unexpected end of file"},
        {"1e+x", 0, 1, 0, "bad number (no digit in the exponent)"},
        {"+1", 0, 1, 0, "unexpected character '+'"},
        {".5", 0, 1, 0, "unexpected character '.'"},
        {"trux", 3, 1, 0, "unexpected character 'x'"},
        {"nul", 3, 1, 1, "unexpected end of file"},
        {"NaN", 0, 1, 0, "unexpected character 'N'"},
        {"\"a\tb\"", 2, 1, 0, "control character 0x09 in a string"},
        {"\"\\x\"", 1, 1, 0, "bad escape in a string"},
        {"\"\\u12\"", 1, 1, 0, "bad \\u escape in a string"},
        {"\"\\u12g4\"", 1, 1, 0, "bad \\u escape in a string"},
        {"1 2", 2, 1, 0, "text after the JSON value"},
        {"{}\n\n}", 4, 3, 0, "text after the JSON value"},
        {"{\n\"a\":\n}", 7, 3, 0, "unexpected character '}'"},
        {"[\x01]", 1, 1, 0, "unexpected byte 0x01"},
        {"// c\n1", 0, 1, 0, "unexpected character '/'"},
    };
    int bad = 0;
    char why[300] = "";
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        zt_json j;
        zt_json_error e;
        int rc = parse(cases[i].text, &j, &e);
        if (!rc || e.off != cases[i].off || e.line != cases[i].line || e.eof != cases[i].eof ||
            strncmp(e.what, cases[i].what, strlen(cases[i].what)) != 0 || j.type != ZT_JSON_NULL || j.n != 0) {
            if (!bad++)
                snprintf(why, sizeof why, "'%s': rc %d, byte %zu line %d eof %d '%s' (expected byte %zu line %d eof %d '%s')",
                         cases[i].text, rc, e.off, e.line, e.eof, e.what, cases[i].off, cases[i].line, cases[i].eof,
                         cases[i].what);
        }
        if (!rc) zt_json_free(&j);
    }
    check(!bad, "json_invalid_documents", "%d of %zu wrong, first %s", bad, sizeof cases / sizeof *cases, why);

    /* nesting one level too deep; the zt_json_parse form of the message */
    char deep[ZT_JSON_MAX_DEPTH + 2];
    memset(deep, '[', sizeof deep - 1);
    deep[sizeof deep - 1] = 0;
    zt_json j;
    zt_json_error e;
    int rc = parse(deep, &j, &e);
    int ok = rc && e.off == ZT_JSON_MAX_DEPTH && strncmp(e.what, "nested too deeply", 17) == 0;
    char err[128] = "";
    rc = zt_json_parse("[1,,2]", 6, &j, err, sizeof err);
    ok = ok && rc && strcmp(err, "byte 3: unexpected character ','") == 0;
    check(ok, "json_depth_limit_and_message", "got '%s' / '%s'", e.what, err);
}

/* ================================================================== hash map */

/* the i-th test key: 0..40 bytes from a counter, NULs and short/long lengths included */
static size_t make_key(uint64_t i, uint8_t *k)
{
    size_t len = (size_t)((i * 7919) % 41);
    uint64_t x = i * 0x9E3779B97F4A7C15ull + 12345;
    for (size_t b = 0; b < len; b++) {
        x ^= x >> 29;
        x *= 0xbf58476d1ce4e5b9ull;
        k[b] = (uint8_t)(x >> 56);
        if (b % 5 == 3) k[b] = 0; /* NULs inside keys */
    }
    /* distinct keys: the index in the last 8 bytes when there is room, else short keys by length
       and contents are made distinct by the loop below */
    if (len >= 8) memcpy(k + len - 8, &i, 8);
    return len;
}

static int keep_even(uint64_t val, void *ctx) { return val % *(const uint64_t *)ctx == 0; }

static void test_hashmap_bulk(void)
{
    enum { N = 200000 };
    zt_hashmap *m = zt_hashmap_create(16);
    uint8_t k[64];
    size_t expect_bytes = 0, n = 0, dup = 0;
    /* keys shorter than 8 bytes repeat (there are few of them): the first value wins */
    uint64_t *first = calloc(N, sizeof *first);
    for (uint64_t i = 0; i < N; i++) {
        size_t len = make_key(i, k);
        int added = -1;
        uint64_t *v = zt_hashmap_put(m, k, len, i, &added);
        if (added) {
            expect_bytes += len;
            n++;
            first[i] = i;
        } else {
            dup++;
            first[i] = *v;
        }
        if (!v || (added && *v != i)) {
            check(0, "hashmap_put_get", "put %llu returned a wrong slot", (unsigned long long)i);
            zt_hashmap_free(m);
            free(first);
            return;
        }
    }
    int bad = 0;
    for (uint64_t i = 0; i < N; i++) {
        size_t len = make_key(i, k);
        const uint64_t *v = zt_hashmap_get(m, k, len);
        bad += !v || *v != first[i];
    }
    int added = -1;
    size_t len0 = make_key(5, k);
    uint64_t *v = zt_hashmap_put(m, k, len0, 999, &added);
    int ok = !bad && added == 0 && *v == first[5] && zt_hashmap_count(m) == n && zt_hashmap_key_bytes(m) == expect_bytes;
    /* absent keys */
    for (uint64_t i = N; i < N + 1000 && ok; i++) {
        size_t len = make_key(i, k);
        if (len >= 8) ok = !zt_hashmap_get(m, k, len);
    }
    ok = ok && 2 * zt_hashmap_count(m) <= zt_hashmap_slots(m);
    check(ok, "hashmap_put_get", "%d wrong values, count %zu (expected %zu), key bytes %zu (expected %zu), %zu repeats",
          bad, zt_hashmap_count(m), n, zt_hashmap_key_bytes(m), expect_bytes, dup);

    /* iteration sees every entry once, with its key and value */
    size_t seen = 0, seen_bytes = 0;
    bad = 0;
    for (size_t s = 0; s < zt_hashmap_slots(m); s++) {
        const uint8_t *key;
        size_t len;
        uint64_t val;
        if (!zt_hashmap_at(m, s, &key, &len, &val)) continue;
        seen++;
        seen_bytes += len;
        const uint64_t *g = zt_hashmap_get(m, key, len);
        bad += !g || *g != val;
    }
    check(seen == n && seen_bytes == expect_bytes && !bad, "hashmap_iterate", "saw %zu entries (%zu), %d mismatches",
          seen, n, bad);

    /* filter: keep even values; long keys move to a compacted arena */
    size_t keep_n = 0, keep_bytes = 0;
    for (uint64_t i = 0; i < N; i++) {
        if (first[i] != i || i % 2) continue;
        keep_n++;
        keep_bytes += make_key(i, k);
    }
    uint64_t two = 2;
    zt_hashmap_filter(m, keep_even, &two);
    bad = 0;
    for (uint64_t i = 0; i < N; i++) {
        size_t len = make_key(i, k);
        const uint64_t *g = zt_hashmap_get(m, k, len);
        if (first[i] % 2 == 0) bad += !g || *g != first[i];
        else bad += g != NULL;
    }
    size_t want_slots = 16;
    while (want_slots < 2 * (keep_n + 1)) want_slots *= 2;
    ok = !bad && zt_hashmap_count(m) == keep_n && zt_hashmap_key_bytes(m) == keep_bytes &&
         zt_hashmap_slots(m) == want_slots;
    check(ok, "hashmap_filter", "%d wrong after filter, count %zu (%zu), key bytes %zu (%zu), slots %zu (%zu)", bad,
          zt_hashmap_count(m), keep_n, zt_hashmap_key_bytes(m), keep_bytes, zt_hashmap_slots(m), want_slots);

    /* clear keeps the slots; the map works again afterwards */
    size_t slots = zt_hashmap_slots(m);
    zt_hashmap_clear(m);
    len0 = make_key(10, k);
    ok = zt_hashmap_count(m) == 0 && zt_hashmap_key_bytes(m) == 0 && zt_hashmap_slots(m) == slots &&
         !zt_hashmap_get(m, k, len0);
    zt_hashmap_put(m, k, len0, 77, &added);
    v = zt_hashmap_get(m, k, len0);
    ok = ok && added == 1 && v && *v == 77 && zt_hashmap_count(m) == 1;
    check(ok, "hashmap_clear", "after clear: count %zu, slots %zu (had %zu)", zt_hashmap_count(m), zt_hashmap_slots(m),
          slots);
    zt_hashmap_free(m);
    zt_hashmap_free(NULL);
    free(first);
}

static void test_hashmap_u64_and_growth(void)
{
    zt_hashmap *m = zt_hashmap_create(4096);
    int ok = zt_hashmap_slots(m) == 4096 && zt_hashmap_slots_for(m, 2048) == 4096 &&
             zt_hashmap_slots_for(m, 2049) == 8192 && zt_hashmap_slots_for(m, 0) == 4096;
    int bad = 0;
    for (uint64_t i = 0; i < 50000; i++) {
        uint64_t key = (i * 31) << 32 | (i * 17 + 3);
        int added;
        if (i % 2) zt_hashmap_put_u64(m, key, i, &added);
        else zt_hashmap_put(m, &key, sizeof key, i, &added);
        bad += added != 1;
        if (i == 2048 && zt_hashmap_slots(m) != 8192) bad++; /* the 2049th entry doubled the table */
    }
    for (uint64_t i = 0; i < 50000; i++) {
        uint64_t key = (i * 31) << 32 | (i * 17 + 3);
        const uint64_t *a = zt_hashmap_get_u64(m, key), *b = zt_hashmap_get(m, &key, sizeof key);
        bad += !a || a != b || *a != i;
    }
    ok = ok && !bad && !zt_hashmap_get_u64(m, 1) && zt_hashmap_count(m) == 50000 && zt_hashmap_key_bytes(m) == 8 * 50000;
    /* the empty key and one byte are keys like any other */
    zt_hashmap_put(m, "", 0, 5, NULL);
    zt_hashmap_put(m, "\0", 1, 6, NULL);
    const uint64_t *e0 = zt_hashmap_get(m, "", 0), *e1 = zt_hashmap_get(m, "\0", 1);
    ok = ok && e0 && *e0 == 5 && e1 && *e1 == 6 && !zt_hashmap_get(m, "\0\0", 2);
    check(ok, "hashmap_u64_keys_and_growth", "%d wrong, count %zu, slots %zu", bad, zt_hashmap_count(m),
          zt_hashmap_slots(m));
    zt_hashmap_free(m);
}

/* ================================================================== progress */

static void test_progress(void)
{
    char bar[32], eta[32];
    zt_progress_bar(bar, 10, 3, 10);
    int ok = strcmp(bar, "###.......") == 0;
    zt_progress_bar(bar, 4, 5, 0);
    ok = ok && strcmp(bar, "....") == 0;
    zt_progress_bar(bar, 24, 7, 7);
    ok = ok && strcmp(bar, "########################") == 0;
    zt_progress_eta(65, eta, sizeof eta);
    ok = ok && strcmp(eta, "01:05") == 0;
    zt_progress_eta(3725.4, eta, sizeof eta);
    ok = ok && strcmp(eta, "1:02:05") == 0;
    zt_progress_eta(-1, eta, sizeof eta);
    ok = ok && strcmp(eta, "--:--") == 0;
    zt_progress_eta(NAN, eta, sizeof eta);
    ok = ok && strcmp(eta, "--:--") == 0;
    check(ok, "progress_bar_and_eta", "bar '%s', eta '%s'", bar, eta);

    /* a file is not a terminal: no redraws, a plain line for each new tenth */
    FILE *f = tmpfile();
    zt_progress p;
    zt_progress_start(&p, f);
    ok = p.on && !p.tty && !zt_progress_due(&p, 0, 1);
    int t[6] = {zt_progress_tenth(&p, 0.05, 0), zt_progress_tenth(&p, 0.1, 0), zt_progress_tenth(&p, 0.15, 0),
                zt_progress_tenth(&p, 0.35, 0), zt_progress_tenth(&p, 1.0, 0), zt_progress_tenth(&p, 1.0, 0)};
    ok = ok && t[0] == -1 && t[1] == 1 && t[2] == -1 && t[3] == 3 && t[4] == 10 && t[5] == -1;
    zt_progress_draw(&p, "bar %d", 1); /* not a terminal: nothing */
    zt_progress_print(&p, "line %d\n", 2);
    char got[64] = "";
    rewind(f);
    size_t n = fread(got, 1, sizeof got - 1, f);
    got[n] = 0;
    fclose(f);
    ok = ok && strcmp(got, "line 2\n") == 0;
    check(ok, "progress_plain_lines", "tenths %d %d %d %d %d %d, file '%s'", t[0], t[1], t[2], t[3], t[4], t[5], got);
}

int main(void)
{
    test_json_valid();
    test_json_escapes();
    test_json_numbers();
    test_json_invalid();
    test_hashmap_bulk();
    test_hashmap_u64_and_growth();
    test_progress();
    return g_fail ? 1 : 0;
}
