/* train_data.c — a training run's data (train_data.h). */
#include "cmd/train_data.h"

#include <stdlib.h>
#include <string.h>

#include "util/util.h"

int zt_train_data_open(zt_train_data *td, const zt_config *c, const zt_model_shape *s, int rank, char *err,
                       size_t errlen) {
    memset(td, 0, sizeof *td);
    td->c = c;
    td->mlm = s->encoder;
    const int T = c->train.seq_len;
    const uint32_t V = (uint32_t)s->vocab_size;
    td->has_val = c->data.val[0] != 0;
    int bad;
    if (c->data.stream)
        bad = zt_dataset_open_stream(&td->train, c->data.train, c->data.field, c->data.tokenizer, T, td->mlm, V, err,
                                     errlen);
    else
        bad = (td->mlm ? zt_dataset_open_mlm : zt_dataset_open)(&td->train, c->data.train, T, V,
                                                                (uint64_t)c->train.seed, c->data.shuffle, 1, err,
                                                                errlen);
    if (!bad && td->has_val)
        bad = (td->mlm ? zt_dataset_open_mlm : zt_dataset_open)(&td->val, c->data.val, T, V, (uint64_t)c->train.seed, 0,
                                                                0, err, errlen);
    if (bad) return 1;
    if (td->mlm) { /* the step's global batch, masked once by the count and then handed out by the batch */
        zt_mlm_init(&td->masks, c, (uint64_t)c->train.seed);
        const size_t n = (size_t)c->train.global_batch * (size_t)T;
        td->tok = zt_malloc(n * sizeof(int32_t));
        td->tg = zt_malloc(n * sizeof(int32_t));
        td->cached_step = -1;
    }
    const char *trace = getenv("ZTRAIN_TRACE_DATA");
    if (trace && trace[0]) {
        char path[ZT_PATH_MAX + 16];
        snprintf(path, sizeof path, "%.*s.%d", ZT_PATH_MAX, trace, rank);
        if (!(td->trace = fopen(path, "a"))) return zt_errf(err, errlen, "%s: cannot write the data trace", path);
    }
    return 0;
}

/* training sample s: its tokens and targets, masked for an encoder */
static void sample(zt_train_data *td, uint64_t s, int32_t *tokens, int32_t *targets) {
    zt_dataset_train_sample(&td->train, s, tokens, targets);
    if (td->mlm) zt_mlm_apply(&td->masks, s, tokens, targets, td->c->train.seq_len);
}

void zt_train_data_batch(void *ctx, long step, int j, int32_t *tokens, int32_t *targets) {
    zt_train_data *td = ctx;
    const int B = td->c->train.micro_batch, T = td->c->train.seq_len;
    for (int i = 0; i < B; i++) {
        const uint64_t s = (uint64_t)step * td->c->train.global_batch + (uint64_t)j * B + i;
        const size_t k = (size_t)j * B + i; /* the sample's row in the step's cache */
        if (td->mlm && td->cached_step == step) {
            memcpy(tokens + (size_t)i * T, td->tok + k * T, (size_t)T * sizeof(int32_t));
            memcpy(targets + (size_t)i * T, td->tg + k * T, (size_t)T * sizeof(int32_t));
        } else {
            sample(td, s, tokens + (size_t)i * T, targets + (size_t)i * T);
        }
        if (td->trace) zt_dataset_trace(&td->train, td->trace, step, j, i, s, tokens + (size_t)i * T);
    }
}

/* the targets that count over the step's whole global batch: the shards' loss masks, or (mlm) the masked positions
   of the step's samples, read in order (as a stream must be) and kept for the batch */
static uint64_t count(void *ctx, long step) {
    zt_train_data *td = ctx;
    const uint64_t GB = (uint64_t)td->c->train.global_batch, s0 = (uint64_t)step * GB;
    const size_t T = (size_t)td->c->train.seq_len;
    if (!td->mlm) return zt_dataset_count_targets(&td->train, s0, GB);
    uint64_t n = 0;
    for (uint64_t s = s0; s < s0 + GB; s++) {
        int32_t *tok = td->tok + (s - s0) * T, *tg = td->tg + (s - s0) * T;
        zt_dataset_train_sample(&td->train, s, tok, tg);
        n += (uint64_t)zt_mlm_apply(&td->masks, s, tok, tg, (int)T);
    }
    td->cached_step = step;
    return n;
}

zt_step_count_fn zt_train_data_count_fn(const zt_train_data *td) {
    return td->mlm || td->train.has_mask ? count : NULL;
}

void zt_train_data_close(zt_train_data *td) {
    zt_dataset_close(&td->train);
    if (td->has_val) zt_dataset_close(&td->val);
    if (td->trace) fclose(td->trace);
    free(td->tok);
    free(td->tg);
    memset(td, 0, sizeof *td);
}
