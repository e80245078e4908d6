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
    t->layer = t->kind = -1;
    pt->total += t->numel;
}

void zt_model_shape_gpt2(zt_model_shape *s) {
    s->n_kv_head = s->n_head;
    s->ffn = 4 * s->n_embd;
    s->norm = ZT_NORM_LAYER;
    s->pos = ZT_POS_LEARNED;
    s->mlp = ZT_MLP_GELU;
    s->bias = ZT_BIAS_ALL;
    s->tied = 1;
    s->norm_eps = 1e-5f;
    s->rope_theta = 10000.0;
    s->rope_factor = s->rope_low_freq = s->rope_high_freq = 0.0;
    s->rope_orig_max = 0;
    s->encoder = s->type_vocab = s->pos_offset = 0;
    s->pad_id = s->sep_id = -1;
}

/* layer l's tensor k, when the description has it: (name suffix, rows, cols; cols 0 = 1-D) */
static int layer_tensor(const zt_model_shape *s, int k, const char **suffix, int *rows, int *cols) {
    const int C = s->n_embd, Q = zt_shape_qkv(s), F = zt_shape_fc(s), ln = s->norm == ZT_NORM_LAYER;
    const unsigned b = s->bias;
    struct { const char *suffix; int present, rows, cols; } per[ZT_PER_LAYER] = {
        {"ln_1.weight", 1, C, 0},           {"ln_1.bias", ln, C, 0},
        {"attn.c_attn.weight", 1, C, Q},    {"attn.c_attn.bias", !!(b & ZT_BIAS_QKV), Q, 0},
        {"attn.c_proj.weight", 1, C, C},    {"attn.c_proj.bias", !!(b & ZT_BIAS_PROJ), C, 0},
        {"ln_2.weight", 1, C, 0},           {"ln_2.bias", ln, C, 0},
        {"mlp.c_fc.weight", 1, C, F},       {"mlp.c_fc.bias", !!(b & ZT_BIAS_FC), F, 0},
        {"mlp.c_proj.weight", 1, s->ffn, C}, {"mlp.c_proj.bias", !!(b & ZT_BIAS_FCPROJ), C, 0},
    };
    *suffix = per[k].suffix;
    *rows = per[k].rows;
    *cols = per[k].cols;
    return per[k].present;
}

void zt_param_table_build(zt_param_table *pt, const zt_model_shape *s) {
    const int C = s->n_embd;
    char nm[48];
    memset(pt, 0, sizeof *pt);
    memset(pt->idx, 0xff, sizeof pt->idx); /* -1: absent */
    pt->n_layer = s->n_layer;
    add_tensor(pt, "wte.weight", 2, s->padded_vocab, C, 1);
    pt->wpe = pt->tte = pt->emb_ln = pt->head_dense = pt->head_bias = -1;
    if (s->pos == ZT_POS_LEARNED) {
        pt->wpe = pt->n;
        add_tensor(pt, "wpe.weight", 2, zt_shape_pos_rows(s), C, 1);
    }
    if (s->encoder) {
        if (s->type_vocab > 0) {
            pt->tte = pt->n;
            add_tensor(pt, "tte.weight", 2, s->type_vocab, C, 1);
        }
        pt->emb_ln = pt->n;
        add_tensor(pt, "emb_ln.weight", 1, C, 0, 0);
        add_tensor(pt, "emb_ln.bias", 1, C, 0, 0);
    }
    for (int l = 0; l < s->n_layer; l++)
        for (int k = 0; k < ZT_PER_LAYER; k++) {
            const char *suffix;
            int rows, cols;
            if (!layer_tensor(s, k, &suffix, &rows, &cols)) continue;
            snprintf(nm, sizeof nm, "h.%d.%s", l, suffix);
            pt->idx[l][k] = (short)pt->n;
            add_tensor(pt, nm, cols ? 2 : 1, rows, cols, cols != 0);
            pt->t[pt->n - 1].layer = (short)l;
            pt->t[pt->n - 1].kind = (short)k;
        }
    pt->idx[s->n_layer][0] = (short)pt->n;
    add_tensor(pt, s->encoder ? "head.ln.weight" : "ln_f.weight", 1, C, 0, 0);
    if (s->norm == ZT_NORM_LAYER) {
        pt->idx[s->n_layer][1] = (short)pt->n;
        add_tensor(pt, s->encoder ? "head.ln.bias" : "ln_f.bias", 1, C, 0, 0);
    }
    if (s->encoder) {
        pt->head_dense = pt->n;
        add_tensor(pt, "head.dense.weight", 2, C, C, 1);
        add_tensor(pt, "head.dense.bias", 1, C, 0, 0);
        pt->head_bias = pt->n;
        add_tensor(pt, "head.bias", 1, s->padded_vocab, 0, 0);
    }
    pt->lm_head = -1;
    if (!s->tied) {
        pt->lm_head = pt->n;
        add_tensor(pt, "lm_head.weight", 2, s->padded_vocab, C, 1);
    }
}

int zt_param_gpt2_layout(const zt_param_table *pt) {
    if (pt->lora_per_layer || pt->wpe != 1 || pt->lm_head >= 0 || pt->idx[pt->n_layer][1] < 0) return 0;
    for (int l = 0; l < pt->n_layer; l++)
        for (int k = 0; k < ZT_PER_LAYER; k++)
            if (pt->idx[l][k] != 2 + l * ZT_PER_LAYER + k) return 0;
    return 1;
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
