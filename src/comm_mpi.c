/* comm_mpi.c — the communicator over MPI (host buffers). */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "dist.h"
#include "util.h"

struct zt_comm_req { MPI_Request r; };

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

static void m_all_reduce(zt_comm *c, const void *send, void *recv, size_t n, zt_dtype t) {
    (void)c;
    ZT_MPI(MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, icount(n), mpi_type(t),
                         t == ZT_U8 ? MPI_BOR : MPI_SUM, MPI_COMM_WORLD));
}
static void m_reduce_scatter(zt_comm *c, const void *send, void *recv, size_t n, zt_dtype t) {
    (void)c;
    ZT_MPI(MPI_Reduce_scatter_block(send, recv, icount(n), mpi_type(t), MPI_SUM, MPI_COMM_WORLD));
}
static void m_all_gather(zt_comm *c, const void *send, void *recv, size_t n, zt_dtype t) {
    size_t es = t == ZT_F64 ? 8 : t == ZT_U8 ? 1 : 4;
    int inplace = (const char *)send == (const char *)recv + (size_t)c->rank * n * es;
    ZT_MPI(MPI_Allgather(inplace ? MPI_IN_PLACE : send, icount(n), mpi_type(t), recv, icount(n), mpi_type(t),
                         MPI_COMM_WORLD));
}
static void m_all_to_all(zt_comm *c, const void *send, void *recv, size_t n, zt_dtype t) {
    (void)c;
    ZT_MPI(MPI_Alltoall(send, icount(n), mpi_type(t), recv, icount(n), mpi_type(t), MPI_COMM_WORLD));
}
static void m_broadcast(zt_comm *c, void *buf, size_t n, zt_dtype t, int root) {
    (void)c;
    ZT_MPI(MPI_Bcast(buf, icount(n), mpi_type(t), root, MPI_COMM_WORLD));
}
static void m_barrier(zt_comm *c) { (void)c; ZT_MPI(MPI_Barrier(MPI_COMM_WORLD)); }

static zt_comm_req *new_req(void) { return zt_calloc(1, sizeof(zt_comm_req)); }

static zt_comm_req *m_iall_to_all(zt_comm *c, const void *send, void *recv, size_t n, zt_dtype t) {
    (void)c;
    zt_comm_req *r = new_req();
    ZT_MPI(MPI_Ialltoall(send, icount(n), mpi_type(t), recv, icount(n), mpi_type(t), MPI_COMM_WORLD, &r->r));
    return r;
}
static zt_comm_req *m_ireduce_scatter(zt_comm *c, const void *send, void *recv, size_t n, zt_dtype t) {
    (void)c;
    zt_comm_req *r = new_req();
    ZT_MPI(MPI_Ireduce_scatter_block(send, recv, icount(n), mpi_type(t), MPI_SUM, MPI_COMM_WORLD, &r->r));
    return r;
}
static zt_comm_req *m_iall_gather(zt_comm *c, const void *send, void *recv, size_t n, zt_dtype t) {
    size_t es = t == ZT_F64 ? 8 : t == ZT_U8 ? 1 : 4;
    int inplace = (const char *)send == (const char *)recv + (size_t)c->rank * n * es;
    zt_comm_req *r = new_req();
    ZT_MPI(MPI_Iallgather(inplace ? MPI_IN_PLACE : send, icount(n), mpi_type(t), recv, icount(n), mpi_type(t),
                          MPI_COMM_WORLD, &r->r));
    return r;
}
static zt_comm_req *m_iall_reduce(zt_comm *c, const void *send, void *recv, size_t n, zt_dtype t) {
    (void)c;
    zt_comm_req *r = new_req();
    ZT_MPI(MPI_Iallreduce(send == recv ? MPI_IN_PLACE : send, recv, icount(n), mpi_type(t), MPI_SUM,
                          MPI_COMM_WORLD, &r->r));
    return r;
}
static zt_comm_req *m_iall_to_all_v(zt_comm *c, const void *send, const int *scounts, const int *sdispls, void *recv,
                                    const int *rcounts, const int *rdispls, zt_dtype t) {
    (void)c;
    zt_comm_req *r = new_req();
    ZT_MPI(MPI_Ialltoallv(send, scounts, sdispls, mpi_type(t), recv, rcounts, rdispls, mpi_type(t), MPI_COMM_WORLD,
                          &r->r));
    return r;
}
static zt_comm_req *m_ireduce_scatter_v(zt_comm *c, const void *send, void *recv, const int *rcounts, zt_dtype t) {
    (void)c;
    zt_comm_req *r = new_req();
    ZT_MPI(MPI_Ireduce_scatter(send, recv, rcounts, mpi_type(t), MPI_SUM, MPI_COMM_WORLD, &r->r));
    return r;
}
static int m_test(zt_comm *c, zt_comm_req *r) {
    (void)c;
    int done = 0;
    ZT_MPI(MPI_Test(&r->r, &done, MPI_STATUS_IGNORE));
    return done;
}
static void m_wait(zt_comm *c, zt_comm_req *r) {
    (void)c;
    if (!r) return;
    ZT_MPI(MPI_Wait(&r->r, MPI_STATUS_IGNORE));
    free(r);
}

static const zt_comm_i g_mpi_i = {
    .name = "mpi",
    .all_reduce = m_all_reduce,
    .reduce_scatter = m_reduce_scatter,
    .all_gather = m_all_gather,
    .all_to_all = m_all_to_all,
    .broadcast = m_broadcast,
    .barrier = m_barrier,
    .iall_to_all = m_iall_to_all,
    .ireduce_scatter = m_ireduce_scatter,
    .iall_gather = m_iall_gather,
    .iall_reduce = m_iall_reduce,
    .iall_to_all_v = m_iall_to_all_v,
    .ireduce_scatter_v = m_ireduce_scatter_v,
    .test = m_test,
    .wait = m_wait,
};

zt_comm *zt_comm_mpi_create(void) {
    zt_comm *c = zt_calloc(1, sizeof *c);
    c->i = &g_mpi_i;
    MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &c->size);
    return c;
}

void zt_comm_free(zt_comm *c) { free(c); }
