/* train.c — the training loop: the one place that orchestrates model, zero, optim, data and
 * metrics. Rank r runs micro-batches j = m*N + r of each step (DESIGN section 4). */
#include "train.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "cli.h"
#include "comm.h"
#include "cpu/cpu_backend.h"
#include "metrics.h"
#include "optim.h"
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
    for (int it = 0; it < 4; it++) {
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

static void write_results(const zt_metrics *mx, const zt_config *c, const zt_dist *d, const zt_zero *z,
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
    fprintf(f, "  \"peak_rss_bytes\": %ld,\n  \"comm_s\": %.6g,\n  \"finished\": \"%s\",\n", ru.ru_maxrss * 1024L,
            z->comm_s, when);
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

int zt_cmd_train(int argc, char **argv, zt_dist *d) {
    char err[ZT_ERR_BUF] = "";
    zt_cli cli;
    if (zt_cli_parse(&cli, argc, argv, NULL, 0, err, sizeof err)) zt_user_error_all("%s", err);
    zt_config *c = zt_calloc(1, sizeof *c);
    if (zt_cli_load_config(&cli, c, err, sizeof err) || zt_config_validate(c, d->size, err, sizeof err))
        zt_user_error_all("%s", err);
    if (strcmp(c->device, "cpu") != 0)
        zt_user_error_all("device = \"%s\": this build has only the cpu backend (rebuild with `make CUDA=1`)", c->device);
    if (strcmp(c->precision, "fp32") != 0)
        zt_user_error_all("precision = \"%s\": the cpu backend trains in fp32 (set precision = \"fp32\")", c->precision);
    if (!c->data.train[0]) zt_user_error_all("data.train is empty: set it to a token shard (see `ztrain prepare`)");

    int threads = c->train.threads > 0 ? c->train.threads : zt_dist_default_threads(d);
    zt_backend *be = zt_cpu_backend_create(threads);
    zt_comm *comm = zt_comm_mpi_create();
    zt_model_shape s;
    zt_shape_from_config(c, &s);
    const int B = c->train.micro_batch, T = c->train.seq_len, GB = c->train.global_batch;
    const int K = GB / B;

    /* data: every rank opens the files; an error on any rank ends all of them */
    zt_dataset train, val;
    int has_val = c->data.val[0] != 0;
    int bad = zt_dataset_open(&train, c->data.train, T, (uint32_t)s.vocab_size, (uint64_t)c->train.seed, err, sizeof err);
    if (!bad && has_val)
        bad = zt_dataset_open(&val, c->data.val, T, (uint32_t)s.vocab_size, (uint64_t)c->train.seed, err, sizeof err);
    zt_dist_check(d, bad, err, sizeof err);

    zt_metrics mx;
    bad = zt_metrics_open(&mx, d->rank == 0, c->run.root, c->run.session, c->run.name, 0, err, sizeof err);
    zt_dist_check(d, bad, err, sizeof err);

    zt_model m;
    zt_zero z;
    zt_zero_init(&z, c, &m, be, comm, &s);
    {
        float *h = zt_calloc(z.plan.padded, sizeof(float));
        zt_model_init_weights_host(&m.table, &s, h, (float)c->model.init_std, (uint64_t)c->train.seed);
        be->i->to_device(be, m.params, h, z.plan.padded * sizeof(float));
        free(h);
    }
    double peak = zt_measure_sgemm_gflops(be, 1024);
    const double flops_tok = zt_flops_per_token(&s, T);

    char layout[96];
    zt_dist_layout_string(d, layout, sizeof layout);
    if (mx.active) {
        char p[1100];
        zt_metrics_path(&mx, "config.cfg", p, sizeof p);
        FILE *f = fopen(p, "w");
        if (f) { zt_config_print(c, f); fclose(f); }
        const double MB = 1.0 / (1 << 20);
        zt_log("ztrain train: %s, %d thread%s/rank, %s, device %s\n", layout, threads, threads == 1 ? "" : "s",
               zt_cpu_blas_name(), c->device);
        zt_log("model: L%d H%d C%d V%d (padded %d), %zu params; batch %d x %d tokens, %d micro-batch%s/step, ZeRO-%d %s\n",
               s.n_layer, s.n_head, s.n_embd, s.vocab_size, s.padded_vocab, m.table.total, GB, T, K,
               K == 1 ? "" : "es", c->zero.stage, c->zero.reduce);
        zt_log("memory/rank: params %.1f MB, grads %.1f MB, reduced grads %.1f MB, optimizer %.1f MB, "
               "comm %.1f MB, activations %.1f MB\n",
               z.plan.param_bytes * MB, z.plan.grad_bytes * MB, z.plan.acc_bytes * MB, z.plan.optim_bytes * MB,
               z.plan.comm_bytes * MB, z.plan.act_bytes * MB);
        zt_log("data: %s: %llu sequences; run dir %s\n", c->data.train, (unsigned long long)train.n_windows, mx.dir);
    }

    int32_t *in = zt_malloc((size_t)B * T * sizeof(int32_t)), *tg = zt_malloc((size_t)B * T * sizeof(int32_t));
    float *my_losses = zt_calloc((size_t)z.micro_steps, sizeof(float));
    float *all_losses = zt_calloc((size_t)K, sizeof(float));
    zt_adamw_hp hp = {(float)c->train.beta1, (float)c->train.beta2, (float)c->train.eps, (float)c->train.weight_decay};
    double t_start = zt_now(), best = 1e30, last_loss = 0, last_val = -1, tok_s_sum = 0;
    long timed = 0;
    const long steps = c->train.steps;
    for (long step = 0; step < steps; step++) {
        double t0 = zt_now();
        for (int mi = 0; mi < z.micro_steps; mi++) {
            const int j = mi * d->size + d->rank;
            for (int i = 0; i < B; i++) {
                uint64_t sidx = (uint64_t)step * GB + (uint64_t)j * B + i;
                zt_dataset_train_sample(&train, sidx, in + (size_t)i * T, tg + (size_t)i * T);
            }
            my_losses[mi] = zt_model_forward_train(&m, in, tg, B, T, 1.0f / (float)K);
            zt_model_backward(&m, 1.0f / (float)K);
            zt_zero_reduce(&z, &m, mi);
        }
        double norm = zt_zero_grad_norm(&z, &m);
        float clip = zt_clip_factor(norm, c->train.grad_clip);
        double lr = zt_lr_at(c, step);
        zt_zero_update(&z, &m, &hp, step + 1, (float)lr, clip);
        be->i->sync(be);
        /* the step's loss: micro-batch losses summed in global micro-batch order */
        MPI_Gather(my_losses, z.micro_steps, MPI_FLOAT, all_losses, z.micro_steps, MPI_FLOAT, 0, MPI_COMM_WORLD);
        double loss = 0;
        if (d->rank == 0) {
            for (int jj = 0; jj < K; jj++) loss += all_losses[(jj % d->size) * z.micro_steps + jj / d->size];
            loss /= K;
        }
        double dt = zt_now() - t0;
        double tok_s = (double)GB * T / dt;
        if (step > 0) { tok_s_sum += tok_s; timed++; }
        last_loss = loss;
        if (loss < best) best = loss;
        double vl = -1;
        int last = step + 1 == steps;
        if (has_val && ((c->eval.every > 0 && (step + 1) % c->eval.every == 0) || last)) {
            vl = zt_eval_loss(&m, &val, c, d);
            last_val = vl;
        }
        if (mx.active && ((step + 1) % c->train.log_every == 0 || last || vl >= 0)) {
            zt_step_metrics sm = {step + 1, steps, loss, lr, norm, tok_s, flops_tok * tok_s * 1e-9 / d->size,
                                  flops_tok * tok_s * 1e-9 / d->size / peak, dt * 1e3,
                                  (double)(z.plan.param_bytes + z.plan.grad_bytes + z.plan.acc_bytes +
                                           z.plan.optim_bytes + z.plan.comm_bytes + z.plan.act_bytes), vl};
            zt_metrics_step(&mx, &sm);
        }
    }
    double dur = zt_now() - t_start;
    /* fingerprint of the final parameters (every rank holds them all after the all-gather) */
    char hash[65] = "";
    if (d->rank == 0) {
        float *h = zt_malloc(m.table.total * sizeof(float));
        be->i->to_host(be, h, m.params, m.table.total * sizeof(float));
        be->i->sync(be);
        zt_sha256_hex(h, m.table.total * sizeof(float), hash);
        free(h);
    }
    double tok_s = timed ? tok_s_sum / timed : (double)GB * T * steps / dur;
    double frac = flops_tok * tok_s * 1e-9 / d->size / peak;
    write_results(&mx, c, d, &z, hash, dur, steps, last_loss, best, last_val, tok_s, peak, frac, zt_cpu_blas_name(),
                  threads, m.table.total);
    if (mx.active) {
        zt_metrics_note(&mx, "done: %ld steps in %.1f s, final loss %.4f%s, %.0f tokens/s (%.1f%% of sgemm peak %.0f GFLOP/s)\n",
                        steps, dur, last_loss, "", tok_s, 100 * frac, peak);
        if (last_val >= 0) zt_log("val loss %.4f\n", last_val);
        zt_log("params_hash sha256:%s\nresults: %s/results.json\n", hash, mx.dir);
    }
    zt_metrics_close(&mx);
    free(in);
    free(tg);
    free(my_losses);
    free(all_losses);
    zt_zero_free(&z, &m);
    zt_dataset_close(&train);
    if (has_val) zt_dataset_close(&val);
    zt_comm_free(comm);
    zt_cpu_backend_free(be);
    free(c);
    return 0;
}
