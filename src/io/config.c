/* config.c — the configuration schema, parsing and validation (what the values mean beyond that: config_derive.c).
 *
 * ONE table (cfg_schema[] below) lists every key: dotted name, type, field offset, default,
 * range or allowed values, and a one-line help. Defaults, libconfig parsing (with unknown-key
 * detection and "did you mean"), --set overrides, range checks, `ztrain config` output and
 * `ztrain help config` all walk that table; nothing else knows the key names except the
 * cross-key checks in zt_config_validate.
 *
 * libconfig 1.5 quirks handled here: it does not report unknown keys (we walk the tree), it
 * keeps ints and floats apart (we accept both for float keys, and integral floats for int keys),
 * and it silently wraps integer literals above 2^31-1 written without an L suffix (we re-read
 * the literal from the source line and refuse a value that wrapped).
 */
#include "io/config.h"
#include "io/config_internal.h"
#include "iface/param_table.h"
#include "util/util.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <libconfig.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* the schema: config_schema.c (cfg_schema[], cfg_n_keys) */


/* ---------------------------------------------------------------- small helpers */

static void *field(zt_config *c, const key_def *k) { return (char *)c + k->off; }
const void *cfg_cfield(const zt_config *c, const key_def *k) { return (const char *)c + k->off; }

static const key_def *find_key(const char *name) {
    for (int i = 0; i < N_KEYS; i++)
        if (strcmp(cfg_schema[i].key, name) == 0) return &cfg_schema[i];
    return NULL;
}

/* length of the group part of a key ("train.lr" -> 5), 0 for a top-level key */
size_t cfg_group_len(const char *key) {
    const char *dot = strchr(key, '.');
    return dot ? (size_t)(dot - key) : 0;
}

static int is_group(const char *name) {
    size_t n = strlen(name);
    for (int i = 0; i < N_KEYS; i++)
        if (cfg_group_len(cfg_schema[i].key) == n && strncmp(cfg_schema[i].key, name, n) == 0) return 1;
    return 0;
}

static int levenshtein(const char *a, const char *b) {
    size_t na = strlen(a), nb = strlen(b);
    if (na > 127 || nb > 127) return 1 << 20;
    int row[128];
    for (size_t j = 0; j <= nb; j++) row[j] = (int)j;
    for (size_t i = 1; i <= na; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= nb; j++) {
            int up = row[j];
            int cost = tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]);
            int best = diag + cost;
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[nb];
}

const char *cfg_leaf(const char *key) {
    const char *dot = strrchr(key, '.');
    return dot ? dot + 1 : key;
}

/* " (did you mean 'train.lr'?)" or "" : nearest key or group name */
static void did_you_mean(const char *name, char *out, size_t n) {
    char best[ZT_NAME_MAX] = "";
    int best_d = 1 << 20;
    for (int i = 0; i < N_KEYS; i++) {
        const char *k = cfg_schema[i].key;
        int d = levenshtein(name, k);
        if (strcmp(cfg_leaf(name), cfg_leaf(k)) == 0 && d > 1) d = 1; /* right key, wrong/missing group */
        if (d < best_d) { best_d = d; snprintf(best, sizeof best, "%s", k); }
        size_t gl = cfg_group_len(k);
        if (gl > 0 && gl < sizeof best) {
            char g[ZT_NAME_MAX];
            memcpy(g, k, gl);
            g[gl] = 0;
            d = levenshtein(name, g);
            if (d < best_d) { best_d = d; snprintf(best, sizeof best, "%s", g); }
        }
    }
    int limit = (int)strlen(name) / 3;
    if (limit < 2) limit = 2;
    if (best_d <= limit) snprintf(out, n, " (did you mean '%s'?)", best);
    else if (n) out[0] = 0;
}

static int unknown_key(const char *loc, const char *name, char *err, size_t n) {
    char hint[ZT_NAME_MAX + 32];
    did_you_mean(name, hint, sizeof hint);
    return zt_errf(err, n, "%s: unknown key '%s'%s (see `ztrain help config`)", loc, name, hint);
}

/* shortest "%.Ng" that reads back as exactly v */
void cfg_fmt_double(double v, char *out, size_t n) {
    if (v == floor(v) && fabs(v) < 1e15) { snprintf(out, n, "%.0f", v); return; } /* 10, not 1e+01 */
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(out, n, "%.*g", prec, v);
        if (strtod(out, NULL) == v) return;
    }
}

/* a libconfig float literal: must contain '.' or an exponent, or it would parse as an int */
void cfg_fmt_float_literal(double v, char *out, size_t n) {
    cfg_fmt_double(v, out, n);
    if (!strpbrk(out, ".eEn")) {
        size_t l = strlen(out);
        if (l + 2 < n) memcpy(out + l, ".0", 3);
    }
}

const char *cfg_type_name(key_type t) {
    switch (t) {
    case K_INT: return "int";
    case K_LONG: return "long";
    case K_FLOAT: return "float";
    case K_STRING: return "string";
    case K_ENUM: return "enum";
    case K_BOOL: return "bool";
    }
    return "?";
}

static const char *expected_name(key_type t) {
    switch (t) {
    case K_INT:
    case K_LONG: return "an integer";
    case K_FLOAT: return "a number";
    case K_STRING:
    case K_ENUM: return "a string";
    case K_BOOL: return "a boolean (true or false)";
    }
    return "?";
}

void cfg_allowed_list(const key_def *k, const char *sep, char *out, size_t n) {
    size_t used = 0;
    out[0] = 0;
    for (const char *const *a = k->allowed; *a && used < n; a++) {
        int w = snprintf(out + used, n - used, "%s%s", a == k->allowed ? "" : sep, *a);
        if (w < 0) break;
        used += (size_t)w;
    }
}

/* ---------------------------------------------------------------- checking and storing values */

/* range check of a number; vtext is how the value is shown in the message */
static int check_range(const key_def *k, double v, const char *vtext, const char *loc, char *err, size_t n) {
    char lim[64];
    const char *pre = loc ? loc : "", *colon = loc ? ": " : "";
    if ((k->flags & MIN_OPEN) ? !(v > k->min) : !(v >= k->min)) {
        cfg_fmt_double(k->min, lim, sizeof lim);
        return zt_errf(err, n, "%s%s%s = %s: must be %s %s", pre, colon, k->key, vtext,
                    (k->flags & MIN_OPEN) ? ">" : ">=", lim);
    }
    if ((k->flags & MAX_OPEN) ? !(v < k->max) : !(v <= k->max)) {
        cfg_fmt_double(k->max, lim, sizeof lim);
        return zt_errf(err, n, "%s%s%s = %s: must be %s %s", pre, colon, k->key, vtext,
                    (k->flags & MAX_OPEN) ? "<" : "<=", lim);
    }
    return 0;
}

static int store_integer(zt_config *c, const key_def *k, long long v, const char *loc, char *err, size_t n) {
    char txt[32];
    snprintf(txt, sizeof txt, "%lld", v);
    if (k->type == K_FLOAT) {
        if (check_range(k, (double)v, txt, loc, err, n)) return 1;
        *(double *)field(c, k) = (double)v;
        return 0;
    }
    if (k->type != K_INT && k->type != K_LONG)
        return zt_errf(err, n, "%s: %s: expected %s, got an integer", loc, k->key, expected_name(k->type));
    if (check_range(k, (double)v, txt, loc, err, n)) return 1;
    if (k->type == K_INT) *(int *)field(c, k) = (int)v;
    else *(long *)field(c, k) = (long)v;
    return 0;
}

static int store_double(zt_config *c, const key_def *k, double v, const char *loc, char *err, size_t n) {
    char txt[40];
    cfg_fmt_double(v, txt, sizeof txt);
    if (!isfinite(v)) return zt_errf(err, n, "%s: %s: expected a finite number, got %s", loc, k->key, txt);
    if (k->type == K_INT || k->type == K_LONG) {
        if (v != floor(v))
            return zt_errf(err, n, "%s: %s: expected an integer, got %s", loc, k->key, txt);
        if (fabs(v) >= 9.2e18) return zt_errf(err, n, "%s: %s = %s: out of range", loc, k->key, txt);
        return store_integer(c, k, (long long)v, loc, err, n);
    }
    if (k->type != K_FLOAT)
        return zt_errf(err, n, "%s: %s: expected %s, got a number", loc, k->key, expected_name(k->type));
    if (check_range(k, v, txt, loc, err, n)) return 1;
    *(double *)field(c, k) = v;
    return 0;
}

static int check_string(const key_def *k, const char *s, const char *loc, char *err, size_t n) {
    const char *pre = loc ? loc : "", *colon = loc ? ": " : "";
    size_t len = strnlen(s, k->size);
    if (len >= k->size)
        return zt_errf(err, n, "%s%s%s: value too long (at most %zu characters)", pre, colon, k->key, k->size - 1);
    if (k->type == K_ENUM) {
        for (const char *const *a = k->allowed; *a; a++)
            if (strcmp(*a, s) == 0) return 0;
        char list[256];
        cfg_allowed_list(k, ", ", list, sizeof list);
        return zt_errf(err, n, "%s%s%s: '%s' is not one of %s", pre, colon, k->key, s, list);
    }
    if (len < (size_t)k->min)
        return zt_errf(err, n, "%s%s%s: must not be empty", pre, colon, k->key);
    return 0;
}

static int store_string(zt_config *c, const key_def *k, const char *s, const char *loc, char *err, size_t n) {
    if (k->type == K_INT && strcmp(k->key, "train.micro_batch") == 0 && strcmp(s, "auto") == 0) {
        *(int *)field(c, k) = 0; /* resolved at start-up (zt_zero_auto_micro_batch) */
        return 0;
    }
    if (k->type != K_STRING && k->type != K_ENUM)
        return zt_errf(err, n, "%s: %s: expected %s, got a string", loc, k->key, expected_name(k->type));
    if (check_string(k, s, loc, err, n)) return 1;
    snprintf((char *)field(c, k), k->size, "%s", s);
    return 0;
}

static int store_bool(zt_config *c, const key_def *k, int v, const char *loc, char *err, size_t n) {
    if (k->type != K_BOOL)
        return zt_errf(err, n, "%s: %s: expected %s, got a boolean", loc, k->key, expected_name(k->type));
    *(int *)field(c, k) = v != 0;
    return 0;
}

/* ---------------------------------------------------------------- defaults */

void zt_config_defaults(zt_config *c) {
    memset(c, 0, sizeof *c);
    for (int i = 0; i < N_KEYS; i++) {
        const key_def *k = &cfg_schema[i];
        switch (k->type) {
        case K_INT:
        case K_BOOL:
            if (k->size != sizeof(int)) abort(); /* schema bug: field type disagrees with the table */
            *(int *)field(c, k) = (int)k->def;
            break;
        case K_LONG:
            if (k->size != sizeof(long)) abort();
            *(long *)field(c, k) = (long)k->def;
            break;
        case K_FLOAT:
            if (k->size != sizeof(double)) abort();
            *(double *)field(c, k) = k->def;
            break;
        case K_STRING:
        case K_ENUM: snprintf((char *)field(c, k), k->size, "%s", k->sdef); break;
        }
    }
}

/* ---------------------------------------------------------------- libconfig files */

static const char *setting_type_name(int t) {
    switch (t) {
    case CONFIG_TYPE_GROUP: return "a group";
    case CONFIG_TYPE_INT:
    case CONFIG_TYPE_INT64: return "an integer";
    case CONFIG_TYPE_FLOAT: return "a floating-point number";
    case CONFIG_TYPE_STRING: return "a string";
    case CONFIG_TYPE_BOOL: return "a boolean";
    case CONFIG_TYPE_ARRAY: return "an array";
    case CONFIG_TYPE_LIST: return "a list";
    }
    return "nothing";
}

/* libconfig 1.5 turns "x = 3000000000" into a wrapped 32-bit int. Re-read the decimal literal
   of `name` on source line `line` and return it in *out (1), or 0 when it cannot be found. */
static int raw_int_literal(const char *file, int line, const char *name, long long *out, char *text, size_t tn) {
    if (!file) return 0; /* parsed from a string (zt_config_load_string): ztrain wrote it with L suffixes */
    FILE *f = fopen(file, "r");
    if (!f) return 0;
    char buf[4096];
    int ch = 0;
    for (int ln = 1; ln < line && ch != EOF;) /* skip to the line (any length) */
        if ((ch = fgetc(f)) == '\n') ln++;
    int found = ch != EOF && fgets(buf, sizeof buf, f) != NULL;
    fclose(f);
    if (!found) return 0;
    size_t nl = strlen(name);
    for (char *p = strstr(buf, name); p; p = strstr(p + 1, name)) {
        if (p > buf && (isalnum((unsigned char)p[-1]) || p[-1] == '_' || p[-1] == '-' || p[-1] == '*')) continue;
        char *q = p + nl;
        while (*q == ' ' || *q == '\t') q++;
        if (*q != '=' && *q != ':') continue;
        q++;
        while (*q == ' ' || *q == '\t') q++;
        char *d = q + (*q == '-' || *q == '+');
        if (!isdigit((unsigned char)*d) || (d[0] == '0' && (d[1] == 'x' || d[1] == 'X'))) return 0;
        errno = 0;
        char *end;
        long long v = strtoll(q, &end, 10);
        if (errno == ERANGE) v = v > 0 ? LLONG_MAX : LLONG_MIN;
        *out = v;
        snprintf(text, tn, "%.*s", (int)(end - q), q);
        return 1;
    }
    return 0;
}

static int apply_setting(zt_config *c, const key_def *k, config_setting_t *s, const char *loc,
                         const char *file, char *err, size_t n) {
    int t = config_setting_type(s);
    switch (t) {
    case CONFIG_TYPE_INT: {
        long long v = config_setting_get_int(s), raw;
        char txt[64];
        /* flag only a literal outside 32 bits that libconfig wrapped (or saturated) to v */
        if (raw_int_literal(file, config_setting_source_line(s), config_setting_name(s), &raw, txt,
                            sizeof txt) &&
            (raw > INT32_MAX || raw < INT32_MIN) &&
            (raw == LLONG_MAX || raw == LLONG_MIN || (int32_t)(uint32_t)(unsigned long long)raw == v))
            return zt_errf(err, n,
                        "%s: %s = %s does not fit in 32 bits: libconfig needs an L suffix (%sL)",
                        loc, k->key, txt, txt);
        return store_integer(c, k, v, loc, err, n);
    }
    case CONFIG_TYPE_INT64: return store_integer(c, k, config_setting_get_int64(s), loc, err, n);
    case CONFIG_TYPE_FLOAT: return store_double(c, k, config_setting_get_float(s), loc, err, n);
    case CONFIG_TYPE_STRING: return store_string(c, k, config_setting_get_string(s), loc, err, n);
    case CONFIG_TYPE_BOOL: return store_bool(c, k, config_setting_get_bool(s), loc, err, n);
    default:
        return zt_errf(err, n, "%s: %s: expected %s, got %s", loc, k->key, expected_name(k->type),
                    setting_type_name(t));
    }
}

/* walk a group (root: prefix NULL) against the schema; path NULL: parsed from a string */
static int walk_group(zt_config *c, config_setting_t *g, const char *prefix, const char *path, char *err,
                      size_t n) {
    int len = config_setting_length(g);
    for (int i = 0; i < len; i++) {
        config_setting_t *s = config_setting_get_elem(g, (unsigned)i);
        const char *name = config_setting_name(s);
        const char *file = config_setting_source_file(s);
        if (!file) file = path;
        char loc[ZT_PATH_MAX + 32], key[2 * ZT_NAME_MAX];
        snprintf(loc, sizeof loc, "%s:%d", file ? file : "config text", (int)config_setting_source_line(s));
        snprintf(key, sizeof key, "%s%s%s", prefix ? prefix : "", prefix ? "." : "", name ? name : "?");
        const key_def *k = find_key(key);
        int t = config_setting_type(s);
        if (k) {
            if (apply_setting(c, k, s, loc, file, err, n)) return 1;
        } else if (!prefix && is_group(key)) {
            if (t != CONFIG_TYPE_GROUP)
                return zt_errf(err, n, "%s: %s: expected a group (%s = { ... };), got %s", loc, key, key,
                            setting_type_name(t));
            if (walk_group(c, s, key, path, err, n)) return 1;
        } else {
            return unknown_key(loc, key, err, n);
        }
    }
    return 0;
}

/* libconfig 1.5 opens @include files itself (no hook): their types are checked first, recursively (a
   named pipe would block its open, a directory kills the process from inside libconfig's scanner) */
static int check_includes(const char *path, int depth, char *err, size_t n) {
    if (depth > 10) return zt_errf(err, n, "%s: @include nested more than 10 deep", path);
    FILE *f = fopen(path, "r");
    if (!f) return 0; /* reported by libconfig in its words */
    char line[4096];
    int ln = 0, rc = 0;
    while (!rc && fgets(line, sizeof line, f)) {
        ln++;
        char *p = line;
        while (isspace((unsigned char)*p)) p++;
        if (strncmp(p, "@include", 8) != 0) continue;
        p += 8;
        while (isspace((unsigned char)*p)) p++;
        char *q = *p == '"' ? strchr(p + 1, '"') : NULL;
        if (!q) continue;
        *q = 0;
        char e[ZT_ERR_BUF];
        if (zt_check_input_file(p + 1, "a libconfig file", e, sizeof e))
            rc = zt_errf(err, n, "%s:%d: @include: %s", path, ln, e);
        else
            rc = check_includes(p + 1, depth + 1, err, n);
    }
    fclose(f);
    return rc;
}

static int load_file(zt_config *c, const char *path, char *err, size_t n) {
    /* before any open: fopen of a named pipe would block until a writer appears */
    if (zt_check_input_file(path, "a libconfig config file", err, n) || check_includes(path, 0, err, n)) return 1;
    FILE *f = fopen(path, "r");
    if (!f) return zt_errf(err, n, "%s: cannot open: %s", path, strerror(errno));
    fclose(f);
    config_t cf;
    config_init(&cf);
    int rc = 0;
    if (!config_read_file(&cf, path)) {
        if (config_error_type(&cf) == CONFIG_ERR_FILE_IO)
            rc = zt_errf(err, n, "%s: cannot read: %s", path, config_error_text(&cf));
        else
            rc = zt_errf(err, n, "%s:%d: syntax error (libconfig: %s)",
                      config_error_file(&cf) ? config_error_file(&cf) : path, config_error_line(&cf),
                      config_error_text(&cf));
    } else {
        rc = walk_group(c, config_root_setting(&cf), NULL, path, err, n);
    }
    config_destroy(&cf);
    return rc;
}

/* the same parse over a string (a checkpoint's stored config) */
static int load_text(zt_config *c, const char *text, char *err, size_t n) {
    config_t cf;
    config_init(&cf);
    int rc = 0;
    if (!config_read_string(&cf, text))
        rc = zt_errf(err, n, "config text:%d: syntax error (libconfig: %s)", config_error_line(&cf),
                  config_error_text(&cf));
    else
        rc = walk_group(c, config_root_setting(&cf), NULL, NULL, err, n);
    config_destroy(&cf);
    return rc;
}

/* ---------------------------------------------------------------- --set key=value */

static void trim(char *s) {
    size_t l = strlen(s), b = 0;
    while (l > 0 && isspace((unsigned char)s[l - 1])) s[--l] = 0;
    while (isspace((unsigned char)s[b])) b++;
    memmove(s, s + b, l - b + 1);
}

/* strict integer: decimal or 0x hex, optional L / LL suffix; 1 on success */
static int parse_ll(const char *s, long long *out, int *overflow) {
    const char *d = s + (*s == '-' || *s == '+');
    int hex = d[0] == '0' && (d[1] == 'x' || d[1] == 'X');
    if (!(hex ? isxdigit((unsigned char)d[2]) : isdigit((unsigned char)*d))) return 0;
    char *end;
    errno = 0;
    *out = strtoll(s, &end, hex ? 16 : 10);
    *overflow = errno == ERANGE;
    if (*end == 'L') end += 1 + (end[1] == 'L');
    return *end == 0;
}

static int parse_double(const char *s, double *out) {
    if (!*s) return 0;
    char *end;
    errno = 0;
    *out = strtod(s, &end);
    return *end == 0;
}

int zt_config_set(zt_config *c, const char *assignment, char *err, size_t errlen) {
    const char *loc = "--set";
    const char *eq = strchr(assignment, '=');
    if (!eq) return zt_errf(err, errlen, "%s: '%s': expected key=value (e.g. train.lr=3e-4)", loc, assignment);
    char key[2 * ZT_NAME_MAX], val[ZT_PATH_MAX + 16];
    size_t kl = (size_t)(eq - assignment);
    if (kl >= sizeof key) kl = sizeof key - 1;
    memcpy(key, assignment, kl);
    key[kl] = 0;
    trim(key);
    if (strlen(eq + 1) >= sizeof val) {
        const key_def *k = find_key(key);
        return zt_errf(err, errlen, "%s: %s: value too long (at most %zu characters)", loc, key,
                    k && k->size < sizeof val ? k->size - 1 : sizeof val - 1);
    }
    snprintf(val, sizeof val, "%s", eq + 1);
    const key_def *k = find_key(key);
    if (!k) {
        if (is_group(key))
            return zt_errf(err, errlen, "%s: '%s' is a group, not a key: set one of its keys, e.g. %s.<key>", loc,
                        key, key);
        return unknown_key(loc, key, err, errlen);
    }
    if (k->type == K_STRING || k->type == K_ENUM) return store_string(c, k, val, loc, err, errlen);
    trim(val);
    if (k->type == K_INT && (!strcmp(val, "auto") || !strcmp(val, "\"auto\""))) return store_string(c, k, "auto", loc, err, errlen);
    if (k->type == K_BOOL) {
        if (!strcasecmp(val, "true") || !strcmp(val, "1")) return store_bool(c, k, 1, loc, err, errlen);
        if (!strcasecmp(val, "false") || !strcmp(val, "0")) return store_bool(c, k, 0, loc, err, errlen);
        return zt_errf(err, errlen, "%s: %s: expected true or false, got '%s'", loc, k->key, val);
    }
    long long iv;
    int overflow = 0;
    double dv;
    if (parse_ll(val, &iv, &overflow)) {
        if (overflow) return zt_errf(err, errlen, "%s: %s = %s: out of range", loc, k->key, val);
        return store_integer(c, k, iv, loc, err, errlen);
    }
    if (parse_double(val, &dv)) return store_double(c, k, dv, loc, err, errlen);
    return zt_errf(err, errlen, "%s: %s: expected %s, got '%s'", loc, k->key, expected_name(k->type), val);
}

/* ---------------------------------------------------------------- load and validate */

int zt_config_load(zt_config *c, const char *path, int n_sets, char *const *sets, char *err, size_t errlen) {
    zt_config_defaults(c);
    if (path && load_file(c, path, err, errlen)) return 1;
    for (int i = 0; i < n_sets; i++)
        if (zt_config_set(c, sets[i], err, errlen)) return 1;
    return zt_config_validate(c, 1, err, errlen);
}

int zt_config_load_string(zt_config *c, const char *text, char *err, size_t errlen) {
    zt_config_defaults(c);
    if (load_text(c, text ? text : "", err, errlen)) return 1;
    return zt_config_validate(c, 1, err, errlen);
}

/* value of a number key as double and as text */
static double num_value(const zt_config *c, const key_def *k, char *txt, size_t n) {
    switch (k->type) {
    case K_INT:
    case K_BOOL: snprintf(txt, n, "%d", *(const int *)cfg_cfield(c, k)); return *(const int *)cfg_cfield(c, k);
    case K_LONG: snprintf(txt, n, "%ld", *(const long *)cfg_cfield(c, k)); return (double)*(const long *)cfg_cfield(c, k);
    case K_FLOAT: cfg_fmt_double(*(const double *)cfg_cfield(c, k), txt, n); return *(const double *)cfg_cfield(c, k);
    default: txt[0] = 0; return 0;
    }
}

/* a single path component: no '/', not "." or "..", no control characters */
static int check_dir_name(const char *key, const char *v, char *err, size_t errlen) {
    if (strcmp(v, ".") == 0 || strcmp(v, "..") == 0 || strchr(v, '/'))
        return zt_errf(err, errlen, "%s = \"%s\": must be a plain directory name (no '/', not '.' or '..'): the run "
                       "directory is run.root/run.session/run.name and must stay inside run.root", key, v);
    for (const unsigned char *p = (const unsigned char *)v; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            return zt_errf(err, errlen, "%s: contains a control character (0x%02x): must be a plain directory name",
                           key, *p);
    return 0;
}

int zt_config_validate(const zt_config *c, int world_size, char *err, size_t errlen) {
    for (int i = 0; i < N_KEYS; i++) {
        const key_def *k = &cfg_schema[i];
        if (k->type == K_STRING || k->type == K_ENUM) {
            if (check_string(k, (const char *)cfg_cfield(c, k), NULL, err, errlen)) return 1;
        } else if (k->type != K_BOOL) {
            char txt[40];
            double v = num_value(c, k, txt, sizeof txt);
            if (k->type == K_FLOAT && !isfinite(v))
                return zt_errf(err, errlen, "%s = %s: expected a finite number", k->key, txt);
            if (check_range(k, v, txt, NULL, err, errlen)) return 1;
        }
    }
    if (world_size < 1) return zt_errf(err, errlen, "world size %d: must be >= 1", world_size);
    const typeof(c->model) *m = &c->model;
    const typeof(c->train) *t = &c->train;
    /* lora.enabled: model.* are replaced by lora.base's (zt_lora_base_shape checks seq_len against it) */
    zt_model_shape shape;
    if (!c->lora.enabled && zt_config_shape(c, &shape, err, errlen)) return 1;

    if (!c->lora.enabled && t->seq_len > m->block_size)
        return zt_errf(err, errlen, "train.seq_len = %d exceeds model.block_size = %d (the positions the model has)",
                    t->seq_len, m->block_size);
    if (m->padded_vocab && m->padded_vocab < m->vocab_size)
        return zt_errf(err, errlen, "model.padded_vocab = %d is smaller than model.vocab_size = %d (0 = auto)",
                    m->padded_vocab, m->vocab_size);
    long long per_step = (long long)(t->micro_batch > 0 ? t->micro_batch : 1) * world_size; /* 0 = auto */
    if (t->global_batch % per_step) {
        long long lo = t->global_batch / per_step * per_step, hi = lo + per_step;
        char alt[96];
        if (lo > 0) snprintf(alt, sizeof alt, "%lld or %lld", lo, hi);
        else snprintf(alt, sizeof alt, "%lld, %lld or %lld", hi, 2 * hi, 4 * hi);
        return zt_errf(err, errlen,
                    "train.global_batch = %d is not a multiple of train.micro_batch * world size = %d * %d = %lld "
                    "(valid global batches: %s; or change train.micro_batch)",
                    t->global_batch, t->micro_batch, world_size, per_step, alt);
    }
    if (t->min_lr > t->lr) {
        char a[40], b[40];
        cfg_fmt_double(t->min_lr, a, sizeof a);
        cfg_fmt_double(t->lr, b, sizeof b);
        return zt_errf(err, errlen, "train.min_lr = %s is above train.lr = %s (min_lr is an absolute rate)", a, b);
    }
    if (t->warmup_steps > t->steps)
        return zt_errf(err, errlen, "train.warmup_steps = %ld exceeds train.steps = %ld", t->warmup_steps, t->steps);
    /* the obsolete eval.batches counts micro-batches: its sequences must stay in eval.sequences' range */
    const key_def *es = find_key("eval.sequences");
    if (c->eval.batches > 0 && (double)c->eval.batches * t->micro_batch > es->max)
        return zt_errf(err, errlen,
                       "eval.batches = %d x train.micro_batch = %d = %.0f validation sequences: must be <= %.0f "
                       "(eval.batches is obsolete: set eval.sequences and eval.batches = 0)",
                       c->eval.batches, t->micro_batch, (double)c->eval.batches * t->micro_batch, es->max);
    if (c->lora.enabled) {
        if (!c->lora.base[0])
            return zt_errf(err, errlen, "lora.enabled = true needs lora.base: the checkpoint with the frozen base weights "
                           "(e.g. made by `ztrain import`)");
        if (!zt_config_lora_targets(c->lora.targets, err, errlen)) return 1;
    }
    if (zt_config_check_zero(c, err, errlen)) return 1;
    if (!c->lora.enabled && zt_config_check_mlm(c, &shape, err, errlen)) return 1;
    /* run.session and run.name are one directory level each under run.root */
    if (check_dir_name("run.session", c->run.session, err, errlen) || check_dir_name("run.name", c->run.name, err, errlen))
        return 1;
    return 0;
}
