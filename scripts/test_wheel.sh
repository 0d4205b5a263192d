#!/usr/bin/env bash
# The wheel as a PyTorch user gets it: `pip wheel .`, installed with torch into
# a fresh virtual environment, and the PyTorch tests run against the installed
# package from outside the source tree, with no PYTHONPATH and no GKA_LIBRARY.
# The fresh environment sees the project's torch and numpy through a .pth file
# (after its own site-packages): pip still resolves the wheel's dependencies,
# finds them met, and a second torch (about 6 GB with its CUDA libraries) is
# neither downloaded nor unpacked.
# The wheel links the kernels BUILD generated (GKA_KERNELS_FROM: the same object
# code, not generated twice), so BUILD must hold every family (FAMILIES=all).
# usage: test_wheel.sh [BUILD]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
if ! grep -qx 'GKA_FAMILY_SET:STRING=all' "$build/CMakeCache.txt"; then
  echo "test_wheel: $build is not a FAMILIES=all build; the wheel holds every family" >&2
  exit 2
fi
out=$build/wheel-test
rm -rf "$out"
mkdir -p "$out"
# time_of LABEL COMMAND...: runs it and prints how long it took.
time_of() { local label=$1 start=$SECONDS; shift; "$@"; echo "test_wheel: $label took $((SECONDS - start)) s"; }
time_of "pip wheel" "$root/.venv/bin/python" -m pip wheel -q "$root" -w "$out/dist" --no-deps \
  -Ccmake.define.GKA_KERNELS_FROM="$build" -Cbuild-dir="$out/cmake"
time_of "a fresh venv" python3 -m venv "$out/venv"
project_site=$("$root/.venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
fresh_site=$("$out/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
echo "$project_site" > "$fresh_site/gka_test_project_packages.pth"
time_of "pip install of the wheel (torch and numpy met)" "$out/venv/bin/python" -m pip install -q "$out"/dist/gka-*.whl torch numpy
cd "$out"  # outside the source tree: `import gka_torch` finds the installed package alone
unset PYTHONPATH GKA_LIBRARY
"$out/venv/bin/python" - "$out/venv" <<'PY'
import sys
import gka_torch
assert gka_torch.__file__.startswith(sys.argv[1]), f"imported {gka_torch.__file__}, not the installed package"
assert gka_torch.library_path.startswith(sys.argv[1]), f"loaded {gka_torch.library_path}"
print(gka_torch.info())
PY
time_of "the PyTorch tests against the installed package" "$out/venv/bin/python" "$root/tests/python/test_gka_torch.py"
time_of "docs/pytorch.md's examples against the installed package" "$out/venv/bin/python" \
  "$root/tests/python/test_docs.py"
