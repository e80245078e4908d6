/* hashmap.h — the one hash map: byte-string keys -> uint64_t values.
 *
 * Open addressing with linear probing, at most half full (it doubles when an insert would pass
 * that), 32-byte slots (ZT_HASHMAP_SLOT_BYTES). Keys are copied in: keys of up to 12 bytes live in
 * the slot itself, longer ones in a key arena the map owns, so small keys (a uint64_t passed as
 * its 8 bytes, most words) are compared without touching a second cache line. The 64-bit hash is
 * stored, so growing never rehashes a key. There is no single-key delete: zt_hashmap_filter drops
 * every entry a predicate rejects and compacts the arena, zt_hashmap_clear drops everything.
 *
 * Users: the tokenizer's merge ranks and word cache (tokenizer.c), the trainer's word counts and
 * pair index (tokenizer_train.c), the Hugging Face loader's vocab (tokenizer_hf.c).
 *
 * A value pointer from get/put stays valid until the next put, filter or clear.
 */
#ifndef ZT_HASHMAP_H
#define ZT_HASHMAP_H

#include <stddef.h>
#include <stdint.h>

#define ZT_HASHMAP_SLOT_BYTES 32
#define ZT_HASHMAP_INLINE_KEY 12

typedef struct zt_hashmap zt_hashmap;

/* an empty map of min_slots slots (rounded up to a power of two, at least 16); it never shrinks
   below that */
zt_hashmap *zt_hashmap_create(size_t min_slots);
void zt_hashmap_free(zt_hashmap *m);

/* the value of key, or NULL */
uint64_t *zt_hashmap_get(const zt_hashmap *m, const void *key, size_t len);
/* inserts key -> val unless key is present; returns the value slot (the old value if present).
   *added (may be NULL) says which. */
uint64_t *zt_hashmap_put(zt_hashmap *m, const void *key, size_t len, uint64_t val, int *added);

/* the same for a uint64_t key (pairs of ids and the like): equal to passing its 8 bytes, faster */
uint64_t *zt_hashmap_get_u64(const zt_hashmap *m, uint64_t key);
uint64_t *zt_hashmap_put_u64(zt_hashmap *m, uint64_t key, uint64_t val, int *added);

size_t zt_hashmap_count(const zt_hashmap *m);      /* entries */
size_t zt_hashmap_slots(const zt_hashmap *m);      /* slots now */
size_t zt_hashmap_key_bytes(const zt_hashmap *m);  /* sum of the entries' key lengths */
/* the slots the map has when it holds n entries (its growth rule), for memory budgets */
size_t zt_hashmap_slots_for(const zt_hashmap *m, size_t n);

/* removes every entry (keeps the slots and the arena's memory) */
void zt_hashmap_clear(zt_hashmap *m);
/* keeps the entries for which keep(value, ctx) is non-zero; the arena shrinks to the survivors'
   long keys and the slots to zt_hashmap_slots_for(count + 1) */
void zt_hashmap_filter(zt_hashmap *m, int (*keep)(uint64_t val, void *ctx), void *ctx);

/* iteration in slot order: for slot in [0, zt_hashmap_slots): 1 and the entry if the slot holds
   one (key bytes valid until the next put, filter or clear), else 0 */
int zt_hashmap_at(const zt_hashmap *m, size_t slot, const uint8_t **key, size_t *len, uint64_t *val);

#endif
