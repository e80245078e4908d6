/* lora.c — the LoRA adapter table, its initialisation, merging into the base and the base
 * fingerprint (see lora.h). The adapters' forward and backward are in model.c. */
#include "core/lora/lora.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/lora/quant.h"
#include "util/util.h"

static const int target_tensor[ZT_LORA_N_TARGETS] = {ZT_QKVW, ZT_ATTPW, ZT_FCW, ZT_FCPW};

/* GPT-2's description (learned positions, GELU, LayerNorm, tied) has GPT-2's four sites; any other the Llama
   family's seven (the fused projections split into their PEFT modules) */
static int gpt2_sites(const zt_model_shape *s) { return s->mlp == ZT_MLP_GELU && s->norm == ZT_NORM_LAYER; }

int zt_lora_sites(const zt_model_shape *s, zt_lora_site out[ZT_LORA_MAX_SITES]) {
    const int C = s->n_embd, hs = C / s->n_head, kv = s->n_kv_head * hs, I = s->ffn;
    if (gpt2_sites(s)) {
        const zt_lora_site g[4] = {{0, 0, zt_shape_qkv(s), ZT_LORA_T_QKV, "attn.c_attn"},
                                   {1, 0, C, ZT_LORA_T_PROJ, "attn.c_proj"},
                                   {2, 0, zt_shape_fc(s), ZT_LORA_T_FC, "mlp.c_fc"},
                                   {3, 0, C, ZT_LORA_T_FCPROJ, "mlp.c_proj"}};
        memcpy(out, g, sizeof g);
        return 4;
    }
    const zt_lora_site l[7] = {{0, 0, C, ZT_LORA_T_Q, "self_attn.q_proj"},
                               {0, C, kv, ZT_LORA_T_K, "self_attn.k_proj"},
                               {0, C + kv, kv, ZT_LORA_T_V, "self_attn.v_proj"},
                               {1, 0, C, ZT_LORA_T_O, "self_attn.o_proj"},
                               {2, 0, I, ZT_LORA_T_GATE, "mlp.gate_proj"},
                               {2, I, I, ZT_LORA_T_UP, "mlp.up_proj"},
                               {3, 0, C, ZT_LORA_T_DOWN, "mlp.down_proj"}};
    memcpy(out, l, sizeof l);
    return 7;
}

unsigned zt_lora_family_bits(const zt_model_shape *s) { return gpt2_sites(s) ? 0xFu : 0x7F0u; }

const char *zt_lora_family_names(const zt_model_shape *s) {
    return gpt2_sites(s) ? "qkv, proj, fc, fcproj" : "q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj";
}

void zt_lora_cfg_from_config(const zt_config *c, zt_lora_cfg *lc) {
    memset(lc, 0, sizeof *lc);
    lc->rank = c->lora.rank;
    lc->alpha = (float)c->lora.alpha;
    lc->dropout = (float)c->lora.dropout;
    lc->rslora = c->lora.rslora;
    char err[256];
    lc->targets = zt_config_lora_targets(c->lora.targets, err, sizeof err);
    zt_quant_fmt f;
    lc->quant = strcmp(c->lora.quant, "none") != 0 && zt_quant_fmt_parse(c->lora.quant, &f) == 0 ? (int)f : -1;
}

float zt_lora_scale(const zt_lora_cfg *lc) {
    return lc->rslora ? lc->alpha / sqrtf((float)lc->rank) : lc->alpha / (float)lc->rank;
}

int zt_lora_target_tensor(int k) { return target_tensor[k]; }

void zt_lora_target_dims(const zt_model_shape *s, int k, int *in, int *out) {
    const int C = s->n_embd;
    const int ins[ZT_LORA_N_TARGETS] = {C, C, C, s->ffn}, outs[ZT_LORA_N_TARGETS] = {zt_shape_qkv(s), C, zt_shape_fc(s), C};
    *in = ins[k];
    *out = outs[k];
}

size_t zt_lora_max_weight(const zt_model_shape *s) {
    size_t mx = 0;
    for (int k = 0; k < ZT_LORA_N_TARGETS; k++) {
        int in, out;
        zt_lora_target_dims(s, k, &in, &out);
        if ((size_t)in * out > mx) mx = (size_t)in * out;
    }
    return mx;
}

size_t zt_lora_param_count(const zt_model_shape *s, const zt_lora_cfg *lc) {
    zt_lora_site st[ZT_LORA_MAX_SITES];
    const int n = zt_lora_sites(s, st);
    size_t per = 0;
    for (int j = 0; j < n; j++) {
        if (!(lc->targets & st[j].bit)) continue;
        int in, out;
        zt_lora_target_dims(s, st[j].k, &in, &out);
        per += (size_t)lc->rank * ((size_t)in + (size_t)st[j].cols);
    }
    return per * (size_t)s->n_layer;
}

int zt_lora_per_layer(const zt_lora_cfg *lc, const zt_model_shape *s) {
    zt_lora_site st[ZT_LORA_MAX_SITES];
    const int n = zt_lora_sites(s, st);
    int per = 0;
    for (int j = 0; j < n; j++) per += (lc->targets & st[j].bit) != 0;
    return 2 * per;
}

int zt_lora_index(const zt_lora_cfg *lc, const zt_model_shape *s, int l, int j) {
    zt_lora_site st[ZT_LORA_MAX_SITES];
    zt_lora_sites(s, st);
    if (!(lc->targets & st[j].bit)) return -1;
    int before = 0;
    for (int i = 0; i < j; i++) before += (lc->targets & st[i].bit) != 0;
    return l * zt_lora_per_layer(lc, s) + 2 * before;
}

static void add_tensor(zt_param_table *pt, const char *name, int d0, int d1) {
    zt_tensor_info *t = &pt->t[pt->n++];
    memset(t, 0, sizeof *t);
    memcpy(t->name, name, strlen(name) + 1); /* names are built in a buffer of sizeof t->name */
    t->offset = pt->total;
    t->ndim = 2;
    t->shape[0] = d0;
    t->shape[1] = d1;
    t->numel = (size_t)d0 * d1;
    t->decay = 1;
    pt->total += t->numel;
}

void zt_lora_table_build(zt_param_table *pt, const zt_model_shape *s, const zt_lora_cfg *lc) {
    memset(pt, 0, sizeof *pt);
    pt->lora_per_layer = zt_lora_per_layer(lc, s);
    ZT_ASSERT(pt->lora_per_layer * s->n_layer <= ZT_MAX_TENSORS);
    zt_lora_site st[ZT_LORA_MAX_SITES];
    const int ns = zt_lora_sites(s, st);
    char name[sizeof pt->t[0].name];
    for (int l = 0; l < s->n_layer; l++)
        for (int j = 0; j < ns; j++) {
            if (!(lc->targets & st[j].bit)) continue;
            int in, out;
            zt_lora_target_dims(s, st[j].k, &in, &out);
            snprintf(name, sizeof name, "h.%d.%s.lora_A", l, st[j].module);
            add_tensor(pt, name, lc->rank, in);
            snprintf(name, sizeof name, "h.%d.%s.lora_B", l, st[j].module);
            add_tensor(pt, name, st[j].cols, lc->rank);
        }
}

void zt_trainable_table_build(const zt_config *c, const zt_model_shape *s, zt_param_table *pt) {
    if (!c->lora.enabled) {
        zt_param_table_build(pt, s);
        return;
    }
    zt_lora_cfg lc;
    zt_lora_cfg_from_config(c, &lc);
    zt_lora_table_build(pt, s, &lc);
}

void zt_lora_init_host(const zt_param_table *pt, uint64_t seed, float *host) {
    for (int i = 0; i < pt->n; i++) {
        const zt_tensor_info *t = &pt->t[i];
        float *p = host + t->offset;
        if (i % 2) { /* B */
            memset(p, 0, t->numel * sizeof(float));
            continue;
        }
        /* kaiming_uniform(a = sqrt(5)): bound = sqrt(6 / ((1 + 5) fan_in)) = 1 / sqrt(fan_in) */
        const double bound = 1.0 / sqrt((double)t->shape[1]);
        zt_rng r;
        zt_rng_seed(&r, seed * 0x9E3779B97F4A7C15ull + 0x10AA0000ull + (uint64_t)i);
        for (size_t j = 0; j < t->numel; j++) p[j] = (float)((2.0 * zt_rng_uniform(&r) - 1.0) * bound);
    }
}

void zt_lora_merge_host(const zt_param_table *bt, float *base, const zt_model_shape *s, const zt_lora_cfg *lc,
                        const float *ad) {
    const int r = lc->rank;
    const float sc = zt_lora_scale(lc);
    zt_param_table *tab = zt_malloc(sizeof *tab);
    zt_lora_table_build(tab, s, lc);
    zt_lora_site st[ZT_LORA_MAX_SITES];
    const int ns = zt_lora_sites(s, st);
    for (int l = 0; l < s->n_layer; l++)
        for (int si = 0; si < ns; si++) {
            const int ai = zt_lora_index(lc, s, l, si);
            if (ai < 0) continue;
            int in, out;
            zt_lora_target_dims(s, st[si].k, &in, &out);
            const float *A = ad + tab->t[ai].offset, *B = ad + tab->t[ai + 1].offset;
            float *W = base + bt->t[zt_param_idx(bt, l, zt_lora_target_tensor(st[si].k))].offset; /* (in, out) */
            /* the site's columns: W[i][col0 + o] += s * sum_j B[o][j] A[j][i], summed in double, rounded once */
            for (int i = 0; i < in; i++)
                for (int o = 0; o < st[si].cols; o++) {
                    double acc = 0.0;
                    for (int j = 0; j < r; j++) acc += (double)B[(size_t)o * r + j] * A[(size_t)j * in + i];
                    W[(size_t)i * out + st[si].col0 + o] += (float)(sc * acc);
                }
        }
    free(tab);
}

size_t zt_lora_act_bytes(const zt_model_shape *s, const zt_lora_cfg *lc, int B, int T) {
    const size_t N = (size_t)B * T, C = s->n_embd, r = lc->rank, L = s->n_layer;
    zt_lora_site st[ZT_LORA_MAX_SITES];
    const size_t ns = (size_t)zt_lora_sites(s, st), in_max = (size_t)s->ffn > C ? (size_t)s->ffn : C;
    const size_t elems[4] = {L * ns * N * r, N * r, N * in_max, 2 * C};
    size_t total = 0;
    for (int i = 0; i < 4; i++) total += (elems[i] * sizeof(float) + 63) & ~(size_t)63;
    return total;
}

size_t zt_lora_base_bytes(const zt_model_shape *s, int quant, size_t *fp32_elems, size_t *quant_bytes,
                          size_t *quant_params) {
    zt_param_table *bt = zt_malloc(sizeof *bt);
    zt_param_table_build(bt, s);
    size_t f = bt->total, qb = 0, qp = 0;
    if (quant >= 0)
        for (int l = 0; l < s->n_layer; l++)
            for (int k = 0; k < ZT_LORA_N_TARGETS; k++) {
                const zt_tensor_info *t = &bt->t[zt_param_idx(bt, l, zt_lora_target_tensor(k))];
                const zt_quant_layout L = zt_quant_plan((zt_quant_fmt)quant, (size_t)t->shape[0], (size_t)t->shape[1]);
                f -= t->numel;
                qp += t->numel;
                qb += L.bytes;
            }
    free(bt);
    if (fp32_elems) *fp32_elems = f;
    if (quant_bytes) *quant_bytes = qb;
    if (quant_params) *quant_params = qp;
    return f * sizeof(float) + qb;
}

void zt_lora_quant_roundtrip_host(const zt_param_table *bt, float *base, const zt_model_shape *s, int quant) {
    if (quant < 0) return;
    for (int l = 0; l < s->n_layer; l++)
        for (int k = 0; k < ZT_LORA_N_TARGETS; k++) {
            const zt_tensor_info *t = &bt->t[zt_param_idx(bt, l, zt_lora_target_tensor(k))];
            const zt_quant_layout L = zt_quant_plan((zt_quant_fmt)quant, (size_t)t->shape[0], (size_t)t->shape[1]);
            void *blob = zt_malloc(L.bytes);
            char err[128];
            ZT_ASSERT(zt_quant_encode(&L, base + t->offset, blob, err, sizeof err) == 0); /* a loaded base is finite */
            zt_quant_decode(&L, blob, 0, L.n, base + t->offset);
            free(blob);
        }
}

void zt_lora_hash_update(uint64_t *hash, zt_backend *be, const float *dev, size_t n) {
    const size_t chunk = (size_t)1 << 20;
    uint32_t *h = zt_malloc((n < chunk ? n : chunk) * sizeof(uint32_t) + 4);
    uint64_t x = *hash;
    for (size_t off = 0; off < n; off += chunk) {
        const size_t m = n - off < chunk ? n - off : chunk;
        be->i->to_host(be, h, dev + off, m * sizeof(float));
        be->i->sync(be);
        for (size_t j = 0; j < m; j++) {
            x ^= h[j];
            x *= 0x100000001b3ull;
        }
    }
    free(h);
    *hash = x;
}

uint64_t zt_lora_hash(zt_backend *be, const float *dev, size_t n) {
    uint64_t x = ZT_LORA_HASH0;
    zt_lora_hash_update(&x, be, dev, n);
    return x;
}
