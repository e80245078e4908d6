/* data.h — training and validation samples from token shards, by GLOBAL sample index.
 *
 * Sources. data.train is one source (a shard path or a glob of shards) or a weighted mixture written as
 * Megatron-LM's --data-path: "W1 PATH1 W2 PATH2 ...", weights > 0, normalised to sum 1. Shards are
 * memory-mapped read-only (data_shard.h): resident memory is the index below and the windows in use,
 * whatever the corpus size.
 *
 * Windows. A stream shard is cut into non-overlapping windows of T+1 tokens at stride T (window w starts
 * at token w*T of its shard; windows never cross shards; the tail that is not a whole window is not
 * used). A shard of examples of L tokens (data_shard.h) has one window per example and needs L = T+1.
 * A source's windows are numbered across its files in the glob's (sorted) order.
 *
 * Masked-LM mode (zt_dataset_open_mlm: BERT / RoBERTa pretraining on `ztrain prepare --mlm` shards). A sample is
 * T tokens with no shift: a stream shard is cut into windows of exactly T tokens at stride T (window w starts at
 * token w*T; the tail that is not a whole window is not used), a shard of examples needs L = T (each example is one
 * window), and inputs = the T tokens, targets = the same T tokens, -1 where the loss mask is 0 (padding). The
 * caller chooses which targets to predict (core/model/mlm.c masks the inputs). Order, mixtures and checks are the
 * causal mode's.
 *
 * Order. Global sample s is drawn from source src(s): the source i with the largest q_i (s+1) - c_i(s) 2^32
 * in exact integers (q_i = floor(w_i 2^32 + 1/2), w_i normalised; c_i(s): samples of source i before s;
 * ties to the lower i), so after any n samples every source has within about one sample of w_i n. It is
 * that source's sample k = c_i(s), which is window perm(k mod W_i) of its epoch e = k / W_i. perm is a
 * keyed permutation of [0, W_i) (zt_data_perm): a balanced Feistel network on the smallest even number of
 * bits 2h >= 2 with 2^(2h) >= W_i, 6 rounds (L, R) -> (R, L ^ F_r(R)) with F_r(R) = mix(key ^ mix(r 2^32 + R))
 * mod 2^h, where mix is splitmix64 (z += 0x9E3779B97F4A7C15, then its finaliser), applied again to its
 * own output until that is below W_i (cycle walking); key = mix(seed ^ (e + 1) 0xD1B54A32D192ED03 ^
 * (i + 1) 0x9E3779B97F4A7C15) (products mod 2^64). data.shuffle = false: perm is the identity.
 * Nothing depends on the rank count: any rank can fetch any sample, N ranks see the samples 1 rank sees,
 * and resuming at step k fetches what an uninterrupted run would have. The permutation needs no memory.
 *
 * Targets. With a loss mask, a target whose token has mask 0 is -1 (the loss ignores it). Causal: targets[t] is
 * token t + 1 of the window; masked LM: token t.
 *
 * Checks. Headers at open (data_shard.h). Tokens: a shard of up to 256 MiB of tokens is checked whole at open
 * (a damaged one is refused before anything starts); a larger one window by window as it is read: a token >= the
 * vocab size is replaced by 0, the first one recorded in bad/err for the caller to end the run with. */
#ifndef ZT_DATA_H
#define ZT_DATA_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "io/data_shard.h"
#include "io/data_stream.h"

#define ZT_DATA_MAX_SOURCES 64

typedef struct zt_data_source {
    char pattern[1024];
    double weight;         /* normalised */
    int f0, nf;            /* its files: files[f0 .. f0 + nf) */
    uint64_t n_windows;
    uint64_t n_tokens;
} zt_data_source;

typedef struct zt_dataset {
    int n_files;
    zt_shard_map *files;
    char **paths;
    uint64_t *first_win;      /* per file: index of its first window within its source */
    uint64_t n_windows;       /* all sources' */
    int n_sources;
    zt_data_source src[ZT_DATA_MAX_SOURCES];
    uint64_t q[ZT_DATA_MAX_SOURCES]; /* weights as integers: round(w_i 2^32), w_i normalised */
    int T;
    uint32_t example_len;     /* 0 (streams) or T + 1 (examples; T in MLM mode) */
    uint32_t vocab_size;      /* the model's: every token must be below it */
    uint64_t seed;
    int shuffle;
    int mlm;                  /* masked-LM mode: windows of T tokens, targets = inputs (zt_dataset_open_mlm) */
    int has_mask;             /* some file has a loss mask */
    uint64_t mix_next;        /* the mixture's cursor: counts[] hold c_i(mix_next) */
    uint64_t mix_count[ZT_DATA_MAX_SOURCES];
    zt_stream *stream;        /* data.stream: text / JSONL tokenized as read (one source, in order) */
    int bad;                  /* a token >= vocab_size was read (a stream: a document failed); err says where */
    char err[1024];
} zt_dataset;

/* spec: a path, a glob, or "W1 PATH1 W2 PATH2 ..." (mixtures: only when allow_mix). Checks every header
   and that every shard's vocab fits model_vocab. Returns 0, or 1 with one line in err. */
int zt_dataset_open(zt_dataset *d, const char *spec, int T, uint32_t model_vocab, uint64_t seed, int shuffle,
                    int allow_mix, char *err, size_t errlen);
/* the same in masked-LM mode (the top: windows of T tokens, targets = inputs, examples of exactly T tokens) */
int zt_dataset_open_mlm(zt_dataset *d, const char *spec, int T, uint32_t model_vocab, uint64_t seed, int shuffle,
                        int allow_mix, char *err, size_t errlen);
/* data.stream: the files of pattern tokenized as they are read (data_stream.h; mlm: framed as prepare --mlm frames
   them); sample s must not come before the samples already fetched */
int zt_dataset_open_stream(zt_dataset *d, const char *pattern, const char *field, const char *tokenizer, int T,
                           int mlm, uint32_t model_vocab, char *err, size_t errlen);
void zt_dataset_close(zt_dataset *d);
/* inputs/targets (T each) of training sample s */
void zt_dataset_train_sample(zt_dataset *d, uint64_t s, int32_t *inputs, int32_t *targets);
/* where training sample s comes from: its source and window (within the source) */
void zt_dataset_locate(zt_dataset *d, uint64_t s, int *source, uint64_t *window);
/* ZTRAIN_TRACE_DATA (train.c): one line for training sample s as global micro-batch j's row i of step `step`:
   "step j i s source window sum", sum = sum over t of (t + 1) x inputs[t], mod 2^32 (a check of the tokens) */
void zt_dataset_trace(zt_dataset *d, FILE *f, long step, int j, int i, uint64_t s, const int32_t *inputs);
/* counted targets (not -1) of training samples [s0, s0 + n) */
uint64_t zt_dataset_count_targets(zt_dataset *d, uint64_t s0, uint64_t n);
/* samples of each source among training samples [0, n) (counts: n_sources entries) */
void zt_dataset_source_counts(zt_dataset *d, uint64_t n, uint64_t *counts);
/* inputs/targets of window w (w < zt_dataset_windows) in file order (validation; sources in order) */
void zt_dataset_window(zt_dataset *d, uint64_t w, int32_t *inputs, int32_t *targets);
/* the index's bytes for a data spec (what zt_dataset_open allocates; the corpus is mapped, not counted),
   and the bytes the windows in use map: for the memory plan. The spec's globs are expanded, nothing opened. The
   window counted is T + 1 tokens: it bounds the masked-LM mode's T as well. */
size_t zt_dataset_plan_bytes(const char *spec, int T);
/* the permutation (data.h "Order") of [0, n) keyed by key: element k */
uint64_t zt_data_perm(uint64_t k, uint64_t n, uint64_t key);

#endif
