/* param_table.c — the flat-buffer layout: GPT-2's parameter table and the shard formula
 * (see param_table.h). */
#include "iface/param_table.h"

#include <stdio.h>
#include <string.h>

#include "util/util.h"

static void add_tensor(zt_param_table *pt, const char *name, int ndim, int d0, int d1, int decay) {
    ZT_ASSERT(pt->n < ZT_MAX_TENSORS);
    zt_tensor_info *t = &pt->t[pt->n++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ndim = ndim;
    t->shape[0] = d0;
    t->shape[1] = ndim == 2 ? d1 : 1;
    t->numel = (size_t)d0 * (size_t)(ndim == 2 ? d1 : 1);
    t->offset = pt->total;
    t->decay = decay;
    pt->total += t->numel;
}

void zt_param_table_build(zt_param_table *pt, const zt_model_shape *s) {
    const int C = s->n_embd;
    char nm[48];
    memset(pt, 0, sizeof *pt);
    add_tensor(pt, "wte.weight", 2, s->padded_vocab, C, 1);
    add_tensor(pt, "wpe.weight", 2, s->block_size, C, 1);
    for (int l = 0; l < s->n_layer; l++) {
        static const struct { const char *suffix; int ndim, a, b, decay; } per[ZT_PER_LAYER] = {
            {"ln_1.weight", 1, 1, 0, 0},        {"ln_1.bias", 1, 1, 0, 0},
            {"attn.c_attn.weight", 2, 1, 3, 1}, {"attn.c_attn.bias", 1, 3, 0, 0},
            {"attn.c_proj.weight", 2, 1, 1, 1}, {"attn.c_proj.bias", 1, 1, 0, 0},
            {"ln_2.weight", 1, 1, 0, 0},        {"ln_2.bias", 1, 1, 0, 0},
            {"mlp.c_fc.weight", 2, 1, 4, 1},    {"mlp.c_fc.bias", 1, 4, 0, 0},
            {"mlp.c_proj.weight", 2, 4, 1, 1},  {"mlp.c_proj.bias", 1, 1, 0, 0},
        };
        for (int k = 0; k < ZT_PER_LAYER; k++) {
            snprintf(nm, sizeof nm, "h.%d.%s", l, per[k].suffix);
            add_tensor(pt, nm, per[k].ndim, per[k].a * C, per[k].b * C, per[k].decay);
        }
    }
    add_tensor(pt, "ln_f.weight", 1, C, 0, 0);
    add_tensor(pt, "ln_f.bias", 1, C, 0, 0);
}

int zt_param_find(const zt_param_table *pt, const char *name) {
    for (int i = 0; i < pt->n; i++)
        if (strcmp(pt->t[i].name, name) == 0) return i;
    return -1;
}

zt_shard_layout zt_shard_layout_of(size_t total, int N) {
    zt_shard_layout l;
    const size_t unit = (size_t)(N > 0 ? N : 1) * ZT_SHARD_UNIT;
    l.total = total;
    l.padded = (total + unit - 1) / unit * unit;
    l.shard = l.padded / (size_t)(N > 0 ? N : 1);
    return l;
}
