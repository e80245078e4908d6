/* docsrc.h — documents, in order, from one input file: the text that `ztrain prepare` tokenizes (and
 * that a streaming reader can hand to a tokenizer document by document).
 *
 * Formats, chosen by the file name:
 *   *.gz              gzip (zlib; concatenated members are read as one stream)
 *   *.zst             Zstandard (libzstd; any number of frames)
 *   the name without that suffix ending in .jsonl or .json: JSON Lines; anything else: text
 * so .jsonl, .json, .jsonl.gz, .json.gz, .jsonl.zst, .json.zst are JSON Lines and .txt, .txt.gz,
 * .txt.zst (or any other name) are text. Decompression streams: memory is a fixed read buffer plus
 * the longest line, never the file.
 *
 * Text: the whole content is one document (zt_docsrc_next: a plain file is mapped, a compressed one
 * is decompressed into memory whole), or, read with zt_docsrc_read, the same document in pieces of
 * at most ZT_DOCSRC_BLOCK bytes. The bytes are not checked: any bytes are text.
 * JSON Lines: one JSON object (RFC 8259) per line; the document is the string value of one field
 * (default "text"; the last one when a key repeats, as Python's json reads it), its escapes
 * decoded to UTF-8 (a \uD83D\uDE00 surrogate pair is one 4-byte character). Lines that hold only
 * spaces, tabs or '\r' are skipped; a UTF-8 byte order mark before the first line is skipped. The
 * whole line must be valid UTF-8 and valid JSON; other fields may hold any JSON value.
 *
 * Errors (one line in err; every function that can fail returns -1 and names the file):
 *   PATH:LINE: invalid UTF-8 at byte B of the line (expected UTF-8 text)
 *   PATH:LINE: invalid JSON at byte B of the line: <what> (expected one JSON object per line)
 *   PATH:LINE: no field "text" in the object (expected a string field "text": see --field)
 *   PATH:LINE: field "text" is a number (expected a string)
 *   PATH:LINE: field "text" holds a lone surrogate \uD83D (expected a \uD8xx\uDCxx pair)
 *   PATH: truncated gzip data (the compressed stream ends early) / corrupt gzip data (<zlib's words>)
 *   PATH: truncated zstd data (the last frame is incomplete) / corrupt zstd data (<libzstd's words>)
 *   PATH: not gzip data (...) / not zstd data (...) when the name's suffix does not match the bytes
 *   PATH: no documents (expected one JSON object per line) / PATH: empty input file (expected text)
 * LINE and B count from 1. An empty source is an error wherever its end is reached without a
 * document (next, read, count).
 */
#ifndef ZT_DOCSRC_H
#define ZT_DOCSRC_H

#include <stddef.h>
#include <stdint.h>

/* the most bytes one zt_docsrc_read returns */
#define ZT_DOCSRC_BLOCK (1u << 20)

typedef struct zt_docsrc zt_docsrc;

typedef enum { ZT_DOCSRC_TEXT = 0, ZT_DOCSRC_JSONL = 1 } zt_docsrc_kind;
typedef enum { ZT_DOCSRC_PLAIN = 0, ZT_DOCSRC_GZIP = 1, ZT_DOCSRC_ZSTD = 2 } zt_docsrc_comp;

/* what a file name says (the rules at the top) */
void zt_docsrc_format(const char *path, zt_docsrc_kind *kind, zt_docsrc_comp *comp);

/* field: the JSONL field (NULL = "text"); ignored for text files. 0, or -1 with err */
int zt_docsrc_open(zt_docsrc **out, const char *path, const char *field, char *err, size_t errlen);
/* the next document: 1 with *doc and *len (valid until the next call), 0 at the end, -1 on error (one
   line in err, naming file and line number) */
int zt_docsrc_next(zt_docsrc *s, const uint8_t **doc, size_t *len, char *err, size_t errlen);
/* text sources: the document's next piece (1..ZT_DOCSRC_BLOCK bytes, valid until the next call), 0
   at its end, -1 on error. Use either this or zt_docsrc_next in one pass over a text source. */
int zt_docsrc_read(zt_docsrc *s, const uint8_t **piece, size_t *len, char *err, size_t errlen);
/* index (0-based) of the document the last next() returned (UINT64_MAX before the first); and
   reopen positioned so that the next next() returns document k (past the end: next() returns 0) */
uint64_t zt_docsrc_index(const zt_docsrc *s);
int zt_docsrc_seek(zt_docsrc *s, uint64_t k, char *err, size_t errlen);   /* may re-read from the start for compressed files */
/* one pass over the whole source: *docs documents (JSONL: the lines that are not blank, not parsed)
   and *bytes bytes of (decompressed) content; then positioned at the start as after seek(0) */
int zt_docsrc_count(zt_docsrc *s, uint64_t *docs, uint64_t *bytes, char *err, size_t errlen);
/* the format, and the bytes of the file (compressed, as on disk) read so far in this pass */
zt_docsrc_kind zt_docsrc_kind_of(const zt_docsrc *s);
uint64_t zt_docsrc_file_pos(const zt_docsrc *s);
/* 1-based line number of the document the last next() returned (JSONL; 0 for text) */
uint64_t zt_docsrc_line(const zt_docsrc *s);
void zt_docsrc_close(zt_docsrc *s);

#endif
