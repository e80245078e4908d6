/* safetensors.h — the Hugging Face safetensors format, read and written by ztrain itself (the
 * header is read with util/json).
 *
 * Format: 8-byte little-endian header length N; N bytes of JSON
 *   {"<name>": {"dtype": "F32", "shape": [d0, d1], "data_offsets": [begin, end]}, ...,
 *    "__metadata__": {"format": "pt"}}
 * (padded with spaces so the data starts 8-byte aligned); then the raw little-endian tensor bytes,
 * offsets relative to the end of the header, back to back without holes. */
#ifndef ZT_SAFETENSORS_H
#define ZT_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>


/* ---------------------------------------------------------------- reading */

typedef struct zt_st_tensor {
    char name[128];
    char dtype[8];            /* "F32", "F16", "BF16", "F64", ... as in the file */
    int ndim;
    int64_t shape[4];
    uint64_t begin, end;      /* bytes, relative to the data start */
} zt_st_tensor;

typedef struct zt_st_file {
    FILE *f;
    char path[1024];
    int n;
    zt_st_tensor *t;
    uint64_t data_start, data_len;
} zt_st_file;

/* opens and validates the header (sizes, dtypes, offsets inside the file). 0 or err. */
int zt_st_open(zt_st_file *sf, const char *path, char *err, size_t errlen);
void zt_st_close(zt_st_file *sf);
/* tensor by exact name, or NULL */
const zt_st_tensor *zt_st_find(const zt_st_file *sf, const char *name);
/* elements of a tensor (product of its shape) */
uint64_t zt_st_numel(const zt_st_tensor *t);
/* the tensor as float32 (F32 as is; F16, BF16 and F64 converted) into out (numel floats) */
int zt_st_read_f32(zt_st_file *sf, const zt_st_tensor *t, float *out, char *err, size_t errlen);

/* ---------------------------------------------------------------- writing (F32) */

typedef struct zt_st_entry {
    const char *name;
    int ndim;
    int64_t shape[2];
} zt_st_entry;

/* writes path (via path.tmp + rename): the header for the n entries, then for each entry i the
   floats data(ctx, i) returns (numel of entry i; NULL = error). 0 or err. */
int zt_st_write(const char *path, int n, const zt_st_entry *e, const float *(*data)(void *ctx, int i), void *ctx,
                char *err, size_t errlen);

#endif
