/* tokenizer_hf_config.c — a Hugging Face tokenizer.json's sections read as data: the top-level object, then its
 * normalizer, pre_tokenizer, model flags, decoder and post_processor checked against the configurations ztrain
 * implements (tokenizer_hf.c's header lists them) and turned into a zt_tok_config; anything else fails naming the
 * field and line. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "io/tokenizer_hf_internal.h"

#include <stdlib.h>
#include <string.h>

/* the Split regexes of Llama 3 and Qwen2 (as the JSON holds them, unescaped) */
#define SPLIT_RE(DIGITS)                                                                                       \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|" DIGITS "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|" \
    "\\s+(?!\\S)|\\s+"
static const char *const LLAMA3_SPLIT = SPLIT_RE("\\p{N}{1,3}");
static const char *const QWEN2_SPLIT = SPLIT_RE("\\p{N}");
#define MARK "\xE2\x96\x81" /* U+2581 */

/* ---- reading the sections (each check fails with the field's name and line) */

static int str_is(const zt_json *v, const char *s) {
    return v && v->type == ZT_JSON_STR && v->len == strlen(s) && memcmp(v->str, s, v->len) == 0;
}

/* the "type" of a section object ("" when missing), failing when v is not an object */
static const char *type_of(hf *h, const zt_json *v, const char *field) {
    if (v->type != ZT_JSON_OBJ) {
        zt_hf_fail(h, v, "%s: expected an object", field);
        return "";
    }
    const zt_json *t = zt_json_get(v, "type");
    if (!t || t->type != ZT_JSON_STR) {
        zt_hf_fail(h, v, "%s: expected a \"type\"", field);
        return "";
    }
    return t->str;
}

/* every member of object v is one of the NULL-terminated names (the error says what v is: of) */
static void keys_of(hf *h, const zt_json *v, const char *field, const char *const *names, const char *of) {
    for (int i = 0; i < v->n && !h->bad; i++) {
        int ok = 0;
        for (const char *const *k = names; *k && !ok; k++) ok = strcmp(v->keys[i], *k) == 0;
        if (!ok)
            zt_hf_fail(h, &v->items[i], "%s.%s: unknown field%s (not supported: it may change the encoding)", field,
                    v->keys[i], of);
    }
}

static void only_keys(hf *h, const zt_json *v, const char *field, const char *const *names) {
    keys_of(h, v, field, names, "");
}

/* member key of v must be a boolean equal to want (-1: either); missing means dflt */
static void want_bool(hf *h, const zt_json *v, const char *field, const char *key, int want, int dflt) {
    const zt_json *m = zt_json_get(v, key);
    if (!m) {
        if (want >= 0 && dflt != want)
            zt_hf_fail(h, v, "%s.%s: missing, which means %s (expected %s)", field, key, dflt ? "true" : "false",
                    want ? "true" : "false");
        return;
    }
    if (m->type != ZT_JSON_BOOL) zt_hf_fail(h, m, "%s.%s: expected true or false", field, key);
    else if (want >= 0 && (m->num != 0) != want)
        zt_hf_fail(h, m, "%s.%s: %s is not supported (expected %s)", field, key, m->num != 0 ? "true" : "false",
                want ? "true" : "false");
}

/* member key of v is the string want */
static void want_str(hf *h, const zt_json *v, const char *field, const char *key, const char *want) {
    const zt_json *m = zt_json_get(v, key);
    if (!m) zt_hf_fail(h, v, "%s.%s: missing (expected \"%s\")", field, key, want);
    else if (!str_is(m, want))
        zt_hf_fail(h, m, "%s.%s: %s%.60s%s is not supported (expected \"%s\")", field, key,
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
        zt_hf_fail(h, p ? p : v, "%s: expected {\"String\": \"%s\"} (a Regex pattern is not supported)", f, from);
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
                    zt_hf_fail(h, &seq->items[0], "%s: '%s' is not supported (expected Prepend(\"" MARK "\") as Llama 2)",
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
                zt_hf_fail(h, &seq->items[k], "%s: '%s' is not supported (expected Replace(\" \", \"" MARK "\") as Llama 2)",
                        f, t);
                return N_NONE;
            }
            want_replace(h, &seq->items[k], f, " ", MARK);
            return N_SPACES;
        }
        if (!h->bad)
            zt_hf_fail(h, v, "normalizer: a Sequence of %d normalizers is not supported (expected [Prepend(\"" MARK "\"), "
                    "Replace(\" \", \"" MARK "\")] as Llama 2, or [NFC])", seq->n);
        return N_NONE;
    }
    zt_hf_fail(h, v, "normalizer: '%s' is not supported (expected null, NFC as Qwen2, or Sequence[Prepend(\"" MARK "\"), "
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
                zt_hf_fail(h, ps, "pre_tokenizer.prepend_scheme: expected \"first\", \"always\" or \"never\"");
        } else if (aps && aps->type == ZT_JSON_BOOL) {
            *prefix = aps->num != 0 ? ZT_TOK_PREFIX_FIRST : ZT_TOK_PREFIX_NONE;
        } else {
            zt_hf_fail(h, v, "pre_tokenizer.prepend_scheme: missing (expected \"first\", \"always\" or \"never\")");
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
                zt_hf_fail(h, re ? re : pat ? pat : sp, "%s.pattern%s: %s%.60s%s is not supported (expected the Llama 3 "
                        "or the Qwen2 regex)", f, re ? ".Regex" : "", re && re->type == ZT_JSON_STR ? "the regex '" : "this pattern",
                        re && re->type == ZT_JSON_STR ? re->str : "", re && re->type == ZT_JSON_STR ? "'" : "");
                return P_NONE;
            }
            want_byte_level(h, &seq->items[1], "pre_tokenizer.pretokenizers[1]", 0);
            return kind;
        }
        if (!h->bad)
            zt_hf_fail(h, v, "pre_tokenizer: this Sequence is not supported (expected [ByteLevel] or [Split(regex), "
                    "ByteLevel(use_regex=false)])");
        return P_NONE;
    }
    zt_hf_fail(h, v, "pre_tokenizer: '%s' is not supported (expected ByteLevel, Sequence[Split, ByteLevel], Metaspace "
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
                zt_hf_fail(h, &seq->items[i], "%s: '%s' is not supported (expected %s, as Llama 2's decoder)", f, t, want[i]);
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
                    zt_hf_fail(h, s, "%s: expected start 1 and stop 0 (one leading space dropped)", f);
                *strip = 1;
            }
        }
        return D_SPM;
    }
    zt_hf_fail(h, v, "decoder: '%s' is not supported (expected ByteLevel, or Sequence[Replace, ByteFallback, Fuse, Strip] "
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
        zt_hf_fail(h, v, "%s: expected \"single\" (an array) and \"special_tokens\" (an object)", field);
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
            zt_hf_fail(h, e, "%s.single[%d]: expected {\"SpecialToken\": {\"id\": NAME}} with NAME in special_tokens, "
                    "or one {\"Sequence\": {\"id\": \"A\"}}", field, i);
            return;
        }
        for (int k = 0; k < ids->n && !h->bad; k++) {
            long long id;
            if (!zt_hf_id(h, &ids->items[k], &id)) return;
            uint32_t *n = seen_a ? &c->n_end : &c->n_begin;
            if (*n == ZT_TOK_MAX_TEMPLATE) {
                zt_hf_fail(h, e, "%s.single: more than %d special tokens on one side of $A", field, ZT_TOK_MAX_TEMPLATE);
                return;
            }
            (seen_a ? c->end : c->begin)[(*n)++] = (uint32_t)id;
        }
    }
    if (!seen_a && !h->bad) zt_hf_fail(h, single, "%s.single: no {\"Sequence\": {\"id\": \"A\"}}", field);
}

/* BertProcessing: cls $A sep, each ["name", id], read as a template; RobertaProcessing (<s> $A </s>; its
   trim_offsets and add_prefix_space move offsets only): cls and sep alone, which encode never writes (as HF's
   encode(add_special_tokens=False); prepare --mlm frames sequences with them) */
static void hf_bert_post(hf *h, const zt_json *v, const char *field, zt_tok_config *c, int roberta) {
    static const char *const keys[] = {"type", "sep", "cls", NULL}, *const names[] = {"cls", "sep"},
                             *const rkeys[] = {"type", "sep", "cls", "trim_offsets", "add_prefix_space", NULL};
    only_keys(h, v, field, roberta ? rkeys : keys);
    if (roberta && !h->bad) want_bool(h, v, field, "trim_offsets", -1, 1);
    if (roberta && !h->bad) want_bool(h, v, field, "add_prefix_space", -1, 1);
    for (int k = 0; k < 2 && !h->bad; k++) {
        const zt_json *e = zt_json_get(v, names[k]);
        long long id;
        if (!e || e->type != ZT_JSON_ARR || e->n != 2 || e->items[0].type != ZT_JSON_STR)
            zt_hf_fail(h, e ? e : v, "%s.%s: expected [\"token\", id]", field, names[k]);
        else if (zt_hf_id(h, &e->items[1], &id))
            *(roberta ? (k ? &c->sep : &c->cls) : (k ? c->end : c->begin)) = (uint32_t)id;
    }
    if (!roberta) c->n_begin = c->n_end = 1;
}

/* post_processor: null, ByteLevel, TemplateProcessing, BertProcessing, RobertaProcessing, or a Sequence of those */
static void hf_post(hf *h, const zt_json *v, const char *field, zt_tok_config *c, int depth) {
    static const char *const bl_keys[] = {"type", "add_prefix_space", "trim_offsets", "use_regex", NULL},
                             *const seq_keys[] = {"type", "processors", NULL};
    if (!v || v->type == ZT_JSON_NULL) return;
    const char *type = type_of(h, v, field);
    if (h->bad) return;
    const zt_json *seq = zt_json_get(v, "processors");
    if (strcmp(type, "ByteLevel") == 0) {
        only_keys(h, v, field, bl_keys);
    } else if (strcmp(type, "TemplateProcessing") == 0 || strcmp(type, "BertProcessing") == 0 ||
               strcmp(type, "RobertaProcessing") == 0) {
        if (c->n_begin || c->n_end || c->cls != ZT_TOK_NO_EOT)
            zt_hf_fail(h, v, "%s: a second template is not supported", field);
        else if (type[0] == 'T') hf_template(h, v, field, c);
        else hf_bert_post(h, v, field, c, type[0] == 'R');
    } else if (strcmp(type, "Sequence") == 0 && seq && seq->type == ZT_JSON_ARR && depth == 0) {
        only_keys(h, v, field, seq_keys);
        for (int i = 0; i < seq->n && !h->bad; i++) {
            char f[64];
            snprintf(f, sizeof f, "%s.processors[%d]", field, i);
            hf_post(h, &seq->items[i], f, c, 1);
        }
    } else {
        zt_hf_fail(h, v, "%s: '%s' is not supported (expected ByteLevel, TemplateProcessing, BertProcessing, "
                "RobertaProcessing or a Sequence of them)", field, type);
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
                zt_hf_fail(h, m, "model.dropout: %g is not supported (expected null: ztrain encodes deterministically)",
                        m->type == ZT_JSON_NUM ? m->num : 1.0);
        } else if (strcmp(k, "continuing_subword_prefix") == 0 || strcmp(k, "end_of_word_suffix") == 0) {
            if (m->type != ZT_JSON_NULL && !(m->type == ZT_JSON_STR && m->len == 0)) /* "" (GPT-2's file) and null */
                zt_hf_fail(h, m, "model.%s: %s%.40s%s is not supported (expected null or \"\")", k,
                        m->type == ZT_JSON_STR ? "\"" : "this value", m->type == ZT_JSON_STR ? m->str : "",
                        m->type == ZT_JSON_STR ? "\"" : "");
        } else if (strcmp(k, "unk_token") == 0) {
            if (m->type != ZT_JSON_NULL && m->type != ZT_JSON_STR)
                zt_hf_fail(h, m, "model.unk_token: expected a string or null");
        } else if (strcmp(k, "fuse_unk") == 0 || strcmp(k, "byte_fallback") == 0 || strcmp(k, "ignore_merges") == 0) {
            if (m->type != ZT_JSON_BOOL) zt_hf_fail(h, m, "model.%s: expected true or false", k);
            else if (k[0] == 'b') *byte_fallback = m->num != 0;
            else if (k[0] == 'i') *ignore_merges = m->num != 0;
        }
    }
}

/* section v (field) is an object of type want, with only the keys */
static void want_type(hf *h, const zt_json *v, const char *field, const char *want, const char *const *keys) {
    const char *t = v && v->type != ZT_JSON_NULL ? type_of(h, v, field) : "null";
    if (!h->bad && strcmp(t, want) != 0)
        zt_hf_fail(h, v ? v : h->model, "%s: '%s' is not supported with a WordPiece model (expected %s)", field, t, want);
    if (!h->bad) only_keys(h, v, field, keys);
}

/* WordPiece (BERT): the model's four fields, normalizer BertNormalizer or null, pre_tokenizer BertPreTokenizer,
 * decoder WordPiece with the model's prefix, and the post-processor's one token before $A and one after it as
 * cls and sep (encode writes neither) */
static void hf_wordpiece(hf *h, zt_tok_config *c) {
    static const char *const mkeys[] = {"type", "unk_token", "continuing_subword_prefix", "max_input_chars_per_word",
                                        "vocab", NULL},
                             *const nkeys[] = {"type", "clean_text", "handle_chinese_chars", "strip_accents",
                                               "lowercase", NULL},
                             *const pkeys[] = {"type", NULL}, *const dkeys[] = {"type", "prefix", "cleanup", NULL},
                             *const flags[] = {"clean_text", "handle_chinese_chars", "lowercase"};
    static const uint32_t bits[] = {ZT_TOK_BERT_CLEAN, ZT_TOK_BERT_CHINESE, ZT_TOK_BERT_LOWER};
    const zt_json *m = h->model, *unk = zt_json_get(m, "unk_token"), *pre = zt_json_get(m, "continuing_subword_prefix"),
                  *mx = zt_json_get(m, "max_input_chars_per_word"), *v = h->normalizer;
    c->model = ZT_TOK_MODEL_WORDPIECE;
    c->pretok = ZT_TOK_PRE_BERT;
    keys_of(h, m, "model", mkeys, " of a model type 'WordPiece'");
    if (h->bad) return;
    if (!unk || unk->type != ZT_JSON_STR)
        zt_hf_fail(h, unk ? unk : m, "model.unk_token: expected a string");
    else if (!pre || pre->type != ZT_JSON_STR || pre->len >= sizeof c->subword_prefix || strlen(pre->str) != pre->len)
        zt_hf_fail(h, pre ? pre : m, "model.continuing_subword_prefix: expected a string of at most %zu bytes",
                sizeof c->subword_prefix - 1);
    else if (!mx || mx->type != ZT_JSON_NUM || !mx->is_int || mx->inum < 0 || mx->inum > ZT_TOK_MAX_WORD_CHARS)
        zt_hf_fail(h, mx ? mx : m, "model.max_input_chars_per_word: expected an integer in 0..%u", ZT_TOK_MAX_WORD_CHARS);
    if (h->bad) return;
    h->unk = (span){unk->str, unk->len};
    memcpy(c->subword_prefix, pre->str, pre->len);
    c->max_word_chars = (uint32_t)mx->inum;
    if (v && v->type != ZT_JSON_NULL) {
        want_type(h, v, "normalizer", "BertNormalizer", nkeys);
        for (int k = 0; k < 3 && !h->bad; k++) {
            const zt_json *b = zt_json_get(v, flags[k]);
            if (!b || b->type != ZT_JSON_BOOL) zt_hf_fail(h, b ? b : v, "normalizer.%s: expected true or false", flags[k]);
            else if (b->num != 0) c->bert |= bits[k];
        }
        const zt_json *sa = zt_json_get(v, "strip_accents");
        if (sa && sa->type != ZT_JSON_NULL && sa->type != ZT_JSON_BOOL)
            zt_hf_fail(h, sa, "normalizer.strip_accents: expected true, false or null (null: as lowercase)");
        if (sa && sa->type == ZT_JSON_BOOL ? sa->num != 0 : (c->bert & ZT_TOK_BERT_LOWER) != 0) c->bert |= ZT_TOK_BERT_STRIP;
        c->normalizer = ZT_TOK_NORM_BERT;
    }
    if (!h->bad) want_type(h, h->pretok, "pre_tokenizer", "BertPreTokenizer", pkeys);
    if (!h->bad) want_type(h, h->decoder, "decoder", "WordPiece", dkeys);
    if (!h->bad) want_str(h, h->decoder, "decoder", "prefix", c->subword_prefix);
    const zt_json *cl = h->bad ? NULL : zt_json_get(h->decoder, "cleanup");
    if (!h->bad && (!cl || cl->type != ZT_JSON_BOOL))
        zt_hf_fail(h, cl ? cl : h->decoder, "decoder.cleanup: expected true or false");
    c->decode_cleanup = cl && cl->num != 0;
    if (!h->bad) hf_post(h, h->post, "post_processor", c, 0);
    if (!h->bad && (c->n_begin || c->n_end) && (c->n_begin != 1 || c->n_end != 1))
        zt_hf_fail(h, h->post, "post_processor: %u and %u special tokens around $A are not supported with a WordPiece "
                "model (expected one on each side: [CLS] $A [SEP])", c->n_begin, c->n_end);
    if (h->bad || !c->n_begin) return;
    c->cls = c->begin[0];
    c->sep = c->end[0];
    c->n_begin = c->n_end = 0;
}

/* the configuration of a tokenizer.json, checked section by section (model, normalizer,
 * pre_tokenizer, decoder, post_processor) and then as a whole */
void zt_hf_config(hf *h, zt_tok_config *c) {
    zt_tok_config_gpt2(c, ZT_TOK_NO_EOT);
    const zt_json *type = zt_json_get(h->model, "type");
    if (str_is(type, "WordPiece")) {
        hf_wordpiece(h, c);
        return;
    }
    if (!str_is(type, "BPE")) {
        zt_hf_fail(h, type ? type : h->model, "model type '%s' (expected a byte-level 'BPE' model as GPT-2, Llama 3 "
                "and Qwen2, a 'BPE' with byte_fallback as Llama 2, or 'WordPiece' as BERT)",
                type && type->type == ZT_JSON_STR ? type->str : "");
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
            zt_hf_fail(h, zt_json_get(at, "ignore_merges"), "model.ignore_merges: true is not supported with byte_fallback");
        else if (norm == N_NFC)
            zt_hf_fail(h, h->normalizer, "normalizer: NFC is not supported with a byte_fallback BPE (expected "
                    "Sequence[Prepend, Replace] or null)");
        else if (pre != P_NONE && pre != P_METASPACE)
            zt_hf_fail(h, h->pretok, "pre_tokenizer: a byte_fallback BPE takes Metaspace or null (got a byte-level one)");
        else if (norm == N_SPACES && pre == P_METASPACE)
            zt_hf_fail(h, h->pretok, "pre_tokenizer: Metaspace after a Replace normalizer is not supported (expected one "
                    "of them)");
        else if (norm != N_SPACES && pre != P_METASPACE)
            zt_hf_fail(h, h->pretok ? h->pretok : at, "pre_tokenizer: a byte_fallback BPE needs its spaces as \"" MARK "\" "
                    "(a Replace normalizer or a Metaspace pre-tokenizer)");
        else if (dec != D_SPM)
            zt_hf_fail(h, h->decoder ? h->decoder : at, "decoder: expected Sequence[Replace(\"" MARK "\", \" \"), "
                    "ByteFallback, Fuse, Strip] for a byte_fallback BPE");
        c->prefix = norm == N_SPACES ? (prepend ? ZT_TOK_PREFIX_NONEMPTY : ZT_TOK_PREFIX_NONE) : meta_prefix;
        c->strip_space = strip;
    } else {
        c->model = ZT_TOK_MODEL_BYTES;
        c->ignore_merges = ignore_merges;
        c->normalizer = norm == N_NFC ? ZT_TOK_NORM_NFC : ZT_TOK_NORM_NONE;
        if (norm == N_SPACES)
            zt_hf_fail(h, h->normalizer, "normalizer: Replace(\" \", \"" MARK "\") needs a BPE with byte_fallback (model."
                    "byte_fallback is false)");
        else if (pre == P_NONE)
            zt_hf_fail(h, h->pretok ? h->pretok : at, "pre_tokenizer: a byte-level BPE without a pre_tokenizer is not "
                    "supported (expected ByteLevel)");
        else if (pre == P_METASPACE)
            zt_hf_fail(h, h->pretok, "pre_tokenizer: Metaspace needs a BPE with byte_fallback (model.byte_fallback is "
                    "false)");
        else if (dec == D_SPM)
            zt_hf_fail(h, h->decoder, "decoder: Llama 2's decoder needs a BPE with byte_fallback (model.byte_fallback is "
                    "false)");
        c->pretok = pre == P_LLAMA3 ? ZT_TOK_PRE_LLAMA3 : pre == P_QWEN2 ? ZT_TOK_PRE_QWEN2 : ZT_TOK_PRE_GPT2;
    }
    if (c->n_begin == 1 && c->n_end == 1) { /* [CLS] $A [SEP]: encode writes them (a template), and they are cls, sep */
        c->cls = c->begin[0];
        c->sep = c->end[0];
    }
}

/* the top-level object: a tokenizer.json (a "model" object) or a vocab.json (token -> id only) */
void zt_hf_top(hf *h, const zt_json *top) {
    if (top->type != ZT_JSON_OBJ) {
        zt_hf_fail(h, top, "expected a JSON object (a tokenizer.json or vocab.json)");
        return;
    }
    h->numbers_only = 1;
    for (int i = 0; i < top->n && !h->bad; i++) {
        const char *k = top->keys[i];
        const zt_json *v = &top->items[i];
        h->members++;
        if (v->type == ZT_JSON_NUM) {
            long long id;
            if (zt_hf_id(h, v, &id)) zt_hf_vocab_add(h, k, top->key_lens[i], id);
            continue;
        }
        h->numbers_only = 0;
        if (strcmp(k, "model") == 0 && v->type == ZT_JSON_OBJ) {
            h->has_model = 1;
            h->model = v;
            for (int j = 0; j < v->n && !h->bad; j++) {
                if (strcmp(v->keys[j], "vocab") == 0) zt_hf_vocab(h, &v->items[j]);
                else if (strcmp(v->keys[j], "merges") == 0) zt_hf_merges(h, &v->items[j]);
            }
        } else if (strcmp(k, "added_tokens") == 0 && v->type == ZT_JSON_ARR) {
            zt_hf_added(h, v);
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
