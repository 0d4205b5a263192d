// Runs libgka on a reference Problem and compares with the double reference.
//
// Tolerances. The kernels score pairs by |x_i|^2 + |x_j|^2 - 2 x_i.x_j in float
// (GKA.md), so a score's rounding error grows with the squared norms relative to
// sigma^2, not with the distance: row i's scores are good to about
// eps * sqrt(D) * score_scale_i, where score_scale_i = max_j (|x_i|^2 + |x_j|^2) / (2 sigma^2).
// Each y_i, lse_i may carry 4 times that relative error plus 4e-6 for float sums
// over up to T terms; dx and dsigma, sums of products of such terms, the largest
// row's. Relative errors are taken against the sum of the terms' absolute values,
// so an exact zero in the reference does not demand an exact zero. Measured
// worst cases sit at about a third of these tolerances (y) or below.
#pragma once

#include <string>
#include <vector>

#include "reference.h"

namespace gka_test {

struct Outputs {
    std::vector<float> y, lse, dx, dsigma;
};

// Forward then backward (fed the kernel's own y and lse) on the running family.
Outputs run_kernels(const gka_ref::Problem &p);

struct Worst {
    double ratio = 0;  // max |error| / tolerance; <= 1 passes
    std::string where;
};
struct Report {
    Worst y, lse, dx, dsigma;
};

Report compare(const gka_ref::Problem &p, const Outputs &out);
// CHECKs every ratio of `r` <= 1, saying what ran (`what`: the family or device) on which problem.
void check_report(const std::string &what, const gka_ref::Problem &p, const Report &r);
// Runs on the running CPU family, compares, and checks every ratio <= 1.
void check_problem(const gka_ref::Problem &p);

// The CPU families this host can run (each is tested, not only the default).
std::vector<std::string> runnable_families();

}  // namespace gka_test
