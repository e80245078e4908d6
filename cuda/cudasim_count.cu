// cudasim_count.cu — the host execution harness's count of executed kernel launches, as a C entry point for
// core/dist/backend_factory.c (zt_backend_harness_launches): tests/e2e/test_gpu_budget.sh checks the launch table
// of core/diag/backend_count.c against it. Nothing in the GPU build (launches there are the GPU's).
#include "zt_cuda_compat.cuh"

#ifdef ZT_HOSTEXEC
extern "C" unsigned long long zt_cudasim_launch_count(void) { return (unsigned long long)hx::launch_count(); }
#else
namespace zt_cudasim_count_gpu_build {} // the GPU build has no harness
#endif
