/* memstat.c — VmRSS / VmHWM of this process (see memstat.h). */
#include "util/memstat.h"

#include <stdio.h>
#include <string.h>

static size_t status_kb(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    unsigned long long kb = 0;
    const size_t n = strlen(key);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, n) == 0 && sscanf(line + n, " %llu", &kb) == 1) break;
    fclose(f);
    return (size_t)kb * 1024;
}

size_t zt_mem_rss(void) { return status_kb("VmRSS:"); }
size_t zt_mem_peak(void) { return status_kb("VmHWM:"); }
