/* ckpt_file.c — reading a checkpoint file's identity, shared by the collective writer/reader
 * (ckpt.c) and the resume logic (ckpt_resume.c): HDF5's error stack folded into one line, attribute
 * readers, what kind of file a path is (missing, not HDF5, truncated, not ztrain, interrupted),
 * and the root attributes, with the checks every reader (resume, eval, sample, export, --resume
 * auto's search) relies on: format, version, complete = 1, step >= 0, finite = 1 when present (the
 * values themselves are checked after the collective load, ckpt.c). None of this is collective. */
#define _GNU_SOURCE
#include <errno.h>
#include <hdf5.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/ckpt.h"
#include "io/ckpt_internal.h"
#include "util/util.h"

/* ---------------------------------------------------------------- errors */

static herr_t first_h5_error(unsigned n, const H5E_error2_t *e, void *ctx) {
    (void)n;
    char *out = ctx;
    if (!out[0] && e->desc && e->desc[0]) snprintf(out, 256, "%s", e->desc);
    return 0;
}

/* innermost message of the current HDF5 error stack ("" if none) */
void zt_ckpt_h5_reason(char out[256]) {
    out[0] = 0;
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, first_h5_error, out);
}

void zt_ckpt_h5_quiet(void) { H5Eset_auto2(H5E_DEFAULT, NULL, NULL); }

/* ---------------------------------------------------------------- attributes */

int zt_ckpt_attr_read_num(hid_t obj, const char *name, hid_t mtype, void *out) {
    if (H5Aexists(obj, name) <= 0) return 1;
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    if (a < 0) return 1;
    /* exactly one element: an array attribute would be read past `out` (found by tests/fuzz) */
    hid_t sp = H5Aget_space(a);
    int bad = sp < 0 || H5Sget_simple_extent_npoints(sp) != 1 || H5Aread(a, mtype, out) < 0;
    if (sp >= 0) H5Sclose(sp);
    H5Aclose(a);
    return bad;
}

/* a string attribute, fixed-length or variable-length (h5py writes the latter); malloc'd */
int zt_ckpt_attr_read_str(hid_t obj, const char *name, char **out) {
    *out = NULL;
    if (H5Aexists(obj, name) <= 0) return 1;
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    if (a < 0) return 1;
    hid_t ft = H5Aget_type(a), sp = H5Aget_space(a);
    int bad = H5Tget_class(ft) != H5T_STRING || H5Sget_simple_extent_npoints(sp) != 1;
    if (!bad && H5Tis_variable_str(ft) > 0) {
        hid_t mt = H5Tcopy(H5T_C_S1);
        H5Tset_size(mt, H5T_VARIABLE);
        H5Tset_cset(mt, H5Tget_cset(ft)); /* h5py writes str as UTF-8 */
        char *v = NULL;
        bad = H5Aread(a, mt, &v) < 0 || !v;
        if (!bad) *out = strdup(v);
        if (v) H5free_memory(v);
        H5Tclose(mt);
    } else if (!bad) {
        size_t n = H5Tget_size(ft);
        hid_t mt = H5Tcopy(H5T_C_S1);
        H5Tset_size(mt, n + 1); /* room for the NUL a NULLPAD string that fills its size lacks */
        H5Tset_cset(mt, H5Tget_cset(ft));
        char *v = zt_calloc(n + 2, 1);
        bad = H5Aread(a, mt, v) < 0;
        if (bad) free(v);
        else *out = v;
        H5Tclose(mt);
    }
    H5Sclose(sp);
    H5Tclose(ft);
    H5Aclose(a);
    return bad;
}

/* ---------------------------------------------------------------- what kind of file */

int zt_ckpt_precheck(const char *path, char *err, size_t errlen) {
    struct stat st;
    if (stat(path, &st) != 0) return zt_errf(err, errlen, "%s: cannot open checkpoint: %s", path, strerror(errno));
    if (S_ISDIR(st.st_mode))
        return zt_errf(err, errlen, "%s: is a directory, not a checkpoint file (use --resume auto to take the "
                            "newest checkpoint of a run, or name a step_*.h5 file)", path);
    if (st.st_size == 0) return zt_errf(err, errlen, "%s: empty file, not a ztrain checkpoint", path);
    zt_ckpt_h5_quiet();
    htri_t h5 = H5Fis_hdf5(path);
    if (h5 <= 0) return zt_errf(err, errlen, "%s: not an HDF5 file, so not a ztrain checkpoint", path);
    return 0;
}

int zt_ckpt_open_failed(const char *path, char *err, size_t errlen) {
    char why[256];
    zt_ckpt_h5_reason(why);
    struct stat st;
    long long size = stat(path, &st) == 0 ? (long long)st.st_size : -1;
    if (strstr(why, "truncated"))
        return zt_errf(err, errlen, "%s: truncated HDF5 file (%lld bytes: its save was interrupted or the copy is "
                            "incomplete)", path, size);
    return zt_errf(err, errlen, "%s: damaged HDF5 file (%s)", path, why[0] ? why : "cannot open");
}

int zt_ckpt_read_attrs(hid_t fid, const char *path, zt_ckpt_meta *meta, char *err, size_t errlen) {
    memset(meta, 0, sizeof *meta);
    char *fmt = NULL;
    if (zt_ckpt_attr_read_str(fid, "format", &fmt) || strcmp(fmt, "ztrain") != 0) {
        free(fmt);
        return zt_errf(err, errlen, "%s: not a ztrain checkpoint (an HDF5 file without the attribute "
                            "format = \"ztrain\")", path);
    }
    free(fmt);
    int version = 0, complete = 0;
    if (zt_ckpt_attr_read_num(fid, "version", H5T_NATIVE_INT, &version) || version < 1)
        return zt_errf(err, errlen, "%s: damaged ztrain checkpoint (no valid version attribute)", path);
    if (version > ZT_CKPT_VERSION)
        return zt_errf(err, errlen, "%s: checkpoint format version %d is newer than this ztrain reads (%d)", path,
                            version, ZT_CKPT_VERSION);
    if (zt_ckpt_attr_read_num(fid, "complete", H5T_NATIVE_INT, &complete) || complete != 1)
        return zt_errf(err, errlen, "%s: incomplete checkpoint (its save was interrupted)", path);
    long long step = 0;
    unsigned long long ss = 0, ts = 0, seed = 0;
    char *created = NULL;
    int bad = zt_ckpt_attr_read_num(fid, "step", H5T_NATIVE_LLONG, &step);
    bad |= zt_ckpt_attr_read_num(fid, "samples_seen", H5T_NATIVE_ULLONG, &ss);
    bad |= zt_ckpt_attr_read_num(fid, "tokens_seen", H5T_NATIVE_ULLONG, &ts);
    bad |= zt_ckpt_attr_read_num(fid, "world_size", H5T_NATIVE_INT, &meta->world_size);
    bad |= zt_ckpt_attr_read_num(fid, "loss_scale", H5T_NATIVE_FLOAT, &meta->loss_scale);
    bad |= zt_ckpt_attr_read_num(fid, "seed", H5T_NATIVE_ULLONG, &seed);
    long long good = 0; /* optional (files before mixed precision have none) */
    if (H5Aexists(fid, "loss_scale_good") > 0) bad |= zt_ckpt_attr_read_num(fid, "loss_scale_good", H5T_NATIVE_LLONG, &good);
    meta->loss_scale_good = (long)good;
    unsigned long long bh = 0; /* LoRA checkpoints only */
    if (H5Aexists(fid, "lora_base_hash") > 0) bad |= zt_ckpt_attr_read_num(fid, "lora_base_hash", H5T_NATIVE_ULLONG, &bh);
    meta->lora_base_hash = bh;
    if (H5Aexists(fid, "stream_file") > 0) { /* data.stream runs only */
        const char *names[6] = {"stream_file", "stream_doc", "stream_token", "stream_epoch", "stream_epoch_first",
                                "stream_first_doc"};
        unsigned long long vals[6] = {0};
        for (int i = 0; i < 6; i++) bad |= zt_ckpt_attr_read_num(fid, names[i], H5T_NATIVE_ULLONG, &vals[i]);
        meta->has_stream = 1;
        meta->stream = (zt_stream_pos){.sample = ss, .file = vals[0], .doc = vals[1], .token = vals[2],
                                       .epoch = vals[3], .epoch_first = vals[4], .first_doc = vals[5]};
    }
    bad |= zt_ckpt_attr_read_str(fid, "config", &meta->config_text);
    if (!zt_ckpt_attr_read_str(fid, "created", &created)) snprintf(meta->created, sizeof meta->created, "%s", created);
    free(created);
    if (bad) {
        zt_ckpt_meta_free(meta);
        return zt_errf(err, errlen, "%s: damaged ztrain checkpoint (missing root attributes step, samples_seen, "
                            "tokens_seen, world_size, loss_scale, seed or config)", path);
    }
    /* a negative step or a finite mark other than 1 (ckpt_save.c publishes a file marked finite = 1 only
       once every value was checked; files from before the mark have none) is not a state to start from */
    int finite = 1;
    if (step < 0) {
        zt_ckpt_meta_free(meta);
        return zt_errf(err, errlen, "%s: damaged ztrain checkpoint (step %lld is negative)", path, step);
    }
    if (H5Aexists(fid, "finite") > 0 && (zt_ckpt_attr_read_num(fid, "finite", H5T_NATIVE_INT, &finite) || finite != 1)) {
        zt_ckpt_meta_free(meta);
        return zt_errf(err, errlen, "%s: marked as holding non-finite values (attribute finite = %d), refusing it",
                       path, finite);
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

void zt_ckpt_meta_free(zt_ckpt_meta *meta) {
    if (!meta) return;
    free(meta->config_text);
    meta->config_text = NULL;
}
