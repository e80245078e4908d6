/* prepare_pipe.c — the corpus encoder of `ztrain prepare`: documents in, framed token ids out, on any
 * number of threads and ranks with the same bytes out.
 *
 * Work units. Every rank reads every input (docsrc: text, JSON Lines, gzip, zstd) and cuts the stream of
 * documents into the same sequence of units: documents are appended to a unit until it holds --chunk-kb
 * bytes, and a longer document is cut inside, at a cut-safe place only (below). Unit i belongs to rank
 * i mod R; a rank keeps its own units (the others' bytes are dropped) and encodes them on its threads,
 * each with its own tokenizer loaded from the same file. The units depend on the data and --chunk-kb
 * alone, so the ids of each unit, and their order, do not depend on the thread or rank count.
 *
 * Cut-safe places (tokenizers with byte-level BPE and a regex pre-tokenizer and no prefix: GPT-2's,
 * Llama 3's, Qwen2's; a SentencePiece-style tokenizer's documents are never cut): before a space that
 * has an ASCII letter on both sides ("a b" cut as "a" | " b"). Each piece is encoded as a document of its
 * own; the template's begin ids are kept for a document's first piece only and its end ids for the last.
 * Why the ids equal the whole document's: none of these regexes looks behind, so the matches after the
 * space are those of the piece alone; the match that covers the letter before the space is a letter run
 * or a contraction, which ends at the space in both texts, and no earlier match attempt reads past that
 * letter except to test one character as "not a letter" (the space, or the end of the piece) or to try a
 * contraction that needs a letter there, which fails in both; whitespace runs and their (?!\S)
 * look-ahead never reach it (the byte before the space is a letter). NFC (Qwen2) composes nothing across
 * the place: both sides are ASCII. A stretch of 64 MiB without such a place is cut at a character
 * boundary anyway (there alone the ids may differ from an uncut document's, as with a pre-token longer
 * than ZT_PRETOK_MAX_CARRY in a streamed one).
 *
 * Ranks. Rank 0 writes: its own units and, in order, the others' (MPI_Isend of a header and the ids,
 * one message per unit; rank 0 receives them in unit order, so a rank's sends are matched in the order
 * it makes them). Rank 0 tells the others, by a control message, when a split has reached --max-tokens
 * (its units no longer need ids), when to stop (both splits full, or a failure) and that it is done.
 * A rank that stops sends what it has, then an END message carrying its status and error. Waits on MPI
 * poll with short sleeps, so a waiting rank leaves its cores to the encoding threads.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "cmd/prepare_internal.h"
#include "io/docsrc.h"

#include <math.h>
#include <mpi.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { TAG_DATA = 7301, TAG_IDS, TAG_END, TAG_CTRL };
enum { CTRL_SKIP_TRAIN = 1, CTRL_SKIP_VAL = 2, CTRL_STOP = 4, CTRL_FINISH = 8 };
#define IDS_PIECE ((size_t)1 << 26)      /* ids per MPI message */
#define MAX_UNIT ((size_t)64 << 20)       /* bytes of a document piece at most (when there is no cut-safe place) */
#define MAX_SEGS 65536                    /* documents in a unit at most */

typedef struct seg {
    uint64_t off, len, n_ids;
    uint32_t split, start, end, pad;      /* start / end: the document's first / last piece */
} seg;

typedef struct unit_hdr {
    uint64_t idx, n_segs, n_ids, in_pos, text;
} unit_hdr;

typedef struct unit {
    unit_hdr h;
    uint8_t *buf;
    size_t len, cap;
    seg *segs;
    size_t segs_cap;
    zt_ids ids;
    int done, sending;
    uint8_t *msg;                         /* header + segs, as sent */
    size_t msg_cap;
    MPI_Request *reqs;
    int n_reqs, reqs_cap;
} unit;

typedef struct pipe_t {
    const prep_opts *o;
    const prep_dist *d;
    int R, rank;
    /* threads */
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    unit **q;
    size_t q_head, q_n, q_cap;
    int quit, n_th, n_loaded, load_fail;
    pthread_t *th;
    const char *tok_path, *merges;
    atomic_int skip;                      /* bit k: split k needs no ids */
    uint32_t n_begin, n_end;
    int strip;                            /* --mlm: the template's ids left out of every piece (the packer frames) */
    /* this rank's units in flight, oldest first */
    unit *ring;
    size_t ring_cap, ring_head, ring_n;
    /* the unit being filled */
    unit cur;
    uint64_t next_idx;
    size_t target, scan;
    int cuttable, in_doc;
    uint64_t in_base, in_pos;
    /* rank 0: the writer */
    uint64_t next_write;
    zt_shard_writer *w;
    prep_packer *pack;                    /* --mlm: the ids go to the packers, which write w */
    uint64_t cap[2], written[2], docs[2], text_done;
    int capped[2];
    uint64_t *unigram;
    uint32_t eot, doc_end;
    unit rx;                              /* a unit received */
    int *ended;
    int ctrl_buf[64];
    MPI_Request ctrl_req[64];
    int n_ctrl;
    /* other ranks */
    int stop_seen, finish_seen;
    /* status */
    int fail, stopping;
    char err[PREP_ERR_LEN];
    prep_progress prog;
} pipe_t;

static void set_fail(pipe_t *p, const char *msg) {
    if (!p->fail) snprintf(p->err, sizeof p->err, "%s", msg);
    p->fail = 1;
    p->stopping = 1;
}

/* ---------------------------------------------------------------- waiting on MPI */

static void nap(int *spins) {
    if (++*spins < 50) {
        sched_yield();
    } else {
        struct timespec ts = {0, 200 * 1000};
        nanosleep(&ts, NULL);
    }
}

static void wait_all(int n, MPI_Request *r) {
    int spins = 0, flag = 0;
    while (n > 0) {
        MPI_Testall(n, r, &flag, MPI_STATUSES_IGNORE);
        if (flag) return;
        nap(&spins);
    }
}

/* a message from src with tag (MPI_ANY_TAG: any): its status; block = 0: returns 0 when none is there */
static int probe(int src, int tag, int block, MPI_Status *st) {
    int spins = 0, flag = 0;
    for (;;) {
        MPI_Iprobe(src, tag, MPI_COMM_WORLD, &flag, st);
        if (flag || !block) return flag;
        nap(&spins);
    }
}

static void recv_bytes(void *buf, size_t n, int src, int tag) {
    MPI_Request r;
    MPI_Irecv(buf, (int)n, MPI_BYTE, src, tag, MPI_COMM_WORLD, &r);
    wait_all(1, &r);
}

/* ---------------------------------------------------------------- threads */

static void encode_unit(pipe_t *p, zt_tokenizer *t, unit *u) {
    const int skip = atomic_load(&p->skip);
    u->ids.n = 0;
    for (uint64_t k = 0; k < u->h.n_segs; k++) {
        seg *s = &u->segs[k];
        const size_t before = u->ids.n;
        if (!(skip >> s->split & 1)) {
            zt_tokenizer_encode(t, u->buf + s->off, (size_t)s->len, &u->ids);
            if (!s->end || p->strip) u->ids.n -= p->n_end;
            if ((!s->start || p->strip) && p->n_begin) {
                memmove(u->ids.v + before, u->ids.v + before + p->n_begin,
                        (u->ids.n - before - p->n_begin) * sizeof *u->ids.v);
                u->ids.n -= p->n_begin;
            }
        }
        s->n_ids = u->ids.n - before;
    }
    u->h.n_ids = u->ids.n;
}

static void *worker(void *arg) {
    pipe_t *p = arg;
    char err[PREP_ERR_LEN];
    zt_tokenizer *t = zt_tokenizer_load(p->tok_path, p->merges, err, sizeof err);
    pthread_mutex_lock(&p->mu);
    if (!t && !p->load_fail) {
        p->load_fail = 1;
        set_fail(p, err);
    }
    p->n_loaded++;
    pthread_cond_broadcast(&p->done);
    pthread_mutex_unlock(&p->mu);
    if (!t) return NULL;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        while (p->q_n == 0 && !p->quit) pthread_cond_wait(&p->work, &p->mu);
        if (p->q_n == 0) {
            pthread_mutex_unlock(&p->mu);
            break;
        }
        unit *u = p->q[p->q_head];
        p->q_head = (p->q_head + 1) % p->q_cap;
        p->q_n--;
        pthread_mutex_unlock(&p->mu);
        encode_unit(p, t, u);
        pthread_mutex_lock(&p->mu);
        u->done = 1;
        pthread_cond_broadcast(&p->done);
        pthread_mutex_unlock(&p->mu);
    }
    zt_tokenizer_free(t);
    return NULL;
}

static void wait_done(pipe_t *p, unit *u) {
    pthread_mutex_lock(&p->mu);
    while (!u->done) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

static int is_done(pipe_t *p, unit *u) {
    pthread_mutex_lock(&p->mu);
    int d = u->done;
    pthread_mutex_unlock(&p->mu);
    return d;
}

/* ---------------------------------------------------------------- rank 0: the writer */

static void send_ctrl(pipe_t *p, int r, int bits) {
    if (p->n_ctrl == (int)(sizeof p->ctrl_buf / sizeof *p->ctrl_buf)) {
        wait_all(p->n_ctrl, p->ctrl_req);
        p->n_ctrl = 0;
    }
    p->ctrl_buf[p->n_ctrl] = bits;
    MPI_Isend(&p->ctrl_buf[p->n_ctrl], 1, MPI_INT, r, TAG_CTRL, MPI_COMM_WORLD, &p->ctrl_req[p->n_ctrl]);
    p->n_ctrl++;
}

static void ctrl_all(pipe_t *p, int bits) {
    for (int r = 1; r < p->R; r++) send_ctrl(p, r, bits);
}

static void put(pipe_t *p, int k, const uint32_t *ids, size_t n) {
    if (p->capped[k] || p->fail) return;
    size_t m = n;
    if (p->cap[k] && p->written[k] + m >= p->cap[k]) {
        m = (size_t)(p->cap[k] - p->written[k]);
        p->capped[k] = 1;
    }
    char err[PREP_ERR_LEN];
    if (m && (p->pack ? prep_pack_ids(&p->pack[k], ids, m, err, sizeof err)
                      : zt_shard_writer_append(&p->w[k], ids, m, err, sizeof err))) {
        set_fail(p, err);
        return;
    }
    if (k == 0)
        for (size_t i = 0; i < m; i++) p->unigram[ids[i]]++;
    p->written[k] += m;
    if (p->capped[k]) { /* nobody needs this split's ids any more; both full: the end */
        atomic_fetch_or(&p->skip, 1 << k);
        ctrl_all(p, k ? CTRL_SKIP_VAL : CTRL_SKIP_TRAIN);
        if (p->capped[0] && p->capped[1]) p->stopping = 1;
    }
}

/* documents as the tokenizer frames them: its template ids come with each document's ids, its
   document end (Qwen2's <|endoftext|>) after it, else with --eot-between-docs <|endoftext|> between two */
static void write_unit(pipe_t *p, const unit_hdr *h, const seg *segs, const uint32_t *ids) {
    for (uint64_t i = 0; i < h->n_segs; i++) {
        const seg *s = &segs[i];
        const int k = (int)s->split;
        if (s->start && !p->capped[k]) {
            if (p->pack) prep_pack_doc(&p->pack[k]);
            if (p->o->eot_between && p->docs[k] > 0 && p->doc_end == ZT_TOK_NO_EOT) put(p, k, &p->eot, 1);
            p->docs[k]++;
        }
        put(p, k, ids, (size_t)s->n_ids);
        ids += s->n_ids;
        if (s->end && p->doc_end != ZT_TOK_NO_EOT) put(p, k, &p->doc_end, 1);
    }
    p->text_done += h->text;
    prep_prog_update(&p->prog, h->in_pos, p->text_done);
}

static void grow_unit(unit *u, size_t bytes, size_t segs, size_t ids) {
    if (bytes > u->cap) {
        u->cap = bytes + bytes / 2;
        u->buf = zt_realloc(u->buf, u->cap);
    }
    if (segs > u->segs_cap) {
        u->segs_cap = segs + segs / 2 + 16;
        u->segs = zt_realloc(u->segs, u->segs_cap * sizeof *u->segs);
    }
    if (ids > u->ids.cap) {
        u->ids.cap = ids;
        u->ids.v = zt_realloc(u->ids.v, ids * sizeof *u->ids.v);
    }
}

/* the next message of rank r: a unit into p->rx (1), or its END (0; an error when a unit was due); -1 when
   none is there (block = 0) */
static int recv_unit(pipe_t *p, int r, int block, int unit_due) {
    MPI_Status st;
    if (!probe(r, MPI_ANY_TAG, block, &st)) return -1;
    if (st.MPI_TAG == TAG_END) {
        char msg[4 + PREP_ERR_LEN];
        recv_bytes(msg, sizeof msg, r, TAG_END);
        p->ended[r] = 1;
        int status;
        memcpy(&status, msg, 4);
        msg[sizeof msg - 1] = 0;
        char why[PREP_ERR_LEN];
        if (status) memcpy(why, msg + 4, sizeof why);
        else snprintf(why, sizeof why, "prepare: rank %d ended before its last work unit", r);
        if (status || unit_due) set_fail(p, why);
        return 0;
    }
    int bytes;
    MPI_Get_count(&st, MPI_BYTE, &bytes);
    unit *u = &p->rx;
    grow_unit(u, 0, 0, 0);
    if ((size_t)bytes > u->msg_cap) {
        u->msg_cap = (size_t)bytes;
        u->msg = zt_realloc(u->msg, u->msg_cap);
    }
    recv_bytes(u->msg, (size_t)bytes, r, TAG_DATA);
    memcpy(&u->h, u->msg, sizeof u->h);
    grow_unit(u, 0, u->h.n_segs, u->h.n_ids + 1);
    memcpy(u->segs, u->msg + sizeof u->h, u->h.n_segs * sizeof *u->segs);
    for (uint64_t k = 0; k < u->h.n_ids; k += IDS_PIECE) {
        size_t n = u->h.n_ids - k < IDS_PIECE ? (size_t)(u->h.n_ids - k) : IDS_PIECE;
        recv_bytes(u->ids.v + k, n * sizeof *u->ids.v, r, TAG_IDS);
    }
    return 1;
}

/* ---------------------------------------------------------------- other ranks: sending */

static void start_send(unit *u) {
    const size_t bytes = sizeof u->h + u->h.n_segs * sizeof *u->segs;
    if (bytes > u->msg_cap) {
        u->msg_cap = bytes;
        u->msg = zt_realloc(u->msg, bytes);
    }
    memcpy(u->msg, &u->h, sizeof u->h);
    memcpy(u->msg + sizeof u->h, u->segs, u->h.n_segs * sizeof *u->segs);
    const int need = 1 + (int)((u->h.n_ids + IDS_PIECE - 1) / IDS_PIECE);
    if (need > u->reqs_cap) {
        u->reqs_cap = need;
        u->reqs = zt_realloc(u->reqs, (size_t)need * sizeof *u->reqs);
    }
    u->n_reqs = 0;
    MPI_Isend(u->msg, (int)bytes, MPI_BYTE, 0, TAG_DATA, MPI_COMM_WORLD, &u->reqs[u->n_reqs++]);
    for (uint64_t k = 0; k < u->h.n_ids; k += IDS_PIECE) {
        size_t n = u->h.n_ids - k < IDS_PIECE ? (size_t)(u->h.n_ids - k) : IDS_PIECE;
        MPI_Isend(u->ids.v + k, (int)(n * sizeof *u->ids.v), MPI_BYTE, 0, TAG_IDS, MPI_COMM_WORLD,
                  &u->reqs[u->n_reqs++]);
    }
    u->sending = 1;
}

static void poll_ctrl(pipe_t *p) {
    MPI_Status st;
    while (probe(0, TAG_CTRL, 0, &st)) {
        int bits;
        recv_bytes(&bits, sizeof bits, 0, TAG_CTRL);
        atomic_fetch_or(&p->skip, bits & (CTRL_SKIP_TRAIN | CTRL_SKIP_VAL));
        if (bits & CTRL_STOP) {
            p->stop_seen = 1;
            p->stopping = 1;
            atomic_fetch_or(&p->skip, CTRL_SKIP_TRAIN | CTRL_SKIP_VAL);
        }
        if (bits & CTRL_FINISH) p->finish_seen = 1;
    }
}

/* ---------------------------------------------------------------- the output side */

/* moves the output on by one unit: rank 0 writes the next unit (its own or received), another rank
   sends its oldest. block = 0: only if that needs no waiting. 1 when something was done. */
static int consume_one(pipe_t *p, int block) {
    if (p->rank == 0) {
        if (p->next_write >= p->next_idx) return 0;
        const int owner = (int)(p->next_write % (uint64_t)p->R);
        if (owner == 0) {
            unit *u = &p->ring[p->ring_head];
            if (!block && !is_done(p, u)) return 0;
            wait_done(p, u);
            write_unit(p, &u->h, u->segs, u->ids.v);
            p->ring_head = (p->ring_head + 1) % p->ring_cap;
            p->ring_n--;
        } else {
            if (p->ended[owner]) {
                set_fail(p, "prepare: a rank ended early");
                return 0;
            }
            int got = recv_unit(p, owner, block, !p->stopping);
            if (got < 0) return 0;
            if (got == 0) return 1;
            write_unit(p, &p->rx.h, p->rx.segs, p->rx.ids.v);
        }
        p->next_write++;
        return 1;
    }
    poll_ctrl(p);
    if (p->ring_n == 0) return 0;
    unit *u = &p->ring[p->ring_head];
    if (!u->sending) {
        if (!block && !is_done(p, u)) return 0;
        wait_done(p, u);
        start_send(u);
    }
    int flag = 0;
    MPI_Testall(u->n_reqs, u->reqs, &flag, MPI_STATUSES_IGNORE);
    if (!flag && !block) return 0;
    if (!flag) {
        int spins = 0;
        while (MPI_Testall(u->n_reqs, u->reqs, &flag, MPI_STATUSES_IGNORE), !flag) {
            poll_ctrl(p);
            nap(&spins);
        }
    }
    u->sending = 0;
    p->ring_head = (p->ring_head + 1) % p->ring_cap;
    p->ring_n--;
    return 1;
}

/* ---------------------------------------------------------------- the producer: documents into units */

static int is_alpha(uint8_t c) { return (uint8_t)((c | 32) - 'a') < 26; }

static void seg_add(unit *u, uint32_t split, int start) {
    grow_unit(u, 0, u->h.n_segs + 1, 0);
    seg *s = &u->segs[u->h.n_segs++];
    memset(s, 0, sizeof *s);
    s->off = u->len;
    s->split = split;
    s->start = (uint32_t)start;
}

/* unit cur is complete with its first `keep` bytes; cut: inside the open document, whose rest
   starts the next unit */
static void emit(pipe_t *p, size_t keep, int cut) {
    unit *c = &p->cur;
    const size_t rem = c->len - keep;
    seg *last = &c->segs[c->h.n_segs - 1];
    const uint32_t split = last->split;
    if (cut) last->len = keep - last->off;
    c->h.idx = p->next_idx;
    c->h.text = keep;
    c->h.in_pos = p->in_pos;
    int own = (int)(p->next_idx % (uint64_t)p->R) == p->rank;
    while (own && p->ring_n == p->ring_cap && !p->stopping) consume_one(p, 1);
    if (own && p->ring_n == p->ring_cap) own = 0; /* stopping, and no room: the unit is not needed */
    if (own) {
        unit *slot = &p->ring[(p->ring_head + p->ring_n) % p->ring_cap];
        unit tmp = *slot;
        *slot = *c;
        *c = tmp;
        grow_unit(c, rem, 0, 0);
        if (rem) memcpy(c->buf, slot->buf + keep, rem);
        slot->len = keep;
        slot->done = slot->sending = 0;
        p->ring_n++;
        pthread_mutex_lock(&p->mu);
        p->q[(p->q_head + p->q_n) % p->q_cap] = slot;
        p->q_n++;
        pthread_cond_signal(&p->work);
        pthread_mutex_unlock(&p->mu);
    } else {
        memmove(c->buf, c->buf + keep, rem);
    }
    c->len = rem;
    c->h.n_segs = 0;
    if (cut) {
        seg_add(c, split, 0);
        c->segs[0].off = 0;
        c->segs[0].len = rem;
    }
    p->next_idx++;
    p->scan = 0;
}

/* cuts the open document where it is cut-safe once the unit holds the target */
static void cuts(pipe_t *p) {
    for (;;) {
        unit *c = &p->cur;
        const seg *s = &c->segs[c->h.n_segs - 1];
        if (c->len < p->target + 2) return;
        size_t q = p->scan, lim = c->len - 1;
        if (q < p->target) q = p->target;
        if (q < s->off + 1) q = s->off + 1;
        if (lim > MAX_UNIT) lim = MAX_UNIT;
        const uint8_t *b = c->buf;
        for (; q < lim; q++)
            if (b[q] == ' ' && is_alpha(b[q - 1]) && is_alpha(b[q + 1])) break;
        if (q < lim) {
            emit(p, q, 1);
            continue;
        }
        p->scan = q;
        if (c->len < MAX_UNIT + 4) return;
        size_t at = MAX_UNIT;
        while (at > s->off + 1 && (b[at] & 0xC0) == 0x80) at--;
        emit(p, at, 1);
    }
}

static void doc_begin(pipe_t *p, uint32_t split) {
    seg_add(&p->cur, split, 1);
    p->in_doc = 1;
}

static void doc_bytes(pipe_t *p, const uint8_t *d, size_t n) {
    unit *c = &p->cur;
    grow_unit(c, c->len + n, 0, 0);
    memcpy(c->buf + c->len, d, n);
    c->len += n;
    c->segs[c->h.n_segs - 1].len += n;
    if (p->cuttable) cuts(p);
}

static void doc_end(pipe_t *p) {
    unit *c = &p->cur;
    c->segs[c->h.n_segs - 1].end = 1;
    p->in_doc = 0;
    if (c->len >= p->target || c->h.n_segs >= MAX_SEGS) emit(p, c->len, 0);
}

/* after each document or piece: write / send what is ready, hear rank 0 */
static void step(pipe_t *p) {
    while (consume_one(p, 0) > 0) {}
}

static int produce_text(pipe_t *p, zt_docsrc *src, const prep_input *in, char *err, size_t errlen) {
    prep_cut cut;
    prep_cut_start(&cut, in->size, in->cut_from);
    uint64_t off = 0;
    int open_split = -1;
    const uint8_t *piece;
    size_t n;
    int r = 0;
    while (!p->stopping && (r = zt_docsrc_read(src, &piece, &n, err, errlen)) == 1) {
        const uint64_t at = prep_cut_feed(&cut, off, piece, n);
        size_t i = 0;
        while (i < n) {
            const int k = off + i < at ? 0 : 1;
            size_t end = k == 0 && at < off + n ? (size_t)(at - off) : n;
            if (open_split != k) {
                if (open_split >= 0) doc_end(p);
                doc_begin(p, (uint32_t)k);
                open_split = k;
            }
            doc_bytes(p, piece + i, end - i);
            i = end;
        }
        off += n;
        p->in_pos = p->in_base + zt_docsrc_file_pos(src);
        step(p);
    }
    if (r < 0 && !p->stopping) return -1;
    if (open_split >= 0) doc_end(p);
    return 0;
}

static int produce_jsonl(pipe_t *p, zt_docsrc *src, const prep_input *in, char *err, size_t errlen) {
    const uint8_t *doc;
    size_t n;
    int r = 0;
    uint64_t k = 0;
    while (!p->stopping && (r = zt_docsrc_next(src, &doc, &n, err, errlen)) == 1) {
        doc_begin(p, k++ >= in->cut_from);
        doc_bytes(p, doc, n);
        p->in_pos = p->in_base + zt_docsrc_file_pos(src);
        doc_end(p);
        step(p);
    }
    return r < 0 && !p->stopping ? -1 : 0;
}

static void produce(pipe_t *p, const prep_input *in, int n_in) {
    char err[PREP_ERR_LEN];
    for (int i = 0; i < n_in && !p->stopping; i++) {
        zt_docsrc *src;
        if (zt_docsrc_open(&src, in[i].path, p->o->field, err, sizeof err)) {
            set_fail(p, err);
            break;
        }
        int rc = in[i].jsonl ? produce_jsonl(p, src, &in[i], err, sizeof err) : produce_text(p, src, &in[i], err, sizeof err);
        zt_docsrc_close(src);
        if (rc) set_fail(p, err);
        p->in_base += in[i].file_bytes;
    }
    if (p->cur.h.n_segs && !p->stopping) emit(p, p->cur.len, 0);
}

/* ---------------------------------------------------------------- the whole */

static void unit_free(unit *u) {
    free(u->buf);
    free(u->segs);
    zt_ids_free(&u->ids);
    free(u->msg);
    free(u->reqs);
}

/* everything in flight out (written, sent or dropped), every rank told and heard */
static void drain(pipe_t *p) {
    if (p->rank == 0) {
        if (!p->stopping)
            while (p->next_write < p->next_idx && !p->stopping) consume_one(p, 1);
        if (p->stopping) { /* stop early: drop what is in flight */
            atomic_fetch_or(&p->skip, CTRL_SKIP_TRAIN | CTRL_SKIP_VAL);
            ctrl_all(p, CTRL_STOP);
            for (; p->ring_n; p->ring_n--, p->ring_head = (p->ring_head + 1) % p->ring_cap)
                wait_done(p, &p->ring[p->ring_head]);
        }
        for (int r = 1; r < p->R; r++)
            while (!p->ended[r]) recv_unit(p, r, 1, 0);
        ctrl_all(p, CTRL_FINISH);
        wait_all(p->n_ctrl, p->ctrl_req);
        return;
    }
    while (p->ring_n) consume_one(p, 1);
    char msg[4 + PREP_ERR_LEN];
    memset(msg, 0, sizeof msg);
    int status = p->fail ? ZT_EXIT_USER : 0;
    memcpy(msg, &status, 4);
    if (p->fail) snprintf(msg + 4, PREP_ERR_LEN, "%s", p->err);
    MPI_Request r;
    MPI_Isend(msg, (int)sizeof msg, MPI_BYTE, 0, TAG_END, MPI_COMM_WORLD, &r);
    wait_all(1, &r);
    int spins = 0;
    while (!p->finish_seen) {
        poll_ctrl(p);
        if (!p->finish_seen) nap(&spins);
    }
}

static int cuttable(const zt_tokenizer *t) {
    const zt_tok_config *c = zt_tokenizer_config(t);
    return c->model == ZT_TOK_MODEL_BYTES && c->prefix == ZT_TOK_PREFIX_NONE && c->pretok != ZT_TOK_PRE_NONE;
}

int prep_encode(const prep_opts *o, const prep_dist *d, const prep_input *in, int n_in, const zt_tokenizer *t,
                const char *tok_path, const char *merges, zt_shard_writer *w, prep_packer *pack, prep_result *res) {
    pipe_t *p = zt_calloc(1, sizeof *p);
    p->o = o;
    p->d = d;
    p->R = d->size;
    p->rank = d->rank;
    p->tok_path = tok_path;
    p->merges = merges;
    p->n_th = o->threads > 0 ? o->threads : d->default_threads;
    const zt_tok_config *cfg = zt_tokenizer_config(t);
    p->n_begin = cfg->n_begin;
    p->n_end = cfg->n_end;
    p->eot = zt_tokenizer_eot(t);
    p->doc_end = pack ? ZT_TOK_NO_EOT : zt_tokenizer_doc_end(t); /* --mlm: [SEP] between documents instead */
    p->strip = pack != NULL;
    p->cuttable = cuttable(t);
    p->target = (size_t)o->chunk_kb * 1024;
    p->w = w;
    p->pack = pack;
    if (o->max_tokens) {
        p->cap[0] = (uint64_t)o->max_tokens;
        p->cap[1] = (uint64_t)ceil((double)o->max_tokens * o->val_fraction / (1.0 - o->val_fraction));
        if (p->cap[1] == 0) { /* --val-fraction 0: nothing for validation */
            p->capped[1] = 1;
            atomic_fetch_or(&p->skip, CTRL_SKIP_VAL);
        }
    }
    if (p->rank == 0) {
        p->unigram = zt_calloc(zt_tokenizer_vocab_size(t), sizeof *p->unigram);
        p->ended = zt_calloc((size_t)p->R, sizeof *p->ended);
    }
    p->ring_cap = (size_t)(4 * p->n_th);
    p->ring = zt_calloc(p->ring_cap, sizeof *p->ring);
    p->q_cap = p->ring_cap;
    p->q = zt_calloc(p->q_cap, sizeof *p->q);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->done, NULL);
    p->th = zt_calloc((size_t)p->n_th, sizeof *p->th);
    for (int i = 0; i < p->n_th; i++) pthread_create(&p->th[i], NULL, worker, p);
    pthread_mutex_lock(&p->mu); /* every thread's tokenizer, before any work */
    while (p->n_loaded < p->n_th) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);

    uint64_t total = 0;
    for (int i = 0; i < n_in; i++) total += in[i].file_bytes;
    prep_prog_start(&p->prog, "encoding", total);
    if (!p->fail) produce(p, in, n_in);
    drain(p);
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n_th; i++) pthread_join(p->th[i], NULL);

    int rc = p->fail ? ZT_EXIT_USER : 0;
    if (p->R > 1) {
        int all;
        MPI_Request r;
        MPI_Iallreduce(&rc, &all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &r);
        wait_all(1, &r);
        rc = all;
    }
    if (p->rank == 0 && p->fail) prep_fail("%s", p->err);
    if (p->rank == 0 && !rc) {
        char extra[96];
        uint64_t nt = p->written[0] + p->written[1];
        snprintf(extra, sizeof extra, ", %.2f bytes/token", nt ? (double)p->text_done / (double)nt : 0.0);
        p->prog.done = p->prog.text = p->text_done;
        res->secs = prep_prog_end(&p->prog, extra);
    }
    res->written[0] = p->written[0];
    res->written[1] = p->written[1];
    res->text_bytes = p->text_done;
    res->unigram = p->unigram;
    for (size_t i = 0; i < p->ring_cap; i++) unit_free(&p->ring[i]);
    unit_free(&p->cur);
    unit_free(&p->rx);
    free(p->ring);
    free(p->q);
    free(p->th);
    free(p->ended);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->done);
    free(p);
    return rc;
}

void prep_cut_start(prep_cut *c, uint64_t size, uint64_t cut_from) {
    c->from = cut_from;
    c->size = size;
    c->at = cut_from == 0 ? 0 : cut_from >= size + 1 ? size : UINT64_MAX;
}

uint64_t prep_cut_feed(prep_cut *c, uint64_t off, const uint8_t *p, size_t n) {
    if (c->at != UINT64_MAX) return c->at;
    const uint64_t from = c->from - 1; /* the first byte that may be the '\n' */
    if (off + n > from) {
        const size_t i = from > off ? (size_t)(from - off) : 0;
        const uint8_t *nl = memchr(p + i, '\n', n - i);
        if (nl) c->at = off + (uint64_t)(nl - p) + 1;
    }
    if (c->at == UINT64_MAX && off + n >= c->size) c->at = c->size;
    return c->at;
}
