#!/usr/bin/env bash
# The prepared GPU check. On a machine with an NVIDIA GPU and driver, with this
# repository's sources and the build tree made elsewhere (build/) copied over,
# run from the repository root:
#     tests/gpu/check.sh [results.md]          (default build/gpu-check/results.md)
# It builds nothing and fetches nothing. Steps, each under a timeout (400 s in
# all at most): the GPU tests (gka_cuda_tests), a part of them under
# compute-sanitizer's memcheck where it is installed, the benchmark
# (gka_bench_cuda), and, if `import torch` works here, PyTorch SDPA fp32 on the
# folded problem for the same shapes and gka_torch on CUDA tensors. Results and
# logs go to the results file.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${GKA_BUILD:-$root/build}
out=${1:-$build/gpu-check/results.md}
# The build's run path names the directory it was built in, elsewhere.
export LD_LIBRARY_PATH="$build/runtime${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
mkdir -p "$(dirname "$out")"
log() { echo "$*" | tee -a "$out"; }
: > "$out"
log "# GKA GPU check, $(date -u +%Y-%m-%dT%H:%MZ), $(hostname)"
log ""
log '```'
(nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv 2>&1 || echo "nvidia-smi: not available") | tee -a "$out"
log '```'
status=0

log ""
log "## GPU tests (tests/gpu/test_cuda.cpp)"
log '```'
timeout 150 "$build/tests/gka_cuda_tests" > "$out.tests.log" 2>&1
rc=$?
tail -60 "$out.tests.log" | tee -a "$out"
log '```'
log "exit status $rc (0 passed, 77 skipped, 124 timed out)"
[ "$rc" = 0 ] || status=1

log ""
log "## Memcheck (compute-sanitizer) over the short GPU tests"
if command -v compute-sanitizer > /dev/null; then
  log '```'
  timeout 70 compute-sanitizer --tool memcheck --error-exitcode 9 "$build/tests/gka_cuda_tests" \
    "cuda: sequence lengths*" 2>&1 | tail -15 | tee -a "$out"
  rc=${PIPESTATUS[0]}
  log '```'
  log "exit status $rc (0 clean, 9 errors found, 124 timed out)"
  [ "$rc" = 0 ] || [ "$rc" = 124 ] || status=1
else
  log "skipped: compute-sanitizer is not on the PATH"
fi

log ""
log "## Benchmark (tests/gpu/bench_cuda.cpp)"
timeout 90 "$build/tests/gka_bench_cuda" --out "$out.bench" --min-seconds 0.15 > "$out.bench.log" 2>&1
rc=$?
if [ -s "$out.bench" ]; then cat "$out.bench" >> "$out"; else cat "$out.bench.log" >> "$out"; fi
log "exit status $rc"
[ "$rc" = 0 ] || status=1

log ""
log "## PyTorch SDPA fp32 on the folded problem"
python=${PYTHON:-python3}
if timeout 15 "$python" -c "import torch" 2>/dev/null; then
  timeout 50 "$python" "$root/tests/gpu/sdpa_folded.py" --out "$out.sdpa" > "$out.sdpa.log" 2>&1
  rc=$?
  if [ -s "$out.sdpa" ]; then cat "$out.sdpa" >> "$out"; else tail -20 "$out.sdpa.log" >> "$out"; fi
  log "exit status $rc"
  log ""
  log "## gka_torch on CUDA tensors (tests/python/test_gka_torch.py CudaTensors)"
  GKA_LIBRARY="$build/runtime/libgka.so" PYTHONPATH="$root/python" \
    timeout 45 "$python" "$root/tests/python/test_gka_torch.py" CudaTensors -v > "$out.torch.log" 2>&1
  rc=$?
  tail -5 "$out.torch.log" >> "$out"
  log "exit status $rc"
  [ "$rc" = 0 ] || status=1
else
  log "skipped: \`$python -c 'import torch'\` fails on this machine"
fi
echo "results: $out"
exit $status
