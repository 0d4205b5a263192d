# The user's entry points. Each target sets up what it needs (scripts/setup.sh:
# Debian packages, .venv with Halide 21, CMake and ninja), so on a fresh
# machine `make demo` or `make test` is the only command to type.
VENV    := .venv
BUILD   := build
PREFIX  ?= /usr/local
# The families a build compiles (cmake/GkaKernels.cmake, GKA_FAMILY_SET): quick
# (this host's best CPU family and the fallback, no CUDA: a first build in
# minutes) for test and the rest, unless FAMILIES=all (every row of
# cmake/families.tsv, CUDA included), which make install always builds.
FAMILIES ?= quick
CMAKE   := $(VENV)/bin/cmake
CTEST   := $(VENV)/bin/ctest

.PHONY: all setup configure build demo test test-asan test-tsan test-aarch64 fuzz generate gpu-builds install bench bench-full compare \
        compare-vision autotune autotune-report clean

all: build

setup:
	@bash scripts/setup.sh

# The variants a build compiles, of those kernels/variants.py gives its
# families: GKA_SELECT's terms (empty: every one).
SELECT  ?=
CMAKE_CONFIGURE = $(CMAKE) -G Ninja -S . -DCMAKE_BUILD_TYPE=Release -DCMAKE_MAKE_PROGRAM=$(CURDIR)/$(VENV)/bin/ninja \
  -DPython3_EXECUTABLE=$(CURDIR)/$(VENV)/bin/python

# $(call configure,folder,family set,more CMake arguments): a build folder,
# configured again only where its family set or SELECT changes (CMake finds
# Halide in the .venv's Python).
define configure
	@if [ ! -f $(1)/build.ninja ] || ! grep -qx 'GKA_FAMILY_SET:STRING=$(2)' $(1)/CMakeCache.txt || \
	    ! grep -qx 'GKA_SELECT:STRING=$(SELECT)' $(1)/CMakeCache.txt; then \
	  $(CMAKE_CONFIGURE) -B $(1) -DGKA_FAMILY_SET=$(2) -DGKA_SELECT="$(SELECT)" $(3); \
	fi
endef

configure: setup
	$(call configure,$(BUILD),$(FAMILIES))

build: configure
	@$(CMAKE) --build $(BUILD)

# The demonstration and what it links alone: the generator, libgka and the
# kernels of build/, which a first make demo configures with the variants the
# demo runs (D=64, float32, the Gaussian's forward and backward in each score
# form) on this host's best family, and later commands use as it is (make
# test adds the rest).
DEMO_SELECT := pass=forward,backward head_dim=64 element=float32 function=gaussian
demo: setup
	@[ -f $(BUILD)/build.ninja ] || $(CMAKE_CONFIGURE) -B $(BUILD) -DGKA_FAMILY_SET=best -DGKA_SELECT="$(DEMO_SELECT)"
	@$(CMAKE) --build $(BUILD) --target gka_demo
	@$(BUILD)/demo/gka_demo

# What the whole suite needs beyond the build (scripts/setup.sh's parts):
# PyTorch (the gka_torch tests), the AArch64 cross toolchain and qemu (the
# AArch64 generation and arch tests), PoCL (the CUDA schedules through OpenCL).
TEST_PARTS := torch aarch64 opencl
test: build
	@bash scripts/setup.sh $(TEST_PARTS)
	@$(CTEST) --test-dir $(BUILD) --output-on-failure -j2; status=$$?; \
	  $(VENV)/bin/python scripts/skipped_tests.py $(BUILD); exit $$status

# The C++ suite (CTest label cpp) under sanitizers, each in a build folder of its
# own, compiled with clang: libgka's runtime and the tests are instrumented. The
# ASan build generates its kernels with Halide's asan checks (minutes, the first
# time), for this machine's best CPU family alone (FAMILIES=best: the other
# families' kernels share their schedules' code paths, and each family would
# add as much again); the TSan build links the main build's. TSan runs the C ABI's tests ([api], [env]: concurrency, determinism,
# thread and family control) with more threads than cores; the accuracy tests'
# reference loops would take it too long.
ASAN_BUILD := build-asan
TSAN_BUILD := build-tsan
ASAN := address,undefined
CLANG := -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++
ASAN_CONFIG := $(CLANG) -DGKA_SANITIZE=$(ASAN) -DGKA_KERNEL_FEATURES=asan
test-asan:
	@bash scripts/setup.sh sanitizers
	$(call configure,$(ASAN_BUILD),best,$(ASAN_CONFIG))
	@$(CMAKE) --build $(ASAN_BUILD) --target gka_tests gka_env_tests gka_cuda_tests
	@$(CTEST) --test-dir $(ASAN_BUILD) -L cpp --output-on-failure -j2

test-tsan: build
	@bash scripts/setup.sh sanitizers
	$(call configure,$(TSAN_BUILD),$(FAMILIES),$(CLANG) -DGKA_SANITIZE=thread -DGKA_KERNEL_FEATURES=tsan \
	  -DGKA_KERNELS_FROM=$(CURDIR)/$(BUILD))
	@$(CMAKE) --build $(TSAN_BUILD) --target gka_tests gka_env_tests
	@GKA_NUM_THREADS=6 $(CTEST) --test-dir $(TSAN_BUILD) -L cpp -R 'gka\.(env\.|four threads|repeated calls|thread count|CPU family)' \
	  --output-on-failure -j2

# libgka and its C++ suite cross-compiled for AArch64 (cmake/aarch64-linux-gnu.cmake,
# the table's AArch64 families, kernels from the main build's generator), run
# under qemu-user: the C++ suite (label cpp) but its long tests (long, T=2048,
# randomized), which emulation makes too slow.
AARCH64_BUILD := build-aarch64
test-aarch64: build
	@bash scripts/setup.sh aarch64
	$(call configure,$(AARCH64_BUILD),all,-DCMAKE_TOOLCHAIN_FILE=$(CURDIR)/cmake/aarch64-linux-gnu.cmake \
	  -DGKA_GENERATOR=$(CURDIR)/$(BUILD)/kernels/gka.generator)
	@$(CMAKE) --build $(AARCH64_BUILD) --target gka_tests gka_env_tests
	@$(CTEST) --test-dir $(AARCH64_BUILD) -L cpp -E 'long|T=2048|randomized' --output-on-failure -j2

# libFuzzer over the C ABI (fuzz/gka_fuzz.cpp) for FUZZ_SECONDS, in the ASan
# build: it starts from fuzz/corpus and keeps what it finds in
# build-asan/fuzz-corpus; a failing input is saved as build-asan/crash-*.
FUZZ_SECONDS ?= 60
fuzz:
	@bash scripts/setup.sh sanitizers
	$(call configure,$(ASAN_BUILD),best,$(ASAN_CONFIG))
	@$(CMAKE) --build $(ASAN_BUILD) --target gka_fuzz
	@mkdir -p $(ASAN_BUILD)/fuzz-corpus
	@$(ASAN_BUILD)/fuzz/gka_fuzz -max_total_time=$(FUZZ_SECONDS) -max_len=2048 -print_final_stats=1 \
	  -artifact_prefix=$(ASAN_BUILD)/ $(ASAN_BUILD)/fuzz-corpus fuzz/corpus

# GKA's kernels for a Halide target of your own (docs/targets.md), into OUT:
#   make generate TARGET=arm-64-linux-large_buffers OUT=dir [KNOBS=name:value,...] [KERNEL=laplace]
generate: build
	@bash scripts/generate.sh $(BUILD)/kernels/gka.generator "$(TARGET)" "$(OUT)" "$(KNOBS)" "$(KERNEL)"

# The two builds tests/gpu/check.sh runs on a GPU machine (docs/cuda.md): the
# fallback CPU family and CUDA (GKA_FAMILY_SET gpu), with schedules/tuned.tsv's
# knobs in build-gpu, and with schedules/cuda_candidates.tsv's rows in their
# place in build-gpu-candidates. Of each, the GPU run needs runtime/libgka.so*,
# tests/gka_cuda_tests and tests/gka_bench_cuda. build-gpu also gets the cuda86
# knob sweep, compiled for the GPU to time (build-gpu/autotune-sweep/cuda86:
# `make autotune`'s first stage, below).
GPU_BUILD := build-gpu
GPU_CANDIDATES_BUILD := build-gpu-candidates
GPU_TARGETS := gka gka_cuda_tests gka_bench_cuda
gpu-builds: setup
	$(call configure,$(GPU_BUILD),gpu)
	@$(CMAKE) --build $(GPU_BUILD) --target $(GPU_TARGETS) gka_knobs
	@$(VENV)/bin/python autotune/gka_autotune.py --all --family cuda86 --stage prepare --build $(GPU_BUILD) \
	  --trials $(AUTOTUNE_TRIALS)
	$(call configure,$(GPU_CANDIDATES_BUILD),gpu,-DGKA_TUNED_MERGE=$(CURDIR)/schedules/cuda_candidates.tsv)
	@$(CMAKE) --build $(GPU_CANDIDATES_BUILD) --target $(GPU_TARGETS)

# Every family of the table, so that the installed libgka runs on any host
# of the architecture (a later make test configures the quick set again).
install: override FAMILIES := all
install: override SELECT :=
install: build
	@$(CMAKE) --install $(BUILD) --prefix $(PREFIX)

# Benchmarks and their report (build/report/report.md and PNG plots). `bench` is
# the quick mode (minutes), `bench-full` the whole suite (much longer).
bench: build
	@$(VENV)/bin/python bench/report.py --quick --out $(BUILD)/report

bench-full: build
	@$(VENV)/bin/python bench/report.py --out $(BUILD)/report

# Trains the byte-level LM of examples/train_lm with GKA and with dot-product
# attention (same data, shape and steps; about 2 minutes each) and compares them:
# build/compare/report.md and loss_curves.png.
compare: build
	@$(VENV)/bin/python examples/train_lm/compare.py --build $(BUILD) --out $(BUILD)/compare $(COMPARE_ARGS)

# Trains the small ViT of examples/vision on scikit-learn's digits with GKA (full
# window) and with dot-product attention (same split, shape, optimizer, data order
# and steps; a few minutes in all on 2 cores) and compares them:
# build/compare-vision/report.md and learning_curves.png. Needs torch and
# scikit-learn in .venv (scripts/setup.sh torch).
compare-vision: build
	@bash scripts/setup.sh torch
	@GKA_LIBRARY=$(BUILD)/runtime/libgka.so PYTHONPATH=python $(VENV)/bin/python examples/vision/compare.py \
	  --out $(BUILD)/compare-vision $(COMPARE_VISION_ARGS)

# Tunes the standard shape classes (autotune/gka_autotune.py --all: forward and
# backward, each head dim the build compiles with constant loops, each class of
# the tuner's CLASSES) for the best CPU family of this host, or AUTOTUNE_FAMILY
# (a CPU family of cmake/families.tsv), and writes the winners to
# schedules/tuned.tsv; `make build` then compiles them in. Logs in
# autotune/logs/ (a rerun resumes). Each class gets AUTOTUNE_MINUTES of search
# (at most AUTOTUNE_TRIALS trials), then its best three are measured again:
# about 28 minutes for the twelve classes (D = 64 and 128) on this 2-core VM.
# A GPU family (AUTOTUNE_FAMILY=cuda86 or cuda) is swept (autotune/gpu_sweep.py):
# up to AUTOTUNE_TRIALS points a class compiled here, timed on the GPU within
# AUTOTUNE_GPU_MINUTES for all classes; AUTOTUNE_STAGE=prepare, run or import
# does one stage, for a GPU on another machine (docs/autotuning.md).
AUTOTUNE_TRIALS ?= 200
AUTOTUNE_MINUTES ?= 1.8
AUTOTUNE_GPU_MINUTES ?= 7
AUTOTUNE_FAMILY ?=
AUTOTUNE_STAGE ?=
autotune: build
	@$(VENV)/bin/python autotune/gka_autotune.py --all $(if $(AUTOTUNE_FAMILY),--family $(AUTOTUNE_FAMILY)) \
	  $(if $(AUTOTUNE_STAGE),--stage $(AUTOTUNE_STAGE)) --trials $(AUTOTUNE_TRIALS) --minutes $(AUTOTUNE_MINUTES) \
	  --gpu-minutes $(AUTOTUNE_GPU_MINUTES) $(if $(filter prepare,$(AUTOTUNE_STAGE)),,--write-table)

# Tuned vs default vs Halide's autoschedulers on the same algorithm, with the
# search curves: build/autotune-report/report.md and PNG plots.
autotune-report: build
	@$(VENV)/bin/python autotune/compare.py --out $(BUILD)/autotune-report

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) $(AARCH64_BUILD)
