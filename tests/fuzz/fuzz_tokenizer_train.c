/* fuzz_tokenizer_train.c — libFuzzer target: byte-level BPE training (src/io/tokenizer_train.c),
 * the pre-tokenizer and the hash map it counts with.
 *
 * Input: the training text; its first byte picks the streaming chunk size and its last byte the
 * vocab size (257..512). The text is fed to one trainer whole and to another in chunks (passing
 * the unconsumed rest again, as zt_tokenizer_trainer_feed asks). Checks besides the sanitizers
 * and the trainer's own ZT_ASSERT: both trainers count the same pre-tokens and give the same
 * tokenizer; it has the trained layout (256 bytes, merge i = id 256 + i, "<|endoftext|>" last,
 * at most the vocab asked for); encoding the text never gives the end-of-text id; and it passes
 * fz_check_tokenizer (fuzz_tok_check.h).
 */
#include "fuzz_tok_check.h"

static zt_tokenizer *train(const uint8_t *text, size_t n, size_t step, uint32_t vocab, size_t *words) {
    char err[512] = "";
    zt_bpe_trainer *tr = zt_tokenizer_trainer_create(1u << 20, err, sizeof err);
    FZ_CHECK(tr, "trainer_create: %s", err);
    size_t pos = 0;
    for (size_t end = step; end < n; end += step) {
        if (end < pos) continue;
        size_t used = zt_tokenizer_trainer_feed(tr, text + pos, end - pos, 0);
        FZ_CHECK(used <= end - pos, "feed consumed %zu of %zu bytes", used, end - pos);
        pos += used;
    }
    FZ_CHECK(zt_tokenizer_trainer_feed(tr, text + pos, n - pos, 1) == n - pos, "a final feed left bytes");
    *words = zt_tokenizer_trainer_words(tr);
    FZ_CHECK(!zt_tokenizer_trainer_pruned(tr), "pruned with a few KB of text in a 1 MB budget");
    zt_tokenizer *t = zt_tokenizer_trainer_finish(tr, vocab, NULL, NULL, err, sizeof err);
    FZ_CHECK(t, "trainer_finish: %s", err);
    zt_tokenizer_trainer_free(tr);
    return t;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 8192) return 0;
    const size_t step = 1 + data[0] % 64;
    const uint32_t vocab = 257 + data[size - 1];
    size_t w1, w2;
    zt_tokenizer *whole = train(data, size, size, vocab, &w1);
    zt_tokenizer *chunked = train(data, size, step, vocab, &w2);
    FZ_CHECK(w1 == w2, "%zu pre-tokens whole, %zu in chunks of %zu", w1, w2, step);
    fz_same_tokenizer(whole, chunked);
    zt_tokenizer_free(chunked);

    const uint32_t V = zt_tokenizer_vocab_size(whole), nm = zt_tokenizer_n_merges(whole);
    FZ_CHECK(V == 256 + nm + 1 && V <= vocab && zt_tokenizer_eot(whole) == V - 1, "vocab %u, merges %u, eot %u", V,
             nm, zt_tokenizer_eot(whole));
    size_t len;
    const uint8_t *e = zt_tokenizer_token(whole, V - 1, &len);
    FZ_CHECK(len == strlen(ZT_TOK_EOT_TEXT) && memcmp(e, ZT_TOK_EOT_TEXT, len) == 0, "last token is not eot");
    for (uint32_t i = 0; i < 256; i++) {
        const uint8_t *b = zt_tokenizer_token(whole, i, &len);
        FZ_CHECK(len == 1 && b[0] == i, "token %u is not byte %u", i, i);
    }
    zt_ids ids = {0};
    zt_tokenizer_encode(whole, data, size, &ids);
    for (size_t i = 0; i < ids.n; i++) FZ_CHECK(ids.v[i] != V - 1, "text encoded to the end-of-text id");
    zt_ids_free(&ids);
    fz_check_tokenizer(whole, data, size, 1);
    zt_tokenizer_free(whole);
    return 0;
}
