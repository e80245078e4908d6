/* metrics.c — run directory, the per-step status line (through util/progress), metrics.jsonl,
 * SHA-256. */
#include "io/metrics.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/util.h"

int zt_metrics_open(zt_metrics *mx, int active, const char *root, const char *session, const char *name,
                    int reuse, char *err, size_t errlen) {
    memset(mx, 0, sizeof *mx);
    mx->active = active;
    zt_progress_start(&mx->bar, stdout);
    if (!active) return 0;
    char base[900];
    snprintf(base, sizeof base, "%s/%s/%s", root, session, name);
    snprintf(mx->dir, sizeof mx->dir, "%s", base);
    struct stat st;
    for (int k = 1; !reuse && stat(mx->dir, &st) == 0; k++) snprintf(mx->dir, sizeof mx->dir, "%s-%d", base, k);
    if (zt_mkdirs(mx->dir) != 0) {
        snprintf(err, errlen, "%s: cannot create the run directory: %s (check run.root)", mx->dir, strerror(errno));
        return 1;
    }
    char p[1100];
    zt_metrics_path(mx, "metrics.jsonl", p, sizeof p);
    mx->jsonl = fopen(p, reuse ? "a" : "w");
    if (!mx->jsonl) {
        snprintf(err, errlen, "%s: cannot write: %s", p, strerror(errno));
        return 1;
    }
    return 0;
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
    zt_tb_scalar v[8] = {
        {"train/loss", (float)s->loss},         {"train/lr", (float)s->lr},
        {"train/grad_norm", (float)s->grad_norm}, {"train/tokens_per_s", (float)s->tokens_per_s},
        {"train/mem_bytes", (float)s->mem_bytes},
    };
    int n = 5;
    if (s->val_loss >= 0) v[n++] = (zt_tb_scalar){"val/loss", (float)s->val_loss};
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
    if (mx->jsonl) {
        fprintf(mx->jsonl, "{\"step\": %ld, \"loss\": %.9g, \"lr\": %.9g, \"grad_norm\": %.9g, "
                "\"tokens_per_s\": %.6g, \"gflops\": %.6g, \"frac_peak\": %.6g, \"step_ms\": %.6g, "
                "\"mem_bytes\": %.0f",
                s->step, s->loss, s->lr, s->grad_norm, s->tokens_per_s, s->gflops, s->frac_peak, s->step_ms,
                s->mem_bytes);
        if (s->val_loss >= 0) fprintf(mx->jsonl, ", \"val_loss\": %.9g", s->val_loss);
        if (s->ckpt_stall_s >= 0) fprintf(mx->jsonl, ", \"ckpt_stall_s\": %.4f", s->ckpt_stall_s);
        if (s->gpu_mem_bytes >= 0)
            fprintf(mx->jsonl, ", \"gpu_mem_bytes\": %.0f, \"gpu_util\": %.0f", s->gpu_mem_bytes, s->gpu_util);
        fprintf(mx->jsonl, "}\n");
        fflush(mx->jsonl);
    }
    double elapsed = zt_progress_elapsed(&mx->bar);
    double eta = s->step > 0 ? elapsed / (double)s->step * (double)(s->steps - s->step) : -1;
    char etab[32];
    zt_progress_eta(eta, etab, sizeof etab);
    char peak[32] = "";
    if (s->frac_peak >= 0) snprintf(peak, sizeof peak, " | %4.1f%% peak", 100.0 * s->frac_peak);
    char val[96] = "";
    if (s->val_loss >= 0) snprintf(val, sizeof val, " | val %.4f", s->val_loss);
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
}

void zt_metrics_truncate(zt_metrics *mx, long step) {
    if (!mx->active || !mx->jsonl) return;
    char p[1100], tmp[1200];
    zt_metrics_path(mx, "metrics.jsonl", p, sizeof p);
    snprintf(tmp, sizeof tmp, "%s.tmp", p);
    fclose(mx->jsonl);
    mx->jsonl = NULL;
    FILE *in = fopen(p, "r"), *out = fopen(tmp, "w");
    if (in && out) {
        char line[4096];
        while (fgets(line, sizeof line, in)) {
            const char *k = strstr(line, "\"step\": ");
            if (k && strtol(k + 8, NULL, 10) > step) continue;
            fputs(line, out);
        }
    }
    if (in) fclose(in);
    if (out) {
        fclose(out);
        rename(tmp, p);
    }
    mx->jsonl = fopen(p, "a");
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
