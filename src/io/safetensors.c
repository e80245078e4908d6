/* safetensors.c — safetensors read/write (see safetensors.h); the header is parsed by util/json.
 * Written from the format description; no Hugging Face code is used. */
#define _GNU_SOURCE
#include "io/safetensors.h"
#include "util/json.h"
#include "util/util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
    /* the byte count must not wrap: shape [2^62 + 1, 4] of F32 would otherwise "match" 16 bytes
       (tests/fuzz/fuzz_safetensors.c checks this); a product past 2^64 is refused, as safetensors does */
    uint64_t bytes = 1;
    int overflow = 0;
    for (int k = 0; k < t->ndim; k++) overflow |= __builtin_mul_overflow(bytes, (uint64_t)t->shape[k], &bytes);
    overflow |= __builtin_mul_overflow(bytes, (uint64_t)sz, &bytes);
    if (overflow)
        return zt_errf(err, errlen, "%s: tensor %s: its shape has more than 2^64 bytes", path, name);
    if (t->end < t->begin || t->end - t->begin != bytes)
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
    size_t jl = hl;
    while (jl > 0 && h[jl - 1] == 0) jl--; /* NUL padding after the JSON is tolerated */
    if (!brace || zt_json_parse(h, jl, &j, jerr, sizeof jerr)) {
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
