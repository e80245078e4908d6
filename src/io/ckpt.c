/* ckpt.c — parallel-HDF5 checkpoints (ckpt.h, docs/design.md section 5): the collective read of
 * one file, and the checks that turn a wrong file into one clear line on every rank (the save protocol
 * is in ckpt_save.c).
 *
 * File layout (h5py and h5dump read it as it is):
 *   /                 attrs format="ztrain", version, step, samples_seen, tokens_seen, world_size,
 *                     loss_scale, seed, config (resolved config text), created (ISO time, UTC),
 *                     vocab_size, padded_vocab, n_params, finite=1 (every value was checked before
 *                     the write), complete=1 (written last)
 *   /model/<name>     working parameters, float32, true shapes, Hugging Face GPT-2 names
 *                     (wte.weight, h.0.attn.c_attn.weight, ...; Conv1D weights (in, out)).
 *                     wte.weight is stored as the model holds it, (Vp, C): rows V..Vp-1 are the
 *                     zero padding the model computes with, so a resume is bit-exact and a file
 *                     is one buffer per tensor; its attr vocab_size (= V) tells readers such as
 *                     `ztrain export` to keep the first V rows.
 *   /optim/exp_avg/<name>, /optim/exp_avg_sq/<name>   AdamW moments, same names and shapes
 *   /master/<name>    fp32 master weights when precision is bf16 or fp16 (/model then holds the working
 *                     parameters, each value rounded to the precision); an fp32 run's parameters are
 *                     its master weights and the group is absent. Loading: a view with a master
 *                     buffer fills it from /master, or from /model when the file has none (an fp32
 *                     file resumed in bf16); a view without one (fp32 training, eval, sample, export)
 *                     takes its parameters from /master when the file has it, so every consumer sees
 *                     the full-precision weights and a bf16 run resumes in fp32 from exactly them.
 *                     Root attr loss_scale_good (fp16: finite steps since the scale changed).
 *   LoRA (lora.enabled in the config): the groups hold the adapters (h.<l>.attn.c_attn.lora_A, ...),
 *                     not GPT-2's tensors; root attr lora_base_hash fingerprints the frozen base
 *                     (lora.base) they apply to (core/lora/lora.h), checked when the file is used.
 * There is no /rng or /data group: the sample order is a pure function of (seed, global sample
 * index) (data.h) and ztrain keeps no other generator state, so step + seed (root attrs) is the
 * whole data position.
 *
 * Parallel write: every rank holds the full parameters, but writes only the part of each tensor
 * inside its range [v->lo, v->hi) of the flat buffer (its ZeRO shard: a contiguous element range of
 * the tensor: a partial row, full rows, a partial row), so each byte is written once. Moments are
 * shards at stages 1-2 (element k of exp_avg is flat element lo + k) and full copies at stage 0
 * (element k is flat element k): the view's optim_base says which; the rank writes its [lo, hi).
 * Writing is ckpt_save.c's (layout by rank 0 alone, raw pieces by every rank through ckpt_rawio.c,
 * completion mark, rename); this file reads. Metadata is read collectively (collective metadata
 * reads); each rank then reads its parts: contiguous float32 datasets (every file ztrain writes) with
 * plain pread at their offsets straight into host buffers after the file is closed, anything else
 * (a chunked or float64 dataset another tool wrote) with independent H5Dread. Why not collective
 * transfers: a tensor almost always lies in ONE rank's shard, so a collective H5Dread per tensor makes
 * the other ranks wait for it and the ranks take turns (GPT-2 124M + Adam state on 4 ranks of a 2-core
 * AMD EPYC VM: load 2.5-2.8 s collective vs 1.0 s independent; ZTRAIN_CKPT_IO=collective still selects
 * collective H5Dread transfers for parallel file systems where collective buffering pays).
 * Load reads this rank's range of every tensor; ZeRO then all-gathers the parameters (and the
 * stage-0 moments: zt_zero_after_load), so any rank count and stage can resume any file. A view
 * without optimizer state (eval, export) reads the full tensors on every rank.
 *
 * Values: each rank checks what it reads for NaN/Inf, chunk by chunk as it arrives (ckpt_rawio.c; what
 * came through HDF5 is scanned after), and a file holding any is refused with one line naming the tensor
 * (the lowest failing rank's: the first in file order): resume, --init-from, eval, sample and export all
 * load through here.
 *
 * Errors: every failure is agreed on by all ranks (all-reduce of a flag, the lowest failing
 * rank's message broadcast), so each rank returns the same code and line; HDF5's own error
 * stacks are silenced and their innermost message folded into ours. */
#define _GNU_SOURCE
#include "io/ckpt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <hdf5.h>
#include <math.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "io/ckpt_internal.h"
#include "io/ckpt_rawio.h"
#include "util/util.h"

/* ---------------------------------------------------------------- selections */

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
       buffering pays; independent (default) is faster on ext4 (the top of this file) */
    const char *mode = getenv("ZTRAIN_CKPT_IO");
    xfer x = {H5Pcreate(H5P_DATASET_XFER), mode && strcmp(mode, "collective") == 0, be,
              be->i->mem == ZT_MEM_HOST, NULL};
    if (!x.host_mem) x.stage = zt_malloc(maxpiece * sizeof(float));
    H5Pset_dxpl_mpio(x.dxpl, x.collective ? H5FD_MPIO_COLLECTIVE : H5FD_MPIO_INDEPENDENT);
    return x;
}

/* ---------------------------------------------------------------- finite values */

/* first non-finite element of buf[0, n) (backend memory); device memory is staged through the host */
static size_t scan_buffer(zt_backend *be, const float *buf, size_t n, float *stage, size_t stage_n) {
    if (be->i->mem == ZT_MEM_HOST) return zt_first_nonfinite(buf, n);
    for (size_t off = 0; off < n; off += stage_n) {
        const size_t k = n - off < stage_n ? n - off : stage_n;
        be->i->to_host(be, stage, buf + off, k * sizeof(float));
        be->i->sync(be);
        const size_t j = zt_first_nonfinite(stage, k);
        if (j < k) return off + j;
    }
    return n;
}

/* "NaN in /model/h.1.mlp.c_fc.weight[3, 5]": what x, at flat element `flat` of group gpath, is */
static void nonfinite_text(const zt_param_table *pt, const char *gpath, size_t flat, float x, char *what, size_t n) {
    char where[128] = "?";
    for (int i = 0; i < pt->n; i++)
        if (flat >= pt->t[i].offset && flat < pt->t[i].offset + pt->t[i].numel) {
            const zt_tensor_info *t = &pt->t[i];
            const size_t el = flat - t->offset;
            if (t->ndim == 2) snprintf(where, sizeof where, "%s[%zu, %zu]", t->name, el / (size_t)t->shape[1],
                                       el % (size_t)t->shape[1]);
            else snprintf(where, sizeof where, "%s[%zu]", t->name, el);
            break;
        }
    snprintf(what, n, "%s in %s/%s", isnan(x) ? "NaN" : x > 0 ? "+Inf" : "-Inf", gpath, where);
}

int zt_ckpt_view_nonfinite(const zt_ckpt_view *v, size_t lo, size_t hi, int moments, char *what, size_t n) {
    const zt_param_table *pt = v->table;
    if (hi > pt->total) hi = pt->total;
    if (hi <= lo) return 0;
    zt_ckpt_group groups[4];
    const int all = zt_ckpt_groups(groups, v), ng = moments ? all : 1; /* /model first */
    const size_t stage_n = (size_t)1 << 20;
    float *stage = v->be->i->mem == ZT_MEM_HOST ? NULL : zt_malloc(stage_n * sizeof(float));
    int found = 0;
    for (int g = 0; g < ng && !found; g++) {
        /* the group's source holds flat elements [base, ...): its part of [lo, hi) */
        const size_t a = lo > groups[g].base ? lo : groups[g].base;
        if (hi <= a) continue;
        const size_t j = scan_buffer(v->be, groups[g].src + (a - groups[g].base), hi - a, stage, stage_n);
        if (j == hi - a) continue;
        const size_t flat = a + j;
        float x = 0;
        if (v->be->i->mem == ZT_MEM_HOST) x = groups[g].src[flat - groups[g].base];
        else {
            v->be->i->to_host(v->be, &x, groups[g].src + (flat - groups[g].base), sizeof x);
            v->be->i->sync(v->be);
        }
        nonfinite_text(pt, groups[g].path, flat, x, what, n);
        found = 1;
    }
    free(stage);
    return found;
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

/* opens a checkpoint for a load and checks that its groups match the view's table (collective: an error on any rank
   fails all); returns the file, or -1 with err (and meta freed) */
static hid_t load_open(const char *path, zt_ckpt_meta *meta, const zt_ckpt_view *v, int *file_master, char *err,
                       size_t errlen) {
    /* what kind of file: every rank looks (a file missing on one node's view fails there too) */
    int bad = zt_ckpt_precheck(path, err, errlen);
    if (zt_any_failed(bad, err, errlen)) return -1;
    hid_t fapl = zt_ckpt_mpio_fapl();
    hid_t fid = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    H5Pclose(fapl);
    if (fid < 0) bad = zt_ckpt_open_failed(path, err, errlen);
    if (zt_any_failed(bad, err, errlen)) return -1;
    bad = zt_ckpt_read_attrs(fid, path, meta, err, errlen);
    /* fp32 master weights: a bf16/fp16 run's file has them beside its working (rounded) parameters */
    *file_master = !bad && H5Lexists(fid, "/master", H5P_DEFAULT) > 0;
    if (!bad) bad = check_group(fid, path, "/model", v->table, err, errlen);
    if (!bad && *file_master) bad = check_group(fid, path, "/master", v->table, err, errlen);
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
        return -1;
    }
    return fid;
}

/* what a load reads: the groups and their pieces in the element range [lo, hi) */
typedef struct load_plan {
    zt_ckpt_group groups[4];
    int ng;
    size_t lo, hi;
    zt_ckpt_rpiece *rp;       /* pieces read directly from the file's bytes, in group order */
    int nrp;
    int hdf5_read;            /* some data came through HDF5 (a file another tool wrote) */
} load_plan;

/* the view's buffers made ready (padding and moments zero) and the groups chosen: the master weights are what a
   state is, so a view without a master copy (fp32 training, eval, sample, export) takes its parameters from
   /master when the file has it, and a view with one fills it from /model when the file has none (an fp32 run's
   parameters ARE its master weights) */
static void load_prepare(const zt_ckpt_view *v, int file_master, load_plan *pl) {
    const zt_param_table *pt = v->table;
    zt_backend *be = v->be;
    /* without optimizer state every rank reads everything (or the range asked for) */
    const int ranged = v->exp_avg || v->range_only;
    pl->lo = ranged ? v->lo : 0;
    pl->hi = ranged && v->hi < pt->total ? v->hi : pt->total;
    if (v->exp_avg) {
        be->i->zero(be, v->exp_avg, v->optim_elems * sizeof(float));
        be->i->zero(be, v->exp_avg_sq, v->optim_elems * sizeof(float));
    }
    if (v->params && !v->range_only && v->padded > pt->total)
        be->i->zero(be, v->params + pt->total, (v->padded - pt->total) * sizeof(float));
    pl->ng = zt_ckpt_groups(pl->groups, v);
    for (int g = 0; g < pl->ng; g++) {
        if (!strcmp(pl->groups[g].path, "/model") && !v->master && file_master) pl->groups[g].path = "/master";
        else if (!strcmp(pl->groups[g].path, "/master") && !file_master) pl->groups[g].path = "/model";
    }
}

/* walks every group's datasets: contiguous little-endian float32 (every file ztrain writes) becomes a piece read
   directly from the file's bytes after it is closed; anything else (a chunked or float64 dataset written by another
   tool) is read through HDF5 now. Collective; returns non-zero with err on any rank's failure */
static int load_plan_pieces(hid_t fid, const char *path, const zt_ckpt_view *v, load_plan *pl, char *err,
                            size_t errlen) {
    const zt_param_table *pt = v->table;
    size_t maxpiece = 1, s = 0, e = 0;
    for (int i = 0; i < pt->n; i++)
        if (zt_ckpt_piece_of(&pt->t[i], pl->lo, pl->hi, &s, &e) && e - s > maxpiece) maxpiece = e - s;
    xfer x = make_xfer(v->be, maxpiece);
    hid_t *ds = zt_malloc((size_t)pt->n * sizeof(hid_t));
    pl->rp = zt_calloc((size_t)pl->ng * (size_t)pt->n, sizeof *pl->rp);
    int bad = 0;
    for (int g = 0; g < pl->ng && !bad; g++) {
        const zt_ckpt_group *gr = &pl->groups[g];
        if (gr->round) continue; /* /model of 2-byte parameters: they are made from the master weights */
        hid_t gid = H5Gopen2(fid, gr->path, H5P_DEFAULT);
        bad |= gid < 0;
        int nds = 0;
        for (; nds < pt->n && !bad; nds++)
            if ((ds[nds] = H5Dopen2(gid, pt->t[nds].name, H5P_DEFAULT)) < 0) { bad = 1; break; }
        for (int i = 0; i < nds && !bad; i++) {
            const zt_tensor_info *t = &pt->t[i];
            float *dst = NULL;
            if (zt_ckpt_piece_of(t, pl->lo, pl->hi, &s, &e)) dst = gr->src + (t->offset + s - gr->base);
            haddr_t at = x.collective ? HADDR_UNDEF : H5Dget_offset(ds[i]);
            hid_t ty = H5Dget_type(ds[i]);
            int raw = at != HADDR_UNDEF && ty >= 0 && H5Tequal(ty, H5T_IEEE_F32LE) > 0;
            if (ty >= 0) H5Tclose(ty);
            if (dst && raw)
                pl->rp[pl->nrp++] = (zt_ckpt_rpiece){(uint64_t)at + s * sizeof(float), (e - s) * sizeof(float), dst, g,
                                                     t->offset + s};
            else if (dst) {
                bad |= transfer(&x, ds[i], t, s, e, dst, 1);
                pl->hdf5_read = 1;
            }
            else if (x.collective)
                bad |= transfer_none(&x, ds[i], 1);
        }
        if (bad) {
            char why[256];
            zt_ckpt_h5_reason(why);
            zt_errf(err, errlen, "%s: cannot read %s: %s", path, gr->path, why[0] ? why : "read failed");
        }
        for (int i = 0; i < nds; i++) H5Dclose(ds[i]);
        if (gid >= 0) H5Gclose(gid);
        if (zt_any_failed(bad, err, errlen)) bad = 1;
    }
    free(ds);
    H5Pclose(x.dxpl);
    free(x.stage);
    return bad;
}

/* reads the planned pieces. The parameters' pieces come first (group 0): with a params_ready hook, host memory and
   moments, every rank reads its parameter pieces, starts reading its moment pieces in the background, all ranks
   agree, and the hook runs (the same collectives on every rank, whatever its pieces) while the moments arrive.
   NaN/Inf is found as each chunk arrives (nf). Sets *overlapped when the hook ran here */
static int load_read(const char *path, const zt_ckpt_view *v, const load_plan *pl, zt_ckpt_nonfinite *nf,
                     int *overlapped, char *err, size_t errlen) {
    zt_backend *be = v->be;
    int split = 0;
    while (split < pl->nrp && pl->rp[split].group == 0) split++;
    const zt_ckpt_rstage rs = {!v->buffered_reads, v->read_stage, v->read_stage_bytes};
    *overlapped = v->params_ready && be->i->mem == ZT_MEM_HOST && v->exp_avg;
    if (!*overlapped) return zt_ckpt_read_pieces(be, path, pl->rp, pl->nrp, &rs, nf, err, errlen);
    int bad = zt_ckpt_read_pieces(be, path, pl->rp, split, &rs, nf, err, errlen);
    zt_ckpt_reader *rd = bad ? NULL : zt_ckpt_read_start(be, path, pl->rp + split, pl->nrp - split, &rs, err, errlen);
    if (!bad && !rd) bad = 1;
    const int any = zt_any_failed(bad, err, errlen);
    if (!any) v->params_ready(v->params_ready_ctx);
    if (rd) {
        zt_ckpt_nonfinite nf2 = {-1, 0, 0};
        bad |= zt_ckpt_read_join(rd, &nf2, err, errlen);
        if (nf->piece < 0 && nf2.piece >= 0) *nf = (zt_ckpt_nonfinite){nf2.piece + split, nf2.elem, nf2.value};
    }
    return bad | any;
}

int zt_ckpt_load(const char *path, zt_ckpt_meta *meta, const zt_ckpt_view *v, char *err, size_t errlen) {
    zt_ckpt_h5_quiet();
    memset(meta, 0, sizeof *meta);
    int file_master = 0;
    hid_t fid = load_open(path, meta, v, &file_master, err, errlen);
    if (fid < 0) return 1;
    load_plan pl = {0};
    load_prepare(v, file_master, &pl);
    int bad = load_plan_pieces(fid, path, v, &pl, err, errlen);
    H5Fclose(fid);
    /* NaN/Inf weights or moments are refused (a diverged run, or a damaged or edited file): the raw reads
       check each chunk as it arrives; what came through HDF5 (a file another tool wrote) is scanned after */
    zt_ckpt_nonfinite nf = {-1, 0, 0};
    char what[256] = "";
    int overlapped = 0;
    if (!bad) bad = load_read(path, v, &pl, &nf, &overlapped, err, errlen);
    if (!bad && nf.piece >= 0)
        nonfinite_text(v->table, pl.groups[pl.rp[nf.piece].group].path, pl.rp[nf.piece].flat + nf.elem, nf.value, what,
                       sizeof what);
    free(pl.rp);
    if (!bad && !what[0] && pl.hdf5_read) {
        v->be->i->sync(v->be);
        zt_ckpt_view_nonfinite(v, pl.lo, pl.hi, v->exp_avg != NULL, what, sizeof what);
    }
    if (!bad && what[0])
        bad = zt_errf(err, errlen, "%s: holds non-finite values (%s): refusing it (the run had diverged or "
                      "the file is damaged; use an earlier checkpoint)", path, what);
    bad = zt_any_failed(bad, err, errlen);
    if (bad) {
        zt_ckpt_meta_free(meta);
        return 1;
    }
    v->be->i->sync(v->be);
    if (v->params_ready && !overlapped) v->params_ready(v->params_ready_ctx);
    return 0;
}

