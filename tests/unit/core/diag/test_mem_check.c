/* test_mem_check.c — the up-front memory check's arithmetic and its line (core/diag/mem_check.c) on plans made by
 * hand: on a GPU (host_only) only the host part counts, the offloaded optimizer state and the checkpoint staging;
 * elsewhere everything, the stage-3 parameter shard included; the line names the sizes, the ranks, the limit and
 * its source, and suggests zero.offload = "none" when the offloaded state is what does not fit.
 * The end-to-end refusal (exit 2 on every rank, the run directory untouched) is tests/e2e/test_zero_plan.sh's.
 * One `PASS name ...` / `FAIL name: reason` line per case; exit 1 if any failed. */
#include <stdlib.h>
#include <string.h>

#include "core/diag/mem_check.h"
#include "util/util.h"
#include "check.h"

static const double GiB = 1024.0 * 1024 * 1024;

static zt_zero_plan gpu_plan(void) { /* 8 GPUs of a 7B-class run at stage 3 with the optimizer offloaded */
    zt_zero_plan p;
    memset(&p, 0, sizeof p);
    p.param_bytes = (size_t)(4 * GiB);
    p.pshard_bytes = (size_t)(1.5 * GiB);
    p.grad_bytes = (size_t)(3 * GiB);
    p.acc_bytes = (size_t)(3 * GiB);
    p.comm_bytes = (size_t)(16 * GiB);
    p.act_bytes = (size_t)(30 * GiB);
    p.offload_bytes = (size_t)(15 * GiB);
    p.ckpt_bytes = 64 << 20;
    return p;
}

static int has(const char *s, const char *sub) { return strstr(s, sub) != NULL; }

int main(void) {
    char err[ZT_ERR_BUF];
    zt_zero_plan p = gpu_plan();
    /* 8 ranks x (15 GiB + 64 MiB) = 120.5 GiB of host memory; the 57.5 GiB on each GPU are not counted here */
    int bad = zt_mem_check_plan(&p, 3, 8, 1, (size_t)(100 * GiB), "MemAvailable in /proc/meminfo", "node7", err,
                                sizeof err);
    check(bad && has(err, "does not fit in host memory: 15.1 GiB planned per rank in host memory") &&
              has(err, "offloaded optimizer state 15.0 GiB, checkpoint staging 64.0 MiB") &&
              has(err, "x 8 ranks on node7 = 120.5 GiB, but node7 has 100.0 GiB (MemAvailable in /proc/meminfo)") &&
              has(err, "zero.offload = \"none\"") && !has(err, "activations") && !strchr(err, '\n'),
          "gpu_offload_refused", "bad %d: %s", bad, err);
    bad = zt_mem_check_plan(&p, 3, 8, 1, (size_t)(121 * GiB), "ZTRAIN_MEM_LIMIT", "node7", err, sizeof err);
    check(!bad, "gpu_offload_fits", "121 GiB for 8 x 15.1 GiB refused: %s", err);
    p.offload_bytes = 0; /* without offload a GPU run needs only the staging of the host */
    bad = zt_mem_check_plan(&p, 3, 8, 1, (size_t)(1 * GiB), "ZTRAIN_MEM_LIMIT", "node7", err, sizeof err);
    check(!bad, "gpu_no_offload_host_part", "8 x 64 MiB refused in 1 GiB: %s", err);
    /* devsim / cpu: everything is host memory, the parameter shard included */
    zt_zero_plan q;
    memset(&q, 0, sizeof q);
    q.pshard_bytes = 300 << 20;
    q.offload_bytes = 200 << 20;
    q.ckpt_bytes = 64 << 20;
    bad = zt_mem_check_plan(&q, 3, 2, 0, (size_t)1 << 30, "ZTRAIN_MEM_LIMIT", NULL, err, sizeof err);
    check(bad && has(err, "does not fit in memory: 564.0 MiB planned per rank (parameters 300.0 MiB") &&
              has(err, "offloaded optimizer state 200.0 MiB") && has(err, "x 2 ranks on this node = 1.1 GiB"),
          "host_shard_and_offload_counted", "bad %d: %s", bad, err);
    q.offload_bytes = 0;
    bad = zt_mem_check_plan(&q, 3, 2, 0, (size_t)1 << 30, "ZTRAIN_MEM_LIMIT", NULL, err, sizeof err);
    check(!bad, "host_fits_without_offload", "2 x 364 MiB refused in 1 GiB: %s", err);
    /* the limit a test (or a scheduler's allocation) sets */
    setenv("ZTRAIN_MEM_LIMIT", "1.5G", 1);
    const char *src = NULL;
    const size_t avail = zt_mem_available(&src);
    check(avail == (size_t)1536 << 20 && src && !strcmp(src, "ZTRAIN_MEM_LIMIT"), "mem_limit_env",
          "%zu from %s", avail, src ? src : "?");
    return check_exit_status();
}
