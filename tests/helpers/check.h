/* check.h — the C unit tests' one assertion: check(ok, name, fmt, ...) prints `PASS name` or
 * `FAIL name: reason` (the lines tests/run.sh counts) and counts failures in g_fail. */
#ifndef ZT_TEST_CHECK_H
#define ZT_TEST_CHECK_H

#include <stdarg.h>
#include <stdio.h>

#include "util/util.h"

static int g_fail;

static void check(int ok, const char *name, const char *fmt, ...) ZT_PRINTF(3, 4);
static void check(int ok, const char *name, const char *fmt, ...)
{
    if (ok) {
        printf("PASS %s\n", name);
        return;
    }
    g_fail++;
    printf("FAIL %s: ", name);
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
}

#endif
