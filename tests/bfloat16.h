// bfloat16 as libgka takes it (gka_bf16: the upper 16 bits of a float32), for
// the tests: rounding to nearest even, as torch and the kernels round.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "gka/gka.h"

namespace gka_test {

inline gka_bf16 to_bf16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return gka_bf16((u >> 16) | 0x40);  // NaN stays NaN
    u += 0x7fffu + ((u >> 16) & 1);
    return gka_bf16(u >> 16);
}

inline float from_bf16(gka_bf16 b) {
    const uint32_t u = uint32_t(b) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

inline std::vector<gka_bf16> to_bf16(const std::vector<float> &v) {
    std::vector<gka_bf16> b(v.size());
    for (size_t k = 0; k < v.size(); k++) b[k] = to_bf16(v[k]);
    return b;
}

inline std::vector<float> from_bf16(const std::vector<gka_bf16> &b) {
    std::vector<float> v(b.size());
    for (size_t k = 0; k < b.size(); k++) v[k] = from_bf16(b[k]);
    return v;
}

// `v` with each value rounded to the nearest bfloat16.
inline std::vector<float> rounded_to_bf16(const std::vector<float> &v) { return from_bf16(to_bf16(v)); }

}  // namespace gka_test
