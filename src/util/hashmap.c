/* hashmap.c — the one hash map (see hashmap.h): open addressing over 32-byte slots, short keys
 * inside the slot, long keys in an arena.
 */
#include "util/hashmap.h"
#include "util/util.h"

#include <stdlib.h>
#include <string.h>

typedef struct slot {
    uint64_t hash;                          /* 0: empty */
    uint64_t val;
    uint8_t key[ZT_HASHMAP_INLINE_KEY];     /* len <= 12: the key, zero-padded; else its arena offset */
    uint32_t len;
} slot;

_Static_assert(sizeof(slot) == ZT_HASHMAP_SLOT_BYTES, "a slot is 32 bytes (memory budgets count on it)");

struct zt_hashmap {
    slot *slots;
    size_t mask, count, min_slots, key_bytes;
    uint8_t *arena;                         /* keys longer than ZT_HASHMAP_INLINE_KEY */
    size_t arena_n, arena_cap;
};

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "hashmap.c keeps short keys as little-endian words"
#endif

/* a key prepared for probing: its hash and, when short, its bytes as two zero-padded words */
typedef struct probe {
    uint64_t hash, k0;
    uint32_t k1;
} probe;

/* the n <= 8 bytes at p as a little-endian word, zero-extended, without reading past p + n:
   overlapping loads, whose shared bytes agree */
static inline uint64_t load_le(const uint8_t *p, size_t n) {
    if (n >= 4) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + n - 4, 4);
        return lo | (uint64_t)hi << (8 * (n - 4));
    }
    if (n == 0) return 0;
    return p[0] | (uint64_t)p[n / 2] << (8 * (n / 2)) | (uint64_t)p[n - 1] << (8 * (n - 1));
}

static inline void hash_short(probe *pr, uint64_t k0, uint32_t k1, size_t len) {
    pr->k0 = k0;
    pr->k1 = k1;
    uint64_t h = (0x9E3779B97F4A7C15ull ^ k0) * 0xff51afd7ed558ccdull;
    h ^= h >> 32;
    h = (h ^ ((uint64_t)len << 32 | k1)) * 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 29;
    pr->hash = h ? h : 1;
}

static inline void prepare(probe *pr, const void *key, size_t len) {
    const uint8_t *p = key;
    if (len <= ZT_HASHMAP_INLINE_KEY) {
        hash_short(pr, load_le(p, len < 8 ? len : 8), len > 8 ? (uint32_t)load_le(p + 8, len - 8) : 0, len);
        return;
    }
    size_t n = len;
    uint64_t h = 0x9E3779B97F4A7C15ull ^ len;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        h = (h ^ v) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
        p += 8;
        n -= 8;
    }
    h = (h ^ load_le(p, n)) * 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 29;
    pr->hash = h ? h : 1;
}

static const uint8_t *slot_key(const zt_hashmap *m, const slot *s) {
    if (s->len <= ZT_HASHMAP_INLINE_KEY) return s->key;
    uint64_t off;
    memcpy(&off, s->key, sizeof off);
    return m->arena + off;
}

static inline int matches(const zt_hashmap *m, const slot *s, const probe *pr, const void *key, size_t len) {
    if (s->hash != pr->hash || s->len != len) return 0;
    if (len <= ZT_HASHMAP_INLINE_KEY) {
        uint64_t k0;
        uint32_t k1;
        memcpy(&k0, s->key, 8);
        memcpy(&k1, s->key + 8, 4);
        return k0 == pr->k0 && k1 == pr->k1;
    }
    return memcmp(slot_key(m, s), key, len) == 0;
}

static size_t slots_needed(size_t from, size_t n) {
    size_t s = from;
    while (2 * n > s) s *= 2;
    return s;
}

/* the slots array of `slots` slots, with every entry of `old` (old_n slots) placed by its hash */
static slot *place_all(const slot *old, size_t old_n, size_t slots) {
    slot *s = zt_calloc(slots, sizeof *s);
    const size_t mask = slots - 1;
    for (size_t i = 0; i < old_n; i++) {
        if (!old[i].hash) continue;
        size_t j = old[i].hash & mask;
        while (s[j].hash) j = (j + 1) & mask;
        s[j] = old[i];
    }
    return s;
}

zt_hashmap *zt_hashmap_create(size_t min_slots) {
    zt_hashmap *m = zt_calloc(1, sizeof *m);
    m->min_slots = 16;
    while (m->min_slots < min_slots) m->min_slots *= 2;
    m->slots = zt_calloc(m->min_slots, sizeof *m->slots);
    m->mask = m->min_slots - 1;
    return m;
}

void zt_hashmap_free(zt_hashmap *m) {
    if (!m) return;
    free(m->slots);
    free(m->arena);
    free(m);
}

/* the slot of the key, or the empty slot where it would go */
static inline size_t find(const zt_hashmap *m, const probe *pr, const void *key, size_t len) {
    size_t i = pr->hash & m->mask;
    while (m->slots[i].hash && !matches(m, &m->slots[i], pr, key, len)) i = (i + 1) & m->mask;
    return i;
}

/* stores a new entry at empty slot i (growing first if the map would be more than half full) */
static uint64_t *insert(zt_hashmap *m, size_t i, const probe *pr, const void *key, size_t len, uint64_t val) {
    ZT_ASSERT(len <= UINT32_MAX);
    if (2 * (m->count + 1) > m->mask + 1) {
        const size_t old_n = m->mask + 1;
        slot *old = m->slots;
        m->slots = place_all(old, old_n, 2 * old_n);
        m->mask = 2 * old_n - 1;
        free(old);
        for (i = pr->hash & m->mask; m->slots[i].hash; i = (i + 1) & m->mask) {}
    }
    slot *s = &m->slots[i];
    s->hash = pr->hash;
    s->val = val;
    s->len = (uint32_t)len;
    if (len <= ZT_HASHMAP_INLINE_KEY) {
        memcpy(s->key, &pr->k0, 8);
        memcpy(s->key + 8, &pr->k1, 4);
    } else {
        const size_t need = m->arena_n + len;
        if (need > m->arena_cap) {
            m->arena_cap = need + need / 2 + 4096;
            m->arena = zt_realloc(m->arena, m->arena_cap);
        }
        const uint64_t off = m->arena_n;
        memcpy(m->arena + off, key, len);
        memcpy(s->key, &off, sizeof off);
        m->arena_n = need;
    }
    m->count++;
    m->key_bytes += len;
    return &s->val;
}

uint64_t *zt_hashmap_get(const zt_hashmap *m, const void *key, size_t len) {
    probe pr;
    prepare(&pr, key, len);
    const size_t i = find(m, &pr, key, len);
    return m->slots[i].hash ? &m->slots[i].val : NULL;
}

uint64_t *zt_hashmap_put(zt_hashmap *m, const void *key, size_t len, uint64_t val, int *added) {
    probe pr;
    prepare(&pr, key, len);
    const size_t i = find(m, &pr, key, len);
    if (added) *added = !m->slots[i].hash;
    return m->slots[i].hash ? &m->slots[i].val : insert(m, i, &pr, key, len, val);
}

/* the same for a key of 8 bytes already in a register (the hot lookups of merge ranks and pairs) */
uint64_t *zt_hashmap_get_u64(const zt_hashmap *m, uint64_t key) {
    probe pr;
    hash_short(&pr, key, 0, sizeof key);
    const size_t i = find(m, &pr, &key, sizeof key);
    return m->slots[i].hash ? &m->slots[i].val : NULL;
}

uint64_t *zt_hashmap_put_u64(zt_hashmap *m, uint64_t key, uint64_t val, int *added) {
    probe pr;
    hash_short(&pr, key, 0, sizeof key);
    const size_t i = find(m, &pr, &key, sizeof key);
    if (added) *added = !m->slots[i].hash;
    return m->slots[i].hash ? &m->slots[i].val : insert(m, i, &pr, &key, sizeof key, val);
}

size_t zt_hashmap_count(const zt_hashmap *m) { return m->count; }
size_t zt_hashmap_slots(const zt_hashmap *m) { return m->mask + 1; }
size_t zt_hashmap_key_bytes(const zt_hashmap *m) { return m->key_bytes; }
size_t zt_hashmap_slots_for(const zt_hashmap *m, size_t n) { return slots_needed(m->mask + 1, n); }

void zt_hashmap_clear(zt_hashmap *m) {
    memset(m->slots, 0, (m->mask + 1) * sizeof *m->slots);
    m->count = m->key_bytes = m->arena_n = 0;
}

void zt_hashmap_filter(zt_hashmap *m, int (*keep)(uint64_t val, void *ctx), void *ctx) {
    const size_t old_n = m->mask + 1;
    size_t kept = 0, long_bytes = 0, key_bytes = 0;
    for (size_t i = 0; i < old_n; i++) {
        slot *s = &m->slots[i];
        if (!s->hash) continue;
        if (!keep(s->val, ctx)) {
            s->hash = 0;
            continue;
        }
        kept++;
        key_bytes += s->len;
        if (s->len > ZT_HASHMAP_INLINE_KEY) long_bytes += s->len;
    }
    uint8_t *arena = long_bytes ? zt_malloc(long_bytes) : NULL;
    size_t an = 0;
    for (size_t i = 0; i < old_n; i++) {
        slot *s = &m->slots[i];
        if (!s->hash || s->len <= ZT_HASHMAP_INLINE_KEY) continue;
        memcpy(arena + an, slot_key(m, s), s->len);
        const uint64_t off = an;
        memcpy(s->key, &off, sizeof off);
        an += s->len;
    }
    const size_t slots = slots_needed(m->min_slots, kept + 1);
    slot *old = m->slots;
    m->slots = place_all(old, old_n, slots);
    m->mask = slots - 1;
    free(old);
    free(m->arena);
    m->arena = arena;
    m->arena_n = m->arena_cap = an;
    m->count = kept;
    m->key_bytes = key_bytes;
}

int zt_hashmap_at(const zt_hashmap *m, size_t slot_i, const uint8_t **key, size_t *len, uint64_t *val) {
    const slot *s = &m->slots[slot_i];
    if (!s->hash) return 0;
    if (key) *key = slot_key(m, s);
    if (len) *len = s->len;
    if (val) *val = s->val;
    return 1;
}
