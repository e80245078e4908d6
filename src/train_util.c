/* train_util.c — what the training loop shares with other commands: the model shape of a config,
 * FLOPs per token, the in-run sgemm peak, validation loss, and results.json. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "metrics.h"
#include "train.h"
#include "util.h"
#include "zero.h"

void zt_shape_from_config(const zt_config *c, zt_model_shape *s) {
    s->n_layer = c->model.n_layer;
    s->n_head = c->model.n_head;
    s->n_embd = c->model.n_embd;
    s->vocab_size = c->model.vocab_size;
    s->padded_vocab = zt_config_padded_vocab(c);
    s->block_size = c->model.block_size;
}

double zt_flops_per_token(const zt_model_shape *s, int T) {
    const double C = s->n_embd, L = s->n_layer;
    const double per_layer = 12.0 * C * C + 13.0 * C;   /* qkv, proj, fc, fcproj weights + biases + LNs */
    return 6.0 * (L * per_layer + 2.0 * C) + 6.0 * C * s->padded_vocab + 6.0 * L * C * T;
}

double zt_measure_sgemm_gflops(zt_backend *be, int n) {
    size_t bytes = (size_t)n * n * sizeof(float);
    float *a = be->i->alloc(be, bytes), *b = be->i->alloc(be, bytes), *c = be->i->alloc(be, bytes);
    float *h = zt_malloc(bytes);
    zt_rng r;
    zt_rng_seed(&r, 42);
    for (size_t i = 0; i < (size_t)n * n; i++) h[i] = (float)zt_rng_uniform(&r) - 0.5f;
    be->i->to_device(be, a, h, bytes);
    be->i->to_device(be, b, h, bytes);
    double best = 1e30;
    for (int it = 0; it < 3; it++) {
        be->i->sync(be);
        double t0 = zt_now();
        be->i->matmul(be, c, a, b, n, n, n, 0, 0, 1.0f, 0.0f);
        be->i->sync(be);
        double dt = zt_now() - t0;
        if (it > 0 && dt < best) best = dt;
    }
    be->i->free(be, a);
    be->i->free(be, b);
    be->i->free(be, c);
    free(h);
    return 2.0 * n * (double)n * n / best * 1e-9;
}

double zt_eval_loss(zt_model *m, zt_dataset *val, const zt_config *c, const zt_dist *d) {
    const int B = c->train.micro_batch, T = c->train.seq_len, E = c->eval.batches;
    int32_t *in = zt_malloc((size_t)B * T * sizeof(int32_t)), *tg = zt_malloc((size_t)B * T * sizeof(int32_t));
    int per = (E + d->size - 1) / d->size;
    float *mine = zt_calloc((size_t)per, sizeof(float)), *all = zt_calloc((size_t)per * d->size, sizeof(float));
    for (int k = 0; k < per; k++) {
        int e = k * d->size + d->rank;
        if (e >= E) break;
        for (int i = 0; i < B; i++) {
            uint64_t w = ((uint64_t)e * B + i) % val->n_windows;
            zt_dataset_window(val, w, in + (size_t)i * T, tg + (size_t)i * T);
        }
        mine[k] = zt_model_forward(m, in, tg, B, T);
    }
    MPI_Allgather(mine, per, MPI_FLOAT, all, per, MPI_FLOAT, MPI_COMM_WORLD);
    double sum = 0.0;
    for (int e = 0; e < E; e++) sum += all[(e % d->size) * per + e / d->size];
    free(in);
    free(tg);
    free(mine);
    free(all);
    return sum / E;
}

void zt_write_results(const zt_metrics *mx, const zt_config *c, const zt_dist *d, const struct zt_zero *z,
                          const char *hash, double dur, long steps_done, double final_loss, double best_loss,
                          double val_loss, double tok_s, double peak_gflops, double frac_peak, const char *blas,
                          int threads, size_t nparams) {
    if (!mx->active) return;
    char p[1100];
    zt_metrics_path(mx, "results.json", p, sizeof p);
    FILE *f = fopen(p, "w");
    if (!f) return;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    char layout[96], when[32];
    zt_dist_layout_string(d, layout, sizeof layout);
    zt_iso_time(when, sizeof when);
    fprintf(f, "{\n  \"world_size\": %d,\n  \"nodes\": %d,\n  \"layout\": \"%s\",\n  \"device\": \"%s\",\n"
            "  \"threads_per_rank\": %d,\n  \"blas\": \"%s\",\n  \"zero_stage\": %d,\n  \"zero_reduce\": \"%s\",\n"
            "  \"params\": %zu,\n  \"steps\": %ld,\n  \"duration_s\": %.3f,\n  \"steps_per_s\": %.6g,\n"
            "  \"tokens_per_s\": %.6g,\n  \"sgemm_peak_gflops\": %.6g,\n  \"frac_peak\": %.6g,\n"
            "  \"final_loss\": %.9g,\n  \"best_loss\": %.9g,\n",
            d->size, d->n_nodes, layout, c->device, threads, blas, c->zero.stage, c->zero.reduce, nparams,
            steps_done, dur, dur > 0 ? steps_done / dur : 0.0, tok_s, peak_gflops, frac_peak, final_loss, best_loss);
    if (val_loss >= 0) fprintf(f, "  \"final_val_loss\": %.9g,\n", val_loss);
    /* stage 2: communication in flight during backward vs time blocked waiting for it */
    double hidden = z->comm_flight_s > 0 ? 1.0 - z->comm_wait_s / z->comm_flight_s : 0.0;
    fprintf(f, "  \"peak_rss_bytes\": %ld,\n  \"comm_s\": %.6g,\n  \"comm_in_flight_s\": %.6g,\n"
            "  \"comm_exposed_s\": %.6g,\n  \"comm_hidden_frac\": %.4f,\n  \"finished\": \"%s\",\n",
            ru.ru_maxrss * 1024L, z->comm_s, z->comm_flight_s, z->comm_wait_s, hidden < 0 ? 0 : hidden, when);
    fprintf(f, "  \"slurm\": {");
    static const char *slurm_vars[] = {"SLURM_JOB_ID", "SLURM_JOB_NAME", "SLURM_NNODES", "SLURM_NTASKS",
                                       "SLURM_JOB_NODELIST", "SLURM_ARRAY_TASK_ID", "SLURM_RESTART_COUNT"};
    int first = 1;
    for (size_t i = 0; i < sizeof slurm_vars / sizeof *slurm_vars; i++) {
        const char *v = getenv(slurm_vars[i]);
        if (!v) continue;
        char esc[512];
        zt_json_escape(v, esc, sizeof esc);
        fprintf(f, "%s\"%s\": \"%s\"", first ? "" : ", ", slurm_vars[i], esc);
        first = 0;
    }
    fprintf(f, "},\n  \"params_hash\": \"sha256:%s\"\n}\n", hash);
    fclose(f);
}

