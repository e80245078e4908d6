/* metrics.h — what a run reports (rank 0 only): the run directory, one status line per step
 * (drawn by util/progress: a bar on a terminal, plain log lines otherwise), metrics.jsonl (one
 * object per step), results.json, and the SHA-256 fingerprint of a buffer. Every other rank calls
 * these as no-ops.
 *
 * The run directory is owned by one run at a time: rank 0 holds RUN_DIR/run.lock ("host H pid P
 * since T", and an flock on it) from zt_metrics_open to zt_metrics_close or process exit. A second
 * run opening the same directory (--resume) is refused with a line naming the owner; a lock left by
 * a process that is gone (its flock released: killed, crashed) is taken over with a note. Nothing
 * in the directory is created before it can be filled: metrics.jsonl appears with the first step's
 * line, other files (results.json, config.cfg) are written whole, atomically (zt_metrics_write). */
#ifndef ZT_METRICS_H
#define ZT_METRICS_H

#include <stddef.h>
#include <stdio.h>

#include "io/tensorboard.h"
#include "util/progress.h"

typedef struct zt_step_metrics {
    long step, steps;
    double loss, lr, grad_norm;
    double tokens_per_s, gflops, frac_peak;   /* frac_peak: achieved / measured sgemm peak, or <0 */
    double step_ms;
    double mem_bytes;
    double val_loss;                          /* < 0: not evaluated this step */
    double gpu_mem_bytes, gpu_util;           /* rank 0's GPU (NVML): bytes in use, percent; < 0: unknown */
    double ckpt_stall_s;                      /* seconds this step waited for checkpointing; < 0: none */
    double loss_scale;                        /* fp16: the loss scale the step used; 0: not fp16 */
    int skipped;                              /* fp16: the step's gradients overflowed, no update was made */
    double update_ms;                         /* of step_ms: gradient norm + optimizer update + parameter
                                                 all-gather (after the last micro-batch's reduction) */
    double mlm_acc, val_mlm_acc;              /* masked LM (encoders): the step's and (when evaluated) the validation
                                                 set's accuracy on the masked positions; < 0: none */
} zt_step_metrics;

typedef struct zt_metrics {
    int active;           /* rank 0 */
    zt_progress bar;      /* stdout: the step line, its clock (ETA) */
    char dir[1024];       /* run directory */
    FILE *jsonl;
    zt_tb tb;             /* TensorBoard events (metrics.tensorboard) */
    int tb_state;         /* 0: not told (read config.cfg at the first step), 1: on, -1: off */
    int lock_fd;          /* run.lock, held (flock) while the run owns the directory; -1 none */
    int write_warned;     /* metrics.jsonl: a failed write was reported */
} zt_metrics;

/* Creates root/session/name (name, name-1, name-2, ... if taken, unless reuse) and takes its lock
   (see above). rank 0 only; session and name must be plain directory names. Returns 0, or
   non-zero with a message (the directory is in use, cannot be created, ...). */
int zt_metrics_open(zt_metrics *mx, int active, const char *root, const char *session, const char *name,
                    int reuse, char *err, size_t errlen);
/* Each step goes to metrics.jsonl, the status line and, with metrics.tensorboard, to a TensorBoard
   event file in the run directory (scalars train/loss, train/lr, train/grad_norm, train/tokens_per_s,
   train/mem_bytes, val/loss), flushed together. */
void zt_metrics_step(zt_metrics *mx, const zt_step_metrics *s);
/* metrics.tensorboard of the run's config (train sets it after opening the run; off until then) */
void zt_metrics_set_tensorboard(zt_metrics *mx, int on);
/* a line that must not be garbled by the bar */
void zt_metrics_note(zt_metrics *mx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* closes the files and releases the run directory's lock */
void zt_metrics_close(zt_metrics *mx);
/* writes `file` in the run directory whole and atomically (tmp + fsync + rename): e.g. config.cfg.
   0, or non-zero with a message. */
int zt_metrics_write(const zt_metrics *mx, const char *file, const void *data, size_t len, char *err, size_t errlen);
/* resuming at `step`: drop metrics.jsonl lines of later steps (a run that went past its last
   checkpoint before it died), so every step appears once */
void zt_metrics_truncate(zt_metrics *mx, long step);
/* path inside the run directory */
void zt_metrics_path(const zt_metrics *mx, const char *file, char *out, size_t n);

/* hex SHA-256 of bytes (65 chars with NUL) */
void zt_sha256_hex(const void *data, size_t n, char out[65]);
/* incremental form: begin, update any number of times, end (writes the hex and frees the state) */
void *zt_sha256_begin(void);
void zt_sha256_update(void *state, const void *data, size_t n);
void zt_sha256_end(void *state, char out[65]);
/* JSON string escape into out */
void zt_json_escape(const char *in, char *out, size_t n);

#endif
