/* fuzz_ckpt.c — libFuzzer target: the checkpoint attributes reader (src/io/ckpt_file.c:
 * zt_ckpt_read_meta = zt_ckpt_precheck, H5Fopen, then format / version / complete, step,
 * samples_seen, tokens_seen, world_size, loss_scale, seed, config, created, finite), then what a resume
 * does with the stored config (zt_config_load_string, zt_ckpt_check_resume in ckpt_resume.c).
 *
 * The input does not spell HDF5 bytes (fuzz_ckpt_raw.c does, and mostly finds bugs of HDF5 1.10.8
 * itself): it is a list of edits to the root attributes of a valid checkpoint, which this target
 * writes with the HDF5 API as ztrain's writer does (fixed-length NULLTERM strings, I32/I64/U64/F32
 * scalars) and then reads with zt_ckpt_read_meta. An edit is
 *     byte 0  attribute: one of the 12 the reader knows (index % 13), or 12: a new name
 *             (length byte + bytes)
 *     byte 1  bit 0-1: 0 = delete it, else set it; bits 2-7: its type (% 13: I32, I64, U64, F32,
 *             F64, I8, U16BE, fixed string NULLTERM, fixed string NULLPAD, variable-length string,
 *             8-bit bitfield, variable-length UTF-8 string (h5py's spelling of a str), fixed UTF-8)
 *     byte 2  dataspace (% 4): scalar, [1], [n] with n = next byte % 5, null
 *     then the value: numbers: n x the type's size bytes; strings: length byte + bytes per element
 *             (a length of 255 takes two more bytes: a 16-bit length, for config texts)
 * Missing bytes at the end read as zeros. With no edits the file is a complete checkpoint.
 * Checks besides the sanitizers: a failure has a message and leaves no config text; a success has
 * a config text and a NUL-terminated created; a stored config that loads is accepted by
 * zt_ckpt_check_resume against itself with no change to report.
 */
#include "fuzz_ckpt_check.h"
#include "fuzz_common.h"
#include "io/ckpt.h"

#include <hdf5.h>

enum { N_KNOWN = 12, N_TYPES = 13, T_FSTR = 7, T_FSTR_PAD = 8, T_VSTR = 9, T_VSTR_UTF8 = 11, T_FSTR_UTF8 = 12,
       MAX_ELEMS = 4 };
static const char *const KNOWN[N_KNOWN] = {"format", "version", "complete", "step", "samples_seen", "tokens_seen",
                                           "world_size", "loss_scale", "seed", "config", "created", "finite"};

typedef struct attr {
    char name[300];
    int present, type, space, n;            /* space: 0 scalar, 1 simple [n], 2 null */
    uint8_t num[MAX_ELEMS * 8];             /* numbers, in the type's own byte order */
    char *str[MAX_ELEMS];                   /* strings (malloc'd); lens for fixed ones with NULs */
    size_t len[MAX_ELEMS];
} attr;

static char *g_config;                      /* the default config as ztrain stores it */

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    H5open();
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    zt_config c;
    zt_config_defaults(&c);
    size_t n = zt_config_to_string(&c, NULL, 0);
    g_config = malloc(n + 1);
    zt_config_to_string(&c, g_config, n + 1);
    return 0;
}

static hid_t file_type(int t, size_t len) {
    hid_t s;
    switch (t) {
    case 0: return H5Tcopy(H5T_STD_I32LE);
    case 1: return H5Tcopy(H5T_STD_I64LE);
    case 2: return H5Tcopy(H5T_STD_U64LE);
    case 3: return H5Tcopy(H5T_IEEE_F32LE);
    case 4: return H5Tcopy(H5T_IEEE_F64LE);
    case 5: return H5Tcopy(H5T_STD_I8LE);
    case 6: return H5Tcopy(H5T_STD_U16BE);
    case T_FSTR:
    case T_FSTR_PAD:
    case T_FSTR_UTF8:
        s = H5Tcopy(H5T_C_S1);
        H5Tset_size(s, len ? len : 1);
        H5Tset_strpad(s, t == T_FSTR_PAD ? H5T_STR_NULLPAD : H5T_STR_NULLTERM);
        if (t == T_FSTR_UTF8) H5Tset_cset(s, H5T_CSET_UTF8);
        return s;
    case T_VSTR:
    case T_VSTR_UTF8:
        s = H5Tcopy(H5T_C_S1);
        H5Tset_size(s, H5T_VARIABLE);
        if (t == T_VSTR_UTF8) H5Tset_cset(s, H5T_CSET_UTF8);
        return s;
    default: return H5Tcopy(H5T_STD_B8LE);
    }
}

static size_t type_size(int t) {
    static const size_t sz[N_TYPES] = {4, 8, 8, 4, 8, 1, 2, 0, 0, 0, 1, 0, 0};
    return sz[t];
}

static int is_vstr(int t) { return t == T_VSTR || t == T_VSTR_UTF8; }
static int is_str(int t) { return t == T_FSTR || t == T_FSTR_PAD || t == T_FSTR_UTF8 || is_vstr(t); }

static void set_str(attr *a, int i, const char *s, size_t n) {
    free(a->str[i]);
    a->str[i] = malloc(n + 1);
    memcpy(a->str[i], s, n);
    a->str[i][n] = 0;
    a->len[i] = n;
}

/* the attributes of a complete checkpoint, as ztrain writes them */
static void defaults(attr *a) {
    static const int types[N_KNOWN] = {T_FSTR, 0, 0, 1, 2, 2, 0, 3, 2, T_FSTR, T_FSTR, 0};
    const char *strs[N_KNOWN] = {"ztrain", 0, 0, 0, 0, 0, 0, 0, 0, g_config, "2026-11-23T17:16:47Z", 0};
    const int32_t i32[N_KNOWN] = {0, 1, 1, 0, 0, 0, 2, 0, 0, 0, 0, 1};
    const int64_t i64[N_KNOWN] = {0, 0, 0, 25, 200, 6400, 0, 0, 1337};
    for (int k = 0; k < N_KNOWN; k++) {
        attr *x = &a[k];
        snprintf(x->name, sizeof x->name, "%s", KNOWN[k]);
        x->present = 1;
        x->type = types[k];
        x->space = 0;
        x->n = 1;
        if (is_str(x->type)) set_str(x, 0, strs[k], strlen(strs[k]));
        else if (x->type == 0) memcpy(x->num, &i32[k], 4);
        else if (x->type == 3) { float f = 1.0f; memcpy(x->num, &f, 4); }
        else memcpy(x->num, &i64[k], 8);
    }
}

typedef struct rd { const uint8_t *p; size_t n, i; } rd;
static int more(const rd *r) { return r->i < r->n; }
static uint8_t byte(rd *r) { return r->i < r->n ? r->p[r->i++] : 0; }

/* applies the edits of the input; returns the number of attributes (known + new) */
static int apply(attr *a, int max, rd *r) {
    int na = N_KNOWN;
    while (more(r)) {
        int sel = byte(r) % (N_KNOWN + 1);
        attr *x;
        if (sel == N_KNOWN) {
            size_t l = byte(r);
            char name[300];
            for (size_t k = 0; k < l; k++) name[k] = (char)byte(r);
            name[l] = 0;
            if (na == max) continue;
            x = &a[na++];
            snprintf(x->name, sizeof x->name, "%s", l && name[0] ? name : "x");
        } else {
            x = &a[sel];
        }
        uint8_t act = byte(r);
        x->present = (act & 3) != 0;
        if (!x->present) continue;
        x->type = (act >> 2) % N_TYPES;
        uint8_t sp = byte(r) % 4;
        x->space = sp == 3 ? 2 : sp ? 1 : 0;
        x->n = sp == 2 ? byte(r) % (MAX_ELEMS + 1) : sp == 3 ? 0 : 1;
        for (int e = 0; e < x->n; e++) {
            if (is_str(x->type)) {
                size_t l = byte(r);
                if (l == 255) l = byte(r) | (size_t)byte(r) << 8;
                char *s = malloc(l + 1);
                for (size_t k = 0; k < l; k++) s[k] = (char)byte(r);
                set_str(x, e, s, l);
                free(s);
            } else {
                for (size_t k = 0; k < type_size(x->type); k++) x->num[e * type_size(x->type) + k] = byte(r);
            }
        }
    }
    return na;
}

static void write_file(const char *path, const attr *a, int na) {
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    FZ_CHECK(f >= 0, "cannot create %s", path);
    for (int k = 0; k < na; k++) {
        const attr *x = &a[k];
        if (!x->present || H5Aexists(f, x->name) > 0) continue;
        size_t flen = 1;
        const size_t term = x->type != T_FSTR_PAD; /* NULLTERM strings keep room for the NUL */
        if (is_str(x->type) && !is_vstr(x->type))
            for (int e = 0; e < x->n; e++) flen = x->len[e] + term > flen ? x->len[e] + term : flen;
        hid_t t = file_type(x->type, flen), s;
        hsize_t dims[1] = {(hsize_t)x->n};
        s = x->space == 0 ? H5Screate(H5S_SCALAR) : x->space == 1 ? H5Screate_simple(1, dims, NULL) : H5Screate(H5S_NULL);
        hid_t at = H5Acreate2(f, x->name, t, s, H5P_DEFAULT, H5P_DEFAULT);
        if (at >= 0 && x->n > 0) {
            if (is_vstr(x->type)) {
                const char *v[MAX_ELEMS];
                for (int e = 0; e < x->n; e++) v[e] = x->str[e] ? x->str[e] : "";
                H5Awrite(at, t, v);
            } else if (is_str(x->type)) {
                char *buf = calloc((size_t)x->n, flen);
                for (int e = 0; e < x->n; e++)
                    if (x->str[e]) memcpy(buf + (size_t)e * flen, x->str[e], x->len[e] < flen ? x->len[e] : flen);
                H5Awrite(at, t, buf);
                free(buf);
            } else {
                H5Awrite(at, t, x->num);
            }
        }
        if (at >= 0) H5Aclose(at);
        H5Sclose(s);
        H5Tclose(t);
    }
    H5Fclose(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    enum { MAX_ATTRS = N_KNOWN + 8 };
    attr a[MAX_ATTRS];
    memset(a, 0, sizeof a);
    defaults(a);
    rd r = {data, size, 0};
    int na = apply(a, MAX_ATTRS, &r);
    char path[1024], err[ZT_ERR_MAX] = "";
    fz_path("step_00000001.h5", path, sizeof path);
    write_file(path, a, na);
    for (int k = 0; k < MAX_ATTRS; k++)
        for (int e = 0; e < MAX_ELEMS; e++) free(a[k].str[e]);

    zt_ckpt_meta meta;
    if (zt_ckpt_read_meta(path, &meta, err, sizeof err)) {
        FZ_LOG("rejected: %s", err);
        FZ_CHECK_ERR(err);
        FZ_CHECK(!meta.config_text, "a failed read left a config text");
        return 0;
    }
    FZ_CHECK(meta.config_text, "no config text");
    FZ_LOG("accepted: step %ld, world_size %d, created '%s', config of %zu bytes", meta.step, meta.world_size,
           meta.created, strlen(meta.config_text));
    FZ_CHECK(memchr(meta.created, 0, sizeof meta.created), "created is not NUL-terminated");
    fz_check_stored_config(meta.config_text);
    zt_ckpt_meta_free(&meta);
    FZ_CHECK(!meta.config_text, "meta_free left the config text");
    return 0;
}
