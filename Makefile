# ztrain — build, test, demo, bench.
#   make            ./ztrain (cpu backend, MPI, OpenMP, BLIS, parallel HDF5, libconfig)
#   make asan       ./ztrain-asan and build/tests/*-asan with AddressSanitizer + UBSan
#   make test       install missing packages, build, run tests/run.sh (ends "N passed, N failed")
#   make test-long  the slower checks
#   make demo       install, build, prepare a corpus, train on 2 ranks, sample
#   make demo-finetune  pretrain a small GPT-2 on the Old Testament, save it with transformers, LoRA fine-tune
#                   it on the New Testament at 1 and 2 ranks (bit-identical), check it in transformers and PEFT
#   make bench      step throughput vs sgemm peak and PyTorch; with a GPU, GPT-2 124M/350M tokens/s and MFU
#   make CUDA=1     ./ztrain with the GPU backend too (nvcc, cuBLASLt, NCCL; sm_80 + sm_90)
#   make cuda       build/ztrain-cuda: the GPU build linked beside ./ztrain (make test does it when nvcc exists)
# Respects CC/MPICC, CFLAGS, LDFLAGS, ARCH (default -march=native), BLAS=blis|openblas, CUDA_HOME, NVCC.

MPICC ?= mpicc
CC := $(MPICC)
ARCH ?= -march=native
OPT ?= -O3
BLAS ?= blis
WARN := -Wall -Wextra -Wshadow -Wmissing-prototypes
PKGS := hdf5-openmpi libconfig libpcre2-8 libcrypto

ifeq ($(BLAS),blis)
BLAS_DIR := /usr/lib/x86_64-linux-gnu/blis-openmp
BLAS_CFLAGS := -isystem /usr/include/x86_64-linux-gnu/blis-openmp -DZT_BLAS_BLIS
BLAS_LIBS := -L$(BLAS_DIR) -Wl,-rpath,$(BLAS_DIR) -lblis
else
BLAS_CFLAGS := $(shell pkg-config --cflags openblas 2>/dev/null) -DZT_BLAS_OPENBLAS
BLAS_LIBS := $(shell pkg-config --libs openblas 2>/dev/null)
endif

PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS := $(shell pkg-config --libs $(PKGS) 2>/dev/null)

CFLAGS ?=
ALL_CFLAGS := -std=gnu11 $(OPT) $(ARCH) -fno-math-errno -fno-trapping-math -fopenmp $(WARN) -Isrc -I. $(BLAS_CFLAGS) $(PKG_CFLAGS) $(CFLAGS)
LIBS := $(PKG_LIBS) $(BLAS_LIBS) -fopenmp -lm -lstdc++ -pthread $(LDFLAGS)

SRC := $(wildcard src/*/*.c)
OBJ := $(patsubst src/%.c,build/obj/%.o,$(SRC))
LIB_OBJ := $(filter-out build/obj/cmd/main.o,$(OBJ))
TEST_SRC := $(wildcard tests/c/*.c)
TEST_BIN := $(patsubst tests/c/%.c,build/tests/%,$(TEST_SRC))
BENCH_SRC := $(wildcard benchmarks/*.c)
BENCH_BIN := $(patsubst benchmarks/%.c,build/bench/%,$(BENCH_SRC))

# parallel jobs for the builds that test/demo/bench start
JOBS ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: all deps build-all asan test test-long demo demo-finetune bench clean cuda

include cuda/cuda.mk
include cuda/backend.mk
include tests/mutate/mutate.mk
include tests/fuzz/fuzz.mk
.DEFAULT_GOAL := all
# Every entry target first installs missing packages, then re-enters make so pkg-config sees them.
all: deps
	@$(MAKE) --no-print-directory build-all

deps:
	@scripts/install-deps.sh build

build-all: ztrain $(TEST_BIN) $(BENCH_BIN) build/tests/test_hostexec $(CU_TEST_BIN) data/tiny/train.bin

# the tiny model's synthetic data (inputs/tiny.cfg), so `./ztrain train -c inputs/tiny.cfg` works after make
data/tiny/train.bin: tests/make_data.py
	/usr/bin/python3 tests/make_data.py data/tiny 256 40000 > /dev/null

build/obj/%.o: src/%.c $(wildcard src/*/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

build/libztrain.a: $(LIB_OBJ) $(CUSIM_OBJ)
	@rm -f $@
	ar rcs $@ $^

# ./ztrain remembers which build it is: switching between `make` and `make CUDA=1` relinks it
BUILD_MODE := $(if $(filter 1,$(CUDA)),cuda,cpu)
build/.mode-$(BUILD_MODE):
	@mkdir -p build && rm -f build/.mode-* && touch $@

ifeq ($(CUDA),1)
ztrain: build/ztrain-cuda build/.mode-$(BUILD_MODE)
	cp build/ztrain-cuda $@
else
ztrain: build/obj/cmd/main.o build/libztrain.a build/.mode-$(BUILD_MODE)
	$(CC) $(ALL_CFLAGS) -o $@ $(filter-out build/.mode-%,$^) $(LIBS)
endif

# the GPU build beside ./ztrain (compile and link only where there is no GPU)
cuda: build/ztrain-cuda

build/tests/%: tests/c/%.c build/libztrain.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $< build/libztrain.a $(LIBS)

build/bench/%: benchmarks/%.c build/libztrain.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $< build/libztrain.a $(LIBS)

asan: deps
	@$(MAKE) --no-print-directory -j$(JOBS) ztrain-asan $(ASAN_TEST_BIN)

# AddressSanitizer + UBSan: the sources object by object into build/asan/ (so -j applies); ./ztrain-asan
# and the unit tests' ASan builds (build/tests/NAME-asan) link the same objects.
ASAN_OPT ?= -O1
ASAN_CFLAGS := -std=gnu11 $(ASAN_OPT) -g -fno-omit-frame-pointer -fsanitize=address,undefined $(ARCH) -fopenmp $(WARN) \
  -Isrc -I. $(BLAS_CFLAGS) $(PKG_CFLAGS) $(CFLAGS)
ASAN_OBJ := $(patsubst src/%.c,build/asan/%.o,$(SRC))
ASAN_TEST_BIN := $(patsubst %,build/tests/%-asan,test_util test_ops test_ops_elementwise test_decode)
build/asan/%.o: src/%.c $(wildcard src/*/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(ASAN_CFLAGS) -c $< -o $@

build/libztrain-asan.a: $(filter-out build/asan/cmd/main.o,$(ASAN_OBJ)) $(CUSIM_OBJ)
	@rm -f $@
	ar rcs $@ $^

ztrain-asan: build/asan/cmd/main.o build/libztrain-asan.a
	$(CC) $(ASAN_CFLAGS) -o $@ $^ $(LIBS) -fsanitize=address,undefined

build/tests/%-asan: tests/c/%.c build/libztrain-asan.a
	@mkdir -p $(dir $@)
	$(CC) $(ASAN_CFLAGS) -o $@ $< build/libztrain-asan.a $(LIBS) -fsanitize=address,undefined

test: deps
	@scripts/install-deps.sh test
	@scripts/setup-venv.sh >/dev/null
	@if command -v $(NVCC) >/dev/null 2>&1; then \
	  $(MAKE) --no-print-directory -j$(JOBS) build-all ztrain-asan $(ASAN_TEST_BIN) cuda; \
	else echo "make test: nvcc not found: the GPU build (make cuda) is skipped"; \
	  $(MAKE) --no-print-directory -j$(JOBS) build-all ztrain-asan $(ASAN_TEST_BIN); fi
	tests/run.sh

test-long: deps
	@scripts/install-deps.sh test
	@scripts/setup-venv.sh >/dev/null
	@$(MAKE) --no-print-directory -j$(JOBS) build-all ztrain-asan $(ASAN_TEST_BIN) build/tests/test_hostexec-asan
	ZT_LONG=1 tests/run.sh

demo: deps
	@scripts/install-deps.sh demo
	@$(MAKE) --no-print-directory ztrain
	scripts/demo.sh

# LoRA fine-tuning: a GPT-2 pretrained on the Old Testament, saved by transformers, fine-tuned on the New
# Testament at 1 and 2 ranks, checked against transformers and PEFT (.venv-ref: scripts/setup-venv.sh)
demo-finetune: deps
	@scripts/install-deps.sh demo
	@scripts/setup-venv.sh >/dev/null
	@$(MAKE) --no-print-directory ztrain
	scripts/demo_finetune.sh

bench: deps
	@scripts/install-deps.sh test
	@$(MAKE) --no-print-directory build-all
	benchmarks/run_step_bench.sh
	benchmarks/bench_gpu.sh

clean:
	rm -rf build ztrain ztrain-asan
