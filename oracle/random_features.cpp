#include "random_features.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>

namespace gka_ref {

Features normal_features(gka_shape shape, int64_t count, uint64_t seed) {
    Features f{count, std::vector<float>(shape.heads * count * shape.head_dim)};
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> normal;
    for (float &w : f.frequencies) w = float(normal(rng));
    return f;
}

namespace {

std::vector<double> widen(const std::vector<float> &v) { return std::vector<double>(v.begin(), v.end()); }

// One (batch entry, head)'s factors (docs/spec.md): u = x / sigma, the
// exponents' parts, rho and kappa, and the pairs' products rho_i . kappa_j.
struct Head {
    int64_t T, M, D;
    // u (t, d); projection, rho, kappa (t, m); norm and the query exponents' shift (t)
    std::vector<double> u, projection, norm, shift, rho, kappa;

    Head(const Problem &p, const std::vector<double> &x, double sigma, const double *w, int64_t M, int64_t b,
         int64_t h)
        : T(p.shape.seq_len), M(M), D(p.shape.head_dim), u(T * D), projection(T * M), norm(T),
          shift(T, -INFINITY), rho(T * M), kappa(T * M) {
        for (int64_t t = 0; t < T; t++) {
            for (int64_t d = 0; d < D; d++) {
                u[t * D + d] = x[p.at(b, t, h) + d] / sigma;
                norm[t] += u[t * D + d] * u[t * D + d];
            }
            std::vector<double> query(M);
            for (int64_t m = 0; m < M; m++) {
                double dot = 0, quarter = 0;
                for (int64_t d = 0; d < D; d++) {
                    dot += w[m * D + d] * u[t * D + d];
                    quarter += w[m * D + d] * w[m * D + d] / 4;
                }
                projection[t * M + m] = dot;
                query[m] = dot - norm[t] + quarter;
                kappa[t * M + m] = contract_weight(std::exp(dot - norm[t] - quarter));
                shift[t] = std::max(shift[t], query[m]);
            }
            for (int64_t m = 0; m < M; m++) rho[t * M + m] = contract_weight(std::exp(query[m] - shift[t]));
        }
    }
    double product(int64_t i, int64_t j) const {
        double s = 0;
        for (int64_t m = 0; m < M; m++) s += rho[i * M + m] * kappa[j * M + m];
        return s;
    }
};

FeatureForward forward_in_double(const Problem &p, const std::vector<double> &x, const std::vector<double> &sigma,
                                 const std::vector<double> &w, int64_t M) {
    const int64_t B = p.shape.batch, T = p.shape.seq_len, H = p.shape.heads, D = p.shape.head_dim;
    FeatureForward f{std::vector<double>(p.size()), std::vector<double>(p.rows()), std::vector<double>(p.size())};
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            const double *wh = &w[h * M * D];
            const Head head(p, x, sigma[h], wh, M, b, h);
            for (int64_t i = 0; i < T; i++) {
                std::vector<double> k(T);
                double sum = 0;
                for (int64_t j = 0; j < T; j++)
                    if (p.allowed(i, j)) sum += k[j] = head.product(i, j);
                double *y = &f.y[p.at(b, i, h)], *mag = &f.y_magnitude[p.at(b, i, h)];
                if (sum == 0) {  // no estimate: y = x, lse = -inf
                    for (int64_t d = 0; d < D; d++) y[d] = x[p.at(b, i, h) + d], mag[d] = std::abs(y[d]);
                    f.lse[p.row(b, h, i)] = -INFINITY;
                    continue;
                }
                for (int64_t j = 0; j < T; j++) {
                    if (!p.allowed(i, j)) continue;
                    for (int64_t d = 0; d < D; d++) {
                        y[d] += k[j] / sum * x[p.at(b, j, h) + d];
                        mag[d] += k[j] / sum * std::abs(x[p.at(b, j, h) + d]);
                    }
                }
                f.lse[p.row(b, h, i)] = std::log(sum) + head.shift[i] - std::log(double(M));
            }
        }
    return f;
}

}  // namespace

FeatureForward feature_forward(const Problem &p, const Features &f) {
    return forward_in_double(p, widen(p.x), widen(p.sigma), widen(f.frequencies), f.count);
}

FeatureBackward feature_backward(const Problem &p, const Features &f, const std::vector<double> &y) {
    const int64_t B = p.shape.batch, T = p.shape.seq_len, H = p.shape.heads, D = p.shape.head_dim, M = f.count;
    const std::vector<double> x = widen(p.x), w = widen(f.frequencies);
    FeatureBackward g{std::vector<double>(p.size()),  std::vector<double>(H), std::vector<double>(H * M * D),
                      std::vector<double>(p.size()), std::vector<double>(H), std::vector<double>(H * M * D)};
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            const double *wh = &w[h * M * D];
            const double sigma = p.sigma[h];
            const Head head(p, x, sigma, wh, M, b, h);
            // G_ij = dy_i . (x_j - y_i) / rowsum_i, and its terms' magnitude.
            std::vector<double> G(T * T), G_mag(T * T), row_sum(T), k(T);
            for (int64_t i = 0; i < T; i++) {
                for (int64_t j = 0; j < T; j++)
                    if (p.allowed(i, j)) row_sum[i] += k[j] = head.product(i, j);
                const float *dyi = &p.dy[p.at(b, i, h)];
                const double *yi = &y[p.at(b, i, h)];
                if (row_sum[i] == 0) {  // y = x passes dy through
                    for (int64_t d = 0; d < D; d++) {
                        g.dx[p.at(b, i, h) + d] += dyi[d];
                        g.dx_magnitude[p.at(b, i, h) + d] += std::abs(dyi[d]);
                    }
                    continue;
                }
                for (int64_t j = 0; j < T; j++) {
                    if (!p.allowed(i, j)) continue;
                    const double *xj = &x[p.at(b, j, h)];
                    double dot = 0, mag = 0;
                    for (int64_t d = 0; d < D; d++) {
                        dot += dyi[d] * (xj[d] - yi[d]);
                        mag += std::abs(dyi[d]) * (std::abs(xj[d]) + std::abs(yi[d]));
                    }
                    G[i * T + j] = dot / row_sum[i];
                    G_mag[i * T + j] = mag / row_sum[i];
                    // The value path: P_ij dy_i into dx_j.
                    const double P = k[j] / row_sum[i];
                    for (int64_t d = 0; d < D; d++) {
                        g.dx[p.at(b, j, h) + d] += P * dyi[d];
                        g.dx_magnitude[p.at(b, j, h) + d] += P * std::abs(dyi[d]);
                    }
                }
            }
            // Each token's exponents' gradient, as a query and as a key, then
            // through d(w_m . u - |u|^2) to x, W and sigma.
            for (int64_t t = 0; t < T; t++) {
                const double *u = &head.u[t * D];
                double *dx = &g.dx[p.at(b, t, h)], *dx_mag = &g.dx_magnitude[p.at(b, t, h)];
                for (int64_t m = 0; m < M; m++) {
                    double e = 0, e_mag = 0;
                    for (int64_t j = 0; j < T; j++) {
                        e += head.rho[t * M + m] * G[t * T + j] * head.kappa[j * M + m];
                        e_mag += head.rho[t * M + m] * G_mag[t * T + j] * head.kappa[j * M + m];
                        e += head.kappa[t * M + m] * G[j * T + t] * head.rho[j * M + m];
                        e_mag += head.kappa[t * M + m] * G_mag[j * T + t] * head.rho[j * M + m];
                    }
                    const double *wm = wh + m * D;
                    double wu = 0;
                    for (int64_t d = 0; d < D; d++) {
                        dx[d] += e * (wm[d] - 2 * u[d]) / sigma;
                        dx_mag[d] += e_mag * (std::abs(wm[d]) + 2 * std::abs(u[d])) / sigma;
                        g.dfrequencies[(h * M + m) * D + d] += e * u[d];
                        g.dfrequencies_magnitude[(h * M + m) * D + d] += e_mag * std::abs(u[d]);
                        wu += std::abs(wm[d] * u[d]);
                    }
                    g.dsigma[h] += -e * (head.projection[t * M + m] - 2 * head.norm[t]) / sigma;
                    g.dsigma_magnitude[h] += e_mag * (wu + 2 * head.norm[t]) / sigma;
                }
            }
        }
    return g;
}

double feature_loss(const Problem &p, const std::vector<double> &x, const std::vector<double> &sigma,
                    const std::vector<double> &frequencies, int64_t count) {
    const FeatureForward f = forward_in_double(p, x, sigma, frequencies, count);
    double l = 0;
    for (int64_t k = 0; k < p.size(); k++) l += p.dy[k] * f.y[k];
    return l;
}

}  // namespace gka_ref

namespace gka_test {

namespace {

void note(Worst &w, double error, double tolerance, const std::string &where) {
    const double ratio = std::isnan(error) ? INFINITY : error / tolerance;
    if (ratio > w.ratio || w.where.empty()) w = {ratio, where};
}

std::string position(const char *name, int64_t a, int64_t b, int64_t c) {
    std::ostringstream s;
    s << name << "[" << a << "][" << b << "][" << c << "]";
    return s.str();
}

double bounded(double relative, double magnitude) { return relative * std::max(magnitude, 1e-30); }

}  // namespace

FeatureReport compare_features(const gka_ref::Problem &p, const gka_ref::Features &f, const FeatureOutputs &out) {
    const gka_ref::FeatureForward ref = gka_ref::feature_forward(p, f);
    const int64_t B = p.shape.batch, T = p.shape.seq_len, H = p.shape.heads, D = p.shape.head_dim, M = f.count;
    const Bounds bounds = float32_bounds;
    FeatureReport r;
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t h = 0; h < H; h++) {
                const int64_t row = p.row(b, h, t);
                const double lse = out.lse[row], lse_ref = ref.lse[row];
                note(r.lse, std::isinf(lse_ref) && lse == lse_ref ? 0.0 : std::abs(lse - lse_ref), bounds.lse,
                     position("lse", b, h, t));
                for (int64_t d = 0; d < D; d++) {
                    const int64_t k = p.at(b, t, h) + d;
                    note(r.y, std::abs(out.y[k] - ref.y[k]), bounded(bounds.y, ref.y_magnitude[k]),
                         position("y", b, t, h) + "[" + std::to_string(d) + "]");
                }
            }
    if (out.dx.empty()) return r;
    const gka_ref::FeatureBackward g =
        gka_ref::feature_backward(p, f, std::vector<double>(out.y.begin(), out.y.end()));
    for (int64_t k = 0; k < p.size(); k++) {
        note(r.dx, std::abs(out.dx[k] - g.dx[k]), bounded(bounds.gradient, g.dx_magnitude[k]),
             "dx at element " + std::to_string(k));
    }
    for (int64_t k = 0; k < H * M * D; k++) {
        note(r.dfrequencies, std::abs(out.dfrequencies[k] - g.dfrequencies[k]),
             bounded(bounds.gradient, g.dfrequencies_magnitude[k]), "dW at element " + std::to_string(k));
    }
    for (int64_t h = 0; h < H; h++) {
        note(r.dsigma, std::abs(out.dsigma[h] - g.dsigma[h]), bounded(bounds.gradient, g.dsigma_magnitude[h]),
             "dsigma[" + std::to_string(h) + "]");
    }
    return r;
}

}  // namespace gka_test
