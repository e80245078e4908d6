# ztrain — build, test, demo, bench.
#   make            ./ztrain (cpu backend, MPI, OpenMP, BLIS, parallel HDF5, libconfig), the unit tests and test
#                   helpers (build/tests/), the benchmarks (build/bench/); installs nothing
#   make deps       install the missing Debian packages (apt-get); elsewhere print what to install (succeeds when
#                   pkg-config finds the build's libraries)
#   make asan       ./ztrain-asan and build/tests/*-asan with AddressSanitizer + UBSan
#   make test       make deps, build, run tests/run.sh (ends "N passed, N failed")
#   make test-long  the slower checks
#   make demo       make deps, build, prepare a corpus, train on 2 ranks, sample
#   make demo-finetune  pretrain a small GPT-2 on the Old Testament, save it with transformers, LoRA fine-tune
#   make demo-mlm   pretrain a small BERT as a masked language model on the demo corpus (accuracy table, plot)
#                   it on the New Testament at 1 and 2 ranks (bit-identical), check it in transformers and PEFT
#   make bench      step throughput vs sgemm peak and PyTorch; with a GPU, GPT-2 124M/350M tokens/s and MFU
#   make CUDA=1     ./ztrain with the GPU backend too (nvcc, cuBLASLt, NCCL; sm_80 + sm_90)
#   make cuda       build/ztrain-cuda: the GPU build linked beside ./ztrain (make test does it when nvcc exists)
# Respects CC/MPICC, CFLAGS, LDFLAGS, ARCH (default -march=native), BLAS=blis|openblas, CUDA_HOME, NVCC, and
# the library flags below (BLIS_CFLAGS, BLIS_LIBS, HDF5_PC).
#
# Sources: every src/**/*.c (any depth; -Isrc is the include root), unit tests tests/unit/**/test_*.c (one
# binary build/tests/test_NAME each), test helper programs tests/helpers/*.c (build/tests/NAME).
# Header dependencies come from the compiler (-MMD -MP: build/**/*.d).

MPICC ?= mpicc
CC := $(MPICC)
comma := ,
ARCH ?= -march=native
OPT ?= -O3
BLAS ?= blis
WARN := -Wall -Wextra -Wshadow -Wmissing-prototypes
DEPFLAGS := -MMD -MP
# pkg-config modules; HDF5_PC names the MPI-parallel HDF5 (Debian: hdf5-openmpi)
HDF5_PC ?= hdf5-openmpi
PKGS := $(HDF5_PC) libconfig libpcre2-8 libcrypto zlib libzstd

# BLIS, in this order: BLIS_CFLAGS / BLIS_LIBS as given (make BLIS_CFLAGS=... BLIS_LIBS=...); pkg-config's
# blis-openmp; Debian's OpenMP variant (libblis-openmp-dev: headers and library in blis-openmp/ folders, which
# ships no .pc file); pkg-config's blis. The OpenMP build is the one wanted: the thread-invariance tests rely on
# BLIS splitting work by its OpenMP thread count.
ifeq ($(BLAS),blis)
MULTIARCH := $(shell $(CC) -dumpmachine 2>/dev/null || echo x86_64-linux-gnu)
BLIS_DEB_INC := /usr/include/$(MULTIARCH)/blis-openmp
BLIS_DEB_LIB := /usr/lib/$(MULTIARCH)/blis-openmp
ifeq ($(origin BLIS_PC),undefined)
BLIS_PC := $(shell pkg-config --exists blis-openmp 2>/dev/null && echo blis-openmp)
ifeq ($(BLIS_PC)$(wildcard $(BLIS_DEB_INC)/blis.h),)
BLIS_PC := $(shell pkg-config --exists blis 2>/dev/null && echo blis)
endif
endif
ifeq ($(BLIS_PC),)
BLIS_CFLAGS_FOUND := -isystem $(BLIS_DEB_INC)
BLIS_LIBS_FOUND := -L$(BLIS_DEB_LIB) -Wl,-rpath,$(BLIS_DEB_LIB) -lblis
else
BLIS_LIBDIR := $(shell pkg-config --variable=libdir $(BLIS_PC) 2>/dev/null)
BLIS_CFLAGS_FOUND := $(shell pkg-config --cflags $(BLIS_PC) 2>/dev/null)
BLIS_LIBS_FOUND := $(shell pkg-config --libs $(BLIS_PC) 2>/dev/null) $(if $(BLIS_LIBDIR),-Wl$(comma)-rpath$(comma)$(BLIS_LIBDIR))
endif
ifeq ($(origin BLIS_CFLAGS),undefined)
BLIS_CFLAGS := $(BLIS_CFLAGS_FOUND)
endif
ifeq ($(origin BLIS_LIBS),undefined)
BLIS_LIBS := $(BLIS_LIBS_FOUND)
endif
BLAS_CFLAGS := $(BLIS_CFLAGS) -DZT_BLAS_BLIS
BLAS_LIBS := $(BLIS_LIBS)
else
BLAS_CFLAGS := $(shell pkg-config --cflags openblas 2>/dev/null) -DZT_BLAS_OPENBLAS
BLAS_LIBS := $(shell pkg-config --libs openblas 2>/dev/null)
endif

PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS := $(shell pkg-config --libs $(PKGS) 2>/dev/null)

CFLAGS ?=
ALL_CFLAGS := -std=gnu11 $(OPT) $(ARCH) -fno-math-errno -fno-trapping-math -fopenmp $(WARN) -Isrc -I. $(BLAS_CFLAGS) $(PKG_CFLAGS) $(CFLAGS)
LIBS := $(PKG_LIBS) $(BLAS_LIBS) -fopenmp -lm -lstdc++ -pthread $(LDFLAGS)

SRC := $(shell find src -name '*.c' | LC_ALL=C sort)
SRC_HDRS := $(shell find src -name '*.h' | LC_ALL=C sort)
OBJ := $(patsubst src/%.c,build/obj/%.o,$(SRC))
MAIN_OBJ := build/obj/cmd/main.o
LIB_OBJ := $(filter-out $(MAIN_OBJ),$(OBJ))
TEST_SRC := $(shell find tests/unit -name 'test_*.c' 2>/dev/null | LC_ALL=C sort)
HELPER_SRC := $(wildcard tests/helpers/*.c)
TEST_BIN := $(addprefix build/tests/,$(notdir $(basename $(TEST_SRC) $(HELPER_SRC))))
TEST_CFLAGS := -Itests/helpers
BENCH_SRC := $(wildcard benchmarks/*.c)
BENCH_BIN := $(patsubst benchmarks/%.c,build/bench/%,$(BENCH_SRC))
ifneq ($(words $(TEST_BIN)),$(words $(sort $(TEST_BIN))))
$(error two programs under tests/unit/ or tests/helpers/ have the same name: each becomes build/tests/NAME)
endif

# obj_deps OBJECTS,HEADERS / bin_deps PROGRAMS,HEADERS: a file built before its .d file existed (a build from
# before -MMD) depends on all those headers, once; the next build of it writes its .d
obj_deps = $(foreach o,$(1),$(if $(wildcard $(o:.o=.d)),,$(eval $(o): $(2))))
bin_deps = $(foreach b,$(1),$(if $(wildcard $(b).d),,$(eval $(b): $(2))))

# parallel jobs for the builds that test/demo/bench start
JOBS ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: all deps build-all asan test test-long demo demo-finetune demo-mlm bench clean cuda

include cuda/cuda.mk
include cuda/backend.mk
include tests/mutate/mutate.mk
include tests/fuzz/fuzz.mk
.DEFAULT_GOAL := all

all: build-all

# Installs missing Debian packages (apt-get, with sudo when not root). Not a prerequisite of the builds: only
# of test, test-long, demo, demo-finetune, bench and mutate, which re-enter make afterwards so pkg-config
# sees what was just installed.
deps:
	@ZT_PKG_MODULES="$(PKGS)" ZT_BLAS="$(BLAS)" ZT_BLAS_CFLAGS="$(BLAS_CFLAGS)" MPICC="$(MPICC)" scripts/install-deps.sh build

build-all: ztrain $(TEST_BIN) $(BENCH_BIN) build/tests/test_hostexec $(CU_TEST_BIN) data/tiny/train.bin \
  data/d6/train.bin

# the tiny model's synthetic data (inputs/tiny.cfg), so `./ztrain train -c inputs/tiny.cfg` works after make
data/tiny/train.bin: tests/helpers/make_data.py
	/usr/bin/python3 tests/helpers/make_data.py data/tiny 256 40000 > /dev/null
# the d6 model's (GPT-2 vocabulary), read by several tests at once: made here, before tests/run.sh starts them
data/d6/train.bin: tests/helpers/make_data.py
	/usr/bin/python3 tests/helpers/make_data.py data/d6 50257 60000 > /dev/null

build/obj/%.o: src/%.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(DEPFLAGS) -c $< -o $@

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
ztrain: $(MAIN_OBJ) build/libztrain.a build/.mode-$(BUILD_MODE)
	$(CC) $(ALL_CFLAGS) -o $@ $(filter-out build/.mode-%,$^) $(LIBS)
endif

# the GPU build beside ./ztrain (compile and link only where there is no GPU)
cuda: build/ztrain-cuda

# one rule per unit test / helper program (compiled and linked in one step; its .d is build/tests/NAME.d)
define TEST_RULES
build/tests/$(notdir $(basename $(1))): $(1) build/libztrain.a
	@mkdir -p $$(dir $$@)
	$$(CC) $$(ALL_CFLAGS) $$(TEST_CFLAGS) $$(DEPFLAGS) -MF $$@.d -MT $$@ -o $$@ $$< build/libztrain.a $$(LIBS)

build/tests/$(notdir $(basename $(1)))-asan: $(1) build/libztrain-asan.a
	@mkdir -p $$(dir $$@)
	$$(CC) $$(ASAN_CFLAGS) $$(TEST_CFLAGS) $$(DEPFLAGS) -MF $$@.d -MT $$@ -o $$@ $$< build/libztrain-asan.a $$(LIBS) -fsanitize=address,undefined
endef
$(foreach s,$(TEST_SRC) $(HELPER_SRC),$(eval $(call TEST_RULES,$(s))))

build/bench/%: benchmarks/%.c build/libztrain.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(DEPFLAGS) -MF $@.d -MT $@ -o $@ $< build/libztrain.a $(LIBS)

# AddressSanitizer + UBSan: the sources object by object into build/asan/ (so -j applies); ./ztrain-asan
# and the unit tests' ASan builds (build/tests/NAME-asan) link the same objects.
ASAN_OPT ?= -O1
ASAN_CFLAGS := -std=gnu11 $(ASAN_OPT) -g -fno-omit-frame-pointer -fsanitize=address,undefined $(ARCH) -fopenmp $(WARN) \
  -Isrc -I. $(BLAS_CFLAGS) $(PKG_CFLAGS) $(CFLAGS)
ASAN_OBJ := $(patsubst src/%.c,build/asan/%.o,$(SRC))
ASAN_MAIN_OBJ := $(patsubst build/obj/%,build/asan/%,$(MAIN_OBJ))
ASAN_TEST_BIN := $(patsubst %,build/tests/%-asan,test_util test_ops test_ops_elementwise test_decode)
build/asan/%.o: src/%.c
	@mkdir -p $(dir $@)
	$(CC) $(ASAN_CFLAGS) $(DEPFLAGS) -c $< -o $@

build/libztrain-asan.a: $(filter-out $(ASAN_MAIN_OBJ),$(ASAN_OBJ)) $(CUSIM_OBJ)
	@rm -f $@
	ar rcs $@ $^

ztrain-asan: $(ASAN_MAIN_OBJ) build/libztrain-asan.a
	$(CC) $(ASAN_CFLAGS) -o $@ $^ $(LIBS) -fsanitize=address,undefined

asan: ztrain-asan $(ASAN_TEST_BIN)

# header dependencies: the compiler's .d files, and every header for objects built before them
-include $(OBJ:.o=.d) $(ASAN_OBJ:.o=.d) $(addsuffix .d,$(TEST_BIN) $(TEST_BIN:=-asan) $(BENCH_BIN))
# A program keeps its name when its source moves (tests/unit/core/x.c -> tests/unit/core/model/x.c), and its old
# .d still names the old path (-MP covers the headers, not the source itself): a source that is gone is
# rebuilt from nothing, so the program is relinked from its rule's source and the .d rewritten.
tests/%.c tests/%.cc: ;
$(call obj_deps,$(OBJ) $(ASAN_OBJ),$(SRC_HDRS))
$(call bin_deps,$(TEST_BIN) $(TEST_BIN:=-asan) $(BENCH_BIN),$(SRC_HDRS) $(wildcard tests/helpers/*.h))

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

# masked-LM pretraining: a small BERT on the demo corpus, its accuracy table and plot (docs/mlm.md)
demo-mlm: deps
	@scripts/install-deps.sh demo
	@scripts/setup-venv.sh >/dev/null
	@$(MAKE) --no-print-directory ztrain
	scripts/demo_mlm.sh

bench: deps
	@scripts/install-deps.sh test
	@$(MAKE) --no-print-directory build-all
	benchmarks/run_step_bench.sh
	benchmarks/bench_gpu.sh

clean:
	rm -rf build ztrain ztrain-asan
