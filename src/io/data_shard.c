/* data_shard.c — token shard files: a streaming writer and a checked reader (format in data_shard.h).
 *
 * Every multi-byte field is written and read as little-endian explicitly, so shards move between
 * machines unchanged. Errors are one line naming the file, what is wrong and what was expected.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* fileno, fstat */
#endif
#include "io/data_shard.h"
#include "util/util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define WRITE_BUF_TOKENS 65536

static void put_u32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static void put_u64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get_u32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get_u64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static void encode_header(const zt_shard_header *h, unsigned char buf[ZT_SHARD_HEADER]) {
    memset(buf, 0, ZT_SHARD_HEADER);
    memcpy(buf, ZT_SHARD_MAGIC, sizeof ZT_SHARD_MAGIC); /* 7 chars + NUL = 8 bytes */
    put_u32(buf + 8, h->version);
    put_u32(buf + 12, h->width);
    put_u32(buf + 16, h->vocab_size);
    put_u32(buf + 20, h->eot);
    put_u64(buf + 24, h->count);
}

int zt_shard_writer_open(zt_shard_writer *w, const char *path, uint32_t vocab_size, uint32_t eot,
                         char *err, size_t errlen) {
    memset(w, 0, sizeof *w);
    if (strlen(path) >= sizeof w->path) {
        zt_errf(err, errlen, "%s: path too long (at most %zu characters)", path, sizeof w->path - 1);
        return 1;
    }
    if (vocab_size == 0) {
        zt_errf(err, errlen, "%s: vocab size 0 (expected at least 1)", path);
        return 1;
    }
    if (eot != ZT_SHARD_NO_EOT && eot >= vocab_size) {
        zt_errf(err, errlen, "%s: end-of-text id %u >= vocab size %u", path, eot, vocab_size);
        return 1;
    }
    snprintf(w->path, sizeof w->path, "%s", path);
    w->h.version = ZT_SHARD_VERSION;
    w->h.width = vocab_size <= 65536u ? 2u : 4u;
    w->h.vocab_size = vocab_size;
    w->h.eot = eot;
    w->h.count = 0;
    w->f = fopen(path, "wb");
    if (!w->f) {
        zt_errf(err, errlen, "%s: cannot create shard file (%s)", path, strerror(errno));
        return 1;
    }
    unsigned char hdr[ZT_SHARD_HEADER];
    encode_header(&w->h, hdr);
    if (fwrite(hdr, 1, sizeof hdr, w->f) != sizeof hdr) {
        zt_errf(err, errlen, "%s: write failed (%s)", path, strerror(errno));
        fclose(w->f);
        w->f = NULL;
        return 1;
    }
    return 0;
}

int zt_shard_writer_append(zt_shard_writer *w, const uint32_t *tokens, size_t n, char *err, size_t errlen) {
    unsigned char buf[WRITE_BUF_TOKENS * 4];
    const uint32_t width = w->h.width;
    if (!w->f) {
        zt_errf(err, errlen, "%s: shard writer is not open", w->path);
        return 1;
    }
    for (size_t done = 0; done < n;) {
        size_t m = n - done < WRITE_BUF_TOKENS ? n - done : WRITE_BUF_TOKENS;
        for (size_t i = 0; i < m; i++) {
            uint32_t t = tokens[done + i];
            if (t >= w->h.vocab_size) {
                zt_errf(err, errlen, "%s: token %u at index %llu >= vocab size %u", w->path, t,
                        (unsigned long long)(w->h.count + done + i), w->h.vocab_size);
                return 1;
            }
            if (width == 2) {
                buf[2 * i] = (unsigned char)t;
                buf[2 * i + 1] = (unsigned char)(t >> 8);
            } else {
                put_u32(buf + 4 * i, t);
            }
        }
        if (fwrite(buf, width, m, w->f) != m) {
            zt_errf(err, errlen, "%s: write failed (%s)", w->path, strerror(errno));
            return 1;
        }
        done += m;
    }
    w->h.count += n;
    return 0;
}

int zt_shard_writer_close(zt_shard_writer *w, char *err, size_t errlen) {
    if (!w->f) return 0;
    unsigned char hdr[ZT_SHARD_HEADER];
    encode_header(&w->h, hdr);
    int bad = fseek(w->f, 0, SEEK_SET) != 0 || fwrite(hdr, 1, sizeof hdr, w->f) != sizeof hdr;
    int saved = errno;
    if (fclose(w->f) != 0 && !bad) {
        bad = 1;
        saved = errno;
    }
    w->f = NULL;
    if (bad) {
        zt_errf(err, errlen, "%s: write failed while finishing the shard (%s)", w->path, strerror(saved));
        return 1;
    }
    return 0;
}

/* checks the header fields against each other and the file size; f is positioned after the header */
static int read_header_file(FILE *f, const char *path, zt_shard_header *h, char *err, size_t errlen) {
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        zt_errf(err, errlen, "%s: cannot stat (%s)", path, strerror(errno));
        return 1;
    }
    if (!S_ISREG(st.st_mode)) {
        zt_errf(err, errlen, "%s: not a regular file (expected a ztrain shard)", path);
        return 1;
    }
    unsigned long long size = (unsigned long long)st.st_size;
    unsigned char hdr[ZT_SHARD_HEADER];
    if (size < ZT_SHARD_HEADER) {
        zt_errf(err, errlen, "%s: not a ztrain shard (%llu bytes, shorter than the %d-byte header)", path,
                size, ZT_SHARD_HEADER);
        return 1;
    }
    if (fread(hdr, 1, sizeof hdr, f) != sizeof hdr) {
        zt_errf(err, errlen, "%s: cannot read the shard header (%s)", path,
                ferror(f) ? strerror(errno) : "unexpected end of file");
        return 1;
    }
    if (memcmp(hdr, ZT_SHARD_MAGIC, sizeof ZT_SHARD_MAGIC) != 0) {
        zt_errf(err, errlen, "%s: not a ztrain shard (bad magic)", path);
        return 1;
    }
    h->version = get_u32(hdr + 8);
    h->width = get_u32(hdr + 12);
    h->vocab_size = get_u32(hdr + 16);
    h->eot = get_u32(hdr + 20);
    h->count = get_u64(hdr + 24);
    if (h->version != ZT_SHARD_VERSION) {
        zt_errf(err, errlen, "%s: unsupported shard version %u (expected %u)", path, h->version,
                ZT_SHARD_VERSION);
        return 1;
    }
    if (h->width != 2 && h->width != 4) {
        zt_errf(err, errlen, "%s: bad token width %u bytes (expected 2 or 4)", path, h->width);
        return 1;
    }
    if (h->vocab_size == 0 || (h->width == 2 && h->vocab_size > 65536u)) {
        zt_errf(err, errlen, "%s: vocab size %u does not fit %u-byte tokens (expected 1..%s)", path,
                h->vocab_size, h->width, h->width == 2 ? "65536" : "4294967295");
        return 1;
    }
    if (h->eot != ZT_SHARD_NO_EOT && h->eot >= h->vocab_size) {
        zt_errf(err, errlen, "%s: end-of-text id %u >= vocab size %u", path, h->eot, h->vocab_size);
        return 1;
    }
    unsigned long long want = 0;
    int overflow = h->count > (~0ull - ZT_SHARD_HEADER) / h->width;
    if (!overflow) want = ZT_SHARD_HEADER + h->count * h->width;
    if (overflow || want != size) {
        const char *what = overflow || want > size ? "truncated" : "size mismatch";
        if (overflow)
            zt_errf(err, errlen, "%s: %s: header says %llu tokens but file has %llu bytes", path, what,
                    (unsigned long long)h->count, size);
        else
            zt_errf(err, errlen, "%s: %s: header says %llu tokens (%llu bytes) but file has %llu bytes",
                    path, what, (unsigned long long)h->count, want, size);
        return 1;
    }
    return 0;
}

int zt_shard_read_header(const char *path, zt_shard_header *h, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        zt_errf(err, errlen, "%s: cannot open shard (%s)", path, strerror(errno));
        return 1;
    }
    int rc = read_header_file(f, path, h, err, errlen);
    fclose(f);
    return rc;
}

int zt_shard_load(const char *path, zt_shard_header *h, uint32_t **out, char *err, size_t errlen) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) {
        zt_errf(err, errlen, "%s: cannot open shard (%s)", path, strerror(errno));
        return 1;
    }
    if (read_header_file(f, path, h, err, errlen)) {
        fclose(f);
        return 1;
    }
    if (h->count > SIZE_MAX / 4) {
        zt_errf(err, errlen, "%s: %llu tokens do not fit in memory", path, (unsigned long long)h->count);
        fclose(f);
        return 1;
    }
    size_t n = (size_t)h->count;
    uint32_t *tok = malloc(n ? n * sizeof *tok : 1);
    if (!tok) {
        zt_errf(err, errlen, "%s: out of memory loading %zu tokens", path, n);
        fclose(f);
        return 1;
    }
    /* read in blocks, widen and check each token as it arrives */
    unsigned char buf[WRITE_BUF_TOKENS * 4];
    for (size_t done = 0; done < n;) {
        size_t m = n - done < WRITE_BUF_TOKENS ? n - done : WRITE_BUF_TOKENS;
        if (fread(buf, h->width, m, f) != m) {
            zt_errf(err, errlen, "%s: read failed at token %zu (%s)", path, done,
                    ferror(f) ? strerror(errno) : "unexpected end of file");
            free(tok);
            fclose(f);
            return 1;
        }
        for (size_t i = 0; i < m; i++) {
            uint32_t t = h->width == 2 ? (uint32_t)buf[2 * i] | (uint32_t)buf[2 * i + 1] << 8
                                       : get_u32(buf + 4 * i);
            if (t >= h->vocab_size) {
                zt_errf(err, errlen, "%s: token %u at index %zu >= vocab size %u", path, t, done + i,
                        h->vocab_size);
                free(tok);
                fclose(f);
                return 1;
            }
            tok[done + i] = t;
        }
        done += m;
    }
    fclose(f);
    *out = tok;
    return 0;
}
