#!/usr/bin/env bash
# The register-tiled CUDA schedules' static guards, with no GPU: for each
# candidate row of schedules/cuda_candidates.tsv (the cuda86 family's), the
# forward in float32 and bfloat16, and its chunk, compiled by ptxas for sm_86
# with libgka's register cap: no kernel may spill, and each pair loop must
# issue at least MIN FFMAs per shared-memory load (SASS, nvdisasm). Then the
# same forward without register tiles at D=128 must fall below MIN: the
# guard tells a schedule that lost its tiles. Exit 77 (skipped) where ptxas
# or nvdisasm is missing.
# usage: cuda_static_guards.sh GENERATOR PYTHON OUT [MIN]
set -euo pipefail
generator=$1 python=$2 out=$3 min=${4:-5}
root=$(cd "$(dirname "$0")/.." && pwd)
ptxas=${PTXAS:-/usr/local/cuda/bin/ptxas}
report=("$python" "$root/scripts/cuda_ptxas_report.py" --ptxas "$ptxas" --arch sm_86 --maxrregcount 255)
[ -x "$ptxas" ] || { echo "SKIP: no ptxas at $ptxas (the CUDA toolkit)"; exit 77; }
"$python" -c "import sys; sys.path.insert(0, '$root/scripts'); import cuda_ptxas_report as r; sys.exit(not r.find_nvdisasm())" ||
  { echo "SKIP: no nvdisasm (pip install nvidia-cuda-nvdisasm, scripts/requirements.txt)"; exit 77; }
target=$(awk -F'\t' '$1 == "cuda86" { print $2 }' "$root/cmake/families.tsv")-no_runtime
mkdir -p "$out"
tiled=()
while IFS=$'\t' read -r family kernel head_dim window seq_len knobs _; do
  [ "$family" = cuda86 ] && [ "$kernel" = gka_forward ] || continue
  for variant in "f32:" "bf16:element=bfloat16" "chunk:chunk=true"; do
    name=tiled_d${head_dim}_${variant%%:*} extra=${variant#*:}
    "$generator" -g "$kernel" -f "$name" -n "$name" -e stmt -o "$out" target="$target" head_dim="$head_dim" \
      scores=direct knobs="$knobs" $extra
    tiled+=("$out/$name.stmt")
  done
done < <(grep -v '^#' "$root/schedules/cuda_candidates.tsv")
[ ${#tiled[@]} -gt 0 ] || { echo "no cuda86 gka_forward rows in schedules/cuda_candidates.tsv"; exit 1; }
"${report[@]}" --no-spills --min-ffma-per-lds "$min" "${tiled[@]}"
"$generator" -g gka_forward -f untiled_d128 -n untiled_d128 -e stmt -o "$out" target="$target" head_dim=128 scores=direct
"${report[@]}" --max-ffma-per-lds "$min" "$out/untiled_d128.stmt"
echo "cuda_static_guards: ${#tiled[@]} register-tiled forwards spill-free at >= $min FFMA per LDS; untiled D=128 below"
