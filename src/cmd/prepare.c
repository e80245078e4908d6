/* prepare.c — `ztrain prepare` (usage and split rules in prepare.h).
 *
 * Everything streams: each input is read in blocks of --read-kb through the pre-tokenizer's
 * carry-over contract, so memory is bounded by the tokenizer (training table cap, encode cache),
 * never by the corpus. Progress goes to stderr through util/progress (a bar on a terminal, plain
 * lines otherwise); the summary goes to stdout.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "cmd/prepare.h"
#include "io/data_shard.h"
#include "io/tokenizer.h"
#include "util/progress.h"
#include "util/util.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_INPUTS 4096
#define SNIFF_BYTES 65536
#define TOK_FILE "tokenizer.zttok"
#define ERR_LEN 1024

typedef struct opts {
    const char *inputs[MAX_INPUTS];
    int n_inputs;
    long vocab_size;              /* 0 = not given */
    const char *tokenizer, *merges, *out_dir;
    double val_fraction;
    long long max_tokens;         /* 0 = no cap */
    int eot_between_files;
    const char *encode, *ids_out, *decode, *text_out, *pretokenize;
    long read_kb, train_mem_mb;
} opts;

/* a phase's progress: bytes (or merges) done out of total, drawn through util/progress */
typedef struct progress {
    const char *label;
    uint64_t total, done;
    zt_progress bar;
} progress;

static int fail(const char *fmt, ...) ZT_PRINTF(1, 2);
static int fail(const char *fmt, ...) {
    va_list ap;
    fflush(stdout);
    fputs("ztrain: error: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return ZT_EXIT_USER;
}

static void usage(FILE *f) {
    fputs("usage: ztrain prepare --input FILE [--input FILE ...] (--vocab-size N | --tokenizer PATH) --out-dir DIR\n"
          "                      [--val-fraction F] [--max-tokens N] [--eot-between-files]\n"
          "       ztrain prepare --tokenizer PATH --encode FILE --ids-out OUT.bin\n"
          "       ztrain prepare --tokenizer PATH --decode SHARD --text-out OUT\n"
          "       ztrain prepare --pretokenize FILE --text-out OUT   (one pre-token per line, in hex)\n"
          "  --input FILE         text file to tokenize (repeatable)\n"
          "  --vocab-size N       train a byte-level BPE tokenizer with N tokens (257..65536)\n"
          "  --tokenizer PATH     use a tokenizer: ztrain .zttok, Hugging Face tokenizer.json, or vocab.json\n"
          "  --merges PATH        merges.txt for a vocab.json (default: merges.txt beside it)\n"
          "  --out-dir DIR        writes DIR/" TOK_FILE ", DIR/train.bin, DIR/val.bin\n"
          "  --val-fraction F     last fraction of each file (from a line start) for validation (default 0.05)\n"
          "  --max-tokens N       at most N train tokens (and N*F/(1-F) validation tokens)\n"
          "  --eot-between-files  write <|endoftext|> between consecutive files in each split (GPT-2 style\n"
          "                       tokenizers; a tokenizer.json with a BOS template starts every file part with\n"
          "                       BOS, Qwen2's ends every file part with <|endoftext|>)\n"
          "  --train-mem-mb N     memory cap of the tokenizer's pre-token count table (default 1024)\n"
          "  --read-kb N          read block size (default 1024)\n", f);
}

static void prog_start(progress *p, const char *label, uint64_t total) {
    memset(p, 0, sizeof *p);
    p->label = label;
    p->total = total;
    zt_progress_start(&p->bar, stderr);
}

static void prog_update(progress *p, uint64_t done) {
    p->done = done;
    double t = zt_progress_elapsed(&p->bar);
    double frac = p->total ? (double)done / (double)p->total : 1.0;
    double mbs = (double)done / 1e6 / (t > 1e-9 ? t : 1e-9);
    int tenth;
    if (zt_progress_due(&p->bar, 0.1, 0)) {
        char bar[31];
        zt_progress_bar(bar, 30, frac, 1.0);
        zt_progress_draw(&p->bar, "%s [%s] %3.0f%% %.1f MB/s", p->label, bar, 100 * frac, mbs);
    } else if ((tenth = zt_progress_tenth(&p->bar, frac, 2.0)) >= 0) {
        zt_progress_print(&p->bar, "%s: %d%% (%.1f MB/s)\n", p->label, tenth * 10, mbs);
    }
}

/* the closing line, with the throughput; returns the elapsed seconds */
static double prog_end(progress *p, const char *extra) {
    double dt = zt_progress_elapsed(&p->bar);
    zt_progress_print(&p->bar, "%s: %.1f MB in %.2f s (%.1f MB/s)%s\n", p->label, (double)p->done / 1e6, dt,
                      (double)p->done / 1e6 / (dt > 1e-9 ? dt : 1e-9), extra ? extra : "");
    return dt;
}

/* ---------------------------------------------------------------- options */

static int parse_long(const char *opt, const char *v, long long lo, long long hi, long long *out) {
    char *e;
    errno = 0;
    long long x = strtoll(v, &e, 10);
    if (e == v || *e || errno) return fail("%s %s: expected an integer", opt, v);
    if (x < lo || x > hi) return fail("%s %s: out of range (expected %lld..%lld)", opt, v, lo, hi);
    *out = x;
    return 0;
}

static int parse_opts(int argc, char **argv, opts *o) {
    memset(o, 0, sizeof *o);
    o->val_fraction = 0.05;
    o->read_kb = 1024;
    o->train_mem_mb = 1024;
    for (int i = 1; i < argc; i++) {
        char *a = argv[i], *eq = NULL;
        char name[64];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return -1;
        }
        if (strncmp(a, "--", 2) == 0 && (eq = strchr(a, '=')) != NULL) {
            snprintf(name, sizeof name, "%.*s", (int)(eq - a), a);
        } else {
            snprintf(name, sizeof name, "%s", a);
        }
        if (strcmp(name, "--eot-between-files") == 0) {
            if (eq) return fail("--eot-between-files takes no value");
            o->eot_between_files = 1;
            continue;
        }
        static const char *const with_value[] = {"--input", "--vocab-size", "--tokenizer", "--merges", "--out-dir",
                                                 "--val-fraction", "--max-tokens", "--encode", "--ids-out",
                                                 "--decode", "--text-out", "--read-kb", "--train-mem-mb",
                                                 "--pretokenize"};
        int known = 0;
        for (size_t k = 0; k < sizeof with_value / sizeof *with_value; k++) known |= strcmp(name, with_value[k]) == 0;
        if (!known) return fail("prepare: unknown option '%s' (see ztrain prepare --help)", a);
        const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!v) return fail("%s needs a value", name);
        long long x;
        if (strcmp(name, "--input") == 0) {
            if (o->n_inputs == MAX_INPUTS) return fail("--input: too many inputs (at most %d)", MAX_INPUTS);
            o->inputs[o->n_inputs++] = v;
        } else if (strcmp(name, "--vocab-size") == 0) {
            char *e;
            errno = 0;
            long long vs = strtoll(v, &e, 10);
            if (e == v || *e || errno) return fail("--vocab-size %s: expected an integer", v);
            if (vs < ZT_TOK_MIN_VOCAB || vs > ZT_TOK_MAX_TRAIN_VOCAB)
                return fail("--vocab-size %s: out of range (expected %d..%d: 256 byte tokens + merges + "
                            "<|endoftext|>)", v, ZT_TOK_MIN_VOCAB, ZT_TOK_MAX_TRAIN_VOCAB);
            o->vocab_size = (long)vs;
        } else if (strcmp(name, "--tokenizer") == 0) o->tokenizer = v;
        else if (strcmp(name, "--merges") == 0) o->merges = v;
        else if (strcmp(name, "--out-dir") == 0) o->out_dir = v;
        else if (strcmp(name, "--encode") == 0) o->encode = v;
        else if (strcmp(name, "--ids-out") == 0) o->ids_out = v;
        else if (strcmp(name, "--decode") == 0) o->decode = v;
        else if (strcmp(name, "--text-out") == 0) o->text_out = v;
        else if (strcmp(name, "--pretokenize") == 0) o->pretokenize = v;
        else if (strcmp(name, "--val-fraction") == 0) {
            char *e;
            double f = strtod(v, &e);
            if (e == v || *e || !(f >= 0 && f < 1))
                return fail("--val-fraction %s: expected a number in [0, 1)", v);
            o->val_fraction = f;
        } else if (strcmp(name, "--max-tokens") == 0) {
            if (parse_long(name, v, 1, (long long)1 << 50, &x)) return ZT_EXIT_USER;
            o->max_tokens = x;
        } else if (strcmp(name, "--read-kb") == 0) {
            if (parse_long(name, v, 1, 1 << 16, &x)) return ZT_EXIT_USER;
            o->read_kb = (long)x;
        } else if (strcmp(name, "--train-mem-mb") == 0) {
            if (parse_long(name, v, 16, 1 << 22, &x)) return ZT_EXIT_USER;
            o->train_mem_mb = (long)x;
        }
    }
    return 0;
}

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
        if (r->prog) prog_update(r->prog, r->bytes_done);
    }
    fclose(f);
    return 0;
}

/* ---------------------------------------------------------------- inputs */

typedef struct input {
    const char *path;
    uint64_t size, cut;  /* [0, cut) train, [cut, size) val */
} input;

/* an input read by path: the type before any open (a named pipe would block it, /dev/zero never ends) */
static int check_type(const char *path, const char *what) {
    char err[ERR_LEN];
    if (zt_check_input_file(path, what, err, sizeof err)) return fail("%s", err);
    return 0;
}

static int check_input(input *in, double val_fraction) {
    struct stat st;
    if (check_type(in->path, "a text file")) return ZT_EXIT_USER;
    FILE *f = fopen(in->path, "rb");
    if (!f) return fail("%s: cannot open input file (%s)", in->path, strerror(errno));
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return fail("%s: not a regular file (expected a text file)", in->path);
    }
    in->size = (uint64_t)st.st_size;
    if (in->size == 0) {
        fclose(f);
        return fail("%s: empty input file (expected text)", in->path);
    }
    static uint8_t head[SNIFF_BYTES];
    size_t n = fread(head, 1, sizeof head, f), nul = 0;
    for (size_t i = 0; i < n; i++) nul += head[i] == 0;
    if (nul * 100 > n) {
        fclose(f);
        return fail("%s: looks binary (%zu NUL bytes in the first %zu bytes, more than 1%%); expected a text file",
                    in->path, nul, n);
    }
    in->cut = in->size;
    if (val_fraction > 0) {
        uint64_t c = (uint64_t)floor((double)in->size * (1.0 - val_fraction));
        int ch = 0;
        /* move to the start of the next line: the split never cuts a line (or a character) */
        if (c > 0 && fseeko(f, (off_t)(c - 1), SEEK_SET) == 0) {
            while (c < in->size && (ch = fgetc(f)) != EOF && ch != '\n') c++;
            if (ch != '\n') c = in->size;
        }
        in->cut = c;
    }
    fclose(f);
    return 0;
}

static int check_out_dir(const char *dir) {
    if (zt_mkdirs(dir) != 0) return fail("--out-dir %s: cannot create directory (%s)", dir, strerror(errno));
    char probe[4096];
    snprintf(probe, sizeof probe, "%s/.ztrain-prepare-probe", dir);
    FILE *f = fopen(probe, "w");
    if (!f) return fail("--out-dir %s: directory not writable (%s)", dir, strerror(errno));
    fclose(f);
    remove(probe);
    return 0;
}

/* ---------------------------------------------------------------- training and encoding sinks */

static size_t train_consume(void *ctx, const uint8_t *buf, size_t n, int final) {
    return zt_tokenizer_trainer_feed(ctx, buf, n, final);
}

static void merge_progress(uint32_t done, uint32_t total, void *ctx) {
    progress *p = ctx;
    p->total = total;
    p->done = done;
    int tenth;
    if (zt_progress_due(&p->bar, 0.1, done >= total)) {
        zt_progress_draw(&p->bar, "%s: %u / %u merges", p->label, done, total);
    } else if (total && done < total && (tenth = zt_progress_tenth(&p->bar, (double)done / total, 2.0)) >= 0) {
        zt_progress_print(&p->bar, "%s: %u / %u merges (%.0f s)\n", p->label, done, total,
                          zt_progress_elapsed(&p->bar));
    }
}

typedef struct sink {
    zt_tokenizer *tok;
    zt_shard_writer *w;
    zt_ids ids;
    uint64_t cap, written;
    uint64_t *unigram;            /* counts per id (train split only), or NULL */
    int stop, failed;
    char err[ERR_LEN];
} sink;

static size_t encode_consume(void *ctx, const uint8_t *buf, size_t n, int final) {
    sink *s = ctx;
    s->ids.n = 0;
    size_t used = zt_tokenizer_encode_chunk(s->tok, buf, n, final, &s->ids);
    size_t m = s->ids.n;
    if (s->cap && s->written + m >= s->cap) {
        m = (size_t)(s->cap - s->written);
        s->stop = 1;
    }
    if (!s->failed && zt_shard_writer_append(s->w, s->ids.v, m, s->err, sizeof s->err)) {
        s->failed = 1;
        s->stop = 1;
    }
    if (s->unigram)
        for (size_t i = 0; i < m; i++) s->unigram[s->ids.v[i]]++;
    s->written += m;
    return used;
}

/* one id between documents (end-of-text, or the tokenizer's document end) */
static int put_id(sink *s, uint32_t e) {
    if (s->cap && s->written >= s->cap) return 0;
    if (zt_shard_writer_append(s->w, &e, 1, s->err, sizeof s->err)) return fail("%s", s->err);
    if (s->unigram) s->unigram[e]++;
    s->written++;
    return 0;
}

static reader reader_make(long read_kb) {
    reader r = {0};
    r.block = (size_t)read_kb * 1024;
    r.cap = ZT_PRETOK_MAX_CARRY + r.block + 16;
    r.buf = zt_malloc(r.cap);
    return r;
}

static zt_tokenizer *load_tokenizer(const opts *o, int *rc) {
    char err[ERR_LEN];
    if ((*rc = check_type(o->tokenizer, "a tokenizer file: .zttok, tokenizer.json or vocab.json")) ||
        (o->merges && (*rc = check_type(o->merges, "a merges.txt file"))))
        return NULL;
    zt_tokenizer *t = zt_tokenizer_load(o->tokenizer, o->merges, err, sizeof err);
    if (!t) *rc = fail("%s", err);
    return t;
}

/* ---------------------------------------------------------------- tool modes */

static int cmd_encode(const opts *o) {
    int rc = 0;
    zt_tokenizer *t = load_tokenizer(o, &rc);
    if (!t) return rc;
    struct stat st;
    if (stat(o->encode, &st) != 0) {
        zt_tokenizer_free(t);
        return fail("%s: cannot open input file (%s)", o->encode, strerror(errno));
    }
    if ((rc = check_type(o->encode, "a text file"))) {
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

static int cmd_decode(const opts *o) {
    int rc = 0;
    zt_tokenizer *t = load_tokenizer(o, &rc);
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
static int cmd_pretokenize(const opts *o) {
    char err[ERR_LEN];
    struct stat st;
    if (stat(o->pretokenize, &st) != 0) return fail("%s: cannot open input file (%s)", o->pretokenize, strerror(errno));
    if (check_type(o->pretokenize, "a text file")) return ZT_EXIT_USER;
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

/* ---------------------------------------------------------------- the prepare command */

/* trains on the train parts of the inputs; *mb and *secs report the text read and the time taken */
static zt_tokenizer *train_tokenizer(const opts *o, const input *in, reader *r, int *rc, double *mb, double *secs) {
    char err[ERR_LEN];
    zt_bpe_trainer *tr = zt_tokenizer_trainer_create((size_t)o->train_mem_mb << 20, err, sizeof err);
    if (!tr) {
        *rc = fail("%s", err);
        return NULL;
    }
    uint64_t total = 0;
    for (int i = 0; i < o->n_inputs; i++) total += in[i].cut;
    progress p;
    prog_start(&p, "tokenizer: counting pre-tokens", total);
    r->prog = &p;
    r->bytes_done = 0;
    const int never = 0;
    for (int i = 0; i < o->n_inputs && !*rc; i++)
        *rc = stream_range(r, in[i].path, 0, in[i].cut, train_consume, tr, &never);
    r->prog = NULL;
    if (*rc) {
        zt_tokenizer_trainer_free(tr);
        return NULL;
    }
    char extra[160];
    snprintf(extra, sizeof extra, ", %zu distinct pre-tokens%s", zt_tokenizer_trainer_words(tr),
             zt_tokenizer_trainer_pruned(tr) ? " (table full: the rarest were dropped, see --train-mem-mb)" : "");
    prog_end(&p, extra);
    progress mp;
    prog_start(&mp, "tokenizer: merging", 0);
    zt_tokenizer *t = zt_tokenizer_trainer_finish(tr, (uint32_t)o->vocab_size, merge_progress, &mp, err, sizeof err);
    zt_tokenizer_trainer_free(tr);
    if (!t) {
        *rc = fail("%s", err);
        return NULL;
    }
    double dt = zt_progress_elapsed(&mp.bar);
    *mb = (double)total / 1e6;
    *secs = zt_progress_elapsed(&p.bar);
    zt_progress_print(&mp.bar, "tokenizer: %u merges in %.2f s; training read %.1f MB at %.1f MB/s overall\n",
                      zt_tokenizer_n_merges(t), dt, (double)total / 1e6, (double)total / 1e6 / *secs);
    if (zt_tokenizer_vocab_size(t) < (uint32_t)o->vocab_size)
        fprintf(stderr, "ztrain: warning: the training text has too few repeated pairs for %ld tokens: "
                "vocab size is %u\n", o->vocab_size, zt_tokenizer_vocab_size(t));
    return t;
}

/* the outputs are written as .tmp files and renamed into place only when all of them are complete:
   a failed prepare leaves an earlier tokenizer.zttok / train.bin / val.bin of DIR as they were */
static int publish(const char *out_dir, const char *const *names, int n, int ok) {
    char tmp[4200], path[4096];
    int rc = 0;
    for (int k = 0; k < n; k++) {
        snprintf(path, sizeof path, "%s/%s", out_dir, names[k]);
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        if (!ok || rc) remove(tmp);
        else if (rename(tmp, path) != 0) rc = fail("%s: cannot rename to %s (%s)", tmp, path, strerror(errno));
    }
    return rc;
}

int zt_cmd_prepare(int argc, char **argv) {
    opts o;
    int rc = parse_opts(argc, argv, &o);
    if (rc) return rc < 0 ? 0 : rc;
    if (o.pretokenize) {
        if (!o.text_out) return fail("--pretokenize FILE needs --text-out OUT");
        return cmd_pretokenize(&o);
    }
    if (o.encode || o.decode) {
        if (!o.tokenizer) return fail("--encode/--decode need --tokenizer PATH");
        if (o.encode && !o.ids_out) return fail("--encode FILE needs --ids-out OUT");
        if (o.decode && !o.text_out) return fail("--decode SHARD needs --text-out OUT");
        if (o.encode && o.decode) return fail("--encode and --decode cannot be combined");
        return o.encode ? cmd_encode(&o) : cmd_decode(&o);
    }
    if (o.n_inputs == 0) return fail("prepare: no --input FILE given (see ztrain prepare --help)");
    if (!o.out_dir) return fail("prepare: no --out-dir DIR given");
    if (!o.vocab_size == !o.tokenizer)
        return fail("prepare: give exactly one of --vocab-size N (train a tokenizer) or --tokenizer PATH");
    input *in = zt_calloc((size_t)o.n_inputs, sizeof *in);
    for (int i = 0; i < o.n_inputs && !rc; i++) {
        in[i].path = o.inputs[i];
        rc = check_input(&in[i], o.val_fraction);
    }
    /* a given tokenizer is loaded before --out-dir is made (a bad one changes nothing); a trained one
       after (a long training must not end at an unwritable directory) */
    struct stat dst;
    const int made_out = stat(o.out_dir, &dst) != 0;
    reader r = reader_make(o.read_kb);
    zt_tokenizer *t = NULL;
    double train_mb = 0, train_s = 0;
    if (!rc && o.tokenizer) t = load_tokenizer(&o, &rc);
    if (!rc) rc = check_out_dir(o.out_dir);
    if (!rc && !o.tokenizer) t = train_tokenizer(&o, in, &r, &rc, &train_mb, &train_s);
    char path[4096], tmp[4200], err[ERR_LEN];
    if (t && o.eot_between_files && zt_tokenizer_eot(t) == ZT_TOK_NO_EOT)
        rc = fail("%s: the tokenizer has no %s token (needed by --eot-between-files)", o.tokenizer, ZT_TOK_EOT_TEXT);
    int tok_saved = 0;
    if (t && !rc) {
        snprintf(path, sizeof path, "%s/%s", o.out_dir, TOK_FILE);
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        if (zt_tokenizer_save(t, tmp, err, sizeof err)) {
            rc = fail("%s", err);
            remove(tmp);
        } else {
            tok_saved = 1;
        }
    }
    uint32_t V = t ? zt_tokenizer_vocab_size(t) : 0;
    zt_shard_writer w[2];
    sink s[2];
    memset(s, 0, sizeof s);
    const char *names[2] = {"train.bin", "val.bin"};
    int opened = 0;
    for (int k = 0; k < 2 && !rc; k++) {
        snprintf(tmp, sizeof tmp, "%s/%s.tmp", o.out_dir, names[k]);
        if (zt_shard_writer_open(&w[k], tmp, V, zt_tokenizer_eot(t), err, sizeof err)) rc = fail("%s", err);
        else opened = k + 1;
        s[k].tok = t;
        s[k].w = &w[k];
    }
    if (!rc && o.max_tokens) {
        s[0].cap = (uint64_t)o.max_tokens;
        s[1].cap = (uint64_t)ceil((double)o.max_tokens * o.val_fraction / (1.0 - o.val_fraction));
        if (s[1].cap == 0) s[1].stop = 1; /* --val-fraction 0: nothing for validation */
    }
    if (!rc) s[0].unigram = zt_calloc(V, sizeof *s[0].unigram);
    progress p;
    uint64_t total = 0;
    for (int i = 0; i < o.n_inputs; i++) total += in[i].size;
    prog_start(&p, "encoding", total);
    r.prog = &p;
    r.bytes_done = 0;
    for (int i = 0; i < o.n_inputs && !rc; i++) {
        for (int k = 0; k < 2 && !rc; k++) {
            uint64_t a = k ? in[i].cut : 0, b = k ? in[i].size : in[i].cut;
            if (a >= b || s[k].stop) continue;
            /* documents as the tokenizer frames them: its template ids (BOS) come with each document's
               encoding, its document end (Qwen2's <|endoftext|>) after it, else --eot-between-files */
            const uint32_t doc_end = zt_tokenizer_doc_end(t);
            if (o.eot_between_files && s[k].written > 0 && doc_end == ZT_TOK_NO_EOT) rc = put_id(&s[k], zt_tokenizer_eot(t));
            zt_tokenizer_reset(t); /* a document cut short by --max-tokens does not run into this one */
            if (!rc) rc = stream_range(&r, in[i].path, a, b, encode_consume, &s[k], &s[k].stop);
            if (!rc && s[k].failed) rc = fail("%s", s[k].err);
            if (!rc && doc_end != ZT_TOK_NO_EOT && !s[k].stop) rc = put_id(&s[k], doc_end);
        }
    }
    double enc_s = 0;
    if (!rc) {
        char extra[96];
        uint64_t nt = s[0].written + s[1].written;
        snprintf(extra, sizeof extra, ", %.2f bytes/token", nt ? (double)r.bytes_done / (double)nt : 0.0);
        enc_s = prog_end(&p, extra);
    }
    for (int k = 0; k < opened; k++)
        if (zt_shard_writer_close(&w[k], err, sizeof err) && !rc) rc = fail("%s", err);
    /* shards first, the tokenizer last: train.bin, val.bin, tokenizer.zttok */
    const char *outs[3] = {names[0], names[1], TOK_FILE};
    int prc = publish(o.out_dir, outs, opened, rc == 0);
    if (tok_saved) {
        int trc = publish(o.out_dir, outs + 2, 1, rc == 0 && prc == 0);
        if (!rc) rc = prc ? prc : trc;
    } else if (!rc) {
        rc = prc;
    }
    if (!rc) {
        double H = 0, T = (double)s[0].written;
        for (uint32_t i = 0; i < V && T > 0; i++)
            if (s[0].unigram[i]) H -= (double)s[0].unigram[i] / T * log((double)s[0].unigram[i] / T);
        printf("tokenizer: %s (vocab size %u, %u merges, eot id %lld) -> %s/%s\n",
               o.tokenizer ? o.tokenizer : "trained", V, zt_tokenizer_n_merges(t),
               zt_tokenizer_eot(t) == ZT_TOK_NO_EOT ? -1LL : (long long)zt_tokenizer_eot(t), o.out_dir, TOK_FILE);
        printf("tokens written: train %llu -> %s/train.bin, val %llu -> %s/val.bin (%s per token)\n",
               (unsigned long long)s[0].written, o.out_dir, (unsigned long long)s[1].written, o.out_dir,
               V <= 65536 ? "uint16" : "uint32");
        if (!o.tokenizer)
            printf("tokenizer training: %.1f MB in %.2f s (%.1f MB/s)\n", train_mb, train_s,
                   train_mb / (train_s > 1e-9 ? train_s : 1e-9));
        printf("encoding: %.1f MB in %.2f s (%.1f MB/s)\n", (double)r.bytes_done / 1e6, enc_s,
               (double)r.bytes_done / 1e6 / (enc_s > 1e-9 ? enc_s : 1e-9));
        if (T > 0) printf("unigram baseline loss: %.4f\n", H);
        else printf("unigram baseline loss: n/a (the train split is empty)\n");
        if (o.val_fraction > 0 && s[1].written == 0)
            fprintf(stderr, "ztrain: warning: the validation split is empty (inputs too short for --val-fraction %g)\n",
                    o.val_fraction);
    }
    if (rc && made_out) rmdir(o.out_dir); /* a failed prepare leaves no new (empty) directory */
    for (int k = 0; k < 2; k++) zt_ids_free(&s[k].ids);
    free(s[0].unigram);
    free(r.buf);
    free(in);
    zt_tokenizer_free(t);
    return rc;
}
