/* unicode.h — UTF-8 decoding and Unicode NFC normalization of UTF-8 text, for the tokenizers
 * (io/tokenizer.c: the NFC normalizer of Qwen2's tokenizer.json).
 *
 * NFC is Unicode's canonical composition (UAX #15): decompose canonically, order combining marks by
 * class, compose. The tables are generated from Python's unicodedata (unicode_nfc_tables.h, by
 * tools/gen_unicode_nfc.py). Bytes that are not valid UTF-8 pass through unchanged, and nothing
 * composes across them. Streaming: text may be cut before an "inert" character (one NFC neither
 * changes nor joins to what precedes it); zt_nfc_cut finds such a place, and normalizing the parts
 * separately then gives the NFC of the whole.
 */
#ifndef ZT_UNICODE_H
#define ZT_UNICODE_H

#include <stddef.h>
#include <stdint.h>

/* the length of the valid UTF-8 character at s[0..n) and its code point in *cp; 0 when s does not
 * start one (a stray byte, an overlong form, a surrogate, or a character cut by the end) */
size_t zt_utf8_dec(const uint8_t *s, size_t n, uint32_t *cp);
/* n less a character cut by the end of s[0..n) (a lead byte without all its continuation bytes) */
size_t zt_utf8_whole(const uint8_t *s, size_t n);

typedef struct zt_nfc zt_nfc;   /* scratch and the composition index; one per thread */
zt_nfc *zt_nfc_create(void);
void zt_nfc_free(zt_nfc *z);
/* appends NFC(s[0..n)) to the buffer *out (*out_n bytes used of *out_cap; realloc'd as needed) */
void zt_nfc_append(zt_nfc *z, const uint8_t *s, size_t n, uint8_t **out, size_t *out_n, size_t *out_cap);
/* where s[0..n) may be cut when more text follows: before its last complete inert character. With
 * none in the last ZT_NFC_MAX_TAIL bytes (a long run of combining marks or invalid bytes): 0 while n
 * is at most that, else n less a cut character (the only case where the parts' NFC may differ). */
#define ZT_NFC_MAX_TAIL 65536
size_t zt_nfc_cut(const uint8_t *s, size_t n);

#endif
