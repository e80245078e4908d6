/* comm_mpi.c — the communicator over MPI (see comm_mpi.h and iface/comm.h).
 *
 * Blocking collectives are MPI's own (MPI_Alltoall was measured faster than every hand-rolled
 * exchange on a 2-core AMD EPYC: docs/distribution.md). Grouped operations are posted as non-blocking
 * MPI calls and tagged with the number of the group they belong to; query/wait test or wait the
 * requests of groups up to an event. Point-to-point messages of one group pair up by issue order
 * (MPI's non-overtaking rule on one communicator and tag), so several groups may be in flight at once.
 *
 * Every operation is issued through the backend's host_call slot (iface/backend.h): made after the
 * backend's work issued before it (MPI reads memory directly, so the work that produced a buffer must be
 * done), at once, or, while a step graph is captured, recorded with the capture and made at each replay
 * (core/optim/step_graph.h). So the state an operation changes (the requests in flight, the groups ended)
 * changes when it is made, and an event is a distance: record() returns the number of groups issued so
 * far, and a wait for event e issued when g groups had been issued waits, when it is made, for the groups
 * up to the (g - e)-th last ended. Replayed, the same operations come in the same order on every rank, so
 * the distance names the same group (or, for an event from before the capture, a later one: the wait
 * covers it). query is never issued during a capture (zero_bucket.c polls only without a step graph). */
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
    int rank, size;
    zt_backend *be;
    void *(*translate)(const void *dev);
    int in_group;             /* issue side: between group_start and group_end */
    zt_comm_event issued;     /* issue side: groups ended so far */
    zt_comm_event groups;     /* made so far: groups ended; the group being posted is groups + 1 */
    pending *p;
    int np, cap;
    MPI_Request *rs;          /* reduce_scatter's requests, one per rank (made with the communicator) */
} mpi_ctx;

#define CTX(c) ((mpi_ctx *)(c)->ctx)

/* one operation as issued (host_call copies it: no padding bytes) */
typedef enum { OP_ALL_REDUCE, OP_REDUCE_SCATTER, OP_ALL_GATHER, OP_ALL_TO_ALL, OP_BROADCAST, OP_BARRIER, OP_SEND,
               OP_RECV, OP_REDUCE, OP_GROUP_END, OP_WAIT } op_kind;
typedef struct mpi_op {
    mpi_ctx *x;
    const void *send;
    void *recv;
    uint64_t n;               /* count */
    uint64_t arg;             /* root, peer, or (OP_WAIT) the event's distance */
    int32_t t, kind;          /* zt_dtype, op_kind */
} mpi_op;

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

static MPI_Request *new_pending(mpi_ctx *x) {
    if (x->np == x->cap) {
        x->cap = x->cap ? 2 * x->cap : 64;
        x->p = zt_realloc(x->p, (size_t)x->cap * sizeof *x->p);
    }
    x->p[x->np].group = x->groups + 1;
    return &x->p[x->np++].r;
}

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

/* one rooted MPI reduce per owner, all in flight at once (MPI's own reductions, as stage 2's buckets issue them),
   not MPI_Reduce_scatter_block: inside training (GPT-2 124M, 500 MB of gradient, 4 ranks on 2 cores) Open MPI's
   reduce-scatter took ~2.1 s per step whichever coll_tuned algorithm was forced (0-4), against ~1.8 s for these
   reduces, and its root faulted in ~1 GB of fresh pages per call; 2 ranks: steps 2.55-2.62 s -> 2.22-2.38 s */
static void reduce_scatter_now(mpi_ctx *x, const void *send, void *recv, int n, zt_dtype t) {
    const size_t piece = (size_t)n * zt_dtype_size(t);
    for (int r = 0; r < x->size; r++)
        ZT_MPI(MPI_Ireduce((const char *)mem(x, send) + (size_t)r * piece, x->rank == r ? mem(x, recv) : NULL, n,
                           mpi_type(t), MPI_SUM, r, x->comm, &x->rs[r]));
    ZT_MPI(MPI_Waitall(x->size, x->rs, MPI_STATUSES_IGNORE));
}

/* an operation made (at once, or at a replay) */
static void make_op(void *arg) {
    const mpi_op *o = arg;
    mpi_ctx *x = o->x;
    const zt_dtype t = (zt_dtype)o->t;
    const MPI_Datatype dt = mpi_type(t);
    const int n = icount(o->n), peer = (int)o->arg;
    switch ((op_kind)o->kind) {
    case OP_ALL_REDUCE:
        ZT_MPI(MPI_Allreduce(o->send == o->recv ? MPI_IN_PLACE : mem(x, o->send), mem(x, o->recv), n, dt,
                             t == ZT_U8 ? MPI_BOR : MPI_SUM, x->comm));
        break;
    case OP_REDUCE_SCATTER: reduce_scatter_now(x, o->send, o->recv, n, t); break;
    case OP_ALL_GATHER: {
        const int inplace = (const char *)o->send == (const char *)o->recv + (size_t)x->rank * o->n * zt_dtype_size(t);
        ZT_MPI(MPI_Allgather(inplace ? MPI_IN_PLACE : mem(x, o->send), n, dt, mem(x, o->recv), n, dt, x->comm));
        break;
    }
    case OP_ALL_TO_ALL: ZT_MPI(MPI_Alltoall(mem(x, o->send), n, dt, mem(x, o->recv), n, dt, x->comm)); break;
    case OP_BROADCAST: ZT_MPI(MPI_Bcast(mem(x, o->recv), n, dt, peer, x->comm)); break;
    case OP_BARRIER: ZT_MPI(MPI_Barrier(x->comm)); break;
    /* tag 0: pairs match by issue order (MPI's non-overtaking rule) */
    case OP_SEND: ZT_MPI(MPI_Isend(mem(x, o->send), n, dt, peer, 0, x->comm, new_pending(x))); break;
    case OP_RECV: ZT_MPI(MPI_Irecv(mem(x, o->recv), n, dt, peer, 0, x->comm, new_pending(x))); break;
    case OP_REDUCE:
        ZT_MPI(MPI_Ireduce(mem(x, o->send), x->rank == peer ? mem(x, o->recv) : NULL, n, dt, MPI_SUM, peer, x->comm,
                           new_pending(x)));
        break;
    case OP_GROUP_END: x->groups++; break;
    case OP_WAIT: settle(x, x->groups - o->arg, 1); break;
    }
}

/* an operation issued: made after the backend's work so far (iface/backend.h's host_call) */
static void issue(mpi_ctx *x, op_kind kind, const void *send, void *recv, size_t n, zt_dtype t, uint64_t arg) {
    mpi_op o;
    memset(&o, 0, sizeof o);
    o.x = x;
    o.send = send;
    o.recv = recv;
    o.n = n;
    o.arg = arg;
    o.t = (int32_t)t;
    o.kind = (int32_t)kind;
    if (x->be && x->be->i->host_call) {
        x->be->i->host_call(x->be, make_op, &o, sizeof o);
        return;
    }
    if (x->be) x->be->i->sync(x->be);
    make_op(&o);
}

static void in_group(const mpi_ctx *x) {
    if (!x->in_group) zt_panic(__FILE__, __LINE__, "communicator: send/recv/reduce outside group_start/group_end");
}

static void m_all_reduce(zt_comm *c, const void *send, void *recv, size_t n, zt_dtype t) {
    issue(CTX(c), OP_ALL_REDUCE, send, recv, n, t, 0);
}
static void m_reduce_scatter(zt_comm *c, const void *send, void *recv, size_t n, zt_dtype t) {
    issue(CTX(c), OP_REDUCE_SCATTER, send, recv, n, t, 0);
}
static void m_all_gather(zt_comm *c, const void *send, void *recv, size_t n, zt_dtype t) {
    issue(CTX(c), OP_ALL_GATHER, send, recv, n, t, 0);
}
static void m_all_to_all(zt_comm *c, const void *send, void *recv, size_t n, zt_dtype t) {
    issue(CTX(c), OP_ALL_TO_ALL, send, recv, n, t, 0);
}
static void m_broadcast(zt_comm *c, void *buf, size_t n, zt_dtype t, int root) {
    issue(CTX(c), OP_BROADCAST, buf, buf, n, t, (uint64_t)root);
}
static void m_barrier(zt_comm *c) { issue(CTX(c), OP_BARRIER, NULL, NULL, 0, ZT_U8, 0); }

/* ------------------------------------------------------------------ grouped operations */

static void m_group_start(zt_comm *c) {
    mpi_ctx *x = CTX(c);
    if (x->in_group) zt_panic(__FILE__, __LINE__, "communicator: nested group_start");
    x->in_group = 1;
}
static void m_send(zt_comm *c, const void *buf, size_t n, zt_dtype t, int peer) {
    in_group(CTX(c));
    issue(CTX(c), OP_SEND, buf, NULL, n, t, (uint64_t)peer);
}
static void m_recv(zt_comm *c, void *buf, size_t n, zt_dtype t, int peer) {
    in_group(CTX(c));
    issue(CTX(c), OP_RECV, NULL, buf, n, t, (uint64_t)peer);
}
static void m_reduce(zt_comm *c, const void *send, void *recv, size_t n, zt_dtype t, int root) {
    in_group(CTX(c));
    issue(CTX(c), OP_REDUCE, send, recv, n, t, (uint64_t)root);
}
static void m_group_end(zt_comm *c) {
    mpi_ctx *x = CTX(c);
    if (!x->in_group) zt_panic(__FILE__, __LINE__, "communicator: group_end without group_start");
    x->in_group = 0;
    x->issued++;
    issue(x, OP_GROUP_END, NULL, NULL, 0, ZT_U8, 0);
}

static zt_comm_event m_record(zt_comm *c) { return CTX(c)->issued; }

/* not during a capture: everything issued has been made, so the distance is taken now */
static int m_query(zt_comm *c, zt_comm_event e) {
    mpi_ctx *x = CTX(c);
    return settle(x, x->groups - (x->issued - e), 0);
}
static void m_wait(zt_comm *c, zt_comm_event e) {
    mpi_ctx *x = CTX(c);
    issue(x, OP_WAIT, NULL, NULL, 0, ZT_U8, x->issued - e);
}

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
    x->rank = c->rank;
    x->size = c->size;
    x->rs = zt_calloc((size_t)c->size, sizeof *x->rs);
    return c;
}
