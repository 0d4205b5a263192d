// Decode (gka_run_decode; gka_decode over it) on every CPU family this host runs: the new tokens' rows within
// the accuracy contract of the double reference over the whole sequence, for
// sequences of different lengths in one batch, causal caches and rings
// (sliding windows, wrapping), token by token; the slots written; results
// independent of the thread count; exact one-token rows; bfloat16; validation.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "bfloat16.h"
#include "check.h"

using gka_ref::make_problem;
using gka_ref::Problem;

namespace {

const gka_window causal{-1, 0};
const float unwritten = std::numeric_limits<float>::quiet_NaN();  // a slot the kernels must never read

// One decode call's inputs: sequence b is problems[b] (B=1), of which the
// last `new_tokens` are new and the rest are in a cache of `capacity` slots
// (position p in slot p % capacity; slots holding no position it reaches are NaN).
struct DecodeCall {
    std::vector<Problem> problems;
    int64_t new_tokens, capacity, heads, head_dim;
    gka_window window;
    std::vector<int64_t> lengths;
    std::vector<float> x, cache, sigma;

    int64_t row() const { return heads * head_dim; }
    gka_shape shape() const { return {int64_t(problems.size()), new_tokens, heads, head_dim}; }
    // Its description, with its problems' kernel function: x, sigma and the cache set.
    gka_call described() {
        gka_call c = gka_test::described(problems.front().kernel);
        c.shape = shape(), c.window = window, c.cache_capacity = capacity, c.cache_lens = lengths.data();
        c.x = x.data(), c.sigma = sigma.data(), c.cache = cache.data();
        return c;
    }
};

DecodeCall decode_call(const std::vector<int64_t> &lengths, int64_t new_tokens, int64_t capacity, int64_t heads,
                       int64_t head_dim, gka_window window, uint64_t seed) {
    DecodeCall c{{}, new_tokens, capacity, heads, head_dim, window, lengths, {}, {}, {}};
    std::vector<float> sigma;
    for (int64_t h = 0; h < heads; h++) sigma.push_back(0.7f + 1.3f * float(h));
    c.sigma = sigma;
    const int64_t B = int64_t(lengths.size()), row = c.row();
    c.cache.assign(B * capacity * row, unwritten);
    for (int64_t b = 0; b < B; b++) {
        const int64_t L = lengths[b];
        c.problems.push_back(make_problem({1, L + new_tokens, heads, head_dim}, window, sigma, 1.5, seed + b));
        const Problem &p = c.problems.back();
        for (int64_t pos = std::max<int64_t>(0, L - capacity); pos < L; pos++) {
            std::copy_n(p.x.begin() + pos * row, row, c.cache.begin() + (b * capacity + pos % capacity) * row);
        }
        c.x.insert(c.x.end(), p.x.begin() + L * row, p.x.end());
    }
    return c;
}

struct Decoded {
    std::vector<float> y, lse;
};

Decoded run_decode(DecodeCall &c) {
    Decoded d{std::vector<float>(c.x.size()), std::vector<float>(c.problems.size() * c.heads * c.new_tokens)};
    gka_call call = c.described();
    call.y = d.y.data(), call.lse = d.lse.data();
    const gka_status s = gka_run_decode(&call);
    INFO(gka_last_error());
    REQUIRE(s == GKA_OK);
    const std::string kernel = gka_last_kernel(), function = c.problems.front().kernel;
    CHECK(kernel.rfind("gka_decode_" + std::string(gka_cpu_family()) + "_", 0) == 0);
    CHECK((function == "gaussian" || kernel.find("_direct_" + function) != std::string::npos));
    return d;
}

// Each sequence's new rows, placed in its whole sequence's outputs, judged
// against the reference of the whole sequence (those rows alone).
void check_decoded(const DecodeCall &c, const Decoded &d, gka_test::Bounds bounds = gka_test::float32_bounds) {
    const int64_t Tq = c.new_tokens, H = c.heads, row = c.row();
    for (size_t b = 0; b < c.problems.size(); b++) {
        const Problem &p = c.problems[b];
        const int64_t L = c.lengths[b];
        gka_test::Outputs out{std::vector<float>(p.size()), std::vector<float>(p.rows())};
        std::copy_n(d.y.begin() + b * Tq * row, Tq * row, out.y.begin() + L * row);
        for (int64_t h = 0; h < H; h++) {
            std::copy_n(d.lse.begin() + (b * H + h) * Tq, Tq, out.lse.begin() + p.row(0, h, L));
        }
        INFO("sequence " << b << " of length " << L << ", capacity " << c.capacity);
        gka_test::check_report(std::string("decode, family ") + gka_cpu_family(), p,
                               gka_test::compare(p, out, {L, L + Tq}, bounds));
    }
}

// After the call, the new tokens' features are in their slots.
void check_appended(const DecodeCall &c) {
    const int64_t row = c.row();
    for (size_t b = 0; b < c.problems.size(); b++) {
        for (int64_t q = std::max<int64_t>(0, c.new_tokens - c.capacity); q < c.new_tokens; q++) {
            const int64_t slot = (c.lengths[b] + q) % c.capacity;
            const float *written = &c.cache[(b * c.capacity + slot) * row];
            const float *feature = &c.x[(b * c.new_tokens + q) * row];
            CHECK(std::equal(written, written + row, feature));
        }
    }
}

}  // namespace

TEST_CASE("decode: new tokens of sequences of different lengths, within the contract", "[decode]") {
    // D=64 and 128 (their own variants) and 20 (the "any" variant).
    for (int64_t D : {64, 128, 20}) {
        for (int64_t Tq : {1, 3}) {
            gka_test::for_each_kernel([&](const char *kernel) {
                // A causal cache with room to spare: its unwritten slots are NaN.
                DecodeCall c = decode_call({0, 5, 37, 130}, Tq, 160, 2, D, causal, 100 * D + Tq);
                for (Problem &p : c.problems) p.kernel = kernel;
                gka_test::for_each_family([&] {
                    DecodeCall call = c;
                    check_decoded(call, run_decode(call));
                    check_appended(call);
                });
            });
        }
    }
}

TEST_CASE("decode: a sliding window over a ring of W-1 slots or more, wrapped", "[decode]") {
    for (int64_t Tq : {1, 4}) {
        for (int64_t capacity : {6, 7, 11}) {
            // (6, 0): each new token reaches the 6 tokens before it.
            DecodeCall c = decode_call({0, 3, 6, 7, 40}, Tq, capacity, 2, 16, {6, 0}, 7 * capacity + Tq);
            gka_test::for_each_family([&] {
                DecodeCall call = c;
                check_decoded(call, run_decode(call));
                check_appended(call);
            });
        }
    }
}

TEST_CASE("decode: token by token from an empty cache matches the reference of the whole sequence", "[decode]") {
    const int64_t T = 70, H = 2, D = 64;
    for (gka_window w : {causal, gka_window{9, 0}}) {
        const int64_t capacity = w.left < 0 ? T : w.left;  // a ring of exactly W - 1 slots
        const Problem p = make_problem({1, T, H, D}, w, {0.8f, 2.0f}, 1.5, 17);
        gka_test::for_each_family([&] {
            std::vector<float> cache(capacity * H * D, unwritten), y(p.size()), lse(p.rows());
            for (int64_t t = 0; t < T; t++) {
                const int64_t length = t;
                std::vector<float> y_t(H * D), lse_t(H);
                gka_call c = gka_test::described(p.kernel);
                c.shape = {1, 1, H, D}, c.window = w, c.cache_capacity = capacity, c.cache_lens = &length;
                c.x = &p.x[t * H * D], c.sigma = p.sigma.data(), c.cache = cache.data();
                c.y = y_t.data(), c.lse = lse_t.data();
                const gka_status s = gka_run_decode(&c);
                INFO(gka_last_error());
                REQUIRE(s == GKA_OK);
                std::copy(y_t.begin(), y_t.end(), y.begin() + t * H * D);
                for (int64_t h = 0; h < H; h++) lse[p.row(0, h, t)] = lse_t[h];
            }
            gka_test::check_report(std::string("token by token, family ") + gka_cpu_family(), p,
                                   gka_test::compare(p, {y, lse}, {0, T}));
        });
    }
}

TEST_CASE("decode: a cache of several chunks gives the same bits on any thread count", "[decode]") {
    // 3000 cached keys: three chunks of the default 1024, merged in order.
    DecodeCall c = decode_call({3000, 2100}, 2, 3000 + 2, 3, 64, causal, 5);
    gka_test::for_each_family([&] {
        std::vector<Decoded> runs;
        for (int threads : {1, 2, 5}) {
            REQUIRE(gka_set_num_threads(threads) == GKA_OK);
            DecodeCall call = c;
            runs.push_back(run_decode(call));
        }
        REQUIRE(gka_set_num_threads(2) == GKA_OK);
        CHECK(runs[0].y == runs[1].y);
        CHECK(runs[0].y == runs[2].y);
        CHECK(runs[0].lse == runs[2].lse);
        check_decoded(c, runs[0]);
    });
}

TEST_CASE("decode: the first token of a sequence is itself exactly", "[decode]") {
    DecodeCall c = decode_call({0, 0}, 1, 4, 3, 64, causal, 9);
    gka_test::for_each_family([&] {
        DecodeCall call = c;
        const Decoded d = run_decode(call);
        CHECK(d.y == c.x);
        CHECK(d.lse == std::vector<float>(d.lse.size(), 0.0f));
    });
}

TEST_CASE("decode: bfloat16 features, within the bf16 contract", "[decode][bf16]") {
    DecodeCall c = decode_call({0, 9, 50}, 2, 64, 2, 64, causal, 21);
    for (Problem &p : c.problems) p.x = gka_test::rounded_to_bf16(p.x);
    c.x = gka_test::rounded_to_bf16(c.x);
    c.cache = gka_test::rounded_to_bf16(c.cache);
    gka_test::for_each_family([&] {
        std::vector<gka_bf16> x = gka_test::to_bf16(c.x), cache = gka_test::to_bf16(c.cache), y(c.x.size());
        Decoded d{{}, std::vector<float>(c.problems.size() * c.heads * c.new_tokens)};
        gka_call call = c.described();
        call.dtype = GKA_BFLOAT16, call.x = x.data(), call.cache = cache.data(), call.y = y.data();
        call.lse = d.lse.data();
        const gka_status s = gka_run_decode(&call);
        INFO(gka_last_error());
        REQUIRE(s == GKA_OK);
        CHECK(std::string(gka_last_kernel()).find("_bf16") != std::string::npos);
        d.y = gka_test::from_bf16(y);
        check_decoded(c, d, gka_test::bfloat16_bounds);
    });
}

TEST_CASE("decode: the variants are named on every family", "[decode]") {
    std::vector<std::string> families = gka_test::compiled_families();
    for (const std::string &cuda : gka_test::cuda_families()) families.push_back(cuda);
    for (const std::string &family : families) {
        for (int64_t D : {64, 128, 20}) {
            INFO(family << " D=" << D);
            const char *name = gka_kernel_variant(family.c_str(), "decode", {1, 1, 1, D}, causal, nullptr);
            REQUIRE(name != nullptr);
            CHECK(std::string(name).rfind("gka_decode_" + family + (D == 20 ? "_any" : "_d" + std::to_string(D)), 0) == 0);
            const char *bf16 = gka_kernel_variant(family.c_str(), "decode_bf16", {1, 1, 1, D}, causal, nullptr);
            REQUIRE(bf16 != nullptr);
            CHECK(std::string(bf16).find("_bf16") != std::string::npos);
        }
    }
}

TEST_CASE("decode: bad arguments fail before anything is written", "[decode]") {
    const int64_t H = 2, D = 4, capacity = 8, row = H * D;
    const std::vector<float> x(2 * row, 1.0f), sigma{1.0f, 1.0f}, bad_sigma{1.0f, -1.0f};
    std::vector<float> cache(2 * capacity * row, 3.0f), y(2 * row, 42.0f), lse(2 * H, 42.0f);
    const std::vector<float> cache_before = cache;
    auto call = [&](gka_shape shape, int64_t cap, gka_window w, std::vector<int64_t> lengths, const float *s,
                    const float *xp = nullptr) {
        return gka_decode(shape, cap, w, xp ? xp : x.data(), s, lengths.data(), cache.data(), y.data(), lse.data());
    };
    const gka_shape shape{2, 1, H, D};
    CHECK(call(shape, capacity, {-1, -1}, {1, 2}, sigma.data()) == GKA_ERR_INVALID_ARGUMENT);
    CHECK(std::string(gka_last_error()).find("right span must be 0") != std::string::npos);
    CHECK(call(shape, capacity, causal, {1, 8}, sigma.data()) == GKA_ERR_INVALID_ARGUMENT);  // 8 + 1 > 8
    CHECK(std::string(gka_last_error()).find("do not fit") != std::string::npos);
    CHECK(call(shape, capacity, {9, 0}, {1, 30}, sigma.data()) == GKA_ERR_INVALID_ARGUMENT);  // a ring too short
    CHECK(call(shape, capacity, causal, {-1, 2}, sigma.data()) == GKA_ERR_INVALID_ARGUMENT);
    CHECK(std::string(gka_last_error()).find("cache_lens[0]") != std::string::npos);
    CHECK(call(shape, 0, causal, {0, 0}, sigma.data()) == GKA_ERR_INVALID_ARGUMENT);
    CHECK(call(shape, capacity, causal, {1, 2}, bad_sigma.data()) == GKA_ERR_INVALID_ARGUMENT);
    CHECK(call({2, 0, H, D}, capacity, causal, {1, 2}, sigma.data()) == GKA_ERR_INVALID_ARGUMENT);
    CHECK(gka_decode(shape, capacity, causal, x.data(), sigma.data(), nullptr, cache.data(), y.data(), lse.data()) ==
          GKA_ERR_INVALID_ARGUMENT);
    CHECK(std::string(gka_last_error()) == "cache_lens is NULL");
    CHECK(call(shape, int64_t(1) << 28, causal, {1, 2}, sigma.data()) == GKA_ERR_UNSUPPORTED);  // 2^31 elements
    CHECK(y == std::vector<float>(2 * row, 42.0f));
    CHECK(lse == std::vector<float>(2 * H, 42.0f));
    CHECK(cache == cache_before);
}

TEST_CASE("decode: a ring shorter than the window is refused at the first call, host and device alike", "[decode]") {
    // (7, 0) reaches 7 tokens back: a ring of 5 slots would serve the first
    // five tokens and then lose keys, so it is refused while the cache is empty.
    // The CUDA entry points validate on the host, before any device is looked
    // for: they refuse alike on a machine without one (the pointers are never read).
    const int64_t H = 2, D = 4, row = H * D;
    const std::vector<float> x(row, 1.0f), sigma{1.0f, 1.0f};
    std::vector<float> cache(7 * row, 3.0f), y(row, 42.0f), lse(H, 42.0f);
    auto call = [&](bool on_device, int64_t capacity, gka_window w, int64_t length) {
        const gka_shape shape{1, 1, H, D};
        return on_device ? gka_decode_cuda(shape, capacity, w, x.data(), sigma.data(), &length, cache.data(),
                                           y.data(), lse.data(), nullptr)
                         : gka_decode(shape, capacity, w, x.data(), sigma.data(), &length, cache.data(), y.data(),
                                      lse.data());
    };
    for (bool on_device : {false, true}) {
        INFO((on_device ? "gka_decode_cuda" : "gka_decode"));
        CHECK(call(on_device, 5, {7, 0}, 0) == GKA_ERR_INVALID_ARGUMENT);
        CHECK_THAT(gka_last_error(), Catch::Contains("needs capacity >= 7, got 5"));
        CHECK(call(on_device, 6, {7, 0}, 3) == GKA_ERR_INVALID_ARGUMENT);
        CHECK_THAT(gka_last_error(), Catch::Contains("needs capacity >= 7, got 6"));
        // Causal: the capacity must hold each sequence, this call's tokens included.
        CHECK(call(on_device, 5, causal, 5) == GKA_ERR_INVALID_ARGUMENT);
        CHECK_THAT(gka_last_error(), Catch::Contains("needs capacity >= 6"));
    }
    CHECK(y == std::vector<float>(row, 42.0f));
    CHECK(cache == std::vector<float>(7 * row, 3.0f));
    // A ring of exactly `left` slots serves any length, from the first call.
    for (int64_t length : {0, 6, 1000}) {
        INFO("cache_lens " << length);
        CHECK(call(false, 7, {7, 0}, length) == GKA_OK);
    }
}
