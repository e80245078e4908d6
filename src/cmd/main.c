/* main.c — `ztrain <command>` dispatch (thin). Every command runs under MPI (a singleton without
 * mpirun); only rank 0 prints. */
#include <stdio.h>
#include <string.h>

#include "cmd/config_cmd.h"
#include "core/dist.h"
#include "io/config.h"
#include "cmd/estimate.h"
#include "cmd/eval_cmd.h"
#include "cmd/export.h"
#include "cmd/launch.h"
#include "cmd/prepare.h"
#include "cmd/sample.h"
#include "cmd/selftest_cmd.h"
#include "cmd/train.h"
#include "util/util.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: ztrain <command> [options]\n"
            "  train     -c FILE [--set key=value ...]   train or fine-tune (mpirun -np N ./ztrain train ...)\n"
            "  launch    [-n N | --per-node N] [--nodes HOSTFILE] [--dry-run] -- train ...   run on N ranks via mpirun/srun\n"
            "  prepare   --input FILE --vocab-size N --out-dir DIR   train a BPE tokenizer, write token shards\n"
            "  eval      --checkpoint PATH [--set key=value ...]   validation loss of a checkpoint\n"
            "  sample    --checkpoint PATH --prompt TEXT --tokens N [--temperature T --top-k K --seed S]\n"
            "  export    --checkpoint PATH --format safetensors --out DIR   Hugging Face GPT-2 safetensors\n"
            "  import    --safetensors FILE|DIR --out CKPT.h5   a ztrain checkpoint from a GPT-2 safetensors\n"
            "  estimate  -c FILE [--ranks N]   memory per rank and FLOPs for a config, before running it\n"
            "  hwinfo    what this rank sees: CPUs, BLAS, MPI layout\n"
            "  selftest  --device cuda|cudasim|devsim   every op, a short training run and the communicator vs cpu\n"
            "  config    -c FILE [--set key=value ...]   print the fully resolved config\n"
            "  help      [config]   this text, or every config key with its default and help\n");
}

int main(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? ZT_EXIT_USER : 0;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "help") == 0) {
        if (argc > 2 && strcmp(argv[2], "config") == 0) zt_config_help(stdout);
        else usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "prepare") == 0) return zt_cmd_prepare(argc - 1, argv + 1);
    if (strcmp(cmd, "launch") == 0) return zt_cmd_launch(argc - 1, argv + 1); /* a launcher: no MPI_Init */

    zt_dist d;
    zt_dist_init(&d, &argc, &argv);
    int rc;
    if (strcmp(cmd, "train") == 0) rc = zt_cmd_train(argc - 1, argv + 1, &d);
    else if (strcmp(cmd, "config") == 0) rc = zt_cmd_config(argc - 1, argv + 1);
    else if (strcmp(cmd, "eval") == 0) rc = zt_cmd_eval(argc - 1, argv + 1, &d);
    else if (strcmp(cmd, "sample") == 0) rc = zt_cmd_sample(argc - 1, argv + 1, &d);
    else if (strcmp(cmd, "export") == 0) rc = zt_cmd_export(argc - 1, argv + 1, &d);
    else if (strcmp(cmd, "import") == 0) rc = zt_cmd_import(argc - 1, argv + 1, &d);
    else if (strcmp(cmd, "estimate") == 0) rc = zt_cmd_estimate(argc - 1, argv + 1, &d);
    else if (strcmp(cmd, "hwinfo") == 0) rc = zt_cmd_hwinfo(argc - 1, argv + 1, &d);
    else if (strcmp(cmd, "selftest") == 0) rc = zt_cmd_selftest(argc - 1, argv + 1, &d);
    else zt_user_error_all("unknown command '%s' (try `ztrain help`)", cmd);
    zt_dist_finalize(&d);
    return rc;
}
