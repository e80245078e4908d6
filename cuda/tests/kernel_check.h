// kernel_check.h — what the CUDA kernel tests under the host execution harness share: float vectors, seeded
// random inputs and NaN-filled outputs, the harness's interleaving seed per run, the error measure (max over
// elements of |got - ref| / max(|ref|, mean |ref|): relative per element, floored at the tensor's typical
// magnitude), the check of a case's outputs against the cpu backend's with determinism across two runs, and the
// tickets of the last-block reductions (each test checks they are all 0 again after its launches).
// Included by cuda/tests/test_kernels_*.cc after util.h, hostexec.h and tests/helpers/check.h, inside their
// anonymous namespace; each test program defines g_cpu and g_rng's use.
#ifndef ZT_CUDA_KERNEL_CHECK_H
#define ZT_CUDA_KERNEL_CHECK_H

typedef std::vector<float> vec;

zt_backend *g_cpu;
zt_rng g_rng;

vec randv(size_t n, double scale = 1.0, double shift = 0.0) {
    vec v(n);
    for (auto &x : v) x = (float)(shift + scale * zt_rng_normal(&g_rng));
    return v;
}

vec nanv(size_t n) { return vec(n, NAN); }

// The harness configuration of a run: the interleaving seed (1, then 12345). The OS-thread count
// stays at its default: changing it after a multi-block launch crashes hostexec.cc's pool (a new
// helper thread starts with seen = 0 while g_pool.gen > 0 and runs the last, stale job).
void harness_config(int run) {
    hx::Config c = hx::config_get();
    c.seed = run == 0 ? 1 : 12345;
    hx::config_set(c);
}

double err_of(const vec &got, const vec &ref, size_t *at = nullptr) {
    double s = 0.0;
    for (float r : ref) s += fabs(r);
    s = ref.empty() ? 0.0 : s / (double)ref.size();
    if (s == 0.0) s = 1e-30;
    double e = 0.0;
    for (size_t i = 0; i < ref.size(); i++) {
        double d = fabs((double)got[i] - ref[i]) / fmax(fabs((double)ref[i]), s);
        if (!(d <= e)) { // NaN counts as infinite
            e = d == d ? d : INFINITY;
            if (at) *at = i;
        }
    }
    return e;
}

// the last-block reductions' tickets (cuda_ops.h kCuTickets): zero-filled, as the backend's
std::vector<unsigned> g_tickets(kCuTickets, 0u);
unsigned *tickets() { return g_tickets.data(); }
// "" when every ticket is back to 0 after the kernels that took them, else what check_outs should report
std::string tickets_left() {
    for (size_t i = 0; i < g_tickets.size(); i++)
        if (g_tickets[i]) {
            char buf[96];
            snprintf(buf, sizeof buf, "ticket %zu left at %u (not put back to 0)", i, g_tickets[i]);
            g_tickets.assign(g_tickets.size(), 0u);
            return buf;
        }
    return "";
}

bool same_bits(const vec &a, const vec &b) {
    return a.size() == b.size() && memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

struct Out {
    const char *label;
    const vec *got, *got2, *ref; // got2: the second (determinism) run
};

void check_outs(const std::string &name, std::initializer_list<Out> outs, double tol, const std::string &extra = "") {
    double worst = 0.0;
    std::string msg = extra;
    for (const Out &o : outs) {
        size_t at = 0;
        double e = err_of(*o.got, *o.ref, &at);
        worst = fmax(worst, e);
        char buf[256];
        if (!(e <= tol)) {
            snprintf(buf, sizeof buf, "%s%s err %.3g > %.1g at [%zu] (got %.9g, ref %.9g)", msg.empty() ? "" : "; ",
                     o.label, e, tol, at, (double)(*o.got)[at], (double)(*o.ref)[at]);
            msg += buf;
        }
        if (!same_bits(*o.got, *o.got2)) {
            snprintf(buf, sizeof buf, "%s%s differs between two runs (harness seed changed)", msg.empty() ? "" : "; ",
                     o.label);
            msg += buf;
        }
    }
    if (msg.empty()) check_pass("%s (max rel err %.2e, limit %.1g, deterministic)", name.c_str(), worst, tol);
    else check_fail("%s: %s", name.c_str(), msg.c_str());
}

// the cpu backend (g_cpu) and the data seed (ZT_TEST_SEED, else seed): false, with a FAIL line, when the backend
// cannot be made
bool test_setup(unsigned long long seed) {
    char err[ZT_ERR_BUF];
    g_cpu = zt_backend_create("cpu", 1, err, sizeof err);
    if (!g_cpu) {
        check_fail("backend_create: %s", err);
        return false;
    }
    const char *env = getenv("ZT_TEST_SEED");
    zt_rng_seed(&g_rng, env && *env ? strtoull(env, nullptr, 10) : seed);
    return true;
}

#endif
