// The kernels GKA's algorithms take (kernel_function.h): each is its score
// s(d2, sigma) <= 0, s(0, sigma) = 0, of the squared distance d2 = |x_i - x_j|^2,
// and the two derivatives the backward needs (docs/spec.md, "Kernels"):
//   pull  = -2 ds/dd2: a pair's dS times pull times (x_j - x_i) is its term
//           of dx_i (the chain rule through d2);
//   ds/dsigma: a pair's dS times it is its term of dsigma_h.
// Every kernel has s(0) = 0 as its largest score: the self pair is each row's
// maximum, and the forward's one pass without a running maximum holds.
// Adding a kernel: a name in kernel_function.h (the build compiles every name
// listed there), a case here, and a case in each reference (oracle/reference.cpp,
// python/gka_torch/reference.py): docs/kernels.md.
#pragma once

#include <stdexcept>

#include "Halide.h"
#include "kernel_function.h"

namespace gka {

// weight: exp(score) in a form of its own where the kernel has an exact one
// cheaper than the exponential of its score (the Cauchy's 1 / (1 + d2 /
// sigma^2): no logarithm and exponential a pair, and fewer live values in the
// backward's pair loops); undefined otherwise.
struct KernelTerms {
    Halide::Expr score, pull, dscore_dsigma, weight;
};

// `d2` >= 0 (the direct form's sum of squared differences). The factors of
// sigma alone are grouped, so that they are computed once a head.
inline KernelTerms kernel_terms(KernelFunction f, const Halide::Expr &d2, const Halide::Expr &sigma) {
    using Halide::Expr;
    switch (f) {
    case KernelFunction::gaussian:
        // s = -d2 / (2 sigma^2), pull 1 / sigma^2, ds/dsigma = -2 s / sigma:
        // written out where the algorithms form the scores (gka_math.h,
        // kernel_scores; gka_backward.h, pair_terms), in the orders its
        // kernels were tuned in.
        break;
    case KernelFunction::laplace: {
        // s = -|x_i - x_j| / sigma. Its pull 1 / (sigma |x_i - x_j|) is
        // unbounded at d2 = 0: there, the self pair and exact duplicates,
        // the subgradient 0 (the pair's term of dx, pull times a zero
        // difference, has no limit as the difference shrinks; its norm is
        // |dS| / sigma).
        const Expr r = Halide::sqrt(d2), inv_sigma = 1.0f / sigma;
        return {-r * inv_sigma, Halide::select(d2 > 0.0f, inv_sigma / r, 0.0f), r * (inv_sigma * inv_sigma)};
    }
    case KernelFunction::cauchy: {
        // s = -log(1 + d2 / sigma^2): weights 1 / (1 + d2 / sigma^2), whose
        // tails never underflow.
        const Expr inv_var = 1.0f / (sigma * sigma), u = d2 * inv_var, inv_one_plus = 1.0f / (1.0f + u);
        return {-Halide::log(1.0f + u), (2.0f * inv_var) * inv_one_plus, (2.0f / sigma) * (u * inv_one_plus),
                inv_one_plus};
    }
    }
    throw std::invalid_argument("gka: kernel_terms serves the kernels other than the Gaussian");
}

}  // namespace gka
