// Which radial kernel weighs a pair: w_ij = exp(s(d2_ij, sigma_h)) with
// d2_ij = |x_i - x_j|^2 (docs/spec.md, "Kernels"). One name per kernel, the
// same from the C ABI (gka_set_kernel) through the CMake variants (FUNCTION,
// GKA_KERNEL_FUNCTIONS, read from this file) and the generators'
// `kernel_function` parameter to the kernels' names (_laplace, _cauchy; the
// Gaussian's have no suffix). Plain C++ with no Halide, so that
// the runtime's dispatch table shares it with the generators; the math of
// each is generators/kernel_terms.h.
#pragma once

namespace gka {

enum class KernelFunction { gaussian, laplace, cauchy };

// The kernels' names, in the enum's order.
inline const char *const kernel_function_names[] = {"gaussian", "laplace", "cauchy"};

}  // namespace gka
