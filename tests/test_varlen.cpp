// Variable-length batches (gka_call.cu_seqlens; gka_forward_varlen and
// gka_backward_varlen over it) on every CPU family and score form: packed
// sequences of mixed lengths (empty ones too) give each sequence the results
// of a call of its own, bit for bit, within the accuracy contract of its
// double reference, dsigma summing theirs; bfloat16; validation.
#include <catch2/catch.hpp>

#include "bfloat16.h"
#include "check.h"

using gka_ref::make_problem;
using gka_ref::Problem;

namespace {

// Sequences of `lengths` packed: sequence s is problems[s] (B=1), at tokens cu[s]..cu[s+1]-1.
struct Packed {
    std::vector<Problem> problems;
    std::vector<int64_t> cu{0};
    std::vector<float> x, dy, sigma;
    int64_t heads, head_dim;
    gka_window window;

    int64_t total() const { return cu.back(); }
    int64_t row() const { return heads * head_dim; }
    gka_shape shape() const { return {int64_t(problems.size()), total(), heads, head_dim}; }
};

Packed packed(const std::vector<int64_t> &lengths, int64_t heads, int64_t head_dim, gka_window window, uint64_t seed) {
    Packed p{{}, {0}, {}, {}, {}, heads, head_dim, window};
    for (int64_t h = 0; h < heads; h++) p.sigma.push_back(0.6f + 0.9f * float(h));
    for (size_t s = 0; s < lengths.size(); s++) {
        p.cu.push_back(p.cu.back() + lengths[s]);
        if (lengths[s] == 0) {
            p.problems.push_back(Problem{{1, 0, heads, head_dim}, window, {}, p.sigma, {}});
            continue;
        }
        p.problems.push_back(make_problem({1, lengths[s], heads, head_dim}, window, p.sigma, 1.5, seed + s));
        p.x.insert(p.x.end(), p.problems.back().x.begin(), p.problems.back().x.end());
        p.dy.insert(p.dy.end(), p.problems.back().dy.begin(), p.problems.back().dy.end());
    }
    return p;
}

// The packed outputs of one varlen forward and backward.
gka_test::Outputs run_varlen(const Packed &p) {
    gka_test::Outputs out{std::vector<float>(p.x.size()), std::vector<float>(p.heads * p.total()),
                          std::vector<float>(p.x.size()), std::vector<float>(p.heads)};
    gka_call c = gka_test::described(p.problems.front().kernel);
    c.shape = p.shape(), c.cu_seqlens = p.cu.data(), c.window = p.window;
    c.x = p.x.data(), c.sigma = p.sigma.data(), c.y = out.y.data(), c.lse = out.lse.data();
    c.dy = p.dy.data(), c.dx = out.dx.data(), c.dsigma = out.dsigma.data();
    gka_status s = gka_run_forward(&c);
    INFO(gka_last_error());
    REQUIRE(s == GKA_OK);
    s = gka_run_backward(&c);
    INFO(gka_last_error());
    REQUIRE(s == GKA_OK);
    return out;
}

// Sequence s's slice of the packed outputs, lse from [H][total] to [H][length].
gka_test::Outputs slice(const Packed &p, const gka_test::Outputs &packed_out, size_t s) {
    const int64_t first = p.cu[s], length = p.cu[s + 1] - first, row = p.row();
    gka_test::Outputs out;
    out.y.assign(packed_out.y.begin() + first * row, packed_out.y.begin() + (first + length) * row);
    out.dx.assign(packed_out.dx.begin() + first * row, packed_out.dx.begin() + (first + length) * row);
    for (int64_t h = 0; h < p.heads; h++) {
        const auto from = packed_out.lse.begin() + h * p.total() + first;
        out.lse.insert(out.lse.end(), from, from + length);
    }
    return out;
}

}  // namespace

TEST_CASE("varlen: each packed sequence as its own call, within the contract", "[varlen]") {
    const std::vector<int64_t> lengths{0, 1, 7, 33, 64, 0, 130};
    for (gka_window w : {gka_window{-1, 0}, gka_window{6, 0}, gka_window{-1, -1}}) {
        for (int64_t D : {64, 20}) {
            Packed p = packed(lengths, 2, D, w, 31 * D + w.left);
            gka_test::for_each_kernel([&](const char *kernel) {
                for (Problem &one : p.problems) one.kernel = kernel;
                gka_test::for_each_family_and_form([&] {
                    INFO("window (" << w.left << ", " << w.right << "), D=" << D << ", family " << gka_cpu_family()
                                    << ", scores " << gka_score_form());
                    const gka_test::Outputs out = run_varlen(p);
                    std::vector<double> dsigma(p.heads, 0.0);
                    for (size_t s = 0; s < p.problems.size(); s++) {
                        const Problem &one = p.problems[s];
                        if (one.shape.seq_len == 0) continue;
                        gka_test::Outputs alone = gka_test::run_kernels(one), mine = slice(p, out, s);
                        INFO("sequence " << s << " of length " << one.shape.seq_len);
                        CHECK(mine.y == alone.y);
                        CHECK(mine.lse == alone.lse);
                        CHECK(mine.dx == alone.dx);
                        for (int64_t h = 0; h < p.heads; h++) dsigma[h] += alone.dsigma[h];
                        mine.dsigma = alone.dsigma;
                        gka_test::check_report("varlen", one, gka_test::compare(one, mine));
                    }
                    CHECK(out.dsigma == std::vector<float>(dsigma.begin(), dsigma.end()));
                });
            });
        }
    }
}

TEST_CASE("varlen: the kernel named is the furthest form any sequence ran", "[varlen]") {
    // Sigma 4 and 6: the bound, 64 sigma^2, is past |x|^2 near the origin.
    // Sequence 1 is offset by 10 (|x|^2 about 1600: the centred expansion
    // serves it, the origin's does not); sequences 0 and 2 sit near the origin.
    Packed p = packed({20, 30, 25}, 2, 16, {-1, 0}, 91);
    p.sigma = {4.0f, 6.0f};
    for (int64_t k = p.cu[1] * p.row(); k < p.cu[2] * p.row(); k++) p.x[k] += 10.0f;
    gka_test::for_each_family([&] {
        REQUIRE(gka_set_score_form("auto") == GKA_OK);
        std::vector<float> y(p.x.size()), lse(p.heads * p.total());
        REQUIRE(gka_forward_varlen(p.shape(), p.cu.data(), p.window, p.x.data(), p.sigma.data(), y.data(),
                                   lse.data()) == GKA_OK);
        const std::string family = gka_cpu_family();
        const gka_shape last{1, 25, p.heads, p.head_dim};
        CHECK(std::string(gka_last_kernel()) == gka_kernel_variant(family.c_str(), "forward", last, p.window, nullptr));
        std::vector<int64_t> near_only{0, 20};  // sequence 0 alone: the origin's
        REQUIRE(gka_forward_varlen({1, 20, p.heads, p.head_dim}, near_only.data(), p.window, p.x.data(),
                                   p.sigma.data(), y.data(), lse.data()) == GKA_OK);
        CHECK(std::string(gka_last_kernel()) ==
              gka_kernel_variant(family.c_str(), "forward_origin", {1, 20, p.heads, p.head_dim}, p.window, nullptr));
    });
}

TEST_CASE("varlen: bfloat16 features as the bfloat16 calls of each sequence", "[varlen][bf16]") {
    const Packed p = packed({5, 0, 40, 17}, 2, 64, {-1, 0}, 77);
    gka_test::for_each_kernel([&](const char *kernel) { gka_test::for_each_family([&] {
        const int64_t n = int64_t(p.x.size());
        const std::vector<gka_bf16> x = gka_test::to_bf16(p.x), dy = gka_test::to_bf16(p.dy);
        std::vector<gka_bf16> y(n), dx(n);
        std::vector<float> lse(p.heads * p.total()), dsigma(p.heads);
        // The packed call through a description, each sequence through the older calls.
        gka_call c = gka_test::described(kernel);
        c.shape = p.shape(), c.cu_seqlens = p.cu.data(), c.window = p.window, c.dtype = GKA_BFLOAT16;
        c.x = x.data(), c.sigma = p.sigma.data(), c.y = y.data(), c.lse = lse.data();
        c.dy = dy.data(), c.dx = dx.data(), c.dsigma = dsigma.data();
        REQUIRE(gka_run_forward(&c) == GKA_OK);
        REQUIRE(gka_run_backward(&c) == GKA_OK);
        CHECK(std::string(gka_last_kernel()).find("_bf16") != std::string::npos);
        std::vector<double> sum(p.heads, 0.0);
        for (size_t s = 0; s < p.problems.size(); s++) {
            const int64_t first = p.cu[s], length = p.cu[s + 1] - first, at = first * p.row(), size = length * p.row();
            if (length == 0) continue;
            const gka_shape one{1, length, p.heads, p.head_dim};
            std::vector<gka_bf16> y1(size), dx1(size);
            std::vector<float> lse1(p.heads * length), dsigma1(p.heads);
            REQUIRE(gka_forward_bf16(one, p.window, &x[at], p.sigma.data(), y1.data(), lse1.data()) == GKA_OK);
            REQUIRE(gka_backward_bf16(one, p.window, &x[at], p.sigma.data(), y1.data(), lse1.data(), &dy[at],
                                      dx1.data(), dsigma1.data()) == GKA_OK);
            INFO("sequence " << s);
            CHECK(std::equal(y1.begin(), y1.end(), y.begin() + at));
            CHECK(std::equal(dx1.begin(), dx1.end(), dx.begin() + at));
            for (int64_t h = 0; h < p.heads; h++) {
                CHECK(std::equal(&lse1[h * length], &lse1[h * length] + length, &lse[h * p.total() + first]));
                sum[h] += dsigma1[h];
            }
        }
        CHECK(dsigma == std::vector<float>(sum.begin(), sum.end()));
    }); });
}

TEST_CASE("varlen: bad cu_seqlens and arguments fail before anything is written", "[varlen]") {
    const int64_t H = 2, D = 4, total = 6;
    const std::vector<float> x(total * H * D, 1.0f), sigma{1.0f, 1.0f}, bad_sigma{1.0f, 0.0f};
    std::vector<float> y(x.size(), 42.0f), lse(H * total, 42.0f), dx(x.size(), 42.0f), dsigma(H, 42.0f);
    auto forward = [&](int64_t batch, std::vector<int64_t> cu, const float *s = nullptr) {
        return gka_forward_varlen({batch, total, H, D}, cu.data(), {-1, 0}, x.data(), s ? s : sigma.data(),
                                  y.data(), lse.data());
    };
    auto backward = [&](int64_t batch, std::vector<int64_t> cu) {
        return gka_backward_varlen({batch, total, H, D}, cu.data(), {-1, 0}, x.data(), sigma.data(), x.data(),
                                   lse.data(), x.data(), dx.data(), dsigma.data());
    };
    auto says = [](const char *what) { return std::string(gka_last_error()).find(what) != std::string::npos; };
    CHECK(forward(2, {1, 3, 6}) == GKA_ERR_INVALID_ARGUMENT);
    CHECK(says("cu_seqlens[0] = 1"));
    CHECK(forward(2, {0, 4, 3}) == GKA_ERR_INVALID_ARGUMENT);
    CHECK(says("non-decreasing"));
    CHECK(forward(2, {0, 3, 5}) == GKA_ERR_INVALID_ARGUMENT);
    CHECK(says("total token count"));
    CHECK(backward(2, {0, 3, 7}) == GKA_ERR_INVALID_ARGUMENT);
    CHECK(forward(0, {0}) == GKA_ERR_INVALID_ARGUMENT);
    CHECK(forward(2, {0, 3, 6}, bad_sigma.data()) == GKA_ERR_INVALID_ARGUMENT);
    CHECK(gka_forward_varlen({2, total, H, D}, nullptr, {-1, 0}, x.data(), sigma.data(), y.data(), lse.data()) ==
          GKA_ERR_INVALID_ARGUMENT);
    CHECK(says("cu_seqlens is NULL"));
    CHECK(y == std::vector<float>(x.size(), 42.0f));
    CHECK(lse == std::vector<float>(H * total, 42.0f));
    CHECK(dx == std::vector<float>(x.size(), 42.0f));
    CHECK(dsigma == std::vector<float>(H, 42.0f));
    CHECK(forward(3, {0, 0, 6, 6}) == GKA_OK);  // empty sequences are fine
    // Every sequence empty: nothing to write but dsigma's zeros.
    const int64_t none[] = {0, 0, 0};
    CHECK(gka_forward_varlen({2, 0, H, D}, none, {-1, 0}, x.data(), sigma.data(), y.data(), lse.data()) == GKA_OK);
    CHECK(gka_backward_varlen({2, 0, H, D}, none, {-1, 0}, x.data(), sigma.data(), x.data(), lse.data(), x.data(),
                              dx.data(), dsigma.data()) == GKA_OK);
    CHECK(dsigma == std::vector<float>(H, 0.0f));
}
