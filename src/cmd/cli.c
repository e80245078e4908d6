/* cli.c — shared option parsing for the commands. */
#include "cmd/cli.h"

#include <string.h>

int zt_cli_parse(zt_cli *cli, int argc, char **argv, const zt_cli_opt *opts, int n_opts, char *err, size_t errlen) {
    memset(cli, 0, sizeof *cli);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = NULL;
        const char *eq = strchr(a, '=');
        size_t nlen = (a[0] == '-' && a[1] == '-' && eq) ? (size_t)(eq - a) : strlen(a);
        if (eq && nlen < strlen(a)) val = eq + 1;
        if (strcmp(a, "-c") == 0 || (nlen == 8 && strncmp(a, "--config", 8) == 0)) {
            if (!val) {
                if (i + 1 >= argc) { snprintf(err, errlen, "%s: expected a config file after it", a); return 1; }
                val = argv[++i];
            }
            cli->config_path = val;
            continue;
        }
        if (nlen == 5 && strncmp(a, "--set", 5) == 0) {
            if (!val) {
                if (i + 1 >= argc) { snprintf(err, errlen, "--set: expected key=value after it"); return 1; }
                val = argv[++i];
            }
            if (cli->n_sets >= ZT_CLI_MAX_SETS) { snprintf(err, errlen, "--set: more than %d overrides", ZT_CLI_MAX_SETS); return 1; }
            cli->sets[cli->n_sets++] = (char *)val;
            continue;
        }
        int found = 0;
        for (int k = 0; k < n_opts; k++) {
            if (strlen(opts[k].name) != nlen || strncmp(a, opts[k].name, nlen) != 0) continue;
            found = 1;
            if (opts[k].takes_value) {
                if (!val) {
                    if (i + 1 >= argc) { snprintf(err, errlen, "%s: expected a value after it", opts[k].name); return 1; }
                    val = argv[++i];
                }
                *opts[k].value = val;
            } else {
                if (val) { snprintf(err, errlen, "%s takes no value", opts[k].name); return 1; }
                *opts[k].value = "1";
            }
            break;
        }
        if (!found) {
            int o = snprintf(err, errlen, "unknown option '%s' for `ztrain %s` (options: -c FILE, --set key=value", a, argv[0]);
            for (int k = 0; k < n_opts && o > 0 && (size_t)o < errlen; k++)
                o += snprintf(err + o, errlen - (size_t)o, ", %s%s", opts[k].name, opts[k].takes_value ? " V" : "");
            if (o > 0 && (size_t)o < errlen) snprintf(err + o, errlen - (size_t)o, ")");
            return 1;
        }
    }
    return 0;
}

int zt_cli_load_config(const zt_cli *cli, zt_config *c, char *err, size_t errlen) {
    return zt_config_load(c, cli->config_path, cli->n_sets, cli->sets, err, errlen);
}
