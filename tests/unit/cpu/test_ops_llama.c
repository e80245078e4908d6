/* test_ops_llama.c — the Llama family's ops of the backend interface (iface/backend.h): RMSNorm, rotary position
 * embedding and SwiGLU, forward and backward, and grouped-query attention (NKV key/value heads for NH query heads:
 * multi-query NKV = 1, grouped NKV = 2, 3, multi-head NKV = NH) in the materialised forward and backward and in
 * one-token decoding; the same attention cases bidirectional under key padding masks (the encoders' slots,
 * attention_bidir_*; the encoders' other ops: test_ops_encoder.c). The conventions are test_ops.c's
 * (ops_harness.h): ZT_TEST_DEVICE picks the backend (default cpu; devsim runs the same cases on simulated device
 * memory and must equal the cpu bit for bit);
 *
 *  - forward ops against double-precision references written here from the same float inputs:
 *    max |ours - ref| <= tol_fwd * (1 + max |ref|);
 *  - backward ops against central finite differences of the double reference forward on L = sum(w_out * out)
 *    (w_out = the random dout given to the op): max |ours - fd| <= tol_bwd * max |fd|;
 *  - overwritten outputs are prefilled with NaN, accumulated ones with random values, memory an op must not
 *    touch (the value heads under rope, the decode caches' rows not yet written) is compared bit for bit;
 *  - thread-count invariance: each case rerun with 1, 2 and 3 threads, bit-identical (memcmp), which also
 *    shows the runs are deterministic;
 *  - multi-head attention through the grouped-query slots (NKV == NH) is bit-identical to the multi-head
 *    attention the cpu backend had before the NKV parameter (a copy of that code is kept below), so GPT-2's
 *    results do not change; decoding equals the forward's row bit for bit, as iface/backend.h promises.
 *
 * ZT_OPS_MEASURE=1 prints every part's error and limit. Output: one line per case, PASS/FAIL (check.h). */
#include "ops_harness.h"

#include "cpu/cpu_math.h"

/* Limits {forward, backward} as normalized errors: about 5x the worst fp32 error measured over this file's cases
 * against the float64 reference (cpu backend, 2 threads; devsim runs the same arithmetic), measured with
 * ZT_OPS_MEASURE=1. */
static const op_tol TOL_RMSNORM_FWD = {5e-7, 0};     /* fwd measured 9.1e-8 (out; rstd 6.2e-8) */
static const op_tol TOL_RMSNORM_BWD = {0, 1.5e-6};   /* bwd measured 3.0e-7 (dinp; dw 1.1e-7) */
static const op_tol TOL_ROPE = {1.5e-7, 2e-7};       /* fwd measured 2.9e-8, inverse (bwd) 3.7e-8 */
static const op_tol TOL_SWIGLU_FWD = {2e-7, 0};      /* fwd measured 4.3e-8 */
static const op_tol TOL_SWIGLU_BWD = {0, 4e-7};      /* bwd measured 7.7e-8 (dgate; dup 3.6e-8) */
static const op_tol TOL_GQA_FWD = {5e-7, 0};         /* fwd measured 9.2e-8 (out; att 8.8e-8) */
static const op_tol TOL_GQA_BWD = {0, 1.1e-6};       /* bwd measured 2.2e-7 (dqkv) */
static const op_tol TOL_GQA_DECODE = {6.5e-7, 0};    /* fwd measured 1.3e-7 (out, T130) */
static const op_tol TOL_EXACT = {0, 0};

/* ================================================================== RMSNorm */

typedef struct rms_ctx {
    int N, C;
    float eps;
    const float *inp, *w, *dout, *dinp0;
} rms_ctx;

typedef struct rms_d {
    int N, C;
    double eps;
    double *inp, *w;
} rms_d;

static void rms_ref(const rms_d *p, double *out, double *rstd) {
    for (int n = 0; n < p->N; n++) {
        const double *x = p->inp + (size_t)n * p->C;
        double ss = 0.0;
        for (int c = 0; c < p->C; c++) ss += x[c] * x[c];
        const double r = 1.0 / sqrt(ss / p->C + p->eps);
        for (int c = 0; c < p->C; c++) out[(size_t)n * p->C + c] = x[c] * r * p->w[c];
        if (rstd) rstd[n] = r;
    }
}

static void rms_ref_out(const void *vp, double *out) { rms_ref(vp, out, NULL); }

/* blob: out(N, C) | rstd(N) */
static void run_rms_fwd(zt_backend *be, const void *vc, void *out) {
    const rms_ctx *c = vc;
    const size_t nx = (size_t)c->N * c->C;
    float *nan = ffill(nx, NAN);
    float *dx = dev_put(be, c->inp, nx * 4), *dw = dev_put(be, c->w, (size_t)c->C * 4);
    float *dout = dev_put(be, nan, nx * 4), *dr = dev_put(be, nan, (size_t)c->N * 4);
    be->i->rmsnorm_fwd(be, dout, dr, dx, dw, c->N, c->C, c->eps);
    float *o = out;
    dev_get(be, o, dout, nx * 4);
    dev_get(be, o + nx, dr, (size_t)c->N * 4);
    void *all[] = {dx, dw, dout, dr};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) dev_free(be, all[i]);
    free(nan);
}

/* blob: dinp(N, C) | dw(C); rstd from the backend's own forward */
static void run_rms_bwd(zt_backend *be, const void *vc, void *out) {
    const rms_ctx *c = vc;
    const size_t nx = (size_t)c->N * c->C;
    float *nan = ffill(nx, NAN);
    float *dx = dev_put(be, c->inp, nx * 4), *dw = dev_put(be, c->w, (size_t)c->C * 4);
    float *dy = dev_put(be, NULL, nx * 4), *dr = dev_put(be, NULL, (size_t)c->N * 4);
    be->i->rmsnorm_fwd(be, dy, dr, dx, dw, c->N, c->C, c->eps);
    float *ddout = dev_put(be, c->dout, nx * 4), *ddinp = dev_put(be, c->dinp0, nx * 4);
    float *gw = dev_put(be, nan, (size_t)c->C * 4);
    be->i->rmsnorm_bwd(be, ddinp, gw, ddout, dx, dw, dr, c->N, c->C);
    float *o = out;
    dev_get(be, o, ddinp, nx * 4);
    dev_get(be, o + nx, gw, (size_t)c->C * 4);
    void *all[] = {dx, dw, dy, dr, ddout, ddinp, gw};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) dev_free(be, all[i]);
    free(nan);
}

static void test_rmsnorm(int N, int C, float eps) {
    const size_t nx = (size_t)N * C;
    /* rows of different scales (and means: RMSNorm does not centre), the last one all zeros (rstd = 1/sqrt(eps)) */
    float *inp = xmalloc(nx * 4);
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++)
            inp[(size_t)n * C + c] = n == N - 1 && N > 2 ? 0.0f
                                                         : (float)(0.5 * (n - 1) + (0.2 + 0.9 * n) * zt_rng_normal(&g_rng));
    float *w = frand(C, 0.3, 1.0), *dout = frand(nx, 1.0, 0.0), *dinp0 = frand(nx, 1.0, 0.0);
    rms_ctx c = {N, C, eps, inp, w, dout, dinp0};
    rms_d p = {N, C, (double)eps, f2d(inp, nx), f2d(w, C)};
    char name[128];

    float *got = xmalloc((nx + N) * 4);
    run_rms_fwd(g_be, &c, got);
    double *ref = xmalloc(nx * sizeof *ref), *rstd = xmalloc(N * sizeof *rstd);
    rms_ref(&p, ref, rstd);
    snprintf(name, sizeof name, "rmsnorm_fwd[N%d,C%d,eps%g]", N, C, (double)eps);
    chk k;
    chk_init(&k, TOL_RMSNORM_FWD);
    chk_fwd(&k, "rmsnorm_fwd out", got, ref, nx);
    /* rstd of the zero row is 1/sqrt(eps), up to 1e3: relative to itself */
    chk_arr(&k, "rmsnorm_fwd rstd", got + nx, rstd, N, k.tol.fwd, 1.0 + maxabs(rstd, N));
    chk_done(&k, name);
    check_threads(name, run_rms_fwd, &c, (nx + N) * 4);

    float *gotb = xmalloc((nx + C) * 4);
    run_rms_bwd(g_be, &c, gotb);
    double *wout = f2d(dout, nx), *gi = dzeros(nx), *gw = dzeros(C);
    fd_grad(&p, rms_ref_out, p.inp, nx, wout, nx, gi);
    fd_grad(&p, rms_ref_out, p.w, C, wout, nx, gw);
    snprintf(name, sizeof name, "rmsnorm_bwd[N%d,C%d,eps%g]", N, C, (double)eps);
    chk_init(&k, TOL_RMSNORM_BWD);
    chk_bwd(&k, "rmsnorm_bwd dinp (added to the old dinp)", gotb, dinp0, gi, nx);
    chk_bwd(&k, "rmsnorm_bwd dw (overwritten)", gotb + nx, NULL, gw, C);
    chk_done(&k, name);
    check_threads(name, run_rms_bwd, &c, (nx + C) * 4);

    void *fr[] = {inp, w, dout, dinp0, p.inp, p.w, got, ref, rstd, gotb, wout, gi, gw};
    for (size_t i = 0; i < sizeof fr / sizeof fr[0]; i++) free(fr[i]);
}

/* ================================================================== rotary position embedding */

typedef struct rope_ctx {
    int B, T, pos0, NH, NKV, hs, maxT, inverse;
    const float *qkv, *cs;
} rope_ctx;

typedef struct rope_d {
    int B, T, pos0, NH, NKV, hs;
    double *qkv;
    const double *cs;
} rope_d;

/* cs(maxT, hs/2, 2): Llama's frequencies theta^(-2i/hs), cos and sin in double, stored as float */
static float *rope_table(int maxT, int hs, double theta) {
    const int half = hs / 2;
    float *cs = xmalloc((size_t)maxT * half * 2 * 4);
    for (int p = 0; p < maxT; p++)
        for (int i = 0; i < half; i++) {
            const double a = p * pow(theta, -2.0 * i / hs);
            cs[((size_t)p * half + i) * 2] = (float)cos(a);
            cs[((size_t)p * half + i) * 2 + 1] = (float)sin(a);
        }
    return cs;
}

/* out = qkv with the query and key heads rotated (the value heads copied) */
static void rope_ref(const rope_d *p, double *out, int inverse) {
    const int half = p->hs / 2, W = (p->NH + 2 * p->NKV) * p->hs;
    const double sg = inverse ? -1.0 : 1.0;
    for (int bt = 0; bt < p->B * p->T; bt++) {
        const double *x = p->qkv + (size_t)bt * W, *tab = p->cs + (size_t)(p->pos0 + bt % p->T) * half * 2;
        double *o = out + (size_t)bt * W;
        for (int j = 0; j < W; j++) o[j] = x[j];
        for (int h = 0; h < p->NH + p->NKV; h++)
            for (int i = 0; i < half; i++) {
                const double c = tab[2 * i], s = sg * tab[2 * i + 1];
                const double x1 = x[h * p->hs + i], x2 = x[h * p->hs + i + half];
                o[h * p->hs + i] = x1 * c - x2 * s;
                o[h * p->hs + i + half] = x2 * c + x1 * s;
            }
    }
}

static void rope_ref_out(const void *vp, double *out) { rope_ref(vp, out, 0); }

/* blob: qkv after rope(inverse) */
static void run_rope(zt_backend *be, const void *vc, void *out) {
    const rope_ctx *c = vc;
    const size_t n = (size_t)c->B * c->T * (c->NH + 2 * c->NKV) * c->hs, ncs = (size_t)c->maxT * c->hs;
    float *d = dev_put(be, c->qkv, n * 4), *dcs = dev_put(be, c->cs, ncs * 4);
    be->i->rope(be, d, dcs, c->B, c->T, c->pos0, c->NH, c->NKV, c->hs, c->inverse);
    dev_get(be, out, d, n * 4);
    dev_free(be, d);
    dev_free(be, dcs);
}

static void test_rope(int B, int T, int pos0, int NH, int NKV, int hs) {
    const int maxT = pos0 + T + 3, W = (NH + 2 * NKV) * hs;
    const size_t n = (size_t)B * T * W, ncs = (size_t)maxT * hs;
    float *qkv = frand(n, 1.0, 0.0), *dqkv = frand(n, 1.0, 0.0), *cs = rope_table(maxT, hs, 10000.0);
    double *csd = f2d(cs, ncs);
    rope_ctx c = {B, T, pos0, NH, NKV, hs, maxT, 0, qkv, cs};
    rope_d p = {B, T, pos0, NH, NKV, hs, f2d(qkv, n), csd};
    char name[128];

    /* forward: the rotation of the query and key heads; the value heads bit for bit as they were */
    float *got = xmalloc(n * 4);
    run_rope(g_be, &c, got);
    double *ref = xmalloc(n * sizeof *ref);
    rope_ref(&p, ref, 0);
    snprintf(name, sizeof name, "rope[B%d,T%d,pos0 %d,NH%d,NKV%d,hs%d]", B, T, pos0, NH, NKV, hs);
    chk k;
    chk_init(&k, TOL_ROPE);
    chk_fwd(&k, "rope qkv", got, ref, n);
    for (int bt = 0; bt < B * T; bt++) {
        const size_t v0 = (size_t)bt * W + (size_t)(NH + NKV) * hs;
        chk_bits(&k, "rope: the value heads", got + v0, qkv + v0, (size_t)NKV * hs * 4);
    }
    chk_done(&k, name);
    check_threads(name, run_rope, &c, n * 4);

    /* backward: inverse = 1 on dqkv is the gradient of L = sum(dqkv * rope(qkv)) (the value heads pass through) */
    rope_ctx cb = c;
    cb.inverse = 1;
    cb.qkv = dqkv;
    float *gotb = xmalloc(n * 4);
    run_rope(g_be, &cb, gotb);
    double *wout = f2d(dqkv, n), *g = dzeros(n);
    fd_grad(&p, rope_ref_out, p.qkv, n, wout, n, g);
    snprintf(name, sizeof name, "rope[inverse,B%d,T%d,pos0 %d,NH%d,NKV%d,hs%d]", B, T, pos0, NH, NKV, hs);
    chk_init(&k, TOL_ROPE);
    chk_bwd(&k, "rope inverse: dqkv", gotb, NULL, g, n);
    chk_done(&k, name);
    check_threads(name, run_rope, &cb, n * 4);

    void *fr[] = {qkv, dqkv, cs, csd, p.qkv, got, ref, gotb, wout, g};
    for (size_t i = 0; i < sizeof fr / sizeof fr[0]; i++) free(fr[i]);
}

/* ================================================================== SwiGLU */

typedef struct sw_ctx {
    int N, I;
    const float *inp, *dout;
} sw_ctx;

typedef struct sw_d {
    int N, I;
    double *inp;
} sw_d;

static void sw_ref(const void *vp, double *out) {
    const sw_d *p = vp;
    for (int n = 0; n < p->N; n++)
        for (int j = 0; j < p->I; j++) {
            const double g = p->inp[(size_t)n * 2 * p->I + j], u = p->inp[(size_t)n * 2 * p->I + p->I + j];
            out[(size_t)n * p->I + j] = g / (1.0 + exp(-g)) * u;
        }
}

static void run_sw_fwd(zt_backend *be, const void *vc, void *out) {
    const sw_ctx *c = vc;
    const size_t ni = (size_t)c->N * 2 * c->I, no = (size_t)c->N * c->I;
    float *nan = ffill(no, NAN);
    float *di = dev_put(be, c->inp, ni * 4), *d = dev_put(be, nan, no * 4);
    be->i->swiglu_fwd(be, d, di, c->N, c->I);
    dev_get(be, out, d, no * 4);
    dev_free(be, di);
    dev_free(be, d);
    free(nan);
}

static void run_sw_bwd(zt_backend *be, const void *vc, void *out) {
    const sw_ctx *c = vc;
    const size_t ni = (size_t)c->N * 2 * c->I, no = (size_t)c->N * c->I;
    float *nan = ffill(ni, NAN);
    float *di = dev_put(be, c->inp, ni * 4), *dy = dev_put(be, c->dout, no * 4), *dd = dev_put(be, nan, ni * 4);
    be->i->swiglu_bwd(be, dd, di, dy, c->N, c->I);
    dev_get(be, out, dd, ni * 4);
    dev_free(be, di);
    dev_free(be, dy);
    dev_free(be, dd);
    free(nan);
}

static void test_swiglu(int N, int I) {
    const size_t ni = (size_t)N * 2 * I, no = (size_t)N * I;
    float *inp = frand(ni, 2.5, 0.0), *dout = frand(no, 1.0, 0.0);
    /* gates far out on both sides: silu's exp saturates (zt_expf clamps), the result must stay finite */
    static const float far[] = {-95.0f, -40.0f, -17.0f, 17.0f, 40.0f, 95.0f};
    for (size_t i = 0; i < sizeof far / sizeof far[0] && i < (size_t)I; i++) inp[i] = far[i];
    sw_ctx c = {N, I, inp, dout};
    sw_d p = {N, I, f2d(inp, ni)};
    char name[128];

    float *got = xmalloc(no * 4);
    run_sw_fwd(g_be, &c, got);
    double *ref = xmalloc(no * sizeof *ref);
    sw_ref(&p, ref);
    snprintf(name, sizeof name, "swiglu_fwd[N%d,I%d]", N, I);
    chk k;
    chk_init(&k, TOL_SWIGLU_FWD);
    chk_fwd(&k, "swiglu_fwd out", got, ref, no);
    chk_done(&k, name);
    check_threads(name, run_sw_fwd, &c, no * 4);

    float *gotb = xmalloc(ni * 4);
    run_sw_bwd(g_be, &c, gotb);
    double *wout = f2d(dout, no), *g = dzeros(ni);
    fd_grad(&p, sw_ref, p.inp, ni, wout, no, g);
    /* dgate and dup as two parts (row by row: dinp is [dgate | dup]) */
    double *gg = xmalloc(no * sizeof *gg), *gu = xmalloc(no * sizeof *gu);
    float *bg = xmalloc(no * 4), *bu = xmalloc(no * 4);
    for (int n = 0; n < N; n++)
        for (int j = 0; j < I; j++) {
            gg[(size_t)n * I + j] = g[(size_t)n * 2 * I + j];
            gu[(size_t)n * I + j] = g[(size_t)n * 2 * I + I + j];
            bg[(size_t)n * I + j] = gotb[(size_t)n * 2 * I + j];
            bu[(size_t)n * I + j] = gotb[(size_t)n * 2 * I + I + j];
        }
    snprintf(name, sizeof name, "swiglu_bwd[N%d,I%d]", N, I);
    chk_init(&k, TOL_SWIGLU_BWD);
    chk_bwd(&k, "swiglu_bwd dgate (overwritten)", bg, NULL, gg, no);
    chk_bwd(&k, "swiglu_bwd dup (overwritten)", bu, NULL, gu, no);
    chk_done(&k, name);
    check_threads(name, run_sw_bwd, &c, ni * 4);

    void *fr[] = {inp, dout, p.inp, got, ref, gotb, wout, g, gg, gu, bg, bu};
    for (size_t i = 0; i < sizeof fr / sizeof fr[0]; i++) free(fr[i]);
}

/* ================================================================== grouped-query attention */

/* kvalid (B, T) NULL: causal attention (attention_fwd / _bwd); else the encoders' bidirectional attention with that
   key padding mask (attention_bidir_fwd / _bwd) */
typedef struct gqa_ctx {
    int B, T, C, NH, NKV;
    const float *qkv, *dout;
    const int32_t *kvalid;
} gqa_ctx;

typedef struct gqa_d {
    int B, T, C, NH, NKV;
    double *qkv;
    const int32_t *kvalid;
} gqa_d;

static size_t gqa_width(int C, int NH, int NKV) { return (size_t)(NH + 2 * NKV) * (C / NH); }

/* query head h of row t attends with key/value head h / (NH / NKV) over rows 0..t (causal), or over the valid rows
   of its sequence (a sequence without any: out and att 0) */
static void gqa_ref(const gqa_d *p, double *out, double *att) {
    const int B = p->B, T = p->T, C = p->C, NH = p->NH, NKV = p->NKV, hs = C / NH, G = NH / NKV;
    const size_t W = gqa_width(C, NH, NKV);
    const double scale = 1.0 / sqrt((double)hs);
    double *s = xmalloc((size_t)T * sizeof *s);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const int kh = h / G;
            for (int t = 0; t < T; t++) {
                const double *q = p->qkv + ((size_t)b * T + t) * W + (size_t)h * hs;
                double mx = -INFINITY, sum = 0.0;
                for (int t2 = 0; t2 < T; t2++) { /* s[t2] = 0 (and no weight) at a key the row does not see */
                    s[t2] = 0.0;
                    if (p->kvalid ? !p->kvalid[(size_t)b * T + t2] : t2 > t) continue;
                    const double *kk = p->qkv + ((size_t)b * T + t2) * W + C + (size_t)kh * hs;
                    double d = 0.0;
                    for (int i = 0; i < hs; i++) d += q[i] * kk[i];
                    s[t2] = d * scale;
                    mx = s[t2] > mx ? s[t2] : mx;
                }
                for (int t2 = 0; t2 < T; t2++) {
                    const int seen = p->kvalid ? p->kvalid[(size_t)b * T + t2] != 0 : t2 <= t;
                    s[t2] = seen ? exp(s[t2] - mx) : 0.0;
                    sum += s[t2];
                }
                for (int t2 = 0; t2 < T; t2++) s[t2] = sum > 0.0 ? s[t2] / sum : 0.0;
                if (att) memcpy(att + (((size_t)b * NH + h) * T + t) * T, s, (size_t)T * sizeof *s);
                double *o = out + ((size_t)b * T + t) * C + (size_t)h * hs;
                for (int i = 0; i < hs; i++) {
                    double acc = 0.0;
                    for (int t2 = 0; t2 < T; t2++)
                        acc += s[t2] * p->qkv[((size_t)b * T + t2) * W + C + (size_t)NKV * hs + (size_t)kh * hs + i];
                    o[i] = acc;
                }
            }
        }
    free(s);
}

static void gqa_ref_out(const void *vp, double *out) { gqa_ref(vp, out, NULL); }

/* the forward of c's kind into out, att (backend memory; the mask uploaded to kv when there is one) */
static void gqa_fwd(zt_backend *be, const gqa_ctx *c, float *out, float *att, const float *qkv, const int32_t *kv) {
    if (c->kvalid) be->i->attention_bidir_fwd(be, out, att, qkv, kv, c->B, c->T, c->C, c->NH, c->NKV);
    else be->i->attention_fwd(be, out, att, qkv, c->B, c->T, c->C, c->NH, c->NKV);
}

/* blob: out(B, T, C) | att(B, NH, T, T), or with bwd: dqkv (qkv's shape) from the backend's own forward */
static void run_gqa(zt_backend *be, const gqa_ctx *c, float *out, int bwd) {
    const size_t nq = (size_t)c->B * c->T * gqa_width(c->C, c->NH, c->NKV), no = (size_t)c->B * c->T * c->C,
                 na = (size_t)c->B * c->NH * c->T * c->T;
    float *nan = ffill(nq + no + na, NAN);
    float *dq = dev_put(be, c->qkv, nq * 4), *dout = dev_put(be, nan, no * 4), *datt = dev_put(be, nan, na * 4);
    int32_t *kv = c->kvalid ? dev_put(be, c->kvalid, (size_t)c->B * c->T * 4) : NULL;
    gqa_fwd(be, c, dout, datt, dq, kv);
    float *ddout = dev_put(be, c->dout, no * 4), *ddqkv = dev_put(be, nan, nq * 4), *scratch = dev_put(be, nan, na * 4);
    if (bwd && kv)
        be->i->attention_bidir_bwd(be, ddqkv, scratch, ddout, dq, datt, kv, c->B, c->T, c->C, c->NH, c->NKV);
    else if (bwd)
        be->i->attention_bwd(be, ddqkv, scratch, ddout, dq, datt, c->B, c->T, c->C, c->NH, c->NKV);
    if (bwd) {
        dev_get(be, out, ddqkv, nq * 4);
    } else {
        dev_get(be, out, dout, no * 4);
        dev_get(be, out + no, datt, na * 4);
    }
    void *all[] = {dq, dout, datt, kv, ddout, ddqkv, scratch};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i]) dev_free(be, all[i]);
    free(nan);
}

static void run_gqa_fwd(zt_backend *be, const void *vc, void *out) { run_gqa(be, vc, out, 0); }
static void run_gqa_bwd(zt_backend *be, const void *vc, void *out) { run_gqa(be, vc, out, 1); }

/* bidir: the encoders' bidirectional attention, sequence b's key mask by b % 4: every key, the last third padded,
   every third key masked, none (probabilities of unseen keys, and a sequence without valid keys, exactly 0) */
static void test_gqa(int B, int T, int C, int NH, int NKV, int bidir) {
    const size_t nq = (size_t)B * T * gqa_width(C, NH, NKV), no = (size_t)B * T * C, na = (size_t)B * NH * T * T;
    float *qkv = frand(nq, 1.0, 0.0), *dout = frand(no, 1.0, 0.0);
    int32_t *mask = NULL;
    if (bidir) {
        mask = xmalloc((size_t)B * T * sizeof *mask);
        for (int i = 0; i < B * T; i++) {
            const int k = i / T % 4, t = i % T;
            mask[i] = k == 0 ? 1 : k == 1 ? t < T - T / 3 : k == 2 ? t % 3 != 1 : 0;
        }
    }
    gqa_ctx c = {B, T, C, NH, NKV, qkv, dout, mask};
    gqa_d p = {B, T, C, NH, NKV, f2d(qkv, nq), mask};
    const char *kind = bidir ? "attention_bidir" : "attention";
    char name[128];

    float *got = xmalloc((no + na) * 4);
    run_gqa_fwd(g_be, &c, got);
    double *ref = xmalloc(no * sizeof *ref), *att = xmalloc(na * sizeof *att);
    gqa_ref(&p, ref, att);
    snprintf(name, sizeof name, "%s_fwd[gqa,B%d,T%d,C%d,NH%d,NKV%d]", kind, B, T, C, NH, NKV);
    chk k;
    chk_init(&k, TOL_GQA_FWD);
    chk_fwd(&k, "gqa out", got, ref, no);
    chk_fwd(&k, "gqa att (softmax, 0 at the keys a row does not see)", got + no, att, na);
    int zeros = 0; /* the reference's exact zeros must be exact */
    for (size_t i = 0; i < na; i++) zeros += att[i] == 0.0 && got[no + i] != 0.0f;
    for (size_t i = 0; i < no; i++) zeros += ref[i] == 0.0 && got[i] != 0.0f;
    if (zeros) chk_fail(&k, "a probability of a key the row does not see, or a row without keys, is not exactly 0");
    chk_done(&k, name);
    check_threads(name, run_gqa_fwd, &c, (no + na) * 4);

    float *gotb = xmalloc(nq * 4);
    run_gqa_bwd(g_be, &c, gotb);
    double *wout = f2d(dout, no), *g = dzeros(nq);
    fd_grad(&p, gqa_ref_out, p.qkv, nq, wout, no, g);
    snprintf(name, sizeof name, "%s_bwd[gqa,B%d,T%d,C%d,NH%d,NKV%d]", kind, B, T, C, NH, NKV);
    chk_init(&k, TOL_GQA_BWD);
    chk_bwd(&k, "gqa dqkv (overwritten; dk, dv summed over the group)", gotb, NULL, g, nq);
    chk_done(&k, name);
    check_threads(name, run_gqa_bwd, &c, nq * 4);

    void *fr[] = {qkv, dout, mask, p.qkv, got, ref, att, gotb, wout, g};
    for (size_t i = 0; i < sizeof fr / sizeof fr[0]; i++) free(fr[i]);
}

/* ---------------------------------------------------------------- decoding */

typedef struct dec_ctx {
    int T, maxT, C, NH, NKV;
    const float *qkv; /* (T, W): position t's row */
} dec_ctx;

/* positions 0..T-1 one token at a time; blob: out(T, C) | kcache(maxT, NKV hs) | vcache(maxT, NKV hs), the caches
   prefilled with NaN (rows not yet written must never be read) */
static void run_decode(zt_backend *be, const void *vc, void *out) {
    const dec_ctx *c = vc;
    const size_t W = gqa_width(c->C, c->NH, c->NKV), KV = (size_t)c->NKV * (c->C / c->NH), nc = (size_t)c->maxT * KV;
    float *nan = ffill(nc, NAN);
    float *kc = dev_put(be, nan, nc * 4), *vcache = dev_put(be, nan, nc * 4), *q = dev_put(be, NULL, W * 4);
    float *o = dev_put(be, NULL, (size_t)c->C * 4), *h = out;
    for (int t = 0; t < c->T; t++) {
        be->i->to_device(be, q, c->qkv + (size_t)t * W, W * 4);
        be->i->attention_decode(be, o, kc, vcache, q, t, c->maxT, c->C, c->NH, c->NKV);
        dev_get(be, h + (size_t)t * c->C, o, (size_t)c->C * 4);
    }
    dev_get(be, h + (size_t)c->T * c->C, kc, nc * 4);
    dev_get(be, h + (size_t)c->T * c->C + nc, vcache, nc * 4);
    dev_free(be, kc);
    dev_free(be, vcache);
    dev_free(be, q);
    dev_free(be, o);
    free(nan);
}

static void test_decode(int T, int maxT, int C, int NH, int NKV) {
    const size_t W = gqa_width(C, NH, NKV), KV = (size_t)NKV * (C / NH), nc = (size_t)maxT * KV;
    const size_t nq = (size_t)T * W, no = (size_t)T * C, nb = no + 2 * nc;
    float *qkv = frand(nq, 1.0, 0.0);
    dec_ctx c = {T, maxT, C, NH, NKV, qkv};
    gqa_d p = {1, T, C, NH, NKV, f2d(qkv, nq), NULL};
    char name[128];
    snprintf(name, sizeof name, "attention_decode[gqa,T%d,maxT%d,C%d,NH%d,NKV%d]", T, maxT, C, NH, NKV);

    float *got = xmalloc(nb * 4);
    run_decode(g_be, &c, got);
    double *ref = xmalloc(no * sizeof *ref);
    gqa_ref(&p, ref, NULL);
    chk k;
    chk_init(&k, TOL_GQA_DECODE);
    chk_fwd(&k, "decode out", got, ref, no);
    /* the caches hold the key / value heads of rows 0..T-1, the rest untouched */
    float *want = ffill(2 * nc, NAN);
    for (int t = 0; t < T; t++) {
        memcpy(want + (size_t)t * KV, qkv + (size_t)t * W + C, KV * 4);
        memcpy(want + nc + (size_t)t * KV, qkv + (size_t)t * W + C + KV, KV * 4);
    }
    chk_bits(&k, "decode kcache, vcache (maxT, NKV hs)", got + no, want, 2 * nc * 4);
    /* the same arithmetic as the forward's row: the same bits */
    gqa_ctx fc = {1, T, C, NH, NKV, qkv, NULL, NULL};
    float *fwd = xmalloc((no + (size_t)NH * T * T) * 4);
    run_gqa_fwd(g_be, &fc, fwd);
    if (memcmp(fwd, got, no * 4) != 0) chk_fail(&k, "decode out differs from attention_fwd's rows (bits)");
    chk_done(&k, name);
    check_threads(name, run_decode, &c, nb * 4);

    void *fr[] = {qkv, p.qkv, got, ref, want, fwd};
    for (size_t i = 0; i < sizeof fr / sizeof fr[0]; i++) free(fr[i]);
}

/* ================================================================== NKV == NH: the multi-head attention of before */

/* the cpu backend's multi-head attention before the NKV parameter (cpu_attention.c and cpu_decode.c as of the
   commit that added it), loop for loop, on one thread (every element was computed by one thread in this order) */
static void mha_fwd_before(float *out, float *att, const float *qkv, int B, int T, int C, int NH) {
    const int hs = C / NH, C3 = 3 * C;
    const float scale = 1.0f / sqrtf((float)hs);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const float *q = qkv + ((size_t)b * T + t) * C3 + h * hs;
                float *a = att + (((size_t)b * NH + h) * T + t) * T;
                const float *k0 = qkv + (size_t)b * T * C3 + C + h * hs;
                zt_attention_row(out + ((size_t)b * T + t) * C + h * hs, a, q, k0, k0 + C, (size_t)C3, t + 1, hs, scale);
                for (int t2 = t + 1; t2 < T; t2++) a[t2] = 0.0f;
            }
}

static void mha_bwd_before(float *dqkv, float *datt, const float *dout, const float *qkv, const float *att, int B,
                           int T, int C, int NH) {
    const int hs = C / NH, C3 = 3 * C;
    const float scale = 1.0f / sqrtf((float)hs);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            for (int t = 0; t < T; t++) {
                float *d = dqkv + ((size_t)b * T + t) * C3 + h * hs;
                memset(d, 0, (size_t)hs * sizeof(float));
                memset(d + C, 0, (size_t)hs * sizeof(float));
                memset(d + 2 * C, 0, (size_t)hs * sizeof(float));
            }
            for (int t = 0; t < T; t++) {
                const float *a = att + (((size_t)b * NH + h) * T + t) * T;
                float *da = datt + (((size_t)b * NH + h) * T + t) * T;
                const float *dy = dout + ((size_t)b * T + t) * C + h * hs;
                const float *q = qkv + ((size_t)b * T + t) * C3 + h * hs;
                float *dq = dqkv + ((size_t)b * T + t) * C3 + h * hs;
                for (int t2 = 0; t2 <= t; t2++) {
                    const float *v = qkv + ((size_t)b * T + t2) * C3 + 2 * C + h * hs;
                    float *dv = dqkv + ((size_t)b * T + t2) * C3 + 2 * C + h * hs;
                    float s = 0.0f, w = a[t2];
#pragma omp simd reduction(+ : s)
                    for (int i = 0; i < hs; i++) {
                        s += dy[i] * v[i];
                        dv[i] += w * dy[i];
                    }
                    da[t2] = s;
                }
                float dot = 0.0f;
                for (int t2 = 0; t2 <= t; t2++) dot += a[t2] * da[t2];
                for (int t2 = 0; t2 <= t; t2++) {
                    float dpre = a[t2] * (da[t2] - dot) * scale;
                    const float *k = qkv + ((size_t)b * T + t2) * C3 + C + h * hs;
                    float *dk = dqkv + ((size_t)b * T + t2) * C3 + C + h * hs;
#pragma omp simd
                    for (int i = 0; i < hs; i++) {
                        dq[i] += dpre * k[i];
                        dk[i] += dpre * q[i];
                    }
                }
            }
        }
}

static void test_mha_unchanged(int B, int T, int C, int NH) {
    const size_t nq = (size_t)B * T * 3 * C, no = (size_t)B * T * C, na = (size_t)B * NH * T * T;
    float *qkv = frand(nq, 1.0, 0.0), *dout = frand(no, 1.0, 0.0);
    gqa_ctx c = {B, T, C, NH, NH, qkv, dout, NULL};
    char name[128];
    snprintf(name, sizeof name, "attention[NKV == NH: bits of before,B%d,T%d,C%d,NH%d]", B, T, C, NH);
    chk k;
    chk_init(&k, TOL_EXACT);

    float *want = xmalloc((no + na) * 4), *wantb = xmalloc(nq * 4), *scratch = xmalloc(na * 4);
    mha_fwd_before(want, want + no, qkv, B, T, C, NH);
    mha_bwd_before(wantb, scratch, dout, qkv, want + no, B, T, C, NH);
    float *got = xmalloc((no + na) * 4), *gotb = xmalloc(nq * 4);
    run_gqa_fwd(g_be, &c, got);
    run_gqa_bwd(g_be, &c, gotb);
    chk_bits(&k, "attention_fwd out, att", got, want, (no + na) * 4);
    chk_bits(&k, "attention_bwd dqkv", gotb, wantb, nq * 4);

    /* decoding: the caches (maxT, C) of before, and the forward's rows */
    dec_ctx dc = {T, T + 2, C, NH, NH, qkv};
    const size_t nc = (size_t)(T + 2) * C;
    float *gotd = xmalloc((no + 2 * nc) * 4), *want1 = xmalloc((no + (size_t)NH * T * T) * 4);
    run_decode(g_be, &dc, gotd);
    mha_fwd_before(want1, want1 + no, qkv, 1, T, C, NH); /* batch row 0 alone */
    chk_bits(&k, "attention_decode out (the forward's rows)", gotd, want1, (size_t)T * C * 4);
    chk_done(&k, name);

    void *fr[] = {qkv, dout, want, wantb, scratch, got, gotb, gotd, want1};
    for (size_t i = 0; i < sizeof fr / sizeof fr[0]; i++) free(fr[i]);
}

/* ================================================================== main */

int main(void) {
    double t0 = zt_now();
    harness_init(20250131);
    const zt_backend_i *f = g_be->i;
    if (!f->rmsnorm_fwd || !f->rmsnorm_bwd || !f->rope || !f->swiglu_fwd || !f->swiglu_bwd || !f->attention_decode) {
        check_fail("%s backend lacks a Llama slot (rmsnorm_fwd/bwd, rope, swiglu_fwd/bwd, attention_decode)", g_dev);
        return harness_finish("test_ops_llama", t0);
    }

    test_rmsnorm(5, 37, 1e-5f);
    test_rmsnorm(4, 130, 1e-6f); /* dw crosses three 64-column blocks; the last row all zeros */
    test_rmsnorm(3, 64, 1e-5f);  /* one whole column block */

    test_rope(2, 5, 0, 4, 2, 8);
    test_rope(1, 1, 7, 3, 1, 6);   /* one decoded token at position 7, multi-query */
    test_rope(3, 4, 2, 2, 2, 10);  /* multi-head, rows from position 2 */
    test_rope(1, 3, 0, 1, 1, 2);   /* the smallest head */

    test_swiglu(5, 37);
    test_swiglu(3, 130);

    test_gqa(2, 7, 12, 4, 1, 0); /* multi-query, hs 3 */
    test_gqa(2, 7, 12, 4, 2, 0); /* groups of 2 */
    test_gqa(2, 7, 12, 4, 4, 0); /* multi-head */
    test_gqa(1, 9, 12, 6, 3, 0); /* hs 2, groups of 2 */
    test_gqa(3, 1, 8, 2, 1, 0);  /* T 1 */

    test_decode(9, 12, 12, 4, 1);
    test_decode(9, 12, 12, 4, 2);
    test_decode(9, 12, 12, 4, 4);
    test_decode(130, 140, 256, 8, 2); /* long enough for the decode to split heads over threads */

    test_mha_unchanged(2, 7, 15, 3);
    test_mha_unchanged(2, 33, 96, 3);
    test_mha_unchanged(4, 32, 64, 2); /* the tiny model's shape */

    /* the encoders' bidirectional attention (optional slots), last: the cases above draw what they always drew */
    if (f->attention_bidir_fwd && f->attention_bidir_bwd) {
        test_gqa(4, 7, 12, 4, 4, 1);  /* multi-head, hs 3; the four mask kinds */
        test_gqa(4, 7, 12, 4, 2, 1);  /* groups of 2 */
        test_gqa(4, 6, 12, 4, 1, 1);  /* multi-query */
        test_gqa(2, 1, 8, 2, 1, 1);   /* T 1: one valid key, then none */
        test_gqa(3, 33, 16, 2, 2, 1); /* T past a warp */
    } else {
        printf("# %s: attention_bidir_fwd / _bwd not supported by this backend (optional)\n", g_dev);
    }

    return harness_finish("test_ops_llama", t0);
}
