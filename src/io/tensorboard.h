/* tensorboard.h — TensorBoard event files written in plain C: TFRecord framing (length, masked
 * CRC32C of the length, data, masked CRC32C of the data) around hand-encoded protobuf Event
 * messages (wall_time, step, file_version "brain.Event:2" in the first record, or a Summary of
 * simple_value scalars). No TensorFlow or protobuf library. Rank 0 only (the caller decides). */
#ifndef ZT_TENSORBOARD_H
#define ZT_TENSORBOARD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct zt_tb {
    FILE *f;
    char path[1200];
} zt_tb;

typedef struct zt_tb_scalar {
    const char *tag;   /* "train/loss" */
    float value;
} zt_tb_scalar;

/* Creates dir/events.out.tfevents.<unix time>.<host>.<pid> (a new file per process: TensorBoard
   merges the files of one directory, so a resumed run appends a new file whose steps continue; the
   time is raised past any earlier file's so that names sort in order)
   and writes the file_version record. Returns 0, or non-zero with a message. */
int zt_tb_open(zt_tb *tb, const char *dir, char *err, size_t errlen);
/* one Event at `step` holding n scalars; flushed to the file */
int zt_tb_scalars(zt_tb *tb, long step, const zt_tb_scalar *v, int n);
void zt_tb_close(zt_tb *tb);

/* CRC32C (Castagnoli) and TFRecord's mask ((crc >> 15) | (crc << 17)) + 0xa282ead8 */
uint32_t zt_crc32c(const void *data, size_t n);
uint32_t zt_tb_masked_crc(const void *data, size_t n);

#endif
