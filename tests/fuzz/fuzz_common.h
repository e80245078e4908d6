/* fuzz_common.h — helpers shared by the libFuzzer targets (tests/fuzz/fuzz_*.c): a private
 * scratch directory for APIs that take a path, input copies, and FZ_CHECK, the targets' own
 * oracle (a broken invariant aborts, which libFuzzer records as a crash like a sanitizer report).
 *
 * Files go to a directory made once per process under $FUZZ_TMPDIR, /dev/shm (tmpfs: writing a
 * file per input costs microseconds) or /tmp, and removed at exit.
 */
#ifndef ZT_FUZZ_COMMON_H
#define ZT_FUZZ_COMMON_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FZ_UNUSED __attribute__((unused))

/* Leaks inside libraries ztrain only calls are not ztrain's to fix: libconfig 1.5 loses its string
   buffer when a config ends inside a string ("x = \"abc" then a newline: strbuf_append); HDF5 and
   Open MPI keep library-lifetime state. LeakSanitizer reads this (a target may list more). */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) {
    return "leak:libconfig.so\n"
           "leak:libhdf5\n"
           "leak:libmpi.so\n"
           "leak:libopen-pal.so\n"
           "leak:libopen-rte.so\n";
}

/* an invariant of the code under test: on failure print it and abort (a crash for libFuzzer) */
#define FZ_CHECK(cond, ...) do { if (!(cond)) { \
    fprintf(stderr, "fuzz check failed at %s:%d: %s: ", __FILE__, __LINE__, #cond); \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); abort(); } } while (0)

static char fz_dir[512];

static void fz_cleanup(void) {
    if (!fz_dir[0]) return;
    DIR *d = opendir(fz_dir);
    if (d) {
        struct dirent *e;
        char p[1024];
        while ((e = readdir(d)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
                snprintf(p, sizeof p, "%s/%s", fz_dir, e->d_name);
                unlink(p);
            }
        closedir(d);
    }
    rmdir(fz_dir);
}

/* the scratch directory (made on first use) */
static FZ_UNUSED const char *fz_tmpdir(void) {
    if (fz_dir[0]) return fz_dir;
    const char *bases[] = {getenv("FUZZ_TMPDIR"), "/dev/shm", getenv("TMPDIR"), "/tmp"};
    for (size_t i = 0; i < sizeof bases / sizeof bases[0]; i++) {
        if (!bases[i] || !bases[i][0] || access(bases[i], W_OK) != 0) continue;
        snprintf(fz_dir, sizeof fz_dir, "%s/ztfuzz.XXXXXX", bases[i]);
        if (mkdtemp(fz_dir)) {
            atexit(fz_cleanup);
            return fz_dir;
        }
    }
    fprintf(stderr, "fuzz: cannot make a scratch directory\n");
    abort();
}

/* path of file `name` in the scratch directory, into out */
static FZ_UNUSED const char *fz_path(const char *name, char *out, size_t n) {
    snprintf(out, n, "%s/%s", fz_tmpdir(), name);
    return out;
}

/* writes data[0..size) to scratch file `name`; returns its path (in out) */
static FZ_UNUSED const char *fz_write(const char *name, const void *data, size_t size, char *out, size_t n) {
    fz_path(name, out, n);
    FILE *f = fopen(out, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
        fprintf(stderr, "fuzz: cannot write %s\n", out);
        abort();
    }
    return out;
}

/* the whole of a file (malloc'd, NUL-terminated), or NULL */
static FZ_UNUSED char *fz_read(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *b = NULL;
    size_t len = 0, cap = 0, got;
    do {
        if (cap - len < 4096) {
            cap = 2 * cap + 4096;
            b = realloc(b, cap + 1);
        }
        got = fread(b + len, 1, cap - len, f);
        len += got;
    } while (got > 0);
    fclose(f);
    b[len] = 0;
    *n = len;
    return b;
}

/* a NUL-terminated copy of data[0..size) */
static FZ_UNUSED char *fz_strndup(const uint8_t *data, size_t size) {
    char *s = malloc(size + 1);
    if (size) memcpy(s, data, size);
    s[size] = 0;
    return s;
}

/* with FUZZ_VERBOSE=1 in the environment a target says what became of each input (for checking seeds:
   FUZZ_VERBOSE=1 build/fuzz/fuzz_<t> tests/fuzz/seeds/<t>/FILE) */
static FZ_UNUSED int fz_verbose(void) {
    static int v = -1;
    if (v < 0) v = getenv("FUZZ_VERBOSE") && atoi(getenv("FUZZ_VERBOSE")) > 0;
    return v;
}
#define FZ_LOG(...) do { if (fz_verbose()) { fprintf(stderr, "fuzz: " __VA_ARGS__); fputc('\n', stderr); } } while (0)

/* an error message was written: every failing call of these APIs says why */
#define FZ_CHECK_ERR(err) FZ_CHECK((err)[0] != 0, "an error without a message")

#endif
