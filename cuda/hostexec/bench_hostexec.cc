// bench_hostexec.cc — speed of the host execution harness: launch overhead and CUDA threads run
// per second for kernels shaped like the trainer's (elementwise, barriers, warp reductions), on 1
// and on all OS threads. Each row checks a few outputs (#wrong). Usage: bench_hostexec [--quick]
#include "test_kernels.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <vector>

namespace {

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Row {
    const char *kernel;
    int grid, block;
    const char *sync; // barriers / shuffles per thread
    std::function<cudaError_t()> launch;
    std::function<int()> wrong;
};

void run(const Row &r, unsigned threads, double budget_s) {
    hx::Config c = hx::config_get();
    c.threads = threads;
    hx::config_set(c);
    r.launch(); // warm up: stacks, buffers
    int n = 0;
    double t0 = now_s(), t;
    do {
        if (r.launch() != cudaSuccess) {
            printf("%-14s launch failed\n", r.kernel);
            return;
        }
        n++;
    } while ((t = now_s() - t0) < budget_s);
    double per = t / n, cthreads = double(r.grid) * r.block;
    printf("%-14s %7d %6d %-10s %7u %9d %12.4f %11.1f %7d\n", r.kernel, r.grid, r.block, r.sync, threads, n, per * 1e3,
           cthreads / per / 1e6, r.wrong ? r.wrong() : 0);
}

} // namespace

int main(int argc, char **argv) {
    bool quick = argc > 1 && !strcmp(argv[1], "--quick");
    double budget = quick ? 0.2 : 1.0;
    unsigned all = hx::config_get().threads;

    const int N = 1024 * 256, rows = 1024, cols = 768;
    std::vector<float> in(size_t(rows) * cols), out(in.size());
    for (size_t i = 0; i < in.size(); i++) in[i] = std::sin(float(i) * 0.37f);

    auto wrong_gelu = [&] {
        int w = 0;
        for (int i = 0; i < N; i += 997) {
            float x = in[i], y = 0.5f * x * (1.0f + tanhf(0.7978845608f * (x + 0.044715f * x * x * x)));
            w += std::fabs(out[i] - y) > 1e-6f;
        }
        return w;
    };
    auto wrong_two = [&] {
        int w = 0;
        for (int i = 0; i < N; i += 997) w += out[i] != in[i] + in[i - i % 256 + (i % 256 + 1) % 256];
        return w;
    };
    auto wrong_softmax = [&] {
        int w = 0;
        for (int r = 0; r < rows; r += 97) {
            double s = 0;
            for (int j = 0; j < cols; j++) s += out[size_t(r) * cols + j];
            w += std::fabs(s - 1.0) > 1e-4;
        }
        return w;
    };
    auto wrong_norm = [&] {
        int w = 0;
        for (int r = 0; r < rows; r += 97) {
            double s = 0, s2 = 0;
            for (int j = 0; j < cols; j++) s += out[size_t(r) * cols + j], s2 += double(out[size_t(r) * cols + j]) * out[size_t(r) * cols + j];
            w += std::fabs(s / cols) > 1e-4 || std::fabs(s2 / cols - 1.0) > 1e-3;
        }
        return w;
    };

    Row rows_[] = {
        {"empty", 1, 32, "-", [] { return tk_empty(1, 32); }, nullptr},
        {"empty", 1024, 256, "-", [] { return tk_empty(1024, 256); }, nullptr},
        {"gelu", N / 256, 256, "-", [&] { return tk_gelu(N, in.data(), out.data()); }, wrong_gelu},
        {"two_barriers", N / 256, 256, "2/0", [&] { return tk_two_barriers(N / 256, 256, in.data(), out.data()); }, wrong_two},
        {"row_softmax", rows / 4, 128, "0/10", [&] { return tk_row_softmax(rows, cols, in.data(), out.data()); }, wrong_softmax},
        {"block_norm", rows, 256, "4/10", [&] { return tk_block_norm(rows, cols, in.data(), out.data()); }, wrong_norm},
    };

    hx::Config c0 = hx::config_get();
    printf("# hostexec benchmark: fiber stacks %zu KiB, seed %llu, %u OS threads available\n", c0.stack_bytes / 1024,
           (unsigned long long)c0.seed, all);
    printf("%-14s %7s %6s %-10s %7s %9s %12s %11s %7s\n", "kernel", "grid", "block", "bar/shfl", "threads", "launches",
           "time/launch", "CUDA thr/s", "#wrong");
    printf("%-14s %7s %6s %-10s %7s %9s %12s %11s %7s\n", "", "blocks", "thr", "per thr", "OS", "", "ms", "M", "");
    for (const Row &r : rows_) {
        run(r, 1, budget);
        if (all > 1) run(r, all, budget);
    }
    hx::config_set(c0);
    return 0;
}
