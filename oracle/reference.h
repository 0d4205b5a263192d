// Double-precision reference loops written from docs/spec.md, the yardstick of every
// kernel test. Each result comes with its magnitude: the same sum taken over the
// absolute values of its terms, so that tolerances scale with what was summed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gka/gka.h"

namespace gka_ref {

struct Problem {
    gka_shape shape;
    gka_window window;
    std::vector<float> x, sigma, dy;
    std::string kernel = "gaussian";  // the kernel function (gka_set_kernel's names)

    int64_t size() const { return shape.batch * shape.seq_len * shape.heads * shape.head_dim; }
    int64_t rows() const { return shape.batch * shape.heads * shape.seq_len; }
    // Index of x[b][t][h][0] and of lse[b][h][t].
    int64_t at(int64_t b, int64_t t, int64_t h) const {
        return ((b * shape.seq_len + t) * shape.heads + h) * shape.head_dim;
    }
    int64_t row(int64_t b, int64_t h, int64_t t) const { return (b * shape.heads + h) * shape.seq_len + t; }
    bool allowed(int64_t i, int64_t j) const {
        return (window.left < 0 || j >= i - window.left) && (window.right < 0 || j <= i + window.right);
    }
};

// Random features whose typical score is about -spread^2: spread 0.3 gives
// near-uniform attention, spread 4 near one-hot. A shared offset makes |x|^2
// larger than the distances, as in real features. Seeded: reproducible.
Problem make_problem(gka_shape shape, gka_window window, std::vector<float> sigma, double spread, uint64_t seed);

struct Forward {
    std::vector<double> y, lse;
};
struct Backward {
    std::vector<double> dx, dsigma;
    std::vector<double> dx_magnitude, dsigma_magnitude;
};

// docs/spec.md's contract: a weight (exp(s_ij) in the forward, P_ij in the
// backward) whose exact value is below fp32's smallest normal is 0. The
// loops apply it (the kernels do), so that a term fp32 cannot hold is judged
// as the nothing it is. Elsewhere they are docs/spec.md's formulas in double.
double contract_weight(double exact);

Forward forward(const Problem &p);
// Takes y and lse from `f`: the reference forward's, or a kernel's (as a
// trainer passes them). Magnitudes (docs/spec.md's accuracy contract): each dx
// element's is the sum over its pairs of |query term| + |key term| + |value
// term|, with |dS_ij| measured as P_ij sum_d |dy_id (x_jd - y_id)| (the terms
// of dP_ij - Dl_i = dy_i . (x_j - y_i)) times the kernel's pull; dsigma's is
// sum |dS_ij| |ds_ij/dsigma|.
Backward backward(const Problem &p, const Forward &f);
// A kernel function's terms at d2 = |x_i - x_j|^2 (docs/spec.md, "Kernels"):
// the score, the pull -2 ds/dd2 (0 at d2 = 0 for the Laplace) and ds/dsigma.
struct KernelTerms {
    double score, pull, dscore_dsigma;
};
KernelTerms kernel_terms(const std::string &kernel, double d2, double sigma);

// Number of allowed (query, key) pairs summed over batch and heads (docs/spec.md's
// "pairs"): forward FLOPs are 4 * D * pairs, backward 10 * D * pairs.
int64_t allowed_pairs(gka_shape shape, gka_window window);

// L = sum dy . y in double, for finite differences of the reference backward.
double loss(const Problem &p, const std::vector<double> &x, const std::vector<double> &sigma);

}  // namespace gka_ref
