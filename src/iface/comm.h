/* comm.h — the communicator interface (struct of function pointers + ctx), shaped by what NCCL
 * offers so that an NCCL implementation is direct (docs/design.md section 8):
 *  - equal-count collectives: all-reduce, reduce-scatter, all-gather, all-to-all, broadcast;
 *  - grouped point-to-point: send / recv (and rooted reduce) only between group_start and
 *    group_end, any counts per peer; this is how variable-size exchanges are written (there are
 *    no v-collectives);
 *  - stream-ordered completion instead of request objects: record() returns an event covering
 *    everything issued so far, query() progresses it and says whether it is done, wait() makes
 *    the results visible to the host and to backend work issued afterwards.
 * Ordering with the backend: every operation is ordered after the backend work issued before it
 * (the MPI implementation makes each operation through the backend's host_call slot, after its work;
 * NCCL waits on an event of the compute stream). Blocking collectives return with their results
 * visible to later backend work. While a step graph is captured (core/optim/step_graph.h) the
 * operations are captured with the kernels and made again at each replay; query() is not called then.
 * Buffers are memory of the kind `mem` (host for MPI, device for NCCL and devsim); the factory
 * (core/dist/backend_factory.h) refuses a communicator whose kind differs from the backend's.
 * Counts are elements of dtype. Implementations: core/dist/comm_mpi.c (MPI; with a pointer translation
 * it is also the devsim communicator that follows NCCL's rules), cuda/comm_nccl.c. */
#ifndef ZT_COMM_H
#define ZT_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "iface/backend.h"

typedef enum { ZT_F32, ZT_F64, ZT_I32, ZT_U8 } zt_dtype;

typedef struct zt_comm zt_comm;
typedef uint64_t zt_comm_event;

typedef struct zt_comm_i {
    const char *name;
    zt_mem_kind mem;
    void (*destroy)(zt_comm *c);
    /* blocking collectives (every rank calls them in the same order) */
    /* recv = sum over ranks of send (recv may equal send: in place); ZT_U8 is a bitwise or */
    void (*all_reduce)(zt_comm *c, const void *send, void *recv, size_t count, zt_dtype t);
    /* recv(count) = sum over ranks of send[rank*count .. (rank+1)*count) */
    void (*reduce_scatter)(zt_comm *c, const void *send, void *recv, size_t count, zt_dtype t);
    /* recv(size*count) = concat of every rank's send(count); send may be recv + rank*count (in place) */
    void (*all_gather)(zt_comm *c, const void *send, void *recv, size_t count, zt_dtype t);
    /* recv[r*count ..] = rank r's send[rank*count ..] */
    void (*all_to_all)(zt_comm *c, const void *send, void *recv, size_t count, zt_dtype t);
    void (*broadcast)(zt_comm *c, void *buf, size_t count, zt_dtype t, int root);
    void (*barrier)(zt_comm *c);
    /* asynchronous, grouped: run in the background until an event that covers them is waited for.
       send/recv pair up per peer in issue order; reduce: root's recv(count) = sum of every rank's
       send(count) (recv is unused on other ranks). Sending to or receiving from oneself is allowed. */
    void (*group_start)(zt_comm *c);
    void (*send)(zt_comm *c, const void *buf, size_t count, zt_dtype t, int peer);
    void (*recv)(zt_comm *c, void *buf, size_t count, zt_dtype t, int peer);
    void (*reduce)(zt_comm *c, const void *send, void *recv, size_t count, zt_dtype t, int root);
    void (*group_end)(zt_comm *c);
    /* completion */
    zt_comm_event (*record)(zt_comm *c);
    int (*query)(zt_comm *c, zt_comm_event e);     /* progresses; 1 when everything up to e is done */
    void (*wait)(zt_comm *c, zt_comm_event e);
} zt_comm_i;

struct zt_comm {
    const zt_comm_i *i;
    void *ctx;
    int rank, size;
};

static inline size_t zt_dtype_size(zt_dtype t) { return t == ZT_F64 ? 8 : t == ZT_U8 ? 1 : 4; }

#endif
