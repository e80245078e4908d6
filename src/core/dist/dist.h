/* dist.h — MPI bootstrap and rank layout: world / node-local ranks (MPI_Comm_split_type),
 * node count, default threads per rank, and collective agreement on errors so that a failure
 * seen by some ranks ends every rank with one message and exit code 2 (never a hang). */
#ifndef ZT_DIST_H
#define ZT_DIST_H

#include <mpi.h>
#include <stddef.h>

typedef struct zt_dist {
    int rank, size;
    int local_rank, local_size;
    int n_nodes;
    int node_cores;       /* online cores on this node */
    int affinity_cores;   /* cores this rank may run on */
    char host[64];
    MPI_Comm node;        /* ranks on this node */
} zt_dist;


void zt_dist_init(zt_dist *d, int *argc, char ***argv);
void zt_dist_finalize(zt_dist *d);
/* threads per rank when train.threads = 0: cores on the node / ranks on the node, at least 1,
   and never more than the cores this rank is bound to */
int zt_dist_default_threads(const zt_dist *d);
/* "4 ranks = 2 nodes x 2" */
void zt_dist_layout_string(const zt_dist *d, char *buf, size_t n);

#endif
