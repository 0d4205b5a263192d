// Denormal floats (below 2^-126) cost x86 cores a microcode assist per
// operation, and GKA makes them from ordinary inputs: under a sharp kernel
// (scores far below -87) a query's far keys get weights near 2^-126, whose
// products with the values, and the sums of those, are denormal. With x of
// scale 1.5 and sigma = 1 (D=64, causal T=2048, AVX-512) the forward took
// 345 ms instead of 17, the backward 167 instead of 45. So libgka runs its CPU
// kernels with flush-to-zero and denormals-are-zero, as TensorFlow runs its
// kernels: such values lie far below what GKA's float sums resolve next to
// the weight 1 of a query's own key.
#pragma once

#include <cstdint>

namespace gka {

// Runs this thread, for its lifetime, in the default float mode (round to
// nearest, exceptions masked) with flush-to-zero and denormals-are-zero, then
// restores the thread's former mode (exception flags raised meanwhile stay
// raised).
class DenormalsFlushed {
public:
    DenormalsFlushed();
    ~DenormalsFlushed();
    DenormalsFlushed(const DenormalsFlushed &) = delete;
    DenormalsFlushed &operator=(const DenormalsFlushed &) = delete;

private:
    uint64_t saved_mode_;
};

// Runs each task of Halide's thread pool under DenormalsFlushed. (Workers
// started inside a flushed call inherit its mode; this does not rely on it.)
void install_denormal_flushing();

}  // namespace gka
