/* dist.c — MPI bootstrap, rank layout, thread defaults, error agreement. */
#define _GNU_SOURCE
#include "core/dist/dist.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/util.h"

/* started without a launcher (no mpirun/srun variables): an Open MPI singleton. Unless the user set it,
   ess_singleton_isolated keeps it from forking a runtime daemon it never uses (ztrain spawns no processes):
   `ztrain config` takes 0.26 s with it and 0.40 s without on a 2-core AMD EPYC */
static void singleton_isolated(void) {
    static const char *const launched[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID", NULL};
    for (const char *const *v = launched; *v; v++)
        if (getenv(*v)) return;
    setenv("OMPI_MCA_ess_singleton_isolated", "1", 0);
}

void zt_dist_init(zt_dist *d, int *argc, char ***argv) {
    memset(d, 0, sizeof *d);
    singleton_isolated();
    int provided = 0;
    ZT_MPI(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided));
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    ZT_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &d->rank));
    ZT_MPI(MPI_Comm_size(MPI_COMM_WORLD, &d->size));
    gethostname(d->host, sizeof d->host - 1);
    zt_util_set_rank(d->rank, d->size, d->host);
    ZT_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, d->rank, MPI_INFO_NULL, &d->node));
    ZT_MPI(MPI_Comm_rank(d->node, &d->local_rank));
    ZT_MPI(MPI_Comm_size(d->node, &d->local_size));
    int leader = d->local_rank == 0;
    ZT_MPI(MPI_Allreduce(&leader, &d->n_nodes, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    d->node_cores = n > 0 ? (int)n : 1;
    cpu_set_t set;
    CPU_ZERO(&set);
    d->affinity_cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : d->node_cores;
    if (d->affinity_cores < 1) d->affinity_cores = 1;
}

void zt_dist_finalize(zt_dist *d) {
    if (d->node != MPI_COMM_NULL && d->node) MPI_Comm_free(&d->node);
    MPI_Finalize();
}

int zt_dist_default_threads(const zt_dist *d) {
    int t = d->node_cores / (d->local_size > 0 ? d->local_size : 1);
    if (t > d->affinity_cores) t = d->affinity_cores;
    return t < 1 ? 1 : t;
}

void zt_dist_layout_string(const zt_dist *d, char *buf, size_t n) {
    if (d->size % d->n_nodes == 0)
        snprintf(buf, n, "%d rank%s = %d node%s x %d", d->size, d->size == 1 ? "" : "s", d->n_nodes,
                 d->n_nodes == 1 ? "" : "s", d->size / d->n_nodes);
    else
        snprintf(buf, n, "%d rank%s on %d node%s", d->size, d->size == 1 ? "" : "s", d->n_nodes,
                 d->n_nodes == 1 ? "" : "s");
}

