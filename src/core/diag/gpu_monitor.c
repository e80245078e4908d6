/* gpu_monitor.c — NVML through dlopen (see gpu_monitor.h). The few NVML types used are declared here
 * with NVML's documented layouts, so no NVML header is needed to build. */
#include "core/diag/gpu_monitor.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

typedef void *nvml_device;
typedef struct { unsigned long long total, free, used; } nvml_memory;
typedef struct { unsigned int gpu, memory; } nvml_utilization;

struct zt_gpu_monitor {
    void *lib;
    nvml_device dev;
    int (*shutdown)(void);
    int (*memory)(nvml_device, nvml_memory *);
    int (*utilization)(nvml_device, nvml_utilization *);
};

/* the NVML index of the local_rank-th visible GPU */
static int nvml_index(int local_rank) {
    const char *v = getenv("CUDA_VISIBLE_DEVICES");
    if (!v || !*v) return local_rank;
    int k = 0;
    for (const char *p = v; *p;) {
        char *end;
        long id = strtol(p, &end, 10);
        if (end == p) return local_rank; /* UUIDs or MIG names: fall back */
        if (k++ == local_rank) return (int)id;
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') return local_rank;
    }
    return local_rank;
}

zt_gpu_monitor *zt_gpu_monitor_open(int local_rank) {
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return NULL;
    int (*init)(void) = (int (*)(void))dlsym(lib, "nvmlInit_v2");
    int (*handle)(unsigned, nvml_device *) = (int (*)(unsigned, nvml_device *))dlsym(lib, "nvmlDeviceGetHandleByIndex_v2");
    zt_gpu_monitor g = {lib, NULL, (int (*)(void))dlsym(lib, "nvmlShutdown"),
                        (int (*)(nvml_device, nvml_memory *))dlsym(lib, "nvmlDeviceGetMemoryInfo"),
                        (int (*)(nvml_device, nvml_utilization *))dlsym(lib, "nvmlDeviceGetUtilizationRates")};
    /* NVML_SUCCESS is 0 */
    if (!init || !handle || !g.shutdown || !g.memory || !g.utilization || init() != 0) {
        dlclose(lib);
        return NULL;
    }
    if (handle((unsigned)nvml_index(local_rank), &g.dev) != 0) {
        g.shutdown();
        dlclose(lib);
        return NULL;
    }
    zt_gpu_monitor *m = zt_malloc(sizeof *m);
    *m = g;
    return m;
}

int zt_gpu_monitor_read(zt_gpu_monitor *g, double *mem_used_bytes, double *util_pct) {
    nvml_memory mem;
    nvml_utilization u;
    if (!g || g->memory(g->dev, &mem) != 0 || g->utilization(g->dev, &u) != 0) return 1;
    *mem_used_bytes = (double)mem.used;
    *util_pct = (double)u.gpu;
    return 0;
}

void zt_gpu_monitor_close(zt_gpu_monitor *g) {
    if (!g) return;
    g->shutdown();
    dlclose(g->lib);
    free(g);
}
