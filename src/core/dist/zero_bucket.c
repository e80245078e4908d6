/* zero_bucket.c — ZeRO-2 gradient buckets: contiguous whole-tensor ranges of the flat buffer in
 * backward order (wte alone as the last bucket: the LM head writes its gradient first and the
 * embedding finishes it last). Backward writes gradients straight into a ring of bucket buffers;
 * as soon as a bucket is final its reduction to the shard owners is posted (non-blocking) and
 * progressed at every layer boundary, overlapping the rest of backward. No rank ever holds the
 * full gradient: memory = shard accumulator + ring + wte's bucket.
 *
 * Ordered mode: each rank sends each owner its part of the bucket and receives every rank's part of
 * its own shard (one group of send/recv: an all-to-all of unequal pieces, as NCCL does it), and the
 * owner adds the N parts in rank order (the same additions as one rank accumulating alone); in bf16/fp16 the parts
 * cross as 2-byte words (zt_zero.wire16). Native:
 * one group of rooted reduces, one per owner of a part of the bucket. Completion is the
 * communicator's event recorded after the group (iface/comm.h). */
#include <stdlib.h>
#include <string.h>

#include "core/dist/zero.h"
#include "util/util.h"

typedef enum zt_bucket_state {
    ZT_BUCKET_IDLE,      /* not touched yet in this micro-step */
    ZT_BUCKET_OPEN,      /* backward is writing its gradients */
    ZT_BUCKET_POSTED,    /* final; its reduction is in flight */
    ZT_BUCKET_DONE,      /* reduced and added into the shard accumulator */
} zt_bucket_state;

typedef struct zt_bucket {
    int first, last;          /* tensor indices, inclusive */
    size_t lo, hi;            /* flat elements */
    int slot;                 /* ring slot, or ZT_ZERO_RING for wte */
    zt_bucket_state state;
    int in_flight;            /* a reduction was posted (N > 1) and is not yet seen complete */
    zt_comm_event ev;
    double t_post;
} zt_bucket;

size_t zt_zero_wte_bucket(const zt_param_table *pt) {
    if (pt->lora_per_layer) return 0;
    const zt_tensor_info *last = &pt->t[zt_param_layer_first(pt, 0) - 1]; /* wte, and wpe where there is one */
    return last->offset + last->numel;
}

/* a table's layer l: its first and last tensor (GPT-2's with ln_f in the last layer; an adapter table's) */
static void layer_range(const zt_param_table *pt, int L, int l, int *lo, int *hi) {
    const int P = pt->lora_per_layer;
    if (P) {
        *lo = l * P;
        *hi = l * P + P - 1;
        return;
    }
    *lo = zt_param_layer_first(pt, l);
    *hi = l == L - 1 ? pt->n - 1 : zt_param_layer_last(pt, l);
}

int zt_zero_bucket_layout(const zt_param_table *pt, double bucket_mb, int *first, int *last, size_t *max_bucket) {
    /* Buckets are whole layers, because backward announces progress at layer boundaries: at most
       one ring bucket is being written while the previous one is in flight. Consecutive layers
       (from the last) share a bucket while it stays within bucket_mb; ln_f goes with the last
       layer; wte + wpe form the final bucket with a buffer of its own. An adapter table (LoRA) has
       layers only. */
    const size_t cap = (size_t)(bucket_mb * (1 << 20) / sizeof(float));
    const int L = pt->lora_per_layer ? pt->n / pt->lora_per_layer : pt->n_layer;
    int nb = 0;
    size_t maxb = 0;
    int l = L - 1;
    while (l >= 0) {
        /* the last layer's bucket ends with ln_f */
        int lo_t, hi_t, lo_l, hi_l;
        layer_range(pt, L, l, &lo_t, &hi_t);
        size_t sz = pt->t[hi_t].offset + pt->t[hi_t].numel - pt->t[lo_t].offset;
        l--;
        while (l >= 0) {
            layer_range(pt, L, l, &lo_l, &hi_l);
            size_t more = pt->t[lo_t].offset - pt->t[lo_l].offset; /* layer l */
            if (sz + more > cap) break;
            sz += more;
            lo_t = lo_l;
            l--;
        }
        if (first) { first[nb] = lo_t; last[nb] = hi_t; }
        if (sz > maxb) maxb = sz;
        nb++;
    }
    if (pt->lora_per_layer) {
        if (max_bucket) *max_bucket = maxb;
        return nb;
    }
    if (first) { first[nb] = ZT_P_WTE; last[nb] = zt_param_layer_first(pt, 0) - 1; }
    nb++;
    if (max_bucket) *max_bucket = maxb;
    return nb;
}

static size_t isect(size_t a0, size_t a1, size_t b0, size_t b1) {
    size_t lo = a0 > b0 ? a0 : b0, hi = a1 < b1 ? a1 : b1;
    return hi > lo ? hi - lo : 0;
}

/* add a finished bucket's parts into the shard accumulator */
static void absorb(zt_zero *z, zt_bucket *b) {
    const size_t L = isect(b->lo, b->hi, z->lo, z->hi);
    if (L == 0) return;
    const size_t start = (b->lo > z->lo ? b->lo : z->lo) - z->lo;
    float *acc = z->acc + start;
    if (z->N == 1) {
        z->be->i->accumulate(z->be, acc, z->bucket_mem[b->slot] + (z->lo + start - b->lo), L);
    } else if (z->ordered) {
        zt_zero_add_parts(z, acc, z->recv_mem[b->slot], z->recv16_mem[b->slot], L);
    } else {
        z->be->i->accumulate(z->be, acc, z->recv_mem[b->slot], L);
    }
}

static void complete(zt_zero *z, zt_bucket *b, int block) {
    if (b->state != ZT_BUCKET_POSTED) return;
    if (b->in_flight) {
        /* MPI may do the reduction's work inside the query: that time is exposed too */
        double t0 = zt_now();
        int done = 1;
        if (!block && z->no_poll) return;
        if (block) z->comm->i->wait(z->comm, b->ev);
        else if ((done = z->comm->i->query(z->comm, b->ev))) z->comm->i->wait(z->comm, b->ev);
        z->comm_wait_s += zt_now() - t0;
        if (!done) return;
        b->in_flight = 0;
        z->comm_flight_s += zt_now() - b->t_post;
    }
    absorb(z, b);
    b->state = ZT_BUCKET_DONE;
}

static void post(zt_zero *z, zt_bucket *b) {
    b->state = ZT_BUCKET_POSTED;
    b->t_post = zt_now();
    if (z->N == 1) return; /* absorbed in complete() */
    const size_t S = z->plan.shard, L = isect(b->lo, b->hi, z->lo, z->hi);
    const float *send = z->bucket_mem[b->slot];
    float *recv = z->recv_mem[b->slot];
    zt_comm *c = z->comm;
    uint16_t *send16 = z->send16_mem[b->slot], *recv16 = z->recv16_mem[b->slot];
    if (z->wire16) z->be->i->pack16(z->be, send16, send, b->hi - b->lo, z->prec); /* exact: backward rounded them */
    c->i->group_start(c);
    for (int r = 0; r < z->N; r++) {
        /* the part of the bucket that rank r owns */
        const size_t r0 = (size_t)r * S, r1 = r0 + S, n = isect(b->lo, b->hi, r0, r1);
        const size_t off = n ? (b->lo > r0 ? b->lo : r0) - b->lo : 0;
        if (n && r != z->rank && z->ordered) z->grad_bytes_sent += (double)n * (z->wire16 ? 2 : sizeof(float));
        if (z->wire16) {
            if (n) c->i->send(c, send16 + off, n * 2, ZT_U8, r);
            if (L) c->i->recv(c, recv16 + (size_t)r * L, L * 2, ZT_U8, r);
        } else if (z->ordered) {
            if (n) c->i->send(c, send + off, n, ZT_F32, r);
            if (L) c->i->recv(c, recv + (size_t)r * L, L, ZT_F32, r);
        } else if (n) {
            c->i->reduce(c, send + off, recv, n, ZT_F32, r);
        }
    }
    c->i->group_end(c);
    b->ev = c->i->record(c);
    b->in_flight = 1;
}

static void begin_micro(zt_zero *z) {
    if (z->in_micro) return;
    z->in_micro = 1;
    if (z->next_mi == 0) z->be->i->zero(z->be, z->acc, z->plan.shard * sizeof(float));
    for (int k = 0; k < z->n_buckets; k++) z->buckets[k].state = ZT_BUCKET_IDLE;
}

static void hook_before(void *ctx, int first, int last) {
    zt_zero *z = ctx;
    begin_micro(z);
    for (int k = 0; k < z->n_buckets; k++) {
        zt_bucket *b = &z->buckets[k];
        if (b->state != ZT_BUCKET_IDLE || b->last < first || b->first > last) continue;
        /* the ring slot must be free: the bucket that used it before has to be absorbed */
        for (int j = 0; j < k; j++)
            if (z->buckets[j].slot == b->slot && z->buckets[j].state == ZT_BUCKET_POSTED) complete(z, &z->buckets[j], 1);
        b->state = ZT_BUCKET_OPEN;
    }
}

static void hook_after(void *ctx, int first) {
    zt_zero *z = ctx;
    for (int k = 0; k < z->n_buckets; k++) {
        zt_bucket *b = &z->buckets[k];
        if (b->state == ZT_BUCKET_OPEN && b->first >= first) post(z, b);
    }
    for (int k = 0; k < z->n_buckets; k++) complete(z, &z->buckets[k], 0); /* progress */
}

void zt_zero_buckets_init(zt_zero *z, zt_model *m, const zt_config *c) {
    const zt_param_table *pt = zt_model_ttable(m);
    int *first = zt_malloc((size_t)(pt->n + 1) * sizeof(int)), *last = zt_malloc((size_t)(pt->n + 1) * sizeof(int));
    size_t maxb = 0;
    z->n_buckets = zt_zero_bucket_layout(pt, c->zero.bucket_mb, first, last, &maxb);
    z->buckets = zt_calloc((size_t)z->n_buckets, sizeof(zt_bucket));
    const size_t S = z->plan.shard;
    for (int k = 0; k < z->n_buckets; k++) {
        zt_bucket *b = &z->buckets[k];
        b->first = first[k];
        b->last = last[k];
        b->lo = pt->t[b->first].offset;
        b->hi = pt->t[b->last].offset + pt->t[b->last].numel;
        b->slot = !pt->lora_per_layer && b->first == ZT_P_WTE ? ZT_ZERO_RING : k % ZT_ZERO_RING;
        for (int i = b->first; i <= b->last; i++) m->gptr[i] = NULL; /* set below, once buffers exist */
    }
    free(first);
    free(last);
    const size_t wte = zt_zero_wte_bucket(pt); /* with wpe; 0 for adapters */
    for (int s = 0; s <= ZT_ZERO_RING; s++) {
        size_t n = s == ZT_ZERO_RING ? wte : maxb;
        if (n == 0) continue;
        z->bucket_mem[s] = z->be->i->alloc(z->be, n * sizeof(float));
        if (z->N > 1) {
            size_t per = n < S ? n : S;
            if (z->wire16) { /* the packed bucket, every rank's packed part, one part decoded */
                z->send16_mem[s] = z->be->i->alloc(z->be, n * 2);
                z->recv16_mem[s] = z->be->i->alloc(z->be, (size_t)z->N * per * 2);
                z->recv_mem[s] = z->be->i->alloc(z->be, per * sizeof(float));
            } else {
                z->recv_mem[s] = z->be->i->alloc(z->be, (z->ordered ? (size_t)z->N : 1) * per * sizeof(float));
            }
        }
    }
    for (int k = 0; k < z->n_buckets; k++) {
        zt_bucket *b = &z->buckets[k];
        for (int i = b->first; i <= b->last; i++) m->gptr[i] = z->bucket_mem[b->slot] + (pt->t[i].offset - b->lo);
    }
    m->hooks.before = hook_before;
    m->hooks.after = hook_after;
    m->hooks.ctx = z;
}

void zt_zero_buckets_finish(zt_zero *z, zt_model *m, int mi) {
    (void)m;
    for (int k = 0; k < z->n_buckets; k++) complete(z, &z->buckets[k], 1);
    z->in_micro = 0;
    z->next_mi = (mi + 1) % z->micro_steps;
}

void zt_zero_buckets_free(zt_zero *z) {
    for (int s = 0; s <= ZT_ZERO_RING; s++) {
        if (z->bucket_mem[s]) z->be->i->free(z->be, z->bucket_mem[s]);
        if (z->recv_mem[s]) z->be->i->free(z->be, z->recv_mem[s]);
        if (z->send16_mem[s]) z->be->i->free(z->be, z->send16_mem[s]);
        if (z->recv16_mem[s]) z->be->i->free(z->be, z->recv16_mem[s]);
    }
    free(z->buckets);
    z->buckets = NULL;
}
