// Every kernel, on every CPU family this host runs and in every score form,
// against the double reference by the accuracy contract; and each kernel
// function (docs/spec.md, "Kernels") on the same shapes.
#include <catch2/catch.hpp>
#include <string>
#include <thread>

#include "check.h"

using gka_ref::make_problem;
using gka_test::check_problem;

namespace {

const gka_window full{-1, -1}, causal{-1, 0};

// `p` with each kernel function other than the Gaussian (the tests above run
// the Gaussian's), on every runnable family: within the contract, by the
// kernels of that function in the direct form.
void check_other_kernels(gka_ref::Problem p) {
    gka_test::for_each_kernel([&](const char *kernel) {
        if (std::string(kernel) == "gaussian") return;
        p.kernel = kernel;
        gka_test::for_each_family([&] {
            std::string forward = check_problem(p), backward = gka_last_kernel();
            for (const std::string &ran : {forward, backward}) {
                INFO(ran);
                CHECK(ran.find(std::string("_direct_") + kernel) != std::string::npos);
            }
        });
    });
}

}  // namespace

TEST_CASE("head dims, near-uniform and near-one-hot attention, sigmas 0.05 to 100", "[kernels]") {
    for (int64_t D : {1, 3, 16, 48, 64, 80, 128}) {
        for (double spread : {0.3, 4.0}) {
            auto p = make_problem({2, 37, 3, D}, causal, {0.05f, 1.3f, 100.0f}, spread, 100 + D);
            gka_test::for_each_family_and_form([&] { check_problem(p); });
        }
    }
}

// The kernels of any head dim keep whole register tiles of d (vectors of 4, 8
// or 16 lanes, blocks of up to 128) past the head dim: every D next to a
// vector's or a block's edge, where the last tile is all but empty or all but full.
TEST_CASE("head dims at the edges of the kernels' vectors and d blocks", "[kernels]") {
    for (int64_t D : {1, 15, 16, 17, 31, 33, 63, 65, 127, 129, 256}) {
        for (gka_window w : {causal, gka_window{9, 0}}) {
            auto p = make_problem({1, 41, 2, D}, w, {0.4f, 5.0f}, 1.5, 500 + D);
            gka_test::for_each_family_and_form([&] { check_problem(p); });
        }
    }
}

TEST_CASE("windows: full, causal, self-only, sliding, asymmetric, wider than T", "[kernels]") {
    const gka_window windows[] = {full, causal, {0, 0}, {4, 0}, {3, 7}, {0, -1}, {-1, 5}, {1000, 2}, {20, 20}};
    for (gka_window w : windows) {
        for (double spread : {0.3, 4.0}) {
            auto p = make_problem({1, 101, 2, 16}, w, {0.7f, 7.0f}, spread, 7);
            gka_test::for_each_family_and_form([&] { check_problem(p); });
        }
    }
}

TEST_CASE("sequence lengths around the kernels' bands and tiles", "[kernels]") {
    for (int64_t T : {1, 2, 5, 47, 48, 49, 63, 64, 65, 97, 300}) {
        for (gka_window w : {full, causal, gka_window{9, 0}}) {
            auto p = make_problem({2, T, 2, 64}, w, {0.5f, 2.0f}, 1.5, 1000 + T);
            gka_test::for_each_family_and_form([&] { check_problem(p); });
        }
    }
}

TEST_CASE("one head and batch: the backward's key bands in groups, summed apart", "[kernels]") {
    for (int64_t D : {48, 64}) {  // the any-head-dim kernels and a specialized one
        for (int64_t T : {1, 2, 47, 48, 49, 97, 300}) {
            for (gka_window w : {full, causal, gka_window{9, 0}}) {
                auto p = make_problem({1, T, 1, D}, w, {0.8f}, 1.5, 3000 + T);
                gka_test::for_each_family_and_form([&] { check_problem(p); });
            }
        }
    }
}

TEST_CASE("long sequences: causal and a 256-token window at T=2048", "[kernels][long]") {
    for (gka_window w : {causal, gka_window{255, 0}}) {
        auto p = make_problem({1, 2048, 1, 64}, w, {1.0f}, 2.0, 2048);
        gka_test::for_each_family_and_form([&] { check_problem(p); });
    }
    auto p = make_problem({1, 1024, 2, 128}, full, {0.1f, 3.0f}, 1.0, 1024);
    gka_test::for_each_family_and_form([&] { check_problem(p); });
}

TEST_CASE("kernel functions: head dims, windows, lengths, sharp and smooth heads", "[kernels][kernel-functions]") {
    for (int64_t D : {1, 5, 64, 128}) {
        for (gka_window w : {full, causal, gka_window{9, 0}, gka_window{3, 7}, gka_window{0, 0}}) {
            for (double spread : {0.3, 4.0}) {
                check_other_kernels(make_problem({2, 41, 2, D}, w, {0.05f, 2.0f}, spread, 500 + D));
            }
        }
    }
    for (int64_t T : {1, 47, 48, 49, 300}) {
        check_other_kernels(make_problem({1, T, 2, 64}, causal, {0.7f, 3.0f}, 1.5, 600 + T));
    }
}

TEST_CASE("kernel functions: repeated tokens, and the Laplace's subgradient at d2 = 0", "[kernels][kernel-functions]") {
    for (int64_t D : {1, 8, 64}) {
        // Every token one of 5: exact duplicates, whose pairs' pull is 0 (Laplace).
        gka_ref::Problem repeated = make_problem({1, 45, 2, D}, causal, {0.1f, 1.0f}, 1.5, 700 + D);
        for (int64_t t = 5; t < 45; t++)
            for (int64_t k = 0; k < 2 * D; k++) repeated.x[t * 2 * D + k] = repeated.x[(t % 5) * 2 * D + k];
        check_other_kernels(repeated);
        // Tokens a hair apart (1e-5 of their size): the Laplace's pull, 1 / (sigma |x_i - x_j|), is large.
        gka_ref::Problem near = make_problem({1, 40, 1, D}, full, {1.0f}, 1.0, 800 + D);
        for (int64_t t = 1; t < 40; t++)
            for (int64_t k = 0; k < D; k++) near.x[t * D + k] = near.x[k] * (1.0f + 1e-5f * float(t % 7));
        check_other_kernels(near);
    }
}

TEST_CASE("kernel functions: long full-window rows, the Cauchy's heavy tails", "[kernels][kernel-functions][long]") {
    gka_ref::Problem p = make_problem({1, 4096, 1, 64}, full, {1.0f}, 2.0, 4096);
    gka_test::for_each_kernel([&](const char *kernel) {
        p.kernel = kernel;
        gka_test::for_each_family([&] {
            std::vector<float> y(p.size()), lse(p.rows());
            gka_call c = gka_test::described(p);
            c.y = y.data(), c.lse = lse.data();
            REQUIRE(gka_run_forward(&c) == GKA_OK);
            const double worst = gka_test::long_row_error(p, y);
            INFO(kernel << ": worst error / max |y| of a row " << worst << " (" << gka_last_kernel() << ")");
            CHECK(worst < gka_test::long_row_bound);
        });
    });
}

TEST_CASE("kernel functions: the setting is the calling thread's, and names are checked",
          "[kernels][kernel-functions]") {
    CHECK(std::string(gka_kernel()) == "gaussian");
    CHECK(std::string(gka_kernels()) == "gaussian,laplace,cauchy");
    REQUIRE(gka_set_kernel("laplace") == GKA_OK);
    CHECK(std::string(gka_kernel()) == "laplace");
    std::string other_thread;
    std::thread([&] { other_thread = gka_kernel(); }).join();
    CHECK(other_thread == "gaussian");
    CHECK(gka_set_kernel("epanechnikov") == GKA_ERR_INVALID_ARGUMENT);
    CHECK(std::string(gka_last_error()) == "unknown kernel 'epanechnikov' (kernels: gaussian,laplace,cauchy)");
    CHECK(std::string(gka_kernel()) == "laplace");  // unchanged by a refused name
    REQUIRE(gka_set_kernel(nullptr) == GKA_OK);
    CHECK(std::string(gka_kernel()) == "gaussian");
    // The variants' names, and the other kernels' passes name their direct variant.
    for (const std::string &family : gka_test::compiled_families()) {
        const gka_shape shape{1, 64, 1, 64};
        for (const char *pass : {"forward", "backward", "forward_bf16", "decode", "forward_chunk", "backward_chunk"}) {
            for (const char *kernel : {"laplace", "cauchy"}) {
                const std::string named = std::string(pass) + "_" + kernel;
                const char *variant = gka_kernel_variant(family.c_str(), named.c_str(), shape, causal, nullptr);
                INFO(family << " " << named);
                REQUIRE(variant != nullptr);
                CHECK(std::string(variant).find(std::string("_direct_") + kernel) != std::string::npos);
            }
        }
        CHECK(gka_kernel_variant(family.c_str(), "forward_origin_laplace", shape, causal, nullptr) == nullptr);
    }
}
