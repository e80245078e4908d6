// hostexec_internal.h — the seam between the harness's launcher (hostexec.cc: configuration,
// launch checks, worker pool, runtime calls) and its block scheduler (hostexec_sched.cc: fibers,
// barriers, warp rendezvous). Not for kernel sources.
#pragma once

#include "hostexec.h"

#include <atomic>

namespace hx {

struct Worker; // what one OS thread needs to run blocks: fiber stacks, block state

[[noreturn]] void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

Worker *worker_get(void);  // this OS thread's worker, created on first use, kept for later launches
void worker_release(void); // frees this OS thread's worker, if it has one

// Runs blocks of launch L, taking indices from `next` until nblocks are taken (workers of the
// pool share one counter). seq: the launch's number, which with cfg.seed seeds the interleaving.
void worker_run_blocks(Worker *W, const LaunchSpec &L, uint64_t seq, const Config &cfg, std::atomic<uint64_t> &next,
                       uint64_t nblocks);

bool in_kernel(void); // is this OS thread running a CUDA thread right now?

} // namespace hx
