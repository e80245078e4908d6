/* fuzz_ckpt.c — libFuzzer target: a checkpoint's identity and root attributes
 * (zt_ckpt_read_meta in src/io/ckpt_file.c: zt_ckpt_precheck, H5Fopen, format / version /
 * complete, step, samples_seen, tokens_seen, world_size, loss_scale, seed, config, created), then
 * what a resume does with the stored config (zt_config_load_string, zt_ckpt_check_resume).
 *
 * The input is the HDF5 file (written to a scratch file per input: HDF5 reads paths). The HDF5
 * library itself is not instrumented: its bugs show only as crashes or through libc interceptors.
 * Checks besides the sanitizers: a failure has a message and leaves no config text; a success has
 * a NUL-terminated config and created; a stored config that loads is accepted by
 * zt_ckpt_check_resume against itself with no change to report.
 */
#include "fuzz_ckpt_check.h"
#include "fuzz_common.h"
#include "io/ckpt.h"

#include <hdf5.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    H5open();
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* the reader prints its own line */
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[1024], err[ZT_ERR_MAX] = "";
    fz_write("step_00000001.h5", data, size, path, sizeof path);
    zt_ckpt_meta meta;
    if (zt_ckpt_read_meta(path, &meta, err, sizeof err)) {
        FZ_LOG("rejected: %s", err);
        FZ_CHECK_ERR(err);
        FZ_CHECK(!meta.config_text, "a failed read left a config text");
        return 0;
    }
    FZ_CHECK(meta.config_text, "no config text");
    FZ_LOG("accepted: step %ld", meta.step);
    FZ_CHECK(memchr(meta.created, 0, sizeof meta.created), "created is not NUL-terminated");
    fz_check_stored_config(meta.config_text);
    zt_ckpt_meta_free(&meta);
    FZ_CHECK(!meta.config_text, "meta_free left the config text");
    return 0;
}
