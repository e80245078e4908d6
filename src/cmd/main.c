/* main.c — `ztrain <command>` dispatch (thin). Every command runs under MPI (a singleton without
 * mpirun); only rank 0 prints. */
#include <stdio.h>
#include <string.h>

#include "cmd/config_cmd.h"
#include "core/dist/dist.h"
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

/* one line per command for `ztrain help`, and the same line plus details for `ztrain CMD --help` */
typedef struct cmd_help {
    const char *name, *line, *details;
} cmd_help;

static const cmd_help commands[] = {
    {"train", "-c FILE [--set key=value ...]   train or fine-tune (mpirun -np N ./ztrain train ...)",
     "  --resume auto|PATH   continue from the run's latest checkpoint (auto: none is fine) or a file\n"
     "  --stop-after N       checkpoint and stop after N steps (exit 0)\n"
     "  --time-limit SECONDS checkpoint and stop before the limit (a Slurm job's remaining time)\n"
     "  --init-from CKPT     start a new run from a checkpoint's weights (fine-tuning)\n"
     "  --set key=value      override any config key (`ztrain help config` lists them)\n"},
    {"launch", "[-n N | --per-node N] [--nodes HOSTFILE] [--dry-run] -- train ...   run on N ranks via mpirun/srun", NULL},
    {"prepare", "--input FILE --vocab-size N --out-dir DIR   tokenize text / JSONL into token shards (--sft: examples)", NULL},
    {"eval", "--checkpoint PATH [--quantize nf4|nf4_dq|int8] [--set key=value ...]   validation loss of a checkpoint",
     "  --quantize FMT: the layers' linear weights through a QLoRA base format first (NF4 blocks of 64,\n"
     "  NF4 with double-quantised constants, or int8 per row): the quantised model's loss and its storage\n"
     "  the config stored in the checkpoint is used unless -c names one; eval.sequences sets how\n"
     "  many validation sequences are scored (the value does not depend on micro_batch or ranks)\n"},
    {"sample", "--checkpoint PATH --prompt TEXT --tokens N [--temperature T --top-k K --seed S]", NULL},
    {"export", "--checkpoint PATH --out DIR [--dtype fp32|bf16|fp16] [--merge] [--max-shard-size SIZE]   Hugging Face "
     "safetensors (GPT-2, Llama, Mistral, Qwen2)",
     "  --out DIR               model.safetensors (or shards + model.safetensors.index.json past --max-shard-size,\n"
     "                          default 5GB) + config.json for AutoModelForCausalLM.from_pretrained(DIR)\n"
     "  --dtype fp32|bf16|fp16  the tensors' precision (default fp32: the checkpoint's values as they are);\n"
     "                          bf16 and fp16 round to nearest even and set config.json's torch_dtype;\n"
     "                          fp16 refuses a weight with |x| >= 65520 (it would be Inf), naming it (exit 2)\n"
     "  --format safetensors    the only format (the default)\n"
     "  A checkpoint of a bf16/fp16 run is exported from its fp32 master weights.\n"
     "  A LoRA checkpoint (lora.enabled) is exported as PEFT adapters (adapter_model.safetensors +\n"
     "  adapter_config.json, for PeftModel.from_pretrained on its base); --merge writes the merged model\n"
     "  (base + scale * (B A)^T; QLoRA: on the dequantised base) as a plain model instead.\n"},
    {"import", "--safetensors FILE|DIR --out CKPT.h5   a ztrain checkpoint from a GPT2LMHeadModel, LlamaForCausalLM, "
     "MistralForCausalLM or Qwen2ForCausalLM directory (config.json; one safetensors file or shards)", NULL},
    {"estimate", "-c FILE [--ranks N] [--mem-limit SIZE] [--nodes M --hw|--device cpu|h100|h200 --net GBIT,LAT_US --flops G --mem-bw GBPS --host-bw LINK_GBPS[,MEM_GBPS] --comm BENCH_COMM.json --json --count-device cudasim]   memory per rank, FLOPs, the largest micro-batch that fits, predicted step time", NULL},
    {"hwinfo", "[-c FILE [--set ...]]   the host (CPU, memory, vector extensions, GPUs), BLAS, MPI layout; with a config, the settings to use here", NULL},
    {"selftest", "--device cuda|cudasim|devsim [--precision fp32|bf16|fp16|all]   every op, a short training run and the communicator vs cpu", NULL},
    {"config", "-c FILE [--set key=value ...]   print the fully resolved config", NULL},
    {"help", "[COMMAND | config]   this text, a command's usage, or every config key with its default and help", NULL},
};
#define N_COMMANDS ((int)(sizeof commands / sizeof *commands))

static void usage(FILE *f) {
    fprintf(f, "usage: ztrain <command> [options]   (ztrain <command> --help for one command)\n");
    for (int i = 0; i < N_COMMANDS; i++) fprintf(f, "  %-9s %s\n", commands[i].name, commands[i].line);
}

static const cmd_help *find_command(const char *name) {
    for (int i = 0; i < N_COMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0) return &commands[i];
    return NULL;
}

static void command_usage(const cmd_help *h) {
    printf("usage: ztrain %s %s\n%s", h->name, h->line, h->details ? h->details : "");
}

/* -h/--help among a command's options (before `--`, after which launch's command line starts) */
static int wants_help(int argc, char **argv) {
    for (int i = 2; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) return 1;
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? ZT_EXIT_USER : 0;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "help") == 0) {
        if (argc > 3) {
            fprintf(stderr, "ztrain: error: help takes one topic (a command or config), got %d\n", argc - 2);
            return ZT_EXIT_USER;
        }
        if (argc == 2) usage(stdout);
        else if (strcmp(argv[2], "config") == 0) zt_config_help(stdout);
        else if (find_command(argv[2])) command_usage(find_command(argv[2]));
        else {
            fprintf(stderr, "ztrain: error: help: no command or topic '%s' (try `ztrain help`)\n", argv[2]);
            return ZT_EXIT_USER;
        }
        return 0;
    }
    /* prepare and launch print their own, longer usage */
    if (strcmp(cmd, "prepare") == 0) return zt_cmd_prepare(argc - 1, argv + 1);
    if (strcmp(cmd, "launch") == 0) return zt_cmd_launch(argc - 1, argv + 1); /* a launcher: no MPI_Init */
    const cmd_help *h = find_command(cmd);
    if (h && wants_help(argc, argv)) { /* before MPI: usage needs no ranks */
        command_usage(h);
        return 0;
    }

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
