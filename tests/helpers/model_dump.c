/* model_dump.c — drive ztrain's GPT-2 on given weights and batches and dump the numbers, so an
 * outside implementation (Hugging Face transformers, tests/e2e/test_hf_reference.py) can check them.
 *
 *   model_dump table  SHAPE
 *       prints the parameter table: "tensor <name> <offset> <numel> <ndim> <d0> <d1> <decay>" per
 *       tensor, then "total <elements>".
 *   model_dump fwdbwd SHAPE --B B --T T --weights W.bin --tokens TOK.bin --out OUT.bin [--masked 1]
 *       one forward + backward(1.0) on one batch.
 *       OUT = float32: loss (1), logits (B, T, Vp), grads (table.total).
 *       --masked 1: the loss over the batch's n counted targets (>= 0; a target < 0 is ignored) as the step
 *       normalises it (core/optim/step.h): backward(B*T / n), loss = the forward's loss / (n / (B*T)).
 *   model_dump train  SHAPE --B B --T T --K K --steps S --lr LR --min-lr MIN --warmup W --clip CLIP
 *                     --wd WD [--beta1 b1 --beta2 b2 --eps e --schedule cosine --stage 2]
 *                     --weights W.bin --tokens TOK.bin --out OUT.bin
 *       S optimizer steps exactly as src/cmd/train.c runs them (ZeRO path, K micro-batches
 *       of B sequences per step, each backward scaled by 1/K). Micro-batch j of step s is batch
 *       (s*K + j) mod (number of batches in TOK.bin). One rank, or N ranks under mpirun when N divides K
 *       (rank 0 writes OUT).
 *       --masked 1: loss masks, the step's count callback set (the counted targets, >= 0, of the step's K
 *       micro-batches): the loss is the mean over the global batch's counted targets.
 *       OUT = float64 (S, 4): loss (mean of the K micro-batch losses; --masked: over the counted targets),
 *             grad norm, clip factor, lr; then float32 final parameters (table.total).
 *   model_dump lora-table SHAPE LORA
 *       the LoRA adapter table (core/lora/lora.h), printed as `table` prints GPT-2's.
 *   model_dump lora-fwdbwd SHAPE LORA --B B --T T --weights W.bin --adapters A.bin --tokens TOK.bin --out OUT.bin
 *       as fwdbwd with adapters A.bin (adapter table total float32) on the frozen base W.bin.
 *       OUT = float32: loss (1), logits (B, T, Vp), adapter grads (adapter total).
 *   model_dump lora-train SHAPE LORA ... (as train) --adapters A.bin
 *       as train, AdamW updating only the adapters. OUT = float64 (S, 4), then float32 final adapters.
 *   LORA = --lora-rank r --lora-alpha a [--lora-rslora 0|1] [--lora-targets qkv,proj,fc,fcproj|all]
 *          [--lora-dropout p]  (lora-fwdbwd only: a training forward, dropout seed 1234; the logits
 *          written are then dlogits)
 *   SHAPE = --layers L --heads H --embd C --vocab V --padded-vocab Vp --block maxT [--threads N]
 *           [--device cpu|devsim] (default: ZT_TEST_DEVICE, else cpu; the backend comes from the factory)
 *           [--set model.KEY=VALUE ...] (the block's description: model.family, model.n_kv_head, ...; GPT-2's
 *           when none is given)
 *
 * W.bin: table.total float32 in the table's order (Hugging Face layouts: Conv1D weights (in, out),
 * wte padded to Vp rows). TOK.bin: int32 batches, each = tokens (B, T) then targets (B, T); a target < 0 is an
 * ignored position (loss mask), passed through as it is.
 * --table (with fwdbwd / train) also prints the table to stdout.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "iface/comm.h"
#include "io/config.h"
#include "core/dist/backend_factory.h"
#include "core/model/model.h"
#include "core/optim/optim.h"
#include "core/optim/step.h"
#include "core/dist/zero.h"
#include "util/util.h"

typedef struct args {
    const char *mode;
    zt_model_shape s;
    int B, T, K, threads, steps, warmup, stage, table, masked;
    double lr, min_lr, clip, wd, beta1, beta2, eps;
    const char *schedule, *weights, *tokens, *out, *device;
    int lora;                       /* a lora-* mode */
    zt_lora_cfg lc;
    const char *adapters, *targets;
    double alpha, dropout;
    const char *sets[32];           /* --set model.KEY=VALUE: the block's description */
    int n_sets;
} args;

static void die(const char *msg, const char *what) {
    fprintf(stderr, "model_dump: %s%s%s\n", msg, what ? ": " : "", what ? what : "");
    exit(2);
}

/* the config's model section from the SHAPE options and the --set overrides */
static void apply_model(const args *a, zt_config *c) {
    char err[ZT_ERR_BUF];
    c->model.n_layer = a->s.n_layer;
    c->model.n_head = a->s.n_head;
    c->model.n_embd = a->s.n_embd;
    c->model.vocab_size = a->s.vocab_size;
    c->model.padded_vocab = a->s.padded_vocab;
    c->model.block_size = a->s.block_size;
    for (int i = 0; i < a->n_sets; i++)
        if (zt_config_set(c, a->sets[i], err, sizeof err)) die(err, a->sets[i]);
}

/* the shape's block description from the --set overrides (GPT-2's without any) */
static void describe(args *a) {
    char err[ZT_ERR_BUF];
    zt_config *c = calloc(1, sizeof *c);
    if (zt_config_load_string(c, "", err, sizeof err)) die(err, NULL);
    apply_model(a, c);
    if (zt_config_shape(c, &a->s, err, sizeof err)) die(err, NULL);
    free(c);
}

static void parse(args *a, int argc, char **argv) {
    memset(a, 0, sizeof *a);
    a->K = 1;
    a->stage = 2;
    a->threads = 0;
    a->beta1 = 0.9;
    a->beta2 = 0.95;
    a->eps = 1e-8;
    a->schedule = "cosine";
    a->device = getenv("ZT_TEST_DEVICE") && *getenv("ZT_TEST_DEVICE") ? getenv("ZT_TEST_DEVICE") : "cpu";
    if (argc < 2) die("usage: model_dump table|fwdbwd|train [options] (see the source)", NULL);
    a->mode = argv[1];
    a->lora = strncmp(a->mode, "lora-", 5) == 0;
    a->lc.rank = 8;
    a->lc.quant = -1; /* fp32 base */
    a->alpha = 16;
    a->targets = "all";
    for (int i = 2; i < argc; i++) {
        const char *k = argv[i];
        if (strcmp(k, "--table") == 0) { a->table = 1; continue; }
        if (i + 1 >= argc) die("missing value for", k);
        const char *v = argv[++i];
        if (strcmp(k, "--set") == 0) {
            if (a->n_sets == 32) die("too many --set", v);
            a->sets[a->n_sets++] = v;
            continue;
        }
#define IARG(name, field) if (strcmp(k, name) == 0) { field = atoi(v); continue; }
#define DARG(name, field) if (strcmp(k, name) == 0) { field = atof(v); continue; }
#define SARG(name, field) if (strcmp(k, name) == 0) { field = v; continue; }
        IARG("--layers", a->s.n_layer) IARG("--heads", a->s.n_head) IARG("--embd", a->s.n_embd)
        IARG("--vocab", a->s.vocab_size) IARG("--padded-vocab", a->s.padded_vocab) IARG("--block", a->s.block_size)
        IARG("--B", a->B) IARG("--T", a->T) IARG("--K", a->K) IARG("--threads", a->threads)
        IARG("--steps", a->steps) IARG("--warmup", a->warmup) IARG("--stage", a->stage) IARG("--masked", a->masked)
        DARG("--lr", a->lr) DARG("--min-lr", a->min_lr) DARG("--clip", a->clip) DARG("--wd", a->wd)
        DARG("--beta1", a->beta1) DARG("--beta2", a->beta2) DARG("--eps", a->eps)
        SARG("--schedule", a->schedule) SARG("--weights", a->weights) SARG("--tokens", a->tokens)
        SARG("--out", a->out) SARG("--device", a->device)
        IARG("--lora-rank", a->lc.rank) DARG("--lora-alpha", a->alpha) IARG("--lora-rslora", a->lc.rslora)
        DARG("--lora-dropout", a->dropout)
        SARG("--lora-targets", a->targets) SARG("--adapters", a->adapters)
#undef IARG
#undef DARG
#undef SARG
        die("unknown option", k);
    }
    if (a->s.n_layer <= 0 || a->s.n_head <= 0 || a->s.n_embd <= 0 || a->s.vocab_size <= 0 || a->s.block_size <= 0)
        die("need --layers --heads --embd --vocab --block > 0", NULL);
    if (a->s.n_embd % a->s.n_head) die("--embd must be a multiple of --heads", NULL);
    if (a->s.padded_vocab == 0) a->s.padded_vocab = a->s.vocab_size;
    if (a->s.padded_vocab < a->s.vocab_size) die("--padded-vocab < --vocab", NULL);
    describe(a);
    if (a->lora) {
        char err[256];
        a->lc.alpha = (float)a->alpha;
        a->lc.dropout = (float)a->dropout;
        if (!(a->lc.targets = zt_config_lora_targets(a->targets, err, sizeof err))) die(err, NULL);
        if (a->lc.rank <= 0) die("need --lora-rank > 0", NULL);
        if (strcmp(a->mode, "lora-table") != 0 && !a->adapters) die("need --adapters", NULL);
    }
    if (strcmp(a->mode, "table") == 0 || strcmp(a->mode, "lora-table") == 0) return;
    if (a->B <= 0 || a->T <= 0 || a->T > a->s.block_size) die("need --B > 0 and 0 < --T <= --block", NULL);
    if (!a->weights || !a->tokens || !a->out) die("need --weights --tokens --out", NULL);
    if ((strcmp(a->mode, "train") == 0 || strcmp(a->mode, "lora-train") == 0) && (a->steps <= 0 || a->K <= 0)) die("train needs --steps > 0, --K > 0", NULL);
}

static void print_table(const zt_param_table *pt) {
    for (int i = 0; i < pt->n; i++) {
        const zt_tensor_info *t = &pt->t[i];
        printf("tensor %s %zu %zu %d %d %d %d\n", t->name, t->offset, t->numel, t->ndim, t->shape[0],
               t->ndim == 2 ? t->shape[1] : 0, t->decay);
    }
    printf("total %zu\n", pt->total);
    fflush(stdout);
}

/* reads exactly n bytes, or (if n == 0) the whole file into *len */
static void *read_file(const char *path, size_t want, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) die("cannot open", path);
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (sz < 0) die("cannot size", path);
    if (want && (size_t)sz != want) {
        fprintf(stderr, "model_dump: %s has %ld bytes, expected %zu\n", path, sz, want);
        exit(2);
    }
    void *p = malloc(sz ? (size_t)sz : 1);
    if (!p || fread(p, 1, (size_t)sz, f) != (size_t)sz) die("cannot read", path);
    fclose(f);
    if (len) *len = (size_t)sz;
    return p;
}

static void write_all(FILE *f, const void *p, size_t bytes, const char *path) {
    if (fwrite(p, 1, bytes, f) != bytes) die("cannot write", path);
}

static zt_backend *make_backend(const args *a) {
    char err[ZT_ERR_BUF];
    zt_backend *be = zt_backend_create(a->device, a->threads, err, sizeof err);
    if (!be) die(err, NULL);
    return be;
}

/* LoRA: the adapters from --adapters into the model */
static void load_adapters(const args *a, zt_model *m) {
    if (!a->lora) return;
    const size_t n = m->lora->table.total;
    float *ad = read_file(a->adapters, n * sizeof(float), NULL);
    m->be->i->to_device(m->be, m->lora->params, ad, n * sizeof(float));
    free(ad);
}

static int cmd_fwdbwd(const args *a) {
    zt_backend *be = make_backend(a);
    zt_model m;
    if (a->lora) zt_model_init_lora(&m, be, &a->s, a->B, a->T, &a->lc, 0, 1, NULL);
    else zt_model_init(&m, be, &a->s, a->B, a->T, 0, 1, NULL);
    if (a->table) print_table(zt_model_ttable(&m));
    const size_t total = m.table.total, BT = (size_t)a->B * a->T, Vp = (size_t)a->s.padded_vocab;
    float *w = read_file(a->weights, total * sizeof(float), NULL);
    int32_t *tok = read_file(a->tokens, 2 * BT * sizeof(int32_t), NULL);
    be->i->to_device(be, m.params, w, total * sizeof(float));
    load_adapters(a, &m);
    const size_t gtotal = zt_model_ttable(&m)->total;
    /* --masked: d(loss) scale B*T / n, n counted targets, as the step scales a micro-batch (core/optim/step.c) */
    size_t n = 0;
    for (size_t i = 0; i < BT; i++) n += tok[BT + i] >= 0;
    if (a->masked && n == 0) die("--masked: the batch has no counted target", a->tokens);
    const float ds = a->masked ? (float)((double)BT / (double)n) : 1.0f;
    /* a training forward (dropout on, seed 1234, micro-batch 0) when the adapters have dropout: the logits
       written out are then dlogits (the loss and the gradients are what is checked) */
    if (a->lora && a->lc.dropout > 0.0f) m.lora->seed = 1234;
    float loss = a->lora && a->lc.dropout > 0.0f ? zt_model_forward_train(&m, tok, tok + BT, a->B, a->T, ds)
                                                 : zt_model_forward(&m, tok, tok + BT, a->B, a->T);
    if (a->masked) loss = (float)((double)loss / ((double)n / (double)BT));
    float *logits = malloc(BT * Vp * sizeof(float));
    /* backward overwrites the logits with dlogits: copy them out first */
    zt_model_logits_to_host(&m, logits, BT * Vp);
    be->i->sync(be);
    zt_model_backward(&m, ds);
    float *g = malloc(gtotal * sizeof(float));
    be->i->to_host(be, g, m.grads, gtotal * sizeof(float));
    be->i->sync(be);
    FILE *f = fopen(a->out, "wb");
    if (!f) die("cannot create", a->out);
    write_all(f, &loss, sizeof loss, a->out);
    write_all(f, logits, BT * Vp * sizeof(float), a->out);
    write_all(f, g, gtotal * sizeof(float), a->out);
    if (fclose(f)) die("cannot write", a->out);
    free(g);
    free(logits);
    free(w);
    free(tok);
    zt_model_free(&m);
    zt_backend_destroy(be);
    return 0;
}

/* step.h's batch source: micro-batch (step * K + j) mod nb of the tokens file, each (tokens, targets) */
typedef struct file_batches { const int32_t *tok; size_t nb, BT; int K; } file_batches;
static void dump_batch(void *ctx, long step, int j, int32_t *tokens, int32_t *targets) {
    const file_batches *fb = ctx;
    const int32_t *b = fb->tok + ((size_t)step * fb->K + (size_t)j) % fb->nb * 2 * fb->BT;
    memcpy(tokens, b, fb->BT * sizeof(int32_t));
    memcpy(targets, b + fb->BT, fb->BT * sizeof(int32_t));
}

/* step.h's count (--masked): the counted targets of the step's K micro-batches */
static uint64_t dump_count(void *ctx, long step) {
    const file_batches *fb = ctx;
    uint64_t n = 0;
    for (int j = 0; j < fb->K; j++) {
        const int32_t *tg = fb->tok + ((size_t)step * fb->K + (size_t)j) % fb->nb * 2 * fb->BT + fb->BT;
        for (size_t i = 0; i < fb->BT; i++) n += tg[i] >= 0;
    }
    return n;
}

static int cmd_train(const args *a, int *argc, char ***argv) {
    MPI_Init(argc, argv);
    int world = 1, rank = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    zt_config *c = calloc(1, sizeof *c);
    zt_config_defaults(c);
    apply_model(a, c);
    c->train.micro_batch = a->B;
    c->train.global_batch = a->B * a->K;
    c->train.seq_len = a->T;
    c->train.steps = a->steps;
    c->train.lr = a->lr;
    c->train.min_lr = a->min_lr;
    c->train.warmup_steps = a->warmup;
    snprintf(c->train.schedule, sizeof c->train.schedule, "%s", a->schedule);
    c->train.weight_decay = a->wd;
    c->train.beta1 = a->beta1;
    c->train.beta2 = a->beta2;
    c->train.eps = a->eps;
    c->train.grad_clip = a->clip;
    c->train.threads = a->threads;
    c->zero.stage = a->stage;
    if (a->lora) {
        c->lora.enabled = 1;
        snprintf(c->lora.base, sizeof c->lora.base, "%s", a->weights);
        c->lora.rank = a->lc.rank;
        c->lora.alpha = a->alpha;
        c->lora.rslora = a->lc.rslora;
        snprintf(c->lora.targets, sizeof c->lora.targets, "%s", a->targets);
    }
    char err[ZT_ERR_MAX];
    if (a->K % world) die("train on N ranks needs N to divide --K", NULL);
    if (zt_config_validate(c, world, err, sizeof err)) die("invalid config", err);

    zt_backend *be = make_backend(a);
    zt_comm *comm = zt_comm_create("auto", be, err, sizeof err);
    if (!comm) die(err, NULL);
    if (comm->size != world) die("the communicator's size is not MPI's", NULL);
    zt_model m;
    zt_zero z;
    zt_zero_init(&z, c, &m, be, comm, &a->s);
    if (a->table && rank == 0) print_table(zt_model_ttable(&m));
    const size_t total = m.table.total, BT = (size_t)a->B * a->T;
    float *w = read_file(a->weights, total * sizeof(float), NULL);
    be->i->to_device(be, m.params, w, total * sizeof(float));
    load_adapters(a, &m);
    const size_t ttotal = zt_model_ttable(&m)->total; /* what is trained and written out */
    size_t tlen = 0;
    int32_t *tok = read_file(a->tokens, 0, &tlen);
    const size_t per = 2 * BT * sizeof(int32_t);
    if (tlen == 0 || tlen % per) die("tokens file is not a whole number of (tokens, targets) batches", a->tokens);
    const size_t nb = tlen / per;
    const int K = a->K;
    if (z.micro_steps != K / world) die("zero: unexpected micro_steps", NULL);

    file_batches fb = {tok, nb, BT, K};
    zt_step st;
    zt_step_init(&st, &m, &z, c, dump_batch, &fb);
    if (a->masked) st.count = dump_count;
    double *rec = calloc((size_t)a->steps * 4, sizeof(double));
    for (long step = 0; step < a->steps; step++) {
        const zt_step_result r = zt_step_run(&st, step);
        rec[step * 4 + 0] = r.loss;
        rec[step * 4 + 1] = r.norm;
        rec[step * 4 + 2] = r.clip;
        rec[step * 4 + 3] = r.lr;
    }
    zt_step_free(&st);
    be->i->to_host(be, w, zt_model_tparams(&m), ttotal * sizeof(float));
    be->i->sync(be);
    if (rank == 0) {
        FILE *f = fopen(a->out, "wb");
        if (!f) die("cannot create", a->out);
        write_all(f, rec, (size_t)a->steps * 4 * sizeof(double), a->out);
        write_all(f, w, ttotal * sizeof(float), a->out);
        if (fclose(f)) die("cannot write", a->out);
    }
    free(rec);
    free(w);
    free(tok);
    zt_zero_free(&z, &m);
    zt_comm_destroy(comm);
    zt_backend_destroy(be);
    free(c);
    MPI_Finalize();
    return 0;
}

int main(int argc, char **argv) {
    args a;
    parse(&a, argc, argv);
    if (strcmp(a.mode, "table") == 0) {
        zt_param_table *pt = calloc(1, sizeof *pt);
        zt_param_table_build(pt, &a.s);
        print_table(pt);
        free(pt);
        return 0;
    }
    if (strcmp(a.mode, "lora-table") == 0) {
        zt_param_table *pt = calloc(1, sizeof *pt);
        zt_lora_table_build(pt, &a.s, &a.lc);
        print_table(pt);
        free(pt);
        return 0;
    }
    if (strcmp(a.mode, "fwdbwd") == 0 || strcmp(a.mode, "lora-fwdbwd") == 0) return cmd_fwdbwd(&a);
    if (strcmp(a.mode, "train") == 0 || strcmp(a.mode, "lora-train") == 0) return cmd_train(&a, &argc, &argv);
    die("unknown mode (table | fwdbwd | train | lora-table | lora-fwdbwd | lora-train)", a.mode);
    return 2;
}
