# cuda/cuda.mk — build rules for the CUDA sources' two builds. Included by the main Makefile, or
# standalone: make -f cuda/cuda.mk [target]. Paths under build/ are relative to the current
# directory (the repository root).
#
#   build/tests/test_hostexec        host execution harness test: test_kernels.cu on the CPU (g++)
#   build/tests/test_hostexec-asan   the same with AddressSanitizer + UBSan
#   build/bench/bench_hostexec       harness speed (launch overhead, CUDA threads/s)
#   build/cuda-check/test_kernels.o  nvcc compile-only check of the same kernels (needs nvcc)
#   hostexec-test                    build and run the harness test
#   cuda-check                       the nvcc check, or a SKIP line when nvcc is missing
#
# Variables: HX_CXX (g++), HX_OPT (-O2), HX_CXXFLAGS, CUDA_HOME (/usr/local/cuda; its headers are
# needed by both builds), NVCC ($(CUDA_HOME)/bin/nvcc), NVCC_ARCH (-arch=sm_80), NVCC_FLAGS.

HX_MK := $(lastword $(MAKEFILE_LIST))
HX_DIR := $(patsubst %/,%,$(dir $(HX_MK)))
HX_STANDALONE := $(if $(filter $(HX_MK),$(firstword $(MAKEFILE_LIST))),1,)
HX_PREV_GOAL := $(.DEFAULT_GOAL)

CUDA_HOME ?= /usr/local/cuda
NVCC ?= $(CUDA_HOME)/bin/nvcc
NVCC_ARCH ?= -arch=sm_80
NVCC_FLAGS ?= -std=c++17 $(NVCC_ARCH) -Xcompiler -Wall,-Wextra
HX_CXX ?= g++
HX_OPT ?= -O2
HX_CXXFLAGS ?=

HX_SRC := $(HX_DIR)/hostexec
HX_OUT := build/hostexec
# tests/helpers/check.h: the PASS / FAIL lines of test_hostexec.cc (as every unit test's)
HX_CHECK_DIR := $(HX_DIR)/../tests/helpers
HX_HDRS := $(HX_DIR)/zt_cuda_compat.cuh $(wildcard $(HX_SRC)/*.h)
HX_WARN := -Wall -Wextra -Wshadow
# A kernel's large local array must hit the fiber stack's guard page, not jump over it.
HX_SAFE := -fstack-clash-protection
HX_FLAGS := -std=c++17 $(HX_OPT) -g $(HX_SAFE) $(HX_WARN) -I$(HX_DIR) -I$(HX_SRC) -I$(HX_CHECK_DIR) -isystem $(CUDA_HOME)/include \
  $(HX_CXXFLAGS)
HX_ASAN_FLAGS := -std=c++17 -O1 -g $(HX_SAFE) -fno-omit-frame-pointer -fsanitize=address,undefined $(HX_WARN) -I$(HX_DIR) \
  -I$(HX_SRC) -I$(HX_CHECK_DIR) -isystem $(CUDA_HOME)/include $(HX_CXXFLAGS)
HX_LIBS := -pthread

.PHONY: hostexec hostexec-test cuda-check hostexec-clean

hostexec: build/tests/test_hostexec build/bench/bench_hostexec

hostexec-test: build/tests/test_hostexec
	build/tests/test_hostexec

# -- host build (CPU) ---------------------------------------------------------------------------
$(HX_OUT)/%.o: $(HX_SRC)/%.cc $(HX_HDRS)
	@mkdir -p $(dir $@)
	$(HX_CXX) $(HX_FLAGS) -c $< -o $@

$(HX_OUT)/%.o: $(HX_SRC)/%.cu $(HX_HDRS)
	@mkdir -p $(dir $@)
	$(HX_CXX) $(HX_FLAGS) -x c++ -c $< -o $@

$(HX_OUT)/asan/%.o: $(HX_SRC)/%.cc $(HX_HDRS)
	@mkdir -p $(dir $@)
	$(HX_CXX) $(HX_ASAN_FLAGS) -c $< -o $@

$(HX_OUT)/asan/%.o: $(HX_SRC)/%.cu $(HX_HDRS)
	@mkdir -p $(dir $@)
	$(HX_CXX) $(HX_ASAN_FLAGS) -x c++ -c $< -o $@

$(HX_OUT)/test_hostexec.o $(HX_OUT)/asan/test_hostexec.o: $(HX_CHECK_DIR)/check.h

build/tests/test_hostexec: $(HX_OUT)/test_hostexec.o $(HX_OUT)/test_kernels.o $(HX_OUT)/hostexec.o $(HX_OUT)/hostexec_sched.o
	@mkdir -p $(dir $@)
	$(HX_CXX) -o $@ $^ $(HX_LIBS)

build/tests/test_hostexec-asan: $(HX_OUT)/asan/test_hostexec.o $(HX_OUT)/asan/test_kernels.o $(HX_OUT)/asan/hostexec.o $(HX_OUT)/asan/hostexec_sched.o
	@mkdir -p $(dir $@)
	$(HX_CXX) -fsanitize=address,undefined -o $@ $^ $(HX_LIBS)

build/bench/bench_hostexec: $(HX_OUT)/bench_hostexec.o $(HX_OUT)/test_kernels.o $(HX_OUT)/hostexec.o $(HX_OUT)/hostexec_sched.o
	@mkdir -p $(dir $@)
	$(HX_CXX) -o $@ $^ $(HX_LIBS)

# -- nvcc compile-only check --------------------------------------------------------------------
HX_HAVE_NVCC := $(shell command -v $(NVCC) 2>/dev/null)

build/cuda-check/%.o: $(HX_SRC)/%.cu $(HX_HDRS)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) -I$(HX_DIR) -I$(HX_SRC) -c $< -o $@

ifneq ($(HX_HAVE_NVCC),)
cuda-check: build/cuda-check/test_kernels.o
else
cuda-check:
	@echo "SKIP cuda-check: $(NVCC) not found (set CUDA_HOME or NVCC)"
endif

hostexec-clean:
	rm -rf $(HX_OUT) build/cuda-check build/tests/test_hostexec build/tests/test_hostexec-asan build/bench/bench_hostexec

# Standalone, `make -f cuda/cuda.mk` builds the harness; included, leave the includer's default.
ifeq ($(HX_STANDALONE),1)
.DEFAULT_GOAL := hostexec
else
.DEFAULT_GOAL := $(HX_PREV_GOAL)
endif
