// What GKA's kernels are measured against, in the same run (bench/gka_bench.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "gka/gka.h"

namespace gka_bench {

// C = A B with OpenBLAS, A m x k, B k x n, row-major.
void sgemm(int64_t m, int64_t n, int64_t k, const float *a, const float *b, float *c);

// The GKA forward as a user would write it without this project: per head,
// S = X X^T by sgemm, then exp, mask and normalize row by row, then Y = P X by
// sgemm. The full T x T scores are computed and stored whatever the window.
// Reads `bytes` of memory (a buffer far larger than the caches) on `threads`
// threads, as decode reads its cache: the machine's read bandwidth in the
// same run. Returns a checksum so that the reads cannot be optimized away.
class ReadBandwidth {
public:
    explicit ReadBandwidth(int64_t bytes);
    uint64_t run(int threads) const;
    int64_t bytes() const { return int64_t(data_.size() * sizeof(uint64_t)); }

private:
    std::vector<uint64_t> data_;
};

class UnfusedForward {
public:
    explicit UnfusedForward(gka_shape shape) : shape_(shape), scores_(shape.seq_len * shape.seq_len) {}
    void run(gka_window window, const float *x, const float *sigma, float *y, float *lse);

private:
    gka_shape shape_;
    std::vector<float> scores_;
};

}  // namespace gka_bench
