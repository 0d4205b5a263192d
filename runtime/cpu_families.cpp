#include "cpu_families.h"

#include <cstring>

#include "gka_kernel_headers.h"

namespace gka {
namespace {

// The features each family's Halide target assumes (CMakeLists.txt, GKA_FAMILIES).
bool has_avx512_skylake() {
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
bool has_avx2_fma() {
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("avx");
}
bool has_sse41() { return __builtin_cpu_supports("sse4.1"); }

// The head dims of GKA_HEAD_DIMS (cmake/GkaKernels.cmake).
#define GKA_FAMILY(family, supported)                                               \
    {                                                                               \
        #family, supported, {                                                       \
            {64, gka_forward_##family##_d64, gka_backward_##family##_d64,           \
             gka_forward_##family##_d64_knobs, gka_backward_##family##_d64_knobs},  \
            {128, gka_forward_##family##_d128, gka_backward_##family##_d128,        \
             gka_forward_##family##_d128_knobs, gka_backward_##family##_d128_knobs},\
            {0, gka_forward_##family##_any, gka_backward_##family##_any,            \
             gka_forward_##family##_any_knobs, gka_backward_##family##_any_knobs},  \
        }                                                                           \
    }

const CpuFamily families[] = {
    GKA_FAMILY(avx512, has_avx512_skylake),
    GKA_FAMILY(avx2, has_avx2_fma),
    GKA_FAMILY(generic, has_sse41),
};

}  // namespace

const CpuFamily *cpu_families(int *count) {
    *count = sizeof(families) / sizeof(families[0]);
    return families;
}

const CpuFamily *find_cpu_family(const char *name) {
    for (const CpuFamily &f : families) {
        if (std::strcmp(f.name, name) == 0) return &f;
    }
    return nullptr;
}

}  // namespace gka
