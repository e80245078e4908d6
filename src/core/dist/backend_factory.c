/* backend_factory.c — makes backends and communicators (see backend_factory.h). The only file that
 * includes a backend's own header. */
#include "core/dist/backend_factory.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/diag/backend_count.h"
#include "core/dist/comm_mpi.h"
#include "cpu/cpu_backend.h"
#include "cuda/cuda_backend.h"
#include "devsim/devsim.h"
#include "util/util.h"

zt_backend *zt_backend_create(const char *device, int threads, char *err, size_t errlen) {
    if (strcmp(device, "cpu") == 0) return zt_cpu_backend_create(threads);
    if (strcmp(device, "devsim") == 0) return zt_devsim_backend_create(threads);
    /* no compute: the CUDA backend's launches and device-memory bytes counted (core/diag/backend_count.h) */
    if (strcmp(device, "count") == 0) return zt_count_null_create();
    if (strcmp(device, "cudasim") == 0) {
#ifdef ZT_NO_CUDASIM
        zt_errf(err, errlen, "device = \"cudasim\": not in the GPU build (the cpu build ./ztrain has it)");
        return NULL;
#else
        return zt_cudasim_backend_create(threads, err, errlen);
#endif
    }
    if (strcmp(device, "cuda") == 0) {
#ifdef ZT_HAVE_CUDA
        return zt_cuda_backend_create(threads, err, errlen);
#else
        zt_errf(err, errlen, "device = \"cuda\": this ztrain was built without the CUDA backend (build with "
                             "`make CUDA=1`), or use --set device=cpu");
        return NULL;
#endif
    }
    zt_errf(err, errlen, "device = \"%s\": unknown backend (expected cpu, cuda, cudasim, devsim or count)", device);
    return NULL;
}

void zt_backend_destroy(zt_backend *be) {
    if (be) be->i->destroy(be);
}

void zt_backend_describe(zt_backend *be, char *buf, size_t n) { be->i->describe(be, buf, n); }

static const char *mem_name(zt_mem_kind k) { return k == ZT_MEM_HOST ? "host" : "device"; }

zt_comm *zt_comm_create(const char *kind, zt_backend *be, char *err, size_t errlen) {
    /* the count device: one rank, a communicator that moves nothing */
    if (strcmp(be->i->name, "count") == 0) {
        if (strcmp(kind, "auto") != 0) {
            zt_errf(err, errlen, "comm = \"%s\": device = \"count\" takes comm = \"auto\" only", kind);
            return NULL;
        }
        return zt_count_null_comm_create(be);
    }
    /* devsim and cudasim hand out devsim memory: the devsim communicator (MPI under NCCL's rules) */
    const int devsim = strcmp(be->i->name, "devsim") == 0 || strcmp(be->i->name, "cudasim") == 0;
    if (strcmp(kind, "auto") == 0) kind = devsim ? "devsim" : be->i->mem == ZT_MEM_HOST ? "mpi" : "nccl";
    zt_mem_kind takes;
    if (strcmp(kind, "mpi") == 0) takes = ZT_MEM_HOST;
    else if (strcmp(kind, "devsim") == 0 || strcmp(kind, "nccl") == 0) takes = ZT_MEM_DEVICE;
    else {
        zt_errf(err, errlen, "comm = \"%s\": unknown communicator (expected auto, mpi, devsim or nccl)", kind);
        return NULL;
    }
    if (takes != be->i->mem) {
        zt_errf(err, errlen, "comm = \"%s\" takes %s memory but device = \"%s\" hands out %s memory: use comm = \"auto\"",
                kind, mem_name(takes), be->i->name, mem_name(be->i->mem));
        return NULL;
    }
    if (strcmp(kind, "mpi") == 0) return zt_comm_mpi_create(be, NULL);
    if (strcmp(kind, "devsim") == 0) {
        if (!devsim) {
            zt_errf(err, errlen, "comm = \"devsim\" works only with device = \"devsim\" or \"cudasim\" (device is \"%s\")",
                    be->i->name);
            return NULL;
        }
        return zt_comm_mpi_create(be, zt_devsim_host_ptr);
    }
#ifdef ZT_HAVE_CUDA
    if (strcmp(be->i->name, "cuda") == 0) return zt_comm_nccl_create(be, err, errlen);
    zt_errf(err, errlen, "comm = \"nccl\" works only with device = \"cuda\" (device is \"%s\")", be->i->name);
#else
    zt_errf(err, errlen, "comm = \"nccl\": this ztrain was built without CUDA and NCCL (make CUDA=1)");
#endif
    return NULL;
}

void zt_comm_destroy(zt_comm *c) {
    if (c) c->i->destroy(c);
}

/* the harness's own counts (cuda/cudasim_count.cu); -1 in a build without cudasim */
#ifdef ZT_NO_CUDASIM
long long zt_backend_harness_launches(void) { return -1; }
long long zt_backend_harness_packed(void) { return -1; }
long long zt_backend_harness_gemm16(void) { return -1; }
#else
unsigned long long zt_cudasim_launch_count(void);
unsigned long long zt_cudasim_packed_elems(void);
unsigned long long zt_cudasim_gemm16_elems(void);
long long zt_backend_harness_launches(void) { return (long long)zt_cudasim_launch_count(); }
long long zt_backend_harness_packed(void) { return (long long)zt_cudasim_packed_elems(); }
long long zt_backend_harness_gemm16(void) { return (long long)zt_cudasim_gemm16_elems(); }
#endif

int zt_backend_list_gpus(char *buf, size_t n) {
#ifdef ZT_HAVE_CUDA
    return zt_cuda_list_devices(buf, n);
#else
    snprintf(buf, n, "this ztrain was built without the CUDA backend (make CUDA=1)");
    return -2;
#endif
}

double zt_backend_measure_sgemm(zt_backend *be, int n) {
    size_t bytes = (size_t)n * n * sizeof(float);
    float *a = be->i->alloc(be, bytes), *b = be->i->alloc(be, bytes), *c = be->i->alloc(be, bytes);
    float *h = zt_malloc(bytes);
    zt_rng r;
    zt_rng_seed(&r, 42);
    for (size_t i = 0; i < (size_t)n * n; i++) h[i] = (float)zt_rng_uniform(&r) - 0.5f;
    be->i->to_device(be, a, h, bytes);
    be->i->to_device(be, b, h, bytes);
    double best = 1e30;
    for (int it = 0; it < 3; it++) {
        be->i->sync(be);
        double t0 = zt_now();
        be->i->matmul(be, c, a, b, n, n, n, 0, 0, 1.0f, 0.0f);
        be->i->sync(be);
        double dt = zt_now() - t0;
        if (it > 0 && dt < best) best = dt;
    }
    be->i->free(be, a);
    be->i->free(be, b);
    be->i->free(be, c);
    free(h);
    return 2.0 * n * (double)n * n / best * 1e-9;
}
