/* prepare.h — `ztrain prepare`: train (or load) a byte-level BPE tokenizer and tokenize text files
 * into token shards. A single process (rank 0 only); no MPI calls.
 *
 *   ztrain prepare --input FILE [--input FILE ...] (--vocab-size N | --tokenizer PATH) --out-dir DIR
 *                  [--val-fraction F] [--max-tokens N] [--eot-between-files] [--merges PATH]
 *                  [--train-mem-mb N] [--read-kb N]
 * writes DIR/tokenizer.zttok (ztrain format, also when the tokenizer was loaded), DIR/train.bin and
 * DIR/val.bin (shards, data_shard.h).
 *
 * Split: the last F of every input file's bytes (from the first line start at or after
 * (1-F) * size; none: the whole file is training) is validation, the rest is training; each part
 * is a separate document (no pre-token spans two parts or two files). A trained
 * tokenizer sees only the training parts. --max-tokens N caps train.bin at N tokens and val.bin at
 * ceil(N * F / (1 - F)). --eot-between-files writes <|endoftext|> between consecutive files' parts
 * in each split.
 *
 * Tool modes (used by the tests, handy for users):
 *   ztrain prepare --tokenizer T --encode FILE --ids-out OUT.bin    encode any bytes into a shard
 *   ztrain prepare --tokenizer T --decode SHARD --text-out OUT      decode a shard back to bytes
 *   ztrain prepare --pretokenize FILE --text-out OUT                 one pre-token per line, in hex
 * --read-kb N (default 1024, at most 65536) sets the read block; results never depend on it.
 * --train-mem-mb N (default 1024) caps the tokenizer trainer's count table (tokenizer.h).
 *
 * argv[0] is the command name ("prepare"); options follow. Returns the process exit code:
 * 0 on success, 2 on a user error (one line "ztrain: error: ..." on stderr).
 */
#ifndef ZT_PREPARE_H
#define ZT_PREPARE_H

int zt_cmd_prepare(int argc, char **argv);

#endif
