/* progress.h — the one progress display: on a terminal a status line redrawn in place (with a
 * "[#####.....]" bar), otherwise plain lines that a log file keeps. Only rank 0 prints; on other
 * ranks every call is a no-op.
 *
 * The caller decides what the line says; this file owns how it is drawn: when a redraw is due
 * (throttled), the bar, "\r" + text + clear-to-end-of-line, when a plain line is due (each new
 * tenth of the way, not too often), clearing the line before other output, and ETA formatting.
 * Users: training steps (metrics.c, stdout) and `ztrain prepare` (prepare.c, stderr).
 */
#ifndef ZT_PROGRESS_H
#define ZT_PROGRESS_H

#include <stdarg.h>
#include <stdio.h>

#include "util/util.h"

typedef struct zt_progress {
    FILE *out;
    int on;               /* this rank prints (rank 0) */
    int tty;              /* out is a terminal: one line redrawn in place */
    double t0, last;      /* start; last redraw or plain line */
    int last_tenth;       /* plain lines: the last tenth reported */
} zt_progress;

/* starts the clock; on = rank 0, tty = isatty(out) */
void zt_progress_start(zt_progress *p, FILE *out);
double zt_progress_elapsed(const zt_progress *p);

/* terminal: whether to redraw now: force, or `interval` seconds since the last redraw (which
   then counts as done). Always 0 without a terminal or off rank 0. */
int zt_progress_due(zt_progress *p, double interval, int force);
/* plain lines: the tenth (1..10) of the way that frac has newly reached when `interval` seconds
   have passed since the last line (which then counts as printed), else -1. Always -1 on a
   terminal or off rank 0. */
int zt_progress_tenth(zt_progress *p, double frac, double interval);

/* width characters, '#' for the part done/total and '.' for the rest, into bar (width + 1 bytes) */
void zt_progress_bar(char *bar, int width, double done, double total);
/* "H:MM:SS" or "MM:SS", "--:--" when unknown (negative, NaN, absurd) */
void zt_progress_eta(double seconds, char *buf, size_t n);

/* terminal: redraws the status line as the text (no newline) and flushes */
void zt_progress_draw(zt_progress *p, const char *fmt, ...) ZT_PRINTF(2, 3);
/* terminal: ends the status line with a newline so it stays on screen */
void zt_progress_keep(zt_progress *p);
/* terminal: blanks the status line, so that other output starts on a clean line */
void zt_progress_clear(zt_progress *p);
/* any output: prints a line (the text should end with '\n'), after blanking the status line on a
   terminal, and flushes */
void zt_progress_print(zt_progress *p, const char *fmt, ...) ZT_PRINTF(2, 3);
void zt_progress_vprint(zt_progress *p, const char *fmt, va_list ap) ZT_PRINTF(2, 0);

#endif
