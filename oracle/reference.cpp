#include "reference.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <random>
#include <stdexcept>

namespace gka_ref {

Problem make_problem(gka_shape shape, gka_window window, std::vector<float> sigma, double spread, uint64_t seed) {
    Problem p{shape, window, {}, std::move(sigma), {}};
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> normal;
    const int64_t D = shape.head_dim, H = shape.heads;
    std::vector<double> offset(H * D);
    for (int64_t k = 0; k < H * D; k++) offset[k] = 0.5 * normal(rng);
    p.x.resize(p.size());
    p.dy.resize(p.size());
    for (int64_t b = 0; b < shape.batch; b++)
        for (int64_t t = 0; t < shape.seq_len; t++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t d = 0; d < D; d++) {
                    // Per-coordinate spread sigma * spread / sqrt(D): |x_i - x_j|^2 / (2 sigma^2) ~ spread^2.
                    double scale = p.sigma[h] * spread / std::sqrt(double(D));
                    p.x[p.at(b, t, h) + d] = float(scale * (normal(rng) + offset[h * D + d]));
                    p.dy[p.at(b, t, h) + d] = float(normal(rng));
                }
    return p;
}

double contract_weight(double exact) { return exact < FLT_MIN ? 0.0 : exact; }

KernelTerms kernel_terms(const std::string &kernel, double d2, double sigma) {
    const double var = sigma * sigma;
    if (kernel == "gaussian") return {-d2 / (2 * var), 1 / var, d2 / (var * sigma)};
    if (kernel == "laplace") {
        const double r = std::sqrt(d2);
        return {-r / sigma, d2 > 0 ? 1 / (sigma * r) : 0.0, r / var};
    }
    if (kernel == "cauchy") return {-std::log1p(d2 / var), 2 / (var + d2), 2 * d2 / (sigma * (var + d2))};
    throw std::invalid_argument("gka_ref: unknown kernel '" + kernel + "'");
}

namespace {

// Everything the loops share, in double: features, squared norms, scores.
struct Pairs {
    const Problem &p;
    std::vector<double> x, sigma;
    int64_t D;

    Pairs(const Problem &p, std::vector<double> x, std::vector<double> sigma)
        : p(p), x(std::move(x)), sigma(std::move(sigma)), D(p.shape.head_dim) {}

    const double *feat(int64_t b, int64_t t, int64_t h) const { return &x[p.at(b, t, h)]; }
    KernelTerms terms(int64_t b, int64_t h, int64_t i, int64_t j) const {
        const double *xi = feat(b, i, h), *xj = feat(b, j, h);
        double sq = 0;
        for (int64_t d = 0; d < D; d++) sq += (xi[d] - xj[d]) * (xi[d] - xj[d]);
        return kernel_terms(p.kernel, sq, sigma[h]);
    }
    double score(int64_t b, int64_t h, int64_t i, int64_t j) const { return terms(b, h, i, j).score; }
};

std::vector<double> widen(const std::vector<float> &v) { return std::vector<double>(v.begin(), v.end()); }

Forward forward_in_double(const Problem &p, const Pairs &pairs) {
    const int64_t B = p.shape.batch, T = p.shape.seq_len, H = p.shape.heads, D = p.shape.head_dim;
    Forward f{std::vector<double>(p.size()), std::vector<double>(p.rows())};
    std::vector<double> w(T);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < T; i++) {
                double sum = 0;
                for (int64_t j = 0; j < T; j++) {
                    if (!p.allowed(i, j)) continue;
                    w[j] = contract_weight(std::exp(pairs.score(b, h, i, j)));
                    sum += w[j];
                }
                double *y = &f.y[p.at(b, i, h)];
                for (int64_t j = 0; j < T; j++) {
                    if (!p.allowed(i, j)) continue;
                    const double *xj = pairs.feat(b, j, h);
                    for (int64_t d = 0; d < D; d++) y[d] += w[j] / sum * xj[d];
                }
                f.lse[p.row(b, h, i)] = std::log(sum);
            }
    return f;
}

}  // namespace

Forward forward(const Problem &p) { return forward_in_double(p, Pairs(p, widen(p.x), widen(p.sigma))); }

Backward backward(const Problem &p, const Forward &f) {
    const int64_t B = p.shape.batch, T = p.shape.seq_len, H = p.shape.heads, D = p.shape.head_dim;
    const Pairs pairs(p, widen(p.x), widen(p.sigma));
    Backward g{std::vector<double>(p.size()), std::vector<double>(H), std::vector<double>(p.size()),
               std::vector<double>(H)};
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            for (int64_t i = 0; i < T; i++) {
                const double *xi = pairs.feat(b, i, h), *yi = &f.y[p.at(b, i, h)];
                const float *dyi = &p.dy[p.at(b, i, h)];
                double Dl = 0;
                for (int64_t d = 0; d < D; d++) Dl += dyi[d] * yi[d];
                for (int64_t j = 0; j < T; j++) {
                    if (!p.allowed(i, j)) continue;
                    const double *xj = pairs.feat(b, j, h);
                    const KernelTerms k = pairs.terms(b, h, i, j);
                    const double P = contract_weight(std::exp(k.score - f.lse[p.row(b, h, i)]));
                    // dP - Dl = dy_i . (x_j - y_i): its terms' magnitude, translation invariant.
                    double dP = 0, dS_terms = 0;
                    for (int64_t d = 0; d < D; d++) dP += dyi[d] * xj[d], dS_terms += std::abs(dyi[d] * (xj[d] - yi[d]));
                    const double dS = P * (dP - Dl), dS_mag = P * dS_terms;
                    double *dxi = &g.dx[p.at(b, i, h)], *dxj = &g.dx[p.at(b, j, h)];
                    double *mi = &g.dx_magnitude[p.at(b, i, h)], *mj = &g.dx_magnitude[p.at(b, j, h)];
                    for (int64_t d = 0; d < D; d++) {
                        const double diff = xj[d] - xi[d];
                        dxi[d] += k.pull * dS * diff;                // query path
                        dxj[d] += -k.pull * dS * diff + P * dyi[d];  // key and value paths
                        const double m = k.pull * dS_mag * std::abs(diff);
                        mi[d] += m;
                        mj[d] += m + std::abs(P * dyi[d]);
                    }
                    g.dsigma[h] += dS * k.dscore_dsigma;
                    g.dsigma_magnitude[h] += dS_mag * std::abs(k.dscore_dsigma);
                }
            }
        }
    return g;
}

int64_t allowed_pairs(gka_shape s, gka_window w) {
    int64_t pairs = 0;
    for (int64_t i = 0; i < s.seq_len; i++) {
        const int64_t lo = w.left < 0 ? 0 : std::max<int64_t>(0, i - w.left);
        const int64_t hi = w.right < 0 ? s.seq_len - 1 : std::min<int64_t>(s.seq_len - 1, i + w.right);
        pairs += hi - lo + 1;
    }
    return pairs * s.batch * s.heads;
}

double loss(const Problem &p, const std::vector<double> &x, const std::vector<double> &sigma) {
    Forward f = forward_in_double(p, Pairs(p, x, sigma));
    double l = 0;
    for (int64_t k = 0; k < p.size(); k++) l += p.dy[k] * f.y[k];
    return l;
}

}  // namespace gka_ref
