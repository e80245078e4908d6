/* perf_model.h — predicted step time of a training config on N ranks over M nodes (issue: scaling
 * past one machine, on paper and checked). `ztrain estimate --ranks N --nodes M` prints it.
 *
 * The step is what src/core/dist/zero.c and zero_bucket.c issue, costed with an alpha-beta model per link:
 *   compute   FLOPs per token (zt_model_flops_per_token) x tokens per rank / the rank's sustained FLOP/s
 *             (a third forward, two thirds backward). On the cpu device ranks beyond the node's cores
 *             share them, so a rank's rate is scaled by cores / ranks per node.
 *   gradients every micro-batch's full gradient (padded P elements; fp32, or 2-byte words in an ordered bf16/fp16
 *             run, packed and decoded at 12 bytes of memory traffic per element) goes to the shard owners:
 *             ordered: an all-to-all (each rank sends P/N to each other rank); native: a reduce-scatter
 *             (stages 0-1) or per-bucket reduces to the owners (stage 2). Stage 2 overlaps the exchange
 *             with backward bucket by bucket: what is exposed is the part longer than the backward that
 *             remains once a bucket is posted, and at least the last bucket.
 *   all-to-all across nodes: of a rank's (N-1)/N x P x 4 bytes, (N-G)/N cross nodes, and a node's G
 *             ranks share its network link: G x (N-G)/N x P x 4 bytes per node per exchange.
 *   oversubscribed cpu ranks (more ranks than cores on a node): collective times x ranks / cores.
 *   measured collectives (--comm FILE from bench_comm on this node and rank count): the exchange, the
 *             all-gather and (native) the reduce-scatter take the measured time at the buffer's size, which
 *             already includes the ordered sums and any core sharing. Native's reductions are MPI's own
 *             rooted reduces, one per owner: stages 0-1 all at once (the communicator's reduce_scatter,
 *             bench_comm's reduce_scatter row), stage 2 per bucket (its rs_owners row: the whole buffer).
 *   overlap   only where something else can move the bytes while the cores compute (a GPU's copy engines
 *             and NCCL kernels, or idle cpu cores): MPI over shared memory copies with the ranks' own
 *             cores, inside their MPI calls, so with every core computing nothing is hidden (measured on a
 *             2-core AMD EPYC: stage 2 is no faster than stage 1).
 *   ring collectives (reduce-scatter, all-gather): (N-1)/N x bytes through the slowest link of the ring
 *             (the node link when M > 1), latency (N-1) x alpha.
 *   after the update: stages 1-2 all-gather the parameters, stage 0 the reduced gradient (same bytes;
 *             half of them for 2-byte parameters, train.param_storage); the gradient norm's chunk sums are one
 *             more (small) all-gather.
 *   2-byte parameters: unpacked twice per micro-batch, wte twice more: 6 bytes of memory traffic per element,
 *             added to compute.
 *   1 rank, several micro-batches per step: each micro-batch's gradient is added to the accumulator
 *             (12 bytes of memory traffic per element; on N ranks the sums are part of the exchange).
 *   optimizer AdamW and the norm over the rank's elements (the shard; all of them at stage 0): ~32 bytes
 *             of memory traffic per element at the device's memory bandwidth (--mem-bw: calibrated from the
 *             1-rank step's fixed cost, see tests/e2e/test_perf_model.sh).
 *   checkpoint the synchronous write of 3 x P x 4 bytes at the file system's bandwidth shared by every
 *             rank (or, with checkpoint.async, the staging copy), spread over checkpoint.every steps.
 *   stage 3   (zero_shard.c) no all-gather after the update; instead every part of the parameters is gathered
 *             as the model reaches it: wte and the tensors outside the layers once per step, blocking; each layer
 *             before its forward and again before its backward, L + (K-1)(L-m) + K(L-m) layer gathers per step
 *             (m = min(L, 2): the two slots still hold the layers the last pass ended with, except after the
 *             update). A gather is grouped send/recv in which every owner of a part of the range sends it to every
 *             other rank, so the busiest owner's egress bounds it: (G-1) x its part within the node and (N-G) x
 *             its part over the node's link, or a receiver's ingress, the range less its own part, whichever is
 *             longer (fp32, or 2-byte words in bf16/fp16, unpacked at 6 bytes of memory traffic per element).
 *             Layer l+1's gather is in flight while layer l computes (forward: a third of the layer's time,
 *             backward: two thirds, + one third with train.recompute = "layer"), so a prefetched gather exposes
 *             only what is longer than that compute, and nothing is hidden where nothing can overlap (see above).
 *   offload   (zero_offload.c, zero.offload on a device backend) the update leaves the device: the gradient
 *             shard (S x 4 bytes) down and the published parameters (S x 2 bytes as words, else S x 4; none
 *             with optimizer+params) up over the host link (hw.host_bw per rank and direction), AdamW on the
 *             host at hw.host_mem_bw: 28 bytes per
 *             element (master weights, gradient, m, v read; master weights, m, v written, fp32), + 6 to pack
 *             words or 16 to round float32 copies; all serial with the step. The device keeps the norm (4 bytes
 *             per element). optimizer+params: every gather first copies this rank's part of it up.
 * The fixed-point alternative (fields fixed_*) is costed the same way for comparison.
 * Tokens/s = global batch x seq_len / step time; scaling efficiency = the 1-rank step's time for the
 * same per-rank work / this step's time (weak scaling at fixed micro-batch per rank). */
#ifndef ZT_PERF_MODEL_H
#define ZT_PERF_MODEL_H

#include "core/model/model.h"
#include "io/config.h"

/* one collective's measured time against its size (bench_comm's convention: bytes of the whole buffer) */
enum { ZT_CURVE_RS, ZT_CURVE_RS_ORDERED, ZT_CURVE_RS_OWNERS, ZT_CURVE_ALL_GATHER, ZT_CURVE_N };
typedef struct zt_comm_curve {
    int n;
    double bytes[32], sec[32]; /* ascending bytes */
} zt_comm_curve;

typedef struct zt_hw {
    char name[64];
    double flops;             /* sustained FLOP/s per rank on the model's matmuls (one rank per device) */
    double mem_bw;            /* bytes/s per rank (optimizer) */
    double intra_bw, intra_lat; /* within a node, per rank: bytes/s, seconds per message */
    double inter_bw, inter_lat; /* between nodes, per node (all its NICs): bytes/s, seconds per message */
    double a2a_bw_factor;     /* all-to-all bandwidth as a fraction of intra_bw (measured; 1 = as a ring) */
    double rs_bw_factor;      /* reduce-scatter (with its sums) as a fraction of intra_bw (measured) */
    double disk_bw;           /* checkpoint writes, bytes/s for the whole job */
    double host_bw;           /* zero.offload: device <-> host link, bytes/s per rank and direction (PCIe) */
    double host_mem_bw;       /* zero.offload: the host's memory bandwidth per rank, bytes/s (its AdamW) */
    int cores_per_node;       /* cpu: ranks beyond this share cores; 0 = one device per rank */
    int ranks_per_device;     /* informational */
    /* measured collective times (`ztrain estimate --comm FILE`, FILE = `bench_comm --json` on comm_ranks
       ranks of one node): used instead of the alpha-beta terms for a 1-node prediction on that many ranks */
    int comm_ranks;           /* 0: none loaded */
    zt_comm_curve curve[ZT_CURVE_N];
} zt_hw;

typedef struct zt_perf {
    double compute_s, backward_s;
    double grad_comm_s, grad_exposed_s;   /* per step: all micro-batches */
    double gather_s, norm_s, optim_s, ckpt_s;
    double accum_s;                       /* 1 rank, K > 1: adding each micro-batch's gradient (per step) */
    double pgather_s, pgather_exposed_s;  /* stage 3: the parameter gathers of a step in flight, and exposed */
    double pgather_fixed_s;               /* stage 3: of those, wte's and the fixed tensors' (blocking, once) */
    long pgathers;                        /* stage 3: gathers per step */
    double offload_s, offload_xfer_s;     /* zero.offload: the host update per step, and its copies over the link */
    double step_s, tokens_per_s, efficiency;
    double inter_node_bytes;              /* per node per step */
    /* the exact alternative evaluated (a costed design that ztrain does not use): gradients accumulated locally as int64 fixed
       point with a per-bucket shared exponent (one small max-all-reduce per step), so any reduction
       order gives the same bits; ONE ring reduce-scatter of P x 8 bytes per step, overlapped with the
       last micro-batch's backward at stage 2 */
    double fixed_comm_s, fixed_exposed_s, fixed_step_s, fixed_inter_node_bytes;
    int ranks_per_node, micro_per_rank;
} zt_perf;

/* "cpu" (the host it runs on: the caller passes the measured single-thread sgemm GFLOP/s and core count),
   "h100", "h200"; 0 or -1 for an unknown name. */
int zt_hw_preset(const char *name, double cpu_sgemm_gflops_per_core, int cores, zt_hw *hw);
/* --net "BW_Gbit,LAT_us" (per node): 0 or -1 */
int zt_hw_set_net(zt_hw *hw, const char *spec);
/* --host "LINK_GBps[,MEM_GBps]" (per rank): the host link and the host's memory bandwidth; 0 or -1 */
int zt_hw_set_host(zt_hw *hw, const char *spec);
/* --comm FILE: reads bench_comm's --json output (reduce_scatter, rs_ordered, rs_owners, all_gather rows, one node);
   0, or non-zero with one line in err naming the file and what is wrong */
int zt_hw_load_comm(zt_hw *hw, const char *path, char *err, size_t errlen);
/* seconds of one call moving `bytes` on curve k: log-log interpolation between the measured sizes,
   proportional to the size beyond them (bandwidth-bound); -1 without a curve */
double zt_comm_curve_time(const zt_comm_curve *c, double bytes);

void zt_perf_predict(const zt_config *c, const zt_model_shape *s, int N, int M, const zt_hw *hw, zt_perf *out);

/* One GPU's step from its kernels (`ztrain estimate --hw h100|h200`): the kernel launches and device-memory bytes of
   one training step counted without a GPU (core/diag/backend_count.h) and the step's FLOPs give
     step = max(FLOPs / (ZT_GPU_COMPUTE_FRAC x bf16 dense peak), bytes / (ZT_GPU_BW_FRAC x HBM bandwidth))
            + (launches + copies) x ZT_GPU_LAUNCH_S
   (docs/perf-model.md). Published peaks (NVIDIA's H100 SXM and H200 datasheets): dense bf16 tensor-core 989 TFLOP/s
   on both; HBM3 3.35 TB/s (H100 SXM 80 GB), HBM3e 4.8 TB/s (H200 141 GB). */
#define ZT_GPU_COMPUTE_FRAC 0.45 /* of the bf16 peak: the rate the GPU presets assume (llm.c / Megatron-class GEMMs) */
#define ZT_GPU_BW_FRAC 0.80      /* of the HBM peak: what streaming kernels sustain */
#define ZT_GPU_LAUNCH_S 3e-6     /* per launch, back to back on one stream without CUDA graphs */
/* hbm_bytes: the memory nvidia-smi reports (H100 SXM 80 GB: 81559 MiB, H200: 143771 MiB), of which
   ZT_GPU_RESERVED_BYTES are taken as left for the CUDA context, cuBLASLt's workspace and NCCL's buffers */
#define ZT_GPU_RESERVED_BYTES (2.0 * 1024 * 1024 * 1024)
typedef struct zt_gpu_spec { double bf16_flops, hbm_bw, hbm_bytes; } zt_gpu_spec;
typedef struct zt_gpu_step {
    double compute_s, traffic_s, launch_s, step_s;
} zt_gpu_step;
/* "h100", "h200": 0 and the peaks; -1 for any other name */
int zt_gpu_spec_of(const char *name, zt_gpu_spec *out);
void zt_gpu_step_predict(const zt_gpu_spec *g, double flops, double bytes, long launches, zt_gpu_step *out);

#endif
