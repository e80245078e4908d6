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
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

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
    put_u32(buf + 32, h->flags);
    put_u32(buf + 36, h->example_len);
}

uint64_t zt_shard_file_bytes(const zt_shard_header *h) {
    const uint64_t per = h->width + ((h->flags & ZT_SHARD_FLAG_MASK) ? 1u : 0u);
    if (per == 0 || h->count > (~0ull - ZT_SHARD_HEADER) / per) return 0;
    return ZT_SHARD_HEADER + h->count * per;
}

int zt_shard_writer_open(zt_shard_writer *w, const char *path, uint32_t vocab_size, uint32_t eot,
                         char *err, size_t errlen) {
    return zt_shard_writer_open2(w, path, vocab_size, eot, 0, 0, err, errlen);
}

int zt_shard_writer_open2(zt_shard_writer *w, const char *path, uint32_t vocab_size, uint32_t eot, int with_mask,
                          uint32_t example_len, char *err, size_t errlen) {
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
    w->h.flags = with_mask ? ZT_SHARD_FLAG_MASK : 0u;
    w->h.example_len = example_len;
    w->h.version = w->h.flags || example_len ? ZT_SHARD_VERSION_2 : ZT_SHARD_VERSION;
    w->h.width = vocab_size <= 65536u ? 2u : 4u;
    w->h.vocab_size = vocab_size;
    w->h.eot = eot;
    w->h.count = 0;
    if (with_mask && !(w->mask = tmpfile())) {
        zt_errf(err, errlen, "%s: cannot create a temporary file for the loss mask (%s)", path, strerror(errno));
        return 1;
    }
    w->f = fopen(path, "wb");
    if (!w->f) {
        zt_errf(err, errlen, "%s: cannot create shard file (%s)", path, strerror(errno));
        if (w->mask) fclose(w->mask);
        w->mask = NULL;
        return 1;
    }
    unsigned char hdr[ZT_SHARD_HEADER];
    encode_header(&w->h, hdr);
    if (fwrite(hdr, 1, sizeof hdr, w->f) != sizeof hdr) {
        zt_errf(err, errlen, "%s: write failed (%s)", path, strerror(errno));
        fclose(w->f);
        if (w->mask) fclose(w->mask);
        w->f = w->mask = NULL;
        return 1;
    }
    return 0;
}

int zt_shard_writer_append(zt_shard_writer *w, const uint32_t *tokens, size_t n, char *err, size_t errlen) {
    return zt_shard_writer_append_masked(w, tokens, NULL, n, err, errlen);
}

int zt_shard_writer_append_masked(zt_shard_writer *w, const uint32_t *tokens, const uint8_t *mask, size_t n,
                                  char *err, size_t errlen) {
    unsigned char buf[WRITE_BUF_TOKENS * 4];
    const uint32_t width = w->h.width;
    if (!w->f) {
        zt_errf(err, errlen, "%s: shard writer is not open", w->path);
        return 1;
    }
    if (mask && !w->mask) {
        zt_errf(err, errlen, "%s: a loss mask for a shard opened without one", w->path);
        return 1;
    }
    if (w->mask) {
        for (size_t i = 0; i < n; i++) {
            const int v = mask ? mask[i] : 1;
            if (v > 1) {
                zt_errf(err, errlen, "%s: loss mask byte %d at index %llu (expected 0 or 1)", w->path, v,
                        (unsigned long long)(w->h.count + i));
                return 1;
            }
            if (fputc(v, w->mask) == EOF) {
                zt_errf(err, errlen, "%s: write failed for the loss mask (%s)", w->path, strerror(errno));
                return 1;
            }
        }
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

/* appends the temporary mask file after the tokens */
static int copy_mask(zt_shard_writer *w) {
    unsigned char buf[65536];
    if (fflush(w->mask) != 0 || fseek(w->mask, 0, SEEK_SET) != 0) return 1;
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, w->mask)) > 0)
        if (fwrite(buf, 1, got, w->f) != got) return 1;
    return ferror(w->mask) != 0;
}

int zt_shard_writer_close(zt_shard_writer *w, char *err, size_t errlen) {
    if (!w->f) return 0;
    if (w->h.example_len && w->h.count % w->h.example_len) {
        zt_errf(err, errlen, "%s: %llu tokens are not whole examples of %u tokens", w->path,
                (unsigned long long)w->h.count, w->h.example_len);
        fclose(w->f);
        if (w->mask) fclose(w->mask);
        w->f = w->mask = NULL;
        return 1;
    }
    unsigned char hdr[ZT_SHARD_HEADER];
    encode_header(&w->h, hdr);
    int bad = w->mask && copy_mask(w);
    int saved = errno;
    if (w->mask) fclose(w->mask);
    w->mask = NULL;
    bad = bad || fseek(w->f, 0, SEEK_SET) != 0 || fwrite(hdr, 1, sizeof hdr, w->f) != sizeof hdr;
    if (bad && !saved) saved = errno;
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
    h->flags = h->example_len = 0;
    if (h->version == ZT_SHARD_VERSION_2) {
        h->flags = get_u32(hdr + 32);
        h->example_len = get_u32(hdr + 36);
    } else if (h->version != ZT_SHARD_VERSION) {
        zt_errf(err, errlen, "%s: unsupported shard version %u (expected 1 or 2)", path, h->version);
        return 1;
    }
    if (h->flags & ~ZT_SHARD_FLAG_MASK) {
        zt_errf(err, errlen, "%s: unknown shard flags 0x%x (expected 0 or 1: a loss mask)", path, h->flags);
        return 1;
    }
    if (h->example_len && h->count % h->example_len) {
        zt_errf(err, errlen, "%s: %llu tokens are not whole examples of %u tokens (header)", path,
                (unsigned long long)h->count, h->example_len);
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
    unsigned long long want = zt_shard_file_bytes(h);
    int overflow = want == 0;
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
    /* the mask: every byte 0 or 1 */
    for (size_t done = 0; (h->flags & ZT_SHARD_FLAG_MASK) && done < n;) {
        size_t m = n - done < sizeof buf ? n - done : sizeof buf;
        if (fread(buf, 1, m, f) != m) {
            zt_errf(err, errlen, "%s: read failed in the loss mask at %zu (%s)", path, done,
                    ferror(f) ? strerror(errno) : "unexpected end of file");
            free(tok);
            fclose(f);
            return 1;
        }
        for (size_t i = 0; i < m; i++)
            if (buf[i] > 1) {
                zt_errf(err, errlen, "%s: loss mask byte %d at index %zu (expected 0 or 1)", path, buf[i], done + i);
                free(tok);
                fclose(f);
                return 1;
            }
        done += m;
    }
    fclose(f);
    *out = tok;
    return 0;
}

int zt_shard_map_open(zt_shard_map *m, const char *path, char *err, size_t errlen) {
    memset(m, 0, sizeof *m);
    FILE *f = fopen(path, "rb");
    if (!f) {
        zt_errf(err, errlen, "%s: cannot open shard (%s)", path, strerror(errno));
        return 1;
    }
    if (read_header_file(f, path, &m->h, err, errlen)) {
        fclose(f);
        return 1;
    }
    const uint64_t bytes = zt_shard_file_bytes(&m->h);
    if (bytes > SIZE_MAX) {
        zt_errf(err, errlen, "%s: %llu bytes do not fit this process's address space", path,
                (unsigned long long)bytes);
        fclose(f);
        return 1;
    }
    m->len = (size_t)bytes;
    void *p = mmap(NULL, m->len, PROT_READ, MAP_SHARED, fileno(f), 0);
    const int saved = errno;
    fclose(f); /* the mapping keeps the file */
    if (p == MAP_FAILED) {
        zt_errf(err, errlen, "%s: cannot map the shard (%s)", path, strerror(saved));
        memset(m, 0, sizeof *m);
        return 1;
    }
    madvise(p, m->len, MADV_RANDOM); /* windows are read in shuffled order: no read-ahead */
    m->base = p;
    m->tokens = m->base + ZT_SHARD_HEADER;
    if (m->h.flags & ZT_SHARD_FLAG_MASK) m->mask = m->tokens + m->h.count * m->h.width;
    return 0;
}

void zt_shard_map_close(zt_shard_map *m) {
    if (m->base) munmap((void *)m->base, m->len);
    memset(m, 0, sizeof *m);
}

void zt_shard_map_release(const zt_shard_map *m, uint64_t off, uint64_t n) {
    const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t lo = off / page * page, hi = (off + n + page - 1) / page * page;
    if (hi > m->len) hi = m->len;
    if (hi > lo) madvise((void *)(m->base + lo), (size_t)(hi - lo), MADV_DONTNEED);
}
