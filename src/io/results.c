/* results.c — results.json (see results.h), written whole and atomically: a reader (tools/, a
 * scheduler's epilogue) sees the previous file or the complete new one, never a partial one. */
#include "io/results.h"

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* open_memstream */
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

void zt_results_write(const zt_metrics *mx, const zt_config *c, const zt_run_results *r) {
    if (!mx->active) return;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return;
    char when[32], backend[512];
    zt_iso_time(when, sizeof when);
    zt_json_escape(r->backend, backend, sizeof backend);
    fprintf(f, "{\n  \"world_size\": %d,\n  \"nodes\": %d,\n  \"layout\": \"%s\",\n  \"device\": \"%s\",\n"
            "  \"threads_per_rank\": %d,\n  \"blas\": \"%s\",\n  \"zero_stage\": %d,\n  \"zero_reduce\": \"%s\",\n"
            "  \"params\": %zu,\n  \"steps\": %ld,\n  \"duration_s\": %.3f,\n  \"steps_per_s\": %.6g,\n"
            "  \"tokens_per_s\": %.6g,\n  \"sgemm_peak_gflops\": %.6g,\n  \"frac_peak\": %.6g,\n"
            "  \"final_loss\": %.9g,\n  \"best_loss\": %.9g,\n",
            r->world_size, r->n_nodes, r->layout, c->device, r->threads, backend, c->zero.stage, c->zero.reduce,
            r->n_params, r->steps, r->duration_s, r->duration_s > 0 ? r->steps / r->duration_s : 0.0, r->tokens_per_s,
            r->peak_gflops, r->frac_peak, r->final_loss, r->best_loss);
    if (r->val_loss >= 0) fprintf(f, "  \"final_val_loss\": %.9g,\n", r->val_loss);
    if (r->best_val_loss >= 0) fprintf(f, "  \"best_val_loss\": %.9g,\n", r->best_val_loss);
    if (r->val_mlm_acc >= 0) fprintf(f, "  \"final_val_mlm_acc\": %.9g,\n", r->val_mlm_acc);
    /* the batch layout and what the run is, so tools/ can tabulate sessions without parsing config.cfg */
    char sess[2 * ZT_NAME_MAX], name[2 * ZT_NAME_MAX];
    zt_json_escape(c->run.session, sess, sizeof sess);
    /* the run directory's own name: "r1-1" when "r1" was taken */
    const char *base = strrchr(mx->dir, '/') ? strrchr(mx->dir, '/') + 1 : mx->dir;
    zt_json_escape(base, name, sizeof name);
    fprintf(f, "  \"session\": \"%s\",\n  \"name\": \"%s\",\n  \"precision\": \"%s\",\n  \"micro_batch\": %d,\n"
            "  \"global_batch\": %d,\n  \"seq_len\": %d,\n  \"n_layer\": %d,\n  \"n_embd\": %d,\n"
            "  \"tokens\": %.0f,\n",
            sess, name, c->precision, c->train.micro_batch, c->train.global_batch, c->train.seq_len, c->model.n_layer,
            c->model.n_embd, (double)r->steps * c->train.global_batch * c->train.seq_len);
    /* stage 2: communication in flight during backward vs time blocked waiting for it */
    double hidden = r->comm_flight_s > 0 ? 1.0 - r->comm_wait_s / r->comm_flight_s : 0.0;
    fprintf(f, "  \"ckpt_async\": %s,\n  \"ckpt_saves\": %d,\n  \"ckpt_stall_s\": %.4f,\n  \"ckpt_stall_max_s\": %.4f,\n",
            c->checkpoint.async ? "true" : "false", r->ckpt_saves, r->ckpt_stall_s, r->ckpt_stall_max_s);
    fprintf(f, "  \"mem_alloc_bytes\": %.0f,\n  \"grad_bytes_sent\": %.0f,\n", r->mem_alloc_bytes, r->grad_bytes_sent);
    if (r->loss_scale > 0) fprintf(f, "  \"loss_scale\": %.9g,\n  \"skipped_steps\": %ld,\n", r->loss_scale, r->skipped_steps);
    if (r->graph_on)
        fprintf(f, "  \"graph_captured_at\": %ld,\n  \"graph_replays\": %ld,\n", r->graph_captured_at, r->graph_replays);
    fprintf(f, "  \"zero_offload\": \"%s\",\n  \"offload_s\": %.6g,\n  \"gather_bytes\": %.0f,\n  \"gather_wait_s\": %.6g,\n",
            c->zero.offload, r->offload_s, r->gather_bytes, r->gather_wait_s);
    if (r->h2d_bytes >= 0) fprintf(f, "  \"h2d_bytes\": %.0f,\n  \"d2h_bytes\": %.0f,\n", r->h2d_bytes, r->d2h_bytes);
    fprintf(f, "  \"peak_rss_bytes\": %.0f,\n  \"comm_s\": %.6g,\n  \"comm_in_flight_s\": %.6g,\n"
            "  \"comm_exposed_s\": %.6g,\n  \"comm_hidden_frac\": %.4f,\n  \"finished\": \"%s\",\n",
            r->peak_rss_bytes, r->comm_s, r->comm_flight_s, r->comm_wait_s, hidden < 0 ? 0 : hidden, when);
    if (r->data && r->source_samples) { /* the mixture: weights and the realised shares */
        uint64_t total = 0;
        for (int i = 0; i < r->data->n_sources; i++) total += r->source_samples[i];
        fprintf(f, "  \"data\": [");
        for (int i = 0; i < r->data->n_sources; i++) {
            char path[2048];
            zt_json_escape(r->data->src[i].pattern, path, sizeof path);
            fprintf(f, "%s\n    {\"path\": \"%s\", \"files\": %d, \"windows\": %llu, \"weight\": %.9g, \"samples\": %llu, "
                    "\"share\": %.9g}", i ? "," : "", path, r->data->src[i].nf,
                    (unsigned long long)r->data->src[i].n_windows, r->data->src[i].weight,
                    (unsigned long long)r->source_samples[i], total ? (double)r->source_samples[i] / (double)total : 0.0);
        }
        fprintf(f, "\n  ],\n");
    }
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
    fprintf(f, "},\n  \"params_hash\": \"sha256:%s\"\n}\n", r->hash);
    fclose(f);
    char err[ZT_ERR_BUF];
    if (zt_metrics_write(mx, "results.json", text, len, err, sizeof err))
        fprintf(stderr, "ztrain: warning: %s (the run's results.json is not updated)\n", err);
    free(text);
}
