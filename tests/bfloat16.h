// bfloat16 vectors as libgka takes them (gka_bf16: the upper 16 bits of a
// float32), rounded to nearest even by gka.h's conversions, for the tests.
#pragma once

#include <vector>

#include "gka/gka.h"

namespace gka_test {

inline gka_bf16 to_bf16(float f) { return gka_bf16_from_float(f); }
inline float from_bf16(gka_bf16 b) { return gka_float_from_bf16(b); }

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
