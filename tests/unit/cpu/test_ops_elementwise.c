/* test_ops_elementwise.c — the second half of the op tests (see test_ops.c for tolerances, checks
 * and ZT_TEST_DEVICE): GELU, add, accumulate, embeddings, softmax + cross-entropy, AdamW, chunked sums of squares.
 * Output: one line per case, `PASS name (max err E)` or `FAIL name: reason`; exit 1 if any failed. */
#include "ops_harness.h"

/* Limits per op, {forward, backward} as normalized errors, about 5x the worst fp32 error measured
 * over this file's cases (see test_ops.c; re-measure with ZT_OPS_MEASURE=1). add / accumulate /
 * embed_fwd are one rounded float addition: 1.2e-7 is 2 ulp of the largest value. */
static const op_tol TOL_EXACT = {0, 0};                  /* sumsq_chunks: specified bit for bit */
static const op_tol TOL_GELU_FWD = {1e-7, 0};            /* fwd measured 1.5e-8 */
static const op_tol TOL_GELU_BWD = {0, 1e-6};            /* bwd measured 1.5e-7 (0.0447 for 0.044715: ~1e-5) */
static const op_tol TOL_ADD = {1.2e-7, 0};               /* fwd measured 3.9e-8 */
static const op_tol TOL_ACCUMULATE = {1.2e-7, 0};        /* fwd measured 3.9e-8 */
static const op_tol TOL_EMBED_FWD = {1.2e-7, 0};         /* fwd measured 4.6e-8 */
static const op_tol TOL_EMBED_BWD = {0, 5e-7};           /* bwd measured 8.6e-8 (dwpe; dwte 8.1e-8) */
static const op_tol TOL_XENT = {5e-7, 3e-7};             /* losses measured 8.3e-8, dlogits 5.3e-8 */
static const op_tol TOL_ADAMW = {2e-7, 8e-6};            /* param/m/v measured 2.9e-8; the update (new - old,
                                                            vs max |update|) 1.4e-6 at t=1000 (bc1/bc2 as floats) */

/* ================================================================== elementwise: gelu, add, accumulate */

static double gelu_d(double x) {
    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

typedef struct ew_ctx {
    size_t n;
    const float *a, *b; /* gelu: a = inp, b = dout; add / accumulate: a, b */
} ew_ctx;

static void run_gelu_fwd(zt_backend *be, const void *vc, void *out) {
    const ew_ctx *c = vc;
    float *nan = ffill(c->n, NAN);
    float *di = dev_put(be, c->a, c->n * 4), *dout = dev_put(be, nan, c->n * 4);
    be->i->gelu_fwd(be, dout, di, c->n);
    dev_get(be, out, dout, c->n * 4);
    dev_free(be, di);
    dev_free(be, dout);
    free(nan);
}

static void run_gelu_bwd(zt_backend *be, const void *vc, void *out) {
    const ew_ctx *c = vc;
    float *nan = ffill(c->n, NAN);
    float *di = dev_put(be, c->a, c->n * 4), *dy = dev_put(be, c->b, c->n * 4), *dx = dev_put(be, nan, c->n * 4);
    be->i->gelu_bwd(be, dx, di, dy, c->n);
    dev_get(be, out, dx, c->n * 4);
    dev_free(be, di);
    dev_free(be, dy);
    dev_free(be, dx);
    free(nan);
}

static void run_add(zt_backend *be, const void *vc, void *out) {
    const ew_ctx *c = vc;
    float *nan = ffill(c->n, NAN);
    float *da = dev_put(be, c->a, c->n * 4), *db = dev_put(be, c->b, c->n * 4), *dout = dev_put(be, nan, c->n * 4);
    be->i->add(be, dout, da, db, c->n);
    dev_get(be, out, dout, c->n * 4);
    dev_free(be, da);
    dev_free(be, db);
    dev_free(be, dout);
    free(nan);
}

static void run_accumulate(zt_backend *be, const void *vc, void *out) {
    const ew_ctx *c = vc;
    float *da = dev_put(be, c->a, c->n * 4), *db = dev_put(be, c->b, c->n * 4);
    be->i->accumulate(be, da, db, c->n);
    dev_get(be, out, da, c->n * 4);
    dev_free(be, da);
    dev_free(be, db);
}

static void test_gelu(size_t n) {
    float *inp = frand(n, 2.5, 0.0), *dout = frand(n, 1.0, 0.0);
    static const float special[] = {0.0f, 1e-4f, -1e-4f, 1e-2f, -1e-2f, 1.0f, -1.0f, 3.0f, -3.0f, 6.0f, -6.0f, 10.0f, -10.0f, 20.0f, -20.0f};
    for (size_t i = 0; i < sizeof special / sizeof special[0] && i < n; i++) inp[i * 7 % n] = special[i];
    ew_ctx c = {n, inp, dout};
    char name[128];

    float *got = xmalloc(n * 4);
    run_gelu_fwd(g_be, &c, got);
    double *ref = xmalloc(n * sizeof *ref);
    for (size_t i = 0; i < n; i++) ref[i] = gelu_d(inp[i]);
    snprintf(name, sizeof name, "gelu_fwd[n%zu]", n);
    chk k;
    chk_init(&k, TOL_GELU_FWD);
    chk_fwd(&k, "out", got, ref, n);
    chk_done(&k, name);
    check_threads(name, run_gelu_fwd, &c, n * 4);

    /* elementwise: the finite difference of each element separately */
    run_gelu_bwd(g_be, &c, got);
    for (size_t i = 0; i < n; i++) {
        double x = inp[i];
        ref[i] = (gelu_d(x + FD_H) - gelu_d(x - FD_H)) / (2.0 * FD_H) * dout[i];
    }
    snprintf(name, sizeof name, "gelu_bwd[n%zu]", n);
    chk_init(&k, TOL_GELU_BWD);
    chk_bwd(&k, "dinp", got, NULL, ref, n);
    chk_done(&k, name);
    check_threads(name, run_gelu_bwd, &c, n * 4);

    free(inp);
    free(dout);
    free(got);
    free(ref);
}

static void test_add_accumulate(size_t n) {
    float *a = frand(n, 1.0, 0.0), *b = frand(n, 3.0, 0.0);
    ew_ctx c = {n, a, b};
    float *got = xmalloc(n * 4);
    double *ref = xmalloc(n * sizeof *ref);
    for (size_t i = 0; i < n; i++) ref[i] = (double)a[i] + b[i];
    char name[128];
    chk k;

    run_add(g_be, &c, got);
    snprintf(name, sizeof name, "add[n%zu]", n);
    chk_init(&k, TOL_ADD);
    chk_fwd(&k, "out", got, ref, n);
    chk_done(&k, name);
    check_threads(name, run_add, &c, n * 4);

    run_accumulate(g_be, &c, got);
    snprintf(name, sizeof name, "accumulate[n%zu]", n);
    chk_init(&k, TOL_ACCUMULATE);
    chk_fwd(&k, "acc", got, ref, n);
    chk_done(&k, name);
    check_threads(name, run_accumulate, &c, n * 4);

    free(a);
    free(b);
    free(got);
    free(ref);
}

/* ================================================================== embeddings */

typedef struct emb_d {
    int B, T, C;
    const int32_t *tok;
    double *wte, *wpe;
} emb_d;

static void emb_ref(const void *vp, double *out) {
    const emb_d *p = vp;
    for (int bt = 0; bt < p->B * p->T; bt++)
        for (int c = 0; c < p->C; c++)
            out[(size_t)bt * p->C + c] = p->wte[(size_t)p->tok[bt] * p->C + c] + p->wpe[(size_t)(bt % p->T) * p->C + c];
}

typedef struct emb_ctx {
    int B, T, C, Vp, maxT;
    const int32_t *tok;
    const float *wte, *wpe, *dout, *dwte0, *dwpe0;
} emb_ctx;

static void run_emb_fwd(zt_backend *be, const void *vc, void *out) {
    const emb_ctx *c = vc;
    size_t no = (size_t)c->B * c->T * c->C;
    float *nan = ffill(no, NAN);
    int32_t *dt = dev_put(be, c->tok, (size_t)c->B * c->T * sizeof(int32_t));
    float *de = dev_put(be, c->wte, (size_t)c->Vp * c->C * 4), *dp = dev_put(be, c->wpe, (size_t)c->maxT * c->C * 4);
    float *dout = dev_put(be, nan, no * 4);
    be->i->embed_fwd(be, dout, dt, de, dp, c->B, c->T, c->C);
    dev_get(be, out, dout, no * 4);
    dev_free(be, dt);
    dev_free(be, de);
    dev_free(be, dp);
    dev_free(be, dout);
    free(nan);
}

/* blob: dwte(Vp, C) | dwpe(maxT, C) */
static void run_emb_bwd(zt_backend *be, const void *vc, void *out) {
    const emb_ctx *c = vc;
    size_t no = (size_t)c->B * c->T * c->C, ne = (size_t)c->Vp * c->C, np = (size_t)c->maxT * c->C;
    int32_t *dt = dev_put(be, c->tok, (size_t)c->B * c->T * sizeof(int32_t));
    float *dy = dev_put(be, c->dout, no * 4), *ge = dev_put(be, c->dwte0, ne * 4), *gp = dev_put(be, c->dwpe0, np * 4);
    be->i->embed_bwd(be, ge, gp, dy, dt, c->B, c->T, c->C);
    float *o = out;
    dev_get(be, o, ge, ne * 4);
    dev_get(be, o + ne, gp, np * 4);
    dev_free(be, dt);
    dev_free(be, dy);
    dev_free(be, ge);
    dev_free(be, gp);
}

static void test_embed(int B, int T, int C, int V, int Vp, int maxT) {
    size_t nbt = (size_t)B * T, no = nbt * C, ne = (size_t)Vp * C, np = (size_t)maxT * C;
    int32_t *tok = xmalloc(nbt * sizeof *tok);
    for (size_t i = 0; i < nbt; i++) tok[i] = (int32_t)(zt_rng_next(&g_rng) % (uint64_t)V);
    /* repeated tokens, within a row and across rows, and the last vocabulary entry */
    tok[0] = 3 % V;
    tok[2] = 3 % V;
    tok[nbt - 1] = 3 % V;
    tok[1] = V - 1;
    if (nbt > 5) tok[5] = V - 1;
    float *wte = frand(ne, 1.0, 0.0), *wpe = frand(np, 1.0, 0.0), *dout = frand(no, 1.0, 0.0);
    float *dwte0 = frand(ne, 1.0, 0.0); /* accumulates (the LM head wrote it first) */
    float *dwpe0 = xmalloc(np * 4);     /* rows [0, T) overwritten: NaN; rows [T, maxT) untouched */
    for (size_t i = 0; i < np; i++) dwpe0[i] = i < (size_t)T * C ? NAN : (float)(1000 + i);
    emb_ctx c = {B, T, C, Vp, maxT, tok, wte, wpe, dout, dwte0, dwpe0};
    emb_d p = {B, T, C, tok, f2d(wte, ne), f2d(wpe, np)};
    char name[128];

    float *got = xmalloc((ne + np) * 4);
    run_emb_fwd(g_be, &c, got);
    double *ref = xmalloc(no * sizeof *ref);
    emb_ref(&p, ref);
    snprintf(name, sizeof name, "embed_fwd[B%d,T%d,C%d,V%d,Vp%d]", B, T, C, V, Vp);
    chk k;
    chk_init(&k, TOL_EMBED_FWD);
    chk_fwd(&k, "out", got, ref, no);
    chk_done(&k, name);
    check_threads(name, run_emb_fwd, &c, no * 4);

    run_emb_bwd(g_be, &c, got);
    double *wout = f2d(dout, no), *ge = dzeros(ne), *gp = dzeros(np);
    fd_grad(&p, emb_ref, p.wte, ne, wout, no, ge);
    fd_grad(&p, emb_ref, p.wpe, np, wout, no, gp);
    snprintf(name, sizeof name, "embed_bwd[B%d,T%d,C%d,V%d,Vp%d,maxT%d,repeated tokens]", B, T, C, V, Vp, maxT);
    chk_init(&k, TOL_EMBED_BWD);
    chk_bwd(&k, "dwte (added to the old dwte)", got, dwte0, ge, ne);
    chk_bwd(&k, "dwpe rows [0,T) (overwritten)", got + ne, NULL, gp, (size_t)T * C);
    chk_bits(&k, "dwpe rows [T,maxT)", got + ne + (size_t)T * C, dwpe0 + (size_t)T * C, (np - (size_t)T * C) * 4);
    chk_bits(&k, "dwte padded rows [V,Vp)", got + (size_t)V * C, dwte0 + (size_t)V * C, (ne - (size_t)V * C) * 4);
    chk_done(&k, name);
    check_threads(name, run_emb_bwd, &c, (ne + np) * 4);

    free(tok);
    free(wte);
    free(wpe);
    free(dout);
    free(dwte0);
    free(dwpe0);
    free(p.wte);
    free(p.wpe);
    free(got);
    free(ref);
    free(wout);
    free(ge);
    free(gp);
}

/* ================================================================== softmax + cross-entropy */

typedef struct xent_d {
    int N, V, Vp;
    const int32_t *tgt;
    double *logits;
} xent_d;

static void xent_ref(const void *vp, double *losses) {
    const xent_d *p = vp;
    for (int n = 0; n < p->N; n++) {
        const double *x = p->logits + (size_t)n * p->Vp;
        double mx = -INFINITY, s = 0.0;
        for (int v = 0; v < p->V; v++) mx = x[v] > mx ? x[v] : mx;
        for (int v = 0; v < p->V; v++) s += exp(x[v] - mx);
        losses[n] = mx + log(s) - x[p->tgt[n]];
    }
}

typedef struct xent_ctx {
    int N, V, Vp;
    float dscale;
    const int32_t *tgt;
    const float *logits;
} xent_ctx;

/* blob: losses(N) | logits(N, Vp) after the call */
static void run_xent(zt_backend *be, const void *vc, void *out) {
    const xent_ctx *c = vc;
    size_t nl = (size_t)c->N * c->Vp;
    float *nan = ffill(c->N, NAN);
    int32_t *dt = dev_put(be, c->tgt, (size_t)c->N * sizeof(int32_t));
    float *dl = dev_put(be, c->logits, nl * 4), *dloss = dev_put(be, nan, (size_t)c->N * 4);
    be->i->softmax_xent(be, dloss, dl, dt, c->N, c->V, c->Vp, c->dscale, NULL);
    float *o = out;
    dev_get(be, o, dloss, (size_t)c->N * 4);
    dev_get(be, o + c->N, dl, nl * 4);
    dev_free(be, dt);
    dev_free(be, dl);
    dev_free(be, dloss);
    free(nan);
}

/* pad: the value in the padded columns [V, Vp) (NaN: they must never be read into the loss) */
static void test_xent(int N, int V, int Vp, double scale, double shift, float pad, float dscale) {
    size_t nl = (size_t)N * Vp;
    float *logits = frand(nl, scale, shift);
    for (int n = 0; n < N; n++)
        for (int v = V; v < Vp; v++) logits[(size_t)n * Vp + v] = pad;
    int32_t *tgt = xmalloc((size_t)N * sizeof *tgt);
    for (int n = 0; n < N; n++) tgt[n] = (int32_t)(zt_rng_next(&g_rng) % (uint64_t)V);
    tgt[0] = V - 1;
    if (N > 1) tgt[1] = 0;
    xent_ctx c = {N, V, Vp, dscale, tgt, logits};
    xent_d p = {N, V, Vp, tgt, f2d(logits, nl)};
    for (size_t i = 0; i < nl; i++)
        if (isnan(p.logits[i])) p.logits[i] = 0.0; /* padded: the reference never reads them */

    float *got = xmalloc((nl + (size_t)N) * 4);
    run_xent(g_be, &c, got);
    double *ref = xmalloc((size_t)N * sizeof *ref);
    xent_ref(&p, ref);
    char name[160];
    snprintf(name, sizeof name, "softmax_xent[N%d,V%d,Vp%d,logits~%g+%gN,pad=%g,dscale=%g]", N, V, Vp, shift, scale,
             (double)pad, (double)dscale);
    chk k;
    chk_init(&k, TOL_XENT);
    chk_fwd(&k, "losses", got, ref, N);
    double *g = NULL;
    if (dscale == 0.0f) {
        chk_bits(&k, "logits with dscale=0", got + N, logits, nl * 4);
    } else {
        /* dlogits = d(dscale * sum losses)/dlogits; padded columns exactly 0 */
        double *wout = xmalloc((size_t)N * sizeof *wout);
        for (int n = 0; n < N; n++) wout[n] = dscale;
        g = dzeros(nl);
        fd_grad(&p, xent_ref, p.logits, nl, wout, N, g);
        chk_bwd(&k, "dlogits", got + N, NULL, g, nl);
        float *zeros = ffill(nl, 0.0f);
        for (int n = 0; n < N; n++)
            chk_bits(&k, "dlogits padded columns == 0", got + N + (size_t)n * Vp + V, zeros, (size_t)(Vp - V) * 4);
        free(zeros);
        free(wout);
    }
    chk_done(&k, name);
    check_threads(name, run_xent, &c, (nl + (size_t)N) * 4);

    free(logits);
    free(tgt);
    free(p.logits);
    free(got);
    free(ref);
    free(g);
}

/* ================================================================== adamw */

typedef struct adamw_ctx {
    size_t n;
    const float *param, *grad, *m, *v;
    float lr, beta1, beta2, eps, wd, bc1, bc2, gs;
} adamw_ctx;

/* blob: param | m | v */
static void run_adamw(zt_backend *be, const void *vc, void *out) {
    const adamw_ctx *c = vc;
    size_t b = c->n * 4;
    float *dp = dev_put(be, c->param, b), *dg = dev_put(be, c->grad, b), *dm = dev_put(be, c->m, b),
          *dv = dev_put(be, c->v, b);
    be->i->adamw(be, dp, dg, dm, dv, c->n, c->lr, c->beta1, c->beta2, c->eps, c->wd, c->bc1, c->bc2, c->gs);
    float *o = out;
    dev_get(be, o, dp, b);
    dev_get(be, o + c->n, dm, b);
    dev_get(be, o + 2 * c->n, dv, b);
    dev_free(be, dp);
    dev_free(be, dg);
    dev_free(be, dm);
    dev_free(be, dv);
}

static void test_adamw(size_t n, long t, float lr, float eps, float wd, float gs) {
    const float beta1 = 0.9f, beta2 = 0.95f;
    float *param = frand(n, 1.0, 0.0), *grad = frand(n, 0.5, 0.0), *m = frand(n, 0.1, 0.0), *v = frand(n, 0.01, 0.0);
    for (size_t i = 0; i < n; i++) v[i] = fabsf(v[i]) + 1e-6f;
    grad[0] = m[0] = v[0] = 0.0f; /* only the weight decay moves it */
    grad[1] = 0.0f;
    adamw_ctx c = {n, param, grad, m, v, lr, beta1, beta2, eps, wd,
                   (float)(1.0 - pow(beta1, (double)t)), (float)(1.0 - pow(beta2, (double)t)), gs};
    float *got = xmalloc(3 * n * 4);
    run_adamw(g_be, &c, got);
    /* PyTorch AdamW: p -= lr * (mhat / (sqrt(vhat) + eps) + wd * p), mhat = m / bc1, vhat = v / bc2 */
    double *rp = xmalloc(n * sizeof *rp), *rm = xmalloc(n * sizeof *rm), *rv = xmalloc(n * sizeof *rv);
    double *dref = xmalloc(n * sizeof *dref);
    float *dgot = xmalloc(n * 4);
    for (size_t i = 0; i < n; i++) {
        double g = (double)grad[i] * gs;
        rm[i] = (double)beta1 * m[i] + (1.0 - (double)beta1) * g;
        rv[i] = (double)beta2 * v[i] + (1.0 - (double)beta2) * g * g;
        double mhat = rm[i] / c.bc1, vhat = rv[i] / c.bc2;
        dref[i] = -(double)lr * (mhat / (sqrt(vhat) + eps) + (double)wd * param[i]);
        rp[i] = param[i] + dref[i];
        dgot[i] = (float)((double)got[i] - param[i]); /* the difference is exact in double */
    }
    char name[160];
    snprintf(name, sizeof name, "adamw[n%zu,t%ld,lr%g,eps%g,wd%g,grad_scale%g]", n, t, (double)lr, (double)eps,
             (double)wd, (double)gs);
    chk k;
    chk_init(&k, TOL_ADAMW);
    chk_fwd(&k, "param", got, rp, n);
    chk_fwd(&k, "m", got + n, rm, n);
    chk_fwd(&k, "v", got + 2 * n, rv, n);
    chk_arr(&k, "param update (new - old)", dgot, dref, n, k.tol.bwd, maxabs(dref, n));
    chk_done(&k, name);
    check_threads(name, run_adamw, &c, 3 * n * 4);
    free(param);
    free(grad);
    free(m);
    free(v);
    free(got);
    free(rp);
    free(rm);
    free(rv);
    free(dref);
    free(dgot);
}

/* ================================================================== sumsq_chunks */

typedef struct ssq_ctx {
    size_t n, chunk;
    const float *x;
} ssq_ctx;

/* blob: out(nc + 1) doubles, written to backend memory; the extra one is a sentinel that must stay NaN */
static void run_ssq(zt_backend *be, const void *vc, void *out) {
    const ssq_ctx *c = vc;
    size_t nc = (c->n + c->chunk - 1) / c->chunk;
    double *o = out;
    for (size_t i = 0; i <= nc; i++) o[i] = NAN;
    float *dx = dev_put(be, c->x, c->n * 4);
    double *dout = dev_put(be, o, (nc + 1) * sizeof(double));
    be->i->sumsq_chunks(be, dout, dx, c->n, c->chunk);
    dev_get(be, o, dout, (nc + 1) * sizeof(double));
    dev_free(be, dx);
    dev_free(be, dout);
}

static void test_sumsq(size_t n, size_t chunk) {
    float *x = frand(n, 1.0, 0.0);
    ssq_ctx c = {n, chunk, x};
    size_t nc = (n + chunk - 1) / chunk;
    double *got = xmalloc((nc + 1) * sizeof *got);
    run_ssq(g_be, &c, got);
    char name[128];
    snprintf(name, sizeof name, "sumsq_chunks[n%zu,chunk%zu,%zu chunks]", n, chunk, nc);
    chk k;
    chk_init(&k, TOL_EXACT);
    /* specified: squares in double, summed sequentially within a chunk -> exactly this */
    for (size_t ci = 0; ci < nc; ci++) {
        double s = 0.0;
        size_t i1 = (ci + 1) * chunk < n ? (ci + 1) * chunk : n;
        for (size_t i = ci * chunk; i < i1; i++) s += (double)x[i] * (double)x[i];
        double e = fabs(got[ci] - s) / (1.0 + s);
        if (isnan(e)) e = INFINITY;
        if (e > k.err) k.err = e;
        if (got[ci] != s) {
            char msg[200];
            snprintf(msg, sizeof msg, "chunk %zu: got %.17g, sequential double sum %.17g", ci, got[ci], s);
            chk_fail(&k, msg);
        }
    }
    if (!isnan(got[nc])) chk_fail(&k, "wrote past the last chunk");
    chk_done(&k, name);
    check_threads(name, run_ssq, &c, (nc + 1) * sizeof(double));
    free(x);
    free(got);
}

/* ================================================================== main */

int main(void) {
    double t0 = zt_now();
    harness_init(20240612);

    test_gelu(1003);
    test_add_accumulate(1003);

    test_embed(2, 7, 37, 13, 16, 9);
    test_embed(3, 5, 100, 13, 16, 6);

    test_xent(5, 13, 16, 3.0, 0.0, NAN, 0.0f);
    test_xent(5, 13, 16, 3.0, 0.0, NAN, 0.2f);
    test_xent(5, 13, 16, 1.0, 0.0, 50.0f, 1.0f); /* large finite padding must not enter */
    test_xent(3, 200, 256, 2.0, 100.0, 0.0f, 0.37f); /* logits ~100: needs the max shift */
    test_xent(3, 200, 256, 2.0, -100.0, 0.0f, 0.0f);

    test_adamw(1003, 3, 0.05f, 1e-8f, 0.1f, 0.7f);
    test_adamw(1003, 1000, 0.01f, 1e-3f, 0.0f, 1.0f);

    test_sumsq(1000, 64); /* last chunk partial (40) */
    test_sumsq(50, 64);   /* a single partial chunk */
    test_sumsq(128, 64);  /* exact chunks */
    test_sumsq(1001, 7);

    return harness_finish("test_ops_elementwise", t0);
}
