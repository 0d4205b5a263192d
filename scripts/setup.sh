#!/usr/bin/env bash
# Installs everything the build needs on a fresh machine: Debian packages and a
# project-local virtual environment (.venv) with Halide 21, CMake and ninja from PyPI.
# Idempotent: a second run only checks and takes a second or two.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/.venv"

apt_packages=(catch2 libbenchmark-dev libopenblas-dev pkg-config python3-venv)
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
