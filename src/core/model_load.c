/* model_load.c — a checkpoint's config and model for eval, sample and export (see model_load.h). */
#include "core/model_load.h"

#include <stdlib.h>
#include <string.h>

#include "core/backend_factory.h"
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

int zt_lora_base_shape(zt_config *c, char *err, size_t errlen) {
    zt_config *b = zt_calloc(1, sizeof *b);
    zt_ckpt_meta meta = {0};
    char e[ZT_ERR_BUF] = "";
    int bad = zt_ckpt_read_meta(c->lora.base, &meta, e, sizeof e);
    if (bad) bad = zt_errf(err, errlen, "lora.base = \"%.400s\": %.560s", c->lora.base, e);
    else if (meta.lora_base_hash)
        bad = zt_errf(err, errlen, "lora.base = \"%.400s\": a LoRA checkpoint (adapters only): the base must hold full "
                      "weights (export it merged with `ztrain export --merge`, then `ztrain import` it)", c->lora.base);
    else if (zt_config_load_string(b, meta.config_text, e, sizeof e))
        bad = zt_errf(err, errlen, "lora.base = \"%.400s\": its stored config does not parse: %.500s", c->lora.base, e);
    if (!bad) c->model = b->model;
    zt_ckpt_meta_free(&meta);
    free(b);
    return bad;
}

int zt_lora_base_load(zt_model *m, const zt_config *c, uint64_t *hash, char *err, size_t errlen) {
    zt_ckpt_meta meta;
    const zt_ckpt_view v = zt_model_ckpt_view(m);
    char e[ZT_ERR_BUF] = "";
    if (zt_ckpt_load(c->lora.base, &meta, &v, e, sizeof e))
        return zt_errf(err, errlen, "lora.base: %s", e);
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
    zt_model_init(&lm->m, lm->be, &lm->s, B, T, 0, 0);
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
