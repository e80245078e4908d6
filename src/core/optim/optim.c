/* optim.c — AdamW, LR schedule, clipping. */
#include "core/optim/optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

double zt_lr_at(const zt_config *c, long step) {
    const double lr = c->train.lr, min_lr = c->train.min_lr;
    const long warm = c->train.warmup_steps, total = c->train.steps;
    if (step < warm) return lr * (double)(step + 1) / (double)warm;
    if (strcmp(c->train.schedule, "constant") == 0 || total <= warm + 1) return lr;
    double frac = (double)(step - warm) / (double)(total - warm - 1);
    if (frac > 1.0) frac = 1.0;
    if (strcmp(c->train.schedule, "linear") == 0) return lr - frac * (lr - min_lr);
    return min_lr + 0.5 * (1.0 + cos(M_PI * frac)) * (lr - min_lr);
}

void zt_adamw_hyper(const zt_adamw_hp *hp, long t, float lr, float loss_scale, float out[ZT_HYPER_N]) {
    out[ZT_HYPER_LR] = lr;
    out[ZT_HYPER_BC1] = 1.0f - powf(hp->beta1, (float)t);
    out[ZT_HYPER_BC2] = 1.0f - powf(hp->beta2, (float)t);
    out[ZT_HYPER_GRAD_SCALE] = 1.0f;
    out[ZT_HYPER_LOSS_SCALE] = loss_scale;
}

void zt_adamw_update(zt_backend *be, const zt_param_table *pt, size_t lo, size_t hi, float *param,
                     const float *grad, float *m, float *v, const zt_adamw_hp *hp, const float *hyper) {
    /* one call for the whole shard: the tensors' non-empty parts of [lo, hi) as segments, the same every step for
       a given (lo, hi) (a backend may cache its copy of the table) */
    zt_adamw_seg stack[256];
    zt_adamw_seg *segs = pt->n <= 256 ? stack : zt_malloc((size_t)pt->n * sizeof *segs);
    int ns = 0;
    for (int i = 0; i < pt->n; i++) {
        const zt_tensor_info *ti = &pt->t[i];
        size_t a = ti->offset > lo ? ti->offset : lo;
        size_t b = ti->offset + ti->numel < hi ? ti->offset + ti->numel : hi;
        if (a >= b) continue;
        segs[ns++] = (zt_adamw_seg){.offset = a - lo, .n = b - a, .weight_decay = ti->decay ? hp->weight_decay : 0.0f};
    }
    if (ns) be->i->adamw_multi(be, param, grad, m, v, segs, ns, hp->beta1, hp->beta2, hp->eps, hyper);
    if (segs != stack) free(segs);
}
