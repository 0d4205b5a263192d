#!/usr/bin/env bash
# The bfloat16 kernels of each family with bfloat16 products (cmake/families.tsv's
# bf16_products column) run their origin form's GEMMs on bfloat16 dot products:
# in the assembly, each GEMM's innermost loop issues vdpbf16ps and no FMA, at a
# head dim fixed at compile time (64) and at one known at run time alone (0).
# The forward: the scores (generators/gka_math.h, feature_pairs). The backward:
# the scores and dP (pairs of d), the keys' and the queries' block sums (pairs
# of tokens, generators/gka_backward_fused.h). A schedule that loses the pairs'
# vectorization falls back to widened FMAs silently, with the same results:
# this says so. Exit 77 (skipped) where no family of this architecture has
# bfloat16 products.
# usage: bf16_products_static.sh GENERATOR OUT
set -euo pipefail
generator=$1 out=$2
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
families=$(awk -F'\t' '!/^#/ && $5 == "yes" && $2 ~ /^x86-64/ { print $1 "\t" $2 }' "$root/cmake/families.tsv")
[ -n "$families" ] || { echo "SKIP: no x86 family with bf16_products in cmake/families.tsv"; exit 77; }

# check KERNEL LOOP...: each LOOP (a regex of its header's name) is in KERNEL's
# assembly, and its bodies issue vdpbf16ps and no FMA.
check() {
  local name=$1 loop
  shift
  for loop in "$@"; do
    read -r loops dots fmas < <(awk -v loop="$loop" '$0 ~ "^\\.LBB.*" loop { inside = 1; loops++; next }
                                 inside && /^[[:space:]]+j[a-z]+[[:space:]]/ { inside = 0 }
                                 inside && /vdpbf16ps/ { dots++ } inside && /vfmadd|vfnmadd/ { fmas++ }
                                 END { print loops + 0, dots + 0, fmas + 0 }' "$out/$name.s")
    echo "$name: loops $loop: $loops, vdpbf16ps $dots, FMAs $fmas"
    if [ "$loops" -eq 0 ] || [ "$dots" -eq 0 ] || [ "$fmas" -ne 0 ]; then
      echo "FAIL: $name's GEMM $loop does not run on bfloat16 dot products"
      exit 1
    fi
  done
}

while IFS=$'\t' read -r family target; do
  for head_dim in 64 0; do
    for pass in forward backward; do
      name=${pass}_${family}_${head_dim}_bf16_origin
      "$generator" -g gka_$pass -f "$name" -n "$name" -e assembly -o "$out" target="$target-no_runtime" \
        head_dim="$head_dim" scores=origin element=bfloat16 bf16_products=true
    done
    check forward_${family}_${head_dim}_bf16_origin 'for_dot.*rd\$y'
    check backward_${family}_${head_dim}_bf16_origin 'for_dot.*rd\$y' 'for_dprob.*rd\$y' \
      'for_block_key_sum.*block_queries\$z' 'for_block_query_sum.*block_keys\$y'
  done
done <<< "$families"
