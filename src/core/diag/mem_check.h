/* mem_check.h — the up-front memory check of a run: a model that cannot fit is refused with one line
 * naming the sizes BEFORE anything large is allocated (instead of a failed allocation, an abort and a
 * core dump, or the OOM killer halfway through start-up).
 *
 * Need: the bytes zt_zero_plan_memory() plans per rank (the function zt_zero_init() allocates by and
 * `ztrain estimate` prints) times the ranks on this node (they share its memory). On the cuda device
 * only the host part is checked here (device memory is the backend's to report): the offloaded optimizer
 * state (zero.offload: master weights, Adam moments, gradient shard, published shard, and with
 * optimizer+params the parameter shard's words) and the checkpoint staging. On cpu, devsim and cudasim
 * everything is host memory: the plan's components and the offloaded state.
 * Have: ZTRAIN_MEM_LIMIT when set (bytes, or with a K/M/G/T suffix, powers of 1024: the configured
 * limit, e.g. a scheduler's allocation), else MemAvailable of /proc/meminfo, lowered to the cgroup's
 * memory.max - memory.current when that is smaller. Unknown (neither readable): no check. */
#ifndef ZT_MEM_CHECK_H
#define ZT_MEM_CHECK_H

#include <stddef.h>

#include "core/dist/dist.h"
#include "core/dist/zero.h"
#include "io/config.h"

/* bytes of host memory this node has for the run, 0 if unknown; *source (may be NULL) says from where
   ("ZTRAIN_MEM_LIMIT", "MemAvailable in /proc/meminfo", "the cgroup's memory.max") */
size_t zt_mem_available(const char **source);
/* "123", "1.5G", "512 MiB": bytes; 0 when it does not parse */
size_t zt_mem_parse_size(const char *s);
/* train.micro_batch = "auto" (stored as 0): sets c->train.micro_batch to the largest micro-batch that
   divides the per-rank batch and whose plan fits train.mem_limit, or 90% of the node's available memory
   (zt_mem_available) over its local ranks; note gets the line to log. A no-op for a set micro_batch.
   Returns 0, or 1 with one line in err (not even 1 fits, unknown memory, a bad mem_limit). */
int zt_mem_auto_micro_batch(zt_config *c, const zt_model_shape *s, int N, int local_ranks, char *note, size_t nn,
                            char *err, size_t errlen);
/* "1.5 GiB" */
void zt_mem_fmt(double bytes, char *buf, size_t n);
/* 0 if `local_ranks` ranks with plan p fit in `avail` bytes (0 = unknown: fits); else 1 with one line
   naming the sizes in err ("the run does not fit in [host ]memory: ..."). host_only: count only the plan's
   host memory, the offloaded state and the checkpoint staging (device backends). */
int zt_mem_check_plan(const zt_zero_plan *p, int zero_stage, int local_ranks, int host_only, size_t avail,
                      const char *source, const char *host, char *err, size_t errlen);
/* Collective, before zt_zero_init: plans c at d->size ranks and checks it against this node's memory
   on every rank; a plan that does not fit ends every rank with exit 2 and one line (zt_check_all). */
void zt_mem_check(const zt_config *c, const zt_model_shape *s, const zt_dist *d);

#endif
