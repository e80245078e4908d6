/* util.c — error exits, rank-0 logging, host allocation, time, the deterministic RNG, mkdir -p, the
 * type check of input files and atomic file writes. */
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int g_rank = 0, g_size = 1;
static char g_host[64] = "?";

void zt_util_set_rank(int rank, int size, const char *host) {
    g_rank = rank;
    g_size = size;
    snprintf(g_host, sizeof g_host, "%s", host ? host : "?");
}
int zt_rank(void) { return g_rank; }
int zt_world(void) { return g_size; }

ZT_NORETURN static void end_all(int code) {
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    fflush(stdout);
    fflush(stderr);
    if (inited && !finalized && g_size > 1) MPI_Abort(MPI_COMM_WORLD, code);
    if (inited && !finalized) MPI_Finalize();
    exit(code);
}

void zt_panic(const char *file, int line, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "ztrain: rank %d on %s: %s:%d: %s\n", g_rank, g_host, file, line, msg);
    fflush(stderr);
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (inited && !finalized) MPI_Abort(MPI_COMM_WORLD, 1);
    abort();
}

void zt_user_error(const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (g_size > 1) /* only this rank may have seen it: say where */
        fprintf(stderr, "ztrain: error: rank %d on %s: %s\n", g_rank, g_host, msg);
    else
        fprintf(stderr, "ztrain: error: %s\n", msg);
    end_all(ZT_EXIT_USER);
}

void zt_user_error_all(const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (g_rank == 0) fprintf(stderr, "ztrain: error: %s\n", msg);
    fflush(stderr);
    fflush(stdout);
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (inited && !finalized) {
        /* every rank reached this point with the same error: a barrier lets rank 0's message out
           before anyone exits, and a clean finalize avoids mpirun's abort banner */
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Finalize();
    }
    exit(ZT_EXIT_USER);
}

void zt_log(const char *fmt, ...) {
    if (g_rank != 0) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stdout, fmt, ap);
    va_end(ap);
    fflush(stdout);
}

void *zt_malloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) zt_panic(__FILE__, __LINE__, "out of host memory allocating %zu bytes", n);
    return p;
}

void *zt_calloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) zt_panic(__FILE__, __LINE__, "out of host memory allocating %zu x %zu bytes", n, size);
    return p;
}

void *zt_realloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q) zt_panic(__FILE__, __LINE__, "out of host memory reallocating %zu bytes", n);
    return q;
}

int zt_errf(char *err, size_t n, const char *fmt, ...) {
    if (err && n) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, n, fmt, ap);
        va_end(ap);
    }
    return 1;
}

double zt_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void zt_iso_time(char *buf, size_t n) {
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void zt_rng_seed(zt_rng *r, uint64_t seed) {
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t zt_rng_next(zt_rng *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double zt_rng_uniform(zt_rng *r) { return (double)(zt_rng_next(r) >> 11) * 0x1.0p-53; }

double zt_rng_normal(zt_rng *r) {
    double u1 = zt_rng_uniform(r), u2 = zt_rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

int zt_mkdirs(const char *path) {
    char tmp[1024];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof tmp) { errno = ENAMETOOLONG; return -1; }
    memcpy(tmp, path, n + 1);
    for (char *p = tmp + 1; *p; p++) {
        if (*p == '/') {
            *p = 0;
            if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return -1;
            *p = '/';
        }
    }
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return -1;
    return 0;
}

const char *zt_file_kind(unsigned mode) {
    switch (mode & S_IFMT) {
    case S_IFREG: return "a regular file";
    case S_IFDIR: return "a directory";
    case S_IFIFO: return "a named pipe (FIFO)";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    case S_IFSOCK: return "a socket";
    }
    return "not a regular file";
}

static int check_input(const char *path, const char *what, int dir_ok, char *err, size_t n) {
    struct stat st;
    if (!path || !path[0] || stat(path, &st) != 0) return 0; /* the caller's open says what is wrong */
    if (S_ISREG(st.st_mode) || (dir_ok && S_ISDIR(st.st_mode))) return 0;
    return zt_errf(err, n, "%s: %s, not a regular file (expected %s)", path, zt_file_kind((unsigned)st.st_mode),
                   what);
}

int zt_check_input_file(const char *path, const char *what, char *err, size_t n) {
    return check_input(path, what, 0, err, n);
}

int zt_check_input_file_or_dir(const char *path, const char *what, char *err, size_t n) {
    return check_input(path, what, 1, err, n);
}

int zt_write_file_atomic(const char *path, const void *data, size_t len, char *err, size_t n) {
    char tmp[1200];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp)
        return zt_errf(err, n, "%s: path too long", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return zt_errf(err, n, "%s: cannot write: %s", path, strerror(errno));
    const char *p = data;
    size_t done = 0;
    int e = 0;
    while (done < len) {
        ssize_t w = write(fd, p + done, len - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) { e = w < 0 ? errno : EIO; break; }
        done += (size_t)w;
    }
    if (!e && fsync(fd) != 0 && errno != EINVAL) e = errno;
    if (close(fd) != 0 && !e) e = errno;
    if (!e && rename(tmp, path) != 0) e = errno;
    if (e) {
        unlink(tmp);
        return zt_errf(err, n, "%s: cannot write: %s", path, strerror(e));
    }
    return 0;
}

/* the agreement: first = the lowest failing rank (size if none), count = how many failed, msg and host of
   the first one on every rank */
static int agree(int failed, char *msg, size_t len, int *count, char *host, size_t hn) {
    int rank = zt_rank(), size = zt_world();
    int mine = failed ? rank : size, first = size;
    ZT_MPI(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    if (first == size) return size;
    int one = failed != 0;
    *count = 0;
    ZT_MPI(MPI_Allreduce(&one, count, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    char buf[ZT_ERR_BUF + 64];
    if (rank == first) {
        snprintf(buf, ZT_ERR_BUF, "%s", msg ? msg : "");
        snprintf(buf + ZT_ERR_BUF, 64, "%s", g_host);
    }
    ZT_MPI(MPI_Bcast(buf, sizeof buf, MPI_CHAR, first, MPI_COMM_WORLD));
    if (msg && len) snprintf(msg, len, "%s", buf);
    if (host && hn) snprintf(host, hn, "%s", buf + ZT_ERR_BUF);
    return first;
}

int zt_any_failed(int failed, char *msg, size_t len) {
    int count = 0;
    return agree(failed, msg, len, &count, NULL, 0) != zt_world();
}

void zt_check_all(int failed, char *msg, size_t len) {
    int count = 0;
    char host[64] = "";
    const int first = agree(failed, msg, len, &count, host, sizeof host);
    if (first == zt_world()) return;
    /* rank 0 passed the check, other ranks did not: the line says where it failed (a file one node
       lacks), since rank 0's own view would contradict it */
    if (first > 0) {
        char others[48] = "";
        if (count > 1) snprintf(others, sizeof others, " (and %d other rank%s)", count - 1, count > 2 ? "s" : "");
        zt_user_error_all("rank %d on %s%s: %s", first, host, others, msg);
    }
    zt_user_error_all("%s", msg);
}

char *zt_read_file(const char *path, const char *what, size_t *len, char *err, size_t n) {
    if (zt_check_input_file(path, what, err, n)) return NULL;
    FILE *f = fopen(path, "rb");
    if (!f) {
        zt_errf(err, n, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 65536, have = 0;
    char *buf = zt_malloc(cap + 1);
    size_t k;
    while ((k = fread(buf + have, 1, cap - have, f)) > 0) {
        have += k;
        if (have == cap) buf = zt_realloc(buf, (cap *= 2) + 1);
    }
    const int failed = ferror(f);
    fclose(f);
    if (failed) {
        free(buf);
        zt_errf(err, n, "%s: read failed", path);
        return NULL;
    }
    buf[have] = 0;
    *len = have;
    return buf;
}
