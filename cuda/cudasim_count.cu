// cudasim_count.cu — the host execution harness's count of executed kernel launches and of elements packed as
// product operands, and of the packed-operand buffers' largest sizes, as C entry points for
// core/dist/backend_factory.c (zt_backend_harness_launches / _packed / _gemm16):
// tests/e2e/test_gpu_budget.sh checks the launch table and operand packing of core/diag/backend_count.c against them. Nothing in the GPU build (launches there are the GPU's).
#include "cuda_ops.h"

#ifdef ZT_HOSTEXEC
extern "C" unsigned long long zt_cudasim_launch_count(void) { return (unsigned long long)hx::launch_count(); }
// elements packed as product operands (cuda_gemm.cu): the wrapper's operand-packing bytes are 6 per element
extern "C" unsigned long long zt_cudasim_packed_elems(void) { return ZT_CU_NS::zt_cu_packed_elems(); }
// elements of the packed-operand buffers at their largest (cuda_gemm.cu)
extern "C" unsigned long long zt_cudasim_gemm16_elems(void) { return ZT_CU_NS::zt_cu_gemm16_elems(); }
#else
namespace zt_cudasim_count_gpu_build {} // the GPU build has no harness
#endif
