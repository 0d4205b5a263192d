// Random-feature GKA on the CPU (gka.h, gka_call.features) on a checked
// description (call.h): one kernel a pass, any head dim and feature count.
//
// The kernels take a segment of their sequences with the states of the
// tokens outside it (generators/gka_random_features.h), so that a sequence
// runs by segments: the causal window's in segments of segment_tokens, whose
// working buffers stay a segment's size whatever T; the full window's, whose
// queries take every key, in one. A varlen batch's sequences are segments of
// its packed tokens, started from zero states; decode starts from the state
// its cache holds and leaves the state after the new tokens there. The
// backward runs the segments in reverse, carrying the queries' state, from the
// keys' states at the segments' starts (the states kernel, in order).
#include <algorithm>
#include <cmath>
#include <vector>

#include "buffers.h"
#include "call.h"
#include "denormals.h"
#include "kernel_variants.h"

namespace gka::internal {

namespace {

using Halide::Runtime::Buffer;
using State = Buffer<float, 4>;  // (d <= D, m, h, b): [B][H][M][D + 1]

// Tokens a causal segment. (AVX2 EPYC, B = 1, H = 8, D = 64, causal
// forward+backward: segments of 1024 to 8192 tokens within 3% of each other
// at T = 16384; at T = 65536, M = 256, 0.93x the unsegmented call's time and
// about 0.5 GB less memory.)
constexpr int64_t segment_tokens = 4096;

// The kernels' working buffers hold, for each (head, batch entry), about 14
// token-length rows of M floats (the projection, the factors and their
// copies, the gradients by feature), 8 of D + 1 (x with its ones column, the
// numerator, the value gradient) and 3 of the 64 tokens of a chunk, besides
// the states, which the rows of M include (6 of (T / 64) x M x (D + 1)).
// A call runs as many heads at once as keep a segment's within working_budget
// (one at least: the kernels parallelize over the chunks of a sequence, too).
constexpr double working_budget = 256.0 * (1 << 20);

int32_t causal(const gka_call &c) { return c.window.right == 0 ? 1 : 0; }

// A run of tokens of the tensors' token axis, within one sequence.
struct Segment {
    int64_t first, count;
    bool starts, ends;  // the sequence's first, its last
};

std::vector<Segment> segments(const gka_call &c) {
    const int64_t length = causal(c) ? segment_tokens : INT64_MAX;
    std::vector<Segment> out;
    auto add_sequence = [&](int64_t first, int64_t count) {
        for (int64_t at = 0; at < count; at += length) {
            const int64_t n = std::min(length, count - at);
            out.push_back({first + at, n, at == 0, at + n == count});
        }
    };
    if (c.cu_seqlens) {
        for (int64_t s = 0; s < c.shape.batch; s++) add_sequence(c.cu_seqlens[s], c.cu_seqlens[s + 1] - c.cu_seqlens[s]);
    } else {
        add_sequence(0, c.shape.seq_len);
    }
    return out;
}

int64_t heads_at_once(const gka_call &c, const std::vector<Segment> &parts) {
    const gka_shape s = tensor_shape(c);
    int64_t longest = 1;
    for (const Segment &p : parts) longest = std::max(longest, p.count);
    const double per_head = 4.0 * s.batch * longest * (14.0 * c.features + 8.0 * (s.head_dim + 1) + 3 * 64);
    return std::clamp<int64_t>(int64_t(working_budget / per_head), 1, s.heads);
}

Buffer<float, 3> frequencies(const float *w, const gka_call &c) {
    return Buffer<float, 3>(const_cast<float *>(w), int(c.shape.head_dim), int(c.features), int(c.shape.heads));
}

State new_state(const gka_call &c, int64_t heads) {
    State s(int(c.shape.head_dim + 1), int(c.features), int(heads), int(tensor_shape(c).batch));
    s.fill(0.0f);
    return s;
}

gka_status not_built(const char *pass, const CpuFamily &f, const gka_call &c) {
    return gka::not_built(pass, f.name, KernelFunction::gaussian, c.shape.head_dim, Element::f32);
}

// Heads [first, first + count) of the call's buffers, and a segment's tokens
// within them.
struct HeadSlice {
    int64_t first, count;
    template <class B>
    B heads(const B &buf, int dim) const {
        return part_of(buf, dim, first, count);
    }
    template <class B>
    B tokens(const B &features, const Segment &p) const {  // (d, h, t, b)
        return part_of(heads(features, 1), 2, p.first, p.count);
    }
    Buffer<float, 3> rows(const Buffer<float, 3> &lse, const Segment &p) const {  // (t, h, b)
        return part_of(heads(lse, 1), 0, p.first, p.count);
    }
};

// Runs `run(slice)` on each slice of `step` heads, until one fails.
template <class Run>
int by_head_slices(const gka_call &c, int64_t step, Run run) {
    for (int64_t first = 0; first < c.shape.heads; first += step) {
        if (const int code = run(HeadSlice{first, std::min(step, c.shape.heads - first)})) return code;
    }
    return 0;
}

// The forward from the keys' states in `start` (d, m, h, b), each sequence's
// zero where it is null; the state after each sequence's last token is left
// in it where it is not (decode's cache).
gka_status feature_forward(const gka_call &c, const CpuFamily &f, float *start) {
    const auto *k = feature_forward_variant(f.name);
    if (k == nullptr) return not_built("random-feature forward", f, c);
    const gka_shape t = tensor_shape(c);
    auto xb = features(static_cast<const float *>(c.x), t), yb = features(static_cast<float *>(c.y), t);
    auto sb = per_head(c.sigma, t);
    auto lb = rows(c.lse, t);
    auto wb = frequencies(c.frequencies, c);
    const std::vector<Segment> parts = segments(c);
    State cache;
    if (start) cache = State(start, int(c.shape.head_dim + 1), int(c.features), int(t.heads), int(t.batch));
    DenormalsFlushed flushed;
    const int code = by_head_slices(c, heads_at_once(c, parts), [&](const HeadSlice &slice) {
        State state = new_state(c, slice.count), next = new_state(c, slice.count);
        if (start) state.copy_from(slice.heads(cache, 2));
        for (const Segment &p : parts) {
            if (p.starts && !start) state.fill(0.0f);
            if (const int code = k->run(slice.tokens(xb, p), slice.heads(sb, 0), slice.heads(wb, 2), state, causal(c),
                                        slice.tokens(yb, p), slice.rows(lb, p), next)) {
                return code;
            }
            std::swap(state, next);
        }
        if (start) slice.heads(cache, 2).copy_from(state);
        return 0;
    });
    return ran(k, code, GKA_ERR_INTERNAL);
}

}  // namespace

gka_status cpu_feature_forward(const gka_call &c, const CpuFamily &f) { return feature_forward(c, f, nullptr); }

gka_status cpu_feature_decode(const gka_call &c, const CpuFamily &f) {
    return feature_forward(c, f, static_cast<float *>(c.cache));
}

// A decode without elements to compute. Another dimension than D at 0 leaves
// no row to write and no key to add. With D = 0 every feature of every token
// is 1: a row's sum is its keys' count, which each feature's column of the
// state holds (their mean, as the kernels' estimate averages the features).
gka_status feature_decode_without_kernel(const gka_call &c) {
    const gka_shape &s = c.shape;
    auto *state = static_cast<float *>(c.cache);
    for (int64_t b = 0; s.head_dim == 0 && b < s.batch; b++)
        for (int64_t h = 0; h < s.heads; h++) {
            float *counts = state + (b * s.heads + h) * c.features;
            double before = 0.0;
            for (int64_t m = 0; m < c.features; m++) before += counts[m];
            before /= double(c.features);
            for (int64_t i = 0; i < s.seq_len; i++) {
                c.lse[(b * s.heads + h) * s.seq_len + i] = float(std::log(before + double(i + 1)));
            }
            for (int64_t m = 0; m < c.features; m++) counts[m] += float(s.seq_len);
        }
    return ran("", 0, GKA_ERR_INTERNAL);
}

gka_status cpu_feature_backward(const gka_call &c, const CpuFamily &f) {
    const auto *states = feature_states_variant(f.name);
    const auto *k = feature_backward_variant(f.name);
    if (states == nullptr) return not_built("random-feature states", f, c);
    if (k == nullptr) return not_built("random-feature backward", f, c);
    const gka_shape t = tensor_shape(c);
    auto feature = [&](const void *p) { return features(static_cast<const float *>(p), t); };
    auto xb = feature(c.x), yb = feature(c.y), dyb = feature(c.dy), dxb = feature(c.dx);
    auto sb = per_head(c.sigma, t);
    auto lb = rows(c.lse, t);
    auto wb = frequencies(c.frequencies, c);
    const std::vector<Segment> parts = segments(c);
    const int64_t per_head_w = c.features * c.shape.head_dim;
    std::fill_n(c.dfrequencies, t.heads * per_head_w, 0.0f);
    std::fill_n(c.dsigma, t.heads, 0.0f);
    DenormalsFlushed flushed;
    const int code = by_head_slices(c, heads_at_once(c, parts), [&](const HeadSlice &slice) {
        auto sigma = slice.heads(sb, 0);
        auto w = slice.heads(wb, 2);
        // The keys' state at each segment's start.
        std::vector<State> key_states;
        for (size_t s = 0; s < parts.size(); s++) {
            key_states.push_back(new_state(c, slice.count));
            if (parts[s].starts) continue;
            if (const int code = states->run(slice.tokens(xb, parts[s - 1]), sigma, w, key_states[s - 1],
                                             key_states[s])) {
                return code;
            }
        }
        State query_state = new_state(c, slice.count), next = new_state(c, slice.count);
        Buffer<float, 3> dw(int(c.shape.head_dim), int(c.features), int(slice.count));
        Buffer<float, 1> dsigma{int(slice.count)};
        for (size_t s = parts.size(); s-- > 0;) {
            const Segment &p = parts[s];
            if (p.ends) query_state.fill(0.0f);
            if (const int code = k->run(slice.tokens(xb, p), sigma, w, key_states[s], slice.tokens(yb, p),
                                        slice.rows(lb, p), slice.tokens(dyb, p), query_state, causal(c),
                                        slice.tokens(dxb, p), dw, dsigma, next)) {
                return code;
            }
            std::swap(query_state, next);
            float *dw_heads = c.dfrequencies + slice.first * per_head_w;
            for (int64_t e = 0; e < slice.count * per_head_w; e++) dw_heads[e] += dw.data()[e];
            for (int64_t h = 0; h < slice.count; h++) c.dsigma[slice.first + h] += dsigma(int(h));
        }
        return 0;
    });
    return ran(k, code, GKA_ERR_INTERNAL);
}

}  // namespace gka::internal
