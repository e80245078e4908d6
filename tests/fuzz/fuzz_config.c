/* fuzz_config.c — libFuzzer target: the config parser (src/io/config.c, config_print.c).
 *
 * Input: a config text in libconfig syntax (what a checkpoint stores and a resume re-reads), then
 * optionally a NUL byte and "--set" assignments, one a line. It goes through
 * zt_config_load_string (defaults, parse, schema walk, validation), then each zt_config_set, then
 * zt_config_validate on 1..4 ranks. Checks besides the sanitizers: every failure has a message;
 * an accepted config printed by zt_config_to_string (the text a checkpoint stores) loads again and
 * is the same config (zt_config_diff finds nothing).
 */
#include "fuzz_common.h"
#include "io/config.h"

static int report_diff(const char *key, const char *va, const char *vb, void *ctx) {
    (void)ctx;
    FZ_CHECK(0, "printed config reads back with %s = %s instead of %s", key, vb, va);
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = fz_strndup(data, size); /* the config ends at the first NUL; the sets follow it */
    size_t tl = strlen(text);
    char err[ZT_ERR_MAX] = "";
    zt_config c;
    int rc = zt_config_load_string(&c, text, err, sizeof err);
    if (rc) FZ_CHECK_ERR(err);
    FZ_LOG("load_string: %s", rc ? err : "accepted");
    if (!rc && tl < size) {
        char *sets = fz_strndup(data + tl + 1, size - tl - 1);
        for (char *line = sets, *next; line && !rc; line = next) {
            next = strchr(line, '\n');
            if (next) *next++ = 0;
            err[0] = 0;
            if (zt_config_set(&c, line, err, sizeof err)) {
                FZ_LOG("set: %s", err);
                FZ_CHECK_ERR(err);
                rc = 1;
            }
        }
        free(sets);
        if (!rc) {
            for (int ws = 1; ws <= 4; ws++) {
                err[0] = 0;
                if (zt_config_validate(&c, ws, err, sizeof err)) FZ_CHECK_ERR(err);
                if (ws == 1 && err[0]) rc = 1;
            }
        }
    }
    if (!rc) {
        size_t need = zt_config_to_string(&c, NULL, 0);
        char *printed = malloc(need + 1);
        FZ_CHECK(zt_config_to_string(&c, printed, need + 1) == need, "to_string lengths differ");
        FZ_CHECK(strlen(printed) == need, "to_string wrote %zu of %zu bytes", strlen(printed), need);
        zt_config back;
        err[0] = 0;
        FZ_CHECK(zt_config_load_string(&back, printed, err, sizeof err) == 0,
                 "the printed config does not load: %s\n--- printed:\n%s", err, printed);
        zt_config_diff(&c, &back, report_diff, NULL);
        free(printed);
    }
    free(text);
    return 0;
}
