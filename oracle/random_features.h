// Double-precision loops of random-feature GKA (docs/spec.md, "Random-feature
// GKA"), written from the spec pair by pair in O(T^2 M D), and the accuracy
// contract's metric for its kernels. The same feature map as the kernels (the
// frequencies given), so the loops are exact for it: what they judge is the
// kernels' arithmetic, not the estimator (tests/test_random_features.cpp
// measures that against exact GKA).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "contract.h"
#include "reference.h"

namespace gka_ref {

// M features a head, frequencies W [H][M][D].
struct Features {
    int64_t count = 0;
    std::vector<float> frequencies;
};

// Standard normal frequencies (GKA's estimator: w ~ N(0, I)), seeded.
Features normal_features(gka_shape shape, int64_t count, uint64_t seed);

struct FeatureForward {
    std::vector<double> y, lse;  // lse -inf on a row without an estimate
    std::vector<double> y_magnitude;  // sum_j P_ij |x_jd|
};
struct FeatureBackward {
    std::vector<double> dx, dsigma, dfrequencies;
    std::vector<double> dx_magnitude, dsigma_magnitude, dfrequencies_magnitude;
};

// The factors are docs/spec.md's, each below fp32's smallest normal taken as 0
// (as the kernels flush them).
FeatureForward feature_forward(const Problem &p, const Features &f);
// Takes y from the caller (a kernel's fp32 y, as a trainer passes it) for
// dy_i . y_i; the row sums are the loops' own.
FeatureBackward feature_backward(const Problem &p, const Features &f, const std::vector<double> &y);
// L = sum dy . y of the loops' forward in double, for finite differences.
double feature_loss(const Problem &p, const std::vector<double> &x, const std::vector<double> &sigma,
                    const std::vector<double> &frequencies, int64_t count);

}  // namespace gka_ref

namespace gka_test {

struct FeatureOutputs {
    std::vector<float> y, lse, dx, dsigma, dfrequencies;  // the gradients empty when only the forward ran
};
struct FeatureReport {
    Worst y, lse, dx, dsigma, dfrequencies;
    bool holds() const {
        return y.ratio <= 1 && lse.ratio <= 1 && dx.ratio <= 1 && dsigma.ratio <= 1 && dfrequencies.ratio <= 1;
    }
};
// The contract's metric (float32_bounds): y, lse as exact GKA's; dx, dsigma and
// dW against the magnitudes of their terms.
FeatureReport compare_features(const gka_ref::Problem &p, const gka_ref::Features &f, const FeatureOutputs &out);

}  // namespace gka_test
