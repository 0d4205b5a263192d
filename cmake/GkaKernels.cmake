# The CPU target families and the helper that instantiates a GKA kernel for one.
# Each family is its own Halide target; libgka picks among them at run time.
set(GKA_FAMILIES generic avx2 avx512)
set(GKA_TARGET_generic x86-64-linux-sse41)
set(GKA_TARGET_avx2 x86-64-linux-sse41-avx-f16c-fma-avx2)
set(GKA_TARGET_avx512 x86-64-linux-sse41-avx-f16c-fma-avx2-avx512-avx512_skylake)
set(GKA_KERNELS gka_forward gka_backward)

# gka_add_kernel(<kernel> <family> [KNOBS name=value,...]) defines the static
# library <kernel>_<family>, whose function is also named <kernel>_<family>,
# with its STMT and assembly beside it for review.
function(gka_add_kernel kernel family)
    cmake_parse_arguments(arg "" "KNOBS" "" ${ARGN})
    set(name ${kernel}_${family})
    set(params "")
    if (arg_KNOBS)
        set(params PARAMS knobs=${arg_KNOBS})
    endif ()
    add_halide_library(
        ${name} FROM gka.generator
        GENERATOR ${kernel}
        FUNCTION_NAME ${name}
        TARGETS ${GKA_TARGET_${family}}
        USE_RUNTIME gka_halide_runtime
        STMT ${name}_stmt
        ASSEMBLY ${name}_asm
        ${params}
    )
endfunction()
