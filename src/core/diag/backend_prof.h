/* backend_prof.h — a profiling decorator for any backend: wraps every op of be->i with a timer
 * (sync before and after, so asynchronous backends are timed honestly) and keeps the total time
 * and call count per op. Used by the step benchmark for its time breakdown. */
#ifndef ZT_BACKEND_PROF_H
#define ZT_BACKEND_PROF_H

#include "iface/backend.h"

#define ZT_PROF_MAX_OPS 32

typedef struct zt_prof_entry { const char *name; double seconds; long calls; } zt_prof_entry;

/* replaces be->i by a timing copy; the original is restored by zt_backend_prof_end */
void zt_backend_prof_begin(zt_backend *be);
void zt_backend_prof_reset(void);
/* entries sorted by time, returns the count */
int zt_backend_prof_report(zt_prof_entry *out, int max);
void zt_backend_prof_end(zt_backend *be);

#endif
