/* step_graph.c — a training step replayed as one CUDA graph: when (step_graph.h). */
#include "core/optim/step_graph.h"

#include "core/optim/step.h"
#include "util/util.h"

void zt_step_graph_init(zt_step *st) {
    const zt_model *m = st->m;
    zt_zero *z = st->z;
    st->graph = (zt_step_graph){.captured_at = -1};
    st->graph.on = st->c->train.cuda_graph && m->be->i->graph && !z->offload;
    z->no_poll = st->graph.on; /* the buckets' reductions complete at fixed points: the same launches every step */
}

int zt_step_graph_run(zt_step *st, uint64_t key) {
    zt_step_graph *g = &st->graph;
    zt_backend *be = st->m->be;
    if (!g->on) return 0;
    g->start = be->i->graph(be, ZT_GRAPH_STATE);
    if (g->have && key == g->key && st->m->forwards == g->forwards && g->start == g->state) {
        be->i->graph(be, ZT_GRAPH_LAUNCH);
        g->replays++;
        return 1;
    }
    g->key_now = key;
    g->capture = g->capture_next && key == g->last_key;
    be->i->graph(be, g->capture ? ZT_GRAPH_CAPTURE : ZT_GRAPH_TRACE);
    return 0;
}

void zt_step_graph_end(zt_step *st, long step) {
    zt_step_graph *g = &st->graph;
    zt_backend *be = st->m->be;
    if (!g->on) return;
    const uint64_t h = be->i->graph(be, ZT_GRAPH_END), now = be->i->graph(be, ZT_GRAPH_STATE);
    const int fixed = now == g->start; /* the step ended in the state it started in */
    if (g->capture) {
        be->i->graph(be, ZT_GRAPH_LAUNCH); /* the captured work is this step's, whatever comes next */
        g->captured_at = step;
        g->have = h == g->last && g->key_now == g->last_key && fixed;
        g->trace = h;
        g->key = g->key_now;
        g->state = now;
    } else { /* a traced step keeps (or makes again) the graph valid only by making its launches from its state */
        g->have = g->captured_at >= 0 && h == g->trace && g->key_now == g->key && fixed && now == g->state;
    }
    g->forwards = st->m->forwards;
    g->capture_next = !g->have && !g->capture && h == g->last && g->key_now == g->last_key && fixed;
    g->last = h;
    g->last_key = g->key_now;
}
