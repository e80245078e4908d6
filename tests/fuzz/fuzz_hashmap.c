/* fuzz_hashmap.c — libFuzzer target: the hash map (src/util/hashmap.c) against a plain list.
 *
 * The input is a program of operations on one map and on a reference (an array searched
 * linearly): byte op % 8 then its operands (missing bytes read as zeros):
 *   0 put KEY VAL8   1 get KEY   2 put_u64 K8 VAL8   3 get_u64 K8
 *   4 filter D       (keeps values v with v % (D + 2) != 0)
 *   5 clear          6 put KEY VAL8 with a key of 100..355 bytes (the arena)   7 iterate
 * KEY is a length byte (% 20: around the 12-byte inline limit) and that many bytes. Creation size
 * comes from the first byte. Checks: put says "added" exactly when the reference lacks the key and
 * returns the stored value; get finds what the reference has; u64 keys equal their 8 bytes;
 * count, key bytes and slots_for agree; iteration visits each entry once with its key and value.
 */
#include "fuzz_common.h"
#include "util/hashmap.h"

typedef struct ent { uint8_t *key; size_t len; uint64_t val; } ent;
typedef struct ref { ent *e; size_t n, cap; } ref;

static ent *ref_find(ref *r, const uint8_t *k, size_t len) {
    for (size_t i = 0; i < r->n; i++)
        if (r->e[i].len == len && (len == 0 || memcmp(r->e[i].key, k, len) == 0)) return &r->e[i];
    return NULL;
}

static void ref_add(ref *r, const uint8_t *k, size_t len, uint64_t v) {
    if (r->n == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 64;
        r->e = realloc(r->e, r->cap * sizeof *r->e);
    }
    r->e[r->n].key = malloc(len ? len : 1);
    if (len) memcpy(r->e[r->n].key, k, len);
    r->e[r->n].len = len;
    r->e[r->n++].val = v;
}

typedef struct rd { const uint8_t *p; size_t n, i; } rd;
static uint8_t byte(rd *r) { return r->i < r->n ? r->p[r->i++] : 0; }
static uint64_t u64(rd *r) {
    uint64_t v = 0;
    for (int k = 0; k < 8; k++) v |= (uint64_t)byte(r) << (8 * k);
    return v;
}

static int keep_fn(uint64_t v, void *ctx) { return v % *(uint64_t *)ctx != 0; }

static void put(zt_hashmap *m, ref *r, const uint8_t *k, size_t len, uint64_t v, int as_u64) {
    int added = -1;
    uint64_t key64;
    if (as_u64) memcpy(&key64, k, 8);
    uint64_t *slot = as_u64 ? zt_hashmap_put_u64(m, key64, v, &added) : zt_hashmap_put(m, k, len, v, &added);
    ent *e = ref_find(r, k, len);
    FZ_CHECK(added == !e, "put of a %zu-byte key: added %d, reference %s", len, added, e ? "has it" : "lacks it");
    FZ_CHECK(slot && *slot == (e ? e->val : v), "put returned value %llu", slot ? (unsigned long long)*slot : 0ull);
    if (!e) ref_add(r, k, len, v);
}

static void get(zt_hashmap *m, ref *r, const uint8_t *k, size_t len, int as_u64) {
    uint64_t key64;
    if (as_u64) memcpy(&key64, k, 8);
    const uint64_t *v = as_u64 ? zt_hashmap_get_u64(m, key64) : zt_hashmap_get(m, k, len);
    const ent *e = ref_find(r, k, len);
    FZ_CHECK(!v == !e && (!v || *v == e->val), "get of a %zu-byte key: map %s, reference %s", len, v ? "has it" : "lacks it",
             e ? "has it" : "lacks it");
    if (len == 8 && !as_u64) { /* the u64 spelling of the same key */
        memcpy(&key64, k, 8);
        const uint64_t *w = zt_hashmap_get_u64(m, key64);
        FZ_CHECK(w == v, "get_u64 and get disagree on an 8-byte key");
    }
}

static void check_all(zt_hashmap *m, ref *r) {
    size_t kb = 0;
    for (size_t i = 0; i < r->n; i++) kb += r->e[i].len;
    FZ_CHECK(zt_hashmap_count(m) == r->n, "count %zu, reference %zu", zt_hashmap_count(m), r->n);
    FZ_CHECK(zt_hashmap_key_bytes(m) == kb, "key bytes %zu, reference %zu", zt_hashmap_key_bytes(m), kb);
    FZ_CHECK(2 * zt_hashmap_count(m) <= zt_hashmap_slots(m), "more than half full: %zu of %zu", zt_hashmap_count(m),
             zt_hashmap_slots(m));
    FZ_CHECK(zt_hashmap_slots_for(m, r->n) == zt_hashmap_slots(m), "slots_for(count) %zu != slots %zu",
             zt_hashmap_slots_for(m, r->n), zt_hashmap_slots(m));
    size_t seen = 0;
    uint8_t *hit = calloc(r->n + 1, 1);
    for (size_t s = 0; s < zt_hashmap_slots(m); s++) {
        const uint8_t *k;
        size_t len;
        uint64_t v;
        if (!zt_hashmap_at(m, s, &k, &len, &v)) continue;
        seen++;
        ent *e = ref_find(r, k, len);
        FZ_CHECK(e && e->val == v, "slot %zu holds a key the reference lacks or another value", s);
        size_t idx = (size_t)(e - r->e);
        FZ_CHECK(!hit[idx], "a key in two slots");
        hit[idx] = 1;
    }
    free(hit);
    FZ_CHECK(seen == r->n, "iteration saw %zu of %zu entries", seen, r->n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 4096) return 0; /* the reference is quadratic */
    rd in = {data, size, 0};
    zt_hashmap *m = zt_hashmap_create((size_t)byte(&in) * 3);
    ref r = {0};
    uint8_t key[400];
    while (in.i < in.n) {
        const int op = byte(&in) % 8;
        size_t len = 0;
        if (op == 0 || op == 1 || op == 6) {
            len = op == 6 ? 100 + byte(&in) : byte(&in) % 20;
            for (size_t k = 0; k < len; k++) key[k] = byte(&in);
        } else if (op == 2 || op == 3) {
            len = 8;
            for (size_t k = 0; k < 8; k++) key[k] = byte(&in);
        }
        switch (op) {
        case 0: case 6: put(m, &r, key, len, u64(&in), 0); break;
        case 1: get(m, &r, key, len, 0); break;
        case 2: put(m, &r, key, 8, u64(&in), 1); break;
        case 3: get(m, &r, key, 8, 1); break;
        case 4: {
            uint64_t d = 2 + byte(&in);
            zt_hashmap_filter(m, keep_fn, &d);
            size_t o = 0;
            for (size_t i = 0; i < r.n; i++) {
                if (keep_fn(r.e[i].val, &d)) r.e[o++] = r.e[i];
                else free(r.e[i].key);
            }
            r.n = o;
            break;
        }
        case 5:
            zt_hashmap_clear(m);
            for (size_t i = 0; i < r.n; i++) free(r.e[i].key);
            r.n = 0;
            break;
        default: check_all(m, &r); break;
        }
    }
    check_all(m, &r);
    for (size_t i = 0; i < r.n; i++) get(m, &r, r.e[i].key, r.e[i].len, 0);
    for (size_t i = 0; i < r.n; i++) free(r.e[i].key);
    free(r.e);
    zt_hashmap_free(m);
    return 0;
}
