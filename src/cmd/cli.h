/* cli.h — command-line options shared by the commands: -c FILE, --set key=value (repeatable),
 * and command-specific flags declared by the caller. Unknown options are a user error. */
#ifndef ZT_CLI_H
#define ZT_CLI_H

#include "io/config.h"

#define ZT_CLI_MAX_SETS 128

typedef struct zt_cli_opt {
    const char *name;     /* "--resume" */
    int takes_value;
    const char **value;   /* where the value (or "1" for flags) goes */
} zt_cli_opt;

typedef struct zt_cli {
    const char *config_path;
    int n_sets;
    char *sets[ZT_CLI_MAX_SETS];
} zt_cli;

/* Parses argv[1..] (argv[0] is the command name). Returns 0 or fills err. */
int zt_cli_parse(zt_cli *cli, int argc, char **argv, const zt_cli_opt *opts, int n_opts, char *err, size_t errlen);
/* zt_config_load with the parsed -c and --set. Collective: every rank loads, a rank that fails ends all
   of them with exit 2 and its line; each rank's resolved config is compared with rank 0's (data.* paths
   only as set or empty: node-local copies are fine) and the first differing key is named. */
int zt_cli_load_config(const zt_cli *cli, zt_config *c, char *err, size_t errlen);

#endif
