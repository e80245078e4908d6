/* prepare_sft.c — `ztrain prepare --sft` (usage and rules in prepare_sft.h): options, the inputs' lines (JSON Lines,
 * plain, gzip or zstd), each line's example (prompt/response or chat messages), rendering and tokenizing
 * (prepare_sft_render.c), truncation and padding to L = seq_len + 1 tokens, and the outputs.
 *
 * Padding, not packing: every example is its own sequence of L tokens. ztrain's attention (cpu, CUDA fused and
 * materialized, cuDNN) takes no per-document mask, so examples packed into one sequence would attend to each
 * other; padding at the end is harmless under causal attention (no earlier position sees it, and its mask is 0).
 *
 * Two passes over each input: the first counts its examples (io/docsrc.h, which also checks the compressed
 * stream) so that the last floor(n F) go to validation; the second reads the lines here, parses each with
 * util/json.h, renders and writes it. Memory: the longest line and one example.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "cmd/prepare_sft.h"
#include "cmd/prepare_internal.h"
#include "cmd/prepare_sft_internal.h"
#include "io/data_shard.h"
#include "io/docsrc.h"
#include "io/tokenizer.h"
#include "util/json.h"
#include "util/unicode.h"
#include "util/util.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#define ERR_LEN 1024
#define MAX_INPUTS 4096
#define MAX_SEQ_LEN (1 << 20)
#define MAX_WARN 3
#define TOK_FILE "tokenizer.zttok"

typedef enum { TRUNC_RIGHT = 0, TRUNC_LEFT = 1, TRUNC_DROP = 2 } trunc_mode;
static const char *const TRUNC_NAMES[3] = {"right", "left", "drop"};

typedef struct sft_opts {
    const char *inputs[MAX_INPUTS];
    int n_inputs;
    const char *tokenizer, *merges, *out_dir;
    const char *prompt_field, *response_field, *messages_field;
    long seq_len;
    double val_fraction;
    sft_template tpl;
    trunc_mode trunc;
} sft_opts;

static void usage(FILE *f) {
    fputs("usage: ztrain prepare --sft --input FILE.jsonl [--input ...] --tokenizer PATH --seq-len T --out-dir DIR\n"
          "                      [--template none|chatml|llama2|llama3] [--prompt-field NAME] [--response-field NAME]\n"
          "                      [--messages-field NAME] [--val-fraction F] [--truncate right|left|drop] [--merges PATH]\n"
          "  fine-tuning examples, one per line: {\"prompt\": ..., \"response\": ...} or {\"messages\": [{\"role\":\n"
          "  \"system\"|\"user\"|\"assistant\", \"content\": ...}, ...]}, rendered by the template, tokenized and\n"
          "  padded to T+1 tokens each, with a loss mask that is 1 on the assistant's (response's) tokens\n"
          "  --input FILE         JSON Lines (.jsonl, .json, also .gz / .zst); repeatable\n"
          "  --tokenizer PATH     ztrain .zttok, Hugging Face tokenizer.json, or vocab.json (--merges PATH)\n"
          "  --seq-len T          train.seq_len of the fine-tuning run: every example is T+1 tokens\n"
          "  --out-dir DIR        writes DIR/train.bin, DIR/val.bin (examples with a loss mask), DIR/" TOK_FILE "\n"
          "  --template NAME      none (default: prompt + response as one text, framed like a prepare document,\n"
          "                       then end of text), chatml (Qwen2), llama2 (Llama 2 chat), llama3 (Llama 3 Instruct)\n"
          "  --prompt-field NAME, --response-field NAME, --messages-field NAME   the fields (default prompt,\n"
          "                       response, messages)\n"
          "  --val-fraction F     validation: the last fraction of each input's examples (default 0.05)\n"
          "  --truncate MODE      an example longer than T+1 tokens: right (default: cut its end), left (cut its\n"
          "                       start), drop (leave it out; counted)\n", f);
}

/* ---------------------------------------------------------------- options */

int zt_prepare_sft_wanted(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--sft") == 0) return 1;
    return 0;
}

static const char *const WITH_VALUE[] = {"--input", "--tokenizer", "--merges", "--out-dir", "--seq-len",
                                         "--template", "--prompt-field", "--response-field", "--messages-field",
                                         "--val-fraction", "--truncate"};

static int pick(const char *opt, const char *v, const char *const *names, int n, int *out) {
    for (int k = 0; k < n; k++)
        if (strcmp(v, names[k]) == 0) return *out = k, 0;
    if (n == 4) return prep_fail("%s %s: expected %s, %s, %s or %s", opt, v, names[0], names[1], names[2], names[3]);
    return prep_fail("%s %s: expected %s, %s or %s", opt, v, names[0], names[1], names[2]);
}

static int set_value(sft_opts *o, const char *name, const char *v) {
    int k = 0;
    if (strcmp(name, "--input") == 0) {
        if (o->n_inputs == MAX_INPUTS) return prep_fail("--input: too many inputs (at most %d)", MAX_INPUTS);
        o->inputs[o->n_inputs++] = v;
    } else if (strcmp(name, "--tokenizer") == 0) o->tokenizer = v;
    else if (strcmp(name, "--merges") == 0) o->merges = v;
    else if (strcmp(name, "--out-dir") == 0) o->out_dir = v;
    else if (strcmp(name, "--seq-len") == 0) {
        char *e;
        errno = 0;
        long long x = strtoll(v, &e, 10);
        if (e == v || *e || errno || x < 1 || x > MAX_SEQ_LEN)
            return prep_fail("--seq-len %s: expected an integer in 1..%d (train.seq_len)", v, MAX_SEQ_LEN);
        o->seq_len = (long)x;
    } else if (strcmp(name, "--template") == 0) {
        if (pick(name, v, SFT_TEMPLATE_NAMES, 4, &k)) return ZT_EXIT_USER;
        o->tpl = (sft_template)k;
    } else if (strcmp(name, "--truncate") == 0) {
        if (pick(name, v, TRUNC_NAMES, 3, &k)) return ZT_EXIT_USER;
        o->trunc = (trunc_mode)k;
    } else if (strcmp(name, "--val-fraction") == 0) {
        char *e;
        double f = strtod(v, &e);
        if (e == v || *e || !(f >= 0 && f < 1)) return prep_fail("--val-fraction %s: expected a number in [0, 1)", v);
        o->val_fraction = f;
    } else {
        if (!*v) return prep_fail("%s: expected a field name (not empty)", name);
        if (strcmp(name, "--prompt-field") == 0) o->prompt_field = v;
        else if (strcmp(name, "--response-field") == 0) o->response_field = v;
        else o->messages_field = v;
    }
    return 0;
}

/* 0, -1 after --help, or the exit code of an error */
static int parse_opts(int argc, char **argv, sft_opts *o) {
    memset(o, 0, sizeof *o);
    o->val_fraction = 0.05;
    o->prompt_field = "prompt";
    o->response_field = "response";
    o->messages_field = "messages";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *eq = NULL;
        char name[64];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return -1;
        }
        if (strcmp(a, "--sft") == 0) continue;
        if (strncmp(a, "--", 2) == 0 && (eq = strchr(a, '=')) != NULL)
            snprintf(name, sizeof name, "%.*s", (int)(eq - a), a);
        else
            snprintf(name, sizeof name, "%s", a);
        int known = 0;
        for (size_t k = 0; k < sizeof WITH_VALUE / sizeof *WITH_VALUE; k++) known |= strcmp(name, WITH_VALUE[k]) == 0;
        if (!known) return prep_fail("prepare --sft: unknown option '%s' (see ztrain prepare --sft --help)", a);
        const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!v) return prep_fail("%s needs a value", name);
        int rc = set_value(o, name, v);
        if (rc) return rc;
    }
    if (o->n_inputs == 0) return prep_fail("prepare --sft: no --input FILE given (see ztrain prepare --sft --help)");
    if (!o->tokenizer) return prep_fail("prepare --sft: no --tokenizer PATH given (a .zttok, tokenizer.json or vocab.json)");
    if (!o->seq_len) return prep_fail("prepare --sft: no --seq-len T given (the fine-tuning run's train.seq_len)");
    if (!o->out_dir) return prep_fail("prepare --sft: no --out-dir DIR given");
    return 0;
}

/* ---------------------------------------------------------------- lines of a plain, gzip or zstd file */

typedef struct lines {
    const char *path;
    zt_docsrc_comp comp;
    FILE *f;
    gzFile gz;
    ZSTD_DStream *zs;
    uint8_t *raw;
    size_t raw_pos, raw_len;
    uint8_t *buf;
    size_t pos, len, cap;
    int eof;
    uint64_t line;
} lines;

#define RAW_BLOCK (256u << 10)

static int lines_open(lines *l, const char *path, char *err, size_t errlen) {
    memset(l, 0, sizeof *l);
    l->path = path;
    zt_docsrc_kind kind;
    zt_docsrc_format(path, &kind, &l->comp);
    if (l->comp == ZT_DOCSRC_GZIP) l->gz = gzopen(path, "rb");
    else l->f = fopen(path, "rb");
    if (!l->gz && !l->f) return zt_errf(err, errlen, "%s: cannot open input file (%s)", path, strerror(errno)), -1;
    if (l->comp == ZT_DOCSRC_ZSTD) {
        l->zs = ZSTD_createDStream();
        ZSTD_initDStream(l->zs);
        l->raw = zt_malloc(RAW_BLOCK);
    }
    l->cap = RAW_BLOCK;
    l->buf = zt_malloc(l->cap);
    return 0;
}

static void lines_close(lines *l) {
    if (l->gz) gzclose(l->gz);
    if (l->f) fclose(l->f);
    if (l->zs) ZSTD_freeDStream(l->zs);
    free(l->raw);
    free(l->buf);
    memset(l, 0, sizeof *l);
}

/* appends decompressed bytes at buf[len, cap): the count, 0 at the end, -1 on error */
static long lines_fill(lines *l, char *err, size_t errlen) {
    const size_t room = l->cap - l->len;
    if (l->gz) {
        int got = gzread(l->gz, l->buf + l->len, (unsigned)(room < (1u << 30) ? room : (1u << 30)));
        int code;
        const char *msg = gzerror(l->gz, &code);
        if (got < 0 || (code != Z_OK && code != Z_BUF_ERROR))
            return zt_errf(err, errlen, "%s: corrupt gzip data (%s)", l->path, msg), -1;
        l->len += (size_t)got;
        return got;
    }
    if (!l->zs) {
        size_t got = fread(l->buf + l->len, 1, room, l->f);
        if (ferror(l->f)) return zt_errf(err, errlen, "%s: read error (%s)", l->path, strerror(errno)), -1;
        l->len += got;
        return (long)got;
    }
    for (;;) {
        if (l->raw_pos == l->raw_len) {
            l->raw_len = fread(l->raw, 1, RAW_BLOCK, l->f);
            l->raw_pos = 0;
            if (ferror(l->f)) return zt_errf(err, errlen, "%s: read error (%s)", l->path, strerror(errno)), -1;
            if (l->raw_len == 0) return 0;
        }
        ZSTD_inBuffer in = {l->raw, l->raw_len, l->raw_pos};
        ZSTD_outBuffer o = {l->buf + l->len, room, 0};
        size_t r = ZSTD_decompressStream(l->zs, &o, &in);
        if (ZSTD_isError(r)) return zt_errf(err, errlen, "%s: corrupt zstd data (%s)", l->path, ZSTD_getErrorName(r)), -1;
        l->raw_pos = in.pos;
        l->len += o.pos;
        if (o.pos) return (long)o.pos;
    }
}

/* the next line without its '\n' (blank lines included): 1, 0 at the end, -1 on error */
static int lines_next(lines *l, const uint8_t **line, size_t *n, char *err, size_t errlen) {
    size_t scan = l->pos;
    for (;;) {
        const uint8_t *e = scan < l->len ? memchr(l->buf + scan, '\n', l->len - scan) : NULL;
        if (e || (l->eof && l->len > l->pos)) {
            size_t end = e ? (size_t)(e - l->buf) : l->len;
            *line = l->buf + l->pos;
            *n = end - l->pos;
            l->pos = e ? end + 1 : end;
            if (l->line++ == 0 && *n >= 3 && memcmp(*line, "\xEF\xBB\xBF", 3) == 0) *line += 3, *n -= 3;
            return 1;
        }
        if (l->eof) return 0;
        if (l->pos > 0) {
            memmove(l->buf, l->buf + l->pos, l->len - l->pos);
            l->len -= l->pos;
            l->pos = 0;
        }
        scan = l->len;
        if (l->len == l->cap) {
            l->cap *= 2;
            l->buf = zt_realloc(l->buf, l->cap);
        }
        long got = lines_fill(l, err, errlen);
        if (got < 0) return -1;
        if (got == 0) l->eof = 1;
    }
}

static int blank(const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r') return 0;
    return 1;
}

/* ---------------------------------------------------------------- one line's example */

/* the offset of the first byte of p[0, n) that is not valid UTF-8, or n */
static size_t utf8_bad(const uint8_t *p, size_t n) {
    size_t i = 0, k;
    uint32_t cp;
    while (i < n) {
        if (p[i] < 0x80) {
            i++;
            continue;
        }
        if (!(k = zt_utf8_dec(p + i, n - i, &cp))) return i;
        i += k;
    }
    return n;
}

static const char *type_name(const zt_json *v) {
    switch (v->type) {
    case ZT_JSON_NULL: return "null";
    case ZT_JSON_BOOL: return "a boolean";
    case ZT_JSON_NUM: return "a number";
    case ZT_JSON_STR: return "a string";
    case ZT_JSON_ARR: return "an array";
    default: return "an object";
    }
}

/* member key of an object, the last one when it repeats (as Python's json reads it) */
static const zt_json *member(const zt_json *o, const char *key) {
    const zt_json *v = NULL;
    const size_t n = strlen(key);
    for (int i = 0; i < o->n; i++)
        if (o->key_lens[i] == n && memcmp(o->keys[i], key, n) == 0) v = &o->items[i];
    return v;
}

typedef struct example {
    zt_json root;
    sft_msg *msgs;
    int n, cap;
} example;

/* a string value (what names it for errors): 0, or -1 with err */
static int string_of(const zt_json *v, const char *what, const uint8_t **s, size_t *n, char *err, size_t errlen) {
    if (v->type != ZT_JSON_STR) return zt_errf(err, errlen, "%s is %s (expected a string)", what, type_name(v)), -1;
    if (utf8_bad((const uint8_t *)v->str, v->len) != v->len)
        return zt_errf(err, errlen, "%s holds a lone surrogate (expected a \\uD8xx\\uDCxx pair)", what), -1;
    *s = (const uint8_t *)v->str;
    *n = v->len;
    return 0;
}

static void push_msg(example *ex, sft_role role, const uint8_t *s, size_t n) {
    if (ex->n == ex->cap) {
        ex->cap = ex->cap ? 2 * ex->cap : 8;
        ex->msgs = zt_realloc(ex->msgs, (size_t)ex->cap * sizeof *ex->msgs);
    }
    ex->msgs[ex->n++] = (sft_msg){role, s, n};
}

/* parses line into ex (ex->root freed by the caller): 0, or -1 with what is wrong in err */
static int parse_example(const sft_opts *o, const uint8_t *line, size_t len, example *ex, char *err, size_t errlen) {
    ex->n = 0;
    size_t bad = utf8_bad(line, len);
    if (bad != len) return zt_errf(err, errlen, "invalid UTF-8 at byte %zu of the line (expected UTF-8 text)", bad + 1), -1;
    zt_json_error je;
    if (zt_json_parse_ex((const char *)line, len, &ex->root, &je))
        return zt_errf(err, errlen, "invalid JSON at byte %zu of the line: %s (expected one JSON object per line)",
                       je.off + 1, je.what), -1;
    const zt_json *r = &ex->root;
    if (r->type != ZT_JSON_OBJ)
        return zt_errf(err, errlen, "the line is %s (expected one JSON object per line)", type_name(r)), -1;
    char what[160];
    const uint8_t *s;
    size_t n;
    const zt_json *msgs = member(r, o->messages_field);
    if (msgs && o->tpl == SFT_TPL_NONE)
        return zt_errf(err, errlen, "a chat example (\"%s\") needs --template chatml, llama2 or llama3 (--template "
                       "none takes {\"%s\": ..., \"%s\": ...})", o->messages_field, o->prompt_field,
                       o->response_field), -1;
    if (msgs) {
        if (msgs->type != ZT_JSON_ARR || msgs->n == 0)
            return zt_errf(err, errlen, "field \"%s\" is %s (expected a non-empty array of {\"role\": ..., "
                           "\"content\": ...})", o->messages_field, msgs->type == ZT_JSON_ARR ? "an empty array" :
                           type_name(msgs)), -1;
        for (int i = 0; i < msgs->n; i++) {
            const zt_json *m = &msgs->items[i], *role, *content;
            if (m->type != ZT_JSON_OBJ)
                return zt_errf(err, errlen, "message %d is %s (expected an object {\"role\": ..., \"content\": ...})",
                               i + 1, type_name(m)), -1;
            if (!(role = member(m, "role")) || !(content = member(m, "content")))
                return zt_errf(err, errlen, "message %d has no \"%s\" (expected {\"role\": \"system\"|\"user\"|"
                               "\"assistant\", \"content\": \"...\"})", i + 1, role ? "content" : "role"), -1;
            snprintf(what, sizeof what, "message %d's \"role\"", i + 1);
            if (string_of(role, what, &s, &n, err, errlen)) return -1;
            int k = 0;
            while (k < 3 && !(strlen(SFT_ROLE_NAMES[k]) == n && memcmp(SFT_ROLE_NAMES[k], s, n) == 0)) k++;
            if (k == 3)
                return zt_errf(err, errlen, "message %d has role \"%.*s\" (expected system, user or assistant)", i + 1,
                               (int)(n < 40 ? n : 40), (const char *)s), -1;
            snprintf(what, sizeof what, "message %d's \"content\"", i + 1);
            if (string_of(content, what, &s, &n, err, errlen)) return -1;
            push_msg(ex, (sft_role)k, s, n);
        }
        return 0;
    }
    const zt_json *p = member(r, o->prompt_field), *a = member(r, o->response_field);
    if (!p && !a)
        return zt_errf(err, errlen, "no field \"%s\" or \"%s\" in the object (expected {\"%s\": ..., \"%s\": ...} or "
                       "{\"%s\": [...]}: see --prompt-field, --messages-field)", o->messages_field, o->prompt_field,
                       o->prompt_field, o->response_field, o->messages_field), -1;
    const char *missing = !p ? o->prompt_field : !a ? o->response_field : NULL;
    if (missing)
        return zt_errf(err, errlen, "no field \"%s\" in the object (expected a string field \"%s\": see --%s-field)",
                       missing, missing, missing == o->prompt_field ? "prompt" : "response"), -1;
    snprintf(what, sizeof what, "field \"%s\"", o->prompt_field);
    if (string_of(p, what, &s, &n, err, errlen)) return -1;
    push_msg(ex, SFT_USER, s, n);
    snprintf(what, sizeof what, "field \"%s\"", o->response_field);
    if (string_of(a, what, &s, &n, err, errlen)) return -1;
    push_msg(ex, SFT_ASSISTANT, s, n);
    return 0;
}

/* ---------------------------------------------------------------- the examples */

typedef struct run_state {
    const sft_opts *o;
    sft_renderer *r;
    zt_shard_writer w[2];
    uint32_t L, pad;
    uint32_t *tok;
    uint8_t *mask;
    uint64_t examples[2], truncated, dropped_long, dropped_empty, trained, padding;
    int warned;
} run_state;

static void warn_example(run_state *st, const char *path, uint64_t line, const char *fmt, size_t n) {
    if (st->warned++ >= MAX_WARN) return;
    fprintf(stderr, "ztrain: warning: %s:%llu: ", path, (unsigned long long)line);
    fprintf(stderr, fmt, n, (unsigned)st->L);
    fputc('\n', stderr);
}

/* truncates or drops, pads to L, appends to split k's shard */
static int add_example(run_state *st, const uint32_t *ids, const uint8_t *mask, size_t n, int k, const char *path,
                       uint64_t line) {
    const size_t L = st->L;
    size_t from = 0;
    if (n > L) {
        if (st->o->trunc == TRUNC_DROP) {
            st->dropped_long++;
            warn_example(st, path, line, "an example of %zu tokens, longer than seq_len + 1 = %u: dropped "
                         "(--truncate drop)", n);
            return 0;
        }
        st->truncated++;
        if (st->o->trunc == TRUNC_LEFT) from = n - L;
        n = L;
    }
    memcpy(st->tok, ids + from, n * sizeof *ids);
    memcpy(st->mask, mask + from, n);
    for (size_t i = n; i < L; i++) st->tok[i] = st->pad, st->mask[i] = 0;
    st->mask[0] = 0; /* nothing precedes the first token: it is never a target */
    uint64_t trained = 0;
    for (size_t i = 0; i < L; i++) trained += st->mask[i];
    if (!trained) {
        st->dropped_empty++;
        warn_example(st, path, line, "an example of %zu tokens has no trained token within seq_len + 1 = %u "
                     "tokens: dropped", n);
        return 0;
    }
    char err[ERR_LEN];
    if (zt_shard_writer_append_masked(&st->w[k], st->tok, st->mask, L, err, sizeof err)) return prep_fail("%s", err);
    st->examples[k]++;
    st->trained += trained;
    st->padding += L - n;
    return 0;
}

static int process_input(run_state *st, const char *path, uint64_t n_examples) {
    const uint64_t n_val = (uint64_t)floor((double)n_examples * st->o->val_fraction + 1e-9);
    char err[ERR_LEN], why[ERR_LEN];
    lines l;
    if (lines_open(&l, path, err, sizeof err)) return prep_fail("%s", err);
    example ex;
    memset(&ex, 0, sizeof ex);
    const uint8_t *line;
    size_t len;
    uint64_t index = 0;
    int r = 0, rc = 0;
    while (!rc && (r = lines_next(&l, &line, &len, err, sizeof err)) == 1) {
        if (blank(line, len)) continue;
        const uint32_t *ids;
        const uint8_t *mask;
        size_t n;
        if (parse_example(st->o, line, len, &ex, why, sizeof why) ||
            sft_render(st->r, ex.msgs, ex.n, &ids, &mask, &n, why, sizeof why))
            rc = prep_fail("%s:%llu: %s", path, (unsigned long long)l.line, why);
        else
            rc = add_example(st, ids, mask, n, index >= n_examples - n_val, path, l.line);
        zt_json_free(&ex.root);
        memset(&ex.root, 0, sizeof ex.root);
        index++;
    }
    if (!rc && r < 0) rc = prep_fail("%s", err);
    free(ex.msgs);
    lines_close(&l);
    return rc;
}

/* ---------------------------------------------------------------- inputs, tokenizer, outputs */

static int count_examples(const char *path, uint64_t *n) {
    char err[ERR_LEN];
    zt_docsrc_kind kind;
    zt_docsrc_comp comp;
    zt_docsrc_format(path, &kind, &comp);
    if (zt_check_input_file(path, "a JSON Lines file", err, sizeof err)) return prep_fail("%s", err);
    if (kind != ZT_DOCSRC_JSONL)
        return prep_fail("%s: not a JSON Lines name (expected .jsonl or .json, optionally .gz or .zst: one example per "
                    "line)", path);
    zt_docsrc *s;
    if (zt_docsrc_open(&s, path, NULL, err, sizeof err)) return prep_fail("%s", err);
    uint64_t bytes;
    int rc = zt_docsrc_count(s, n, &bytes, err, sizeof err) ? prep_fail("%s", err) : 0;
    zt_docsrc_close(s);
    return rc;
}

/* the tokenizer without its prefix space (a .zttok of it, edited: the format is documented in tokenizer.h) */
static zt_tokenizer *without_prefix(const zt_tokenizer *t, int *rc) {
    char err[ERR_LEN], path[512];
    const char *tmp = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/ztrain-sft-tok.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    int fd = mkstemp(path);
    if (fd < 0) return *rc = prep_fail("%s: cannot create a temporary file (%s)", path, strerror(errno)), NULL;
    close(fd);
    zt_tokenizer *p = NULL;
    size_t len;
    char *text = NULL, *at;
    if (zt_tokenizer_save(t, path, err, sizeof err) || !(text = zt_read_file(path, "a tokenizer file", &len, err,
                                                                             sizeof err)))
        *rc = prep_fail("%s", err);
    else if (!(at = strstr(text, "\nprefix first\n")))
        *rc = prep_fail("%s: no 'prefix first' line in the saved tokenizer", path);
    else {
        const size_t head = (size_t)(at - text), skip = strlen("\nprefix first\n");
        char *edited = zt_malloc(len + 1);
        memcpy(edited, text, head);
        memcpy(edited + head, "\nprefix none\n", 13);
        memcpy(edited + head + 13, at + skip, len - head - skip);
        if (zt_write_file_atomic(path, edited, len - 1, err, sizeof err) ||
            !(p = zt_tokenizer_load_zttok(path, err, sizeof err)))
            *rc = prep_fail("%s", err);
        free(edited);
    }
    free(text);
    unlink(path);
    return p;
}

static int writable_dir(const char *dir) {
    if (zt_mkdirs(dir) != 0) return prep_fail("--out-dir %s: cannot create directory (%s)", dir, strerror(errno));
    char probe[4200];
    snprintf(probe, sizeof probe, "%s/.ztrain-prepare-probe", dir);
    FILE *f = fopen(probe, "w");
    if (!f) return prep_fail("--out-dir %s: directory not writable (%s)", dir, strerror(errno));
    fclose(f);
    remove(probe);
    return 0;
}

/* renames DIR/NAME.tmp to DIR/NAME for each name (ok), or removes the .tmp files */
static int publish(const char *dir, const char *const *names, int n, int ok) {
    char tmp[4200], path[4096];
    int rc = 0;
    for (int k = 0; k < n; k++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[k]);
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        if (!ok || rc) remove(tmp);
        else if (rename(tmp, path) != 0) rc = prep_fail("%s: cannot rename to %s (%s)", tmp, path, strerror(errno));
    }
    return rc;
}

static void summary(const sft_opts *o, const zt_tokenizer *t, const run_state *st) {
    const uint64_t n = st->examples[0] + st->examples[1], tokens = n * st->L;
    const uint32_t eot = zt_tokenizer_eot(t);
    printf("tokenizer: %s (vocab size %u, eot id %lld) -> %s/%s\n", o->tokenizer, zt_tokenizer_vocab_size(t),
           eot == ZT_TOK_NO_EOT ? -1LL : (long long)eot, o->out_dir, TOK_FILE);
    printf("template: %s; examples of %u tokens (seq_len %ld + 1), padded at the end with id %u (mask 0)\n",
           SFT_TEMPLATE_NAMES[o->tpl], (unsigned)st->L, o->seq_len, (unsigned)st->pad);
    printf("examples: %llu (train %llu -> %s/train.bin, val %llu -> %s/val.bin)\n", (unsigned long long)n,
           (unsigned long long)st->examples[0], o->out_dir, (unsigned long long)st->examples[1], o->out_dir);
    printf("truncated: %llu (longer than %u tokens, cut at the %s: --truncate)\n", (unsigned long long)st->truncated,
           (unsigned)st->L, o->trunc == TRUNC_LEFT ? "start" : "end");
    printf("dropped: %llu (%llu longer than %u tokens with --truncate drop, %llu without a trained token)\n",
           (unsigned long long)(st->dropped_long + st->dropped_empty), (unsigned long long)st->dropped_long,
           (unsigned)st->L, (unsigned long long)st->dropped_empty);
    printf("tokens: %llu (padding %llu), trained (mask 1): %llu (%.1f%%)\n", (unsigned long long)tokens,
           (unsigned long long)st->padding, (unsigned long long)st->trained,
           tokens ? 100.0 * (double)st->trained / (double)tokens : 0.0);
    if (st->truncated && o->trunc == TRUNC_RIGHT)
        fprintf(stderr, "ztrain: warning: %llu examples longer than seq_len + 1 = %u tokens were cut at the end (their "
                "responses lose their last tokens; --truncate left|drop to change)\n",
                (unsigned long long)st->truncated, (unsigned)st->L);
    if (o->val_fraction > 0 && st->examples[1] == 0)
        fprintf(stderr, "ztrain: warning: the validation split is empty (too few examples for --val-fraction %g)\n",
                o->val_fraction);
}

/* a launcher's rank other than 0 (then this process does nothing: the work is one process's) */
static int other_rank(void) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", NULL};
    for (const char *const *v = vars; *v; v++) {
        const char *s = getenv(*v);
        if (s && atoi(s) > 0) return 1;
    }
    return 0;
}

int zt_prepare_sft(int argc, char **argv) {
    if (other_rank()) return 0;
    sft_opts o;
    int rc = parse_opts(argc, argv, &o);
    if (rc) return rc < 0 ? 0 : rc;
    uint64_t *counts = zt_calloc((size_t)o.n_inputs, sizeof *counts);
    for (int i = 0; i < o.n_inputs && !rc; i++) rc = count_examples(o.inputs[i], &counts[i]);
    char err[ERR_LEN];
    zt_tokenizer *t = NULL, *plain = NULL;
    if (!rc && !(rc = zt_check_input_file(o.tokenizer, "a tokenizer file: .zttok, tokenizer.json or vocab.json",
                                          err, sizeof err) ? prep_fail("%s", err) : 0) &&
        !(t = zt_tokenizer_load(o.tokenizer, o.merges, err, sizeof err)))
        rc = prep_fail("%s", err);
    if (!rc && o.tpl != SFT_TPL_NONE && zt_tokenizer_config(t)->prefix == ZT_TOK_PREFIX_FIRST)
        plain = without_prefix(t, &rc);
    sft_renderer *r = NULL;
    if (!rc) { /* the renderer owns plain from here */
        r = sft_renderer_create(t, plain, o.tpl, err, sizeof err);
        plain = NULL;
        if (!r) rc = prep_fail("%s", err);
    }
    zt_tokenizer_free(plain);
    struct stat dst;
    const int made = stat(o.out_dir, &dst) != 0;
    if (!rc) rc = writable_dir(o.out_dir);
    run_state st;
    memset(&st, 0, sizeof st);
    st.o = &o;
    st.r = r;
    st.L = (uint32_t)o.seq_len + 1;
    static const char *const names[3] = {"train.bin", "val.bin", TOK_FILE};
    char path[4200];
    int opened = 0, saved = 0;
    if (!rc) {
        const zt_tok_config *c = zt_tokenizer_config(t);
        st.pad = c->eot != ZT_TOK_NO_EOT ? c->eot : c->doc_end != ZT_TOK_NO_EOT ? c->doc_end : 0;
        st.tok = zt_malloc(st.L * sizeof *st.tok);
        st.mask = zt_malloc(st.L);
        snprintf(path, sizeof path, "%s/%s.tmp", o.out_dir, TOK_FILE);
        if (zt_tokenizer_save(t, path, err, sizeof err)) rc = prep_fail("%s", err);
        saved = 1;
    }
    for (int k = 0; k < 2 && !rc; k++) {
        snprintf(path, sizeof path, "%s/%s.tmp", o.out_dir, names[k]);
        if (zt_shard_writer_open2(&st.w[k], path, zt_tokenizer_vocab_size(t), zt_tokenizer_eot(t), 1, st.L, err,
                                  sizeof err))
            rc = prep_fail("%s", err);
        else opened = k + 1;
    }
    for (int i = 0; i < o.n_inputs && !rc; i++) rc = process_input(&st, o.inputs[i], counts[i]);
    if (!rc && st.examples[0] + st.examples[1] == 0)
        rc = prep_fail("prepare --sft: no example left (all %llu dropped; see --truncate and --seq-len)",
                  (unsigned long long)(st.dropped_long + st.dropped_empty));
    for (int k = 0; k < opened; k++)
        if (zt_shard_writer_close(&st.w[k], err, sizeof err) && !rc) rc = prep_fail("%s", err);
    if (saved) {
        int prc = publish(o.out_dir, names, opened, rc == 0);
        int trc = publish(o.out_dir, names + 2, 1, rc == 0 && prc == 0);
        if (!rc) rc = prc ? prc : trc;
    }
    if (!rc) summary(&o, t, &st);
    if (rc && made) rmdir(o.out_dir);
    free(st.tok);
    free(st.mask);
    free(counts);
    sft_renderer_free(r);
    zt_tokenizer_free(t);
    return rc;
}
