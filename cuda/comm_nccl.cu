// comm_nccl.cu — the NCCL communicator (iface/comm.h) for the GPU build (make CUDA=1).
//
// One NCCL communicator per run over MPI_COMM_WORLD (rank 0's unique id broadcast with MPI), on a
// communication stream of its own. Ordering with the compute stream by events: every operation
// first makes the comm stream wait for the work already issued on the compute stream; blocking
// collectives then make the compute stream wait for the comm stream, so later kernels see the
// result without the host waiting. Groups map to ncclGroupStart/End; send/recv/reduce are NCCL's
// own (grouped point-to-point is how unequal all-to-alls are written). record() records an event on
// the comm stream; query() asks it; wait() makes the compute stream wait for it (host code that
// needs the data goes through the backend's to_host, which syncs the compute stream).
// In the host execution build the factory uses the devsim communicator instead (MPI under NCCL's
// rules over devsim memory), which keeps the same rules.
// A step graph (core/optim/step_graph.h) captures the operations as stream work: the comm stream joins the capture
// through the event it waits for, and joins back through the compute stream's wait; every operation's arguments
// are part of the launch trace (zt_launch_trace.h), as a kernel's are. query() is never called during a capture
// (zero_bucket.c polls only without a step graph).
#include <nccl.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_check.h"
#include "zt_launch_trace.h"

extern "C" {
#include "cuda_backend.h"
}

extern "C" cudaStream_t zt_cuda_backend_stream(zt_backend *be);

#define ZT_NCCL(call)                                                                                          \
    do {                                                                                                       \
        ncclResult_t r_ = (call);                                                                              \
        if (r_ != ncclSuccess) zt_panic(__FILE__, __LINE__, "%s: %s", #call, ncclGetErrorString(r_));          \
    } while (0)

namespace {

constexpr int kEvents = 64; // ring of events for record() (a reused slot only makes a wait longer)

struct nccl_ctx {
    ncclComm_t comm;
    zt_backend *be;                  // the compute backend: zt_cuda_backend_stream(be) at every use, so that an op
                                     // it holds for a fused rounding is issued first (cuda_backend.cu)
    cudaStream_t stream;
    cudaEvent_t ready;               // recorded on the compute stream before each operation
    cudaEvent_t done;                // recorded on the comm stream after each blocking collective
    cudaEvent_t ring[kEvents];
    zt_comm_event issued;            // events recorded so far
    int in_group;
};

nccl_ctx *X(zt_comm *c) { return static_cast<nccl_ctx *>(c->ctx); }

ncclDataType_t nccl_type(zt_dtype t) {
    switch (t) {
    case ZT_F32: return ncclFloat32;
    case ZT_F64: return ncclFloat64;
    case ZT_I32: return ncclInt32;
    default: return ncclUint8;
    }
}

// the operations as the launch trace names them
enum TraceOp { T_ALL_REDUCE, T_REDUCE_SCATTER, T_ALL_GATHER, T_ALL_TO_ALL, T_BROADCAST, T_SEND, T_RECV, T_REDUCE, T_RECORD,
               T_WAIT };

// an operation's arguments in the launch trace (no padding bytes)
void trace_op(TraceOp kind, const void *send, const void *recv, size_t n, zt_dtype t, int peer) {
    if (!zt_trace_sink) return;
    struct {
        const void *send, *recv;
        uint64_t n;
        int32_t kind, t, peer, pad;
    } o = {send, recv, n, (int32_t)kind, (int32_t)t, peer, 0};
    zt_trace_bytes(&o, sizeof o);
}

// the comm stream waits for the compute stream's work so far (asking the backend for its stream first
// launches an op it holds for a fused rounding: cuda_backend.cu)
void after_compute(nccl_ctx *x) {
    ZT_CUDA(cudaEventRecord(x->ready, zt_cuda_backend_stream(x->be)));
    ZT_CUDA(cudaStreamWaitEvent(x->stream, x->ready, 0));
}
// the compute stream waits for the comm stream's work so far
void before_compute(nccl_ctx *x) {
    ZT_CUDA(cudaEventRecord(x->done, x->stream));
    ZT_CUDA(cudaStreamWaitEvent(zt_cuda_backend_stream(x->be), x->done, 0));
}

void n_all_reduce(zt_comm *c, const void *send, void *recv, size_t n, zt_dtype t) {
    nccl_ctx *x = X(c);
    trace_op(T_ALL_REDUCE, send, recv, n, t, -1);
    after_compute(x);
    // ZT_U8 is a bitwise or (flags): max over 0/1 bytes
    ZT_NCCL(ncclAllReduce(send, recv, n, nccl_type(t), t == ZT_U8 ? ncclMax : ncclSum, x->comm, x->stream));
    before_compute(x);
}
void n_reduce_scatter(zt_comm *c, const void *send, void *recv, size_t n, zt_dtype t) {
    nccl_ctx *x = X(c);
    trace_op(T_REDUCE_SCATTER, send, recv, n, t, -1);
    after_compute(x);
    ZT_NCCL(ncclReduceScatter(send, recv, n, nccl_type(t), ncclSum, x->comm, x->stream));
    before_compute(x);
}
void n_all_gather(zt_comm *c, const void *send, void *recv, size_t n, zt_dtype t) {
    nccl_ctx *x = X(c);
    trace_op(T_ALL_GATHER, send, recv, n, t, -1);
    after_compute(x);
    ZT_NCCL(ncclAllGather(send, recv, n, nccl_type(t), x->comm, x->stream));
    before_compute(x);
}
void n_all_to_all(zt_comm *c, const void *send, void *recv, size_t n, zt_dtype t) {
    nccl_ctx *x = X(c);
    trace_op(T_ALL_TO_ALL, send, recv, n, t, -1);
    after_compute(x);
    const size_t es = zt_dtype_size(t);
    ZT_NCCL(ncclGroupStart());
    for (int r = 0; r < c->size; r++) {
        ZT_NCCL(ncclSend((const char *)send + (size_t)r * n * es, n, nccl_type(t), r, x->comm, x->stream));
        ZT_NCCL(ncclRecv((char *)recv + (size_t)r * n * es, n, nccl_type(t), r, x->comm, x->stream));
    }
    ZT_NCCL(ncclGroupEnd());
    before_compute(x);
}
void n_broadcast(zt_comm *c, void *buf, size_t n, zt_dtype t, int root) {
    nccl_ctx *x = X(c);
    trace_op(T_BROADCAST, buf, buf, n, t, root);
    after_compute(x);
    ZT_NCCL(ncclBroadcast(buf, buf, n, nccl_type(t), root, x->comm, x->stream));
    before_compute(x);
}
void n_barrier(zt_comm *c) {
    nccl_ctx *x = X(c);
    ZT_CUDA(cudaStreamSynchronize(zt_cuda_backend_stream(x->be)));
    ZT_CUDA(cudaStreamSynchronize(x->stream));
    MPI_Barrier(MPI_COMM_WORLD);
}

void n_group_start(zt_comm *c) {
    nccl_ctx *x = X(c);
    if (x->in_group) zt_panic(__FILE__, __LINE__, "communicator: nested group_start");
    after_compute(x);
    x->in_group = 1;
    ZT_NCCL(ncclGroupStart());
}
void in_group(nccl_ctx *x) {
    if (!x->in_group) zt_panic(__FILE__, __LINE__, "communicator: send/recv/reduce outside group_start/group_end");
}
void n_send(zt_comm *c, const void *buf, size_t n, zt_dtype t, int peer) {
    nccl_ctx *x = X(c);
    in_group(x);
    trace_op(T_SEND, buf, nullptr, n, t, peer);
    ZT_NCCL(ncclSend(buf, n, nccl_type(t), peer, x->comm, x->stream));
}
void n_recv(zt_comm *c, void *buf, size_t n, zt_dtype t, int peer) {
    nccl_ctx *x = X(c);
    in_group(x);
    trace_op(T_RECV, nullptr, buf, n, t, peer);
    ZT_NCCL(ncclRecv(buf, n, nccl_type(t), peer, x->comm, x->stream));
}
void n_reduce(zt_comm *c, const void *send, void *recv, size_t n, zt_dtype t, int root) {
    nccl_ctx *x = X(c);
    in_group(x);
    trace_op(T_REDUCE, send, recv, n, t, root);
    ZT_NCCL(ncclReduce(send, recv, n, nccl_type(t), ncclSum, root, x->comm, x->stream));
}
void n_group_end(zt_comm *c) {
    nccl_ctx *x = X(c);
    if (!x->in_group) zt_panic(__FILE__, __LINE__, "communicator: group_end without group_start");
    x->in_group = 0;
    ZT_NCCL(ncclGroupEnd());
}

zt_comm_event n_record(zt_comm *c) {
    nccl_ctx *x = X(c);
    zt_comm_event e = ++x->issued;
    trace_op(T_RECORD, nullptr, nullptr, 0, ZT_U8, -1); // not the ring slot: a captured event is an edge of the graph
    ZT_CUDA(cudaEventRecord(x->ring[e % kEvents], x->stream));
    return e;
}
// An event's ring slot may have been reused by a later record(); the event now in the slot was recorded
// later on the same comm stream, so waiting for it (or asking it) covers the older one too.
int n_query(zt_comm *c, zt_comm_event e) {
    nccl_ctx *x = X(c);
    if (e == 0) return 1;
    cudaError_t r = cudaEventQuery(x->ring[e % kEvents]);
    if (r == cudaErrorNotReady) return 0;
    ZT_CUDA(r);
    return 1;
}
void n_wait(zt_comm *c, zt_comm_event e) {
    nccl_ctx *x = X(c);
    if (e == 0) return;
    trace_op(T_WAIT, nullptr, nullptr, 0, ZT_U8, -1);
    ZT_CUDA(cudaStreamWaitEvent(zt_cuda_backend_stream(x->be), x->ring[e % kEvents], 0));
}

void n_destroy(zt_comm *c) {
    if (!c) return;
    nccl_ctx *x = X(c);
    cudaStreamSynchronize(x->stream);
    ncclCommDestroy(x->comm);
    cudaEventDestroy(x->ready);
    cudaEventDestroy(x->done);
    for (int i = 0; i < kEvents; i++) cudaEventDestroy(x->ring[i]);
    cudaStreamDestroy(x->stream);
    free(x);
    free(c);
}

zt_comm_i make_i(void) {
    zt_comm_i i;
    memset(&i, 0, sizeof i);
    i.name = "nccl";
    i.mem = ZT_MEM_DEVICE;
    i.destroy = n_destroy;
    i.all_reduce = n_all_reduce;
    i.reduce_scatter = n_reduce_scatter;
    i.all_gather = n_all_gather;
    i.all_to_all = n_all_to_all;
    i.broadcast = n_broadcast;
    i.barrier = n_barrier;
    i.group_start = n_group_start;
    i.send = n_send;
    i.recv = n_recv;
    i.reduce = n_reduce;
    i.group_end = n_group_end;
    i.record = n_record;
    i.query = n_query;
    i.wait = n_wait;
    return i;
}

const zt_comm_i g_i = make_i();

} // namespace

extern "C" zt_comm *zt_comm_nccl_create(zt_backend *be, char *err, size_t errlen) {
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    ncclUniqueId id;
    int bad = rank == 0 ? ncclGetUniqueId(&id) != ncclSuccess : 0;
    if (zt_any_failed(bad, err, errlen)) {
        zt_errf(err, errlen, "comm = \"nccl\": ncclGetUniqueId failed on rank 0");
        return nullptr;
    }
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    nccl_ctx *x = static_cast<nccl_ctx *>(zt_calloc(1, sizeof *x));
    x->be = be;
    ncclResult_t r = ncclCommInitRank(&x->comm, size, id, rank);
    char msg[ZT_ERR_BUF] = "";
    if (r != ncclSuccess) snprintf(msg, sizeof msg, "comm = \"nccl\": ncclCommInitRank: %s", ncclGetErrorString(r));
    if (zt_any_failed(r != ncclSuccess, msg, sizeof msg)) {
        zt_errf(err, errlen, "%s", msg);
        free(x);
        return nullptr;
    }
    ZT_CUDA(cudaStreamCreateWithFlags(&x->stream, cudaStreamNonBlocking));
    ZT_CUDA(cudaEventCreateWithFlags(&x->ready, cudaEventDisableTiming));
    ZT_CUDA(cudaEventCreateWithFlags(&x->done, cudaEventDisableTiming));
    for (int i = 0; i < kEvents; i++) ZT_CUDA(cudaEventCreateWithFlags(&x->ring[i], cudaEventDisableTiming));
    zt_comm *c = static_cast<zt_comm *>(zt_calloc(1, sizeof *c));
    c->i = &g_i;
    c->ctx = x;
    c->rank = rank;
    c->size = size;
    return c;
}
