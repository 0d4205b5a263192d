// The CPU forward, backward and decode (gka.h, gka_run_forward) on a checked
// description (call.h): the score forms a call tries, in turn, and the kernels.
#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "HalideBuffer.h"
#include "buffers.h"
#include "call.h"
#include "denormals.h"
#include "kernel_variants.h"
#include "../schedules/backward_tasks.h"

namespace {

using gka::CpuFamily;
using gka::internal::ElementOf;
using gka::internal::features;
using gka::internal::part_of;
using gka::internal::kernel_window;
using gka::internal::KernelWindow;
using gka::internal::per_head;
using gka::internal::rows;
using Halide::Runtime::Buffer;

gka::WindowKind window_kind(const gka_window &w, const gka_shape &s) {
    return gka::window_kind(w.left, w.right, s.seq_len);
}

// Whether the expansion's scores meet the accuracy contract (docs/spec.md) on these
// inputs: each score's rounding is about eps * sqrt(D) * |c|^2 / sigma^2 for
// features c about the variant's centre (the origin's: x itself), and its
// weight's relative error the same. Where some
// (head, batch) has max_t |c_t|^2 above expansion_limit * sigma_h^2 (tokens
// far apart in units of sigma, whose near neighbours, if any, would get
// scores of noise), the next form runs instead. tests/test_accuracy.cpp
// probes this boundary.
constexpr double expansion_limit = 64;
bool expansion_serves(const Buffer<float, 2> &spread, const float *sigma) {
    for (int b = 0; b < spread.dim(1).extent(); b++)
        for (int h = 0; h < spread.dim(0).extent(); h++) {
            const double var = double(sigma[h]) * sigma[h];
            if (!(spread(h, b) <= expansion_limit * var)) return false;
        }
    return true;
}

// Every row's only key is itself: the direct form gives the exact dx = dy,
// dsigma = 0 (its dS is dy . (x_i - y_i), and y_i = x_i).
bool self_only(const gka::internal::KernelWindow &w, const gka_shape &s) {
    return s.seq_len == 1 || (w.left == 0 && w.right == 0);
}

// Whether the forward's expansion about the origin may serve these inputs:
// sampled tokens (16 spread over the sequence, in up to 4 batch entries: at
// most 64 a head, whatever the call's size) lie within the expansion's
// bound of the origin. The kernel's spread, over every token, decides; this
// test spares a run that the samples already rule out (features with a
// common offset), so that such calls cost one expansion, not two.
template <class T>
bool origin_may_serve(const T *x, const gka_shape &s, const float *sigma) {
    const int64_t tokens = std::min<int64_t>(s.seq_len, 16), batches = std::min<int64_t>(s.batch, 4);
    for (int64_t m = 0; m < batches; m++)
        for (int64_t n = 0; n < tokens; n++) {
            const int64_t b = m * s.batch / batches, t = n * s.seq_len / tokens;
            const T *token = x + ((b * s.seq_len + t) * s.heads) * s.head_dim;
            for (int64_t h = 0; h < s.heads; h++) {
                double norm = 0;
                for (int64_t d = 0; d < s.head_dim; d++) {
                    const double v = ElementOf<T>::value(token[h * s.head_dim + d]);
                    norm += v * v;
                }
                if (!(norm <= expansion_limit * double(sigma[h]) * sigma[h])) return false;
            }
        }
    return true;
}

// Runs the score forms a call tries, in turn, of those the build compiled
// (kernels/variants.py: the expansions for the Gaussian alone, whose origin
// form the forward's and, with bfloat16 products, the backward's; the direct
// form, which serves every input): where `expansions`, the origin's expansion
// as the call's policy asks (under "auto" where origin_may_serve: its samples
// of x are read only where the variant exists) and the centred one, then the
// direct form, each until one serves the inputs. `pick` gives a form's variant
// (null: not compiled), `run` runs one, writing the spread; `not_built` is the
// error of a call that no compiled form serves.
template <class T, class Pick, class Run, class NotBuilt>
gka_status run_serving_form(const gka_call &c, bool expansions, Pick pick, Run run, const Buffer<float, 2> &spread,
                            NotBuilt not_built) {
    const T *x = static_cast<const T *>(c.x);
    const bool origin = expansions && pick(gka::ScoreForm::origin) != nullptr &&
                        (c.scores == GKA_SCORES_ORIGIN ||
                         (c.scores == GKA_SCORES_AUTO && origin_may_serve(x, c.shape, c.sigma)));
    const std::pair<gka::ScoreForm, bool> forms[] = {
        {gka::ScoreForm::origin, origin}, {gka::ScoreForm::centred, expansions}, {gka::ScoreForm::direct, true}};
    for (const auto &[form, wanted] : forms) {
        const auto *k = wanted ? pick(form) : nullptr;
        if (k == nullptr) continue;
        const int code = run(k);
        if (code != 0 || form == gka::ScoreForm::direct || expansion_serves(spread, c.sigma)) {
            return gka::internal::ran(k, code, GKA_ERR_INTERNAL);
        }
    }
    return not_built();
}

template <class T>
gka_status forward(const gka_call &c, const CpuFamily &f) {
    const gka_shape &shape = c.shape;
    const T *x = static_cast<const T *>(c.x);
    auto xb = features(x, shape), yb = features(static_cast<T *>(c.y), shape);
    auto sb = per_head(c.sigma, shape);
    auto lb = rows(c.lse, shape);
    const KernelWindow w = kernel_window(c.window, shape.seq_len);
    const auto kind = window_kind(c.window, shape);
    const gka::KernelFunction function = gka::internal::kernel_function(c);
    Buffer<float, 2> spread(int(shape.heads), int(shape.batch));
    gka::DenormalsFlushed flushed;
    auto pick = [&](gka::ScoreForm form) {
        return gka::forward_variant(f.name, function, shape.head_dim, kind, shape.seq_len, form,
                                    ElementOf<T>::element);
    };
    return run_serving_form<T>(
        c, c.scores != GKA_SCORES_DIRECT, pick,
        [&](const auto *k) { return k->run(xb, sb, w.left, w.right, yb, lb, spread); }, spread,
        [&] { return gka::not_built("forward", f.name, function, shape.head_dim, ElementOf<T>::element); });
}

// A backward's working buffers hold about four tensors the size of x for the
// heads of one run (the head-major x and dy, the keys' and the queries' sums:
// docs/performance.md, "Working memory"). A run of a slice of the heads holds
// them for those heads alone, so a call runs slices of every batch entry's
// heads [first, first + count), each of tasks enough for the threads (one a
// head and batch entry) and for the kernel's min_tasks (backward_tasks.h:
// its key-band groups, and so its results, are then the whole call's). Each
// slice holds all batch entries: dsigma sums them in the kernel's order.
struct HeadSlice {
    int first, count;
};

// The knob's value in "name:value,..." (a variant's knobs), or `otherwise`.
int knob(const char *knobs, const std::string &name, int otherwise) {
    const std::string all = std::string(",") + knobs, key = "," + name + ":";
    const size_t at = all.find(key);
    return at == std::string::npos ? otherwise : std::atoi(all.c_str() + at + key.size());
}

std::vector<HeadSlice> head_slices(const gka_shape &s, const char *knobs) {
    const int64_t tasks = std::max(halide_get_num_threads(), knob(knobs, "min_tasks", gka::default_backward_min_tasks));
    const int64_t least_heads = (tasks + s.batch - 1) / s.batch;  // a slice's
    const int slices = int(std::max<int64_t>(1, s.heads / least_heads));
    std::vector<HeadSlice> out;
    for (int k = 0; k < slices; k++) {
        const int first = int(s.heads * k / slices), end = int(s.heads * (k + 1) / slices);
        out.push_back({first, end - first});
    }
    return out;
}

template <class T>
gka_status backward(const gka_call &c, const CpuFamily &f) {
    const gka_shape &shape = c.shape;
    auto xb = features(static_cast<const T *>(c.x), shape), yb = features(static_cast<const T *>(c.y), shape);
    auto dyb = features(static_cast<const T *>(c.dy), shape), dxb = features(static_cast<T *>(c.dx), shape);
    auto sb = per_head(c.sigma, shape), dsb = per_head(c.dsigma, shape);
    auto lb = rows(c.lse, shape);
    const KernelWindow w = kernel_window(c.window, shape.seq_len);
    const auto kind = window_kind(c.window, shape);
    const gka::KernelFunction function = gka::internal::kernel_function(c);
    Buffer<float, 2> spread(int(shape.heads), int(shape.batch));
    gka::DenormalsFlushed flushed;
    auto pick = [&](gka::ScoreForm form) {
        return gka::backward_variant(f.name, function, shape.head_dim, kind, shape.seq_len, form,
                                     ElementOf<T>::element);
    };
    // The expansions where a row has other keys (self_only: the direct form's exact results).
    return run_serving_form<T>(
        c, c.scores != GKA_SCORES_DIRECT && !self_only(w, shape), pick,
        [&](const auto *k) {
            for (const HeadSlice h : head_slices(shape, k->knobs)) {
                auto heads = [&](const auto &b, int dim) { return part_of(b, dim, h.first, h.count); };
                if (const int code = k->run(heads(xb, 1), heads(sb, 0), heads(yb, 1), heads(lb, 1), heads(dyb, 1),
                                            w.left, w.right, heads(dxb, 1), heads(dsb, 0), heads(spread, 0))) {
                    return code;
                }
            }
            return 0;
        },
        spread,
        [&] { return gka::not_built("backward", f.name, function, shape.head_dim, ElementOf<T>::element); });
}

template <class T>
gka_status decode(const gka_call &c, const CpuFamily &f) {
    const gka_shape &shape = c.shape;
    const int64_t capacity = c.cache_capacity;
    const T *x = static_cast<const T *>(c.x);
    T *cache = static_cast<T *>(c.cache);
    gka_shape cache_shape = shape;
    cache_shape.seq_len = capacity;
    auto xb = features(x, shape), yb = features(static_cast<T *>(c.y), shape), cb = features(cache, cache_shape);
    auto sb = per_head(c.sigma, shape);
    auto lb = rows(c.lse, shape);
    Buffer<int32_t, 1> lengths(int(shape.batch));
    for (int64_t b = 0; b < shape.batch; b++) lengths(int(b)) = int32_t(c.cache_lens[b]);
    // A span past the capacity reaches what a span of the capacity does (check_decode).
    const int32_t left = kernel_window(c.window, capacity).left;
    const gka::KernelFunction function = gka::internal::kernel_function(c);
    const auto *k = gka::decode_variant(f.name, function, shape.head_dim, ElementOf<T>::element);
    if (k == nullptr) return gka::not_built("decode", f.name, function, shape.head_dim, ElementOf<T>::element);
    gka::DenormalsFlushed flushed;
    if (gka_status s = gka::internal::ran(k, k->run(xb, cb, lengths, sb, left, yb, lb), GKA_ERR_INTERNAL);
        s != GKA_OK) {
        return s;
    }
    // The new tokens' features into their slots: the last `capacity` of them.
    const int64_t row = shape.heads * shape.head_dim;
    for (int64_t b = 0; b < shape.batch; b++) {
        for (int64_t q = std::max<int64_t>(0, shape.seq_len - capacity); q < shape.seq_len; q++) {
            const int64_t slot = (c.cache_lens[b] + q) % capacity;
            std::copy_n(x + (b * shape.seq_len + q) * row, row, cache + (b * capacity + slot) * row);
        }
    }
    return GKA_OK;
}

}  // namespace

namespace gka::internal {

gka_status cpu_forward(const gka_call &c, const CpuFamily &f) {
    return c.dtype == GKA_BFLOAT16 ? forward<gka_bf16>(c, f) : forward<float>(c, f);
}

gka_status cpu_backward(const gka_call &c, const CpuFamily &f) {
    return c.dtype == GKA_BFLOAT16 ? backward<gka_bf16>(c, f) : backward<float>(c, f);
}

gka_status cpu_decode(const gka_call &c, const CpuFamily &f) {
    return c.dtype == GKA_BFLOAT16 ? decode<gka_bf16>(c, f) : decode<float>(c, f);
}

}  // namespace gka::internal
