/* test_data_mlm.c — unit tests of src/io/data.c's masked-LM mode (zt_dataset_open_mlm, data.h "Masked-LM mode")
 * beside the causal mode on the same shards: a token stream cut into windows of T tokens at stride T (the causal
 * mode: T + 1 tokens at stride T), targets equal to the inputs (the causal mode: shifted by one), a shard of
 * examples of exactly T tokens with a loss mask (targets -1 on padding), count_targets, a shuffled order that is
 * a permutation of the windows, and the refusals: examples of T + 1 tokens (the causal layout) or T - 1, naming
 * the file, its example length and train.seq_len; a stream shorter than one window. The expected windows are
 * written out from the token values the test put in the shards (token i of the stream is 7 + 3 i mod 97). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "check.h"
#include "io/data.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define V 100
static char g_dir[256];

static const char *path_of(const char *name) {
    static char p[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", g_dir, name);
    return p[k];
}

static uint32_t tok(uint64_t i) { return (uint32_t)((7 + 3 * i) % 97); }

/* a stream shard of n tokens tok(0..n) */
static void write_stream(const char *path, uint64_t n) {
    char err[256];
    zt_shard_writer w;
    if (zt_shard_writer_open(&w, path, V, ZT_SHARD_NO_EOT, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        exit(1);
    }
    for (uint64_t i = 0; i < n; i++) {
        const uint32_t t = tok(i);
        zt_shard_writer_append(&w, &t, 1, err, sizeof err);
    }
    if (zt_shard_writer_close(&w, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        exit(1);
    }
}

/* n_ex examples of L tokens: example e is tok(e L + t) for t < L - pad(e), then pad_id with mask 0; pad(e) = e % 3 */
static void write_examples(const char *path, uint32_t L, int n_ex, uint32_t pad_id) {
    char err[256];
    zt_shard_writer w;
    if (zt_shard_writer_open2(&w, path, V, ZT_SHARD_NO_EOT, 1, L, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        exit(1);
    }
    for (int e = 0; e < n_ex; e++)
        for (uint32_t t = 0; t < L; t++) {
            const int is_pad = t >= L - (uint32_t)(e % 3);
            const uint32_t v = is_pad ? pad_id : tok((uint64_t)e * L + t);
            const uint8_t m = (uint8_t)!is_pad;
            zt_shard_writer_append_masked(&w, &v, &m, 1, err, sizeof err);
        }
    if (zt_shard_writer_close(&w, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        exit(1);
    }
}

static void test_stream(void) {
    const int T = 8;
    const uint64_t n = 8 * 5 + 3; /* 5 whole windows of 8 and a tail of 3 */
    write_stream(path_of("s.bin"), n);
    zt_dataset d, c;
    char err[512];
    int32_t in[8], tg[8];
    if (zt_dataset_open_mlm(&d, path_of("s.bin"), T, V, 1, 0, 1, err, sizeof err)) {
        check(0, "mlm_stream_open", "%s", err);
        return;
    }
    check(d.n_windows == 5 && d.mlm == 1, "mlm_stream_windows", "%llu windows (expected floor(43 / 8) = 5)",
          (unsigned long long)d.n_windows);
    int bad = -1;
    for (uint64_t w = 0; w < d.n_windows && bad < 0; w++) {
        zt_dataset_window(&d, w, in, tg);
        for (int t = 0; t < T; t++)
            if (in[t] != (int32_t)tok(w * T + (uint64_t)t) || tg[t] != in[t]) bad = (int)w;
    }
    check(bad < 0, "mlm_stream_window_tokens", "window %d: inputs are not tokens [wT, wT + T) or targets != inputs", bad);
    /* training samples in order (no shuffle) are the windows; count_targets without a mask: n T */
    zt_dataset_train_sample(&d, 6, in, tg); /* epoch 2, window 1 */
    check(in[0] == (int32_t)tok(8) && tg[7] == (int32_t)tok(15), "mlm_stream_sample_wraps", "sample 6: %d..%d", in[0],
          tg[7]);
    check(zt_dataset_count_targets(&d, 0, 3) == 24, "mlm_stream_count_targets", "%llu",
          (unsigned long long)zt_dataset_count_targets(&d, 0, 3));
    /* shuffled: the first epoch is a permutation of the 5 windows */
    zt_dataset sh;
    if (!zt_dataset_open_mlm(&sh, path_of("s.bin"), T, V, 42, 1, 1, err, sizeof err)) {
        int seen[5] = {0}, ok = 1;
        for (uint64_t s = 0; s < 5; s++) {
            zt_dataset_train_sample(&sh, s, in, tg);
            int w = 0;
            while (w < 5 && in[0] != (int32_t)tok((uint64_t)w * T)) w++; /* the window that starts with in[0] */
            ok &= w < 5 && !seen[w] && tg[T - 1] == (int32_t)tok((uint64_t)w * T + (uint64_t)T - 1);
            if (w < 5) seen[w] = 1;
        }
        check(ok, "mlm_stream_shuffled_epoch", "the first 5 samples are not the 5 windows once each");
        zt_dataset_close(&sh);
    }
    /* the causal mode on the same shard: T + 1 tokens at stride T, targets shifted by one */
    if (zt_dataset_open(&c, path_of("s.bin"), T, V, 1, 0, 1, err, sizeof err)) {
        check(0, "causal_stream_open", "%s", err);
    } else {
        bad = c.n_windows == 5 ? -1 : 99;
        for (uint64_t w = 0; w < c.n_windows && bad < 0; w++) {
            zt_dataset_window(&c, w, in, tg);
            for (int t = 0; t < T; t++)
                if (in[t] != (int32_t)tok(w * T + (uint64_t)t) || tg[t] != (int32_t)tok(w * T + (uint64_t)t + 1))
                    bad = (int)w;
        }
        check(bad < 0, "causal_stream_unchanged", "window %d (of %llu, expected 5 = floor(42 / 8))", bad,
              (unsigned long long)c.n_windows);
        zt_dataset_close(&c);
    }
    zt_dataset_close(&d);
    /* exactly T tokens: one MLM window, no causal one */
    write_stream(path_of("t.bin"), 8);
    int r1 = zt_dataset_open_mlm(&d, path_of("t.bin"), T, V, 1, 0, 1, err, sizeof err);
    check(!r1 && d.n_windows == 1, "mlm_stream_exactly_T", "%s", r1 ? err : "not one window");
    if (!r1) zt_dataset_close(&d);
    int r2 = zt_dataset_open(&c, path_of("t.bin"), T, V, 1, 0, 1, err, sizeof err);
    check(r2 && strstr(err, "too few tokens") && strstr(err, "(+1)"), "causal_stream_T_too_short", "%s",
          r2 ? err : "opened");
    if (!r2) zt_dataset_close(&c);
    write_stream(path_of("u.bin"), 7);
    r1 = zt_dataset_open_mlm(&d, path_of("u.bin"), T, V, 1, 0, 1, err, sizeof err);
    check(r1 && strstr(err, "too few tokens for one sequence of 8 tokens"), "mlm_stream_too_short", "%s",
          r1 ? err : "opened");
    if (!r1) zt_dataset_close(&d);
}

static void test_examples(void) {
    const int T = 6, n_ex = 7;
    const uint32_t pad = 99;
    write_examples(path_of("e.bin"), (uint32_t)T, n_ex, pad);
    zt_dataset d;
    char err[512];
    int32_t in[6], tg[6];
    if (zt_dataset_open_mlm(&d, path_of("e.bin"), T, V, 1, 0, 0, err, sizeof err)) {
        check(0, "mlm_examples_open", "%s", err);
        return;
    }
    check(d.n_windows == (uint64_t)n_ex && d.has_mask && d.example_len == (uint32_t)T, "mlm_examples_windows",
          "%llu windows, has_mask %d, example_len %u", (unsigned long long)d.n_windows, d.has_mask, d.example_len);
    int bad = -1;
    uint64_t want_count = 0;
    for (int e = 0; e < n_ex && bad < 0; e++) {
        zt_dataset_window(&d, (uint64_t)e, in, tg);
        for (int t = 0; t < T; t++) {
            const int is_pad = t >= T - e % 3;
            const int32_t v = is_pad ? (int32_t)pad : (int32_t)tok((uint64_t)e * T + (uint64_t)t);
            if (in[t] != v || tg[t] != (is_pad ? -1 : v)) bad = e;
            want_count += !is_pad;
        }
    }
    check(bad < 0, "mlm_examples_targets", "example %d: inputs are not its T tokens, or targets not the tokens with -1 "
          "on the padding", bad);
    const uint64_t got = zt_dataset_count_targets(&d, 0, (uint64_t)n_ex);
    check(got == want_count, "mlm_examples_count_targets", "%llu counted targets (expected %llu: the tokens that are "
          "not padding)", (unsigned long long)got, (unsigned long long)want_count);
    zt_dataset_close(&d);

    /* the causal layout (T + 1) and a shorter one are refused with the file, its length and train.seq_len */
    write_examples(path_of("e7.bin"), (uint32_t)T + 1, 3, pad);
    int r = zt_dataset_open_mlm(&d, path_of("e7.bin"), T, V, 1, 0, 0, err, sizeof err);
    check(r && strstr(err, "e7.bin") && strstr(err, "examples of 7 tokens") && strstr(err, "train.seq_len must equal it") &&
          strstr(err, "not 6"), "mlm_examples_len_T_plus_1_refused", "%s", r ? err : "opened");
    if (!r) zt_dataset_close(&d);
    r = zt_dataset_open_mlm(&d, path_of("e.bin"), T + 1, V, 1, 0, 0, err, sizeof err);
    check(r && strstr(err, "e.bin") && strstr(err, "examples of 6 tokens") && strstr(err, "not 7"),
          "mlm_examples_len_T_minus_1_refused", "%s", r ? err : "opened");
    if (!r) zt_dataset_close(&d);
    /* the causal mode still reads T + 1 examples as before (targets shifted, -1 on padding) */
    r = zt_dataset_open(&d, path_of("e7.bin"), T, V, 1, 0, 0, err, sizeof err);
    if (r) {
        check(0, "causal_examples_unchanged", "%s", err);
        return;
    }
    zt_dataset_window(&d, 2, in, tg); /* example 2: 5 tokens, 2 padding */
    int ok = 1;
    for (int t = 0; t < T; t++) {
        ok &= in[t] == (t < 5 ? (int32_t)tok(14 + (uint64_t)t) : (int32_t)pad);
        ok &= tg[t] == (t + 1 < 5 ? (int32_t)tok(14 + (uint64_t)t + 1) : -1);
    }
    check(ok, "causal_examples_unchanged", "example 2 of the L = 7 shard read causally");
    zt_dataset_close(&d);
}

int main(void) {
    if (!mkdtemp(strcpy(g_dir, "/tmp/zt-data-mlm.XXXXXX"))) return perror("mkdtemp"), 1;
    test_stream();
    test_examples();
    const char *names[] = {"s.bin", "t.bin", "u.bin", "e.bin", "e7.bin"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) unlink(path_of(names[i]));
    rmdir(g_dir);
    return check_exit_status();
}
