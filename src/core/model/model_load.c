/* model_load.c — a checkpoint's config and model for eval, sample and export (see model_load.h). */
#include "core/model/model_load.h"

#include <stdlib.h>
#include <string.h>

#include "core/dist/backend_factory.h"
#include "core/lora/quant.h"
#include "io/ckpt.h"
#include "util/util.h"

int zt_loaded_config(const char *path, const zt_load_opts *o, zt_config *c, char *err, size_t errlen) {
    zt_ckpt_meta meta = {0};
    if (zt_ckpt_read_meta(path, &meta, err, errlen)) return 1;
    int bad = 0;
    char e[ZT_ERR_BUF] = "";
    if (o->config_path) {
        bad = zt_config_load(c, o->config_path, o->n_sets, o->sets, err, errlen);
    } else if (!meta.config_text || !meta.config_text[0]) {
        bad = zt_errf(err, errlen, "%s: the checkpoint has no config attribute (not written by ztrain?)", path);
    } else if (zt_config_load_string(c, meta.config_text, e, sizeof e)) {
        bad = zt_errf(err, errlen, "%.400s: its stored config does not parse: %.560s", path, e);
    }
    zt_ckpt_meta_free(&meta);
    for (int i = 0; i < o->n_sets && !bad && !o->config_path; i++) bad = zt_config_set(c, o->sets[i], err, errlen);
    if (!bad) bad = zt_config_validate(c, 1, err, errlen);
    return bad;
}

/* lora.targets names modules of the base's family (GPT-2's four linears, or the Llama family's seven) */
static int lora_targets_of_family(const zt_config *c, char *err, size_t errlen) {
    zt_model_shape s;
    char e[ZT_ERR_BUF];
    if (zt_config_shape(c, &s, e, sizeof e))
        return zt_errf(err, errlen, "lora.base = \"%.300s\": its model: %.500s", c->lora.base, e);
    const unsigned t = zt_config_lora_targets(c->lora.targets, e, sizeof e), fam = zt_lora_family_bits(&s);
    if (!t) return zt_errf(err, errlen, "%s", e);
    const int all = strstr(c->lora.targets, "all") != NULL;
    if (!all && (t & ~fam))
        return zt_errf(err, errlen, "lora.targets = \"%s\": lora.base = \"%.300s\" is a %s model, whose targets are %s "
                       "(or all)", c->lora.targets, c->lora.base, c->model.family, zt_lora_family_names(&s));
    return 0;
}

int zt_lora_base_shape(zt_config *c, char *err, size_t errlen) {
    zt_config *b = zt_calloc(1, sizeof *b);
    zt_ckpt_meta meta = {0};
    char e[ZT_ERR_BUF] = "";
    int bad = zt_ckpt_read_meta(c->lora.base, &meta, e, sizeof e);
    if (bad) bad = zt_errf(err, errlen, "lora.base = \"%.300s\": %.500s (the frozen base: a ztrain checkpoint, e.g. made by "
                           "`ztrain import --safetensors HF_DIR --out FILE` from a Hugging Face GPT-2)", c->lora.base, e);
    else if (meta.lora_base_hash)
        bad = zt_errf(err, errlen, "lora.base = \"%.400s\": a LoRA checkpoint (adapters only): the base must hold full "
                      "weights (export it merged with `ztrain export --merge`, then `ztrain import` it)", c->lora.base);
    else if (zt_config_load_string(b, meta.config_text, e, sizeof e))
        bad = zt_errf(err, errlen, "lora.base = \"%.400s\": its stored config does not parse: %.500s", c->lora.base, e);
    if (!bad) c->model = b->model;
    if (!bad) bad = lora_targets_of_family(c, err, errlen);
    if (!bad && c->train.seq_len > c->model.block_size)
        bad = zt_errf(err, errlen, "train.seq_len = %d exceeds the block_size %d of lora.base = \"%.400s\" (the positions the "
                      "base model has)", c->train.seq_len, c->model.block_size, c->lora.base);
    zt_ckpt_meta_free(&meta);
    free(b);
    return bad;
}

/* QLoRA: the fp32 base in `flat` (backend memory, table.total) into the model: the fp32 tensors packed into
   params, each linear weight encoded on the host and its blob uploaded */
static int quantise_base(zt_model *m, const float *flat, char *err, size_t errlen) {
    zt_backend *be = m->be;
    size_t maxn = 0;
    for (int i = 0; i < m->table.n; i++)
        if (m->table.t[i].numel > maxn) maxn = m->table.t[i].numel;
    float *h = zt_malloc(maxn * sizeof(float));
    void *blob = zt_malloc(zt_quant_plan((zt_quant_fmt)m->qfmt, 1, maxn).bytes + maxn); /* >= any blob */
    int bad = 0;
    for (int l = 0; l < m->s.n_layer && !bad; l++)
        for (int k = 0; k < ZT_LORA_N_TARGETS && !bad; k++) {
            const zt_tensor_info *t = &m->table.t[zt_param_idx(&m->table, l, zt_lora_target_tensor(k))];
            const zt_quant_layout L = zt_quant_plan((zt_quant_fmt)m->qfmt, (size_t)t->shape[0], (size_t)t->shape[1]);
            be->i->to_host(be, h, flat + t->offset, t->numel * sizeof(float));
            be->i->sync(be);
            char e[128];
            if (zt_quant_encode(&L, h, blob, e, sizeof e))
                bad = zt_errf(err, errlen, "lora.base: %s: %s", t->name, e);
            else
                be->i->to_device(be, m->qw[l][k], blob, L.bytes);
            be->i->sync(be);
        }
    for (int i = 0; i < m->table.n && !bad; i++)
        if (m->w[i]) be->i->copy(be, m->w[i], flat + m->table.t[i].offset, m->table.t[i].numel * sizeof(float));
    be->i->sync(be);
    free(blob);
    free(h);
    return bad;
}

int zt_lora_base_set(zt_model *m, const float *flat, char *err, size_t errlen) {
    if (m->qfmt >= 0) return quantise_base(m, flat, err, errlen);
    m->be->i->copy(m->be, m->params, flat, m->table.total * sizeof(float));
    return 0;
}

/* QLoRA: lora.base read range by range in flat order (each linear weight alone through a scratch of its size,
   each run of the other tensors straight into its packed place), fingerprinted as it goes: no fp32 copy of
   the whole base is ever resident */
static int load_quantised(zt_model *m, const char *path, uint64_t *hash, char *err, size_t errlen) {
    zt_backend *be = m->be;
    const zt_param_table *pt = &m->table;
    size_t maxn = 0;
    for (int i = 0; i < pt->n; i++)
        if (!m->w[i] && pt->t[i].numel > maxn) maxn = pt->t[i].numel;
    float *scratch = be->i->alloc(be, maxn * sizeof(float)), *h = zt_malloc(maxn * sizeof(float));
    void *blob = zt_malloc(zt_quant_plan((zt_quant_fmt)m->qfmt, 1, maxn).bytes + maxn); /* >= any blob */
    *hash = ZT_LORA_HASH0;
    int bad = 0;
    for (int i = 0; i < pt->n && !bad;) {
        int j = i + 1; /* a run [i, j) of fp32 tensors, or one quantised weight */
        if (m->w[i])
            while (j < pt->n && m->w[j]) j++;
        const size_t lo = pt->t[i].offset, hi = pt->t[j - 1].offset + pt->t[j - 1].numel;
        zt_ckpt_view v = zt_model_ckpt_view(m);
        v.range_only = 1;
        v.lo = v.params_base = lo;
        v.hi = hi;
        v.params = m->w[i] ? m->w[i] : scratch;
        zt_ckpt_meta meta;
        char e[ZT_ERR_BUF] = "";
        if (zt_ckpt_load(path, &meta, &v, e, sizeof e)) {
            bad = zt_errf(err, errlen, "lora.base: %s", e);
            break;
        }
        zt_ckpt_meta_free(&meta);
        zt_lora_hash_update(hash, be, v.params, hi - lo);
        if (!m->w[i]) {
            const zt_tensor_info *t = &pt->t[i];
            const int l = t->layer, kt = t->kind;
            int k = 0;
            while (zt_lora_target_tensor(k) != kt) k++;
            const zt_quant_layout L = zt_quant_plan((zt_quant_fmt)m->qfmt, (size_t)t->shape[0], (size_t)t->shape[1]);
            be->i->to_host(be, h, scratch, t->numel * sizeof(float));
            be->i->sync(be);
            char qe[128];
            if (zt_quant_encode(&L, h, blob, qe, sizeof qe)) bad = zt_errf(err, errlen, "lora.base: %s: %s", t->name, qe);
            else be->i->to_device(be, m->qw[l][k], blob, L.bytes);
        }
        i = j;
    }
    be->i->sync(be);
    be->i->free(be, scratch);
    free(h);
    free(blob);
    return bad;
}

int zt_lora_base_load(zt_model *m, const zt_config *c, uint64_t *hash, char *err, size_t errlen) {
    if (m->qfmt >= 0) return load_quantised(m, c->lora.base, hash, err, errlen);
    zt_ckpt_meta meta;
    const zt_ckpt_view v = zt_model_ckpt_view(m);
    char e[ZT_ERR_BUF] = "";
    if (zt_ckpt_load(c->lora.base, &meta, &v, e, sizeof e)) return zt_errf(err, errlen, "lora.base: %s", e);
    zt_ckpt_meta_free(&meta);
    *hash = zt_lora_hash(m->be, m->params, m->table.total);
    return 0;
}

/* a LoRA checkpoint: the base (lora.base, its fingerprint checked), the adapters onto the host, merged */
static void open_lora(zt_loaded_model *lm, const char *path) {
    char err[ZT_ERR_BUF] = "";
    zt_backend *be = lm->be;
    uint64_t hash = 0;
    if (zt_lora_base_load(&lm->m, lm->c, &hash, err, sizeof err)) zt_user_error_all("%s", err);
    zt_lora_cfg_from_config(lm->c, &lm->lora);
    lm->lora_table = zt_malloc(sizeof *lm->lora_table);
    zt_lora_table_build(lm->lora_table, &lm->s, &lm->lora);
    const size_t n = lm->lora_table->total, total = lm->m.table.total;
    float *dev = be->i->alloc(be, n * sizeof(float));
    zt_ckpt_view v = zt_model_ckpt_view(&lm->m);
    v.table = lm->lora_table;
    v.params = dev;
    v.padded = v.hi = n;
    zt_ckpt_meta meta;
    if (zt_ckpt_load(path, &meta, &v, err, sizeof err)) zt_user_error_all("%s", err);
    lm->step = meta.step;
    const uint64_t want = meta.lora_base_hash;
    zt_ckpt_meta_free(&meta);
    if (want != hash)
        zt_user_error_all("%s: its adapters were trained on another base than lora.base = \"%s\" (fingerprint "
                          "%016llx, the file's %016llx): point lora.base at that base (--set lora.base=PATH)", path,
                          lm->c->lora.base, (unsigned long long)hash, (unsigned long long)want);
    lm->adapters = zt_malloc(n * sizeof(float));
    be->i->to_host(be, lm->adapters, dev, n * sizeof(float));
    be->i->free(be, dev);
    float *w = zt_malloc(total * sizeof(float));
    be->i->to_host(be, w, lm->m.params, total * sizeof(float));
    zt_lora_quant_roundtrip_host(&lm->m.table, w, &lm->s, lm->lora.quant); /* QLoRA: the base it trained on */
    zt_lora_merge_host(&lm->m.table, w, &lm->s, &lm->lora, lm->adapters);
    be->i->to_device(be, lm->m.params, w, total * sizeof(float));
    be->i->sync(be);
    free(w);
}

void zt_loaded_model_open(zt_loaded_model *lm, const char *path, const zt_load_opts *o) {
    char err[ZT_ERR_BUF] = "";
    memset(lm, 0, sizeof *lm);
    lm->c = zt_calloc(1, sizeof *lm->c);
    zt_check_all(zt_loaded_config(path, o, lm->c, err, sizeof err), err, sizeof err);
    lm->be = zt_backend_create(lm->c->device, o->threads, err, sizeof err);
    if (!lm->be) zt_user_error_all("%s", err);
    zt_model_shape_from_config(lm->c, &lm->s);
    const int B = o->B > 0 ? o->B : lm->c->train.micro_batch, T = o->T > 0 ? o->T : lm->c->train.seq_len;
    /* forward only: of the training flags just the attention's (cuda: no (T, T) matrices; no stash, no recompute) */
    const zt_model_opts mo = {.att_fused = zt_model_opts_from_config(lm->c).att_fused};
    zt_model_init(&lm->m, lm->be, &lm->s, B, T, 0, 0, &mo);
    if (lm->c->lora.enabled) {
        open_lora(lm, path);
        return;
    }
    zt_ckpt_meta meta;
    const zt_ckpt_view v = zt_model_ckpt_view(&lm->m);
    if (zt_ckpt_load(path, &meta, &v, err, sizeof err)) zt_user_error_all("%s", err);
    lm->step = meta.step;
    zt_ckpt_meta_free(&meta);
}

void zt_loaded_model_close(zt_loaded_model *lm) {
    free(lm->adapters);
    free(lm->lora_table);
    zt_model_free(&lm->m);
    zt_backend_destroy(lm->be);
    free(lm->c);
    memset(lm, 0, sizeof *lm);
}
