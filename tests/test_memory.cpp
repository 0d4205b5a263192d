// The CPU kernels' working memory (gka.h, gka_memory_usage): what a forward
// and a backward allocate beyond the caller's tensors, as multiples of x's
// size, at mid-size shapes. The backward's bound holds where the heads outnumber
// the threads several times over (docs/performance.md, "Working memory"), so
// the test sets 2 threads; 64 threads run all heads at once and must give the
// same bits.
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "gka/gka.h"
#include "random_problem.h"

namespace {

struct Passes {
    std::vector<float> y, lse, dx, dsigma;
    double forward_tensors, backward_tensors;  // peak working memory over x's size
};

Passes run(const gka_shape &s, const gka_window &w, int threads) {
    const int64_t n = s.batch * s.seq_len * s.heads * s.head_dim;
    std::vector<float> x(n), dy(n), sigma(s.heads);
    for (int64_t k = 0; k < n; k++) x[k] = gka_test::hashed_feature(2 * k), dy[k] = gka_test::hashed_feature(2 * k + 1);
    for (int64_t h = 0; h < s.heads; h++) sigma[h] = 4.0f + h;
    Passes p{std::vector<float>(n), std::vector<float>(s.batch * s.heads * s.seq_len), std::vector<float>(n),
             std::vector<float>(s.heads), 0, 0};
    gka_call c = gka_call_init();
    c.shape = s, c.window = w;
    c.x = x.data(), c.sigma = sigma.data(), c.y = p.y.data(), c.lse = p.lse.data();
    c.dy = dy.data(), c.dx = p.dx.data(), c.dsigma = p.dsigma.data();
    const int before = gka_num_threads();
    REQUIRE(gka_set_num_threads(threads) == GKA_OK);
    const double tensor = double(n) * sizeof(float);
    gka_reset_memory_peak();
    REQUIRE(gka_run_forward(&c) == GKA_OK);
    p.forward_tensors = double(gka_memory_usage().peak) / tensor;
    gka_reset_memory_peak();
    REQUIRE(gka_run_backward(&c) == GKA_OK);
    p.backward_tensors = double(gka_memory_usage().peak) / tensor;
    const std::string kernel = gka_last_kernel();
    REQUIRE(gka_set_num_threads(before) == GKA_OK);
    CHECK(gka_memory_usage().in_use == 0);  // every working buffer given back
    std::printf("B=%lld T=%lld H=%lld D=%lld window (%lld, %lld), %d threads, %s: working memory forward %.2f, "
                "backward %.2f tensors\n", (long long)s.batch, (long long)s.seq_len, (long long)s.heads,
                (long long)s.head_dim, (long long)w.left, (long long)w.right, threads, kernel.c_str(),
                p.forward_tensors, p.backward_tensors);
    return p;
}

}  // namespace

TEST_CASE("working memory: a long backward holds at most 1.5 tensors of x's size where heads outnumber threads",
          "[memory]") {
    const struct {
        gka_shape shape;
        gka_window window;
    } cases[] = {{{1, 1 << 14, 8, 64}, {255, 0}}, {{1, 1 << 13, 8, 128}, {-1, 0}}, {{2, 4096, 4, 96}, {255, 0}}};
    for (const auto &c : cases) {
        INFO("T " << c.shape.seq_len << " D " << c.shape.head_dim << " window left " << c.window.left);
        const Passes sliced = run(c.shape, c.window, 2), whole = run(c.shape, c.window, 64);
        // The forward's head-major copy of x: Halide's bounds through its fused
        // y and lse loops allocate it for about twice the tokens, of which it
        // writes and reads one tensor (docs/performance.md, "Working memory").
        CHECK(sliced.forward_tensors > 0.9);
        CHECK(sliced.forward_tensors <= 2.5);
        CHECK(sliced.backward_tensors <= 1.5);
        // A slice of heads at a time gives a run of all heads' bits.
        CHECK(sliced.y == whole.y);
        CHECK(sliced.dx == whole.dx);
        CHECK(sliced.dsigma == whole.dsigma);
    }
}

TEST_CASE("working memory: the peak restarts from what is in use", "[memory]") {
    gka_reset_memory_peak();
    const gka_memory m = gka_memory_usage();
    CHECK(m.in_use == 0);
    CHECK(m.peak == 0);
}
