// The reference backward against central finite differences of the reference
// forward's loss L = sum dy . y, all in double.
#include <catch2/catch.hpp>
#include <cmath>

#include "reference.h"

namespace {

void check_against_finite_differences(const gka_ref::Problem &p) {
    const gka_ref::Backward g = gka_ref::backward(p, gka_ref::forward(p));
    std::vector<double> x(p.x.begin(), p.x.end()), sigma(p.sigma.begin(), p.sigma.end());
    // Central differences with step h err by O(h^2) + O(eps / h): h ~ 1e-5 keeps both near 1e-10.
    auto derivative = [&](std::vector<double> &v, size_t k) {
        const double saved = v[k], step = 1e-5 * std::max(1.0, std::abs(saved));
        v[k] = saved + step;
        const double up = gka_ref::loss(p, x, sigma);
        v[k] = saved - step;
        const double down = gka_ref::loss(p, x, sigma);
        v[k] = saved;
        return (up - down) / (2 * step);
    };
    for (size_t k = 0; k < x.size(); k++) {
        INFO("dx[" << k << "]");
        CHECK(g.dx[k] == Approx(derivative(x, k)).margin(1e-7 * (1 + g.dx_magnitude[k])).epsilon(1e-6));
    }
    for (size_t h = 0; h < sigma.size(); h++) {
        INFO("dsigma[" << h << "]");
        CHECK(g.dsigma[h] == Approx(derivative(sigma, h)).margin(1e-7 * (1 + g.dsigma_magnitude[h])).epsilon(1e-6));
    }
}

}  // namespace

TEST_CASE("reference backward matches finite differences", "[reference]") {
    const gka_window windows[] = {{-1, -1}, {-1, 0}, {2, 0}, {1, 3}, {0, 0}};
    for (const char *kernel : {"gaussian", "laplace", "cauchy"}) {
        for (gka_window w : windows) {
            for (double spread : {0.5, 3.0}) {
                INFO(kernel << " kernel, window (" << w.left << ", " << w.right << "), spread " << spread);
                gka_ref::Problem p = gka_ref::make_problem({2, 6, 2, 3}, w, {0.3f, 2.0f}, spread, 5);
                p.kernel = kernel;
                check_against_finite_differences(p);
            }
        }
    }
}

TEST_CASE("reference forward on a case worked by hand", "[reference]") {
    // Two tokens x = 0 and x = 1 (D = 1), sigma = 1, full window: s_01 = -1/2, so
    // P_01 = e^-1/2 / (1 + e^-1/2) and y_0 = P_01, lse_0 = log(1 + e^-1/2).
    gka_ref::Problem p{{1, 2, 1, 1}, {-1, -1}, {0.0f, 1.0f}, {1.0f}, {0.0f, 0.0f}};
    const gka_ref::Forward f = gka_ref::forward(p);
    const double e = std::exp(-0.5);
    CHECK(f.y[0] == Approx(e / (1 + e)).epsilon(1e-15));
    CHECK(f.y[1] == Approx(1 / (1 + e)).epsilon(1e-15));
    CHECK(f.lse[0] == Approx(std::log(1 + e)).epsilon(1e-15));
}

TEST_CASE("reference kernels on a case worked by hand", "[reference]") {
    // x = 0 and x = 2 (D = 1), sigma = 1, full window: d2 = 4, so the other
    // token's weight is e^-2 (Laplace: s = -|2| / 1) and 1/5 (Cauchy:
    // 1 / (1 + 4)); y_0 = w / (1 + w).
    gka_ref::Problem p{{1, 2, 1, 1}, {-1, -1}, {0.0f, 2.0f}, {1.0f}, {0.0f, 0.0f}};
    for (auto [kernel, w] : {std::pair{"laplace", std::exp(-2.0)}, std::pair{"cauchy", 0.2}}) {
        INFO(kernel);
        p.kernel = kernel;
        const gka_ref::Forward f = gka_ref::forward(p);
        CHECK(f.y[0] == Approx(2 * w / (1 + w)).epsilon(1e-15));
        CHECK(f.lse[0] == Approx(std::log(1 + w)).epsilon(1e-15));
    }
}
