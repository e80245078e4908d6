/* ckpt_resume.c — what resuming needs before the collective load: finding the newest complete
 * checkpoint of a directory (and telling "no checkpoint yet" from "only damaged ones", which
 * --resume auto must refuse rather than start over from step 0 and overwrite), and the rules for
 * what a resumed run may change in its config. None of this is collective. (What kind of file a
 * path is: ckpt_file.c.) */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <hdf5.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/ckpt.h"
#include "io/ckpt_internal.h"
#include "util/util.h"

/* why path is not usable, short: "truncated HDF5 file", "incomplete checkpoint", ...; 0 when it is */
static int unusable(const char *path, char *why, size_t n) {
    zt_ckpt_meta meta;
    char err[ZT_ERR_BUF];
    if (zt_ckpt_read_meta(path, &meta, err, sizeof err) == 0) {
        zt_ckpt_meta_free(&meta);
        return 0;
    }
    /* the messages read "<path>: <what> (<details>)": keep <what> */
    const char *w = strncmp(err, path, strlen(path)) == 0 && err[strlen(path)] == ':' ? err + strlen(path) + 2 : err;
    snprintf(why, n, "%.*s", (int)strcspn(w, "("), w);
    size_t l = strlen(why);
    while (l > 0 && why[l - 1] == ' ') why[--l] = 0;
    return 1;
}

static int cmp_desc(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return (x < y) - (x > y);
}

/* appends "name (why)" to a ", "-separated list, marking a cut with "..." */
static void list_add(char *list, size_t n, const char *name, const char *why) {
    size_t used = strlen(list);
    if (!n || used + 4 >= n) return;
    int w = snprintf(list + used, n - used, "%s%s (%s)", used ? ", " : "", name, why);
    if (w < 0 || (size_t)w >= n - used) snprintf(list + (n > 4 ? n - 4 : 0), n > 4 ? 4 : n, "...");
}

int zt_ckpt_find_resume(const char *dir, char *path, size_t n, char *skipped, size_t skn, char *err, size_t errlen) {
    char why[256];
    if (skipped && skn) skipped[0] = 0;
    if (n) path[0] = 0;
    /* `latest` names the last file a save published; it is replaced only after that file was
       renamed into place, so it normally names a complete file (and the branch a run is on when
       it was resumed from an older checkpoint than its newest file) */
    char lp[ZT_PATH_MAX + 16], name[256] = "";
    snprintf(lp, sizeof lp, "%.*s/latest", ZT_PATH_MAX, dir);
    FILE *f = fopen(lp, "r");
    if (f) {
        if (!fgets(name, sizeof name, f)) name[0] = 0;
        fclose(f);
        name[strcspn(name, "\r\n")] = 0;
        if (name[0] && !strchr(name, '/')) {
            snprintf(path, n, "%s/%s", dir, name);
            if (!unusable(path, why, sizeof why)) return 0;
        }
    }
    /* otherwise step_*.h5 files (never .tmp), highest step first, the first that is usable */
    DIR *dp = opendir(dir);
    if (!dp) return 1;
    long *steps = NULL;
    size_t cnt = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(dp))) {
        long st;
        int used = 0;
        if (sscanf(de->d_name, "step_%ld.h5%n", &st, &used) != 1 || used <= 0 || de->d_name[used]) continue;
        if (cnt == cap) {
            long *p = realloc(steps, (cap = cap ? 2 * cap : 16) * sizeof *steps);
            if (!p) break;
            steps = p;
        }
        steps[cnt++] = st;
    }
    closedir(dp);
    if (cnt) qsort(steps, cnt, sizeof *steps, cmp_desc);
    char damaged[ZT_ERR_BUF] = "";
    int rc = cnt ? 2 : 1;
    for (size_t i = 0; i < cnt && rc; i++) {
        char base[64];
        snprintf(base, sizeof base, "step_%08ld.h5", steps[i]);
        snprintf(path, n, "%s/%s", dir, base);
        if (!unusable(path, why, sizeof why)) rc = 0;
        else list_add(damaged, sizeof damaged, base, why);
    }
    free(steps);
    if (rc == 0 && skipped && skn) snprintf(skipped, skn, "%s", damaged);
    if (rc && n) path[0] = 0;
    if (rc == 2)
        zt_errf(err, errlen, "--resume auto: every checkpoint in %s is damaged: %s; refusing to start over from "
                "step 0 and overwrite them (move them away to start this run afresh, or give the new run another "
                "run.name)", dir, damaged);
    return rc;
}

int zt_ckpt_find_latest(const char *dir, char *path, size_t n) {
    char err[ZT_ERR_BUF];
    return zt_ckpt_find_resume(dir, path, n, NULL, 0, err, sizeof err) != 0;
}

/* ---------------------------------------------------------------- what a resumed run may change */

/* keys (or "group." prefixes) a resume may change: how and where the run executes, never the model
   or the optimizer. train.micro_batch may change because train.global_batch may not: each step
   still averages the gradient over the same samples (the bits differ, the math does not).
   train.steps moves the end of the lr schedule. precision (and fp16.*) may change: the state is the fp32
   master weights and moments, which every precision keeps (an fp32 run's parameters are its master).
   lora.base may name the base at another path: its content is checked by fingerprint (lora_base_hash). */
static const char *const may_change[] = {
    "device", "comm", "precision", "fp16.", "train.micro_batch", "train.steps", "train.threads", "train.log_every",
    "checkpoint.", "eval.", "sample.", "run.", "metrics.", "data.", "zero.stage", "zero.reduce", "zero.bucket_mb", "zero.grad_wire",
    "zero.offload",
    "train.param_storage",
    "lora.base", NULL,
};

static int allowed(const char *key) {
    for (const char *const *k = may_change; *k; k++) {
        size_t l = strlen(*k);
        if ((*k)[l - 1] == '.' ? strncmp(key, *k, l) == 0 : strcmp(key, *k) == 0) return 1;
    }
    return 0;
}

typedef struct diff_ctx {
    char *log, *err;
    size_t loglen, errlen, used;
} diff_ctx;

static int on_diff(const char *key, const char *was, const char *now, void *p) {
    diff_ctx *d = p;
    if (!allowed(key))
        return zt_errf(d->err, d->errlen,
                            "resume: %s is %s in the checkpoint but %s in the config (a checkpoint can only resume "
                            "the same model and optimizer settings)", key, was, now);
    if (d->log && d->used < d->loglen) {
        int w = snprintf(d->log + d->used, d->loglen - d->used, "%s%s %s -> %s", d->used ? ", " : "", key, was, now);
        if (w > 0) d->used += (size_t)w;
        if (d->used >= d->loglen) d->used = d->loglen;
    }
    return 0;
}

int zt_ckpt_check_resume(const char *saved_config_text, const zt_config *now, char *log, size_t loglen, char *err,
                         size_t errlen) {
    zt_config *saved = zt_calloc(1, sizeof *saved);
    char perr[ZT_ERR_BUF];
    if (log && loglen) log[0] = 0;
    if (!saved_config_text || zt_config_load_string(saved, saved_config_text, perr, sizeof perr)) {
        free(saved);
        return zt_errf(err, errlen, "resume: the checkpoint's stored config cannot be read (%s)",
                            saved_config_text ? perr : "missing");
    }
    diff_ctx d = {log, err, loglen, errlen, log && loglen ? strlen(log) : 0};
    int rc = zt_config_diff(saved, now, on_diff, &d);
    free(saved);
    return rc;
}
