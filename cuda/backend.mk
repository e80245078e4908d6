# cuda/backend.mk — the CUDA backend's two builds, included by the main Makefile (after cuda.mk,
# which provides the harness objects and HX_* variables).
#
#   host execution build ("cudasim", always): the backend's .cu files compiled by g++ against the
#     harness; its objects go into build/libztrain.a, so ./ztrain, the tests and the benchmarks all
#     have device = "cudasim".
#   GPU build ("cuda"): the same .cu files plus comm_nccl.cu compiled by nvcc for sm_80 and sm_90
#     (warnings are errors), linked with cuBLASLt, NCCL and the CUDA runtime into build/ztrain-cuda
#     (`make cuda`, run by `make test` whenever nvcc exists), or into ./ztrain itself with `make CUDA=1`.
#     That binary has cpu, devsim and cuda, not cudasim (see the factory rule below).

# every cuda/*.cu but the NCCL communicator (GPU build only)
CU_SRC := $(filter-out cuda/comm_nccl.cu,$(sort $(wildcard cuda/*.cu)))
# Header dependencies: g++ writes them (-MMD -MP: build/cudasim/*.d, build/tests/test_kernels_*.d); the nvcc
# objects depend on every header of cuda/ and src/ (CU_HDRS_ALL).
CU_HDRS := $(wildcard cuda/*.h cuda/*.cuh cuda/hostexec/*.h)
CU_HDRS_ALL := $(CU_HDRS) $(SRC_HDRS)
MPI_CFLAGS := $(shell $(MPICC) -showme:compile 2>/dev/null)

# -- host execution build
CUSIM_OBJ := $(patsubst cuda/%.cu,build/cudasim/%.o,$(CU_SRC)) build/hostexec/hostexec.o build/hostexec/hostexec_sched.o
build/cudasim/%.o: cuda/%.cu
	@mkdir -p $(dir $@)
	$(HX_CXX) $(HX_FLAGS) $(DEPFLAGS) -Isrc -I. $(MPI_CFLAGS) -x c++ -c $< -o $@
-include $(CUSIM_OBJ:.o=.d)
$(call obj_deps,$(filter build/cudasim/%,$(CUSIM_OBJ)),$(CU_HDRS_ALL))

# -- GPU build
NVCC_GENCODE ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=[sm_90,compute_90]
NVCC_BUILD_FLAGS := -std=c++17 -O3 $(NVCC_GENCODE) --Werror all-warnings -Xcompiler -Wall,-Wextra,-Werror \
  -Icuda -Isrc -I. $(MPI_CFLAGS)
CUDA_LIBS := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublasLt -lcublas -lnccl -lcudart -lstdc++
CUGPU_OBJ := $(patsubst cuda/%.cu,build/cuda/%.o,$(CU_SRC) cuda/comm_nccl.cu)
# ptxas's report of each kernel (registers, stack frame, spills, shared memory) per architecture goes to
# build/cuda/NAME.ptxas (tests/e2e/test_cuda_resources.sh reads it: no kernel may use local memory); one recipe makes
# both, and the GPU binary wants the reports too, so a build directory without them gets them
CUGPU_PTXAS := $(CUGPU_OBJ:.o=.ptxas)
build/cuda/%.o build/cuda/%.ptxas: cuda/%.cu $(CU_HDRS_ALL)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_BUILD_FLAGS) -Xptxas -v -c $< -o build/cuda/$*.o 2> build/cuda/$*.ptxas || { cat build/cuda/$*.ptxas >&2; exit 1; }
# The factory with the GPU backend compiled in, and without cudasim: the harness answers a few CUDA
# runtime calls under their real names (cudaGetLastError, cudaStreamSynchronize, ...), which must never
# shadow libcudart's in a binary that runs on a GPU. cudasim lives in the cpu build (./ztrain, make test).
# (wherever backend_factory.c lives under src/)
FACTORY_SRC := $(filter %/backend_factory.c,$(SRC))
build/cuda/backend_factory.o: $(FACTORY_SRC) cuda/cuda_backend.h
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(DEPFLAGS) -DZT_HAVE_CUDA -DZT_NO_CUDASIM -c $< -o $@
-include build/cuda/backend_factory.d
$(call obj_deps,build/cuda/backend_factory.o,$(SRC_HDRS))
CUGPU_LINK := $(MAIN_OBJ) build/cuda/backend_factory.o $(CUGPU_OBJ) \
  $(filter-out $(patsubst src/%.c,build/obj/%.o,$(FACTORY_SRC)),$(LIB_OBJ))
build/ztrain-cuda: $(CUGPU_LINK) $(CUGPU_PTXAS)
	$(CC) $(ALL_CFLAGS) -o $@ $(CUGPU_LINK) $(LIBS) $(CUDA_LIBS)

# -- kernel tests: each cuda/tests/*.cc against the cudasim objects in build/libztrain.a
CU_TEST_SRC := $(wildcard cuda/tests/*.cc)
CU_TEST_BIN := $(patsubst cuda/tests/%.cc,build/tests/%,$(CU_TEST_SRC))
build/tests/test_kernels_%: cuda/tests/test_kernels_%.cc build/libztrain.a
	@mkdir -p $(dir $@)
	$(HX_CXX) $(HX_FLAGS) $(DEPFLAGS) -MF $@.d -MT $@ -Isrc -I. -Itests/helpers $(MPI_CFLAGS) $< build/libztrain.a $(LIBS) -o $@
-include $(CU_TEST_BIN:=.d)
$(call bin_deps,$(CU_TEST_BIN),$(CU_HDRS_ALL) $(wildcard cuda/tests/*.h) tests/helpers/check.h)
