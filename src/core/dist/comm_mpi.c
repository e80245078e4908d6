/* comm_mpi.c — the communicator over MPI (see comm_mpi.h and iface/comm.h).
 *
 * Blocking collectives are MPI's own (MPI_Alltoall was measured faster than every hand-rolled
 * exchange on a 2-core AMD EPYC: docs/distribution.md). Grouped operations are posted as non-blocking
 * MPI calls when issued and tagged with the number of the group they belong to; an event is a
 * group number, and query/wait test or wait the requests of groups up to it. Point-to-point
 * messages of one group pair up by issue order (MPI's non-overtaking rule on one communicator and
 * tag), so several groups may be in flight at once. Every operation first syncs the backend:
 * MPI reads memory directly, so the work that produced a buffer must be done. */
#include "core/dist/comm_mpi.h"

#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

typedef struct pending {
    MPI_Request r;
    zt_comm_event group;
} pending;

typedef struct mpi_ctx {
    MPI_Comm comm;
    zt_backend *be;
    void *(*translate)(const void *dev);
    int in_group;
    zt_comm_event groups;     /* groups ended so far; the group being issued is groups + 1 */
    pending *p;
    int np, cap;
    MPI_Request *rs;          /* reduce_scatter's requests, one per rank (made with the communicator) */
} mpi_ctx;

#define CTX(c) ((mpi_ctx *)(c)->ctx)

static MPI_Datatype mpi_type(zt_dtype t) {
    switch (t) {
    case ZT_F32: return MPI_FLOAT;
    case ZT_F64: return MPI_DOUBLE;
    case ZT_I32: return MPI_INT;
    default: return MPI_BYTE;
    }
}

/* MPI counts are int: every call here is for buffers < 2^31 elements per rank piece */
static int icount(size_t n) {
    ZT_ASSERT(n <= (size_t)0x7fffffff);
    return (int)n;
}

/* the address MPI may touch */
static void *mem(mpi_ctx *x, const void *p) {
    if (!x->translate || !p) return (void *)p;
    return x->translate(p);
}

/* operations are ordered after the backend's work */
static void order(mpi_ctx *x) {
    if (x->be) x->be->i->sync(x->be);
}

static void m_all_reduce(zt_comm *c, const void *send, void *recv, size_t n, zt_dtype t) {
    mpi_ctx *x = CTX(c);
    order(x);
    ZT_MPI(MPI_Allreduce(send == recv ? MPI_IN_PLACE : mem(x, send), mem(x, recv), icount(n), mpi_type(t),
                         t == ZT_U8 ? MPI_BOR : MPI_SUM, x->comm));
}
/* one rooted MPI reduce per owner, all in flight at once (MPI's own reductions, as stage 2's buckets issue them),
   not MPI_Reduce_scatter_block: inside training (GPT-2 124M, 500 MB of gradient, 4 ranks on 2 cores) Open MPI's
   reduce-scatter took ~2.1 s per step whichever coll_tuned algorithm was forced (0-4), against ~1.8 s for these
   reduces, and its root faulted in ~1 GB of fresh pages per call; 2 ranks: steps 2.55-2.62 s -> 2.22-2.38 s */
static void m_reduce_scatter(zt_comm *c, const void *send, void *recv, size_t n, zt_dtype t) {
    mpi_ctx *x = CTX(c);
    order(x);
    const size_t piece = n * zt_dtype_size(t);
    for (int r = 0; r < c->size; r++)
        ZT_MPI(MPI_Ireduce((const char *)mem(x, send) + (size_t)r * piece, c->rank == r ? mem(x, recv) : NULL,
                           icount(n), mpi_type(t), MPI_SUM, r, x->comm, &x->rs[r]));
    ZT_MPI(MPI_Waitall(c->size, x->rs, MPI_STATUSES_IGNORE));
}
static void m_all_gather(zt_comm *c, const void *send, void *recv, size_t n, zt_dtype t) {
    mpi_ctx *x = CTX(c);
    order(x);
    int inplace = (const char *)send == (const char *)recv + (size_t)c->rank * n * zt_dtype_size(t);
    ZT_MPI(MPI_Allgather(inplace ? MPI_IN_PLACE : mem(x, send), icount(n), mpi_type(t), mem(x, recv), icount(n),
                         mpi_type(t), x->comm));
}
static void m_all_to_all(zt_comm *c, const void *send, void *recv, size_t n, zt_dtype t) {
    mpi_ctx *x = CTX(c);
    order(x);
    ZT_MPI(MPI_Alltoall(mem(x, send), icount(n), mpi_type(t), mem(x, recv), icount(n), mpi_type(t), x->comm));
}
static void m_broadcast(zt_comm *c, void *buf, size_t n, zt_dtype t, int root) {
    mpi_ctx *x = CTX(c);
    order(x);
    ZT_MPI(MPI_Bcast(mem(x, buf), icount(n), mpi_type(t), root, x->comm));
}
static void m_barrier(zt_comm *c) {
    mpi_ctx *x = CTX(c);
    order(x);
    ZT_MPI(MPI_Barrier(x->comm));
}

/* ------------------------------------------------------------------ grouped operations */

static MPI_Request *new_pending(mpi_ctx *x) {
    if (!x->in_group) zt_panic(__FILE__, __LINE__, "communicator: send/recv/reduce outside group_start/group_end");
    if (x->np == x->cap) {
        x->cap = x->cap ? 2 * x->cap : 64;
        x->p = zt_realloc(x->p, (size_t)x->cap * sizeof *x->p);
    }
    x->p[x->np].group = x->groups + 1;
    return &x->p[x->np++].r;
}

static void m_group_start(zt_comm *c) {
    mpi_ctx *x = CTX(c);
    if (x->in_group) zt_panic(__FILE__, __LINE__, "communicator: nested group_start");
    order(x);
    x->in_group = 1;
}
/* tag 0: pairs match by issue order (MPI's non-overtaking rule) */
static void m_send(zt_comm *c, const void *buf, size_t n, zt_dtype t, int peer) {
    mpi_ctx *x = CTX(c);
    ZT_MPI(MPI_Isend(mem(x, buf), icount(n), mpi_type(t), peer, 0, x->comm, new_pending(x)));
}
static void m_recv(zt_comm *c, void *buf, size_t n, zt_dtype t, int peer) {
    mpi_ctx *x = CTX(c);
    ZT_MPI(MPI_Irecv(mem(x, buf), icount(n), mpi_type(t), peer, 0, x->comm, new_pending(x)));
}
static void m_reduce(zt_comm *c, const void *send, void *recv, size_t n, zt_dtype t, int root) {
    mpi_ctx *x = CTX(c);
    ZT_MPI(MPI_Ireduce(mem(x, send), c->rank == root ? mem(x, recv) : NULL, icount(n), mpi_type(t), MPI_SUM, root,
                       x->comm, new_pending(x)));
}
static void m_group_end(zt_comm *c) {
    mpi_ctx *x = CTX(c);
    if (!x->in_group) zt_panic(__FILE__, __LINE__, "communicator: group_end without group_start");
    x->in_group = 0;
    x->groups++;
}

static zt_comm_event m_record(zt_comm *c) { return CTX(c)->groups; }

/* drops completed requests of groups <= e (keeping issue order); returns 1 when none is left */
static int settle(mpi_ctx *x, zt_comm_event e, int block) {
    int k = 0, left = 0;
    for (int i = 0; i < x->np; i++) {
        pending *p = &x->p[i];
        if (p->group <= e) {
            int done = 1;
            if (block) ZT_MPI(MPI_Wait(&p->r, MPI_STATUS_IGNORE));
            else ZT_MPI(MPI_Test(&p->r, &done, MPI_STATUS_IGNORE));
            if (done) continue;
            left = 1;
        }
        x->p[k++] = *p;
    }
    x->np = k;
    return !left;
}
static int m_query(zt_comm *c, zt_comm_event e) { return settle(CTX(c), e, 0); }
static void m_wait(zt_comm *c, zt_comm_event e) { settle(CTX(c), e, 1); }

static void m_destroy(zt_comm *c) {
    if (!c) return;
    mpi_ctx *x = CTX(c);
    settle(x, x->groups, 1);
    MPI_Comm_free(&x->comm);
    free(x->p);
    free(x->rs);
    free(x);
    free(c);
}

static zt_comm_i make_i(const char *name, zt_mem_kind kind) {
    zt_comm_i i = {
        .name = name,
        .mem = kind,
        .destroy = m_destroy,
        .all_reduce = m_all_reduce,
        .reduce_scatter = m_reduce_scatter,
        .all_gather = m_all_gather,
        .all_to_all = m_all_to_all,
        .broadcast = m_broadcast,
        .barrier = m_barrier,
        .group_start = m_group_start,
        .send = m_send,
        .recv = m_recv,
        .reduce = m_reduce,
        .group_end = m_group_end,
        .record = m_record,
        .query = m_query,
        .wait = m_wait,
    };
    return i;
}

zt_comm *zt_comm_mpi_create(zt_backend *be, void *(*translate)(const void *dev)) {
    static zt_comm_i host_i, dev_i;
    if (!host_i.name) {
        host_i = make_i("mpi", ZT_MEM_HOST);
        dev_i = make_i("devsim", ZT_MEM_DEVICE);
    }
    zt_comm *c = zt_calloc(1, sizeof *c);
    mpi_ctx *x = zt_calloc(1, sizeof *x);
    c->i = translate ? &dev_i : &host_i;
    c->ctx = x;
    x->be = be;
    x->translate = translate;
    ZT_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &x->comm));
    MPI_Comm_rank(x->comm, &c->rank);
    MPI_Comm_size(x->comm, &c->size);
    x->rs = zt_calloc((size_t)c->size, sizeof *x->rs);
    return c;
}
