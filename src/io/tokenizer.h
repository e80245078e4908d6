/* tokenizer.h — BPE tokenizers: byte-level BPE (GPT-2 style: train, encode, decode, save/load) and
 * the Hugging Face tokenizer.json configurations of the Llama family (Llama 2, Llama 3, Qwen2); and
 * WordPiece (BERT; below, after the configurations).
 *
 * Model. Every token id stands for a byte string. Text is first cut into pre-tokens by the GPT-2
 * regex
 *     's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * (PCRE2, UTF + UCP; \s is spelled out as the Unicode White_Space set, which is what Hugging Face
 * tokenizers' regex engine uses). Bytes the regex cannot match (invalid UTF-8) form pre-tokens of
 * their own, one per maximal run, so ANY byte string encodes and decode(encode(x)) == x (in this
 * configuration; the others below add template tokens, a prefix space, or normalize).
 * Each pre-token starts as one token per byte; then, as in GPT-2 / Hugging Face, the adjacent pair
 * with the lowest merge rank is merged (ties: leftmost first) until no adjacent pair has a rank.
 * The end-of-text token is never produced from text: the string "<|endoftext|>" in the input is
 * encoded as ordinary text (Hugging Face would match it as a special token); callers insert the id
 * where documents end (prepare --eot-between-files). The same holds for every special token of the
 * configurations below.
 *
 * Configurations (zt_tok_config; a tokenizer.json's normalizer, pre_tokenizer, model, decoder and
 * post_processor are read as data, tokenizer_hf.c). The pipeline of one document is
 *     [template begin ids] normalizer -> prefix -> pre-tokenizer -> BPE model [template end ids]
 *   normalizer  none | NFC (Unicode canonical composition, util/unicode.h; Qwen2)
 *   prefix      none | "nonempty": a space before a non-empty document (Llama 2's
 *               Prepend("\u2581") normalizer) | "first": a space unless the document starts with a
 *               space or U+2581 (Metaspace, prepend_scheme first, the newer Llama 2 layout)
 *   pre-tokenizer  gpt2 (above) | llama3 | qwen2 (their Split regexes, Isolated, then ByteLevel) |
 *               none (the whole document is one word: Llama 2)
 *   model       bytes: byte-level BPE as above, optionally with ignore_merges (Llama 3: a pre-token
 *               that is itself a vocab token is that token, whatever the merges would give) |
 *               chars: SentencePiece-style BPE (Llama 2): the word starts as one token per
 *               character, a space or U+2581 being the token "\u2581", a character outside the vocab
 *               being its UTF-8 bytes' tokens "<0x00>".."<0xFF>" (byte fallback; all 256 must exist)
 *   template    ids before (BOS) and after each document, from a TemplateProcessing post-processor;
 *               zt_tokenizer_encode writes them, as Hugging Face's encode does by default.
 *   specials    cls and sep: the tokens an encoder's sequence starts and ends with (BERT's [CLS] and [SEP],
 *               RoBERTa's <s> and </s>): a RobertaProcessing post-processor's (encode writes neither, as
 *               Hugging Face's encode(add_special_tokens=False)), or a template's one token on each side of
 *               $A; pad and mask: the tokens "[PAD]" / "<pad>" and "[MASK]" / "<mask>" when the vocab has
 *               them. `prepare --mlm` frames sequences with cls, sep and pad; train configs name them
 *               (model.pad_id, mlm.cls_id, ...). RoBERTa's tokenizer is GPT-2's configuration with these.
 * The chars model with pre-tokenizer none is one word per document in Hugging Face; ztrain cuts it
 * where no merge can cross, which gives the same ids: before a space that follows a non-space when
 * no merge joins a token ending in a non-space to one starting with "\u2581" (checked when the
 * tokenizer is made; Llama 2's vocab has none), and before a character (or byte token) that starts
 * the right-hand token of no merge (a newline's <0x0A>, for one). A stretch longer than
 * ZT_PRETOK_MAX_CARRY without such a place is cut anyway (there alone the ids may differ from Hugging
 * Face's, as with the GPT-2 pre-tokenizer). Decoding a chars model writes "\u2581"
 * as a space and byte tokens as their byte (invalid UTF-8 stays as bytes where Hugging Face writes
 * U+FFFD) and drops one leading space of the output (the Strip decoder); special tokens decode as
 * their text (Hugging Face's decode with skip_special_tokens=False).
 * WordPiece (model wordpiece, tokenizer_wordpiece.c; what HF tokenizers does for BERT): normalizer bert
 * (BertNormalizer: clean_text drops U+0000, U+FFFD and categories Cc/Cf/Co/Cs other than \t \n \r and
 * makes White_Space a space; handle_chinese_chars puts spaces around CJK ideographs; strip_accents is NFD
 * then no Mn; lowercase is the full lowercase mapping; in that order; categories and NFD as HF's tables
 * have them, Unicode 8.0 and 9.0: util/unicode.h) or none;
 * pre-tokenizer bert (split at White_Space, each punctuation character alone: categories P* and the
 * ASCII symbols); model: a word longer than max_word_chars characters is unk, else greedy longest match
 * first (the continuation pieces spelled with subword_prefix, "##"), and a word with a part that has no
 * match is ONE unk. Invalid UTF-8 reads as U+FFFD, one per byte. The post-processor's [CLS] and [SEP]
 * are cls and sep: encode never writes them (nor any template id). Decoding: a piece with the prefix
 * joins the previous one without it, any other token but the first gets a space before it, and with
 * decode_cleanup each token's text then has HF's cleanup replacements (" ." -> ".", " 's" -> "'s", ...).
 * Documents in `prepare`: a template writes BOS before each (Llama 2, Llama 3); a configuration other
 * than GPT-2's and WordPiece without a template and with an end-of-text token ends each document with it
 * (zt_tokenizer_doc_end: Qwen2's <|endoftext|>); the GPT-2 configuration writes nothing
 * (--eot-between-files), and so does WordPiece (prepare --mlm frames sequences with [CLS]/[SEP]). The
 * end-of-text token is "<|endoftext|>", else "<|end_of_text|>", else "</s>".
 * Streaming (zt_tokenizer_encode_chunk) of a configuration other than GPT-2's keeps the document in
 * progress inside the tokenizer: zt_tokenizer_reset drops it.
 *
 * Trained tokenizers (zt_tokenizer_trainer_*): ids 0..255 are the single bytes, merge i (rank i)
 * creates id 256+i, and the last id (vocab_size-1) is "<|endoftext|>". vocab_size 257..65536.
 * Training rule (what tests/e2e/test_tokenizer.py re-implements independently): count every pre-token
 * of the training text; repeat: take the adjacent pair with the highest total count over all
 * pre-tokens (count = sum of word counts x occurrences, where occurrences in a word are counted as
 * adjacent positions, overlaps included), ties broken by the smallest (left id, right id); stop
 * when the best count is below 2 or the vocab is full; merge every non-overlapping occurrence
 * left to right in every word.
 * Memory bound of training: the pre-token count table (open addressing, 32 bytes a slot at most
 * half full, plus the pre-tokens' bytes) stays within mem_bytes (briefly ~1.5x while it is
 * compacted); when it would not, the pre-tokens
 * with the lowest counts are dropped until it is half full (lossy counting: only rare pre-tokens'
 * counts become approximate; zt_tokenizer_trainer_pruned says so). The merge phase then needs about
 * 2-3x the table's final size (measured: 2M distinct pre-tokens, 21 MB of text in them -> 390 MB
 * peak), so the peak is at most about 3-4 x mem_bytes whatever the corpus size.
 *
 * File format (ztrain's own, ".zttok", text, one item per line, '\n' line ends):
 *     ztrain-tokenizer 1
 *     vocab_size V
 *     eot E                     (id of <|endoftext|>, or -1 for none)
 *     tokens V
 *     <hex of token 0's bytes>  (V lines, id order; "-" for an empty token)
 *     merges M
 *     <left> <right> <result>   (M lines, rank order: line i is rank i; decimal ids)
 * A Hugging Face tokenizer loaded here is saved in the same format with its own ids. A configuration
 * other than GPT-2's is saved as version 2: after the eot line come
 *     model bytes|chars
 *     normalizer none|nfc
 *     prefix none|nonempty|first
 *     pretokenizer gpt2|llama3|qwen2|none
 *     ignore_merges 0|1
 *     strip_space 0|1
 *     begin K <K ids>           (the template's ids before a document)
 *     end K <K ids>             (and after it)
 *     doc_end D                 (-1 for none)
 * and each token line may start with '+' (an added token, outside the BPE model); a chars model's
 * token lines hold the token's string in the model's alphabet ("\u2581the", "<0x0A>"). A WordPiece
 * tokenizer is version 3: version 2's lines (model wordpiece, normalizer bert|none, pretokenizer bert),
 * then after doc_end
 *     wordpiece UNK MAX_WORD_CHARS CLEANUP PREFIX   (PREFIX in hex, "-" for empty; CLEANUP 0|1)
 *     bert CLEAN_TEXT CHINESE STRIP_ACCENTS LOWERCASE   (0|1 each)
 *     special CLS SEP           (-1 for none)
 * and its token lines hold the tokens' strings ("##ing"); it has no merges.
 * A tokenizer with a pad or mask token, or with cls / sep and a model other than WordPiece, is version 4:
 * version 2's lines for any model, then (WordPiece) the wordpiece and bert lines, then
 *     special CLS SEP           (-1 for none)
 *     pad PAD                   (-1 for none)
 *     mask MASK                 (-1 for none)
 * (the other tokenizers are saved as before, so versions 1-3 stay what they were and still load).
 *
 * Hugging Face files (tokenizer_hf.c): vocab.json + merges.txt (GPT-2), or a tokenizer.json in one of
 * the configurations above (the accepted fields are listed there; anything else is an error naming
 * the field). Byte-level token strings are mapped back to bytes through GPT-2's bytes_to_unicode
 * table, so the ids equal HF's.
 *
 * Error convention: functions that can fail on user input return non-zero (or NULL) and write a
 * one-line message (naming the file and what is expected) into err. A zt_tokenizer keeps a
 * mutable cache (and a document in progress): use one object per thread.
 */
#ifndef ZT_TOKENIZER_H
#define ZT_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#define ZT_TOK_MAGIC "ztrain-tokenizer"
#define ZT_TOK_VERSION 1
#define ZT_TOK_EOT_TEXT "<|endoftext|>"
#define ZT_TOK_NO_EOT 0xFFFFFFFFu
#define ZT_TOK_MIN_VOCAB 257
#define ZT_TOK_MAX_TRAIN_VOCAB 65536
#define ZT_TOK_MAX_VOCAB (1 << 24)

typedef struct zt_tokenizer zt_tokenizer;

/* a growable array of token ids */
typedef struct zt_ids {
    uint32_t *v;
    size_t n, cap;
} zt_ids;
void zt_ids_push(zt_ids *a, uint32_t id);
void zt_ids_free(zt_ids *a);

/* ---- pre-tokenizer (shared by training and encoding) ---- */
typedef struct zt_pretok zt_pretok;
/* called for each pre-token in order; a non-zero return stops the split */
typedef int (*zt_pretok_fn)(const uint8_t *word, size_t len, void *ctx);
zt_pretok *zt_pretok_create(char *err, size_t errlen);          /* the GPT-2 regex */
void zt_pretok_free(zt_pretok *p);
/* Streaming split of text[0..n): calls fn for every pre-token that more text could not change
 * (all of them when final != 0) and returns the number of bytes consumed; the caller passes the
 * rest again, followed by more text. A document ends where final is set (no pre-token spans
 * documents). The unconsumed rest is never more than ZT_PRETOK_MAX_CARRY bytes (a pre-token longer
 * than that, e.g. a megabyte without a space, is cut there), so a caller's buffer of
 * ZT_PRETOK_MAX_CARRY + its read size always suffices. */
#define ZT_PRETOK_MAX_CARRY (1u << 20)
size_t zt_pretok_split(zt_pretok *p, const uint8_t *text, size_t n, int final, zt_pretok_fn fn,
                       void *ctx);

/* ---- configurations (the pipeline at the top) ---- */
typedef enum { ZT_TOK_MODEL_BYTES = 0, ZT_TOK_MODEL_CHARS = 1, ZT_TOK_MODEL_WORDPIECE = 2 } zt_tok_model;
typedef enum { ZT_TOK_NORM_NONE = 0, ZT_TOK_NORM_NFC = 1, ZT_TOK_NORM_BERT = 2 } zt_tok_norm;
typedef enum { ZT_TOK_PREFIX_NONE = 0, ZT_TOK_PREFIX_NONEMPTY = 1, ZT_TOK_PREFIX_FIRST = 2 } zt_tok_prefix;
typedef enum { ZT_TOK_PRE_GPT2 = 0, ZT_TOK_PRE_LLAMA3 = 1, ZT_TOK_PRE_QWEN2 = 2, ZT_TOK_PRE_NONE = 3,
               ZT_TOK_PRE_BERT = 4 } zt_tok_pre;
#define ZT_TOK_MAX_TEMPLATE 8
/* the BERT normalizer's flags (zt_tok_config.bert) */
#define ZT_TOK_BERT_CLEAN 1u
#define ZT_TOK_BERT_CHINESE 2u
#define ZT_TOK_BERT_STRIP 4u
#define ZT_TOK_BERT_LOWER 8u
#define ZT_TOK_MAX_WORD_CHARS (1u << 20)   /* max_word_chars at most */
typedef struct zt_tok_config {
    zt_tok_model model;
    zt_tok_norm normalizer;
    zt_tok_prefix prefix;
    zt_tok_pre pretok;
    int ignore_merges;            /* bytes model: a pre-token that is a model token is that token */
    int strip_space;              /* decode drops one leading space */
    uint32_t eot;                 /* ZT_TOK_NO_EOT for none */
    uint32_t doc_end;             /* what prepare writes after each document, or ZT_TOK_NO_EOT */
    uint32_t n_begin, n_end;      /* template ids around a document */
    uint32_t begin[ZT_TOK_MAX_TEMPLATE], end[ZT_TOK_MAX_TEMPLATE];
    const uint8_t *added;         /* per id: non-zero = added token (not in the BPE model); may be NULL */
    /* the specials (the top), ZT_TOK_NO_EOT for none */
    uint32_t cls, sep;            /* the post-processor's [CLS] and [SEP] (<s> and </s>) */
    uint32_t pad, mask;           /* the padding and mask tokens */
    /* WordPiece (the others leave these zero) */
    uint32_t bert;                /* normalizer bert: ZT_TOK_BERT_* */
    uint32_t unk, max_word_chars; /* the unknown token; a longer word is one unk */
    int decode_cleanup;           /* the WordPiece decoder's cleanup */
    char subword_prefix[16];      /* continuing pieces' prefix ("##"), NUL-terminated */
} zt_tok_config;
/* GPT-2's configuration with end-of-text id eot */
void zt_tok_config_gpt2(zt_tok_config *c, uint32_t eot);
/* a pre-tokenizer for kind (not ZT_TOK_PRE_NONE) */
zt_pretok *zt_pretok_create_kind(zt_tok_pre kind, char *err, size_t errlen);

/* ---- construction, files ---- */
/* from explicit tables, GPT-2's configuration: token id i is the byte string toks[i] (lens[i]
 * bytes; NULL/0 = empty); merges[r] = {left, right, result} for rank r, with bytes(result) ==
 * bytes(left)+bytes(right). Every single byte must be some token (a chars model instead needs the
 * 256 byte tokens <0x00>..<0xFF>; a WordPiece model, at least one token and no merges). eot =
 * ZT_TOK_NO_EOT for none. Tables are copied. */
zt_tokenizer *zt_tokenizer_create(uint32_t vocab_size, const uint8_t *const *toks, const uint32_t *lens,
                                  uint32_t n_merges, const uint32_t (*merges)[3], uint32_t eot,
                                  char *err, size_t errlen);
/* any configuration: toks are the tokens' strings in the model's alphabet (bytes model: the bytes;
 * chars model: UTF-8 such as "\u2581the" or "<0x41>"; WordPiece: "##the"); the other rules as
 * zt_tokenizer_create */
zt_tokenizer *zt_tokenizer_create_cfg(const zt_tok_config *cfg, uint32_t vocab_size, const uint8_t *const *toks,
                                      const uint32_t *lens, uint32_t n_merges, const uint32_t (*merges)[3],
                                      char *err, size_t errlen);
/* any supported format, detected from the contents: ztrain .zttok, HF tokenizer.json, or HF
 * vocab.json (merges from merges_path, or "merges.txt" in the same directory when NULL).
 * In tokenizer_hf.c with the HF loader (it sits above both formats); the rest of this section is
 * tokenizer.c's. */
zt_tokenizer *zt_tokenizer_load(const char *path, const char *merges_path, char *err, size_t errlen);
zt_tokenizer *zt_tokenizer_load_zttok(const char *path, char *err, size_t errlen);
/* Hugging Face tokenizer.json or vocab.json (told apart by content; merges_path as above) */
zt_tokenizer *zt_tokenizer_load_hf(const char *path, const char *merges_path, char *err, size_t errlen);
int zt_tokenizer_save(const zt_tokenizer *t, const char *path, char *err, size_t errlen);
void zt_tokenizer_free(zt_tokenizer *t);

/* ---- queries ---- */
uint32_t zt_tokenizer_vocab_size(const zt_tokenizer *t);
uint32_t zt_tokenizer_eot(const zt_tokenizer *t);        /* ZT_TOK_NO_EOT if none */
uint32_t zt_tokenizer_n_merges(const zt_tokenizer *t);
/* the configuration (its `added` points into the tokenizer) */
const zt_tok_config *zt_tokenizer_config(const zt_tokenizer *t);
/* the id prepare writes after each document (ZT_TOK_NO_EOT: none; see the top) */
uint32_t zt_tokenizer_doc_end(const zt_tokenizer *t);
/* the bytes of one token as decode writes them (NULL and *len 0 if id is out of range; WordPiece: after
 * another token, " the" or "##ing" as "ing") */
const uint8_t *zt_tokenizer_token(const zt_tokenizer *t, uint32_t id, size_t *len);

/* ---- encode / decode ---- */
/* streaming: encodes the pre-tokens of text[0..n) that are final (see zt_pretok_split), appends
 * their ids to out, returns the bytes consumed; final != 0 ends the document and consumes all. The
 * template's ids come first (at a document's first call, even with n == 0) and last (with final).
 * Configurations other than GPT-2's consume nearly everything and keep the pending text themselves
 * (NFC keeps back at most a few characters, ZT_NFC_MAX_TAIL bytes in a run of combining marks). */
size_t zt_tokenizer_encode_chunk(zt_tokenizer *t, const uint8_t *text, size_t n, int final, zt_ids *out);
/* a whole document */
void zt_tokenizer_encode(zt_tokenizer *t, const uint8_t *text, size_t n, zt_ids *out);
/* forgets a document whose final chunk never came: the next chunk starts a new document */
void zt_tokenizer_reset(zt_tokenizer *t);
/* appends the bytes of ids to *out (malloc'd/realloc'd; *out_len updated); an id >= vocab size is
 * an error. With strip_space, one space at the start of what this call writes is dropped. */
int zt_tokenizer_decode(const zt_tokenizer *t, const uint32_t *ids, size_t n, uint8_t **out,
                        size_t *out_len, char *err, size_t errlen);

/* ---- training (streaming, bounded memory; see the rule at the top) ---- */
typedef struct zt_bpe_trainer zt_bpe_trainer;
zt_bpe_trainer *zt_tokenizer_trainer_create(size_t mem_bytes, char *err, size_t errlen);
/* same streaming contract as zt_tokenizer_encode_chunk */
size_t zt_tokenizer_trainer_feed(zt_bpe_trainer *tr, const uint8_t *text, size_t n, int final);
/* distinct pre-tokens counted so far, and whether rare ones had to be dropped */
size_t zt_tokenizer_trainer_words(const zt_bpe_trainer *tr);
int zt_tokenizer_trainer_pruned(const zt_bpe_trainer *tr);
/* runs the merges. progress (may be NULL) is called now and then with merges done / wanted.
 * The result may have fewer tokens than vocab_size if the text has too few repeated pairs
 * (its vocab is then 256 + merges + 1). */
typedef void (*zt_tok_progress_fn)(uint32_t done, uint32_t total, void *ctx);
zt_tokenizer *zt_tokenizer_trainer_finish(zt_bpe_trainer *tr, uint32_t vocab_size,
                                          zt_tok_progress_fn progress, void *ctx, char *err,
                                          size_t errlen);
void zt_tokenizer_trainer_free(zt_bpe_trainer *tr);

#endif
