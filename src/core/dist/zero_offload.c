/* zero_offload.c — zero.offload: this rank's master weights and Adam moments in host memory and the AdamW update
 * computed there by a cpu backend (its threads, its vectorised AdamW: the element is iface/op_math.h's, the same
 * function every backend's AdamW computes, so the update is bit-identical to the device's). Per update: the reduced
 * gradient shard is copied down, the host updates, and the parameters are published — copied up and all-gathered at
 * stages 1-2 (rounded to the precision on the host, or packed into 2-byte words), copied into the parameter shard at
 * stage 3 (optimizer+params: the shard itself is host memory and the gathers send from it).
 * On the cpu backend the state is host memory already: zt_zero_offload_of says 0 and the run says so. */
#include "core/dist/zero.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/dist/backend_factory.h"
#include "util/util.h"

void zt_zero_offload_init(zt_zero *z, const zt_config *c) {
    z->offload = zt_zero_offload_of(c);
    if (!z->offload) return;
    char err[ZT_ERR_BUF];
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = c->train.threads > 0 ? c->train.threads : (int)(cpus / z->N > 0 ? cpus / z->N : 1);
    if (!(z->host_be = zt_backend_create("cpu", threads, err, sizeof err))) zt_panic(__FILE__, __LINE__, "%s", err);
    const size_t S = z->plan.shard;
    float **bufs[5] = {&z->h_master, &z->h_m, &z->h_v, &z->h_grad, &z->h_pub};
    const size_t pub = zt_zero_offload_pub_bytes(z->stage, z->prec, zt_model_opts_from_config(c).params16, z->offload, S);
    for (int i = 0; i < 5; i++) { /* page-locked where the backend has it (a GPU) */
        const size_t bytes = i == 4 ? pub : S * sizeof(float);
        if (!bytes) continue;
        *bufs[i] = z->be->i->host_alloc ? z->be->i->host_alloc(z->be, bytes) : zt_calloc(bytes, 1);
    }
}

void zt_zero_offload_free(zt_zero *z) {
    if (!z->offload) return;
    float *bufs[5] = {z->h_master, z->h_m, z->h_v, z->h_grad, z->h_pub};
    for (int i = 0; i < 5; i++) {
        if (!bufs[i]) continue;
        if (z->be->i->host_free) z->be->i->host_free(z->be, bufs[i]);
        else free(bufs[i]);
    }
    if (z->init_tmp && z->init_tmp != z->acc) z->be->i->free(z->be, z->init_tmp);
    zt_backend_destroy(z->host_be);
    z->host_be = NULL;
}

void zt_zero_offload_publish(zt_zero *z, zt_model *m) {
    zt_backend *be = z->be, *hb = z->host_be;
    const size_t S = z->plan.shard;
    if (z->stage == 3) {
        if (z->pes == 2) { /* the words: packed on the host (as round_to rounds), into the shard */
            void *w = z->offload == 2 ? z->pshard : (void *)z->h_pub;
            hb->i->pack16(hb, w, z->h_master, S, z->prec);
            if (z->offload == 1) be->i->to_device(be, z->pshard, w, S * 2);
        } else if (z->offload == 1) {
            be->i->to_device(be, z->pshard, z->h_master, S * sizeof(float));
        } /* fp32 with optimizer+params: the master weights are the shard */
        be->i->sync(be);
        zt_model_params_changed(m);
        return;
    }
    if (m->params16) {
        hb->i->pack16(hb, z->h_pub, z->h_master, S, z->prec);
        be->i->to_device(be, m->params16 + z->lo, z->h_pub, S * 2);
        if (z->N > 1) z->comm->i->all_gather(z->comm, m->params16 + z->lo, m->params16, S * 2, ZT_U8);
        zt_model_params_changed(m);
        return;
    }
    const float *src = z->h_master;
    if (z->prec != ZT_PREC_FP32) { /* the working parameters are the master weights rounded */
        memcpy(z->h_pub, z->h_master, S * sizeof(float));
        hb->i->round_to(hb, z->h_pub, S, z->prec);
        src = z->h_pub;
    }
    float *tp = zt_model_tparams(m);
    be->i->to_device(be, tp + z->lo, src, S * sizeof(float));
    if (z->N > 1) z->comm->i->all_gather(z->comm, tp + z->lo, tp, S, ZT_F32);
    be->i->sync(be);
}

void zt_zero_offload_master_init(zt_zero *z, zt_model *m) {
    const float *src = z->init_tmp ? z->init_tmp : zt_model_tparams(m) + z->lo;
    z->be->i->to_host(z->be, z->h_master, src, z->plan.shard * sizeof(float));
    z->be->i->sync(z->be);
    if (z->init_tmp && z->init_tmp != z->acc) z->be->i->free(z->be, z->init_tmp);
    z->init_tmp = NULL;
    zt_zero_offload_publish(z, m);
}

void zt_zero_offload_update(zt_zero *z, zt_model *m, const float *grad, const zt_adamw_hp *hp) {
    const double t0 = zt_now();
    float hyper[ZT_HYPER_N];
    z->be->i->to_host(z->be, z->h_grad, grad, z->plan.shard * sizeof(float));
    z->be->i->to_host(z->be, hyper, z->hyper, sizeof hyper);
    z->be->i->sync(z->be);
    zt_adamw_update(z->host_be, zt_model_ttable(m), z->lo, z->hi, z->h_master, z->h_grad, z->h_m, z->h_v, hp, hyper);
    zt_zero_offload_publish(z, m);
    z->offload_s += zt_now() - t0;
}
