/* check.h — how every C and C++ unit test reports (tests/unit/, cuda/tests/, cuda/hostexec/test_hostexec.cc):
 * one line per check, `PASS name ...` or `FAIL name: reason`, the lines tests/run.sh counts.
 *
 *   check(ok, name, fmt, ...)   `PASS <tag>name` when ok, else `FAIL <tag>name: <fmt ...>`
 *   check_pass(fmt, ...)        `PASS <tag><fmt ...>`  (the text names the case, then what was measured)
 *   check_fail(fmt, ...)        `FAIL <tag><fmt ...>`  (the text is "name: reason")
 *   check_exit_status()         1 if any check failed, else 0 (main's return value)
 *
 * g_pass / g_fail count the lines. g_tag ("" by default) prefixes every name: a test that runs its cases on
 * several devices sets it to "devsim:", "cudasim:", ... off the cpu. Every line is flushed at once, so a
 * crash leaves the lines before it in the log. Plain C (gnu11) and C++; no ztrain header needed. */
#ifndef ZT_TEST_CHECK_H
#define ZT_TEST_CHECK_H

#include <stdarg.h>
#include <stdio.h>

#if defined(__GNUC__)
#define ZT_CHECK_FMT(f, a) __attribute__((format(printf, f, a)))
#define ZT_CHECK_UNUSED __attribute__((unused))
#else
#define ZT_CHECK_FMT(f, a)
#define ZT_CHECK_UNUSED
#endif

static int g_pass ZT_CHECK_UNUSED, g_fail ZT_CHECK_UNUSED;
static char g_tag[32] ZT_CHECK_UNUSED;

static ZT_CHECK_UNUSED void check_vline(int ok, const char *name, const char *fmt, va_list ap)
{
    printf("%s %s%s", ok ? "PASS" : "FAIL", g_tag, name ? name : "");
    if (name && !ok) printf(": ");
    if (fmt && (!name || !ok)) vprintf(fmt, ap);
    printf("\n");
    fflush(stdout);
    if (ok) g_pass++;
    else g_fail++;
}

static void check(int ok, const char *name, const char *fmt, ...) ZT_CHECK_FMT(3, 4);
static ZT_CHECK_UNUSED void check(int ok, const char *name, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    check_vline(ok, name, fmt, ap);
    va_end(ap);
}

static void check_pass(const char *fmt, ...) ZT_CHECK_FMT(1, 2);
static ZT_CHECK_UNUSED void check_pass(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    check_vline(1, NULL, fmt, ap);
    va_end(ap);
}

static void check_fail(const char *fmt, ...) ZT_CHECK_FMT(1, 2);
static ZT_CHECK_UNUSED void check_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    check_vline(0, NULL, fmt, ap);
    va_end(ap);
}

static ZT_CHECK_UNUSED int check_exit_status(void) { return g_fail ? 1 : 0; }

#endif
