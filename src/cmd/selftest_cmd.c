/* selftest_cmd.c — `ztrain selftest` over core/diag/selftest.c: the command line, and the exit code. */
#include "cmd/selftest_cmd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cli.h"
#include "core/diag/selftest.h"
#include "util/util.h"

int zt_cmd_selftest(int argc, char **argv, zt_dist *d) {
    char err[ZT_ERR_BUF] = "";
    const char *device = "cuda", *steps_s = "20", *only = NULL, *threads_s = "0", *prec_s = "all";
    zt_cli_opt opts[] = {{"--device", 1, &device}, {"--steps", 1, &steps_s}, {"--only", 1, &only},
                         {"--threads", 1, &threads_s}, {"--precision", 1, &prec_s}};
    zt_cli cli;
    if (zt_cli_parse(&cli, argc, argv, opts, 5, err, sizeof err)) zt_user_error_all("%s", err);
    int precisions = !strcmp(prec_s, "all") ? 7 : !strcmp(prec_s, "fp32") ? 1 : !strcmp(prec_s, "bf16") ? 2
                   : !strcmp(prec_s, "fp16") ? 4 : 0;
    if (!precisions) zt_user_error_all("selftest: --precision %s: expected fp32, bf16, fp16 or all", prec_s);
    if (cli.config_path || cli.n_sets) zt_user_error_all("selftest: takes no -c/--set");
    char *end;
    long steps = strtol(steps_s, &end, 10);
    if (*end || steps < 1 || steps > 100000) zt_user_error_all("selftest: --steps %s: expected a number >= 1", steps_s);
    long threads = strtol(threads_s, &end, 10);
    if (*end || threads < 0 || threads > 4096) zt_user_error_all("selftest: --threads %s: expected a number >= 0", threads_s);
    if (only && strcmp(only, "ops") && strcmp(only, "train") && strcmp(only, "comm"))
        zt_user_error_all("selftest: --only %s: expected ops, train or comm", only);
    if (strcmp(device, "cpu") == 0) zt_user_error_all("selftest: --device cpu: the cpu backend is the reference");
    zt_selftest_opts o = {device, (int)threads, (!only || !strcmp(only, "train")) ? (int)steps : 0,
                          !only || !strcmp(only, "ops"), !only || !strcmp(only, "comm"), precisions,
                          d->rank == 0 ? stdout : NULL};
    int fails = zt_selftest_run(&o, err, sizeof err);
    if (fails < 0) zt_user_error_all("selftest: %s", err);
    return fails ? 1 : 0;
}
