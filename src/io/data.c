/* data.c — the global-sample-index loader over memory-mapped token shards and weighted mixtures (data.h). */
#include "io/data.h"

#include <ctype.h>
#include <errno.h>
#include <glob.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/util.h"

static uint64_t mix(uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint64_t zt_data_perm(uint64_t k, uint64_t n, uint64_t key) {
    if (n <= 1) return 0;
    int bits = 2;
    while (bits < 64 && (1ull << bits) < n) bits += 2;
    const int h = bits / 2;
    const uint64_t mask = (1ull << h) - 1;
    uint64_t x = k;
    do {
        uint64_t L = x >> h, R = x & mask;
        for (uint64_t r = 0; r < 6; r++) {
            const uint64_t t = L ^ (mix(key ^ mix((r << 32) + R)) & mask);
            L = R;
            R = t;
        }
        x = L << h | R;
    } while (x >= n);
    return x;
}

static uint64_t epoch_key(uint64_t seed, uint64_t epoch, int source) {
    return mix(seed ^ (epoch + 1) * 0xD1B54A32D192ED03ull ^ (uint64_t)(source + 1) * 0x9E3779B97F4A7C15ull);
}

/* "W1 P1 W2 P2 ...": 1 with the pairs, 0 when spec is one pattern */
static int is_mixture(const char *spec) {
    const char *p = spec;
    while (isspace((unsigned char)*p)) p++;
    char *end;
    errno = 0;
    (void)strtod(p, &end);
    return end != p && isspace((unsigned char)*end) && !errno;
}

/* splits a mixture into sources (weights not yet normalised); 0 or 1 with err */
static int parse_sources(zt_dataset *d, const char *spec, int allow_mix, char *err, size_t errlen) {
    if (!is_mixture(spec)) {
        if (strlen(spec) >= sizeof d->src[0].pattern) {
            zt_errf(err, errlen, "%.64s...: data path too long (at most %zu characters)", spec,
                    sizeof d->src[0].pattern - 1);
            return 1;
        }
        snprintf(d->src[0].pattern, sizeof d->src[0].pattern, "%s", spec);
        d->src[0].weight = 1;
        d->n_sources = 1;
        return 0;
    }
    if (!allow_mix) {
        zt_errf(err, errlen, "\"%s\": a weighted mixture is only for data.train (expected one shard or glob)", spec);
        return 1;
    }
    const char *p = spec;
    for (;;) {
        while (isspace((unsigned char)*p)) p++;
        if (!*p) break;
        if (d->n_sources == ZT_DATA_MAX_SOURCES) {
            zt_errf(err, errlen, "\"%s\": more than %d sources in the mixture", spec, ZT_DATA_MAX_SOURCES);
            return 1;
        }
        char *end;
        errno = 0;
        const double w = strtod(p, &end);
        if (end == p || (*end && !isspace((unsigned char)*end)) || errno || !isfinite(w) || w <= 0) {
            int n = 0;
            while (p[n] && !isspace((unsigned char)p[n])) n++;
            zt_errf(err, errlen, "data.train \"%s\": weight \"%.*s\" of source %d (expected \"W1 PATH1 W2 PATH2 ...\" "
                    "with every weight a number > 0)", spec, n, p, d->n_sources + 1);
            return 1;
        }
        p = end;
        while (isspace((unsigned char)*p)) p++;
        int n = 0;
        while (p[n] && !isspace((unsigned char)p[n])) n++;
        if (n == 0) {
            zt_errf(err, errlen, "data.train \"%s\": weight %g has no path after it (expected \"W1 PATH1 W2 PATH2 ...\")",
                    spec, w);
            return 1;
        }
        zt_data_source *s = &d->src[d->n_sources++];
        if ((size_t)n >= sizeof s->pattern) {
            zt_errf(err, errlen, "data.train: path of source %d too long (at most %zu characters)", d->n_sources,
                    sizeof s->pattern - 1);
            return 1;
        }
        snprintf(s->pattern, sizeof s->pattern, "%.*s", n, p);
        s->weight = w;
        p += n;
    }
    return 0;
}

/* shards up to this many token bytes are checked whole at open (a damaged one is refused before the run starts);
   larger ones window by window as they are read */
#define CHECK_AT_OPEN_BYTES (256ull << 20)

/* every token of a mapped shard below its vocab size; the pages are let go as the scan passes */
static int check_tokens(const zt_shard_map *m, const char *path, char *err, size_t errlen) {
    const uint64_t block = (1u << 20) / m->h.width;
    for (uint64_t a = 0; a < m->h.count; a += block) {
        const uint64_t b = a + block < m->h.count ? a + block : m->h.count;
        for (uint64_t i = a; i < b; i++) {
            const uint32_t v = zt_shard_map_token(m, i);
            if (v >= m->h.vocab_size) {
                zt_errf(err, errlen, "%s: token %u at index %llu >= the shard's vocab size %u (a damaged shard: prepare "
                        "it again)", path, v, (unsigned long long)i, m->h.vocab_size);
                return 1;
            }
        }
        zt_shard_map_release(m, ZT_SHARD_HEADER + a * m->h.width, (b - a) * m->h.width);
    }
    return 0;
}

/* tokens a window reads: T + 1 (inputs and the next tokens as targets), or T in MLM mode (no shift) */
static uint64_t window_len(const zt_dataset *d) { return (uint64_t)d->T + (d->mlm ? 0 : 1); }

static uint64_t file_windows(const zt_dataset *d, const zt_shard_header *h) {
    if (h->example_len) return h->count / h->example_len;
    const uint64_t T = (uint64_t)d->T, W = window_len(d);
    return h->count >= W ? (h->count - W) / T + 1 : 0;
}

/* maps the files of source i (appended to d->files) */
static int open_source(zt_dataset *d, int i, int T, uint32_t model_vocab, char *err, size_t errlen) {
    zt_data_source *s = &d->src[i];
    glob_t g;
    int rc = glob(s->pattern, 0, NULL, &g);
    if (rc == GLOB_NOMATCH || (rc == 0 && g.gl_pathc == 0)) {
        zt_errf(err, errlen, "%s: no such data file (make token shards first: `ztrain prepare --input TEXT --vocab-size N "
                "--out-dir DIR`, then point data.train/data.val at them)", s->pattern);
        return 1;
    }
    if (rc != 0) {
        zt_errf(err, errlen, "%s: cannot expand the data file pattern", s->pattern);
        return 1;
    }
    const int nf = (int)g.gl_pathc;
    d->files = zt_realloc(d->files, (size_t)(d->n_files + nf) * sizeof *d->files);
    d->paths = zt_realloc(d->paths, (size_t)(d->n_files + nf) * sizeof *d->paths);
    d->first_win = zt_realloc(d->first_win, (size_t)(d->n_files + nf + 1) * sizeof *d->first_win);
    s->f0 = d->n_files;
    int bad = 0;
    for (int k = 0; k < nf && !bad; k++) {
        const char *path = g.gl_pathv[k];
        zt_shard_map *m = &d->files[d->n_files];
        /* the type before any open: a named pipe would block the open, a device never ends */
        if (zt_check_input_file(path, "a ztrain token shard (see `ztrain prepare`)", err, errlen) ||
            zt_shard_map_open(m, path, err, errlen)) {
            bad = 1;
            break;
        }
        d->paths[d->n_files] = zt_malloc(strlen(path) + 1);
        memcpy(d->paths[d->n_files], path, strlen(path) + 1);
        d->first_win[d->n_files] = s->n_windows;
        d->n_files++;
        const zt_shard_header *h = &m->h;
        if (h->vocab_size > model_vocab) {
            zt_errf(err, errlen, "%s: shard vocab size %u is larger than model.vocab_size %u (the tokenizer does not "
                    "match the model)", path, h->vocab_size, model_vocab);
            bad = 1;
        } else if (h->example_len && h->example_len != (uint32_t)window_len(d)) {
            if (d->mlm)
                zt_errf(err, errlen, "%s: the shard holds examples of %u tokens; train.seq_len must equal it (a masked "
                        "LM reads whole examples), not %d", path, h->example_len, T);
            else
                zt_errf(err, errlen, "%s: the shard holds examples of %u tokens; train.seq_len must be %u (one less), "
                        "not %d", path, h->example_len, h->example_len - 1, T);
            bad = 1;
        } else if (h->count * h->width <= CHECK_AT_OPEN_BYTES && check_tokens(m, path, err, errlen)) {
            bad = 1;
        } else if (d->n_files > 1 && h->example_len != d->example_len) {
            zt_errf(err, errlen, "%s: %s, but %s %s (shards of one run are all token streams or all examples)", path,
                    h->example_len ? "a shard of examples" : "a token stream", d->paths[0],
                    d->example_len ? "holds examples" : "is a token stream");
            bad = 1;
        }
        d->example_len = h->example_len;
        if (h->flags & ZT_SHARD_FLAG_MASK) d->has_mask = 1;
        s->n_windows += file_windows(d, h);
        s->n_tokens += h->count;
    }
    s->nf = d->n_files - s->f0;
    d->first_win[d->n_files] = s->n_windows;
    globfree(&g);
    if (!bad && s->n_windows == 0) {
        zt_errf(err, errlen, "%s: too few tokens for one sequence of %d%s tokens", s->pattern, T, d->mlm ? "" : " (+1)");
        bad = 1;
    }
    return bad;
}

static int dataset_open(zt_dataset *d, const char *spec, int T, int mlm, uint32_t model_vocab, uint64_t seed,
                        int shuffle, int allow_mix, char *err, size_t errlen) {
    memset(d, 0, sizeof *d);
    d->T = T;
    d->mlm = mlm;
    d->seed = seed;
    d->shuffle = shuffle;
    d->vocab_size = model_vocab;
    if (parse_sources(d, spec, allow_mix, err, errlen)) return 1;
    double sum = 0;
    for (int i = 0; i < d->n_sources; i++) sum += d->src[i].weight;
    for (int i = 0; i < d->n_sources; i++) {
        d->src[i].weight /= sum;
        d->q[i] = (uint64_t)floor(d->src[i].weight * 4294967296.0 + 0.5);
    }
    for (int i = 0; i < d->n_sources; i++)
        if (open_source(d, i, T, model_vocab, err, errlen)) {
            zt_dataset_close(d);
            return 1;
        }
    for (int i = 0; i < d->n_sources; i++) d->n_windows += d->src[i].n_windows;
    return 0;
}

int zt_dataset_open(zt_dataset *d, const char *spec, int T, uint32_t model_vocab, uint64_t seed, int shuffle,
                    int allow_mix, char *err, size_t errlen) {
    return dataset_open(d, spec, T, 0, model_vocab, seed, shuffle, allow_mix, err, errlen);
}

int zt_dataset_open_mlm(zt_dataset *d, const char *spec, int T, uint32_t model_vocab, uint64_t seed, int shuffle,
                        int allow_mix, char *err, size_t errlen) {
    return dataset_open(d, spec, T, 1, model_vocab, seed, shuffle, allow_mix, err, errlen);
}

int zt_dataset_open_stream(zt_dataset *d, const char *pattern, const char *field, const char *tokenizer, int T,
                           int mlm, uint32_t model_vocab, char *err, size_t errlen) {
    memset(d, 0, sizeof *d);
    d->T = T;
    d->vocab_size = model_vocab;
    d->n_sources = 1;
    d->src[0].weight = 1;
    snprintf(d->src[0].pattern, sizeof d->src[0].pattern, "%s", pattern);
    d->q[0] = 1ull << 32;
    d->mlm = mlm;
    return zt_stream_open(&d->stream, pattern, field, tokenizer, T, mlm, model_vocab, err, errlen);
}

void zt_dataset_close(zt_dataset *d) {
    if (!d) return;
    zt_stream_close(d->stream);
    for (int i = 0; i < d->n_files; i++) {
        zt_shard_map_close(&d->files[i]);
        free(d->paths[i]);
    }
    free(d->files);
    free(d->paths);
    free(d->first_win);
    memset(d, 0, sizeof *d);
}

/* window w of source i: its T+1 tokens as inputs and (shifted by one) targets, or in MLM mode its T tokens as both;
   checked, then the pages let go */
static void read_window(zt_dataset *d, int i, uint64_t w, int32_t *inputs, int32_t *targets) {
    const zt_data_source *s = &d->src[i];
    int lo = s->f0, hi = s->f0 + s->nf - 1; /* the last file whose first window is <= w */
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (d->first_win[mid] <= w) lo = mid;
        else hi = mid - 1;
    }
    const zt_shard_map *m = &d->files[lo];
    const int T = d->T, shift = !d->mlm;
    const uint64_t W = window_len(d);
    const uint64_t off = (w - d->first_win[lo]) * (uint64_t)(d->example_len ? d->example_len : (uint32_t)T);
    for (int t = 0; t < (int)W; t++) {
        uint32_t v = zt_shard_map_token(m, off + (uint64_t)t);
        if (v >= m->h.vocab_size) {
            if (!d->bad)
                zt_errf(d->err, sizeof d->err, "%s: token %u at index %llu >= the shard's vocab size %u (a damaged "
                        "shard: prepare it again)", d->paths[lo], v, (unsigned long long)(off + (uint64_t)t),
                        m->h.vocab_size);
            d->bad = 1;
            v = 0;
        }
        if (t < T) inputs[t] = (int32_t)v;
        if (t >= shift) targets[t - shift] = m->mask && !m->mask[off + (uint64_t)t] ? -1 : (int32_t)v;
    }
    zt_shard_map_release(m, ZT_SHARD_HEADER + off * m->h.width, W * m->h.width);
    if (m->mask) zt_shard_map_release(m, (uint64_t)(m->mask - m->base) + off, W);
}

/* the mixture's choice for sample s; *k: its index within the source */
static int pick(zt_dataset *d, uint64_t s, uint64_t *k) {
    if (d->n_sources == 1) {
        *k = s;
        return 0;
    }
    if (s < d->mix_next) {
        d->mix_next = 0;
        memset(d->mix_count, 0, sizeof d->mix_count);
    }
    for (;;) {
        int best = 0;
        __int128 best_def = 0;
        for (int i = 0; i < d->n_sources; i++) {
            const __int128 def = (__int128)d->q[i] * (d->mix_next + 1) - ((__int128)d->mix_count[i] << 32);
            if (i == 0 || def > best_def) {
                best = i;
                best_def = def;
            }
        }
        if (d->mix_next == s) {
            *k = d->mix_count[best];
            return best;
        }
        d->mix_count[best]++;
        d->mix_next++;
    }
}

void zt_dataset_locate(zt_dataset *d, uint64_t s, int *source, uint64_t *window) {
    if (d->stream) { /* the window of the stream's epoch (the stream is at s or past it) */
        *source = 0;
        *window = s - zt_stream_epoch_first(d->stream);
        return;
    }
    uint64_t k;
    const int i = pick(d, s, &k);
    const uint64_t W = d->src[i].n_windows;
    *source = i;
    *window = d->shuffle ? zt_data_perm(k % W, W, epoch_key(d->seed, k / W, i)) : k % W;
}

void zt_dataset_train_sample(zt_dataset *d, uint64_t s, int32_t *inputs, int32_t *targets) {
    if (d->stream) {
        char err[sizeof d->err];
        if (!d->bad && zt_stream_sample(d->stream, s, inputs, targets, err, sizeof err)) {
            d->bad = 1;
            memcpy(d->err, err, sizeof err);
        }
        if (d->bad)
            for (int t = 0; t < d->T; t++) inputs[t] = targets[t] = 0;
        return;
    }
    int i;
    uint64_t w;
    zt_dataset_locate(d, s, &i, &w);
    read_window(d, i, w, inputs, targets);
}

void zt_dataset_trace(zt_dataset *d, FILE *f, long step, int j, int i, uint64_t s, const int32_t *inputs) {
    int src;
    uint64_t w;
    zt_dataset_locate(d, s, &src, &w);
    uint32_t sum = 0;
    for (int t = 0; t < d->T; t++) sum += (uint32_t)(t + 1) * (uint32_t)inputs[t];
    fprintf(f, "%ld %d %d %llu %d %llu %u\n", step, j, i, (unsigned long long)s, src, (unsigned long long)w, sum);
}

uint64_t zt_dataset_count_targets(zt_dataset *d, uint64_t s0, uint64_t n) {
    const int T = d->T;
    if (!d->has_mask) return n * (uint64_t)T;
    int32_t *in = zt_malloc((size_t)T * sizeof *in), *tg = zt_malloc((size_t)T * sizeof *tg);
    uint64_t count = 0;
    for (uint64_t s = s0; s < s0 + n; s++) {
        zt_dataset_train_sample(d, s, in, tg);
        for (int t = 0; t < T; t++) count += tg[t] >= 0;
    }
    free(in);
    free(tg);
    return count;
}

void zt_dataset_source_counts(zt_dataset *d, uint64_t n, uint64_t *counts) {
    if (d->n_sources == 1) {
        counts[0] = n;
        return;
    }
    uint64_t k;
    pick(d, n, &k); /* advances the cursor to n: counts of [0, n) */
    memcpy(counts, d->mix_count, (size_t)d->n_sources * sizeof *counts);
}

void zt_dataset_window(zt_dataset *d, uint64_t w, int32_t *inputs, int32_t *targets) {
    ZT_ASSERT(w < d->n_windows);
    int i = 0;
    while (w >= d->src[i].n_windows) w -= d->src[i++].n_windows;
    read_window(d, i, w, inputs, targets);
}

size_t zt_dataset_plan_bytes(const char *spec, int T) {
    zt_dataset d;
    char err[256];
    memset(&d, 0, sizeof d);
    size_t files = 0, names = 0;
    if (spec && spec[0] && !parse_sources(&d, spec, 1, err, sizeof err))
        for (int i = 0; i < d.n_sources; i++) {
            glob_t g;
            if (glob(d.src[i].pattern, 0, NULL, &g) == 0)
                for (size_t k = 0; k < g.gl_pathc; k++) {
                    files++;
                    names += strlen(g.gl_pathv[k]) + 1;
                }
            globfree(&g);
        }
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    const size_t index = sizeof(zt_dataset) + files * (sizeof(zt_shard_map) + sizeof(char *) + sizeof(uint64_t)) +
                         names + sizeof(uint64_t);
    /* one window (tokens and mask) mapped at a time, plus the page each end may straddle */
    const size_t window = ((size_t)(T + 1) * 5 + 4 * page);
    return index + window;
}
