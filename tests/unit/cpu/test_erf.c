/* test_erf.c — op_math.h's single-precision erf (zt_erff) and the exact GELU built on it (zt_gelu_erf,
 * zt_gelu_erf_grad; BERT's "gelu") against double-precision libm on dense grids:
 *
 *  - zt_erff: every 61st float from 0 to 10 (18 million), every float in [0.98, 1.1] around the split of its two
 *    pieces (where the error peaks), and odd symmetry bit for bit; error in ulps of the correctly rounded result.
 *    Limit 2 ulp (measured 1.43 at x = 1.0376, over every float in [0, 12] and on these grids);
 *  - 1 + erf(u) for u < 0 (zt_one_plus_erff: erfc(-u), the left tail without cancellation), relative, in ulps:
 *    limit 10 (measured 6.0: the tail's polynomial in t = 1 / (1 + 0.4 a) and zt_expf);
 *  - zt_gelu_erf against 0.5 x erfc(-x / sqrt 2): absolute error in units of 2^-24 max(1, |x|) (x / sqrt 2 is
 *    rounded, which alone moves the far left tail by many of its own ulps): limit 3 (measured 1.72 at x = 1.44: the
 *    roundings of erf, 1 + erf and the product, about 1.3 ulp of the result);
 *    zt_gelu_erf_grad against 0.5 erfc(-x / sqrt 2) + x exp(-x^2 / 2) / sqrt(2 pi), absolute in units of 2^-24:
 *    limit 5 (measured 2.4);
 *  - special values: NaN stays NaN, erf(+-inf) = +-1, erf(-0) = -0, a denormal's erf 2 x / sqrt(pi).
 * The max ulp is printed in the PASS line. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "iface/op_math.h"
#include "util/util.h"

static float bits_float(uint32_t b) {
    float x;
    memcpy(&x, &b, 4);
    return x;
}

static uint32_t float_bits(float x) {
    uint32_t b;
    memcpy(&b, &x, 4);
    return b;
}

/* |got - ref| in ulps of the float nearest ref */
static double ulps(float got, double ref) {
    const float r = fabsf((float)ref);
    const double u = r == 0.0f ? 0x1p-149 : (double)(nextafterf(r, INFINITY) - r);
    return fabs((double)got - ref) / u;
}

typedef struct worst {
    double err;
    float at;
} worst;

static void note(worst *w, double err, float x) {
    if (!(err <= w->err)) { /* NaN counts as the worst */
        w->err = err == err ? err : INFINITY;
        w->at = x;
    }
}

static void test_erf_grid(void) {
    worst w = {0, 0};
    int odd = 1;
    const uint32_t hi = float_bits(10.0f);
    for (uint32_t b = 0; b <= hi; b += 61) {
        const float x = bits_float(b);
        const float e = zt_erff(x);
        note(&w, ulps(e, erf((double)x)), x);
        if (float_bits(zt_erff(-x)) != (float_bits(e) ^ 0x80000000u)) odd = 0;
    }
    for (float x = 0.98f; x <= 1.1f; x = nextafterf(x, 2.0f)) note(&w, ulps(zt_erff(x), erf((double)x)), x);
    check(w.err <= 2.0, "erf_max_ulp", "max %.3f ulp at x = %.9g > 2", w.err, (double)w.at);
    if (w.err <= 2.0) printf("# zt_erff: max error %.3f ulp at x = %.9g (limit 2)\n", w.err, (double)w.at);
    check(odd, "erf_odd", "zt_erff(-x) is not -zt_erff(x) bit for bit");
}

static void test_one_plus_erf(void) {
    worst w = {0, 0};
    for (float u = -9.0f; u < -1e-3f; u += 1e-5f) note(&w, ulps(zt_one_plus_erff(u), erfc(-(double)u)), u);
    for (float u = -1.2f; u < -0.98f; u = nextafterf(u, 0.0f)) note(&w, ulps(zt_one_plus_erff(u), erfc(-(double)u)), u);
    check(w.err <= 10.0, "one_plus_erf_left_tail", "max %.3f ulp (relative) at u = %.9g > 10", w.err, (double)w.at);
    if (w.err <= 10.0) printf("# 1 + erf(u), u < 0: max error %.3f ulp at u = %.9g (limit 10)\n", w.err, (double)w.at);
}

static void test_gelu_erf(void) {
    worst wf = {0, 0}, wb = {0, 0};
    for (float x = -14.0f; x < 14.0f; x += 3.7e-5f) {
        const double xd = x, cdf2 = erfc(-xd / sqrt(2.0));
        note(&wf, fabs(zt_gelu_erf(x) - 0.5 * xd * cdf2) / (0x1p-24 * fmax(1.0, fabs(xd))), x);
        note(&wb, fabs(zt_gelu_erf_grad(x) - (0.5 * cdf2 + xd * exp(-0.5 * xd * xd) / sqrt(2.0 * M_PI))) / 0x1p-24, x);
    }
    check(wf.err <= 3.0, "gelu_erf_fwd", "max error %.3f x 2^-24 max(1, |x|) at x = %.9g > 3", wf.err, (double)wf.at);
    check(wb.err <= 5.0, "gelu_erf_grad", "max error %.3f x 2^-24 at x = %.9g > 5", wb.err, (double)wb.at);
    if (wf.err <= 3.0 && wb.err <= 5.0)
        printf("# gelu_erf: %.3f (limit 3), grad %.3f (limit 5)\n", wf.err, wb.err);
}

static void test_specials(void) {
    check(isnan(zt_erff(NAN)) && isnan(zt_gelu_erf(NAN)) && isnan(zt_gelu_erf_grad(NAN)), "erf_nan", "NaN lost");
    check(zt_erff(INFINITY) == 1.0f && zt_erff(-INFINITY) == -1.0f && zt_erff(1e30f) == 1.0f &&
              zt_erff(3.92f) == 1.0f,
          "erf_saturates", "erf(inf) %g, erf(-inf) %g", (double)zt_erff(INFINITY), (double)zt_erff(-INFINITY));
    check(zt_erff(-0.0f) == 0.0f && signbit(zt_erff(-0.0f)) && zt_erff(0.0f) == 0.0f && !signbit(zt_erff(0.0f)),
          "erf_signed_zero", "erf(-0) %g", (double)zt_erff(-0.0f));
    const float d = 1e-40f; /* a denormal: erf(x) = 2x/sqrt(pi) to the precision of a denormal */
    check(fabs((double)zt_erff(d) - 2.0 / sqrt(M_PI) * d) <= 0x1p-149, "erf_denormal", "erf(1e-40) = %g",
          (double)zt_erff(d));
    check(zt_gelu_erf_grad(INFINITY) == 1.0f && fabsf(zt_gelu_erf_grad(-INFINITY)) < 1e-30f &&
              zt_gelu_erf(30.0f) == 30.0f && fabsf(zt_gelu_erf(-30.0f)) < 1e-30f,
          "gelu_erf_saturates", "grad(inf) %g, grad(-inf) %g", (double)zt_gelu_erf_grad(INFINITY),
          (double)zt_gelu_erf_grad(-INFINITY));
}

int main(void) {
    const double t0 = zt_now();
    test_erf_grid();
    test_one_plus_erf();
    test_gelu_erf();
    test_specials();
    printf("# test_erf: %d passed, %d failed, %.2f s\n", g_pass, g_fail, zt_now() - t0);
    return check_exit_status();
}
