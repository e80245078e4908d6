/* prepare_common.c — what every mode of `ztrain prepare` shares (prepare_internal.h): this process's rank, the
 * one-line error (printed by rank 0 only) and the progress of a phase (a bar on a terminal, plain lines otherwise). */
#include "cmd/prepare_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int g_rank;

int prep_rank(void) { return g_rank; }
void prep_set_rank(int rank) { g_rank = rank; }

int prep_fail(const char *fmt, ...) {
    if (g_rank != 0) return ZT_EXIT_USER;
    va_list ap;
    fflush(stdout);
    fputs("ztrain: error: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return ZT_EXIT_USER;
}

/* ---------------------------------------------------------------- progress */

void prep_prog_start(prep_progress *p, const char *label, uint64_t total) {
    memset(p, 0, sizeof *p);
    p->label = label;
    p->total = total;
    zt_progress_start(&p->bar, stderr);
}

void prep_prog_update(prep_progress *p, uint64_t done, uint64_t text) {
    p->done = done;
    p->text = text;
    double t = zt_progress_elapsed(&p->bar);
    double frac = p->total ? (double)done / (double)p->total : 1.0;
    double mbs = (double)(text ? text : done) / 1e6 / (t > 1e-9 ? t : 1e-9);
    int tenth;
    if (zt_progress_due(&p->bar, 0.1, 0)) {
        char bar[31];
        zt_progress_bar(bar, 30, frac, 1.0);
        zt_progress_draw(&p->bar, "%s [%s] %3.0f%% %.1f MB/s", p->label, bar, 100 * (frac < 1 ? frac : 1), mbs);
    } else if ((tenth = zt_progress_tenth(&p->bar, frac, 2.0)) >= 0) {
        zt_progress_print(&p->bar, "%s: %d%% (%.1f MB/s)\n", p->label, tenth * 10, mbs);
    }
}

/* the closing line, with the throughput of the text; returns the elapsed seconds */
double prep_prog_end(prep_progress *p, const char *extra) {
    double dt = zt_progress_elapsed(&p->bar), mb = (double)(p->text ? p->text : p->done) / 1e6;
    zt_progress_print(&p->bar, "%s: %.1f MB in %.2f s (%.1f MB/s)%s\n", p->label, mb, dt, mb / (dt > 1e-9 ? dt : 1e-9),
                      extra ? extra : "");
    return dt;
}

