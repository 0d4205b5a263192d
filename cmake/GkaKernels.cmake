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
# - best: this machine's best CPU family alone (make demo's first build);
# - gpu: the fallback CPU family and CUDA (the builds make gpu-builds prepares
#   for tests/gpu/check.sh on a GPU machine: small enough to carry there).
set(GKA_FAMILY_SET all CACHE STRING "Families to compile: all, host (the CPU families this machine runs), quick (its best and the fallback), best (its best) or gpu (the fallback and CUDA)")
set_property(CACHE GKA_FAMILY_SET PROPERTY STRINGS all host quick best gpu)
if (NOT GKA_FAMILY_SET MATCHES "^(all|host|quick|best|gpu)$")
    message(FATAL_ERROR "GKA_FAMILY_SET must be all, host, quick, best or gpu, not '${GKA_FAMILY_SET}'")
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
    if (GKA_FAMILY_SET MATCHES "^(quick|best)$")
        list(SUBLIST host_families 0 1 host_families)
    endif ()
    if (GKA_FAMILY_SET STREQUAL "quick")
        list(APPEND host_families ${fallback})
        list(REMOVE_DUPLICATES host_families)
    elseif (GKA_FAMILY_SET STREQUAL "gpu")
        set(host_families ${fallback})
    endif ()
    if (GKA_FAMILY_SET MATCHES "^(quick|best)$")
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

# The autotuner's table (schedules/tuned.tsv), as autotune/tuned_table.py
# resolves it: rows checked, families.tsv's knobs_from applied, each shape
# class as numbers, written to GKA_TUNED_RESOLVED (which kernels/variants.py
# and the tests read). The knobs of a (family, kernel, head dim)'s class of
# every shape are also GKA_TUNED_<family>_<kernel>_<head_dim> (head dim 0:
# any), for the tests' own kernels.
find_package(Python3 REQUIRED COMPONENTS Interpreter)
set(GKA_TUNED_RESOLVED ${PROJECT_BINARY_DIR}/tuned_resolved.tsv)
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
    if ("${window}|${min_seq_len}|${max_seq_len}" STREQUAL "any|1|0")
        set(GKA_TUNED_${family}_${kernel}_${head_dim} "${knobs}")
    endif ()
endforeach ()

# The kernel cache (scripts/kernel_cache.py): every custom command runs through
# it, and a kernel's generator run whose recipe it holds is a copy. The recipe
# file holds what the sources do not say: Halide's version and library, and
# the compiler and flags that build the generator (a cross build's generator
# is the host build's binary, named by its digest).
set(GKA_KERNEL_RECIPE ${PROJECT_BINARY_DIR}/kernel_recipe.txt)
get_target_property(halide_library Halide::Halide LOCATION)
file(SHA256 ${halide_library} halide_digest)
string(TOUPPER "${CMAKE_BUILD_TYPE}" build_type)
set(recipe "halide ${Halide_VERSION} ${halide_digest}\n")
if (GKA_GENERATOR)
    file(SHA256 ${GKA_GENERATOR} generator_digest)
    string(APPEND recipe "generator ${generator_digest}\n")
else ()
    string(APPEND recipe "compiler ${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION}\n"
                         "flags ${CMAKE_CXX_FLAGS} ${CMAKE_CXX_FLAGS_${build_type}}\n")
endif ()
file(CONFIGURE OUTPUT ${GKA_KERNEL_RECIPE} CONTENT "${recipe}")
set_property(GLOBAL PROPERTY RULE_LAUNCH_CUSTOM
             "${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/../scripts/kernel_cache.py --sources ${PROJECT_SOURCE_DIR} --recipe ${GKA_KERNEL_RECIPE} --")

option(GKA_KERNEL_LISTINGS "Write every kernel's Halide STMT and assembly beside it (build/runtime/*.stmt, *.s)" OFF)

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

# The variants (kernels/variants.py, the one place that decides which kernels
# exist), for the families of GKA_FAMILY_SET and what GKA_SELECT keeps:
# GKA_VARIANTS_TABLE, which the tuner and the tests read too.
set(GKA_SELECT "" CACHE STRING
    "Which variants to compile: field=value,... terms of pass, head_dim, element, scores, function (kernels/variants.py); empty: all")
set(GKA_VARIANTS_TABLE ${PROJECT_BINARY_DIR}/variants.tsv)
set(variants_script ${CMAKE_CURRENT_LIST_DIR}/../kernels/variants.py)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${variants_script})
# The passes (variants.py's PASSES, the one list of them): GKA_PASSES.
file(STRINGS ${variants_script} pass_names REGEX "^PASSES = ")
string(REGEX MATCHALL "\"[a-z_]+\"" GKA_PASSES "${pass_names}")
string(REPLACE "\"" "" GKA_PASSES "${GKA_PASSES}")
string(REPLACE ";" "," build_families "${GKA_FAMILIES};${GKA_CUDA_FAMILIES}")
string(REPLACE ";" "," functions "${GKA_KERNEL_FUNCTIONS}")
execute_process(COMMAND ${Python3_EXECUTABLE} ${variants_script} --families ${CMAKE_CURRENT_LIST_DIR}/families.tsv
                        --build-families ${build_families} --functions ${functions} --tuned ${GKA_TUNED_RESOLVED}
                        --select "${GKA_SELECT}" --out ${GKA_VARIANTS_TABLE}
                RESULT_VARIABLE failed ERROR_VARIABLE why)
if (failed)
    message(FATAL_ERROR "${why}")
endif ()

# gka_add_variants(): a static library for each row of the variants table,
# named as its kernel (or imported from GKA_KERNELS_FROM), appended to
# GKA_KERNEL_LIBRARIES; and the runtime's dispatch lists,
# GKA_VARIANTS_<pass>_<cpu|cuda>, of GKA_VARIANT(...) entries: the rows' fields.
function(gka_add_variants)
    file(STRINGS ${GKA_VARIANTS_TABLE} rows REGEX "^[^#]")
    list(POP_FRONT rows)  # the header
    set(libraries "")
    foreach (row IN LISTS rows)
        string(REPLACE "\t" ";" fields "${row}")
        list(POP_FRONT fields name pass device family generator head_dim window min_seq_len max_seq_len knobs scores
             element function params)
        if (knobs STREQUAL "-")
            set(knobs "")
        endif ()
        string(REPLACE " " ";" params "${params}")
        # Listings where a check reads them (writing them is about a quarter of
        # a generator run): the PTX in a CUDA kernel's STMT (the spill guard,
        # tests/CMakeLists.txt), a NEON kernel's assembly (its spill guard);
        # every kernel's STMT and assembly with GKA_KERNEL_LISTINGS, for people.
        set(listings "")
        if (GKA_KERNEL_LISTINGS)
            set(listings STMT ${name}_stmt ASSEMBLY ${name}_asm)
        elseif (device STREQUAL "cuda")
            set(listings STMT ${name}_stmt)
        elseif (GKA_TARGET_${family} MATCHES "^arm-")
            set(listings ASSEMBLY ${name}_asm)
        endif ()
        if (GKA_KERNELS_FROM)
            gka_import_kernel(${name})
        else ()
            add_halide_library(${name} FROM gka.generator GENERATOR ${generator} FUNCTION_NAME ${name}
                               TARGETS ${GKA_TARGET_${family}} USE_RUNTIME gka_halide_runtime ${listings}
                               PARAMS ${params})
        endif ()
        list(APPEND libraries ${name})
        string(TOUPPER "${window}" window)
        string(REPLACE "float32" "f32" element "${element}")
        string(REPLACE "bfloat16" "bf16" element "${element}")
        string(APPEND GKA_VARIANTS_${pass}_${device} " \\\n    GKA_VARIANT(${family}, ${head_dim}, ${window}, "
               "${min_seq_len}, ${max_seq_len}, ${name}, \"${knobs}\", ${scores}, ${element}, ${function})")
    endforeach ()
    set(GKA_KERNEL_LIBRARIES ${libraries} PARENT_SCOPE)
    foreach (pass IN LISTS GKA_PASSES)
        foreach (device cpu cuda)
            set(GKA_VARIANTS_${pass}_${device} "${GKA_VARIANTS_${pass}_${device}}" PARENT_SCOPE)
        endforeach ()
    endforeach ()
endfunction()
