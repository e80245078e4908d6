// cuda_backend.cu — the CUDA backend's lifecycle: the slot table, creation and device binding (the GPU build and the
// host execution harness's "cudasim"), describe and destroy, the GPU list. The kept op, its fused round_to, the
// mirrors and memory are cuda_backend_core.cu; the slots that launch kernels cuda_backend_ops.cu.
#include "cuda_backend_internal.h"

namespace ZT_CU_NS {
namespace cub {

void b_describe(zt_backend *be, char *buf, size_t n) { snprintf(buf, n, "%s", ctx_of(be)->desc); }

void b_destroy(zt_backend *be) {
    if (!be) return;
    flush(be);
    cu_ctx *x = ctx_of(be);
    const char *st = getenv("ZT_CUDA_FUSE_ROUND_STATS");
    if (st && strcmp(st, "1") == 0 && (x->fused || x->unfused))
        fprintf(stderr, "%s: %ld round_to fused into the op that wrote the values, %ld as their own pass; %ld product "
                "operands read from 2-byte words without packing; %ld stash packs found their words written; %ld lazy "
                "unpacks, %ld of them run; %ld parameter packs done by the update\n", be->i->name, x->fused, x->unfused,
                x->mir.hits, x->packs_skipped, x->lazy_made, x->lazy_settled, x->adamw_words);
    b_free(be, x->scratch);
    if (x->tickets) b_free(be, x->tickets);
    for (void *r : x->ring) b_free(be, r);
    free_adamw_tables(be);
    graph_free(x);
    zt_cu_gemm_free(x->gemm);
#ifndef ZT_HOSTEXEC
    cudaStreamDestroy(x->stream);
#endif
    free(x);
    free(be);
}

zt_backend_i make_i(void) {
    zt_backend_i i;
    memset(&i, 0, sizeof i);
#ifdef ZT_HOSTEXEC
    i.name = "cudasim";
#else
    i.name = "cuda";
#endif
    i.mem = ZT_MEM_DEVICE;
    i.destroy = b_destroy;
    i.describe = b_describe;
    i.alloc = b_alloc;
    i.free = b_free;
    i.host_alloc = b_host_alloc;
    i.host_free = b_host_free;
    i.to_device = b_to_device;
    i.to_host = b_to_host;
    i.copy = b_copy;
    i.zero = b_zero;
    i.sync = b_sync;
    i.matmul = b_matmul;
    i.matmul_ld = b_matmul_ld;
    i.linear_fwd = b_linear_fwd;
    i.linear_bwd = b_linear_bwd;
    i.layernorm_fwd = b_layernorm_fwd;
    i.layernorm_bwd = b_layernorm_bwd;
    i.residual_layernorm_fwd = b_residual_layernorm_fwd;
    i.rmsnorm_fwd = b_rmsnorm_fwd;
    i.rmsnorm_bwd = b_rmsnorm_bwd;
    i.rope = b_rope;
    i.swiglu_fwd = b_swiglu_fwd;
    i.swiglu_bwd = b_swiglu_bwd;
    i.attention_fwd = b_attention_fwd;
    i.attention_bwd = b_attention_bwd;
    i.attention_decode = b_attention_decode;
    i.attention_fused_fwd = b_attention_fused_fwd;
    i.attention_fused_bwd = b_attention_fused_bwd;
    i.attention_bidir_fwd = b_attention_bidir_fwd;
    i.attention_bidir_bwd = b_attention_bidir_bwd;
    i.gelu_erf_fwd = b_gelu_erf_fwd;
    i.gelu_erf_bwd = b_gelu_erf_bwd;
    i.bias_add = b_bias_add;
    i.bias_grad = b_bias_grad;
    i.argmax_rows = b_argmax_rows;
    i.gemv = b_gemv;
    i.gelu_fwd = b_gelu_fwd;
    i.gelu_bwd = b_gelu_bwd;
    i.add = b_add;
    i.embed_fwd = b_embed_fwd;
    i.embed_bwd = b_embed_bwd;
    i.softmax_xent = b_softmax_xent;
    i.matmul16 = b_matmul16;
    i.softmax_xent16 = b_softmax_xent16;
    i.adamw = b_adamw;
    i.adamw_multi = b_adamw_multi;
    i.accumulate = b_accumulate;
    i.sumsq_chunks = b_sumsq_chunks;
    i.clip_scale = b_clip_scale;
    i.round_to = b_round_to;
    i.pack16 = b_pack16;
    i.pack16_ahead = b_pack16_ahead;
    i.unpack16_lazy = b_unpack16_lazy;
    i.unpack16 = b_unpack16;
    i.dropout = b_dropout;
    i.dequant = b_dequant;
    i.set_precision = b_set_precision;
    i.graph = b_graph;
    i.host_call = b_host_call;
    return i;
}

const zt_backend_i g_i = make_i();

zt_backend *make_backend(cu_ctx *x, int threads) {
    zt_backend *be = static_cast<zt_backend *>(zt_calloc(1, sizeof *be));
    be->i = &g_i;
    be->ctx = x;
    be->threads = threads;
    x->gemm = zt_cu_gemm_create(x->stream);
    const char *fr = getenv("ZT_CUDA_FUSE_ROUND");
    x->fuse_round = !(fr && strcmp(fr, "0") == 0);
    const char *mr = getenv("ZT_CUDA_MIRROR");
    x->mir_on = !(mr && strcmp(mr, "0") == 0);
    return be;
}

} // namespace cub
} // namespace ZT_CU_NS

using namespace ZT_CU_NS::cub;

#ifdef ZT_HOSTEXEC

extern "C" zt_backend *zt_cudasim_backend_create(int threads, char *err, size_t errlen) {
    (void)err;
    (void)errlen;
    zt_devsim_mem_init();
    // blocks of a launch spread over `threads` OS threads (the harness's pool); 0 = its default
    hx::Config cfg = hx::config_get();
    if (threads > 0 && cfg.threads != (unsigned)threads) {
        cfg.threads = (unsigned)threads;
        hx::config_set(cfg);
    }
    cu_ctx *x = static_cast<cu_ctx *>(zt_calloc(1, sizeof *x));
    x->stream = nullptr;
    snprintf(x->desc, sizeof x->desc,
             "cudasim: the CUDA kernels run on the CPU by the host execution harness (%u threads), devsim memory",
             hx::config_get().threads);
    return make_backend(x, (int)hx::config_get().threads);
}

#else

extern "C" zt_backend *zt_cuda_backend_create(int threads, char *err, size_t errlen) {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        zt_errf(err, errlen, "device = \"cuda\": no usable GPU: %s",
                e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount found 0 devices");
        return nullptr;
    }
    // local rank -> GPU (CUDA_VISIBLE_DEVICES is applied by the runtime)
    MPI_Comm node;
    int local_rank = 0, local_size = 1;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local_rank);
    MPI_Comm_size(node, &local_size);
    MPI_Comm_free(&node);
    if (local_size > count) {
        zt_errf(err, errlen, "device = \"cuda\": %d ranks on this node but only %d visible GPU%s: start at most one "
                "rank per GPU", local_size, count, count == 1 ? "" : "s");
        return nullptr;
    }
    ZT_CUDA(cudaSetDevice(local_rank));
    cu_ctx *x = static_cast<cu_ctx *>(zt_calloc(1, sizeof *x));
    x->device = local_rank;
    ZT_CUDA(cudaStreamCreateWithFlags(&x->stream, cudaStreamNonBlocking));
    cudaDeviceProp p;
    ZT_CUDA(cudaGetDeviceProperties(&p, local_rank));
    snprintf(x->desc, sizeof x->desc, "cuda: GPU %d %.256s (sm_%d%d, %.1f GiB), cuBLASLt", local_rank, p.name, p.major,
             p.minor, (double)p.totalGlobalMem / (1 << 30));
    return make_backend(x, threads > 0 ? threads : 1);
}

extern "C" int zt_cuda_list_devices(char *buf, size_t n) {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        snprintf(buf, n, "%s", cudaGetErrorString(e));
        return -1;
    }
    size_t used = 0;
    if (n) buf[0] = 0;
    for (int d = 0; d < count && used < n; d++) {
        cudaDeviceProp p;
        if (cudaGetDeviceProperties(&p, d) != cudaSuccess) continue;
        used += (size_t)snprintf(buf + used, n - used, "%d: %s, %.1f GiB, sm_%d%d\n", d, p.name,
                                 (double)p.totalGlobalMem / (1 << 30), p.major, p.minor);
    }
    return count;
}

// for comm_nccl.cu
extern "C" cudaStream_t zt_cuda_backend_stream(zt_backend *be) { return stream_of(be); }

#endif
