/* tokenizer_train.c — byte-level BPE training with bounded memory (the rule is in tokenizer.h).
 *
 * Phase 1 (streaming): pre-tokens of the text are counted in a hash table whose memory is capped;
 * when the cap is reached, the rarest pre-tokens are dropped (lossy counting), so the corpus can
 * be any size. Phase 2: merges over the table of distinct pre-tokens: pair counts live in a hash
 * map, each pair keeps the list of words it occurs in, and a max-heap with lazy deletion picks the
 * most frequent pair (ties: smallest (left id, right id)). Both tables are util/hashmap maps; the
 * order in which words or pairs sit in them never changes the result.
 */
#include "io/tokenizer.h"
#include "util/hashmap.h"
#include "util/util.h"

#include <stdlib.h>
#include <string.h>

#define WORDS_MIN_SLOTS 4096

struct zt_bpe_trainer {
    zt_pretok *pre;
    zt_hashmap *words;          /* pre-token -> count */
    /* The budget counts the words' bytes as a key arena that grows by half when full would hold
       them (keys_cap: that arena's size), although the map keeps keys of up to 12 bytes in its
       slots: an overestimate, kept so that pruning starts where it always did and a given
       --train-mem-mb gives the same tokenizer. */
    size_t keys_cap;
    size_t budget;
    int pruned;
};

/* ---------------------------------------------------------------- phase 1: counting */

zt_bpe_trainer *zt_tokenizer_trainer_create(size_t mem_bytes, char *err, size_t errlen) {
    if (mem_bytes < (1u << 20)) {
        zt_errf(err, errlen, "tokenizer training memory %zu bytes is too small (expected at least 1 MB)", mem_bytes);
        return NULL;
    }
    zt_bpe_trainer *tr = zt_calloc(1, sizeof *tr);
    tr->pre = zt_pretok_create(err, errlen);
    if (!tr->pre) {
        free(tr);
        return NULL;
    }
    tr->budget = mem_bytes;
    tr->words = zt_hashmap_create(WORDS_MIN_SLOTS);
    return tr;
}

void zt_tokenizer_trainer_free(zt_bpe_trainer *tr) {
    if (!tr) return;
    zt_pretok_free(tr->pre);
    zt_hashmap_free(tr->words);
    free(tr);
}

size_t zt_tokenizer_trainer_words(const zt_bpe_trainer *tr) { return zt_hashmap_count(tr->words); }
int zt_tokenizer_trainer_pruned(const zt_bpe_trainer *tr) { return tr->pruned; }

static int count_above(uint64_t count, void *ctx) { return count > *(const uint64_t *)ctx; }

/* drop the rarest words until the table uses at most half the budget: all words with count <= t
 * for the smallest t that suffices. Deterministic for a given input. */
static void prune(zt_bpe_trainer *tr) {
    enum { H = 256 };
    size_t bytes_le[H + 1] = {0}, n_le[H + 1] = {0};
    const uint8_t *key;
    size_t len;
    uint64_t count;
    for (size_t i = 0; i < zt_hashmap_slots(tr->words); i++) {
        if (!zt_hashmap_at(tr->words, i, &key, &len, &count)) continue;
        uint64_t c = count < H ? count : H;
        bytes_le[c] += len;
        n_le[c]++;
    }
    uint64_t t = 0;
    size_t keep_bytes = zt_hashmap_key_bytes(tr->words), keep_n = zt_hashmap_count(tr->words);
    while (t < H - 1) { /* raise t until the survivors fit in half the budget */
        size_t slots = 16;
        while (slots < 2 * keep_n + 2) slots *= 2;
        if (slots * ZT_HASHMAP_SLOT_BYTES + keep_bytes <= tr->budget / 2 && t > 0) break;
        t++;
        keep_bytes -= bytes_le[t];
        keep_n -= n_le[t];
    }
    zt_hashmap_filter(tr->words, count_above, &t);
    tr->keys_cap = zt_hashmap_key_bytes(tr->words);
    tr->pruned = 1;
}

/* the memory the count table is charged with after adding a word of n bytes */
static size_t cost_after_add(const zt_bpe_trainer *tr, size_t n) {
    const size_t need_keys = zt_hashmap_key_bytes(tr->words) + n;
    const size_t keys_after = need_keys > tr->keys_cap ? need_keys + need_keys / 2 : tr->keys_cap;
    return zt_hashmap_slots_for(tr->words, zt_hashmap_count(tr->words) + 1) * ZT_HASHMAP_SLOT_BYTES + keys_after;
}

static int count_word(const uint8_t *w, size_t n, void *ctx) {
    zt_bpe_trainer *tr = ctx;
    uint64_t *count = zt_hashmap_get(tr->words, w, n);
    if (count) {
        ++*count;
        return 0;
    }
    for (int attempt = 0; cost_after_add(tr, n) > tr->budget; attempt++) {
        if (attempt) { /* even after pruning the frequent words fill the budget: skip this one */
            tr->pruned = 1;
            return 0;
        }
        prune(tr);
    }
    const size_t need_keys = zt_hashmap_key_bytes(tr->words) + n;
    if (need_keys > tr->keys_cap) tr->keys_cap = need_keys + need_keys / 2 + 4096;
    zt_hashmap_put(tr->words, w, n, 1, NULL);
    return 0;
}

size_t zt_tokenizer_trainer_feed(zt_bpe_trainer *tr, const uint8_t *text, size_t n, int final) {
    return zt_pretok_split(tr->pre, text, n, final, count_word, tr);
}

/* ---------------------------------------------------------------- phase 2: merges */

typedef struct pairs {
    zt_hashmap *index;  /* pair key (left<<32|right) -> pair index */
    /* per pair index */
    uint64_t *pkey;
    int64_t *count;
    uint32_t **words, *nw, *capw, *stamp;
    size_t n, cap;
} pairs;

typedef struct hent { int64_t count; uint64_t key; } hent;

/* max-heap order: count desc, then key asc */
static int hent_before(hent a, hent b) {
    return a.count > b.count || (a.count == b.count && a.key < b.key);
}

static void hpush(hent **h, size_t *n, size_t *cap, hent v) {
    if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 1024;
        *h = zt_realloc(*h, *cap * sizeof **h);
    }
    size_t i = (*n)++;
    while (i > 0 && hent_before(v, (*h)[(i - 1) / 2])) {
        (*h)[i] = (*h)[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    (*h)[i] = v;
}

static hent hpop(hent *h, size_t *n) {
    hent top = h[0], v = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && hent_before(h[c + 1], h[c])) c++;
        if (!hent_before(h[c], v)) break;
        h[i] = h[c];
        i = c;
    }
    if (*n) h[i] = v;
    return top;
}

/* index of a pair, created (count 0) if absent */
static uint32_t pair_get(pairs *p, uint64_t key) {
    int added;
    const uint32_t k = (uint32_t)*zt_hashmap_put_u64(p->index, key, p->n, &added);
    if (!added) return k;
    if (p->n == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 4096;
        p->pkey = zt_realloc(p->pkey, p->cap * sizeof *p->pkey);
        p->count = zt_realloc(p->count, p->cap * sizeof *p->count);
        p->words = zt_realloc(p->words, p->cap * sizeof *p->words);
        p->nw = zt_realloc(p->nw, p->cap * sizeof *p->nw);
        p->capw = zt_realloc(p->capw, p->cap * sizeof *p->capw);
        p->stamp = zt_realloc(p->stamp, p->cap * sizeof *p->stamp);
    }
    p->n++;
    p->pkey[k] = key;
    p->count[k] = 0;
    p->words[k] = NULL;
    p->nw[k] = p->capw[k] = 0;
    p->stamp[k] = UINT32_MAX;
    return k;
}

static void pair_add_word(pairs *p, uint32_t k, uint32_t w) {
    if (p->nw[k] && p->words[k][p->nw[k] - 1] == w) return;
    if (p->nw[k] == p->capw[k]) {
        p->capw[k] = p->capw[k] ? 2 * p->capw[k] : 4;
        p->words[k] = zt_realloc(p->words[k], p->capw[k] * sizeof **p->words);
    }
    p->words[k][p->nw[k]++] = w;
}

static uint64_t pkey(uint32_t a, uint32_t b) { return (uint64_t)a << 32 | b; }

zt_tokenizer *zt_tokenizer_trainer_finish(zt_bpe_trainer *tr, uint32_t vocab_size,
                                          zt_tok_progress_fn progress, void *ctx, char *err, size_t errlen) {
    if (vocab_size < ZT_TOK_MIN_VOCAB || vocab_size > ZT_TOK_MAX_TRAIN_VOCAB) {
        zt_errf(err, errlen, "vocab size %u out of range (expected %d..%d: 256 bytes + merges + <|endoftext|>)",
                vocab_size, ZT_TOK_MIN_VOCAB, ZT_TOK_MAX_TRAIN_VOCAB);
        return NULL;
    }
    const uint32_t want = vocab_size - 257;
    /* words: symbols (token ids), counts */
    size_t nw = zt_hashmap_count(tr->words), nkeys = zt_hashmap_key_bytes(tr->words);
    uint32_t *sym = zt_malloc((nkeys ? nkeys : 1) * sizeof *sym);
    uint64_t *wstart = zt_malloc((nw ? nw : 1) * sizeof *wstart);
    uint32_t *wlen = zt_malloc((nw ? nw : 1) * sizeof *wlen), *wstamp = zt_malloc((nw ? nw : 1) * sizeof *wstamp);
    int64_t *wcount = zt_malloc((nw ? nw : 1) * sizeof *wcount);
    size_t w = 0, ns = 0;
    for (size_t i = 0; i < zt_hashmap_slots(tr->words); i++) {
        const uint8_t *key;
        size_t len;
        uint64_t count;
        if (!zt_hashmap_at(tr->words, i, &key, &len, &count)) continue;
        wstart[w] = ns;
        wlen[w] = (uint32_t)len;
        wcount[w] = (int64_t)count;
        wstamp[w] = UINT32_MAX;
        for (size_t k = 0; k < len; k++) sym[ns++] = key[k];
        w++;
    }
    zt_hashmap_free(tr->words); /* the counting table is not needed any more */
    tr->words = zt_hashmap_create(WORDS_MIN_SLOTS);
    tr->keys_cap = 0;

    pairs p;
    memset(&p, 0, sizeof p);
    p.index = zt_hashmap_create(1u << 16);
    for (size_t i = 0; i < nw; i++) {
        const uint32_t *s = sym + wstart[i];
        for (uint32_t k = 0; k + 1 < wlen[i]; k++) {
            uint32_t pi = pair_get(&p, pkey(s[k], s[k + 1]));
            p.count[pi] += wcount[i];
            pair_add_word(&p, pi, (uint32_t)i);
        }
    }
    hent *heap = NULL;
    size_t hn = 0, hcap = 0;
    for (size_t k = 0; k < p.n; k++) hpush(&heap, &hn, &hcap, (hent){p.count[k], p.pkey[k]});

    uint32_t (*merges)[3] = zt_malloc((want ? want : 1) * sizeof *merges);
    uint32_t nm = 0, *touched = NULL;
    size_t ntouched = 0, captouched = 0;
    while (nm < want && hn) {
        hent e = hpop(heap, &hn);
        uint32_t pi = pair_get(&p, e.key);
        if (p.count[pi] != e.count) {
            if (p.count[pi] > 0) hpush(&heap, &hn, &hcap, (hent){p.count[pi], e.key});
            continue;
        }
        if (e.count < 2) break;
        const uint32_t a = (uint32_t)(e.key >> 32), b = (uint32_t)e.key, c = 256 + nm;
        merges[nm][0] = a;
        merges[nm][1] = b;
        merges[nm][2] = c;
        ntouched = 0;
        /* detach the pair's word list: the pairs this merge creates all contain c, so nothing is
           added to it while we walk it */
        uint32_t *list = p.words[pi];
        uint32_t nlist = p.nw[pi];
        p.words[pi] = NULL;
        p.nw[pi] = p.capw[pi] = 0;
        for (uint32_t li = 0; li < nlist; li++) {
            uint32_t wi = list[li];
            if (wstamp[wi] == nm) continue;
            wstamp[wi] = nm;
            uint32_t *s = sym + wstart[wi], len = wlen[wi];
            int found = 0;
            for (uint32_t k = 0; k + 1 < len && !found; k++) found = s[k] == a && s[k + 1] == b;
            if (!found) continue; /* stale entry: the pair left this word in an earlier merge */
            /* Pairs that overlap a merged occurrence lose this word's count and pairs that contain
               c gain it; every other pair of the word is there before and after (its count would
               go down and up by the same amount), so it is not looked up. */
            const int64_t wc = wcount[wi];
            int64_t done = -1; /* the last pair position already taken off */
            for (uint32_t k = 0; k + 1 < len; k++) {
                if (s[k] != a || s[k + 1] != b) continue;
                for (uint32_t j = k > 0 ? k - 1 : 0; j <= k + 1 && j + 1 < len; j++) {
                    if ((int64_t)j <= done) continue;
                    p.count[pair_get(&p, pkey(s[j], s[j + 1]))] -= wc;
                    done = j;
                }
                k++; /* occurrences do not overlap, as in the merge below */
            }
            uint32_t o = 0;
            for (uint32_t k = 0; k < len; k++) {
                if (k + 1 < len && s[k] == a && s[k + 1] == b) {
                    s[o++] = c;
                    k++;
                } else {
                    s[o++] = s[k];
                }
            }
            wlen[wi] = len = o;
            for (uint32_t k = 0; k + 1 < len; k++) {
                if (s[k] != c && s[k + 1] != c) continue;
                uint32_t qi = pair_get(&p, pkey(s[k], s[k + 1]));
                p.count[qi] += wc;
                pair_add_word(&p, qi, wi);
                if (p.stamp[qi] != nm) {
                    p.stamp[qi] = nm;
                    if (ntouched == captouched) {
                        captouched = captouched ? 2 * captouched : 256;
                        touched = zt_realloc(touched, captouched * sizeof *touched);
                    }
                    touched[ntouched++] = qi;
                }
            }
        }
        free(list);
        ZT_ASSERT(p.count[pair_get(&p, e.key)] == 0);
        for (size_t k = 0; k < ntouched; k++)
            if (p.count[touched[k]] > 0) hpush(&heap, &hn, &hcap, (hent){p.count[touched[k]], p.pkey[touched[k]]});
        nm++;
        if (progress && (nm % 64 == 0 || nm == want)) progress(nm, want, ctx);
    }
    if (progress) progress(nm, want, ctx);
    free(heap);
    free(touched);
    for (size_t k = 0; k < p.n; k++) free(p.words[k]);
    zt_hashmap_free(p.index);
    free(p.pkey);
    free(p.count);
    free(p.words);
    free(p.nw);
    free(p.capw);
    free(p.stamp);
    free(sym);
    free(wstart);
    free(wlen);
    free(wstamp);
    free(wcount);

    /* tokens: bytes, merges in order, <|endoftext|> last */
    uint32_t V = 256 + nm + 1;
    uint8_t **toks = zt_malloc(V * sizeof *toks);
    uint32_t *lens = zt_malloc(V * sizeof *lens);
    for (uint32_t i = 0; i < 256; i++) {
        toks[i] = zt_malloc(1);
        toks[i][0] = (uint8_t)i;
        lens[i] = 1;
    }
    for (uint32_t r = 0; r < nm; r++) {
        uint32_t a = merges[r][0], b = merges[r][1], c = merges[r][2];
        lens[c] = lens[a] + lens[b];
        toks[c] = zt_malloc(lens[c]);
        memcpy(toks[c], toks[a], lens[a]);
        memcpy(toks[c] + lens[a], toks[b], lens[b]);
    }
    lens[V - 1] = (uint32_t)strlen(ZT_TOK_EOT_TEXT);
    toks[V - 1] = zt_malloc(lens[V - 1]);
    memcpy(toks[V - 1], ZT_TOK_EOT_TEXT, lens[V - 1]);
    zt_tokenizer *t = zt_tokenizer_create(V, (const uint8_t *const *)toks, lens, nm, (const uint32_t(*)[3])merges,
                                          V - 1, err, errlen);
    for (uint32_t i = 0; i < V; i++) free(toks[i]);
    free(toks);
    free(lens);
    free(merges);
    return t;
}
