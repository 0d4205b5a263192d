// gka_draw_frequencies (gka.h): random-feature GKA's frequencies from a seed.
// The generator is std::mt19937_64, whose sequence the standard fixes, and the
// normal draws are Box-Muller's, computed here: std::normal_distribution's
// algorithm is each library's own, and the draws must not depend on it.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gka/gka.h"
#include "internal.h"

namespace {

class Normal {
public:
    explicit Normal(uint64_t seed) : bits_(seed) {}
    double operator()() {
        if (has_spare_) {
            has_spare_ = false;
            return spare_;
        }
        // u in (0, 1]: 53 random bits, never 0, so the log is finite.
        const double u = (double(bits_() >> 11) + 1.0) * 0x1p-53, v = double(bits_() >> 11) * 0x1p-53;
        const double r = std::sqrt(-2.0 * std::log(u)), angle = 2.0 * M_PI * v;
        spare_ = r * std::sin(angle), has_spare_ = true;
        return r * std::cos(angle);
    }

private:
    std::mt19937_64 bits_;
    double spare_ = 0;
    bool has_spare_ = false;
};

// `rows` (<= d) rows of a block: Gaussian rows made orthonormal (Gram-Schmidt,
// twice for accuracy), each scaled to the norm of a Gaussian vector of its own.
void orthogonal_block(Normal &normal, int64_t rows, int64_t d, float *out) {
    std::vector<double> block(size_t(d * d));
    for (double &v : block) v = normal();
    for (int64_t r = 0; r < d; r++) {
        double *row = &block[size_t(r * d)];
        for (int pass = 0; pass < 2; pass++)
            for (int64_t q = 0; q < r; q++) {
                const double *done = &block[size_t(q * d)];
                double dot = 0;
                for (int64_t k = 0; k < d; k++) dot += row[k] * done[k];
                for (int64_t k = 0; k < d; k++) row[k] -= dot * done[k];
            }
        double norm = 0;
        for (int64_t k = 0; k < d; k++) norm += row[k] * row[k];
        for (int64_t k = 0; k < d; k++) row[k] /= std::sqrt(norm);
    }
    for (int64_t r = 0; r < rows; r++) {
        double chi = 0;
        for (int64_t k = 0; k < d; k++) chi += std::pow(normal(), 2);
        for (int64_t k = 0; k < d; k++) out[r * d + k] = float(block[size_t(r * d + k)] * std::sqrt(chi));
    }
}

}  // namespace

extern "C" gka_status gka_draw_frequencies(int64_t heads, int64_t features, int64_t head_dim, uint64_t seed,
                                           int orthogonal, float *frequencies) {
    using gka::internal::fail;
    gka::internal::clear_error();
    if (heads < 0 || features < 0 || head_dim < 0) {
        return fail(GKA_ERR_INVALID_ARGUMENT, "gka_draw_frequencies: heads, features and head_dim must be >= 0");
    }
    if (orthogonal != 0 && orthogonal != 1) {
        return fail(GKA_ERR_INVALID_ARGUMENT, "gka_draw_frequencies: orthogonal must be 0 or 1, got " +
                                                  std::to_string(orthogonal));
    }
    const __int128 count = __int128(heads) * features * head_dim;
    if (count > INT32_MAX) {
        return fail(GKA_ERR_UNSUPPORTED, "gka_draw_frequencies: at most 2^31 - 1 frequencies, as the kernels take");
    }
    if (count > 0 && frequencies == nullptr) {
        return fail(GKA_ERR_INVALID_ARGUMENT, "gka_draw_frequencies: frequencies is NULL");
    }
    if (count == 0) return GKA_OK;
    Normal normal(seed);
    for (int64_t h = 0; h < heads; h++) {
        float *w = frequencies + h * features * head_dim;
        for (int64_t m = 0; m < features; m += orthogonal ? head_dim : features) {
            if (orthogonal) {
                orthogonal_block(normal, std::min(head_dim, features - m), head_dim, w + m * head_dim);
            } else {
                for (int64_t k = 0; k < features * head_dim; k++) w[k] = float(normal());
            }
        }
    }
    return GKA_OK;
}
