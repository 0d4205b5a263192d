#include "yardsticks.h"

#include <cblas.h>

#include <cmath>
#include <thread>

namespace gka_bench {

void sgemm(int64_t m, int64_t n, int64_t k, const float *a, const float *b, float *c) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(m), int(n), int(k), 1.0f, a, int(k), b, int(n), 0.0f,
                c, int(n));
}

ReadBandwidth::ReadBandwidth(int64_t bytes) : data_(bytes / sizeof(uint64_t)) {
    for (size_t k = 0; k < data_.size(); k++) data_[k] = k * 0x9e3779b97f4a7c15ull;
}

uint64_t ReadBandwidth::run(int threads) const {
    std::vector<uint64_t> sums(threads);
    std::vector<std::thread> workers;
    const size_t slice = data_.size() / threads;
    for (int t = 0; t < threads; t++) {
        workers.emplace_back([&, t] {
            uint64_t sum = 0;  // integer sums vectorize (float ones would keep their order)
            for (size_t k = t * slice; k < (t + 1) * slice; k++) sum += data_[k];
            sums[t] = sum;
        });
    }
    for (std::thread &w : workers) w.join();
    uint64_t total = 0;
    for (uint64_t s : sums) total += s;
    return total;
}

void UnfusedForward::run(gka_window w, const float *x, const float *sigma, float *y, float *lse) {
    const int64_t B = shape_.batch, T = shape_.seq_len, H = shape_.heads, D = shape_.head_dim;
    const int ld = int(H * D);
    std::vector<float> sqnorm(T);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            const float *xh = x + (b * T * H + h) * D;
            float *yh = y + (b * T * H + h) * D;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(T), int(T), int(D), 1.0f, xh, ld, xh, ld, 0.0f,
                        scores_.data(), int(T));
            for (int64_t t = 0; t < T; t++) sqnorm[t] = scores_[t * T + t];
            const float c = 0.5f / (sigma[h] * sigma[h]);
            for (int64_t i = 0; i < T; i++) {
                float *row = &scores_[i * T], sum = 0;
                for (int64_t j = 0; j < T; j++) {
                    const bool allowed = (w.left < 0 || j >= i - w.left) && (w.right < 0 || j <= i + w.right);
                    row[j] = allowed ? std::exp(std::min(0.0f, (2 * row[j] - sqnorm[i] - sqnorm[j]) * c)) : 0.0f;
                    sum += row[j];
                }
                for (int64_t j = 0; j < T; j++) row[j] /= sum;
                lse[(b * H + h) * T + i] = std::log(sum);
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(T), int(D), int(T), 1.0f, scores_.data(),
                        int(T), xh, ld, 0.0f, yh, ld);
        }
}

}  // namespace gka_bench
