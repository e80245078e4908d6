/* metrics.c — run directory (creation, the run.lock that makes one run its owner), the per-step
 * status line (through util/progress), metrics.jsonl, SHA-256. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "io/metrics.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <openssl/evp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/util.h"

#define LOCK_FILE "run.lock"

/* ---------------------------------------------------------------- the run directory's lock */

/* What exit() must undo on rank 0 (a user error ends the process without zt_metrics_close): the lock
   file, and the run directory itself when this process created it and nothing was written into it. */
static struct {
    int fd;                 /* -1: none held */
    char lock[1100];
    char made[3][1024];     /* directories this process created (run.root, the session, the run), in order */
    int n_made;
    int registered;         /* atexit done */
} g_run = {-1, "", {"", "", ""}, 0, 0};

static void release_lock(void) {
    if (g_run.fd >= 0) {
        unlink(g_run.lock); /* before close: whoever flocks the old inode next sees it is stale (below) */
        close(g_run.fd);
        g_run.fd = -1;
    }
    /* rmdir removes only empty directories: those of a run that failed before writing anything */
    while (g_run.n_made > 0) rmdir(g_run.made[--g_run.n_made]);
}

static void at_exit_release(void) { release_lock(); }

/* pid names a live process of this host (not a zombie waiting to be reaped) */
static int pid_alive(long pid) {
    if (pid <= 0 || kill((pid_t)pid, 0) != 0) return 0;
    char p[64], buf[256];
    snprintf(p, sizeof p, "/proc/%ld/stat", pid);
    FILE *f = fopen(p, "r");
    if (!f) return 1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *rp = strrchr(buf, ')'); /* "pid (comm) S ..." */
    return !(rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X'));
}

/* "host H pid P since T" of a lock file's text: fills host and pid (0 when unreadable) */
static void parse_owner(const char *text, char *host, size_t hn, long *pid, char *since, size_t sn) {
    host[0] = since[0] = 0;
    *pid = 0;
    const char *h = strstr(text, "host "), *p = strstr(text, " pid "), *t = strstr(text, " since ");
    if (h && p && p > h) snprintf(host, hn, "%.*s", (int)(p - h - 5), h + 5);
    if (p) *pid = strtol(p + 5, NULL, 10);
    if (t) snprintf(since, sn, "%.*s", (int)strcspn(t + 7, "\n"), t + 7);
}

/* takes dir/run.lock: 0, or 1 with a message naming the owner. Liveness is the flock (released by the
   kernel when the owner dies, however it dies); the text says who owns it, for messages. */
static int take_lock(zt_metrics *mx, const char *dir, char *err, size_t errlen) {
    char path[1100], host[256] = "?";
    snprintf(path, sizeof path, "%s/" LOCK_FILE, dir);
    gethostname(host, sizeof host - 1);
    for (int attempt = 0; attempt < 8; attempt++) {
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0) return zt_errf(err, errlen, "%s: cannot create the run directory's lock: %s (check run.root)", path,
                                   strerror(errno));
        char text[512] = "";
        ssize_t n = pread(fd, text, sizeof text - 1, 0);
        text[n > 0 ? n : 0] = 0;
        char ohost[256], since[64];
        long opid;
        parse_owner(text, ohost, sizeof ohost, &opid, since, sizeof since);
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            int e = errno;
            if (e == EWOULDBLOCK && !text[0]) { /* the owner may have been between its truncate and its write */
                struct timespec ts = {0, 50000000};
                nanosleep(&ts, NULL);
                n = pread(fd, text, sizeof text - 1, 0);
                text[n > 0 ? n : 0] = 0;
                parse_owner(text, ohost, sizeof ohost, &opid, since, sizeof since);
            }
            close(fd);
            if (e != EWOULDBLOCK)
                return zt_errf(err, errlen, "%s: cannot lock: %s", path, strerror(e));
            return zt_errf(err, errlen,
                           "%s is in use by another ztrain run: pid %ld on %s%s%s (lock file %s); wait for it to end, "
                           "or train under another run.name", dir, opid, ohost[0] ? ohost : "?",
                           since[0] ? " since " : "", since, path);
        }
        /* the path may have been released (unlinked) between our open and our flock: lock what is there */
        struct stat a, b;
        if (fstat(fd, &a) != 0 || stat(path, &b) != 0 || a.st_ino != b.st_ino || a.st_dev != b.st_dev) {
            close(fd);
            continue;
        }
        if (text[0] && ohost[0] && strcmp(ohost, host) != 0) {
            /* another machine's process: its flock may not reach us (a file system without shared locks) */
            close(fd);
            return zt_errf(err, errlen,
                           "%s is in use by another ztrain run: pid %ld on %s%s%s (lock file %s); if that run is "
                           "gone, remove the lock file", dir, opid, ohost, since[0] ? " since " : "", since, path);
        }
        if (text[0]) {
            /* a lock of this host whose flock is free: its owner is gone (killed before it could remove it) */
            int alive = opid != (long)getpid() && pid_alive(opid);
            zt_progress_print(&mx->bar, "note: %s: taking over a stale lock of pid %ld on %s%s%s (%s)\n", path, opid,
                              ohost[0] ? ohost : "?", since[0] ? " since " : "", since,
                              alive ? "that pid is another process now" : "that process is gone");
        }
        char when[32], mine[400];
        zt_iso_time(when, sizeof when);
        int len = snprintf(mine, sizeof mine, "host %s pid %ld since %s\n", host, (long)getpid(), when);
        if (ftruncate(fd, 0) != 0 || pwrite(fd, mine, (size_t)len, 0) != len) {
            int e = errno;
            close(fd);
            return zt_errf(err, errlen, "%s: cannot write: %s", path, strerror(e));
        }
        mx->lock_fd = fd;
        g_run.fd = fd;
        snprintf(g_run.lock, sizeof g_run.lock, "%s", path);
        if (!g_run.registered) {
            atexit(at_exit_release);
            g_run.registered = 1;
        }
        return 0;
    }
    return zt_errf(err, errlen, "%s: cannot take the lock: it keeps changing (another run starting?)", path);
}

/* run.session and run.name are single path components (the config checks this too) */
static int bad_component(const char *what, const char *v, char *err, size_t errlen) {
    if (!v[0] || strcmp(v, ".") == 0 || strcmp(v, "..") == 0 || strchr(v, '/'))
        return zt_errf(err, errlen, "%s = \"%s\": must be a plain directory name (no '/', not '.' or '..')", what, v);
    return 0;
}

int zt_metrics_open(zt_metrics *mx, int active, const char *root, const char *session, const char *name,
                    int reuse, char *err, size_t errlen) {
    memset(mx, 0, sizeof *mx);
    mx->active = active;
    mx->lock_fd = -1;
    zt_progress_start(&mx->bar, stdout);
    if (!active) return 0;
    if (bad_component("run.session", session, err, errlen) || bad_component("run.name", name, err, errlen)) return 1;
    char parent[1024], base[1024];
    if (snprintf(parent, sizeof parent, "%s/%s", root, session) >= (int)sizeof parent - 80 ||
        snprintf(base, sizeof base, "%s/%s", parent, name) >= (int)sizeof base - 16)
        return zt_errf(err, errlen, "%s/%s/%s: run directory path too long", root, session, name);
    struct stat st;
    int made_root = stat(root, &st) != 0, made_parent = stat(parent, &st) != 0;
    if (zt_mkdirs(parent) != 0)
        return zt_errf(err, errlen, "%s: cannot create the run directory: %s (check run.root)", parent, strerror(errno));
    int created = 0;
    snprintf(mx->dir, sizeof mx->dir, "%s", base);
    if (reuse) {
        created = mkdir(mx->dir, 0755) == 0;
        if (!created && errno != EEXIST)
            return zt_errf(err, errlen, "%s: cannot create the run directory: %s (check run.root)", mx->dir,
                           strerror(errno));
    } else {
        /* name, name-1, name-2, ...: mkdir is the atomic test, two runs starting at once get two names */
        for (int k = 1; !created; k++) {
            if (mkdir(mx->dir, 0755) == 0) created = 1;
            else if (errno != EEXIST || k > 100000)
                return zt_errf(err, errlen, "%s: cannot create the run directory: %s (check run.root)", mx->dir,
                               strerror(errno));
            else snprintf(mx->dir, sizeof mx->dir, "%.1000s-%d", base, k);
        }
    }
    if (stat(mx->dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return zt_errf(err, errlen, "%s: exists and is not a directory (run.root/run.session/run.name)", mx->dir);
    g_run.n_made = 0;
    if (made_root) snprintf(g_run.made[g_run.n_made++], sizeof g_run.made[0], "%s", root);
    if (made_parent) snprintf(g_run.made[g_run.n_made++], sizeof g_run.made[0], "%s", parent);
    if (created) snprintf(g_run.made[g_run.n_made++], sizeof g_run.made[0], "%s", mx->dir);
    if (take_lock(mx, mx->dir, err, errlen)) {
        while (g_run.n_made > 0) rmdir(g_run.made[--g_run.n_made]);
        return 1;
    }
    return 0;
}

/* metrics.jsonl is opened at the first line to write (a run that fails before its first step leaves
   no empty file behind); 0 when it is open */
static int open_jsonl(zt_metrics *mx) {
    if (mx->jsonl) return 0;
    char p[1100];
    zt_metrics_path(mx, "metrics.jsonl", p, sizeof p);
    mx->jsonl = fopen(p, "a+");
    if (mx->jsonl) {
        /* a line cut by an earlier failed write (full disk, a killed run) is dropped: every line stays JSON */
        int fd = fileno(mx->jsonl);
        off_t end = lseek(fd, 0, SEEK_END), keep = end;
        char buf[4096];
        while (keep > 0) {
            off_t from = keep > (off_t)sizeof buf ? keep - (off_t)sizeof buf : 0;
            ssize_t n = pread(fd, buf, (size_t)(keep - from), from);
            if (n <= 0) break;
            int i = (int)n - 1;
            while (i >= 0 && buf[i] != '\n') i--;
            if (i >= 0) { keep = from + i + 1; break; }
            keep = from;
        }
        if (keep < end && ftruncate(fd, keep) != 0) { /* left as it is */ }
    }
    if (!mx->jsonl && !mx->write_warned) {
        zt_progress_print(&mx->bar, "warning: %s: cannot write: %s (metrics lines are lost)\n", p, strerror(errno));
        mx->write_warned = 1;
    }
    return mx->jsonl ? 0 : 1;
}

int zt_metrics_write(const zt_metrics *mx, const char *file, const void *data, size_t len, char *err, size_t errlen) {
    if (!mx->active) return 0;
    char p[1100];
    zt_metrics_path(mx, file, p, sizeof p);
    return zt_write_file_atomic(p, data, len, err, errlen);
}

void zt_metrics_path(const zt_metrics *mx, const char *file, char *out, size_t n) {
    snprintf(out, n, "%s/%s", mx->dir, file);
}

void zt_metrics_set_tensorboard(zt_metrics *mx, int on) { mx->tb_state = on ? 1 : -1; }

static void tensorboard_step(zt_metrics *mx, const zt_step_metrics *s) {
    if (mx->tb_state <= 0) return;
    if (!mx->tb.f) {
        char err[ZT_ERR_BUF];
        if (zt_tb_open(&mx->tb, mx->dir, err, sizeof err)) {
            zt_progress_print(&mx->bar, "warning: TensorBoard events off: %s\n", err);
            mx->tb_state = -1;
            return;
        }
    }
    zt_tb_scalar v[10] = {
        {"train/loss", (float)s->loss},         {"train/lr", (float)s->lr},
        {"train/grad_norm", (float)s->grad_norm}, {"train/tokens_per_s", (float)s->tokens_per_s},
        {"train/mem_bytes", (float)s->mem_bytes},
    };
    int n = 5;
    if (s->val_loss >= 0) v[n++] = (zt_tb_scalar){"val/loss", (float)s->val_loss};
    if (s->mlm_acc >= 0) v[n++] = (zt_tb_scalar){"train/mlm_acc", (float)s->mlm_acc};
    if (s->val_mlm_acc >= 0) v[n++] = (zt_tb_scalar){"val/mlm_acc", (float)s->val_mlm_acc};
    if (s->gpu_mem_bytes >= 0) {
        v[n++] = (zt_tb_scalar){"gpu/mem_bytes", (float)s->gpu_mem_bytes};
        v[n++] = (zt_tb_scalar){"gpu/util", (float)s->gpu_util};
    }
    if (zt_tb_scalars(&mx->tb, s->step, v, n)) {
        zt_progress_print(&mx->bar, "warning: %s: write failed, TensorBoard events off\n", mx->tb.path);
        zt_tb_close(&mx->tb);
        mx->tb_state = -1;
    }
}

void zt_metrics_step(zt_metrics *mx, const zt_step_metrics *s) {
    if (!mx->active) return;
    tensorboard_step(mx, s);
    if (!open_jsonl(mx)) {
        char gn[32] = "null"; /* an fp16 step skipped for overflow has no (finite) norm: JSON null */
        if (isfinite(s->grad_norm)) snprintf(gn, sizeof gn, "%.9g", s->grad_norm);
        fprintf(mx->jsonl, "{\"step\": %ld, \"loss\": %.9g, \"lr\": %.9g, \"grad_norm\": %s, "
                "\"tokens_per_s\": %.6g, \"gflops\": %.6g, \"frac_peak\": %.6g, \"step_ms\": %.6g, "
                "\"update_ms\": %.6g, \"mem_bytes\": %.0f",
                s->step, s->loss, s->lr, gn, s->tokens_per_s, s->gflops, s->frac_peak, s->step_ms, s->update_ms,
                s->mem_bytes);
        if (s->val_loss >= 0) fprintf(mx->jsonl, ", \"val_loss\": %.9g", s->val_loss);
        if (s->mlm_acc >= 0) fprintf(mx->jsonl, ", \"mlm_acc\": %.9g", s->mlm_acc);
        if (s->val_mlm_acc >= 0) fprintf(mx->jsonl, ", \"val_mlm_acc\": %.9g", s->val_mlm_acc);
        if (s->ckpt_stall_s >= 0) fprintf(mx->jsonl, ", \"ckpt_stall_s\": %.4f", s->ckpt_stall_s);
        if (s->loss_scale > 0) fprintf(mx->jsonl, ", \"loss_scale\": %.9g, \"skipped\": %d", s->loss_scale, s->skipped);
        if (s->gpu_mem_bytes >= 0)
            fprintf(mx->jsonl, ", \"gpu_mem_bytes\": %.0f, \"gpu_util\": %.0f", s->gpu_mem_bytes, s->gpu_util);
        fprintf(mx->jsonl, "}\n");
        if (fflush(mx->jsonl) != 0 || ferror(mx->jsonl)) {
            const int e = errno;
            if (!mx->write_warned)
                zt_progress_print(&mx->bar, "warning: %s/metrics.jsonl: write failed at step %ld: %s (lines may be "
                                  "lost)\n", mx->dir, s->step, strerror(e));
            mx->write_warned = 1;
            /* never leave an empty file behind (a full disk at the first line): reopened at the next step */
            struct stat st;
            if (fstat(fileno(mx->jsonl), &st) == 0 && st.st_size == 0) {
                char p[1100];
                zt_metrics_path(mx, "metrics.jsonl", p, sizeof p);
                unlink(p);
            }
            fclose(mx->jsonl);
            mx->jsonl = NULL;
        }
    }
    double elapsed = zt_progress_elapsed(&mx->bar);
    double eta = s->step > 0 ? elapsed / (double)s->step * (double)(s->steps - s->step) : -1;
    char etab[32];
    zt_progress_eta(eta, etab, sizeof etab);
    char peak[32] = "";
    if (s->frac_peak >= 0) snprintf(peak, sizeof peak, " | %4.1f%% peak", 100.0 * s->frac_peak);
    char val[96] = "";
    if (s->val_loss >= 0) snprintf(val, sizeof val, " | val %.4f", s->val_loss);
    if (s->val_mlm_acc >= 0) snprintf(val + strlen(val), sizeof val - strlen(val), " acc %.3f", s->val_mlm_acc);
    if (s->gpu_mem_bytes >= 0) /* after the ETA, with the validation loss */
        snprintf(val + strlen(val), sizeof val - strlen(val), " | gpu %.0f%% %.1f GiB", s->gpu_util,
                 s->gpu_mem_bytes / (1 << 30));
    if (mx->bar.tty) {
        char bar[32];
        zt_progress_bar(bar, 24, (double)s->step, (double)s->steps);
        zt_progress_draw(&mx->bar, "[%s] %ld/%ld | loss %.4f | lr %.2e | %.0f tok/s%s | ETA %s%s", bar, s->step,
                         s->steps, s->loss, s->lr, s->tokens_per_s, peak, etab, val);
        if (s->step == s->steps || s->val_loss >= 0) zt_progress_keep(&mx->bar);
    } else {
        zt_progress_print(&mx->bar, "step %ld/%ld | loss %.6f | lr %.4e | norm %.4f | %.1f ms | %.0f tok/s%s | ETA %s%s\n",
                          s->step, s->steps, s->loss, s->lr, s->grad_norm, s->step_ms, s->tokens_per_s, peak, etab,
                          val);
    }
}

void zt_metrics_note(zt_metrics *mx, const char *fmt, ...) {
    if (!mx->active) return;
    va_list ap;
    va_start(ap, fmt);
    zt_progress_vprint(&mx->bar, fmt, ap);
    va_end(ap);
}

void zt_metrics_close(zt_metrics *mx) {
    if (mx->jsonl) fclose(mx->jsonl);
    mx->jsonl = NULL;
    zt_tb_close(&mx->tb);
    if (mx->lock_fd >= 0 && mx->lock_fd == g_run.fd) release_lock();
    mx->lock_fd = -1;
}

void zt_metrics_truncate(zt_metrics *mx, long step) {
    if (!mx->active) return;
    char p[1100], tmp[1200];
    zt_metrics_path(mx, "metrics.jsonl", p, sizeof p);
    snprintf(tmp, sizeof tmp, "%s.tmp", p);
    if (mx->jsonl) fclose(mx->jsonl);
    mx->jsonl = NULL; /* reopened at the next line */
    FILE *in = fopen(p, "r");
    if (!in) return; /* nothing written yet */
    FILE *out = fopen(tmp, "w");
    int ok = out != NULL;
    char line[4096];
    while (ok && fgets(line, sizeof line, in)) {
        const char *k = strstr(line, "\"step\": ");
        if (k && strtol(k + 8, NULL, 10) > step) continue;
        ok = fputs(line, out) >= 0;
    }
    fclose(in);
    if (out) {
        ok = fflush(out) == 0 && fsync(fileno(out)) == 0 && ok;
        ok = fclose(out) == 0 && ok;
    }
    /* the old file stays as it was unless the whole new one was written */
    if (!ok || rename(tmp, p) != 0) {
        zt_progress_print(&mx->bar, "warning: %s: cannot drop the lines after step %ld: %s\n", p, step,
                          strerror(errno));
        unlink(tmp);
    }
}

void zt_sha256_hex(const void *data, size_t n, char out[65]) {
    unsigned char md[32];
    unsigned int len = 0;
    EVP_Digest(data, n, md, &len, EVP_sha256(), NULL);
    for (int i = 0; i < 32; i++) snprintf(out + 2 * i, 3, "%02x", md[i]);
}

void *zt_sha256_begin(void) {
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (!ctx || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) zt_panic(__FILE__, __LINE__, "SHA-256 init failed");
    return ctx;
}

void zt_sha256_update(void *state, const void *data, size_t n) { EVP_DigestUpdate((EVP_MD_CTX *)state, data, n); }

void zt_sha256_end(void *state, char out[65]) {
    unsigned char md[32];
    unsigned int len = 0;
    EVP_DigestFinal_ex((EVP_MD_CTX *)state, md, &len);
    EVP_MD_CTX_free((EVP_MD_CTX *)state);
    for (int i = 0; i < 32; i++) snprintf(out + 2 * i, 3, "%02x", md[i]);
}

void zt_json_escape(const char *in, char *out, size_t n) {
    size_t o = 0;
    for (; *in && o + 7 < n; in++) {
        unsigned char c = (unsigned char)*in;
        if (c == '"' || c == '\\') { out[o++] = '\\'; out[o++] = (char)c; }
        else if (c == '\n') { out[o++] = '\\'; out[o++] = 'n'; }
        else if (c < 0x20) o += (size_t)snprintf(out + o, n - o, "\\u%04x", c);
        else out[o++] = (char)c;
    }
    out[o] = 0;
}
