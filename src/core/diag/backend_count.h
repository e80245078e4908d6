/* backend_count.h — counts, for every backend slot call, the kernel launches the CUDA backend (cuda/) makes for
 * it and the bytes those launches read and write in device memory, without a GPU.
 *
 * A decorator like backend_prof.h: zt_backend_count_begin replaces be->i by a counting copy of the slot table
 * that forwards every call. The launch table is the CUDA backend's behaviour read from its sources (one launch per
 * ZT_LAUNCH executed and per GEMM, whose cuBLASLt call is one reference-GEMM launch under the host execution
 * harness; the bf16/fp16 operand packing of cuda_gemm.cu; the round_to fused into the op before it, as
 * cuda_backend.cu's Deferred does unless ZT_CUDA_FUSE_ROUND=0). Wrapping cudasim, the harness's own launch
 * counter (zt_backend_harness_launches) checks that table (tests/e2e/test_gpu_budget.sh).
 *
 * Bytes: what each launch must read and write in device memory by the slot's contract (iface/backend.h), in the
 * element sizes the CUDA backend uses today (activations, parameters and gradients are float32 buffers in every
 * precision, 4 bytes; packed GEMM operands and 2-byte storage 2 bytes), counting each tensor a launch reads or
 * writes once (perfect on-chip reuse inside a kernel), plus the intermediates that go through device memory
 * between the launches of one slot (dbias and LayerNorm partial sums, the fused attention's dq parts, the
 * embedding backward's sort keys, the materialized attention's (T, T) matrices). Copies and memsets
 * (`copy`, `zero`) are stream operations of their own, counted apart from kernels; to_device / to_host are host
 * transfers, not device-memory traffic.
 *
 * The "count" device (zt_count_null_create): a backend whose slots do nothing and whose alloc hands out distinct
 * fake device addresses that are never dereferenced (devsim proves host code never touches device memory), with
 * the counting wrapper on top, and a 1-rank communicator that does nothing: one training step of GPT-2 124M runs
 * in well under a second on a CPU and yields the launches and bytes per step (`ztrain estimate --hw h100|h200`).
 * One counted backend at a time. */
#ifndef ZT_BACKEND_COUNT_H
#define ZT_BACKEND_COUNT_H

#include <stddef.h>

#include "iface/backend.h"
#include "iface/comm.h"

#define ZT_COUNT_MAX_KINDS 40

typedef struct zt_count_entry {
    const char *name;   /* op kind ("linear fwd", "gemm operand packing", "round_to", ...) */
    long calls;         /* slot calls (for packing: the GEMMs that packed) */
    long launches;      /* kernel launches, GEMMs included */
    long memops;        /* copies and memsets on the stream */
    double bytes;       /* device memory read + written */
} zt_count_entry;

typedef struct zt_count_totals {
    long launches;      /* kernels and GEMMs */
    long memops;        /* cudaMemcpyAsync / cudaMemsetAsync */
    double bytes;       /* device memory read + written, all kinds */
    long host_xfers;    /* to_device / to_host calls */
    long host_waits;    /* calls that wait for the device: sync, to_host */
    long host_mid;      /* to_device calls between a launch and the next wait: inside the queued work (a step
                           captured as one CUDA graph can hold none) */
    double host_bytes;
    long comm_calls;    /* collectives and grouped calls on the count device's communicator */
    long fused_rounds;  /* round_to calls done inside the op before them (no launch) */
    long mirror_hits;   /* product operands read from 2-byte words instead of packed (cuda_backend.cu mirrors) */
    long packs_skipped; /* pack16 calls that found their words written by the ops (pack16_ahead: the stash) */
    long adamw_words;   /* pack16 calls of the parameters done by the update that wrote them (no launch) */
    double packed;      /* elements packed as product operands */
    double gemm16;      /* elements of the CUDA backend's three packed-operand buffers (a, b, linear_bwd's dout), each
                           grown to the largest operand packed into it since zt_backend_count_begin (not reset by
                           zt_backend_count_reset): device memory beside the planned allocations, 2 bytes an element */
} zt_count_totals;

/* wraps be->i with the counting table (the counts start at zero); zt_backend_count_end restores it */
void zt_backend_count_begin(zt_backend *be);
void zt_backend_count_reset(void);
/* kinds with any call, sorted by bytes (largest first); returns the count */
int zt_backend_count_report(zt_count_entry *out, int max);
zt_count_totals zt_backend_count_totals(void);
void zt_backend_count_end(zt_backend *be);

/* the "count" device: null slots under the counting wrapper (counting from creation); destroy through its slot */
zt_backend *zt_count_null_create(void);
/* a 1-rank communicator over the count device's memory that moves nothing (counted in comm_calls) */
zt_comm *zt_count_null_comm_create(zt_backend *be);
/* one communicator call, for the totals (count_device.c's communicator) */
void zt_backend_count_comm_call(void);

/* kernel launches the host execution harness has executed in this process; -1 when this build has no cudasim
   (defined in core/dist/backend_factory.c, the one file that knows the backends) */
long long zt_backend_harness_launches(void);
/* elements the harness's bf16 / fp16 products have packed as operands in this process; -1 as above */
long long zt_backend_harness_packed(void);
/* elements of the harness's packed-operand buffers (a, b, linear_bwd's dout), each at the largest it grew to in this
   process; -1 as above */
long long zt_backend_harness_gemm16(void);

#endif
