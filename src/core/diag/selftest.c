/* selftest.c — backend self-test against the cpu backend (see selftest.h): the driver, the training check
 * (core/optim/step.c's step on the device and on cpu) and the communicator's exact checks; the op table is
 * selftest_ops.c. */
#include "core/diag/selftest.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/dist/backend_factory.h"
#include "core/model/model.h"
#include "core/model/model_load.h"
#include "core/optim/optim.h"
#include "core/lora/quant.h"
#include "core/optim/step.h"
#include "core/dist/zero.h"
#include "iface/op_math.h"
#include "util/util.h"

/* ------------------------------------------------------------------ training */

/* `steps` AdamW steps of a tiny GPT on synthetic tokens on device `dev`; losses[steps] and the
   final parameters' hash (rank 0's host copy); *params16: the working parameters were 2-byte words (the config's
   train.param_storage "auto": on cuda/cudasim in bf16/fp16) */
/* step.h's batch source: a learnable stream, token t+1 = (token t * 5 + 3) mod V with noise, seeded by (step, j) */
static void selftest_batch(void *ctx, long step, int j, int32_t *in, int32_t *tg) {
    const int n = *(const int *)ctx; /* B * T */
    zt_rng r;
    zt_rng_seed(&r, (uint64_t)step * 1000 + (uint64_t)j);
    for (int i = 0; i < n + 1; i++) {
        int32_t prev = i ? in[i - 1] : (int32_t)(zt_rng_next(&r) % 97);
        int32_t t = zt_rng_uniform(&r) < 0.8 ? (prev * 5 + 3) % 97 : (int32_t)(zt_rng_next(&r) % 97);
        if (i < n) in[i] = i ? t : prev;
        if (i) tg[i - 1] = i < n ? in[i] : t;
    }
}

static void train_run(const char *device, int threads, int steps, int prec, int lora, double *losses, uint64_t *hash,
                      int *params16) {
    char err[ZT_ERR_BUF];
    zt_config c;
    if (zt_config_load_string(&c, "", err, sizeof err)) zt_panic(__FILE__, __LINE__, "%s", err);
    const int N = zt_world();
    c.model.n_layer = 2; c.model.n_head = 2; c.model.n_embd = 64; /* head size 32: fused attention on cuda */ c.model.vocab_size = 97; c.model.block_size = 16;
    c.train.micro_batch = 2; c.train.seq_len = 16; c.train.global_batch = 2 * N * 2; c.zero.stage = 2;
    c.train.steps = steps; c.train.lr = 3e-3; c.train.warmup_steps = 0; snprintf(c.train.schedule, sizeof c.train.schedule, "constant");
    c.train.beta1 = 0.9; c.train.beta2 = 0.95; c.train.eps = 1e-8; c.train.weight_decay = 0.1; c.train.grad_clip = 1.0;
    snprintf(c.device, sizeof c.device, "%s", device);
    snprintf(c.precision, sizeof c.precision, "%s", zt_selftest_prec_name(prec));
    if (lora) { /* QLoRA with dropout: adapters r 4 on an nf4_dq base */
        c.lora.enabled = 1;
        snprintf(c.lora.base, sizeof c.lora.base, "selftest");
        c.lora.rank = 4;
        c.lora.alpha = 8;
        c.lora.dropout = 0.1;
        snprintf(c.lora.quant, sizeof c.lora.quant, "nf4_dq");
    }
    zt_backend *be = zt_backend_create(device, threads, err, sizeof err);
    zt_comm *comm = be ? zt_comm_create("auto", be, err, sizeof err) : NULL;
    if (!comm) zt_user_error_all("%s", err);
    zt_model_shape s;
    zt_model_shape_from_config(&c, &s);
    zt_model m;
    zt_zero z;
    zt_zero_init(&z, &c, &m, be, comm, &s);
    *params16 = m.params16 != NULL;
    float *h = zt_calloc(z.plan.padded > m.table.total ? z.plan.padded : m.table.total, sizeof(float));
    zt_model_init_weights_host(&m.table, &s, h, 0.02f, 7);
    if (lora) {
        float *flat = be->i->alloc(be, m.table.total * sizeof(float));
        be->i->to_device(be, flat, h, m.table.total * sizeof(float));
        if (zt_lora_base_set(&m, flat, err, sizeof err)) zt_panic(__FILE__, __LINE__, "%s", err);
        be->i->free(be, flat);
        zt_lora_init_host(&m.lora->table, 7, h);
        be->i->to_device(be, m.lora->params, h, m.lora->table.total * sizeof(float));
        m.lora->seed = 7;
    } else { /* the flat parameters, or (2-byte parameters: cuda with train.param_storage auto) the master's range */
        size_t base, n;
        float *dst = zt_zero_init_target(&z, &m, &base, &n);
        be->i->to_device(be, dst, h + base, n * sizeof(float));
    }
    zt_zero_master_init(&z, &m);
    zt_step st;
    int bt = c.train.micro_batch * c.train.seq_len;
    zt_step_init(&st, &m, &z, &c, selftest_batch, &bt);
    for (int step = 0; step < steps; step++) losses[step] = zt_step_run(&st, step).loss;
    zt_step_free(&st);
    const size_t tn = zt_model_ttable(&m)->total; /* what was trained */
    zt_model_tparams_to_host(&m, 0, tn, h);
    uint64_t fnv = 1469598103934665603ull;
    const unsigned char *p = (const unsigned char *)h;
    for (size_t i = 0; i < tn * sizeof(float); i++) fnv = (fnv ^ p[i]) * 1099511628211ull;
    *hash = fnv;
    free(h);
    zt_zero_free(&z, &m);
    zt_comm_destroy(comm);
    zt_backend_destroy(be);
}

static int run_train(const char *device, int threads, int steps, int prec, int lora, FILE *out) {
    double *lc = zt_calloc((size_t)steps, sizeof(double)), *l1 = zt_calloc((size_t)steps, sizeof(double));
    double *l2 = zt_calloc((size_t)steps, sizeof(double));
    uint64_t hc, h1, h2;
    int p16 = 0;
    train_run("cpu", threads, steps, prec, lora, lc, &hc, &p16);
    train_run(device, threads, steps, prec, lora, l1, &h1, &p16);
    train_run(device, threads, steps, prec, lora, l2, &h2, &p16);
    /* relative, per step: measured under the harness (docs/gpu-status.md): fp32 5.7e-8, bf16 5.6e-4, fp16
       8.5e-5 (a last-bit difference of the fp32 GEMMs flips a bf16/fp16 rounding now and then; on cuda and
       cudasim the fused attention keeps its probabilities fp32 where the cpu backend stores them rounded) */
    const double tol = prec == ZT_PREC_BF16 ? 2e-3 : prec == ZT_PREC_FP16 ? 2e-4 : 1e-5;
    double worst = 0;
    for (int i = 0; i < steps; i++) {
        double r = fabs(l1[i] - lc[i]) / fabs(lc[i]);
        if (!(r <= worst)) worst = r;
    }
    int same = memcmp(l1, l2, (size_t)steps * sizeof(double)) == 0 && h1 == h2;
    int fails = !(worst <= tol) + !same + !(lc[steps - 1] < lc[0]);
    if (out) {
        fprintf(out, "\ntrain: tiny GPT (L2 C64 V97), %d ranks, ZeRO-2 ordered, %d steps, %s%s%s\n", zt_world(), steps,
                zt_selftest_prec_name(prec), p16 ? " (2-byte working parameters)" : "",
                lora ? ", QLoRA (r 4, nf4_dq base, dropout 0.1)" : "");
        fprintf(out, "  loss step 1 / %d: cpu %.6f / %.6f, %s %.6f / %.6f\n", steps, lc[0], lc[steps - 1], device, l1[0],
                l1[steps - 1]);
        fprintf(out, "  %-40s %.2e (limit %.0e)  %s\n", "max relative loss difference vs cpu", worst, tol,
                worst <= tol ? "PASS" : "FAIL");
        fprintf(out, "  %-40s %s  %s\n", "two runs: identical losses and params", same ? "yes" : "NO",
                same ? "PASS" : "FAIL");
        fprintf(out, "  %-40s %s  %s\n", "loss decreases (cpu)", lc[steps - 1] < lc[0] ? "yes" : "NO",
                lc[steps - 1] < lc[0] ? "PASS" : "FAIL");
    }
    free(lc);
    free(l1);
    free(l2);
    return fails;
}

/* ------------------------------------------------------------------ communicator */

static int run_comm(const char *device, int threads, FILE *out) {
    char err[ZT_ERR_BUF];
    zt_backend *be = zt_backend_create(device, threads, err, sizeof err);
    zt_comm *c = be ? zt_comm_create("auto", be, err, sizeof err) : NULL;
    if (!c) zt_user_error_all("%s", err);
    const int R = c->size, me = c->rank;
    const size_t n = 1000;
    float *h = zt_malloc(n * (size_t)R * sizeof(float)), *g = zt_malloc(n * (size_t)R * sizeof(float));
    float *d = be->i->alloc(be, n * (size_t)R * sizeof(float)), *e = be->i->alloc(be, n * (size_t)R * sizeof(float));
    long wrong[7] = {0};
    /* values are small integers: every sum is exact in fp32 */
#define FILL(expr) do { for (size_t i = 0; i < n * (size_t)R; i++) h[i] = (float)(expr); \
    be->i->to_device(be, d, h, n * (size_t)R * sizeof(float)); } while (0)
    FILL((me + 1) * (int)(i % 7));
    c->i->all_reduce(c, d, e, n, ZT_F32);
    be->i->to_host(be, g, e, (n) * sizeof(float));
    for (size_t i = 0; i < n; i++) wrong[0] += g[i] != (float)(R * (R + 1) / 2 * (int)(i % 7));
    c->i->reduce_scatter(c, d, e, n, ZT_F32);
    be->i->to_host(be, g, e, (n) * sizeof(float));
    for (size_t i = 0; i < n; i++) wrong[1] += g[i] != (float)(R * (R + 1) / 2 * (int)((me * n + i) % 7));
    FILL(me * 10000 + (int)i);
    c->i->all_gather(c, d, e, n, ZT_F32);
    be->i->to_host(be, g, e, (n * (size_t)R) * sizeof(float));
    for (size_t i = 0; i < n * (size_t)R; i++) wrong[2] += g[i] != (float)((int)(i / n) * 10000 + (int)(i % n));
    c->i->all_to_all(c, d, e, n, ZT_F32);
    be->i->to_host(be, g, e, (n * (size_t)R) * sizeof(float));
    for (size_t i = 0; i < n * (size_t)R; i++) wrong[3] += g[i] != (float)((int)(i / n) * 10000 + (int)(me * n + i % n));
    if (me == 0) FILL(42 + (int)(i % 11));
    c->i->broadcast(c, d, n, ZT_F32, 0);
    be->i->to_host(be, g, d, (n) * sizeof(float));
    for (size_t i = 0; i < n; i++) wrong[4] += g[i] != (float)(42 + (int)(i % 11));
    /* grouped point-to-point: rank r sends r+1 elements ... a ring with unequal sizes */
    FILL(me * 100 + (int)(i % 50));
    const int to = (me + 1) % R, from = (me + R - 1) % R;
    c->i->group_start(c);
    c->i->send(c, d, (size_t)me + 1, ZT_F32, to);
    c->i->recv(c, e, (size_t)from + 1, ZT_F32, from);
    c->i->group_end(c);
    c->i->wait(c, c->i->record(c));
    be->i->to_host(be, g, e, ((size_t)from + 1) * sizeof(float));
    for (int i = 0; i <= from; i++) wrong[5] += g[i] != (float)(from * 100 + i % 50);
    /* rooted reduce to the last rank */
    FILL(me + 1);
    c->i->group_start(c);
    c->i->reduce(c, d, e, n, ZT_F32, R - 1);
    c->i->group_end(c);
    zt_comm_event ev = c->i->record(c);
    while (!c->i->query(c, ev)) {}
    c->i->wait(c, ev);
    if (me == R - 1) {
        be->i->to_host(be, g, e, (n) * sizeof(float));
        for (size_t i = 0; i < n; i++) wrong[6] += g[i] != (float)(R * (R + 1) / 2);
    }
#undef FILL
    long all[7];
    MPI_Allreduce(wrong, all, 7, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    static const char *names[7] = {"all_reduce", "reduce_scatter", "all_gather", "all_to_all", "broadcast",
                                   "grouped send/recv", "grouped reduce"};
    int fails = 0;
    if (out) fprintf(out, "\ncomm: %s over %d rank%s, exact integer checks (#wrong)\n", c->i->name, R, R == 1 ? "" : "s");
    for (int k = 0; k < 7; k++) {
        fails += all[k] != 0;
        if (out) fprintf(out, "  %-20s %8ld  %s\n", names[k], all[k], all[k] ? "FAIL" : "PASS");
    }
    free(h);
    free(g);
    be->i->free(be, d);
    be->i->free(be, e);
    zt_comm_destroy(c);
    zt_backend_destroy(be);
    return fails;
}

int zt_selftest_run(const zt_selftest_opts *o, char *err, size_t errlen) {
    zt_backend *dev = zt_backend_create(o->device, o->threads, err, errlen);
    if (zt_any_failed(dev == NULL, err, errlen)) return -1;
    zt_backend *cpu = zt_backend_create("cpu", o->threads, err, errlen);
    FILE *out = o->out;
    int fails = 0;
    if (out) {
        char d1[256], d2[256];
        zt_backend_describe(dev, d1, sizeof d1);
        zt_backend_describe(cpu, d2, sizeof d2);
        fprintf(out, "ztrain selftest: %s\n  against %s\n\n", d1, d2);
    }
    for (int p = 0; p < 3; p++)
        if (o->ops && (o->precisions >> p & 1)) {
            if (out && p) fprintf(out, "\n");
            fails += zt_selftest_ops(cpu, dev, p, out);
        }
    zt_backend_destroy(dev);
    zt_backend_destroy(cpu);
    for (int p = 0; p < 3; p++)
        if (o->train_steps > 0 && (o->precisions >> p & 1)) fails += run_train(o->device, o->threads, o->train_steps, p, 0, out);
    if (o->train_steps > 0 && (o->precisions & 1)) /* (Q)LoRA, fp32: half the steps */
        fails += run_train(o->device, o->threads, o->train_steps > 1 ? o->train_steps / 2 : 1, ZT_PREC_FP32, 1, out);
    if (o->comm) fails += run_comm(o->device, o->threads, out);
    if (out) fprintf(out, "\nselftest %s: %d check%s failed\n", fails ? "FAILED" : "passed", fails, fails == 1 ? "" : "s");
    return fails;
}
