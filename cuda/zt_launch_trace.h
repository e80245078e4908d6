// zt_launch_trace.h — the launch trace and the recording behind a step's CUDA graph (cuda_backend_graph.cu).
// While zt_trace_sink is set, every ZT_LAUNCH mixes its kernel, grid, block, dynamic shared memory and argument
// values (converted to the kernel's parameter types) into *zt_trace_sink, as do the backend's copies, memsets and
// cuBLASLt products: two steps with equal traces made the same launches with the same arguments. FNV-1a over the
// bytes; an argument with padding bytes may hash differently each time, which only ever forbids a replay.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <type_traits>

// a struct passed to a kernel must hash as its values: no padding bytes (an explicit pad member where needed)
template <typename T>
constexpr bool zt_trace_hashable = !std::is_class_v<T> || std::has_unique_object_representations_v<T>;

inline uint64_t *zt_trace_sink = nullptr;

constexpr uint64_t zt_fnv_seed = 0xcbf29ce484222325ull;
// h with the n bytes at p mixed in (FNV-1a)
inline uint64_t zt_fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = static_cast<const unsigned char *>(p);
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

inline void zt_trace_bytes(const void *p, size_t n) {
    if (zt_trace_sink) *zt_trace_sink = zt_fnv(*zt_trace_sink, p, n);
}

template <typename D, typename... A>
inline void zt_trace_launch(const void *kernel, const D &grid, const D &block, size_t shmem, const A &...args) {
    static_assert((zt_trace_hashable<A> && ...), "a struct kernel argument with padding bytes: add a pad member");
    if (!zt_trace_sink) return;
    zt_trace_bytes(&kernel, sizeof kernel);
    zt_trace_bytes(&grid, sizeof grid);
    zt_trace_bytes(&block, sizeof block);
    zt_trace_bytes(&shmem, sizeof shmem);
    (zt_trace_bytes(&args, sizeof args), ...);
}
