#!/usr/bin/env bash
# A build of selected variants (GKA_SELECT; make demo's first build) runs the
# calls it selected, and refuses the others with an error that names the
# selection: never a crash, never another kernel. CI runs it right after
# `make demo` on a fresh clone.
# usage: selected_build.sh BUILD (configured with a GKA_SELECT of D=64, float32, forward and backward)
set -euo pipefail
build=$1
select=$(sed -n 's/^GKA_SELECT:STRING=//p' "$build/CMakeCache.txt")
if [ -z "$select" ]; then
  echo "selected_build: $build compiled every variant (GKA_SELECT is empty): nothing to check" >&2
  exit 2
fi
"$(dirname "$0")/../.venv/bin/cmake" --build "$build" --target gka_one_call >/dev/null
one_call=$build/tests/gka_one_call
failed=0
check() {  # check WANT ARGS...: WANT "runs" or a text the refusal must hold
  local want=$1 out status=0
  shift
  out=$("$one_call" "$@" 2>&1) || status=$?
  if { [ "$want" = runs ] && [ $status -eq 0 ]; } || { [ "$want" != runs ] && [ $status -eq 1 ] && [[ $out == *"$want"* ]]; }; then
    echo "ok: gka_one_call $*: $out"
  else
    echo "FAIL: gka_one_call $* (exit $status, wanted: $want): $out"
    failed=$((failed + 1))
  fi
}
check runs forward auto 256 -1 0 64
check runs backward auto 256 127 0 64
check runs backward direct 256 -1 0 64  # the direct form, of any D, serves the D=64 calls
check runs forward auto 256 -1 0 32      # and the others': the direct form alone
check "GKA_SELECT='$select'" forward auto 256 -1 0 64 laplace
check "no forward kernel for family" backward auto 256 -1 0 64 cauchy
echo "$((6 - failed)) passed, $failed failed"
[ $failed -eq 0 ]
