/* tokenizer_hf_read.c — the tables of a tokenizer.json being read (tokenizer_hf_internal.h): the model's vocabulary,
 * its merges and the added tokens into the hf reader, and the one-line error with the value's line. Shared by
 * tokenizer_hf.c (the tables, then the build) and tokenizer_hf_config.c (the sections that name tokens). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "io/tokenizer_hf_internal.h"
#include "util/json.h"
#include "util/util.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- HF model */


/* the first error, as "path:line: what" with the line of value v */
void zt_hf_fail(hf *h, const zt_json *v, const char *fmt, ...) {
    if (h->bad) return;
    h->bad = 1;
    char m[240];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    snprintf(h->msg, sizeof h->msg, "%s:%d: %s", h->path, zt_json_line(h->text, h->base + v->off), m);
}

void zt_hf_vocab_add(hf *h, const char *s, size_t n, long long id) {
    if (h->nv == h->capv) {
        h->capv = h->capv ? 2 * h->capv : 1024;
        h->vtok = zt_realloc(h->vtok, h->capv * sizeof *h->vtok);
        h->vid = zt_realloc(h->vid, h->capv * sizeof *h->vid);
    }
    h->vtok[h->nv] = (span){s, n};
    h->vid[h->nv++] = (uint32_t)id;
}

void zt_hf_merge_add(hf *h, const char *a, size_t na, const char *b, size_t nb) {
    if (h->nm == h->capm) {
        h->capm = h->capm ? 2 * h->capm : 1024;
        h->mg = zt_realloc(h->mg, h->capm * sizeof *h->mg);
    }
    h->mg[h->nm][0] = (span){a, na};
    h->mg[h->nm][1] = (span){b, nb};
    h->nm++;
}


/* a token id: an integer in 0..ZT_TOK_MAX_VOCAB-1 */
int zt_hf_id(hf *h, const zt_json *v, long long *id) {
    if (v->type != ZT_JSON_NUM || !v->is_int) {
        zt_hf_fail(h, v, "expected an integer token id");
        return 0;
    }
    if (v->inum < 0 || v->inum >= ZT_TOK_MAX_VOCAB) {
        zt_hf_fail(h, v, "token id %lld out of range (expected 0..%d)", v->inum, ZT_TOK_MAX_VOCAB - 1);
        return 0;
    }
    *id = v->inum;
    return 1;
}

void zt_hf_vocab(hf *h, const zt_json *v) {
    if (v->type != ZT_JSON_OBJ) {
        zt_hf_fail(h, v, "model.vocab: expected an object of token -> id");
        return;
    }
    long long id;
    for (int i = 0; i < v->n && zt_hf_id(h, &v->items[i], &id); i++) zt_hf_vocab_add(h, v->keys[i], v->key_lens[i], id);
}

void zt_hf_merges(hf *h, const zt_json *v) {
    if (v->type != ZT_JSON_ARR) {
        zt_hf_fail(h, v, "model.merges: expected an array");
        return;
    }
    for (int i = 0; i < v->n && !h->bad; i++) {
        const zt_json *m = &v->items[i];
        if (m->type == ZT_JSON_ARR) {
            if (m->n < 2 || m->items[0].type != ZT_JSON_STR || m->items[1].type != ZT_JSON_STR)
                zt_hf_fail(h, m, "merge %zu: expected a pair [\"a\", \"b\"]", h->nm);
            else if (m->n > 2)
                zt_hf_fail(h, m, "merge %zu: expected a pair [\"a\", \"b\"], got more", h->nm);
            else
                zt_hf_merge_add(h, m->items[0].str, m->items[0].len, m->items[1].str, m->items[1].len);
        } else if (m->type == ZT_JSON_STR) {
            const char *sp = memchr(m->str, ' ', m->len);
            if (!sp || memchr(sp + 1, ' ', m->len - (size_t)(sp + 1 - m->str)))
                zt_hf_fail(h, m, "merge %zu: expected \"a b\" (two tokens and one space)", h->nm);
            else
                zt_hf_merge_add(h, m->str, (size_t)(sp - m->str), sp + 1, m->len - (size_t)(sp + 1 - m->str));
        } else {
            zt_hf_fail(h, m, "merge %zu: expected \"a b\" or [\"a\", \"b\"]", h->nm);
        }
    }
}

void zt_hf_added(hf *h, const zt_json *v) {
    for (int i = 0; i < v->n && !h->bad; i++) {
        const zt_json *e = &v->items[i];
        int have_id = 0, have_content = 0;
        long long id = -1;
        span content = {0};
        for (int k = 0; e->type == ZT_JSON_OBJ && k < e->n && !h->bad; k++) {
            const zt_json *m = &e->items[k];
            if (strcmp(e->keys[k], "id") == 0) {
                have_id = zt_hf_id(h, m, &id);
            } else if (strcmp(e->keys[k], "content") == 0 && m->type == ZT_JSON_STR) {
                have_content = 1;
                content = (span){m->str, m->len};
            }
        }
        if (h->bad) break;
        if (!have_id || !have_content) {
            zt_hf_fail(h, e, "added_tokens entry without \"id\" and \"content\"");
            break;
        }
        if (h->na == h->capa) {
            h->capa = h->capa ? 2 * h->capa : 16;
            h->atok = zt_realloc(h->atok, h->capa * sizeof *h->atok);
            h->aid = zt_realloc(h->aid, h->capa * sizeof *h->aid);
        }
        h->atok[h->na] = content;
        h->aid[h->na++] = (uint32_t)id;
    }
}

/* ---------------------------------------------------------------- GPT-2 byte alphabet */

/* bytes_to_unicode: printable Latin-1 bytes map to themselves, the other 68 to U+0100.. in order */
