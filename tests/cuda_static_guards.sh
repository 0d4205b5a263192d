#!/usr/bin/env bash
# The CUDA candidates' static guards, with no GPU: for each row of
# schedules/cuda_candidates.tsv (the cuda86 family's), every kernel it
# compiles into (float32, bfloat16 and the chunk pass; each kernel function),
# compiled by ptxas for sm_86 with libgka's register cap: none may spill, and
# the Gaussian's pair loops must issue at least the kernel's minimum of FFMAs
# per shared-memory load (SASS, nvdisasm): 5 for the register-tiled forward,
# 2.5 for the backward with padded rows. Then the same kernels without the
# candidates' knobs (the forward at D=128, the backward at D=64) must fall
# below it: the guard tells a schedule that lost its tiles or its padding.
# Exit 77 (skipped) where ptxas or nvdisasm is missing.
# usage: cuda_static_guards.sh GENERATOR PYTHON OUT KERNEL_FUNCTION...
set -euo pipefail
generator=$1 python=$2 out=$3
shift 3
functions=("$@")  # GKA_KERNEL_FUNCTIONS
declare -A least=([gka_forward]=5 [gka_backward]=2.5)
root=$(cd "$(dirname "$0")/.." && pwd)
ptxas=${PTXAS:-/usr/local/cuda/bin/ptxas}
report=("$python" "$root/scripts/cuda_ptxas_report.py" --ptxas "$ptxas" --arch sm_86 --maxrregcount 255)
[ -x "$ptxas" ] || { echo "SKIP: no ptxas at $ptxas (the CUDA toolkit)"; exit 77; }
"$python" -c "import sys; sys.path.insert(0, '$root/scripts'); import cuda_ptxas_report as r; sys.exit(not r.find_nvdisasm())" ||
  { echo "SKIP: no nvdisasm (pip install nvidia-cuda-nvdisasm, scripts/requirements.txt)"; exit 77; }
target=$(awk -F'\t' '$1 == "cuda86" { print $2 }' "$root/cmake/families.tsv")-no_runtime
mkdir -p "$out"
# generate NAME KERNEL HEAD_DIM KNOBS [PARAMS...]: OUT/NAME.stmt
generate() {
  local name=$1 kernel=$2 head_dim=$3 knobs=$4
  shift 4
  "$generator" -g "$kernel" -f "$name" -n "$name" -e stmt -o "$out" target="$target" head_dim="$head_dim" \
    scores=direct ${knobs:+knobs="$knobs"} "$@"
}
rows=0
while IFS=$'\t' read -r family kernel head_dim window seq_len knobs _; do
  [ "$family" = cuda86 ] || continue
  rows=$((rows + 1))
  gaussian=() others=()
  for variant in "f32:" "bf16:element=bfloat16" "chunk:chunk=true"; do
    name=${kernel}_d${head_dim}_${variant%%:*}
    generate "$name" "$kernel" "$head_dim" "$knobs" ${variant#*:}
    gaussian+=("$out/$name.stmt")
  done
  for function in "${functions[@]}"; do
    [ "$function" = gaussian ] && continue
    for variant in "f32:" "chunk:chunk=true"; do
      name=${kernel}_d${head_dim}_${function}_${variant%%:*}
      generate "$name" "$kernel" "$head_dim" "$knobs" kernel_function="$function" ${variant#*:}
      others+=("$out/$name.stmt")
    done
  done
  "${report[@]}" --no-spills --min-ffma-per-lds "${least[$kernel]}" "${gaussian[@]}"
  "${report[@]}" --no-spills "${others[@]}"
done < <(grep -v '^#' "$root/schedules/cuda_candidates.tsv")
[ "$rows" -gt 0 ] || { echo "no cuda86 rows in schedules/cuda_candidates.tsv"; exit 1; }
generate untiled_forward_d128 gka_forward 128 ""
"${report[@]}" --max-ffma-per-lds "${least[gka_forward]}" "$out/untiled_forward_d128.stmt"
generate unpadded_backward_d64 gka_backward 64 ""
"${report[@]}" --max-ffma-per-lds "${least[gka_backward]}" "$out/unpadded_backward_d64.stmt"
echo "cuda_static_guards: $rows candidate rows spill-free in every kernel, their pair loops at or above" \
  "${least[gka_forward]} (forward) and ${least[gka_backward]} (backward) FFMA per LDS; without them, below"
