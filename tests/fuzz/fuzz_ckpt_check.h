/* fuzz_ckpt_check.h — what both checkpoint targets (fuzz_ckpt.c, fuzz_ckpt_raw.c) check about a file's
 * stored config once its attributes were accepted: it parses, or is refused with a message; parsed, a
 * resume against itself is accepted and reports no changes. */
#ifndef ZT_FUZZ_CKPT_CHECK_H
#define ZT_FUZZ_CKPT_CHECK_H

#include "fuzz_common.h"
#include "io/ckpt.h"
#include "io/config.h"
#include "util/util.h"

static void fz_check_stored_config(const char *text) {
    char err[ZT_ERR_BUF] = "";
    zt_config c;
    if (zt_config_load_string(&c, text, err, sizeof err) == 0) {
        char log[4096] = "";
        err[0] = 0;
        FZ_CHECK(zt_ckpt_check_resume(text, &c, log, sizeof log, err, sizeof err) == 0,
                 "resume refuses the checkpoint's own config: %s", err);
        FZ_CHECK(log[0] == 0, "resume with the same config reports changes: %s", log);
    } else {
        FZ_LOG("stored config rejected: %s", err);
        FZ_CHECK_ERR(err);
    }
}

#endif
