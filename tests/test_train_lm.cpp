// The trainer (examples/train_lm): its attention layers' gradients, the whole
// model's, against central finite differences, and a few steps that learn.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>

#include "corpus.h"
#include "model.h"

namespace {

using lm::AttentionShape;
using lm::Param;

// Compares d loss / d p[n] from backward with a central difference of loss()
// for a few entries of p. The layers run in float: a step of 1e-2 keeps
// rounding (~1e-6 of the loss) and truncation (~step^2 times the third
// derivative) both well under the tolerance.
void check_against_differences(const std::string &what, std::vector<float> &values, const std::vector<float> &grads,
                               const std::function<double()> &loss, int samples) {
    const float step = 1e-2f;
    for (int s = 0; s < samples; s++) {
        const size_t n = (size_t(s) * 7919) % values.size();
        const float saved = values[n];
        values[n] = saved + step;
        const double up = loss();
        values[n] = saved - step;
        const double down = loss();
        values[n] = saved;
        const double numeric = (up - down) / (2.0 * step);
        INFO(what << "[" << n << "]: backward " << grads[n] << ", finite difference " << numeric);
        CHECK(std::abs(grads[n] - numeric) <= 2e-3 * (1.0 + std::abs(numeric)));
    }
}

std::vector<float> normal_values(size_t n, uint64_t seed) {
    lm::Rng rng(seed);
    std::normal_distribution<float> normal;
    std::vector<float> v(n);
    for (float &x : v) x = normal(rng);
    return v;
}

// L = sum(weights . attention(h)), so dL/dout = weights.
void check_attention_layer(const std::string &kind, AttentionShape shape, lm::RandomFeatures features = {}) {
    lm::Rng rng(7);
    auto attention = lm::make_attention(kind, "attn", shape.heads, shape.head_dim, 2, rng, "f32", "gaussian", features);
    const size_t n = size_t(shape.rows()) * shape.dim();
    std::vector<float> h = normal_values(n, 11), weights = normal_values(n, 13);
    auto loss = [&] {
        const float *out = attention->forward(h.data(), shape);
        double sum = 0;
        for (size_t k = 0; k < n; k++) sum += double(weights[k]) * out[k];
        return sum;
    };
    loss();
    const float *dh_ptr = attention->backward(weights.data());
    const std::vector<float> dh(dh_ptr, dh_ptr + n);
    check_against_differences(kind + " dh", h, dh, loss, 12);
    for (Param *p : attention->params()) check_against_differences(kind + " " + p->name, p->value, p->grad, loss, 6);
}

std::vector<uint8_t> repeated_text(size_t bytes) {
    const std::string line = "the quick brown fox jumps over the lazy dog; ";
    std::vector<uint8_t> text(bytes);
    for (size_t k = 0; k < bytes; k++) text[k] = uint8_t(line[k % line.size()]);
    return text;
}

lm::Model tiny_model(const char *attention, int head_dim, uint64_t seed, const char *dtype = "f32",
                     lm::RandomFeatures features = {}) {
    lm::ModelConfig config;
    config.attention = attention, config.dtype = dtype, config.layers = 2, config.heads = 2, config.head_dim = head_dim;
    config.features = features;
    return lm::Model(config, seed);
}

double largest_difference(const float *a, const float *b, size_t n, double *largest_b) {
    double worst = 0;
    *largest_b = 0;
    for (size_t k = 0; k < n; k++) {
        worst = std::max(worst, std::abs(double(a[k]) - b[k]));
        *largest_b = std::max(*largest_b, std::abs(double(b[k])));
    }
    return worst;
}

}  // namespace

TEST_CASE("train_lm attention layers match finite differences", "[train_lm]") {
    for (const char *kind : {"gka", "dot"}) {
        for (int head_dim : {8, 64}) {
            for (gka_window window : {gka_window{-1, 0}, gka_window{2, 0}}) {
                SECTION(std::string(kind) + " D=" + std::to_string(head_dim) + " left=" + std::to_string(window.left)) {
                    check_attention_layer(kind, AttentionShape{2, 7, 2, head_dim, window});
                }
            }
        }
    }
}

TEST_CASE("train_lm: random-feature GKA's layer matches finite differences", "[train_lm]") {
    // 70 tokens: more than one of the kernels' chunks. Learned frequencies are
    // a parameter, checked with the others; fixed ones are not one.
    for (bool learned : {false, true}) {
        SECTION(learned ? "learned" : "fixed") {
            check_attention_layer("gka", AttentionShape{2, 70, 2, 8, {-1, 0}}, {16, learned});
            lm::Rng rng(1);
            auto attention = lm::make_attention("gka", "attn", 2, 8, 2, rng, "f32", "gaussian", {16, learned});
            CHECK(attention->params().size() == (learned ? 3u : 2u));
        }
    }
    lm::Rng rng(1);
    CHECK_THROWS_WITH(lm::make_attention("gka", "attn", 2, 8, 2, rng, "bf16", "gaussian", {16, false}),
                      Catch::Contains("--dtype f32"));
    CHECK_THROWS_WITH(lm::make_attention("gka", "attn", 2, 8, 2, rng, "f32", "gaussian", {0, true}),
                      Catch::Contains("needs --features"));
}

TEST_CASE("train_lm model gradient matches finite differences", "[train_lm]") {
    for (const char *kind : {"gka", "dot"}) {
        SECTION(kind) {
            lm::Model model = tiny_model(kind, 8, 3);
            const AttentionShape shape{2, 9, 2, 8, {-1, 0}};
            lm::Rng rng(5);
            const lm::Batch batch = lm::random_batch(repeated_text(400), shape.batch, shape.seq, rng);
            auto loss = [&] { return model.forward(batch.inputs.data(), batch.targets.data(), shape); };
            model.zero_grad();
            loss();
            model.backward();
            for (Param *p : model.params()) check_against_differences(p->name, p->value, p->grad, loss, 3);
        }
    }
}

TEST_CASE("train_lm: GKA's layer in bf16 is the float32 layer within bf16's rounding", "[train_lm]") {
    const AttentionShape shape{2, 33, 2, 64, {-1, 0}};
    const size_t n = size_t(shape.rows()) * shape.dim();
    const std::vector<float> h = normal_values(n, 21), weights = normal_values(n, 23);
    lm::Rng rng32(9), rng16(9);
    auto f32 = lm::make_attention("gka", "attn", shape.heads, shape.head_dim, 2, rng32);
    auto bf16 = lm::make_attention("gka", "attn", shape.heads, shape.head_dim, 2, rng16, "bf16");
    double largest = 0, difference = 0;
    const float *out32 = f32->forward(h.data(), shape);
    const std::vector<float> y32(out32, out32 + n);
    difference = largest_difference(bf16->forward(h.data(), shape), y32.data(), n, &largest);
    CHECK(difference < 2e-2 * largest);
    const float *dh32_ptr = f32->backward(weights.data());
    const std::vector<float> dh32(dh32_ptr, dh32_ptr + n);
    difference = largest_difference(bf16->backward(weights.data()), dh32.data(), n, &largest);
    CHECK(difference < 2e-2 * largest);
    // The output projection's gradient. (log_sigma's is a sum whose terms cancel and
    // move with y's and dy's rounding: tests/test_bf16.cpp judges dsigma by the
    // contract's metric, against the magnitude of its terms.)
    const Param &out16 = *bf16->params()[1], &out32p = *f32->params()[1];
    REQUIRE(out32p.name == "attn.out");
    difference = largest_difference(out16.grad.data(), out32p.grad.data(), out32p.grad.size(), &largest);
    CHECK(difference < 2e-2 * largest);
    lm::Rng rng(1);
    CHECK_THROWS_WITH(lm::make_attention("dot", "attn", 2, 8, 2, rng, "bf16"), Catch::Contains("float32 only"));
    CHECK_THROWS_WITH(lm::make_attention("gka", "attn", 2, 8, 2, rng, "fp8"), Catch::Contains("unknown dtype"));
}

TEST_CASE("train_lm: GKA's layer runs the kernel function it is given", "[train_lm]") {
    const AttentionShape shape{1, 17, 2, 16, {-1, 0}};
    const std::vector<float> h = normal_values(size_t(shape.rows()) * shape.dim(), 5);
    for (const char *kernel : {"gaussian", "laplace", "cauchy"}) {
        lm::Rng rng(3);
        auto attention = lm::make_attention("gka", "attn", shape.heads, shape.head_dim, 2, rng, "f32", kernel);
        attention->forward(h.data(), shape);
        const std::string ran = gka_last_kernel();
        INFO(kernel << ": " << ran);
        CHECK((std::string(kernel) == "gaussian" ? ran.find("laplace") == std::string::npos &&
                                                       ran.find("cauchy") == std::string::npos
                                                 : ran.find(kernel) != std::string::npos));
    }
    lm::Rng rng(1);
    CHECK_THROWS_WITH(lm::make_attention("gka", "attn", 2, 8, 2, rng, "f32", "epanechnikov"),
                      Catch::Contains("unknown kernel function"));
    CHECK_THROWS_WITH(lm::make_attention("dot", "attn", 2, 8, 2, rng, "f32", "laplace"),
                      Catch::Contains("needs --attention gka"));
}

TEST_CASE("train_lm: a few steps reduce the loss", "[train_lm]") {
    for (const char *kind : {"gka", "dot", "gka bf16", "gka features"}) {
        SECTION(kind) {
            const bool bf16 = std::string(kind) == "gka bf16", features = std::string(kind) == "gka features";
            lm::Model model = tiny_model(bf16 || features ? "gka" : kind, 16, 1, bf16 ? "bf16" : "f32",
                                         {features ? 32 : 0, features});
            // Random features take the causal window (a sliding one is exact GKA's).
            const AttentionShape shape{4, 32, 2, 16, {features ? -1 : 7, 0}};
            const std::vector<uint8_t> text = repeated_text(4000);
            const std::vector<Param *> params = model.params();
            lm::AdamW optimizer;
            lm::Rng rng(2);
            const lm::Batch fixed = lm::evaluation_batch(text, shape.batch, shape.seq, 0, 1);
            const double before = model.forward(fixed.inputs.data(), fixed.targets.data(), shape);
            for (int step = 0; step < 30; step++) {
                const lm::Batch batch = lm::random_batch(text, shape.batch, shape.seq, rng);
                model.zero_grad();
                model.forward(batch.inputs.data(), batch.targets.data(), shape);
                model.backward();
                lm::clip_grad_norm(params, 1.0);
                optimizer.step(params, 1e-2f);
            }
            const double after = model.forward(fixed.inputs.data(), fixed.targets.data(), shape);
            INFO(kind << ": loss " << before << " -> " << after);
            CHECK(after < 0.5 * before);
        }
    }
}

TEST_CASE("train_lm: decoding token by token gives the full forward's logits", "[train_lm][decode]") {
    const int T = 24;
    const std::vector<uint8_t> text = repeated_text(T + 1);
    // Random features (the last): the cache is the keys' state.
    for (gka_window window : {gka_window{-1, 0}, gka_window{5, 0}}) {
        for (const char *dtype : {"f32", "bf16", "features"}) {
            const bool features = std::string(dtype) == "features";
            if (features && window.left >= 0) continue;
            SECTION(std::string(dtype) + " left=" + std::to_string(window.left)) {
                lm::Model model = features ? tiny_model("gka", 16, 4, "f32", {32, false})
                                           : tiny_model("gka", 16, 4, dtype);
                const AttentionShape shape{1, T, 2, 16, window};
                model.forward(text.data(), text.data() + 1, shape);
                const std::vector<float> full(model.logits(), model.logits() + T * lm::kVocab);
                // A cache of the whole text, or a ring of W-1 slots that wraps.
                const int64_t capacity = window.left < 0 ? T : window.left;
                // bfloat16: the two paths round y to bfloat16 apart, a flip of its last bit apart at most.
                const double tolerance = std::string(dtype) != "bf16" ? 1e-4 : 3e-2;
                for (int t = 0; t < T; t++) {
                    const float *logits = model.decode(text[t], t, window, capacity);
                    double largest = 0;
                    const double difference = largest_difference(logits, &full[size_t(t) * lm::kVocab], lm::kVocab,
                                                                 &largest);
                    INFO("position " << t << ": logits differ by " << difference << " (largest " << largest << ")");
                    CHECK(difference <= tolerance * (1.0 + largest));
                }
            }
        }
    }
    lm::Model dot = tiny_model("dot", 16, 4);
    CHECK_THROWS_WITH(dot.decode('a', 0, {-1, 0}, 8), Catch::Contains("decode path"));
}

TEST_CASE("train_lm: packed documents attend within themselves", "[train_lm][varlen]") {
    // GKA's layer on two packed documents gives each document's own rows.
    const AttentionShape packed{1, 30, 2, 16, {-1, 0}, {0, 12, 30}};
    const std::vector<float> h = normal_values(size_t(30) * 32, 31);
    lm::Rng rng(3);
    auto attention = lm::make_attention("gka", "attn", 2, 16, 2, rng);
    const float *out = attention->forward(h.data(), packed);
    const std::vector<float> both(out, out + h.size());
    for (const auto &[first, length] : {std::pair{0, 12}, std::pair{12, 18}}) {
        const float *alone = attention->forward(h.data() + first * 32, AttentionShape{1, length, 2, 16, {-1, 0}});
        CHECK(std::equal(alone, alone + length * 32, both.begin() + first * 32));
    }
    // Random features likewise: each document from zero states.
    lm::Rng feature_rng(3);
    auto features = lm::make_attention("gka", "attn", 2, 16, 2, feature_rng, "f32", "gaussian", {24, false});
    const float *feature_out = features->forward(h.data(), packed);
    const std::vector<float> feature_both(feature_out, feature_out + h.size());
    for (const auto &[first, length] : {std::pair{0, 12}, std::pair{12, 18}}) {
        const float *alone = features->forward(h.data() + first * 32, AttentionShape{1, length, 2, 16, {-1, 0}});
        CHECK(std::equal(alone, alone + length * 32, feature_both.begin() + first * 32));
    }
    lm::Rng dot_rng(3);
    auto dot = lm::make_attention("dot", "attn", 2, 16, 2, dot_rng);
    CHECK_THROWS_WITH(dot->forward(h.data(), packed), Catch::Contains("packed documents"));

    // Packed batches: whole paragraphs from their starts, next-byte targets within each.
    std::string text;
    for (int k = 0; k < 50; k++) text += std::string(size_t(3 + k % 40), char('a' + k % 26)) + "\n\n";
    const std::vector<uint8_t> bytes(text.begin(), text.end());
    lm::Rng batch_rng(4);
    const lm::PackedBatch b = lm::Packer(bytes).batch(4, 16, batch_rng);
    REQUIRE(b.cu_seqlens.back() == 64);
    REQUIRE(b.inputs.size() == 64);
    for (size_t s = 0; s + 1 < b.cu_seqlens.size(); s++) {
        const int64_t first = b.cu_seqlens[s], length = b.cu_seqlens[s + 1] - first;
        CHECK(length >= 1);
        CHECK(length <= 16);
        for (int64_t t = 0; t < length; t++) {
            CHECK(b.inputs[first + t] == b.inputs[first]);  // one paragraph: one repeated letter
            CHECK(b.targets[first + t] == (t + 1 < length ? b.inputs[first + t + 1] : b.targets[first + t]));
        }
    }
}
