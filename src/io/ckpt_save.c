/* ckpt_save.c — writing checkpoints (ckpt.h): the layout of the file with HDF5 (rank 0), each rank's
 * raw data through its ckpt_writer (staged O_DIRECT, in the background for checkpoint.async), the
 * completion mark, and the save protocol (values checked finite, tmp name, durable on every rank,
 * complete = 1, fsync, `latest` prepared, rename, `latest` replaced, pruning).
 *
 * Why the raw data does not go through HDF5/MPI-IO (docs/checkpoints.md; measured on a 2-core AMD EPYC
 * VM, ext4 on a virtual disk, GPT-2 124M + Adam state, 1.49 GB): MPI-IO's pwrite calls into the page
 * cache ran at 220-250 MB/s (strace: 6.7 s in pwrite64 for the 1.49 GB, 0.74 s in the one fsync) while `dd` with
 * the same bytes ran at 1.1-1.3 GB/s; the cost is the first touch of page-cache pages (a plain dd into
 * a new file after a fallocate showed the same 230 MB/s), not HDF5 metadata or the fsync. Writing the
 * whole 4 KiB blocks with O_DIRECT from a reused, aligned staging buffer skips the page cache and runs
 * at the disk's speed; the same staging buffer is the snapshot an asynchronous save needs.
 *
 * Finite values: every rank checks the part it writes (parameters and moments) for NaN/Inf, in a thread
 * beside the write for host memory (scan_job), before anything is created otherwise; all ranks agree
 * before the file is published, and a diverged state is refused with one line and its .tmp removed,
 * so no file with non-finite values is ever published or counted by pruning. Files carry finite = 1.
 *
 * Layout: rank 0 alone (sec2 driver, no collective HDF5 call anywhere in a save; for an asynchronous save
 * after the run's first, in its writer thread: bg_layout below) creates the file,
 * checks the free space (statvfs) and reserves it (fallocate) before HDF5 writes a byte, writes the
 * root attributes (complete = 0) and every dataset contiguous with early allocation and no fill
 * (H5Dget_offset gives its file offset), datasets of 64 KiB and more aligned to 4 KiB; H5Fclose. All
 * ranks agree on the outcome, then rank 0 broadcasts the offsets. Why not collectively: with MPI-IO and
 * collective metadata writes a disk that filled up made the metadata flush fail on rank 0 alone while
 * the other ranks waited in the same collective: a hang (the metadata went through rank 0 anyway).
 * Then each rank writes its pieces at those offsets and fdatasyncs (durable on its own node: correct
 * on a shared file system across nodes); all ranks agree; rank 0 reopens the file alone, sets
 * complete = 1, fsyncs, writes latest.tmp, renames the file and then `latest` into place. Every step
 * that can fail on one rank is followed by zt_any_failed before the next collective, and a failed save
 * removes its .tmp and leaves the previous checkpoint and `latest` as they were. A file without
 * complete = 1 is never published and never loaded (ckpt_file.c). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "io/ckpt.h"
#include "io/ckpt_internal.h"
#include "io/ckpt_rawio.h"
#include "util/util.h"

/* ---------------------------------------------------------------- attributes */

static int attr_write(hid_t obj, const char *name, hid_t ftype, hid_t mtype, const void *val) {
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(obj, name, ftype, sp, H5P_DEFAULT, H5P_DEFAULT);
    int bad = a < 0 || H5Awrite(a, mtype, val) < 0;
    if (a >= 0) H5Aclose(a);
    H5Sclose(sp);
    return bad;
}

static int attr_write_str(hid_t obj, const char *name, const char *val) {
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, strlen(val) + 1);
    H5Tset_strpad(t, H5T_STR_NULLTERM);
    int bad = attr_write(obj, name, t, t, val);
    H5Tclose(t);
    return bad;
}


/* ---------------------------------------------------------------- files */

/* rank 0: blocks for `bytes` (fallocate, keeping the size), or where that is not supported, at
   least that much free space */
static int reserve_space(const char *path, off_t bytes, char *err, size_t errlen) {
    int fd = open(path, O_WRONLY);
    int rc = fd < 0 ? errno : fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, bytes) == 0 ? 0 : errno;
    if (fd >= 0) close(fd);
    if (rc == 0) return 0;
    if (rc == ENOSPC || rc == EDQUOT)
        return zt_errf(err, errlen, "cannot write checkpoint %s: %s (it needs %.1f MB)", path, strerror(rc),
                            (double)bytes / 1e6);
    struct statvfs sv;
    if (statvfs(path, &sv) == 0 && (double)sv.f_bavail * (double)sv.f_frsize < (double)bytes)
        return zt_errf(err, errlen, "cannot write checkpoint %s: %s (it needs %.1f MB, %.1f MB are free)", path,
                            strerror(ENOSPC), (double)bytes / 1e6, (double)sv.f_bavail * (double)sv.f_frsize / 1e6);
    return 0;
}

static int write_failed(const char *path, char *err, size_t errlen) {
    char why[256];
    zt_ckpt_h5_reason(why);
    int e = errno;
    return zt_errf(err, errlen, "cannot write checkpoint %s: %s", path,
                        why[0] ? why : e ? strerror(e) : "HDF5 write failed");
}

/* ---------------------------------------------------------------- save: write, rename, latest, prune */

static void fsync_path(const char *path, int dir) {
    int fd = open(path, O_RDONLY | (dir ? O_DIRECTORY : 0));
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

static int cmp_long(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

/* rank 0: drop step files beyond `keep` (lowest steps first, never `newest`) and leftover .tmp
   files of interrupted saves */
static void prune(const char *dir, int keep, long newest) {
    DIR *dp = opendir(dir);
    if (!dp) return;
    long *steps = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    char p[ZT_PATH_MAX + 300];
    while ((de = readdir(dp))) {
        long st;
        int used = 0;
        if (sscanf(de->d_name, "step_%ld.h5%n", &st, &used) != 1 || used <= 0) continue;
        if (strcmp(de->d_name + used, ".tmp") == 0) {
            snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
            unlink(p);
        } else if (de->d_name[used] == 0) {
            if (n == cap) steps = realloc(steps, (cap = cap ? 2 * cap : 16) * sizeof *steps);
            if (!steps) break;
            steps[n++] = st;
        }
    }
    closedir(dp);
    if (steps && keep > 0 && n > (size_t)keep) {
        qsort(steps, n, sizeof *steps, cmp_long);
        size_t drop = n - (size_t)keep;
        for (size_t i = 0; i < n && drop > 0; i++) {
            if (steps[i] == newest) continue;
            snprintf(p, sizeof p, "%s/step_%08ld.h5", dir, steps[i]);
            unlink(p);
            drop--;
        }
    }
    free(steps);
}


/* ---------------------------------------------------------------- layout: metadata, offsets */

/* this rank's pieces of every group (at most groups x tensors) */
static int max_pieces(const zt_ckpt_view *v) { return 4 * v->table->n; }

/* Rank 0 alone: creates path with the sec2 driver, every dataset allocated (complete = 0, finite = 1),
   and returns each dataset's file offset, offs[g * n_tensors + i]. Nothing here is collective, so a
   failure (a full disk included) is this rank's error, which the caller then agrees on. */
static int layout_rank0(const char *path, const zt_ckpt_meta *meta, const zt_ckpt_view *v, const zt_ckpt_group *groups,
                        int ng, uint64_t *offs, char *err, size_t errlen) {
    const zt_param_table *pt = v->table;
    char created[32];
    if (meta->created[0]) snprintf(created, sizeof created, "%s", meta->created);
    else zt_iso_time(created, sizeof created);
    const char *config = meta->config_text ? meta->config_text : "";
    const unsigned long long clen = strlen(config);
    if (clen > 60000)
        return zt_errf(err, errlen, "%s: the config text is %llu bytes: too long for an HDF5 attribute", path, clen);
    /* the plain create first: its errno names the problem (HDF5's would not) */
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return zt_errf(err, errlen, "cannot create checkpoint %s: %s", path, strerror(errno));
    close(fd);
    /* The file's space is reserved before any byte is written: a full disk or quota shows up here, as
       one error, not as a write error in the middle. statvfs first (H5Fcreate truncates the file, so
       the reservation itself comes after it, before HDF5 writes anything: its metadata is flushed at
       H5Fclose) */
    const off_t need = (off_t)ng * (off_t)pt->total * 4 + (1 << 20) + (off_t)ng * pt->n * 8192 + (off_t)clen;
    struct statvfs sv;
    if (statvfs(path, &sv) == 0 && (double)sv.f_bavail * (double)sv.f_frsize < (double)need)
        return zt_errf(err, errlen, "cannot write checkpoint %s: %s (it needs %.1f MB, %.1f MB are free)", path,
                       strerror(ENOSPC), (double)need / 1e6, (double)sv.f_bavail * (double)sv.f_frsize / 1e6);
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_sec2(fapl);
    H5Pset_alignment(fapl, 65536, 4096); /* big datasets start on a block: fewer partial blocks */
    hid_t fid = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    H5Pclose(fapl);
    if (fid < 0) {
        char why[256];
        zt_ckpt_h5_reason(why);
        int e = errno;
        return zt_errf(err, errlen, "cannot create checkpoint %s: %s", path, why[0] ? why : e ? strerror(e) : "?");
    }
    /* fault-injection tests: a pause between the create and the reservation, for filling the disk there */
    const char *delay = getenv("ZTRAIN_CKPT_TEST_LAYOUT_DELAY_MS");
    if (delay && atoi(delay) > 0) usleep((useconds_t)atoi(delay) * 1000);
    int bad = reserve_space(path, need, err, errlen);
    long long step = meta->step;
    unsigned long long ss = meta->samples_seen, ts = meta->tokens_seen, seed = meta->seed;
    int version = ZT_CKPT_VERSION, ws = meta->world_size, V = v->shape->vocab_size, Vp = v->shape->padded_vocab, zero = 0;
    int one = 1;
    unsigned long long np = pt->total;
    if (!bad) {
        bad |= attr_write_str(fid, "format", "ztrain");
        bad |= attr_write(fid, "version", H5T_STD_I32LE, H5T_NATIVE_INT, &version);
        bad |= attr_write(fid, "step", H5T_STD_I64LE, H5T_NATIVE_LLONG, &step);
        bad |= attr_write(fid, "samples_seen", H5T_STD_U64LE, H5T_NATIVE_ULLONG, &ss);
        bad |= attr_write(fid, "tokens_seen", H5T_STD_U64LE, H5T_NATIVE_ULLONG, &ts);
        bad |= attr_write(fid, "world_size", H5T_STD_I32LE, H5T_NATIVE_INT, &ws);
        bad |= attr_write(fid, "loss_scale", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, &meta->loss_scale);
        long long good = meta->loss_scale_good;
        bad |= attr_write(fid, "loss_scale_good", H5T_STD_I64LE, H5T_NATIVE_LLONG, &good);
        bad |= attr_write(fid, "seed", H5T_STD_U64LE, H5T_NATIVE_ULLONG, &seed);
        if (meta->lora_base_hash) {
            unsigned long long bh = meta->lora_base_hash;
            bad |= attr_write(fid, "lora_base_hash", H5T_STD_U64LE, H5T_NATIVE_ULLONG, &bh);
        }
        if (meta->has_stream) {
            const char *names[6] = {"stream_file", "stream_doc", "stream_token", "stream_epoch", "stream_epoch_first",
                                    "stream_first_doc"};
            const zt_stream_pos *sp = &meta->stream;
            unsigned long long vals[6] = {sp->file, sp->doc, sp->token, sp->epoch, sp->epoch_first, sp->first_doc};
            for (int i = 0; i < 6; i++) bad |= attr_write(fid, names[i], H5T_STD_U64LE, H5T_NATIVE_ULLONG, &vals[i]);
        }
        bad |= attr_write(fid, "vocab_size", H5T_STD_I32LE, H5T_NATIVE_INT, &V);
        bad |= attr_write(fid, "padded_vocab", H5T_STD_I32LE, H5T_NATIVE_INT, &Vp);
        bad |= attr_write(fid, "n_params", H5T_STD_U64LE, H5T_NATIVE_ULLONG, &np);
        bad |= attr_write_str(fid, "config", config);
        bad |= attr_write_str(fid, "created", created);
        bad |= attr_write(fid, "finite", H5T_STD_I32LE, H5T_NATIVE_INT, &one); /* every value was checked */
        bad |= attr_write(fid, "complete", H5T_STD_I32LE, H5T_NATIVE_INT, &zero); /* 1 once every byte is durable */
        if (bad) write_failed(path, err, errlen);
    }
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_layout(dcpl, H5D_CONTIGUOUS);
    H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER); /* every element is written: no fill pass */
    H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY);  /* the offset exists now */
    for (int g = 0; g < ng && !bad; g++) {
        hid_t gid = H5Gcreate2(fid, groups[g].path, lcpl, H5P_DEFAULT, H5P_DEFAULT);
        bad |= gid < 0;
        for (int i = 0; i < pt->n && !bad; i++) {
            const zt_tensor_info *t = &pt->t[i];
            hsize_t dims[2] = {(hsize_t)t->shape[0], (hsize_t)t->shape[1]};
            hid_t sp = H5Screate_simple(t->ndim, dims, NULL);
            hid_t ds = H5Dcreate2(gid, t->name, H5T_IEEE_F32LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
            H5Sclose(sp);
            if (ds < 0) { bad = 1; break; }
            if (i == 0 && g == 0) bad |= attr_write(ds, "vocab_size", H5T_STD_I32LE, H5T_NATIVE_INT, &V);
            haddr_t off = H5Dget_offset(ds);
            if (off == HADDR_UNDEF) bad = 1;
            else offs[(size_t)g * (size_t)pt->n + (size_t)i] = (uint64_t)off;
            H5Dclose(ds);
        }
        if (gid >= 0) H5Gclose(gid);
        if (bad) write_failed(path, err, errlen);
    }
    H5Pclose(dcpl);
    H5Pclose(lcpl);
    if (H5Fclose(fid) < 0 && !bad) bad = write_failed(path, err, errlen);
    return bad;
}

/* this rank's pieces of a file whose datasets start at offs (NOT collective) */
static void pieces_at(const zt_ckpt_view *v, const uint64_t *offs, zt_ckpt_piece *pieces, int *n_pieces) {
    *n_pieces = 0;
    const zt_param_table *pt = v->table;
    const size_t lo = v->lo, hi = v->hi < pt->total ? v->hi : pt->total;
    zt_ckpt_group groups[4];
    const int ng = zt_ckpt_groups(groups, v);
    for (int g = 0; g < ng; g++)
        for (int i = 0; i < pt->n; i++) {
            const zt_tensor_info *t = &pt->t[i];
            size_t s = 0, e = 0;
            if (zt_ckpt_piece_of(t, lo, hi, &s, &e))
                pieces[(*n_pieces)++] = (zt_ckpt_piece){offs[(size_t)g * (size_t)pt->n + (size_t)i] + s * sizeof(float),
                                                        (e - s) * sizeof(float),
                                                        groups[g].src + (t->offset + s - groups[g].base),
                                                        groups[g].round};
        }
}

/* the number of dataset offsets of a file for this view */
static size_t n_offsets(const zt_ckpt_view *v) {
    zt_ckpt_group groups[4];
    return (size_t)zt_ckpt_groups(groups, v) * (size_t)v->table->n;
}

/* Collective: rank 0 lays the file out (layout_rank0), every rank agrees on the outcome, then learns
   the dataset offsets and returns its pieces (file offset, bytes, source); offs_out (n_offsets entries,
   may be NULL) receives the offsets. The file is created by one rank and no HDF5 call here is collective:
   a failure on the one rank that touches the disk cannot leave the others inside a collective (with
   collective metadata writes, a full disk hangs HDF5's collective metadata flush). */
static int layout(const char *path, const zt_ckpt_meta *meta, const zt_ckpt_view *v, zt_ckpt_piece *pieces,
                  int *n_pieces, uint64_t *offs_out, char *err, size_t errlen) {
    zt_ckpt_h5_quiet();
    *n_pieces = 0;
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    zt_ckpt_group groups[4];
    const int ng = zt_ckpt_groups(groups, v);
    const size_t no = n_offsets(v);
    uint64_t *offs = zt_calloc(no, sizeof *offs);
    int bad = rank == 0 ? layout_rank0(path, meta, v, groups, ng, offs, err, errlen) : 0;
    if (zt_any_failed(bad, err, errlen)) {
        free(offs);
        return 1;
    }
    ZT_MPI(MPI_Bcast(offs, (int)no, MPI_UINT64_T, 0, MPI_COMM_WORLD));
    pieces_at(v, offs, pieces, n_pieces);
    if (offs_out) memcpy(offs_out, offs, no * sizeof *offs);
    free(offs);
    return 0;
}

/* Collective: refuses to write a state holding NaN or Inf (a diverged run): each rank checks the part it
   writes, so no file with non-finite weights or moments is ever created */
static int check_finite(const zt_ckpt_meta *meta, const zt_ckpt_view *v, char *err, size_t errlen) {
    char what[256];
    int bad = zt_ckpt_view_nonfinite(v, v->lo, v->hi, v->exp_avg != NULL, what, sizeof what);
    if (bad)
        zt_errf(err, errlen, "checkpoint of step %ld not written: the state holds non-finite values (%s); "
                "the earlier checkpoints are kept", meta->step, what);
    return zt_any_failed(bad, err, errlen);
}

/* rank 0, after every rank's data is durable: complete = 1, the unused reservation returned, fsync */
static int mark_complete(const char *path, char *err, size_t errlen) {
    zt_ckpt_h5_quiet();
    hid_t fid = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    int one = 1, bad = fid < 0;
    if (!bad) {
        hid_t a = H5Aopen(fid, "complete", H5P_DEFAULT);
        bad = a < 0 || H5Awrite(a, H5T_NATIVE_INT, &one) < 0;
        if (a >= 0) H5Aclose(a);
        bad |= H5Fclose(fid) < 0;
    }
    if (bad) return write_failed(path, err, errlen);
    int fd = open(path, O_WRONLY);
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 && ftruncate(fd, st.st_size) != 0) { /* best effort */ }
    if (fd < 0 || fsync(fd) != 0)
        bad = zt_errf(err, errlen, "cannot write checkpoint %s: fsync: %s", path, strerror(errno));
    if (fd >= 0) close(fd);
    return bad;
}

/* rank 0, every byte durable: complete = 1 (mark_complete also returns the unused tail of the reservation,
   which leaves room for the pointer), then the new `latest` written to latest.tmp (fsync), then the
   file renamed into place, then latest.tmp renamed over `latest`, then pruning. The pointer is
   prepared before anything is published, so a disk that is still full at this point (latest.tmp needs
   a block) fails with nothing changed: the previous checkpoint and `latest` stay as they were. */
static int publish(const char *tmp, const char *final, const char *dir, char *err, size_t errlen) {
    if (mark_complete(tmp, err, errlen)) return 1;
    char lp[ZT_PATH_MAX + 16], lt[ZT_PATH_MAX + 32];
    snprintf(lp, sizeof lp, "%.*s/latest", ZT_PATH_MAX, dir);
    snprintf(lt, sizeof lt, "%s.tmp", lp);
    FILE *f = fopen(lt, "w");
    const char *base = strrchr(final, '/') ? strrchr(final, '/') + 1 : final;
    int ok = f && fprintf(f, "%s\n", base) > 0;
    if (f) {
        ok &= fflush(f) == 0 && fsync(fileno(f)) == 0;
        ok &= fclose(f) == 0;
    }
    if (!ok) {
        int e = errno;
        unlink(lt);
        return zt_errf(err, errlen, "cannot write checkpoint %s: cannot update %s: %s", final, lp, strerror(e));
    }
    if (rename(tmp, final) != 0) {
        int e = errno;
        unlink(lt);
        return zt_errf(err, errlen, "cannot rename %s to %s: %s", tmp, final, strerror(e));
    }
    fsync_path(dir, 1);
    if (rename(lt, lp) != 0) {
        int e = errno;
        unlink(lt);
        return zt_errf(err, errlen, "checkpoint %s written but %s not updated: %s", final, lp, strerror(e));
    }
    fsync_path(dir, 1);
    return 0;
}

/* ---------------------------------------------------------------- the saver */

/* The finite check of a save's values (check_finite's scan) in a thread, for host memory: it reads the
   same source memory as the writer while the layout and the writes go on (a synchronous save) or while
   training computes the next step (async: the sources do not change before zt_ckpt_saver_wait_snapshot,
   which joins it). Its outcome is agreed on before the file is published; a failed check unlinks the
   .tmp, so nothing non-finite is ever published. At memory speed (~7 GB/s on a 2-core AMD EPYC) it would
   otherwise add 0.2 s to each save of GPT-2 124M with Adam state on one rank. */
typedef struct scan_job {
    pthread_t th;
    int running;
    zt_ckpt_view v;
    int bad;
    char what[256];
} scan_job;

static void *scan_main(void *arg) {
    scan_job *j = arg;
    j->bad = zt_ckpt_view_nonfinite(&j->v, j->v.lo, j->v.hi, j->v.exp_avg != NULL, j->what, sizeof j->what);
    return NULL;
}

/* 1: started; 0: not (the caller scans inline) */
static int scan_start(scan_job *j, const zt_ckpt_view *v) {
    j->running = 0;
    j->bad = 0;
    j->what[0] = 0;
    if (v->be->i->mem != ZT_MEM_HOST) return 0;
    j->v = *v;
    if (pthread_create(&j->th, NULL, scan_main, j) != 0) return 0;
    j->running = 1;
    return 1;
}

static void scan_join(scan_job *j) {
    if (!j->running) return;
    pthread_join(j->th, NULL);
    j->running = 0;
}

/* Pruning (rank 0) runs in a thread after the file is published: unlinking a 1.49 GB file takes 0.19-0.23 s
   on ext4 on a virtual disk (a fifth of a save), and nothing needs the old file gone before the next save. It
   is joined before the next save creates its .tmp (prune also removes leftover .tmp files) and when the
   saver is destroyed, so a finished run leaves exactly `keep` files. */
typedef struct prune_job {
    pthread_t th;
    int running, keep;
    long newest;
    char dir[ZT_PATH_MAX + 1];
} prune_job;

static void *prune_main(void *arg) {
    prune_job *j = arg;
    prune(j->dir, j->keep, j->newest);
    return NULL;
}

static void prune_join(prune_job *j) {
    if (!j->running) return;
    pthread_join(j->th, NULL);
    j->running = 0;
}

static void prune_start(prune_job *j, const char *dir, int keep, long newest) {
    prune_join(j);
    snprintf(j->dir, sizeof j->dir, "%.*s", ZT_PATH_MAX, dir);
    j->keep = keep;
    j->newest = newest;
    j->running = pthread_create(&j->th, NULL, prune_main, j) == 0;
    if (!j->running) prune(dir, keep, newest); /* no thread: here */
}

/* Asynchronous saves after the first lay their file out in the background. Every file of a run has the
   same layout (the same tensors, attributes of fixed sizes, the same config text), so the first save lays
   it out as a synchronous one does and every rank keeps the dataset offsets; later saves start at once
   from them (no HDF5 and no collective call in the training step: on 2 cores d6's layout took 6-15 ms of
   the step, rank 1 waiting for rank 0 in the broadcast). Rank 0's writer thread, after taking its snapshot,
   creates the file (layout_gate: the same layout_rank0, its offsets checked against the kept ones) while
   the other ranks' writers wait (release_gate) until the trainer's per-step agreement shows rank 0's
   layout done (zt_ckpt_saver_layout_pending / zt_ckpt_saver_release; zt_ckpt_saver_finish releases with a
   barrier when the run ends first). A layout that fails (a full disk) fails that save as a write error. */
typedef struct bg_layout {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int gated;        /* every rank: a background layout not yet released */
    int done;         /* rank 0: its layout has run (or failed) */
    int released;
    zt_ckpt_meta meta; /* copies for the thread */
    char *config;
    zt_ckpt_view v;
    uint64_t *offs;   /* the kept dataset offsets (n_offs), valid when have */
    size_t n_offs;
    int have;
} bg_layout;

struct zt_ckpt_saver {
    zt_ckpt_writer *w;
    int async, pending, keep;
    long step;
    prune_job prune;  /* rank 0: the last save's pruning */
    zt_ckpt_piece *pieces;
    scan_job scan;  /* the finite check of the pending save */
    bg_layout bg;
    char dir[ZT_PATH_MAX + 1], final[ZT_PATH_MAX + 64], tmp[ZT_PATH_MAX + 80];
    double t_begin, stage_s, write_s, total_s;
};

/* rank 0's writer thread: lays the file out (mkdir included) */
static int layout_gate(void *ctx, char *err, size_t errlen) {
    zt_ckpt_saver *s = ctx;
    bg_layout *b = &s->bg;
    int bad = 0;
    if (zt_mkdirs(s->dir) != 0)
        bad = zt_errf(err, errlen, "checkpoint directory %s: cannot create: %s", s->dir, strerror(errno));
    if (!bad) {
        zt_ckpt_group groups[4];
        const int ng = zt_ckpt_groups(groups, &b->v);
        uint64_t *offs = zt_calloc(b->n_offs, sizeof *offs);
        zt_ckpt_h5_quiet();
        bad = layout_rank0(s->tmp, &b->meta, &b->v, groups, ng, offs, err, errlen);
        if (!bad && memcmp(offs, b->offs, b->n_offs * sizeof *offs))
            bad = zt_errf(err, errlen, "cannot write checkpoint %s: its layout differs from the run's first checkpoint "
                          "(a bug: please report it)", s->tmp);
        free(offs);
    }
    pthread_mutex_lock(&b->mu);
    b->done = 1;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    return bad;
}

/* the other ranks' writer threads: wait until rank 0's layout is known to be done */
static int release_gate(void *ctx, char *err, size_t errlen) {
    (void)err, (void)errlen;
    bg_layout *b = &((zt_ckpt_saver *)ctx)->bg;
    pthread_mutex_lock(&b->mu);
    while (!b->released) pthread_cond_wait(&b->cv, &b->mu);
    pthread_mutex_unlock(&b->mu);
    return 0;
}

static void release(bg_layout *b) {
    pthread_mutex_lock(&b->mu);
    b->released = 1;
    b->gated = 0;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

int zt_ckpt_saver_layout_pending(zt_ckpt_saver *s) {
    if (zt_rank() != 0) return 0;
    pthread_mutex_lock(&s->bg.mu);
    const int p = s->bg.gated && !s->bg.done;
    pthread_mutex_unlock(&s->bg.mu);
    return p;
}

void zt_ckpt_saver_release(zt_ckpt_saver *s) {
    if (s->bg.gated) release(&s->bg);
}

#define SYNC_STAGE ((size_t)64 << 20) /* two 32 MiB halves: copy one while the other is written */

size_t zt_ckpt_stage_bytes(size_t shard_elems, int n_tensors, int async, int master) {
    if (!async) return SYNC_STAGE;
    /* params, exp_avg, exp_avg_sq (and master) of the shard, plus up to one block of alignment per piece */
    const size_t ng = master ? 4 : 3;
    return ng * shard_elems * sizeof(float) + ng * (size_t)n_tensors * 4096 + 4096;
}

size_t zt_ckpt_saver_stage_bytes(const zt_ckpt_view *v, int async) {
    const zt_param_table *pt = v->table;
    const size_t lo = v->lo, hi = v->hi < pt->total ? v->hi : pt->total;
    return zt_ckpt_stage_bytes(hi > lo ? hi - lo : 0, pt->n, async, v->master != NULL);
}

zt_ckpt_saver *zt_ckpt_saver_create(const zt_ckpt_view *v, int async, int direct_io) {
    zt_ckpt_saver *s = zt_calloc(1, sizeof *s);
    s->async = async;
    s->pieces = zt_calloc((size_t)max_pieces(v), sizeof *s->pieces);
    s->w = zt_ckpt_writer_create(zt_ckpt_saver_stage_bytes(v, async), direct_io);
    pthread_mutex_init(&s->bg.mu, NULL);
    pthread_cond_init(&s->bg.cv, NULL);
    s->bg.n_offs = n_offsets(v);
    s->bg.offs = zt_calloc(s->bg.n_offs, sizeof *s->bg.offs);
    return s;
}

int zt_ckpt_saver_pending(const zt_ckpt_saver *s) { return s->pending; }

double zt_ckpt_saver_wait_snapshot(zt_ckpt_saver *s) {
    if (!s->pending) return 0.0;
    const double t0 = zt_now();
    scan_join(&s->scan);
    return zt_now() - t0 + zt_ckpt_writer_wait_snapshot(s->w);
}

int zt_ckpt_saver_local_done(zt_ckpt_saver *s) { return !s->pending || zt_ckpt_writer_idle(s->w); }

void zt_ckpt_saver_times(const zt_ckpt_saver *s, double *stage_s, double *write_s, double *total_s) {
    if (stage_s) *stage_s = s->stage_s;
    if (write_s) *write_s = s->write_s;
    if (total_s) *total_s = s->total_s;
}

int zt_ckpt_saver_finish(zt_ckpt_saver *s, char *path_out, size_t path_len, char *err, size_t errlen) {
    if (!s->pending) return 0;
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (s->bg.gated) { /* not released yet (the run ends, or the next save comes, first): wait for rank 0's layout */
        if (rank == 0) {
            pthread_mutex_lock(&s->bg.mu);
            while (!s->bg.done) pthread_cond_wait(&s->bg.cv, &s->bg.mu);
            pthread_mutex_unlock(&s->bg.mu);
        }
        ZT_MPI(MPI_Barrier(MPI_COMM_WORLD));
        release(&s->bg);
    }
    s->pending = 0;
    scan_join(&s->scan);
    int bad = zt_ckpt_writer_wait(s->w, err, errlen);
    zt_ckpt_writer_times(s->w, &s->stage_s, &s->write_s);
    if (!bad && s->scan.bad)
        bad = zt_errf(err, errlen, "checkpoint of step %ld not written: the state holds non-finite values (%s); the "
                      "earlier checkpoints are kept", s->step, s->scan.what);
    if (zt_any_failed(bad, err, errlen)) {
        if (rank == 0) unlink(s->tmp);
        return 1;
    }
    /* every rank's bytes are durable: rank 0 marks and publishes, then prunes in the background */
    if (rank == 0 && publish(s->tmp, s->final, s->dir, err, errlen)) {
        bad = 1;
        unlink(s->tmp);
    }
    if (rank == 0 && !bad) prune_start(&s->prune, s->dir, s->keep, s->step);
    if (zt_any_failed(bad, err, errlen)) return 1;
    s->total_s = zt_now() - s->t_begin;
    if (path_out && path_len) snprintf(path_out, path_len, "%s", s->final);
    return 0;
}

/* the start of every save: its clock, the last pruning joined (it may remove .tmp files: done before this
   save creates its own), its names */
static void begin_names(zt_ckpt_saver *s, const char *dir, int keep, long step) {
    s->t_begin = zt_now();
    prune_join(&s->prune);
    snprintf(s->dir, sizeof s->dir, "%.*s", ZT_PATH_MAX, dir);
    snprintf(s->final, sizeof s->final, "%.*s/step_%08ld.h5", ZT_PATH_MAX, dir, step);
    snprintf(s->tmp, sizeof s->tmp, "%s.tmp", s->final);
    s->keep = keep;
    s->step = step;
}

/* an asynchronous save with the layout in the background (host memory): no collective call, nothing that
   can fail here (a failure is the write's, reported by zt_ckpt_saver_finish) */
static int begin_background(zt_ckpt_saver *s, const char *dir, int keep, const zt_ckpt_meta *meta,
                            const zt_ckpt_view *v, char *path_out, size_t path_len) {
    begin_names(s, dir, keep, meta->step);
    bg_layout *b = &s->bg;
    free(b->config);
    b->config = meta->config_text ? strdup(meta->config_text) : NULL;
    if (meta->config_text && !b->config) zt_panic(__FILE__, __LINE__, "out of memory");
    b->meta = *meta;
    b->meta.config_text = b->config;
    if (!b->meta.created[0]) zt_iso_time(b->meta.created, sizeof b->meta.created); /* the step's time, not the thread's */
    b->v = *v;
    b->done = b->released = 0;
    b->gated = 1;
    int n = 0;
    pieces_at(v, b->offs, s->pieces, &n);
    scan_start(&s->scan, v);
    zt_ckpt_writer_start_gated(s->w, v->be, s->tmp, s->pieces, n, zt_rank() == 0 ? layout_gate : release_gate, s);
    zt_ckpt_writer_times(s->w, &s->stage_s, NULL);
    s->pending = 1;
    if (path_out && path_len) snprintf(path_out, path_len, "%s", s->final);
    return 0;
}

int zt_ckpt_saver_begin(zt_ckpt_saver *s, const char *dir, int keep, const zt_ckpt_meta *meta,
                        const zt_ckpt_view *v, char *path_out, size_t path_len, char *err, size_t errlen) {
    if (zt_ckpt_saver_finish(s, NULL, 0, err, errlen)) return 1;
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int bad = 0;
    if (s->async && s->bg.have && v->be->i->mem == ZT_MEM_HOST)
        return begin_background(s, dir, keep, meta, v, path_out, path_len);
    if (rank == 0 && zt_mkdirs(dir) != 0)
        bad = zt_errf(err, errlen, "checkpoint directory %s: cannot create: %s", dir, strerror(errno));
    if (zt_any_failed(bad, err, errlen)) return 1;
    begin_names(s, dir, keep, meta->step);
    /* device memory: checked here, before anything is created; host memory: in a thread started after the
       layout, joined before publishing (started before it, the scan took a core from the layout: d6 on 2
       cores, an asynchronous save's layout 8-15 ms beside the scan, 6-12 ms after it) */
    const int host = v->be->i->mem == ZT_MEM_HOST;
    s->scan.running = 0;
    if (!host && check_finite(meta, v, err, errlen)) return 1;
    int n = 0;
    if (layout(s->tmp, meta, v, s->pieces, &n, s->bg.offs, err, errlen)) {
        scan_join(&s->scan);
        if (rank == 0) unlink(s->tmp);
        return 1;
    }
    if (host && !scan_start(&s->scan, v) && check_finite(meta, v, err, errlen)) {
        if (rank == 0) unlink(s->tmp);
        return 1;
    }
    bad = zt_ckpt_writer_start(s->w, v->be, s->tmp, s->pieces, n, err, errlen);
    zt_ckpt_writer_times(s->w, &s->stage_s, NULL);
    s->pending = 1;
    if (bad) zt_ckpt_writer_wait(s->w, NULL, 0);
    if (zt_any_failed(bad, err, errlen)) {
        scan_join(&s->scan);
        s->pending = 0;
        if (rank == 0) unlink(s->tmp);
        return 1;
    }
    s->bg.have = 1; /* the offsets of every later file of this saver */
    if (!s->async) return zt_ckpt_saver_finish(s, path_out, path_len, err, errlen);
    if (path_out && path_len) snprintf(path_out, path_len, "%s", s->final);
    return 0;
}

char *zt_ckpt_saver_stage(zt_ckpt_saver *s, size_t *bytes) {
    ZT_ASSERT(!s->pending);
    return zt_ckpt_writer_stage(s->w, bytes);
}

void zt_ckpt_saver_destroy(zt_ckpt_saver *s) {
    if (!s) return;
    scan_join(&s->scan);
    prune_join(&s->prune);
    release(&s->bg); /* a writer still at its gate (an error path): let it finish */
    zt_ckpt_writer_destroy(s->w);
    pthread_mutex_destroy(&s->bg.mu);
    pthread_cond_destroy(&s->bg.cv);
    free(s->bg.offs);
    free(s->bg.config);
    free(s->pieces);
    free(s);
}

/* ---------------------------------------------------------------- one-shot saves */

int zt_ckpt_save(const char *dir, int keep, const zt_ckpt_meta *meta, const zt_ckpt_view *v,
                 char *path_out, size_t path_len, char *err, size_t errlen) {
    zt_ckpt_saver *s = zt_ckpt_saver_create(v, 0, 1);
    int bad = zt_ckpt_saver_begin(s, dir, keep, meta, v, path_out, path_len, err, errlen);
    zt_ckpt_saver_destroy(s);
    return bad;
}

int zt_ckpt_write(const char *path, const zt_ckpt_meta *meta, const zt_ckpt_view *v, char *err,
                  size_t errlen) {
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (check_finite(meta, v, err, errlen)) return 1;
    zt_ckpt_piece *pieces = zt_calloc((size_t)max_pieces(v), sizeof *pieces);
    int n = 0;
    int bad = layout(path, meta, v, pieces, &n, NULL, err, errlen);
    if (!bad) {
        zt_ckpt_writer *w = zt_ckpt_writer_create(SYNC_STAGE, 1);
        bad = zt_ckpt_writer_start(w, v->be, path, pieces, n, err, errlen);
        if (!bad) bad = zt_ckpt_writer_wait(w, err, errlen);
        zt_ckpt_writer_destroy(w);
        if (!zt_any_failed(bad, err, errlen)) {
            bad = rank == 0 ? mark_complete(path, err, errlen) : 0;
            bad = zt_any_failed(bad, err, errlen);
        } else bad = 1;
    }
    free(pieces);
    return bad;
}
