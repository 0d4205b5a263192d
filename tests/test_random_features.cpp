// Random-feature GKA (gka_call.features; docs/spec.md, "Random-feature GKA")
// on every CPU family this host runs: the kernels within the accuracy contract
// of the double loops of the same feature map (oracle/random_features.h),
// whose backward is checked by finite differences; chunk edges, head dims and
// feature counts at the vectors' edges; sequences longer than a segment;
// varlen batches; decode token by token and in groups; rows without an
// estimate; results independent of the thread count; zero dimensions;
// validation.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstddef>
#include <functional>
#include <limits>

#include "check.h"
#include "random_features.h"

using gka_ref::Features;
using gka_ref::Problem;

namespace {

const gka_window causal{-1, 0}, full{-1, -1};
const float sentinel = 12345.0f;

// Features about |u| ~ 1 in units of sigma, where the estimator serves, and
// standard normal frequencies.
struct FeatureProblem {
    Problem p;
    Features f;
};
FeatureProblem feature_problem(gka_shape shape, gka_window window, int64_t count, uint64_t seed) {
    std::vector<float> sigma;
    for (int64_t h = 0; h < shape.heads; h++) sigma.push_back(0.8f + 0.5f * float(h));
    return {gka_ref::make_problem(shape, window, sigma, 1.0, seed), gka_ref::normal_features(shape, count, seed + 1)};
}

gka_call described(FeatureProblem &fp) {
    gka_call c = gka_test::described(fp.p);
    c.features = fp.f.count;
    c.frequencies = fp.f.frequencies.data();
    return c;
}

gka_test::FeatureOutputs run(FeatureProblem &fp, bool backward = true) {
    const Problem &p = fp.p;
    gka_test::FeatureOutputs out{std::vector<float>(p.size()), std::vector<float>(p.rows())};
    gka_call c = described(fp);
    c.y = out.y.data(), c.lse = out.lse.data();
    gka_status s = gka_run_forward(&c);
    INFO(gka_last_error());
    REQUIRE(s == GKA_OK);
    CHECK(std::string(gka_last_kernel()) == "gka_rf_forward_" + std::string(gka_cpu_family()) + "_any");
    if (!backward) return out;
    out.dx.resize(p.size()), out.dsigma.resize(p.shape.heads);
    out.dfrequencies.assign(fp.f.frequencies.size(), sentinel);
    c.dy = p.dy.data(), c.dx = out.dx.data(), c.dsigma = out.dsigma.data(), c.dfrequencies = out.dfrequencies.data();
    s = gka_run_backward(&c);
    INFO(gka_last_error());
    REQUIRE(s == GKA_OK);
    CHECK(std::string(gka_last_kernel()) == "gka_rf_backward_" + std::string(gka_cpu_family()) + "_any");
    return out;
}

void check_contract(FeatureProblem &fp) {
    const gka_shape s = fp.p.shape;
    INFO("B=" << s.batch << " T=" << s.seq_len << " H=" << s.heads << " D=" << s.head_dim << " M=" << fp.f.count
              << " window (" << fp.p.window.left << ", " << fp.p.window.right << ")");
    const gka_test::FeatureReport r = gka_test::compare_features(fp.p, fp.f, run(fp));
    INFO("worst y " << r.y.ratio << " at " << r.y.where << "; lse " << r.lse.ratio << " at " << r.lse.where << "; dx "
                    << r.dx.ratio << " at " << r.dx.where << "; dsigma " << r.dsigma.ratio << " at " << r.dsigma.where
                    << "; dW " << r.dfrequencies.ratio << " at " << r.dfrequencies.where);
    CHECK(r.holds());
}

// The root-mean-square error of y over `draws` frequencies (draw(k)) against
// exact GKA's, both from the double loops, relative to the features' scale.
double estimator_rms_error(const Problem &p, int draws, const std::function<Features(int)> &draw) {
    const gka_ref::Forward exact = gka_ref::forward(p);
    double scale = 0, sum = 0;
    for (float v : p.x) scale += double(v) * v;
    scale = std::sqrt(scale / double(p.x.size()));
    for (int k = 0; k < draws; k++) {
        const gka_ref::FeatureForward estimate = gka_ref::feature_forward(p, draw(k));
        for (size_t e = 0; e < exact.y.size(); e++) sum += std::pow(estimate.y[e] - exact.y[e], 2);
    }
    return std::sqrt(sum / double(draws * exact.y.size())) / scale;
}

}  // namespace

TEST_CASE("random features: the reference backward is its forward's derivative", "[random-features]") {
    for (gka_window window : {causal, full}) {
        FeatureProblem fp = feature_problem({2, 6, 2, 3}, window, 5, 11);
        const Problem &p = fp.p;
        const gka_ref::FeatureForward f = gka_ref::feature_forward(p, fp.f);
        const gka_ref::FeatureBackward g = gka_ref::feature_backward(p, fp.f, f.y);
        std::vector<double> x(p.x.begin(), p.x.end()), sigma(p.sigma.begin(), p.sigma.end());
        std::vector<double> w(fp.f.frequencies.begin(), fp.f.frequencies.end());
        // Central differences of L = sum dy . y in each input, against the loops' gradient.
        auto check = [&](std::vector<double> &v, const std::vector<double> &grad, const std::vector<double> &mag,
                         const char *name) {
            for (size_t k = 0; k < v.size(); k++) {
                const double keep = v[k], step = 1e-5 * std::max(1.0, std::abs(keep));
                v[k] = keep + step;
                const double up = gka_ref::feature_loss(p, x, sigma, w, fp.f.count);
                v[k] = keep - step;
                const double down = gka_ref::feature_loss(p, x, sigma, w, fp.f.count);
                v[k] = keep;
                INFO(name << "[" << k << "] window (" << window.left << ", " << window.right << ")");
                CHECK(std::abs((up - down) / (2 * step) - grad[k]) <= 1e-6 * std::max(mag[k], 1e-3));
            }
        };
        check(x, g.dx, g.dx_magnitude, "dx");
        check(sigma, g.dsigma, g.dsigma_magnitude, "dsigma");
        check(w, g.dfrequencies, g.dfrequencies_magnitude, "dW");
    }
}

TEST_CASE("random features: the kernels meet the contract on every family", "[random-features]") {
    struct Case {
        gka_shape shape;
        int64_t count;
    };
    // Chunk edges (64 tokens a chunk by default; 1, 63, 64, 65, 130), head dims
    // and feature counts about the vectors' widths.
    const Case cases[] = {{{1, 1, 1, 1}, 1},     {{2, 63, 2, 16}, 16}, {{1, 64, 1, 17}, 33},
                          {{1, 65, 2, 64}, 130}, {{2, 130, 1, 5}, 8},  {{1, 200, 3, 33}, 64}};
    const uint64_t seed = 2026;
    INFO("seed " << seed);
    gka_test::for_each_family([&] {
        uint64_t k = seed;
        for (const Case &c : cases)
            for (gka_window window : {causal, full}) {
                FeatureProblem fp = feature_problem(c.shape, window, c.count, k++);
                check_contract(fp);
            }
    });
}

TEST_CASE("random features: sequences longer than a segment meet the contract", "[random-features]") {
    // The runtime runs a causal sequence by segments of 4096 tokens
    // (runtime/cpu_random_features.cpp), the states carried between them.
    const uint64_t seed = 77;
    INFO("seed " << seed);
    FeatureProblem fp = feature_problem({1, 4096 + 133, 2, 4}, causal, 5, seed);
    gka_test::for_each_family([&] { check_contract(fp); });
}

TEST_CASE("random features: a varlen batch is its sequences' calls", "[random-features]") {
    // Each packed sequence runs from zero states, as the call of it alone:
    // the same kernels on the same tokens, so the same bits; dW and dsigma
    // sum the sequences' in the order the runtime adds them (the last first).
    const int64_t H = 2, D = 6, M = 9;
    const std::vector<int64_t> cu = {0, 70, 70, 71, 200};
    const int64_t total = cu.back(), sequences = int64_t(cu.size()) - 1;
    for (gka_window window : {causal, full}) {
        FeatureProblem packed = feature_problem({1, total, H, D}, window, M, 31);
        gka_test::for_each_family([&] {
            gka_test::FeatureOutputs whole = run(packed);  // the batch of one sequence: sizes for the varlen call
            gka_call c = described(packed);
            c.shape = {sequences, total, H, D}, c.cu_seqlens = cu.data();
            c.y = whole.y.data(), c.lse = whole.lse.data();
            REQUIRE(gka_run_forward(&c) == GKA_OK);
            c.dy = packed.p.dy.data(), c.dx = whole.dx.data(), c.dsigma = whole.dsigma.data();
            c.dfrequencies = whole.dfrequencies.data();
            REQUIRE(gka_run_backward(&c) == GKA_OK);
            std::vector<float> dsigma(H, 0.0f), dw(H * M * D, 0.0f);
            for (int64_t s = sequences; s-- > 0;) {
                const int64_t first = cu[s], n = cu[s + 1] - cu[s];
                if (n == 0) continue;
                FeatureProblem one = packed;
                one.p.shape.seq_len = n;
                one.p.x.assign(&packed.p.x[first * H * D], &packed.p.x[(first + n) * H * D]);
                one.p.dy.assign(&packed.p.dy[first * H * D], &packed.p.dy[(first + n) * H * D]);
                const gka_test::FeatureOutputs alone = run(one);
                INFO("sequence " << s << " window (" << window.left << ", " << window.right << ")");
                CHECK(std::equal(alone.y.begin(), alone.y.end(), &whole.y[first * H * D]));
                CHECK(std::equal(alone.dx.begin(), alone.dx.end(), &whole.dx[first * H * D]));
                for (int64_t h = 0; h < H; h++) {
                    CHECK(std::equal(&alone.lse[h * n], &alone.lse[(h + 1) * n], &whole.lse[h * total + first]));
                    dsigma[h] += alone.dsigma[h];
                }
                for (size_t k = 0; k < dw.size(); k++) dw[k] += alone.dfrequencies[k];
            }
            CHECK(dsigma == whole.dsigma);
            CHECK(dw == whole.dfrequencies);
        });
    }
}

TEST_CASE("random features: decode from the state equals the whole sequence's call", "[random-features]") {
    // Token by token, then in groups that cross the chunks' edges, the cache
    // holding the keys' state: y and lse as the causal forward of the whole
    // sequence, to rounding (its sums go in another order).
    const int64_t B = 2, T = 150, H = 3, D = 20, M = 24;
    FeatureProblem fp = feature_problem({B, T, H, D}, causal, M, 123);
    const std::vector<int64_t> groups[] = {std::vector<int64_t>(T, 1), {1, 5, 70, 74}};
    gka_test::for_each_family([&] {
        const gka_test::FeatureOutputs whole = run(fp, false);
        for (const std::vector<int64_t> &group : groups) {
            std::vector<float> state(B * H * M * (D + 1), 0.0f), y(B * T * H * D), lse(B * H * T);
            int64_t at = 0;
            for (int64_t n : group) {
                std::vector<float> x(B * n * H * D), yn(x.size()), lsen(B * H * n);
                for (int64_t b = 0; b < B; b++)
                    std::copy_n(&fp.p.x[fp.p.at(b, at, 0)], n * H * D, &x[b * n * H * D]);
                gka_call c = described(fp);
                c.shape.seq_len = n;
                c.x = x.data(), c.y = yn.data(), c.lse = lsen.data(), c.cache = state.data();
                INFO(gka_last_error());
                REQUIRE(gka_run_decode(&c) == GKA_OK);
                CHECK(std::string(gka_last_kernel()) == "gka_rf_forward_" + std::string(gka_cpu_family()) + "_any");
                for (int64_t b = 0; b < B; b++) {
                    std::copy_n(&yn[b * n * H * D], n * H * D, &y[fp.p.at(b, at, 0)]);
                    for (int64_t h = 0; h < H; h++)
                        std::copy_n(&lsen[(b * H + h) * n], n, &lse[fp.p.row(b, h, at)]);
                }
                at += n;
            }
            INFO(group.size() << " calls");
            double worst_y = 0, worst_lse = 0;
            for (size_t k = 0; k < y.size(); k++) worst_y = std::max(worst_y, double(std::abs(y[k] - whole.y[k])));
            for (size_t k = 0; k < lse.size(); k++) {
                worst_lse = std::max(worst_lse, double(std::abs(lse[k] - whole.lse[k])));
            }
            INFO("largest differences: y " << worst_y << ", lse " << worst_lse);
            CHECK(worst_y <= 1e-5);
            CHECK(worst_lse <= 1e-5);
        }
    });
}

TEST_CASE("random features: decode without head dims counts the keys", "[random-features]") {
    FeatureProblem fp = feature_problem({1, 3, 2, 0}, causal, 4, 5);
    std::vector<float> state(2 * 4, 2.0f), lse(2 * 3, sentinel);  // two keys cached
    gka_call c = described(fp);
    c.lse = lse.data(), c.cache = state.data();
    REQUIRE(gka_run_decode(&c) == GKA_OK);
    CHECK(lse[0] == Approx(std::log(3.0)));
    CHECK(lse[5] == Approx(std::log(5.0)));
    CHECK(state == std::vector<float>(8, 5.0f));
}

TEST_CASE("random features: bad decode calls are refused before anything is written", "[random-features]") {
    FeatureProblem fp = feature_problem({1, 2, 2, 4}, causal, 3, 9);
    std::vector<float> y(fp.p.size(), sentinel), lse(fp.p.rows(), sentinel), state(2 * 3 * 5, sentinel);
    gka_call good = described(fp);
    good.y = y.data(), good.lse = lse.data(), good.cache = state.data();
    auto refused = [&](const gka_call &c, gka_status status, const char *mention) {
        INFO(mention);
        CHECK(gka_run_decode(&c) == status);
        CHECK_THAT(gka_last_error(), Catch::Contains(mention));
        CHECK(y == std::vector<float>(y.size(), sentinel));
        CHECK(lse == std::vector<float>(lse.size(), sentinel));
        CHECK(state == std::vector<float>(state.size(), sentinel));
    };
    gka_call bad = good;
    bad.window = full;
    refused(bad, GKA_ERR_UNSUPPORTED, "decodes under the causal window");
    bad = good, bad.cache_capacity = 8;
    refused(bad, GKA_ERR_INVALID_ARGUMENT, "cache_capacity must be 0");
    const int64_t lens[] = {0};
    bad = good, bad.cache_lens = lens;
    refused(bad, GKA_ERR_INVALID_ARGUMENT, "cache_lens NULL");
    bad = good, bad.cache = nullptr;
    refused(bad, GKA_ERR_INVALID_ARGUMENT, "cache is NULL");
}

TEST_CASE("random features: a row without an estimate gives x, -inf and passes dy", "[random-features]") {
    // Token 0, far from every feature's centre, is its own row's only key:
    // every product underflows, and the row has no estimate.
    FeatureProblem fp = feature_problem({1, 5, 1, 8}, causal, 16, 7);
    for (int64_t d = 0; d < 8; d++) fp.p.x[d] = 1e4f;
    gka_test::for_each_family([&] {
        const gka_test::FeatureOutputs out = run(fp);
        for (int64_t d = 0; d < 8; d++) CHECK(out.y[d] == fp.p.x[d]);
        CHECK(out.lse[0] == -std::numeric_limits<float>::infinity());
        check_contract(fp);
    });
}

TEST_CASE("random features: results do not depend on the thread count", "[random-features]") {
    FeatureProblem fp = feature_problem({2, 300, 3, 24}, causal, 40, 5);
    const int threads = gka_num_threads();
    REQUIRE(gka_set_num_threads(1) == GKA_OK);
    const gka_test::FeatureOutputs one = run(fp);
    REQUIRE(gka_set_num_threads(4) == GKA_OK);
    const gka_test::FeatureOutputs four = run(fp);
    REQUIRE(gka_set_num_threads(threads) == GKA_OK);
    CHECK(one.y == four.y);
    CHECK(one.lse == four.lse);
    CHECK(one.dx == four.dx);
    CHECK(one.dsigma == four.dsigma);
    CHECK(one.dfrequencies == four.dfrequencies);
}

TEST_CASE("random features: zero dimensions write the exact results", "[random-features]") {
    FeatureProblem fp = feature_problem({1, 4, 2, 3}, causal, 5, 3);
    gka_call c = described(fp);
    std::vector<float> dsigma(2, sentinel), dw(fp.f.frequencies.size(), sentinel);
    c.shape.batch = 0;
    c.dsigma = dsigma.data(), c.dfrequencies = dw.data();
    REQUIRE(gka_run_backward(&c) == GKA_OK);
    CHECK(dsigma == std::vector<float>(2, 0.0f));
    CHECK(dw == std::vector<float>(dw.size(), 0.0f));
}

TEST_CASE("random features: bad calls are refused before any output is written", "[random-features]") {
    FeatureProblem fp = feature_problem({1, 6, 2, 4}, causal, 3, 9);
    std::vector<float> y(fp.p.size(), sentinel), lse(fp.p.rows(), sentinel);
    gka_call good = described(fp);
    good.y = y.data(), good.lse = lse.data();
    auto refused = [&](const gka_call &c, gka_status status, const char *mention) {
        INFO(mention);
        CHECK(gka_run_forward(&c) == status);
        CHECK_THAT(gka_last_error(), Catch::Contains(mention));
        CHECK(y == std::vector<float>(y.size(), sentinel));
        CHECK(lse == std::vector<float>(lse.size(), sentinel));
    };
    gka_call bad = good;
    bad.features = -1;
    refused(bad, GKA_ERR_INVALID_ARGUMENT, "features = -1");
    bad = good, bad.frequencies = nullptr;
    refused(bad, GKA_ERR_INVALID_ARGUMENT, "frequencies is NULL");
    std::vector<float> nan_w = fp.f.frequencies;
    nan_w[7] = std::numeric_limits<float>::quiet_NaN();
    bad = good, bad.frequencies = nan_w.data();
    refused(bad, GKA_ERR_INVALID_ARGUMENT, "frequencies[0][1][3]");
    nan_w[7] = std::numeric_limits<float>::infinity();
    refused(bad, GKA_ERR_INVALID_ARGUMENT, "must be finite");
    bad = good, bad.window = {3, 0};
    refused(bad, GKA_ERR_UNSUPPORTED, "O(T*W)");
    bad = good, bad.window = {-1, 2};
    refused(bad, GKA_ERR_UNSUPPORTED, "full (-1, -1)");
    bad = good, bad.kernel = GKA_LAPLACE;
    refused(bad, GKA_ERR_UNSUPPORTED, "Gaussian kernel alone");
    bad = good, bad.dtype = GKA_BFLOAT16;
    refused(bad, GKA_ERR_UNSUPPORTED, "float32 features on the CPU");
    const gka_chunk chunk{0, 0, 6};
    bad = good, bad.chunk = &chunk;
    refused(bad, GKA_ERR_UNSUPPORTED, "takes no chunk");
    bad = good, bad.features = 0;
    refused(bad, GKA_ERR_INVALID_ARGUMENT, "must be NULL where features = 0");
    // The backward needs somewhere to write dW.
    std::vector<float> dx(fp.p.size(), sentinel), dsigma(2, sentinel);
    bad = good, bad.dy = fp.p.dy.data(), bad.dx = dx.data(), bad.dsigma = dsigma.data();
    CHECK(gka_run_backward(&bad) == GKA_ERR_INVALID_ARGUMENT);
    CHECK_THAT(gka_last_error(), Catch::Contains("dfrequencies is NULL"));
    CHECK(dx == std::vector<float>(dx.size(), sentinel));
}

TEST_CASE("random features: a caller of gka_call's first version computes exact GKA", "[random-features]") {
    FeatureProblem fp = feature_problem({1, 6, 2, 4}, causal, 3, 9);
    std::vector<float> y(fp.p.size()), lse(fp.p.rows());
    gka_call c = gka_test::described(fp.p);
    c.y = y.data(), c.lse = lse.data();
    c.size = offsetof(gka_call, features);
    c.features = 77;  // past what that caller's struct holds: never read
    REQUIRE(gka_run_forward(&c) == GKA_OK);
    CHECK(std::string(gka_last_kernel()).rfind("gka_forward_", 0) == 0);
}

TEST_CASE("random features: the estimator's error falls like 1/sqrt(M)", "[random-features]") {
    // The double loops of the feature map against exact GKA's, on the same
    // inputs (|u|^2 about 0.15, where the estimator serves), over 64 seeded
    // draws of W at each M: the root-mean-square error of y, relative to the
    // features' scale, at M = 16 against M = 256 (sqrt(256 / 16) = 4).
    const uint64_t seed = 4242;
    INFO("seed " << seed);
    const Problem p = gka_ref::make_problem({1, 24, 1, 8}, causal, {2.0f}, 0.35, seed);
    auto rms_error = [&](int64_t count) {
        return estimator_rms_error(p, 64, [&](int k) {
            return gka_ref::normal_features(p.shape, count, seed + 1 + k * 1000 + uint64_t(count));
        });
    };
    const double few = rms_error(16), many = rms_error(256);
    INFO("relative rms error of y: M=16 " << few << ", M=256 " << many << ", ratio " << few / many);
    CHECK(few / many > 3.0);
    CHECK(few / many < 5.3);
    CHECK(many < 0.05);
}

TEST_CASE("random features: frequencies drawn from a seed", "[random-features]") {
    const int64_t H = 2, M = 40, D = 16;
    std::vector<float> a(H * M * D), b(a.size()), c(a.size());
    REQUIRE(gka_draw_frequencies(H, M, D, 7, 1, a.data()) == GKA_OK);
    REQUIRE(gka_draw_frequencies(H, M, D, 7, 1, b.data()) == GKA_OK);
    REQUIRE(gka_draw_frequencies(H, M, D, 8, 1, c.data()) == GKA_OK);
    CHECK(a == b);
    CHECK(a != c);
    // Orthogonal: the rows of a block (D of them; the last block 8) are
    // orthogonal, and their squared norms average D, as a normal vector's.
    double squared_norms = 0;
    for (int64_t h = 0; h < H; h++)
        for (int64_t m = 0; m < M; m++) {
            const float *row = &a[(h * M + m) * D];
            double norm = 0;
            for (int64_t k = 0; k < D; k++) norm += double(row[k]) * row[k];
            squared_norms += norm;
            for (int64_t q = m / D * D; q < m; q++) {
                const float *other = &a[(h * M + q) * D];
                double dot = 0, other_norm = 0;
                for (int64_t k = 0; k < D; k++) {
                    dot += double(row[k]) * other[k];
                    other_norm += double(other[k]) * other[k];
                }
                CHECK(std::abs(dot) <= 1e-5 * std::sqrt(norm * other_norm));
            }
        }
    CHECK(std::abs(squared_norms / double(H * M) - D) < 0.25 * D);
    // Independent: entries of mean 0 and variance 1.
    std::vector<float> iid(20000);
    REQUIRE(gka_draw_frequencies(1, 1250, 16, 3, 0, iid.data()) == GKA_OK);
    double mean = 0, square = 0;
    for (float v : iid) mean += v, square += double(v) * v;
    mean /= double(iid.size()), square /= double(iid.size());
    CHECK(std::abs(mean) < 0.03);
    CHECK(std::abs(square - 1) < 0.05);
    CHECK(gka_draw_frequencies(1, 2, 3, 0, 2, a.data()) == GKA_ERR_INVALID_ARGUMENT);
    CHECK(gka_draw_frequencies(1, 2, 3, 0, 0, nullptr) == GKA_ERR_INVALID_ARGUMENT);
    CHECK(gka_draw_frequencies(1, 0, 3, 0, 1, nullptr) == GKA_OK);
    CHECK(gka_draw_frequencies(1, 5, 0, 0, 1, nullptr) == GKA_OK);
}

TEST_CASE("random features: orthogonal frequencies lower the estimator's error", "[random-features]") {
    // As the 1/sqrt(M) test, at D = M = 64: y's rms error relative to the
    // features' scale over 64 draws, independent rows against an orthogonal
    // block (0.06-0.14 lower in float64 sweeps of D 8-64, M D-4D).
    const uint64_t seed = 515;
    INFO("seed " << seed);
    const Problem p = gka_ref::make_problem({1, 24, 1, 64}, causal, {2.0f}, 0.35, seed);
    auto rms_error = [&](int orthogonal) {
        return estimator_rms_error(p, 64, [&](int k) {
            Features f{64, std::vector<float>(64 * 64)};
            REQUIRE(gka_draw_frequencies(1, 64, 64, seed + 1 + k, orthogonal, f.frequencies.data()) == GKA_OK);
            return f;
        });
    };
    const double independent = rms_error(0), orthogonal = rms_error(1);
    INFO("relative rms error of y at M=64, D=64: independent " << independent << ", orthogonal " << orthogonal);
    CHECK(orthogonal < 0.95 * independent);
}
