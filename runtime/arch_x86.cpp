#include <cpuid.h>
#include <xmmintrin.h>

#include "arch.h"

namespace gka::arch {
namespace {

// MXCSR: round to nearest and every exception masked is 0x1f80; FTZ and DAZ
// flush; the low six bits are the sticky exception flags.
constexpr uint64_t default_mode = 0x1f80, flush_to_zero = 0x8000, denormals_are_zero = 0x0040,
                   exception_flags = 0x003f;

// CPUID's feature bits that __builtin_cpu_supports does not know (clang's
// lacks vaes, both lack sse4a): register `reg` (0 eax .. 3 edx) of leaf
// `leaf`, subleaf `sub`, bit `bit`.
bool cpuid_bit(unsigned leaf, unsigned sub, int reg, int bit) {
    unsigned r[4] = {};
    return __get_cpuid_count(leaf, sub, &r[0], &r[1], &r[2], &r[3]) && (r[reg] >> bit & 1u);
}
constexpr int ecx = 2;

}  // namespace

bool host_has(const std::string &feature) {
    struct Feature {
        const char *name;
        bool present;
    };
    static const Feature features[] = {
        {"sse4_1", bool(__builtin_cpu_supports("sse4.1"))},     {"avx", bool(__builtin_cpu_supports("avx"))},
        {"avx2", bool(__builtin_cpu_supports("avx2"))},         {"fma", bool(__builtin_cpu_supports("fma"))},
        {"avx512f", bool(__builtin_cpu_supports("avx512f"))},   {"avx512vl", bool(__builtin_cpu_supports("avx512vl"))},
        {"avx512bw", bool(__builtin_cpu_supports("avx512bw"))}, {"avx512dq", bool(__builtin_cpu_supports("avx512dq"))},
        {"avx512cd", bool(__builtin_cpu_supports("avx512cd"))},
        {"avx512ifma", bool(__builtin_cpu_supports("avx512ifma"))},
        {"avx512vbmi", bool(__builtin_cpu_supports("avx512vbmi"))},
        {"avx512_vbmi2", bool(__builtin_cpu_supports("avx512vbmi2"))},
        {"avx512_vnni", bool(__builtin_cpu_supports("avx512vnni"))},
        {"avx512_bitalg", bool(__builtin_cpu_supports("avx512bitalg"))},
        {"avx512_bf16", bool(__builtin_cpu_supports("avx512bf16"))},
        {"avx512_vpopcntdq", bool(__builtin_cpu_supports("avx512vpopcntdq"))},
        {"gfni", bool(__builtin_cpu_supports("gfni"))},
        {"vaes", cpuid_bit(7, 0, ecx, 9)},
        {"vpclmulqdq", bool(__builtin_cpu_supports("vpclmulqdq"))},
        {"sse4a", cpuid_bit(0x80000001, 0, ecx, 6)},
    };
    for (const Feature &f : features)
        if (feature == f.name) return f.present;
    return false;
}

uint64_t float_mode() { return _mm_getcsr(); }
void set_float_mode(uint64_t mode) { _mm_setcsr(unsigned(mode)); }
uint64_t kernel_float_mode(uint64_t caller) {
    return default_mode | flush_to_zero | denormals_are_zero | (caller & exception_flags);
}
uint64_t restored_float_mode(uint64_t caller, uint64_t now) {
    return (caller & ~exception_flags) | (now & exception_flags);
}

}  // namespace gka::arch
