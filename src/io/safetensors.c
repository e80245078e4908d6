/* safetensors.c — safetensors read/write (see safetensors.h); the header is parsed by util/json.
 * Written from the format description; no Hugging Face code is used. */
#define _GNU_SOURCE
#include "io/safetensors.h"
#include "iface/op_math.h"
#include "util/json.h"
#include "util/util.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
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
        if (f16) for (size_t k = 0; k < m; k++) out[i + k] = zt_fp16_bits_to_f32(((uint16_t *)buf)[k]);
        if (bf16) for (size_t k = 0; k < m; k++) out[i + k] = zt_bf16_bits_to_f32(((uint16_t *)buf)[k]);
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

const char *zt_st_dtype_name(zt_st_dtype dt) { return dt == ZT_ST_BF16 ? "BF16" : dt == ZT_ST_F16 ? "F16" : "F32"; }

int zt_st_dtype_size(zt_st_dtype dt) { return dt == ZT_ST_F32 ? 4 : 2; }

static uint64_t entry_numel(const zt_st_entry *e) {
    uint64_t numel = 1;
    for (int k = 0; k < e->ndim; k++) numel *= (uint64_t)e->shape[k];
    return numel;
}

/* x[0..n) as dt's bytes into out; the 16-bit kinds are little-endian like everything here */
static void encode(zt_st_dtype dt, const float *x, size_t n, uint16_t *out) {
    if (dt == ZT_ST_BF16) for (size_t k = 0; k < n; k++) out[k] = zt_f32_to_bf16_bits(x[k]);
    else for (size_t k = 0; k < n; k++) out[k] = zt_f32_to_fp16_bits(x[k]);
}

/* a finite float whose dt encoding is Inf: the exponent field all ones (NaN in, NaN out, is no overflow) */
static int overflows(zt_st_dtype dt, float x) {
    if (dt == ZT_ST_F32 || !isfinite(x)) return 0;
    if (dt == ZT_ST_BF16) return (zt_f32_to_bf16_bits(x) & 0x7f80u) == 0x7f80u;
    return (zt_f32_to_fp16_bits(x) & 0x7c00u) == 0x7c00u;
}

int zt_st_check_range(zt_st_dtype dt, const zt_st_entry *e, const float *x, char *err, size_t errlen) {
    if (dt == ZT_ST_F32) return 0;
    const uint64_t n = entry_numel(e);
    for (uint64_t k = 0; k < n; k++) {
        if (!overflows(dt, x[k])) continue;
        char at[64];
        if (e->ndim == 2) snprintf(at, sizeof at, "[%llu, %llu]", (unsigned long long)(k / (uint64_t)e->shape[1]),
                                   (unsigned long long)(k % (uint64_t)e->shape[1]));
        else snprintf(at, sizeof at, "[%llu]", (unsigned long long)k);
        return zt_errf(err, errlen, "tensor %s%s = %.9g is outside %s's range (%s)", e->name, at, (double)x[k],
                       dt == ZT_ST_F16 ? "float16" : "bfloat16",
                       dt == ZT_ST_F16 ? "|x| >= 65520 rounds to Inf; the largest float16 is 65504"
                                       : "|x| >= 3.3961e38 rounds to Inf");
    }
    return 0;
}

int zt_st_write_as(const char *path, zt_st_dtype dt, int n, const zt_st_entry *e,
                   const float *(*data)(void *ctx, int i), void *ctx, char *err, size_t errlen) {
    const int es = zt_st_dtype_size(dt);
    /* the header first into memory, to know its length */
    char *hbuf = NULL;
    size_t hlen = 0;
    FILE *h = open_memstream(&hbuf, &hlen);
    if (!h) return zt_errf(err, errlen, "out of memory");
    fprintf(h, "{\"__metadata__\":{\"format\":\"pt\"}");
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        const uint64_t bytes = entry_numel(&e[i]) * (uint64_t)es;
        fputc(',', h);
        json_str(h, e[i].name);
        fprintf(h, ":{\"dtype\":\"%s\",\"shape\":[", zt_st_dtype_name(dt));
        for (int k = 0; k < e[i].ndim; k++) fprintf(h, "%s%lld", k ? "," : "", (long long)e[i].shape[k]);
        fprintf(h, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off, (unsigned long long)(off + bytes));
        off += bytes;
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
    int ok = fwrite(lenb, 1, 8, f) == 8 && fwrite(hbuf, 1, hlen, f) == hlen, range = 0;
    free(hbuf);
    const size_t chunk = 1 << 20; /* 16-bit kinds: converted a chunk at a time */
    uint16_t *half = dt == ZT_ST_F32 ? NULL : malloc(chunk * sizeof *half);
    if (dt != ZT_ST_F32 && !half) ok = 0;
    for (int i = 0; i < n && ok; i++) {
        const uint64_t numel = entry_numel(&e[i]);
        const float *p = data(ctx, i);
        if (!p) { ok = 0; break; }
        if ((range = zt_st_check_range(dt, &e[i], p, err, errlen))) { ok = 0; break; }
        if (dt == ZT_ST_F32) { ok = fwrite(p, sizeof(float), (size_t)numel, f) == numel; continue; }
        for (uint64_t k = 0; k < numel && ok; k += chunk) {
            const size_t m = numel - k < chunk ? (size_t)(numel - k) : chunk;
            encode(dt, p + k, m, half);
            ok = fwrite(half, sizeof *half, m, f) == m;
        }
    }
    free(half);
    ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
    int e2 = errno;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        if (range) return 1;
        return zt_errf(err, errlen, "%s: cannot write: %s", path, strerror(e2 ? e2 : errno));
    }
    return 0;
}

int zt_st_write(const char *path, int n, const zt_st_entry *e, const float *(*data)(void *ctx, int i), void *ctx,
                char *err, size_t errlen) {
    return zt_st_write_as(path, ZT_ST_F32, n, e, data, ctx, err, errlen);
}

/* ---------------------------------------------------------------- save_pretrained's layout */

typedef struct sub_ctx {
    const float *(*data)(void *ctx, int i);
    void *ctx;
    int base;
} sub_ctx;

static const float *sub_data(void *p, int i) {
    const sub_ctx *s = p;
    return s->data(s->ctx, s->base + i);
}

/* model.safetensors.index.json for the nf files, file k holding entries [first[k], first[k + 1]) */
static int write_index(const char *dir, int nf, const int *first, const zt_st_entry *e, uint64_t total, char *err,
                       size_t errlen) {
    char *txt = NULL, path[1100];
    size_t len = 0;
    FILE *f = open_memstream(&txt, &len);
    if (!f) return zt_errf(err, errlen, "out of memory");
    fprintf(f, "{\n  \"metadata\": {\n    \"total_size\": %llu\n  },\n  \"weight_map\": {", (unsigned long long)total);
    for (int k = 0; k < nf; k++)
        for (int i = first[k]; i < first[k + 1]; i++) {
            fprintf(f, "%s\n    ", i ? "," : "");
            json_str(f, e[i].name);
            fprintf(f, ": \"model-%05d-of-%05d.safetensors\"", k + 1, nf);
        }
    fprintf(f, "\n  }\n}\n");
    fclose(f);
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    int rc = zt_write_file_atomic(path, txt, len, err, errlen);
    free(txt);
    return rc;
}

int zt_st_write_pretrained(const char *dir, zt_st_dtype dt, int n, const zt_st_entry *e,
                           const float *(*data)(void *ctx, int i), void *ctx, uint64_t max_shard, int *n_files,
                           char *err, size_t errlen) {
    int *first = calloc((size_t)n + 2, sizeof *first), nf = 0, rc = 0;
    if (!first) return zt_errf(err, errlen, "out of memory");
    uint64_t cur = 0, total = 0;
    for (int i = 0; i < n; i++) {
        const uint64_t b = entry_numel(&e[i]) * (uint64_t)zt_st_dtype_size(dt);
        if (nf == 0 || (cur > 0 && cur + b > max_shard)) first[nf++] = i, cur = 0;
        cur += b;
        total += b;
    }
    if (nf == 0) nf = 1;
    first[nf] = n;
    char path[1100];
    for (int k = 0; k < nf && !rc; k++) {
        if (nf == 1) snprintf(path, sizeof path, "%s/model.safetensors", dir);
        else snprintf(path, sizeof path, "%s/model-%05d-of-%05d.safetensors", dir, k + 1, nf);
        sub_ctx s = {data, ctx, first[k]};
        rc = zt_st_write_as(path, dt, first[k + 1] - first[k], e + first[k], sub_data, &s, err, errlen);
    }
    if (!rc && nf > 1) rc = write_index(dir, nf, first, e, total, err, errlen);
    snprintf(path, sizeof path, "%s/%s", dir, nf > 1 ? "model.safetensors" : "model.safetensors.index.json");
    if (!rc && unlink(path) != 0 && errno != ENOENT)
        rc = zt_errf(err, errlen, "%s: cannot remove it (left from an earlier export, it would be read instead of the "
                     "new files): %s", path, strerror(errno));
    free(first);
    *n_files = nf;
    return rc;
}

uint64_t zt_st_parse_size(const char *s) {
    static const struct { const char *unit; double mul; } units[] = {
        {"", 1}, {"B", 1}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
        {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}};
    char *end;
    errno = 0;
    const double v = strtod(s, &end);
    if (end == s || errno || !(v > 0) || !isfinite(v)) return 0;
    for (size_t k = 0; k < sizeof units / sizeof *units; k++)
        if (strcasecmp(end, units[k].unit) == 0) {
            const double b = v * units[k].mul;
            return b < 1 || b >= 1.8e19 ? 0 : (uint64_t)b;
        }
    return 0;
}
