// The call description (gka.h, gka_call): the three compute calls compute
// what the description says and nothing else (no thread's kernel function, no
// process's score form), the older calls give their bits, zero sizes give the
// exact results after the usual checks, and the description's size and fields
// are checked before anything is written. (The accuracy contract runs through
// gka_run_forward and gka_run_backward in every check_problem.)
#include <catch2/catch.hpp>
#include <cstddef>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "bfloat16.h"
#include "check.h"

using gka_ref::make_problem;
using gka_ref::Problem;

namespace {

constexpr float sentinel = -12345.0f;

// A problem's outputs, forward and backward, through a description or through
// the older calls; with bfloat16 features where `bf16`.
struct Results {
    std::vector<float> y, lse, dx, dsigma;
    std::string forward_kernel, backward_kernel;
    bool operator==(const Results &o) const {
        auto same = [](const std::vector<float> &a, const std::vector<float> &b) {
            return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
        };
        return same(y, o.y) && same(lse, o.lse) && same(dx, o.dx) && same(dsigma, o.dsigma) &&
               forward_kernel == o.forward_kernel && backward_kernel == o.backward_kernel;
    }
};

// bfloat16 vectors travel in the float vectors' first half (their bits).
Results run_described(const Problem &p, bool bf16) {
    Results r{std::vector<float>(p.size(), sentinel), std::vector<float>(p.rows(), sentinel),
              std::vector<float>(p.size(), sentinel), std::vector<float>(p.shape.heads, sentinel)};
    const std::vector<gka_bf16> x = gka_test::to_bf16(p.x), dy = gka_test::to_bf16(p.dy);
    gka_call c = gka_test::described(p);
    if (bf16) c.dtype = GKA_BFLOAT16, c.x = x.data(), c.dy = dy.data();
    c.y = r.y.data(), c.lse = r.lse.data(), c.dx = r.dx.data(), c.dsigma = r.dsigma.data();
    REQUIRE(gka_run_forward(&c) == GKA_OK);
    r.forward_kernel = gka_last_kernel();
    REQUIRE(gka_run_backward(&c) == GKA_OK);
    r.backward_kernel = gka_last_kernel();
    return r;
}

Results run_older(const Problem &p, bool bf16) {
    Results r{std::vector<float>(p.size(), sentinel), std::vector<float>(p.rows(), sentinel),
              std::vector<float>(p.size(), sentinel), std::vector<float>(p.shape.heads, sentinel)};
    const gka_test::KernelOf kernel(p);
    if (bf16) {
        const std::vector<gka_bf16> x = gka_test::to_bf16(p.x), dy = gka_test::to_bf16(p.dy);
        auto *y = reinterpret_cast<gka_bf16 *>(r.y.data()), *dx = reinterpret_cast<gka_bf16 *>(r.dx.data());
        REQUIRE(gka_forward_bf16(p.shape, p.window, x.data(), p.sigma.data(), y, r.lse.data()) == GKA_OK);
        r.forward_kernel = gka_last_kernel();
        REQUIRE(gka_backward_bf16(p.shape, p.window, x.data(), p.sigma.data(), y, r.lse.data(), dy.data(), dx,
                                  r.dsigma.data()) == GKA_OK);
    } else {
        REQUIRE(gka_forward(p.shape, p.window, p.x.data(), p.sigma.data(), r.y.data(), r.lse.data()) == GKA_OK);
        r.forward_kernel = gka_last_kernel();
        REQUIRE(gka_backward(p.shape, p.window, p.x.data(), p.sigma.data(), r.y.data(), r.lse.data(), p.dy.data(),
                             r.dx.data(), r.dsigma.data()) == GKA_OK);
    }
    r.backward_kernel = gka_last_kernel();
    return r;
}

}  // namespace

TEST_CASE("calls: the older calls give the description's bits, with the thread's kernel and the process's form",
          "[call]") {
    gka_test::for_each_kernel([](const char *kernel) {
        gka_test::for_each_family_and_form([&] {
            for (bool bf16 : {false, true}) {
                Problem p = make_problem({2, 37, 3, 20}, {-1, 0}, {0.7f, 1.3f, 2.1f}, 1.5, 11);
                p.kernel = kernel;
                INFO((bf16 ? "bfloat16" : "float32") << ", score form " << gka_score_form());
                const Results described = run_described(p, bf16), older = run_older(p, bf16);
                INFO("kernels " << described.forward_kernel << ", " << described.backward_kernel);
                CHECK(described == older);
            }
        });
    });
}

TEST_CASE("calls: the description alone says what is computed, whatever the thread's and process's settings",
          "[call]") {
    const Problem p = make_problem({1, 40, 2, 16}, {-1, -1}, {0.8f, 1.6f}, 1.5, 5);
    for (const char *form : {"auto", "centred"}) {
        REQUIRE(gka_set_score_form(form) == GKA_OK);
        const Results gaussian = run_described(p, false);
        CHECK(gaussian.forward_kernel.find("laplace") == std::string::npos);
        // Another kernel function and score form set for this thread and process:
        // a description of the Gaussian under `form` gives the same bits.
        REQUIRE(gka_set_kernel("laplace") == GKA_OK);
        REQUIRE(gka_set_score_form("direct") == GKA_OK);
        gka_call c = gka_test::described(p);
        c.scores = std::string(form) == "auto" ? GKA_SCORES_AUTO : GKA_SCORES_CENTRED;
        Results again{std::vector<float>(p.size()), std::vector<float>(p.rows()), std::vector<float>(p.size()),
                      std::vector<float>(2)};
        c.y = again.y.data(), c.lse = again.lse.data(), c.dx = again.dx.data(), c.dsigma = again.dsigma.data();
        REQUIRE(gka_run_forward(&c) == GKA_OK);
        again.forward_kernel = gka_last_kernel();
        REQUIRE(gka_run_backward(&c) == GKA_OK);
        again.backward_kernel = gka_last_kernel();
        REQUIRE(gka_set_kernel(nullptr) == GKA_OK);
        REQUIRE(gka_set_score_form(nullptr) == GKA_OK);
        INFO("score form " << form << ": " << gaussian.forward_kernel << " against " << again.forward_kernel);
        CHECK(gaussian == again);
        CHECK(again.forward_kernel.find("direct") == std::string::npos);
    }
    // And the description's kernel function is the one that runs.
    gka_call c = gka_test::described(p);
    c.kernel = GKA_CAUCHY;
    std::vector<float> y(p.size()), lse(p.rows());
    c.y = y.data(), c.lse = lse.data();
    REQUIRE(gka_run_forward(&c) == GKA_OK);
    CHECK(std::string(gka_last_kernel()).find("cauchy") != std::string::npos);
}

namespace {

// log of the number of keys at positions first..last within (left, right) of `position`.
float log_keys(int64_t position, int64_t first, int64_t last, gka_window w) {
    if (w.left >= 0) first = std::max(first, position - w.left);
    if (w.right >= 0) last = std::min(last, position + w.right);
    return float(std::log(double(std::max<int64_t>(0, last - first + 1))));
}

}  // namespace

TEST_CASE("calls: zero sizes give the exact results after the usual checks", "[call]") {
    const std::vector<float> sigma{0.5f, 2.0f};
    for (const gka_window w : {gka_window{-1, 0}, gka_window{-1, -1}, gka_window{2, 0}, gka_window{1, 3}}) {
        INFO("window (" << w.left << ", " << w.right << ")");
        // D = 0: every score is 0, lse the log of each row's key count.
        gka_call c = gka_call_init();
        c.shape = {2, 7, 2, 0}, c.window = w, c.sigma = sigma.data();
        std::vector<float> lse(2 * 2 * 7, sentinel), dsigma(2, sentinel);
        c.lse = lse.data(), c.dsigma = dsigma.data();
        REQUIRE(gka_run_forward(&c) == GKA_OK);
        CHECK(std::string(gka_last_kernel()).empty());
        for (int64_t b = 0; b < 2; b++)
            for (int64_t h = 0; h < 2; h++)
                for (int64_t i = 0; i < 7; i++) CHECK(lse[(b * 2 + h) * 7 + i] == log_keys(i, 0, 6, w));
        REQUIRE(gka_run_backward(&c) == GKA_OK);
        CHECK(dsigma == std::vector<float>{0.0f, 0.0f});

        // Varlen, D = 0: each token's keys are its sequence's (one empty).
        const int64_t cu[] = {0, 3, 3, 7};
        c.cu_seqlens = cu, c.shape = {3, 7, 2, 0};
        lse.assign(2 * 7, sentinel);
        REQUIRE(gka_run_forward(&c) == GKA_OK);
        for (int64_t h = 0; h < 2; h++)
            for (int64_t t = 0; t < 7; t++) {
                const int64_t first = t < 3 ? 0 : 3, last = t < 3 ? 2 : 6;
                CHECK(lse[h * 7 + t] == log_keys(t, first, last, w));
            }
        c.cu_seqlens = nullptr;

        // A chunk with D = 0: the keys at positions 4..8 for queries at 2..6.
        const gka_chunk chunk{2, 4, 5};
        c.chunk = &chunk, c.shape = {1, 5, 2, 0};
        lse.assign(2 * 5, sentinel);
        REQUIRE(gka_run_forward(&c) == GKA_OK);
        for (int64_t h = 0; h < 2; h++)
            for (int64_t i = 0; i < 5; i++) CHECK(lse[h * 5 + i] == log_keys(2 + i, 4, 8, w));
        c.chunk = nullptr;
    }
    SECTION("a chunk without keys, or without a pair in its window: y = 0, lse = -inf, gradients 0") {
        const Problem p = make_problem({1, 4, 2, 8}, {-1, 0}, sigma, 1.0, 3);
        for (const gka_chunk chunk : {gka_chunk{0, 0, 0}, gka_chunk{0, 9, 3}}) {
            gka_call c = gka_test::described(p);
            c.chunk = &chunk, c.keys = p.x.data();
            std::vector<float> y(p.size(), sentinel), lse(p.rows(), sentinel), dx(p.size(), sentinel),
                dx_keys(2 * 8 * chunk.key_len, sentinel), dsigma(2, sentinel);
            c.y = y.data(), c.lse = lse.data(), c.dx = dx.data(), c.dx_keys = dx_keys.data(), c.dsigma = dsigma.data();
            REQUIRE(gka_run_forward(&c) == GKA_OK);
            CHECK(y == std::vector<float>(p.size(), 0.0f));
            CHECK(lse == std::vector<float>(p.rows(), -std::numeric_limits<float>::infinity()));
            c.lse = lse.data();
            REQUIRE(gka_run_backward(&c) == GKA_OK);
            CHECK(dx == std::vector<float>(p.size(), 0.0f));
            CHECK(dx_keys == std::vector<float>(dx_keys.size(), 0.0f));
            CHECK(dsigma == std::vector<float>{0.0f, 0.0f});
            CHECK(gka_chunk_has_pairs(p.shape, chunk, p.window) == 0);
        }
        CHECK(gka_chunk_has_pairs(p.shape, {0, 0, 4}, p.window) == 1);
    }
    SECTION("decode with D = 0: each new token's keys are the cached ones in its window and itself") {
        const int64_t lens[] = {0, 5};
        for (const gka_window w : {gka_window{-1, 0}, gka_window{2, 0}}) {
            gka_call c = gka_call_init();
            c.shape = {2, 3, 2, 0}, c.window = w, c.sigma = sigma.data();
            c.cache_capacity = 8, c.cache_lens = lens;
            std::vector<float> lse(2 * 2 * 3, sentinel);
            c.lse = lse.data();
            REQUIRE(gka_run_decode(&c) == GKA_OK);
            for (int64_t b = 0; b < 2; b++)
                for (int64_t h = 0; h < 2; h++)
                    for (int64_t q = 0; q < 3; q++) {
                        const int64_t position = lens[b] + q;
                        CHECK(lse[(b * 2 + h) * 3 + q] == log_keys(position, 0, position, w));
                    }
        }
    }
    SECTION("no rows: nothing to write, and NULL tensors taken") {
        for (const gka_shape s : {gka_shape{0, 5, 2, 4}, gka_shape{1, 0, 2, 4}, gka_shape{1, 5, 0, 4}}) {
            gka_call c = gka_call_init();
            c.shape = s, c.sigma = s.heads ? sigma.data() : nullptr;
            std::vector<float> dsigma(2, sentinel);
            c.dsigma = s.heads ? dsigma.data() : nullptr;
            CHECK(gka_run_forward(&c) == GKA_OK);
            CHECK(gka_run_backward(&c) == GKA_OK);
            CHECK(dsigma == (s.heads ? std::vector<float>{0.0f, 0.0f} : std::vector<float>(2, sentinel)));
        }
    }
    SECTION("the usual checks come first") {
        gka_call c = gka_call_init();
        std::vector<float> lse(14, sentinel), bad_sigma{0.5f, std::nanf("")};
        c.shape = {1, 7, 2, 0}, c.sigma = sigma.data(), c.lse = lse.data();
        c.window = {-2, 0};
        CHECK(gka_run_forward(&c) == GKA_ERR_INVALID_ARGUMENT);
        c.window = {-1, 0}, c.sigma = bad_sigma.data();
        CHECK(gka_run_forward(&c) == GKA_ERR_INVALID_ARGUMENT);
        CHECK_THAT(gka_last_error(), Catch::Contains("sigma[1]"));
        c.sigma = sigma.data(), c.lse = nullptr;
        CHECK(gka_run_forward(&c) == GKA_ERR_INVALID_ARGUMENT);
        CHECK_THAT(gka_last_error(), Catch::Contains("lse is NULL"));
        c.lse = lse.data();
        const int64_t unordered[] = {0, 5, 3};
        c.cu_seqlens = unordered, c.shape = {2, 3, 2, 0};
        CHECK(gka_run_forward(&c) == GKA_ERR_INVALID_ARGUMENT);
        CHECK_THAT(gka_last_error(), Catch::Contains("non-decreasing"));
        c.cu_seqlens = nullptr, c.shape = {1, 1, 2, 0};
        const int64_t lens[] = {0};
        c.cache_capacity = 2, c.cache_lens = lens, c.window = {4, 0};
        CHECK(gka_run_decode(&c) == GKA_ERR_INVALID_ARGUMENT);
        CHECK_THAT(gka_last_error(), Catch::Contains("capacity >= 4"));
        CHECK(lse == std::vector<float>(14, sentinel));
    }
}

TEST_CASE("calls: the description's size and fields are checked before anything is written", "[call]") {
    const Problem p = make_problem({1, 6, 2, 8}, {-1, 0}, {0.9f, 1.1f}, 1.0, 7);
    std::vector<float> y(p.size(), sentinel), lse(p.rows(), sentinel);
    auto refused = [&](const gka_call &c, gka_status status, const std::string &mention) {
        CHECK(gka_run_forward(&c) == status);
        CHECK_THAT(gka_last_error(), Catch::Contains(mention));
        CHECK(y == std::vector<float>(p.size(), sentinel));
        CHECK(lse == std::vector<float>(p.rows(), sentinel));
    };
    gka_call c = gka_test::described(p);
    c.y = y.data(), c.lse = lse.data();
    CHECK(gka_run_forward(nullptr) == GKA_ERR_INVALID_ARGUMENT);

    // A caller compiled against a newer gka.h: fields past this library's,
    // unset, are taken; set, refused.
    struct Newer {
        gka_call known;
        int64_t later_field;
    } newer{c, 0};
    newer.known.size = sizeof newer;
    CHECK(gka_run_forward(&newer.known) == GKA_OK);
    y.assign(p.size(), sentinel), lse.assign(p.rows(), sentinel);
    newer.later_field = 1;
    refused(newer.known, GKA_ERR_UNSUPPORTED, "fields past the");
    gka_call small = c;
    small.size = offsetof(gka_call, features) - 8;  // short of the first version's fields
    refused(small, GKA_ERR_INVALID_ARGUMENT, "gka_call_init");

    // A C caller may store any int in an enum field (C++ may not cast one past
    // the enum's range: the bits are copied).
    auto set = [](auto &field, int value) { std::memcpy(&field, &value, sizeof value); };
    gka_call bad = c;
    set(bad.dtype, 7);
    refused(bad, GKA_ERR_INVALID_ARGUMENT, "dtype = 7");
    bad = c, set(bad.kernel, 3);
    refused(bad, GKA_ERR_INVALID_ARGUMENT, "kernel = 3");
    bad = c, set(bad.scores, -1);
    refused(bad, GKA_ERR_INVALID_ARGUMENT, "scores = -1");
    bad = c, set(bad.device, 2);
    refused(bad, GKA_ERR_INVALID_ARGUMENT, "device = 2");

    // The batch layouts: one at a time, and each pass's own.
    const int64_t cu[] = {0, 6};
    const gka_chunk chunk{0, 0, 6};
    bad = c, bad.cu_seqlens = cu, bad.chunk = &chunk, bad.keys = p.x.data();
    refused(bad, GKA_ERR_INVALID_ARGUMENT, "not both");
    bad = c, bad.cache_capacity = 8;
    refused(bad, GKA_ERR_INVALID_ARGUMENT, "gka_run_decode's");
    bad = c, bad.chunk = &chunk, bad.keys = p.x.data(), bad.dtype = GKA_BFLOAT16;
    refused(bad, GKA_ERR_UNSUPPORTED, "float32");
    bad = c, bad.chunk = &chunk;
    refused(bad, GKA_ERR_INVALID_ARGUMENT, "keys is NULL");
    bad = c, bad.keys = p.x.data();
    refused(bad, GKA_ERR_INVALID_ARGUMENT, "a chunk's");
    // Extents past the kernels' indexing, features or not (D = 0 leaves lse's rows).
    bad = c, bad.shape = {int64_t(1) << 31, 1, 2, 8};
    refused(bad, GKA_ERR_UNSUPPORTED, "each extent must be at most 2^31 - 1");
    bad = c, bad.shape = {int64_t(1) << 20, int64_t(1) << 20, 2, 0};
    refused(bad, GKA_ERR_UNSUPPORTED, "at most 2^31 - 1");
    bad = c, bad.cu_seqlens = cu;
    CHECK(gka_run_decode(&bad) == GKA_ERR_INVALID_ARGUMENT);
    CHECK_THAT(gka_last_error(), Catch::Contains("cu_seqlens and chunk must be NULL"));
}

TEST_CASE("calls: varlen, chunks and decode through the description give the older calls' bits", "[call]") {
    gka_test::for_each_family([] {
        const Problem p = make_problem({1, 30, 2, 12}, {-1, 0}, {0.8f, 1.4f}, 1.5, 21);
        const int64_t cu[] = {0, 11, 30};
        const gka_shape packed{2, 30, 2, 12};
        std::vector<float> y(p.size()), lse(p.rows()), y_old(p.size()), lse_old(p.rows());
        gka_call c = gka_test::described(p);
        c.shape = packed, c.cu_seqlens = cu, c.y = y.data(), c.lse = lse.data();
        REQUIRE(gka_run_forward(&c) == GKA_OK);
        REQUIRE(gka_forward_varlen(packed, cu, p.window, p.x.data(), p.sigma.data(), y_old.data(), lse_old.data()) ==
                GKA_OK);
        CHECK(y == y_old);
        CHECK(lse == lse_old);
        std::vector<float> dx(p.size()), dsigma(2), dx_old(p.size()), dsigma_old(2);
        c.dx = dx.data(), c.dsigma = dsigma.data();
        REQUIRE(gka_run_backward(&c) == GKA_OK);
        REQUIRE(gka_backward_varlen(packed, cu, p.window, p.x.data(), p.sigma.data(), y.data(), lse.data(),
                                    p.dy.data(), dx_old.data(), dsigma_old.data()) == GKA_OK);
        CHECK(dx == dx_old);
        CHECK(dsigma == dsigma_old);

        // Queries 20..29 against keys 0..19.
        const gka_shape queries{1, 10, 2, 12};
        const gka_chunk chunk{20, 0, 20};
        const float *q = p.x.data() + 20 * 24;
        c = gka_test::described(p);
        c.shape = queries, c.chunk = &chunk, c.x = q, c.keys = p.x.data(), c.y = y.data(), c.lse = lse.data();
        REQUIRE(gka_run_forward(&c) == GKA_OK);
        REQUIRE(gka_forward_chunk(queries, chunk, p.window, q, p.x.data(), p.sigma.data(), y_old.data(),
                                  lse_old.data()) == GKA_OK);
        CHECK(std::vector<float>(y.begin(), y.begin() + 240) == std::vector<float>(y_old.begin(), y_old.begin() + 240));
        CHECK(std::vector<float>(lse.begin(), lse.begin() + 20) ==
              std::vector<float>(lse_old.begin(), lse_old.begin() + 20));

        // Decode: 2 new tokens after 28 cached.
        const int64_t lens[] = {28};
        std::vector<float> cache(p.x.begin(), p.x.end()), cache_old = cache;
        const gka_shape step{1, 2, 2, 12};
        const float *fresh = p.x.data() + 28 * 24;
        c = gka_test::described(p);
        c.shape = step, c.x = fresh, c.cache_capacity = 30, c.cache_lens = lens, c.cache = cache.data();
        c.y = y.data(), c.lse = lse.data();
        REQUIRE(gka_run_decode(&c) == GKA_OK);
        REQUIRE(gka_decode(step, 30, p.window, fresh, p.sigma.data(), lens, cache_old.data(), y_old.data(),
                           lse_old.data()) == GKA_OK);
        CHECK(std::vector<float>(y.begin(), y.begin() + 48) == std::vector<float>(y_old.begin(), y_old.begin() + 48));
        CHECK(std::vector<float>(lse.begin(), lse.begin() + 4) == std::vector<float>(lse_old.begin(), lse_old.begin() + 4));
        CHECK(cache == cache_old);
    });
}
