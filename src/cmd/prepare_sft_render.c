/* prepare_sft_render.c — the chat templates of `ztrain prepare --sft` (prepare_sft.h): an example's messages to
 * token ids and a loss mask, as transformers' apply_chat_template(messages, tokenize=True) renders and tokenizes
 * them with the real models' templates.
 *
 * Rendering is a sequence of text pieces and special tokens, each marked trained (an assistant turn) or not:
 *   chatml   per message: <|im_start|> role "\n" content <|im_end|> "\n"
 *   llama3   <|begin_of_text|>, then per message: <|start_header_id|> role <|end_header_id|> "\n\n"
 *            strip(content) <|eot_id|>
 *   llama2   an optional system message first, then user and assistant alternating from user:
 *            user: <s> "[INST] " strip(content) " [/INST]" (the first user turn's content is
 *            "<<SYS>>\n" system "\n<</SYS>>\n\n" content when there is a system message; strip is of the whole);
 *            assistant: " " strip(content) " " </s>
 *   none     the prompt and the response as one text, with the tokenizer's document framing (BOS), then the
 *            end of text (the tokenizer's document end, else its end-of-text token)
 * Trained: the assistant's content and its end token (<|im_end|>, <|eot_id|>, and in llama2 the spaces around the
 * content and </s>); the role headers and the "\n" after <|im_end|> are not. strip is Python's str.strip() (jinja's
 * trim): Unicode white space at both ends.
 * Tokenizing: consecutive text pieces form one segment, encoded as one document without the tokenizer's
 * template ids (Hugging Face splits the rendered string at special tokens and encodes each segment: a Llama 2
 * prefix space per segment with the legacy normalizer; with Metaspace prepend_scheme "first", only at the start of
 * the string). A token is trained when it holds a byte of a trained piece: the token's bytes (decode's) are placed
 * on the segment's text after the tokenizer's own changes (the prefix space, NFC; a chars model's U+2581 decodes
 * as a one-byte space).
 */
#include "cmd/prepare_sft_internal.h"
#include "util/unicode.h"
#include "util/util.h"

#include <stdlib.h>
#include <string.h>

const char *const SFT_TEMPLATE_NAMES[4] = {"none", "chatml", "llama2", "llama3"};
const char *const SFT_ROLE_NAMES[3] = {"system", "user", "assistant"};

#define MARK "\xE2\x96\x81" /* U+2581 */

enum { SP_IM_START, SP_IM_END, SP_BOT, SP_HDR_START, SP_HDR_END, SP_EOT_ID, SP_BOS2, SP_EOS2, SP_N };
static const char *const SP_TEXT[SP_N] = {"<|im_start|>",      "<|im_end|>",      "<|begin_of_text|>",
                                          "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",
                                          "<s>",                "</s>"};

typedef struct range {
    size_t from, to;
} range;

struct sft_renderer {
    zt_tokenizer *tok, *plain;
    sft_template tpl;
    uint32_t sp[SP_N];
    uint32_t eos;                 /* template none */
    zt_nfc *nfc;
    /* the segment being built: its bytes and trained byte ranges */
    uint8_t *seg;
    size_t seg_n, seg_cap;
    range *tr;
    size_t n_tr, tr_cap;
    int emitted;                  /* something of the example came before the segment */
    /* output */
    zt_ids ids;
    uint8_t *mask;
    size_t mask_cap;
    /* scratch */
    zt_ids enc;
    uint8_t *norm, *tmp;
    size_t norm_n, norm_cap, tmp_n, tmp_cap;
};

/* the id of the token spelled s: an added token's, else (Llama 2's <s> and </s> are also model tokens) any
   token's; ZT_TOK_NO_EOT when none */
static uint32_t find_special(const zt_tokenizer *t, const char *s) {
    const zt_tok_config *c = zt_tokenizer_config(t);
    const size_t n = strlen(s);
    uint32_t any = ZT_TOK_NO_EOT;
    for (uint32_t id = 0; id < zt_tokenizer_vocab_size(t); id++) {
        size_t len;
        const uint8_t *b = zt_tokenizer_token(t, id, &len);
        if (len != n || memcmp(b, s, n) != 0) continue;
        if (c->added && c->added[id]) return id;
        if (any == ZT_TOK_NO_EOT) any = id;
    }
    return any;
}

sft_renderer *sft_renderer_create(zt_tokenizer *tok, zt_tokenizer *plain, sft_template tpl, char *err,
                                  size_t errlen) {
    static const int need[4][SP_N] = {
        [SFT_TPL_CHATML] = {[SP_IM_START] = 1, [SP_IM_END] = 1},
        [SFT_TPL_LLAMA2] = {[SP_BOS2] = 1, [SP_EOS2] = 1},
        [SFT_TPL_LLAMA3] = {[SP_BOT] = 1, [SP_HDR_START] = 1, [SP_HDR_END] = 1, [SP_EOT_ID] = 1},
    };
    sft_renderer *r = zt_calloc(1, sizeof *r);
    r->tok = tok;
    r->plain = plain;
    r->tpl = tpl;
    for (int k = 0; k < SP_N; k++) {
        r->sp[k] = need[tpl][k] ? find_special(tok, SP_TEXT[k]) : ZT_TOK_NO_EOT;
        if (need[tpl][k] && r->sp[k] == ZT_TOK_NO_EOT) {
            zt_errf(err, errlen, "--template %s: the tokenizer has no token \"%s\" (expected the special tokens "
                    "of the template's model family among its added tokens)", SFT_TEMPLATE_NAMES[tpl], SP_TEXT[k]);
            sft_renderer_free(r);
            return NULL;
        }
    }
    const zt_tok_config *c = zt_tokenizer_config(tok);
    r->eos = c->doc_end != ZT_TOK_NO_EOT ? c->doc_end : c->eot;
    if (r->eos != ZT_TOK_NO_EOT && c->n_end && c->end[c->n_end - 1] == r->eos) r->eos = ZT_TOK_NO_EOT;
    if (c->normalizer == ZT_TOK_NORM_NFC) r->nfc = zt_nfc_create();
    return r;
}

void sft_renderer_free(sft_renderer *r) {
    if (!r) return;
    zt_tokenizer_free(r->plain);
    zt_nfc_free(r->nfc);
    free(r->seg);
    free(r->tr);
    zt_ids_free(&r->ids);
    free(r->mask);
    zt_ids_free(&r->enc);
    free(r->norm);
    free(r->tmp);
    free(r);
}

/* ---------------------------------------------------------------- output */

static void out(sft_renderer *r, uint32_t id, int train) {
    zt_ids_push(&r->ids, id);
    if (r->ids.n > r->mask_cap) {
        r->mask_cap = r->ids.cap;
        r->mask = zt_realloc(r->mask, r->mask_cap);
    }
    r->mask[r->ids.n - 1] = (uint8_t)(train != 0);
}

static void grow(uint8_t **b, size_t *cap, size_t need) {
    if (need <= *cap) return;
    size_t c = *cap ? *cap : 256;
    while (c < need) c *= 2;
    *b = zt_realloc(*b, c);
    *cap = c;
}

static void text(sft_renderer *r, const void *s, size_t n, int train) {
    if (!n) return;
    grow(&r->seg, &r->seg_cap, r->seg_n + n);
    memcpy(r->seg + r->seg_n, s, n);
    if (train) {
        if (r->n_tr && r->tr[r->n_tr - 1].to == r->seg_n) {
            r->tr[r->n_tr - 1].to += n;
        } else {
            if (r->n_tr == r->tr_cap) {
                r->tr_cap = r->tr_cap ? 2 * r->tr_cap : 8;
                r->tr = zt_realloc(r->tr, r->tr_cap * sizeof *r->tr);
            }
            r->tr[r->n_tr++] = (range){r->seg_n, r->seg_n + n};
        }
    }
    r->seg_n += n;
}

static void str(sft_renderer *r, const char *s, int train) { text(r, s, strlen(s), train); }

/* the length of the segment's first b bytes as the tokenizer's tokens spell them (see the top) */
static size_t token_space(sft_renderer *r, const zt_tokenizer *t, size_t b) {
    if (b == 0) return 0;
    const zt_tok_config *c = zt_tokenizer_config(t);
    size_t pre = 0;
    if (c->prefix == ZT_TOK_PREFIX_NONEMPTY) pre = 1;
    else if (c->prefix == ZT_TOK_PREFIX_FIRST)
        pre = !(r->seg[0] == ' ' || (r->seg_n >= 3 && memcmp(r->seg, MARK, 3) == 0));
    const uint8_t *s = r->seg;
    size_t n = b;
    if (c->normalizer == ZT_TOK_NORM_NFC) {
        r->norm_n = 0;
        zt_nfc_append(r->nfc, r->seg, b, &r->norm, &r->norm_n, &r->norm_cap);
        s = r->norm;
        n = r->norm_n;
    }
    size_t len = n;
    if (c->model == ZT_TOK_MODEL_CHARS)
        for (size_t i = 0; i + 3 <= n; i++)
            if (s[i] == 0xE2 && memcmp(s + i, MARK, 3) == 0) len -= 2, i += 2;
    return pre + len;
}

/* encodes the segment (framing: with the tokenizer's template ids, else without) and appends ids and mask */
static void flush(sft_renderer *r, int framing) {
    if (!r->seg_n && !framing) return;
    const zt_tok_config *c0 = zt_tokenizer_config(r->tok);
    zt_tokenizer *t = r->plain && r->emitted && c0->prefix == ZT_TOK_PREFIX_FIRST ? r->plain : r->tok;
    const zt_tok_config *c = zt_tokenizer_config(t);
    r->enc.n = 0;
    zt_tokenizer_encode(t, r->seg, r->seg_n, &r->enc);
    size_t a = c->n_begin, b = r->enc.n >= c->n_begin + c->n_end ? r->enc.n - c->n_end : a;
    if (framing)
        for (size_t k = 0; k < a; k++) out(r, r->enc.v[k], 0);
    /* the trained ranges in token space */
    for (size_t j = 0; j < r->n_tr; j++) {
        size_t to = token_space(r, t, r->tr[j].to);
        r->tr[j].from = token_space(r, t, r->tr[j].from);
        r->tr[j].to = to;
    }
    size_t pos = 0, j = 0;
    for (size_t k = a; k < b; k++) {
        size_t len;
        zt_tokenizer_token(t, r->enc.v[k], &len);
        const size_t end = pos + (len ? len : 1);
        while (j < r->n_tr && r->tr[j].to <= pos) j++;
        out(r, r->enc.v[k], j < r->n_tr && r->tr[j].from < end && r->tr[j].to > pos);
        pos += len;
    }
    if (framing)
        for (size_t k = b; k < r->enc.n; k++) out(r, r->enc.v[k], 1);
    r->seg_n = r->n_tr = 0;
    r->emitted = 1;
}

static void special(sft_renderer *r, int which, int train) {
    flush(r, 0);
    out(r, r->sp[which], train);
    r->emitted = 1;
}

/* ---------------------------------------------------------------- Python's str.strip() */

static int py_space(uint32_t cp) {
    return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
           cp == 0x3000;
}

static void strip(const uint8_t **s, size_t *n) {
    const uint8_t *p = *s;
    size_t len = *n, k;
    uint32_t cp;
    while (len && (k = zt_utf8_dec(p, len, &cp)) && py_space(cp)) p += k, len -= k;
    while (len) { /* the last character: back over continuation bytes */
        size_t i = len - 1;
        while (i > 0 && (p[i] & 0xC0) == 0x80 && len - i < 4) i--;
        if (zt_utf8_dec(p + i, len - i, &cp) != len - i || !py_space(cp)) break;
        len = i;
    }
    *s = p;
    *n = len;
}

/* ---------------------------------------------------------------- the templates */

static int render_llama2(sft_renderer *r, const sft_msg *m, int n, char *err, size_t errlen) {
    const sft_msg *sys = n > 0 && m[0].role == SFT_SYSTEM ? &m[0] : NULL;
    const int first = sys ? 1 : 0;
    for (int i = first; i < n; i++) {
        const sft_role want = (i - first) % 2 == 0 ? SFT_USER : SFT_ASSISTANT;
        if (m[i].role != want)
            return zt_errf(err, errlen, "message %d has role \"%s\" (--template llama2 expects user and assistant "
                           "turns alternating from user, after an optional first system message)", i + 1,
                           SFT_ROLE_NAMES[m[i].role]), -1;
        const uint8_t *s = m[i].text;
        size_t len = m[i].len;
        if (want == SFT_USER) {
            if (i == first && sys) {
                r->tmp_n = 0;
                static const char a[] = "<<SYS>>\n", b[] = "\n<</SYS>>\n\n";
                grow(&r->tmp, &r->tmp_cap, sys->len + m[i].len + sizeof a + sizeof b);
                memcpy(r->tmp, a, sizeof a - 1);
                r->tmp_n = sizeof a - 1;
                memcpy(r->tmp + r->tmp_n, sys->text, sys->len);
                r->tmp_n += sys->len;
                memcpy(r->tmp + r->tmp_n, b, sizeof b - 1);
                r->tmp_n += sizeof b - 1;
                memcpy(r->tmp + r->tmp_n, m[i].text, m[i].len);
                r->tmp_n += m[i].len;
                s = r->tmp;
                len = r->tmp_n;
            }
            strip(&s, &len);
            special(r, SP_BOS2, 0);
            str(r, "[INST] ", 0);
            text(r, s, len, 0);
            str(r, " [/INST]", 0);
        } else {
            strip(&s, &len);
            str(r, " ", 1);
            text(r, s, len, 1);
            str(r, " ", 1);
            special(r, SP_EOS2, 1);
        }
    }
    return 0;
}

int sft_render(sft_renderer *r, const sft_msg *m, int n, const uint32_t **ids, const uint8_t **mask, size_t *n_out,
               char *err, size_t errlen) {
    r->ids.n = 0;
    r->seg_n = r->n_tr = 0;
    r->emitted = 0;
    int assistant = 0;
    for (int i = 0; i < n; i++) assistant |= m[i].role == SFT_ASSISTANT;
    if (!assistant)
        return zt_errf(err, errlen, "no assistant message (expected at least one {\"role\": \"assistant\", ...}: "
                       "its tokens are what the example trains)"), -1;
    if (r->tpl == SFT_TPL_NONE) {
        if (n != 2 || m[0].role != SFT_USER || m[1].role != SFT_ASSISTANT)
            return zt_errf(err, errlen, "--template none takes a prompt and a response (a chat example needs "
                           "--template chatml, llama2 or llama3)"), -1;
        text(r, m[0].text, m[0].len, 0);
        text(r, m[1].text, m[1].len, 1);
        flush(r, 1);
        if (r->eos != ZT_TOK_NO_EOT) out(r, r->eos, 1);
    } else if (r->tpl == SFT_TPL_LLAMA2) {
        if (render_llama2(r, m, n, err, errlen)) return -1;
    } else {
        const int l3 = r->tpl == SFT_TPL_LLAMA3;
        if (l3) special(r, SP_BOT, 0);
        for (int i = 0; i < n; i++) {
            const int a = m[i].role == SFT_ASSISTANT;
            const uint8_t *s = m[i].text;
            size_t len = m[i].len;
            special(r, l3 ? SP_HDR_START : SP_IM_START, 0);
            str(r, SFT_ROLE_NAMES[m[i].role], 0);
            if (l3) {
                special(r, SP_HDR_END, 0);
                str(r, "\n\n", 0);
                strip(&s, &len);
            } else {
                str(r, "\n", 0);
            }
            text(r, s, len, a);
            special(r, l3 ? SP_EOT_ID : SP_IM_END, a);
            if (!l3) str(r, "\n", 0);
        }
    }
    flush(r, 0);
    *ids = r->ids.v;
    *mask = r->mask;
    *n_out = r->ids.n;
    return 0;
}
