#include "check.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace gka_test {

Outputs run_kernels(const gka_ref::Problem &p) {
    Outputs o{std::vector<float>(p.size()), std::vector<float>(p.rows()), std::vector<float>(p.size()),
              std::vector<float>(p.shape.heads)};
    gka_status s = gka_forward(p.shape, p.window, p.x.data(), p.sigma.data(), o.y.data(), o.lse.data());
    INFO(gka_last_error());
    REQUIRE(s == GKA_OK);
    s = gka_backward(p.shape, p.window, p.x.data(), p.sigma.data(), o.y.data(), o.lse.data(), p.dy.data(),
                     o.dx.data(), o.dsigma.data());
    INFO(gka_last_error());
    REQUIRE(s == GKA_OK);
    return o;
}

namespace {

void note(Worst &w, double error, double tolerance, const std::string &where) {
    double ratio = std::isnan(error) ? INFINITY : error / tolerance;
    if (ratio > w.ratio || w.where.empty()) w = {ratio, where};
}

std::string position(const char *name, int64_t b, int64_t t, int64_t h, int64_t d = -1) {
    std::ostringstream s;
    s << name << "[b=" << b << "][t=" << t << "][h=" << h << "]";
    if (d >= 0) s << "[d=" << d << "]";
    return s.str();
}

}  // namespace

namespace contract {
constexpr double y = 2e-4, lse = 2e-4, gradient = 2e-3, least_magnitude = 1e-30;
}

Report compare(const gka_ref::Problem &p, const Outputs &out) {
    const gka_ref::Forward f = gka_ref::forward(p);
    const gka_ref::Forward kernel_forward{std::vector<double>(out.y.begin(), out.y.end()),
                                          std::vector<double>(out.lse.begin(), out.lse.end())};
    const gka_ref::Backward g = gka_ref::backward(p, kernel_forward);
    const int64_t B = p.shape.batch, T = p.shape.seq_len, H = p.shape.heads, D = p.shape.head_dim;
    auto bound = [](double relative, double magnitude) {
        return relative * std::max(magnitude, contract::least_magnitude);
    };
    Report r;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t t = 0; t < T; t++) {
                const int64_t row = p.row(b, h, t);
                note(r.lse, std::abs(out.lse[row] - f.lse[row]), contract::lse, position("lse", b, t, h));
                // |y - y_ref| <= 2e-4 * sum_j P_ij |x_j|, the sum of the terms' absolute values.
                std::vector<double> magnitude(D);
                for (int64_t j = 0; j < T; j++) {
                    if (!p.allowed(t, j)) continue;
                    double sq = 0;
                    for (int64_t d = 0; d < D; d++) {
                        double diff = double(p.x[p.at(b, t, h) + d]) - p.x[p.at(b, j, h) + d];
                        sq += diff * diff;
                    }
                    const double w = std::exp(-sq / (2.0 * p.sigma[h] * p.sigma[h]) - f.lse[row]);
                    for (int64_t d = 0; d < D; d++) magnitude[d] += w * std::abs(p.x[p.at(b, j, h) + d]);
                }
                for (int64_t d = 0; d < D; d++) {
                    const int64_t k = p.at(b, t, h) + d;
                    note(r.y, std::abs(out.y[k] - f.y[k]), bound(contract::y, magnitude[d]),
                         position("y", b, t, h, d));
                }
            }
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t d = 0; d < D; d++) {
                    const int64_t k = p.at(b, t, h) + d;
                    note(r.dx, std::abs(out.dx[k] - g.dx[k]), bound(contract::gradient, g.dx_magnitude[k]),
                         position("dx", b, t, h, d));
                }
    for (int64_t h = 0; h < H; h++) {
        std::ostringstream where;
        where << "dsigma[" << h << "] (kernel " << out.dsigma[h] << ", reference " << g.dsigma[h] << ", magnitude "
              << g.dsigma_magnitude[h] << ")";
        note(r.dsigma, std::abs(out.dsigma[h] - g.dsigma[h]), bound(contract::gradient, g.dsigma_magnitude[h]),
             where.str());
    }
    return r;
}

void check_report(const std::string &what, const gka_ref::Problem &p, const Report &r) {
    INFO(what << ", shape B=" << p.shape.batch << " T=" << p.shape.seq_len << " H=" << p.shape.heads
              << " D=" << p.shape.head_dim << ", window (" << p.window.left << ", " << p.window.right << ")");
    INFO("worst error / tolerance: y " << r.y.ratio << " at " << r.y.where << "; lse " << r.lse.ratio << " at "
                                       << r.lse.where << "; dx " << r.dx.ratio << " at " << r.dx.where
                                       << "; dsigma " << r.dsigma.ratio << " at " << r.dsigma.where);
    CHECK(r.y.ratio <= 1.0);
    CHECK(r.lse.ratio <= 1.0);
    CHECK(r.dx.ratio <= 1.0);
    CHECK(r.dsigma.ratio <= 1.0);
}

void check_problem(const gka_ref::Problem &p) {
    const Outputs out = run_kernels(p);
    const std::string forward_kernel = gka_last_kernel();  // (the backward ran last)
    check_report(std::string("family ") + gka_cpu_family() + ", last kernel " + forward_kernel, p, compare(p, out));
}

std::vector<std::string> runnable_families() {
    std::vector<std::string> families;
    for (const char *f : {"avx512", "avx2", "generic"}) {
        if (gka_cpu_family_supported(f)) {
            families.push_back(f);
        } else {
            WARN("SKIP family " << f << ": this host's CPU cannot run it");
        }
    }
    return families;
}

void for_each_family_and_form(const std::function<void()> &body) {
    for (const std::string &family : runnable_families()) {
        for (const char *form : {"auto", "direct"}) {
            INFO("family " << family << ", score form " << form);
            REQUIRE(gka_set_cpu_family(family.c_str()) == GKA_OK);
            REQUIRE(gka_set_score_form(form) == GKA_OK);
            body();
        }
    }
    REQUIRE(gka_set_cpu_family(nullptr) == GKA_OK);
    REQUIRE(gka_set_score_form(nullptr) == GKA_OK);
}

void skip(const std::string &reason) {
    if (const char *code = std::getenv("GKA_SKIP_EXIT")) {
        std::printf("SKIP: %s\n", reason.c_str());
        std::fflush(stdout);
        std::_Exit(std::atoi(code));
    }
    WARN("SKIP: " << reason);
}

}  // namespace gka_test
