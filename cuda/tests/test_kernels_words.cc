// test_kernels_words.cc — the kernels that also write their rounded output as 2-byte words (out16), which the CUDA
// backend records as mirrors so the next product reads the words instead of packing the output (cuda_backend.cu
// words_for, src/iface/mirror16.h): GELU forward (its 4-word uint2 path when aligned, the scalar path one element
// off, with and without in_round, and the rounded input's words in16) and backward, LayerNorm forward and backward,
// residual + LayerNorm forward (out, and res as res16), round_to's x16 (the stash's words, pack16_ahead), the fused
// attention's forward and backward (fp32 kernels and tensor cores), RMSNorm and SwiGLU forward and
// backward; and the kernels that read words instead of floats: a product's output handed over as words or a
// mirror's (GELU forward's inp16, the tensor-core attention forward's qkv_words, residual + LayerNorm's a16 / bb16,
// GELU and LayerNorm backward's dout16, the tensor-core attention backward's dout16), a
// lazy unpack's (GELU and LayerNorm backward's inp16, the tensor-core attention backward's qkv16 and out16;
// unpack16_multi); and the tensor-core attention with the round_to of its input fused (in_round: qkv forward, with its
// words; dout backward). In bf16 and fp16, under the host execution harness: the outputs must be the same bits as
// without out16, every word zt_f32_to_bits16 of its output element, and nothing written past the words; linear_fwd's
// out_words (the GEMM's own rounding): round_to's words of its float output, the floats not written; and the forwards
// asked for the words alone (no float output) write the same words. (A product reading the words is checked bitwise
// against packing in test_kernels_norm_attn's linear_bwd rows and tests/unit/core/dist/test_mirrors.c.)
//
// Usage: [ZT_TEST_SEED=n] test_kernels_words    (built by cuda/backend.mk against build/libztrain.a)
#include "kernel_test.h"

namespace {

#include "kernel_check.h"

const char *prec_name(int prec) { return prec == ZT_PREC_BF16 ? "bf16" : "fp16"; }

// mismatching words (each must be the rounding of its output element), plus any word changed past n
size_t words_bad(const float *o, const std::vector<uint16_t> &w, size_t at, size_t n, int prec) {
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += w[at + i] != zt_f32_to_bits16(o[i], prec);
    for (size_t i = 0; i < w.size(); i++)
        if (i < at || i >= at + n) bad += w[i] != 0xdead;
    return bad;
}

void test_gelu(int prec, size_t n) {
    size_t bad = 0;
    for (int exact = 0; exact < 2; exact++)
        for (int off = 0; off < 2; off++)
            for (int in_round = 0; in_round <= prec; in_round += prec) {
                vec in0 = randv(n + 1, 3.0), a = in0, b = in0, oa = nanv(n + 1), ob = nanv(n + 1);
                std::vector<uint16_t> w(n + 4, 0xdead);
                harness_config(0);
                zt_cu_gelu_fwd(0, oa.data() + off, a.data() + off, n, prec, exact, in_round);
                harness_config(1); // another interleaving too
                std::vector<uint16_t> wi(n + 4, 0xdead); // with in_round: the rounded input's words (in16)
                zt_cu_gelu_fwd(0, ob.data() + off, b.data() + off, n, prec, exact, in_round, w.data() + off,
                               in_round ? wi.data() + off : nullptr);
                bad += !same_bits(oa, ob) + !same_bits(a, b);
                bad += words_bad(ob.data() + off, w, off, n, prec);
                if (in_round) bad += words_bad(b.data() + off, wi, off, n, prec);
            }
    if (bad == 0)
        check_pass("gelu_fwd out16, in16 %s n=%zu: words = the rounded output (and input, with in_round), output the "
                   "same bits as without (tanh and erf, aligned and one off, in_round or not)", prec_name(prec), n);
    else check_fail("gelu_fwd out16 %s n=%zu: %zu mismatches", prec_name(prec), n, bad);
}

void test_norms(int prec, int N, int C) {
    const size_t n = (size_t)N * C;
    vec x = randv(n), a = randv(n), w = randv(C), b = randv(C), m0(N), r0(N), m1(N), r1(N), o0(n), o1(n), s0(n), s1(n);
    std::vector<uint16_t> wo(n + 3, 0xdead);
    zt_cu_layernorm_fwd(0, o0.data(), m0.data(), r0.data(), x.data(), w.data(), b.data(), N, C, 1e-5f, prec);
    zt_cu_layernorm_fwd(0, o1.data(), m1.data(), r1.data(), x.data(), w.data(), b.data(), N, C, 1e-5f, prec, wo.data());
    size_t bad = !same_bits(o0, o1) + !same_bits(m0, m1) + !same_bits(r0, r1) + words_bad(o1.data(), wo, 0, n, prec);
    std::vector<uint16_t> wr(n + 3, 0xdead), ws(n + 3, 0xdead);
    zt_cu_residual_layernorm_fwd(0, s0.data(), o0.data(), m0.data(), r0.data(), a.data(), x.data(), w.data(), b.data(),
                                 N, C, 1e-5f, prec, prec);
    zt_cu_residual_layernorm_fwd(0, s1.data(), o1.data(), m1.data(), r1.data(), a.data(), x.data(), w.data(), b.data(),
                                 N, C, 1e-5f, prec, prec, 0, wr.data(), ws.data());
    bad += !same_bits(s0, s1) + !same_bits(o0, o1) + words_bad(o1.data(), wr, 0, n, prec);
    bad += words_bad(s1.data(), ws, 0, n, prec); // res16: the residual's words
    // round_to with x16: the same rounding, and the words (aligned and one off)
    for (int off = 0; off < 2; off++) {
        vec y0 = randv(n + 1), y1 = y0;
        std::vector<uint16_t> wx(n + 4, 0xdead);
        zt_cu_round_to(0, y0.data() + off, n, prec);
        zt_cu_round_to(0, y1.data() + off, n, prec, wx.data() + off);
        bad += !same_bits(y0, y1) + words_bad(y1.data() + off, wx, off, n, prec);
    }
    if (bad == 0)
        check_pass("layernorm_fwd, residual_layernorm_fwd out16 (and res16), round_to x16 %s [N%d,C%d]: words = the "
                   "rounded output, outputs the same bits as without", prec_name(prec), N, C);
    else check_fail("layernorm_fwd, residual_layernorm_fwd out16 %s [N%d,C%d]: %zu mismatches", prec_name(prec), N, C,
                    bad);
}

// the ops asked for their words alone (the float output null, cuda_backend_core.cu floats_optional): GELU forward and
// backward (the vector path and the tail), LayerNorm, residual + LayerNorm (out, and res as well) and the
// tensor-core attention write the same words as with their floats, and the same statistics
void test_words_alone(int prec, int N, int C) {
    const size_t n = (size_t)N * C;
    size_t bad = 0;
    for (int exact = 0; exact < 2; exact++) {
        vec x = randv(n + 1, 3.0), o(n + 1);
        std::vector<uint16_t> w0(n + 1, 0xdead), w1(n + 1, 0xdead);
        zt_cu_gelu_fwd(0, o.data(), x.data(), n + 1, prec, exact, 0, w0.data());
        zt_cu_gelu_fwd(0, nullptr, x.data(), n + 1, prec, exact, 0, w1.data());
        bad += w0 != w1;
        // the backward, in place with in_round and out of place: the same words with dinp null
        vec d0 = randv(n + 1), d1 = d0, d2 = d0;
        std::vector<uint16_t> g0(n + 1, 0xdead), g1(n + 1, 0xdead);
        zt_cu_gelu_bwd(0, d1.data(), x.data(), d1.data(), n + 1, prec, exact, prec, g0.data());
        zt_cu_gelu_bwd(0, nullptr, x.data(), d2.data(), n + 1, prec, exact, prec, g1.data());
        bad += (g0 != g1) + !same_bits(d0, d2); // dout not written
    }
    vec x = randv(n), a = randv(n), w = randv(C), b = randv(C), m0(N), r0(N), m1(N), r1(N), o0(n), s0(n), s1(n);
    std::vector<uint16_t> w0(n, 0xdead), w1(n, 0xdead), q0(n, 0xdead), q1(n, 0xdead);
    zt_cu_layernorm_fwd(0, o0.data(), m0.data(), r0.data(), x.data(), w.data(), b.data(), N, C, 1e-5f, prec, w0.data());
    zt_cu_layernorm_fwd(0, nullptr, m1.data(), r1.data(), x.data(), w.data(), b.data(), N, C, 1e-5f, prec, w1.data());
    bad += (w0 != w1) + !same_bits(m0, m1) + !same_bits(r0, r1);
    zt_cu_residual_layernorm_fwd(0, s0.data(), o0.data(), m0.data(), r0.data(), a.data(), x.data(), w.data(), b.data(),
                                 N, C, 1e-5f, prec, prec, 0, w0.data(), q0.data());
    zt_cu_residual_layernorm_fwd(0, s1.data(), nullptr, m1.data(), r1.data(), a.data(), x.data(), w.data(), b.data(),
                                 N, C, 1e-5f, prec, prec, 0, w1.data(), q1.data());
    bad += (w0 != w1) + (q0 != q1) + !same_bits(s0, s1) + !same_bits(m0, m1) + !same_bits(r0, r1);
    std::vector<uint16_t> w2(n, 0xdead), q2(n, 0xdead); // and res's words alone too (read back from them)
    zt_cu_residual_layernorm_fwd(0, nullptr, nullptr, m1.data(), r1.data(), a.data(), x.data(), w.data(), b.data(), N,
                                 C, 1e-5f, prec, prec, 0, w2.data(), q2.data());
    bad += (w0 != w2) + (q0 != q2) + !same_bits(m0, m1) + !same_bits(r0, r1);
    const int B = 1, T = 70, AC = 128, NH = 2;
    vec qkv = randv((size_t)B * T * 3 * AC), ao((size_t)B * T * AC), st0((size_t)B * NH * T * 2), st1(st0.size());
    std::vector<uint16_t> aw0(ao.size(), 0xdead), aw1(ao.size(), 0xdead);
    for (float &f : qkv) f = zt_round_prec(f, prec);
    zt_cu_attention_fused_fwd(0, ao.data(), st0.data(), qkv.data(), B, T, AC, NH, NH, prec, prec, aw0.data());
    zt_cu_attention_fused_fwd(0, nullptr, st1.data(), qkv.data(), B, T, AC, NH, NH, prec, prec, aw1.data());
    bad += (aw0 != aw1) + !same_bits(st0, st1);
    if (bad == 0)
        check_pass("gelu_fwd, gelu_bwd, layernorm_fwd, residual_layernorm_fwd, attention_fused_fwd (tensor cores) %s "
                   "[N%d,C%d] with their float output null: the same words and statistics as with it", prec_name(prec),
                   N, C);
    else check_fail("words alone %s [N%d,C%d]: %zu mismatches", prec_name(prec), N, C, bad);
}

// GELU backward (in place, as the model runs it, with and without in_round) and LayerNorm backward (dinp += ...)
void test_backward_elem(int prec, int N, int C) {
    const size_t n = (size_t)N * C;
    size_t bad = 0;
    for (int in_round = 0; in_round <= prec; in_round += prec) {
        vec x = randv(n, 3.0), d0 = randv(n), a = d0, b = d0;
        std::vector<uint16_t> w(n + 3, 0xdead);
        zt_cu_gelu_bwd(0, a.data(), x.data(), a.data(), n, prec, 0, in_round);
        zt_cu_gelu_bwd(0, b.data(), x.data(), b.data(), n, prec, 0, in_round, w.data());
        bad += !same_bits(a, b) + words_bad(b.data(), w, 0, n, prec);
    }
    vec x = randv(n), dy = randv(n), lw = randv(C), mean(N), rstd(N), o(n), dx0 = randv(n), dx1 = dx0;
    vec dwa(C), dba(C), dwb(C), dbb(C);
    zt_cu_layernorm_fwd(0, o.data(), mean.data(), rstd.data(), x.data(), lw.data(), lw.data(), N, C, 1e-5f);
    std::vector<unsigned char> sc(zt_cu_layernorm_bwd_scratch(N, C));
    std::vector<uint16_t> w(n + 3, 0xdead);
    zt_cu_layernorm_bwd(0, dx0.data(), dwa.data(), dba.data(), dy.data(), x.data(), lw.data(), mean.data(),
                        rstd.data(), N, C, sc.data(), tickets(), prec);
    zt_cu_layernorm_bwd(0, dx1.data(), dwb.data(), dbb.data(), dy.data(), x.data(), lw.data(), mean.data(),
                        rstd.data(), N, C, sc.data(), tickets(), prec, 0, w.data());
    bad += !same_bits(dx0, dx1) + !same_bits(dwa, dwb) + !same_bits(dba, dbb) + words_bad(dx1.data(), w, 0, n, prec);
    if (bad == 0)
        check_pass("gelu_bwd, layernorm_bwd dinp16 %s [N%d,C%d]: words = the rounded input gradient, outputs the same "
                   "bits as without", prec_name(prec), N, C);
    else check_fail("gelu_bwd, layernorm_bwd dinp16 %s [N%d,C%d]: %zu mismatches", prec_name(prec), N, C, bad);
}

// the readers of a lazy unpack's words (cuda_backend_core.cu): GELU backward and LayerNorm backward with inp given
// as words must give the bits they give on the floats (aligned and one element off for the GELU); unpack16_multi
// the bits of one unpack16 a range
void test_word_readers(int prec, int N, int C) {
    const size_t n = (size_t)N * C;
    size_t bad = 0;
    for (int off = 0; off < 2; off++) {
        vec x = randv(n + 1, 3.0), d0 = randv(n + 1), a = d0, b = d0;
        for (float &f : x) f = zt_round_prec(f, prec);
        std::vector<uint16_t> xw(n + 1);
        for (size_t i = 0; i <= n; i++) xw[i] = zt_f32_to_bits16(x[i], prec);
        vec xg = nanv(n + 1); // the floats must not be read
        zt_cu_gelu_bwd(0, a.data() + off, x.data() + off, a.data() + off, n, prec, 0, prec);
        zt_cu_gelu_bwd(0, b.data() + off, xg.data() + off, b.data() + off, n, prec, 0, prec, nullptr,
                       xw.data() + off, prec);
        bad += !same_bits(a, b);
        { // dout given as words too (a product's), in place over NaN floats: the bits of the rounded floats
            vec dr = d0, c = nanv(n + 1);
            for (float &f : dr) f = zt_round_prec(f, prec);
            std::vector<uint16_t> dw(n + 1);
            for (size_t i = 0; i <= n; i++) dw[i] = zt_f32_to_bits16(dr[i], prec);
            vec e = dr;
            zt_cu_gelu_bwd(0, e.data() + off, x.data() + off, e.data() + off, n, prec, 0, 0);
            zt_cu_gelu_bwd(0, c.data() + off, xg.data() + off, c.data() + off, n, prec, 0, 0, nullptr, xw.data() + off,
                           prec, dw.data() + off);
            for (size_t i = off; i < off + n; i++) bad += memcmp(&e[i], &c[i], sizeof(float)) != 0;
        }
        for (int exact = 0; exact < 2; exact++) { // forward: inp as a product's words (linear_fwd's out_words)
            vec fa = nanv(n + 1), fb = nanv(n + 1);
            std::vector<uint16_t> wa(n + 1, 0xdead), wb(n + 1, 0xdead);
            zt_cu_gelu_fwd(0, fa.data() + off, x.data() + off, n, prec, exact, 0, wa.data() + off);
            zt_cu_gelu_fwd(0, fb.data() + off, xg.data() + off, n, prec, exact, 0, wb.data() + off, nullptr,
                           xw.data() + off, prec);
            bad += !same_bits(fa, fb) + (wa != wb);
        }
    }
    vec x = randv(n), dy = randv(n), lw = randv(C), mean(N), rstd(N), o(n), dx0 = randv(n), dx1 = dx0;
    for (float &f : x) f = zt_round_prec(f, prec);
    std::vector<uint16_t> xw(n);
    for (size_t i = 0; i < n; i++) xw[i] = zt_f32_to_bits16(x[i], prec);
    vec dwa(C), dba(C), dwb(C), dbb(C), xg = nanv(n);
    zt_cu_layernorm_fwd(0, o.data(), mean.data(), rstd.data(), x.data(), lw.data(), lw.data(), N, C, 1e-5f);
    std::vector<unsigned char> sc(zt_cu_layernorm_bwd_scratch(N, C));
    zt_cu_layernorm_bwd(0, dx0.data(), dwa.data(), dba.data(), dy.data(), x.data(), lw.data(), mean.data(),
                        rstd.data(), N, C, sc.data(), tickets(), prec);
    zt_cu_layernorm_bwd(0, dx1.data(), dwb.data(), dbb.data(), dy.data(), xg.data(), lw.data(), mean.data(),
                        rstd.data(), N, C, sc.data(), tickets(), prec, 0, nullptr, xw.data(), prec);
    bad += !same_bits(dx0, dx1) + !same_bits(dwa, dwb) + !same_bits(dba, dbb);
    { // dout given as words (a product's), its floats NaN: the bits of the floats rounded
        vec dyr = dy, dyn = nanv(n), dx2 = dx0, dx3 = dx0, dwc(C), dbc(C), dwd(C), dbd(C);
        for (float &f : dyr) f = zt_round_prec(f, prec);
        std::vector<uint16_t> dyw(n);
        for (size_t i = 0; i < n; i++) dyw[i] = zt_f32_to_bits16(dyr[i], prec);
        zt_cu_layernorm_bwd(0, dx2.data(), dwc.data(), dbc.data(), dyr.data(), x.data(), lw.data(), mean.data(),
                            rstd.data(), N, C, sc.data(), tickets(), prec);
        zt_cu_layernorm_bwd(0, dx3.data(), dwd.data(), dbd.data(), dyn.data(), xg.data(), lw.data(), mean.data(),
                            rstd.data(), N, C, sc.data(), tickets(), prec, 0, nullptr, xw.data(), prec, dyw.data());
        bad += !same_bits(dx2, dx3) + !same_bits(dwc, dwd) + !same_bits(dbc, dbd);
    }
    // residual + LayerNorm forward with a and bb given as words (their floats NaN): the same res, out, stats, words
    {
        vec ra = randv(n), rb = randv(n);
        for (float &f : ra) f = zt_round_prec(f, prec);
        for (float &f : rb) f = zt_round_prec(f, prec);
        std::vector<uint16_t> aw(n), bw(n), oa(n), ob(n), sa(n), sb(n);
        for (size_t i = 0; i < n; i++) aw[i] = zt_f32_to_bits16(ra[i], prec), bw[i] = zt_f32_to_bits16(rb[i], prec);
        vec res0(n), res1(n), out0(n), out1(n), m0(N), m1(N), r0(N), r1(N), an = nanv(n), bn = nanv(n);
        zt_cu_residual_layernorm_fwd(0, res0.data(), out0.data(), m0.data(), r0.data(), ra.data(), rb.data(), lw.data(),
                                     lw.data(), N, C, 1e-5f, prec, prec, 0, oa.data(), sa.data());
        zt_cu_residual_layernorm_fwd(0, res1.data(), out1.data(), m1.data(), r1.data(), an.data(), bn.data(), lw.data(),
                                     lw.data(), N, C, 1e-5f, prec, prec, 0, ob.data(), sb.data(), aw.data(), bw.data(),
                                     prec);
        bad += !same_bits(res0, res1) + !same_bits(out0, out1) + !same_bits(m0, m1) + !same_bits(r0, r1) +
               (oa != ob) + (sa != sb);
    }
    // unpack16_multi: three ranges (one empty) against unpack16 each
    zt_cu_unpack_job job = {};
    vec u0 = nanv(2 * n + 3), u1 = nanv(2 * n + 3);
    const size_t cnt[3] = {n, 0, n - 1}, at[3] = {0, n, n + 2};
    for (int k = 0; k < 3; k++) {
        zt_cu_unpack16(0, u0.data() + at[k], xw.data(), cnt[k], prec);
        job.out[k] = u1.data() + at[k];
        job.x[k] = xw.data();
        job.start[k + 1] = job.start[k] + cnt[k];
    }
    job.n = 3;
    zt_cu_unpack16_multi(0, job, prec);
    bad += !same_bits(u0, u1);
    if (bad == 0)
        check_pass("gelu_fwd / gelu_erf_fwd inp16, gelu_bwd inp16 and dout16, layernorm_bwd inp16 and dout16, "
                   "residual_layernorm_fwd a16 / bb16, unpack16_multi %s [N%d,C%d]: the same bits as from the floats "
                   "(the floats NaN when the words are given)", prec_name(prec), N, C);
    else check_fail("gelu_fwd / gelu_bwd / layernorm_bwd inp16, unpack16_multi %s [N%d,C%d]: %zu mismatches",
                    prec_name(prec), N, C, bad);
}

// the Llama family's producers: RMSNorm forward and backward (dinp += ...), SwiGLU forward and backward
void test_llama(int prec, int N, int C, int I) {
    const size_t n = (size_t)N * C, ni = (size_t)N * I;
    vec x = randv(n), w = randv(C), r0(N), r1(N), o0(n), o1(n), dy = randv(n), d0 = randv(n), d1 = d0, dw0(C), dw1(C);
    std::vector<uint16_t> wo(n + 3, 0xdead), wd(n + 3, 0xdead);
    zt_cu_rmsnorm_fwd(0, o0.data(), r0.data(), x.data(), w.data(), N, C, 1e-5f, prec);
    zt_cu_rmsnorm_fwd(0, o1.data(), r1.data(), x.data(), w.data(), N, C, 1e-5f, prec, wo.data());
    size_t bad = !same_bits(o0, o1) + !same_bits(r0, r1) + words_bad(o1.data(), wo, 0, n, prec);
    std::vector<unsigned char> sc(zt_cu_rmsnorm_bwd_scratch(N, C));
    zt_cu_rmsnorm_bwd(0, d0.data(), dw0.data(), dy.data(), x.data(), w.data(), r1.data(), N, C, sc.data(), tickets(),
                      prec);
    zt_cu_rmsnorm_bwd(0, d1.data(), dw1.data(), dy.data(), x.data(), w.data(), r1.data(), N, C, sc.data(), tickets(),
                      prec, wd.data());
    bad += !same_bits(d0, d1) + !same_bits(dw0, dw1) + words_bad(d1.data(), wd, 0, n, prec);
    vec gu = randv(2 * ni), s0(ni), s1(ni), sy = randv(ni), g0(2 * ni), g1(2 * ni);
    std::vector<uint16_t> ws(ni + 3, 0xdead), wg(2 * ni + 3, 0xdead);
    zt_cu_swiglu_fwd(0, s0.data(), gu.data(), N, I, prec);
    zt_cu_swiglu_fwd(0, s1.data(), gu.data(), N, I, prec, ws.data());
    bad += !same_bits(s0, s1) + words_bad(s1.data(), ws, 0, ni, prec);
    zt_cu_swiglu_bwd(0, g0.data(), gu.data(), sy.data(), N, I, prec);
    zt_cu_swiglu_bwd(0, g1.data(), gu.data(), sy.data(), N, I, prec, wg.data());
    bad += !same_bits(g0, g1) + words_bad(g1.data(), wg, 0, 2 * ni, prec);
    if (bad == 0)
        check_pass("rmsnorm fwd / bwd, swiglu fwd / bwd words %s [N%d,C%d,I%d]: words = the rounded outputs, outputs the "
                   "same bits as without", prec_name(prec), N, C, I);
    else check_fail("rmsnorm / swiglu words %s [N%d,C%d,I%d]: %zu mismatches", prec_name(prec), N, C, I, bad);
}

void test_attention(int prec, int B, int T, int C, int NH, int NKV) {
    vec qkv = randv((size_t)B * T * (C + 2 * (size_t)NKV * (C / NH)));
    for (float &f : qkv) f = zt_round_prec(f, prec);
    size_t bad = 0;
    for (int tc = 0; tc <= prec; tc += prec) { // the fp32 kernels, then tensor cores
        vec o0((size_t)B * T * C), o1(o0.size()), st0((size_t)B * NH * T * 2), st1(st0.size());
        std::vector<uint16_t> w(o0.size() + 3, 0xdead);
        zt_cu_attention_fused_fwd(0, o0.data(), st0.data(), qkv.data(), B, T, C, NH, NKV, prec, tc);
        zt_cu_attention_fused_fwd(0, o1.data(), st1.data(), qkv.data(), B, T, C, NH, NKV, prec, tc, w.data());
        bad += !same_bits(o0, o1) + !same_bits(st0, st1) + words_bad(o1.data(), w, 0, o1.size(), prec);
        // the backward's dqkv (dk, dv and dq kernels) and its words
        vec dy = randv(o1.size()), g0(qkv.size()), g1(qkv.size()), sc(zt_attention_fused_scratch(B, T, C, NH));
        for (float &f : dy) f = zt_round_prec(f, prec);
        std::vector<uint16_t> wg(qkv.size() + 3, 0xdead);
        zt_cu_attention_fused_bwd(0, g0.data(), sc.data(), dy.data(), qkv.data(), o1.data(), st1.data(), B, T, C, NH,
                                  NKV, prec, tc);
        zt_cu_attention_fused_bwd(0, g1.data(), sc.data(), dy.data(), qkv.data(), o1.data(), st1.data(), B, T, C, NH,
                                  NKV, prec, tc, wg.data());
        bad += !same_bits(g0, g1) + words_bad(g1.data(), wg, 0, g1.size(), prec);
        if (tc) { // qkv and out read as words (a lazy unpack's), their floats NaN: the same dqkv
            std::vector<uint16_t> qw(qkv.size()), ow(o1.size());
            for (size_t i = 0; i < qw.size(); i++) qw[i] = zt_f32_to_bits16(qkv[i], prec);
            for (size_t i = 0; i < ow.size(); i++) ow[i] = zt_f32_to_bits16(o1[i], prec);
            vec g2(qkv.size()), qn = nanv(qkv.size()), on = nanv(o1.size());
            zt_cu_attention_fused_bwd(0, g2.data(), sc.data(), dy.data(), qn.data(), on.data(), st1.data(), B, T, C,
                                      NH, NKV, prec, tc, nullptr, qw.data(), ow.data());
            bad += !same_bits(g0, g2);
            { // and dout given as words too (the projection's dinp alone), its floats NaN: the same dqkv
                std::vector<uint16_t> dw16(dy.size());
                for (size_t i = 0; i < dy.size(); i++) dw16[i] = zt_f32_to_bits16(dy[i], prec);
                vec g5(qkv.size()), dn = nanv(dy.size());
                zt_cu_attention_fused_bwd(0, g5.data(), sc.data(), dn.data(), qn.data(), on.data(), st1.data(), B, T,
                                          C, NH, NKV, prec, tc, nullptr, qw.data(), ow.data(), 0, dw16.data());
                bad += !same_bits(g0, g5);
            }
            // the forward on qkv given as words (a product's out_words), its floats NaN: the same out, stats, words
            vec o5(o1.size()), s5(st1.size());
            std::vector<uint16_t> w5(o1.size() + 3, 0xdead);
            zt_cu_attention_fused_fwd(0, o5.data(), s5.data(), qn.data(), B, T, C, NH, NKV, prec, tc, w5.data(), 0,
                                      nullptr, qw.data());
            bad += !same_bits(o1, o5) + !same_bits(st1, s5) + (w5 != w);
            // the round_to before each op fused into it (in_round): unrounded qkv (forward) and dout (backward)
            // give the bits of round_to then the op, are written back rounded, and qkv's words go to qkv16
            vec qr = randv(qkv.size()), qf = qr, o3(o1.size()), o4(o1.size()), s3(st1.size()), s4(st1.size());
            std::vector<uint16_t> q16(qkv.size() + 3, 0xdead);
            zt_cu_round_to(0, qr.data(), qr.size(), prec);
            zt_cu_attention_fused_fwd(0, o3.data(), s3.data(), qr.data(), B, T, C, NH, NKV, prec, tc);
            harness_config(1); // another interleaving: blocks read tiles others write back
            zt_cu_attention_fused_fwd(0, o4.data(), s4.data(), qf.data(), B, T, C, NH, NKV, prec, tc, nullptr, prec,
                                      q16.data());
            harness_config(0);
            bad += !same_bits(o3, o4) + !same_bits(s3, s4) + !same_bits(qr, qf) + words_bad(qf.data(), q16, 0, qf.size(), prec);
            vec dr = randv(o1.size()), df = dr, g3(qkv.size()), g4(qkv.size());
            zt_cu_round_to(0, dr.data(), dr.size(), prec);
            zt_cu_attention_fused_bwd(0, g3.data(), sc.data(), dr.data(), qr.data(), o3.data(), s3.data(), B, T, C, NH,
                                      NKV, prec, tc);
            zt_cu_attention_fused_bwd(0, g4.data(), sc.data(), df.data(), qr.data(), o3.data(), s3.data(), B, T, C, NH,
                                      NKV, prec, tc, nullptr, nullptr, nullptr, prec);
            bad += !same_bits(g3, g4) + !same_bits(dr, df);
        }
    }
    if (bad == 0)
        check_pass("attention_fused_fwd out16, bwd dqkv16 %s [B%d,T%d,C%d,NH%d,NKV%d]: words = the rounded outputs, outputs "
                   "and stats the same bits as without (fp32 and tensor-core kernels); the tensor-core backward on qkv "
                   "and out (and dout) given as words the same dqkv, the forward on qkv's words the same out; in_round "
                   "forward / backward = round_to then the op, inputs written back rounded, qkv's words", prec_name(prec),
                   B, T, C, NH, NKV);
    else check_fail("attention_fused fwd / bwd words %s [B%d,T%d,C%d,NH%d,NKV%d]: %zu mismatches", prec_name(prec), B, T, C,
                    NH, NKV, bad);
}

} // namespace

// linear_fwd's out_words (a product handed to the GELU as words): with and without a bias, from floats and from
// words, the words equal round_to of the float output, and the floats are not written
void test_product_words(int prec, int N, int C, int OC) {
    zt_cu_gemm *g = zt_cu_gemm_create(0);
    zt_cu_gemm_set_precision(g, prec);
    size_t bad = 0;
    for (int bias_on = 0; bias_on < 2; bias_on++) {
        vec x = randv((size_t)N * C), w = randv((size_t)C * OC), bias = randv(OC), o = nanv((size_t)N * OC);
        vec o2 = nanv((size_t)N * OC);
        std::vector<uint16_t> ow((size_t)N * OC + 1, 0xdead), rw((size_t)N * OC, 0);
        const float *b = bias_on ? bias.data() : nullptr;
        zt_cu_linear_fwd(g, 0, o.data(), x.data(), w.data(), b, N, C, OC);
        zt_cu_round_to(0, o.data(), o.size(), prec, rw.data());
        zt_cu_linear_fwd(g, 0, o2.data(), x.data(), w.data(), b, N, C, OC, nullptr, nullptr, ow.data());
        for (size_t i = 0; i < rw.size(); i++) bad += ow[i] != rw[i] || o2[i] == o2[i]; // o2 stays NaN
        bad += ow.back() != 0xdead;
    }
    zt_cu_gemm_free(g);
    if (bad == 0)
        check_pass("linear_fwd out_words %s [N%d,C%d,OC%d], with and without a bias: the words of the float output "
                   "rounded, the floats not written", prec_name(prec), N, C, OC);
    else check_fail("linear_fwd out_words %s [N%d,C%d,OC%d]: %zu mismatches", prec_name(prec), N, C, OC, bad);
}

int main(void) {
    double t0 = zt_now();
    if (!test_setup(20261128)) return 1;
    for (int prec = ZT_PREC_BF16; prec <= ZT_PREC_FP16; prec++) {
        test_gelu(prec, 7);
        test_gelu(prec, 4099);
        test_norms(prec, 37, 45);
        test_norms(prec, 5, 768);
        test_backward_elem(prec, 37, 45);
        test_backward_elem(prec, 130, 768);
        test_llama(prec, 37, 45, 29);
        test_word_readers(prec, 37, 45);
        test_word_readers(prec, 130, 768);
        test_product_words(prec, 37, 45, 29);
        test_words_alone(prec, 37, 45);
        test_attention(prec, 2, 70, 128, 2, 2); // head size 64, two query tiles
        test_attention(prec, 1, 33, 128, 4, 4); // head size 32
        test_attention(prec, 1, 130, 128, 4, 2); // grouped queries: k, v written back by a group's first head
    }
    if (!tickets_left().empty() || !tickets()) check_fail("tickets");
    (void)check_outs; // kernel_check.h's comparison against the cpu: not needed, every check here is bitwise
    zt_backend_destroy(g_cpu);
    printf("# test_kernels_words: %d passed, %d failed, %.2f s\n", g_pass, g_fail, zt_now() - t0);
    return g_fail ? 1 : 0;
}
