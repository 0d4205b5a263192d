#!/usr/bin/env bash
# `make generate` for a target outside the built-in families, and a program
# built around its kernels (tests/generated_consumer.cpp, judged by the
# accuracy contract), run under RUNNER if given (qemu for another
# architecture). Exit 77 (CTest: Skipped), saying why, without CXX or RUNNER.
# usage: generate_own_target.sh GENERATOR SOURCE HALIDE_INCLUDE WORK TARGET CXX [RUNNER]
set -euo pipefail
generator=$1 source=$2 halide_include=$3 work=$4 target=$5 cxx=$6 runner=${7:-}
for tool in "$cxx" $runner; do
  if ! command -v "$tool" >/dev/null; then
    echo "SKIP: $tool is not installed (bash scripts/setup.sh aarch64 installs the cross toolchain and qemu)"
    exit 77
  fi
done
rm -rf "$work"
"$source/scripts/generate.sh" "$generator" "$target" "$work" >/dev/null
static=""; [ -n "$runner" ] && static=-static  # qemu-user runs it without the target's shared libraries
"$cxx" -std=c++17 -O2 $static -I "$work" -I "$halide_include" -I "$source/oracle" -I "$source/runtime/include" \
    "$source/tests/generated_consumer.cpp" "$source/oracle/contract.cpp" "$source/oracle/reference.cpp" \
    "$work/gka_forward_d64.a" "$work/gka_backward_d64.a" "$work/gka_runtime.a" -lpthread -ldl -o "$work/consumer"
echo "target $target:"
$runner "$work/consumer"
