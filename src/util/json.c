/* json.c — the one JSON reader (see json.h): a recursive-descent parser into a tree of zt_json
 * nodes. Written from RFC 8259; strict about the grammar (no trailing commas, comments, leading
 * zeros, bare words or raw control characters in strings).
 */
#include "util/json.h"
#include "util/util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define EOF_WHAT "unexpected end of file (truncated?)"

typedef struct jp {
    const char *s;
    size_t i, n;
    zt_json_error *e;
} jp;

static int jfail(jp *p, size_t off, int eof, const char *fmt, ...) ZT_PRINTF(4, 5);
static int jfail(jp *p, size_t off, int eof, const char *fmt, ...) {
    if (p->e) {
        p->e->off = off;
        p->e->eof = eof;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(p->e->what, sizeof p->e->what, fmt, ap);
        va_end(ap);
    }
    return 1;
}

static int at_end(jp *p) { return jfail(p, p->n, 1, "%s", EOF_WHAT); }

static void skip_ws(jp *p) {
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r'))
        p->i++;
}

static int unexpected(jp *p) {
    unsigned char c = (unsigned char)p->s[p->i];
    if (c >= 0x20 && c < 0x7F) return jfail(p, p->i, 0, "unexpected character '%c'", c);
    return jfail(p, p->i, 0, "unexpected byte 0x%02x", c);
}

/* ---------------------------------------------------------------- strings */

static int hex4(const char *s, uint32_t *v) {
    *v = 0;
    for (int k = 0; k < 4; k++) {
        char c = s[k];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return 0;
        *v = *v << 4 | (uint32_t)d;
    }
    return 1;
}

static size_t put_utf8(char *o, uint32_t cp) {
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | cp >> 6);
        o[1] = (char)(0x80 | (cp & 63));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12);
        o[1] = (char)(0x80 | (cp >> 6 & 63));
        o[2] = (char)(0x80 | (cp & 63));
        return 3;
    }
    o[0] = (char)(0xF0 | cp >> 18);
    o[1] = (char)(0x80 | (cp >> 12 & 63));
    o[2] = (char)(0x80 | (cp >> 6 & 63));
    o[3] = (char)(0x80 | (cp & 63));
    return 4;
}

/* the string at p->i (a '"'), unescaped into a new NUL-terminated buffer */
static int parse_string(jp *p, char **out, size_t *out_len) {
    const char *s = p->s;
    size_t q = ++p->i;
    while (q < p->n && s[q] != '"') q += s[q] == '\\' ? 2 : 1;
    if (q >= p->n) return jfail(p, p->n, 1, "unexpected end of file inside a string (truncated?)");
    char *o = zt_malloc(q - p->i + 1); /* unescaping never makes a string longer */
    size_t k = 0;
    while (p->i < q) {
        const unsigned char c = (unsigned char)s[p->i];
        if (c != '\\') {
            if (c < 0x20) {
                free(o);
                return jfail(p, p->i, 0, "control character 0x%02x in a string (expected \\u%04x)", c, c);
            }
            o[k++] = (char)c;
            p->i++;
            continue;
        }
        const char e = s[p->i + 1];
        static const char esc[] = "\"\\/bfnrt", val[] = "\"\\/\b\f\n\r\t";
        const char *hit = e ? strchr(esc, e) : NULL;
        if (hit) {
            o[k++] = val[hit - esc];
            p->i += 2;
            continue;
        }
        uint32_t cp, lo;
        if (e != 'u' || p->i + 6 > q || !hex4(s + p->i + 2, &cp)) {
            free(o);
            return jfail(p, p->i, 0, "%s", e == 'u' ? "bad \\u escape in a string" : "bad escape in a string");
        }
        p->i += 6;
        if (cp >= 0xD800 && cp < 0xDC00 && p->i + 6 <= q && s[p->i] == '\\' && s[p->i + 1] == 'u' &&
            hex4(s + p->i + 2, &lo) && lo >= 0xDC00 && lo < 0xE000) {
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            p->i += 6;
        }
        k += put_utf8(o + k, cp);
    }
    p->i = q + 1;
    o[k] = 0;
    *out = o;
    *out_len = k;
    return 0;
}

/* ---------------------------------------------------------------- numbers */

static int is_digit(jp *p) { return p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9'; }

/* -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
static int parse_number(jp *p, zt_json *v) {
    const size_t start = p->i;
    int is_int = 1;
    if (p->s[p->i] == '-') p->i++;
    if (p->i >= p->n) return at_end(p);
    if (p->s[p->i] == '0') {
        p->i++;
        if (is_digit(p)) return jfail(p, start, 0, "bad number (leading zero)");
    } else if (is_digit(p)) {
        while (is_digit(p)) p->i++;
    } else {
        return jfail(p, start, 0, "bad number");
    }
    if (p->i < p->n && p->s[p->i] == '.') {
        is_int = 0;
        p->i++;
        if (p->i >= p->n) return at_end(p);
        if (!is_digit(p)) return jfail(p, start, 0, "bad number (no digit after '.')");
        while (is_digit(p)) p->i++;
    }
    if (p->i < p->n && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
        is_int = 0;
        p->i++;
        if (p->i < p->n && (p->s[p->i] == '+' || p->s[p->i] == '-')) p->i++;
        if (p->i >= p->n) return at_end(p);
        if (!is_digit(p)) return jfail(p, start, 0, "bad number (no digit in the exponent)");
        while (is_digit(p)) p->i++;
    }
    /* the text need not be NUL-terminated: convert a copy */
    char small[64], *buf = small;
    const size_t len = p->i - start;
    if (len >= sizeof small) buf = zt_malloc(len + 1);
    memcpy(buf, p->s + start, len);
    buf[len] = 0;
    v->type = ZT_JSON_NUM;
    v->num = strtod(buf, NULL);
    if (is_int) {
        errno = 0;
        v->inum = strtoll(buf, NULL, 10);
        is_int = errno == 0;
    }
    v->is_int = is_int;
    if (buf != small) free(buf);
    return 0;
}

/* ---------------------------------------------------------------- values */

static int parse_value(jp *p, zt_json *v, int depth);

static void add_child(zt_json *v, int *cap) {
    if (v->n == *cap) {
        *cap = *cap ? 2 * *cap : 8;
        v->items = zt_realloc(v->items, (size_t)*cap * sizeof *v->items);
        if (v->type == ZT_JSON_OBJ) {
            v->keys = zt_realloc(v->keys, (size_t)*cap * sizeof *v->keys);
            v->key_lens = zt_realloc(v->key_lens, (size_t)*cap * sizeof *v->key_lens);
        }
    }
    memset(&v->items[v->n], 0, sizeof v->items[0]);
}

static int parse_container(jp *p, zt_json *v, int obj, int depth) {
    const char close = obj ? '}' : ']';
    if (depth > ZT_JSON_MAX_DEPTH) return jfail(p, p->i, 0, "nested too deeply (more than %d levels)", ZT_JSON_MAX_DEPTH);
    v->type = obj ? ZT_JSON_OBJ : ZT_JSON_ARR;
    int cap = 0;
    p->i++;
    skip_ws(p);
    if (p->i >= p->n) return at_end(p);
    if (p->s[p->i] == close) {
        p->i++;
        return 0;
    }
    for (;;) {
        add_child(v, &cap);
        if (obj) {
            skip_ws(p);
            if (p->i >= p->n) return at_end(p);
            if (p->s[p->i] != '"') return jfail(p, p->i, 0, "expected a string (an object key)");
            if (parse_string(p, &v->keys[v->n], &v->key_lens[v->n])) return 1;
            v->n++; /* from here on the key is the tree's to free */
            skip_ws(p);
            if (p->i >= p->n) return at_end(p);
            if (p->s[p->i] != ':') return jfail(p, p->i, 0, "expected ':' after an object key");
            p->i++;
            if (parse_value(p, &v->items[v->n - 1], depth)) return 1;
        } else {
            v->n++;
            if (parse_value(p, &v->items[v->n - 1], depth)) return 1;
        }
        skip_ws(p);
        if (p->i >= p->n) return at_end(p);
        if (p->s[p->i] == ',') {
            p->i++;
            continue;
        }
        if (p->s[p->i] == close) {
            p->i++;
            return 0;
        }
        return jfail(p, p->i, 0, "%s", obj ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static int parse_literal(jp *p, zt_json *v, const char *word, zt_json_type type, double num) {
    size_t k = 0, len = strlen(word);
    while (k < len && p->i + k < p->n && p->s[p->i + k] == word[k]) k++;
    if (k < len) {
        p->i += k;
        return p->i >= p->n ? at_end(p) : unexpected(p);
    }
    p->i += len;
    v->type = type;
    v->num = num;
    return 0;
}

static int parse_value(jp *p, zt_json *v, int depth) {
    skip_ws(p);
    v->off = p->i;
    if (p->i >= p->n) return at_end(p);
    const char c = p->s[p->i];
    if (c == '{' || c == '[') return parse_container(p, v, c == '{', depth + 1);
    if (c == '"') {
        v->type = ZT_JSON_STR;
        return parse_string(p, &v->str, &v->len);
    }
    if (c == 't') return parse_literal(p, v, "true", ZT_JSON_BOOL, 1);
    if (c == 'f') return parse_literal(p, v, "false", ZT_JSON_BOOL, 0);
    if (c == 'n') return parse_literal(p, v, "null", ZT_JSON_NULL, 0);
    if (c == '-' || (c >= '0' && c <= '9')) return parse_number(p, v);
    return unexpected(p);
}

/* ---------------------------------------------------------------- API */

int zt_json_line(const char *text, size_t off) {
    int line = 1;
    for (size_t i = 0; i < off; i++) line += text[i] == '\n';
    return line;
}

int zt_json_parse_ex(const char *text, size_t len, zt_json *out, zt_json_error *e) {
    memset(out, 0, sizeof *out);
    if (e) memset(e, 0, sizeof *e);
    jp p = {text, 0, len, e};
    int rc = parse_value(&p, out, 0);
    if (!rc) {
        skip_ws(&p);
        if (p.i < p.n) rc = jfail(&p, p.i, 0, "text after the JSON value");
    }
    if (rc) {
        zt_json_free(out);
        if (e) e->line = zt_json_line(text, e->off);
    }
    return rc;
}

int zt_json_parse(const char *text, size_t len, zt_json *out, char *err, size_t errlen) {
    zt_json_error e;
    if (zt_json_parse_ex(text, len, out, &e) == 0) return 0;
    return zt_errf(err, errlen, "byte %zu: %s", e.off, e.what);
}

void zt_json_free(zt_json *j) {
    if (!j) return;
    for (int i = 0; i < j->n; i++) {
        zt_json_free(&j->items[i]);
        if (j->keys) free(j->keys[i]);
    }
    free(j->items);
    free(j->keys);
    free(j->key_lens);
    free(j->str);
    memset(j, 0, sizeof *j);
}

const zt_json *zt_json_get(const zt_json *obj, const char *key) {
    if (!obj || obj->type != ZT_JSON_OBJ) return NULL;
    for (int i = 0; i < obj->n; i++)
        if (strcmp(obj->keys[i], key) == 0) return &obj->items[i];
    return NULL;
}
