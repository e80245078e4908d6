/* fuzz_json.c — libFuzzer target: the JSON reader (src/util/json.c).
 *
 * The input is the document. Checks besides the sanitizers: a failure has a message, a byte
 * offset inside the text and a line >= 1; a success gives a tree whose strings are
 * NUL-terminated at their length, whose offsets lie in the text, whose exact integers equal their
 * doubles; and the tree written back as JSON (every string escaped, numbers as parsed) parses to
 * the same tree.
 */
#include "fuzz_common.h"
#include "util/json.h"

#include <math.h>

typedef struct out { char *s; size_t n, cap; } out;

static void put(out *o, const char *s, size_t n) {
    if (o->n + n + 1 > o->cap) {
        o->cap = 2 * (o->n + n + 1) + 256;
        o->s = realloc(o->s, o->cap);
    }
    memcpy(o->s + o->n, s, n);
    o->n += n;
    o->s[o->n] = 0;
}

static void put_str(out *o, const char *s, size_t n) {
    put(o, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char e[8];
        if (c < 0x20 || c == '"' || c == '\\') {
            snprintf(e, sizeof e, "\\u%04x", c);
            put(o, e, 6);
        } else {
            put(o, (const char *)&c, 1);
        }
    }
    put(o, "\"", 1);
}

/* the tree as JSON text; numbers: the exact integer, or the double with 17 digits */
static void dump(out *o, const zt_json *v) {
    char b[64];
    switch (v->type) {
    case ZT_JSON_NULL: put(o, "null", 4); break;
    case ZT_JSON_BOOL: put(o, v->num ? "true" : "false", v->num ? 4 : 5); break;
    case ZT_JSON_NUM:
        if (v->is_int) snprintf(b, sizeof b, "%lld", v->inum);
        else if (isfinite(v->num)) snprintf(b, sizeof b, "%.17g", v->num);
        else snprintf(b, sizeof b, "%s1e999", v->num < 0 ? "-" : ""); /* an overflowing literal */
        if (!v->is_int && !strpbrk(b, ".eE")) strcat(b, ".0");
        put(o, b, strlen(b));
        break;
    case ZT_JSON_STR: put_str(o, v->str, v->len); break;
    case ZT_JSON_ARR:
    case ZT_JSON_OBJ:
        put(o, v->type == ZT_JSON_OBJ ? "{" : "[", 1);
        for (int i = 0; i < v->n; i++) {
            if (i) put(o, ",", 1);
            if (v->type == ZT_JSON_OBJ) {
                put_str(o, v->keys[i], v->key_lens[i]);
                put(o, ":", 1);
            }
            dump(o, &v->items[i]);
        }
        put(o, v->type == ZT_JSON_OBJ ? "}" : "]", 1);
        break;
    }
}

static void check_tree(const zt_json *v, size_t size, int depth) {
    FZ_CHECK(depth <= ZT_JSON_MAX_DEPTH + 1, "depth %d", depth);
    FZ_CHECK(v->off < size, "offset %zu of a %zu-byte text", v->off, size);
    switch (v->type) {
    case ZT_JSON_NUM:
        if (v->is_int) FZ_CHECK((double)v->inum == v->num, "integer %lld but double %.17g", v->inum, v->num);
        break;
    case ZT_JSON_STR:
        FZ_CHECK(v->str && v->str[v->len] == 0 && v->len <= size, "string not NUL-terminated at its length");
        break;
    case ZT_JSON_ARR:
    case ZT_JSON_OBJ:
        FZ_CHECK(v->n >= 0 && (v->n == 0 || v->items), "children");
        for (int i = 0; i < v->n; i++) {
            if (v->type == ZT_JSON_OBJ) {
                FZ_CHECK(v->keys[i] && v->keys[i][v->key_lens[i]] == 0, "key not NUL-terminated at its length");
                const zt_json *g = zt_json_get(v, v->keys[i]);
                FZ_CHECK(g && g <= &v->items[i], "zt_json_get misses key %d", i);
            }
            check_tree(&v->items[i], size, depth + 1);
        }
        break;
    default: break;
    }
}

static int same(const zt_json *a, const zt_json *b) {
    if (a->type != b->type) return 0;
    switch (a->type) {
    case ZT_JSON_NULL: return 1;
    case ZT_JSON_BOOL: return a->num == b->num;
    case ZT_JSON_NUM:
        if (a->is_int != b->is_int) return 0;
        return a->is_int ? a->inum == b->inum : (a->num == b->num || (isnan(a->num) && isnan(b->num)));
    case ZT_JSON_STR: return a->len == b->len && memcmp(a->str, b->str, a->len) == 0;
    case ZT_JSON_ARR:
    case ZT_JSON_OBJ:
        if (a->n != b->n) return 0;
        for (int i = 0; i < a->n; i++) {
            if (a->type == ZT_JSON_OBJ &&
                (a->key_lens[i] != b->key_lens[i] || memcmp(a->keys[i], b->keys[i], a->key_lens[i]) != 0))
                return 0;
            if (!same(&a->items[i], &b->items[i])) return 0;
        }
        return 1;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *text = (const char *)data; /* not NUL-terminated: the parser must not need it */
    zt_json doc;
    zt_json_error e;
    if (zt_json_parse_ex(text, size, &doc, &e)) {
        FZ_LOG("byte %zu: %s", e.off, e.what);
        FZ_CHECK(e.what[0] && e.off <= size && e.line >= 1, "error '%s' at byte %zu line %d (size %zu)", e.what,
                 e.off, e.line, size);
        FZ_CHECK(doc.type == ZT_JSON_NULL && doc.n == 0 && !doc.items && !doc.str, "failed parse left a tree");
        char err[128] = "";
        zt_json tmp;
        FZ_CHECK(zt_json_parse(text, size, &tmp, err, sizeof err) != 0 && err[0], "parse and parse_ex disagree");
        return 0;
    }
    check_tree(&doc, size, 0);
    out o = {0};
    dump(&o, &doc);
    zt_json again;
    char err[128] = "";
    FZ_CHECK(zt_json_parse(o.s, o.n, &again, err, sizeof err) == 0, "rewritten document does not parse: %s", err);
    FZ_CHECK(same(&doc, &again), "rewritten document parses to a different tree");
    zt_json_free(&again);
    zt_json_free(&doc);
    free(o.s);
    return 0;
}
