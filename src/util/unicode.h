/* unicode.h — UTF-8 decoding and Unicode NFC normalization of UTF-8 text, for the tokenizers
 * (io/tokenizer.c: the NFC normalizer of Qwen2's tokenizer.json); and the character data of BERT's
 * normalizer and pre-tokenizer (io/tokenizer_wordpiece.c) as Hugging Face tokenizers has it.
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
/* the UTF-8 of code point cp (below 0x110000) into o[0..4); returns its length */
size_t zt_utf8_enc(uint32_t cp, uint8_t *o);
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

/* ---- BERT (unicode_bert_tables.h, by scripts/gen_unicode_bert.py): Hugging Face tokenizers reads general
 * categories as of Unicode 8.0 and NFD as of Unicode 9.0, and lowercases with current data; these match it
 * code point for code point (tests/e2e/test_tokenizer_bert.py). */
#define ZT_UNI_OTHER 1u   /* category Cc, Cf, Co or Cs */
#define ZT_UNI_PUNCT 2u   /* category P* */
#define ZT_UNI_MN 4u      /* category Mn (a nonspacing mark) */
#define ZT_UNI_SPACE 8u   /* the White_Space property */
unsigned zt_uni_bert_class(uint32_t cp);
/* the lowercase of cp (the full mapping: U+0130 gives two code points) into out; returns the count */
size_t zt_uni_lower(uint32_t cp, uint32_t out[2]);
/* whether cp's NFD starts with a starter (combining class 0): nothing before cp reorders with what follows */
int zt_nfd9_starter(uint32_t cp);
/* NFD of cp[0..n) with Unicode 9.0's decompositions and classes: canonical decomposition, then each run of
 * combining marks ordered by class; writes out (room for 4n; also cc, tmp: 4n each) and returns the count */
size_t zt_nfd9(const uint32_t *cp, size_t n, uint32_t *out, uint8_t *cc, uint32_t *tmp);

#endif
