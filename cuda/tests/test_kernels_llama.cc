// test_kernels_llama.cc — the host build of kernels_llama.cu (RMSNorm, rotary embedding, SwiGLU; every launch run
// on the CPU by the host execution harness) checked against the cpu backend, the reference: the same random inputs
// through both, compared element by element, on odd shapes (C and I not multiples of 32, N not a multiple of a
// block or of the 64 rows of a dw partial sum, one and several key/value heads, a position offset). Each CUDA op
// also runs twice, the second time with another harness interleaving seed, and must give the same bits
// (determinism). Slots that overwrite get NaN-filled outputs first; RMSNorm's dinp, which accumulates, gets random
// starting values. The rotary embedding must leave the value heads' bits alone, and its inverse must undo it.
//
// Error measure, per tensor: max over elements of |got - ref| / max(|ref|, mean |ref|) (as test_kernels_norm_attn).
// The limits (K_TOL_*) are a small multiple of the errors measured (see each one).
//
// Usage: [ZT_TEST_SEED=n] test_kernels_llama
// Built by `make` (cuda/backend.mk: build/tests/test_kernels_llama against the cudasim objects in
// build/libztrain.a) and run by tests/run.sh. nvcc check of the kernels (valid CUDA, warning-free):
//   nvcc -std=c++17 -O3 -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=[sm_90,compute_90]
//     --Werror all-warnings -Xcompiler -Wall,-Wextra,-Werror -Icuda -Isrc -I.
//     $(mpicc -showme:compile) -c cuda/kernels_llama.cu -o /tmp/kll.o
#include "kernel_test.h"


namespace {

// Limits: measured maxima over data seeds ZT_TEST_SEED=1..16 (a 2-core AMD EPYC: g++ -O2, no FMA, against the
// cpu backend at -O3 -march=native, which contracts to FMA) in the comments; a real bug gives errors of order 1.
constexpr double K_TOL_RMS = 1e-5;    // rmsnorm fwd: measured <= 3.7e-7, bwd (dinp's cancellation) <= 1.7e-6
constexpr double K_TOL_ROPE = 1e-6;   // rope, forward and inverse: measured <= 1.5e-7
constexpr double K_TOL_SWIGLU = 2e-6; // swiglu fwd: measured <= 2.3e-7, bwd <= 3.7e-7

#include "kernel_check.h"

// ------------------------------------------------------------------------------------ RMSNorm

void test_rmsnorm(int N, int C, float eps) {
    vec x = randv((size_t)N * C, 2.0, 0.5), w = randv(C, 0.5, 1.0), dy = randv((size_t)N * C);
    vec dx0 = randv((size_t)N * C); // dinp accumulates
    vec out_r((size_t)N * C), r_r(N), dx_r = dx0, dw_r = nanv(C);
    g_cpu->i->rmsnorm_fwd(g_cpu, out_r.data(), r_r.data(), x.data(), w.data(), N, C, eps);
    g_cpu->i->rmsnorm_bwd(g_cpu, dx_r.data(), dw_r.data(), dy.data(), x.data(), w.data(), r_r.data(), N, C);
    // cuda (host build), twice; the backward takes the cpu's rstd so it is checked on its own
    vec out[2], r[2], dx[2], dw[2];
    std::vector<unsigned char> scratch(zt_cu_rmsnorm_bwd_scratch(N, C) + 1);
    for (int run = 0; run < 2; run++) {
        harness_config(run);
        out[run] = nanv((size_t)N * C), r[run] = nanv(N);
        zt_cu_rmsnorm_fwd(0, out[run].data(), r[run].data(), x.data(), w.data(), N, C, eps);
        dx[run] = dx0, dw[run] = nanv(C);
        memset(scratch.data(), 0xff, scratch.size());
        zt_cu_rmsnorm_bwd(0, dx[run].data(), dw[run].data(), dy.data(), x.data(), w.data(), r_r.data(), N, C,
                          scratch.data(), tickets());
    }
    char name[96];
    snprintf(name, sizeof name, "rmsnorm_fwd[N%d,C%d,eps%g]", N, C, eps);
    check_outs(name, {{"out", &out[0], &out[1], &out_r}, {"rstd", &r[0], &r[1], &r_r}}, K_TOL_RMS);
    snprintf(name, sizeof name, "rmsnorm_bwd[N%d,C%d]", N, C);
    check_outs(name, {{"dinp", &dx[0], &dx[1], &dx_r}, {"dw", &dw[0], &dw[1], &dw_r}}, K_TOL_RMS, tickets_left());
}

// ------------------------------------------------------------------------------------ rotary embedding

// cs(maxT, hs / 2, 2): cos and sin of position p times theta^(-2i / hs)
vec rope_table(int maxT, int hs, double theta) {
    vec cs((size_t)maxT * hs);
    for (int p = 0; p < maxT; p++)
        for (int i = 0; i < hs / 2; i++) {
            const double a = p * pow(theta, -2.0 * i / hs);
            cs[((size_t)p * (hs / 2) + i) * 2] = (float)cos(a);
            cs[((size_t)p * (hs / 2) + i) * 2 + 1] = (float)sin(a);
        }
    return cs;
}

// forward on a random qkv, then the inverse on another (the backward on dqkv), both against the cpu; the value
// heads' bits must stay, and the inverse of the forward must give the input back (to rounding)
void test_rope(int B, int T, int pos0, int NH, int NKV, int hs) {
    const int maxT = pos0 + T + 3, W = (NH + 2 * NKV) * hs;
    const size_t n = (size_t)B * T * W;
    const vec cs = rope_table(maxT, hs, 10000.0), x = randv(n), dx = randv(n);
    vec f_r = x, i_r = dx;
    g_cpu->i->rope(g_cpu, f_r.data(), cs.data(), B, T, pos0, NH, NKV, hs, 0);
    g_cpu->i->rope(g_cpu, i_r.data(), cs.data(), B, T, pos0, NH, NKV, hs, 1);
    vec f[2], inv[2], back;
    for (int run = 0; run < 2; run++) {
        harness_config(run);
        f[run] = x, inv[run] = dx;
        zt_cu_rope(0, f[run].data(), cs.data(), B, T, pos0, NH, NKV, hs, 0);
        zt_cu_rope(0, inv[run].data(), cs.data(), B, T, pos0, NH, NKV, hs, 1);
    }
    back = f[0];
    zt_cu_rope(0, back.data(), cs.data(), B, T, pos0, NH, NKV, hs, 1);
    std::string extra;
    size_t vdiff = 0;
    for (size_t row = 0; row < (size_t)B * T; row++) {
        const size_t v0 = row * W + (size_t)(NH + NKV) * hs, len = (size_t)NKV * hs * sizeof(float);
        vdiff += memcmp(&f[0][v0], &x[v0], len) != 0 || memcmp(&inv[0][v0], &dx[v0], len) != 0;
    }
    if (vdiff) extra = "value heads changed in " + std::to_string(vdiff) + " rows";
    const double eback = err_of(back, x);
    if (!(eback <= 4 * K_TOL_ROPE)) {
        char buf[96];
        snprintf(buf, sizeof buf, "%sinverse(forward(x)) differs from x by %.3g", extra.empty() ? "" : "; ", eback);
        extra += buf;
    }
    char name[96];
    snprintf(name, sizeof name, "rope[B%d,T%d,pos0 %d,NH%d,NKV%d,hs%d]", B, T, pos0, NH, NKV, hs);
    check_outs(name, {{"forward", &f[0], &f[1], &f_r}, {"inverse", &inv[0], &inv[1], &i_r}}, K_TOL_ROPE, extra);
}

// ------------------------------------------------------------------------------------ SwiGLU

void test_swiglu(int N, int I) {
    vec x = randv((size_t)N * 2 * I, 2.0), dy = randv((size_t)N * I);
    vec out_r = nanv((size_t)N * I), dx_r = nanv((size_t)N * 2 * I);
    g_cpu->i->swiglu_fwd(g_cpu, out_r.data(), x.data(), N, I);
    g_cpu->i->swiglu_bwd(g_cpu, dx_r.data(), x.data(), dy.data(), N, I);
    vec out[2], dx[2];
    for (int run = 0; run < 2; run++) {
        harness_config(run);
        out[run] = nanv((size_t)N * I), dx[run] = nanv((size_t)N * 2 * I);
        zt_cu_swiglu_fwd(0, out[run].data(), x.data(), N, I);
        zt_cu_swiglu_bwd(0, dx[run].data(), x.data(), dy.data(), N, I);
    }
    char name[96];
    snprintf(name, sizeof name, "swiglu_fwd[N%d,I%d]", N, I);
    check_outs(name, {{"out", &out[0], &out[1], &out_r}}, K_TOL_SWIGLU);
    snprintf(name, sizeof name, "swiglu_bwd[N%d,I%d]", N, I);
    check_outs(name, {{"dinp", &dx[0], &dx[1], &dx_r}}, K_TOL_SWIGLU);
}

// bf16 / fp16 (the round_to fused into the op, cuda_backend.cu): the prec argument must give exactly the fp32
// output rounded to the precision
void test_fused_round(int N, int C, int I) {
    vec x = randv((size_t)N * C, 2.0, 0.5), w = randv(C, 0.5, 1.0), dy = randv((size_t)N * C);
    vec dx0 = randv((size_t)N * C);
    vec g = randv((size_t)N * 2 * I, 2.0), gy = randv((size_t)N * I);
    std::vector<unsigned char> scratch(zt_cu_rmsnorm_bwd_scratch(N, C) + 1);
    for (int prec = ZT_PREC_BF16; prec <= ZT_PREC_FP16; prec++) {
        vec o[2], r[2], dx[2], dw[2], so[2], sd[2];
        for (int p = 0; p < 2; p++) {
            const int pr = p ? prec : ZT_PREC_FP32;
            o[p] = nanv((size_t)N * C), r[p] = nanv(N), dx[p] = dx0, dw[p] = nanv(C);
            so[p] = nanv((size_t)N * I), sd[p] = nanv((size_t)N * 2 * I);
            zt_cu_rmsnorm_fwd(0, o[p].data(), r[p].data(), x.data(), w.data(), N, C, 1e-6f, pr);
            zt_cu_rmsnorm_bwd(0, dx[p].data(), dw[p].data(), dy.data(), x.data(), w.data(), r[0].data(), N, C,
                              scratch.data(), tickets(), pr);
            zt_cu_swiglu_fwd(0, so[p].data(), g.data(), N, I, pr);
            zt_cu_swiglu_bwd(0, sd[p].data(), g.data(), gy.data(), N, I, pr);
        }
        size_t bad = 0;
        auto cmp = [&](vec &full, const vec &rounded) {
            for (float &v : full) v = zt_round_prec(v, prec);
            bad += !same_bits(full, rounded);
        };
        cmp(o[0], o[1]), cmp(dx[0], dx[1]), cmp(so[0], so[1]), cmp(sd[0], sd[1]);
        bad += !same_bits(r[0], r[1]) + !same_bits(dw[0], dw[1]); // op state: never rounded
        const char *pn = prec == ZT_PREC_BF16 ? "bf16" : "fp16";
        check(bad == 0, (std::string("fused_round_") + pn).c_str(),
              "%zu of 6 outputs differ from the fp32 op followed by the rounding (rstd, dw unrounded)", bad);
    }
}

} // namespace

int main() {
    double t0 = zt_now();
    if (!test_setup(20240611)) return 1; // the data seed (ZT_TEST_SEED overrides)
    if (!g_cpu->i->rmsnorm_fwd || !g_cpu->i->rope || !g_cpu->i->swiglu_fwd) {
        check_fail("cpu backend: no rmsnorm / rope / swiglu slots");
        return 1;
    }

    test_rmsnorm(5, 37, 1e-5f);
    test_rmsnorm(4, 130, 1e-6f);
    test_rmsnorm(67, 45, 1e-5f);  // dw: two partial sums
    test_rmsnorm(130, 768, 1e-6f); // three
    test_rmsnorm(7, 3, 1e-5f);
    test_rmsnorm(1, 1, 1e-5f);

    test_rope(2, 7, 0, 3, 3, 4);    // multi-head
    test_rope(1, 9, 5, 4, 2, 6);    // two key/value heads, a position offset
    test_rope(3, 1, 11, 2, 1, 2);   // T 1 (decoding), multi-query
    test_rope(2, 37, 3, 8, 2, 64);  // Llama's head size
    test_rope(1, 70, 0, 4, 1, 130); // hs / 2 odd
    test_rope(2, 33, 100, 6, 3, 32);

    test_swiglu(5, 37);
    test_swiglu(67, 45);
    test_swiglu(1, 1);
    test_swiglu(130, 344);
    test_swiglu(3, 1000);

    test_fused_round(67, 45, 37);

    zt_backend_destroy(g_cpu);
    printf("# test_kernels_llama: %d passed, %d failed, %.2f s\n", g_pass, g_fail, zt_now() - t0);
    return check_exit_status();
}
