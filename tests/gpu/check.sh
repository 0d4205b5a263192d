#!/usr/bin/env bash
# The prepared GPU check. On a machine with an NVIDIA GPU and driver, with this
# repository's sources and the builds made elsewhere (make gpu-builds) copied
# over, run from the repository root:
#     tests/gpu/check.sh [results.md]          (default $GKA_BUILD/gpu-check.md)
# GKA_BUILD: the build with schedules/tuned.tsv's knobs (default build-gpu, else
# build); GKA_CANDIDATES: the build with schedules/cuda_candidates.tsv's (default
# build-gpu-candidates; skipped where it is missing). Of each it needs
# runtime/libgka.so*, tests/gka_cuda_tests and tests/gka_bench_cuda. It builds
# nothing and fetches nothing. Steps, each under a timeout (445 s in all at
# most, under 8 minutes): the GPU tests, a part of them under
# compute-sanitizer's memcheck where it is installed, and the benchmark, for
# each build (the candidates' first: their correctness decides whether their
# speed counts); then, if `import torch` works here, PyTorch SDPA fp32 on the
# folded problem for the same shapes and gka_torch on CUDA tensors. Everything,
# logs included, goes to the one results file.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
default_build=$root/build-gpu
[ -d "$default_build" ] || default_build=$root/build
build=${GKA_BUILD:-$default_build}
candidates=${GKA_CANDIDATES:-$root/build-gpu-candidates}
out=${1:-$build/gpu-check.md}
mkdir -p "$(dirname "$out")"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
log() { echo "$*" | tee -a "$out"; }
# A log into the results file: its last `lines` lines shown, the whole of it
# folded below them.
fold_log() {
  local file=$1 lines=$2
  log '```'
  tail -"$lines" "$file" | tee -a "$out"
  log '```'
  if [ "$(wc -l < "$file")" -gt "$lines" ]; then
    { echo "<details><summary>whole log ($(wc -l < "$file") lines)</summary>"; echo; echo '```'; cat "$file"
      echo '```'; echo "</details>"; } >> "$out"
  fi
}
# run_build LABEL BUILD TEST_SECONDS: the GPU tests, memcheck and the benchmark
# against one build's libgka.
status=0
run_build() {
  local label=$1 dir=$2 test_seconds=$3 rc
  export LD_LIBRARY_PATH="$dir/runtime${base_library_path:+:$base_library_path}"  # its run path names where it was built
  log ""
  log "## $label: $dir"
  log ""
  log "### GPU tests (tests/gpu/test_cuda.cpp)"
  timeout "$test_seconds" "$dir/tests/gka_cuda_tests" > "$scratch/tests.log" 2>&1
  rc=$?
  fold_log "$scratch/tests.log" 40
  log "exit status $rc (0 passed, 77 skipped, 124 timed out)"
  [ "$rc" = 0 ] || status=1
  log ""
  log "### Memcheck (compute-sanitizer) over the short GPU tests"
  if command -v compute-sanitizer > /dev/null; then
    timeout 40 compute-sanitizer --tool memcheck --error-exitcode 9 "$dir/tests/gka_cuda_tests" \
      "cuda: sequence lengths*" > "$scratch/memcheck.log" 2>&1
    rc=$?
    fold_log "$scratch/memcheck.log" 15
    log "exit status $rc (0 clean, 9 errors found, 124 timed out)"
    [ "$rc" = 0 ] || [ "$rc" = 124 ] || status=1
  else
    log "skipped: compute-sanitizer is not on the PATH"
  fi
  log ""
  log "### Benchmark (tests/gpu/bench_cuda.cpp)"
  timeout 60 "$dir/tests/gka_bench_cuda" --out "$scratch/bench.md" --min-seconds 0.15 > "$scratch/bench.log" 2>&1
  rc=$?
  if [ -s "$scratch/bench.md" ]; then cat "$scratch/bench.md" >> "$out"; else fold_log "$scratch/bench.log" 20; fi
  rm -f "$scratch/bench.md"
  log "exit status $rc"
  [ "$rc" = 0 ] || status=1
}
base_library_path=${LD_LIBRARY_PATH:-}

: > "$out"
log "# GKA GPU check, $(date -u +%Y-%m-%dT%H:%MZ), $(hostname), commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
log ""
log '```'
(nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv 2>&1 || echo "nvidia-smi: not available") | tee -a "$out"
log '```'

if [ -x "$candidates/tests/gka_cuda_tests" ]; then
  run_build "Candidate schedules (schedules/cuda_candidates.tsv)" "$candidates" 100
else
  log ""
  log "## Candidate schedules: skipped ($candidates/tests/gka_cuda_tests is missing: make gpu-builds)"
fi
run_build "Default schedules (schedules/tuned.tsv)" "$build" 110
export LD_LIBRARY_PATH="$build/runtime${base_library_path:+:$base_library_path}"

log ""
log "## PyTorch SDPA fp32 on the folded problem"
python=${PYTHON:-python3}
if timeout 15 "$python" -c "import torch" 2>/dev/null; then
  timeout 35 "$python" "$root/tests/gpu/sdpa_folded.py" --out "$scratch/sdpa.md" > "$scratch/sdpa.log" 2>&1
  rc=$?
  if [ -s "$scratch/sdpa.md" ]; then cat "$scratch/sdpa.md" >> "$out"; else fold_log "$scratch/sdpa.log" 20; fi
  log "exit status $rc"
  log ""
  log "## gka_torch on CUDA tensors (tests/python/test_gka_torch.py CudaTensors)"
  GKA_LIBRARY="$build/runtime/libgka.so" PYTHONPATH="$root/python" \
    timeout 35 "$python" "$root/tests/python/test_gka_torch.py" CudaTensors -v > "$scratch/torch.log" 2>&1
  rc=$?
  fold_log "$scratch/torch.log" 5
  log "exit status $rc"
  [ "$rc" = 0 ] || status=1
else
  log "skipped: \`$python -c 'import torch'\` fails on this machine"
fi
echo "results: $out"
exit $status
