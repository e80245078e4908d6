/* prepare_internal.h — what the files of `ztrain prepare` share (nothing else includes it):
 *   prepare.c        options, modes, the corpus mode's driver (inputs, tokenizer, outputs)
 *   prepare_tools.c  the tool modes (--encode, --decode, --pretokenize) and the byte-range reader
 *   prepare_pipe.c   the corpus encoder: work units, threads, ranks, the ordered writer
 *   prepare_mlm.c    --mlm: its checks and the packer of sequences [CLS] ... [SEP] (fed by the writer)
 * A mode is a function of prep_opts (and the ranks, prep_dist); adding one (an --sft mode, say): its
 * options in prepare.c's option table and fields here, an entry in prepare.c's MODES, its code in a file
 * of its own.
 */
#ifndef ZT_PREPARE_INTERNAL_H
#define ZT_PREPARE_INTERNAL_H

#include <stdint.h>
#include <stdio.h>

#include "io/data_shard.h"
#include "io/tokenizer.h"
#include "util/progress.h"
#include "util/util.h"

#define PREP_MAX_INPUTS 4096
#define PREP_TOK_FILE "tokenizer.zttok"
#define PREP_ERR_LEN 1024

typedef struct prep_opts {
    const char *inputs[PREP_MAX_INPUTS];
    int n_inputs;
    long vocab_size;              /* 0 = not given */
    const char *tokenizer, *merges, *out_dir, *field;
    double val_fraction;
    long long max_tokens;         /* 0 = no cap */
    int eot_between;              /* --eot-between-docs (--eot-between-files) */
    int mlm;                      /* --mlm: sequences of seq_len tokens for a masked LM (prepare_mlm.c) */
    long seq_len;                 /* --seq-len; 0 = not given */
    const char *encode, *ids_out, *decode, *text_out, *pretokenize;
    long read_kb, train_mem_mb, chunk_kb;
    int threads;                  /* 0 = the default */
} prep_opts;

/* the ranks (size 1, rank 0 without a launcher: then no MPI call is made) */
typedef struct prep_dist {
    int rank, size, mpi;
    int default_threads;
} prep_dist;

/* one line "ztrain: error: ..." on stderr (rank 0 only); returns ZT_EXIT_USER */
int prep_fail(const char *fmt, ...) ZT_PRINTF(1, 2);
int prep_rank(void);
void prep_set_rank(int rank);

/* a phase's progress on stderr (rank 0): input bytes done out of total (the percentage), text bytes
   for the MB/s (0: the input bytes) */
typedef struct prep_progress {
    const char *label;
    uint64_t total, done, text;
    zt_progress bar;
} prep_progress;
void prep_prog_start(prep_progress *p, const char *label, uint64_t total);
void prep_prog_update(prep_progress *p, uint64_t done, uint64_t text);
double prep_prog_end(prep_progress *p, const char *extra);

/* ---- prepare_tools.c ---- */
int prep_check_type(const char *path, const char *what);
zt_tokenizer *prep_load_tokenizer(const prep_opts *o, int *rc);
int prep_cmd_encode(const prep_opts *o);
int prep_cmd_decode(const prep_opts *o);
int prep_cmd_pretokenize(const prep_opts *o);

/* ---- prepare_mlm.c ---- */
/* --mlm's packer for one split (the rule in prepare_mlm.c): ids in, sequences of T tokens out to w */
typedef struct prep_packer {
    zt_shard_writer *w;
    uint32_t T, sep, pad;
    uint32_t *seq;                /* (T) the sequence being filled; seq[0] is cls */
    uint8_t *mask;                /* (T) its loss mask as written */
    uint32_t n;                   /* tokens in seq */
    int boundary;                 /* a document starts at the next id */
    uint64_t sequences, padding;  /* written */
} prep_packer;
/* the options (--mlm, --seq-len) and then the tokenizer (rank 0): 0, or the exit code after one line */
int prep_mlm_opts(const prep_opts *o);
int prep_mlm_check(const prep_opts *o, const zt_tokenizer *t);
void prep_pack_init(prep_packer *pk, zt_shard_writer *w, uint32_t T, const zt_tok_config *c);
void prep_pack_free(prep_packer *pk);
void prep_pack_doc(prep_packer *pk);   /* a document starts */
int prep_pack_ids(prep_packer *pk, const uint32_t *ids, size_t n, char *err, size_t errlen);
int prep_pack_finish(prep_packer *pk, char *err, size_t errlen);  /* the last sequence, padded */
/* the summary's --mlm lines: the sequences and the ids a train config names */
void prep_mlm_summary(const prep_opts *o, const zt_tokenizer *t, const prep_packer *pk);

/* ---- prepare_pipe.c ---- */
/* an input file as the encoder reads it */
typedef struct prep_input {
    const char *path;
    int jsonl;
    uint64_t file_bytes;          /* on disk */
    uint64_t size;                /* text: bytes of (decompressed) text */
    uint64_t cut_from;            /* text: floor(size * (1 - F)) (the split is at the first line start at or
                                     after it); JSON Lines: the first validation document */
    uint64_t n_docs;              /* JSON Lines: documents */
} prep_input;

/* the text split: where validation starts in a text of `size` bytes, from bytes seen so far: the byte
   after the first '\n' at or after cut_from - 1 (0 when cut_from is 0; size when there is none) */
typedef struct prep_cut {
    uint64_t from, size, at;      /* at: the cut once known, else UINT64_MAX */
} prep_cut;
void prep_cut_start(prep_cut *c, uint64_t size, uint64_t cut_from);
/* feed bytes p[0, n) at offset off (in order); returns the cut once known (UINT64_MAX before) */
uint64_t prep_cut_feed(prep_cut *c, uint64_t off, const uint8_t *p, size_t n);

typedef struct prep_result {
    uint64_t written[2];          /* tokens in train.bin, val.bin */
    uint64_t text_bytes;          /* bytes of text encoded */
    double secs;
    uint64_t *unigram;            /* counts per id of train.bin (rank 0; caller frees) */
} prep_result;

/* encodes the inputs' documents with tokenizer copies loaded from tok_path (one per thread, all
   ranks) and, on rank 0, appends them to w[0] (train) and w[1] (val) framed as prepare.h says, or with pack
   (--mlm; else NULL) through pack[0] and pack[1]; t gives the configuration. Every rank returns the same code;
   rank 0 prints the error. */
int prep_encode(const prep_opts *o, const prep_dist *d, const prep_input *in, int n_in, const zt_tokenizer *t,
                const char *tok_path, const char *merges, zt_shard_writer *w, prep_packer *pack, prep_result *res);

#endif
