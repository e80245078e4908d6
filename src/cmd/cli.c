/* cli.c — shared option parsing for the commands, and the config they load. */
#include "cmd/cli.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

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

/* the data files a config names must be regular files when they exist (a missing one is reported by
   whoever opens it, in its own words): a named pipe would block its reader's open before any check,
   a directory or a device is no shard or tokenizer. Globs are checked file by file by the loader. */
static int check_data_paths(const zt_config *c, char *err, size_t errlen) {
    static const struct { const char *key, *what; size_t off; } keys[] = {
        {"data.train", "a ztrain token shard (or a glob of them)", offsetof(zt_config, data.train)},
        {"data.val", "a ztrain token shard (or a glob of them)", offsetof(zt_config, data.val)},
        {"data.tokenizer", "a tokenizer file: .zttok, tokenizer.json or vocab.json", offsetof(zt_config, data.tokenizer)},
    };
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        const char *v = (const char *)c + keys[i].off;
        if (!v[0] || strpbrk(v, "*?[")) continue;
        char e[ZT_ERR_BUF];
        if (zt_check_input_file(v, keys[i].what, e, sizeof e)) return zt_errf(err, errlen, "%s: %s", keys[i].key, e);
    }
    return 0;
}

typedef struct first_diff { char key[2 * ZT_NAME_MAX], mine[160], theirs[160]; } first_diff;

static int note_diff(const char *key, const char *va, const char *vb, void *ctx) {
    first_diff *f = ctx;
    snprintf(f->key, sizeof f->key, "%s", key);
    snprintf(f->mine, sizeof f->mine, "%s", va);
    snprintf(f->theirs, sizeof f->theirs, "%s", vb);
    return 1;
}

/* every rank must run the same resolved config (one command line, one config file's content): a rank
   started with another --set, or reading another file of the same name on its node, would train
   something else or wait in another collective. The data.* paths are exempt (node-local copies). Collective; 0, or 1 on the ranks whose config differs
   from rank 0's, with the first differing key in err. */
static int check_same_on_every_rank(const zt_config *cfg, char *err, size_t errlen) {
    if (zt_world() < 2) return 0;
    /* data paths may name node-local copies (each rank's loader checks its files): only whether each is
       set is compared (a validation set on some ranks only would put them in different collectives) */
    zt_config *c = zt_malloc(sizeof *c);
    *c = *cfg;
    char *paths[3] = {c->data.train, c->data.val, c->data.tokenizer};
    for (int i = 0; i < 3; i++)
        if (paths[i][0]) snprintf(paths[i], ZT_PATH_MAX, "(a path)");
    size_t n = zt_config_to_string(c, NULL, 0) + 1;
    unsigned long long len = n;
    ZT_MPI(MPI_Bcast(&len, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD));
    char *mine = zt_malloc(n), *root = zt_malloc((size_t)len);
    zt_config_to_string(c, mine, n);
    if (zt_rank() == 0) memcpy(root, mine, (size_t)len);
    ZT_MPI(MPI_Bcast(root, (int)len, MPI_CHAR, 0, MPI_COMM_WORLD));
    int bad = 0;
    if (len != n || memcmp(root, mine, n) != 0) {
        zt_config *rc = zt_malloc(sizeof *rc);
        first_diff f = {"", "", ""};
        char e[ZT_ERR_BUF];
        if (zt_config_load_string(rc, root, e, sizeof e) == 0) zt_config_diff(c, rc, note_diff, &f);
        if (f.key[0])
            bad = zt_errf(err, errlen, "the config differs from rank 0's: %s = %s here but %s on rank 0 (every rank "
                          "must get the same command line and the same config file)", f.key, f.mine, f.theirs);
        else
            bad = zt_errf(err, errlen, "the config differs from rank 0's (every rank must get the same command "
                          "line and the same config file)");
        free(rc);
    }
    free(mine);
    free(root);
    free(c);
    return bad;
}

int zt_cli_load_config(const zt_cli *cli, zt_config *c, char *err, size_t errlen) {
    /* collective: every rank loads, and a rank that fails (a file only some nodes have) fails them all
       with its line, instead of leaving the others in the next collective */
    int bad = zt_config_load(c, cli->config_path, cli->n_sets, cli->sets, err, errlen);
    if (!bad) bad = check_data_paths(c, err, errlen);
    zt_check_all(bad, err, errlen);
    bad = check_same_on_every_rank(c, err, errlen);
    zt_check_all(bad, err, errlen);
    return 0;
}
