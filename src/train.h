/* train.h — the `train` command and what other commands share with it. */
#ifndef ZT_TRAIN_H
#define ZT_TRAIN_H

#include "backend.h"
#include "config.h"
#include "data.h"
#include "dist.h"
#include "model.h"

int zt_cmd_train(int argc, char **argv, zt_dist *d);

/* mean validation loss over cfg->eval.batches micro-batches of val windows in file order,
   distributed round-robin over ranks and combined in micro-batch order (same for any N) */
double zt_eval_loss(zt_model *m, zt_dataset *val, const zt_config *c, const zt_dist *d);

/* best-of-3 GFLOP/s of a (n x n x n) sgemm on this backend: the peak the step is compared to */
double zt_measure_sgemm_gflops(zt_backend *be, int n);

/* model FLOPs per token for forward + backward (README "FLOPs"): 6 * (non-embedding params)
   + 6 * C * Vp (tied LM head) + 6 * L * C * T (causal attention, the half that is computed) */
double zt_flops_per_token(const zt_model_shape *s, int T);

struct zt_metrics;
struct zt_zero;
/* results.json in the run directory (rank 0) */
void zt_write_results(const struct zt_metrics *mx, const zt_config *c, const zt_dist *d, const struct zt_zero *z,
                      const char *hash, double dur, long steps_done, double final_loss, double best_loss,
                      double val_loss, double tok_s, double peak_gflops, double frac_peak, const char *blas,
                      int threads, size_t nparams);

/* model shape from a config */
void zt_shape_from_config(const zt_config *c, zt_model_shape *s);

#endif
