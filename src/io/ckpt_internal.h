/* ckpt_internal.h — what ckpt_file.c (HDF5 errors, attributes, file checks) gives ckpt.c (collective
 * write/read) and ckpt_resume.c (find_latest, resume rules). Not part of the public checkpoint API. */
#ifndef ZT_CKPT_INTERNAL_H
#define ZT_CKPT_INTERNAL_H

#include <hdf5.h>
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

#endif
