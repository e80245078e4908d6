// kernel_test.h — the includes a CUDA kernel test program under the host execution harness starts with (MPI
// without its C++ bindings, the kernels' launch functions, the backend interface, op_math, the backend factory,
// util, tests/helpers/check.h); then it includes kernel_check.h inside its anonymous namespace.
#ifndef ZT_CUDA_KERNEL_TEST_H
#define ZT_CUDA_KERNEL_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <vector>

#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include "cuda_ops.h"
#include "iface/backend.h"
#include "iface/op_math.h"

extern "C" {
#include "core/dist/backend_factory.h"
#include "util/util.h"
}
#include "check.h"

using namespace ZT_CU_NS;

#endif
