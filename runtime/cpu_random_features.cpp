// Random-feature GKA on the CPU (gka.h, gka_call.features) on a checked
// description (call.h): one kernel a pass, any head dim and feature count, run
// on slices of the heads so that its working memory stays bounded.
#include <algorithm>

#include "buffers.h"
#include "call.h"
#include "denormals.h"
#include "kernel_variants.h"

namespace gka::internal {

namespace {

using Halide::Runtime::Buffer;

// The kernels' working buffers hold, for each (head, batch entry), about 14
// token-length rows of M floats (the projection, the factors and their
// copies, the gradients by feature), 8 of D + 1 (x with its ones column, the
// numerator, the value gradient) and 3 of the 64 tokens of a chunk, besides
// the states, which the rows of M include (6 of (T / 64) x M x (D + 1)).
// A call runs as many heads at once as keep that within working_budget (one
// at least: the kernels parallelize over the chunks of a sequence, too).
constexpr double working_budget = 256.0 * (1 << 20);
int64_t heads_at_once(const gka_call &c) {
    const gka_shape &s = c.shape;
    const double per_head = 4.0 * s.batch * s.seq_len * (14.0 * c.features + 8.0 * (s.head_dim + 1) + 3 * 64);
    return std::clamp<int64_t>(int64_t(working_budget / per_head), 1, s.heads);
}

Buffer<float, 3> frequencies(const float *w, const gka_call &c) {
    return Buffer<float, 3>(const_cast<float *>(w), int(c.shape.head_dim), int(c.features), int(c.shape.heads));
}

int32_t causal(const gka_call &c) { return c.window.right == 0 ? 1 : 0; }

gka_status not_built(const char *pass, const CpuFamily &f, const gka_call &c) {
    return gka::not_built(pass, f.name, KernelFunction::gaussian, c.shape.head_dim, Element::f32);
}

// Runs `run(first, count)` on each slice of heads, until one fails.
template <class Run>
int by_head_slices(const gka_call &c, Run run) {
    const int64_t step = heads_at_once(c);
    for (int64_t first = 0; first < c.shape.heads; first += step) {
        if (const int code = run(first, std::min(step, c.shape.heads - first))) return code;
    }
    return 0;
}

}  // namespace

gka_status cpu_feature_forward(const gka_call &c, const CpuFamily &f) {
    const auto *k = feature_forward_variant(f.name);
    if (k == nullptr) return not_built("random-feature forward", f, c);
    auto xb = features(static_cast<const float *>(c.x), c.shape), yb = features(static_cast<float *>(c.y), c.shape);
    auto sb = per_head(c.sigma, c.shape);
    auto lb = rows(c.lse, c.shape);
    auto wb = frequencies(c.frequencies, c);
    DenormalsFlushed flushed;
    const int code = by_head_slices(c, [&](int64_t first, int64_t count) {
        return k->run(heads_of(xb, 1, first, count), heads_of(sb, 0, first, count), heads_of(wb, 2, first, count),
                      causal(c), heads_of(yb, 1, first, count), heads_of(lb, 1, first, count));
    });
    return ran(k, code, GKA_ERR_INTERNAL);
}

gka_status cpu_feature_backward(const gka_call &c, const CpuFamily &f) {
    const auto *k = feature_backward_variant(f.name);
    if (k == nullptr) return not_built("random-feature backward", f, c);
    auto feature = [&](const void *p) { return features(static_cast<const float *>(p), c.shape); };
    auto xb = feature(c.x), yb = feature(c.y), dyb = feature(c.dy), dxb = feature(c.dx);
    auto sb = per_head(c.sigma, c.shape), dsb = per_head(c.dsigma, c.shape);
    auto lb = rows(c.lse, c.shape);
    auto wb = frequencies(c.frequencies, c), dwb = frequencies(c.dfrequencies, c);
    DenormalsFlushed flushed;
    const int code = by_head_slices(c, [&](int64_t first, int64_t count) {
        auto heads = [&](const auto &b, int dim) { return heads_of(b, dim, first, count); };
        return k->run(heads(xb, 1), heads(sb, 0), heads(wb, 2), heads(yb, 1), heads(lb, 1), heads(dyb, 1), causal(c),
                      heads(dxb, 1), heads(dwb, 2), heads(dsb, 0));
    });
    return ran(k, code, GKA_ERR_INTERNAL);
}

}  // namespace gka::internal
