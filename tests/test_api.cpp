// The C ABI's contract: validation that touches no output, clear messages,
// unsupported shapes, determinism, concurrent callers, family and thread control,
// the float mode the kernels run in.
#include <algorithm>
#include <cfenv>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>

#include "check.h"

namespace {

constexpr float sentinel = -12345.0f;

struct Call {
    gka_ref::Problem p = gka_ref::make_problem({2, 9, 3, 5}, {-1, 0}, {0.5f, 1.0f, 2.0f}, 1.0, 3);
    std::vector<float> y = std::vector<float>(p.size(), sentinel), lse = std::vector<float>(p.rows(), sentinel);
    std::vector<float> dx = std::vector<float>(p.size(), sentinel), dsigma = std::vector<float>(3, sentinel);

    gka_status forward() { return gka_forward(p.shape, p.window, p.x.data(), p.sigma.data(), y.data(), lse.data()); }
    gka_status backward() {
        return gka_backward(p.shape, p.window, p.x.data(), p.sigma.data(), y.data(), lse.data(), p.dy.data(),
                            dx.data(), dsigma.data());
    }
    bool outputs_untouched() const {
        for (const auto *v : {&y, &lse, &dx, &dsigma})
            for (float f : *v)
                if (f != sentinel) return false;
        return true;
    }
};

// Both entry points refuse `call` with `status`, naming `mention`, touching nothing.
void expect_refused(Call call, gka_status status, const std::string &mention) {
    CHECK(call.forward() == status);
    CHECK_THAT(gka_last_error(), Catch::Contains(mention));
    CHECK(call.backward() == status);
    CHECK_THAT(gka_last_error(), Catch::Contains(mention));
    CHECK(call.outputs_untouched());
}

}  // namespace

TEST_CASE("bad arguments are refused with a message and untouched outputs", "[api]") {
    SECTION("dimensions < 1") {
        for (int k = 0; k < 4; k++) {
            for (int64_t bad : {0, -3}) {
                Call c;
                (&c.p.shape.batch)[k] = bad;
                INFO("dimension " << k << " = " << bad);
                expect_refused(c, GKA_ERR_INVALID_ARGUMENT, "every dimension must be >= 1");
            }
        }
    }
    SECTION("window bounds < -1") {
        Call c;
        c.p.window = {-2, 0};
        expect_refused(c, GKA_ERR_INVALID_ARGUMENT, "left and right must be >= -1");
        c.p.window = {3, -7};
        expect_refused(c, GKA_ERR_INVALID_ARGUMENT, "left and right must be >= -1");
    }
    SECTION("sigma <= 0, NaN or infinite") {
        for (float bad : {0.0f, -1.0f, NAN, INFINITY, -INFINITY}) {
            Call c;
            c.p.sigma[2] = bad;
            expect_refused(c, GKA_ERR_INVALID_ARGUMENT, "sigma[2]");
        }
    }
    SECTION("null pointers") {
        Call c;
        CHECK(gka_forward(c.p.shape, c.p.window, nullptr, c.p.sigma.data(), c.y.data(), c.lse.data()) ==
              GKA_ERR_INVALID_ARGUMENT);
        CHECK_THAT(gka_last_error(), Catch::Contains("x is NULL"));
        CHECK(gka_forward(c.p.shape, c.p.window, c.p.x.data(), c.p.sigma.data(), c.y.data(), nullptr) ==
              GKA_ERR_INVALID_ARGUMENT);
        CHECK_THAT(gka_last_error(), Catch::Contains("lse is NULL"));
        CHECK(gka_backward(c.p.shape, c.p.window, c.p.x.data(), c.p.sigma.data(), c.y.data(), c.lse.data(),
                           nullptr, c.dx.data(), c.dsigma.data()) == GKA_ERR_INVALID_ARGUMENT);
        CHECK_THAT(gka_last_error(), Catch::Contains("dy is NULL"));
        CHECK(gka_backward(c.p.shape, c.p.window, c.p.x.data(), c.p.sigma.data(), c.y.data(), c.lse.data(),
                           c.p.dy.data(), c.dx.data(), nullptr) == GKA_ERR_INVALID_ARGUMENT);
        CHECK_THAT(gka_last_error(), Catch::Contains("dsigma is NULL"));
        CHECK(c.outputs_untouched());
    }
    SECTION("a good call clears the last error") {
        Call c;
        c.p.sigma[0] = -1;
        CHECK(c.forward() == GKA_ERR_INVALID_ARGUMENT);
        c.p.sigma[0] = 1;
        CHECK(c.forward() == GKA_OK);
        CHECK(std::string(gka_last_error()).empty());
    }
}

TEST_CASE("a zero dimension is refused alike, whichever it is, by every pass", "[api]") {
    // gka.h: an empty call is the caller's to skip (gka_torch gives its results
    // without a kernel). B, T, H and D alike; the CUDA calls validate on the
    // host before looking for a device, so they refuse alike without one.
    // (A varlen call's sequences may be empty, a total of 0 too: test_varlen.cpp.)
    const std::vector<float> in(256, 1.0f), sigma(4, 1.0f);
    std::vector<float> out(256, sentinel);
    const int64_t lens[2] = {0, 0}, cu[3] = {0, 2, 4};
    const float *x = in.data(), *s = sigma.data();
    float *o = out.data();
    auto refused = [](gka_status status, const char *mention) {
        CHECK(status == GKA_ERR_INVALID_ARGUMENT);
        CHECK_THAT(gka_last_error(), Catch::Contains(mention));
    };
    const char *every = "every dimension must be >= 1";
    for (int k = 0; k < 4; k++) {
        gka_shape shape{2, 3, 4, 5};
        (&shape.batch)[k] = 0;
        INFO("dimension " << k << " = 0");
        refused(gka_forward(shape, {-1, 0}, x, s, o, o), every);
        refused(gka_backward(shape, {-1, 0}, x, s, x, x, x, o, o), every);
        refused(gka_decode(shape, 8, {-1, 0}, x, s, lens, o, o, o), every);
        refused(gka_forward_chunk(shape, {0, 0, 3}, {-1, 0}, x, x, s, o, o), every);
        refused(gka_backward_chunk(shape, {0, 0, 3}, {-1, 0}, x, x, s, x, x, x, o, o, o), every);
        refused(gka_forward_cuda(shape, {-1, 0}, x, s, o, o, nullptr), every);
        refused(gka_decode_cuda(shape, 8, {-1, 0}, x, s, lens, o, o, o, nullptr), every);
        if (k != 1) {  // no sequences, heads or features: refused in varlen too
            shape.seq_len = 4;
            refused(gka_forward_varlen(shape, cu, {-1, 0}, x, s, o, o), k == 0 ? "0 sequences" : every);
        }
    }
    CHECK(out == std::vector<float>(256, sentinel));
}

TEST_CASE("shapes beyond 32-bit indexing are unsupported, not overflowed", "[api]") {
    Call c;
    c.p.shape = {1, int64_t(1) << 26, 1, 64};  // 2^32 elements
    c.p.sigma = {1.0f};
    expect_refused(c, GKA_ERR_UNSUPPORTED, "at most 2^31 - 1");
    c.p.shape = {int64_t(1) << 40, int64_t(1) << 40, 1, 1};  // overflows int64 when multiplied
    expect_refused(c, GKA_ERR_UNSUPPORTED, "at most 2^31 - 1");
}

TEST_CASE("windows wider than the sequence mean unbounded", "[api]") {
    Call a, b;
    b.p.window = {int64_t(1) << 40, 0};
    REQUIRE(a.forward() == GKA_OK);
    REQUIRE(b.forward() == GKA_OK);
    CHECK(std::memcmp(a.y.data(), b.y.data(), a.y.size() * sizeof(float)) == 0);
}

TEST_CASE("repeated calls are bitwise identical, on every family and thread count", "[api]") {
    const int threads = gka_num_threads();
    // Heads enough for the threads, and one head (whose backward sums key bands in groups).
    const gka_ref::Problem problems[] = {
        gka_ref::make_problem({2, 333, 4, 64}, {-1, 0}, {0.5f, 1.0f, 2.0f, 4.0f}, 1.5, 9),
        gka_ref::make_problem({1, 333, 1, 64}, {-1, 0}, {1.0f}, 1.5, 10)};
    for (const std::string &family : gka_test::runnable_families()) {
        REQUIRE(gka_set_cpu_family(family.c_str()) == GKA_OK);
        INFO("family " << family);
        for (const gka_ref::Problem &p : problems) {
            gka_test::Outputs first = gka_test::run_kernels(p), second = gka_test::run_kernels(p);
            REQUIRE(gka_set_num_threads(1) == GKA_OK);
            gka_test::Outputs one_thread = gka_test::run_kernels(p);
            REQUIRE(gka_set_num_threads(threads) == GKA_OK);
            INFO("heads " << p.shape.heads);
            for (const gka_test::Outputs *o : {&second, &one_thread}) {
                CHECK(first.y == o->y);
                CHECK(first.lse == o->lse);
                CHECK(first.dx == o->dx);
                CHECK(first.dsigma == o->dsigma);
            }
        }
    }
    REQUIRE(gka_set_cpu_family(nullptr) == GKA_OK);
}

TEST_CASE("four threads calling at once get what one thread gets", "[api]") {
    std::vector<gka_ref::Problem> problems;
    std::vector<gka_test::Outputs> alone;
    // Intermediates of more than 1 MB each, which libgka's block cache (shared
    // by every thread) keeps and hands out again.
    for (int k = 0; k < 4; k++) {
        problems.push_back(gka_ref::make_problem({1, 1100 + 300 * k, 4, 64}, {k == 0 ? -1 : 31, 0},
                                                 {1.0f, 0.5f, 2.0f, 8.0f}, 1.0, k));
        alone.push_back(gka_test::run_kernels(problems.back()));
    }
    std::vector<gka_test::Outputs> together(4);
    std::vector<gka_status> status(4);
    std::vector<std::thread> threads;
    for (int k = 0; k < 4; k++) {
        threads.emplace_back([&, k] {
            for (int repeat = 0; repeat < 5; repeat++) {
                const gka_ref::Problem &p = problems[k];
                gka_test::Outputs &o = together[k];
                o = {std::vector<float>(p.size()), std::vector<float>(p.rows()), std::vector<float>(p.size()),
                     std::vector<float>(4)};
                status[k] = gka_forward(p.shape, p.window, p.x.data(), p.sigma.data(), o.y.data(), o.lse.data());
                if (status[k] != GKA_OK) return;
                status[k] = gka_backward(p.shape, p.window, p.x.data(), p.sigma.data(), o.y.data(), o.lse.data(),
                                         p.dy.data(), o.dx.data(), o.dsigma.data());
                if (status[k] != GKA_OK) return;
            }
        });
    }
    for (auto &t : threads) t.join();
    for (int k = 0; k < 4; k++) {
        INFO("thread " << k);
        REQUIRE(status[k] == GKA_OK);
        CHECK(together[k].y == alone[k].y);
        CHECK(together[k].dx == alone[k].dx);
        CHECK(together[k].dsigma == alone[k].dsigma);
    }
}

TEST_CASE("CPU family control", "[api]") {
    CHECK(gka_set_cpu_family("sse2") == GKA_ERR_INVALID_ARGUMENT);
    CHECK_THAT(gka_last_error(), Catch::Contains("unknown CPU family 'sse2'"));
    CHECK_THAT(gka_last_error(), Catch::Contains(std::string("(families: ") + gka_cpu_families() + ")"));
    // Each compiled family has its kernels, and the last, the baseline, runs here.
    const std::vector<std::string> compiled = gka_test::compiled_families();
    REQUIRE(!compiled.empty());
    for (const std::string &f : compiled)
        CHECK(gka_kernel_variant(f.c_str(), "forward", {1, 8, 1, 8}, {-1, 0}, nullptr) != nullptr);
    CHECK(gka_cpu_family_supported(compiled.back().c_str()) == 1);  // the baseline: every host of the architecture
    CHECK(gka_cpu_family_supported("bogus") == 0);
    // Forcing a family the host cannot run is an error, never a fallback: on
    // every host, in test_environment.cpp (GKA_HOST_FAMILIES takes families away).
    REQUIRE(gka_set_cpu_family(nullptr) == GKA_OK);
    const std::string best = gka_test::runnable_families().front();
    CHECK(gka_cpu_family() == best);
}

TEST_CASE("thread count control", "[api]") {
    CHECK(gka_num_threads() >= 1);
    CHECK(gka_set_num_threads(0) == GKA_ERR_INVALID_ARGUMENT);
    CHECK(gka_set_num_threads(3) == GKA_OK);
    CHECK(gka_num_threads() == 3);
    Call c;
    CHECK(c.forward() == GKA_OK);
    CHECK(gka_set_num_threads(int(std::thread::hardware_concurrency())) == GKA_OK);
}

TEST_CASE("the kernels' float mode: denormals zero, round to nearest, the caller's mode kept", "[api]") {
    // Features and gradients of 1e-40 (denormal) read as zero: y, dx and dsigma
    // come out exactly 0, where denormal arithmetic leaves ~1e-40. (The pool's
    // threads start inside a call and inherit its mode; libgka also sets it per task.)
    constexpr float denormal = 1e-40f;
    const int test_rounding = std::fegetround();
    for (const std::string &family : gka_test::runnable_families()) {
        INFO("family " << family);
        REQUIRE(gka_set_cpu_family(family.c_str()) == GKA_OK);
        auto tiny = gka_ref::make_problem({1, 1024, 8, 16}, {-1, 0}, std::vector<float>(8, 1.0f), 1.0, 21);
        std::fill(tiny.x.begin(), tiny.x.end(), denormal);
        const gka_test::Outputs out = gka_test::run_kernels(tiny);
        CHECK(std::all_of(out.y.begin(), out.y.end(), [](float v) { return v == 0.0f; }));

        auto quiet = gka_ref::make_problem({1, 1024, 8, 16}, {-1, 0}, std::vector<float>(8, 1.0f), 1.0, 22);
        std::fill(quiet.dy.begin(), quiet.dy.end(), denormal);
        const gka_test::Outputs grads = gka_test::run_kernels(quiet);
        CHECK(std::all_of(grads.dx.begin(), grads.dx.end(), [](float v) { return v == 0.0f; }));
        CHECK(std::all_of(grads.dsigma.begin(), grads.dsigma.end(), [](float v) { return v == 0.0f; }));

        // A caller rounding toward zero gets what a default-mode caller gets,
        // and its mode back.
        const auto p = gka_ref::make_problem({1, 300, 3, 64}, {-1, 0}, {0.5f, 1.0f, 2.0f}, 1.5, 23);
        const gka_test::Outputs nearest = gka_test::run_kernels(p);
        REQUIRE(std::fesetround(FE_TOWARDZERO) == 0);
        const gka_test::Outputs toward_zero = gka_test::run_kernels(p);
        const int rounding_after = std::fegetround();
        std::fesetround(test_rounding);
        CHECK(rounding_after == FE_TOWARDZERO);
        CHECK(nearest.y == toward_zero.y);
        CHECK(nearest.dx == toward_zero.dx);
        CHECK(nearest.dsigma == toward_zero.dsigma);
    }
    REQUIRE(gka_set_cpu_family(nullptr) == GKA_OK);
}
