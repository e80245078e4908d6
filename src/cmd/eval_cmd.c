/* eval_cmd.c — `ztrain eval`: load a checkpoint's parameters (any rank count; no optimizer state
 * is read) and compute the validation loss exactly as training does (zt_eval_loss: eval.sequences
 * micro-batches of data.val windows in file order, combined in micro-batch order, so the number
 * is the same for any number of ranks and equals the run's own "val" at that step). More sequences
 * than the shard has windows are clamped to the windows, with a note. A checkpoint holding NaN/Inf or
 * a negative step is refused by the load (one line, exit 2). SIGTERM/SIGINT keep their default
 * action here: there is nothing to save, so ending at once is the bounded answer.
 *
 * --quantize nf4|nf4_dq|int8: the layers' linear weights go through that format first (core/
 * quant_model.h: QLoRA's base storage; the loss of the quantised model, and the storage it takes). */
#include "cmd/eval_cmd.h"

#include <stdlib.h>
#include <string.h>

#include "cmd/cli.h"
#include "core/model/eval.h"
#include "core/model/model_load.h"
#include "core/lora/quant_model.h"
#include "util/util.h"

int zt_cmd_eval(int argc, char **argv, zt_dist *d) {
    char err[ZT_ERR_BUF] = "";
    const char *path = NULL, *quant = NULL;
    zt_cli_opt opts[] = {{"--checkpoint", 1, &path}, {"--quantize", 1, &quant}};
    zt_cli cli;
    if (zt_cli_parse(&cli, argc, argv, opts, 2, err, sizeof err)) zt_user_error_all("%s", err);
    if (!path) zt_user_error_all("eval: --checkpoint PATH is required (a step_*.h5 file of a run's checkpoints/)");
    zt_quant_fmt qf = ZT_QUANT_NF4;
    if (quant && zt_quant_fmt_parse(quant, &qf))
        zt_user_error_all("eval: --quantize %s: expected nf4, nf4_dq or int8", quant);

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
    int bad = (lm.s.encoder ? zt_dataset_open_mlm : zt_dataset_open)(&val, c->data.val, c->train.seq_len,
                                                                      (uint32_t)lm.s.vocab_size,
                                                                      (uint64_t)c->train.seed, 0, 0, err, sizeof err);
    zt_check_all(bad, err, sizeof err);
    const int asked = zt_eval_sequences(c), n = zt_eval_count(c, &val);
    if (n < asked)
        zt_log("note: %d validation sequences asked for (eval.sequences) but %s has only %d windows of %d tokens: "
               "scoring those %d\n", asked, c->data.val, n, c->train.seq_len, n);
    if (quant) {
        zt_quant_report qr;
        zt_check_all(zt_quant_model_linear(&lm.m, qf, &qr, err, sizeof err), err, sizeof err);
        const double fp32_bytes = 4.0 * (double)(qr.n_quant + qr.n_other);
        const double q_bytes = (double)qr.bytes_quant + 4.0 * (double)qr.n_other;
        zt_log("quantized %s: %zu linear-weight parameters at %.4f bits each (%.1f MiB; relative RMS error %.4g), "
               "%zu kept fp32; base %.1f MiB instead of %.1f MiB (%.2f bytes/param)\n", zt_quant_fmt_name(qf),
               qr.n_quant, qr.n_quant ? 8.0 * (double)qr.bytes_quant / (double)qr.n_quant : 0.0,
               qr.bytes_quant / 1048576.0, qr.rms_rel, qr.n_other, q_bytes / 1048576.0, fp32_bytes / 1048576.0,
               q_bytes / (double)(qr.n_quant + qr.n_other));
    }
    double loss = 0, acc = 0;
    zt_eval_loss(&lm.m, &val, c, d, NULL, &loss, &acc);
    zt_check_all(val.bad, val.err, sizeof val.err);
    if (lm.s.encoder) /* masked LM: the fixed masked set's loss and accuracy (core/model/eval.h) */
        zt_log("val loss %.9g, val MLM accuracy %.6f (%d sequences, step %ld)\n", loss, acc, n, lm.step);
    else
        zt_log("val loss %.9g (%d sequences, step %ld)\n", loss, n, lm.step);
    zt_dataset_close(&val);
    zt_loaded_model_close(&lm);
    return 0;
}
