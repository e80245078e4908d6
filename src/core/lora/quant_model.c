/* quant_model.c — the frozen linear weights of a model through a quantised format (quant_model.h). */
#include "core/lora/quant_model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

int zt_quant_model_linear(zt_model *m, zt_quant_fmt fmt, zt_quant_report *r, char *err, size_t errn) {
    static const int linear[4] = {ZT_QKVW, ZT_ATTPW, ZT_FCW, ZT_FCPW};
    zt_backend *be = m->be;
    memset(r, 0, sizeof *r);
    size_t maxn = 0;
    for (int i = 0; i < m->table.n; i++)
        if (m->table.t[i].numel > maxn) maxn = m->table.t[i].numel;
    float *w = zt_malloc(maxn * sizeof(float)), *dq = zt_malloc(maxn * sizeof(float));
    void *blob = NULL;
    double num = 0, den = 0;
    int bad = 0;
    for (int l = 0; l < m->s.n_layer && !bad; l++)
        for (int k = 0; k < 4 && !bad; k++) {
            const zt_tensor_info *t = &m->table.t[zt_param_idx(&m->table, l, linear[k])];
            const zt_quant_layout L = zt_quant_plan(fmt, (size_t)t->shape[0], (size_t)t->shape[1]);
            blob = zt_realloc(blob, L.bytes);
            be->i->to_host(be, w, m->params + t->offset, t->numel * sizeof(float));
            be->i->sync(be);
            char why[160];
            if (zt_quant_encode(&L, w, blob, why, sizeof why)) {
                bad = zt_errf(err, errn, "%s: cannot quantise it to %s: %s", t->name, zt_quant_fmt_name(fmt), why);
                break;
            }
            zt_quant_decode(&L, blob, 0, L.n, dq);
            for (size_t j = 0; j < t->numel; j++) {
                const double d = (double)w[j] - dq[j];
                num += d * d;
                den += (double)w[j] * w[j];
            }
            be->i->to_device(be, m->params + t->offset, dq, t->numel * sizeof(float));
            r->n_quant += t->numel;
            r->bytes_quant += L.bytes;
        }
    be->i->sync(be);
    r->n_other = m->table.total - r->n_quant;
    r->rms_rel = den > 0 ? sqrt(num / den) : 0;
    free(blob);
    free(w);
    free(dq);
    return bad;
}
