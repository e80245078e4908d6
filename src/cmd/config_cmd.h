/* config_cmd.h — the `config` command. */
#ifndef ZT_CONFIG_CMD_H
#define ZT_CONFIG_CMD_H

int zt_cmd_config(int argc, char **argv);

#endif
