/* config_cmd.c — `ztrain config -c FILE [--set ...]`: the fully resolved config, printed as a valid
 * config file (defaults + file + overrides). */
#include "cmd/config_cmd.h"

#include <stdio.h>

#include "cmd/cli.h"
#include "io/config.h"
#include "util/util.h"

int zt_cmd_config(int argc, char **argv) {
    char err[ZT_ERR_BUF];
    zt_cli cli;
    zt_config c;
    if (zt_cli_parse(&cli, argc, argv, NULL, 0, err, sizeof err) || zt_cli_load_config(&cli, &c, err, sizeof err))
        zt_user_error_all("%s", err);
    if (zt_rank() == 0) zt_config_print(&c, stdout);
    return 0;
}
