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

/* ---------------------------------------------------------------- writing */

/* the element types ztrain writes: float32 as is, or rounded to nearest even (op_math.h's
   zt_f32_to_bf16_bits / zt_f32_to_fp16_bits, the GPU's __float2bfloat16_rn / __float2half_rn) */
typedef enum zt_st_dtype { ZT_ST_F32, ZT_ST_BF16, ZT_ST_F16 } zt_st_dtype;

/* the header's spelling: "F32", "BF16", "F16" */
const char *zt_st_dtype_name(zt_st_dtype dt);
/* bytes per element: 4 or 2 */
int zt_st_dtype_size(zt_st_dtype dt);

typedef struct zt_st_entry {
    const char *name;
    int ndim;
    int64_t shape[2];
} zt_st_entry;

/* 0 when every finite value of x (entry e's numel floats) stays finite in dt; else 1 with
   "tensor NAME[i, j] = VALUE is outside float16's range (...)" in err, for the first that would
   round to Inf (F16: |x| >= 65520; BF16: |x| >= 0x1.ffp127 ~ 3.39e38; F32: never) */
int zt_st_check_range(zt_st_dtype dt, const zt_st_entry *e, const float *x, char *err, size_t errlen);

/* writes path via path.tmp + rename (on failure path is as it was and path.tmp is removed): the
   header for the n entries, then for each entry i the floats data(ctx, i) returns (numel of entry i;
   NULL = error), converted to dt. A finite value that dt cannot hold fails as zt_st_check_range
   says. 0 or err. */
int zt_st_write_as(const char *path, zt_st_dtype dt, int n, const zt_st_entry *e,
                   const float *(*data)(void *ctx, int i), void *ctx, char *err, size_t errlen);
/* zt_st_write_as(path, ZT_ST_F32, ...) */
int zt_st_write(const char *path, int n, const zt_st_entry *e, const float *(*data)(void *ctx, int i), void *ctx,
                char *err, size_t errlen);

/* the tensors as transformers' save_pretrained lays them out in directory dir: model.safetensors, or, when they
   hold more than max_shard bytes, model-0000k-of-0000n.safetensors (the entries in order; a file ends before
   the entry that would take it past max_shard, a larger entry has a file of its own) and
   model.safetensors.index.json ({"metadata": {"total_size": bytes}, "weight_map": {name: file}}), written
   last. The other layout's entry point left in dir by an earlier write (model.safetensors would shadow the
   index in transformers' loader, a stale index would contradict model.safetensors) is removed. *n_files:
   the .safetensors files written. 0 or err. */
int zt_st_write_pretrained(const char *dir, zt_st_dtype dt, int n, const zt_st_entry *e,
                           const float *(*data)(void *ctx, int i), void *ctx, uint64_t max_shard, int *n_files,
                           char *err, size_t errlen);
/* a size as transformers' max_shard_size spells it: "5GB" (10^9), "500MB", "2GiB" (2^30), "100KiB", or a byte
   count ("1000", "1000B"); case-insensitive. Bytes, or 0 when it does not parse */
uint64_t zt_st_parse_size(const char *s);

#endif
