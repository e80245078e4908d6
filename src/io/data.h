/* data.h — training/validation samples from token shards, by GLOBAL sample index.
 *
 * The shards (data.train may be a glob) are split into non-overlapping windows of T+1 tokens
 * (window w starts at token w*T of its shard; windows never cross shards). Training sample s is
 * window perm_e(s mod W) of epoch e = s / W, where perm_e is a Fisher-Yates permutation seeded
 * by (seed, e): it depends on the seed only, never on the number of ranks, so any rank can fetch
 * any sample and N ranks see exactly the samples 1 rank sees. Validation samples are windows in
 * file order. */
#ifndef ZT_DATA_H
#define ZT_DATA_H

#include <stddef.h>
#include <stdint.h>

typedef struct zt_dataset {
    int n_files;
    uint32_t **tokens;     /* per file */
    uint64_t *n_tokens;    /* per file */
    uint64_t *first_win;   /* per file: index of its first window (prefix sums) */
    uint64_t n_windows;
    int T;
    uint32_t vocab_size;   /* from the shard headers */
    uint64_t seed;
    long perm_epoch;       /* epoch the permutation below is for, -1 none */
    uint64_t *perm;        /* (n_windows) */
} zt_dataset;

/* pattern: a path or a glob. Checks every header and every token < model_vocab.
   Returns 0, or non-zero with a one-line message in err. */
int zt_dataset_open(zt_dataset *d, const char *pattern, int T, uint32_t model_vocab, uint64_t seed,
                    char *err, size_t errlen);
void zt_dataset_close(zt_dataset *d);
/* inputs/targets (T each) of training sample s (shuffled) */
void zt_dataset_train_sample(zt_dataset *d, uint64_t s, int32_t *inputs, int32_t *targets);
/* inputs/targets of window w (w < n_windows), in file order */
void zt_dataset_window(const zt_dataset *d, uint64_t w, int32_t *inputs, int32_t *targets);

#endif
