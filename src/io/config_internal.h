/* config_internal.h — the schema types and helpers shared by config.c (parsing, validation) and
 * config_print.c (printing, help, diff). Not for use outside these two files. */
#ifndef ZT_CONFIG_INTERNAL_H
#define ZT_CONFIG_INTERNAL_H

#include <stddef.h>

#include "io/config.h"

typedef enum { K_INT, K_LONG, K_FLOAT, K_STRING, K_ENUM, K_BOOL } key_type;

enum { MIN_OPEN = 1, MAX_OPEN = 2 }; /* exclusive bounds: (0, 1] etc. */

typedef struct key_def {
    const char *key;             /* "train.lr"; at most one '.' (one level of groups) */
    key_type type;
    size_t off, size;            /* field in zt_config */
    double def;                  /* default of number / bool keys */
    const char *sdef;            /* default of string / enum keys */
    double min, max;             /* numbers: range; strings: min length (max = buffer) */
    int flags;                   /* MIN_OPEN | MAX_OPEN */
    const char *const *allowed;  /* enum values, NULL-terminated */
    const char *help;
} key_def;

#define BIG 9.3e18 /* "no upper bound" for long keys: above LONG_MAX */

extern const key_def cfg_schema[];
extern const int cfg_n_keys;
#define N_KEYS cfg_n_keys

const void *cfg_cfield(const zt_config *c, const key_def *k);
void cfg_fmt_double(double v, char *out, size_t n);
void cfg_fmt_float_literal(double v, char *out, size_t n);
const char *cfg_type_name(key_type t);
void cfg_allowed_list(const key_def *k, const char *sep, char *out, size_t n);
size_t cfg_group_len(const char *key);
const char *cfg_leaf(const char *key);

#endif
