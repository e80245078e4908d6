/* data.c — the global-sample-index loader over token shards (see data.h). */
#include "io/data.h"

#include <glob.h>
#include <stdlib.h>
#include <string.h>

#include "io/data_shard.h"
#include "util/util.h"

int zt_dataset_open(zt_dataset *d, const char *pattern, int T, uint32_t model_vocab, uint64_t seed,
                    char *err, size_t errlen) {
    memset(d, 0, sizeof *d);
    d->T = T;
    d->seed = seed;
    d->perm_epoch = -1;
    glob_t g;
    int rc = glob(pattern, 0, NULL, &g);
    if (rc == GLOB_NOMATCH || (rc == 0 && g.gl_pathc == 0)) {
        snprintf(err, errlen, "%s: no such data file (make token shards first: `ztrain prepare --input TEXT --vocab-size N --out-dir DIR`, then point data.train/data.val at them)",
                 pattern);
        return 1;
    }
    if (rc != 0) {
        snprintf(err, errlen, "%s: cannot expand the data file pattern", pattern);
        return 1;
    }
    d->n_files = (int)g.gl_pathc;
    d->tokens = zt_calloc(d->n_files, sizeof *d->tokens);
    d->n_tokens = zt_calloc(d->n_files, sizeof *d->n_tokens);
    d->first_win = zt_calloc(d->n_files + 1, sizeof *d->first_win);
    for (int i = 0; i < d->n_files; i++) {
        const char *path = g.gl_pathv[i];
        zt_shard_header h;
        /* the type before any open: a named pipe would block the open, a device never ends */
        if (zt_check_input_file(path, "a ztrain token shard (see `ztrain prepare`)", err, errlen) ||
            zt_shard_load(path, &h, &d->tokens[i], err, errlen) != 0) {
            globfree(&g);
            return 1;
        }
        if (h.vocab_size > model_vocab) {
            snprintf(err, errlen, "%s: shard vocab size %u is larger than model.vocab_size %u "
                     "(the tokenizer does not match the model)", path, h.vocab_size, model_vocab);
            globfree(&g);
            return 1;
        }
        if (i == 0) d->vocab_size = h.vocab_size;
        d->n_tokens[i] = h.count;
        uint64_t w = h.count > (uint64_t)T ? (h.count - 1) / (uint64_t)T : 0;
        d->first_win[i + 1] = d->first_win[i] + w;
    }
    d->n_windows = d->first_win[d->n_files];
    if (d->n_windows == 0) {
        snprintf(err, errlen, "%s: too few tokens for one sequence of %d (+1) tokens", pattern, T);
        globfree(&g);
        return 1;
    }
    globfree(&g);
    d->perm = zt_malloc(d->n_windows * sizeof *d->perm);
    return 0;
}

void zt_dataset_close(zt_dataset *d) {
    if (!d) return;
    for (int i = 0; i < d->n_files; i++) free(d->tokens[i]);
    free(d->tokens);
    free(d->n_tokens);
    free(d->first_win);
    free(d->perm);
    memset(d, 0, sizeof *d);
}

void zt_dataset_window(const zt_dataset *d, uint64_t w, int32_t *inputs, int32_t *targets) {
    ZT_ASSERT(w < d->n_windows);
    int f = 0;
    while (w >= d->first_win[f + 1]) f++;
    const uint32_t *src = d->tokens[f] + (w - d->first_win[f]) * (uint64_t)d->T;
    for (int t = 0; t < d->T; t++) {
        inputs[t] = (int32_t)src[t];
        targets[t] = (int32_t)src[t + 1];
    }
}

static void build_perm(zt_dataset *d, long epoch) {
    zt_rng r;
    zt_rng_seed(&r, d->seed ^ (0xD1B54A32D192ED03ull * (uint64_t)(epoch + 1)));
    for (uint64_t i = 0; i < d->n_windows; i++) d->perm[i] = i;
    for (uint64_t i = d->n_windows - 1; i > 0; i--) {
        uint64_t j = zt_rng_next(&r) % (i + 1);
        uint64_t tmp = d->perm[i];
        d->perm[i] = d->perm[j];
        d->perm[j] = tmp;
    }
    d->perm_epoch = epoch;
}

void zt_dataset_train_sample(zt_dataset *d, uint64_t s, int32_t *inputs, int32_t *targets) {
    long epoch = (long)(s / d->n_windows);
    if (epoch != d->perm_epoch) build_perm(d, epoch);
    zt_dataset_window(d, d->perm[s % d->n_windows], inputs, targets);
}
