#include "contract.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace gka_test {

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

constexpr double least_magnitude = 1e-30;

Report compare(const gka_ref::Problem &p, const Outputs &out, Tokens judged, Bounds contract,
               const Outputs *against) {
    const gka_ref::Forward f = gka_ref::forward(p);
    const gka_ref::Forward kernel_forward{std::vector<double>(out.y.begin(), out.y.end()),
                                          std::vector<double>(out.lse.begin(), out.lse.end())};
    const bool backward_ran = !out.dx.empty();
    const gka_ref::Backward g = backward_ran ? gka_ref::backward(p, kernel_forward) : gka_ref::Backward{};
    // What out is judged against: the reference, or `against`.
    const auto y_ref = [&](int64_t k) { return against ? double(against->y[k]) : f.y[k]; };
    const auto lse_ref = [&](int64_t row) { return against ? double(against->lse[row]) : f.lse[row]; };
    const auto dx_ref = [&](int64_t k) { return against ? double(against->dx[k]) : g.dx[k]; };
    const auto dsigma_ref = [&](int64_t h) { return against ? double(against->dsigma[h]) : g.dsigma[h]; };
    const int64_t B = p.shape.batch, T = p.shape.seq_len, H = p.shape.heads, D = p.shape.head_dim;
    auto bound = [](double relative, double magnitude) {
        return relative * std::max(magnitude, least_magnitude);
    };
    Report r;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t t = judged.begin; t < std::min(T, judged.end); t++) {
                const int64_t row = p.row(b, h, t);
                note(r.lse, std::abs(out.lse[row] - lse_ref(row)), contract.lse, position("lse", b, t, h));
                // |y - y_ref| <= 2e-4 * sum_j P_ij |x_j|, the sum of the terms' absolute values.
                std::vector<double> magnitude(D);
                for (int64_t j = 0; j < T; j++) {
                    if (!p.allowed(t, j)) continue;
                    double sq = 0;
                    for (int64_t d = 0; d < D; d++) {
                        double diff = double(p.x[p.at(b, t, h) + d]) - p.x[p.at(b, j, h) + d];
                        sq += diff * diff;
                    }
                    const double w = std::exp(gka_ref::kernel_terms(p.kernel, sq, p.sigma[h]).score - f.lse[row]);
                    for (int64_t d = 0; d < D; d++) magnitude[d] += w * std::abs(p.x[p.at(b, j, h) + d]);
                }
                for (int64_t d = 0; d < D; d++) {
                    const int64_t k = p.at(b, t, h) + d;
                    note(r.y, std::abs(out.y[k] - y_ref(k)), bound(contract.y, magnitude[d]),
                         position("y", b, t, h, d));
                }
            }
    if (!backward_ran) return r;
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = judged.begin; t < std::min(T, judged.end); t++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t d = 0; d < D; d++) {
                    const int64_t k = p.at(b, t, h) + d;
                    note(r.dx, std::abs(out.dx[k] - dx_ref(k)), bound(contract.gradient, g.dx_magnitude[k]),
                         position("dx", b, t, h, d));
                }
    if (judged.begin > 0 || judged.end < T) return r;
    for (int64_t h = 0; h < H; h++) {
        std::ostringstream where;
        where << "dsigma[" << h << "] (kernel " << out.dsigma[h] << ", reference " << dsigma_ref(h) << ", magnitude "
              << g.dsigma_magnitude[h] << ")";
        note(r.dsigma, std::abs(out.dsigma[h] - dsigma_ref(h)), bound(contract.gradient, g.dsigma_magnitude[h]),
             where.str());
    }
    return r;
}

double long_row_error(const gka_ref::Problem &p, const std::vector<float> &y) {
    const int64_t T = p.shape.seq_len, D = p.shape.head_dim;
    double worst = 0;
    for (int64_t i = 0; i < T; i += T / 32 + 1) {
        std::vector<double> w(T), ref(D);
        double sum = 0;
        for (int64_t j = 0; j < T; j++) {
            double sq = 0;
            for (int64_t d = 0; d < D; d++) sq += std::pow(double(p.x[i * D + d]) - p.x[j * D + d], 2);
            sum += w[j] = std::exp(gka_ref::kernel_terms(p.kernel, sq, p.sigma[0]).score);
        }
        for (int64_t j = 0; j < T; j++)
            for (int64_t d = 0; d < D; d++) ref[d] += w[j] / sum * p.x[j * D + d];
        double largest = 0, error = 0;
        for (int64_t d = 0; d < D; d++) {
            largest = std::max(largest, std::abs(ref[d]));
            error = std::max(error, std::abs(y[i * D + d] - ref[d]));
        }
        worst = std::max(worst, error / largest);
    }
    return worst;
}

}  // namespace gka_test
