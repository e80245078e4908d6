/* results.h — results.json, the summary of a run that rank 0 writes into the run directory
 * (docs/monitoring.md, "The run directory"). The caller gathers the figures; this file only formats them. */
#ifndef ZT_RESULTS_H
#define ZT_RESULTS_H

#include <stddef.h>

#include "io/config.h"
#include "io/data.h"
#include "io/metrics.h"

typedef struct zt_run_results {
    int world_size, n_nodes, threads;
    const char *layout;         /* "4 ranks = 2 nodes x 2" */
    const char *backend;        /* the backend's one-line description (BLAS and kernels) */
    const char *hash;           /* hex sha256 of the final flat parameter buffer */
    size_t n_params;
    long steps;
    double duration_s, tokens_per_s, peak_gflops, frac_peak;
    double final_loss, best_loss, val_loss;      /* val_loss < 0: not evaluated */
    double best_val_loss;                        /* < 0: not evaluated */
    double val_mlm_acc;                          /* encoders: the last evaluation's masked-LM accuracy; < 0: none */
    double comm_s, comm_flight_s, comm_wait_s;   /* gradient communication (stage 2: buckets) */
    int ckpt_saves;
    double ckpt_stall_s, ckpt_stall_max_s;       /* training time lost to checkpoint saves: total, worst */
    double peak_rss_bytes;                       /* the largest over ranks */
    double mem_alloc_bytes;                      /* peak RSS - RSS before the plan's allocations, max over ranks */
    long skipped_steps;                          /* fp16: steps skipped for overflowing gradients (this process) */
    double loss_scale;                           /* fp16: the final loss scale; 0 otherwise */
    int graph_on;                                /* train.cuda_graph took: the step could be a graph */
    long graph_captured_at, graph_replays;       /* the step captured last (-1: none), steps run as the graph */
    double grad_bytes_sent;                      /* ordered: gradient bytes rank 0 sent to other ranks (2 per value
                                                    in bf16/fp16, 4 in fp32) */
    double offload_s;                            /* zero.offload: rank 0's time in the host update, copies included */
    double gather_bytes, gather_wait_s;          /* stage 3: parameter bytes rank 0 received in gathers; time it
                                                    waited for them (exposed) */
    double h2d_bytes, d2h_bytes;                 /* devsim: rank 0's host <-> device copies; < 0 elsewhere */
    const zt_dataset *data;                      /* the training data: its sources ("data" in results.json) */
    const uint64_t *source_samples;              /* per source: samples drawn in steps [0, steps) */
} zt_run_results;

/* writes <run dir>/results.json (rank 0; a no-op elsewhere) */
void zt_results_write(const zt_metrics *mx, const zt_config *c, const zt_run_results *r);

#endif
