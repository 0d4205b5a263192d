# The user's entry points. Each target sets up what it needs (scripts/setup.sh:
# Debian packages, .venv with Halide 21, CMake and ninja), so on a fresh
# machine `make demo` or `make test` is the only command to type.
VENV    := .venv
BUILD   := build
PREFIX  ?= /usr/local
CMAKE   := $(VENV)/bin/cmake
CTEST   := $(VENV)/bin/ctest

.PHONY: all setup configure build demo test install bench bench-full compare autotune autotune-report clean

all: build

setup:
	@bash scripts/setup.sh

configure: setup
	@if [ ! -f $(BUILD)/build.ninja ]; then \
	  halide=$$($(VENV)/bin/python -c 'import halide; print(halide.install_dir())') && \
	  $(CMAKE) -G Ninja -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release \
	    -DCMAKE_MAKE_PROGRAM=$(CURDIR)/$(VENV)/bin/ninja -DPython3_EXECUTABLE=$(CURDIR)/$(VENV)/bin/python \
	    -DHalide_DIR=$$halide/lib64/cmake/Halide -DHalideHelpers_DIR=$$halide/lib64/cmake/HalideHelpers; \
	fi

build: configure
	@$(CMAKE) --build $(BUILD)

demo: build
	@$(BUILD)/demo/gka_demo

test: build
	@$(CTEST) --test-dir $(BUILD) --output-on-failure -j2; status=$$?; \
	  $(VENV)/bin/python scripts/skipped_tests.py $(BUILD); exit $$status

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
	@$(VENV)/bin/python examples/train_lm/compare.py --build $(BUILD) --out $(BUILD)/compare

# Tunes the standard shape classes (forward and backward, D = 64 and 128; long,
# short and sliding: autotune/gka_autotune.py's CLASSES) for the best CPU family of
# this host, or AUTOTUNE_FAMILY (avx512, avx2 or generic), and writes the winners to
# schedules/tuned.tsv; `make build` then
# compiles them in. Logs in autotune/logs/ (a rerun resumes). Each class gets
# AUTOTUNE_MINUTES of search (at most AUTOTUNE_TRIALS trials), then its best three
# are measured again: about 28 minutes for the twelve classes on this 2-core VM.
AUTOTUNE_TRIALS ?= 200
AUTOTUNE_MINUTES ?= 1.8
AUTOTUNE_FAMILY ?=
autotune: build
	@for kernel in forward backward; do for d in 64 128; do for class in long short sliding; do \
	  $(VENV)/bin/python autotune/gka_autotune.py --kernel $$kernel --head-dim $$d --class $$class \
	    $(if $(AUTOTUNE_FAMILY),--family $(AUTOTUNE_FAMILY)) --trials $(AUTOTUNE_TRIALS) --minutes $(AUTOTUNE_MINUTES) --write-table || exit 1; \
	done; done; done

# Tuned vs default vs Halide's autoschedulers on the same algorithm, with the
# search curves: build/autotune-report/report.md and PNG plots.
autotune-report: build
	@$(VENV)/bin/python autotune/compare.py --out $(BUILD)/autotune-report

clean:
	rm -rf $(BUILD)
