# The target families (cmake/families.tsv, the one list of them) and the
# helper that instantiates a GKA kernel for one. Each family is its own Halide
# target; libgka picks among the CPU ones at run time. From the table:
# GKA_FAMILIES (the CPU families, best first), GKA_CUDA_FAMILIES (best first),
# and per family GKA_TARGET_<f>, GKA_HOST_FEATURES_<f> (CPU) and
# GKA_CUDA_CAPABILITY_<f> (CUDA, e.g. 86), for the rows of the
# architecture being built for (GKA_HALIDE_ARCH, their targets' prefix).
if (CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64)$")
    set(GKA_HALIDE_ARCH arm-64)
else ()
    set(GKA_HALIDE_ARCH x86-64)
endif ()
set(GKA_FAMILIES "")
set(GKA_CUDA_FAMILIES "")
file(STRINGS ${CMAKE_CURRENT_LIST_DIR}/families.tsv family_rows REGEX "^[^#]")
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/families.tsv)
list(POP_FRONT family_rows)  # the header
foreach (row IN LISTS family_rows)
    string(REPLACE "\t" ";" fields "${row}")
    list(LENGTH fields n)
    if (NOT n EQUAL 6)
        message(FATAL_ERROR "cmake/families.tsv: a row needs family, halide_target, host_features, kind, "
                            "bf16_products, knobs_from: '${row}'")
    endif ()
    list(GET fields 0 family)
    list(GET fields 1 GKA_TARGET_${family})
    list(GET fields 2 GKA_HOST_FEATURES_${family})
    list(GET fields 3 kind)
    list(GET fields 4 GKA_BF16_PRODUCTS_${family})
    list(GET fields 5 knobs_from)
    if (NOT knobs_from STREQUAL "-")
        list(APPEND GKA_KNOBS_TAKERS_${knobs_from} ${family})  # families.tsv's knobs_from
    endif ()
    if (NOT GKA_BF16_PRODUCTS_${family} MATCHES "^(yes|no)$")
        message(FATAL_ERROR "cmake/families.tsv: bf16_products must be yes or no: '${row}'")
    endif ()
    if (NOT GKA_TARGET_${family} MATCHES "^${GKA_HALIDE_ARCH}-")
        continue ()
    elseif (kind STREQUAL "cpu")
        list(APPEND GKA_FAMILIES ${family})
    elseif (kind STREQUAL "cuda")
        if (NOT GKA_TARGET_${family} MATCHES "cuda_capability_([0-9]+)")
            message(FATAL_ERROR "cmake/families.tsv: a cuda row's target names its cuda_capability_NN: '${row}'")
        endif ()
        set(GKA_CUDA_CAPABILITY_${family} ${CMAKE_MATCH_1})
        list(APPEND GKA_CUDA_FAMILIES ${family})
    else ()
        message(FATAL_ERROR "cmake/families.tsv: kind must be cpu or cuda: '${row}'")
    endif ()
endforeach ()
# GKA_ONLY_HOST_FAMILIES: compile only the CPU families this machine runs, by
# /proc/cpuinfo's flags (the sanitizer builds: their kernels serve this
# machine's tests alone, and a family it cannot run would be minutes of
# generation for tests that skip).
option(GKA_ONLY_HOST_FAMILIES "Compile only the CPU families whose host features this machine has" OFF)
if (GKA_ONLY_HOST_FAMILIES)
    file(STRINGS /proc/cpuinfo flag_lines REGEX "^flags" LIMIT_COUNT 1)
    string(REGEX REPLACE "^flags[ \t]*:[ ]*" "" host_flags "${flag_lines}")
    string(REPLACE " " ";" host_flags "${host_flags}")
    set(host_families "")
    foreach (family IN LISTS GKA_FAMILIES)
        string(REPLACE "," ";" needs "${GKA_HOST_FEATURES_${family}}")
        set(runs TRUE)
        foreach (feature IN LISTS needs)
            if (NOT feature IN_LIST host_flags)
                set(runs FALSE)
            endif ()
        endforeach ()
        if (runs)
            list(APPEND host_families ${family})
        endif ()
    endforeach ()
    message(STATUS "GKA_ONLY_HOST_FAMILIES: ${host_families} (of ${GKA_FAMILIES})")
    set(GKA_FAMILIES ${host_families})
endif ()
# Halide target features added to every kernel's and the runtime's target
# ("asan" in the ASan build).
set(GKA_KERNEL_FEATURES "" CACHE STRING "Halide target features added to every kernel's target, '-'-separated")
if (GKA_KERNEL_FEATURES)
    foreach (family IN LISTS GKA_FAMILIES GKA_CUDA_FAMILIES)
        string(APPEND GKA_TARGET_${family} -${GKA_KERNEL_FEATURES})
    endforeach ()
    set(GKA_RUNTIME_FEATURES -${GKA_KERNEL_FEATURES})
endif ()
set(GKA_KERNELS gka_forward gka_backward)
# Head dims compiled with constant loops; "any" serves every other head dim.
set(GKA_HEAD_DIMS 64 128 any)

# The autotuner's table (schedules/tuned.tsv). A row whose shape class is
# "any any" sets the knobs of the (family, kernel, head dim) variant:
# GKA_TUNED_<family>_<kernel>_<head_dim>. A row for a narrower class (a window
# kind, a sequence-length range) adds a variant of its own, listed in
# GKA_CLASSES_<family>_<kernel>_<head_dim> as "window|seq_len|knobs". A
# family's rows also serve the families that take its knobs (families.tsv,
# knobs_from) and have no rows of their own.
file(STRINGS ${CMAKE_CURRENT_LIST_DIR}/../schedules/tuned.tsv tuned_rows REGEX "^[^#]")
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/../schedules/tuned.tsv)
set(tuned_families "")
foreach (row IN LISTS tuned_rows)
    string(REGEX MATCH "^[^\t]*" family "${row}")
    list(APPEND tuned_families ${family})
endforeach ()
foreach (row IN LISTS tuned_rows)
    string(REPLACE "\t" ";" fields "${row}")
    list(LENGTH fields n)
    if (n LESS 6)
        message(FATAL_ERROR "schedules/tuned.tsv: a row needs family, kernel, head_dim, window, seq_len, knobs: '${row}'")
    endif ()
    list(GET fields 0 family)
    list(GET fields 1 kernel)
    list(GET fields 2 head_dim)
    list(GET fields 3 window)
    list(GET fields 4 seq_len)
    list(GET fields 5 knobs)
    if (NOT window MATCHES "^(any|global|sliding)$" OR NOT seq_len MATCHES "^(any|[0-9]+-[0-9]*)$")
        message(FATAL_ERROR "schedules/tuned.tsv: window must be any|global|sliding and seq_len any|lo-|lo-hi: '${row}'")
    endif ()
    set(served ${family})
    foreach (taker IN LISTS GKA_KNOBS_TAKERS_${family})
        if (NOT taker IN_LIST tuned_families)
            list(APPEND served ${taker})
        endif ()
    endforeach ()
    foreach (f IN LISTS served)
        if (window STREQUAL "any" AND seq_len STREQUAL "any")
            set(GKA_TUNED_${f}_${kernel}_${head_dim} "${knobs}")
        else ()
            list(APPEND GKA_CLASSES_${f}_${kernel}_${head_dim} "${window}|${seq_len}|${knobs}")
        endif ()
    endforeach ()
endforeach ()

# A build that links the kernels another build folder generated (the TSan
# build: its kernels are the same object code, and generating them again
# would take minutes): GKA_KERNELS_FROM names that folder.
set(GKA_KERNELS_FROM "" CACHE PATH "A build folder whose generated kernels this build links instead of generating its own")
function(gka_import_kernel name)
    set(library ${GKA_KERNELS_FROM}/runtime/lib${name}.a)
    if (NOT EXISTS ${library})
        message(FATAL_ERROR "GKA_KERNELS_FROM: ${library} is missing; build ${GKA_KERNELS_FROM} first")
    endif ()
    add_library(${name} STATIC IMPORTED GLOBAL)
    set_target_properties(${name} PROPERTIES IMPORTED_LOCATION ${library}
                                             INTERFACE_INCLUDE_DIRECTORIES ${GKA_KERNELS_FROM}/runtime
                                             INTERFACE_LINK_LIBRARIES Halide::Runtime)
endfunction()

# gka_add_kernel(<kernel> <family> <head_dim> [WINDOW any|global|sliding]
# [SEQ_LEN any|lo-|lo-hi] [KNOBS name:value,...|defaults] [SCORES expansion|origin|direct]
# [ELEMENT float32|bfloat16] [CHUNK]) defines the static library
# <kernel>_<family>_d<head_dim> (or _any; <kernel>_chunk_... for the CHUNK
# variant, a chunk's pass: gka.h, gka_forward_chunk), with a suffix for a
# narrower shape class (_sliding, _t1_2048), for bfloat16 features (_bf16) and
# for the origin and direct score forms (_origin, _direct), whose function has
# the same name, with its STMT and assembly beside it for review. It appends
# the variant to GKA_VARIANTS_<kernel>_<cpu|cuda>, the rows of the runtime's
# dispatch table.
function(gka_add_kernel kernel family head_dim)
    cmake_parse_arguments(arg "CHUNK" "KNOBS;WINDOW;SEQ_LEN;SCORES;ELEMENT" "" ${ARGN})
    set(variants ${kernel})  # the dispatch table the variant joins
    if (arg_CHUNK)
        set(variants ${kernel}_chunk)
    endif ()
    if (NOT arg_SCORES)
        set(arg_SCORES expansion)
    endif ()
    if (NOT arg_ELEMENT)
        set(arg_ELEMENT float32)
    elseif (NOT arg_ELEMENT MATCHES "^(float32|bfloat16)$")
        message(FATAL_ERROR "gka_add_kernel: ELEMENT must be float32 or bfloat16, not '${arg_ELEMENT}'")
    endif ()
    if (NOT arg_WINDOW)
        set(arg_WINDOW any)
    endif ()
    if (NOT arg_SEQ_LEN)
        set(arg_SEQ_LEN any)
    endif ()
    if (NOT arg_KNOBS AND arg_WINDOW STREQUAL "any" AND arg_SEQ_LEN STREQUAL "any")
        set(arg_KNOBS "${GKA_TUNED_${family}_${kernel}_${head_dim}}")
    endif ()
    if (arg_KNOBS STREQUAL "defaults")  # a class's row saying its schedule's defaults win there
        set(arg_KNOBS "")
    endif ()
    if (head_dim STREQUAL "any")
        set(name ${variants}_${family}_any)
        set(params PARAMS head_dim=0)
        set(dim 0)
    else ()
        set(name ${variants}_${family}_d${head_dim})
        set(params PARAMS head_dim=${head_dim})
        set(dim ${head_dim})
    endif ()
    if (arg_CHUNK)
        list(APPEND params chunk=true)
    endif ()
    if (NOT arg_WINDOW STREQUAL "any")
        string(APPEND name _${arg_WINDOW})
    endif ()
    set(min_seq 1)
    set(max_seq 0)  # no bound
    if (arg_SEQ_LEN MATCHES "^([0-9]+)-([0-9]*)$")
        set(min_seq ${CMAKE_MATCH_1})
        if (CMAKE_MATCH_2)
            set(max_seq ${CMAKE_MATCH_2})
            string(APPEND name _t${min_seq}_${max_seq})
        else ()
            string(APPEND name _t${min_seq}_up)
        endif ()
    endif ()
    if (arg_KNOBS)
        list(APPEND params knobs=${arg_KNOBS})
    endif ()
    list(APPEND params scores=${arg_SCORES})
    set(element f32)
    if (arg_ELEMENT STREQUAL "bfloat16")
        list(APPEND params element=bfloat16)
        string(APPEND name _bf16)
        set(element bf16)
        if (kernel STREQUAL "gka_forward" AND NOT arg_CHUNK AND GKA_BF16_PRODUCTS_${family} STREQUAL "yes")
            list(APPEND params bf16_products=true)
        endif ()
    endif ()
    if (arg_SCORES MATCHES "^(direct|origin)$")
        string(APPEND name _${arg_SCORES})
    elseif (NOT arg_SCORES STREQUAL "expansion")
        message(FATAL_ERROR "gka_add_kernel: SCORES must be expansion, origin or direct, not '${arg_SCORES}'")
    endif ()
    if (GKA_KERNELS_FROM)
        gka_import_kernel(${name})
    else ()
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
    endif ()
    string(TOUPPER ${arg_WINDOW} window)
    set(where cpu)
    if (family IN_LIST GKA_CUDA_FAMILIES)
        set(where cuda)
    endif ()
    set(GKA_VARIANTS_${variants}_${where} "${GKA_VARIANTS_${variants}_${where}} \\\n    GKA_VARIANT(${family}, ${dim}, ${window}, ${min_seq}, ${max_seq}, ${name}, \"${arg_KNOBS}\", ${arg_SCORES}, ${element})" PARENT_SCOPE)
    set(GKA_KERNEL_LIBRARIES ${GKA_KERNEL_LIBRARIES} ${name} PARENT_SCOPE)
endfunction()

# gka_add_kernel for a (kernel, family, head dim) and for each narrower shape
# class the tuned table has for it; further arguments (ELEMENT) go to each.
# (The direct score form, the fallback for inputs the expansion does not
# serve, is one "any" variant per CPU family and element type:
# runtime/CMakeLists.txt.)
macro(gka_add_kernel_and_classes kernel family head_dim)
    gka_add_kernel(${kernel} ${family} ${head_dim} ${ARGN})
    foreach (class IN LISTS GKA_CLASSES_${family}_${kernel}_${head_dim})
        string(REPLACE "|" ";" class "${class}")
        list(GET class 0 window)
        list(GET class 1 seq_len)
        list(GET class 2 knobs)
        gka_add_kernel(${kernel} ${family} ${head_dim} WINDOW ${window} SEQ_LEN ${seq_len} KNOBS ${knobs} ${ARGN})
    endforeach ()
endmacro()
