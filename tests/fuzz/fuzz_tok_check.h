/* fuzz_tok_check.h — what the tokenizer targets (fuzz_tokenizer*.c) check on a tokenizer they got:
 *   - the token table: every id below the vocab size has bytes, the vocab size does not;
 *   - encode: ids below the vocab size, and decode(encode(x)) == x for any bytes x (tokenizer.h);
 *   - streaming: encoding x in chunks (zt_tokenizer_encode_chunk, passing the unconsumed rest again)
 *     gives the ids of encoding x whole;
 *   - the .zttok file: saved and loaded again it is the same tokenizer and encodes x the same.
 * x is a fixed text with the hard cases (contractions, Unicode letters and numbers, every kind of
 * white space, invalid and cut UTF-8, "<|endoftext|>") followed by `extra` (fuzz bytes).
 */
#ifndef ZT_FUZZ_TOK_CHECK_H
#define ZT_FUZZ_TOK_CHECK_H

#include "fuzz_common.h"
#include "io/tokenizer.h"

static const char FZ_TOK_TEXT[] =
    "Hello world! It's 'tis we'll they've I'm you'd she's DON'T 's 12345 3.14 \xc2\xbd\xe2\x85\xa7 "
    "caf\xc3\xa9 na\xc3\xafve \xce\xb1\xce\xb2\xce\xb3 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80!! "
    "  two  spaces\ttab\r\nCRLF\n\n\nlines \xc2\xa0nbsp\xe3\x80\x80ideo \xe2\x80\xa8sep "
    "<|endoftext|> invalid \xff\xfe\x80 cut \xe4\xb8 \xf0\x9f end   ";

/* ids of text[0..n) encoded in chunks of `step` bytes */
static FZ_UNUSED void fz_encode_chunked(zt_tokenizer *t, const uint8_t *text, size_t n, size_t step, zt_ids *out) {
    size_t pos = 0;
    for (size_t end = step;; end += step) {
        if (end >= n) {
            size_t used = zt_tokenizer_encode_chunk(t, text + pos, n - pos, 1, out);
            FZ_CHECK(used == n - pos, "a final chunk consumed %zu of %zu bytes", used, n - pos);
            return;
        }
        if (end < pos) continue;
        size_t used = zt_tokenizer_encode_chunk(t, text + pos, end - pos, 0, out);
        FZ_CHECK(used <= end - pos, "a chunk consumed %zu of %zu bytes", used, end - pos);
        pos += used;
    }
}

static FZ_UNUSED void fz_same_tokenizer(const zt_tokenizer *a, const zt_tokenizer *b) {
    FZ_CHECK(zt_tokenizer_vocab_size(a) == zt_tokenizer_vocab_size(b) && zt_tokenizer_eot(a) == zt_tokenizer_eot(b) &&
                 zt_tokenizer_n_merges(a) == zt_tokenizer_n_merges(b),
             "vocab %u/%u, eot %u/%u, merges %u/%u", zt_tokenizer_vocab_size(a), zt_tokenizer_vocab_size(b),
             zt_tokenizer_eot(a), zt_tokenizer_eot(b), zt_tokenizer_n_merges(a), zt_tokenizer_n_merges(b));
    for (uint32_t i = 0; i < zt_tokenizer_vocab_size(a); i++) {
        size_t la, lb;
        const uint8_t *ta = zt_tokenizer_token(a, i, &la), *tb = zt_tokenizer_token(b, i, &lb);
        FZ_CHECK(la == lb && (la == 0 || memcmp(ta, tb, la) == 0), "token %u differs", i);
    }
}

static FZ_UNUSED void fz_check_tokenizer(zt_tokenizer *t, const uint8_t *extra, size_t extra_n, int check_file) {
    const uint32_t V = zt_tokenizer_vocab_size(t), eot = zt_tokenizer_eot(t);
    /* WordPiece (BERT) normalises and maps unknown words to [UNK]: any vocab size, no byte round trip */
    const int wordpiece = zt_tokenizer_config(t)->model == ZT_TOK_MODEL_WORDPIECE;
    FZ_CHECK((wordpiece || V >= 256) && V <= ZT_TOK_MAX_VOCAB, "vocab %u", V);
    FZ_CHECK(eot == ZT_TOK_NO_EOT || eot < V, "eot %u of %u", eot, V);
    size_t len;
    for (uint32_t i = 0; i < V; i++) FZ_CHECK(zt_tokenizer_token(t, i, &len) != NULL, "token %u has no bytes", i);
    FZ_CHECK(zt_tokenizer_token(t, V, &len) == NULL && len == 0, "an id past the vocab has bytes");

    if (extra_n > 2048) extra_n = 2048;
    const size_t n = sizeof FZ_TOK_TEXT - 1 + extra_n;
    uint8_t *text = malloc(n);
    memcpy(text, FZ_TOK_TEXT, sizeof FZ_TOK_TEXT - 1);
    if (extra_n) memcpy(text + sizeof FZ_TOK_TEXT - 1, extra, extra_n);

    zt_ids ids = {0}, chunked = {0};
    zt_tokenizer_encode(t, text, n, &ids);
    for (size_t i = 0; i < ids.n; i++) FZ_CHECK(ids.v[i] < V, "encode gave id %u of a %u vocab", ids.v[i], V);
    uint8_t *back = NULL;
    size_t back_n = 0;
    char err[512] = "";
    FZ_CHECK(zt_tokenizer_decode(t, ids.v, ids.n, &back, &back_n, err, sizeof err) == 0, "decode: %s", err);
    FZ_CHECK(wordpiece || (back_n == n && memcmp(back, text, n) == 0), "decode(encode(x)) != x (%zu vs %zu bytes)",
             back_n, n);
    free(back);
    uint32_t bad_id = V;
    back = NULL;
    back_n = 0;
    FZ_CHECK(zt_tokenizer_decode(t, &bad_id, 1, &back, &back_n, err, sizeof err) != 0 && err[0],
             "decode accepts an id past the vocab");
    free(back);

    const size_t step = 1 + (extra_n ? extra[0] % 37 : 5);
    fz_encode_chunked(t, text, n, step, &chunked);
    FZ_CHECK(chunked.n == ids.n && memcmp(chunked.v, ids.v, ids.n * sizeof *ids.v) == 0,
             "encoding in chunks of %zu bytes gives %zu ids, whole %zu", step, chunked.n, ids.n);

    if (check_file) {
        char path[1024];
        fz_path("saved.zttok", path, sizeof path);
        err[0] = 0;
        FZ_CHECK(zt_tokenizer_save(t, path, err, sizeof err) == 0, "save: %s", err);
        zt_tokenizer *u = zt_tokenizer_load_zttok(path, err, sizeof err);
        FZ_CHECK(u, "a saved tokenizer does not load: %s", err);
        fz_same_tokenizer(t, u);
        zt_ids again = {0};
        zt_tokenizer_encode(u, text, n, &again);
        FZ_CHECK(again.n == ids.n && memcmp(again.v, ids.v, ids.n * sizeof *ids.v) == 0,
                 "the reloaded tokenizer encodes differently");
        zt_ids_free(&again);
        zt_tokenizer_free(u);
    }
    zt_ids_free(&ids);
    zt_ids_free(&chunked);
    free(text);
}

#endif
