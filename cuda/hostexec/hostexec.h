// hostexec.h — the host execution harness: lets CUDA kernel sources compile with g++ (-std=c++17)
// and really run every launch on the CPU, so CI without a GPU checks kernels against the cpu backend.
//
// Owns: the CUDA built-in variables (threadIdx, blockIdx, blockDim, gridDim, warpSize), the
// qualifiers that must mean something on the host (__shared__, __launch_bounds__), the launch
// (ZT_LAUNCH -> hx::make_launcher), block barriers, warp rendezvous (shuffles, votes, __syncwarp),
// atomics, the few math intrinsics CUDA has and libm lacks, and the handful of CUDA runtime calls a
// host build answers (last error, synchronize, cudaFuncSetAttribute for dynamic shared memory).
//
// Model: a launch runs its grid block by block on a small pool of OS threads (blocks are taken
// dynamically, one at a time); a block runs start to finish on one OS thread; each CUDA thread of
// the block is a fiber on that thread, so __syncthreads() and warp operations are real rendezvous.
// Fibers that reach no barrier run to completion back to back on one stack, with no switch.
// The order a block's threads start in and resume in after a barrier is shuffled by a seeded
// generator (ZT_HOSTEXEC_SEED; 0 = index order): warps in random order, lanes in random order
// within a warp. So a missing barrier shows up as a wrong result, while race-free kernels give
// the same bits under any seed and any number of OS threads (float atomics aside).
//
// Include it only through cuda/zt_cuda_compat.cuh. Everything a kernel may use is declared here;
// anything else is deliberately a compile error (no catch-all macros). See README.md next to it.
#pragma once

#ifdef __CUDACC__
#error "hostexec.h is the host build's CUDA stand-in; nvcc builds include cuda_runtime.h (use zt_cuda_compat.cuh)"
#endif

// The toolkit's headers work with g++ as they are: vector_types.h (dim3, uint3, float4...),
// cuda_fp16.h / cuda_bf16.h (types, conversions, arithmetic), and through them cuda_runtime_api.h
// (cudaError_t, cudaStream_t and the runtime's declarations; only the calls defined in hostexec.cc
// link, any other runtime call is a link error in the host build).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <vector_functions.h>
#include <vector_types.h>

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "zt_launch_trace.h"

#define ZT_HOSTEXEC 1

// ---------------------------------------------------------------------------------------------
// Qualifiers. host_defines.h already makes __global__, __device__, __host__, __constant__,
// __grid_constant__ empty and __forceinline__ / __align__ GNU attributes; __restrict__ is g++'s own.
// A block's fibers all run on one OS thread and an OS thread runs one block at a time, so a
// per-thread static is exactly "shared by the block, private to it". Its contents carry over from
// the previous block on that OS thread (CUDA leaves shared memory undefined too).
// `extern __shared__` does not compile here on purpose: use ZT_DYNAMIC_SMEM(type).
#undef __shared__
#define __shared__ static thread_local
#ifndef __launch_bounds__
#define __launch_bounds__(...)
#endif

// ---------------------------------------------------------------------------------------------
// Built-in variables: this OS thread's current fiber / block / launch (set by the scheduler).
extern __thread uint3 hx_threadIdx_;
extern __thread uint3 hx_blockIdx_;
extern __thread uint3 hx_blockDim_;
extern __thread uint3 hx_gridDim_;
extern __thread unsigned char *hx_dyn_smem_;
#define threadIdx (static_cast<const uint3 &>(hx_threadIdx_))
#define blockIdx (static_cast<const uint3 &>(hx_blockIdx_))
#define blockDim (static_cast<const uint3 &>(hx_blockDim_))
#define gridDim (static_cast<const uint3 &>(hx_gridDim_))
static constexpr int warpSize = 32;

// The launch's dynamic shared memory (shmem_bytes of ZT_LAUNCH), 16-byte aligned, per block.
#define ZT_DYNAMIC_SMEM(type) (reinterpret_cast<type *>(hx_dyn_smem_))

namespace hx {

// ---------------------------------------------------------------------------------------------
// Configuration: read from the environment on first use, changeable between launches.
struct Config {
    unsigned threads;          // OS threads a launch spreads its blocks over (ZT_HOSTEXEC_THREADS; default: CPUs available)
    size_t stack_bytes;        // per-fiber stack (ZT_HOSTEXEC_STACK_KB; default 64 KiB), plus a guard page
    uint64_t seed;             // interleaving seed (ZT_HOSTEXEC_SEED; default 1)
    bool poison_smem;          // fill dynamic shared memory with 0xff before each block (ZT_HOSTEXEC_POISON; default 1)
    size_t dyn_smem_default;   // dynamic shared memory a kernel may use without opt-in (48 KiB, as CUDA)
    size_t dyn_smem_optin_max; // limit for cudaFuncAttributeMaxDynamicSharedMemorySize (227 KiB, as sm_90)
};
Config config_get(void);
void config_set(const Config &cfg); // not during a launch
void shutdown(void);                // joins the workers and frees stacks; the next launch starts over
uint64_t launch_count(void);        // launches run so far (they seed the interleaving)

// ---------------------------------------------------------------------------------------------
// Launch. thread_fn runs one CUDA thread: it calls the kernel with a fresh copy of the arguments.
struct LaunchSpec {
    const char *name;
    const void *kernel; // identity for cudaFuncSetAttribute
    dim3 grid, block;
    size_t shmem;
    cudaStream_t stream; // accepted and ignored: every launch is synchronous
    void (*thread_fn)(const void *closure);
    const void *closure;
};
cudaError_t launch(const LaunchSpec &spec);

// Graph capture, as cudaStreamBeginCapture / EndCapture: between capture_begin and capture_end the launches (and
// the work handed to run_or_record: the backend's copies and memsets) are recorded in order instead of run;
// capture_end returns them, and running each in order replays the capture (the arguments as they were at launch)
using Recorded = std::vector<std::function<void()>>;
void capture_begin(void);
Recorded capture_end(void);
bool capturing(void);
void run_or_record(std::function<void()> work);

template <typename... P>
class Launcher {
  public:
    Launcher(void (*kernel)(P...), const char *name, dim3 grid, dim3 block, size_t shmem, cudaStream_t stream)
        : kernel_(kernel), spec_{name, reinterpret_cast<const void *>(kernel), grid, block, shmem, stream, nullptr, nullptr} {}

    template <typename... A>
    void operator()(A &&...args) {
        static_assert(sizeof...(A) == sizeof...(P), "ZT_LAUNCH: wrong number of kernel arguments");
        // Arguments convert to the parameter types once, at launch (as with <<<>>>).
        struct Closure {
            void (*kernel)(P...);
            std::tuple<std::decay_t<P>...> args;
        };
        Closure c{kernel_, std::tuple<std::decay_t<P>...>(std::forward<A>(args)...)};
        if (zt_trace_sink)
            std::apply([this](const auto &...a) { zt_trace_launch(spec_.kernel, spec_.grid, spec_.block, spec_.shmem, a...); },
                       c.args);
        spec_.thread_fn = [](const void *p) {
            const Closure *cl = static_cast<const Closure *>(p);
            std::apply(cl->kernel, cl->args);
        };
        if (!capturing()) { // the launch now, its closure on this stack
            spec_.closure = &c;
            launch(spec_);
            return;
        }
        auto kept = std::make_shared<Closure>(std::move(c)); // recorded: the closure lives as long as the capture
        run_or_record([s = spec_, kept]() mutable {
            s.closure = kept.get();
            launch(s);
        });
    }

  private:
    void (*kernel_)(P...);
    LaunchSpec spec_;
};

template <typename... P>
Launcher<P...> make_launcher(void (*kernel)(P...), const char *name, dim3 grid, dim3 block, size_t shmem,
                             cudaStream_t stream) {
    return Launcher<P...>(kernel, name, grid, block, shmem, stream);
}

// ---------------------------------------------------------------------------------------------
// Rendezvous (hostexec_sched.cc). Every call suspends the calling fiber until its partners arrive.
enum ShflMode { kShflIdx, kShflUp, kShflDown, kShflXor };
void sync_block(void);
int sync_block_count(int pred, int *participants);
void sync_warp(unsigned mask);
uint64_t shfl(unsigned mask, uint64_t bits, int mode, int lane_arg, int width);
unsigned ballot(unsigned mask, int pred);       // bit per lane whose pred != 0
int vote_all(unsigned mask, int pred);          // every lane's pred != 0
// every lane's `bits` into all[lane] (one rendezvous; lanes a partial warp lacks: ~0): the building block of
// the warp-wide matrix instructions (zt_mma.cuh), which need all 32 lanes' fragments
void warp_gather(unsigned mask, uint64_t bits, uint64_t all[32]);

// The toolkit's __half2 / __nv_bfloat162 are not trivially copyable (user-written assignment),
// but they are plain bits; hence the void* casts.
template <typename T>
inline T shfl_as(unsigned mask, T v, int mode, int lane_arg, int width) {
    static_assert(sizeof(T) <= 8, "shuffle of an unsupported type");
    uint64_t bits = 0;
    memcpy(&bits, static_cast<const void *>(&v), sizeof v);
    bits = shfl(mask, bits, mode, lane_arg, width);
    T r;
    memcpy(static_cast<void *>(&r), &bits, sizeof r);
    return r;
}

template <typename T>
inline T bits_as(const void *p) {
    T r;
    memcpy(&r, p, sizeof r);
    return r;
}

} // namespace hx

// ---------------------------------------------------------------------------------------------
// Synchronisation. __syncthreads counts exited threads as arrived (as the hardware does for
// exited warps); a barrier that some live thread never reaches is reported as a deadlock.
inline void __syncthreads(void) { hx::sync_block(); }
inline int __syncthreads_count(int pred) { int n; return hx::sync_block_count(pred, &n); }
inline int __syncthreads_and(int pred) { int n; return hx::sync_block_count(pred, &n) == n; }
inline int __syncthreads_or(int pred) { int n; return hx::sync_block_count(pred, &n) != 0; }
inline void __syncwarp(unsigned mask = 0xffffffffu) { hx::sync_warp(mask); }
inline void __threadfence(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block(void) { __atomic_signal_fence(__ATOMIC_SEQ_CST); }

// Warp operations: every lane of the warp must take part (full mask; the lanes a partial last warp
// has). A partial mask, a lane that has exited, or mixed operations end the program with a message.
#define HX_SHFL_OVERLOADS(T)                                                                             \
    inline T __shfl_sync(unsigned mask, T var, int src_lane, int width = warpSize) {                    \
        return hx::shfl_as<T>(mask, var, hx::kShflIdx, src_lane, width);                                 \
    }                                                                                                    \
    inline T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize) {               \
        return hx::shfl_as<T>(mask, var, hx::kShflUp, (int)delta, width);                                \
    }                                                                                                    \
    inline T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize) {             \
        return hx::shfl_as<T>(mask, var, hx::kShflDown, (int)delta, width);                              \
    }                                                                                                    \
    inline T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = warpSize) {               \
        return hx::shfl_as<T>(mask, var, hx::kShflXor, lane_mask, width);                                \
    }
HX_SHFL_OVERLOADS(int)
HX_SHFL_OVERLOADS(unsigned)
HX_SHFL_OVERLOADS(long)
HX_SHFL_OVERLOADS(unsigned long)
HX_SHFL_OVERLOADS(long long)
HX_SHFL_OVERLOADS(unsigned long long)
HX_SHFL_OVERLOADS(float)
HX_SHFL_OVERLOADS(double)
HX_SHFL_OVERLOADS(__half)
HX_SHFL_OVERLOADS(__half2)
HX_SHFL_OVERLOADS(__nv_bfloat16)
HX_SHFL_OVERLOADS(__nv_bfloat162)
#undef HX_SHFL_OVERLOADS

inline unsigned __ballot_sync(unsigned mask, int pred) { return hx::ballot(mask, pred); }
inline int __any_sync(unsigned mask, int pred) { return hx::ballot(mask, pred) != 0; }
inline int __all_sync(unsigned mask, int pred) { return hx::vote_all(mask, pred); }

// ---------------------------------------------------------------------------------------------
// Atomics: real (relaxed, like CUDA's device-scope atomics), since blocks run on several OS threads.
// Float sums through atomicAdd depend on the order blocks finish in unless ZT_HOSTEXEC_THREADS=1.
#define HX_ATOMIC_INT(T)                                                                                 \
    inline T atomicAdd(T *p, T v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }                \
    inline T atomicSub(T *p, T v) { return __atomic_fetch_sub(p, v, __ATOMIC_RELAXED); }                \
    inline T atomicAnd(T *p, T v) { return __atomic_fetch_and(p, v, __ATOMIC_RELAXED); }                \
    inline T atomicOr(T *p, T v) { return __atomic_fetch_or(p, v, __ATOMIC_RELAXED); }                  \
    inline T atomicXor(T *p, T v) { return __atomic_fetch_xor(p, v, __ATOMIC_RELAXED); }                \
    inline T atomicExch(T *p, T v) { return __atomic_exchange_n(p, v, __ATOMIC_RELAXED); }              \
    inline T atomicCAS(T *p, T cmp, T v) {                                                               \
        __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);             \
        return cmp;                                                                                      \
    }                                                                                                    \
    inline T atomicMax(T *p, T v) {                                                                      \
        T old = __atomic_load_n(p, __ATOMIC_RELAXED);                                                    \
        while (old < v && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) \
            ;                                                                                            \
        return old;                                                                                      \
    }                                                                                                    \
    inline T atomicMin(T *p, T v) {                                                                      \
        T old = __atomic_load_n(p, __ATOMIC_RELAXED);                                                    \
        while (old > v && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) \
            ;                                                                                            \
        return old;                                                                                      \
    }
HX_ATOMIC_INT(int)
HX_ATOMIC_INT(unsigned)
HX_ATOMIC_INT(unsigned long long)
#undef HX_ATOMIC_INT
inline long long atomicMax(long long *p, long long v) {
    long long old = __atomic_load_n(p, __ATOMIC_RELAXED);
    while (old < v && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
    return old;
}
inline long long atomicMin(long long *p, long long v) {
    long long old = __atomic_load_n(p, __ATOMIC_RELAXED);
    while (old > v && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
    return old;
}
#define HX_ATOMIC_FLOAT(T)                                                                               \
    inline T atomicAdd(T *p, T v) {                                                                      \
        T old, sum;                                                                                      \
        __atomic_load(p, &old, __ATOMIC_RELAXED);                                                        \
        do {                                                                                             \
            sum = old + v;                                                                               \
        } while (!__atomic_compare_exchange(p, &old, &sum, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));  \
        return old;                                                                                      \
    }                                                                                                    \
    inline T atomicExch(T *p, T v) {                                                                     \
        T old;                                                                                           \
        __atomic_exchange(p, &v, &old, __ATOMIC_RELAXED);                                                \
        return old;                                                                                      \
    }
HX_ATOMIC_FLOAT(float)
HX_ATOMIC_FLOAT(double)
#undef HX_ATOMIC_FLOAT

// ---------------------------------------------------------------------------------------------
// Math. expf, logf, tanhf, sqrtf, fmaxf, fminf, fabsf, powf, erff, fmaf... come from <math.h>.
// The fast-math intrinsics are the accurate libm functions here (tests compare with a tolerance).
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __tanf(float x) { return tanf(x); }
inline float __powf(float x, float y) { return powf(x, y); }
inline float __fdividef(float x, float y) { return x / y; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return sqrtf(x); }
inline float __frsqrt_rn(float x) { return 1.0f / sqrtf(x); }
inline float __fadd_rn(float x, float y) { return x + y; }
inline float __fsub_rn(float x, float y) { return x - y; }
inline float __fmul_rn(float x, float y) { return x * y; }
inline float __fdiv_rn(float x, float y) { return x / y; }
inline float __fmaf_rn(float x, float y, float z) { return fmaf(x, y, z); }
inline float __saturatef(float x) { return x > 0.0f ? (x < 1.0f ? x : 1.0f) : 0.0f; } // NaN -> 0
inline int __float2int_rn(float x) { return (int)nearbyintf(x); }
inline int __float2int_rz(float x) { return (int)x; }
inline int __float2int_rd(float x) { return (int)floorf(x); }
inline int __float2int_ru(float x) { return (int)ceilf(x); }
inline float __int2float_rn(int x) { return (float)x; }
inline float __uint2float_rn(unsigned x) { return (float)x; }
inline int __float_as_int(float x) { return hx::bits_as<int>(&x); }
inline unsigned __float_as_uint(float x) { return hx::bits_as<unsigned>(&x); }
inline float __int_as_float(int x) { return hx::bits_as<float>(&x); }
inline float __uint_as_float(unsigned x) { return hx::bits_as<float>(&x); }
inline long long __double_as_longlong(double x) { return hx::bits_as<long long>(&x); }
inline double __longlong_as_double(long long x) { return hx::bits_as<double>(&x); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x ? __builtin_clz((unsigned)x) : 32; }
inline int __clzll(long long x) { return x ? __builtin_clzll((unsigned long long)x) : 64; }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned __brev(unsigned x) {
    x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
    x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
    x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4);
    x = ((x >> 8) & 0x00ff00ffu) | ((x & 0x00ff00ffu) << 8);
    return (x >> 16) | (x << 16);
}

// CUDA's global min/max overloads (same-type arguments; mixed types are ambiguous, cast them).
#define HX_MINMAX(T)                                                                                     \
    inline T min(T a, T b) { return b < a ? b : a; }                                                     \
    inline T max(T a, T b) { return a < b ? b : a; }
HX_MINMAX(int)
HX_MINMAX(unsigned)
HX_MINMAX(long)
HX_MINMAX(unsigned long)
HX_MINMAX(long long)
HX_MINMAX(unsigned long long)
#undef HX_MINMAX
inline float min(float a, float b) { return fminf(a, b); }
inline float max(float a, float b) { return fmaxf(a, b); }
inline double min(double a, double b) { return fmin(a, b); }
inline double max(double a, double b) { return fmax(a, b); }

// Read-only cache loads: plain loads here.
#define HX_LDG(T)                                                                                        \
    inline T __ldg(const T *p) { return *p; }
HX_LDG(char) HX_LDG(signed char) HX_LDG(unsigned char) HX_LDG(short) HX_LDG(unsigned short)
HX_LDG(int) HX_LDG(unsigned) HX_LDG(long) HX_LDG(unsigned long) HX_LDG(long long) HX_LDG(unsigned long long)
HX_LDG(float) HX_LDG(double) HX_LDG(__half) HX_LDG(__half2) HX_LDG(__nv_bfloat16) HX_LDG(__nv_bfloat162)
HX_LDG(int2) HX_LDG(int4) HX_LDG(uint2) HX_LDG(uint4) HX_LDG(float2) HX_LDG(float4) HX_LDG(double2)
#undef HX_LDG

// ---------------------------------------------------------------------------------------------
// The CUDA runtime's template overload (cuda_runtime.h, which the host build does not include).
template <typename T>
inline cudaError_t cudaFuncSetAttribute(T *entry, cudaFuncAttribute attr, int value) {
    return ::cudaFuncSetAttribute(reinterpret_cast<const void *>(entry), attr, value);
}

// Kernel launch; use through ZT_LAUNCH (zt_cuda_compat.cuh). Errors as from <<<>>>: cudaGetLastError().
#define ZT_HX_LAUNCH(kernel, grid, block, shmem, stream, ...)                                          \
    ::hx::make_launcher(kernel, #kernel, grid, block, shmem, stream)(__VA_ARGS__)
