/* memstat.h — this process's resident memory from /proc/self/status (Linux): current (VmRSS) and peak
 * (VmHWM), for checking the memory plan against what the allocations really touch. */
#ifndef ZT_MEMSTAT_H
#define ZT_MEMSTAT_H

#include <stddef.h>

/* bytes; 0 where /proc is not available */
size_t zt_mem_rss(void);
size_t zt_mem_peak(void);

#endif
