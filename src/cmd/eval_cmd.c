/* eval_cmd.c — `ztrain eval`: load a checkpoint's parameters (any rank count; no optimizer state
 * is read) and compute the validation loss exactly as training does (zt_eval_loss: eval.sequences
 * micro-batches of data.val windows in file order, combined in micro-batch order, so the number
 * is the same for any number of ranks and equals the run's own "val" at that step). */
#include "cmd/eval_cmd.h"

#include <stdlib.h>
#include <string.h>

#include "cmd/cli.h"
#include "core/eval.h"
#include "core/model_load.h"
#include "util/util.h"

int zt_cmd_eval(int argc, char **argv, zt_dist *d) {
    char err[ZT_ERR_BUF] = "";
    const char *path = NULL;
    zt_cli_opt opts[] = {{"--checkpoint", 1, &path}};
    zt_cli cli;
    if (zt_cli_parse(&cli, argc, argv, opts, 1, err, sizeof err)) zt_user_error_all("%s", err);
    if (!path) zt_user_error_all("eval: --checkpoint PATH is required (a step_*.h5 file of a run's checkpoints/)");

    const zt_load_opts lo = {cli.config_path, cli.sets, cli.n_sets, 0, 0, 0};
    zt_loaded_model lm;
    zt_config cfg;
    /* data first: a missing validation shard is reported before the weights are read */
    zt_check_all(zt_loaded_config(path, &lo, &cfg, err, sizeof err), err, sizeof err);
    if (!cfg.data.val[0]) zt_user_error_all("eval: data.val is empty: name a validation shard with --set data.val=FILE");
    zt_load_opts o = lo;
    o.threads = cfg.train.threads > 0 ? cfg.train.threads : zt_dist_default_threads(d);
    zt_loaded_model_open(&lm, path, &o);
    const zt_config *c = lm.c;
    zt_dataset val;
    int bad = zt_dataset_open(&val, c->data.val, c->train.seq_len, (uint32_t)lm.s.vocab_size, (uint64_t)c->train.seed,
                              err, sizeof err);
    zt_check_all(bad, err, sizeof err);
    double loss = zt_eval_loss(&lm.m, &val, c, d);
    zt_log("val loss %.9g (%d sequences, step %ld)\n", loss, zt_eval_sequences(c), lm.step);
    zt_dataset_close(&val);
    zt_loaded_model_close(&lm);
    return 0;
}
