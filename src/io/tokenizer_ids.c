/* tokenizer_ids.c — zt_ids, the growable id array every encoder appends to (tokenizer.h); in a file of its own so
 * that the models' files (tokenizer.c, tokenizer_wordpiece.c) depend on it and not on each other. */
#include "io/tokenizer.h"

#include <stdlib.h>

#include "util/util.h"

void zt_ids_push(zt_ids *a, uint32_t id) {
    if (a->n == a->cap) {
        a->cap = a->cap ? 2 * a->cap : 1024;
        a->v = zt_realloc(a->v, a->cap * sizeof *a->v);
    }
    a->v[a->n++] = id;
}

void zt_ids_free(zt_ids *a) {
    free(a->v);
    a->v = NULL;
    a->n = a->cap = 0;
}
