/* prepare.c — `ztrain prepare` (usage, inputs and split rules in prepare.h): options, the modes, and the
 * corpus mode's driver: check the inputs (rank 0), load or train the tokenizer, encode (prepare_pipe.c),
 * publish the outputs. Without a launcher it makes no MPI call; under mpirun/srun every rank runs it.
 *
 * Memory is bounded by the tokenizer (training table cap, encode caches) and the work units in flight,
 * never by the corpus. Progress goes to stderr through util/progress (a bar on a terminal, plain lines
 * otherwise), rank 0 only; the summary goes to stdout.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "cmd/prepare.h"
#include "cmd/prepare_internal.h"
#include "cmd/prepare_sft.h"
#include "core/dist/dist.h"
#include "io/docsrc.h"

#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define fail prep_fail
#define ERR_LEN PREP_ERR_LEN
#define TOK_FILE PREP_TOK_FILE
#define SNIFF_BYTES 65536
typedef prep_opts opts;

static void usage(FILE *f) {
    fputs("usage: ztrain prepare --input FILE [--input FILE ...] (--vocab-size N | --tokenizer PATH) --out-dir DIR\n"
          "                      [--field NAME] [--val-fraction F] [--max-tokens N] [--eot-between-docs]\n"
          "                      [--threads N]         (mpirun -np R ./ztrain prepare ...: R ranks share the work)\n"
          "       ztrain prepare --tokenizer PATH --encode FILE --ids-out OUT.bin\n"
          "       ztrain prepare --tokenizer PATH --decode SHARD --text-out OUT\n"
          "       ztrain prepare --pretokenize FILE --text-out OUT   (one pre-token per line, in hex)\n"
          "       ztrain prepare --mlm --seq-len T --input FILE ... --tokenizer PATH --out-dir DIR [--val-fraction F]\n"
          "                      masked-LM (BERT, RoBERTa) sequences [CLS] ... [SEP] of T tokens (below)\n"
          "       ztrain prepare --sft --input EXAMPLES.jsonl --tokenizer PATH --seq-len T --out-dir DIR ...\n"
          "                      fine-tuning examples with loss masks (ztrain prepare --sft --help)\n"
          "  --input FILE         a document source (repeatable): text (.txt, any other name; one document)\n"
          "                       or JSON Lines (.jsonl, .json: one document per line), each also as .gz / .zst\n"
          "  --field NAME         the JSON Lines field that holds the text (default text)\n"
          "  --vocab-size N       train a byte-level BPE tokenizer with N tokens (257..65536)\n"
          "  --tokenizer PATH     use a tokenizer: ztrain .zttok, Hugging Face tokenizer.json, or vocab.json\n"
          "  --merges PATH        merges.txt for a vocab.json (default: merges.txt beside it)\n"
          "  --out-dir DIR        writes DIR/" TOK_FILE ", DIR/train.bin, DIR/val.bin\n"
          "  --val-fraction F     validation: the last fraction of each text file (from a line start) or of each\n"
          "                       JSON Lines file's documents (default 0.05)\n"
          "  --max-tokens N       at most N train tokens (and N*F/(1-F) validation tokens)\n"
          "  --eot-between-docs   write <|endoftext|> between consecutive documents in each split (GPT-2 style\n"
          "                       tokenizers; a tokenizer.json with a BOS template starts every document with\n"
          "                       BOS, Qwen2's ends every document with <|endoftext|>); --eot-between-files is\n"
          "                       the same (a text file's part is one document)\n"
          "  --mlm --seq-len T    masked-LM pretraining data: the documents packed into sequences of exactly T tokens\n"
          "                       [CLS] ... [SEP] (RoBERTa: <s> ... </s>), [SEP] between documents, the last one\n"
          "                       padded (loss mask 0); needs a tokenizer with cls, sep and pad (a BERT or RoBERTa\n"
          "                       tokenizer.json); prints the ids a train config names\n"
          "  --threads N          encoding threads per rank (default: the cores, shared among a node's ranks);\n"
          "                       the outputs are the same bytes for any thread and rank count\n"
          "  --chunk-kb N         work unit size (default 1024; the outputs do not depend on it)\n"
          "  --train-mem-mb N     memory cap of the tokenizer's pre-token count table (default 1024)\n"
          "  --read-kb N          read block size of --encode / --pretokenize (default 1024)\n", f);
}

/* ---------------------------------------------------------------- options */

static int parse_long(const char *opt, const char *v, long long lo, long long hi, long long *out) {
    char *e;
    errno = 0;
    long long x = strtoll(v, &e, 10);
    if (e == v || *e || errno) return fail("%s %s: expected an integer", opt, v);
    if (x < lo || x > hi) return fail("%s %s: out of range (expected %lld..%lld)", opt, v, lo, hi);
    *out = x;
    return 0;
}

/* the options that take a value; the flags are --eot-between-docs, --eot-between-files and --mlm */
static const char *const WITH_VALUE[] = {"--input", "--vocab-size", "--tokenizer", "--merges", "--out-dir",
                                         "--val-fraction", "--max-tokens", "--encode", "--ids-out", "--decode",
                                         "--text-out", "--read-kb", "--train-mem-mb", "--pretokenize", "--field",
                                         "--threads", "--chunk-kb", "--seq-len"};

static int set_value(opts *o, const char *name, const char *v) {
    long long x;
    if (strcmp(name, "--input") == 0) {
        if (o->n_inputs == PREP_MAX_INPUTS) return fail("--input: too many inputs (at most %d)", PREP_MAX_INPUTS);
        o->inputs[o->n_inputs++] = v;
    } else if (strcmp(name, "--vocab-size") == 0) {
        char *e;
        errno = 0;
        long long vs = strtoll(v, &e, 10);
        if (e == v || *e || errno) return fail("--vocab-size %s: expected an integer", v);
        if (vs < ZT_TOK_MIN_VOCAB || vs > ZT_TOK_MAX_TRAIN_VOCAB)
            return fail("--vocab-size %s: out of range (expected %d..%d: 256 byte tokens + merges + "
                        "<|endoftext|>)", v, ZT_TOK_MIN_VOCAB, ZT_TOK_MAX_TRAIN_VOCAB);
        o->vocab_size = (long)vs;
    } else if (strcmp(name, "--tokenizer") == 0) o->tokenizer = v;
    else if (strcmp(name, "--merges") == 0) o->merges = v;
    else if (strcmp(name, "--out-dir") == 0) o->out_dir = v;
    else if (strcmp(name, "--encode") == 0) o->encode = v;
    else if (strcmp(name, "--ids-out") == 0) o->ids_out = v;
    else if (strcmp(name, "--decode") == 0) o->decode = v;
    else if (strcmp(name, "--text-out") == 0) o->text_out = v;
    else if (strcmp(name, "--pretokenize") == 0) o->pretokenize = v;
    else if (strcmp(name, "--field") == 0) {
        if (!*v) return fail("--field: expected a field name (not empty)");
        o->field = v;
    } else if (strcmp(name, "--val-fraction") == 0) {
        char *e;
        double f = strtod(v, &e);
        if (e == v || *e || !(f >= 0 && f < 1)) return fail("--val-fraction %s: expected a number in [0, 1)", v);
        o->val_fraction = f;
    } else if (strcmp(name, "--max-tokens") == 0) {
        if (parse_long(name, v, 1, (long long)1 << 50, &x)) return ZT_EXIT_USER;
        o->max_tokens = x;
    } else if (strcmp(name, "--read-kb") == 0) {
        if (parse_long(name, v, 1, 1 << 16, &x)) return ZT_EXIT_USER;
        o->read_kb = (long)x;
    } else if (strcmp(name, "--train-mem-mb") == 0) {
        if (parse_long(name, v, 16, 1 << 22, &x)) return ZT_EXIT_USER;
        o->train_mem_mb = (long)x;
    } else if (strcmp(name, "--threads") == 0) {
        if (parse_long(name, v, 1, 1024, &x)) return ZT_EXIT_USER;
        o->threads = (int)x;
    } else if (strcmp(name, "--seq-len") == 0) {
        if (parse_long(name, v, 1, 1 << 20, &x)) return ZT_EXIT_USER;
        o->seq_len = (long)x;
    } else if (strcmp(name, "--chunk-kb") == 0) {
        if (parse_long(name, v, 1, 1 << 14, &x)) return ZT_EXIT_USER;
        o->chunk_kb = (long)x;
    }
    return 0;
}

/* 0, -1 after --help (printed), or the exit code of an error */
static int parse_opts(int argc, char **argv, opts *o) {
    memset(o, 0, sizeof *o);
    o->val_fraction = 0.05;
    o->read_kb = 1024;
    o->train_mem_mb = 1024;
    o->chunk_kb = 1024;
    for (int i = 1; i < argc; i++) {
        char *a = argv[i], *eq = NULL;
        char name[64];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            if (prep_rank() == 0) usage(stdout);
            return -1;
        }
        if (strncmp(a, "--", 2) == 0 && (eq = strchr(a, '=')) != NULL) {
            snprintf(name, sizeof name, "%.*s", (int)(eq - a), a);
        } else {
            snprintf(name, sizeof name, "%s", a);
        }
        if (strcmp(name, "--eot-between-files") == 0 || strcmp(name, "--eot-between-docs") == 0) {
            if (eq) return fail("%s takes no value", name);
            o->eot_between = 1;
            continue;
        }
        if (strcmp(name, "--mlm") == 0) {
            if (eq) return fail("%s takes no value", name);
            o->mlm = 1;
            continue;
        }
        int known = 0;
        for (size_t k = 0; k < sizeof WITH_VALUE / sizeof *WITH_VALUE; k++) known |= strcmp(name, WITH_VALUE[k]) == 0;
        if (!known) return fail("prepare: unknown option '%s' (see ztrain prepare --help)", a);
        const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!v) return fail("%s needs a value", name);
        int rc = set_value(o, name, v);
        if (rc) return rc;
    }
    return 0;
}

/* ---------------------------------------------------------------- ranks */

static int agree(const prep_dist *d, int rc) {
    if (d->size == 1) return rc;
    int all = rc;
    MPI_Request r;
    MPI_Iallreduce(&rc, &all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &r);
    int flag = 0;
    while (MPI_Test(&r, &flag, MPI_STATUS_IGNORE), !flag) usleep(500);
    return all;
}

static void bcast(const prep_dist *d, void *buf, size_t n) {
    for (size_t k = 0; d->size > 1 && k < n; k += (size_t)1 << 30) {
        size_t m = n - k < ((size_t)1 << 30) ? n - k : (size_t)1 << 30;
        MPI_Request r;
        MPI_Ibcast((char *)buf + k, (int)m, MPI_BYTE, 0, MPI_COMM_WORLD, &r);
        int flag = 0;
        while (MPI_Test(&r, &flag, MPI_STATUS_IGNORE), !flag) usleep(500);
    }
}

/* ---------------------------------------------------------------- inputs (rank 0) */

static int sniff(const char *path, const uint8_t *head, size_t n) {
    size_t nul = 0;
    for (size_t i = 0; i < n; i++) nul += head[i] == 0;
    if (nul * 100 > n)
        return fail("%s: looks binary (%zu NUL bytes in the first %zu bytes, more than 1%%); expected a text file",
                    path, nul, n);
    return 0;
}

static int check_input(prep_input *in, double val_fraction, const char *field) {
    zt_docsrc_kind kind;
    zt_docsrc_comp comp;
    zt_docsrc_format(in->path, &kind, &comp);
    in->jsonl = kind == ZT_DOCSRC_JSONL;
    if (prep_check_type(in->path, in->jsonl ? "a JSON Lines file" : "a text file")) return ZT_EXIT_USER;
    struct stat st;
    if (stat(in->path, &st) != 0) return fail("%s: cannot open input file (%s)", in->path, strerror(errno));
    in->file_bytes = (uint64_t)st.st_size;
    char err[ERR_LEN];
    zt_docsrc *s;
    if (zt_docsrc_open(&s, in->path, field, err, sizeof err)) return fail("%s", err);
    int rc = 0;
    if (in->jsonl) {
        uint64_t bytes;
        if (zt_docsrc_count(s, &in->n_docs, &bytes, err, sizeof err)) rc = fail("%s", err);
        /* the last floor(n F) documents are validation */
        in->cut_from = in->n_docs - (uint64_t)floor((double)in->n_docs * val_fraction + 1e-9);
    } else if (comp == ZT_DOCSRC_PLAIN && in->file_bytes == 0) {
        rc = fail("%s: empty input file (expected text)", in->path);
    } else {
        static uint8_t head[SNIFF_BYTES];
        size_t nh = 0, n;
        const uint8_t *p;
        int r;
        in->size = 0;
        /* a plain file's size is known; a compressed one is read through once */
        while ((r = zt_docsrc_read(s, &p, &n, err, sizeof err)) == 1) {
            size_t k = n < SNIFF_BYTES - nh ? n : SNIFF_BYTES - nh;
            memcpy(head + nh, p, k);
            nh += k;
            in->size += n;
            if (comp == ZT_DOCSRC_PLAIN && nh == SNIFF_BYTES) break;
        }
        if (comp == ZT_DOCSRC_PLAIN) in->size = in->file_bytes;
        if (r < 0) rc = fail("%s", err);
        else rc = sniff(in->path, head, nh);
        in->cut_from = val_fraction > 0 ? (uint64_t)floor((double)in->size * (1.0 - val_fraction)) : in->size;
    }
    zt_docsrc_close(s);
    return rc;
}

static int check_out_dir(const char *dir) {
    if (zt_mkdirs(dir) != 0) return fail("--out-dir %s: cannot create directory (%s)", dir, strerror(errno));
    char probe[4096];
    snprintf(probe, sizeof probe, "%s/.ztrain-prepare-probe", dir);
    FILE *f = fopen(probe, "w");
    if (!f) return fail("--out-dir %s: directory not writable (%s)", dir, strerror(errno));
    fclose(f);
    remove(probe);
    return 0;
}

/* ---------------------------------------------------------------- tokenizer training (rank 0) */

static void merge_progress(uint32_t done, uint32_t total, void *ctx) {
    prep_progress *p = ctx;
    p->total = total;
    p->done = done;
    int tenth;
    if (zt_progress_due(&p->bar, 0.1, done >= total)) {
        zt_progress_draw(&p->bar, "%s: %u / %u merges", p->label, done, total);
    } else if ((tenth = zt_progress_tenth(&p->bar, total ? (double)done / total : 1.0, 2.0)) >= 0) {
        zt_progress_print(&p->bar, "%s: %d%% of %u merges\n", p->label, tenth * 10, total);
    }
}

/* the training part of one input into the trainer: a text file's bytes before the split (streamed with
   the pre-tokenizer's carry-over through buf, ZT_PRETOK_MAX_CARRY + ZT_DOCSRC_BLOCK bytes), a JSON Lines
   file's documents before the first validation one */
static int feed_input(zt_bpe_trainer *tr, const prep_input *in, const char *field, uint8_t *buf, prep_progress *p,
                      uint64_t *fed) {
    char err[ERR_LEN];
    zt_docsrc *s;
    if (zt_docsrc_open(&s, in->path, field, err, sizeof err)) return fail("%s", err);
    const uint8_t *d;
    size_t n;
    int r = 0;
    if (in->jsonl) {
        for (uint64_t k = 0; k < in->cut_from && (r = zt_docsrc_next(s, &d, &n, err, sizeof err)) == 1; k++) {
            zt_tokenizer_trainer_feed(tr, d, n, 1);
            *fed += n;
            prep_prog_update(p, *fed, 0);
        }
    } else {
        prep_cut cut;
        prep_cut_start(&cut, in->size, in->cut_from);
        uint64_t off = 0;
        size_t have = 0;
        int final = cut.at == 0;
        while (!final && (r = zt_docsrc_read(s, &d, &n, err, sizeof err)) == 1) {
            uint64_t at = prep_cut_feed(&cut, off, d, n);
            size_t take = at < off + n ? (size_t)(at - off) : n;
            final = at <= off + n;
            memcpy(buf + have, d, take);
            have += take;
            off += n;
            *fed += take;
            size_t used = zt_tokenizer_trainer_feed(tr, buf, have, final);
            memmove(buf, buf + used, have - used);
            have -= used;
            prep_prog_update(p, *fed, 0);
        }
        if (r >= 0 && !final) zt_tokenizer_trainer_feed(tr, buf, have, 1);
    }
    zt_docsrc_close(s);
    return r < 0 ? fail("%s", err) : 0;
}

static zt_tokenizer *train_tokenizer(const opts *o, const prep_input *in, int *rc, double *mb, double *secs) {
    char err[ERR_LEN];
    zt_bpe_trainer *tr = zt_tokenizer_trainer_create((size_t)o->train_mem_mb << 20, err, sizeof err);
    if (!tr) {
        *rc = fail("%s", err);
        return NULL;
    }
    uint64_t total = 0, fed = 0;
    for (int i = 0; i < o->n_inputs; i++) total += in[i].jsonl ? in[i].file_bytes : in[i].cut_from;
    prep_progress p;
    prep_prog_start(&p, "tokenizer: counting pre-tokens", total);
    const size_t cap = ZT_PRETOK_MAX_CARRY + ZT_DOCSRC_BLOCK + 16;
    uint8_t *buf = zt_malloc(cap);
    for (int i = 0; i < o->n_inputs && !*rc; i++) *rc = feed_input(tr, &in[i], o->field, buf, &p, &fed);
    free(buf);
    if (*rc) {
        zt_tokenizer_trainer_free(tr);
        return NULL;
    }
    char extra[160];
    snprintf(extra, sizeof extra, ", %zu distinct pre-tokens%s", zt_tokenizer_trainer_words(tr),
             zt_tokenizer_trainer_pruned(tr) ? " (table full: the rarest were dropped, see --train-mem-mb)" : "");
    p.done = fed;
    prep_prog_end(&p, extra);
    prep_progress mp;
    prep_prog_start(&mp, "tokenizer: merging", 0);
    zt_tokenizer *t = zt_tokenizer_trainer_finish(tr, (uint32_t)o->vocab_size, merge_progress, &mp, err, sizeof err);
    zt_tokenizer_trainer_free(tr);
    if (!t) {
        *rc = fail("%s", err);
        return NULL;
    }
    double dt = zt_progress_elapsed(&mp.bar);
    *mb = (double)fed / 1e6;
    *secs = zt_progress_elapsed(&p.bar);
    zt_progress_print(&mp.bar, "tokenizer: %u merges in %.2f s; training read %.1f MB at %.1f MB/s overall\n",
                      zt_tokenizer_n_merges(t), dt, *mb, *mb / *secs);
    if (zt_tokenizer_vocab_size(t) < (uint32_t)o->vocab_size)
        fprintf(stderr, "ztrain: warning: the training text has too few repeated pairs for %ld tokens: "
                "vocab size is %u\n", o->vocab_size, zt_tokenizer_vocab_size(t));
    return t;
}

/* the trained tokenizer's file from rank 0 to the others (a private copy each: DIR may not be shared) */
static zt_tokenizer *share_tokenizer(const prep_dist *d, const char *path, char *local, size_t n, int *rc) {
    char err[ERR_LEN];
    uint64_t len = 0;
    char *data = NULL;
    if (d->rank == 0) {
        size_t l;
        data = zt_read_file(path, "a tokenizer file", &l, err, sizeof err);
        len = data ? l : UINT64_MAX;
    }
    bcast(d, &len, sizeof len);
    if (len == UINT64_MAX) {
        *rc = fail("%s", err);
        return NULL;
    }
    if (d->rank != 0) data = zt_malloc(len + 1);
    bcast(d, data, len);
    zt_tokenizer *t = NULL;
    if (d->rank != 0) {
        const char *tmp = getenv("TMPDIR");
        snprintf(local, n, "%s/ztrain-prepare-tok.XXXXXX", tmp && *tmp ? tmp : "/tmp");
        int fd = mkstemp(local);
        FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
        int bad = !f || fwrite(data, 1, len, f) != len;
        if (f && fclose(f) != 0) bad = 1;
        if (!bad) t = zt_tokenizer_load_zttok(local, err, sizeof err);
        if (!t) *rc = ZT_EXIT_USER;
    }
    free(data);
    return t;
}

/* ---------------------------------------------------------------- the corpus mode */

/* the outputs are written as .tmp files and renamed into place only when all of them are complete:
   a failed prepare leaves an earlier tokenizer.zttok / train.bin / val.bin of DIR as they were */
static int publish(const char *out_dir, const char *const *names, int n, int ok) {
    char tmp[4200], path[4096];
    int rc = 0;
    for (int k = 0; k < n; k++) {
        snprintf(path, sizeof path, "%s/%s", out_dir, names[k]);
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        if (!ok || rc) remove(tmp);
        else if (rename(tmp, path) != 0) rc = fail("%s: cannot rename to %s (%s)", tmp, path, strerror(errno));
    }
    return rc;
}

static void summary(const opts *o, const zt_tokenizer *t, const prep_result *res, double train_mb, double train_s) {
    const uint32_t V = zt_tokenizer_vocab_size(t);
    double H = 0, T = (double)res->written[0];
    for (uint32_t i = 0; i < V && T > 0; i++)
        if (res->unigram[i]) H -= (double)res->unigram[i] / T * log((double)res->unigram[i] / T);
    printf("tokenizer: %s (vocab size %u, %u merges, eot id %lld) -> %s/%s\n", o->tokenizer ? o->tokenizer : "trained",
           V, zt_tokenizer_n_merges(t), zt_tokenizer_eot(t) == ZT_TOK_NO_EOT ? -1LL : (long long)zt_tokenizer_eot(t),
           o->out_dir, TOK_FILE);
    printf("tokens written: train %llu -> %s/train.bin, val %llu -> %s/val.bin (%s per token)\n",
           (unsigned long long)res->written[0], o->out_dir, (unsigned long long)res->written[1], o->out_dir,
           V <= 65536 ? "uint16" : "uint32");
    if (!o->tokenizer)
        printf("tokenizer training: %.1f MB in %.2f s (%.1f MB/s)\n", train_mb, train_s,
               train_mb / (train_s > 1e-9 ? train_s : 1e-9));
    const double mb = (double)res->text_bytes / 1e6;
    printf("encoding: %.1f MB in %.2f s (%.1f MB/s)\n", mb, res->secs, mb / (res->secs > 1e-9 ? res->secs : 1e-9));
    if (T > 0) printf("unigram baseline loss: %.4f\n", H);
    else printf("unigram baseline loss: n/a (the train split is empty)\n");
    if (o->val_fraction > 0 && res->written[1] == 0)
        fprintf(stderr, "ztrain: warning: the validation split is empty (inputs too short for --val-fraction %g)\n",
                o->val_fraction);
}

static int run_corpus(const opts *o, const prep_dist *d) {
    if (o->n_inputs == 0) return fail("prepare: no --input FILE given (see ztrain prepare --help)");
    if (!o->out_dir) return fail("prepare: no --out-dir DIR given");
    if (!o->vocab_size == !o->tokenizer)
        return fail("prepare: give exactly one of --vocab-size N (train a tokenizer) or --tokenizer PATH");
    if (prep_mlm_opts(o)) return ZT_EXIT_USER;
    const int r0 = d->rank == 0;
    prep_input *in = zt_calloc((size_t)o->n_inputs, sizeof *in);
    int rc = 0;
    for (int i = 0; i < o->n_inputs; i++) in[i].path = o->inputs[i];
    for (int i = 0; i < o->n_inputs && !rc && r0; i++) rc = check_input(&in[i], o->val_fraction, o->field);
    rc = agree(d, rc);
    for (int i = 0; i < o->n_inputs && !rc; i++) { /* what rank 0 found, for every rank */
        uint64_t v[5] = {(uint64_t)in[i].jsonl, in[i].file_bytes, in[i].size, in[i].cut_from, in[i].n_docs};
        bcast(d, v, sizeof v);
        in[i].jsonl = (int)v[0], in[i].file_bytes = v[1], in[i].size = v[2], in[i].cut_from = v[3], in[i].n_docs = v[4];
    }
    /* a given tokenizer is loaded before --out-dir is made (a bad one changes nothing); a trained one
       after (a long training must not end at an unwritable directory) */
    struct stat dst;
    const int made_out = r0 && stat(o->out_dir, &dst) != 0;
    zt_tokenizer *t = NULL;
    double train_mb = 0, train_s = 0;
    int trc = 0;
    if (!rc && o->tokenizer) {
        t = prep_load_tokenizer(o, &trc);
        rc = agree(d, t ? 0 : ZT_EXIT_USER);
    }
    if (!rc) rc = agree(d, r0 ? check_out_dir(o->out_dir) : 0);
    if (!rc && !o->tokenizer) {
        if (r0) t = train_tokenizer(o, in, &trc, &train_mb, &train_s);
        rc = agree(d, r0 && !t ? ZT_EXIT_USER : 0);
    }
    char path[4096], tmp[4200], local[512] = "", err[ERR_LEN];
    if (!rc && r0 && o->eot_between && zt_tokenizer_eot(t) == ZT_TOK_NO_EOT)
        rc = fail("%s: the tokenizer has no %s token (needed by --eot-between-docs)", o->tokenizer, ZT_TOK_EOT_TEXT);
    if (!rc && r0 && o->mlm) rc = prep_mlm_check(o, t);
    rc = agree(d, rc);
    int tok_saved = 0;
    snprintf(path, sizeof path, "%s/%s", o->out_dir, TOK_FILE);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (!rc && r0) {
        if (zt_tokenizer_save(t, tmp, err, sizeof err)) {
            rc = fail("%s", err);
            remove(tmp);
        } else {
            tok_saved = 1;
        }
    }
    rc = agree(d, rc);
    if (!rc && !o->tokenizer && d->size > 1) {
        zt_tokenizer *shared = share_tokenizer(d, tmp, local, sizeof local, &rc);
        if (!r0) t = shared;
        rc = agree(d, rc);
    }
    const char *tok_path = o->tokenizer ? o->tokenizer : r0 ? tmp : local;
    zt_shard_writer w[2];
    prep_packer pack[2];
    memset(pack, 0, sizeof pack); /* initialised on rank 0 only; the other ranks only pass them on */
    const char *names[3] = {"train.bin", "val.bin", TOK_FILE};
    int opened = 0;
    for (int k = 0; k < 2 && !rc && r0; k++) {
        char sp[4200];
        snprintf(sp, sizeof sp, "%s/%s.tmp", o->out_dir, names[k]);
        /* --mlm: examples of T tokens with a loss mask (0 on the padding) */
        if (zt_shard_writer_open2(&w[k], sp, zt_tokenizer_vocab_size(t), zt_tokenizer_eot(t), o->mlm,
                                  o->mlm ? (uint32_t)o->seq_len : 0, err, sizeof err))
            rc = fail("%s", err);
        else opened = k + 1;
        if (opened == k + 1 && o->mlm) prep_pack_init(&pack[k], &w[k], (uint32_t)o->seq_len, zt_tokenizer_config(t));
    }
    rc = agree(d, rc);
    prep_result res;
    memset(&res, 0, sizeof res);
    if (!rc)
        rc = prep_encode(o, d, in, o->n_inputs, t, tok_path, o->tokenizer ? o->merges : NULL, w, o->mlm ? pack : NULL,
                         &res);
    for (int k = 0; k < opened && o->mlm; k++) {
        if (!rc && prep_pack_finish(&pack[k], err, sizeof err)) rc = fail("%s", err);
        res.written[k] = pack[k].sequences * (uint64_t)o->seq_len;
        prep_pack_free(&pack[k]);
    }
    if (r0) {
        for (int k = 0; k < opened; k++)
            if (zt_shard_writer_close(&w[k], err, sizeof err) && !rc) rc = fail("%s", err);
        /* shards first, the tokenizer last: train.bin, val.bin, tokenizer.zttok */
        int prc = publish(o->out_dir, names, opened, rc == 0);
        if (tok_saved) {
            int pubrc = publish(o->out_dir, names + 2, 1, rc == 0 && prc == 0);
            if (!rc) rc = prc ? prc : pubrc;
        } else if (!rc) {
            rc = prc;
        }
        if (!rc) summary(o, t, &res, train_mb, train_s);
        if (!rc && o->mlm) prep_mlm_summary(o, t, pack);
        if (rc && made_out) rmdir(o->out_dir); /* a failed prepare leaves no new (empty) directory */
    }
    rc = agree(d, rc);
    if (*local) unlink(local);
    free(res.unigram);
    free(in);
    zt_tokenizer_free(t);
    return rc;
}

/* ---------------------------------------------------------------- modes */

static int run_pretokenize(const opts *o, const prep_dist *d) {
    if (!o->text_out) return fail("--pretokenize FILE needs --text-out OUT");
    return d->rank == 0 ? prep_cmd_pretokenize(o) : 0;
}

static int run_codec(const opts *o, const prep_dist *d) {
    if (!o->tokenizer) return fail("--encode/--decode need --tokenizer PATH");
    if (o->encode && !o->ids_out) return fail("--encode FILE needs --ids-out OUT");
    if (o->decode && !o->text_out) return fail("--decode SHARD needs --text-out OUT");
    if (o->encode && o->decode) return fail("--encode and --decode cannot be combined");
    if (d->rank != 0) return 0;
    return o->encode ? prep_cmd_encode(o) : prep_cmd_decode(o);
}

static int want_pretokenize(const opts *o) { return o->pretokenize != NULL; }
static int want_codec(const opts *o) { return o->encode || o->decode; }

/* the first mode whose test passes runs; the corpus mode is the default. A new mode: an entry here */
static const struct prep_mode {
    int (*wanted)(const opts *o);
    int (*run)(const opts *o, const prep_dist *d);
} MODES[] = {
    {want_pretokenize, run_pretokenize},
    {want_codec, run_codec},
    {NULL, run_corpus},
};

/* started by mpirun / srun (their variables): then MPI is initialised and the ranks share the work */
static int launched(void) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE", NULL};
    for (const char *const *v = vars; *v; v++)
        if (getenv(*v)) return 1;
    return 0;
}

int zt_cmd_prepare(int argc, char **argv) {
    if (zt_prepare_sft_wanted(argc, argv)) return zt_prepare_sft(argc, argv);
    prep_dist d = {0, 1, 0, 1};
    zt_dist dist;
    if (launched()) {
        zt_dist_init(&dist, NULL, NULL);
        d.rank = dist.rank;
        d.size = dist.size;
        d.mpi = 1;
        d.default_threads = zt_dist_default_threads(&dist);
    } else {
        cpu_set_t set;
        CPU_ZERO(&set);
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        d.default_threads = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : (int)(n > 0 ? n : 1);
        if (d.default_threads < 1) d.default_threads = 1;
    }
    prep_set_rank(d.rank);
    opts o;
    int rc = parse_opts(argc, argv, &o);
    if (rc < 0) rc = 0;
    else if (rc == 0) {
        for (size_t i = 0; i < sizeof MODES / sizeof *MODES; i++)
            if (!MODES[i].wanted || MODES[i].wanted(&o)) {
                rc = MODES[i].run(&o, &d);
                break;
            }
    }
    if (d.mpi) {
        rc = agree(&d, rc);
        zt_dist_finalize(&dist);
    }
    return rc;
}
