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
# GKA_FAMILY_SET: which families of the table a build compiles.
# - all: every row for this architecture, CUDA included (make install, the
#   wheel, CI);
# - host: the CPU families this machine runs, by /proc/cpuinfo's flags, and
#   CUDA (the sanitizer builds: their kernels serve this machine's tests alone);
# - quick: this machine's best CPU family and the table's last CPU row, the
#   fallback that every host of the architecture runs, without CUDA (make demo
#   and make test: a first build in minutes);
# - gpu: the fallback CPU family and CUDA (the builds make gpu-builds prepares
#   for tests/gpu/check.sh on a GPU machine: small enough to carry there).
set(GKA_FAMILY_SET all CACHE STRING "Families to compile: all, host (the CPU families this machine runs), quick (its best and the fallback) or gpu (the fallback and CUDA)")
set_property(CACHE GKA_FAMILY_SET PROPERTY STRINGS all host quick gpu)
if (NOT GKA_FAMILY_SET MATCHES "^(all|host|quick|gpu)$")
    message(FATAL_ERROR "GKA_FAMILY_SET must be all, host, quick or gpu, not '${GKA_FAMILY_SET}'")
elseif (NOT GKA_FAMILY_SET STREQUAL "all")
    file(STRINGS /proc/cpuinfo flag_lines REGEX "^(flags|Features)" LIMIT_COUNT 1)
    string(REGEX REPLACE "^(flags|Features)[ \t]*:[ ]*" "" host_flags "${flag_lines}")
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
    list(GET GKA_FAMILIES -1 fallback)
    if (GKA_FAMILY_SET STREQUAL "quick")
        list(SUBLIST host_families 0 1 host_families)
        list(APPEND host_families ${fallback})
        list(REMOVE_DUPLICATES host_families)
    elseif (GKA_FAMILY_SET STREQUAL "gpu")
        set(host_families ${fallback})
    endif ()
    if (GKA_FAMILY_SET STREQUAL "quick")
        set(GKA_CUDA_FAMILIES "")
    endif ()
    message(STATUS "GKA_FAMILY_SET ${GKA_FAMILY_SET}: ${host_families} ${GKA_CUDA_FAMILIES} (of ${GKA_FAMILIES})")
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
# The kernel functions (generators/kernel_function.h, the one list of them):
# GKA_KERNEL_FUNCTIONS, the Gaussian first.
file(STRINGS ${CMAKE_CURRENT_LIST_DIR}/../generators/kernel_function.h function_names
     REGEX "kernel_function_names\\[\\] = ")
string(REGEX MATCHALL "\"[a-z0-9_]+\"" GKA_KERNEL_FUNCTIONS "${function_names}")
string(REPLACE "\"" "" GKA_KERNEL_FUNCTIONS "${GKA_KERNEL_FUNCTIONS}")
list(GET GKA_KERNEL_FUNCTIONS 0 first_function)
if (NOT first_function STREQUAL "gaussian")
    message(FATAL_ERROR "generators/kernel_function.h: kernel_function_names must list gaussian first, "
                        "found '${GKA_KERNEL_FUNCTIONS}'")
endif ()
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/../generators/kernel_function.h)
# Head dims compiled with constant loops; "any" serves every other head dim.
# Cached, for the autotuner, which tunes the others (autotune/gka_autotune.py).
set(GKA_HEAD_DIMS 64 128 any CACHE INTERNAL "Head dims compiled with constant loops; any serves every other")

# The autotuner's table (schedules/tuned.tsv), as autotune/tuned_table.py
# resolves it: rows checked, families.tsv's knobs_from applied, each shape
# class as numbers, written to GKA_TUNED_RESOLVED (which the tests read too).
# The row of a (family, kernel, head dim) whose class is every shape
# (GKA_EVERY_SHAPE) sets the knobs of its variant:
# GKA_TUNED_<family>_<kernel>_<head_dim>. A row of a narrower class (a window
# kind, a sequence-length range) adds a variant of its own, listed in
# GKA_CLASSES_<family>_<kernel>_<head_dim> as
# "window|min_seq_len|max_seq_len|knobs".
find_package(Python3 REQUIRED COMPONENTS Interpreter)
set(GKA_TUNED_RESOLVED ${PROJECT_BINARY_DIR}/tuned_resolved.tsv)
set(GKA_EVERY_SHAPE "any|1|0")  # window|min_seq_len|max_seq_len, max 0: no bound
set(tuned_table ${CMAKE_CURRENT_LIST_DIR}/../schedules/tuned.tsv)
set(tuned_table_reader ${CMAKE_CURRENT_LIST_DIR}/../autotune/tuned_table.py)
# GKA_TUNED_MERGE: a table whose rows replace tuned.tsv's of their shape
# classes: schedules/cuda_candidates.tsv, for the build that tries schedules
# not yet measured on a GPU (make gpu-builds).
set(GKA_TUNED_MERGE "" CACHE FILEPATH "A table of rows that replace schedules/tuned.tsv's (schedules/cuda_candidates.tsv)")
set(merge_args "")
if (GKA_TUNED_MERGE)
    set(merge_args --merge ${GKA_TUNED_MERGE})
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${GKA_TUNED_MERGE})
endif ()
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${tuned_table} ${tuned_table_reader})
execute_process(COMMAND ${Python3_EXECUTABLE} ${tuned_table_reader} --families ${CMAKE_CURRENT_LIST_DIR}/families.tsv
                        --table ${tuned_table} ${merge_args} --resolve ${GKA_TUNED_RESOLVED}
                RESULT_VARIABLE failed ERROR_VARIABLE why)
if (failed)
    message(FATAL_ERROR "${why}")
endif ()
file(STRINGS ${GKA_TUNED_RESOLVED} tuned_rows REGEX "^[^#]")
foreach (row IN LISTS tuned_rows)
    string(REPLACE "\t" ";" fields "${row}")
    list(POP_FRONT fields family kernel head_dim window min_seq_len max_seq_len knobs)
    if (head_dim EQUAL 0)
        set(head_dim any)
    endif ()
    if ("${window}|${min_seq_len}|${max_seq_len}" STREQUAL GKA_EVERY_SHAPE)
        set(GKA_TUNED_${family}_${kernel}_${head_dim} "${knobs}")
    else ()
        list(APPEND GKA_CLASSES_${family}_${kernel}_${head_dim} "${window}|${min_seq_len}|${max_seq_len}|${knobs}")
    endif ()
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
# [MIN_SEQ_LEN <n>] [MAX_SEQ_LEN <n>, 0: no bound] [KNOBS name:value,...]
# [SCORES centred|origin|direct] [ELEMENT float32|bfloat16] [FUNCTION <kernel function>]
# [CHUNK]) defines the static library
# <kernel>_<family>_d<head_dim> (or _any; <kernel>_chunk_... for the CHUNK
# variant, a chunk's pass: gka.h, gka_forward_chunk), with a suffix for a
# narrower shape class (_sliding, _t1_2048), for bfloat16 features (_bf16) and
# for the origin and direct score forms (_origin, _direct) and for a kernel
# function other than the Gaussian (_laplace, _cauchy), whose function has
# the same name, with its STMT and assembly beside it for review. It appends
# the variant to GKA_VARIANTS_<kernel>_<cpu|cuda>, the rows of the runtime's
# dispatch table.
function(gka_add_kernel kernel family head_dim)
    cmake_parse_arguments(arg "CHUNK" "KNOBS;WINDOW;MIN_SEQ_LEN;MAX_SEQ_LEN;SCORES;ELEMENT;FUNCTION" "" ${ARGN})
    set(variants ${kernel})  # the dispatch table the variant joins
    if (arg_CHUNK)
        set(variants ${kernel}_chunk)
    endif ()
    if (NOT arg_SCORES)
        set(arg_SCORES centred)
    endif ()
    if (NOT arg_FUNCTION)
        set(arg_FUNCTION gaussian)
    elseif (NOT arg_FUNCTION IN_LIST GKA_KERNEL_FUNCTIONS)
        message(FATAL_ERROR "gka_add_kernel: FUNCTION must be one of ${GKA_KERNEL_FUNCTIONS} "
                            "(generators/kernel_function.h), not '${arg_FUNCTION}'")
    endif ()
    if (NOT arg_ELEMENT)
        set(arg_ELEMENT float32)
    elseif (NOT arg_ELEMENT MATCHES "^(float32|bfloat16)$")
        message(FATAL_ERROR "gka_add_kernel: ELEMENT must be float32 or bfloat16, not '${arg_ELEMENT}'")
    endif ()
    if (NOT arg_WINDOW)
        set(arg_WINDOW any)
    endif ()
    if (NOT arg_MIN_SEQ_LEN)
        set(arg_MIN_SEQ_LEN 1)
    endif ()
    if (NOT arg_MAX_SEQ_LEN)
        set(arg_MAX_SEQ_LEN 0)  # no bound
    endif ()
    # Without KNOBS, the variant of every shape has the tuned table's knobs for
    # it, and a narrower class's its schedule's defaults.
    if (NOT arg_KNOBS AND "${arg_WINDOW}|${arg_MIN_SEQ_LEN}|${arg_MAX_SEQ_LEN}" STREQUAL GKA_EVERY_SHAPE)
        set(arg_KNOBS "${GKA_TUNED_${family}_${kernel}_${head_dim}}")
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
    if (arg_MAX_SEQ_LEN)
        string(APPEND name _t${arg_MIN_SEQ_LEN}_${arg_MAX_SEQ_LEN})
    elseif (arg_MIN_SEQ_LEN GREATER 1)
        string(APPEND name _t${arg_MIN_SEQ_LEN}_up)
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
    elseif (NOT arg_SCORES STREQUAL "centred")
        message(FATAL_ERROR "gka_add_kernel: SCORES must be centred, origin or direct (generators/score_form.h), not '${arg_SCORES}'")
    endif ()
    if (NOT arg_FUNCTION STREQUAL "gaussian")
        list(APPEND params kernel_function=${arg_FUNCTION})
        string(APPEND name _${arg_FUNCTION})
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
    set(GKA_VARIANTS_${variants}_${where} "${GKA_VARIANTS_${variants}_${where}} \\\n    GKA_VARIANT(${family}, ${dim}, ${window}, ${arg_MIN_SEQ_LEN}, ${arg_MAX_SEQ_LEN}, ${name}, \"${arg_KNOBS}\", ${arg_SCORES}, ${element}, ${arg_FUNCTION})" PARENT_SCOPE)
    set(GKA_KERNEL_LIBRARIES ${GKA_KERNEL_LIBRARIES} ${name} PARENT_SCOPE)
endfunction()

# gka_add_kernel for a (kernel, family, head dim) and for each narrower shape
# class the tuned table has for it; further arguments (ELEMENT) go to each.
# (The direct score form, the fallback for inputs the expansions do not
# serve, is one "any" variant per CPU family and element type:
# runtime/CMakeLists.txt.)
macro(gka_add_kernel_and_classes kernel family head_dim)
    gka_add_kernel(${kernel} ${family} ${head_dim} ${ARGN})
    foreach (class IN LISTS GKA_CLASSES_${family}_${kernel}_${head_dim})
        string(REPLACE "|" ";" class "${class}")
        list(POP_FRONT class window min_seq_len max_seq_len knobs)
        gka_add_kernel(${kernel} ${family} ${head_dim} WINDOW ${window} MIN_SEQ_LEN ${min_seq_len}
                       MAX_SEQ_LEN ${max_seq_len} KNOBS "${knobs}" ${ARGN})
    endforeach ()
endmacro()
