// test_kernels_norm_attn.cc — the host build of kernels_norm_attn.cu, kernels_attn_fused.cu and cuda_gemm.cu
// (every launch run on the CPU by the host execution harness) checked against the cpu backend, the reference:
// the same random inputs through both, compared element by element, on odd shapes (C not a multiple
// of 32, T not a multiple of a warp or a block, several heads, grouped-query and multi-query attention
// (NKV 2 and 1 key / value heads), the encoders' bidirectional attention under key masks and LayerNorm epsilon,
// M / N / K off the GEMM tiles, every transpose pair, alpha / beta, matmul_ld's strided sub-matrices). Each CUDA op
// also runs twice, the second time with another harness interleaving seed, and must give the same bits
// (determinism). Slots that overwrite get NaN-filled outputs first; slots that accumulate get random
// starting values.
//
// Error measure, per tensor: max over elements of |got - ref| / max(|ref|, mean |ref|): relative
// per element, floored at the tensor's typical magnitude so near-zero elements don't blow it up.
// The limits (K_TOL_*) are a small multiple of the errors measured (see each one).
//
// Usage: [ZT_TEST_SEED=n] test_kernels_norm_attn [--bench]   (--bench: timings of GPT-2-small-sized ops)
//
// Build (from the repository root; build/libztrain.a from `make -j2 build-all`):
//   g++ -std=c++17 -O2 -g -fstack-clash-protection -Wall -Wextra -Wshadow -Icuda -Icuda/hostexec
//     -isystem /usr/local/cuda/include -Isrc -I. -Itests/helpers $(mpicc -showme:compile)
//     -x c++ cuda/kernels_norm_attn.cu cuda/cuda_gemm.cu -x none cuda/tests/test_kernels_norm_attn.cc
//     cuda/hostexec/hostexec.cc cuda/hostexec/hostexec_sched.cc build/libztrain.a
//     -L/usr/lib/x86_64-linux-gnu/hdf5/openmpi -lhdf5 -L/usr/lib/x86_64-linux-gnu/openmpi/lib -lmpi -lconfig
//     -lpcre2-8 -lcrypto -L/usr/lib/x86_64-linux-gnu/blis-openmp -Wl,-rpath,/usr/lib/x86_64-linux-gnu/blis-openmp
//     -lblis -fopenmp -lm -pthread -o build/tests/test_kernels_norm_attn
// or, once build/libztrain.a holds the cudasim objects (cuda/backend.mk: kernels_norm_attn.o, cuda_gemm.o,
// hostexec.o, hostexec_sched.o), the test alone against it (same flags and libraries):
//   g++ <flags above> cuda/tests/test_kernels_norm_attn.cc build/libztrain.a <libraries above>
// nvcc checks of the two kernel files (valid CUDA, warning-free):
//   nvcc -std=c++17 -O3 -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=[sm_90,compute_90]
//     --Werror all-warnings -Xcompiler -Wall,-Wextra,-Werror -Icuda -Isrc -I.
//     $(mpicc -showme:compile) -c cuda/kernels_norm_attn.cu -o /tmp/kna.o    (and cuda/cuda_gemm.cu)
#include <functional>

#include "kernel_test.h"


namespace {

// Limits. Measured maxima over 16 data seeds (ZT_TEST_SEED=1..16; a 2-core AMD EPYC: g++ -O2, no FMA,
// against the cpu backend at -O3 -march=native with BLIS, which contracts to FMA) in the comments;
// each limit is ~5-10x that, while a real bug gives errors of order 1.
constexpr double K_TOL_LN = 1e-5;        // layernorm fwd / bwd: measured <= 1.2e-6
constexpr double K_TOL_ATT = 2e-5;       // attention fwd / decode, fused fwd, grouped-query too: measured <= 3.5e-6
constexpr double K_TOL_ATT_BWD = 3e-5;   // attention bwd (multi-head and grouped-query): measured <= 6.4e-6
constexpr double K_TOL_FUSED_BWD = 5e-5; // fused attention bwd (on the fused forward's out): measured <= 9.1e-6
constexpr double K_TOL_ATT_LONG = 1e-4;  // decode over 13001 keys (the output averages them): measured <= 1.2e-5
constexpr double K_TOL_GEMM = 2e-5;      // matmul / linear / gemv: measured <= 2.3e-6

#include "kernel_check.h"

// ------------------------------------------------------------------------------------ layernorm

// eps: BERT's 1e-12 with rows of scale 1e-5 (variance ~1e-10, where eps decides rstd), else GPT-2's
void test_layernorm(int N, int C, float eps = ZT_LN_EPS) {
    const double scale = eps < 1e-6f ? 1e-5 : 2.0, shift = eps < 1e-6f ? 0.0 : 0.5;
    vec x = randv((size_t)N * C, scale, shift), w = randv(C, 0.5, 1.0), b = randv(C, 0.5), dy = randv((size_t)N * C);
    vec dx0 = randv((size_t)N * C); // dinp accumulates
    // cpu
    vec out_r((size_t)N * C), m_r(N), r_r(N), dx_r = dx0, dw_r(C), db_r(C);
    g_cpu->i->layernorm_fwd(g_cpu, out_r.data(), m_r.data(), r_r.data(), x.data(), w.data(), b.data(), N, C, eps);
    g_cpu->i->layernorm_bwd(g_cpu, dx_r.data(), dw_r.data(), db_r.data(), dy.data(), x.data(), w.data(), m_r.data(),
                            r_r.data(), N, C);
    // cuda (host build), twice; the backward takes the cpu's mean / rstd so it is checked on its own
    vec out[2], m[2], r[2], dx[2], dw[2], db[2];
    std::vector<unsigned char> scratch(zt_cu_layernorm_bwd_scratch(N, C) + 1);
    for (int run = 0; run < 2; run++) {
        harness_config(run);
        out[run] = nanv((size_t)N * C), m[run] = nanv(N), r[run] = nanv(N);
        zt_cu_layernorm_fwd(0, out[run].data(), m[run].data(), r[run].data(), x.data(), w.data(), b.data(), N, C, eps);
        dx[run] = dx0, dw[run] = nanv(C), db[run] = nanv(C);
        memset(scratch.data(), 0xff, scratch.size());
        zt_cu_layernorm_bwd(0, dx[run].data(), dw[run].data(), db[run].data(), dy.data(), x.data(), w.data(),
                            m_r.data(), r_r.data(), N, C, scratch.data(), tickets());
    }
    char name[96];
    snprintf(name, sizeof name, "layernorm_fwd[N%d,C%d%s]", N, C, eps == ZT_LN_EPS ? "" : ",eps 1e-12");
    check_outs(name, {{"out", &out[0], &out[1], &out_r}, {"mean", &m[0], &m[1], &m_r}, {"rstd", &r[0], &r[1], &r_r}},
               K_TOL_LN);
    snprintf(name, sizeof name, "layernorm_bwd[N%d,C%d%s]", N, C, eps == ZT_LN_EPS ? "" : ",eps 1e-12");
    check_outs(name, {{"dinp", &dx[0], &dx[1], &dx_r}, {"dw", &dw[0], &dw[1], &dw_r}, {"db", &db[0], &db[1], &db_r}},
               K_TOL_LN, tickets_left());
    // the round_to of dout fused in (in_round, bf16 and fp16): bitwise round_to then the op, dout written back rounded
    for (int prec : {ZT_PREC_BF16, ZT_PREC_FP16}) {
        vec y1 = dy, y2 = dy, x1 = dx0, x2 = dx0, w1 = nanv(C), w2 = nanv(C), b1 = nanv(C), b2 = nanv(C);
        zt_cu_round_to(0, y1.data(), y1.size(), prec);
        zt_cu_layernorm_bwd(0, x1.data(), w1.data(), b1.data(), y1.data(), x.data(), w.data(), m_r.data(), r_r.data(), N,
                            C, scratch.data(), tickets(), prec);
        zt_cu_layernorm_bwd(0, x2.data(), w2.data(), b2.data(), y2.data(), x.data(), w.data(), m_r.data(), r_r.data(), N,
                            C, scratch.data(), tickets(), prec, prec);
        const bool same = same_bits(y1, y2) && same_bits(x1, x2) && same_bits(w1, w2) && same_bits(b1, b2);
        const std::string left = tickets_left();
        if (same && left.empty())
            check_pass("%s in_round %s: dout's round_to fused in gives round_to then the op, bit for bit", name,
                       prec == ZT_PREC_BF16 ? "bf16" : "fp16");
        else
            check_fail("%s in_round %s: %s%s", name, prec == ZT_PREC_BF16 ? "bf16" : "fp16",
                       same ? "" : "differs from round_to then the op; ", left.c_str());
    }
}

// residual add + LayerNorm in one launch: bitwise the two launches it replaces (zt_cu_add rounding the residual to
// the precision, then zt_cu_layernorm_fwd of it, both with the output rounding prec), under two harness seeds, and
// the cpu reference's slot (add, round_to, layernorm_fwd) for the unrounded LayerNorm output
void test_residual_layernorm(int N, int C, float eps = ZT_LN_EPS) {
    const size_t n = (size_t)N * C;
    vec a = randv(n, 2.0, 0.5), bb = randv(n, 1.0), w = randv(C, 0.5, 1.0), b = randv(C, 0.5);
    const int precs[] = {ZT_PREC_FP32, ZT_PREC_BF16, ZT_PREC_FP16};
    const char *pn[] = {"fp32", "bf16", "fp16"};
    for (int p = 0; p < 3; p++) {
        for (int oprec = 0; oprec <= precs[p]; oprec += precs[p] ? precs[p] : 1) {
            char name[96];
            snprintf(name, sizeof name, "residual_layernorm_fwd[N%d,C%d,%s,out %s,eps %g]", N, C, pn[p],
                     oprec ? "rounded" : "unrounded", (double)eps);
            bool ok = true;
            for (int run = 0; run < 2 && ok; run++) {
                harness_config(run);
                vec res2 = nanv(n), out2 = nanv(n), m2 = nanv(N), r2 = nanv(N);
                zt_cu_add(0, res2.data(), a.data(), bb.data(), n, precs[p]);
                zt_cu_layernorm_fwd(0, out2.data(), m2.data(), r2.data(), res2.data(), w.data(), b.data(), N, C, eps,
                                    oprec);
                vec res = nanv(n), out = nanv(n), m = nanv(N), r = nanv(N);
                zt_cu_residual_layernorm_fwd(0, res.data(), out.data(), m.data(), r.data(), a.data(), bb.data(),
                                             w.data(), b.data(), N, C, eps, precs[p], oprec);
                if (!same_bits(res, res2) || !same_bits(out, out2) || !same_bits(m, m2) || !same_bits(r, r2)) {
                    check_fail("%s: differs from zt_cu_add + zt_cu_layernorm_fwd (run %d: res %d out %d mean %d "
                               "rstd %d equal)", name, run, same_bits(res, res2), same_bits(out, out2),
                               same_bits(m, m2), same_bits(r, r2));
                    ok = false;
                }
                if (ok && oprec == 0) { // the cpu reference slot: the residual bitwise, the LayerNorm within K_TOL_LN
                    vec rr = nanv(n), ro = nanv(n), rm = nanv(N), rs = nanv(N);
                    g_cpu->i->residual_layernorm_fwd(g_cpu, rr.data(), ro.data(), rm.data(), rs.data(), a.data(),
                                                     bb.data(), w.data(), b.data(), N, C, precs[p], eps);
                    if (!same_bits(res, rr) || !(err_of(out, ro) <= K_TOL_LN) || !(err_of(m, rm) <= K_TOL_LN) ||
                        !(err_of(r, rs) <= K_TOL_LN)) {
                        check_fail("%s: differs from the cpu backend's residual_layernorm_fwd", name);
                        ok = false;
                    }
                }
            }
            if (ok && precs[p]) { // the round_to of bb fused in (in_round): bitwise round_to then the op, bb rounded
                vec b1 = bb, b2 = bb, res1 = nanv(n), out1 = nanv(n), m1 = nanv(N), r1 = nanv(N);
                vec res2 = nanv(n), out2 = nanv(n), m2 = nanv(N), r2 = nanv(N);
                zt_cu_round_to(0, b1.data(), n, precs[p]);
                zt_cu_residual_layernorm_fwd(0, res1.data(), out1.data(), m1.data(), r1.data(), a.data(), b1.data(),
                                             w.data(), b.data(), N, C, eps, precs[p], oprec);
                zt_cu_residual_layernorm_fwd(0, res2.data(), out2.data(), m2.data(), r2.data(), a.data(), b2.data(),
                                             w.data(), b.data(), N, C, eps, precs[p], oprec, precs[p]);
                if (!same_bits(b1, b2) || !same_bits(res1, res2) || !same_bits(out1, out2) || !same_bits(m1, m2) ||
                    !same_bits(r1, r2)) {
                    check_fail("%s: with the round_to of bb fused in (in_round) it differs from round_to then the op",
                               name);
                    ok = false;
                }
            }
            if (ok) check_pass("%s (bitwise the two-kernel sequence, two harness seeds%s)", name,
                               precs[p] ? "; and with bb's round_to fused in" : "");
        }
    }
}

// ------------------------------------------------------------------------------------ attention

zt_cu_gemm *g_gemm; // attention's batched products (main)

// qkv's floats per token: NH query heads, NKV key and NKV value heads of C / NH (grouped-query attention)
size_t qkv_width(int C, int NH, int NKV) { return (size_t)C + 2 * (size_t)NKV * (C / NH); }

// the heads in a test's name: "NH4" (multi-head), "NH4,NKV2" (grouped-query)
std::string heads(int NH, int NKV) {
    return NKV == NH ? "NH" + std::to_string(NH) : "NH" + std::to_string(NH) + ",NKV" + std::to_string(NKV);
}

// bidir: the encoders' bidirectional attention with a key padding mask, sequence b's mask by b % 4: every key, the
// last third padded, every third key masked, none valid (its rows: out and att exactly 0, as the cpu's zeros are)
void test_attention(int B, int T, int C, int NH, int NKV, bool bidir = false) {
    const size_t nqkv = (size_t)B * T * qkv_width(C, NH, NKV), nout = (size_t)B * T * C, natt = (size_t)B * NH * T * T;
    vec qkv = randv(nqkv), dy = randv(nout);
    std::vector<int32_t> mask((size_t)B * T);
    for (size_t i = 0; i < mask.size(); i++) {
        const int k = (int)(i / T % 4), t = (int)(i % T);
        mask[i] = k == 0 ? 1 : k == 1 ? t < T - T / 3 : k == 2 ? t % 3 != 1 : 0;
    }
    const int32_t *kv = bidir ? mask.data() : nullptr;
    // the slots under test: causal (kv nullptr) or bidirectional
    auto fwd = [&](zt_backend *be, float *o, float *a) {
        if (kv) be->i->attention_bidir_fwd(be, o, a, qkv.data(), kv, B, T, C, NH, NKV);
        else be->i->attention_fwd(be, o, a, qkv.data(), B, T, C, NH, NKV);
    };
    vec out_r(nout), att_r = nanv(natt), dqkv_r = nanv(nqkv), datt_r(natt);
    fwd(g_cpu, out_r.data(), att_r.data());
    if (kv) g_cpu->i->attention_bidir_bwd(g_cpu, dqkv_r.data(), datt_r.data(), dy.data(), qkv.data(), att_r.data(), kv,
                                          B, T, C, NH, NKV);
    else g_cpu->i->attention_bwd(g_cpu, dqkv_r.data(), datt_r.data(), dy.data(), qkv.data(), att_r.data(), B, T, C, NH,
                                 NKV);
    vec out[2], att[2], dqkv[2];
    for (int run = 0; run < 2; run++) {
        harness_config(run);
        out[run] = nanv(nout), att[run] = nanv(natt), dqkv[run] = nanv(nqkv);
        vec datt = nanv(natt);
        // the backward takes the cpu's softmax, so it is checked on its own
        if (kv) {
            zt_cu_attention_bidir_fwd(g_gemm, 0, out[run].data(), att[run].data(), qkv.data(), kv, B, T, C, NH, NKV);
            zt_cu_attention_bidir_bwd(g_gemm, 0, dqkv[run].data(), datt.data(), dy.data(), qkv.data(), att_r.data(), kv,
                                      B, T, C, NH, NKV);
        } else {
            zt_cu_attention_fwd(g_gemm, 0, out[run].data(), att[run].data(), qkv.data(), B, T, C, NH, NKV);
            zt_cu_attention_bwd(g_gemm, 0, dqkv[run].data(), datt.data(), dy.data(), qkv.data(), att_r.data(), B, T, C,
                                NH, NKV);
        }
    }
    size_t zeros = 0; // the cpu's exact zeros (masked keys, above the diagonal, a sequence without valid keys) kept
    for (size_t i = 0; i < natt; i++) zeros += att_r[i] == 0.0f && att[0][i] != 0.0f;
    for (size_t i = 0; i < nout; i++) zeros += out_r[i] == 0.0f && out[0][i] != 0.0f;
    const char *dir = bidir ? "_bidir" : "";
    char name[96];
    snprintf(name, sizeof name, "attention%s_fwd[B%d,T%d,C%d,%s]", dir, B, T, C, heads(NH, NKV).c_str());
    check_outs(name, {{"out", &out[0], &out[1], &out_r}, {"att", &att[0], &att[1], &att_r}}, K_TOL_ATT,
               zeros ? std::to_string(zeros) + " of the cpu's exact zeros are not 0" : "");
    snprintf(name, sizeof name, "attention%s_bwd[B%d,T%d,C%d,%s]", dir, B, T, C, heads(NH, NKV).c_str());
    check_outs(name, {{"dqkv", &dqkv[0], &dqkv[1], &dqkv_r}}, K_TOL_ATT_BWD);
}

// The fused attention (kernels_attn_fused.cu, head sizes 32 and 64) against the cpu backend's materialized one:
// out, and dqkv from the fused backward on the fused forward's out and stats. Stats (B, NH, T, 2) are op state
// (m, 1 / l), checked through the backward.
void test_attention_fused(int B, int T, int C, int NH, int NKV) {
    const size_t nqkv = (size_t)B * T * qkv_width(C, NH, NKV), nout = (size_t)B * T * C, natt = (size_t)B * NH * T * T;
    vec qkv = randv(nqkv), dy = randv(nout);
    vec out_r(nout), att_r = nanv(natt), dqkv_r = nanv(nqkv), datt_r(natt);
    g_cpu->i->attention_fwd(g_cpu, out_r.data(), att_r.data(), qkv.data(), B, T, C, NH, NKV);
    g_cpu->i->attention_bwd(g_cpu, dqkv_r.data(), datt_r.data(), dy.data(), qkv.data(), att_r.data(), B, T, C, NH, NKV);
    vec out[2], dqkv[2];
    for (int run = 0; run < 2; run++) {
        harness_config(run);
        out[run] = nanv(nout), dqkv[run] = nanv(nqkv);
        vec stats = nanv((size_t)B * NH * T * 2), scratch = nanv(zt_attention_fused_scratch(B, T, C, NH));
        zt_cu_attention_fused_fwd(0, out[run].data(), stats.data(), qkv.data(), B, T, C, NH, NKV);
        zt_cu_attention_fused_bwd(0, dqkv[run].data(), scratch.data(), dy.data(), qkv.data(), out[run].data(),
                                  stats.data(), B, T, C, NH, NKV);
    }
    char name[96];
    snprintf(name, sizeof name, "attention_fused_fwd[B%d,T%d,C%d,%s]", B, T, C, heads(NH, NKV).c_str());
    check_outs(name, {{"out", &out[0], &out[1], &out_r}}, K_TOL_ATT);
    snprintf(name, sizeof name, "attention_fused_bwd[B%d,T%d,C%d,%s]", B, T, C, heads(NH, NKV).c_str());
    check_outs(name, {{"dqkv", &dqkv[0], &dqkv[1], &dqkv_r}}, K_TOL_FUSED_BWD);
}

// Decode tokens 0..T-1 one at a time into fresh caches on both backends; then the CUDA decode's
// outputs must equal rows of the CUDA forward bit for bit (they share the row code).
void test_decode(int T, int maxT, int C, int NH, int NKV) {
    const size_t W = qkv_width(C, NH, NKV), KV = (size_t)NKV * (C / NH); // the caches: (maxT, KV)
    vec qkv = randv((size_t)T * W);
    vec kc_r(maxT * KV), vc_r(maxT * KV), out_r((size_t)T * C);
    vec kc[2], vc[2], out[2];
    for (int run = 0; run < 2; run++) kc[run] = vec(maxT * KV), vc[run] = kc[run], out[run] = nanv((size_t)T * C);
    for (int pos = 0; pos < T; pos++) {
        const float *q = qkv.data() + (size_t)pos * W;
        g_cpu->i->attention_decode(g_cpu, out_r.data() + (size_t)pos * C, kc_r.data(), vc_r.data(), q, pos, maxT, C,
                                   NH, NKV);
        for (int run = 0; run < 2; run++) {
            harness_config(run);
            zt_cu_attention_decode(0, out[run].data() + (size_t)pos * C, kc[run].data(), vc[run].data(), q, pos, maxT,
                                   C, NH, NKV);
        }
    }
    harness_config(0);
    vec fwd((size_t)T * C), att((size_t)NH * T * T);
    zt_cu_attention_fwd(g_gemm, 0, fwd.data(), att.data(), qkv.data(), 1, T, C, NH, NKV);
    char name[96];
    snprintf(name, sizeof name, "attention_decode[T%d,maxT%d,C%d,%s]", T, maxT, C, heads(NH, NKV).c_str());
    if (!same_bits(out[0], fwd)) {
        size_t at = 0;
        while (at < fwd.size() && !memcmp(&out[0][at], &fwd[at], sizeof(float))) at++;
        check_fail("%s: decode differs from the forward's rows at [%zu] (%.9g vs %.9g)", name, at, (double)out[0][at],
                   (double)fwd[at]);
        return;
    }
    check_outs(name, {{"out", &out[0], &out[1], &out_r}, {"kcache", &kc[0], &kc[1], &kc_r}, {"vcache", &vc[0], &vc[1], &vc_r}},
               K_TOL_ATT);
}

// One decode step at a late position (scores past 48 KiB of shared memory: the opt-in path),
// caches pre-filled with random rows 0..pos-1.
void test_decode_long(int pos, int C, int NH, int NKV) {
    const int maxT = pos + 1;
    const size_t KV = (size_t)NKV * (C / NH);
    vec qkv = randv(qkv_width(C, NH, NKV)), kc0 = randv(maxT * KV), vc0 = randv(maxT * KV);
    vec kc_r = kc0, vc_r = vc0, out_r(C);
    g_cpu->i->attention_decode(g_cpu, out_r.data(), kc_r.data(), vc_r.data(), qkv.data(), pos, maxT, C, NH, NKV);
    vec kc[2], vc[2], out[2];
    for (int run = 0; run < 2; run++) {
        harness_config(run);
        kc[run] = kc0, vc[run] = vc0, out[run] = nanv(C);
        zt_cu_attention_decode(0, out[run].data(), kc[run].data(), vc[run].data(), qkv.data(), pos, maxT, C, NH, NKV);
    }
    char name[96];
    snprintf(name, sizeof name, "attention_decode[pos%d,C%d,%s]", pos, C, heads(NH, NKV).c_str());
    check_outs(name, {{"out", &out[0], &out[1], &out_r}, {"kcache", &kc[0], &kc[1], &kc_r}, {"vcache", &vc[0], &vc[1], &vc_r}},
               K_TOL_ATT_LONG);
}

// ------------------------------------------------------------------------------------ GEMM

void test_matmul(zt_cu_gemm *g, int M, int N, int K, int ta, int tb, float alpha, float beta) {
    vec a = randv((size_t)M * K), b = randv((size_t)K * N);
    vec c0 = beta != 0.0f ? randv((size_t)M * N) : nanv((size_t)M * N); // beta == 0: c must not be read
    vec c_r = beta != 0.0f ? c0 : vec((size_t)M * N, 0.0f);
    g_cpu->i->matmul(g_cpu, c_r.data(), a.data(), b.data(), M, N, K, ta, tb, alpha, beta);
    vec c[2];
    for (int run = 0; run < 2; run++) {
        harness_config(run);
        c[run] = c0;
        zt_cu_matmul(g, 0, c[run].data(), a.data(), b.data(), M, N, K, ta, tb, alpha, beta);
    }
    char name[128];
    snprintf(name, sizeof name, "matmul[M%d,N%d,K%d,ta%d,tb%d,alpha%g,beta%g]", M, N, K, ta, tb, alpha, beta);
    check_outs(name, {{"c", &c[0], &c[1], &c_r}}, K_TOL_GEMM);
}

void test_linear(zt_cu_gemm *g, int N, int C, int OC, int with_bias, int accumulate) {
    vec x = randv((size_t)N * C), w = randv((size_t)C * OC, 0.1), bias = randv(OC), dy = randv((size_t)N * OC);
    vec dx0 = accumulate ? randv((size_t)N * C) : nanv((size_t)N * C);
    vec out_r((size_t)N * OC), dx_r = accumulate ? dx0 : vec((size_t)N * C, 0.0f), dw_r((size_t)C * OC), db_r(OC);
    const float *bp = with_bias ? bias.data() : nullptr;
    g_cpu->i->linear_fwd(g_cpu, out_r.data(), x.data(), w.data(), bp, N, C, OC);
    g_cpu->i->linear_bwd(g_cpu, dx_r.data(), dw_r.data(), with_bias ? db_r.data() : nullptr, dy.data(), x.data(),
                         w.data(), N, C, OC, accumulate);
    vec out[2], dx[2], dw[2], db[2];
    std::vector<unsigned char> scratch(zt_cu_linear_bwd_scratch(N, OC) + 1);
    for (int run = 0; run < 2; run++) {
        harness_config(run);
        out[run] = nanv((size_t)N * OC), dx[run] = dx0, dw[run] = nanv((size_t)C * OC), db[run] = nanv(OC);
        memset(scratch.data(), 0xff, scratch.size());
        zt_cu_linear_fwd(g, 0, out[run].data(), x.data(), w.data(), bp, N, C, OC);
        zt_cu_linear_bwd(g, 0, dx[run].data(), dw[run].data(), with_bias ? db[run].data() : nullptr, dy.data(),
                         x.data(), w.data(), N, C, OC, accumulate, scratch.data(), tickets());
    }
    char name[96];
    snprintf(name, sizeof name, "linear_fwd[N%d,C%d,OC%d,bias%d]", N, C, OC, with_bias);
    check_outs(name, {{"out", &out[0], &out[1], &out_r}}, K_TOL_GEMM);
    snprintf(name, sizeof name, "linear_bwd[N%d,C%d,OC%d,bias%d,acc%d]", N, C, OC, with_bias, accumulate);
    if (with_bias)
        check_outs(name, {{"dinp", &dx[0], &dx[1], &dx_r}, {"dw", &dw[0], &dw[1], &dw_r}, {"dbias", &db[0], &db[1], &db_r}},
                   K_TOL_GEMM, tickets_left());
    else
        check_outs(name, {{"dinp", &dx[0], &dx[1], &dx_r}, {"dw", &dw[0], &dw[1], &dw_r}}, K_TOL_GEMM, tickets_left());
}

// bf16 / fp16 operands (zt_cu_gemm_set_precision): the packed path must give exactly the fp32 product of the
// inputs rounded to the precision (the packing is exact for such values, and the reference kernel sums in
// the same order), for every transpose, alpha / beta and the bias epilogue; and on inputs that are NOT of
// the precision it must differ from the fp32 product (the operands really were packed)
void test_gemm16(zt_cu_gemm *g, int prec, int M, int N, int K, int ta, int tb, float alpha, float beta, int bias_on) {
    vec a = randv((size_t)M * K), b = randv((size_t)K * N), bias = randv(N), c0 = randv((size_t)M * N);
    vec ar = a, br = b;
    for (float &x : ar) x = prec == ZT_PREC_BF16 ? zt_round_bf16(x) : zt_round_fp16(x);
    for (float &x : br) x = prec == ZT_PREC_BF16 ? zt_round_bf16(x) : zt_round_fp16(x);
    const char *pn = prec == ZT_PREC_BF16 ? "bf16" : "fp16";
    char name[160];
    if (bias_on) snprintf(name, sizeof name, "linear_fwd_%s[N%d,OC%d,C%d,bias]", pn, M, N, K);
    else snprintf(name, sizeof name, "matmul_%s[M%d,N%d,K%d,ta%d,tb%d,alpha%g,beta%g]", pn, M, N, K, ta, tb, alpha, beta);
    auto run = [&](int p, const vec &x, const vec &y) {
        zt_cu_gemm_set_precision(g, p);
        vec c = c0;
        if (bias_on) zt_cu_linear_fwd(g, 0, c.data(), x.data(), y.data(), bias.data(), M, K, N);
        else zt_cu_matmul(g, 0, c.data(), x.data(), y.data(), M, N, K, ta, tb, alpha, beta);
        zt_cu_gemm_set_precision(g, ZT_PREC_FP32);
        return c;
    };
    const vec c16 = run(prec, a, b), c16r = run(prec, ar, br), cref = run(ZT_PREC_FP32, ar, br), c32 = run(ZT_PREC_FP32, a, b);
    size_t diff = 0, diff_r = 0, moved = 0;
    for (size_t i = 0; i < cref.size(); i++) {
        diff += memcmp(&c16[i], &cref[i], sizeof(float)) != 0;
        diff_r += memcmp(&c16r[i], &cref[i], sizeof(float)) != 0;
        moved += memcmp(&c16[i], &c32[i], sizeof(float)) != 0;
    }
    if (diff || diff_r || moved == 0)
        check_fail("%s: %zu (%zu on rounded inputs) of %zu words differ from the fp32 product of the rounded inputs; "
                   "%zu differ from the unrounded product (must be > 0)", name, diff, diff_r, cref.size(), moved);
    else
        check_pass("%s: bit-identical to the fp32 product of the inputs rounded to %s (%zu words; %zu differ from "
                   "the unrounded fp32 product)", name, pn, cref.size(), moved);
}

// linear backward after set_precision(bf16 / fp16) on inputs of the precision: dout, w and inp packed in one launch
// that also sums dout's columns (pack16_colsum_kernel) must give exactly the fp32 path's dinp, dw and dbias (the
// packing is exact for such values, the reference GEMM sums in the same order, the column sums are the same code)
void test_linear_bwd16(zt_cu_gemm *g, int prec, int N, int C, int OC, int with_bias) {
    auto rnd = [&](float f) { return prec == ZT_PREC_BF16 ? zt_round_bf16(f) : zt_round_fp16(f); };
    vec dy = randv((size_t)N * OC), x = randv((size_t)N * C), w = randv((size_t)C * OC), dx0 = randv((size_t)N * C);
    for (vec *v : {&dy, &x, &w, &dx0})
        for (float &f : *v) f = rnd(f);
    std::vector<unsigned char> scratch(zt_cu_linear_bwd_scratch(N, OC) + 1);
    // inp, w and dout as words (the backend's mirrors: nothing packed; dbias from dout's words)
    std::vector<uint16_t> xw(x.size()), ww(w.size()), dw16(dy.size());
    for (size_t i = 0; i < x.size(); i++) xw[i] = zt_f32_to_bits16(x[i], prec);
    for (size_t i = 0; i < w.size(); i++) ww[i] = zt_f32_to_bits16(w[i], prec);
    for (size_t i = 0; i < dy.size(); i++) dw16[i] = zt_f32_to_bits16(dy[i], prec);
    vec dx[3], dw[3], db[3], y[3];
    for (int p = 0; p < 3; p++) { // 0: fp32, 1: 2-byte operands packed, 2: inp, w and dout given as words
        zt_cu_gemm_set_precision(g, p ? prec : ZT_PREC_FP32);
        dx[p] = dx0, dw[p] = nanv((size_t)C * OC), db[p] = nanv(OC), y[p] = nanv((size_t)N * OC);
        const uint16_t *xp = p == 2 ? xw.data() : nullptr, *wp = p == 2 ? ww.data() : nullptr;
        zt_cu_linear_bwd(g, 0, dx[p].data(), dw[p].data(), with_bias ? db[p].data() : nullptr, dy.data(), x.data(),
                         w.data(), N, C, OC, 1, scratch.data(), tickets(), xp, wp, p == 2 ? dw16.data() : nullptr);
        // and the forward y(N, OC) = x @ w: with the words given it must equal the packed path
        if (p) zt_cu_linear_fwd(g, 0, y[p].data(), x.data(), w.data(), nullptr, N, C, OC, xp, wp);
    }
    zt_cu_gemm_set_precision(g, ZT_PREC_FP32);
    const std::string left = tickets_left();
    const bool same = same_bits(dx[0], dx[1]) && same_bits(dw[0], dw[1]) && (!with_bias || same_bits(db[0], db[1])) &&
                      same_bits(dx[2], dx[1]) && same_bits(dw[2], dw[1]) && (!with_bias || same_bits(db[2], db[1])) &&
                      same_bits(y[2], y[1]);
    char name[128];
    snprintf(name, sizeof name, "linear_bwd_%s[N%d,C%d,OC%d,bias%d]", prec == ZT_PREC_BF16 ? "bf16" : "fp16", N, C, OC,
             with_bias);
    if (same && left.empty())
        check_pass("%s: dinp, dw%s bit-identical to the fp32 path; with inp, w and dout given as words (not packed) too, "
                   "and the forward's", name, with_bias ? ", dbias" : "");
    else check_fail("%s: %s%s", name, same ? "" : "differs from the fp32 path; ", left.c_str());
}

// matmul16 (iface/backend.h; the LM head on 2-byte logits): a as 2-byte words (a16) and / or c written as 2-byte
// words (c16), inputs of the precision. Under the harness bitwise zt_cu_matmul on the widened operands, its c rounded
// to the precision (the same reference kernel and packing); the cpu backend's slot bitwise its matmul + round_to;
// the two backends within K_TOL_GEMM, or one unit of the precision for a 2-byte c; run twice (determinism). beta 1
// (a float32 c: the chunked head's weight gradient): c starts as the same random values, added to on every side
void test_matmul16(zt_cu_gemm *g, int prec, int M, int N, int K, int ta, int tb, int a16, int c16, float beta = 0.0f) {
    const bool bf = prec == ZT_PREC_BF16;
    auto rnd = [&](float f) { return bf ? zt_round_bf16(f) : zt_round_fp16(f); };
    auto narrow = [&](float f) { return bf ? zt_f32_to_bf16_bits(f) : zt_f32_to_fp16_bits(f); };
    auto widen = [&](uint16_t h) { return bf ? zt_bf16_bits_to_f32(h) : zt_fp16_bits_to_f32(h); };
    vec a = randv((size_t)M * K), b = randv((size_t)K * N);
    for (float &x : a) x = rnd(x);
    for (float &x : b) x = rnd(x);
    std::vector<uint16_t> ah(a.size());
    for (size_t i = 0; i < a.size(); i++) ah[i] = narrow(a[i]);
    const size_t nc = (size_t)M * N;
    const vec c0 = beta != 0.0f ? randv(nc) : nanv(nc);
    // c as floats from either storage
    auto run16 = [&](zt_backend *be, vec &out) {
        std::vector<uint16_t> ch(nc, 0xffff);
        vec cf = c0;
        void *c = c16 ? (void *)ch.data() : (void *)cf.data();
        const void *ap = a16 ? (const void *)ah.data() : (const void *)a.data();
        if (be) be->i->matmul16(be, c, c16, ap, a16, b.data(), M, N, K, ta, tb, prec, beta);
        else zt_cu_matmul16(g, 0, c, c16, ap, a16, b.data(), M, N, K, ta, tb, nullptr, beta);
        out = cf;
        if (c16)
            for (size_t i = 0; i < nc; i++) out[i] = widen(ch[i]);
    };
    zt_cu_gemm_set_precision(g, prec);
    vec ref = c0, got[2], cpu16, cpuref = c0;
    zt_cu_matmul(g, 0, ref.data(), a.data(), b.data(), M, N, K, ta, tb, 1.0f, beta);
    for (int run = 0; run < 2; run++) {
        harness_config(run);
        run16(nullptr, got[run]);
    }
    zt_cu_gemm_set_precision(g, ZT_PREC_FP32);
    g_cpu->i->matmul(g_cpu, cpuref.data(), a.data(), b.data(), M, N, K, ta, tb, 1.0f, beta);
    if (c16)
        for (size_t i = 0; i < nc; i++) ref[i] = rnd(ref[i]), cpuref[i] = rnd(cpuref[i]);
    run16(g_cpu, cpu16);
    size_t differ = 0;
    for (size_t i = 0; i < nc; i++)
        differ += (memcmp(&got[0][i], &ref[i], 4) != 0) + (memcmp(&cpu16[i], &cpuref[i], 4) != 0);
    char name[160];
    snprintf(name, sizeof name, "matmul16_%s[M%d,N%d,K%d,ta%d,tb%d,a16 %d,c16 %d,beta %g]", bf ? "bf16" : "fp16", M, N,
             K, ta, tb, a16, c16, beta);
    std::string extra;
    if (differ) extra = std::to_string(differ) + " words differ from the float slot's product (+ rounding)";
    check_outs(name, {{"c", &got[0], &got[1], &cpu16}}, c16 ? (bf ? 0x1p-8 : 0x1p-11) : K_TOL_GEMM, extra);
}

// matmul_ld: sub-matrices of wider row-major arrays, rows lda / ldb / ldc floats apart and starting a few floats
// into a row (a column slice, as a LoRA site on q / k / v takes of the fused projection). The floats outside the
// slices are NaN: one read of a or b's would poison the product, and c's must come back untouched, bit for bit
// (c's slice is NaN too when beta == 0: it must not be read). The slice against the cpu backend's matmul_ld
// (K_TOL_GEMM) and run twice (determinism); bitwise against zt_cu_matmul on packed copies, in fp32 and after
// set_precision(bf16 / fp16) (inputs not of the precision: the packing rounds both the same way).
vec embed_ld(const vec &packed, int rows, int cols, int ld, int off) {
    vec w((size_t)rows * ld, NAN);
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < cols; j++) w[(size_t)r * ld + off + j] = packed[(size_t)r * cols + j];
    return w;
}
vec extract_ld(const vec &w, int rows, int cols, int ld, int off) {
    vec p((size_t)rows * cols);
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < cols; j++) p[(size_t)r * cols + j] = w[(size_t)r * ld + off + j];
    return p;
}
// elements of w outside the slice whose bits differ from w0's
size_t pads_changed(const vec &w, const vec &w0, int rows, int cols, int ld, int off) {
    size_t n = 0;
    for (size_t i = 0; i < w.size(); i++) {
        const int j = (int)(i % ld) - off;
        const bool in = (int)(i / ld) < rows && j >= 0 && j < cols;
        n += !in && memcmp(&w[i], &w0[i], sizeof(float)) != 0;
    }
    return n;
}

void test_matmul_ld(zt_cu_gemm *g, int M, int N, int K, int ta, int tb, float alpha, float beta, int pad) {
    const int ra = ta ? K : M, ca = ta ? M : K, rb = tb ? N : K, cb = tb ? K : N; // stored a (ra, ca), b (rb, cb)
    const int oa = 3, ob = 1, oc = 2;                                                 // the slices' first columns
    const int lda = ca + oa + pad, ldb = cb + ob + 2 * pad + 1, ldc = N + oc + pad;
    const vec ap = randv((size_t)M * K), bp = randv((size_t)K * N);
    const vec cp = beta != 0.0f ? randv((size_t)M * N) : nanv((size_t)M * N);
    const vec a = embed_ld(ap, ra, ca, lda, oa), b = embed_ld(bp, rb, cb, ldb, ob), c0 = embed_ld(cp, M, N, ldc, oc);
    char name[160];
    snprintf(name, sizeof name, "matmul_ld[M%d,N%d,K%d,ta%d,tb%d,alpha%g,beta%g,lda%d,ldb%d,ldc%d]", M, N, K, ta, tb,
             alpha, beta, lda, ldb, ldc);
    // the cpu backend's (c not read when beta == 0: zeros there, as test_matmul)
    vec c_rw = beta != 0.0f ? c0 : embed_ld(vec((size_t)M * N, 0.0f), M, N, ldc, oc);
    g_cpu->i->matmul_ld(g_cpu, c_rw.data() + oc, a.data() + oa, b.data() + ob, M, N, K, ta, tb, alpha, beta, lda, ldb,
                        ldc);
    const vec c_r = extract_ld(c_rw, M, N, ldc, oc);
    vec cw[2], cs[2];
    size_t pads = 0;
    for (int run = 0; run < 2; run++) {
        harness_config(run);
        cw[run] = c0;
        zt_cu_matmul_ld(g, 0, cw[run].data() + oc, a.data() + oa, b.data() + ob, M, N, K, ta, tb, alpha, beta, lda,
                        ldb, ldc);
        cs[run] = extract_ld(cw[run], M, N, ldc, oc);
        pads += pads_changed(cw[run], c0, M, N, ldc, oc);
    }
    harness_config(0);
    check_outs(name, {{"c", &cs[0], &cs[1], &c_r}}, K_TOL_GEMM);
    // bitwise against the product of packed copies, in each precision; c outside the slice untouched
    for (int prec = ZT_PREC_FP32; prec <= ZT_PREC_FP16; prec++) {
        zt_cu_gemm_set_precision(g, prec);
        vec cl = c0, cpk = cp;
        zt_cu_matmul_ld(g, 0, cl.data() + oc, a.data() + oa, b.data() + ob, M, N, K, ta, tb, alpha, beta, lda, ldb, ldc);
        zt_cu_matmul(g, 0, cpk.data(), ap.data(), bp.data(), M, N, K, ta, tb, alpha, beta);
        zt_cu_gemm_set_precision(g, ZT_PREC_FP32);
        const vec sl = extract_ld(cl, M, N, ldc, oc);
        pads += pads_changed(cl, c0, M, N, ldc, oc);
        const char *pn = prec == ZT_PREC_BF16 ? "bf16" : prec == ZT_PREC_FP16 ? "fp16" : "fp32";
        if (!same_bits(sl, cpk)) {
            size_t at = 0;
            while (at < sl.size() && !memcmp(&sl[at], &cpk[at], sizeof(float))) at++;
            check_fail("%s %s: differs from matmul on packed copies at [%zu] (%.9g vs %.9g)", name, pn, at,
                       (double)sl[at], (double)cpk[at]);
        } else {
            check_pass("%s %s: bit-identical to matmul on packed copies (%zu words)", name, pn, sl.size());
        }
    }
    if (pads) check_fail("%s: %zu words of c outside the slice changed", name, pads);
    else check_pass("%s: c outside the slice untouched (NaN bits kept, 5 runs)", name);
}

void test_gemv(int C, int OC, int with_bias, int w_t) {
    vec x = randv(C), w = randv((size_t)C * OC, 0.1), bias = randv(OC);
    const float *bp = with_bias ? bias.data() : nullptr;
    vec y_r(OC);
    g_cpu->i->gemv(g_cpu, y_r.data(), x.data(), w.data(), bp, C, OC, w_t);
    vec y[2];
    for (int run = 0; run < 2; run++) {
        harness_config(run);
        y[run] = nanv(OC);
        zt_cu_gemv(0, y[run].data(), x.data(), w.data(), bp, C, OC, w_t);
    }
    char name[96];
    snprintf(name, sizeof name, "gemv[C%d,OC%d,bias%d,w_t%d]", C, OC, with_bias, w_t);
    check_outs(name, {{"y", &y[0], &y[1], &y_r}}, K_TOL_GEMM);
}

// ------------------------------------------------------------------------------------ timings

void timeit(const char *what, const std::function<void()> &f) {
    f(); // warm up: fiber stacks, pages
    int n = 0;
    double t0 = zt_now(), t;
    do {
        f();
        n++;
    } while ((t = zt_now() - t0) < 1.0);
    printf("# time %-44s %9.2f ms\n", what, t / n * 1e3);
    fflush(stdout);
}

void bench(zt_cu_gemm *g) {
    harness_config(0);
    printf("# timings under the harness: %u OS threads\n", hx::config_get().threads);
    {
        const int M = 256, N = 768, K = 768;
        vec a = randv((size_t)M * K), b = randv((size_t)K * N), c((size_t)M * N);
        timeit("matmul 256x768x768 (ta0 tb0)", [&] { zt_cu_matmul(g, 0, c.data(), a.data(), b.data(), M, N, K, 0, 0, 1, 0); });
        timeit("matmul 256x768x768 (ta1 tb1)", [&] { zt_cu_matmul(g, 0, c.data(), a.data(), b.data(), M, N, K, 1, 1, 1, 0); });
        double t0 = zt_now();
        g_cpu->i->matmul(g_cpu, c.data(), a.data(), b.data(), M, N, K, 0, 0, 1, 0);
        printf("# time %-44s %9.2f ms\n", "(cpu backend, 1 thread: same matmul, once)", (zt_now() - t0) * 1e3);
    }
    {
        const int N = 256, C = 768, OC = 3072;
        vec x = randv((size_t)N * C), w = randv((size_t)C * OC), bias = randv(OC), dy = randv((size_t)N * OC);
        vec out((size_t)N * OC), dx((size_t)N * C), dw((size_t)C * OC), db(OC);
        std::vector<unsigned char> sc(zt_cu_linear_bwd_scratch(N, OC));
        timeit("linear_fwd N256 C768 OC3072", [&] { zt_cu_linear_fwd(g, 0, out.data(), x.data(), w.data(), bias.data(), N, C, OC); });
        timeit("linear_bwd N256 C768 OC3072", [&] {
            zt_cu_linear_bwd(g, 0, dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), N, C, OC, 0, sc.data(),
                             tickets());
        });
    }
    {
        const int N = 256, C = 768;
        vec x = randv((size_t)N * C), w = randv(C), b = randv(C), dy = randv((size_t)N * C);
        vec out((size_t)N * C), m(N), r(N), dx((size_t)N * C), dw(C), db(C);
        std::vector<unsigned char> sc(zt_cu_layernorm_bwd_scratch(N, C));
        timeit("layernorm_fwd N256 C768", [&] {
            zt_cu_layernorm_fwd(0, out.data(), m.data(), r.data(), x.data(), w.data(), b.data(), N, C, ZT_LN_EPS);
        });
        timeit("layernorm_bwd N256 C768", [&] {
            zt_cu_layernorm_bwd(0, dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), m.data(), r.data(), N, C,
                                sc.data(), tickets());
        });
    }
    {
        const int B = 1, T = 256, C = 768, NH = 12;
        vec qkv = randv((size_t)B * T * 3 * C), dy = randv((size_t)B * T * C), out((size_t)B * T * C);
        vec att((size_t)B * NH * T * T), datt(att.size()), dqkv(qkv.size());
        timeit("attention_fwd B1 T256 C768 NH12", [&] { zt_cu_attention_fwd(g_gemm, 0, out.data(), att.data(), qkv.data(), B, T, C, NH, NH); });
        timeit("attention_bwd B1 T256 C768 NH12", [&] {
            zt_cu_attention_bwd(g_gemm, 0, dqkv.data(), datt.data(), dy.data(), qkv.data(), att.data(), B, T, C, NH, NH);
        });
        vec kc((size_t)1024 * C), vc(kc.size()), o(C);
        timeit("attention_decode pos 255 C768 NH12", [&] { zt_cu_attention_decode(0, o.data(), kc.data(), vc.data(), qkv.data(), 255, 1024, C, NH, NH); });
    }
    {
        const int C = 768, OC = 50304;
        vec x = randv(C), w = randv((size_t)C * OC), y(OC);
        timeit("gemv C768 OC50304 w_t1 (LM head)", [&] { zt_cu_gemv(0, y.data(), x.data(), w.data(), nullptr, C, OC, 1); });
        timeit("gemv C768 OC50304 w_t0", [&] { zt_cu_gemv(0, y.data(), x.data(), w.data(), nullptr, C, OC, 0); });
    }
}

} // namespace

int main(int argc, char **argv) {
    const bool do_bench = argc > 1 && !strcmp(argv[1], "--bench");
    double t0 = zt_now();
    if (!test_setup(20240611)) return 1; // the data seed (ZT_TEST_SEED overrides)
    zt_cu_gemm *g = zt_cu_gemm_create(0);
    g_gemm = g;

    test_layernorm(5, 37);
    test_layernorm(4, 130);
    test_layernorm(67, 45);
    test_layernorm(130, 768);
    test_layernorm(7, 3);
    test_residual_layernorm(5, 37);
    test_residual_layernorm(67, 45);
    test_residual_layernorm(130, 768);
    test_residual_layernorm(7, 3);

    test_attention(2, 7, 15, 3, 3);  // hs 5
    test_attention(1, 9, 12, 4, 4);  // hs 3
    test_attention(3, 1, 6, 2, 2);   // T 1
    test_attention(2, 37, 96, 2, 2); // hs 48 (> a warp), T > a warp
    test_attention(1, 70, 64, 4, 4); // T > 2 warps
    test_attention(2, 33, 130, 2, 2); // hs 65
    test_attention(4, 32, 64, 2, 2); // the tiny model's shape
    // grouped-query (NKV 2) and multi-query (NKV 1) attention
    test_attention(2, 7, 20, 4, 2);  // hs 5
    test_attention(2, 7, 20, 4, 1);
    test_attention(3, 1, 12, 6, 2);  // T 1, groups of 3
    test_attention(2, 37, 96, 2, 1); // hs 48, T > a warp
    test_attention(1, 70, 128, 8, 2); // T > 2 warps, groups of 4
    test_attention(2, 33, 130, 2, 1); // hs 65

    // the fused attention: head sizes 64 and 32, T past one and two 64-row tiles and partial tiles
    test_attention_fused(2, 37, 128, 2, 2);
    test_attention_fused(1, 70, 128, 4, 4);
    test_attention_fused(2, 37, 128, 2, 1);
    test_attention_fused(1, 70, 128, 4, 2);
    test_attention_fused(1, 130, 256, 8, 2);  // hs 32, groups of 4, three key tiles
    test_attention_fused(2, 65, 128, 4, 1);   // hs 32, multi-query

    test_decode(40, 45, 96, 3, 3);
    test_decode(9, 9, 15, 3, 3);
    test_decode(40, 45, 96, 6, 2);  // groups of 3
    test_decode(9, 9, 15, 3, 1);    // multi-query
    test_decode_long(13000, 64, 2, 2);
    test_decode_long(13000, 128, 4, 1);

    const float ab[][2] = {{1.0f, 0.0f}, {0.5f, 1.5f}, {-2.0f, 0.0f}, {1.0f, 1.0f}};
    const int shapes[][3] = {{37, 45, 29}, {65, 130, 67}, {1, 1, 1}, {3, 200, 1}, {128, 64, 257}, {70, 1, 33}};
    int k = 0;
    for (const auto &s : shapes)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++, k++) test_matmul(g, s[0], s[1], s[2], ta, tb, ab[k % 4][0], ab[k % 4][1]);

    // matmul_ld: the same shapes, strides past the packed widths; then LoRA's shapes on a q | k | v row
    // (forward: y's k columns += u(N, r) @ B(cols, r)^T; backward: du = dy's k columns @ B, dB = (dy's k columns)^T u)
    k = 0;
    for (const auto &s : shapes)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++, k++)
                test_matmul_ld(g, s[0], s[1], s[2], ta, tb, ab[k % 4][0], ab[k % 4][1], 1 + (k % 3) * 7);
    test_matmul_ld(g, 128, 48, 4, 0, 1, 0.5f, 1.0f, 100);
    test_matmul_ld(g, 128, 4, 48, 0, 0, 0.5f, 0.0f, 100);
    test_matmul_ld(g, 48, 4, 128, 1, 0, 0.5f, 0.0f, 100);

    test_linear(g, 37, 29, 45, 1, 0);
    test_linear(g, 37, 29, 45, 0, 1);
    test_linear(g, 130, 64, 192, 1, 1);
    test_linear(g, 1, 7, 3, 1, 0);
    test_linear(g, 300, 33, 65, 1, 1);
    test_linear(g, 128, 64, 256, 0, 0);

    for (int prec = ZT_PREC_BF16; prec <= ZT_PREC_FP16; prec++) {
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) test_gemm16(g, prec, 37, 45, 29, ta, tb, ta ? 0.5f : 1.0f, tb ? 1.0f : 0.0f, 0);
        test_gemm16(g, prec, 130, 192, 64, 0, 0, 1.0f, 0.0f, 1);
        test_gemm16(g, prec, 1, 3, 7, 0, 1, 1.0f, 0.0f, 0);
        test_linear_bwd16(g, prec, 130, 37, 300, 1); // 2 column blocks x 3 row blocks beside the packing's
        test_linear_bwd16(g, prec, 37, 29, 45, 0);
        // the LM head's three products on 2-byte logits: logits (c16), dhead (a16, ta), dlnf (a16)
        test_matmul16(g, prec, 37, 301, 29, 0, 1, 0, 1);
        test_matmul16(g, prec, 301, 29, 37, 1, 0, 1, 0);
        test_matmul16(g, prec, 301, 29, 37, 1, 0, 1, 0, 1.0f); // the chunked head's dhead, added to
        test_matmul16(g, prec, 37, 29, 301, 0, 0, 1, 0);
        test_matmul16(g, prec, 5, 7, 3, 1, 1, 1, 1);
    }

    test_gemv(37, 45, 1, 0);
    test_gemv(37, 45, 0, 1);
    test_gemv(768, 300, 0, 0);
    test_gemv(768, 300, 1, 1);
    test_gemv(1, 5, 1, 1);
    test_gemv(64, 256, 0, 1);

    // the encoders' (after the cases above, which draw the inputs they always drew): LayerNorm with BERT's epsilon,
    // bidirectional attention with every kind of key mask (two of each with B 8)
    test_layernorm(5, 37, 1e-12f);
    test_layernorm(67, 130, 1e-12f);
    test_residual_layernorm(67, 45, 1e-12f);
    test_attention(4, 7, 15, 3, 3, true);   // hs 5
    test_attention(4, 37, 96, 2, 2, true);  // hs 48, T past a warp
    test_attention(4, 7, 20, 4, 2, true);   // grouped-query
    test_attention(4, 70, 128, 8, 1, true); // multi-query, T past two warps
    test_attention(4, 1, 12, 6, 2, true);   // T 1
    test_attention(8, 33, 130, 2, 1, true); // hs 65

    if (do_bench) bench(g);
    zt_cu_gemm_free(g);
    zt_backend_destroy(g_cpu);
    printf("# test_kernels_norm_attn: %d passed, %d failed, %.2f s\n", g_pass, g_fail, zt_now() - t0);
    return g_fail ? 1 : 0;
}
