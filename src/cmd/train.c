/* train.c — the `train` command: the one place that orchestrates model, zero, optim, data, ckpt
 * and metrics. Rank r runs micro-batches j = m*N + r of each step (docs/design.md section 4).
 *
 * Stopping early always leaves a checkpoint: --stop-after N (N more steps), --time-limit
 * HH:MM:SS (stop while there is still time to save), SIGUSR1/SIGTERM on any rank (finish the
 * step, save, exit with checkpoint.signal_exit_code). Ranks agree on stopping with one
 * all-reduce per step, so a signal to one rank stops them all at the same step. Every phase answers
 * a signal within a bounded time: set-up (data loading, resume) is followed by an agreement before
 * the first step (a signal there stops the run with nothing new to save); an evaluation checks after
 * each forward pass, collectively (zt_eval_loss), and is abandoned; a sample during training is
 * skipped once a signal is pending (one sample is sample.tokens one-row forwards); a checkpoint
 * write is bounded by the disk and the step's agreement follows it.
 *
 * Divergence: a non-finite loss or gradient norm (every rank knows both: the losses are all-gathered
 * and the norm is global) stops the run at that step with one line naming it and the last checkpoint,
 * exit 2 (ZT_EXIT_USER: the config needs a change, typically train.lr; resuming would diverge again).
 * Nothing of the diverged state is written: no checkpoint (ckpt_save.c also refuses any state holding
 * NaN/Inf), no metrics line, no results.json; a save in flight (an earlier, checked state) is
 * published, and pruning only ever runs after a finite save, so the last finite checkpoint stays.
 *
 * --resume auto: when the run's checkpoint directory holds step files but none is usable (all
 * damaged), it refuses with one line naming them (exit 2) instead of starting over from step 0 and
 * overwriting them; starting afresh is an explicit choice (move them away, or another run.name). On a
 * finished run (checkpoint step >= train.steps) it says so and exits 0 without touching any file:
 * a re-submitted job script has nothing left to do, which is not a failure (raising train.steps
 * continues it). */
#include "cmd/train.h"

#include <malloc.h>
#include <math.h>
#include <signal.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cli.h"
#include "core/dist/backend_factory.h"
#include "core/diag/backend_prof.h"
#include "core/model/eval.h"
#include "core/diag/gpu_monitor.h"
#include "core/diag/mem_check.h"
#include "core/model/model_load.h"
#include "util/memstat.h"
#include "core/optim/optim.h"
#include "core/model/sampler.h"
#include "core/optim/step.h"
#include "devsim/devsim.h"
#include "core/dist/zero.h"
#include "io/ckpt.h"
#include "io/data.h"
#include "io/metrics.h"
#include "cmd/train_data.h"
#include "io/results.h"
#include "util/util.h"

static volatile sig_atomic_t g_signal = 0;
static void on_signal(int sig) { g_signal = sig; }

typedef struct trainer {
    zt_config *c;
    zt_dist *d;
    zt_backend *be;
    zt_comm *comm;
    zt_model_shape s;
    zt_model m;
    zt_zero z;
    zt_train_data data;       /* training and validation sets, the step's batch and count (train_data.h) */
    int threads;
    zt_metrics mx;
    char ckdir[ZT_PATH_MAX + 64];
    char backend[256];        /* the backend's description */
    zt_ckpt_saver *saver;     /* checkpoint writes: staging and the background writer (checkpoint.async) */
    char auto_note[256];      /* micro_batch auto: what was chosen, logged once the run directory exists */
    size_t rss0;              /* resident bytes just before the plan's allocations */
    int ck_saves;
    double ck_stall_sum, ck_stall_max, ck_write_s, ck_exit_wait_s; /* training time lost to saves; the last save's duration */
    double peak, flops_tok;
    zt_step st;               /* the training step (core/optim/step.h): batches, fp16 loss scaler */
    uint64_t base_hash;       /* LoRA: fingerprint of the frozen base (lora.base) */
} trainer;

/* "HH:MM:SS", "MM:SS" or seconds -> seconds, or -1 */
static double parse_duration(const char *s) {
    double parts[3] = {0, 0, 0};
    int n = 0;
    const char *p = s;
    while (n < 3) {
        char *end;
        double v = strtod(p, &end);
        if (end == p || v < 0) return -1;
        parts[n++] = v;
        if (*end == 0) break;
        if (*end != ':') return -1;
        p = end + 1;
    }
    double t = 0;
    for (int i = 0; i < n; i++) t = t * 60 + parts[i];
    return t;
}

/* LoRA: the frozen base from lora.base (rounded to the working precision) and the seeded adapters */
static void init_lora(trainer *t) {
    char err[ZT_ERR_BUF] = "";
    zt_check_all(zt_lora_base_load(&t->m, t->c, &t->base_hash, err, sizeof err), err, sizeof err);
    const int prec = zt_config_prec(t->c);
    if (prec) t->be->i->round_to(t->be, t->m.params, t->m.padded, prec);
    zt_lora_model *lp = t->m.lora;
    float *h = zt_malloc(lp->table.total * sizeof(float));
    zt_lora_init_host(&lp->table, (uint64_t)t->c->train.seed, h);
    t->be->i->to_device(t->be, lp->params, h, lp->table.total * sizeof(float));
    t->be->i->sync(t->be);
    free(h);
    lp->seed = (uint64_t)t->c->train.seed;
}

static void init_weights(trainer *t) {
    if (t->m.lora) {
        init_lora(t);
        return;
    }
    /* every rank computes the same seeded init; staged through a small host buffer per tensor
       piece so no second full-size copy of the parameters is ever resident. It goes to the flat
       parameters, or (2-byte parameters) this rank's range of it to the master weights */
    size_t base, range;
    float *dst = zt_zero_init_target(&t->z, &t->m, &base, &range);
    float *h = zt_malloc(ZT_INIT_BLOCK * sizeof(float));
    for (int i = 0; i < t->m.table.n; i++) {
        const zt_tensor_info *ti = &t->m.table.t[i];
        for (size_t off = 0; off < ti->numel; off += ZT_INIT_BLOCK) {
            const size_t a = ti->offset + off;
            if (a >= base + range) continue;
            size_t n = zt_model_init_block_host(&t->m.table, &t->s, i, off / ZT_INIT_BLOCK, h,
                                                (float)t->c->model.init_std, (uint64_t)t->c->train.seed);
            const size_t lo = a > base ? a : base, hi = a + n < base + range ? a + n : base + range;
            if (lo < hi) t->be->i->to_device(t->be, dst + (lo - base), h + (lo - a), (hi - lo) * sizeof(float));
        }
    }
    t->be->i->sync(t->be);
    free(h);
}

/* starts the checkpoint of `step` (finishing one still in flight first); synchronous saves end
   here, asynchronous ones once every rank's background write is done (finish_save) */
static double finish_save(trainer *t);

static void save(trainer *t, long step) {
    char err[ZT_ERR_BUF], path[ZT_PATH_MAX + 128], text[65536];
    if (zt_ckpt_saver_pending(t->saver)) finish_save(t);
    zt_config_to_string(t->c, text, sizeof text);
    zt_ckpt_meta meta = {0};
    meta.step = step;
    meta.samples_seen = (uint64_t)step * t->c->train.global_batch;
    meta.tokens_seen = meta.samples_seen * (uint64_t)t->c->train.seq_len;
    meta.world_size = t->d->size;
    meta.loss_scale = t->st.scaler.active ? t->st.scaler.scale : 1.0f;
    meta.loss_scale_good = t->st.scaler.active ? t->st.scaler.good : 0;
    meta.seed = (uint64_t)t->c->train.seed;
    meta.lora_base_hash = t->base_hash;
    meta.config_text = text;
    meta.has_stream = t->data.train.stream != NULL; /* where the stream is at the next step's first sample */
    if (meta.has_stream && zt_stream_position(t->data.train.stream, meta.samples_seen, &meta.stream, err, sizeof err))
        zt_user_error_all("%s", err);
    const zt_ckpt_view v = zt_zero_ckpt_view(&t->z, &t->m);
    if (zt_ckpt_saver_begin(t->saver, t->ckdir, t->c->checkpoint.keep, &meta, &v, path, sizeof path, err, sizeof err))
        zt_user_error_all("%s", err);
    t->ck_saves++;
    double stage_s, write_s, total_s;
    zt_ckpt_saver_times(t->saver, &stage_s, &write_s, &total_s);
    if (zt_ckpt_saver_pending(t->saver)) {
        zt_metrics_note(&t->mx, "checkpoint %s: staged in %.2f s, writing in the background\n", path, stage_s);
    } else {
        t->ck_write_s = total_s;
        zt_metrics_note(&t->mx, "checkpoint %s (%.2f s)\n", path, total_s);
    }
}

/* publishes the asynchronous checkpoint in flight (collective); returns the seconds it waited */
static double finish_save(trainer *t) {
    char err[ZT_ERR_BUF], path[ZT_PATH_MAX + 128];
    if (!zt_ckpt_saver_pending(t->saver)) return 0;
    double t0 = zt_now();
    if (zt_ckpt_saver_finish(t->saver, path, sizeof path, err, sizeof err)) zt_user_error_all("%s", err);
    double waited = zt_now() - t0, stage_s, write_s, total_s;
    zt_ckpt_saver_times(t->saver, &stage_s, &write_s, &total_s);
    t->ck_write_s = total_s;
    zt_metrics_note(&t->mx, "checkpoint %s written in the background (%.2f s; training waited %.2f s for it)\n",
                    path, write_s, waited);
    return waited;
}

/* returns the step to start from, or -1 when the run is already finished (nothing changed) */
static long resume(trainer *t, const char *what) {
    char path[ZT_PATH_MAX + 128] = "", err[ZT_ERR_BUF] = "", skipped[512] = "";
    int found = 0; /* 0: path, 1: no checkpoint yet, 2: only damaged ones (err) */
    /* every rank must use the same file: rank 0 looks and decides */
    if (strcmp(what, "auto") == 0) {
        if (t->d->rank == 0)
            found = zt_ckpt_find_resume(t->ckdir, path, sizeof path, skipped, sizeof skipped, err, sizeof err);
    } else snprintf(path, sizeof path, "%s", what);
    MPI_Bcast(&found, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Bcast(path, sizeof path, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (found == 2) zt_user_error_all("%s", err); /* rank 0's line */
    if (found == 1) {
        zt_metrics_note(&t->mx, "resume auto: no checkpoint in %s, starting from step 0\n", t->ckdir);
        zt_metrics_truncate(&t->mx, 0); /* lines of a run that died before its first checkpoint */
        return 0;
    }
    if (skipped[0]) zt_metrics_note(&t->mx, "resume auto: skipped damaged newer checkpoints: %s\n", skipped);
    zt_ckpt_meta meta = {0};
    int bad = zt_ckpt_read_meta(path, &meta, err, sizeof err);
    char changes[4096] = "";
    if (!bad) bad = zt_ckpt_check_resume(meta.config_text, t->c, changes, sizeof changes, err, sizeof err);
    zt_check_all(bad, err, sizeof err);
    const long saved = meta.step;
    zt_ckpt_meta_free(&meta);
    if (saved >= t->c->train.steps) { /* the same file, so the same answer, on every rank */
        zt_metrics_note(&t->mx, "the run is already finished: resumed from %s at step %ld and train.steps = %ld: "
                        "nothing to do, no file changed (raise train.steps to train further)\n", path, saved,
                        t->c->train.steps);
        return -1;
    }
    zt_ckpt_view v = zt_zero_load_view(&t->z, &t->m); /* the parameter all-gather overlaps the moment reads */
    v.buffered_reads = !t->c->checkpoint.direct_io;
    v.read_stage = zt_ckpt_saver_stage(t->saver, &v.read_stage_bytes); /* no memory beyond the plan's */
    if (zt_ckpt_load(path, &meta, &v, err, sizeof err)) zt_user_error_all("%s", err);
    if (meta.lora_base_hash != t->base_hash)
        zt_user_error_all("%s: %s (fingerprint %016llx) than this run's lora.base = \"%s\" (%016llx): resume with the "
                          "base it was trained on", path, t->base_hash ? "its adapters were trained on another base"
                          : "not a LoRA checkpoint of this base: it has another fingerprint",
                          (unsigned long long)meta.lora_base_hash, t->c->lora.base, (unsigned long long)t->base_hash);
    zt_zero_after_load(&t->z, &t->m);
    if (t->data.train.stream) {
        if (!meta.has_stream)
            zt_user_error_all("%s: saved by a run that did not stream its data (data.stream = false): resume it with "
                              "the same data settings", path);
        char serr[ZT_ERR_BUF] = "";
        zt_check_all(zt_stream_restore(t->data.train.stream, &meta.stream, serr, sizeof serr), serr, sizeof serr);
    }
    if (t->st.scaler.active && meta.loss_scale > 1.0f) { /* the scaler's state goes on (an fp32/bf16 file has scale 1) */
        t->st.scaler.scale = meta.loss_scale;
        t->st.scaler.good = meta.loss_scale_good;
    }
    zt_metrics_note(&t->mx, "resumed from %s at step %ld (saved by %d rank%s)%s%s\n", path, meta.step,
                    meta.world_size, meta.world_size == 1 ? "" : "s", changes[0] ? "; changed: " : "", changes);
    long step = meta.step;
    zt_ckpt_meta_free(&meta);
    zt_metrics_truncate(&t->mx, step);
    return step;
}

/* "NaN", "+Inf", "-Inf" or the number */
static const char *num_text(double x, char *buf, size_t n) {
    if (isnan(x)) return "NaN";
    if (isinf(x)) return x > 0 ? "+Inf" : "-Inf";
    snprintf(buf, n, "%.6g", x);
    return buf;
}

/* training produced a NaN/Inf loss or gradient norm at `step`: ends every rank with exit 2 (see the
   file comment); every rank calls it at the same step (both values are the same on every rank) */
static void diverged(trainer *t, long step, double loss, double norm) {
    char lb[32], nb[32];
    const char *ls = num_text(loss, lb, sizeof lb), *ns = num_text(norm, nb, sizeof nb);
    if (zt_ckpt_saver_pending(t->saver)) finish_save(t); /* an earlier state, checked finite when it began */
    char last[ZT_PATH_MAX + 128] = "";
    if (t->d->rank == 0 && zt_ckpt_find_latest(t->ckdir, last, sizeof last)) last[0] = 0;
    if (last[0])
        zt_user_error_all("training diverged at step %ld: loss %s, grad norm %s (not finite); stopped without saving "
                          "it: the last checkpoint, %s, is kept (lower train.lr or raise train.warmup_steps, then "
                          "start from it with --init-from)", step, ls, ns, last);
    zt_user_error_all("training diverged at step %ld: loss %s, grad norm %s (not finite); stopped without saving it "
                      "(no checkpoint was written before; lower train.lr or raise train.warmup_steps)", step, ls, ns);
}

static void setup(trainer *t, int resuming) {
    zt_config *c = t->c;
    zt_dist *d = t->d;
    char err[ZT_ERR_BUF] = "";
    t->threads = c->train.threads > 0 ? c->train.threads : zt_dist_default_threads(d);
    if (!(t->be = zt_backend_create(c->device, t->threads, err, sizeof err))) zt_user_error_all("%s", err);
    if (!(t->comm = zt_comm_create(c->comm, t->be, err, sizeof err))) zt_user_error_all("%s", err);
    if (c->lora.enabled && c->lora.dropout > 0 && !t->be->i->dropout)
        zt_user_error_all("lora.dropout = %g: the %s backend has no dropout op; set lora.dropout = 0", c->lora.dropout,
                          c->device);
    if (c->lora.enabled && strcmp(c->lora.quant, "none") != 0 && !t->be->i->dequant)
        zt_user_error_all("lora.quant = \"%s\": the %s backend has no dequant op; set lora.quant = \"none\"",
                          c->lora.quant, c->device);
    zt_backend_describe(t->be, t->backend, sizeof t->backend);
    zt_model_shape_from_config(c, &t->s);
    if (t->s.encoder && !(t->be->i->attention_bidir_fwd && t->be->i->gelu_erf_fwd && t->be->i->bias_add &&
                          t->be->i->argmax_rows))
        zt_user_error_all("model.family = %s: the %s backend lacks the encoder ops", c->model.family, c->device);
    const int T = c->train.seq_len;
    /* data: every rank opens the files; an error on any rank ends all of them */
    zt_check_all(zt_train_data_open(&t->data, c, &t->s, d->rank, err, sizeof err), err, sizeof err);
    /* before anything large is allocated, and before the run directory is made */
    /* train.micro_batch = "auto": the largest that fits, the same on every rank (the tightest node's) */
    int bad_auto = zt_mem_auto_micro_batch(c, &t->s, d->size, d->local_size, t->auto_note, sizeof t->auto_note, err,
                                           sizeof err);
    zt_check_all(bad_auto, err, sizeof err);
    MPI_Allreduce(MPI_IN_PLACE, &c->train.micro_batch, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    zt_mem_check(c, &t->s, d);
    int bad = zt_metrics_open(&t->mx, d->rank == 0, c->run.root, c->run.session, c->run.name, resuming, err, sizeof err);
    zt_check_all(bad, err, sizeof err);
    /* rank 0 chose the run directory (with a suffix if the name was taken): everyone uses it */
    MPI_Bcast(t->mx.dir, sizeof t->mx.dir, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (c->checkpoint.dir[0]) snprintf(t->ckdir, sizeof t->ckdir, "%s", c->checkpoint.dir);
    else snprintf(t->ckdir, sizeof t->ckdir, "%.*s/checkpoints", ZT_PATH_MAX, t->mx.dir);
    /* the sgemm probe first: its buffers (and BLAS's own) are not part of the plan. ZTRAIN_TEST_SGEMM_N (64..2048,
       the test suite's lib.sh: 256) measures it on smaller matrices, which start in milliseconds instead of the
       0.3-0.4 s a 2048 probe takes on 2 cores; the peak is then lower than the machine's and fractions of it higher */
    const char *probe_env = getenv("ZTRAIN_TEST_SGEMM_N");
    const int probe_n = probe_env && atoi(probe_env) >= 64 && atoi(probe_env) <= 2048 ? atoi(probe_env) : 2048;
    t->peak = zt_backend_measure_sgemm(t->be, probe_n);
    /* large blocks always from mmap and back to the system when freed (glibc otherwise raises its mmap
       threshold after the first free and keeps freed blocks resident), so resident memory follows the
       live allocations and the plan can be checked against it */
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
    t->rss0 = zt_mem_rss(); /* what the plan's allocations add is measured from here */
    zt_zero_init(&t->z, c, &t->m, t->be, t->comm, &t->s);
    init_weights(t);
    zt_zero_master_init(&t->z, &t->m); /* bf16/fp16: master weights, rounded working copy */
    zt_step_init(&t->st, &t->m, &t->z, c, zt_train_data_batch, &t->data);
    t->st.count = zt_train_data_count_fn(&t->data);
    const char *overflow = getenv("ZTRAIN_TEST_OVERFLOW_STEP"); /* fault injection (tests): step.h */
    t->st.overflow_step = overflow ? atol(overflow) : -1;
    const zt_ckpt_view v = zt_zero_ckpt_view(&t->z, &t->m);
    t->saver = zt_ckpt_saver_create(&v, c->checkpoint.async, c->checkpoint.direct_io);
    t->st.saver = t->saver;
    t->flops_tok = zt_model_train_flops_per_token(&t->s, T, t->m.lora ? t->m.lora->table.total : 0);
}

/* frees what setup() made (and the sampler), in reverse; writes nothing */
static void teardown(trainer *t, zt_train_sample *ts) {
    zt_ckpt_saver_destroy(t->saver);
    t->saver = NULL;
    zt_step_free(&t->st);
    zt_metrics_close(&t->mx);
    zt_train_sample_free(ts);
    zt_zero_free(&t->z, &t->m);
    zt_train_data_close(&t->data);
    zt_comm_destroy(t->comm);
    zt_backend_destroy(t->be);
}

static void announce(trainer *t) {
    zt_config *c = t->c;
    if (!t->mx.active) return;
    char layout[96];
    zt_dist_layout_string(t->d, layout, sizeof layout);
    const zt_zero_plan *pl = &t->z.plan;
    const double MB = 1.0 / (1 << 20);
    const int K = c->train.global_batch / c->train.micro_batch;
    zt_log("ztrain train: %s, backend %s, comm %s\n", layout, t->backend, t->comm->i->name);
    zt_log("model: L%d H%d C%d V%d (padded %d), %zu params; batch %d x %d tokens, %d micro-batch%s/step, ZeRO-%d %s\n",
           t->s.n_layer, t->s.n_head, t->s.n_embd, t->s.vocab_size, t->s.padded_vocab, t->m.table.total,
           c->train.global_batch, c->train.seq_len, K, K == 1 ? "" : "es", c->zero.stage, c->zero.reduce);
    zt_zero_log_memory(&t->z, c);
    if (t->m.lora) {
        const zt_lora_model *lp = t->m.lora;
        zt_config full = *c;
        full.lora.enabled = 0;
        zt_zero_plan fp;
        zt_zero_plan_memory(&full, &t->s, t->d->size, &fp);
        zt_log("LoRA: r %d, alpha %g (scale %g%s), dropout %g, targets %s: %zu trainable params (%.2f%% of %zu, frozen "
               "base %s); memory/rank %.1f MB vs %.1f MB for full fine-tuning\n", lp->cfg.rank, lp->cfg.alpha, lp->scale,
               lp->cfg.rslora ? ", rank-stabilised" : "", lp->cfg.dropout, c->lora.targets, lp->table.total,
               100.0 * lp->table.total / t->m.table.total, t->m.table.total, c->lora.base, zt_zero_plan_total(pl) * MB,
               zt_zero_plan_total(&fp) * MB);
        size_t f32 = 0, qb = 0, qp = 0;
        const size_t bb = zt_lora_base_bytes(&t->s, lp->cfg.quant, &f32, &qb, &qp);
        if (lp->cfg.quant >= 0)
            zt_log("QLoRA: base %.1f MB = %.3f bits per base param (%s: %zu linear-weight params in %.1f MB = %.3f bits "
                   "each; %zu params fp32); fp32 base %.1f MB\n", bb * MB, 8.0 * bb / t->m.table.total, c->lora.quant, qp,
                   qb * MB, 8.0 * qb / qp, f32, t->m.table.total * 4.0 * MB);
    }
    if (pl->master_bytes)
        zt_log("precision %s: values rounded to %s in float32 buffers (fp32 arithmetic)%s; fp32 master weights %.1f MB%s\n",
               c->precision, c->precision, t->m.params16 ? ", working parameters in 2-byte words" : "",
               pl->master_bytes * MB, t->st.scaler.active ? "; dynamic loss scaling" : "");
    if (t->z.wire16)
        zt_log("gradient exchange: %s words, 2 bytes per value (exact: the gradients hold %s values), summed in fp32%s\n",
               c->precision, c->precision,
               t->z.grad16 ? "; the micro-batch gradient is those words (backward packs each layer as it finishes)" : "");
    zt_log("data: %s: %llu sequences; run dir %s\n", c->data.train, (unsigned long long)t->data.train.n_windows, t->mx.dir);
    if (t->data.has_val && zt_eval_count(c, &t->data.val) < zt_eval_sequences(c))
        zt_log("note: %d validation sequences asked for (eval.sequences) but %s has only %d windows of %d tokens: "
               "scoring those %d\n", zt_eval_sequences(c), c->data.val, zt_eval_count(c, &t->data.val), c->train.seq_len,
               zt_eval_count(c, &t->data.val));
}

/* the command line: --resume, --stop-after, --time-limit, --init-from (errors end every rank) */
typedef struct train_opts {
    const char *resume;    /* "auto" or a checkpoint; NULL: a new run */
    const char *init_from; /* a checkpoint whose weights start a new run; NULL: seeded init */
    long stop_after;       /* steps; -1: no limit */
    double time_limit;     /* seconds; -1: no limit */
} train_opts;

static train_opts parse_opts(int argc, char **argv, zt_cli *cli) {
    char err[ZT_ERR_BUF] = "";
    const char *stop_after_s = NULL, *time_limit_s = NULL;
    train_opts o = {.stop_after = -1, .time_limit = -1};
    zt_cli_opt opts[] = {{"--resume", 1, &o.resume}, {"--stop-after", 1, &stop_after_s},
                         {"--time-limit", 1, &time_limit_s}, {"--init-from", 1, &o.init_from}};
    if (zt_cli_parse(cli, argc, argv, opts, 4, err, sizeof err)) zt_user_error_all("%s", err);
    if (o.init_from && o.resume)
        zt_user_error_all("--init-from and --resume exclude each other (--init-from starts a new run from a "
                          "checkpoint's weights; --resume continues one)");
    if (stop_after_s) {
        char *end;
        o.stop_after = strtol(stop_after_s, &end, 10);
        if (*end || o.stop_after < 1) zt_user_error_all("--stop-after %s: expected a number of steps >= 1", stop_after_s);
    }
    if (time_limit_s && (o.time_limit = parse_duration(time_limit_s)) <= 0)
        zt_user_error_all("--time-limit %s: expected HH:MM:SS (or MM:SS, or seconds) > 0", time_limit_s);
    return o;
}

/* the config from the command line, validated; with lora.enabled the model's shape is lora.base's */
static zt_config *load_config(zt_cli *cli, const train_opts *o, const zt_dist *d) {
    char err[ZT_ERR_BUF] = "";
    zt_config *c = zt_calloc(1, sizeof *c);
    if (zt_cli_load_config(cli, c, err, sizeof err) || zt_config_validate(c, d->size, err, sizeof err))
        zt_user_error_all("%s", err);
    if (!c->data.train[0]) zt_user_error_all("data.train is empty: set it to a token shard (see `ztrain prepare`)");
    if (!c->lora.enabled) return c;
    if (o->init_from)
        zt_user_error_all("--init-from with lora.enabled: the frozen base is lora.base (%s); drop --init-from",
                          c->lora.base);
    if (c->sample.every > 0)
        zt_user_error_all("sample.every = %ld with lora.enabled: sampling during LoRA training is not supported; set "
                          "sample.every = 0 and sample from a checkpoint (`ztrain sample` merges the adapters)",
                          c->sample.every);
    zt_check_all(zt_lora_base_shape(c, err, sizeof err), err, sizeof err);
    if (zt_config_validate(c, d->size, err, sizeof err))
        zt_user_error_all("lora.base = \"%s\" sets the model: %s", c->lora.base, err);
    return c;
}

/* --init-from: a checkpoint's weights (through the master weights' range with 2-byte parameters), a fresh optimizer */
static void init_from(trainer *t, const char *path) {
    char err[ZT_ERR_BUF] = "";
    zt_ckpt_meta im;
    zt_ckpt_view v = zt_zero_init_view(&t->z, &t->m);
    v.buffered_reads = !t->c->checkpoint.direct_io;
    v.read_stage = zt_ckpt_saver_stage(t->saver, &v.read_stage_bytes);
    if (zt_ckpt_load(path, &im, &v, err, sizeof err)) zt_user_error_all("%s", err);
    zt_zero_master_init(&t->z, &t->m);
    zt_metrics_note(&t->mx, "initialised from %s (weights of its step %ld; fresh optimizer)\n", path, im.step);
    zt_ckpt_meta_free(&im);
}

/* a signal during set-up (data loading, resume, --init-from) is acted on before the first step: the state is the
   checkpoint's (or step 0's), so there is nothing new to save. Returns whether any rank had one (collective) */
static int stopped_in_setup(trainer *t, long start) {
    int early = g_signal != 0, any = 0;
    MPI_Allreduce(&early, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any)
        zt_metrics_note(&t->mx, "stopped at step %ld/%ld before training: signal received during set-up (nothing new "
                        "to save); resume with --resume auto\n", start, t->c->train.steps);
    return any;
}

/* the resolved config as config.cfg in the run directory, written only once a resume was accepted (a refused one
   changes nothing); whole or not at all: never a 0-byte file (a full disk is exit 2 here) */
static void write_config_copy(trainer *t) {
    char err[ZT_ERR_BUF] = "";
    int bad = 0;
    if (t->mx.active) {
        size_t n = zt_config_to_string(t->c, NULL, 0);
        char *text = zt_malloc(n + 1);
        zt_config_to_string(t->c, text, n + 1);
        bad = zt_metrics_write(&t->mx, "config.cfg", text, n, err, sizeof err);
        free(text);
    }
    zt_check_all(bad, err, sizeof err);
}

/* the training loop's running figures */
typedef struct run_state {
    long start, step;
    int stop;                 /* 1: --stop-after, 2: time limit, 3: signal */
    double t_start;
    double best, last_loss, last_val, best_val;
    double last_val_acc;      /* encoders: the last evaluation's masked-LM accuracy (-1: none) */
    double timed_s, max_step_s, save_s;
    long timed;               /* steps timed (not the first, not a profiled one) */
    zt_gpu_monitor *gpu;      /* rank 0's GPU memory and utilisation (NVML), or NULL */
    int op_profile, profiled, n_prof;
    double profiled_s;
    zt_prof_entry prof[ZT_PROF_MAX_OPS];
} run_state;

/* a step's loss or norm not finite: diverged; an fp16 overflow: the skip is logged (and below scale 1, the end) */
static void check_step(trainer *t, const zt_step_result *r, long step) {
    if (!isfinite(r->loss) || (!r->skipped && !isfinite(r->norm))) diverged(t, step, r->loss, r->norm);
    if (!r->skipped) return;
    const zt_loss_scaler *sc = &t->st.scaler;
    zt_metrics_note(&t->mx, "step %ld: fp16 gradients overflowed at loss scale %g: step skipped, scale now %g\n", step,
                    r->loss_scale, sc->scale);
    if (sc->scale < 1.0f) /* DeepSpeed's min_loss_scale: below 1 the gradients overflow at any scale */
        zt_user_error_all("training diverged at step %ld: fp16 gradients overflow even at loss scale %g (%ld steps "
                          "skipped); use precision = \"bf16\" or lower train.lr", step, r->loss_scale, sc->skipped);
}

/* fault injection (tests: ZTRAIN_TEST_NAN_PARAM_STEP): a NaN written into rank 0's first parameter after that step's
   update (the loss and norm stay finite, so only the checkpoint's own finite check can catch it) */
static void poison_params(trainer *t, long step) {
    static long poison_step = -2;
    if (poison_step == -2) poison_step = getenv("ZTRAIN_TEST_NAN_PARAM_STEP") ? atol(getenv("ZTRAIN_TEST_NAN_PARAM_STEP")) : -1;
    if (step != poison_step || t->d->rank != 0) return;
    zt_zero_poison(&t->z, &t->m);
}

/* validation at eval.every and the last step; returns the loss, or -1 when not evaluated (abandoned on a signal) */
static double evaluate(trainer *t, run_state *rs, int last) {
    const zt_config *c = t->c;
    if (!t->data.has_val || !((c->eval.every > 0 && rs->step % c->eval.every == 0) || last)) return -1;
    double v = 0, acc = -1;
    if (zt_eval_loss(&t->m, &t->data.val, c, t->d, &g_signal, &v, &acc)) {
        zt_metrics_note(&t->mx, "step %ld: evaluation abandoned: signal received\n", rs->step);
        return -1;
    }
    zt_check_all(t->data.val.bad, t->data.val.err, sizeof t->data.val.err);
    rs->last_val = v;
    rs->last_val_acc = t->s.encoder ? acc : -1;
    if (rs->best_val < 0 || v < rs->best_val) rs->best_val = v;
    return v;
}

/* agree on stopping (any rank's signal, rank 0's clock), on whether every rank's background checkpoint write is
   done, and on whether rank 0 still lays out a background checkpoint's file (once it is done, the other ranks'
   writers may open it); returns whether every rank's background write is done */
static int agree(trainer *t, run_state *rs, const train_opts *o) {
    int flags[3] = {0, !zt_ckpt_saver_local_done(t->saver), zt_ckpt_saver_layout_pending(t->saver)}, all[3];
    if (g_signal) flags[0] = 3;
    else if (o->stop_after > 0 && rs->step - rs->start >= o->stop_after) flags[0] = 1;
    else if (o->time_limit > 0 && t->d->rank == 0 &&
             zt_now() - rs->t_start + 2 * rs->max_step_s + 2 * rs->save_s + 5 > o->time_limit) flags[0] = 2;
    MPI_Allreduce(flags, all, 3, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    rs->stop = all[0];
    if (!all[2]) zt_ckpt_saver_release(t->saver);
    return all[1] == 0;
}

/* publishes a finished background save, saves at checkpoint.every, a stop and the last step; returns the seconds
   this step waited for checkpointing, or -1 when it did not */
static double checkpoint_phase(trainer *t, run_state *rs, int writes_done, int last) {
    const zt_config *c = t->c;
    double stall = -1;
    if (zt_ckpt_saver_pending(t->saver) && writes_done) stall = finish_save(t);
    const int periodic = c->checkpoint.every > 0 && rs->step % c->checkpoint.every == 0;
    if (periodic || rs->stop || last) {
        double s0 = zt_now();
        save(t, rs->step);
        stall = zt_now() - s0;
        if (rs->stop || last) { /* the run ends: the write in flight must be published (not training time lost) */
            double f0 = zt_now();
            finish_save(t);
            t->ck_exit_wait_s = zt_now() - f0;
        }
        rs->save_s = stall + t->ck_exit_wait_s > t->ck_write_s ? stall + t->ck_exit_wait_s : t->ck_write_s;
    }
    if (stall >= 0) {
        t->ck_stall_sum += stall;
        if (stall > t->ck_stall_max) t->ck_stall_max = stall;
    }
    return stall;
}

/* rank 0's metrics line for the step (every train.log_every steps, and any step that evaluated, saved or skipped) */
static void log_step(trainer *t, run_state *rs, const zt_step_result *r, double dt, double val, double stall, int last) {
    const zt_config *c = t->c;
    if (!t->mx.active || !(rs->step % c->train.log_every == 0 || last || val >= 0 || stall >= 0 || r->skipped)) return;
    const double tok_s = (double)c->train.global_batch * c->train.seq_len / dt;
    const double g = t->flops_tok * tok_s * 1e-9 / t->d->size;
    zt_step_metrics sm = {
        .step = rs->step, .steps = c->train.steps, .loss = r->loss, .lr = r->lr, .grad_norm = r->norm,
        .tokens_per_s = tok_s, .gflops = g, .frac_peak = g / t->peak, .step_ms = dt * 1e3,
        .mem_bytes = (double)zt_zero_plan_total(&t->z.plan), .val_loss = val, .gpu_mem_bytes = -1, .gpu_util = -1,
        .ckpt_stall_s = stall, .loss_scale = t->st.scaler.active ? r->loss_scale : 0.0, .skipped = r->skipped,
        .update_ms = r->update_s * 1e3,
        .mlm_acc = r->mlm_counted > 0 ? (double)r->mlm_correct / (double)r->mlm_counted : -1,
        .val_mlm_acc = val >= 0 ? rs->last_val_acc : -1,
    };
    if (rs->gpu && zt_gpu_monitor_read(rs->gpu, &sm.gpu_mem_bytes, &sm.gpu_util)) sm.gpu_mem_bytes = -1;
    zt_metrics_step(&t->mx, &sm);
}

/* one sample at sample.every (not once a signal is pending: a sample is sample.tokens one-row forwards) */
static void sample_phase(trainer *t, run_state *rs, zt_train_sample *ts) {
    if (t->c->sample.every <= 0 || rs->step % t->c->sample.every != 0 || rs->stop == 3) return;
    if (!t->m.opt.sharded && (!ts || g_signal)) return; /* ZeRO-3: every rank takes part in the gather */
    float *p32 = zt_model_params_f32(&t->m); /* 2-byte parameters: unpacked for the sampler, then freed */
    if (ts && !g_signal) zt_sample_during_training(ts, &t->mx, p32, rs->step);
    zt_model_params_f32_release(&t->m, p32);
}

/* ZTRAIN_OP_PROFILE=1: the last step runs with every backend op timed (a sync around each, so the step is slower:
   it is left out of tokens/s) and rank 0 prints the breakdown (the GPU benchmark) */
static int profiling_step(const run_state *rs, long steps) {
    return rs->op_profile && rs->step == steps - 1 && rs->step > rs->start + 1;
}

/* one step and everything after it: checks, timing, evaluation, the stop agreement, checkpoints, logging, sampling */
static void train_one(trainer *t, run_state *rs, const train_opts *o, zt_train_sample *ts) {
    const zt_config *c = t->c;
    const int profiling = profiling_step(rs, c->train.steps);
    if (profiling) zt_backend_prof_begin(t->be);
    const double t0 = zt_now();
    const zt_step_result r = zt_step_run(&t->st, rs->step);
    t->ck_stall_sum += r.snapshot_wait_s;
    zt_check_all(t->data.train.bad, t->data.train.err, sizeof t->data.train.err); /* a damaged shard: no state of this step is kept */
    rs->step++;
    check_step(t, &r, rs->step);
    poison_params(t, rs->step);
    const double dt = zt_now() - t0;
    if (dt > rs->max_step_s) rs->max_step_s = dt;
    if (profiling) { /* before evaluation, sampling or saving run any op */
        rs->profiled = 1;
        rs->profiled_s = dt;
        rs->n_prof = zt_backend_prof_report(rs->prof, ZT_PROF_MAX_OPS);
        zt_backend_prof_end(t->be);
    } else if (rs->step > rs->start + 1) { /* the first step warms caches up */
        rs->timed_s += dt;
        rs->timed++;
    }
    rs->last_loss = r.loss;
    if (r.loss < rs->best) rs->best = r.loss;
    const int last = rs->step == c->train.steps;
    const double val = evaluate(t, rs, last);
    const int writes_done = agree(t, rs, o);
    const double stall = checkpoint_phase(t, rs, writes_done, last);
    log_step(t, rs, &r, dt, val, stall, last);
    sample_phase(t, rs, ts);
}

/* fingerprint of the final trained parameters (rank 0; every rank holds them all after the all-gather), staged
   through a small host buffer: no second full copy of the parameters */
static void params_hash(trainer *t, char hash[65]) {
    hash[0] = 0;
    if (t->d->rank != 0 && !t->m.opt.sharded) return; /* ZeRO-3: every rank takes part in the gathers */
    const size_t chunk = ZT_INIT_BLOCK;
    float *h = zt_malloc(chunk * sizeof(float));
    void *sha = zt_sha256_begin();
    const size_t total = zt_model_ttable(&t->m)->total; /* what was trained: the adapters with LoRA */
    for (size_t off = 0; off < total; off += chunk) {
        size_t n = total - off < chunk ? total - off : chunk;
        zt_model_tparams_to_host(&t->m, off, n, h);
        zt_sha256_update(sha, h, n * sizeof(float));
    }
    zt_sha256_end(sha, hash);
    if (t->d->rank != 0) hash[0] = 0;
    free(h);
}

static void print_profile(const run_state *rs, long steps) {
    double ops_s = 0;
    for (int i = 0; i < rs->n_prof; i++) ops_s += rs->prof[i].seconds;
    zt_log("op profile of step %ld (rank 0, each op synchronised): %.1f ms, ops %.1f ms\n", steps,
           rs->profiled_s * 1e3, ops_s * 1e3);
    for (int i = 0; i < rs->n_prof; i++)
        zt_log("  %-18s %9.2f ms %5.1f%% %6ld calls\n", rs->prof[i].name, rs->prof[i].seconds * 1e3,
               100 * rs->prof[i].seconds / rs->profiled_s, rs->prof[i].calls);
}

/* results.json and the closing lines: throughput, memory, the parameters' hash */
static void report(trainer *t, run_state *rs) {
    const zt_config *c = t->c;
    const zt_dist *d = t->d;
    static const char *why[] = {"", "--stop-after reached", "--time-limit reached", "signal received"};
    if (rs->stop)
        zt_metrics_note(&t->mx, "stopped at step %ld/%ld: %s; resume with --resume auto\n", rs->step, c->train.steps,
                        why[rs->stop]);
    const double dur = zt_now() - rs->t_start, tokens_per_step = (double)c->train.global_batch * c->train.seq_len;
    char hash[65];
    params_hash(t, hash);
    /* tokens over step time (not the mean of per-step rates, which overstates when steps vary) */
    const double tok_s = rs->timed ? tokens_per_step * rs->timed / rs->timed_s
                                   : tokens_per_step * (rs->step - rs->start) / dur;
    const double frac = t->flops_tok * tok_s * 1e-9 / d->size / t->peak;
    char layout[96];
    zt_dist_layout_string(d, layout, sizeof layout);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double rss = (double)ru.ru_maxrss * 1024.0, rss_max = rss;
    MPI_Reduce(&rss, &rss_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    /* what the allocations touched at their peak, to compare with the plan (`ztrain estimate`) */
    double grown = (double)zt_mem_peak() - (double)t->rss0, grown_max = grown;
    MPI_Reduce(&grown, &grown_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    zt_ckpt_saver_destroy(t->saver);
    t->saver = NULL;
    const zt_loss_scaler *sc = &t->st.scaler;
    uint64_t source_samples[ZT_DATA_MAX_SOURCES];
    zt_dataset_source_counts(&t->data.train, (uint64_t)rs->step * (uint64_t)c->train.global_batch, source_samples);
    zt_run_results rr = {
        .data = &t->data.train, .source_samples = source_samples,
        .world_size = d->size, .n_nodes = d->n_nodes, .threads = t->threads, .layout = layout, .backend = t->backend,
        .hash = hash, .n_params = t->m.table.total, .steps = rs->step, .duration_s = dur, .tokens_per_s = tok_s,
        .peak_gflops = t->peak, .frac_peak = frac, .final_loss = rs->last_loss, .best_loss = rs->best,
        .val_loss = rs->last_val, .best_val_loss = rs->best_val, .val_mlm_acc = rs->last_val_acc, .comm_s = t->z.comm_s,
        .comm_flight_s = t->z.comm_flight_s, .comm_wait_s = t->z.comm_wait_s, .ckpt_saves = t->ck_saves,
        .ckpt_stall_s = t->ck_stall_sum, .ckpt_stall_max_s = t->ck_stall_max, .peak_rss_bytes = rss_max,
        .mem_alloc_bytes = grown_max, .skipped_steps = sc->skipped, .loss_scale = sc->active ? sc->scale : 0.0,
        .grad_bytes_sent = t->z.grad_bytes_sent, .offload_s = t->z.offload_s, .gather_bytes = t->z.gather_bytes,
        .gather_wait_s = t->z.gather_wait_s, .h2d_bytes = -1, .d2h_bytes = -1, .graph_on = t->st.graph.on,
        .graph_captured_at = t->st.graph.captured_at, .graph_replays = t->st.graph.replays,
    };
    if (!strcmp(c->device, "devsim")) zt_devsim_transfers(&rr.h2d_bytes, &rr.d2h_bytes);
    zt_results_write(&t->mx, c, &rr);
    if (t->mx.active) {
        zt_metrics_note(&t->mx, "done: step %ld/%ld in %.1f s, loss %.4f, %.0f tokens/s (%.1f%% of sgemm peak %.0f GFLOP/s)\n",
                        rs->step, c->train.steps, dur, rs->last_loss, tok_s, 100 * frac, t->peak);
        if (t->st.graph.on)
            zt_log("step graph: %ld steps replayed as one CUDA graph (last captured at step %ld)\n",
                   t->st.graph.replays, t->st.graph.captured_at + 1);
        if (rs->last_val >= 0 && rs->last_val_acc >= 0)
            zt_log("val loss %.4f, val MLM accuracy %.4f\n", rs->last_val, rs->last_val_acc);
        else if (rs->last_val >= 0)
            zt_log("val loss %.4f\n", rs->last_val);
        if (t->z.comm_flight_s > 0)
            zt_log("gradient communication (stage 2 buckets): %.2f s in flight during backward, %.2f s exposed "
                   "(%.0f%% hidden)\n", t->z.comm_flight_s, t->z.comm_wait_s,
                   100.0 * (1.0 - t->z.comm_wait_s / t->z.comm_flight_s));
        zt_log("params_hash sha256:%s\nresults: %s/results.json\n", hash, t->mx.dir);
    }
    if (rs->profiled) print_profile(rs, c->train.steps);
}

int zt_cmd_train(int argc, char **argv, zt_dist *d) {
    char err[ZT_ERR_BUF] = "";
    /* a signal during set-up must not kill the rank: it is handled after the first step */
    signal(SIGUSR1, on_signal);
    signal(SIGTERM, on_signal);
    zt_cli cli;
    const train_opts o = parse_opts(argc, argv, &cli);
    trainer t;
    memset(&t, 0, sizeof t);
    t.d = d;
    zt_config *c = t.c = load_config(&cli, &o, d);
    run_state *rs = zt_calloc(1, sizeof *rs);
    rs->t_start = zt_now();
    setup(&t, o.resume != NULL);
    zt_metrics_set_tensorboard(&t.mx, c->metrics.tensorboard);
    announce(&t);
    if (t.auto_note[0]) zt_metrics_note(&t.mx, "%s\n", t.auto_note);
    if (c->data.stream && c->data.shuffle)
        zt_metrics_note(&t.mx, "data.stream: windows come in stream order (data.shuffle applies to shards only)\n");
    zt_train_sample *ts = NULL;
    zt_check_all(zt_train_sample_create(&ts, t.be, &t.s, c, d->rank == 0, err, sizeof err), err, sizeof err);
    int rc = 0;
    rs->start = rs->step = o.resume ? resume(&t, o.resume) : 0;
    if (rs->start < 0) goto done; /* already finished: nothing written */
    if (o.init_from) init_from(&t, o.init_from);
    if (stopped_in_setup(&t, rs->start)) {
        rc = c->checkpoint.signal_exit_code;
        goto done;
    }
    write_config_copy(&t);
    rs->gpu = d->rank == 0 && t.be->i->mem == ZT_MEM_DEVICE && strcmp(c->device, "cuda") == 0
                  ? zt_gpu_monitor_open(d->local_rank) : NULL;
    rs->best = 1e30;
    rs->last_val = rs->best_val = rs->last_val_acc = -1;
    rs->op_profile = getenv("ZTRAIN_OP_PROFILE") && *getenv("ZTRAIN_OP_PROFILE") != '0';
    while (rs->step < c->train.steps && !rs->stop) train_one(&t, rs, &o, ts);
    report(&t, rs);
    zt_gpu_monitor_close(rs->gpu);
    if (rs->stop == 3) rc = c->checkpoint.signal_exit_code;
done:
    teardown(&t, ts);
    free(rs);
    free(c);
    return rc;
}
