#!/usr/bin/env bash
# make generate: GKA's kernels for any Halide 21 target. For each pass
# (forward, backward), as the C ABI's float32 calls dispatch them (the
# bfloat16 variants are libgka's own build's): on a CPU target the head
# dims 64, 128 and any in the centred form (the forward's also about the
# origin) and any in the direct form; on a CUDA target 64, 128 and any in the
# direct form, the only one libgka runs there. A static library and header
# apiece, named gka_<pass>_<d64|d128|any>[_origin|_direct], with
# their STMT and assembly beside them; and Halide's runtime for the target
# (gka_runtime.a), which they share. KNOBS (name:value,...) overrides the
# schedule's defaults for the target's family (gka_knobs lists them). KERNEL
# (generators/kernel_function.h's names; gaussian by default) chooses the
# kernel function: those other than the Gaussian in the direct form alone, on
# every target, named with the kernel's suffix (gka_forward_d64_direct_laplace).
# usage: generate.sh GENERATOR TARGET OUT [KNOBS] [KERNEL]
set -euo pipefail
generator=$1 target=${2:-} out=${3:-} knobs=${4:-} kernel=${5:-gaussian}
if [ -z "$target" ] || [ -z "$out" ]; then
  echo "usage: make generate TARGET=<Halide target, e.g. x86-64-linux-avx2-fma> OUT=<dir> [KNOBS=name:value,...]" \
       "[KERNEL=gaussian|laplace|cauchy]" >&2
  exit 2
fi
# The kernel functions' names, from their one list.
kernels=$(sed -n 's/.*kernel_function_names\[\] = {\(.*\)};.*/\1/p' "$(dirname "$0")/../generators/kernel_function.h" |
          sed 's/[", ]\+/ /g; s/ *$//')
if ! [[ " $kernels " == *" $kernel "* ]]; then
  echo "generate: KERNEL must be one of:$kernels (generators/kernel_function.h), not '$kernel'" >&2
  exit 2
fi
mkdir -p "$out"
# A target Halide cannot parse or build a runtime for is refused before any kernel.
if ! message=$("$generator" -r gka_runtime -e static_library,c_header -o "$out" target="$target" 2>&1); then
  echo "generate: Halide 21 cannot build for target '$target':" >&2
  echo "$message" | grep -v '^\s*$' | head -5 >&2
  exit 1
fi
forward_only="" kernel_suffix="" kernel_param=""
if [ "$kernel" != gaussian ]; then
  kernel_suffix=_$kernel kernel_param=kernel_function=$kernel
fi
if [[ "$target" == *cuda* ]] || [ "$kernel" != gaussian ]; then
  variants="d64_direct:64:direct d128_direct:128:direct any_direct:0:direct"
else
  variants="d64:64:centred d128:128:centred any:0:centred any_direct:0:direct"
  forward_only="d64_origin:64:origin d128_origin:128:origin any_origin:0:origin"
fi
for pass in forward backward; do
  pass_variants=$variants
  if [ "$pass" = forward ]; then pass_variants="$variants $forward_only"; fi
  for variant in $pass_variants; do
    IFS=: read -r suffix head_dim scores <<< "$variant"
    name=gka_${pass}_$suffix$kernel_suffix
    if ! message=$("$generator" -g "gka_$pass" -f "$name" -n "$name" -e static_library,c_header,stmt,assembly \
                   -o "$out" target="$target-no_runtime" head_dim="$head_dim" scores="$scores" \
                   ${knobs:+knobs="$knobs"} $kernel_param 2>&1); then
      echo "generate: $name for '$target' failed:" >&2
      echo "$message" | grep -v '^\s*$' | head -5 >&2
      exit 1
    fi
    echo "generate: $out/$name.a"
  done
done
