# fuzz.mk — `make fuzz`: libFuzzer targets for every input format ztrain reads (tests/fuzz/README.md).
# Included by the top-level Makefile; also works alone: make -f tests/fuzz/fuzz.mk fuzz.
#   make fuzz                     build every target into build/fuzz/ and run each for FUZZ_SECONDS (10)
#   make fuzz FUZZ_SECONDS=300    longer
#   make fuzz FUZZ_TARGETS=json   only some
#   make fuzz-build               build only
# Each target runs alone (one after another) on a fresh copy of its seed corpus (tests/fuzz/seeds/<t>/);
# a crash, sanitizer report, failed check, leak, timeout or out-of-memory fails it (and `make fuzz`) and
# leaves the input under build/fuzz/artifacts/<t>/. Needs clang with libFuzzer (Debian: clang, libclang-rt-14-dev).
# The ztrain sources are compiled here again, instrumented (build/fuzz/obj/), not taken from build/obj.

FUZZ_CC ?= clang
FUZZ_SECONDS ?= 10
FUZZ_DIR ?= build/fuzz
FUZZ_DEFAULT := json config shard tokenizer tokenizer_hf tokenizer_train hashmap safetensors ckpt
# ckpt_raw (HDF5 bytes) is not in the default set: it finds bugs of HDF5 1.10.8 itself within seconds
# (README.md); make fuzz FUZZ_TARGETS=ckpt_raw runs it
FUZZ_ALL := $(FUZZ_DEFAULT) ckpt_raw
FUZZ_TARGETS ?= $(FUZZ_DEFAULT)

FUZZ_SAN := -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
# MPI headers: util.h includes mpi.h; HDF5 (parallel build), libconfig and PCRE2 as the Makefile finds them
FUZZ_MPI_CFLAGS := $(shell mpicc -showme:compile 2>/dev/null)
FUZZ_MPI_LIBS := $(shell mpicc -showme:link 2>/dev/null)
FUZZ_PKG_CFLAGS := $(shell pkg-config --cflags hdf5-openmpi libconfig libpcre2-8 2>/dev/null)
FUZZ_PKG_LIBS := $(shell pkg-config --libs hdf5-openmpi libconfig libpcre2-8 2>/dev/null)
FUZZ_CFLAGS := -std=gnu11 -g -O1 -fno-omit-frame-pointer $(FUZZ_SAN) -Wall -Wextra -Wshadow \
  -Isrc -I. -Itests/fuzz $(FUZZ_MPI_CFLAGS) $(FUZZ_PKG_CFLAGS)
FUZZ_LIBS := $(FUZZ_PKG_LIBS) $(FUZZ_MPI_LIBS) -lm

# the ztrain sources each target is built from, by file name: each is found wherever it is under src/
FUZZ_SRC_json := json.c util.c
FUZZ_SRC_config := config.c config_derive.c config_print.c param_table.c util.c
FUZZ_SRC_shard := data_shard.c util.c
FUZZ_SRC_tokenizer := tokenizer.c tokenizer_ids.c tokenizer_file.c tokenizer_hf.c tokenizer_hf_config.c tokenizer_hf_read.c tokenizer_wordpiece.c unicode.c hashmap.c json.c util.c
FUZZ_SRC_tokenizer_hf := $(FUZZ_SRC_tokenizer)
FUZZ_SRC_tokenizer_train := tokenizer_train.c $(FUZZ_SRC_tokenizer)
FUZZ_SRC_hashmap := hashmap.c util.c
FUZZ_SRC_safetensors := safetensors.c json.c util.c
FUZZ_SRC_ckpt := ckpt_file.c ckpt_resume.c config.c config_derive.c config_print.c param_table.c util.c
FUZZ_SRC_ckpt_raw := $(FUZZ_SRC_ckpt)

FUZZ_ALL_SRC := $(shell find src -name '*.c')
# fuzz_objs NAMES: the instrumented objects of those sources (build/fuzz/obj/<path under src>.o); a name not
# found under src/ stays src/NAME, so make says which one is missing
fuzz_objs = $(patsubst src/%.c,$(FUZZ_DIR)/obj/%.o,$(foreach f,$(1),$(or $(filter %/$(f),$(FUZZ_ALL_SRC)),src/$(f))))
FUZZ_BINS := $(patsubst %,$(FUZZ_DIR)/fuzz_%,$(FUZZ_TARGETS))
FUZZ_HDRS := $(shell find src -name '*.h')
FUZZ_TARGET_HDRS := $(wildcard tests/fuzz/*.h)

.PHONY: fuzz fuzz-build fuzz-build-all
fuzz-build: $(FUZZ_BINS)
fuzz-build-all: $(patsubst %,$(FUZZ_DIR)/fuzz_%,$(FUZZ_ALL))

fuzz: fuzz-build
	@FUZZ_DIR=$(FUZZ_DIR) tests/fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ_TARGETS)

$(FUZZ_DIR)/obj/%.o: src/%.c $(FUZZ_HDRS) tests/fuzz/fuzz.mk
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -c $< -o $@

# one link rule per target (a template rather than .SECONDEXPANSION, which would reach the including Makefile)
define FUZZ_LINK
$(FUZZ_DIR)/fuzz_$(1): tests/fuzz/fuzz_$(1).c $(call fuzz_objs,$(FUZZ_SRC_$(1))) $(FUZZ_HDRS) $(FUZZ_TARGET_HDRS)
	@mkdir -p $(FUZZ_DIR)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $$@ $$< $(call fuzz_objs,$(FUZZ_SRC_$(1))) $(FUZZ_LIBS)
endef
$(foreach t,$(FUZZ_ALL),$(eval $(call FUZZ_LINK,$(t))))
