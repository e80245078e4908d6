/* data_shard.h — the token shard file format (documented in docs/data.md, "Shard file format").
 *
 * A shard is a 64-byte little-endian header followed by the tokens:
 *   offset 0  char[8]  magic "ZTSHARD\0"
 *   offset 8  uint32   version (1)
 *   offset 12 uint32   bytes per token (2 = uint16, 4 = uint32)
 *   offset 16 uint32   vocab size (every token < vocab size)
 *   offset 20 uint32   end-of-text token id (0xFFFFFFFF = none)
 *   offset 24 uint64   token count
 *   offset 32 char[32] reserved, zero
 *   offset 64          tokens
 * Readers check magic, version, width, that the file size equals 64 + count*width, and (on
 * load) that every token is below the vocab size.
 */
#ifndef ZT_DATA_SHARD_H
#define ZT_DATA_SHARD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define ZT_SHARD_MAGIC "ZTSHARD"
#define ZT_SHARD_VERSION 1u
#define ZT_SHARD_HEADER 64
#define ZT_SHARD_NO_EOT 0xFFFFFFFFu

typedef struct zt_shard_header {
    uint32_t version, width, vocab_size, eot;
    uint64_t count;
} zt_shard_header;

/* streaming writer: open, append any number of times, close (writes the final count) */
typedef struct zt_shard_writer {
    FILE *f;
    char path[512];
    zt_shard_header h;
} zt_shard_writer;

int zt_shard_writer_open(zt_shard_writer *w, const char *path, uint32_t vocab_size, uint32_t eot,
                         char *err, size_t errlen);
int zt_shard_writer_append(zt_shard_writer *w, const uint32_t *tokens, size_t n, char *err, size_t errlen);
int zt_shard_writer_close(zt_shard_writer *w, char *err, size_t errlen);

/* read and check the header (size consistency included) */
int zt_shard_read_header(const char *path, zt_shard_header *h, char *err, size_t errlen);
/* load all tokens as uint32 (malloc'd into *out), validating token < vocab_size */
int zt_shard_load(const char *path, zt_shard_header *h, uint32_t **out, char *err, size_t errlen);

#endif
