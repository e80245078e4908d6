/* comm.h — the communicator interface (struct of function pointers + ctx), implemented over MPI
 * on host buffers (comm_mpi.c) and, later, NCCL on device buffers. Counts are elements of dtype.
 * Non-blocking forms return a request that zt_comm_wait completes. */
#ifndef ZT_COMM_H
#define ZT_COMM_H

#include <stddef.h>

typedef enum { ZT_F32, ZT_F64, ZT_I32, ZT_U8 } zt_dtype;

typedef struct zt_comm zt_comm;
typedef struct zt_comm_req zt_comm_req;   /* opaque */

typedef struct zt_comm_i {
    const char *name;
    /* recv = sum over ranks of send (recv may equal send: in place) */
    void (*all_reduce)(zt_comm *c, const void *send, void *recv, size_t count, zt_dtype t);
    /* recv(count) = sum over ranks of send[rank*count .. (rank+1)*count) */
    void (*reduce_scatter)(zt_comm *c, const void *send, void *recv, size_t count, zt_dtype t);
    /* recv(size*count) = concat of every rank's send(count); send may be recv + rank*count (in place) */
    void (*all_gather)(zt_comm *c, const void *send, void *recv, size_t count, zt_dtype t);
    /* recv[r*count ..] = rank r's send[rank*count ..] */
    void (*all_to_all)(zt_comm *c, const void *send, void *recv, size_t count, zt_dtype t);
    void (*broadcast)(zt_comm *c, void *buf, size_t count, zt_dtype t, int root);
    void (*barrier)(zt_comm *c);
    /* non-blocking forms */
    zt_comm_req *(*iall_to_all)(zt_comm *c, const void *send, void *recv, size_t count, zt_dtype t);
    zt_comm_req *(*ireduce_scatter)(zt_comm *c, const void *send, void *recv, size_t count, zt_dtype t);
    zt_comm_req *(*iall_gather)(zt_comm *c, const void *send, void *recv, size_t count, zt_dtype t);
    zt_comm_req *(*iall_reduce)(zt_comm *c, const void *send, void *recv, size_t count, zt_dtype t);
    /* variable-size forms (counts/displacements in elements, one per rank) */
    zt_comm_req *(*iall_to_all_v)(zt_comm *c, const void *send, const int *scounts, const int *sdispls, void *recv,
                                  const int *rcounts, const int *rdispls, zt_dtype t);
    /* recv(rcounts[rank]) = sum over ranks of send[sum(rcounts[0..rank)) ..] */
    zt_comm_req *(*ireduce_scatter_v)(zt_comm *c, const void *send, void *recv, const int *rcounts, zt_dtype t);
    /* progress without blocking; returns 1 when done */
    int (*test)(zt_comm *c, zt_comm_req *r);
    void (*wait)(zt_comm *c, zt_comm_req *r);   /* completes and frees r */
} zt_comm_i;

struct zt_comm {
    const zt_comm_i *i;
    void *ctx;
    int rank, size;
};

zt_comm *zt_comm_mpi_create(void);   /* over MPI_COMM_WORLD */
void zt_comm_free(zt_comm *c);

#endif
