#include "cpu_families.h"

#include <cstring>

#include "gka_backward_avx2.h"
#include "gka_backward_avx512.h"
#include "gka_backward_generic.h"
#include "gka_forward_avx2.h"
#include "gka_forward_avx512.h"
#include "gka_forward_generic.h"

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

const CpuFamily families[] = {
    {"avx512", has_avx512_skylake, gka_forward_avx512, gka_backward_avx512},
    {"avx2", has_avx2_fma, gka_forward_avx2, gka_backward_avx2},
    {"generic", has_sse41, gka_forward_generic, gka_backward_generic},
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
