/* step_graph.h — a training step replayed as one CUDA graph (train.cuda_graph; the backend's graph slot,
 * iface/backend.h). A step is eligible on a backend with the slot, a decoder or an encoder (LoRA dropout too: its
 * masks' index is on the device, zt_model.row_micro), no offloaded update, on any number of ranks and at any ZeRO stage (the
 * communicator's operations, stage 3's gathers among them, are captured with the kernels: the backend's host_call
 * slot, cuda/comm_nccl.cu; stage 2 then absorbs buckets at fixed points, zt_zero.no_poll). Its device work (forwards, backwards, reduction, norm, clip, update) is traced: once
 * two steps in a row made the same launches (kernel, shape and argument values, cuda/zt_launch_trace.h) with the
 * same step key (the fp16 loss scale, the fault injection), the next is captured, launched, and
 * traced as it is captured; when that trace is the same again and the backend's host-side state after it is the
 * state it started from, the later steps run as the graph alone: their inputs (tokens, targets, an encoder's
 * ids, each micro-batch's d(loss) scale, which a loss mask's count changes every step: zt_model.row_dscale, the
 * step's scalars) uploaded first, then one graph launch, then the norm and the losses read. Anything between steps that
 * could change what a step launches (an evaluation or a sample: another forward; a checkpoint's copies: the
 * backend's state; a new key) sends the next step back to tracing; a traced step that made the graph's launches
 * from the graph's state lets the steps after it replay again. Bits: those of the steps run as calls. */
#ifndef ZT_STEP_GRAPH_H
#define ZT_STEP_GRAPH_H

#include <stdint.h>

typedef struct zt_step zt_step;

typedef struct zt_step_graph {
    int on;             /* train.cuda_graph and the step eligible */
    uint64_t last, last_key; /* the previous traced step's trace (0: none) and key */
    int capture_next;   /* the last two traces were the same: capture the next step */
    uint64_t start, key_now; /* this step: the backend's state it started in, its key */
    int capture;        /* this step: captured (and traced) */
    int have;           /* the kept graph holds: replay it while the key, the backend's state and the model's
                           forward count are those it was made (or last matched) with */
    uint64_t trace, key, state; /* the kept graph's trace, key and state (it starts and ends in) */
    long forwards;      /* the model's forward count after the last step that was not replayed */
    long captured_at;   /* the step captured last (-1: none) */
    long replays;       /* steps run as the graph alone */
} zt_step_graph;

/* whether the step can ever be a graph (called by zt_step_init) */
void zt_step_graph_init(zt_step *st);
/* before the step's device work, its key given: 1 when the step ran as the graph (launched: the caller issues
   nothing but reads the norm and the losses), else 0, with the trace (and perhaps the capture) begun */
int zt_step_graph_run(zt_step *st, uint64_t key);
/* after the device work of a step zt_step_graph_run returned 0 for: the trace ended (a capture launched) */
void zt_step_graph_end(zt_step *st, long step);

#endif
