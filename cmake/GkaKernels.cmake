# The CPU target families and the helper that instantiates a GKA kernel for one.
# Each family is its own Halide target; libgka picks among them at run time.
set(GKA_FAMILIES generic avx2 avx512)
set(GKA_TARGET_generic x86-64-linux-sse41)
set(GKA_TARGET_avx2 x86-64-linux-sse41-avx-f16c-fma-avx2)
set(GKA_TARGET_avx512 x86-64-linux-sse41-avx-f16c-fma-avx2-avx512-avx512_skylake)
# The CUDA family: PTX for compute capability 8.0 (A100), which the driver JIT-
# compiles for the GPU it runs on (H100/H200 included). Its kernels take a
# user_context, through which libgka passes the caller's stream.
set(GKA_TARGET_cuda x86-64-linux-sse41-cuda-cuda_capability_80-user_context)
set(GKA_KERNELS gka_forward gka_backward)
# Head dims compiled with constant loops; "any" serves every other head dim.
set(GKA_HEAD_DIMS 64 128 any)

# The autotuner's table: GKA_TUNED_<family>_<kernel>_<head_dim> = its knobs.
file(STRINGS ${CMAKE_CURRENT_LIST_DIR}/../schedules/tuned.tsv tuned_rows REGEX "^[^#]")
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/../schedules/tuned.tsv)
foreach (row IN LISTS tuned_rows)
    string(REPLACE "\t" ";" fields "${row}")
    list(GET fields 0 family)
    list(GET fields 1 kernel)
    list(GET fields 2 head_dim)
    list(GET fields 3 knobs)
    set(GKA_TUNED_${family}_${kernel}_${head_dim} "${knobs}")
endforeach ()

# gka_add_kernel(<kernel> <family> <head_dim> [KNOBS name:value,...]) defines
# the static library <kernel>_<family>_d<head_dim> (or _any), whose function has
# the same name, with its STMT and assembly beside it for review.
function(gka_add_kernel kernel family head_dim)
    cmake_parse_arguments(arg "" "KNOBS" "" ${ARGN})
    if (NOT arg_KNOBS)
        set(arg_KNOBS "${GKA_TUNED_${family}_${kernel}_${head_dim}}")
    endif ()
    if (head_dim STREQUAL "any")
        set(name ${kernel}_${family}_any)
        set(params PARAMS head_dim=0)
    else ()
        set(name ${kernel}_${family}_d${head_dim})
        set(params PARAMS head_dim=${head_dim})
    endif ()
    if (arg_KNOBS)
        list(APPEND params knobs=${arg_KNOBS})
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
    set(GKA_KERNEL_LIBRARIES ${GKA_KERNEL_LIBRARIES} ${name} PARENT_SCOPE)
    set(GKA_KNOBS_${name} "${arg_KNOBS}" PARENT_SCOPE)
endfunction()
