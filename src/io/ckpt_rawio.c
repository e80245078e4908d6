/* ckpt_rawio.c — a rank's checkpoint pieces at disk speed (see ckpt_rawio.h): staged O_DIRECT writes by
 * a background thread, and reads by a few threads (O_DIRECT spans of up to 16 MiB through staging, or the page
 * cache) that check each chunk for NaN/Inf while it is hot. */
#define _GNU_SOURCE
#include "io/ckpt_rawio.h"

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "iface/op_math.h"
#include "util/util.h"

#define BLK ((uint64_t)4096)
#define MIN_STAGE ((size_t)2 << 20)

static uint64_t up(uint64_t x) { return (x + BLK - 1) & ~(BLK - 1); }
static uint64_t down(uint64_t x) { return x & ~(BLK - 1); }

typedef struct seg {
    uint64_t off;
    size_t bytes;
    char *p;         /* in staging, p % BLK == off % BLK */
    const char *src; /* host memory still to copy into p by the thread (snapshot in the thread), or NULL */
    int round;       /* the piece's zt_ckpt_piece.round: the thread rounds the staged floats before writing */
} seg;

typedef struct slot {
    seg *s;
    int n, cap;
    int posted; /* handed to the thread, not yet written */
} slot;

struct zt_ckpt_writer {
    char *stage;
    size_t cap;
    int direct_io;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    slot slots[2];
    int next;         /* the slot the thread writes next */
    int busy;         /* a start() whose data is not yet durable */
    int copying;      /* the thread is still copying the snapshot (host memory backends, whole staging) */
    int closing;      /* every slot of the job is posted */
    int quit;
    int fd_direct, fd_buf;
    int err_no;       /* first write error of the job */
    const char *err_op;
    zt_ckpt_gate gate;/* a gated job: the thread opens the file once gate(gate_ctx) passed */
    void *gate_ctx;
    char gate_err[ZT_ERR_BUF]; /* the gate's message (err_no -1) */
    char path[4096];
    int delay_ms;     /* ZTRAIN_CKPT_TEST_DELAY_MS: the thread sleeps before each slot (fault-injection tests) */
    double stage_s, write_s, t_first;
};

/* whole write of [p, p + n) at off; 0 or errno */
static int pwrite_all(int fd, const char *p, size_t n, uint64_t off) {
    while (n > 0) {
        ssize_t w = pwrite(fd, p, n, (off_t)off);
        if (w < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        if (w == 0) return EIO;
        p += w;
        n -= (size_t)w;
        off += (uint64_t)w;
    }
    return 0;
}

/* one segment: its whole 4 KiB blocks with O_DIRECT, the partial ones at the edges buffered */
static int write_seg(zt_ckpt_writer *w, const seg *s) {
    const uint64_t end = s->off + s->bytes, a = up(s->off), b = down(end);
    if (w->fd_direct < 0 || b <= a) return pwrite_all(w->fd_buf, s->p, s->bytes, s->off);
    int rc = 0;
    if (a > s->off) rc = pwrite_all(w->fd_buf, s->p, a - s->off, s->off);
    if (!rc) {
        rc = pwrite_all(w->fd_direct, s->p + (a - s->off), b - a, a);
        if (rc == EINVAL) { /* the file system wants other alignment: buffered from here on */
            close(w->fd_direct);
            w->fd_direct = -1;
            rc = pwrite_all(w->fd_buf, s->p + (a - s->off), b - a, a);
        }
    }
    if (!rc && end > b) rc = pwrite_all(w->fd_buf, s->p + (b - s->off), end - b, b);
    return rc;
}

/* opens the job's file (O_DIRECT too where allowed); 0 or errno */
static int open_job(zt_ckpt_writer *w) {
    w->fd_buf = open(w->path, O_WRONLY);
    if (w->fd_buf < 0) return errno;
    w->fd_direct = w->direct_io ? open(w->path, O_WRONLY | O_DIRECT) : -1; /* refused (EINVAL): buffered */
    return 0;
}

/* a gated job, in the thread: the gate, then the file; 0, or the job has failed (err_no set) */
static int pass_gate(zt_ckpt_writer *w) {
    if (!w->gate) return 0;
    const zt_ckpt_gate gate = w->gate;
    w->gate = NULL;
    int rc = gate(w->gate_ctx, w->gate_err, sizeof w->gate_err) ? -1 : open_job(w);
    if (!rc) return 0;
    pthread_mutex_lock(&w->mu);
    if (!w->err_no) { w->err_no = rc; w->err_op = "open"; }
    pthread_mutex_unlock(&w->mu);
    return 1;
}

/* a seg of float32 values (pieces start on a float and are cut on 4 KiB boundaries) rounded in place */
static void round_staged(seg *sg) {
    float *x = (float *)sg->p;
    const size_t n = sg->bytes / sizeof(float);
    for (size_t i = 0; i < n; i++) x[i] = zt_round_prec(x[i], sg->round);
}

static void *thread_main(void *arg) {
    zt_ckpt_writer *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->quit && !w->slots[w->next].posted && !(w->busy && w->closing)) pthread_cond_wait(&w->cv, &w->mu);
        if (w->quit) break;
        slot *sl = &w->slots[w->next];
        if (sl->posted) {
            pthread_mutex_unlock(&w->mu);
            int rc = 0;
            if (sl->n > 0 && sl->s[0].src) { /* the snapshot first: the caller's next update waits for it */
                double c0 = zt_now();
                for (int i = 0; i < sl->n; i++) {
                    memcpy(sl->s[i].p, sl->s[i].src, sl->s[i].bytes);
                    sl->s[i].src = NULL;
                }
                pthread_mutex_lock(&w->mu);
                w->stage_s = zt_now() - c0;
                w->copying = 0;
                pthread_cond_broadcast(&w->cv);
                pthread_mutex_unlock(&w->mu);
            }
            pass_gate(w); /* a gated job's file exists from here on */
            if (w->delay_ms > 0) usleep((useconds_t)w->delay_ms * 1000);
            for (int i = 0; i < sl->n; i++) /* the slot is staged (copied, and synced from a device) */
                if (sl->s[i].round) round_staged(&sl->s[i]);
            for (int i = 0; i < sl->n && !w->err_no && !rc; i++) rc = write_seg(w, &sl->s[i]);
            pthread_mutex_lock(&w->mu);
            if (rc && !w->err_no) { w->err_no = rc; w->err_op = "write"; }
            sl->posted = 0;
            sl->n = 0;
            w->next ^= 1;
            pthread_cond_broadcast(&w->cv);
            continue;
        }
        /* closing and every slot written: make it durable, close */
        pthread_mutex_unlock(&w->mu);
        pass_gate(w); /* a job without pieces still passes its gate */
        int rc = 0;
        if (w->fd_buf >= 0) {
            rc = fdatasync(w->fd_buf) != 0 ? errno : 0;
            if (w->fd_direct >= 0 && !rc && fdatasync(w->fd_direct) != 0) rc = errno;
            if (w->fd_direct >= 0) close(w->fd_direct);
            if (close(w->fd_buf) != 0 && !rc) rc = errno;
        }
        double done = zt_now();
        pthread_mutex_lock(&w->mu);
        if (rc && !w->err_no) { w->err_no = rc; w->err_op = "fdatasync"; }
        w->fd_direct = w->fd_buf = -1;
        w->write_s = done - w->t_first;
        w->busy = 0;
        w->closing = 0;
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

size_t zt_ckpt_writer_whole_bytes(const zt_ckpt_piece *pieces, int n) {
    uint64_t pos = 0;
    for (int i = 0; i < n; i++) pos = up(pos) + pieces[i].off % BLK + pieces[i].bytes;
    return (size_t)up(pos);
}

zt_ckpt_writer *zt_ckpt_writer_create(size_t stage_bytes, int direct_io) {
    zt_ckpt_writer *w = zt_calloc(1, sizeof *w);
    w->cap = (size_t)up(stage_bytes < MIN_STAGE ? MIN_STAGE : stage_bytes);
    if (posix_memalign((void **)&w->stage, BLK, w->cap) != 0)
        zt_user_error("out of memory: checkpoint staging buffer of %zu bytes", w->cap);
    memset(w->stage, 0, w->cap); /* touched now, at start-up, not during the first save */
    w->direct_io = direct_io;
    const char *delay = getenv("ZTRAIN_CKPT_TEST_DELAY_MS");
    w->delay_ms = delay ? atoi(delay) : 0;
    w->fd_direct = w->fd_buf = -1;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    if (pthread_create(&w->th, NULL, thread_main, w) != 0) zt_panic(__FILE__, __LINE__, "cannot start the checkpoint writer thread");
    return w;
}

static void post(zt_ckpt_writer *w, int k) {
    pthread_mutex_lock(&w->mu);
    w->slots[k].posted = 1;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static void wait_free(zt_ckpt_writer *w, int k) {
    pthread_mutex_lock(&w->mu);
    while (w->slots[k].posted) pthread_cond_wait(&w->cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
}

static int start(zt_ckpt_writer *w, zt_backend *be, const char *path, const zt_ckpt_piece *pieces, int n,
                 zt_ckpt_gate gate, void *gate_ctx, char *err, size_t errlen) {
    char e[ZT_ERR_BUF];
    if (zt_ckpt_writer_wait(w, e, sizeof e)) { /* a previous job's error was not collected */ }
    snprintf(w->path, sizeof w->path, "%s", path);
    const size_t whole = zt_ckpt_writer_whole_bytes(pieces, n);
    const int all_at_once = whole <= w->cap;
    ZT_ASSERT(!gate || all_at_once);
    w->gate = gate;
    w->gate_ctx = gate_ctx;
    w->gate_err[0] = 0;
    int rc = gate ? 0 : open_job(w);
    if (rc) return zt_errf(err, errlen, "cannot write checkpoint %s: %s", path, strerror(rc));
    const size_t half = all_at_once ? w->cap : (size_t)down(w->cap / 2);
    /* host memory, all at once: the thread takes the snapshot itself while the caller computes on */
    const int thread_copy = all_at_once && be->i->mem == ZT_MEM_HOST;
    double t0 = zt_now();
    pthread_mutex_lock(&w->mu);
    w->busy = 1;
    w->closing = 0;
    w->err_no = 0;
    w->err_op = NULL;
    w->next = 0;
    w->t_first = t0;
    pthread_mutex_unlock(&w->mu);
    int k = 0;
    uint64_t pos = 0;
    for (int i = 0; i < n; i++) {
        uint64_t off = pieces[i].off;
        const char *src = pieces[i].src;
        size_t left = pieces[i].bytes;
        while (left > 0) {
            uint64_t start = up(pos) + off % BLK;
            if (start + 2 * BLK > half) { /* this half is full: hand it over, take the other */
                be->i->sync(be);
                post(w, k);
                k ^= 1;
                wait_free(w, k);
                pos = 0;
                continue;
            }
            size_t take = half - start < left ? (size_t)(half - start) : left;
            if (take < left) take = (size_t)(down(off + take) - off); /* cut on a block boundary */
            slot *sl = &w->slots[k];
            if (sl->n == sl->cap) {
                sl->cap = sl->cap ? 2 * sl->cap : 64;
                sl->s = zt_realloc(sl->s, (size_t)sl->cap * sizeof *sl->s);
            }
            char *dst = w->stage + (k ? half : 0) + start;
            if (!thread_copy) be->i->to_host(be, dst, src, take);
            sl->s[sl->n++] = (seg){off, take, dst, thread_copy ? src : NULL, pieces[i].round};
            pos = start + take;
            off += take;
            src += take;
            left -= take;
        }
    }
    be->i->sync(be);
    pthread_mutex_lock(&w->mu);
    w->stage_s = zt_now() - t0;
    w->copying = thread_copy && w->slots[k].n > 0;
    if (w->slots[k].n > 0) w->slots[k].posted = 1;
    w->closing = 1;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    if (!all_at_once) return zt_ckpt_writer_wait(w, err, errlen);
    return 0;
}

int zt_ckpt_writer_start(zt_ckpt_writer *w, zt_backend *be, const char *path, const zt_ckpt_piece *pieces, int n,
                         char *err, size_t errlen) {
    return start(w, be, path, pieces, n, NULL, NULL, err, errlen);
}

void zt_ckpt_writer_start_gated(zt_ckpt_writer *w, zt_backend *be, const char *path, const zt_ckpt_piece *pieces,
                                int n, zt_ckpt_gate gate, void *gate_ctx) {
    char e[ZT_ERR_BUF];
    start(w, be, path, pieces, n, gate, gate_ctx, e, sizeof e);
}

double zt_ckpt_writer_wait_snapshot(zt_ckpt_writer *w) {
    double t0 = zt_now();
    pthread_mutex_lock(&w->mu);
    while (w->copying) pthread_cond_wait(&w->cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
    return zt_now() - t0;
}

int zt_ckpt_writer_idle(zt_ckpt_writer *w) {
    pthread_mutex_lock(&w->mu);
    int idle = !w->busy;
    pthread_mutex_unlock(&w->mu);
    return idle;
}

int zt_ckpt_writer_wait(zt_ckpt_writer *w, char *err, size_t errlen) {
    pthread_mutex_lock(&w->mu);
    while (w->busy) pthread_cond_wait(&w->cv, &w->mu);
    int e = w->err_no;
    const char *op = w->err_op;
    w->err_no = 0;
    pthread_mutex_unlock(&w->mu);
    if (!e) return 0;
    if (e < 0) return zt_errf(err, errlen, "%s", w->gate_err);
    return zt_errf(err, errlen, "cannot write checkpoint %s: %s: %s", w->path, op ? op : "write", strerror(e));
}

char *zt_ckpt_writer_stage(zt_ckpt_writer *w, size_t *bytes) {
    *bytes = w->cap;
    return w->stage;
}

void zt_ckpt_writer_times(const zt_ckpt_writer *w, double *stage_s, double *write_s) {
    if (stage_s) *stage_s = w->stage_s;
    if (write_s) *write_s = w->write_s;
}

void zt_ckpt_writer_destroy(zt_ckpt_writer *w) {
    if (!w) return;
    char e[ZT_ERR_BUF];
    zt_ckpt_writer_wait(w, e, sizeof e);
    pthread_mutex_lock(&w->mu);
    w->quit = 1;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->th, NULL);
    for (int k = 0; k < 2; k++) free(w->slots[k].s);
    free(w->stage);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w);
}

/* ---------------------------------------------------------------- reads */

/* reads. With O_DIRECT (the default where the file system allows it) four threads per rank each read whole
   4 KiB blocks covering a span into page-aligned staging, check it there for NaN/Inf and copy it to its
   destination: no page cache, whose first-touch pages cost a 2-core AMD EPYC VM more than the disk (the
   same 1.49 GB file, cold: O_DIRECT 0.68-0.77 s every time, page cache 0.65-1.15 s, `dd bs=16M` 0.58-2.47 s;
   4 threads read faster than 2 in bench_ckpt, 0.81-0.89 s against 1.02-1.09 s). Buffered (direct_io off, or
   refused): 4 MiB chunks through the page cache straight into the destination (host memory) by two threads,
   so one thread's copy overlaps the other's wait for the disk (1 rank: 86% of dd with one thread, 93% with
   two). */
#define READ_CHUNK ((size_t)4 << 20)
#define READ_CHUNK_DIRECT ((size_t)16 << 20)
#define READ_THREADS 2
#define READ_THREADS_DIRECT 4
/* whole read of [p, p + n) at off; returns bytes read (short only at end of file) or -errno. O_DIRECT (blk
   4096): a read that ends off a block boundary ended at the end of the file (asking again there would be
   refused as unaligned) */
static ssize_t pread_all(int fd, char *p, size_t n, uint64_t off, uint64_t blk) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, p + got, n - got, (off_t)(off + got));
        if (r < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        if (r == 0) break;
        got += (size_t)r;
        if ((uint64_t)r % blk) break;
    }
    return (ssize_t)got;
}

size_t zt_first_nonfinite(const float *p, size_t n) {
    for (size_t b = 0; b < n; b += 4096) {
        const size_t e = n - b < 4096 ? n : b + 4096;
        int hit = 0;
        for (size_t i = b; i < e; i++) hit |= !(fabsf(p[i]) <= FLT_MAX);
        if (hit)
            for (size_t i = b; i < e; i++)
                if (!(fabsf(p[i]) <= FLT_MAX)) return i;
    }
    return n;
}

/* reads by one or more threads: each takes the next span of the file, preads it, scans it and copies it on.
   O_DIRECT: a span is up to one chunk of file bytes covering the rest of a piece and as many following
   pieces as fit (pieces within SPAN_GAP of each other: tensors of one group lie back to back in the file,
   apart from alignment and HDF5 headers), read as whole blocks into the thread's staging buffer and copied
   to each piece's destination (memcpy or to_device): per-tensor requests averaged 3 MB for GPT-2 124M and
   this disk wants 16 MiB (a cold 1.49 GB read by 4 threads: 0.64-0.73 s in 16 MiB requests, 0.87-1.26 s in
   4 MiB ones). Buffered, host memory: one chunk of one piece straight into its destination; buffered, device
   memory: into staging. The first non-finite value in (piece, element) order wins. */
#define SPAN_GAP ((uint64_t)64 << 10)
#define SPAN_SEGS 64
typedef struct rjob {
    const zt_ckpt_rpiece *pieces;
    int n, fd, fd_direct; /* fd_direct -1: buffered */
    zt_backend *be;
    size_t chunk;
    int host;
    char *shared;     /* the caller's staging, cut in slices of `slice` bytes (one per reader), or NULL */
    size_t slice;
    int next_slice;
    pthread_mutex_t mu;
    int piece;        /* next bytes to hand out: piece index and byte offset in it */
    size_t done;
    int err_no, truncated;
    uint64_t trunc_at;
    zt_ckpt_nonfinite nf;
} rjob;

typedef struct rseg { int i; size_t at, take; } rseg; /* bytes [at, at + take) of piece i */

/* under j->mu: the next span, as segments (0: nothing left); direct: several pieces, otherwise one */
static int next_span(rjob *j, int direct, rseg *sg) {
    int ns = 0;
    uint64_t start = 0, end = 0;
    while (ns < SPAN_SEGS) {
        while (j->piece < j->n && j->done >= j->pieces[j->piece].bytes) { j->piece++; j->done = 0; }
        if (j->piece >= j->n) break;
        const zt_ckpt_rpiece *p = &j->pieces[j->piece];
        const uint64_t off = p->off + j->done;
        if (ns && (!direct || off < end || off - end > SPAN_GAP || off - start >= j->chunk)) break;
        if (!ns) start = off;
        const size_t room = (size_t)(start + j->chunk - off), left = p->bytes - j->done;
        const size_t take = left < room ? left : room;
        sg[ns++] = (rseg){j->piece, j->done, take};
        j->done += take;
        end = off + take;
        if (take < left) break; /* the chunk is full */
    }
    return ns;
}

/* one segment's bytes are in buf (got of take, or got < 0: an error): scans them, copies them to their
   destination if buf is not it, and records the outcome; returns 0 when the thread should go on */
static int finish_seg(rjob *j, const rseg *s, char *buf, ssize_t got) {
    const zt_ckpt_rpiece *p = &j->pieces[s->i];
    char *dst = (char *)p->dst + s->at;
    const size_t k = got > 0 ? (size_t)got / sizeof(float) : 0, bad = zt_first_nonfinite((const float *)buf, k);
    if ((size_t)got == s->take && buf != dst) {
        if (j->host) memcpy(dst, buf, s->take);
        else j->be->i->to_device(j->be, dst, buf, s->take);
    }
    pthread_mutex_lock(&j->mu);
    if (got < 0) { if (!j->err_no) j->err_no = (int)-got; }
    else if ((size_t)got < s->take) { j->truncated = 1; j->trunc_at = p->off + s->at + (uint64_t)got; }
    const size_t e = s->at / sizeof(float) + bad;
    if (bad < k && (j->nf.piece < 0 || s->i < j->nf.piece || (s->i == j->nf.piece && e < j->nf.elem)))
        j->nf = (zt_ckpt_nonfinite){s->i, e, ((const float *)buf)[bad]};
    pthread_mutex_unlock(&j->mu);
    return got < 0 || (size_t)got < s->take;
}

static void *read_thread(void *arg) {
    rjob *j = arg;
    char *stage = NULL; /* this thread's: O_DIRECT blocks, or device memory's staging */
    rseg sg[SPAN_SEGS];
    for (;;) {
        pthread_mutex_lock(&j->mu);
        int fdd = j->fd_direct;
        const int ns = j->err_no || j->truncated ? 0 : next_span(j, fdd >= 0, sg);
        pthread_mutex_unlock(&j->mu);
        if (!ns) break;
        if (!stage && (fdd >= 0 || !j->host)) {
            if (j->shared) {
                pthread_mutex_lock(&j->mu);
                stage = j->shared + (size_t)j->next_slice++ * j->slice;
                pthread_mutex_unlock(&j->mu);
            } else if (posix_memalign((void **)&stage, BLK, j->chunk + 2 * BLK) != 0)
                zt_panic(__FILE__, __LINE__, "out of memory for a checkpoint read buffer");
        }
        /* O_DIRECT: the whole blocks around the span, file offset x at stage + (x - a) */
        const uint64_t first = j->pieces[sg[0].i].off + sg[0].at, a = down(first);
        ssize_t r = 0;
        if (fdd >= 0) {
            const zt_ckpt_rpiece *lp = &j->pieces[sg[ns - 1].i];
            r = pread_all(fdd, stage, (size_t)(up(lp->off + sg[ns - 1].at + sg[ns - 1].take) - a), a, BLK);
            if (r == -EINVAL) { /* the file system wants another alignment: buffered from here on (the
                                   descriptor stays open until the join) */
                pthread_mutex_lock(&j->mu);
                j->fd_direct = -1;
                pthread_mutex_unlock(&j->mu);
                fdd = -1;
            }
        }
        int stop = 0;
        for (int q = 0; q < ns && !stop; q++) {
            const rseg *s = &sg[q];
            const uint64_t off = j->pieces[s->i].off + s->at;
            char *buf;
            ssize_t got;
            if (fdd >= 0) {
                buf = stage + (off - a);
                got = r < 0 ? r : (uint64_t)r <= off - a ? 0 : (ssize_t)((uint64_t)r - (off - a));
                if (got > (ssize_t)s->take) got = (ssize_t)s->take;
            } else {
                buf = j->host ? (char *)j->pieces[s->i].dst + s->at : stage;
                got = pread_all(j->fd, buf, s->take, off, 1);
            }
            stop = finish_seg(j, s, buf, got);
        }
    }
    if (stage && !j->host) j->be->i->sync(j->be); /* to_device may still read stage */
    if (!j->shared) free(stage);
    return NULL;
}

struct zt_ckpt_reader {
    rjob j;
    const char *path;
    int started, fd_direct;
    pthread_t th[READ_THREADS_DIRECT];
};

/* opens path and starts the readers: with host memory READ_THREADS_DIRECT (O_DIRECT) or READ_THREADS (page
   cache), with device memory one (to_device belongs to the caller's thread); caller_reads: the calling
   thread will be one of them (new threads: one fewer) */
static zt_ckpt_reader *reader_start(zt_backend *be, const char *path, const zt_ckpt_rpiece *pieces, int n,
                                    const zt_ckpt_rstage *rs, int caller_reads, char *err, size_t errlen) {
    const int direct = rs->direct;
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        zt_errf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    zt_ckpt_reader *r = zt_calloc(1, sizeof *r);
    r->path = path;
    r->fd_direct = direct ? open(path, O_RDONLY | O_DIRECT) : -1; /* refused (EINVAL): buffered */
    r->j = (rjob){.pieces = pieces, .n = n, .fd = fd, .fd_direct = r->fd_direct, .be = be,
                  .chunk = r->fd_direct >= 0 ? READ_CHUNK_DIRECT : READ_CHUNK, .host = be->i->mem == ZT_MEM_HOST,
                  .nf = {-1, 0, 0}};
    pthread_mutex_init(&r->j.mu, NULL);
    const int readers = !r->j.host ? 1 : r->fd_direct >= 0 ? READ_THREADS_DIRECT : READ_THREADS;
    /* the caller's staging (a training run's checkpoint staging, idle while it loads: no extra memory), one
       page-aligned slice per reader, when the slices hold chunks of 1 MiB or more */
    const size_t slice = rs->stage ? (size_t)down(rs->bytes / (size_t)readers) : 0;
    if (rs->stage && (uintptr_t)rs->stage % BLK == 0 && slice >= ((size_t)1 << 20) + 2 * BLK) {
        r->j.shared = rs->stage;
        r->j.slice = slice;
        if (r->j.chunk > slice - 2 * BLK) r->j.chunk = slice - 2 * BLK;
    }
    for (int t = 0; t < readers - caller_reads; t++)
        if (pthread_create(&r->th[r->started], NULL, read_thread, &r->j) == 0) r->started++;
    return r;
}

int zt_ckpt_read_join(zt_ckpt_reader *r, zt_ckpt_nonfinite *nf, char *err, size_t errlen) {
    if (!r->started) read_thread(&r->j); /* no thread could start (or none was asked for): here */
    for (int t = 0; t < r->started; t++) pthread_join(r->th[t], NULL);
    pthread_mutex_destroy(&r->j.mu);
    close(r->j.fd);
    if (r->fd_direct >= 0) close(r->fd_direct);
    *nf = r->j.nf;
    int bad = 0;
    if (r->j.err_no) bad = zt_errf(err, errlen, "%s: read failed: %s", r->path, strerror(r->j.err_no));
    else if (r->j.truncated)
        bad = zt_errf(err, errlen, "%s: truncated (ends inside tensor data at byte %llu)", r->path,
                      (unsigned long long)r->j.trunc_at);
    free(r);
    return bad;
}

zt_ckpt_reader *zt_ckpt_read_start(zt_backend *be, const char *path, const zt_ckpt_rpiece *pieces, int n,
                                   const zt_ckpt_rstage *rs, char *err, size_t errlen) {
    ZT_ASSERT(be->i->mem == ZT_MEM_HOST);
    return reader_start(be, path, pieces, n, rs, 0, err, errlen);
}

int zt_ckpt_read_pieces(zt_backend *be, const char *path, const zt_ckpt_rpiece *pieces, int n,
                        const zt_ckpt_rstage *rs, zt_ckpt_nonfinite *nf, char *err, size_t errlen) {
    nf->piece = -1;
    if (n == 0) return 0;
    zt_ckpt_reader *r = reader_start(be, path, pieces, n, rs, 1, err, errlen);
    if (!r) return 1;
    if (r->started) read_thread(&r->j);
    return zt_ckpt_read_join(r, nf, err, errlen);
}
