// test_hostexec.cc — checks the host execution harness by running test_kernels.cu on the CPU.
// Prints "PASS name" / "FAIL name: reason" per check and "N passed, N failed"; exit 1 on a failure.
#include "test_kernels.h"
#include "check.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

__global__ void k_nop() {}

namespace {

std::string fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
std::string fmt(const char *f, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, f);
    vsnprintf(buf, sizeof buf, f, ap);
    va_end(ap);
    return buf;
}

void report(const char *name, const std::string &err) { check(err.empty(), name, "%s", err.c_str()); }

struct ConfigScope { // sets threads/seed for one test, restores on exit
    hx::Config saved;
    ConfigScope(unsigned threads, uint64_t seed) : saved(hx::config_get()) {
        hx::Config c = saved;
        c.threads = threads;
        c.seed = seed;
        hx::config_set(c);
    }
    ~ConfigScope() { hx::config_set(saved); }
};

std::string expect_ok(cudaError_t e, const char *what) {
    return e == cudaSuccess ? "" : fmt("%s: %s", what, cudaGetErrorString(e));
}

// ---------------------------------------------------------------------------------------------
std::string test_indices(dim3 grid, dim3 block) {
    size_t nb = size_t(grid.x) * grid.y * grid.z, nt = size_t(block.x) * block.y * block.z;
    std::vector<unsigned> out(8 * nb * nt, 0);
    if (auto e = expect_ok(tk_indices(grid, block, out.data()), "launch"); !e.empty()) return e;
    for (size_t b = 0; b < nb; b++)
        for (size_t t = 0; t < nt; t++) {
            const unsigned *o = &out[8 * (b * nt + t)];
            unsigned want[8] = {unsigned(b % grid.x), unsigned(b / grid.x % grid.y), unsigned(b / (grid.x * grid.y)),
                                unsigned(t % block.x), unsigned(t / block.x % block.y), unsigned(t / (block.x * block.y)),
                                0xabcd, 0};
            for (int k = 0; k < 8; k++)
                if (o[k] != want[k]) return fmt("block %zu thread %zu field %d: %u, want %u", b, t, k, o[k], want[k]);
        }
    return "";
}

std::string test_block_reduce() {
    const int nb = 37;
    std::vector<float> in(nb * 256), out(nb);
    for (size_t i = 0; i < in.size(); i++) in[i] = float(int(i * 7 % 13) - 6); // exact sums
    for (unsigned threads = 1; threads <= 2; threads++)
        for (uint64_t seed = 1; seed <= 3; seed++) {
            ConfigScope cs(threads, seed);
            if (auto e = expect_ok(tk_block_reduce(nb, 1, in.data(), out.data()), "launch"); !e.empty()) return e;
            for (int b = 0; b < nb; b++) {
                float want = 0;
                for (int t = 0; t < 256; t++) want += in[b * 256 + t];
                if (out[b] != want) return fmt("threads %u seed %llu block %d: %g, want %g", threads, (unsigned long long)seed, b, out[b], want);
            }
        }
    return "";
}

// A racy kernel must be caught by at least one of a few seeds; the correct one must pass for all.
// Race 1: a neighbour's slot read with no barrier at all. Race 2: the barrier between the steps
// of a tree reduction left out (the race comes after a first barrier).
std::string test_race_detected() {
    const int nb = 8, bs = 128;
    std::vector<int> in(nb * bs), out(nb * bs);
    for (size_t i = 0; i < in.size(); i++) in[i] = int(i * 31 + 5);
    std::vector<float> rin(nb * 256), rout(nb);
    for (size_t i = 0; i < rin.size(); i++) rin[i] = float(int(i % 17) - 8);
    int caught = 0, caught_reduce = 0;
    for (uint64_t seed = 1; seed <= 4; seed++) {
        ConfigScope cs(1, seed);
        for (int sync = 0; sync <= 1; sync++) {
            std::fill(out.begin(), out.end(), -1);
            if (auto e = expect_ok(tk_neighbour(nb, bs, sync, in.data(), out.data()), "launch"); !e.empty()) return e;
            int wrong = 0;
            for (int b = 0; b < nb; b++)
                for (int t = 0; t < bs; t++) wrong += out[b * bs + t] != in[b * bs + (t + 1) % bs];
            if (sync && wrong) return fmt("seed %llu: correct kernel gave %d wrong values", (unsigned long long)seed, wrong);
            if (!sync) caught += wrong > 0;

            if (auto e = expect_ok(tk_block_reduce(nb, sync, rin.data(), rout.data()), "launch"); !e.empty()) return e;
            wrong = 0;
            for (int b = 0; b < nb; b++) {
                float want = 0;
                for (int t = 0; t < 256; t++) want += rin[b * 256 + t];
                wrong += rout[b] != want;
            }
            if (sync && wrong) return fmt("seed %llu: correct reduction gave %d wrong sums", (unsigned long long)seed, wrong);
            if (!sync) caught_reduce += wrong > 0;
        }
    }
    if (caught == 0) return "a read of a neighbour's slot with no __syncthreads went unnoticed under every seed";
    if (caught_reduce == 0) return "a reduction missing its loop __syncthreads went unnoticed under every seed";
    printf("  (races caught under %d/4 and %d/4 seeds)\n", caught, caught_reduce);
    return "";
}

std::string test_early_exit() {
    const int nb = 6, bs = 96, active = 40;
    std::vector<int> in(nb * bs), out(nb * bs, -1);
    for (size_t i = 0; i < in.size(); i++) in[i] = int(i * 3 + 1);
    if (auto e = expect_ok(tk_early_exit(nb, bs, active, in.data(), out.data()), "launch"); !e.empty()) return e;
    for (int b = 0; b < nb; b++)
        for (int t = 0; t < bs; t++) {
            int want = t < active ? in[b * bs + (t + 1) % active] : -1;
            if (out[b * bs + t] != want) return fmt("block %d thread %d: %d, want %d", b, t, out[b * bs + t], want);
        }
    return "";
}

std::string test_sync_votes() {
    const int nb = 5, bs = 96;
    std::vector<int> in(nb * bs), out(3 * nb * bs);
    for (size_t i = 0; i < in.size(); i++) in[i] = int(i % 11) - (i == 100 ? 20 : 0);
    if (auto e = expect_ok(tk_sync_votes(nb, bs, in.data(), out.data()), "launch"); !e.empty()) return e;
    for (int b = 0; b < nb; b++) {
        int cnt = 0, all = 1, any = 0;
        for (int t = 0; t < bs; t++) {
            int v = in[b * bs + t];
            cnt += v & 1, all &= v >= 0, any |= v == 7;
        }
        for (int t = 0; t < bs; t++) {
            const int *o = &out[3 * (b * bs + t)];
            if (o[0] != cnt || (o[1] != 0) != (all != 0) || (o[2] != 0) != (any != 0))
                return fmt("block %d thread %d: count/and/or %d/%d/%d, want %d/%d/%d", b, t, o[0], o[1], o[2], cnt, all, any);
        }
    }
    return "";
}

std::string test_shuffles() {
    dim3 grid(2, 2), block(32, 3);
    const int nt = 4 * 96;
    std::vector<int> in(nt), out(8 * nt);
    for (int i = 0; i < nt; i++) in[i] = (i * 37) % 101 - 50;
    if (auto e = expect_ok(tk_shuffles(grid, block, in.data(), out.data()), "launch"); !e.empty()) return e;
    const char *what[8] = {"xor sum", "down sum", "up scan", "broadcast", "xor sum width 8", "idx width 16", "down 1", "up 2 width 8"};
    for (int i = 0; i < nt; i++) {
        int lane = i % 32, w0 = i - lane;
        const int *v = &in[w0];
        int sum = 0, scan = 0, seg8 = 0;
        for (int l = 0; l < 32; l++) sum += v[l];
        for (int l = 0; l <= lane; l++) scan += v[l];
        for (int l = lane & ~7; l < (lane & ~7) + 8; l++) seg8 += v[l];
        int want[8] = {sum, lane == 0 ? sum : 0, scan, v[5], seg8, v[(lane & ~15) + 3], lane == 31 ? v[lane] : v[lane + 1],
                       lane % 8 < 2 ? v[lane] : v[lane - 2]};
        for (int k = 0; k < 8; k++)
            if (out[8 * i + k] != want[k]) return fmt("thread %d %s: %d, want %d", i, what[k], out[8 * i + k], want[k]);
    }
    return "";
}

std::string test_shuffle_types() {
    const int n = 64;
    std::vector<float> in(n), of(n);
    std::vector<double> od(n);
    std::vector<__nv_bfloat16> ob(n);
    for (int i = 0; i < n; i++) in[i] = 0.1f * float(i) - 3.0f;
    if (auto e = expect_ok(tk_shuffle_types(n, in.data(), of.data(), od.data(), ob.data()), "launch"); !e.empty()) return e;
    for (int i = 0; i < n; i++) {
        float src = in[i ^ 1];
        if (of[i] != src || od[i] != double(src) * 3.0 || __bfloat162float(ob[i]) != __bfloat162float(__float2bfloat16(src)))
            return fmt("thread %d", i);
    }
    return "";
}

std::string test_votes() {
    const int nb = 3, bs = 48; // the second warp of each block has 16 lanes
    std::vector<int> in(nb * bs);
    std::vector<unsigned> out(4 * nb * bs);
    for (size_t i = 0; i < in.size(); i++) in[i] = int(i * 5 % 9) - (i == 60 ? 100 : 0);
    if (auto e = expect_ok(tk_votes(nb, bs, in.data(), out.data()), "launch"); !e.empty()) return e;
    for (int i = 0; i < nb * bs; i++) {
        int t = i % bs, w0 = i - t % 32, size = t < 32 ? 32 : bs - 32;
        unsigned ballot = 0, any = 0, all = 1;
        for (int l = 0; l < size; l++) {
            int v = in[w0 + l];
            ballot |= unsigned(v & 1) << l, any |= v == 7, all &= v >= 0;
        }
        const unsigned *o = &out[4 * i];
        if (o[0] != ballot || o[1] != any || o[2] != all || o[3] != 0x0f)
            return fmt("thread %d: ballot/any/all/lt5 %08x/%u/%u/%08x, want %08x/%u/%u/0000000f", i, o[0], o[1], o[2], o[3], ballot, any, all);
    }
    return "";
}

std::string check_reverse(const std::vector<float> &in, const std::vector<float> &out, int bs) {
    for (size_t i = 0; i < in.size(); i++) {
        size_t b = i / bs, t = i % bs;
        if (out[i] != in[b * bs + bs - 1 - t]) return fmt("element %zu: %g, want %g", i, out[i], in[b * bs + bs - 1 - t]);
    }
    return "";
}

std::string test_dynamic_smem() {
    const int nb = 7, bs = 200;
    std::vector<float> in(nb * bs), out(nb * bs);
    for (size_t i = 0; i < in.size(); i++) in[i] = float(i) * 0.5f;
    if (auto e = expect_ok(tk_dyn_reverse(nb, bs, 0, in.data(), out.data()), "launch"); !e.empty()) return e;
    if (auto e = check_reverse(in, out, bs); !e.empty()) return e;
    // 64 KiB more than the block needs: refused until the kernel opts in, as on a GPU
    if (tk_dyn_reverse(nb, bs, 64 * 1024, in.data(), out.data()) != cudaErrorInvalidValue)
        return "65 KiB without opt-in was not refused";
    if (tk_dyn_reverse_optin(300 * 1024) != cudaErrorInvalidValue) return "opt-in to 300 KiB was not refused";
    if (auto e = expect_ok(tk_dyn_reverse_optin(100 * 1024), "opt-in"); !e.empty()) return e;
    std::fill(out.begin(), out.end(), 0.0f);
    if (auto e = expect_ok(tk_dyn_reverse(nb, bs, 64 * 1024, in.data(), out.data()), "launch after opt-in"); !e.empty()) return e;
    return check_reverse(in, out, bs);
}

std::string test_atomics() {
    const int nb = 50, bs = 256, n = nb * bs;
    ConfigScope cs(2, 1);
    int icount = 0, imax = -1, imin = 1 << 30, exch = -1;
    unsigned ucount = 0;
    float fsum = 0;
    unsigned long long cas = 0;
    std::vector<int> out(n, -1);
    if (auto e = expect_ok(tk_atomics(nb, bs, &icount, &ucount, &fsum, &imax, &imin, &cas, &exch, out.data()), "launch"); !e.empty())
        return e;
    if (icount != n || ucount != 2u * n || fsum != float(n) || imax != n - 1 || imin != 0 || cas != (unsigned long long)n ||
        exch < 0 || exch >= n)
        return fmt("int %d unsigned %u float %g max %d min %d cas %llu exch %d (want %d, %d, %d, %d, 0, %d, [0,%d))", icount,
                   ucount, fsum, imax, imin, cas, exch, n, 2 * n, n, n - 1, n, n);
    std::vector<char> seen(n, 0);
    for (int v : out) {
        if (v < 0 || v >= n || seen[v]) return fmt("atomicAdd returned %d twice or out of range", v);
        seen[v] = 1;
    }
    return "";
}

std::string test_template() {
    const int n = 300;
    std::vector<float> out(n, -1);
    if (auto e = expect_ok(tk_template(n, out.data()), "launch"); !e.empty()) return e;
    for (int i = 0; i < n; i++)
        if (out[i] != 3.0f * float(i)) return fmt("element %d: %g", i, out[i]);
    return "";
}

// Graph capture: a captured launch does not run; replaying it runs it with the arguments it had (the pointers),
// reading the memory as it is at replay; the launch trace tells two launches apart by their arguments only
std::string test_capture() {
    const int n = 300;
    std::vector<float> in(n, 1.0f), out(n, -1.0f), ref(n);
    uint64_t h1 = 0x5eed, h2 = 0x5eed, h3 = 0x5eed;
    hx::capture_begin();
    zt_trace_sink = &h1;
    cudaError_t e = tk_gelu(n, in.data(), out.data());
    zt_trace_sink = nullptr;
    hx::Recorded rec = hx::capture_end();
    if (e != cudaSuccess) return "capture: launch error";
    if (rec.size() != 1) return fmt("%zu launches recorded, expected 1", rec.size());
    if (out[0] != -1.0f) return "the captured launch ran during the capture";
    for (int i = 0; i < n; i++) in[i] = 0.01f * (float)i - 1.0f;
    rec[0]();
    if (auto e2 = expect_ok(tk_gelu(n, in.data(), ref.data()), "reference launch"); !e2.empty()) return e2;
    if (memcmp(out.data(), ref.data(), n * sizeof(float)) != 0) return "the replay differs from a launch of its inputs";
    zt_trace_sink = &h2;
    e = tk_gelu(n, in.data(), ref.data());
    zt_trace_sink = &h3;
    e = tk_gelu(n - 1, in.data(), ref.data());
    zt_trace_sink = nullptr;
    if (h1 == 0x5eed || h1 == h2 || h2 == h3) return fmt("traces %llx %llx %llx", (unsigned long long)h1,
                                                          (unsigned long long)h2, (unsigned long long)h3);
    uint64_t h4 = 0x5eed;
    zt_trace_sink = &h4;
    e = tk_gelu(n, in.data(), out.data());
    zt_trace_sink = nullptr;
    if (h4 != h1) return "the same launch traced twice gives two hashes";
    return "";
}

// ---------------------------------------------------------------------------------------------
// bf16 / fp16: an independent reference. Decode every 16-bit pattern from its fields, then round
// a float to the nearest representable value by comparing distances in double (exact here), ties
// to the even pattern; overflow follows IEEE: the value past the largest finite one is infinity.
uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

double decode16(uint16_t h, int exp_bits, int man_bits) {
    int bias = (1 << (exp_bits - 1)) - 1, e = (h >> man_bits) & ((1 << exp_bits) - 1), m = h & ((1 << man_bits) - 1);
    double s = (h >> 15) ? -1.0 : 1.0;
    if (e == (1 << exp_bits) - 1) return m ? NAN : s * INFINITY;
    if (e == 0) return s * std::ldexp(double(m), 1 - bias - man_bits);
    return s * std::ldexp(double(m | (1 << man_bits)), e - bias - man_bits);
}

// Nearest 16-bit pattern to x (not NaN): search the positive patterns by magnitude (they are
// monotonic), treating one step past the largest finite value as the overflow threshold.
uint16_t round16(float x, int exp_bits, int man_bits) {
    double ax = std::fabs(double(x));
    uint16_t sign = std::signbit(x) ? 0x8000 : 0, inf = uint16_t(((1 << exp_bits) - 1) << man_bits);
    if (std::isinf(x)) return sign | inf;
    uint16_t lo = 0, hi = inf; // decode16(hi) is +inf: use the virtual value max + ulp(max)
    auto val = [&](uint16_t p) {
        if (p == inf) {
            double mx = decode16(uint16_t(inf - 1), exp_bits, man_bits);
            return mx + (mx - decode16(uint16_t(inf - 2), exp_bits, man_bits));
        }
        return decode16(p, exp_bits, man_bits);
    };
    if (ax >= val(inf)) return sign | inf;
    while (hi - lo > 1) { // val(lo) <= ax < val(hi)
        uint16_t mid = uint16_t((lo + hi) / 2);
        if (val(mid) <= ax) lo = mid;
        else hi = mid;
    }
    double dl = ax - val(lo), dh = val(hi) - ax;
    uint16_t r = dl < dh ? lo : dh < dl ? hi : ((lo & 1) ? hi : lo);
    return sign | r;
}

uint16_t bits16(__nv_bfloat16 b) { uint16_t u; memcpy(&u, static_cast<const void *>(&b), 2); return u; }
uint16_t bits16(__half h) { uint16_t u; memcpy(&u, static_cast<const void *>(&h), 2); return u; }

std::vector<float> conversion_inputs() {
    std::vector<float> xs;
    for (uint32_t p = 0; p < 0x10000; p++) { // every bf16 value, its neighbours and the ties around it
        for (uint32_t d : {0u, 1u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu}) xs.push_back(u2f((p << 16) | d));
        double h = decode16(uint16_t(p), 5, 10);
        if (!std::isfinite(h) || (p & 0x7fff) == 0x7bff) continue;
        double next = decode16(uint16_t(p + ((p & 0x8000) ? -1 : 1)), 5, 10);
        if (!std::isfinite(next)) continue;
        float mid = float((h + next) / 2); // exact: a half has 11 significant bits
        xs.push_back(float(h));
        xs.push_back(mid);
        xs.push_back(std::nextafter(mid, 0.0f));
        xs.push_back(std::nextafter(mid, INFINITY));
    }
    uint64_t s = 12345;
    for (int i = 0; i < 1000000; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        xs.push_back(u2f(uint32_t(s >> 32)));
    }
    for (float f : {65504.0f, 65519.99f, 65520.0f, 65536.0f, 1e-8f, 5.96e-8f, 2.98e-8f, 3.0e-8f, 3.39e38f, 3.4028235e38f})
        xs.push_back(f), xs.push_back(-f);
    return xs;
}

std::string check_round(float x, uint16_t got, int exp_bits, int man_bits, const char *what) {
    if (std::isnan(x)) {
        bool nan = ((got >> man_bits) & ((1 << exp_bits) - 1)) == (1 << exp_bits) - 1 && (got & ((1 << man_bits) - 1));
        return nan ? "" : fmt("%s(NaN %08x) = %04x, not a NaN", what, f2u(x), got);
    }
    uint16_t want = round16(x, exp_bits, man_bits);
    return got == want ? "" : fmt("%s(%.9g = %08x) = %04x, want %04x", what, x, f2u(x), got, want);
}

std::string test_bf16_fp16() {
    for (uint32_t p = 0; p < 0x10000; p++) { // widening is exact
        uint16_t u = uint16_t(p);
        __nv_bfloat16 b;
        __half h;
        memcpy(static_cast<void *>(&b), &u, 2);
        memcpy(static_cast<void *>(&h), &u, 2);
        double rb = decode16(u, 8, 7), rh = decode16(u, 5, 10);
        float fb = __bfloat162float(b), fh = __half2float(h);
        if (std::isnan(rb) ? !std::isnan(fb) : double(fb) != rb) return fmt("__bfloat162float(%04x) = %.9g, want %.9g", u, fb, rb);
        if (std::isnan(rh) ? !std::isnan(fh) : double(fh) != rh) return fmt("__half2float(%04x) = %.9g, want %.9g", u, fh, rh);
    }
    std::vector<float> xs = conversion_inputs();
    for (float x : xs) {
        if (auto e = check_round(x, bits16(__float2bfloat16(x)), 8, 7, "__float2bfloat16"); !e.empty()) return e;
        if (auto e = check_round(x, bits16(__float2bfloat16_rn(x)), 8, 7, "__float2bfloat16_rn"); !e.empty()) return e;
        if (auto e = check_round(x, bits16(__float2half(x)), 5, 10, "__float2half"); !e.empty()) return e;
        if (auto e = check_round(x, bits16(__float2half_rn(x)), 5, 10, "__float2half_rn"); !e.empty()) return e;
    }
    // the same conversions in device code, through a kernel
    const int n = 1 << 16;
    std::vector<float> ob(n), oh(n);
    if (auto e = expect_ok(tk_convert(n, xs.data(), ob.data(), oh.data()), "launch"); !e.empty()) return e;
    for (int i = 0; i < n; i++) {
        float x = xs[i];
        if (std::isnan(x)) continue;
        float wb = float(decode16(round16(x, 8, 7), 8, 7)), wh = float(decode16(round16(x, 5, 10), 5, 10));
        if (f2u(ob[i]) != f2u(wb) || f2u(oh[i]) != f2u(wh)) return fmt("kernel round trip of %.9g: %.9g / %.9g", x, ob[i], oh[i]);
    }
    return "";
}

// ---------------------------------------------------------------------------------------------
std::string test_launch_errors() {
    struct {
        dim3 grid, block;
        size_t shmem;
        cudaError_t want;
    } cases[] = {
        {1, 2048, 0, cudaErrorInvalidConfiguration},
        {1, dim3(32, 32, 2), 0, cudaErrorInvalidConfiguration},
        {1, dim3(1, 1, 65), 0, cudaErrorInvalidConfiguration},
        {0, 32, 0, cudaErrorInvalidConfiguration},
        {dim3(1, 70000), 32, 0, cudaErrorInvalidConfiguration},
        {1, 32, 48 * 1024 + 1, cudaErrorInvalidValue},
    };
    for (auto &c : cases) {
        cudaError_t e = tk_config(c.grid, c.block, c.shmem);
        if (e != c.want)
            return fmt("<<<(%u,%u,%u), (%u,%u,%u), %zu>>>: %s, want %s", c.grid.x, c.grid.y, c.grid.z, c.block.x, c.block.y,
                       c.block.z, c.shmem, cudaGetErrorName(e), cudaGetErrorName(c.want));
    }
    if (tk_config(1, dim3(1, 1, 64), 48 * 1024) != cudaSuccess) return "the largest valid configuration was refused";
    // <<<>>> semantics: cudaPeekAtLastError keeps the error, cudaGetLastError reports it once
    ZT_LAUNCH(k_nop, 1, 2048, 0, 0);
    cudaError_t p1 = cudaPeekAtLastError(), p2 = cudaPeekAtLastError(), g1 = cudaGetLastError(), g2 = cudaGetLastError();
    if (p1 != cudaErrorInvalidConfiguration || p2 != p1 || g1 != p1 || g2 != cudaSuccess)
        return fmt("peek/peek/get/get: %s/%s/%s/%s", cudaGetErrorName(p1), cudaGetErrorName(p2), cudaGetErrorName(g1), cudaGetErrorName(g2));
    return "";
}

// Each misuse must end the program with a message naming the problem.
std::string test_misuse(int which, const char *needle) {
    fflush(stdout);
    fflush(stderr);
    int fds[2];
    if (pipe(fds) != 0) return "pipe failed";
    pid_t pid = fork();
    if (pid < 0) return "fork failed";
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        tk_misuse(which);
        _exit(0);
    }
    close(fds[1]);
    std::string msg;
    char buf[512];
    for (ssize_t k; (k = read(fds[0], buf, sizeof buf)) > 0;) msg.append(buf, size_t(k));
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGABRT) return "the kernel ran to completion instead of aborting";
    if (msg.find(needle) == std::string::npos) return fmt("message lacks \"%s\": %s", needle, msg.c_str());
    return "";
}

std::string test_thread_invariance() {
    const int nb = 300, bs = 256;
    std::vector<float> in(nb * bs), a(nb * bs), b(nb * bs);
    for (size_t i = 0; i < in.size(); i++) in[i] = std::sin(float(i));
    {
        ConfigScope cs(1, 1);
        if (auto e = expect_ok(tk_two_barriers(nb, bs, in.data(), a.data()), "launch"); !e.empty()) return e;
    }
    {
        ConfigScope cs(2, 777);
        if (auto e = expect_ok(tk_two_barriers(nb, bs, in.data(), b.data()), "launch"); !e.empty()) return e;
    }
    if (memcmp(a.data(), b.data(), a.size() * sizeof(float)) != 0) return "outputs differ between 1 thread/seed 1 and 2 threads/seed 777";
    for (int i = 0; i < nb * bs; i++) {
        int t = i % bs, base = i - t;
        float want = in[i] + in[base + (t + 1) % bs];
        if (a[i] != want) return fmt("element %d: %g, want %g", i, a[i], want);
    }
    return "";
}

} // namespace

int main() {
    report("indices_1d", test_indices(dim3(5), dim3(64)));
    report("indices_2d", test_indices(dim3(3, 4), dim3(8, 4)));
    report("indices_3d", test_indices(dim3(2, 3, 4), dim3(4, 2, 3)));
    report("syncthreads_tree_reduce", test_block_reduce());
    report("missing_syncthreads_race_detected", test_race_detected());
    report("syncthreads_after_early_exit", test_early_exit());
    report("syncthreads_count_and_or", test_sync_votes());
    report("shuffles_xor_down_up_idx_width", test_shuffles());
    report("shuffle_float_double_bf16", test_shuffle_types());
    report("ballot_any_all_partial_warp", test_votes());
    report("dynamic_shared_memory_and_optin", test_dynamic_smem());
    report("atomics_two_os_threads", test_atomics());
    report("template_kernel_launch", test_template());
    report("graph_capture_and_trace", test_capture());
    report("bf16_fp16_round_trip_vs_reference", test_bf16_fp16());
    report("launch_errors", test_launch_errors());
    report("thread_and_seed_invariance", test_thread_invariance());
    {
        ConfigScope cs(1, 1); // fork with no pool threads
        report("fatal_partial_mask", test_misuse(0, "only full-warp masks"));
        report("fatal_deadlock", test_misuse(1, "deadlock"));
        report("fatal_lane_exited", test_misuse(2, "exits while"));
        report("fatal_dynamic_smem_not_16_bytes", test_misuse(3, "not a multiple of 16"));
    }
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
