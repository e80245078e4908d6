/* util.h — errors, logging helpers and small utilities shared by every file.
 *
 * Two kinds of failure (docs/design.md section 7):
 *  - bugs: ZT_ASSERT(cond) -> "ztrain: rank R on HOST: file:line: assertion failed", abort all ranks;
 *  - user errors (config, files, shapes): ONE line and exit code 2 on every rank. Code that detects
 *    the error on every rank at once calls zt_user_error_all(): rank 0 prints "ztrain: error: ...",
 *    every rank exits 2. Code where only some ranks may see it calls zt_user_error(): that rank
 *    prints "ztrain: error: rank R on HOST: ..." (plain "ztrain: error: ..." in a 1-rank run) and
 *    aborts the others through MPI with the same exit code.
 */
#ifndef ZT_UTIL_H
#define ZT_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* C++ sources (cuda/) include this header inside extern "C": mpi.h keeps C++ linkage for its own
   C++ parts */
#ifdef __cplusplus
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1 /* the C API only */
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
extern "C++" {
#include <mpi.h>
}
#else
#include <mpi.h>
#endif

#define ZT_EXIT_USER 2
#define ZT_ERR_BUF 1024

#if defined(__GNUC__)
#define ZT_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define ZT_NORETURN __attribute__((noreturn))
#else
#define ZT_PRINTF(a, b)
#define ZT_NORETURN
#endif

/* set by dist init; before that rank 0 / size 1 are assumed */
void zt_util_set_rank(int rank, int size, const char *host);
int zt_rank(void);
int zt_world(void);

ZT_NORETURN void zt_panic(const char *file, int line, const char *fmt, ...) ZT_PRINTF(3, 4);
/* a user error seen by this rank (possibly alone): prints the line, ends all ranks with exit 2 */
ZT_NORETURN void zt_user_error(const char *fmt, ...) ZT_PRINTF(1, 2);
/* a user error every rank sees identically: rank 0 prints, every rank exits 2 (no abort) */
ZT_NORETURN void zt_user_error_all(const char *fmt, ...) ZT_PRINTF(1, 2);

#define ZT_ASSERT(c) do { if (!(c)) zt_panic(__FILE__, __LINE__, "assertion failed: %s", #c); } while (0)

/* rank-0 logging (stdout); other ranks are silent */
void zt_log(const char *fmt, ...) ZT_PRINTF(1, 2);

/* host allocation that panics on failure */
void *zt_malloc(size_t n);
void *zt_calloc(size_t n, size_t size);
void *zt_realloc(void *p, size_t n);

/* a one-line user-error message into err (when err and n are non-zero); returns 1, so error paths
   read `return zt_errf(err, n, "%s: ...", path)` */
int zt_errf(char *err, size_t n, const char *fmt, ...) ZT_PRINTF(3, 4);

double zt_now(void);                 /* monotonic seconds */
void zt_iso_time(char *buf, size_t n);  /* UTC ISO-8601 */

/* deterministic RNG: splitmix64-seeded xoshiro256** */
typedef struct zt_rng { uint64_t s[4]; } zt_rng;
void zt_rng_seed(zt_rng *r, uint64_t seed);
uint64_t zt_rng_next(zt_rng *r);
double zt_rng_uniform(zt_rng *r);    /* [0, 1) with 53 bits */
double zt_rng_normal(zt_rng *r);     /* Box-Muller, deterministic */

/* Collective over MPI_COMM_WORLD: 0 if no rank passes failed != 0; else 1 on every rank, with the
   message of the lowest failing rank in msg (the one "any rank failed" agreement) */
int zt_any_failed(int failed, char *msg, size_t len);
/* collective error exit: when zt_any_failed() reports an error, rank 0 prints it and every rank exits 2;
   when rank 0 itself passed, the line starts "rank R on HOST: " (the lowest failing rank) */
void zt_check_all(int failed, char *msg, size_t len);

/* MPI calls that must not fail: rank, host, file:line and MPI's message, then abort all ranks */
#define ZT_MPI(call) do { int rc_ = (call); if (rc_ != MPI_SUCCESS) { char s_[MPI_MAX_ERROR_STRING]; \
    int n_ = 0; MPI_Error_string(rc_, s_, &n_); zt_panic(__FILE__, __LINE__, "%s: %s", #call, s_); } } while (0)

/* mkdir -p; returns 0 or -1 (errno set) */
int zt_mkdirs(const char *path);

/* Input files are checked for type BEFORE they are opened for reading: open() of a named pipe blocks
   until a writer appears (a hang before any check), and a directory or a device reads as garbage or
   forever (/dev/zero). 0 when path is a regular file or does not exist / cannot be stat'ed (the
   caller's open then reports that in its own words); 1 with "PATH: a named pipe (FIFO), not a regular
   file (expected WHAT)" in err otherwise. */
int zt_check_input_file(const char *path, const char *what, char *err, size_t n);
/* the same for a path that may also be a directory (a checkpoint directory, a safetensors folder) */
int zt_check_input_file_or_dir(const char *path, const char *what, char *err, size_t n);
/* the whole of a regular file `what` (checked as zt_check_input_file) in a malloc'd NUL-terminated buffer,
   its length in *len; NULL with one line in err */
char *zt_read_file(const char *path, const char *what, size_t *len, char *err, size_t n);
/* "a directory", "a named pipe (FIFO)", "a character device", ... for an st_mode */
const char *zt_file_kind(unsigned mode);
/* writes len bytes to path atomically: path.tmp.PID, fsync, rename over path (readers see the old file
   or the whole new one, never a 0-byte or partial one; a failure leaves the old file as it was).
   0, or 1 with "PATH: cannot write: REASON" in err. */
int zt_write_file_atomic(const char *path, const void *data, size_t len, char *err, size_t n);

#endif
