/* tokenizer_hf.c — tokenizer files from elsewhere: Hugging Face tokenizers (tokenizer.json, or a
 * GPT-2 style vocab.json + merges.txt), and zt_tokenizer_load, which tells a ztrain .zttok file (read
 * by tokenizer.c) from these. Builds on tokenizer.c (zt_tokenizer_create_cfg), never the other way
 * round.
 *
 * The document is parsed by util/json. A tokenizer.json's normalizer, pre_tokenizer, model, decoder
 * and post_processor are read as data into a zt_tok_config (tokenizer.h); exactly these are accepted:
 *   model          BPE (dropout null or 0, no continuing_subword_prefix / end_of_word_suffix), either
 *                  byte-level (byte_fallback false; ignore_merges as given) or, with byte_fallback
 *                  true, SentencePiece-style (the vocab holds <0x00>..<0xFF>)
 *   normalizer     null | NFC | Sequence[Prepend("\u2581")?, Replace(" " -> "\u2581")] (Llama 2)
 *   pre_tokenizer  ByteLevel (add_prefix_space false; GPT-2's regex) | Sequence[Split(the Llama 3 or
 *                  Qwen2 regex, Isolated, invert false), ByteLevel(add_prefix_space false, use_regex
 *                  false)] | Metaspace("\u2581", prepend_scheme first/always/never, split false) | null
 *   decoder        ByteLevel or null (byte-level) | Sequence[Replace("\u2581" -> " "), ByteFallback,
 *                  Fuse, Strip(" ", 1, 0)?] (byte_fallback)
 *   post_processor null | ByteLevel | TemplateProcessing (its "single" template: special tokens
 *                  around $A) | a Sequence of those
 * Anything else is an error naming the field (exit 2 in the commands). "truncation" and "padding"
 * (batch settings) are ignored, as are added tokens' matching flags (ztrain never matches added
 * tokens in text, tokenizer.h). Byte-level token strings are in GPT-2's bytes_to_unicode alphabet
 * and are mapped back to bytes, so ids equal HF's; SentencePiece-style ones are kept as UTF-8.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "io/tokenizer.h"
#include "util/hashmap.h"
#include "util/json.h"
#include "util/util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* the Split regexes of Llama 3 and Qwen2 (as the JSON holds them, unescaped) */
#define SPLIT_RE(DIGITS)                                                                                       \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|" DIGITS "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|" \
    "\\s+(?!\\S)|\\s+"
static const char *const LLAMA3_SPLIT = SPLIT_RE("\\p{N}{1,3}");
static const char *const QWEN2_SPLIT = SPLIT_RE("\\p{N}");
#define MARK "\xE2\x96\x81" /* U+2581 */

/* ---------------------------------------------------------------- strings */

/* bytes somewhere else (in the JSON tree or the merges.txt text) */
typedef struct span { const char *s; size_t n; } span;

typedef struct sbuf { char *s; size_t n, cap; } sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        b->cap = 2 * (b->n + n + 1) + 64;
        b->s = zt_realloc(b->s, b->cap);
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}

/* ---------------------------------------------------------------- HF model */

typedef struct hf {
    const char *path, *text;  /* the file, for error lines */
    size_t base;              /* bytes before the JSON (a byte order mark) */
    span *vtok; uint32_t *vid; size_t nv, capv;     /* model vocab */
    span *atok; uint32_t *aid; size_t na, capa;     /* added tokens */
    span (*mg)[2]; size_t nm, capm;                 /* merges */
    char *merges_txt;         /* merges.txt, which the merge spans point into */
    int has_model, numbers_only, members, bad;
    const zt_json *model, *normalizer, *pretok, *decoder, *post; /* the tokenizer.json's sections */
    char msg[300];
} hf;

/* the first error, as "path:line: what" with the line of value v */
static void hf_fail(hf *h, const zt_json *v, const char *fmt, ...) ZT_PRINTF(3, 4);
static void hf_fail(hf *h, const zt_json *v, const char *fmt, ...) {
    if (h->bad) return;
    h->bad = 1;
    char m[240];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    snprintf(h->msg, sizeof h->msg, "%s:%d: %s", h->path, zt_json_line(h->text, h->base + v->off), m);
}

static void hf_vocab_add(hf *h, const char *s, size_t n, long long id) {
    if (h->nv == h->capv) {
        h->capv = h->capv ? 2 * h->capv : 1024;
        h->vtok = zt_realloc(h->vtok, h->capv * sizeof *h->vtok);
        h->vid = zt_realloc(h->vid, h->capv * sizeof *h->vid);
    }
    h->vtok[h->nv] = (span){s, n};
    h->vid[h->nv++] = (uint32_t)id;
}

static void hf_merge_add(hf *h, const char *a, size_t na, const char *b, size_t nb) {
    if (h->nm == h->capm) {
        h->capm = h->capm ? 2 * h->capm : 1024;
        h->mg = zt_realloc(h->mg, h->capm * sizeof *h->mg);
    }
    h->mg[h->nm][0] = (span){a, na};
    h->mg[h->nm][1] = (span){b, nb};
    h->nm++;
}


/* a token id: an integer in 0..ZT_TOK_MAX_VOCAB-1 */
static int hf_id(hf *h, const zt_json *v, long long *id) {
    if (v->type != ZT_JSON_NUM || !v->is_int) {
        hf_fail(h, v, "expected an integer token id");
        return 0;
    }
    if (v->inum < 0 || v->inum >= ZT_TOK_MAX_VOCAB) {
        hf_fail(h, v, "token id %lld out of range (expected 0..%d)", v->inum, ZT_TOK_MAX_VOCAB - 1);
        return 0;
    }
    *id = v->inum;
    return 1;
}

static void hf_vocab(hf *h, const zt_json *v) {
    if (v->type != ZT_JSON_OBJ) {
        hf_fail(h, v, "model.vocab: expected an object of token -> id");
        return;
    }
    long long id;
    for (int i = 0; i < v->n && hf_id(h, &v->items[i], &id); i++) hf_vocab_add(h, v->keys[i], v->key_lens[i], id);
}

static void hf_merges(hf *h, const zt_json *v) {
    if (v->type != ZT_JSON_ARR) {
        hf_fail(h, v, "model.merges: expected an array");
        return;
    }
    for (int i = 0; i < v->n && !h->bad; i++) {
        const zt_json *m = &v->items[i];
        if (m->type == ZT_JSON_ARR) {
            if (m->n < 2 || m->items[0].type != ZT_JSON_STR || m->items[1].type != ZT_JSON_STR)
                hf_fail(h, m, "merge %zu: expected a pair [\"a\", \"b\"]", h->nm);
            else if (m->n > 2)
                hf_fail(h, m, "merge %zu: expected a pair [\"a\", \"b\"], got more", h->nm);
            else
                hf_merge_add(h, m->items[0].str, m->items[0].len, m->items[1].str, m->items[1].len);
        } else if (m->type == ZT_JSON_STR) {
            const char *sp = memchr(m->str, ' ', m->len);
            if (!sp || memchr(sp + 1, ' ', m->len - (size_t)(sp + 1 - m->str)))
                hf_fail(h, m, "merge %zu: expected \"a b\" (two tokens and one space)", h->nm);
            else
                hf_merge_add(h, m->str, (size_t)(sp - m->str), sp + 1, m->len - (size_t)(sp + 1 - m->str));
        } else {
            hf_fail(h, m, "merge %zu: expected \"a b\" or [\"a\", \"b\"]", h->nm);
        }
    }
}

static void hf_added(hf *h, const zt_json *v) {
    for (int i = 0; i < v->n && !h->bad; i++) {
        const zt_json *e = &v->items[i];
        int have_id = 0, have_content = 0;
        long long id = -1;
        span content = {0};
        for (int k = 0; e->type == ZT_JSON_OBJ && k < e->n && !h->bad; k++) {
            const zt_json *m = &e->items[k];
            if (strcmp(e->keys[k], "id") == 0) {
                have_id = hf_id(h, m, &id);
            } else if (strcmp(e->keys[k], "content") == 0 && m->type == ZT_JSON_STR) {
                have_content = 1;
                content = (span){m->str, m->len};
            }
        }
        if (h->bad) break;
        if (!have_id || !have_content) {
            hf_fail(h, e, "added_tokens entry without \"id\" and \"content\"");
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

/* ---- reading the sections (each check fails with the field's name and line) */

static int str_is(const zt_json *v, const char *s) {
    return v && v->type == ZT_JSON_STR && v->len == strlen(s) && memcmp(v->str, s, v->len) == 0;
}

/* the "type" of a section object ("" when missing), failing when v is not an object */
static const char *type_of(hf *h, const zt_json *v, const char *field) {
    if (v->type != ZT_JSON_OBJ) {
        hf_fail(h, v, "%s: expected an object", field);
        return "";
    }
    const zt_json *t = zt_json_get(v, "type");
    if (!t || t->type != ZT_JSON_STR) {
        hf_fail(h, v, "%s: expected a \"type\"", field);
        return "";
    }
    return t->str;
}

/* every member of object v is one of the NULL-terminated names */
static void only_keys(hf *h, const zt_json *v, const char *field, const char *const *names) {
    for (int i = 0; i < v->n && !h->bad; i++) {
        int ok = 0;
        for (const char *const *k = names; *k && !ok; k++) ok = strcmp(v->keys[i], *k) == 0;
        if (!ok)
            hf_fail(h, &v->items[i], "%s.%s: unknown field (not supported: it may change the encoding)", field,
                    v->keys[i]);
    }
}

/* member key of v must be a boolean equal to want (-1: either); missing means dflt */
static void want_bool(hf *h, const zt_json *v, const char *field, const char *key, int want, int dflt) {
    const zt_json *m = zt_json_get(v, key);
    if (!m) {
        if (want >= 0 && dflt != want)
            hf_fail(h, v, "%s.%s: missing, which means %s (expected %s)", field, key, dflt ? "true" : "false",
                    want ? "true" : "false");
        return;
    }
    if (m->type != ZT_JSON_BOOL) hf_fail(h, m, "%s.%s: expected true or false", field, key);
    else if (want >= 0 && (m->num != 0) != want)
        hf_fail(h, m, "%s.%s: %s is not supported (expected %s)", field, key, m->num != 0 ? "true" : "false",
                want ? "true" : "false");
}

/* member key of v is the string want */
static void want_str(hf *h, const zt_json *v, const char *field, const char *key, const char *want) {
    const zt_json *m = zt_json_get(v, key);
    if (!m) hf_fail(h, v, "%s.%s: missing (expected \"%s\")", field, key, want);
    else if (!str_is(m, want))
        hf_fail(h, m, "%s.%s: %s%.60s%s is not supported (expected \"%s\")", field, key,
                m->type == ZT_JSON_STR ? "\"" : "a value other than a string", m->type == ZT_JSON_STR ? m->str : "",
                m->type == ZT_JSON_STR ? "\"" : "", want);
}

/* a Replace normalizer or decoder: pattern {"String": from} -> to */
static void want_replace(hf *h, const zt_json *v, const char *field, const char *from, const char *to) {
    static const char *const keys[] = {"type", "pattern", "content", NULL};
    only_keys(h, v, field, keys);
    const zt_json *p = zt_json_get(v, "pattern");
    char f[96];
    snprintf(f, sizeof f, "%s.pattern", field);
    if (!p || p->type != ZT_JSON_OBJ || p->n != 1 || strcmp(p->keys[0], "String") != 0)
        hf_fail(h, p ? p : v, "%s: expected {\"String\": \"%s\"} (a Regex pattern is not supported)", f, from);
    else want_str(h, p, f, "String", from);
    if (!h->bad) want_str(h, v, field, "content", to);
}

enum { N_NONE, N_NFC, N_SPACES };
/* normalizer: null, NFC, or Sequence[Prepend("▁")?, Replace(" " -> "▁")] (*prepend says which) */
static int hf_normalizer(hf *h, const zt_json *v, int *prepend) {
    static const char *const t_only[] = {"type", NULL}, *const seq_keys[] = {"type", "normalizers", NULL},
                             *const prep_keys[] = {"type", "prepend", NULL};
    *prepend = 0;
    if (!v || v->type == ZT_JSON_NULL) return N_NONE;
    const char *type = type_of(h, v, "normalizer");
    if (h->bad) return N_NONE;
    if (strcmp(type, "NFC") == 0) {
        only_keys(h, v, "normalizer", t_only);
        return N_NFC;
    }
    const zt_json *seq = zt_json_get(v, "normalizers");
    if (strcmp(type, "Sequence") == 0 && seq && seq->type == ZT_JSON_ARR) {
        only_keys(h, v, "normalizer", seq_keys);
        char f[64];
        int k = 0;
        if (seq->n == 1 && seq->items[0].type == ZT_JSON_OBJ && str_is(zt_json_get(&seq->items[0], "type"), "NFC")) {
            only_keys(h, &seq->items[0], "normalizer.normalizers[0]", t_only);
            return N_NFC;
        }
        if (seq->n == 2) {
            snprintf(f, sizeof f, "normalizer.normalizers[0]");
            if (strcmp(type_of(h, &seq->items[0], f), "Prepend") != 0) {
                if (!h->bad)
                    hf_fail(h, &seq->items[0], "%s: '%s' is not supported (expected Prepend(\"" MARK "\") as Llama 2)",
                            f, zt_json_get(&seq->items[0], "type")->str);
                return N_NONE;
            }
            only_keys(h, &seq->items[0], f, prep_keys);
            if (!h->bad) want_str(h, &seq->items[0], f, "prepend", MARK);
            *prepend = 1;
            k = 1;
        }
        if (seq->n == k + 1 && !h->bad) {
            snprintf(f, sizeof f, "normalizer.normalizers[%d]", k);
            const char *t = type_of(h, &seq->items[k], f);
            if (h->bad) return N_NONE;
            if (strcmp(t, "Replace") != 0) {
                hf_fail(h, &seq->items[k], "%s: '%s' is not supported (expected Replace(\" \", \"" MARK "\") as Llama 2)",
                        f, t);
                return N_NONE;
            }
            want_replace(h, &seq->items[k], f, " ", MARK);
            return N_SPACES;
        }
        if (!h->bad)
            hf_fail(h, v, "normalizer: a Sequence of %d normalizers is not supported (expected [Prepend(\"" MARK "\"), "
                    "Replace(\" \", \"" MARK "\")] as Llama 2, or [NFC])", seq->n);
        return N_NONE;
    }
    hf_fail(h, v, "normalizer: '%s' is not supported (expected null, NFC as Qwen2, or Sequence[Prepend(\"" MARK "\"), "
            "Replace(\" \", \"" MARK "\")] as Llama 2)", type);
    return N_NONE;
}

/* a ByteLevel pre-tokenizer: add_prefix_space false, use_regex as wanted */
static void want_byte_level(hf *h, const zt_json *v, const char *field, int use_regex) {
    static const char *const keys[] = {"type", "add_prefix_space", "trim_offsets", "use_regex", NULL};
    only_keys(h, v, field, keys);
    if (!h->bad) want_bool(h, v, field, "add_prefix_space", 0, 1);
    if (!h->bad) want_bool(h, v, field, "trim_offsets", -1, 1);
    if (!h->bad) want_bool(h, v, field, "use_regex", use_regex, 1);
}

enum { P_NONE, P_GPT2, P_LLAMA3, P_QWEN2, P_METASPACE };
/* pre_tokenizer (see the top); a Metaspace's prefix in *prefix */
static int hf_pretok(hf *h, const zt_json *v, zt_tok_prefix *prefix) {
    *prefix = ZT_TOK_PREFIX_NONE;
    if (!v || v->type == ZT_JSON_NULL) return P_NONE;
    const char *type = type_of(h, v, "pre_tokenizer");
    if (h->bad) return P_NONE;
    if (strcmp(type, "ByteLevel") == 0) {
        want_byte_level(h, v, "pre_tokenizer", 1);
        return P_GPT2;
    }
    if (strcmp(type, "Metaspace") == 0) {
        static const char *const keys[] = {"type", "replacement", "prepend_scheme", "split", "add_prefix_space",
                                           "str_rep", NULL};
        only_keys(h, v, "pre_tokenizer", keys);
        if (!h->bad) want_str(h, v, "pre_tokenizer", "replacement", MARK);
        if (!h->bad) want_bool(h, v, "pre_tokenizer", "split", 0, 1);
        const zt_json *ps = zt_json_get(v, "prepend_scheme"), *aps = zt_json_get(v, "add_prefix_space");
        if (h->bad) return P_NONE;
        if (ps) {
            if (str_is(ps, "first") || str_is(ps, "always")) *prefix = ZT_TOK_PREFIX_FIRST;
            else if (!str_is(ps, "never"))
                hf_fail(h, ps, "pre_tokenizer.prepend_scheme: expected \"first\", \"always\" or \"never\"");
        } else if (aps && aps->type == ZT_JSON_BOOL) {
            *prefix = aps->num != 0 ? ZT_TOK_PREFIX_FIRST : ZT_TOK_PREFIX_NONE;
        } else {
            hf_fail(h, v, "pre_tokenizer.prepend_scheme: missing (expected \"first\", \"always\" or \"never\")");
        }
        return P_METASPACE;
    }
    const zt_json *seq = zt_json_get(v, "pretokenizers");
    if (strcmp(type, "Sequence") == 0 && seq && seq->type == ZT_JSON_ARR) {
        static const char *const keys[] = {"type", "pretokenizers", NULL};
        only_keys(h, v, "pre_tokenizer", keys);
        if (h->bad) return P_NONE;
        if (seq->n == 1 && strcmp(type_of(h, &seq->items[0], "pre_tokenizer.pretokenizers[0]"), "ByteLevel") == 0) {
            want_byte_level(h, &seq->items[0], "pre_tokenizer.pretokenizers[0]", 1);
            return P_GPT2;
        }
        if (h->bad) return P_NONE;
        if (seq->n == 2 && strcmp(type_of(h, &seq->items[0], "pre_tokenizer.pretokenizers[0]"), "Split") == 0 &&
            strcmp(type_of(h, &seq->items[1], "pre_tokenizer.pretokenizers[1]"), "ByteLevel") == 0) {
            static const char *const split_keys[] = {"type", "pattern", "behavior", "invert", NULL};
            const zt_json *sp = &seq->items[0], *pat = zt_json_get(sp, "pattern");
            const char *f = "pre_tokenizer.pretokenizers[0]";
            only_keys(h, sp, f, split_keys);
            if (!h->bad) want_str(h, sp, f, "behavior", "Isolated");
            if (!h->bad) want_bool(h, sp, f, "invert", 0, 0);
            if (h->bad) return P_NONE;
            const zt_json *re = pat && pat->type == ZT_JSON_OBJ && pat->n == 1 ? zt_json_get(pat, "Regex") : NULL;
            int kind = !re ? P_NONE : str_is(re, LLAMA3_SPLIT) ? P_LLAMA3 : str_is(re, QWEN2_SPLIT) ? P_QWEN2 : P_NONE;
            if (kind == P_NONE) {
                hf_fail(h, re ? re : pat ? pat : sp, "%s.pattern%s: %s%.60s%s is not supported (expected the Llama 3 "
                        "or the Qwen2 regex)", f, re ? ".Regex" : "", re && re->type == ZT_JSON_STR ? "the regex '" : "this pattern",
                        re && re->type == ZT_JSON_STR ? re->str : "", re && re->type == ZT_JSON_STR ? "'" : "");
                return P_NONE;
            }
            want_byte_level(h, &seq->items[1], "pre_tokenizer.pretokenizers[1]", 0);
            return kind;
        }
        if (!h->bad)
            hf_fail(h, v, "pre_tokenizer: this Sequence is not supported (expected [ByteLevel] or [Split(regex), "
                    "ByteLevel(use_regex=false)])");
        return P_NONE;
    }
    hf_fail(h, v, "pre_tokenizer: '%s' is not supported (expected ByteLevel, Sequence[Split, ByteLevel], Metaspace "
            "or null)", type);
    return P_NONE;
}

enum { D_NONE, D_BYTE_LEVEL, D_SPM };
/* decoder: null, ByteLevel, or Sequence[Replace("▁" -> " "), ByteFallback, Fuse, Strip(" ", 1, 0)?] */
static int hf_decoder(hf *h, const zt_json *v, int *strip) {
    static const char *const t_only[] = {"type", NULL}, *const bl_keys[] = {"type", "add_prefix_space",
                                        "trim_offsets", "use_regex", NULL},
                             *const strip_keys[] = {"type", "content", "start", "stop", NULL};
    *strip = 0;
    if (!v || v->type == ZT_JSON_NULL) return D_NONE;
    const char *type = type_of(h, v, "decoder");
    if (h->bad) return D_NONE;
    if (strcmp(type, "ByteLevel") == 0) {
        only_keys(h, v, "decoder", bl_keys);
        return D_BYTE_LEVEL;
    }
    const zt_json *seq = zt_json_get(v, "decoders");
    if (strcmp(type, "Sequence") == 0 && seq && seq->type == ZT_JSON_ARR && (seq->n == 3 || seq->n == 4)) {
        static const char *const want[] = {"Replace", "ByteFallback", "Fuse", "Strip"};
        for (int i = 0; i < seq->n && !h->bad; i++) {
            char f[64];
            snprintf(f, sizeof f, "decoder.decoders[%d]", i);
            const char *t = type_of(h, &seq->items[i], f);
            if (h->bad) break;
            if (strcmp(t, want[i]) != 0) {
                hf_fail(h, &seq->items[i], "%s: '%s' is not supported (expected %s, as Llama 2's decoder)", f, t, want[i]);
                break;
            }
            if (i == 0) want_replace(h, &seq->items[i], f, MARK, " ");
            else if (i < 3) only_keys(h, &seq->items[i], f, t_only);
            else {
                const zt_json *s = &seq->items[i], *st = zt_json_get(s, "start"), *sp = zt_json_get(s, "stop");
                only_keys(h, s, f, strip_keys);
                if (!h->bad) want_str(h, s, f, "content", " ");
                if (!h->bad && (!st || st->type != ZT_JSON_NUM || st->num != 1 || !sp || sp->type != ZT_JSON_NUM ||
                                sp->num != 0))
                    hf_fail(h, s, "%s: expected start 1 and stop 0 (one leading space dropped)", f);
                *strip = 1;
            }
        }
        return D_SPM;
    }
    hf_fail(h, v, "decoder: '%s' is not supported (expected ByteLevel, or Sequence[Replace, ByteFallback, Fuse, Strip] "
            "as Llama 2)", type);
    return D_NONE;
}

/* TemplateProcessing: the special tokens its "single" template puts before and after $A */
static void hf_template(hf *h, const zt_json *v, const char *field, zt_tok_config *c) {
    static const char *const keys[] = {"type", "single", "pair", "special_tokens", NULL};
    only_keys(h, v, field, keys);
    const zt_json *single = zt_json_get(v, "single"), *sp = zt_json_get(v, "special_tokens");
    if (h->bad) return;
    if (!single || single->type != ZT_JSON_ARR || !sp || sp->type != ZT_JSON_OBJ) {
        hf_fail(h, v, "%s: expected \"single\" (an array) and \"special_tokens\" (an object)", field);
        return;
    }
    int seen_a = 0;
    for (int i = 0; i < single->n && !h->bad; i++) {
        const zt_json *e = &single->items[i];
        const zt_json *st = e->type == ZT_JSON_OBJ && e->n == 1 ? zt_json_get(e, "SpecialToken") : NULL;
        const zt_json *sq = e->type == ZT_JSON_OBJ && e->n == 1 ? zt_json_get(e, "Sequence") : NULL;
        if (sq && sq->type == ZT_JSON_OBJ && str_is(zt_json_get(sq, "id"), "A") && !seen_a) {
            seen_a = 1;
            continue;
        }
        const zt_json *name = st && st->type == ZT_JSON_OBJ ? zt_json_get(st, "id") : NULL;
        const zt_json *tok = name && name->type == ZT_JSON_STR ? zt_json_get(sp, name->str) : NULL;
        const zt_json *ids = tok && tok->type == ZT_JSON_OBJ ? zt_json_get(tok, "ids") : NULL;
        if (!ids || ids->type != ZT_JSON_ARR) {
            hf_fail(h, e, "%s.single[%d]: expected {\"SpecialToken\": {\"id\": NAME}} with NAME in special_tokens, "
                    "or one {\"Sequence\": {\"id\": \"A\"}}", field, i);
            return;
        }
        for (int k = 0; k < ids->n && !h->bad; k++) {
            long long id;
            if (!hf_id(h, &ids->items[k], &id)) return;
            uint32_t *n = seen_a ? &c->n_end : &c->n_begin;
            if (*n == ZT_TOK_MAX_TEMPLATE) {
                hf_fail(h, e, "%s.single: more than %d special tokens on one side of $A", field, ZT_TOK_MAX_TEMPLATE);
                return;
            }
            (seen_a ? c->end : c->begin)[(*n)++] = (uint32_t)id;
        }
    }
    if (!seen_a && !h->bad) hf_fail(h, single, "%s.single: no {\"Sequence\": {\"id\": \"A\"}}", field);
}

/* post_processor: null, ByteLevel, TemplateProcessing, or a Sequence of those */
static void hf_post(hf *h, const zt_json *v, const char *field, zt_tok_config *c, int depth) {
    static const char *const bl_keys[] = {"type", "add_prefix_space", "trim_offsets", "use_regex", NULL},
                             *const seq_keys[] = {"type", "processors", NULL};
    if (!v || v->type == ZT_JSON_NULL) return;
    const char *type = type_of(h, v, field);
    if (h->bad) return;
    const zt_json *seq = zt_json_get(v, "processors");
    if (strcmp(type, "ByteLevel") == 0) {
        only_keys(h, v, field, bl_keys);
    } else if (strcmp(type, "TemplateProcessing") == 0) {
        if (c->n_begin || c->n_end) hf_fail(h, v, "%s: a second template is not supported", field);
        else hf_template(h, v, field, c);
    } else if (strcmp(type, "Sequence") == 0 && seq && seq->type == ZT_JSON_ARR && depth == 0) {
        only_keys(h, v, field, seq_keys);
        for (int i = 0; i < seq->n && !h->bad; i++) {
            char f[64];
            snprintf(f, sizeof f, "%s.processors[%d]", field, i);
            hf_post(h, &seq->items[i], f, c, 1);
        }
    } else {
        hf_fail(h, v, "%s: '%s' is not supported (expected ByteLevel, TemplateProcessing or a Sequence of them)",
                field, type);
    }
}

/* model: BPE with the fields ztrain implements; *byte_fallback and *ignore_merges as given */
static void hf_model_fields(hf *h, const zt_json *v, int *byte_fallback, int *ignore_merges) {
    static const char *const keys[] = {"type", "dropout", "unk_token", "continuing_subword_prefix",
                                       "end_of_word_suffix", "fuse_unk", "byte_fallback", "ignore_merges",
                                       "vocab", "merges", NULL};
    only_keys(h, v, "model", keys);
    for (int i = 0; i < v->n && !h->bad; i++) {
        const char *k = v->keys[i];
        const zt_json *m = &v->items[i];
        if (strcmp(k, "dropout") == 0) {
            if (m->type != ZT_JSON_NULL && !(m->type == ZT_JSON_NUM && m->num == 0))
                hf_fail(h, m, "model.dropout: %g is not supported (expected null: ztrain encodes deterministically)",
                        m->type == ZT_JSON_NUM ? m->num : 1.0);
        } else if (strcmp(k, "continuing_subword_prefix") == 0 || strcmp(k, "end_of_word_suffix") == 0) {
            if (m->type != ZT_JSON_NULL && !(m->type == ZT_JSON_STR && m->len == 0)) /* "" (GPT-2's file) and null */
                hf_fail(h, m, "model.%s: %s%.40s%s is not supported (expected null or \"\")", k,
                        m->type == ZT_JSON_STR ? "\"" : "this value", m->type == ZT_JSON_STR ? m->str : "",
                        m->type == ZT_JSON_STR ? "\"" : "");
        } else if (strcmp(k, "unk_token") == 0) {
            if (m->type != ZT_JSON_NULL && m->type != ZT_JSON_STR)
                hf_fail(h, m, "model.unk_token: expected a string or null");
        } else if (strcmp(k, "fuse_unk") == 0 || strcmp(k, "byte_fallback") == 0 || strcmp(k, "ignore_merges") == 0) {
            if (m->type != ZT_JSON_BOOL) hf_fail(h, m, "model.%s: expected true or false", k);
            else if (k[0] == 'b') *byte_fallback = m->num != 0;
            else if (k[0] == 'i') *ignore_merges = m->num != 0;
        }
    }
}

/* the configuration of a tokenizer.json, checked section by section (model, normalizer,
 * pre_tokenizer, decoder, post_processor) and then as a whole */
static void hf_config(hf *h, zt_tok_config *c) {
    zt_tok_config_gpt2(c, ZT_TOK_NO_EOT);
    const zt_json *type = zt_json_get(h->model, "type");
    if (!str_is(type, "BPE")) {
        hf_fail(h, type ? type : h->model, "model type '%s' (expected a byte-level 'BPE' model as GPT-2, Llama 3 "
                "and Qwen2, or a 'BPE' with byte_fallback as Llama 2)", type && type->type == ZT_JSON_STR ? type->str : "");
        return;
    }
    int byte_fallback = 0, ignore_merges = 0, prepend = 0, strip = 0;
    zt_tok_prefix meta_prefix;
    hf_model_fields(h, h->model, &byte_fallback, &ignore_merges);
    int norm = h->bad ? N_NONE : hf_normalizer(h, h->normalizer, &prepend);
    int pre = h->bad ? P_NONE : hf_pretok(h, h->pretok, &meta_prefix);
    int dec = h->bad ? D_NONE : hf_decoder(h, h->decoder, &strip);
    if (!h->bad) hf_post(h, h->post, "post_processor", c, 0);
    if (h->bad) return;
    const zt_json *at = h->model;
    if (byte_fallback) {
        c->model = ZT_TOK_MODEL_CHARS;
        c->pretok = ZT_TOK_PRE_NONE;
        if (ignore_merges)
            hf_fail(h, zt_json_get(at, "ignore_merges"), "model.ignore_merges: true is not supported with byte_fallback");
        else if (norm == N_NFC)
            hf_fail(h, h->normalizer, "normalizer: NFC is not supported with a byte_fallback BPE (expected "
                    "Sequence[Prepend, Replace] or null)");
        else if (pre != P_NONE && pre != P_METASPACE)
            hf_fail(h, h->pretok, "pre_tokenizer: a byte_fallback BPE takes Metaspace or null (got a byte-level one)");
        else if (norm == N_SPACES && pre == P_METASPACE)
            hf_fail(h, h->pretok, "pre_tokenizer: Metaspace after a Replace normalizer is not supported (expected one "
                    "of them)");
        else if (norm != N_SPACES && pre != P_METASPACE)
            hf_fail(h, h->pretok ? h->pretok : at, "pre_tokenizer: a byte_fallback BPE needs its spaces as \"" MARK "\" "
                    "(a Replace normalizer or a Metaspace pre-tokenizer)");
        else if (dec != D_SPM)
            hf_fail(h, h->decoder ? h->decoder : at, "decoder: expected Sequence[Replace(\"" MARK "\", \" \"), "
                    "ByteFallback, Fuse, Strip] for a byte_fallback BPE");
        c->prefix = norm == N_SPACES ? (prepend ? ZT_TOK_PREFIX_NONEMPTY : ZT_TOK_PREFIX_NONE) : meta_prefix;
        c->strip_space = strip;
    } else {
        c->model = ZT_TOK_MODEL_BYTES;
        c->ignore_merges = ignore_merges;
        c->normalizer = norm == N_NFC ? ZT_TOK_NORM_NFC : ZT_TOK_NORM_NONE;
        if (norm == N_SPACES)
            hf_fail(h, h->normalizer, "normalizer: Replace(\" \", \"" MARK "\") needs a BPE with byte_fallback (model."
                    "byte_fallback is false)");
        else if (pre == P_NONE)
            hf_fail(h, h->pretok ? h->pretok : at, "pre_tokenizer: a byte-level BPE without a pre_tokenizer is not "
                    "supported (expected ByteLevel)");
        else if (pre == P_METASPACE)
            hf_fail(h, h->pretok, "pre_tokenizer: Metaspace needs a BPE with byte_fallback (model.byte_fallback is "
                    "false)");
        else if (dec == D_SPM)
            hf_fail(h, h->decoder, "decoder: Llama 2's decoder needs a BPE with byte_fallback (model.byte_fallback is "
                    "false)");
        c->pretok = pre == P_LLAMA3 ? ZT_TOK_PRE_LLAMA3 : pre == P_QWEN2 ? ZT_TOK_PRE_QWEN2 : ZT_TOK_PRE_GPT2;
    }
}

/* the top-level object: a tokenizer.json (a "model" object) or a vocab.json (token -> id only) */
static void hf_top(hf *h, const zt_json *top) {
    if (top->type != ZT_JSON_OBJ) {
        hf_fail(h, top, "expected a JSON object (a tokenizer.json or vocab.json)");
        return;
    }
    h->numbers_only = 1;
    for (int i = 0; i < top->n && !h->bad; i++) {
        const char *k = top->keys[i];
        const zt_json *v = &top->items[i];
        h->members++;
        if (v->type == ZT_JSON_NUM) {
            long long id;
            if (hf_id(h, v, &id)) hf_vocab_add(h, k, top->key_lens[i], id);
            continue;
        }
        h->numbers_only = 0;
        if (strcmp(k, "model") == 0 && v->type == ZT_JSON_OBJ) {
            h->has_model = 1;
            h->model = v;
            for (int j = 0; j < v->n && !h->bad; j++) {
                if (strcmp(v->keys[j], "vocab") == 0) hf_vocab(h, &v->items[j]);
                else if (strcmp(v->keys[j], "merges") == 0) hf_merges(h, &v->items[j]);
            }
        } else if (strcmp(k, "added_tokens") == 0 && v->type == ZT_JSON_ARR) {
            hf_added(h, v);
        } else if (strcmp(k, "normalizer") == 0) {
            h->normalizer = v;
        } else if (strcmp(k, "pre_tokenizer") == 0) {
            h->pretok = v;
        } else if (strcmp(k, "decoder") == 0) {
            h->decoder = v;
        } else if (strcmp(k, "post_processor") == 0) {
            h->post = v;
        }
    }
}

/* ---------------------------------------------------------------- GPT-2 byte alphabet */

/* bytes_to_unicode: printable Latin-1 bytes map to themselves, the other 68 to U+0100.. in order */
static void unicode_to_byte(int u2b[324]) {
    for (int i = 0; i < 324; i++) u2b[i] = -1;
    int n = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        u2b[printable ? b : 256 + n++] = b;
    }
}

/* token string -> bytes: through the alphabet when every character is in it, else the raw UTF-8
 * (added special tokens written in plain text) */
static void token_bytes(const int u2b[324], const char *s, size_t n, sbuf *out) {
    out->n = 0;
    sb_put(out, "", 0);
    const uint8_t *p = (const uint8_t *)s;
    for (size_t i = 0; i < n;) {
        uint32_t cp = p[i];
        size_t l = cp < 0x80 ? 1 : cp >= 0xC0 && cp < 0xE0 ? 2 : 0;
        if (l == 2 && i + 1 < n) cp = (cp & 31) << 6 | (p[i + 1] & 63);
        if (l == 0 || i + l > n || cp >= 324 || u2b[cp] < 0) {
            out->n = 0;
            sb_put(out, s, n);
            return;
        }
        char c = (char)u2b[cp];
        sb_put(out, &c, 1);
        i += l;
    }
}

/* ---------------------------------------------------------------- loading */

static char *read_file(const char *path, const char *what, const char *hint, size_t *n, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open %s (%s)%s", path, what, strerror(errno), hint);
        return NULL;
    }
    char *b = NULL;
    size_t len = 0, cap = 0, got;
    do {
        if (cap - len < 65536) {
            cap = 2 * cap + 65536;
            b = zt_realloc(b, cap + 1);
        }
        got = fread(b + len, 1, cap - len, f);
        len += got;
    } while (got > 0);
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        snprintf(err, errlen, "%s: read failed", path);
        free(b);
        return NULL;
    }
    b[len] = 0;
    *n = len;
    return b;
}

static int read_merges_txt(const char *path, hf *h, char *err, size_t errlen) {
    size_t n;
    char *b = read_file(path, "merges file", "; a vocab.json needs merges.txt beside it or --merges PATH", &n, err, errlen);
    if (!b) return 1;
    size_t ln = 0;
    for (char *p = b, *e; p < b + n; p = e + 1) {
        e = memchr(p, '\n', (size_t)(b + n - p));
        if (!e) e = b + n;
        size_t len = (size_t)(e - p);
        ln++;
        if (len && p[len - 1] == '\r') len--;
        if (len == 0 || (len >= 8 && memcmp(p, "#version", 8) == 0)) continue;
        char *sp = memchr(p, ' ', len);
        if (!sp || sp == p || sp + 1 == p + len || memchr(sp + 1, ' ', (size_t)(p + len - sp - 1))) {
            snprintf(err, errlen, "%s:%zu: expected a merge 'a b' (two tokens and one space)", path, ln);
            free(b);
            return 1;
        }
        hf_merge_add(h, p, (size_t)(sp - p), sp + 1, (size_t)(p + len - sp - 1));
    }
    h->merges_txt = b;
    return 0;
}

/* the end-of-text token: "<|endoftext|>" (the only one GPT-2's configuration looks for), else
 * "<|end_of_text|>" (Llama 3), else "</s>" (Llama 2) */
static const char *const EOT_NAMES[] = {ZT_TOK_EOT_TEXT, "<|end_of_text|>", "</s>"};

static zt_tokenizer *hf_build(hf *h, const zt_tok_config *cfg0, const char *path, const char *mpath, char *err,
                              size_t errlen) {
    zt_tokenizer *t = NULL;
    zt_tok_config cfg = *cfg0;
    const int chars = cfg.model == ZT_TOK_MODEL_CHARS;
    const int gpt2 = !chars && cfg.normalizer == ZT_TOK_NORM_NONE && cfg.pretok == ZT_TOK_PRE_GPT2 &&
                     !cfg.ignore_merges && !cfg.n_begin && !cfg.n_end;
    int u2b[324];
    unicode_to_byte(u2b);
    uint32_t vocab = 0;
    for (size_t i = 0; i < h->nv; i++) vocab = h->vid[i] + 1 > vocab ? h->vid[i] + 1 : vocab;
    for (size_t i = 0; i < h->na; i++) vocab = h->aid[i] + 1 > vocab ? h->aid[i] + 1 : vocab;
    uint8_t **toks = zt_calloc(vocab ? vocab : 1, sizeof *toks);
    uint32_t *lens = zt_calloc(vocab ? vocab : 1, sizeof *lens);
    uint8_t *added = zt_calloc(vocab ? vocab : 1, 1);
    uint32_t (*merges)[3] = zt_malloc((h->nm ? h->nm : 1) * sizeof *merges);
    uint32_t eot_of[3] = {ZT_TOK_NO_EOT, ZT_TOK_NO_EOT, ZT_TOK_NO_EOT};
    zt_hashmap *m = zt_hashmap_create(2 * h->nv + 2); /* token string -> id */
    sbuf tb = {0}, cat = {0};
    for (size_t pass = 0; pass < 2; pass++) { /* model vocab wins over added tokens with the same id */
        size_t cnt = pass ? h->na : h->nv;
        for (size_t i = 0; i < cnt; i++) {
            span s = pass ? h->atok[i] : h->vtok[i];
            uint32_t id = pass ? h->aid[i] : h->vid[i];
            int fresh = 1;
            if (!pass) zt_hashmap_put(m, s.s, s.n, id, &fresh);
            if (!fresh) {
                snprintf(err, errlen, "%s: token '%.*s' appears twice in the vocab", path, (int)(s.n > 40 ? 40 : s.n), s.s);
                goto done;
            }
            for (int k = 0; k < 3; k++)
                if (s.n == strlen(EOT_NAMES[k]) && memcmp(s.s, EOT_NAMES[k], s.n) == 0 && eot_of[k] == ZT_TOK_NO_EOT)
                    eot_of[k] = id;
            if (toks[id]) continue;
            if (chars) {
                tb.n = 0;
                sb_put(&tb, s.s, s.n);
            } else {
                token_bytes(u2b, s.s, s.n, &tb);
            }
            toks[id] = zt_malloc(tb.n ? tb.n : 1);
            memcpy(toks[id], tb.s, tb.n);
            lens[id] = (uint32_t)tb.n;
            added[id] = (uint8_t)pass;
        }
    }
    cfg.eot = eot_of[0];
    for (int k = 1; k < 3 && !gpt2 && cfg.eot == ZT_TOK_NO_EOT; k++) cfg.eot = eot_of[k];
    /* a configuration other than GPT-2's without a template ends each document with end-of-text */
    cfg.doc_end = !gpt2 && !cfg.n_begin && !cfg.n_end ? cfg.eot : ZT_TOK_NO_EOT;
    cfg.added = added;
    for (size_t r = 0; r < h->nm; r++) {
        span a = h->mg[r][0], b = h->mg[r][1];
        cat.n = 0;
        sb_put(&cat, a.s, a.n);
        sb_put(&cat, b.s, b.n);
        const uint64_t *ia = zt_hashmap_get(m, a.s, a.n), *ib = zt_hashmap_get(m, b.s, b.n),
                       *ic = zt_hashmap_get(m, cat.s, cat.n);
        const char *which = !ia ? "its first token" : !ib ? "its second token" : !ic ? "the merged token" : NULL;
        if (which) {
            snprintf(err, errlen, "%s: merge %zu ('%.*s %.*s'): %s is not in the vocab", mpath ? mpath : path, r + 1,
                     (int)(a.n > 30 ? 30 : a.n), a.s, (int)(b.n > 30 ? 30 : b.n), b.s, which);
            goto done;
        }
        merges[r][0] = (uint32_t)*ia;
        merges[r][1] = (uint32_t)*ib;
        merges[r][2] = (uint32_t)*ic;
    }
    char msg[256];
    t = zt_tokenizer_create_cfg(&cfg, vocab, (const uint8_t *const *)toks, lens, (uint32_t)h->nm,
                                (const uint32_t(*)[3])merges, msg, sizeof msg);
    if (!t) snprintf(err, errlen, "%s: %s%s", path, mpath ? "" : "model: ", msg);
done:
    for (uint32_t i = 0; i < vocab; i++) free(toks[i]);
    free(toks);
    free(lens);
    free(added);
    free(merges);
    free(tb.s);
    free(cat.s);
    zt_hashmap_free(m);
    return t;
}


zt_tokenizer *zt_tokenizer_load_hf(const char *path, const char *merges_path, char *err, size_t errlen) {
    size_t n;
    char *text = read_file(path, "tokenizer file", "", &n, err, errlen);
    if (!text) return NULL;
    hf h;
    memset(&h, 0, sizeof h);
    h.path = path;
    h.text = text;
    if (n >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) h.base = 3;
    zt_json doc;
    zt_json_error je;
    zt_tokenizer *t = NULL;
    char mp[4096];
    if (zt_json_parse_ex(text + h.base, n - h.base, &doc, &je)) {
        char at[48] = "";
        if (!je.eof) snprintf(at, sizeof at, " at byte %zu", h.base + je.off);
        snprintf(err, errlen, "%s:%d: invalid JSON: %s%s", path, je.line, je.what, at);
        free(text);
        return NULL;
    }
    hf_top(&h, &doc);
    zt_tok_config cfg;
    if (!h.bad && h.has_model) hf_config(&h, &cfg);
    if (h.bad) {
        snprintf(err, errlen, "%s", h.msg);
    } else if (h.has_model) { /* tokenizer.json */
        if (h.nv == 0)
            snprintf(err, errlen, "%s: model.vocab is empty", path);
        else
            t = hf_build(&h, &cfg, path, NULL, err, errlen);
    } else if (h.numbers_only && h.members > 0) { /* vocab.json */
        if (!merges_path) {
            const char *slash = strrchr(path, '/');
            snprintf(mp, sizeof mp, "%.*smerges.txt", slash ? (int)(slash - path + 1) : 0, path);
            merges_path = mp;
        }
        zt_tok_config_gpt2(&cfg, ZT_TOK_NO_EOT);
        if (read_merges_txt(merges_path, &h, err, errlen) == 0) t = hf_build(&h, &cfg, path, merges_path, err, errlen);
    } else {
        snprintf(err, errlen, "%s: JSON but neither a tokenizer.json (no \"model\" object) nor a vocab.json "
                 "(an object of token -> id)", path);
    }
    zt_json_free(&doc);
    free(text);
    free(h.merges_txt);
    free(h.vtok);
    free(h.vid);
    free(h.atok);
    free(h.aid);
    free(h.mg);
    return t;
}

/* ---------------------------------------------------------------- any format */

zt_tokenizer *zt_tokenizer_load(const char *path, const char *merges_path, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        zt_errf(err, errlen, "%s: cannot open tokenizer file (%s)", path, strerror(errno));
        return NULL;
    }
    char head[64] = {0};
    size_t n = fread(head, 1, sizeof head - 1, f);
    fclose(f);
    if (n >= strlen(ZT_TOK_MAGIC) && memcmp(head, ZT_TOK_MAGIC, strlen(ZT_TOK_MAGIC)) == 0)
        return zt_tokenizer_load_zttok(path, err, errlen);
    size_t i = 0;
    if (n >= 3 && memcmp(head, "\xEF\xBB\xBF", 3) == 0) i = 3;
    while (i < n && (head[i] == ' ' || head[i] == '\t' || head[i] == '\n' || head[i] == '\r')) i++;
    if (i < n && head[i] == '{') return zt_tokenizer_load_hf(path, merges_path, err, errlen);
    zt_errf(err, errlen,
            "%s: not a tokenizer file (expected a ztrain .zttok file starting '%s', or a Hugging Face "
            "tokenizer.json or vocab.json)", path, ZT_TOK_MAGIC);
    return NULL;
}
