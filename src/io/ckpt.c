/* ckpt.c — parallel-HDF5 checkpoints (ckpt.h, DESIGN section 5): the collective write and read of
 * one file, the atomic save protocol (tmp + flush + rename, then `latest`, then pruning) and the
 * checks that turn a wrong file into one clear line on every rank.
 *
 * File layout (h5py and h5dump read it as it is):
 *   /                 attrs format="ztrain", version, step, samples_seen, tokens_seen, world_size,
 *                     loss_scale, seed, config (resolved config text), created (ISO time, UTC),
 *                     vocab_size, padded_vocab, n_params, complete=1 (written last)
 *   /model/<name>     working parameters, float32, true shapes, Hugging Face GPT-2 names
 *                     (wte.weight, h.0.attn.c_attn.weight, ...; Conv1D weights (in, out)).
 *                     wte.weight is stored as the model holds it, (Vp, C): rows V..Vp-1 are the
 *                     zero padding the model computes with, so a resume is bit-exact and a file
 *                     is one buffer per tensor; its attr vocab_size (= V) tells readers such as
 *                     `ztrain export` to keep the first V rows.
 *   /optim/exp_avg/<name>, /optim/exp_avg_sq/<name>   AdamW moments, same names and shapes
 *   /master/<name>    fp32 master weights when precision != fp32. This build trains in fp32 only
 *                     (the working parameters ARE the master copy) and ZeRO keeps no separate
 *                     master buffer, so the group is not written; the group table below has its
 *                     slot ready (source NULL) for when the view grows one.
 * There is no /rng or /data group: the sample order is a pure function of (seed, global sample
 * index) (data.h) and ztrain keeps no other generator state, so step + seed (root attrs) is the
 * whole data position.
 *
 * Parallel write: every rank holds the full parameters, but writes only the part of each tensor
 * inside its range [v->lo, v->hi) of the flat buffer (its ZeRO shard: a contiguous element range of
 * the tensor: a partial row, full rows, a partial row), so each byte is written once. Moments are
 * shards at stages 1-2 (element k of exp_avg is flat element lo + k) and full copies at stage 0
 * (element k is flat element k): the view's optim_base says which; the rank writes its [lo, hi).
 * Metadata (file, groups, datasets, attributes) is created and read collectively (collective
 * metadata writes and reads); the raw data then moves with independent MPI-IO, each rank its own
 * parts, all ranks at once. Why not collective transfers: a tensor almost always lies in ONE
 * rank's shard, so a collective H5Dwrite/H5Dread per tensor makes the other ranks wait for it and
 * the ranks take turns (measured here, GPT-2 124M + Adam state on 4 ranks: load 2.5-2.8 s
 * collective vs 1.0 s independent; MPI-IO's individual mode inside collective calls and ROMIO
 * were no better; ZTRAIN_CKPT_IO=collective selects collective transfers, with empty selections
 * on ranks without a part: 4-rank read 19% of dd's bandwidth vs 61% independent). With the cpu backend the buffers are host memory and go to HDF5 in place;
 * other backends stage each piece through a host buffer. Durability: after the collective close,
 * rank 0 fsyncs the file once (it holds every rank's pages) before the rename publishes it, then
 * fsyncs the directory.
 * Load reads this rank's range of every tensor; ZeRO then all-gathers the parameters (and the
 * stage-0 moments: zt_zero_after_load), so any rank count and stage can resume any file. A view
 * without optimizer state (eval, export) reads the full tensors on every rank.
 *
 * Errors: every failure is agreed on by all ranks (all-reduce of a flag, the lowest failing
 * rank's message broadcast), so each rank returns the same code and line; HDF5's own error
 * stacks are silenced and their innermost message folded into ours. */
#define _GNU_SOURCE
#include "io/ckpt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "io/ckpt_internal.h"
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


/* ---------------------------------------------------------------- selections */

/* the part of tensor t inside the flat range [lo, hi), as tensor-local elements [*s, *e) */
static int piece(const zt_tensor_info *t, size_t lo, size_t hi, size_t *s, size_t *e) {
    size_t a = t->offset > lo ? t->offset : lo;
    size_t b = t->offset + t->numel < hi ? t->offset + t->numel : hi;
    if (a >= b) return 0;
    *s = a - t->offset;
    *e = b - t->offset;
    return 1;
}

/* select the row-major elements [s, e) of the tensor's file dataspace: a partial first row, full
   rows, a partial last row (HDF5 transfers a union of hyperslabs in row-major order, which is
   the order of the contiguous memory piece) */
static int select_range(hid_t sp, const zt_tensor_info *t, size_t s, size_t e) {
    if (t->ndim == 1) {
        hsize_t st[1] = {s}, ct[1] = {e - s};
        return H5Sselect_hyperslab(sp, H5S_SELECT_SET, st, NULL, ct, NULL) < 0;
    }
    const size_t W = (size_t)t->shape[1];
    size_t r0 = s / W, c0 = s % W, r1 = e / W, c1 = e % W;
    int first = 1, bad = 0;
#define ADD(row, col, nrows, ncols)                                                                      \
    do {                                                                                                 \
        hsize_t st_[2] = {(row), (col)}, ct_[2] = {(nrows), (ncols)};                                    \
        bad |= H5Sselect_hyperslab(sp, first ? H5S_SELECT_SET : H5S_SELECT_OR, st_, NULL, ct_, NULL) < 0; \
        first = 0;                                                                                       \
    } while (0)
    if (r0 == r1) {
        ADD(r0, c0, 1, c1 - c0);
    } else {
        size_t full0 = r0;
        if (c0 > 0) { ADD(r0, c0, 1, W - c0); full0 = r0 + 1; }
        if (r1 > full0) ADD(full0, 0, r1 - full0, W);
        if (c1 > 0) ADD(r1, 0, 1, c1);
    }
#undef ADD
    if (!bad && H5Sget_select_npoints(sp) != (hssize_t)(e - s)) bad = 1;
    return bad;
}

/* ---------------------------------------------------------------- one rank's part of a tensor */

typedef struct xfer {
    hid_t dxpl;
    int collective;         /* every rank calls every transfer (H5Sselect_none when it has no part) */
    zt_backend *be;
    int host_mem;           /* the backend's memory is host memory (cpu): transfer in place */
    float *stage;           /* host staging buffer otherwise */
} xfer;

/* Independent write (rd = 0) or read (rd = 1) of the tensor elements [s, e) between dataset ds and
   device memory dev (elements s..e-1 of the tensor) */
static int transfer(const xfer *x, hid_t ds, const zt_tensor_info *t, size_t s, size_t e, float *dev, int rd) {
    hid_t fsp = H5Dget_space(ds);
    hsize_t n1 = e - s;
    hid_t msp = H5Screate_simple(1, &n1, NULL);
    int bad = fsp < 0 || msp < 0 || select_range(fsp, t, s, e);
    const size_t bytes = (e - s) * sizeof(float);
    float *buf = x->host_mem ? dev : x->stage;
    if (!bad && !rd && !x->host_mem) {
        x->be->i->to_host(x->be, x->stage, dev, bytes);
        x->be->i->sync(x->be);
    }
    if (!bad)
        bad = (rd ? H5Dread(ds, H5T_NATIVE_FLOAT, msp, fsp, x->dxpl, buf)
                  : H5Dwrite(ds, H5T_NATIVE_FLOAT, msp, fsp, x->dxpl, buf)) < 0;
    if (rd && !bad && !x->host_mem) x->be->i->to_device(x->be, dev, x->stage, bytes);
    if (msp >= 0) H5Sclose(msp);
    if (fsp >= 0) H5Sclose(fsp);
    return bad;
}

/* a rank with no part of a tensor still takes part in a collective transfer: empty selections */
static int transfer_none(const xfer *x, hid_t ds, int rd) {
    hid_t fsp = H5Dget_space(ds);
    hsize_t one = 1;
    hid_t msp = H5Screate_simple(1, &one, NULL);
    float dummy = 0;
    int bad = fsp < 0 || msp < 0 || H5Sselect_none(fsp) < 0 || H5Sselect_none(msp) < 0;
    if (!bad)
        bad = (rd ? H5Dread(ds, H5T_NATIVE_FLOAT, msp, fsp, x->dxpl, &dummy)
                  : H5Dwrite(ds, H5T_NATIVE_FLOAT, msp, fsp, x->dxpl, &dummy)) < 0;
    if (msp >= 0) H5Sclose(msp);
    if (fsp >= 0) H5Sclose(fsp);
    return bad;
}

static xfer make_xfer(zt_backend *be, size_t maxpiece) {
    /* ZTRAIN_CKPT_IO=collective: collective raw-data transfers (every rank in every H5Dwrite/H5Dread,
       empty selections where it has no part) — for parallel file systems where MPI-IO's collective
       buffering pays; independent (default) was faster here (README "Checkpoints") */
    const char *mode = getenv("ZTRAIN_CKPT_IO");
    xfer x = {H5Pcreate(H5P_DATASET_XFER), mode && strcmp(mode, "collective") == 0, be,
              be->i->mem == ZT_MEM_HOST, NULL};
    if (!x.host_mem) x.stage = zt_malloc(maxpiece * sizeof(float));
    H5Pset_dxpl_mpio(x.dxpl, x.collective ? H5FD_MPIO_COLLECTIVE : H5FD_MPIO_INDEPENDENT);
    return x;
}

/* groups of tensors: source buffer and its layout (flat element `base` is at src[0]) */
typedef struct tgroup {
    const char *path;
    float *src;
    size_t base;
} tgroup;

static int make_groups(tgroup *g, const zt_ckpt_view *v) {
    int n = 0;
    g[n++] = (tgroup){"/model", v->params, 0};
    if (v->exp_avg) {
        g[n++] = (tgroup){"/optim/exp_avg", v->exp_avg, v->optim_base};
        g[n++] = (tgroup){"/optim/exp_avg_sq", v->exp_avg_sq, v->optim_base};
    }
    /* fp32 master weights (precision != fp32): no source in this build, see the file comment */
    float *master = NULL;
    if (master) g[n++] = (tgroup){"/master", master, v->optim_base};
    return n;
}

static hid_t mpio_fapl(void) {
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL);
    H5Pset_all_coll_metadata_ops(fapl, 1);
    H5Pset_coll_metadata_write(fapl, 1);
    return fapl;
}

/* ---------------------------------------------------------------- write */

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

int zt_ckpt_write(const char *path, const zt_ckpt_meta *meta, const zt_ckpt_view *v, char *err,
                  size_t errlen) {
    zt_ckpt_h5_quiet();
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const zt_param_table *pt = v->table;
    const size_t lo = v->lo, hi = v->hi < pt->total ? v->hi : pt->total;
    /* every rank writes the same attribute values: rank 0's text and clock decide */
    char created[32];
    if (meta->created[0]) snprintf(created, sizeof created, "%s", meta->created);
    else zt_iso_time(created, sizeof created);
    MPI_Bcast(created, sizeof created, MPI_CHAR, 0, MPI_COMM_WORLD);
    unsigned long long clen = meta->config_text ? strlen(meta->config_text) : 0;
    MPI_Bcast(&clen, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
    char *config = zt_calloc(clen + 1, 1);
    if (rank == 0 && clen) memcpy(config, meta->config_text, clen);
    MPI_Bcast(config, (int)clen, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (clen > 60000) {
        free(config);
        return zt_errf(err, errlen, "%s: the config text is %llu bytes: too long for an HDF5 attribute", path,
                            clen);
    }

    /* rank 0 tries the plain create first: its errno names the problem (MPI-IO's would not) */
    int pre = 0;
    if (rank == 0) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) pre = zt_errf(err, errlen, "cannot create checkpoint %s: %s", path, strerror(errno));
        else close(fd);
    }
    if (zt_any_failed(pre, err, errlen)) {
        free(config);
        return 1;
    }
    hid_t fapl = mpio_fapl();
    hid_t fid = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    H5Pclose(fapl);
    if (fid < 0) {
        char why[256];
        zt_ckpt_h5_reason(why);
        int e = errno;
        zt_errf(err, errlen, "cannot create checkpoint %s: %s", path, why[0] ? why : e ? strerror(e) : "?");
    }
    if (zt_any_failed(fid < 0, err, errlen)) {
        /* the file is shared: a create that failed on some ranks only cannot be closed collectively */
        if (fid >= 0) zt_panic(__FILE__, __LINE__, "ranks disagree on creating %s: %s", path, err);
        free(config);
        return 1;
    }
    /* Reserve the file's space before any data is written. A disk that fills up in the middle of a
       parallel HDF5 write leaves the ranks in different collective calls when the file is closed
       (a hang: seen with a full tmpfs), so a full disk or quota must show up here. */
    const int ngroups = v->exp_avg ? 3 : 1;
    off_t need = (off_t)ngroups * (off_t)pt->total * 4 + (1 << 20) + (off_t)ngroups * pt->n * 2048 + (off_t)clen;
    int bad = rank == 0 ? reserve_space(path, need, err, errlen) : 0;
    if (zt_any_failed(bad, err, errlen)) {
        H5Fclose(fid);
        free(config);
        return 1;
    }
    long long step = meta->step;
    unsigned long long ss = meta->samples_seen, ts = meta->tokens_seen, seed = meta->seed;
    int version = ZT_CKPT_VERSION, ws = meta->world_size, V = v->shape->vocab_size, Vp = v->shape->padded_vocab, one = 1;
    unsigned long long np = pt->total;
    bad |= attr_write_str(fid, "format", "ztrain");
    bad |= attr_write(fid, "version", H5T_STD_I32LE, H5T_NATIVE_INT, &version);
    bad |= attr_write(fid, "step", H5T_STD_I64LE, H5T_NATIVE_LLONG, &step);
    bad |= attr_write(fid, "samples_seen", H5T_STD_U64LE, H5T_NATIVE_ULLONG, &ss);
    bad |= attr_write(fid, "tokens_seen", H5T_STD_U64LE, H5T_NATIVE_ULLONG, &ts);
    bad |= attr_write(fid, "world_size", H5T_STD_I32LE, H5T_NATIVE_INT, &ws);
    bad |= attr_write(fid, "loss_scale", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, &meta->loss_scale);
    bad |= attr_write(fid, "seed", H5T_STD_U64LE, H5T_NATIVE_ULLONG, &seed);
    bad |= attr_write(fid, "vocab_size", H5T_STD_I32LE, H5T_NATIVE_INT, &V);
    bad |= attr_write(fid, "padded_vocab", H5T_STD_I32LE, H5T_NATIVE_INT, &Vp);
    bad |= attr_write(fid, "n_params", H5T_STD_U64LE, H5T_NATIVE_ULLONG, &np);
    bad |= attr_write_str(fid, "config", config);
    bad |= attr_write_str(fid, "created", created);
    free(config);
    if (zt_any_failed(bad, err, errlen)) bad = 1;

    tgroup groups[4];
    const int ng = make_groups(groups, v);
    size_t maxpiece = 1, s = 0, e = 0;
    for (int i = 0; i < pt->n; i++)
        if (piece(&pt->t[i], lo, hi, &s, &e) && e - s > maxpiece) maxpiece = e - s;
    xfer x = make_xfer(v->be, maxpiece);
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER); /* every element is written: skip the fill pass */
    H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY);
    hid_t *ds = zt_malloc((size_t)pt->n * sizeof(hid_t));
    for (int g = 0; g < ng && !bad; g++) {
        /* metadata collectively: the group and all its datasets */
        hid_t gid = H5Gcreate2(fid, groups[g].path, lcpl, H5P_DEFAULT, H5P_DEFAULT);
        bad |= gid < 0;
        int nds = 0;
        for (; nds < pt->n && !bad; nds++) {
            const zt_tensor_info *t = &pt->t[nds];
            hsize_t dims[2] = {(hsize_t)t->shape[0], (hsize_t)t->shape[1]};
            hid_t sp = H5Screate_simple(t->ndim, dims, NULL);
            ds[nds] = H5Dcreate2(gid, t->name, H5T_IEEE_F32LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
            H5Sclose(sp);
            if (ds[nds] < 0) { bad = 1; break; } /* creation is collective: fails on every rank alike */
            if (nds == 0 && g == 0) bad |= attr_write(ds[0], "vocab_size", H5T_STD_I32LE, H5T_NATIVE_INT, &V);
        }
        /* raw data independently: every rank its own parts, all ranks at once */
        for (int i = 0; i < nds && !bad; i++) {
            const zt_tensor_info *t = &pt->t[i];
            if (piece(t, lo, hi, &s, &e))
                bad |= transfer(&x, ds[i], t, s, e, groups[g].src + (t->offset + s - groups[g].base), 0);
            else if (x.collective)
                bad |= transfer_none(&x, ds[i], 0);
        }
        if (bad) write_failed(path, err, errlen);
        for (int i = 0; i < nds; i++) H5Dclose(ds[i]);
        if (gid >= 0) H5Gclose(gid);
        /* per group: a local I/O error (disk full, ...) stops every rank with its message */
        if (zt_any_failed(bad, err, errlen)) bad = 1;
    }
    free(ds);
    int agreed = bad;
    if (!bad && attr_write(fid, "complete", H5T_STD_I32LE, H5T_NATIVE_INT, &one)) bad = write_failed(path, err, errlen);
    if (H5Fclose(fid) < 0 && !bad) bad = write_failed(path, err, errlen);
    /* one fsync of the whole file (whichever rank's pages) before it may be renamed into place; the
       truncate to its own size returns the unused part of the reservation */
    if (rank == 0 && !bad) {
        int fd = open(path, O_WRONLY);
        struct stat st;
        if (fd >= 0 && fstat(fd, &st) == 0 && ftruncate(fd, st.st_size) != 0) { /* best effort */ }
        if (fd < 0 || fsync(fd) != 0)
            bad = zt_errf(err, errlen, "cannot write checkpoint %s: fsync: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
    }
    H5Pclose(dcpl);
    H5Pclose(lcpl);
    H5Pclose(x.dxpl);
    free(x.stage);
    if (agreed) return 1;
    return zt_any_failed(bad, err, errlen);
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

int zt_ckpt_save(const char *dir, int keep, const zt_ckpt_meta *meta, const zt_ckpt_view *v,
                 char *path_out, size_t path_len, char *err, size_t errlen) {
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int bad = 0;
    if (rank == 0 && zt_mkdirs(dir) != 0)
        bad = zt_errf(err, errlen, "checkpoint directory %s: cannot create: %s", dir, strerror(errno));
    if (zt_any_failed(bad, err, errlen)) return 1;
    char final[ZT_PATH_MAX + 64], tmp[ZT_PATH_MAX + 80];
    snprintf(final, sizeof final, "%.*s/step_%08ld.h5", ZT_PATH_MAX, dir, meta->step);
    snprintf(tmp, sizeof tmp, "%s.tmp", final);
    if (zt_ckpt_write(tmp, meta, v, err, errlen)) {
        if (rank == 0) unlink(tmp);
        return 1;
    }
    /* the file is complete and on disk: publish it, then the pointer, each by an atomic rename */
    if (rank == 0) {
        if (rename(tmp, final) != 0) {
            bad = zt_errf(err, errlen, "cannot rename %s to %s: %s", tmp, final, strerror(errno));
            unlink(tmp);
        } else {
            fsync_path(dir, 1);
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
            if (!ok || rename(lt, lp) != 0) {
                bad = zt_errf(err, errlen, "cannot update %s: %s", lp, strerror(errno));
                unlink(lt);
            } else {
                fsync_path(dir, 1);
                prune(dir, keep, meta->step);
            }
        }
    }
    if (zt_any_failed(bad, err, errlen)) return 1;
    if (path_out && path_len) snprintf(path_out, path_len, "%s", final);
    return 0;
}

/* ---------------------------------------------------------------- load */

static void shape_text(int ndim, const hsize_t *d, char *out, size_t n) {
    if (ndim == 1) snprintf(out, n, "(%llu)", (unsigned long long)d[0]);
    else if (ndim == 2) snprintf(out, n, "(%llu, %llu)", (unsigned long long)d[0], (unsigned long long)d[1]);
    else snprintf(out, n, "(%d dimensions)", ndim);
}

/* every tensor of the table present in group `gpath` with its shape, and nothing else */
static int check_group(hid_t fid, const char *path, const char *gpath, const zt_param_table *pt, char *err,
                       size_t errlen) {
    if (H5Lexists(fid, gpath, H5P_DEFAULT) <= 0)
        return zt_errf(err, errlen, "%s: has no %s group (not a complete ztrain checkpoint)", path, gpath);
    hid_t g = H5Gopen2(fid, gpath, H5P_DEFAULT);
    if (g < 0) return zt_errf(err, errlen, "%s: cannot open group %s", path, gpath);
    int bad = 0;
    for (int i = 0; i < pt->n && !bad; i++) {
        const zt_tensor_info *t = &pt->t[i];
        hsize_t want[2] = {(hsize_t)t->shape[0], (hsize_t)t->shape[1]}, have[2] = {0, 0};
        char ws[64], hs[64];
        shape_text(t->ndim, want, ws, sizeof ws);
        if (H5Lexists(g, t->name, H5P_DEFAULT) <= 0) {
            bad = zt_errf(err, errlen, "%s: tensor %s is missing from %s (the model expects it with shape %s)",
                               path, t->name, gpath, ws);
            break;
        }
        hid_t ds = H5Dopen2(g, t->name, H5P_DEFAULT);
        hid_t sp = ds >= 0 ? H5Dget_space(ds) : -1;
        int nd = sp >= 0 ? H5Sget_simple_extent_ndims(sp) : -1;
        if (nd >= 1 && nd <= 2) H5Sget_simple_extent_dims(sp, have, NULL);
        hid_t ty = ds >= 0 ? H5Dget_type(ds) : -1;
        if (nd < 0) {
            bad = zt_errf(err, errlen, "%s: cannot read tensor %s/%s", path, gpath, t->name);
        } else if (nd != t->ndim || have[0] != want[0] || (nd == 2 && have[1] != want[1])) {
            shape_text(nd, have, hs, sizeof hs);
            bad = zt_errf(err, errlen, "%s: tensor %s has shape %s but the model expects %s", path, t->name, hs,
                               ws);
        } else if (ty < 0 || H5Tget_class(ty) != H5T_FLOAT) {
            bad = zt_errf(err, errlen, "%s: tensor %s/%s is not floating point", path, gpath, t->name);
        }
        if (ty >= 0) H5Tclose(ty);
        if (sp >= 0) H5Sclose(sp);
        if (ds >= 0) H5Dclose(ds);
    }
    H5G_info_t info;
    if (!bad && H5Gget_info(g, &info) >= 0 && info.nlinks != (hsize_t)pt->n) {
        char extra[64] = "?";
        for (hsize_t k = 0; k < info.nlinks; k++) {
            char nm[64] = "";
            H5Lget_name_by_idx(g, ".", H5_INDEX_NAME, H5_ITER_INC, k, nm, sizeof nm, H5P_DEFAULT);
            if (zt_param_find(pt, nm) < 0) { snprintf(extra, sizeof extra, "%s", nm); break; }
        }
        bad = zt_errf(err, errlen, "%s: %s has %llu tensors but the model has %d (%s is not part of the model)",
                           path, gpath, (unsigned long long)info.nlinks, pt->n, extra);
    }
    H5Gclose(g);
    return bad;
}

int zt_ckpt_load(const char *path, zt_ckpt_meta *meta, const zt_ckpt_view *v, char *err, size_t errlen) {
    zt_ckpt_h5_quiet();
    memset(meta, 0, sizeof *meta);
    /* what kind of file: every rank looks (a file missing on one node's view fails there too) */
    int bad = zt_ckpt_precheck(path, err, errlen);
    if (zt_any_failed(bad, err, errlen)) return 1;
    hid_t fapl = mpio_fapl();
    hid_t fid = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    H5Pclose(fapl);
    if (fid < 0) bad = zt_ckpt_open_failed(path, err, errlen);
    if (zt_any_failed(bad, err, errlen)) return 1;
    bad = zt_ckpt_read_attrs(fid, path, meta, err, errlen);
    if (!bad) bad = check_group(fid, path, "/model", v->table, err, errlen);
    if (!bad && v->exp_avg) {
        if (H5Lexists(fid, "/optim", H5P_DEFAULT) <= 0)
            bad = zt_errf(err, errlen,
                               "%s: has no optimizer state (/optim): it can initialise a model but not resume training",
                               path);
        if (!bad) bad = check_group(fid, path, "/optim/exp_avg", v->table, err, errlen);
        if (!bad) bad = check_group(fid, path, "/optim/exp_avg_sq", v->table, err, errlen);
    }
    if (zt_any_failed(bad, err, errlen)) {
        H5Fclose(fid);
        zt_ckpt_meta_free(meta);
        return 1;
    }

    const zt_param_table *pt = v->table;
    zt_backend *be = v->be;
    /* without optimizer state every rank reads everything */
    const size_t lo = v->exp_avg ? v->lo : 0, hi = v->exp_avg && v->hi < pt->total ? v->hi : pt->total;
    /* the padding past the last tensor is zero in every buffer */
    if (v->exp_avg) {
        be->i->zero(be, v->exp_avg, v->optim_elems * sizeof(float));
        be->i->zero(be, v->exp_avg_sq, v->optim_elems * sizeof(float));
    }
    if (v->padded > pt->total) be->i->zero(be, v->params + pt->total, (v->padded - pt->total) * sizeof(float));
    tgroup groups[4];
    const int ng = make_groups(groups, v);
    size_t maxpiece = 1, s = 0, e = 0;
    for (int i = 0; i < pt->n; i++)
        if (piece(&pt->t[i], lo, hi, &s, &e) && e - s > maxpiece) maxpiece = e - s;
    xfer x = make_xfer(be, maxpiece);
    hid_t *ds = zt_malloc((size_t)pt->n * sizeof(hid_t));
    for (int g = 0; g < ng && !bad; g++) {
        hid_t gid = H5Gopen2(fid, groups[g].path, H5P_DEFAULT);
        bad |= gid < 0;
        int nds = 0;
        for (; nds < pt->n && !bad; nds++)
            if ((ds[nds] = H5Dopen2(gid, pt->t[nds].name, H5P_DEFAULT)) < 0) { bad = 1; break; }
        for (int i = 0; i < nds && !bad; i++) {
            const zt_tensor_info *t = &pt->t[i];
            if (piece(t, lo, hi, &s, &e))
                bad |= transfer(&x, ds[i], t, s, e, groups[g].src + (t->offset + s - groups[g].base), 1);
            else if (x.collective)
                bad |= transfer_none(&x, ds[i], 1);
        }
        if (bad) {
            char why[256];
            zt_ckpt_h5_reason(why);
            zt_errf(err, errlen, "%s: cannot read %s: %s", path, groups[g].path, why[0] ? why : "read failed");
        }
        for (int i = 0; i < nds; i++) H5Dclose(ds[i]);
        if (gid >= 0) H5Gclose(gid);
        if (zt_any_failed(bad, err, errlen)) bad = 1;
    }
    free(ds);
    H5Pclose(x.dxpl);
    free(x.stage);
    H5Fclose(fid);
    if (bad) {
        zt_ckpt_meta_free(meta);
        return 1;
    }
    be->i->sync(be);
    return 0;
}

