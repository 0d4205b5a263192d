// Chunks (gka_call.chunk; gka_forward_chunk and gka_backward_chunk over it) on
// every CPU family: one sequence
// cut into chunks, every (query chunk, key chunk) pair run and the partial
// results merged, matches the double reference of the whole sequence within
// the accuracy contract, forward and backward, for causal, full and sliding
// windows and uneven cuts; chunks without pairs, or whose weights all
// underflow, give lse = -inf and y = 0; validation.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "check.h"

using gka_ref::make_problem;
using gka_ref::Problem;

namespace {

const float minus_infinity = -std::numeric_limits<float>::infinity();

// The cut's chunks [cuts[c], cuts[c+1]) of one sequence (B=1).
struct Chunked {
    const Problem &p;
    std::vector<int64_t> cuts;

    int64_t row() const { return p.shape.heads * p.shape.head_dim; }
    int64_t length(size_t c) const { return cuts[c + 1] - cuts[c]; }
    gka_shape queries(size_t c) const { return {1, length(c), p.shape.heads, p.shape.head_dim}; }
    gka_chunk chunk(size_t q, size_t k) const { return {cuts[q], cuts[k], length(k)}; }
    const float *x(size_t c) const { return &p.x[cuts[c] * row()]; }
    // The call of query chunk q against key chunk k (placed by `placement`), its inputs set.
    gka_call described(size_t q, size_t k, const gka_chunk *placement) const {
        gka_call c = gka_test::described(p.kernel);
        c.shape = queries(q), c.window = p.window, c.chunk = placement;
        c.x = x(q), c.keys = x(k), c.sigma = p.sigma.data();
        return c;
    }
};

// Every pair's forward, merged per query chunk: lse = log sum exp(lse_c),
// y = sum exp(lse_c - lse) y_c (in double, then rounded as a caller would keep them).
gka_test::Outputs merged_forward(const Chunked &s) {
    const int64_t T = s.p.shape.seq_len, H = s.p.shape.heads, D = s.p.shape.head_dim, row = s.row();
    gka_test::Outputs out{std::vector<float>(T * row), std::vector<float>(H * T)};
    for (size_t q = 0; q + 1 < s.cuts.size(); q++) {
        const int64_t Tq = s.length(q);
        std::vector<std::vector<float>> ys, lses;
        for (size_t k = 0; k + 1 < s.cuts.size(); k++) {
            ys.emplace_back(Tq * row), lses.emplace_back(H * Tq);
            const gka_chunk placement = s.chunk(q, k);
            gka_call c = s.described(q, k, &placement);
            c.y = ys.back().data(), c.lse = lses.back().data();
            const gka_status status = gka_run_forward(&c);
            INFO(gka_last_error());
            REQUIRE(status == GKA_OK);
        }
        for (int64_t h = 0; h < H; h++)
            for (int64_t t = 0; t < Tq; t++) {
                double top = -INFINITY, sum = 0;
                for (const auto &l : lses) top = std::max(top, double(l[h * Tq + t]));
                for (const auto &l : lses) sum += std::exp(l[h * Tq + t] - top);
                const double lse = top + std::log(sum);
                out.lse[h * T + s.cuts[q] + t] = float(lse);
                for (int64_t d = 0; d < D; d++) {
                    double y = 0;
                    for (size_t k = 0; k < ys.size(); k++) {
                        const double w = std::exp(lses[k][h * Tq + t] - lse);
                        if (w > 0) y += w * ys[k][(t * H + h) * D + d];
                    }
                    out.y[(s.cuts[q] + t) * row + h * D + d] = float(y);
                }
            }
    }
    return out;
}

// Every pair's backward from the merged y and lse: a token's dx sums its
// queries' and keys' contributions, dsigma every pair's.
void chunked_backward(const Chunked &s, gka_test::Outputs &out) {
    const int64_t T = s.p.shape.seq_len, H = s.p.shape.heads, row = s.row();
    std::vector<double> dx(T * row, 0.0), dsigma(H, 0.0);
    for (size_t q = 0; q + 1 < s.cuts.size(); q++) {
        const int64_t Tq = s.length(q);
        std::vector<float> lse(H * Tq);
        for (int64_t h = 0; h < H; h++) std::copy_n(&out.lse[h * T + s.cuts[q]], Tq, &lse[h * Tq]);
        for (size_t k = 0; k + 1 < s.cuts.size(); k++) {
            std::vector<float> dq(Tq * row), dk(s.length(k) * row), ds(H);
            const gka_chunk placement = s.chunk(q, k);
            gka_call c = s.described(q, k, &placement);
            c.y = &out.y[s.cuts[q] * row], c.lse = lse.data(), c.dy = &s.p.dy[s.cuts[q] * row];
            c.dx = dq.data(), c.dx_keys = dk.data(), c.dsigma = ds.data();
            const gka_status status = gka_run_backward(&c);
            INFO(gka_last_error());
            REQUIRE(status == GKA_OK);
            for (int64_t n = 0; n < Tq * row; n++) dx[s.cuts[q] * row + n] += dq[n];
            for (int64_t n = 0; n < s.length(k) * row; n++) dx[s.cuts[k] * row + n] += dk[n];
            for (int64_t h = 0; h < H; h++) dsigma[h] += ds[h];
        }
    }
    out.dx.assign(dx.begin(), dx.end());
    out.dsigma.assign(dsigma.begin(), dsigma.end());
}

}  // namespace

TEST_CASE("chunks: a sequence cut into chunks and merged matches the one-call reference", "[chunk]") {
    const int64_t T = 77;
    for (gka_window w : {gka_window{-1, 0}, gka_window{-1, -1}, gka_window{5, 0}, gka_window{3, 2}}) {
        for (int64_t D : {64, 20}) {
            Problem p = make_problem({1, T, 2, D}, w, {0.8f, 2.5f}, 1.5, 41 * D + w.left);
            for (const std::vector<int64_t> &cuts :
                 {std::vector<int64_t>{0, T}, {0, 20, 21, 50, T}, {0, 9, 18, 27, 36, 45, 54, 63, 72, T}}) {
                gka_test::for_each_kernel([&](const char *kernel) {
                    p.kernel = kernel;
                    gka_test::for_each_family([&] {
                        INFO("window (" << w.left << ", " << w.right << "), D=" << D << ", " << cuts.size() - 1
                                        << " chunks, family " << gka_cpu_family());
                        const Chunked s{p, cuts};
                        gka_test::Outputs out = merged_forward(s);
                        chunked_backward(s, out);
                        gka_test::check_report("chunks", p, gka_test::compare(p, out));
                        const std::string named = kernel == std::string("gaussian") ? "_chunk_" : kernel;
                        CHECK(std::string(gka_last_kernel()).find(named) != std::string::npos);
                    });
                });
            }
        }
    }
}

TEST_CASE("chunks: no pair, or only underflowing weights, give lse = -inf and y = 0", "[chunk]") {
    const Problem p = make_problem({1, 40, 2, 16}, {-1, 0}, {1.0f, 1.0f}, 1.0, 3);
    const Chunked s{p, {0, 20, 40}};
    gka_test::for_each_family([&] {
        // Causal: the later keys are no query's.
        std::vector<float> y(20 * s.row(), 7.0f), lse(2 * 20, 7.0f);
        REQUIRE(gka_forward_chunk(s.queries(0), s.chunk(0, 1), p.window, s.x(0), s.x(1), p.sigma.data(), y.data(),
                                  lse.data()) == GKA_OK);
        CHECK(y == std::vector<float>(y.size(), 0.0f));
        CHECK(lse == std::vector<float>(lse.size(), minus_infinity));
        std::vector<float> dq(y.size(), 7.0f), dk(y.size(), 7.0f), ds(2, 7.0f);
        REQUIRE(gka_backward_chunk(s.queries(0), s.chunk(0, 1), p.window, s.x(0), s.x(1), p.sigma.data(), y.data(),
                                   lse.data(), &p.dy[0], dq.data(), dk.data(), ds.data()) == GKA_OK);
        CHECK(dq == std::vector<float>(dq.size(), 0.0f));
        CHECK(dk == std::vector<float>(dk.size(), 0.0f));
        CHECK(ds == std::vector<float>(2, 0.0f));
        // Keys 1000 sigmas away: every weight's exact value is below fp32's smallest normal.
        std::vector<float> far(p.x.begin() + 20 * s.row(), p.x.end());
        for (float &v : far) v += 1000.0f;
        std::fill(y.begin(), y.end(), 7.0f), std::fill(lse.begin(), lse.end(), 7.0f);
        REQUIRE(gka_forward_chunk(s.queries(1), {20, 0, 20}, {-1, -1}, s.x(1), far.data(), p.sigma.data(), y.data(),
                                  lse.data()) == GKA_OK);
        CHECK(std::string(gka_last_kernel()).rfind("gka_forward_chunk_" + std::string(gka_cpu_family()), 0) == 0);
        CHECK(y == std::vector<float>(y.size(), 0.0f));
        CHECK(lse == std::vector<float>(lse.size(), minus_infinity));
    });
}

TEST_CASE("chunks: the variants are named on every CPU family", "[chunk]") {
    for (const std::string &family : gka_test::compiled_families()) {
        for (const char *pass : {"forward_chunk", "backward_chunk"}) {
            const char *name = gka_kernel_variant(family.c_str(), pass, {1, 1, 1, 64}, {-1, 0}, nullptr);
            REQUIRE(name != nullptr);
            CHECK(std::string(name) == "gka_" + std::string(pass) + "_" + family + "_d64_direct");
        }
    }
}

TEST_CASE("chunks: bad arguments fail before anything is written", "[chunk]") {
    const int64_t H = 2, D = 4, T = 3;
    const std::vector<float> x(T * H * D, 1.0f), sigma{1.0f, 1.0f};
    std::vector<float> y(x.size(), 42.0f), lse(H * T, 42.0f), dq(x.size(), 42.0f), dk(x.size(), 42.0f),
        ds(H, 42.0f);
    const gka_shape shape{1, T, H, D};
    auto forward = [&](gka_chunk c, const float *keys) {
        return gka_forward_chunk(shape, c, {-1, 0}, x.data(), keys, sigma.data(), y.data(), lse.data());
    };
    auto says = [](const char *what) { return std::string(gka_last_error()).find(what) != std::string::npos; };
    CHECK(forward({-1, 0, T}, x.data()) == GKA_ERR_INVALID_ARGUMENT);
    CHECK(says("starts must be >= 0"));
    CHECK(forward({0, 0, 0}, x.data()) == GKA_ERR_INVALID_ARGUMENT);
    CHECK(forward({0, 0, T}, nullptr) == GKA_ERR_INVALID_ARGUMENT);
    CHECK(says("keys is NULL"));
    CHECK(forward({(int64_t(1) << 28) - 2, 0, T}, x.data()) == GKA_ERR_UNSUPPORTED);
    CHECK(says("2^28"));
    CHECK(gka_backward_chunk(shape, {0, 0, T}, {-1, 0}, x.data(), x.data(), sigma.data(), x.data(), lse.data(),
                             x.data(), dq.data(), nullptr, ds.data()) == GKA_ERR_INVALID_ARGUMENT);
    CHECK(says("dx_keys is NULL"));
    CHECK(y == std::vector<float>(x.size(), 42.0f));
    CHECK(lse == std::vector<float>(H * T, 42.0f));
    CHECK(dq == std::vector<float>(x.size(), 42.0f));
    CHECK(ds == std::vector<float>(H, 42.0f));
}
