/* ckpt_internal.h — what ckpt_file.c (HDF5 errors, attributes, file checks) gives ckpt_save.c (the
 * write), ckpt.c (the collective read) and ckpt_resume.c (find_latest, resume rules), and the tensor
 * groups and pieces both sides use. Not part of the public checkpoint API. */
#ifndef ZT_CKPT_INTERNAL_H
#define ZT_CKPT_INTERNAL_H

#include <hdf5.h>
#include <mpi.h>
#include <stddef.h>

#include "io/ckpt.h"

/* silence HDF5's automatic error stacks (we print our own line) */
void zt_ckpt_h5_quiet(void);
/* innermost message of the current HDF5 error stack, "" if none */
void zt_ckpt_h5_reason(char out[256]);
/* attribute readers: 0 on success (strings malloc'd) */
int zt_ckpt_attr_read_num(hid_t obj, const char *name, hid_t mtype, void *out);
int zt_ckpt_attr_read_str(hid_t obj, const char *name, char **out);
/* NOT collective: the file exists, is a regular non-empty file and an HDF5 file */
int zt_ckpt_precheck(const char *path, char *err, size_t errlen);
/* after H5Fopen failed on a file that is HDF5: "truncated HDF5 file (N bytes ...)" or "damaged ..." */
int zt_ckpt_open_failed(const char *path, char *err, size_t errlen);
/* root attributes of an open file: format, version, completion mark, then meta (config malloc'd) */
int zt_ckpt_read_attrs(hid_t fid, const char *path, zt_ckpt_meta *meta, char *err, size_t errlen);

/* ---- shared by the write (ckpt_save.c) and the read (ckpt.c) */
/* NOT collective: 1 when a NaN or Inf lies among the view's flat elements [lo, hi) of the parameters
   (and, with moments, of exp_avg / exp_avg_sq), with "NaN in /model/<name> (element k)" in what */
int zt_ckpt_view_nonfinite(const zt_ckpt_view *v, size_t lo, size_t hi, int moments, char *what, size_t n);
/* the part of tensor t inside the flat range [lo, hi), as tensor-local elements [*s, *e) */
static inline int zt_ckpt_piece_of(const zt_tensor_info *t, size_t lo, size_t hi, size_t *s, size_t *e) {
    size_t a = t->offset > lo ? t->offset : lo;
    size_t b = t->offset + t->numel < hi ? t->offset + t->numel : hi;
    if (a >= b) return 0;
    *s = a - t->offset;
    *e = b - t->offset;
    return 1;
}


/* groups of tensors: source buffer and its layout (flat element `base` is at src[0]) */
typedef struct zt_ckpt_group {
    const char *path;
    float *src;
    size_t base;
    int round;   /* save: the values are rounded to this precision (ZT_PREC_*) as they are written; a load skips
                    the group (2-byte working parameters: /model from the master weights, zt_ckpt_view.model_prec) */
} zt_ckpt_group;

static inline int zt_ckpt_groups(zt_ckpt_group *g, const zt_ckpt_view *v) {
    int n = 0;
    if (v->params || !v->master) g[n++] = (zt_ckpt_group){"/model", v->params, v->params_base, 0};
    else g[n++] = (zt_ckpt_group){"/model", v->master, v->optim_base, v->model_prec};
    if (v->exp_avg) {
        g[n++] = (zt_ckpt_group){"/optim/exp_avg", v->exp_avg, v->optim_base, 0};
        g[n++] = (zt_ckpt_group){"/optim/exp_avg_sq", v->exp_avg_sq, v->optim_base, 0};
    }
    /* fp32 master weights (precision bf16/fp16) */
    if (v->master) g[n++] = (zt_ckpt_group){"/master", v->master, v->optim_base, 0};
    return n;
}

static inline hid_t zt_ckpt_mpio_fapl(void) {
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL);
    H5Pset_all_coll_metadata_ops(fapl, 1);
    H5Pset_coll_metadata_write(fapl, 1);
    return fapl;
}


#endif
