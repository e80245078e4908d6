/* progress.c — the one progress display (see progress.h). */
#include "util/progress.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Under mpirun a rank's stdout is a pseudo-terminal that Open MPI opens and forwards, whatever mpirun's
   own stdout is (a file, a pipe, a terminal). The launcher is the rank's parent on mpirun's node
   (Open MPI 4 starts local ranks itself): its stdout decides. Elsewhere (a remote node's orted,
   srun) the parent's stdout is not a terminal and the output is plain lines. */
static int really_a_terminal(FILE *out) {
    if (!isatty(fileno(out))) return 0;
    if (!getenv("OMPI_COMM_WORLD_SIZE") && !getenv("PMIX_RANK")) return 1; /* not launched by mpirun */
    char link[64];
    snprintf(link, sizeof link, "/proc/%d/fd/1", (int)getppid());
    int fd = open(link, O_WRONLY | O_NOCTTY);
    if (fd < 0) return 0;
    int tty = isatty(fd);
    close(fd);
    return tty;
}

void zt_progress_start(zt_progress *p, FILE *out) {
    memset(p, 0, sizeof *p);
    p->out = out;
    p->on = zt_rank() == 0;
    p->tty = p->on && really_a_terminal(out);
    p->t0 = p->last = zt_now();
}

double zt_progress_elapsed(const zt_progress *p) { return zt_now() - p->t0; }

int zt_progress_due(zt_progress *p, double interval, int force) {
    if (!p->tty) return 0;
    const double t = zt_now();
    if (!force && t - p->last < interval) return 0;
    p->last = t;
    return 1;
}

int zt_progress_tenth(zt_progress *p, double frac, double interval) {
    if (!p->on || p->tty) return -1;
    const int tenth = (int)(frac * 10);
    const double t = zt_now();
    if (tenth <= p->last_tenth || t - p->last < interval) return -1;
    p->last_tenth = tenth;
    p->last = t;
    return tenth;
}

void zt_progress_bar(char *bar, int width, double done, double total) {
    const int filled = total > 0 ? (int)((double)width * done / total) : 0;
    for (int i = 0; i < width; i++) bar[i] = i < filled ? '#' : '.';
    bar[width] = 0;
}

void zt_progress_eta(double seconds, char *buf, size_t n) {
    if (!(seconds >= 0) || seconds > 1e7) {
        snprintf(buf, n, "--:--");
        return;
    }
    long t = (long)(seconds + 0.5);
    if (t >= 3600) snprintf(buf, n, "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
    else snprintf(buf, n, "%02ld:%02ld", t / 60, t % 60);
}

void zt_progress_draw(zt_progress *p, const char *fmt, ...) {
    if (!p->tty) return;
    va_list ap;
    va_start(ap, fmt);
    fputc('\r', p->out);
    vfprintf(p->out, fmt, ap);
    va_end(ap);
    fputs("\033[K", p->out);
    fflush(p->out);
}

void zt_progress_keep(zt_progress *p) {
    if (!p->tty) return;
    fputc('\n', p->out);
    fflush(p->out);
}

void zt_progress_clear(zt_progress *p) {
    if (p->tty) fputs("\r\033[K", p->out);
}

void zt_progress_vprint(zt_progress *p, const char *fmt, va_list ap) {
    if (!p->on) return;
    zt_progress_clear(p);
    vfprintf(p->out, fmt, ap);
    fflush(p->out);
}

void zt_progress_print(zt_progress *p, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    zt_progress_vprint(p, fmt, ap);
    va_end(ap);
}
