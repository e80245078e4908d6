/* data_stream.h — training windows from text and JSON Lines files tokenized as they are read (data.stream = true):
 * no prepare step, the same tokens `ztrain prepare --tokenizer TOK --val-fraction 0 --eot-between-files` writes.
 *
 * The stream is the files of data.train (a glob, in sorted order), each read by io/docsrc.h (text: a file is one
 * document; JSON Lines: one document per line, field data.field), each document framed as prepare frames it: the
 * tokenizer's template ids (BOS) with its encoding, then its document end (Qwen2's <|endoftext|>) when it has one,
 * else the end-of-text id before every document after the epoch's first tokens (documents that frame to no tokens
 * are skipped). Windows are T+1 tokens at stride T in stream
 * order, exactly the windows of the prepared shard read with data.shuffle = false: sample s is the next window
 * after sample s - 1; when fewer than T+1 tokens remain, the epoch ends (the tail is not used) and the next
 * window starts at the stream's first token again.
 *
 * Every rank reads and tokenizes the whole stream (skipping the windows of other ranks), so the order does not
 * depend on the rank count; the tokenizer must keep up with training's token rate. The position (file, document,
 * token within the document's framed tokens, epoch, the epoch's first sample) is what a checkpoint keeps: a
 * resume opens that file, seeks that document and drops that many tokens, whatever the rank count.
 *
 * Masked LM (mlm = 1, an encoder's run): the documents are joined by [SEP] with no template ids or document ends,
 * as `ztrain prepare --mlm` joins them; a window is the next T - 2 tokens at stride T - 2 (a [SEP] that would
 * start one is left out) framed [CLS] window [SEP], with targets equal to the inputs: prepare --mlm's sequences,
 * except that the epoch's tail (fewer than T - 2 tokens) is not used rather than padded. */
#ifndef ZT_DATA_STREAM_H
#define ZT_DATA_STREAM_H

#include <stddef.h>
#include <stdint.h>

typedef struct zt_stream zt_stream;

typedef struct zt_stream_pos {
    uint64_t sample;              /* the sample whose window starts here */
    uint64_t file, doc, token;    /* where: file index, document in it, token within its framed tokens */
    uint64_t epoch, epoch_first;  /* epoch, and its first sample */
    uint64_t first_doc;           /* 1: the document is the epoch's first with tokens (framed without end-of-text) */
} zt_stream_pos;

/* pattern: glob of text / JSONL files; field: JSONL field (NULL: "text"); tokenizer: a tokenizer file (.zttok,
   tokenizer.json). Checks the files open and the tokenizer fits model_vocab. 0, or 1 with one line in err. */
int zt_stream_open(zt_stream **out, const char *pattern, const char *field, const char *tokenizer, int T, int mlm,
                   uint32_t model_vocab, char *err, size_t errlen);
void zt_stream_close(zt_stream *st);
/* the window of sample s (s not before the current position: samples are asked in order): inputs, targets
   (T each). 0, or 1 with one line in err (a malformed document, a file that went away, too few tokens). */
int zt_stream_sample(zt_stream *st, uint64_t s, int32_t *inputs, int32_t *targets, char *err, size_t errlen);
/* moves to the start of sample s (not before the current position) and reports the position there */
int zt_stream_position(zt_stream *st, uint64_t s, zt_stream_pos *pos, char *err, size_t errlen);
/* continues from a reported position (a resume) */
int zt_stream_restore(zt_stream *st, const zt_stream_pos *pos, char *err, size_t errlen);
/* the current position's sample: where the stream is; and the first sample of its epoch */
uint64_t zt_stream_next_sample(const zt_stream *st);
uint64_t zt_stream_epoch_first(const zt_stream *st);

#endif
