// The Halide buffers the host entry points wrap around the caller's tensors
// (gka.h's layouts): features [B][T][H][D], rows (lse) [B][H][T], per-head [H].
#pragma once

#include "HalideBuffer.h"
#include "gka/gka.h"
#include "kernel_variants.h"

namespace gka::internal {

// The feature tensors' element types: float32, and bfloat16 (gka_bf16, its bits).
template <class T>
struct ElementOf;
template <>
struct ElementOf<float> {
    static constexpr Element element = Element::f32;
    static halide_type_t type() { return halide_type_of<float>(); }
    static float value(float v) { return v; }
};
template <>
struct ElementOf<gka_bf16> {
    static constexpr Element element = Element::bf16;
    static halide_type_t type() { return halide_type_t(halide_type_bfloat, 16); }
    static float value(gka_bf16 v) { return gka_float_from_bf16(v); }
};

template <class T>
Halide::Runtime::Buffer<void, 4> features(const T *p, const gka_shape &s) {
    return Halide::Runtime::Buffer<void, 4>(ElementOf<T>::type(), const_cast<T *>(p), int(s.head_dim), int(s.heads),
                                            int(s.seq_len), int(s.batch));
}
inline Halide::Runtime::Buffer<float, 3> rows(const float *p, const gka_shape &s) {
    return Halide::Runtime::Buffer<float, 3>(const_cast<float *>(p), int(s.seq_len), int(s.heads), int(s.batch));
}
inline Halide::Runtime::Buffer<float, 1> per_head(const float *p, const gka_shape &s) {
    return Halide::Runtime::Buffer<float, 1>(const_cast<float *>(p), int(s.heads));
}

// Indices [first, first + count) of a buffer's dimension `dim`, indexed from 0:
// a slice of the heads (the passes that run a few heads at a time), or of the
// tokens (random-feature GKA's segments).
template <class B>
B part_of(const B &buf, int dim, int64_t first, int64_t count) {
    B slice = buf.cropped(dim, int(first), int(count));
    slice.translate(dim, -int(first));
    return slice;
}

}  // namespace gka::internal
