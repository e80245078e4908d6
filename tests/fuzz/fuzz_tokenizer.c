/* fuzz_tokenizer.c — libFuzzer target: ztrain's own tokenizer file, .zttok
 * (zt_tokenizer_load_zttok in src/io/tokenizer.c).
 *
 * The input is the file (written to a scratch file: the loader takes a path). Checks besides the
 * sanitizers: a failure has a message; a loaded tokenizer passes fz_check_tokenizer
 * (fuzz_tok_check.h: encode/decode round trip on a fixed text plus the input's bytes, streaming ==
 * whole, save + load gives the same tokenizer).
 */
#include "fuzz_tok_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[1024], err[1024] = "";
    fz_write("tokenizer.zttok", data, size, path, sizeof path);
    zt_tokenizer *t = zt_tokenizer_load_zttok(path, err, sizeof err);
    FZ_LOG("%s", t ? "loaded" : err);
    if (!t) {
        FZ_CHECK_ERR(err);
        return 0;
    }
    fz_check_tokenizer(t, data, size, 1);
    zt_tokenizer_free(t);
    return 0;
}
