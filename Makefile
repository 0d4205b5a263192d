# The user's entry points. Each target sets up what it needs (scripts/setup.sh:
# Debian packages, .venv with Halide 21, CMake and ninja), so on a fresh
# machine `make demo` or `make test` is the only command to type.
VENV    := .venv
BUILD   := build
PREFIX  ?= /usr/local
CMAKE   := $(VENV)/bin/cmake
CTEST   := $(VENV)/bin/ctest

.PHONY: all setup configure build demo test install bench bench-full clean

all: build

setup:
	@bash scripts/setup.sh

configure: setup
	@if [ ! -f $(BUILD)/build.ninja ]; then \
	  halide=$$($(VENV)/bin/python -c 'import halide; print(halide.install_dir())') && \
	  $(CMAKE) -G Ninja -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release \
	    -DCMAKE_MAKE_PROGRAM=$(CURDIR)/$(VENV)/bin/ninja \
	    -DHalide_DIR=$$halide/lib64/cmake/Halide -DHalideHelpers_DIR=$$halide/lib64/cmake/HalideHelpers; \
	fi

build: configure
	@$(CMAKE) --build $(BUILD)

demo: build
	@$(BUILD)/demo/gka_demo

test: build
	@$(CTEST) --test-dir $(BUILD) --output-on-failure -j2

install: build
	@$(CMAKE) --install $(BUILD) --prefix $(PREFIX)

# Benchmarks and their report (build/report/report.md and PNG plots). `bench` is
# the quick mode (minutes), `bench-full` the whole suite (much longer).
bench: build
	@$(VENV)/bin/python bench/report.py --quick --out $(BUILD)/report

bench-full: build
	@$(VENV)/bin/python bench/report.py --out $(BUILD)/report

clean:
	rm -rf $(BUILD)
