#include "random_problem.h"

#include <random>
#include <set>
#include <string>

namespace gka_test {

gka_ref::Problem gaussian_problem(gka_shape shape, gka_window window, std::vector<float> sigma, double scale,
                                  double offset, uint64_t seed) {
    gka_ref::Problem p{shape, window, {}, std::move(sigma), {}};
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> normal;
    p.x.resize(p.size());
    p.dy.resize(p.size());
    for (float &v : p.x) v = float(offset + scale * normal(rng));
    for (float &v : p.dy) v = float(normal(rng));
    return p;
}

RandomProblem random_problem(Draws &draw) {
    const gka_shape shape{draw.uniform(1, 2), draw.uniform(1, 90), draw.uniform(1, 3),
                          draw.uniform(0, 3) ? draw.uniform(1, 20) : 64};
    const int64_t spans[] = {-1, 0, 1, 3, 17, 200};
    const gka_window window{spans[draw.uniform(0, 5)], spans[draw.uniform(0, 5)]};
    const double scale = draw.log_uniform(1e-3, 1e3);
    const double offset = scale * (draw.uniform(0, 1) ? draw.log_uniform(1e-2, 100) : 0.0);
    std::vector<float> sigma(shape.heads);
    for (float &s : sigma) s = float(scale * std::sqrt(double(shape.head_dim)) * draw.log_uniform(1e-3, 1e2));
    gka_ref::Problem p = gaussian_problem(shape, window, sigma, scale, offset, draw.bits());
    p.kernel = draw.kernel_function();
    const int64_t row = shape.heads * shape.head_dim;
    const bool repeats = draw.uniform(0, 2) == 0;
    if (repeats) {
        for (int64_t b = 0; b < shape.batch; b++)
            for (int64_t t = 1; t < shape.seq_len; t++) {
                if (draw.uniform(0, 2) == 0) continue;
                const int64_t from = draw.uniform(0, t - 1);
                const float hair = draw.uniform(0, 1) ? 0.0f : float(draw.log_uniform(1e-7, 1e-3));
                for (int64_t k = 0; k < row; k++) {
                    const float v = p.x[(b * shape.seq_len + from) * row + k];
                    p.x[(b * shape.seq_len + t) * row + k] = v + hair * (v + float(scale));
                }
            }
    }
    return {std::move(p), repeats};
}

bool has_repeated_tokens(const gka_ref::Problem &p) {
    const gka_shape &s = p.shape;
    for (int64_t b = 0; b < s.batch; b++)
        for (int64_t h = 0; h < s.heads; h++) {
            std::set<std::vector<float>> seen;
            for (int64_t t = 0; t < s.seq_len; t++) {
                const float *row = &p.x[p.at(b, t, h)];
                if (!seen.insert(std::vector<float>(row, row + s.head_dim)).second) return true;
            }
        }
    return false;
}

bool in_known_gap(const RandomProblem &drawn, const char *last_kernel) {
    return drawn.repeats && std::string(last_kernel).find("_direct") == std::string::npos;
}

}  // namespace gka_test
