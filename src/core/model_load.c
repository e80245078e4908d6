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
    zt_ckpt_meta meta;
    const zt_ckpt_view v = zt_model_ckpt_view(&lm->m);
    if (zt_ckpt_load(path, &meta, &v, err, sizeof err)) zt_user_error_all("%s", err);
    lm->step = meta.step;
    zt_ckpt_meta_free(&meta);
}

void zt_loaded_model_close(zt_loaded_model *lm) {
    zt_model_free(&lm->m);
    zt_backend_destroy(lm->be);
    free(lm->c);
    memset(lm, 0, sizeof *lm);
}
