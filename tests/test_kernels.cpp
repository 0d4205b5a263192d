// Every kernel, on every CPU family this host runs and in both score forms,
// against the double reference by the accuracy contract.
#include <catch2/catch.hpp>

#include "check.h"

using gka_ref::make_problem;
using gka_test::check_problem;

namespace {

const gka_window full{-1, -1}, causal{-1, 0};

}  // namespace

TEST_CASE("head dims, near-uniform and near-one-hot attention, sigmas 0.05 to 100", "[kernels]") {
    for (int64_t D : {1, 3, 16, 48, 64, 80, 128}) {
        for (double spread : {0.3, 4.0}) {
            auto p = make_problem({2, 37, 3, D}, causal, {0.05f, 1.3f, 100.0f}, spread, 100 + D);
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
