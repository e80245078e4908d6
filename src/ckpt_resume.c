/* ckpt_resume.c — what resuming needs before the collective load: telling what kind of file a
 * path is (missing, not HDF5, truncated, not ztrain, interrupted), reading the root attributes,
 * finding the newest complete checkpoint of a directory, and the rules for what a resumed run may
 * change in its config. None of this is collective. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <hdf5.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckpt.h"
#include "ckpt_internal.h"
#include "util.h"

/* ---------------------------------------------------------------- what kind of file */

int zt_ckpt_precheck(const char *path, char *err, size_t errlen) {
    struct stat st;
    if (stat(path, &st) != 0) return zt_ckpt_fail(err, errlen, "%s: cannot open checkpoint: %s", path, strerror(errno));
    if (S_ISDIR(st.st_mode))
        return zt_ckpt_fail(err, errlen, "%s: is a directory, not a checkpoint file (use --resume auto to take the "
                            "newest checkpoint of a run, or name a step_*.h5 file)", path);
    if (st.st_size == 0) return zt_ckpt_fail(err, errlen, "%s: empty file, not a ztrain checkpoint", path);
    zt_ckpt_h5_quiet();
    htri_t h5 = H5Fis_hdf5(path);
    if (h5 <= 0) return zt_ckpt_fail(err, errlen, "%s: not an HDF5 file, so not a ztrain checkpoint", path);
    return 0;
}

int zt_ckpt_open_failed(const char *path, char *err, size_t errlen) {
    char why[256];
    zt_ckpt_h5_reason(why);
    struct stat st;
    long long size = stat(path, &st) == 0 ? (long long)st.st_size : -1;
    if (strstr(why, "truncated"))
        return zt_ckpt_fail(err, errlen, "%s: truncated HDF5 file (%lld bytes: its save was interrupted or the copy is "
                            "incomplete)", path, size);
    return zt_ckpt_fail(err, errlen, "%s: damaged HDF5 file (%s)", path, why[0] ? why : "cannot open");
}

int zt_ckpt_read_attrs(hid_t fid, const char *path, zt_ckpt_meta *meta, char *err, size_t errlen) {
    memset(meta, 0, sizeof *meta);
    char *fmt = NULL;
    if (zt_ckpt_attr_read_str(fid, "format", &fmt) || strcmp(fmt, "ztrain") != 0) {
        free(fmt);
        return zt_ckpt_fail(err, errlen, "%s: not a ztrain checkpoint (an HDF5 file without the attribute "
                            "format = \"ztrain\")", path);
    }
    free(fmt);
    int version = 0, complete = 0;
    if (zt_ckpt_attr_read_num(fid, "version", H5T_NATIVE_INT, &version) || version < 1)
        return zt_ckpt_fail(err, errlen, "%s: damaged ztrain checkpoint (no valid version attribute)", path);
    if (version > ZT_CKPT_VERSION)
        return zt_ckpt_fail(err, errlen, "%s: checkpoint format version %d is newer than this ztrain reads (%d)", path,
                            version, ZT_CKPT_VERSION);
    if (zt_ckpt_attr_read_num(fid, "complete", H5T_NATIVE_INT, &complete) || complete != 1)
        return zt_ckpt_fail(err, errlen, "%s: incomplete checkpoint (its save was interrupted)", path);
    long long step = 0;
    unsigned long long ss = 0, ts = 0, seed = 0;
    char *created = NULL;
    int bad = zt_ckpt_attr_read_num(fid, "step", H5T_NATIVE_LLONG, &step);
    bad |= zt_ckpt_attr_read_num(fid, "samples_seen", H5T_NATIVE_ULLONG, &ss);
    bad |= zt_ckpt_attr_read_num(fid, "tokens_seen", H5T_NATIVE_ULLONG, &ts);
    bad |= zt_ckpt_attr_read_num(fid, "world_size", H5T_NATIVE_INT, &meta->world_size);
    bad |= zt_ckpt_attr_read_num(fid, "loss_scale", H5T_NATIVE_FLOAT, &meta->loss_scale);
    bad |= zt_ckpt_attr_read_num(fid, "seed", H5T_NATIVE_ULLONG, &seed);
    bad |= zt_ckpt_attr_read_str(fid, "config", &meta->config_text);
    if (!zt_ckpt_attr_read_str(fid, "created", &created)) snprintf(meta->created, sizeof meta->created, "%s", created);
    free(created);
    if (bad) {
        zt_ckpt_meta_free(meta);
        return zt_ckpt_fail(err, errlen, "%s: damaged ztrain checkpoint (missing root attributes step, samples_seen, "
                            "tokens_seen, world_size, loss_scale, seed or config)", path);
    }
    meta->step = (long)step;
    meta->samples_seen = ss;
    meta->tokens_seen = ts;
    meta->seed = seed;
    return 0;
}

int zt_ckpt_read_meta(const char *path, zt_ckpt_meta *meta, char *err, size_t errlen) {
    memset(meta, 0, sizeof *meta);
    if (zt_ckpt_precheck(path, err, errlen)) return 1;
    hid_t fid = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (fid < 0) return zt_ckpt_open_failed(path, err, errlen);
    int bad = zt_ckpt_read_attrs(fid, path, meta, err, errlen);
    H5Fclose(fid);
    return bad;
}

/* ---------------------------------------------------------------- newest complete checkpoint */

static int is_complete(const char *path) {
    zt_ckpt_meta meta;
    char err[ZT_ERR_BUF];
    if (zt_ckpt_read_meta(path, &meta, err, sizeof err)) return 0;
    zt_ckpt_meta_free(&meta);
    return 1;
}

static int cmp_desc(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return (x < y) - (x > y);
}

int zt_ckpt_find_latest(const char *dir, char *path, size_t n) {
    /* `latest` names the last file a save published; it is replaced only after that file was
       renamed into place, so it normally names a complete file */
    char lp[ZT_PATH_MAX + 16], name[256] = "";
    snprintf(lp, sizeof lp, "%.*s/latest", ZT_PATH_MAX, dir);
    FILE *f = fopen(lp, "r");
    if (f) {
        if (!fgets(name, sizeof name, f)) name[0] = 0;
        fclose(f);
        name[strcspn(name, "\r\n")] = 0;
        if (name[0] && !strchr(name, '/')) {
            snprintf(path, n, "%s/%s", dir, name);
            if (is_complete(path)) return 0;
        }
    }
    /* fallback: step_*.h5 files (never .tmp), highest step first, the first that is complete */
    DIR *dp = opendir(dir);
    if (!dp) return 1;
    long *steps = NULL;
    size_t cnt = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(dp))) {
        long st;
        int used = 0;
        if (sscanf(de->d_name, "step_%ld.h5%n", &st, &used) != 1 || used <= 0 || de->d_name[used]) continue;
        if (cnt == cap) {
            long *p = realloc(steps, (cap = cap ? 2 * cap : 16) * sizeof *steps);
            if (!p) break;
            steps = p;
        }
        steps[cnt++] = st;
    }
    closedir(dp);
    if (cnt) qsort(steps, cnt, sizeof *steps, cmp_desc);
    int rc = 1;
    for (size_t i = 0; i < cnt && rc; i++) {
        snprintf(path, n, "%s/step_%08ld.h5", dir, steps[i]);
        if (is_complete(path)) rc = 0;
    }
    free(steps);
    if (rc && n) path[0] = 0;
    return rc;
}

/* ---------------------------------------------------------------- what a resumed run may change */

/* keys (or "group." prefixes) a resume may change: how and where the run executes, never the model
   or the optimizer. train.micro_batch may change because train.global_batch may not: each step
   still averages the gradient over the same samples (the bits differ, the math does not).
   train.steps moves the end of the lr schedule. */
static const char *const may_change[] = {
    "device", "train.micro_batch", "train.steps", "train.threads", "train.log_every",
    "checkpoint.", "eval.", "sample.", "run.", "data.", "zero.stage", "zero.reduce", "zero.bucket_mb", NULL,
};

static int allowed(const char *key) {
    for (const char *const *k = may_change; *k; k++) {
        size_t l = strlen(*k);
        if ((*k)[l - 1] == '.' ? strncmp(key, *k, l) == 0 : strcmp(key, *k) == 0) return 1;
    }
    return 0;
}

typedef struct diff_ctx {
    char *log, *err;
    size_t loglen, errlen, used;
} diff_ctx;

static int on_diff(const char *key, const char *was, const char *now, void *p) {
    diff_ctx *d = p;
    if (!allowed(key))
        return zt_ckpt_fail(d->err, d->errlen,
                            "resume: %s is %s in the checkpoint but %s in the config (a checkpoint can only resume "
                            "the same model and optimizer settings)", key, was, now);
    if (d->log && d->used < d->loglen) {
        int w = snprintf(d->log + d->used, d->loglen - d->used, "%s%s %s -> %s", d->used ? ", " : "", key, was, now);
        if (w > 0) d->used += (size_t)w;
        if (d->used >= d->loglen) d->used = d->loglen;
    }
    return 0;
}

int zt_ckpt_check_resume(const char *saved_config_text, const zt_config *now, char *log, size_t loglen, char *err,
                         size_t errlen) {
    zt_config *saved = zt_calloc(1, sizeof *saved);
    char perr[ZT_ERR_BUF];
    if (log && loglen) log[0] = 0;
    if (!saved_config_text || zt_config_load_string(saved, saved_config_text, perr, sizeof perr)) {
        free(saved);
        return zt_ckpt_fail(err, errlen, "resume: the checkpoint's stored config cannot be read (%s)",
                            saved_config_text ? perr : "missing");
    }
    diff_ctx d = {log, err, loglen, errlen, log && loglen ? strlen(log) : 0};
    int rc = zt_config_diff(saved, now, on_diff, &d);
    free(saved);
    return rc;
}
