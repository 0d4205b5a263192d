#!/usr/bin/env bash
# Installs the built tree into a scratch prefix, then builds and runs an outside
# project against it through find_package(gka) and through pkg-config, and
# checks that libgka does not depend on libHalide.
set -euo pipefail
build=$1 source=$2 cmake=$3
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
"$cmake" --install "$build" --prefix "$scratch/prefix" >/dev/null
"$cmake" -S "$source/examples/consumer" -B "$scratch/consumer" -DCMAKE_PREFIX_PATH="$scratch/prefix" >/dev/null
"$cmake" --build "$scratch/consumer" >/dev/null
LD_LIBRARY_PATH="$scratch/prefix/lib" "$scratch/consumer/consumer"
PKG_CONFIG_PATH="$scratch/prefix/lib/pkgconfig" cc "$source/examples/consumer/main.c" -o "$scratch/pc" \
    $(PKG_CONFIG_PATH="$scratch/prefix/lib/pkgconfig" pkg-config --cflags --libs gka) -lm
LD_LIBRARY_PATH="$scratch/prefix/lib" "$scratch/pc"
# The trainer, built on its own against the installed package, takes two steps.
"$cmake" -S "$source/examples/train_lm" -B "$scratch/train_lm" -DCMAKE_PREFIX_PATH="$scratch/prefix" >/dev/null
"$cmake" --build "$scratch/train_lm" --target train_lm >/dev/null
LD_LIBRARY_PATH="$scratch/prefix/lib" "$scratch/train_lm/train_lm" --layers 1 --seq 32 --batch 2 --steps 2 \
    --eval-every 1 --eval-batches 1 --out "$scratch/train_lm/run" | tail -1
if ldd "$scratch/prefix/lib/libgka.so" | grep -i halide; then
    echo "libgka links libHalide: it must carry only the AOT kernels and Halide's runtime" >&2
    exit 1
fi
echo "installed package OK: find_package(gka) (consumer and trainer), pkg-config gka, no libHalide"
