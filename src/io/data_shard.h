/* data_shard.h — the token shard file format (documented in docs/data.md, "Shard file format").
 *
 * A shard is a 64-byte little-endian header followed by the tokens:
 *   offset 0  char[8]  magic "ZTSHARD\0"
 *   offset 8  uint32   version (1, or 2 when a field below offset 32 is used)
 *   offset 12 uint32   bytes per token (2 = uint16, 4 = uint32)
 *   offset 16 uint32   vocab size (every token < vocab size)
 *   offset 20 uint32   end-of-text token id (0xFFFFFFFF = none)
 *   offset 24 uint64   token count
 *   offset 32 uint32   flags (version 2; bit 0: a loss mask follows the tokens)
 *   offset 36 uint32   example length L (version 2; 0 = one token stream; L > 0: the tokens are examples of
 *                      exactly L tokens each, padded, count a multiple of L)
 *   offset 40 char[24] reserved, zero
 *   offset 64          tokens (count x width bytes)
 *   then, with flag bit 0, the loss mask: count bytes, 1 where the token is a target that counts in the loss
 *                      (the prediction of token i from the tokens before it), 0 where it does not (prompt,
 *                      padding); every byte 0 or 1.
 * A shard without mask and examples is written as version 1, so version-1 readers read it.
 * Readers check magic, version, width, flags, that L divides count, and that the file size equals
 * 64 + count*width (+ count with a mask). Tokens are checked against the vocab size as they are read.
 */
#ifndef ZT_DATA_SHARD_H
#define ZT_DATA_SHARD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define ZT_SHARD_MAGIC "ZTSHARD"
#define ZT_SHARD_VERSION 1u
#define ZT_SHARD_VERSION_2 2u
#define ZT_SHARD_FLAG_MASK 1u
#define ZT_SHARD_HEADER 64
#define ZT_SHARD_NO_EOT 0xFFFFFFFFu

typedef struct zt_shard_header {
    uint32_t version, width, vocab_size, eot;
    uint64_t count;
    uint32_t flags, example_len; /* version 2 (0 in version 1) */
} zt_shard_header;

/* bytes of a shard with header h: 64 + count * width (+ count with a mask); 0 when it overflows */
uint64_t zt_shard_file_bytes(const zt_shard_header *h);

/* streaming writer: open, append any number of times, close (writes the final count) */
typedef struct zt_shard_writer {
    FILE *f;
    FILE *mask;             /* with a mask: the mask bytes until close appends them after the tokens */
    char path[512];
    zt_shard_header h;
} zt_shard_writer;

int zt_shard_writer_open(zt_shard_writer *w, const char *path, uint32_t vocab_size, uint32_t eot,
                         char *err, size_t errlen);
/* with_mask: every append must pass a mask; example_len: 0 = a stream, L > 0 = examples of L tokens
   (close fails unless L divides the count). Both 0: zt_shard_writer_open. */
int zt_shard_writer_open2(zt_shard_writer *w, const char *path, uint32_t vocab_size, uint32_t eot, int with_mask,
                          uint32_t example_len, char *err, size_t errlen);
int zt_shard_writer_append(zt_shard_writer *w, const uint32_t *tokens, size_t n, char *err, size_t errlen);
/* mask: n bytes, 0 or 1 (NULL: all 1); only for a writer opened with a mask */
int zt_shard_writer_append_masked(zt_shard_writer *w, const uint32_t *tokens, const uint8_t *mask, size_t n,
                                  char *err, size_t errlen);
int zt_shard_writer_close(zt_shard_writer *w, char *err, size_t errlen);

/* a shard mapped read-only (mmap): nothing is read until used, so resident memory does not grow with
   the file; tokens are checked against the vocab size by the reader of each window */
typedef struct zt_shard_map {
    zt_shard_header h;
    const uint8_t *base;    /* the whole file */
    size_t len;
    const uint8_t *tokens;  /* base + 64 */
    const uint8_t *mask;    /* NULL without one */
} zt_shard_map;

int zt_shard_map_open(zt_shard_map *m, const char *path, char *err, size_t errlen);
void zt_shard_map_close(zt_shard_map *m);
static inline uint32_t zt_shard_map_token(const zt_shard_map *m, uint64_t i) {
    const uint8_t *p = m->tokens + i * m->h.width;
    return m->h.width == 2 ? (uint32_t)p[0] | (uint32_t)p[1] << 8
                           : (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
/* lets the kernel drop the pages of bytes [off, off + n) of the mapping from this process (they stay in
   the page cache): resident memory stays what the windows in use take */
void zt_shard_map_release(const zt_shard_map *m, uint64_t off, uint64_t n);

/* read and check the header (size consistency included) */
int zt_shard_read_header(const char *path, zt_shard_header *h, char *err, size_t errlen);
/* load all tokens as uint32 (malloc'd into *out), validating token < vocab_size (and the mask's bytes; the
   mask itself is not returned) */
int zt_shard_load(const char *path, zt_shard_header *h, uint32_t **out, char *err, size_t errlen);

#endif
