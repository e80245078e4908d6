// cuda_backend_graph.cu — the graph slot (iface/backend.h): a training step's device work traced, recorded once
// and replayed as a CUDA graph (core/optim/step_graph.c decides when). The trace is zt_launch_trace.h's hash of
// every launch, copy, memset and cuBLASLt product the slots make; a capture is cudaStreamBeginCapture on the
// backend's one stream (under the host execution harness: hx::capture_begin, which records the launches and the
// backend's copies and memsets as closures). While a capture is under way nothing may wait for the device or
// allocate: to_host, to_device, sync, alloc and free end the program with a message (cuda_backend_core.cu). Host
// calls (the host_call slot: the devsim communicator's operations) are recorded with the capture under the harness.
#include "cuda_backend_internal.h"

#include <memory>
#include <vector>

namespace ZT_CU_NS {
namespace cub {

struct GraphState {
#ifdef ZT_HOSTEXEC
    hx::Recorded rec;
#else
    cudaGraphExec_t exec = nullptr;
#endif
};

namespace {
template <typename T> uint64_t mixv(uint64_t h, T v) { return zt_fnv(h, &v, sizeof v); }

// what decides the launches the next slots make, field by field (no padding bytes)
uint64_t state_hash(const cu_ctx *x) {
    uint64_t h = mixv(zt_fnv_seed, (int)x->pend.kind);
    h = mixv(h, x->prec);
    h = mixv(h, x->mir.n);
    for (int i = 0; i < x->mir.n; i++) {
        h = mixv(h, x->mir.e[i].dst);
        h = mixv(h, x->mir.e[i].src);
        h = mixv(h, x->mir.e[i].n);
        h = mixv(h, x->mir.e[i].lazy);
    }
    for (int i = 0; i < kRing; i++) {
        h = mixv(h, x->ring[i]);
        h = mixv(h, x->ring_cap[i]);
    }
    h = mixv(h, x->ring_next);
    h = mixv(h, x->scratch);
    h = mixv(h, x->scratch_bytes);
    h = mixv(h, x->tickets);
    h = mixv(h, x->adamw_n);
    h = mixv(h, x->ntg);
    for (int i = 0; i < x->ntg; i++) {
        h = mixv(h, x->tg[i].x);
        h = mixv(h, x->tg[i].n);
        h = mixv(h, x->tg[i].w);
    }
    return h;
}
} // namespace

uint64_t b_graph(zt_backend *be, int op) {
    cu_ctx *x = ctx_of(be);
    if (!x->graph) x->graph = new GraphState();
    GraphState *g = static_cast<GraphState *>(x->graph);
    switch (op) {
    case ZT_GRAPH_TRACE:
    case ZT_GRAPH_CAPTURE:
        if (zt_trace_sink) zt_panic(__FILE__, __LINE__, "graph: a trace is already under way");
        x->trace = zt_fnv_seed;
        zt_trace_sink = &x->trace;
        if (op == ZT_GRAPH_CAPTURE) {
            flush(be); // nothing kept from before belongs to the graph
#ifdef ZT_HOSTEXEC
            hx::capture_begin();
#else
            ZT_CUDA(cudaStreamBeginCapture(x->stream, cudaStreamCaptureModeThreadLocal));
#endif
            x->capturing = 1;
        }
        return 0;
    case ZT_GRAPH_END:
        if (!zt_trace_sink) zt_panic(__FILE__, __LINE__, "graph: END without TRACE or CAPTURE");
        flush(be); // the kept op is the step's: traced (and captured) with it
        if (x->capturing) {
            x->capturing = 0;
#ifdef ZT_HOSTEXEC
            g->rec = hx::capture_end();
#else
            cudaGraph_t graph = nullptr;
            ZT_CUDA(cudaStreamEndCapture(x->stream, &graph));
            if (g->exec) ZT_CUDA(cudaGraphExecDestroy(g->exec));
            ZT_CUDA(cudaGraphInstantiate(&g->exec, graph, 0));
            ZT_CUDA(cudaGraphDestroy(graph));
#endif
        }
        zt_trace_sink = nullptr;
        return x->trace;
    case ZT_GRAPH_LAUNCH:
        flush(be);
#ifdef ZT_HOSTEXEC
        for (auto &w : g->rec) w();
#else
        if (!g->exec) zt_panic(__FILE__, __LINE__, "graph: LAUNCH without a capture");
        ZT_CUDA(cudaGraphLaunch(g->exec, x->stream));
#endif
        return 0;
    case ZT_GRAPH_STATE:
        // at a step's boundary: with nothing kept and no mirror, no word buffer holds live words, so the next is
        // the first (a step that takes an odd number of them then starts each time from the same state)
        flush(be);
        if (x->mir.n == 0 && x->pend.kind == D_NONE) x->ring_next = 0;
        return state_hash(x);
    default:
        return 0;
    }
}

void b_host_call(zt_backend *be, void (*fn)(void *), const void *arg, size_t argbytes) {
    cu_ctx *x = ctx_of(be);
    zt_trace_bytes(&fn, sizeof fn);
    zt_trace_bytes(arg, argbytes);
    if (!x->capturing) {
        b_sync(be);
        fn(const_cast<void *>(arg));
        return;
    }
#ifdef ZT_HOSTEXEC
    flush(be); // what was issued before comes first in the capture
    auto kept = std::make_shared<std::vector<unsigned char>>(static_cast<const unsigned char *>(arg),
                                                             static_cast<const unsigned char *>(arg) + argbytes);
    hx::run_or_record([fn, kept]() { fn(kept->data()); });
#else
    zt_panic(__FILE__, __LINE__, "a host call during a step graph's capture (on a GPU only NCCL's operations are "
                                 "captured)");
#endif
}

void graph_free(cu_ctx *x) {
    GraphState *g = static_cast<GraphState *>(x->graph);
    if (!g) return;
#ifndef ZT_HOSTEXEC
    if (g->exec) cudaGraphExecDestroy(g->exec);
#endif
    delete g;
    x->graph = nullptr;
}

} // namespace cub
} // namespace ZT_CU_NS
