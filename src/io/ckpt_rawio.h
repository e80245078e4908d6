/* ckpt_rawio.h — the raw bytes of a checkpoint file, moved at disk speed, in the background for
 * asynchronous checkpoints. ckpt.c lays the file out with HDF5 (metadata only, every dataset
 * allocated); each rank then hands this writer its pieces: (file offset, bytes, source in the
 * backend's memory). The writer copies them into a page-aligned host staging buffer, placing each piece
 * at the same offset modulo 4 KiB as in the file, so a background thread can write the whole 4 KiB
 * blocks inside a piece with O_DIRECT straight from the staging buffer (no page cache: on a 2-core AMD
 * EPYC VM first-touch page-cache pages cost more than the disk) and the partial blocks at its edges,
 * which another rank's piece or HDF5 metadata may share, with an ordinary pwrite. It ends with
 * fdatasync, so the data is durable on this rank's node when the writer reports done.
 *
 * Two modes, one code path:
 *   whole staging (async checkpoints): the buffer holds every piece; start() copies them all (the
 *     snapshot; with host memory the thread copies them, see zt_ckpt_writer_wait_snapshot) and
 *     returns while the thread writes; training goes on and later waits or polls.
 *   bounded staging (synchronous saves): the buffer is smaller than the pieces; start() copies into
 *     one half while the thread writes the other, and returns when everything is written.
 * Where O_DIRECT is refused (tmpfs, some network file systems) everything goes through pwrite.
 * No MPI and no HDF5 in the thread: the caller agrees on success across ranks afterwards. */
#ifndef ZT_CKPT_WRITER_H
#define ZT_CKPT_WRITER_H

#include <stddef.h>
#include <stdint.h>

#include "iface/backend.h"

typedef struct zt_ckpt_piece {
    uint64_t off;        /* file offset */
    size_t bytes;
    const void *src;     /* backend memory (device memory on a GPU) */
    int round;           /* float32 values rounded to this precision (ZT_PREC_*) in staging before they are
                            written (0: as they are) */
} zt_ckpt_piece;

typedef struct zt_ckpt_writer zt_ckpt_writer;

/* staging bytes that hold all of pieces at once (each piece placed at its file offset mod 4 KiB) */
size_t zt_ckpt_writer_whole_bytes(const zt_ckpt_piece *pieces, int n);
/* a writer with `stage_bytes` of page-aligned staging (rounded up; at least 2 x 1 MiB) */
zt_ckpt_writer *zt_ckpt_writer_create(size_t stage_bytes, int direct_io);
/* writes pieces into path (an existing file of sufficient size). If all fit in the staging buffer,
   returns after copying them (the write continues in the background; zt_ckpt_writer_wait ends it);
   otherwise returns when everything is written. Returns 0, or non-zero with err filled (open failed);
   write errors are reported by zt_ckpt_writer_wait. */
int zt_ckpt_writer_start(zt_ckpt_writer *w, zt_backend *be, const char *path, const zt_ckpt_piece *pieces, int n,
                         char *err, size_t errlen);
/* The same with a gate (whole staging only): the file is opened by the thread, after it has taken the
   snapshot and gate(ctx) has returned 0 (rank 0 lays the file out there; the other ranks wait until it is
   laid out); a non-zero gate fails the write with the gate's message. Never fails itself. */
typedef int (*zt_ckpt_gate)(void *ctx, char *err, size_t errlen);
void zt_ckpt_writer_start_gated(zt_ckpt_writer *w, zt_backend *be, const char *path, const zt_ckpt_piece *pieces,
                                int n, zt_ckpt_gate gate, void *gate_ctx);
/* With whole staging and host memory (the cpu backend) start() only plans: the thread copies the
   snapshot before it writes, while the caller computes on. The caller must not change the source
   memory before this returns (the trainer calls it before the optimizer update); returns the seconds
   it waited. Otherwise the copy was done in start() and this returns at once. */
double zt_ckpt_writer_wait_snapshot(zt_ckpt_writer *w);
/* 1 when no write is in flight (never blocks) */
int zt_ckpt_writer_idle(zt_ckpt_writer *w);
/* waits for the write in flight (if any); 0 or non-zero with err naming the file and errno */
int zt_ckpt_writer_wait(zt_ckpt_writer *w, char *err, size_t errlen);
/* the writer's staging buffer (page-aligned; *bytes its size): free for other uses while no write is in
   flight (checkpoint loads read through it) */
char *zt_ckpt_writer_stage(zt_ckpt_writer *w, size_t *bytes);
/* seconds spent copying into staging / in the thread's writes + fdatasync, for the last start() */
void zt_ckpt_writer_times(const zt_ckpt_writer *w, double *stage_s, double *write_s);
void zt_ckpt_writer_destroy(zt_ckpt_writer *w);

/* Reads: each piece's float32 bytes from path into backend memory. direct (the default, checkpoint.direct_io):
   O_DIRECT where the file system allows it, whole 4 KiB blocks in spans of up to 16 MiB (several pieces when
   they lie close together in the file) by four threads, each into its own staging buffer, then copied to the
   destination (memcpy, or to_device on a GPU); otherwise through the page cache in 4 MiB chunks, into host
   memory directly at the destination. Why O_DIRECT: on a 2-core AMD EPYC VM the first use of page-cache
   memory costs more than the disk (a cold read of the same 1.49 GB: O_DIRECT 0.68-0.77 s every time,
   through the page cache 0.65-1.15 s, `dd bs=16M` 0.58-2.47 s; O_DIRECT needs several requests in flight:
   with one it reads at 42% of dd). Each chunk is scanned for NaN/Inf right after its read, while it
   is still in cache (a separate pass over the loaded state costs up to a fifth of the load: 0.36 s of 1.8 s
   for GPT-2 124M + Adam on 1 rank of that VM, and a second device -> host copy on a GPU): the first one found is
   returned in *nf (piece -1: none). `group` and `flat` are the caller's (which buffer, which flat element the
   piece starts at), carried for its message. NOT collective. */
typedef struct zt_ckpt_rpiece {
    uint64_t off;
    size_t bytes;
    void *dst;
    int group;
    size_t flat;
} zt_ckpt_rpiece;
typedef struct zt_ckpt_nonfinite {
    int piece;     /* index into pieces, -1 when every value read is finite */
    size_t elem;   /* float index within the piece */
    float value;
} zt_ckpt_nonfinite;
/* how to read: direct = O_DIRECT where allowed; stage (page-aligned, `bytes`) = staging to use instead of
   allocating (NULL: each reader allocates its own chunk + 8 KiB) */
typedef struct zt_ckpt_rstage {
    int direct;
    char *stage;
    size_t bytes;
} zt_ckpt_rstage;
int zt_ckpt_read_pieces(zt_backend *be, const char *path, const zt_ckpt_rpiece *pieces, int n, const zt_ckpt_rstage *rs,
                        zt_ckpt_nonfinite *nf, char *err, size_t errlen);
/* the same read in the background (host memory only): every reader is a new thread, so the caller can do
   other work (the parameter all-gather) until zt_ckpt_read_join, which returns as zt_ckpt_read_pieces.
   pieces must stay valid until then. NULL with err set when path cannot be opened. */
typedef struct zt_ckpt_reader zt_ckpt_reader;
zt_ckpt_reader *zt_ckpt_read_start(zt_backend *be, const char *path, const zt_ckpt_rpiece *pieces, int n,
                                   const zt_ckpt_rstage *rs, char *err, size_t errlen);
int zt_ckpt_read_join(zt_ckpt_reader *r, zt_ckpt_nonfinite *nf, char *err, size_t errlen);
/* index of the first element of p[0, n) that is NaN or +-Inf, or n (vectorised in blocks of 4096; a block
   with a hit is then searched element by element) */
size_t zt_first_nonfinite(const float *p, size_t n);

#endif
