/* eval_cmd.c — `ztrain eval`: load a checkpoint's parameters (any rank count; no optimizer state
 * is read) and compute the validation loss exactly as training does (zt_eval_loss: eval.batches
 * micro-batches of data.val windows in file order, combined in micro-batch order, so the number
 * is the same for any number of ranks and equals the run's own "val" at that step). */
#include "eval_cmd.h"

#include <stdlib.h>
#include <string.h>

#include "ckpt.h"
#include "cli.h"
#include "cpu/cpu_backend.h"
#include "train.h"
#include "util.h"

int zt_cmd_eval(int argc, char **argv, zt_dist *d) {
    char err[ZT_ERR_BUF] = "";
    const char *path = NULL;
    zt_cli_opt opts[] = {{"--checkpoint", 1, &path}};
    zt_cli cli;
    if (zt_cli_parse(&cli, argc, argv, opts, 1, err, sizeof err)) zt_user_error_all("%s", err);
    if (!path) zt_user_error_all("eval: --checkpoint PATH is required (a step_*.h5 file of a run's checkpoints/)");

    /* the checkpoint's own config unless -c names another; --set on top */
    zt_ckpt_meta meta;
    int bad = zt_ckpt_read_meta(path, &meta, err, sizeof err);
    zt_dist_check(d, bad, err, sizeof err);
    zt_config *c = zt_calloc(1, sizeof *c);
    if (cli.config_path) {
        bad = zt_cli_load_config(&cli, c, err, sizeof err);
    } else {
        bad = zt_config_load_string(c, meta.config_text, err, sizeof err);
        if (bad) {
            char e2[ZT_ERR_BUF];
            snprintf(e2, sizeof e2, "%.400s: its stored config: %.560s", path, err);
            snprintf(err, sizeof err, "%s", e2);
        }
        for (int i = 0; i < cli.n_sets && !bad; i++) bad = zt_config_set(c, cli.sets[i], err, sizeof err);
        if (!bad) bad = zt_config_validate(c, 1, err, sizeof err);
    }
    zt_ckpt_meta_free(&meta);
    if (bad) zt_user_error_all("%s", err);
    if (strcmp(c->device, "cpu") != 0)
        zt_user_error_all("device = \"%s\": this build has only the cpu backend (--set device=cpu)", c->device);
    if (!c->data.val[0])
        zt_user_error_all("eval: data.val is empty: name a validation shard with --set data.val=FILE");

    const int threads = c->train.threads > 0 ? c->train.threads : zt_dist_default_threads(d);
    zt_backend *be = zt_cpu_backend_create(threads);
    zt_model_shape s;
    zt_shape_from_config(c, &s);
    zt_dataset val;
    bad = zt_dataset_open(&val, c->data.val, c->train.seq_len, (uint32_t)s.vocab_size, (uint64_t)c->train.seed, err,
                          sizeof err);
    zt_dist_check(d, bad, err, sizeof err);
    zt_model m;
    zt_model_init(&m, be, &s, c->train.micro_batch, c->train.seq_len, 0, 0);
    if (zt_ckpt_load(path, &meta, &m, NULL, err, sizeof err)) zt_user_error_all("%s", err);
    double loss = zt_eval_loss(&m, &val, c, d);
    zt_log("val loss %.6f (%d batches, step %ld)\n", loss, c->eval.batches, meta.step);
    zt_ckpt_meta_free(&meta);
    zt_dataset_close(&val);
    zt_model_free(&m);
    zt_cpu_backend_free(be);
    free(c);
    return 0;
}
