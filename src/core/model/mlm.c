/* mlm.c — the masked-LM masks (mlm.h). */
#include "core/model/mlm.h"

#include <math.h>

#include "iface/op_math.h"

static uint32_t frac24(double x) { return x >= 1.0 ? (1u << 24) : (uint32_t)floor(x * 16777216.0); }

void zt_mlm_init(zt_mlm *o, const zt_config *c, uint64_t seed) {
    zt_model_shape s;
    char err[256];
    zt_config_shape(c, &s, err, sizeof err); /* validated before */
    o->seed = seed;
    o->sel = frac24(c->mlm.prob);
    o->msk = frac24(c->mlm.mask_frac);
    o->rnd = frac24(c->mlm.mask_frac + c->mlm.random_frac);
    o->mask_id = c->mlm.mask_id;
    o->vocab = c->model.vocab_size;
    o->special[0] = s.pad_id;
    o->special[1] = c->mlm.cls_id;
    o->special[2] = c->mlm.sep_id >= 0 ? c->mlm.sep_id : s.sep_id;
    o->special[3] = c->mlm.mask_id;
}

static uint64_t draw(const zt_mlm *o, uint64_t s, int t, uint64_t k) {
    return zt_mix64(o->seed ^ zt_mix64(s * 0x9E3779B97F4A7C15ull + (uint64_t)t * 0xD1B54A32D192ED03ull + k));
}

int zt_mlm_apply(const zt_mlm *o, uint64_t s, int32_t *tokens, int32_t *targets, int T) {
    int n = 0;
    for (int t = 0; t < T; t++) {
        const int32_t tok = tokens[t];
        int special = targets[t] < 0;
        for (int k = 0; k < 4; k++) special |= tok == o->special[k];
        if (special || (uint32_t)(draw(o, s, t, 1) >> 40) >= o->sel) {
            targets[t] = -1;
            continue;
        }
        targets[t] = tok;
        n++;
        const uint32_t u = (uint32_t)(draw(o, s, t, 2) >> 40);
        if (u < o->msk) tokens[t] = o->mask_id;
        else if (u < o->rnd) tokens[t] = (int32_t)(draw(o, s, t, 3) % (uint64_t)o->vocab);
    }
    return n;
}
