/* data_stream.c — training windows from text / JSONL files tokenized as they are read (data_stream.h). */
#include "io/data_stream.h"

#include <glob.h>
#include <stdlib.h>
#include <string.h>

#include "io/docsrc.h"
#include "io/tokenizer.h"
#include "util/util.h"

struct zt_stream {
    char **files;
    int n_files;
    char field[256];
    zt_tokenizer *tok;
    int T;
    uint32_t eot, doc_end;
    int mlm;                 /* masked LM: windows of T - 2 tokens framed [CLS] ... [SEP], documents joined by [SEP] */
    uint32_t cls, sep;
    zt_docsrc *src;          /* the open file (files[fi]), NULL before the first */
    uint64_t fi;             /* file of the next document to read */
    uint64_t emitted;        /* tokens framed so far in this epoch (none yet: no end-of-text before a document) */
    /* the tokens from the current position on, and where each of its documents came from */
    uint32_t *q;
    size_t q_len, q_cap, q_head;
    uint64_t head_file, head_doc, head_tok; /* the position of q[q_head] */
    int head_first;                         /* its document is the epoch's first with tokens */
    uint64_t *seg_file, *seg_doc, *seg_len; /* the documents in q, the head's first: file, doc, tokens */
    size_t n_seg, seg_cap, seg_head;
    uint64_t next_sample, epoch, epoch_first;
    zt_ids ids;
};

static void q_push(zt_stream *st, const uint32_t *v, size_t n) {
    if (st->q_head > 0 && st->q_head == st->q_len) st->q_head = st->q_len = 0;
    if (st->q_len + n > st->q_cap) {
        if (st->q_head > 0) { /* compact first */
            memmove(st->q, st->q + st->q_head, (st->q_len - st->q_head) * sizeof *st->q);
            st->q_len -= st->q_head;
            st->q_head = 0;
        }
        while (st->q_len + n > st->q_cap) st->q_cap = st->q_cap ? 2 * st->q_cap : 1 << 16;
        st->q = zt_realloc(st->q, st->q_cap * sizeof *st->q);
    }
    memcpy(st->q + st->q_len, v, n * sizeof *v);
    st->q_len += n;
}

static void seg_push(zt_stream *st, uint64_t f, uint64_t d, uint64_t n) {
    if (st->seg_head > 0 && st->seg_head == st->n_seg) st->seg_head = st->n_seg = 0;
    if (st->n_seg == st->seg_cap) {
        st->seg_cap = st->seg_cap ? 2 * st->seg_cap : 64;
        st->seg_file = zt_realloc(st->seg_file, st->seg_cap * sizeof(uint64_t));
        st->seg_doc = zt_realloc(st->seg_doc, st->seg_cap * sizeof(uint64_t));
        st->seg_len = zt_realloc(st->seg_len, st->seg_cap * sizeof(uint64_t));
    }
    st->seg_file[st->n_seg] = f;
    st->seg_doc[st->n_seg] = d;
    st->seg_len[st->n_seg] = n;
    st->n_seg++;
}

/* the framed tokens of one document into st->ids */
static void frame(zt_stream *st, const uint8_t *doc, size_t len) {
    st->ids.n = 0;
    if (st->mlm) { /* prepare --mlm's join: [SEP] between documents, no template ids or document ends */
        if (st->emitted > 0) zt_ids_push(&st->ids, st->sep);
        zt_tokenizer_reset(st->tok);
        zt_tokenizer_encode(st->tok, doc, len, &st->ids);
        if (st->ids.n == 1 && st->emitted > 0) st->ids.n = 0; /* an empty document adds no [SEP] */
        return;
    }
    if (st->doc_end == ZT_TOK_NO_EOT && st->eot != ZT_TOK_NO_EOT && st->emitted > 0) zt_ids_push(&st->ids, st->eot);
    zt_tokenizer_reset(st->tok);
    zt_tokenizer_encode(st->tok, doc, len, &st->ids);
    if (st->doc_end != ZT_TOK_NO_EOT) zt_ids_push(&st->ids, st->doc_end);
}

/* the tokens a window takes from the stream, and how far the next one starts: T + 1 at stride T, or (mlm) T - 2 at
   stride T - 2 */
static size_t win_len(const zt_stream *st) { return st->mlm ? (size_t)st->T - 2 : (size_t)st->T + 1; }
static size_t win_stride(const zt_stream *st) { return st->mlm ? (size_t)st->T - 2 : (size_t)st->T; }

/* reads the next document into the queue: 1, 0 at the end of the stream, -1 on error */
static int pull(zt_stream *st, char *err, size_t errlen) {
    for (;;) {
        if (!st->src) {
            if (st->fi >= (uint64_t)st->n_files) return 0;
            if (zt_docsrc_open(&st->src, st->files[st->fi], st->field, err, errlen)) return -1;
        }
        const uint8_t *doc;
        size_t len;
        const int r = zt_docsrc_next(st->src, &doc, &len, err, errlen);
        if (r < 0) return -1;
        if (r == 0) {
            zt_docsrc_close(st->src);
            st->src = NULL;
            st->fi++;
            continue;
        }
        frame(st, doc, len);
        if (st->ids.n == 0) continue; /* nothing to train on: a position never points into it */
        const int was_empty = st->q_head == st->q_len;
        const uint64_t d = zt_docsrc_index(st->src);
        q_push(st, st->ids.v, st->ids.n);
        if (was_empty) { /* the head is this document's first token */
            st->head_file = st->fi;
            st->head_doc = d;
            st->head_tok = 0;
            st->head_first = st->emitted == 0;
        }
        st->emitted += st->ids.n;
        seg_push(st, st->fi, d, st->ids.n);
        return 1;
    }
}

/* drops n tokens from the head, keeping its position */
static void q_drop(zt_stream *st, size_t n) {
    st->q_head += n;
    st->head_tok += n;
    /* the head's document is seg[seg_head]; move on while the head is past its end */
    while (st->seg_head < st->n_seg && st->head_tok >= st->seg_len[st->seg_head]) {
        st->head_tok -= st->seg_len[st->seg_head];
        st->seg_head++;
        if (st->seg_head < st->n_seg) {
            st->head_file = st->seg_file[st->seg_head];
            st->head_doc = st->seg_doc[st->seg_head];
            st->head_first = 0;
        }
    }
}

static void restart_epoch(zt_stream *st) {
    if (st->src) zt_docsrc_close(st->src);
    st->src = NULL;
    st->fi = 0;
    st->emitted = 0;
    st->q_head = st->q_len = 0;
    st->seg_head = st->n_seg = 0;
    st->head_file = st->head_doc = st->head_tok = 0;
}

/* makes the queue hold the window of sample next_sample (T+1 tokens), ending the epoch where the stream ends */
static int fill_window(zt_stream *st, char *err, size_t errlen) {
    int restarted = 0;
    for (;;) {
        /* mlm: a [SEP] that would start a window is left out (prepare --mlm's rule) */
        while (st->mlm && st->q_len > st->q_head && st->q[st->q_head] == st->sep) q_drop(st, 1);
        if (st->q_len - st->q_head >= win_len(st)) break;
        const int r = pull(st, err, errlen);
        if (r < 0) return 1;
        if (r == 0) {
            if (restarted || (st->next_sample == st->epoch_first && st->epoch == 0)) {
                zt_errf(err, errlen, "%s: too few tokens for one sequence of %d (+1) tokens in the whole stream",
                        st->files[0], st->T);
                return 1;
            }
            restart_epoch(st);
            st->epoch++;
            st->epoch_first = st->next_sample;
            restarted = 1;
        }
    }
    return 0;
}

static int advance_to(zt_stream *st, uint64_t s, char *err, size_t errlen) {
    if (s < st->next_sample) {
        zt_errf(err, errlen, "data stream: sample %llu asked after sample %llu (a stream is read in order)",
                (unsigned long long)s, (unsigned long long)st->next_sample);
        return 1;
    }
    while (st->next_sample < s) {
        if (fill_window(st, err, errlen)) return 1;
        q_drop(st, win_stride(st));
        st->next_sample++;
    }
    return fill_window(st, err, errlen);
}

int zt_stream_sample(zt_stream *st, uint64_t s, int32_t *inputs, int32_t *targets, char *err, size_t errlen) {
    if (advance_to(st, s, err, errlen)) return 1;
    const uint32_t *w = st->q + st->q_head;
    if (st->mlm) { /* [CLS] window [SEP]; the targets are the tokens themselves (core/model/mlm.h masks them) */
        for (int t = 0; t < st->T; t++)
            inputs[t] = targets[t] = (int32_t)(t == 0 ? st->cls : t == st->T - 1 ? st->sep : w[t - 1]);
        return 0;
    }
    for (int t = 0; t < st->T; t++) {
        inputs[t] = (int32_t)w[t];
        targets[t] = (int32_t)w[t + 1];
    }
    return 0;
}

int zt_stream_position(zt_stream *st, uint64_t s, zt_stream_pos *pos, char *err, size_t errlen) {
    if (advance_to(st, s, err, errlen)) return 1;
    *pos = (zt_stream_pos){.sample = s, .file = st->head_file, .doc = st->head_doc, .token = st->head_tok,
                           .epoch = st->epoch, .epoch_first = st->epoch_first, .first_doc = (uint64_t)st->head_first};
    return 0;
}

uint64_t zt_stream_next_sample(const zt_stream *st) { return st->next_sample; }
uint64_t zt_stream_epoch_first(const zt_stream *st) { return st->epoch_first; }

int zt_stream_restore(zt_stream *st, const zt_stream_pos *pos, char *err, size_t errlen) {
    restart_epoch(st);
    st->next_sample = pos->sample;
    st->epoch = pos->epoch;
    st->epoch_first = pos->epoch_first;
    if (pos->file >= (uint64_t)st->n_files) {
        zt_errf(err, errlen, "data stream: the checkpoint's position is in file %llu of %d (data.train has fewer files "
                "than the run that saved it)", (unsigned long long)pos->file + 1, st->n_files);
        return 1;
    }
    st->fi = pos->file;
    if (zt_docsrc_open(&st->src, st->files[st->fi], st->field, err, errlen)) return 1;
    if (zt_docsrc_seek(st->src, pos->doc, err, errlen)) return 1;
    st->emitted = pos->first_doc ? 0 : 1; /* framed as it was: with an end-of-text before it unless it was first */
    const int r = pull(st, err, errlen);
    if (r <= 0 || st->head_file != pos->file || st->head_doc != pos->doc || pos->token >= st->seg_len[st->seg_head]) {
        if (r >= 0)
            zt_errf(err, errlen, "%s: the checkpoint's position (document %llu, token %llu) is not in this file (the "
                    "data changed since the checkpoint was saved)", st->files[pos->file],
                    (unsigned long long)pos->doc + 1, (unsigned long long)pos->token);
        return 1;
    }
    q_drop(st, (size_t)pos->token);
    return fill_window(st, err, errlen);
}

int zt_stream_open(zt_stream **out, const char *pattern, const char *field, const char *tokenizer, int T, int mlm,
                   uint32_t model_vocab, char *err, size_t errlen) {
    *out = NULL;
    if (!tokenizer || !tokenizer[0]) {
        zt_errf(err, errlen, "data.stream = true needs data.tokenizer (a .zttok or tokenizer.json file to tokenize "
                "%s with)", pattern);
        return 1;
    }
    glob_t g;
    const int rc = glob(pattern, 0, NULL, &g);
    if (rc != 0 || g.gl_pathc == 0) {
        if (rc == 0) globfree(&g);
        zt_errf(err, errlen, "%s: no such text or JSONL file (data.stream = true reads them as they are)", pattern);
        return 1;
    }
    zt_stream *st = zt_calloc(1, sizeof *st);
    st->n_files = (int)g.gl_pathc;
    st->files = zt_calloc((size_t)st->n_files, sizeof *st->files);
    for (int i = 0; i < st->n_files; i++) {
        const size_t n = strlen(g.gl_pathv[i]) + 1;
        st->files[i] = zt_malloc(n);
        memcpy(st->files[i], g.gl_pathv[i], n);
    }
    globfree(&g);
    snprintf(st->field, sizeof st->field, "%s", field && field[0] ? field : "text");
    st->T = T;
    int bad = 0;
    for (int i = 0; i < st->n_files && !bad; i++)
        bad = zt_check_input_file(st->files[i], "a text or JSON Lines file", err, errlen);
    if (!bad && !(st->tok = zt_tokenizer_load(tokenizer, NULL, err, errlen))) bad = 1;
    if (!bad && zt_tokenizer_vocab_size(st->tok) > model_vocab) {
        zt_errf(err, errlen, "%s: tokenizer vocab size %u is larger than model.vocab_size %u", tokenizer,
                zt_tokenizer_vocab_size(st->tok), model_vocab);
        bad = 1;
    }
    if (!bad && mlm) {
        const zt_tok_config *tc = zt_tokenizer_config(st->tok);
        st->mlm = 1;
        st->cls = tc->cls;
        st->sep = tc->sep;
        if (st->cls == ZT_TOK_NO_EOT || st->sep == ZT_TOK_NO_EOT || T < 3) {
            zt_errf(err, errlen, "%s: a masked-LM stream needs the tokenizer's [CLS] and [SEP] (its post-processor) and "
                    "train.seq_len >= 3", tokenizer);
            bad = 1;
        }
    }
    if (!bad) {
        st->eot = zt_tokenizer_eot(st->tok);
        st->doc_end = zt_tokenizer_doc_end(st->tok);
        restart_epoch(st);
        bad = fill_window(st, err, errlen); /* a first window, or the error now rather than at step 1 */
    }
    if (bad) {
        zt_stream_close(st);
        return 1;
    }
    *out = st;
    return 0;
}

void zt_stream_close(zt_stream *st) {
    if (!st) return;
    if (st->src) zt_docsrc_close(st->src);
    for (int i = 0; i < st->n_files; i++) free(st->files[i]);
    free(st->files);
    zt_tokenizer_free(st->tok);
    free(st->q);
    free(st->seg_file);
    free(st->seg_doc);
    free(st->seg_len);
    zt_ids_free(&st->ids);
    free(st);
}
