/* fuzz_tokenizer_hf.c — libFuzzer target: Hugging Face tokenizer files (src/io/tokenizer_hf.c)
 * through zt_tokenizer_load, which tells .zttok, tokenizer.json and vocab.json apart.
 *
 * Input: the tokenizer file, then optionally a NUL byte and the merges.txt that a vocab.json
 * needs beside it (JSON text never contains a raw NUL, so the split costs no input). Both are
 * written to scratch files (the loader takes paths); without a NUL there is no merges.txt.
 * Checks besides the sanitizers: a failure has a message; a loaded tokenizer passes
 * fz_check_tokenizer (fuzz_tok_check.h).
 */
#include "fuzz_tok_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[1024], mpath[1024], err[1024] = "";
    const uint8_t *nul = memchr(data, 0, size);
    const size_t n = nul ? (size_t)(nul - data) : size;
    fz_write("tokenizer.json", data, n, path, sizeof path);
    if (nul) fz_write("merges.txt", nul + 1, size - n - 1, mpath, sizeof mpath);
    else unlink(fz_path("merges.txt", mpath, sizeof mpath));
    zt_tokenizer *t = zt_tokenizer_load(path, NULL, err, sizeof err);
    FZ_LOG("%s", t ? "loaded" : err);
    if (!t) {
        FZ_CHECK_ERR(err);
        return 0;
    }
    fz_check_tokenizer(t, data, n, 1);
    zt_tokenizer_free(t);
    return 0;
}
