/* safetensors.c — safetensors read/write and the JSON reader they need (see safetensors.h).
 * Written from the format description; no Hugging Face code is used. */
#define _GNU_SOURCE
#include "safetensors.h"
#include "util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---------------------------------------------------------------- JSON */

typedef struct jp {
    const char *s;
    size_t i, n;
    char *err;
    size_t errlen;
    int depth;
} jp;

static void ws(jp *p) {
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r'))
        p->i++;
}

static int jfail(jp *p, const char *what) { return zt_errf(p->err, p->errlen, "byte %zu: %s", p->i, what); }

static void put_utf8(char *o, size_t *k, unsigned cp) {
    if (cp < 0x80) o[(*k)++] = (char)cp;
    else if (cp < 0x800) { o[(*k)++] = (char)(0xC0 | cp >> 6); o[(*k)++] = (char)(0x80 | (cp & 63)); }
    else if (cp < 0x10000) {
        o[(*k)++] = (char)(0xE0 | cp >> 12);
        o[(*k)++] = (char)(0x80 | ((cp >> 6) & 63));
        o[(*k)++] = (char)(0x80 | (cp & 63));
    } else {
        o[(*k)++] = (char)(0xF0 | cp >> 18);
        o[(*k)++] = (char)(0x80 | ((cp >> 12) & 63));
        o[(*k)++] = (char)(0x80 | ((cp >> 6) & 63));
        o[(*k)++] = (char)(0x80 | (cp & 63));
    }
}

static int hex4(jp *p, unsigned *out) {
    if (p->i + 4 > p->n) return jfail(p, "short \\u escape");
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
        char c = p->s[p->i++];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
        else return jfail(p, "bad \\u escape");
    }
    *out = v;
    return 0;
}

static int parse_string(jp *p, char **out) {
    if (p->i >= p->n || p->s[p->i] != '"') return jfail(p, "expected a string");
    p->i++;
    char *o = malloc(p->n - p->i + 1); /* the decoded string is never longer than its source */
    if (!o) return jfail(p, "out of memory");
    size_t k = 0;
    while (p->i < p->n && p->s[p->i] != '"') {
        unsigned char c = (unsigned char)p->s[p->i++];
        if (c < 0x20) { free(o); return jfail(p, "control character in a string"); }
        if (c != '\\') { o[k++] = (char)c; continue; }
        if (p->i >= p->n) break;
        char e = p->s[p->i++];
        switch (e) {
        case '"': o[k++] = '"'; break;
        case '\\': o[k++] = '\\'; break;
        case '/': o[k++] = '/'; break;
        case 'b': o[k++] = '\b'; break;
        case 'f': o[k++] = '\f'; break;
        case 'n': o[k++] = '\n'; break;
        case 'r': o[k++] = '\r'; break;
        case 't': o[k++] = '\t'; break;
        case 'u': {
            unsigned cp, lo;
            if (hex4(p, &cp)) { free(o); return 1; }
            if (cp >= 0xD800 && cp < 0xDC00 && p->i + 6 <= p->n && p->s[p->i] == '\\' && p->s[p->i + 1] == 'u') {
                p->i += 2;
                if (hex4(p, &lo)) { free(o); return 1; }
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            put_utf8(o, &k, cp);
            break;
        }
        default: free(o); return jfail(p, "bad escape in a string");
        }
    }
    if (p->i >= p->n) { free(o); return jfail(p, "unterminated string"); }
    p->i++;
    o[k] = 0;
    *out = o;
    return 0;
}

static int parse_value(jp *p, zt_json *v);

static int add_child(zt_json *v, int *cap) {
    if (v->n == *cap) {
        *cap = *cap ? 2 * *cap : 8;
        zt_json *it = realloc(v->items, (size_t)*cap * sizeof *it);
        if (!it) return 1;
        v->items = it;
        if (v->type == ZT_JSON_OBJ) {
            char **ks = realloc(v->keys, (size_t)*cap * sizeof *ks);
            if (!ks) return 1;
            v->keys = ks;
        }
    }
    memset(&v->items[v->n], 0, sizeof v->items[0]);
    return 0;
}

static int parse_container(jp *p, zt_json *v, int obj) {
    v->type = obj ? ZT_JSON_OBJ : ZT_JSON_ARR;
    int cap = 0;
    p->i++;
    ws(p);
    if (p->i < p->n && p->s[p->i] == (obj ? '}' : ']')) { p->i++; return 0; }
    for (;;) {
        if (add_child(v, &cap)) return jfail(p, "out of memory");
        if (obj) {
            ws(p);
            char *key = NULL;
            if (parse_string(p, &key)) return 1;
            v->keys[v->n] = key;
            ws(p);
            if (p->i >= p->n || p->s[p->i] != ':') { v->n++; return jfail(p, "expected ':'"); }
            p->i++;
        }
        int rc = parse_value(p, &v->items[v->n]);
        v->n++;
        if (rc) return 1;
        ws(p);
        if (p->i < p->n && p->s[p->i] == ',') { p->i++; continue; }
        if (p->i < p->n && p->s[p->i] == (obj ? '}' : ']')) { p->i++; return 0; }
        return jfail(p, obj ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static int parse_value(jp *p, zt_json *v) {
    memset(v, 0, sizeof *v);
    ws(p);
    if (p->i >= p->n) return jfail(p, "unexpected end");
    if (++p->depth > 64) return jfail(p, "nested too deeply");
    const char c = p->s[p->i];
    int rc = 0;
    if (c == '{' || c == '[') rc = parse_container(p, v, c == '{');
    else if (c == '"') { v->type = ZT_JSON_STR; rc = parse_string(p, &v->str); }
    else if (p->n - p->i >= 4 && !strncmp(p->s + p->i, "true", 4)) { v->type = ZT_JSON_BOOL; v->num = 1; p->i += 4; }
    else if (p->n - p->i >= 5 && !strncmp(p->s + p->i, "false", 5)) { v->type = ZT_JSON_BOOL; p->i += 5; }
    else if (p->n - p->i >= 4 && !strncmp(p->s + p->i, "null", 4)) { v->type = ZT_JSON_NULL; p->i += 4; }
    else if (c == '-' || (c >= '0' && c <= '9')) {
        char buf[64];
        size_t k = 0;
        while (p->i < p->n && k < sizeof buf - 1 && strchr("+-0123456789.eE", p->s[p->i])) buf[k++] = p->s[p->i++];
        buf[k] = 0;
        char *end;
        v->type = ZT_JSON_NUM;
        v->num = strtod(buf, &end);
        if (*end) return jfail(p, "bad number");
        v->is_int = !strpbrk(buf, ".eE");
        if (v->is_int) {
            errno = 0;
            v->inum = strtoll(buf, NULL, 10);
            if (errno) v->is_int = 0;
        }
    } else rc = jfail(p, "unexpected character");
    p->depth--;
    return rc;
}

int zt_json_parse(const char *text, size_t len, zt_json *out, char *err, size_t errlen) {
    jp p = {text, 0, len, err, errlen, 0};
    if (parse_value(&p, out)) { zt_json_free(out); return 1; }
    ws(&p);
    while (p.i < p.n && p.s[p.i] == 0) p.i++;
    if (p.i != p.n) { zt_json_free(out); return jfail(&p, "text after the JSON value"); }
    return 0;
}

void zt_json_free(zt_json *j) {
    if (!j) return;
    for (int i = 0; i < j->n; i++) {
        zt_json_free(&j->items[i]);
        if (j->keys) free(j->keys[i]);
    }
    free(j->items);
    free(j->keys);
    free(j->str);
    memset(j, 0, sizeof *j);
}

const zt_json *zt_json_get(const zt_json *obj, const char *key) {
    if (!obj || obj->type != ZT_JSON_OBJ) return NULL;
    for (int i = 0; i < obj->n; i++)
        if (obj->keys[i] && strcmp(obj->keys[i], key) == 0) return &obj->items[i];
    return NULL;
}

/* ---------------------------------------------------------------- reading */

static int dtype_size(const char *d) {
    if (!strcmp(d, "F32") || !strcmp(d, "I32") || !strcmp(d, "U32")) return 4;
    if (!strcmp(d, "F16") || !strcmp(d, "BF16") || !strcmp(d, "I16") || !strcmp(d, "U16")) return 2;
    if (!strcmp(d, "F64") || !strcmp(d, "I64") || !strcmp(d, "U64")) return 8;
    if (!strcmp(d, "I8") || !strcmp(d, "U8") || !strcmp(d, "BOOL") || !strcmp(d, "F8_E4M3") || !strcmp(d, "F8_E5M2"))
        return 1;
    return 0;
}

uint64_t zt_st_numel(const zt_st_tensor *t) {
    uint64_t n = 1;
    for (int k = 0; k < t->ndim; k++) n *= (uint64_t)t->shape[k];
    return n;
}

static int read_tensor_entry(zt_st_tensor *t, const char *name, const zt_json *v, const char *path, char *err,
                             size_t errlen) {
    memset(t, 0, sizeof *t);
    if (strlen(name) >= sizeof t->name) return zt_errf(err, errlen, "%s: tensor name too long: %.60s...", path, name);
    snprintf(t->name, sizeof t->name, "%s", name);
    const zt_json *dt = zt_json_get(v, "dtype"), *sh = zt_json_get(v, "shape"), *of = zt_json_get(v, "data_offsets");
    if (!dt || dt->type != ZT_JSON_STR || !sh || sh->type != ZT_JSON_ARR || !of || of->type != ZT_JSON_ARR ||
        of->n != 2)
        return zt_errf(err, errlen, "%s: tensor %s: header entry needs dtype, shape and data_offsets [begin, end]", path,
                    name);
    snprintf(t->dtype, sizeof t->dtype, "%.7s", dt->str);
    if (sh->n > 4) return zt_errf(err, errlen, "%s: tensor %s has %d dimensions (at most 4 supported)", path, name, sh->n);
    t->ndim = sh->n;
    for (int k = 0; k < sh->n; k++) {
        if (sh->items[k].type != ZT_JSON_NUM || !sh->items[k].is_int || sh->items[k].inum < 0)
            return zt_errf(err, errlen, "%s: tensor %s: bad shape", path, name);
        t->shape[k] = sh->items[k].inum;
    }
    for (int k = 0; k < 2; k++)
        if (of->items[k].type != ZT_JSON_NUM || !of->items[k].is_int || of->items[k].inum < 0)
            return zt_errf(err, errlen, "%s: tensor %s: bad data_offsets", path, name);
    t->begin = (uint64_t)of->items[0].inum;
    t->end = (uint64_t)of->items[1].inum;
    int sz = dtype_size(t->dtype);
    if (!sz) return zt_errf(err, errlen, "%s: tensor %s has unknown dtype %s", path, name, t->dtype);
    if (t->end < t->begin || t->end - t->begin != zt_st_numel(t) * (uint64_t)sz)
        return zt_errf(err, errlen, "%s: tensor %s: data_offsets [%llu, %llu] do not match its %s shape", path, name,
                    (unsigned long long)t->begin, (unsigned long long)t->end, t->dtype);
    return 0;
}

int zt_st_open(zt_st_file *sf, const char *path, char *err, size_t errlen) {
    memset(sf, 0, sizeof *sf);
    snprintf(sf->path, sizeof sf->path, "%s", path);
    FILE *f = fopen(path, "rb");
    if (!f) return zt_errf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    unsigned char lenb[8];
    if (fstat(fileno(f), &st) != 0 || st.st_size < 8 || fread(lenb, 1, 8, f) != 8) {
        fclose(f);
        return zt_errf(err, errlen, "%s: not a safetensors file (shorter than its 8-byte header length)", path);
    }
    uint64_t hl = 0;
    for (int k = 7; k >= 0; k--) hl = hl << 8 | lenb[k];
    if (hl < 2 || hl > (uint64_t)st.st_size - 8 || hl > (100u << 20)) {
        fclose(f);
        return zt_errf(err, errlen, "%s: not a safetensors file (header length %llu for a %lld-byte file)", path,
                    (unsigned long long)hl, (long long)st.st_size);
    }
    char *h = malloc(hl + 1);
    if (!h || fread(h, 1, hl, f) != hl) {
        free(h);
        fclose(f);
        return zt_errf(err, errlen, "%s: cannot read the header", path);
    }
    h[hl] = 0;
    zt_json j;
    char jerr[256];
    const int brace = h[0] == '{';
    if (!brace || zt_json_parse(h, hl, &j, jerr, sizeof jerr)) {
        free(h);
        fclose(f);
        return zt_errf(err, errlen, "%s: not a safetensors file (header is not a JSON object%s%s)", path,
                    brace ? ": " : "", brace ? jerr : "");
    }
    free(h);
    int rc = j.type != ZT_JSON_OBJ ? zt_errf(err, errlen, "%s: not a safetensors file", path) : 0;
    sf->t = calloc((size_t)j.n + 1, sizeof *sf->t);
    sf->data_start = 8 + hl;
    sf->data_len = (uint64_t)st.st_size - sf->data_start;
    for (int i = 0; i < j.n && !rc; i++) {
        if (!strcmp(j.keys[i], "__metadata__")) continue;
        if (j.items[i].type != ZT_JSON_OBJ) { rc = zt_errf(err, errlen, "%s: bad header entry %s", path, j.keys[i]); break; }
        zt_st_tensor *t = &sf->t[sf->n];
        rc = read_tensor_entry(t, j.keys[i], &j.items[i], path, err, errlen);
        if (!rc && t->end > sf->data_len)
            rc = zt_errf(err, errlen, "%s: truncated: tensor %s ends at byte %llu of a %llu-byte data section", path,
                      t->name, (unsigned long long)t->end, (unsigned long long)sf->data_len);
        if (!rc) sf->n++;
    }
    zt_json_free(&j);
    if (rc) { free(sf->t); sf->t = NULL; fclose(f); return rc; }
    sf->f = f;
    return 0;
}

void zt_st_close(zt_st_file *sf) {
    if (!sf) return;
    if (sf->f) fclose(sf->f);
    free(sf->t);
    memset(sf, 0, sizeof *sf);
}

const zt_st_tensor *zt_st_find(const zt_st_file *sf, const char *name) {
    for (int i = 0; i < sf->n; i++)
        if (strcmp(sf->t[i].name, name) == 0) return &sf->t[i];
    return NULL;
}

static float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 31, m = h & 1023, bits;
    if (e == 0) {
        if (m == 0) bits = sign;
        else { /* subnormal: normalise */
            e = 127 - 15 + 1;
            while (!(m & 1024)) { m <<= 1; e--; }
            bits = sign | e << 23 | (m & 1023) << 13;
        }
    } else if (e == 31) bits = sign | 0x7F800000u | m << 13;
    else bits = sign | (e + 127 - 15) << 23 | m << 13;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

int zt_st_read_f32(zt_st_file *sf, const zt_st_tensor *t, float *out, char *err, size_t errlen) {
    const uint64_t n = zt_st_numel(t), bytes = t->end - t->begin;
    const int f32 = !strcmp(t->dtype, "F32"), f16 = !strcmp(t->dtype, "F16"), bf16 = !strcmp(t->dtype, "BF16"),
              f64 = !strcmp(t->dtype, "F64");
    if (!f32 && !f16 && !bf16 && !f64)
        return zt_errf(err, errlen, "%s: tensor %s is %s: only F32, F16, BF16 and F64 tensors can be imported", sf->path,
                    t->name, t->dtype);
    if (fseeko(sf->f, (off_t)(sf->data_start + t->begin), SEEK_SET) != 0)
        return zt_errf(err, errlen, "%s: cannot seek to tensor %s", sf->path, t->name);
    /* read in chunks into the tail of `out` (F16/BF16: half the bytes) or a bounce buffer (F64) */
    const size_t chunk = 1 << 20;
    void *buf = f32 ? NULL : malloc(chunk * 8);
    if (!f32 && !buf) return zt_errf(err, errlen, "out of memory");
    int rc = 0;
    for (uint64_t i = 0; i < n && !rc; i += chunk) {
        size_t m = n - i < chunk ? (size_t)(n - i) : chunk;
        size_t es = bytes / (n ? n : 1);
        void *dst = f32 ? (void *)(out + i) : buf;
        if (fread(dst, es, m, sf->f) != m) {
            rc = zt_errf(err, errlen, "%s: truncated while reading tensor %s", sf->path, t->name);
            break;
        }
        if (f16) for (size_t k = 0; k < m; k++) out[i + k] = half_to_float(((uint16_t *)buf)[k]);
        if (bf16)
            for (size_t k = 0; k < m; k++) {
                uint32_t b = (uint32_t)((uint16_t *)buf)[k] << 16;
                memcpy(&out[i + k], &b, 4);
            }
        if (f64) for (size_t k = 0; k < m; k++) out[i + k] = (float)((double *)buf)[k];
    }
    free(buf);
    return rc;
}

/* ---------------------------------------------------------------- writing */

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

int zt_st_write(const char *path, int n, const zt_st_entry *e, const float *(*data)(void *ctx, int i), void *ctx,
                char *err, size_t errlen) {
    /* the header first into memory, to know its length */
    char *hbuf = NULL;
    size_t hlen = 0;
    FILE *h = open_memstream(&hbuf, &hlen);
    if (!h) return zt_errf(err, errlen, "out of memory");
    fprintf(h, "{\"__metadata__\":{\"format\":\"pt\"}");
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        uint64_t numel = 1;
        for (int k = 0; k < e[i].ndim; k++) numel *= (uint64_t)e[i].shape[k];
        fputc(',', h);
        json_str(h, e[i].name);
        fprintf(h, ":{\"dtype\":\"F32\",\"shape\":[");
        for (int k = 0; k < e[i].ndim; k++) fprintf(h, "%s%lld", k ? "," : "", (long long)e[i].shape[k]);
        fprintf(h, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                (unsigned long long)(off + numel * 4));
        off += numel * 4;
    }
    fputc('}', h);
    while ((ftello(h) + 8) % 8) fputc(' ', h); /* data 8-byte aligned, as safetensors writes it */
    fclose(h);
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        free(hbuf);
        return zt_errf(err, errlen, "%s: cannot create: %s", tmp, strerror(errno));
    }
    unsigned char lenb[8];
    for (int k = 0; k < 8; k++) lenb[k] = (unsigned char)((uint64_t)hlen >> (8 * k));
    int ok = fwrite(lenb, 1, 8, f) == 8 && fwrite(hbuf, 1, hlen, f) == hlen;
    free(hbuf);
    for (int i = 0; i < n && ok; i++) {
        uint64_t numel = 1;
        for (int k = 0; k < e[i].ndim; k++) numel *= (uint64_t)e[i].shape[k];
        const float *p = data(ctx, i);
        ok = p && fwrite(p, sizeof(float), (size_t)numel, f) == numel;
    }
    ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
    int e2 = errno;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return zt_errf(err, errlen, "%s: cannot write: %s", path, strerror(e2 ? e2 : errno));
    }
    return 0;
}
