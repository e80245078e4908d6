/* docsrc.c — documents from a text or JSON Lines file, plain, gzip or zstd (formats and errors in docsrc.h).
 *
 * Layers: the file's bytes (read(2) in RAW_BLOCK pieces) -> the decompressor (zlib inflate, ZSTD_decompressStream)
 * -> buf, the decompressed bytes not yet used -> lines (JSONL) or pieces (text). A JSONL line is checked
 * for UTF-8, then scanned once as JSON: the wanted field's string is returned in place when it has no
 * escapes, else decoded into s->doc.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "io/docsrc.h"
#include "util/unicode.h"
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#define RAW_BLOCK (256u << 10)
#define MAX_DEPTH 512

struct zt_docsrc {
    char *path, *field;
    size_t field_len;
    zt_docsrc_kind kind;
    zt_docsrc_comp comp;
    int fd;
    /* the file's bytes: raw[raw_pos, raw_len) not yet decompressed */
    uint8_t *raw;
    size_t raw_pos, raw_len;
    int raw_eof;
    uint64_t file_pos;         /* bytes read from the file */
    z_stream z;
    int z_live, z_member_done;
    ZSTD_DStream *zs;
    size_t zs_hint;            /* ZSTD_decompressStream's last return that made progress: 0 at a frame's end */
    /* decompressed bytes: buf[pos, len) not yet used */
    uint8_t *buf;
    size_t pos, len, cap;
    int eof;
    /* documents */
    uint64_t next_index, docs_seen, line, doc_line;
    uint8_t *doc;              /* a decoded field value */
    size_t doc_cap;
    uint8_t *key;              /* a key with escapes, decoded */
    size_t key_cap;
    /* text */
    void *map;
    size_t map_len;
    uint8_t *whole;
    int text_done;
    uint64_t text_bytes;
};

static char *sdup(const char *x) {
    size_t n = strlen(x) + 1;
    return memcpy(zt_malloc(n), x, n);
}

static int ends_with(const char *s, size_t n, const char *suf) {
    size_t k = strlen(suf);
    return n >= k && memcmp(s + n - k, suf, k) == 0;
}

void zt_docsrc_format(const char *path, zt_docsrc_kind *kind, zt_docsrc_comp *comp) {
    size_t n = strlen(path);
    *comp = ends_with(path, n, ".gz") ? ZT_DOCSRC_GZIP : ends_with(path, n, ".zst") ? ZT_DOCSRC_ZSTD : ZT_DOCSRC_PLAIN;
    n -= *comp == ZT_DOCSRC_GZIP ? 3 : *comp == ZT_DOCSRC_ZSTD ? 4 : 0; /* the name without that suffix */
    *kind = ends_with(path, n, ".jsonl") || ends_with(path, n, ".json") ? ZT_DOCSRC_JSONL : ZT_DOCSRC_TEXT;
}

/* ---------------------------------------------------------------- the file and its decompression */

static int read_raw(zt_docsrc *s, char *err, size_t errlen) {
    ssize_t got;
    do got = read(s->fd, s->raw, RAW_BLOCK);
    while (got < 0 && errno == EINTR);
    if (got < 0) {
        zt_errf(err, errlen, "%s: read error (%s)", s->path, strerror(errno));
        return -1;
    }
    s->raw_pos = 0;
    s->raw_len = (size_t)got;
    s->file_pos += (uint64_t)got;
    if (got == 0) s->raw_eof = 1;
    return 0;
}

static int fail(char *err, size_t errlen, const char *fmt, const char *path, const char *what) {
    zt_errf(err, errlen, fmt, path, what);
    return -1;
}

/* appends decompressed bytes at buf[len, cap) (cap > len): the count, 0 at the end, -1 on error */
static long fill(zt_docsrc *s, char *err, size_t errlen) {
    const char *name = s->comp == ZT_DOCSRC_GZIP ? "gzip" : "zstd";
    if (s->comp == ZT_DOCSRC_PLAIN) {
        ssize_t got;
        do got = read(s->fd, s->buf + s->len, s->cap - s->len);
        while (got < 0 && errno == EINTR);
        if (got < 0) return fail(err, errlen, "%s: read error (%s)", s->path, strerror(errno));
        s->file_pos += (uint64_t)got;
        s->len += (size_t)got;
        return (long)got;
    }
    for (;;) {
        if (s->raw_pos == s->raw_len && !s->raw_eof && read_raw(s, err, errlen)) return -1;
        const int no_input = s->raw_pos == s->raw_len && s->raw_eof;
        if (s->file_pos == 0)
            return fail(err, errlen, "%s: not %s data (an empty file; expected compressed data)", s->path, name);
        size_t room = s->cap - s->len, made;
        if (s->comp == ZT_DOCSRC_GZIP) {
            if (s->z_member_done) {
                if (no_input) return 0;
                if (s->raw_pos == s->raw_len) continue;
                inflateReset(&s->z); /* another member follows */
                s->z_member_done = 0;
            }
            s->z.next_in = s->raw + s->raw_pos;
            s->z.avail_in = (uInt)(s->raw_len - s->raw_pos);
            s->z.next_out = s->buf + s->len;
            s->z.avail_out = (uInt)room;
            int r = inflate(&s->z, Z_NO_FLUSH);
            s->raw_pos = s->raw_len - s->z.avail_in;
            made = room - s->z.avail_out;
            if (r == Z_STREAM_END) {
                s->z_member_done = 1;
            } else if (r != Z_OK && r != Z_BUF_ERROR) {
                zt_errf(err, errlen, "%s: corrupt gzip data (%s)", s->path,
                        s->z.msg ? s->z.msg : "the compressed stream is not valid");
                return -1;
            } else if (made == 0 && no_input) {
                return fail(err, errlen, "%s: truncated %s data (the compressed stream ends early)", s->path, name);
            }
        } else {
            ZSTD_inBuffer in = {s->raw, s->raw_len, s->raw_pos};
            ZSTD_outBuffer out = {s->buf + s->len, room, 0};
            size_t r = ZSTD_decompressStream(s->zs, &out, &in);
            if (ZSTD_isError(r)) return fail(err, errlen, "%s: corrupt zstd data (%s)", s->path, ZSTD_getErrorName(r));
            /* r == 0: a frame has ended (and is flushed); a call without progress says nothing */
            if (in.pos > s->raw_pos || out.pos > 0) s->zs_hint = r;
            s->raw_pos = in.pos;
            made = out.pos;
            if (made == 0 && no_input) {
                if (s->zs_hint == 0) return 0;
                return fail(err, errlen, "%s: truncated %s data (the last frame is incomplete)", s->path, name);
            }
        }
        s->len += made;
        if (made) return (long)made;
    }
}

static void close_stream(zt_docsrc *s) {
    if (s->z_live) inflateEnd(&s->z);
    s->z_live = 0;
    if (s->zs) ZSTD_freeDStream(s->zs);
    s->zs = NULL;
    if (s->map) munmap(s->map, s->map_len);
    s->map = NULL;
    free(s->whole);
    s->whole = NULL;
}

/* (re)starts reading at the file's first byte */
static int restart(zt_docsrc *s, char *err, size_t errlen) {
    close_stream(s);
    if (lseek(s->fd, 0, SEEK_SET) != 0) return fail(err, errlen, "%s: cannot seek (%s)", s->path, strerror(errno));
    s->raw_pos = s->raw_len = 0;
    s->raw_eof = 0;
    s->file_pos = 0;
    s->pos = s->len = 0;
    s->eof = 0;
    s->next_index = s->docs_seen = s->line = s->doc_line = 0;
    s->text_done = 0;
    s->text_bytes = 0;
    s->z_member_done = 0;
    s->zs_hint = 1;
    if (s->comp == ZT_DOCSRC_GZIP) {
        memset(&s->z, 0, sizeof s->z);
        if (inflateInit2(&s->z, 16 + MAX_WBITS) != Z_OK) return fail(err, errlen, "%s: %s", s->path, "zlib cannot start");
        s->z_live = 1;
    } else if (s->comp == ZT_DOCSRC_ZSTD) {
        s->zs = ZSTD_createDStream();
        if (!s->zs || ZSTD_isError(ZSTD_initDStream(s->zs))) return fail(err, errlen, "%s: %s", s->path, "libzstd cannot start");
    }
    if (s->comp != ZT_DOCSRC_PLAIN) {
        /* the magic number, for a clear message when the name's suffix does not fit the bytes */
        if (read_raw(s, err, errlen)) return -1;
        static const uint8_t gz[2] = {0x1f, 0x8b}, zst[4] = {0x28, 0xb5, 0x2f, 0xfd};
        const int is_gz = s->raw_len >= 2 && memcmp(s->raw, gz, 2) == 0;
        const int is_zst = s->raw_len >= 4 && (memcmp(s->raw, zst, 4) == 0 ||
                                               (s->raw[0] >> 4 == 5 && s->raw[1] == 0x2a && s->raw[2] == 0x4d && s->raw[3] == 0x18));
        if (s->raw_len > 0 && s->comp == ZT_DOCSRC_GZIP && !is_gz)
            return fail(err, errlen, "%s: not gzip data (%s)", s->path, "no gzip header; the name ends in .gz");
        if (s->raw_len > 0 && s->comp == ZT_DOCSRC_ZSTD && !is_zst)
            return fail(err, errlen, "%s: not zstd data (%s)", s->path, "no zstd frame header; the name ends in .zst");
    }
    return 0;
}

int zt_docsrc_open(zt_docsrc **out, const char *path, const char *field, char *err, size_t errlen) {
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return fail(err, errlen, "%s: cannot open input file (%s)", path, strerror(errno));
    zt_docsrc *s = zt_calloc(1, sizeof *s);
    s->fd = fd;
    s->path = sdup(path);
    s->field = sdup(field ? field : "text");
    s->field_len = strlen(s->field);
    zt_docsrc_format(path, &s->kind, &s->comp);
    s->raw = zt_malloc(RAW_BLOCK);
    s->cap = ZT_DOCSRC_BLOCK;
    s->buf = zt_malloc(s->cap);
    if (restart(s, err, errlen)) {
        zt_docsrc_close(s);
        return -1;
    }
    *out = s;
    return 0;
}

void zt_docsrc_close(zt_docsrc *s) {
    if (!s) return;
    close_stream(s);
    if (s->fd >= 0) close(s->fd);
    free(s->path);
    free(s->field);
    free(s->raw);
    free(s->buf);
    free(s->doc);
    free(s->key);
    free(s);
}

zt_docsrc_kind zt_docsrc_kind_of(const zt_docsrc *s) { return s->kind; }
uint64_t zt_docsrc_file_pos(const zt_docsrc *s) { return s->file_pos; }
uint64_t zt_docsrc_index(const zt_docsrc *s) { return s->next_index - 1; }
uint64_t zt_docsrc_line(const zt_docsrc *s) { return s->doc_line; }

static int no_documents(const zt_docsrc *s, char *err, size_t errlen) {
    if (s->kind == ZT_DOCSRC_TEXT) return fail(err, errlen, "%s: %s", s->path, "empty input file (expected text)");
    return fail(err, errlen, "%s: %s", s->path, "no documents (expected one JSON object per line)");
}

/* ---------------------------------------------------------------- lines */

/* the next line (without its '\n'): 1, 0 at the end, -1 on error */
static int get_line(zt_docsrc *s, const uint8_t **line, size_t *n, char *err, size_t errlen) {
    size_t scan = s->pos;
    for (;;) {
        const uint8_t *e = scan < s->len ? memchr(s->buf + scan, '\n', s->len - scan) : NULL;
        if (e || (s->eof && s->len > s->pos)) {
            size_t end = e ? (size_t)(e - s->buf) : s->len;
            *line = s->buf + s->pos;
            *n = end - s->pos;
            s->pos = e ? end + 1 : end;
            s->line++;
            return 1;
        }
        if (s->eof) return 0;
        if (s->pos > 0) { /* keep the partial line, at the start */
            memmove(s->buf, s->buf + s->pos, s->len - s->pos);
            s->len -= s->pos;
            s->pos = 0;
        }
        scan = s->len;
        if (s->len == s->cap) {
            s->cap *= 2;
            s->buf = zt_realloc(s->buf, s->cap);
        }
        long got = fill(s, err, errlen);
        if (got < 0) return -1;
        if (got == 0) s->eof = 1;
    }
}

static int blank(const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r') return 0;
    return 1;
}

/* the first invalid UTF-8 byte of p[0, n) (RFC 3629: no overlong forms, no surrogates, at most
   U+10FFFF), or n */
static size_t utf8_bad(const uint8_t *p, size_t n) {
    size_t i = 0, k;
    uint32_t cp;
    while (i < n) {
        uint64_t w;
        if (i + 8 <= n && (memcpy(&w, p + i, 8), !(w & 0x8080808080808080ull))) {
            i += 8;
        } else {
            if (!(k = zt_utf8_dec(p + i, n - i, &cp))) return i;
            i += k;
        }
    }
    return n;
}

/* ---------------------------------------------------------------- JSON */

typedef struct jp {
    const uint8_t *b, *p, *e;   /* the line, the cursor, the end */
    const char *what;           /* the error */
    const uint8_t *at;
} jp;

static int jbad(jp *j, const uint8_t *at, const char *what) {
    j->what = what;
    j->at = at;
    return -1;
}

static void ws(jp *j) {
    while (j->p < j->e && (*j->p == ' ' || *j->p == '\t' || *j->p == '\r' || *j->p == '\n')) j->p++;
}

static int hex4(const uint8_t *p, uint32_t *v) {
    uint32_t x = 0;
    for (int i = 0; i < 4; i++) {
        uint8_t c = p[i];
        x <<= 4;
        if (c >= '0' && c <= '9') x |= c - '0';
        else if (c >= 'a' && c <= 'f') x |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') x |= c - 'A' + 10;
        else return -1;
    }
    *v = x;
    return 0;
}

static size_t put_utf8(uint8_t *o, uint32_t cp) {
    if (cp < 0x80) {
        o[0] = (uint8_t)cp;
        return 1;
    }
    const size_t n = cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    for (size_t k = n - 1; k > 0; k--, cp >>= 6) o[k] = (uint8_t)(0x80 | (cp & 0x3F));
    o[0] = (uint8_t)((0xF00u >> n) | cp); /* 0xC0, 0xE0, 0xF0 for 2, 3, 4 bytes */
    return n;
}

/* bytes that end a string's plain run: '"', '\\' and the control characters */
static int plain8(uint64_t w) {
    const uint64_t ones = 0x0101010101010101ull, high = 0x8080808080808080ull;
    const uint64_t q = w ^ (ones * '"'), b = w ^ (ones * '\\');
    const uint64_t stop = ((q - ones) & ~q) | ((b - ones) & ~b) | ((w - ones * 0x20) & ~w);
    return !(stop & high);
}

/* a string at j->p ('"'): checked, the cursor after it; *raw / *raw_n its bytes between the quotes,
   *esc whether it has escapes (decode them with unescape) */
static int jstring(jp *j, const uint8_t **raw, size_t *raw_n, int *esc) {
    const uint8_t *p = ++j->p, *e = j->e;
    *esc = 0;
    for (;;) {
        while (e - p >= 8) {
            uint64_t w;
            memcpy(&w, p, 8);
            if (!plain8(w)) break;
            p += 8;
        }
        while (p < e && *p != '"' && *p != '\\' && *p >= 0x20) p++;
        if (p == e) return jbad(j, p, "a string does not end on its line");
        if (*p == '"') break;
        if (*p < 0x20) return jbad(j, p, "a control character in a string (write it as an escape)");
        *esc = 1;
        if (p + 1 == e) return jbad(j, p, "a string does not end on its line");
        switch (p[1]) {
        case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
            p += 2;
            break;
        case 'u': {
            uint32_t v;
            if (e - p < 6 || hex4(p + 2, &v)) return jbad(j, p, "a \\u escape without 4 hex digits");
            p += 6;
            break;
        }
        default:
            return jbad(j, p, "an unknown escape in a string");
        }
    }
    *raw = j->p;
    *raw_n = (size_t)(p - j->p);
    j->p = p + 1;
    return 0;
}

/* the decoded bytes of a checked string's raw[0, n) into out (room for n bytes): 0, or 1 at a lone
   surrogate (*lone its code unit) */
static int unescape(const uint8_t *raw, size_t n, uint8_t *out, size_t *out_n, uint32_t *lone) {
    size_t k = 0;
    const uint8_t *q = raw, *qe = raw + n;
    while (q < qe) {
        const uint8_t *r = memchr(q, '\\', (size_t)(qe - q));
        if (!r) r = qe;
        memcpy(out + k, q, (size_t)(r - q));
        k += (size_t)(r - q);
        q = r;
        if (q == qe) break;
        uint8_t c = q[1];
        q += 2;
        switch (c) {
        case 'b': out[k++] = '\b'; continue;
        case 'f': out[k++] = '\f'; continue;
        case 'n': out[k++] = '\n'; continue;
        case 'r': out[k++] = '\r'; continue;
        case 't': out[k++] = '\t'; continue;
        case 'u': break;
        default: out[k++] = c; continue; /* '"', '\\', '/' */
        }
        uint32_t v = 0, w = 0;
        hex4(q, &v);
        q += 4;
        if (v >= 0xD800 && v <= 0xDBFF && qe - q >= 6 && q[0] == '\\' && q[1] == 'u' && hex4(q + 2, &w) == 0 &&
            w >= 0xDC00 && w <= 0xDFFF) {
            v = 0x10000 + ((v - 0xD800) << 10) + (w - 0xDC00);
            q += 6;
        } else if (v >= 0xD800 && v <= 0xDFFF) {
            *lone = v;
            return 1;
        }
        k += put_utf8(out + k, v);
    }
    *out_n = k;
    return 0;
}

static int jvalue(jp *j, int depth);

static int jnumber(jp *j) {
    const uint8_t *p = j->p, *e = j->e;
    if (p < e && *p == '-') p++;
    if (p < e && *p == '0') p++;
    else if (p < e && *p >= '1' && *p <= '9')
        while (p < e && *p >= '0' && *p <= '9') p++;
    else return jbad(j, p, "a number without digits");
    if (p < e && *p == '.') {
        p++;
        if (p == e || *p < '0' || *p > '9') return jbad(j, p, "a number without digits after '.'");
        while (p < e && *p >= '0' && *p <= '9') p++;
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < e && (*p == '+' || *p == '-')) p++;
        if (p == e || *p < '0' || *p > '9') return jbad(j, p, "a number without digits in its exponent");
        while (p < e && *p >= '0' && *p <= '9') p++;
    }
    j->p = p;
    return 0;
}

static int jvalue(jp *j, int depth) {
    if (depth > MAX_DEPTH) return jbad(j, j->p, "values nested too deeply");
    ws(j);
    if (j->p == j->e) return jbad(j, j->p, "the line ends where a value should be");
    const uint8_t c = *j->p;
    if (c == '"') {
        const uint8_t *raw;
        size_t n;
        int esc;
        return jstring(j, &raw, &n, &esc);
    }
    if (c == '{' || c == '[') {
        const uint8_t close = c == '{' ? '}' : ']';
        j->p++;
        ws(j);
        if (j->p < j->e && *j->p == close) {
            j->p++;
            return 0;
        }
        for (;;) {
            if (c == '{') {
                ws(j);
                if (j->p == j->e || *j->p != '"') return jbad(j, j->p, "expected a key (a string)");
                if (jvalue(j, depth + 1)) return -1;
                ws(j);
                if (j->p == j->e || *j->p != ':') return jbad(j, j->p, "expected ':' after a key");
                j->p++;
            }
            if (jvalue(j, depth + 1)) return -1;
            ws(j);
            if (j->p < j->e && *j->p == ',') {
                j->p++;
                continue;
            }
            if (j->p < j->e && *j->p == close) {
                j->p++;
                return 0;
            }
            return jbad(j, j->p, c == '{' ? "expected ',' or '}'" : "expected ',' or ']'");
        }
    }
    static const char *const lit[] = {"true", "false", "null"};
    for (int i = 0; i < 3; i++) {
        size_t n = strlen(lit[i]);
        if ((size_t)(j->e - j->p) >= n && memcmp(j->p, lit[i], n) == 0) {
            j->p += n;
            return 0;
        }
    }
    if (c == '-' || (c >= '0' && c <= '9')) return jnumber(j);
    return jbad(j, j->p, "expected a value");
}

static const char *type_name(uint8_t c) {
    switch (c) {
    case '{': return "an object";
    case '[': return "an array";
    case 't':
    case 'f': return "a boolean";
    case 'n': return "null";
    default: return "a number";
    }
}

static void grow(uint8_t **b, size_t *cap, size_t n) {
    if (n <= *cap) return;
    *cap = n + n / 2 + 64;
    free(*b);
    *b = zt_malloc(*cap);
}

/* one JSONL line -> the field's string */
static int parse_line(zt_docsrc *s, const uint8_t *line, size_t n, const uint8_t **doc, size_t *len, char *err,
                      size_t errlen) {
    const unsigned long long ln = (unsigned long long)s->line;
    size_t bad = utf8_bad(line, n);
    if (bad < n) {
        zt_errf(err, errlen, "%s:%llu: invalid UTF-8 at byte %zu of the line (expected UTF-8 text)", s->path, ln, bad + 1);
        return -1;
    }
    jp j = {line, line, line + n, NULL, NULL};
    const uint8_t *val = NULL;   /* the field's value (the last one) */
    const uint8_t *sraw = NULL;  /* ... when it is a string: its bytes and whether it has escapes */
    size_t sn = 0;
    int sesc = 0;
    ws(&j);
    if (j.p == j.e || *j.p != '{') {
        jbad(&j, j.p, "expected '{' (the line is not a JSON object)");
        goto bad;
    }
    j.p++;
    ws(&j);
    if (j.p < j.e && *j.p == '}') {
        j.p++;
    } else {
        for (;;) {
            ws(&j);
            if (j.p == j.e || *j.p != '"') {
                jbad(&j, j.p, "expected a key (a string)");
                goto bad;
            }
            const uint8_t *k;
            size_t kn, kd;
            int esc;
            uint32_t lone = 0;
            if (jstring(&j, &k, &kn, &esc)) goto bad;
            if (esc) { /* a key with escapes: compare its decoded bytes (one with a lone surrogate never matches) */
                grow(&s->key, &s->key_cap, kn + 1);
                if (unescape(k, kn, s->key, &kd, &lone) == 0) {
                    k = s->key;
                    kn = kd;
                } else {
                    kn = (size_t)-1;
                }
            }
            ws(&j);
            if (j.p == j.e || *j.p != ':') {
                jbad(&j, j.p, "expected ':' after a key");
                goto bad;
            }
            j.p++;
            ws(&j);
            const int is_field = kn == s->field_len && memcmp(k, s->field, kn) == 0;
            if (is_field) val = j.p;
            if (is_field && j.p < j.e && *j.p == '"') {
                if (jstring(&j, &sraw, &sn, &sesc)) goto bad;
            } else if (jvalue(&j, 1)) {
                goto bad;
            }
            ws(&j);
            if (j.p < j.e && *j.p == ',') {
                j.p++;
                continue;
            }
            if (j.p < j.e && *j.p == '}') {
                j.p++;
                break;
            }
            jbad(&j, j.p, "expected ',' or '}'");
            goto bad;
        }
    }
    ws(&j);
    if (j.p != j.e) {
        jbad(&j, j.p, "more after the object");
        goto bad;
    }
    if (!val) {
        zt_errf(err, errlen, "%s:%llu: no field \"%s\" in the object (expected a string field \"%s\": see --field)",
                s->path, ln, s->field, s->field);
        return -1;
    }
    if (*val != '"') {
        zt_errf(err, errlen, "%s:%llu: field \"%s\" is %s (expected a string)", s->path, ln, s->field, type_name(*val));
        return -1;
    }
    if (!sesc) {
        *doc = sraw;
        *len = sn;
        return 0;
    }
    size_t dn;
    uint32_t lone = 0;
    grow(&s->doc, &s->doc_cap, sn + 1);
    if (unescape(sraw, sn, s->doc, &dn, &lone)) {
        zt_errf(err, errlen, "%s:%llu: field \"%s\" holds a lone surrogate \\u%04X (expected a \\uD8xx\\uDCxx pair)",
                s->path, ln, s->field, (unsigned)lone);
        return -1;
    }
    *doc = s->doc;
    *len = dn;
    return 0;
bad:
    zt_errf(err, errlen, "%s:%llu: invalid JSON at byte %zu of the line: %s (expected one JSON object per line)",
            s->path, ln, (size_t)(j.at - line) + 1, j.what);
    return -1;
}

/* the next line that is not blank (the BOM of the first skipped): 1, 0 at the end, -1 */
static int next_line(zt_docsrc *s, const uint8_t **line, size_t *n, char *err, size_t errlen) {
    for (;;) {
        int r = get_line(s, line, n, err, errlen);
        if (r <= 0) return r;
        if (s->line == 1 && *n >= 3 && memcmp(*line, "\xEF\xBB\xBF", 3) == 0) {
            *line += 3;
            *n -= 3;
        }
        if (!blank(*line, *n)) return 1;
    }
}

/* ---------------------------------------------------------------- documents */

int zt_docsrc_read(zt_docsrc *s, const uint8_t **piece, size_t *len, char *err, size_t errlen) {
    if (s->kind != ZT_DOCSRC_TEXT) return fail(err, errlen, "%s: %s", s->path, "zt_docsrc_read reads text sources only");
    if (s->text_done) return 0;
    s->pos = s->len = 0;
    long got = fill(s, err, errlen);
    if (got < 0) return -1;
    if (got == 0) {
        s->text_done = 1;
        if (s->text_bytes == 0) return no_documents(s, err, errlen);
        s->next_index = 1;
        return 0;
    }
    s->docs_seen = 1;
    s->text_bytes += (uint64_t)got;
    *piece = s->buf;
    *len = (size_t)got;
    return 1;
}

/* a text source as one document: the plain file mapped, a compressed one decompressed whole */
static int text_whole(zt_docsrc *s, const uint8_t **doc, size_t *len, char *err, size_t errlen) {
    s->text_done = 1;
    if (s->comp == ZT_DOCSRC_PLAIN) {
        struct stat st;
        if (fstat(s->fd, &st) != 0) return fail(err, errlen, "%s: cannot stat (%s)", s->path, strerror(errno));
        if (st.st_size == 0) return no_documents(s, err, errlen);
        s->map_len = (size_t)st.st_size;
        s->map = mmap(NULL, s->map_len, PROT_READ, MAP_PRIVATE, s->fd, 0);
        if (s->map == MAP_FAILED) {
            s->map = NULL;
            return fail(err, errlen, "%s: cannot map the file (%s)", s->path, strerror(errno));
        }
        madvise(s->map, s->map_len, MADV_SEQUENTIAL);
        *doc = s->map;
        *len = s->map_len;
    } else {
        size_t n = 0, cap = 0;
        for (;;) {
            s->pos = s->len = 0;
            long got = fill(s, err, errlen);
            if (got < 0) return -1;
            if (got == 0) break;
            if (n + (size_t)got > cap) {
                cap = 2 * (n + (size_t)got);
                s->whole = zt_realloc(s->whole, cap);
            }
            memcpy(s->whole + n, s->buf, (size_t)got);
            n += (size_t)got;
        }
        if (n == 0) return no_documents(s, err, errlen);
        *doc = s->whole;
        *len = n;
    }
    s->docs_seen = 1;
    s->next_index = 1;
    return 1;
}

int zt_docsrc_next(zt_docsrc *s, const uint8_t **doc, size_t *len, char *err, size_t errlen) {
    if (s->kind == ZT_DOCSRC_TEXT) return s->text_done ? 0 : text_whole(s, doc, len, err, errlen);
    const uint8_t *line;
    size_t n;
    int r = next_line(s, &line, &n, err, errlen);
    if (r < 0) return -1;
    if (r == 0) return s->docs_seen ? 0 : no_documents(s, err, errlen);
    if (parse_line(s, line, n, doc, len, err, errlen)) return -1;
    s->doc_line = s->line;
    s->docs_seen++;
    s->next_index++;
    return 1;
}

int zt_docsrc_seek(zt_docsrc *s, uint64_t k, char *err, size_t errlen) {
    if (restart(s, err, errlen)) return -1;
    if (k == 0) return 0;
    if (s->kind == ZT_DOCSRC_TEXT) {
        s->text_done = 1; /* the one document is behind */
        s->docs_seen = 1;
        s->next_index = 1;
        return 0;
    }
    while (s->next_index < k) {
        const uint8_t *line;
        size_t n;
        int r = next_line(s, &line, &n, err, errlen);
        if (r < 0) return -1;
        if (r == 0) break;
        s->docs_seen++;
        s->next_index++;
    }
    return 0;
}

int zt_docsrc_count(zt_docsrc *s, uint64_t *docs, uint64_t *bytes, char *err, size_t errlen) {
    if (restart(s, err, errlen)) return -1;
    uint64_t nd = 0, nb = 0;
    int in_line = 0, nonblank = 0, first = 1;
    for (;;) {
        s->pos = s->len = 0;
        long got = fill(s, err, errlen);
        if (got < 0) return -1;
        if (got == 0) break;
        nb += (uint64_t)got;
        if (s->kind == ZT_DOCSRC_TEXT) continue;
        const uint8_t *p = s->buf, *e = s->buf + got;
        if (first && got >= 3 && memcmp(p, "\xEF\xBB\xBF", 3) == 0) p += 3;
        first = 0;
        while (p < e) {
            /* a line is known not blank from its first byte that is not ' ', '\t', '\r' */
            if (!nonblank) {
                while (p < e && (*p == ' ' || *p == '\t' || *p == '\r')) p++;
                if (p == e) break;
                if (*p == '\n') {
                    p++;
                    in_line = 0;
                    continue;
                }
                nonblank = 1;
            }
            in_line = 1;
            const uint8_t *nl = memchr(p, '\n', (size_t)(e - p));
            if (!nl) break;
            nd++;
            nonblank = in_line = 0;
            p = nl + 1;
        }
    }
    if (nonblank) nd++;
    (void)in_line;
    if (s->kind == ZT_DOCSRC_TEXT) nd = nb > 0;
    if (nd == 0) return no_documents(s, err, errlen);
    *docs = nd;
    *bytes = nb;
    return restart(s, err, errlen);
}
