// docs/spec.md's accuracy contract as a metric: a kernel's outputs against the
// double reference, the forward against the reference forward, the backward
// against the reference backward fed the kernel's own fp32 y and lse (as a
// trainer passes them). Each error is measured against the magnitude of the
// terms that make its output (reference.h), with the contract's bounds: y
// 2e-4, lse 2e-4 absolute, dx and dsigma 2e-3; a magnitude below 1e-30 counts
// as 1e-30 (bfloat16 features: bfloat16_bounds). Free of Catch2: the test suite (check.h) and the autotuner's
// harness judge by this one metric.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "reference.h"

namespace gka_test {

// A kernel's outputs; dx and dsigma empty when only the forward ran.
struct Outputs {
    std::vector<float> y, lse, dx, dsigma;
};

struct Worst {
    double ratio = 0;  // max |error| / bound; <= 1 passes
    std::string where;
};
struct Report {
    Worst y, lse, dx, dsigma;
    bool holds() const { return y.ratio <= 1 && lse.ratio <= 1 && dx.ratio <= 1 && dsigma.ratio <= 1; }
};

// The tokens whose outputs are judged: all by default. A narrower range (a
// slice of a longer sequence, whose first and last rows miss keys that the
// whole sequence has) leaves dsigma, a sum over every token, unjudged.
struct Tokens {
    int64_t begin = 0, end = INT64_MAX;
};

// The contract's relative bounds (lse's absolute): float32 features', and
// bfloat16 features' (judged against the reference of the same bfloat16
// inputs). The bfloat16 ones are the published contract (docs/spec.md, "Accuracy contract"),
// which leaves room for kernels that multiply in bfloat16; today's round only
// y and dx, once, so test_bf16.cpp also checks them bit for bit against float32
// (on the families without bfloat16 products).
struct Bounds {
    double y, lse, gradient;  // gradient: dx and dsigma
};
constexpr Bounds float32_bounds{2e-4, 2e-4, 2e-3}, bfloat16_bounds{1e-2, 2e-3, 2e-2};

// `against`: judge out's distance from other outputs (another kernel's) instead
// of from the reference, by the same metric (the reference's magnitudes).
Report compare(const gka_ref::Problem &p, const Outputs &out, Tokens judged = {}, Bounds bounds = float32_bounds,
               const Outputs *against = nullptr);

// The contract's bound on long rows: y's error relative to the largest |y| of
// its row, worst over 32 sampled rows, for one head with the full window (the
// double reference of those rows alone, so it stays cheap at T = 16384).
double long_row_error(const gka_ref::Problem &p, const std::vector<float> &y);
constexpr double long_row_bound = 5e-6;

}  // namespace gka_test
