#!/usr/bin/env bash
# Installs everything the build needs on a fresh machine: Debian packages and a
# project-local virtual environment (.venv) with Halide 21, CMake and ninja from PyPI.
# Idempotent: a second run only checks and takes a second or two.
# Optional parts, named as arguments: `sanitizers` (clang with its sanitizer
# and libFuzzer runtimes, for make test-asan, test-tsan and fuzz), `aarch64`
# (the cross toolchain and qemu-user, for the AArch64 test), `opencl` (PoCL,
# an OpenCL implementation on the CPU, on which gka.opencl_schedules runs the
# CUDA schedules' logic) and `torch` (PyTorch and scikit-learn from PyPI into
# .venv, for the PyTorch tests and examples/vision; about 5 GB).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/.venv"

apt_packages=(catch2 ccache libbenchmark-dev libopenblas-dev pkg-config python3-venv valgrind)
for part in "$@"; do
  case "$part" in
    sanitizers) apt_packages+=(clang libclang-rt-dev) ;;
    aarch64) apt_packages+=(g++-aarch64-linux-gnu qemu-user-static) ;;
    opencl) apt_packages+=(pocl-opencl-icd ocl-icd-libopencl1) ;;
    torch) ;;
    *) echo "setup: unknown part '$part' (sanitizers, aarch64, opencl, torch)" >&2; exit 2 ;;
  esac
done
missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

requirements="$root/scripts/requirements.txt"
stamp="$venv/.installed-requirements"
if [ ! -x "$venv/bin/python" ] || ! cmp -s "$requirements" "$stamp"; then
  echo "setup: creating $venv (halide==21.0.0, cmake, ninja, numpy, matplotlib)"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade pip
  "$venv/bin/python" -m pip install -q -r "$requirements"
  cp "$requirements" "$stamp"
fi

if [[ " $* " == *" torch "* ]] && ! "$venv/bin/python" -c "import torch" 2>/dev/null; then
  echo "setup: installing torch from PyPI into $venv (about 5 GB with its CUDA libraries)"
  "$venv/bin/python" -m pip install -q torch
fi
if [[ " $* " == *" torch "* ]] && ! "$venv/bin/python" -c "import sklearn" 2>/dev/null; then
  echo "setup: installing scikit-learn from PyPI into $venv (examples/vision's digits)"
  "$venv/bin/python" -m pip install -q scikit-learn
fi
