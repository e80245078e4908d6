/* fuzz_shard.c — libFuzzer target: token shard files (src/io/data_shard.c).
 *
 * The input is the shard file (written to a scratch file: the reader takes a path and checks the
 * size with fstat). It goes through zt_shard_read_header and zt_shard_load. Checks besides the
 * sanitizers: every failure has a message; both agree on the header; a loaded shard has
 * (size - 64) / width tokens, each below the vocab size; and writing the tokens again with
 * zt_shard_writer (same vocab, end-of-text id, flags and example length; the mask copied from the input)
 * gives the input's bytes back when the input used the writer's token width, version and zero reserved
 * bytes; zt_shard_map_open agrees with the loader.
 */
#include "fuzz_common.h"
#include "io/data_shard.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[1024], path2[1024], err[1024] = "";
    fz_write("shard.bin", data, size, path, sizeof path);
    zt_shard_header h, h2;
    uint32_t *tok = NULL;
    int bad_header = zt_shard_read_header(path, &h, err, sizeof err);
    if (bad_header) FZ_CHECK_ERR(err);
    err[0] = 0;
    int bad = zt_shard_load(path, &h2, &tok, err, sizeof err);
    FZ_LOG("%s", bad ? err : "loaded");
    if (bad) {
        FZ_CHECK_ERR(err);
        FZ_CHECK(!tok, "a failed load returned tokens");
        return 0;
    }
    FZ_CHECK(!bad_header, "load accepts what read_header rejects");
    FZ_CHECK(h.version == h2.version && h.width == h2.width && h.vocab_size == h2.vocab_size && h.eot == h2.eot &&
                 h.count == h2.count && h.flags == h2.flags && h.example_len == h2.example_len,
             "read_header and load disagree");
    FZ_CHECK(h.width == 2 || h.width == 4, "width %u", h.width);
    const int masked = (h.flags & ZT_SHARD_FLAG_MASK) != 0;
    FZ_CHECK(size == ZT_SHARD_HEADER + h.count * (h.width + (unsigned)masked), "%llu tokens of %u bytes in a %zu-byte file",
             (unsigned long long)h.count, h.width, size);
    const uint8_t *mask = masked ? data + ZT_SHARD_HEADER + h.count * h.width : NULL;
    zt_shard_map m;
    FZ_CHECK(zt_shard_map_open(&m, path, err, sizeof err) == 0, "map_open rejects what load accepts: %s", err);
    for (uint64_t i = 0; i < h.count; i++) FZ_CHECK(zt_shard_map_token(&m, i) == tok[i], "mapped token %llu differs",
                                                    (unsigned long long)i);
    zt_shard_map_close(&m);
    for (uint64_t i = 0; i < h.count; i++) FZ_CHECK(tok[i] < h.vocab_size, "token %u >= vocab %u", tok[i], h.vocab_size);

    zt_shard_writer w;
    fz_path("shard2.bin", path2, sizeof path2);
    err[0] = 0;
    FZ_CHECK(zt_shard_writer_open2(&w, path2, h.vocab_size, h.eot, masked, h.example_len, err, sizeof err) == 0,
             "writer_open: %s", err);
    FZ_CHECK(zt_shard_writer_append_masked(&w, tok, mask, (size_t)h.count, err, sizeof err) == 0, "append: %s", err);
    FZ_CHECK(zt_shard_writer_close(&w, err, sizeof err) == 0, "close: %s", err);
    static const uint8_t zeros[32];
    const size_t reserved = h.version == 1 ? 32 : 40; /* where the reserved bytes start */
    if (w.h.width == h.width && w.h.version == h.version && memcmp(data + reserved, zeros, 64 - reserved) == 0) {
        size_t n2;
        char *back = fz_read(path2, &n2);
        FZ_CHECK(back && n2 == size && memcmp(back, data, size) == 0, "rewritten shard differs from the input");
        free(back);
    }
    free(tok);
    return 0;
}
