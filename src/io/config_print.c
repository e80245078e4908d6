/* config_print.c — the schema's output side: the resolved config as a valid libconfig file
 * (`ztrain config`, checkpoints), `ztrain help config`, and config diffs for resume checks. */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/config.h"
#include "io/config_internal.h"

/* ---------------------------------------------------------------- printing */

typedef struct sbuf { char *buf; size_t cap, len; } sbuf; /* len counts bytes needed, may exceed cap */

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    size_t room = b->len < b->cap ? b->cap - b->len : 0;
    int w = vsnprintf(room ? b->buf + b->len : NULL, room, fmt, ap);
    va_end(ap);
    if (w > 0) b->len += (size_t)w;
}

/* a libconfig string literal with escapes */
static void quote(const char *s, char *out, size_t n) {
    size_t o = 0;
    if (n < 3) { if (n) out[0] = 0; return; }
    out[o++] = '"';
    for (; *s && o + 6 < n; s++) {
        unsigned char ch = (unsigned char)*s;
        const char *e = NULL;
        switch (ch) {
        case '"': e = "\\\""; break;
        case '\\': e = "\\\\"; break;
        case '\n': e = "\\n"; break;
        case '\t': e = "\\t"; break;
        case '\r': e = "\\r"; break;
        case '\f': e = "\\f"; break;
        }
        if (e) o += (size_t)snprintf(out + o, n - o, "%s", e);
        else if (ch < 0x20 || ch == 0x7f) o += (size_t)snprintf(out + o, n - o, "\\x%02x", ch);
        else out[o++] = (char)ch;
    }
    out[o++] = '"';
    out[o] = 0;
}

/* the value of key k as a libconfig literal */
static void value_literal(const zt_config *c, const key_def *k, char *out, size_t n) {
    switch (k->type) {
    case K_INT: snprintf(out, n, "%d", *(const int *)cfg_cfield(c, k)); break;
    case K_BOOL: snprintf(out, n, "%s", *(const int *)cfg_cfield(c, k) ? "true" : "false"); break;
    case K_LONG: {
        long v = *(const long *)cfg_cfield(c, k);
        snprintf(out, n, "%ld%s", v, (v > INT32_MAX || v < INT32_MIN) ? "L" : "");
        break;
    }
    case K_FLOAT: cfg_fmt_float_literal(*(const double *)cfg_cfield(c, k), out, n); break;
    case K_STRING:
    case K_ENUM: quote((const char *)cfg_cfield(c, k), out, n); break;
    }
}

static void print_key(sbuf *b, const zt_config *c, const key_def *k, int indent) {
    char lit[4 * ZT_PATH_MAX + 8], line[4 * ZT_PATH_MAX + 96], vals[128] = "";
    value_literal(c, k, lit, sizeof lit);
    int w = snprintf(line, sizeof line, "%*s%s = %s;", indent, "", cfg_leaf(k->key), lit);
    if (k->type == K_ENUM) {
        char list[100];
        cfg_allowed_list(k, " | ", list, sizeof list);
        snprintf(vals, sizeof vals, " (%s)", list);
    }
    sb_printf(b, "%s%*s# %s%s\n", line, w < 40 ? 40 - w : 1, "", k->help, vals);
}

size_t zt_config_to_string(const zt_config *c, char *buf, size_t len) {
    sbuf b = { buf, len, 0 };
    if (buf && len) buf[0] = 0;
    sb_printf(&b, "# ztrain configuration (libconfig syntax). Keys: `ztrain help config`.\n"
                  "# Integers above 2147483647 need an L suffix: 3000000000L.\n\n");
    for (int i = 0; i < N_KEYS; i++)
        if (!cfg_group_len(cfg_schema[i].key)) print_key(&b, c, &cfg_schema[i], 0);
    for (int i = 0; i < N_KEYS; i++) {
        size_t gl = cfg_group_len(cfg_schema[i].key);
        if (!gl) continue;
        if (i > 0 && cfg_group_len(cfg_schema[i - 1].key) == gl && !strncmp(cfg_schema[i - 1].key, cfg_schema[i].key, gl))
            continue; /* group already printed */
        sb_printf(&b, "\n%.*s = {\n", (int)gl, cfg_schema[i].key);
        for (int j = i; j < N_KEYS; j++)
            if (cfg_group_len(cfg_schema[j].key) == gl && !strncmp(cfg_schema[j].key, cfg_schema[i].key, gl))
                print_key(&b, c, &cfg_schema[j], 2);
        sb_printf(&b, "};\n");
    }
    return b.len;
}

int zt_config_diff(const zt_config *a, const zt_config *b, zt_config_diff_fn fn, void *ctx) {
    char va[4 * ZT_PATH_MAX + 8], vb[4 * ZT_PATH_MAX + 8];
    for (int i = 0; i < N_KEYS; i++) {
        value_literal(a, &cfg_schema[i], va, sizeof va);
        value_literal(b, &cfg_schema[i], vb, sizeof vb);
        if (strcmp(va, vb) == 0) continue; /* literals are exact: shortest round-trip for floats */
        int rc = fn(cfg_schema[i].key, va, vb, ctx);
        if (rc) return rc;
    }
    return 0;
}

void zt_config_print(const zt_config *c, FILE *f) {
    size_t need = zt_config_to_string(c, NULL, 0);
    char *buf = malloc(need + 1);
    if (!buf) abort();
    zt_config_to_string(c, buf, need + 1);
    fputs(buf, f);
    free(buf);
}

/* ---------------------------------------------------------------- help */

static void range_text(const key_def *k, char *out, size_t n) {
    char lo[32], hi[32];
    cfg_fmt_double(k->min, lo, sizeof lo);
    cfg_fmt_double(k->max, hi, sizeof hi);
    switch (k->type) {
    case K_ENUM: cfg_allowed_list(k, " | ", out, n); break;
    case K_STRING:
        snprintf(out, n, "%s<= %zu chars", k->min > 0 ? "non-empty, " : "", k->size - 1);
        break;
    case K_BOOL: snprintf(out, n, "true | false"); break;
    default:
        if (k->max >= BIG) snprintf(out, n, "%s %s", (k->flags & MIN_OPEN) ? ">" : ">=", lo);
        else
            snprintf(out, n, "%c%s, %s%c", (k->flags & MIN_OPEN) ? '(' : '[', lo, hi,
                     (k->flags & MAX_OPEN) ? ')' : ']');
    }
}

void zt_config_help(FILE *f) {
    zt_config d;
    zt_config_defaults(&d);
    int wk = 3, wd = 7, wr = 14;
    char def[N_KEYS][ZT_PATH_MAX], rng[N_KEYS][96];
    for (int i = 0; i < N_KEYS; i++) {
        value_literal(&d, &cfg_schema[i], def[i], sizeof def[i]);
        range_text(&cfg_schema[i], rng[i], sizeof rng[i]);
        int l = (int)strlen(cfg_schema[i].key);
        if (l > wk) wk = l;
        if ((l = (int)strlen(def[i])) > wd) wd = l;
        if ((l = (int)strlen(rng[i])) > wr) wr = l;
    }
    fprintf(f, "Configuration keys. In a file (libconfig syntax) keys live in groups: train = { lr = 3e-4; };\n"
               "on the command line: --set train.lr=3e-4. `ztrain config -c FILE` prints the resolved config.\n"
               "Integers above 2147483647 in a file need an L suffix (3000000000L).\n\n");
    fprintf(f, "%-*s  %-6s  %-*s  %-*s  %s\n", wk, "KEY", "TYPE", wd, "DEFAULT", wr, "RANGE / VALUES", "DESCRIPTION");
    for (int i = 0; i < N_KEYS; i++)
        fprintf(f, "%-*s  %-6s  %-*s  %-*s  %s\n", wk, cfg_schema[i].key, cfg_type_name(cfg_schema[i].type), wd, def[i], wr,
                rng[i], cfg_schema[i].help);
    fprintf(f, "\nAlso checked: n_embd %% n_head == 0, seq_len <= block_size, padded_vocab (if set) >= vocab_size,\n"
               "global_batch %% (micro_batch * ranks) == 0, min_lr <= lr, warmup_steps <= steps, eval.batches x\n"
               "micro_batch within eval.sequences' range, run.session and run.name plain directory names.\n");
}
