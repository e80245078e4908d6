/* prepare_tools.c — the tool modes of `ztrain prepare` (prepare.h): --encode FILE (any bytes into a shard,
 * streamed in --read-kb blocks through the pre-tokenizer's carry-over contract), --decode SHARD (a shard back
 * to bytes), --pretokenize FILE (one pre-token per line, in hex); and the tokenizer loading and input checks
 * the corpus mode shares with them.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "cmd/prepare_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define fail prep_fail
#define ERR_LEN PREP_ERR_LEN
typedef prep_opts opts;
typedef prep_progress progress;
#define prog_start prep_prog_start
#define prog_end prep_prog_end

/* ---------------------------------------------------------------- streaming a byte range */

typedef size_t (*consume_fn)(void *ctx, const uint8_t *buf, size_t n, int final);

typedef struct reader {
    uint8_t *buf;
    size_t cap, block;
    uint64_t bytes_done;          /* across calls, for progress */
    progress *prog;
} reader;

/* feeds bytes [start, end) of path to fn; *stop (set by fn's context) ends it early */
static int stream_range(reader *r, const char *path, uint64_t start, uint64_t end, consume_fn fn, void *ctx,
                        const int *stop) {
    if (start >= end) return 0;
    FILE *f = fopen(path, "rb");
    if (!f) return fail("%s: cannot open (%s)", path, strerror(errno));
    if (fseeko(f, (off_t)start, SEEK_SET) != 0) {
        fclose(f);
        return fail("%s: cannot seek (%s)", path, strerror(errno));
    }
    size_t have = 0;
    uint64_t pos = start;
    while (pos < end && !*stop) {
        size_t want = r->block;
        if (want > end - pos) want = (size_t)(end - pos);
        size_t got = fread(r->buf + have, 1, want, f);
        if (got == 0) {
            int e = ferror(f);
            fclose(f);
            return fail("%s: %s", path, e ? "read error" : "file became shorter while reading");
        }
        have += got;
        pos += got;
        size_t used = fn(ctx, r->buf, have, pos == end);
        memmove(r->buf, r->buf + used, have - used);
        have -= used;
        r->bytes_done += got;
        if (r->prog) prep_prog_update(r->prog, r->bytes_done, 0);
    }
    fclose(f);
    return 0;
}

/* an input read by path: the type before any open (a named pipe would block it, /dev/zero never ends) */
int prep_check_type(const char *path, const char *what) {
    char err[ERR_LEN];
    if (zt_check_input_file(path, what, err, sizeof err)) return fail("%s", err);
    return 0;
}

typedef struct sink {
    zt_tokenizer *tok;
    zt_shard_writer *w;
    zt_ids ids;
    uint64_t written;
    int stop, failed;
    char err[ERR_LEN];
} sink;

static size_t encode_consume(void *ctx, const uint8_t *buf, size_t n, int final) {
    sink *s = ctx;
    s->ids.n = 0;
    size_t used = zt_tokenizer_encode_chunk(s->tok, buf, n, final, &s->ids);
    size_t m = s->ids.n;
    if (!s->failed && zt_shard_writer_append(s->w, s->ids.v, m, s->err, sizeof s->err)) {
        s->failed = 1;
        s->stop = 1;
    }
    s->written += m;
    return used;
}

static reader reader_make(long read_kb) {
    reader r = {0};
    r.block = (size_t)read_kb * 1024;
    r.cap = ZT_PRETOK_MAX_CARRY + r.block + 16;
    r.buf = zt_malloc(r.cap);
    return r;
}

zt_tokenizer *prep_load_tokenizer(const opts *o, int *rc) {
    char err[ERR_LEN];
    if ((*rc = prep_check_type(o->tokenizer, "a tokenizer file: .zttok, tokenizer.json or vocab.json")) ||
        (o->merges && (*rc = prep_check_type(o->merges, "a merges.txt file"))))
        return NULL;
    zt_tokenizer *t = zt_tokenizer_load(o->tokenizer, o->merges, err, sizeof err);
    if (!t) *rc = fail("%s", err);
    return t;
}

/* ---------------------------------------------------------------- tool modes */

int prep_cmd_encode(const opts *o) {
    int rc = 0;
    zt_tokenizer *t = prep_load_tokenizer(o, &rc);
    if (!t) return rc;
    struct stat st;
    if (stat(o->encode, &st) != 0) {
        zt_tokenizer_free(t);
        return fail("%s: cannot open input file (%s)", o->encode, strerror(errno));
    }
    if ((rc = prep_check_type(o->encode, "a text file"))) {
        zt_tokenizer_free(t);
        return rc;
    }
    char err[ERR_LEN];
    zt_shard_writer w;
    if (zt_shard_writer_open(&w, o->ids_out, zt_tokenizer_vocab_size(t), zt_tokenizer_eot(t), err, sizeof err)) {
        zt_tokenizer_free(t);
        return fail("%s", err);
    }
    sink s = {.tok = t, .w = &w};
    reader r = reader_make(o->read_kb);
    progress p;
    prog_start(&p, "encoding", (uint64_t)st.st_size);
    r.prog = &p;
    rc = stream_range(&r, o->encode, 0, (uint64_t)st.st_size, encode_consume, &s, &s.stop);
    if (!rc && st.st_size == 0) encode_consume(&s, r.buf, 0, 1); /* an empty document: its template ids */
    if (!rc && s.failed) rc = fail("%s", s.err);
    if (!rc) prog_end(&p, NULL);
    if (zt_shard_writer_close(&w, err, sizeof err) && !rc) rc = fail("%s", err);
    if (!rc) printf("encoded %s: %llu tokens -> %s\n", o->encode, (unsigned long long)s.written, o->ids_out);
    zt_ids_free(&s.ids);
    free(r.buf);
    zt_tokenizer_free(t);
    return rc;
}

int prep_cmd_decode(const opts *o) {
    int rc = 0;
    zt_tokenizer *t = prep_load_tokenizer(o, &rc);
    if (!t) return rc;
    char err[ERR_LEN];
    zt_shard_header h;
    uint32_t *ids = NULL;
    uint8_t *text = NULL;
    size_t len = 0;
    if (zt_check_input_file(o->decode, "a ztrain token shard", err, sizeof err) ||
        zt_shard_load(o->decode, &h, &ids, err, sizeof err)) {
        rc = fail("%s", err);
    } else if (zt_tokenizer_decode(t, ids, (size_t)h.count, &text, &len, err, sizeof err)) {
        rc = fail("%s: %s (tokenizer %s)", o->decode, err, o->tokenizer);
    } else {
        FILE *f = fopen(o->text_out, "wb");
        if (!f) rc = fail("%s: cannot create (%s)", o->text_out, strerror(errno));
        else {
            int bad = fwrite(text, 1, len, f) != len;
            if (fclose(f) != 0) bad = 1;
            if (bad) rc = fail("%s: write failed", o->text_out);
            else printf("decoded %s: %llu tokens -> %zu bytes -> %s\n", o->decode, (unsigned long long)h.count,
                        len, o->text_out);
        }
    }
    free(ids);
    free(text);
    zt_tokenizer_free(t);
    return rc;
}

typedef struct pretok_sink {
    zt_pretok *pre;
    FILE *out;
    uint64_t n;
} pretok_sink;

static int pretok_line(const uint8_t *w, size_t n, void *ctx) {
    static const char hex[] = "0123456789abcdef";
    pretok_sink *s = ctx;
    for (size_t i = 0; i < n; i++) {
        fputc(hex[w[i] >> 4], s->out);
        fputc(hex[w[i] & 15], s->out);
    }
    fputc('\n', s->out);
    s->n++;
    return 0;
}

static size_t pretok_consume(void *ctx, const uint8_t *buf, size_t n, int final) {
    pretok_sink *s = ctx;
    return zt_pretok_split(s->pre, buf, n, final, pretok_line, s);
}

/* shows how text is cut before BPE (a debugging aid; the tests compare it with HF's) */
int prep_cmd_pretokenize(const opts *o) {
    char err[ERR_LEN];
    struct stat st;
    if (stat(o->pretokenize, &st) != 0) return fail("%s: cannot open input file (%s)", o->pretokenize, strerror(errno));
    if (prep_check_type(o->pretokenize, "a text file")) return ZT_EXIT_USER;
    pretok_sink s = {0};
    s.pre = zt_pretok_create(err, sizeof err);
    if (!s.pre) return fail("%s", err);
    s.out = fopen(o->text_out, "w");
    if (!s.out) {
        zt_pretok_free(s.pre);
        return fail("%s: cannot create (%s)", o->text_out, strerror(errno));
    }
    reader r = reader_make(o->read_kb);
    const int never = 0;
    int rc = stream_range(&r, o->pretokenize, 0, (uint64_t)st.st_size, pretok_consume, &s, &never);
    if (fclose(s.out) != 0 && !rc) rc = fail("%s: write failed", o->text_out);
    if (!rc) printf("pre-tokenized %s: %llu pre-tokens -> %s\n", o->pretokenize, (unsigned long long)s.n, o->text_out);
    free(r.buf);
    zt_pretok_free(s.pre);
    return rc;
}
