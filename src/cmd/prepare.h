/* prepare.h — `ztrain prepare`: train (or load) a byte-level BPE tokenizer and tokenize documents (text
 * and JSON Lines files, plain, gzip or zstd) into token shards, on threads and MPI ranks.
 *
 *   ztrain prepare --input FILE [--input FILE ...] (--vocab-size N | --tokenizer PATH) --out-dir DIR
 *                  [--field NAME] [--val-fraction F] [--max-tokens N] [--eot-between-docs] [--merges PATH]
 *                  [--threads N] [--chunk-kb N] [--train-mem-mb N] [--mlm --seq-len T]
 *   mpirun -np R ztrain prepare ...            the R ranks share the encoding
 * writes DIR/tokenizer.zttok (ztrain format, also when the tokenizer was loaded), DIR/train.bin and
 * DIR/val.bin (shards, data_shard.h).
 *
 * Inputs (io/docsrc.h has the formats): a name ending in .jsonl or .json (before an optional .gz / .zst)
 * is JSON Lines, one document per line, the string field --field (default "text"); anything else is a
 * text file, one document (as two documents with the split below). .gz and .zst are decompressed.
 *
 * Split: the last F of every text file's bytes (from the first line start at or after (1-F) * size;
 * none: the whole file is training) is validation, the rest training, each part a separate document;
 * in a JSON Lines file of n documents the last floor(n * F) are validation. No pre-token spans two
 * documents. A trained tokenizer sees only the training documents. --max-tokens N caps train.bin at N
 * tokens and val.bin at ceil(N * F / (1 - F)).
 * Framing: a tokenizer's template ids (BOS) come with each document, its document end (Qwen2's
 * <|endoftext|>) after each; --eot-between-docs (the same as --eot-between-files) writes <|endoftext|>
 * between consecutive documents of a split (GPT-2 style tokenizers).
 *
 * Masked LM (--mlm --seq-len T, T >= 3; BERT / RoBERTa pretraining; prepare_mlm.c): the tokenizer must have
 * cls, sep and pad tokens (tokenizer.h "specials": a BERT or RoBERTa tokenizer.json; --tokenizer only, no
 * --eot-between-docs). Each split's documents (their ids without template ids or document ends) are joined with
 * sep between consecutive documents and cut into chunks of T - 2 tokens (a sep that would start a chunk is left
 * out); each chunk is written as cls chunk sep, the last one padded with pad up to T. train.bin and val.bin are
 * shards of examples of T tokens with a loss mask (data_shard.h; 1 on every token but the padding), read by
 * io/data.h's zt_dataset_open_mlm with train.seq_len = T; --max-tokens counts the documents' ids. The summary
 * prints the ids for the train config (model.pad_id, model.sep_id, mlm.cls_id, mlm.mask_id); the tokenizer.zttok
 * written carries them too. The sequences are the same for any thread and rank count (the packer runs once, on
 * rank 0, over the documents in order).
 *
 * Parallel (prepare_pipe.c has the rules and the argument): --threads N encoding threads per rank
 * (default: the cores, shared among a node's ranks); under mpirun / srun every rank reads the inputs and
 * cuts them into the same work units of about --chunk-kb (default 1024) bytes, a long document only where
 * the pre-tokenizer starts a pre-token anyway; unit i is encoded by rank i mod R, and rank 0 writes all
 * of them in order. The outputs are the same bytes for any thread count, rank count and --chunk-kb (a
 * document with 64 MiB of text without such a place aside: it is cut there anyway).
 * Training runs on rank 0 (one thread), which sends the trained file to the others. Only rank 0 prints.
 *
 * Outputs are written as DIR/NAME.tmp and renamed when all three are complete: a failed or killed
 * prepare leaves an earlier tokenizer.zttok / train.bin / val.bin of DIR as they were (a killed one may
 * leave the .tmp files, which nothing reads and the next prepare replaces).
 *
 * Tool modes (used by the tests, handy for users; rank 0 alone):
 *   ztrain prepare --tokenizer T --encode FILE --ids-out OUT.bin    encode any bytes into a shard
 *   ztrain prepare --tokenizer T --decode SHARD --text-out OUT      decode a shard back to bytes
 *   ztrain prepare --pretokenize FILE --text-out OUT                 one pre-token per line, in hex
 * --read-kb N (default 1024, at most 65536) sets their read block; results never depend on it.
 * --train-mem-mb N (default 1024) caps the tokenizer trainer's count table (tokenizer.h).
 *
 * argv[0] is the command name ("prepare"); options follow. Returns the process exit code:
 * 0 on success, 2 on a user error (one line "ztrain: error: ..." on stderr, from rank 0).
 */
#ifndef ZT_PREPARE_H
#define ZT_PREPARE_H

int zt_cmd_prepare(int argc, char **argv);

#endif
