/* ckpt.h — checkpoints: ONE parallel-HDF5 file per checkpoint, laid out by rank 0
 * (docs/design.md section 5), its raw data written by every rank at once (ckpt_rawio.h: staged O_DIRECT
 * writes, in the background with checkpoint.async). Each rank writes the part of each tensor in
 * its ZeRO shard [lo, hi) (the view below): working parameters (/model/<name>), Adam moments
 * (/optim/exp_avg/<name>, /optim/exp_avg_sq/<name>), and fp32 master weights (/master/<name>)
 * when precision != fp32. Tensors have their true shapes and Hugging Face GPT-2 names, so
 * resuming on any number of ranks is reading other hyperslabs, and h5py/h5dump read the files
 * as they are. Root attributes: format="ztrain", version, step, samples_seen, tokens_seen,
 * world_size, loss_scale, config (resolved config text), created (ISO time), finite = 1 (no NaN/Inf:
 * a state holding any is never written, and a file holding any is refused on load).
 *
 * Files are written as <dir>/step_<8 digits>.h5.tmp, made durable on every rank, marked complete
 * (root attribute complete = 1), flushed and renamed; then
 * <dir>/latest (a one-line text file naming the file) is replaced atomically; then checkpoints
 * beyond `keep` are pruned (never the newest complete one). Incomplete files are ignored.
 *
 * Every function is collective over MPI_COMM_WORLD unless noted, returns 0 on success and
 * otherwise non-zero with ONE line in err (the same on every rank) that names the file and
 * what is wrong (missing tensor, shape mismatch, not a ztrain checkpoint, truncated, ...). */
#ifndef ZT_CKPT_H
#define ZT_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "iface/backend.h"
#include "iface/param_table.h"
#include "io/config.h"
#include "io/data_stream.h"

#define ZT_CKPT_VERSION 1

typedef struct zt_ckpt_meta {
    long step;                  /* optimizer updates done */
    uint64_t samples_seen, tokens_seen;
    int world_size;
    float loss_scale;           /* fp16's dynamic loss scale (1 otherwise) */
    long loss_scale_good;       /* fp16: finite steps since the scale last changed (attr loss_scale_good, 0 if absent) */
    uint64_t seed;
    uint64_t lora_base_hash;    /* LoRA: fingerprint of the frozen base the adapters apply to (attr lora_base_hash; 0: none) */
    int has_stream;             /* data.stream: the stream's position at samples_seen (attrs stream_file, stream_doc,
                                   stream_token, stream_epoch, stream_epoch_first, stream_first_doc; stream.sample is
                                   samples_seen) */
    zt_stream_pos stream;
    char created[32];
    char *config_text;          /* malloc'd on load (free with zt_ckpt_meta_free); borrowed on save */
} zt_ckpt_meta;

/* What a checkpoint writes and reads of a training state: flat buffers in backend memory (staged
   through the host when the backend's memory is not host memory) and the part this rank moves.
   ZeRO fills it (zt_zero_ckpt_view: its shard and moments); a command without optimizer state
   (eval, sample, export, import) fills the model part itself. */
typedef struct zt_ckpt_view {
    const zt_param_table *table;
    const zt_model_shape *shape;
    zt_backend *be;
    float *params;                 /* the flat buffer, `padded` elements (every rank holds it whole) */
    size_t padded;
    size_t lo, hi;                 /* flat elements this rank writes (and reads, with optimizer state) */
    float *exp_avg, *exp_avg_sq;   /* AdamW moments, NULL when there are none: optim_elems elements, */
    size_t optim_base, optim_elems;/* element k of which is flat element optim_base + k */
    float *master;                 /* fp32 master weights (precision bf16/fp16), laid out as the moments;
                                      NULL in fp32, where the parameters are the master copy */
    int model_prec;                /* save, params NULL (2-byte working parameters): /model is written from
                                      master, rounded to this precision (ZT_PREC_*) on the way, which is what the
                                      parameters hold; a load of such a view reads /master (or an fp32 file's
                                      /model) into master only */
    int range_only;                /* load: only the parameters' flat range [lo, hi) (no moments), into params,
                                      which holds flat elements from params_base on (QLoRA reads its base
                                      piece by piece); 0: as above */
    size_t params_base;
    /* load, optional: called once on every rank when the load will succeed as far as the parameters go:
       /model (or /master) read and every rank's read of it done; with host memory and moments to read it
       runs while they are still being read in the background (so the parameter all-gather of ZeRO overlaps
       them). Not called when the load fails before; the load may still fail after it (a moment unreadable
       or non-finite), in which case it returns 1 as usual. */
    void (*params_ready)(void *ctx);
    void *params_ready_ctx;
    int buffered_reads;            /* load: 1 = through the page cache (checkpoint.direct_io = false); 0 = O_DIRECT
                                      where the file system allows it */
    /* load, optional: page-aligned host memory to read through (a training run's idle checkpoint staging,
       zt_ckpt_saver_stage); NULL: the reader allocates its own */
    char *read_stage;
    size_t read_stage_bytes;
} zt_ckpt_view;

/* Save params + (if v->exp_avg) Adam moments of this rank's range. dir is created if needed.
   On success, path_out (may be NULL) receives the final file name. */
int zt_ckpt_save(const char *dir, int keep, const zt_ckpt_meta *meta, const zt_ckpt_view *v,
                 char *path_out, size_t path_len, char *err, size_t errlen);

/* A save in the background (checkpoint.async) or in the foreground through a bounded staging buffer,
   one per training run (no allocation per save). */
typedef struct zt_ckpt_saver zt_ckpt_saver;
/* host staging bytes a saver for this view allocates; the same for a shard of shard_elems elements of
   a model with n_tensors tensors (with optimizer state), for `ztrain estimate` and the memory plan */
size_t zt_ckpt_saver_stage_bytes(const zt_ckpt_view *v, int async);
size_t zt_ckpt_stage_bytes(size_t shard_elems, int n_tensors, int async, int master);
/* NOT collective */
zt_ckpt_saver *zt_ckpt_saver_create(const zt_ckpt_view *v, int async, int direct_io);
/* Starts the save of step meta->step into dir (finishing a save still in flight first). Synchronous
   saver: returns when the file is published (as zt_ckpt_save). Async: returns once this rank's data
   is copied to staging; the caller goes on and later calls zt_ckpt_saver_finish. */
int zt_ckpt_saver_begin(zt_ckpt_saver *s, const char *dir, int keep, const zt_ckpt_meta *meta,
                        const zt_ckpt_view *v, char *path_out, size_t path_len, char *err, size_t errlen);
/* NOT collective: before the parameters or moments change (the optimizer update), wait until the
   pending save's snapshot of them is taken (the cpu backend takes it in the writer thread); returns the
   seconds waited */
double zt_ckpt_saver_wait_snapshot(zt_ckpt_saver *s);
/* NOT collective: 1 while a begun save is not finished, and whether this rank's writes are done */
int zt_ckpt_saver_pending(const zt_ckpt_saver *s);
int zt_ckpt_saver_local_done(zt_ckpt_saver *s);
/* Asynchronous saves after a run's first lay the file out in rank 0's writer thread; the other ranks'
   writers wait until the caller releases them. The trainer agrees every step on rank 0's
   zt_ckpt_saver_layout_pending (1 while its layout runs; 0 on other ranks) and, when no rank reports it,
   calls zt_ckpt_saver_release on every rank (a no-op without such a save). NOT collective. */
int zt_ckpt_saver_layout_pending(zt_ckpt_saver *s);
void zt_ckpt_saver_release(zt_ckpt_saver *s);
/* Waits for every rank's writes, marks the file complete, renames it into place, updates `latest`,
   prunes. A no-op without a pending save. path_out receives the published file. */
int zt_ckpt_saver_finish(zt_ckpt_saver *s, char *path_out, size_t path_len, char *err, size_t errlen);
/* the last save: seconds copying to staging, writing (background thread, incl. fdatasync), and the
   whole time from begin to published */
void zt_ckpt_saver_times(const zt_ckpt_saver *s, double *stage_s, double *write_s, double *total_s);
void zt_ckpt_saver_destroy(zt_ckpt_saver *s);
/* the saver's host staging (page-aligned, *bytes), for a load to read through while no save is pending */
char *zt_ckpt_saver_stage(zt_ckpt_saver *s, size_t *bytes);

/* The collective write of ONE file at exactly `path` (used by zt_ckpt_save on <dir>/step_N.h5.tmp,
   and by `ztrain import`): no rename, no `latest`, no pruning. meta->created "" = now (rank 0's clock). */
int zt_ckpt_write(const char *path, const zt_ckpt_meta *meta, const zt_ckpt_view *v, char *err,
                  size_t errlen);

/* Newest complete checkpoint in dir (via `latest`, falling back to scanning step_*.h5 files that
   open as complete ztrain checkpoints). NOT collective. Returns 0 and the path, or non-zero. */
int zt_ckpt_find_latest(const char *dir, char *path, size_t n);
/* The same search for --resume auto, telling the cases apart (NOT collective): 0 and the path (any
   damaged step files newer than it listed in skipped as "name (why), ...", "" if none); 1 when dir
   holds no step_*.h5 file at all (a new run starts at step 0); 2 when it holds step files but none is
   usable (truncated, not HDF5, incomplete, negative step, marked non-finite): err is one line naming
   each with why, and the caller must refuse (starting over would overwrite them). */
int zt_ckpt_find_resume(const char *dir, char *path, size_t n, char *skipped, size_t skn, char *err, size_t errlen);

/* Read only the root attributes (meta.config_text allocated). NOT collective. */
int zt_ckpt_read_meta(const char *path, zt_ckpt_meta *meta, char *err, size_t errlen);

/* Load into the view's buffers: with optimizer state (v->exp_avg) this rank's range [lo, hi) of the
   parameters and its moments (the caller then gathers the rest: zt_zero_after_load); without, the
   whole parameters on every rank. Checks format, version, every tensor's presence and shape
   against v->table. */
int zt_ckpt_load(const char *path, zt_ckpt_meta *meta, const zt_ckpt_view *v, char *err, size_t errlen);

void zt_ckpt_meta_free(zt_ckpt_meta *meta);

/* What may change on resume (rank count, micro_batch for the same global batch, train.steps,
   checkpoint/eval/log cadence, run names, threads, data paths): returns 0 and appends a
   human-readable list of changes to log (may be empty); anything else: non-zero, err names
   the first key that differs and says why it cannot change. NOT collective. */
int zt_ckpt_check_resume(const char *saved_config_text, const zt_config *now, char *log, size_t loglen,
                         char *err, size_t errlen);

#endif
