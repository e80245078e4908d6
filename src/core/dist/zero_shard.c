/* zero_shard.c — ZeRO stage 3: each rank keeps only its shard of the flat parameters (fp32 in an fp32 run, the
 * 2-byte words of the precision otherwise) and the model fetches every part it reaches — wte, the tensors outside
 * the layers, one layer at a time with the next one's gather in flight — through the gathers here.
 *
 * A gather of flat elements [off, off + n) is grouped point-to-point (iface/comm.h has no v-collectives): every
 * rank r that owns part of the range, [r S, (r + 1) S) within it, sends that part to every rank. The bytes are the
 * parameters' own (fp32, or words that hold values of the precision, unpacked exactly), so a model computing on
 * gathered parameters gets the bits of one that holds them whole: stage 3 is bit-identical to stages 0-2.
 * Words land in a staging buffer laid out as the model's window (so a gather ahead and a blocking one never share
 * bytes) and are unpacked at finish. With optimizer+params offload the shard lives in host memory and this rank's
 * part is copied to backend memory (staged the same way) before it is sent. */
#include "core/dist/zero.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/util.h"

static size_t min_z(size_t a, size_t b) { return a < b ? a : b; }
static size_t max_z(size_t a, size_t b) { return a > b ? a : b; }
/* on the wire: words as bytes (ZT_U8), fp32 as ZT_F32 */
static size_t wire_count(size_t elems, size_t es) { return es == 2 ? elems * 2 : elems; }
static zt_dtype wire_type(size_t es) { return es == 2 ? ZT_U8 : ZT_F32; }

/* test hook: ZTRAIN_TEST_KILL_GATHER=K,R: rank R exits (as if killed) when it starts its K-th gather */
static void maybe_die(zt_zero *z) {
    static long k = -2;
    static int r = -1;
    if (k == -2) {
        const char *e = getenv("ZTRAIN_TEST_KILL_GATHER");
        k = e ? atol(e) : -1;
        r = e && strchr(e, ',') ? atoi(strchr(e, ',') + 1) : 0;
    }
    if (k >= 0 && z->rank == r && z->gathers_done == k) _exit(137);
}

static int gather_start(void *ctx, float *dst, size_t off, size_t n) {
    zt_zero *z = ctx;
    zt_backend *be = z->be;
    zt_comm *cm = z->comm;
    maybe_die(z);
    z->gathers_done++;
    int t = 0;
    while (t < ZT_ZERO_GATHERS && z->gathers[t].used) t++;
    ZT_ASSERT(t < ZT_ZERO_GATHERS);
    zt_zero_gather *g = &z->gathers[t];
    memset(g, 0, sizeof *g);
    g->used = 1;
    z->gather_bytes += (double)n * z->pes;
    g->dst = dst;
    g->n = n;
    const size_t es = z->pes, S = z->plan.shard;
    /* where the bytes land (words: staging at the window's offset, or a buffer of their own) and, with the shard in
       host memory, where this rank's part is staged to be sent */
    const int in_win = dst >= z->wbase && dst + n <= z->wbase + z->wlen;
    const size_t woff = in_win ? (size_t)(dst - z->wbase) : 0;
    char *recv = (char *)dst;
    if (es == 2) {
        g->temp = !in_win;
        g->words = in_win ? (void *)(z->gstage + woff) : be->i->alloc(be, n * 2);
        recv = g->words;
    }
    const size_t a = max_z(off, z->lo), b = min_z(off + n, z->hi);
    const char *mine = (const char *)z->pshard + (a - z->lo) * es;
    char *tmp_send = NULL;
    if (a < b && z->offload == 2) { /* the shard is in host memory */
        char *st = in_win ? (char *)z->sendstage + woff * es + (a - off) * es : (tmp_send = be->i->alloc(be, (b - a) * es));
        be->i->to_device(be, st, mine, (b - a) * es);
        mine = st;
    }
    cm->i->group_start(cm);
    for (int r = 0; r < z->N; r++) {
        const size_t ra = max_z(off, (size_t)r * S), rb = min_z(off + n, (size_t)(r + 1) * S);
        if (ra < rb) cm->i->recv(cm, recv + (ra - off) * es, wire_count(rb - ra, es), wire_type(es), r);
    }
    if (a < b)
        for (int r = 0; r < z->N; r++) cm->i->send(cm, mine, wire_count(b - a, es), wire_type(es), r);
    cm->i->group_end(cm);
    g->ev = cm->i->record(cm);
    if (tmp_send) { /* its bytes must have left before the buffer goes */
        cm->i->wait(cm, g->ev);
        be->i->free(be, tmp_send);
    }
    return t;
}

static void gather_finish(void *ctx, int t) {
    zt_zero *z = ctx;
    zt_zero_gather *g = &z->gathers[t];
    ZT_ASSERT(t >= 0 && t < ZT_ZERO_GATHERS && g->used);
    const double t0 = zt_now();
    z->comm->i->wait(z->comm, g->ev);
    z->gather_wait_s += zt_now() - t0;
    if (g->words) {
        z->be->i->unpack16(z->be, g->dst, g->words, g->n, z->prec);
        if (g->temp) z->be->i->free(z->be, g->words);
    }
    g->used = 0;
}

void zt_zero_shard_init(zt_zero *z, zt_model *m) {
    zt_backend *be = z->be;
    z->pes = z->prec != ZT_PREC_FP32 ? 2 : sizeof(float);
    const size_t S = z->plan.shard;
    z->wbase = m->wbuf;
    z->wlen = zt_model_shard_window_elems(&m->s);
    if (z->offload == 2) /* fp32: the host's master weights are the shard */
        z->pshard = z->pes == 4 ? (void *)z->h_master : be->i->host_alloc ? be->i->host_alloc(be, S * 2) : zt_calloc(S, 2);
    else {
        z->pshard = be->i->alloc(be, S * z->pes);
        be->i->zero(be, z->pshard, S * z->pes);
    }
    if (z->pes == 2) z->gstage = be->i->alloc(be, z->wlen * 2);
    if (z->offload == 2) z->sendstage = be->i->alloc(be, z->wlen * z->pes);
    m->src = (zt_param_src){gather_start, gather_finish, z};
}

void zt_zero_shard_free(zt_zero *z) {
    zt_backend *be = z->be;
    if (z->offload == 2) {
        if (z->pes == 2 && be->i->host_free) be->i->host_free(be, z->pshard);
        else if (z->pes == 2) free(z->pshard);
    } else if (z->pshard) be->i->free(be, z->pshard);
    if (z->gstage) be->i->free(be, z->gstage);
    if (z->sendstage) be->i->free(be, z->sendstage);
    z->pshard = NULL;
}

void zt_zero_shard_publish(zt_zero *z, zt_model *m) {
    if (z->master) z->be->i->pack16(z->be, z->pshard, z->master, z->plan.shard, z->prec);
    zt_model_params_changed(m);
}
