#!/usr/bin/env bash
# The bfloat16 forward of each family with bfloat16 products (cmake/families.tsv's
# bf16_products column) takes its origin-form scores from bfloat16 dot products
# (generators/gka_math.h, feature_pairs): in its assembly, the score GEMM's
# innermost loop (the loop over pairs of d) issues vdpbf16ps and no FMA, at a
# head dim fixed at compile time (64) and at one known at run time alone (0).
# A schedule that loses the pairs' vectorization falls back to widened FMAs
# silently, with the same results: this says so. Exit 77 (skipped) where no
# family of this architecture has bfloat16 products.
# usage: bf16_products_static.sh GENERATOR OUT
set -euo pipefail
generator=$1 out=$2
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
families=$(awk -F'\t' '!/^#/ && $5 == "yes" && $2 ~ /^x86-64/ { print $1 "\t" $2 }' "$root/cmake/families.tsv")
[ -n "$families" ] || { echo "SKIP: no x86 family with bf16_products in cmake/families.tsv"; exit 77; }
while IFS=$'\t' read -r family target; do
  for head_dim in 64 0; do
    name=forward_${family}_${head_dim}_bf16_origin
    "$generator" -g gka_forward -f "$name" -n "$name" -e assembly -o "$out" target="$target-no_runtime" \
      head_dim="$head_dim" scores=origin element=bfloat16 bf16_products=true
    # Count the instructions of the loops whose header names the dot's pairs (rd$y).
    read -r dots fmas < <(awk '/^\.LBB.*for_dot.*rd\$y/ { inside = 1; next }
                               inside && /^[[:space:]]+j[a-z]+[[:space:]]/ { inside = 0 }
                               inside && /vdpbf16ps/ { dots++ } inside && /vfmadd|vfnmadd/ { fmas++ }
                               END { print dots + 0, fmas + 0 }' "$out/$name.s")
    echo "$family head_dim=$head_dim: the score loop's vdpbf16ps $dots, FMAs $fmas"
    if [ "$dots" -eq 0 ] || [ "$fmas" -ne 0 ]; then
      echo "FAIL: $name's score GEMM does not run on bfloat16 dot products"
      exit 1
    fi
  done
done <<< "$families"
