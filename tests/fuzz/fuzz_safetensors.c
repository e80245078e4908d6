/* fuzz_safetensors.c — libFuzzer target: safetensors files (src/io/safetensors.c; the header
 * is read by util/json).
 *
 * The input is the file (written to a scratch file: zt_st_open takes a path). Checks besides the
 * sanitizers: a failure has a message; an opened file's tensors lie inside the data section, their
 * byte ranges are exactly numel x dtype size (with numel not overflowing), zt_st_find finds each by
 * name; F32/F16/BF16/F64 tensors read into a buffer of exactly numel floats; and F32 files written
 * back with zt_st_write (names, shapes, values) open again with the same tensors.
 */
#include "fuzz_common.h"
#include "io/safetensors.h"

static int dsize(const char *d) {
    static const char *const n[] = {"F64", "I64", "U64", "F32", "I32", "U32", "F16", "BF16", "I16", "U16",
                                    "I8", "U8", "BOOL", "F8_E4M3", "F8_E5M2"};
    static const int s[] = {8, 8, 8, 4, 4, 4, 2, 2, 2, 2, 1, 1, 1, 1, 1};
    for (size_t i = 0; i < sizeof s / sizeof s[0]; i++)
        if (!strcmp(d, n[i])) return s[i];
    return 0;
}

typedef struct wctx { float **v; } wctx;
static const float *wdata(void *ctx, int i) { return ((wctx *)ctx)->v[i]; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[1024], path2[1024], err[1024] = "";
    fz_write("model.safetensors", data, size, path, sizeof path);
    zt_st_file sf;
    if (zt_st_open(&sf, path, err, sizeof err)) {
        FZ_LOG("rejected: %s", err);
        FZ_CHECK_ERR(err);
        FZ_CHECK(!sf.f && !sf.t, "a failed open left state");
        return 0;
    }
    FZ_CHECK(sf.data_start + sf.data_len == size && sf.data_start >= 10, "data section [%llu, +%llu) of %zu bytes",
             (unsigned long long)sf.data_start, (unsigned long long)sf.data_len, size);
    FZ_LOG("opened: %d tensors", sf.n);
    float **vals = calloc((size_t)sf.n + 1, sizeof *vals);
    zt_st_entry *ents = calloc((size_t)sf.n + 1, sizeof *ents);
    int writable = 1;
    for (int i = 0; i < sf.n; i++) {
        const zt_st_tensor *t = &sf.t[i];
        FZ_CHECK(t->ndim >= 0 && t->ndim <= 4, "ndim %d", t->ndim);
        uint64_t numel = 1, bytes;
        int overflow = 0;
        for (int k = 0; k < t->ndim; k++) {
            FZ_CHECK(t->shape[k] >= 0, "negative dimension");
            overflow |= __builtin_mul_overflow(numel, (uint64_t)t->shape[k], &numel);
        }
        const int ds = dsize(t->dtype);
        FZ_CHECK(ds > 0, "unknown dtype %s accepted", t->dtype);
        overflow |= __builtin_mul_overflow(numel, (uint64_t)ds, &bytes);
        FZ_CHECK(!overflow, "tensor %s: shape overflows 64 bits yet its data_offsets were accepted", t->name);
        FZ_CHECK(zt_st_numel(t) == numel, "numel %llu, product of the shape %llu",
                 (unsigned long long)zt_st_numel(t), (unsigned long long)numel);
        FZ_CHECK(t->begin <= t->end && t->end <= sf.data_len && t->end - t->begin == bytes,
                 "tensor %s: [%llu, %llu) for %llu bytes in a %llu-byte section", t->name,
                 (unsigned long long)t->begin, (unsigned long long)t->end, (unsigned long long)bytes,
                 (unsigned long long)sf.data_len);
        const zt_st_tensor *f = zt_st_find(&sf, t->name);
        FZ_CHECK(f && !strcmp(f->name, t->name), "zt_st_find misses %s", t->name);
        const int readable = !strcmp(t->dtype, "F32") || !strcmp(t->dtype, "F16") || !strcmp(t->dtype, "BF16") ||
                             !strcmp(t->dtype, "F64");
        /* numel <= bytes <= the input's size here, so the buffer is small */
        float *out = malloc(numel ? numel * sizeof(float) : 1);
        err[0] = 0;
        int rc = zt_st_read_f32(&sf, t, out, err, sizeof err);
        FZ_CHECK(readable ? rc == 0 : rc != 0, "read_f32 of %s %s: %d (%s)", t->dtype, t->name, rc, err);
        if (rc) FZ_CHECK_ERR(err);
        vals[i] = out;
        writable &= !strcmp(t->dtype, "F32") && t->ndim <= 2;
        ents[i].name = t->name;
        ents[i].ndim = t->ndim;
        for (int k = 0; k < t->ndim && k < 2; k++) ents[i].shape[k] = t->shape[k];
    }
    if (writable && sf.n > 0) {
        fz_path("back.safetensors", path2, sizeof path2);
        wctx c = {vals};
        err[0] = 0;
        FZ_CHECK(zt_st_write(path2, sf.n, ents, wdata, &c, err, sizeof err) == 0, "write: %s", err);
        zt_st_file back;
        FZ_CHECK(zt_st_open(&back, path2, err, sizeof err) == 0, "the written file does not open: %s", err);
        FZ_CHECK(back.n == sf.n, "%d tensors written, %d read", sf.n, back.n);
        for (int i = 0; i < sf.n; i++) {
            /* by position: both keep the header's order, and a repeated name finds only the first */
            const zt_st_tensor *a = &sf.t[i], *b = &back.t[i];
            FZ_CHECK(!strcmp(a->name, b->name) && b->ndim == a->ndim && !memcmp(b->shape, a->shape, sizeof a->shape) && !strcmp(b->dtype, "F32"),
                     "tensor %s comes back different", a->name);
            const uint64_t numel = zt_st_numel(a);
            float *v = malloc(numel ? numel * sizeof(float) : 1);
            FZ_CHECK(zt_st_read_f32(&back, b, v, err, sizeof err) == 0, "read back: %s", err);
            FZ_CHECK(numel == 0 || memcmp(v, vals[i], numel * sizeof(float)) == 0, "values of %s differ", a->name);
            free(v);
        }
        zt_st_close(&back);
    }
    for (int i = 0; i < sf.n; i++) free(vals[i]);
    free(vals);
    free(ents);
    zt_st_close(&sf);
    return 0;
}
