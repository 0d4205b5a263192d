// docs/spec.md's accuracy contract on inputs outside the well-scaled range: exact
// self pairs, translation, sharp heads beside smooth ones, repeated and
// near-duplicate tokens, long rows, extreme sigmas and feature scales,
// underflow; and a randomized test over all of these (seeded, the seed
// printed: GKA_SEED replays it, GKA_PROPERTY_SECONDS runs it longer).
#include <catch2/catch.hpp>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <random>

#include "check.h"
#include "random_problem.h"

using gka_ref::Problem;
using gka_test::check_problem;
using gka_test::for_each_family_and_form;
using gka_test::gaussian_problem;

namespace {

const gka_window full{-1, -1}, causal{-1, 0};

// The variant `pass` runs for this shape on `family` (gka_kernel_variant), "" if none.
std::string variant(const std::string &family, const char *pass, gka_shape shape, gka_window window) {
    const char *name = gka_kernel_variant(family.c_str(), pass, shape, window, nullptr);
    return name ? name : "";
}

}  // namespace

TEST_CASE("a row whose only key is itself: y = x and lse = 0, and dx = dy and dsigma = 0 where every row is",
          "[accuracy]") {
    for (int64_t D : {1, 5, 64, 128}) {
        for (double offset : {0.0, 10.0}) {
            for (gka_window w : {full, causal, gka_window{0, 0}, gka_window{3, 0}, gka_window{0, -1}}) {
                // T = 1 on every window, and (0, 0) on a longer sequence.
                for (int64_t T : {int64_t(1), int64_t(37)}) {
                    if (T > 1 && !(w.left == 0 && w.right == 0)) continue;
                    const Problem p = gaussian_problem({2, T, 2, D}, w, {0.05f, 1.0f}, 1.0, offset, 11 + D);
                    for_each_family_and_form([&] {
                        INFO("D=" << D << " T=" << T << " offset " << offset << " window (" << w.left << ", "
                                  << w.right << ")");
                        const gka_test::Outputs out = gka_test::run_kernels(p);
                        CHECK(out.y == p.x);
                        CHECK(out.lse == std::vector<float>(p.rows(), 0.0f));
                        CHECK(out.dx == p.dy);
                        CHECK(out.dsigma == std::vector<float>(p.shape.heads, 0.0f));
                    });
                }
            }
        }
    }
    // Under a causal mask the first token's row is itself alone.
    const Problem p = gaussian_problem({2, 50, 3, 64}, causal, {0.05f, 1.0f, 8.0f}, 1.0, 10.0, 5);
    for_each_family_and_form([&] {
        const gka_test::Outputs out = gka_test::run_kernels(p);
        for (int64_t b = 0; b < 2; b++)
            for (int64_t h = 0; h < 3; h++) {
                CHECK(out.lse[p.row(b, h, 0)] == 0.0f);
                for (int64_t d = 0; d < 64; d++) CHECK(out.y[p.at(b, 0, h) + d] == p.x[p.at(b, 0, h) + d]);
            }
    });
}

TEST_CASE("translation: a common offset of up to 100x the features' spread", "[accuracy]") {
    for (double offset : {0.0, 1.0, 10.0, 100.0}) {
        for (gka_window w : {full, causal, gka_window{20, 0}}) {
            // sigma = sqrt(D) x the spread: scores of about -1, neither uniform nor one-hot.
            const Problem p = gaussian_problem({1, 100, 2, 64}, w, {8.0f, 2.0f}, 1.0, offset, 21);
            INFO("offset " << offset);
            for_each_family_and_form([&] {
                const std::string forward = check_problem(p), backward = gka_last_kernel();
                if (std::string(gka_score_form()) == "direct") return;
                // The centring takes the offset out: an expansion serves these,
                // the forward's about the origin where the features are near it.
                INFO("forward " << forward << ", backward " << backward);
                CHECK(forward.find("_direct") == std::string::npos);
                CHECK(backward.find("_direct") == std::string::npos);
                const std::string form = gka_score_form();
                const bool about_origin = form == "auto" || form == "origin";
                if (offset == 0.0) CHECK((forward.find("_origin") != std::string::npos) == about_origin);
                if (offset >= 10.0) CHECK(forward.find("_origin") == std::string::npos);
            });
        }
    }
}

TEST_CASE("each score form's variants are named, and what a call in each form runs", "[accuracy]") {
    const gka_shape shape{1, 70, 2, 16};
    const Problem p = gaussian_problem(shape, causal, {4.0f, 2.0f}, 1.0, 0.0, 23);  // smooth, about the origin
    for (const std::string &family : gka_test::runnable_families()) {
        INFO("family " << family);
        REQUIRE(gka_set_cpu_family(family.c_str()) == GKA_OK);
        auto named = [&](const char *pass) { return variant(family, pass, shape, causal); };
        const std::string origin = named("forward_origin"), centred = named("forward"), direct = named("forward_direct");
        CHECK(origin.find("_origin") != std::string::npos);
        CHECK(direct.find("_direct") != std::string::npos);
        CHECK((centred.find("_origin") == std::string::npos && centred.find("_direct") == std::string::npos));
        for (const char *pass : {"backward_origin", "decode_origin", "forward_chunk_origin"}) {
            CHECK(named(pass).empty());  // the forward's form alone
        }
        for (const char *form : gka_test::score_forms) {
            INFO("score form " << form);
            REQUIRE(gka_set_score_form(form) == GKA_OK);
            CHECK(std::string(gka_score_form()) == form);
            const bool is_direct = std::string(form) == "direct";
            std::vector<float> y(p.size()), lse(p.rows()), dx(p.size()), dsigma(2);
            REQUIRE(gka_forward(shape, causal, p.x.data(), p.sigma.data(), y.data(), lse.data()) == GKA_OK);
            // Smooth inputs near the origin: each form's first choice serves.
            const bool about_origin = form == std::string("auto") || form == std::string("origin");
            CHECK(std::string(gka_last_kernel()) == (is_direct ? direct : about_origin ? origin : centred));
            REQUIRE(gka_backward(shape, causal, p.x.data(), p.sigma.data(), y.data(), lse.data(), p.dy.data(), dx.data(),
                                 dsigma.data()) == GKA_OK);
            CHECK(std::string(gka_last_kernel()) == named(is_direct ? "backward_direct" : "backward"));
        }
    }
    REQUIRE(gka_set_score_form("fast") == GKA_ERR_INVALID_ARGUMENT);
    CHECK(std::string(gka_last_error()).find("auto, origin, centred, direct") != std::string::npos);
    REQUIRE(gka_set_score_form("expansion") == GKA_OK);  // the centred form's alias
    CHECK(std::string(gka_score_form()) == "centred");
    for (const std::string &cuda : gka_test::cuda_families()) {  // the direct form alone: every pass name gives it
        for (const char *pass : {"forward", "backward"}) {
            const char *named = gka_kernel_variant(cuda.c_str(), pass, shape, causal, nullptr);
            REQUIRE(named != nullptr);
            CHECK(std::string(named).find("_" + cuda + "_") != std::string::npos);
            CHECK(std::string(named).find("_direct") != std::string::npos);
            CHECK(std::string(gka_kernel_variant(cuda.c_str(), (std::string(pass) + "_direct").c_str(), shape, causal,
                                                 nullptr)) == named);
        }
    }
    REQUIRE(gka_set_cpu_family(nullptr) == GKA_OK);
    REQUIRE(gka_set_score_form(nullptr) == GKA_OK);
}

TEST_CASE("the expansion about the origin hands over to the centred one past its bound", "[accuracy]") {
    // D = 64, sigma = 1: the expansion's bound is |c|^2 <= 64. Features
    // 0.8 + 0.05 N(0, 1), |x|^2 about 41, on the tokens the centre samples
    // (T = 100: 0, 6, 12, ...); token 7, between them, at 1.1 + 0.05 N(0, 1),
    // |x|^2 about 77, and |x - centre|^2 about 6.
    Problem far = gaussian_problem({1, 100, 1, 64}, causal, {1.0f}, 0.05, 0.8, 71);
    const Problem near = far;
    for (int64_t d = 0; d < 64; d++) far.x[7 * 64 + d] += 0.3f;
    gka_test::for_each_family([&] {
        REQUIRE(gka_set_score_form("auto") == GKA_OK);
        auto forward_kernel = [](const Problem &p) {
            std::vector<float> y(p.size()), lse(p.rows());
            REQUIRE(gka_forward(p.shape, p.window, p.x.data(), p.sigma.data(), y.data(), lse.data()) == GKA_OK);
            return std::string(gka_last_kernel());
        };
        const std::string family = gka_cpu_family();
        auto named = [&](const char *pass) { return variant(family, pass, far.shape, causal); };
        CHECK(forward_kernel(near) == named("forward_origin"));
        // The origin's kernel runs (its samples are within the bound), reports
        // token 7, and the centred one gives the results.
        CHECK(forward_kernel(far) == named("forward"));
        check_problem(far);
    });
}

TEST_CASE("one-hot and smooth heads side by side in one call", "[accuracy]") {
    for (int64_t D : {4, 16, 64}) {
        const Problem p = gaussian_problem({2, 60, 4, D}, causal, {0.02f, 0.3f, 1.0f, 50.0f}, 1.0, 3.0, 31 + D);
        for_each_family_and_form([&] { check_problem(p); });
    }
}

TEST_CASE("repeated and near-duplicate tokens, D = 1 included", "[accuracy]") {
    for (int64_t D : {1, 2, 8, 64}) {
        // Every token one of 5, repeated.
        Problem repeated = gaussian_problem({1, 45, 2, D}, causal, {0.1f, 1.0f}, 1.0, 2.0, 41);
        for (int64_t t = 5; t < 45; t++)
            for (int64_t k = 0; k < 2 * D; k++) repeated.x[t * 2 * D + k] = repeated.x[(t % 5) * 2 * D + k];
        for_each_family_and_form([&] { check_problem(repeated); });
        // Tokens a hair apart (1e-5 of their size), with sigmas of that order.
        Problem near = gaussian_problem({1, 40, 2, D}, full, {1e-5f, 3e-5f}, 1.0, 1.0, 43);
        for (int64_t t = 1; t < 40; t++)
            for (int64_t k = 0; k < 2 * D; k++) near.x[t * 2 * D + k] = near.x[k] * (1.0f + 1e-5f * float(t % 7));
        for_each_family_and_form([&] { check_problem(near); });
    }
}

TEST_CASE("sigma from 1e-3 to 1e3 against features from 1e-3 to 1e3", "[accuracy]") {
    for (double scale : {1e-3, 1.0, 1e3}) {
        for (float sigma : {1e-3f, 1.0f, 1e3f}) {
            INFO("feature scale " << scale << ", sigma " << sigma);
            const Problem p = gaussian_problem({1, 40, 1, 8}, causal, {sigma}, scale, 0.5 * scale, 51);
            for_each_family_and_form([&] { check_problem(p); });
        }
    }
}

TEST_CASE("a weight whose exact value is below the smallest normal float is 0", "[accuracy]") {
    // Two tokens, x0 = 1 and x1 = 0 (D = 1): the second's row is (x1 + w x0) / (1 + w), w = exp(s01).
    for (double score : {-88.0, -80.0}) {
        const float sigma = float(1.0 / std::sqrt(-2.0 * score));
        Problem p{{1, 2, 1, 1}, causal, {1.0f, 0.0f}, {sigma}, {1.0f, 1.0f}};
        for_each_family_and_form([&] {
            const gka_test::Outputs out = gka_test::run_kernels(p);
            INFO("score " << score << ": y1 = " << out.y[1]);
            if (score < std::log(double(FLT_MIN))) {
                CHECK(out.y[1] == 0.0f);
            } else {
                CHECK(std::abs(out.y[1] / std::exp(score) - 1) < 1e-5);
            }
            CHECK(out.lse[1] == 0.0f);
        });
    }
}

// Errors relative to the largest |y| of the row, on sampled rows: they must
// not grow with the row's length (docs/spec.md).
TEST_CASE("long full-window rows: y's error does not grow with T", "[accuracy][long]") {
    for (int64_t T : {4096, 16384}) {
        const int64_t D = 128;
        const Problem p = gaussian_problem({1, T, 1, D}, full, {1.0f}, 0.35, 0.0, 61);
        for_each_family_and_form([&] {
            std::vector<float> y(p.size()), lse(p.rows());
            gka_call c = gka_test::described(p);
            c.y = y.data(), c.lse = lse.data();
            REQUIRE(gka_run_forward(&c) == GKA_OK);
            const double worst = gka_test::long_row_error(p, y);
            INFO("T=" << T << ": worst error / max |y| of a row " << worst << " (" << gka_last_kernel() << ")");
            CHECK(worst < gka_test::long_row_bound);
        });
    }
}

TEST_CASE("randomized: the contract over every regime", "[accuracy][property]") {
    const char *seed_env = std::getenv("GKA_SEED"), *seconds_env = std::getenv("GKA_PROPERTY_SECONDS");
    const char *case_env = std::getenv("GKA_PROPERTY_CASE");  // with GKA_SEED: that case alone
    const uint64_t seed = seed_env ? std::strtoull(seed_env, nullptr, 10) : std::random_device()();
    const double seconds = seconds_env ? std::atof(seconds_env) : 3.0;
    const long only_case = case_env ? std::atol(case_env) : -1;
    WARN("randomized accuracy test: seed " << seed << " (GKA_SEED=" << seed << " replays it, GKA_PROPERTY_CASE=n"
                                           << " its case n alone), " << seconds << " s");
    gka_test::SeededDraws draws(seed);
    const std::vector<std::string> families = gka_test::runnable_families();
    const auto start = std::chrono::steady_clock::now();
    int cases = 0, unjudged = 0, over_bound = 0;
    double worst_unjudged = 0;
    auto running = [&](long drawn) {
        if (only_case >= 0) return drawn <= only_case;
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < seconds;
    };
    for (long drawn_case = 0; running(drawn_case); drawn_case++) {
        const gka_test::RandomProblem drawn = gka_test::random_problem(draws);
        const Problem &p = drawn.p;
        const std::string &family = families[draws.uniform(0, int64_t(families.size()) - 1)];
        const char *form = draws.score_form();
        if (drawn_case < only_case) continue;
        INFO("seed " << seed << ", case " << drawn_case << ", family " << family << ", score form " << form);
        REQUIRE(gka_set_cpu_family(family.c_str()) == GKA_OK);
        REQUIRE(gka_set_score_form(form) == GKA_OK);
        const gka_test::Outputs out = gka_test::run_kernels(p);
        gka_test::Report r = gka_test::compare(p, out);
        if (gka_test::in_known_gap(drawn, gka_last_kernel())) {
            worst_unjudged = std::max(worst_unjudged, r.dsigma.ratio);
            unjudged++;
            over_bound += r.dsigma.ratio > 1;
            r.dsigma.ratio = 0;
        }
        gka_test::check_report(family, p, r);
        cases++;
    }
    WARN(unjudged << " expansion backwards with repeated tokens: dsigma not judged (" << over_bound
                  << " over the bound, worst error / bound " << worst_unjudged << ")");
    REQUIRE(gka_set_cpu_family(nullptr) == GKA_OK);
    REQUIRE(gka_set_score_form(nullptr) == GKA_OK);
    WARN(cases << " random problems judged");
    CHECK(cases > 0);
}
