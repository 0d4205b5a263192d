// Chunked attention (gka.h, gka_forward_chunk): a block of queries against a
// block of keys placed by their positions, through the chunk kernels
// (generators/gka_forward.h and gka_backward_fused.h with keys of their own).
#include <algorithm>
#include <cstdlib>
#include <limits>
#include <string>

#include "buffers.h"
#include "denormals.h"
#include "gka/gka.h"
#include "internal.h"
#include "kernel_variants.h"

namespace gka::internal {

// Positions stay below this, so that the kernels' int32 index arithmetic
// (positions, and spans of up to query_len + key_len + |shift|, under 3 * 2^28)
// cannot overflow.
constexpr int64_t max_position = int64_t(1) << 28;

gka_shape keys_shape(gka_shape s, const gka_chunk &c) {
    s.seq_len = c.key_len;
    return s;
}

namespace {
std::string text(const gka_chunk &c) {
    return "chunk (query_start " + std::to_string(c.query_start) + ", key_start " + std::to_string(c.key_start) +
           ", key_len " + std::to_string(c.key_len) + ")";
}
}  // namespace

gka_status check_chunk(const gka_shape &shape, const gka_chunk &c) {
    if (c.query_start < 0 || c.key_start < 0 || c.key_len < 1) {
        return fail(GKA_ERR_INVALID_ARGUMENT, text(c) + ": starts must be >= 0 and key_len >= 1");
    }
    if (c.query_start > max_position - shape.seq_len || c.key_start > max_position - c.key_len) {
        return fail(GKA_ERR_UNSUPPORTED, text(c) + " with " + std::to_string(shape.seq_len) +
                                             " queries: positions past 2^28, more than the kernels address");
    }
    if (__int128(shape.batch) * c.key_len * shape.heads * shape.head_dim > INT32_MAX) {
        return fail(GKA_ERR_UNSUPPORTED, "the keys have more than 2^31 - 1 elements, the most the kernels address");
    }
    return GKA_OK;
}

// Whether some (query, key) pair of the chunk is in the window: the offsets
// key - query of its pairs span [nearest, farthest], the window's [-left, right].
bool has_pairs(const gka_shape &shape, const gka_chunk &c, const gka_window &w) {
    const int64_t lowest = c.key_start - (c.query_start + shape.seq_len - 1);
    const int64_t highest = c.key_start + c.key_len - 1 - c.query_start;
    return !(w.right >= 0 && lowest > w.right) && !(w.left >= 0 && highest < -w.left);
}

ChunkWindow chunk_window(const gka_shape &shape, const gka_chunk &c, const gka_window &w) {
    const int64_t shift = c.query_start - c.key_start, limit = shape.seq_len + c.key_len + std::abs(shift);
    auto span = [&](int64_t s) { return s < 0 ? -1 : int32_t(std::min(s, limit)); };
    return {int32_t(shift), span(w.left), span(w.right)};
}

}  // namespace gka::internal

namespace {

using gka::internal::chunk_window;
using gka::internal::ChunkWindow;
using gka::internal::check_chunk;
using gka::internal::fail;
using gka::internal::features;
using gka::internal::has_pairs;
using gka::internal::keys_shape;
using gka::internal::per_head;
using gka::internal::rows;
using Halide::Runtime::Buffer;

}  // namespace

extern "C" {

gka_status gka_forward_chunk(gka_shape shape, gka_chunk chunk, gka_window window, const float *x, const float *keys,
                             const float *sigma, float *y, float *lse) {
    gka::internal::clear_error();
    if (gka_status s = gka::internal::check_arguments(shape, window, sigma,
                                                      {{x, "x"}, {keys, "keys"}, {sigma, "sigma"}, {y, "y"},
                                                       {lse, "lse"}});
        s != GKA_OK) {
        return s;
    }
    if (gka_status s = check_chunk(shape, chunk); s != GKA_OK) return s;
    const gka::CpuFamily *f = gka::internal::cpu_family();
    if (f == nullptr) return GKA_ERR_UNSUPPORTED;
    if (!has_pairs(shape, chunk, window)) {
        const int64_t queries = shape.batch * shape.heads * shape.seq_len;
        std::fill_n(y, queries * shape.head_dim, 0.0f);
        std::fill_n(lse, queries, -std::numeric_limits<float>::infinity());
        return gka::internal::ran("", 0, GKA_ERR_INTERNAL);
    }
    auto xb = features(x, shape), kb = features(keys, keys_shape(shape, chunk)), yb = features(y, shape);
    auto sb = per_head(sigma, shape);
    auto lb = rows(lse, shape);
    Buffer<float, 2> spread(int(shape.heads), int(shape.batch));
    const ChunkWindow w = chunk_window(shape, chunk, window);
    const auto *k = gka::forward_chunk_variant(f->name, gka::internal::kernel_function(), shape.head_dim);
    if (k == nullptr) {
        return gka::not_built("forward_chunk", f->name, gka::internal::kernel_function(), shape.head_dim,
                              gka::Element::f32);
    }
    gka::DenormalsFlushed flushed;
    return gka::internal::ran(k, k->run(xb, kb, sb, w.shift, w.left, w.right, yb, lb, spread),
                              GKA_ERR_INTERNAL);
}

gka_status gka_backward_chunk(gka_shape shape, gka_chunk chunk, gka_window window, const float *x, const float *keys,
                              const float *sigma, const float *y, const float *lse, const float *dy, float *dx,
                              float *dx_keys, float *dsigma) {
    gka::internal::clear_error();
    if (gka_status s = gka::internal::check_arguments(shape, window, sigma,
                                                      {{x, "x"}, {keys, "keys"}, {sigma, "sigma"}, {y, "y"},
                                                       {lse, "lse"}, {dy, "dy"}, {dx, "dx"}, {dx_keys, "dx_keys"},
                                                       {dsigma, "dsigma"}});
        s != GKA_OK) {
        return s;
    }
    if (gka_status s = check_chunk(shape, chunk); s != GKA_OK) return s;
    const gka::CpuFamily *f = gka::internal::cpu_family();
    if (f == nullptr) return GKA_ERR_UNSUPPORTED;
    if (!has_pairs(shape, chunk, window)) {
        std::fill_n(dx, shape.batch * shape.seq_len * shape.heads * shape.head_dim, 0.0f);
        std::fill_n(dx_keys, shape.batch * chunk.key_len * shape.heads * shape.head_dim, 0.0f);
        std::fill_n(dsigma, shape.heads, 0.0f);
        return gka::internal::ran("", 0, GKA_ERR_INTERNAL);
    }
    const gka_shape kshape = keys_shape(shape, chunk);
    auto xb = features(x, shape), kb = features(keys, kshape), yb = features(y, shape), dyb = features(dy, shape);
    auto dxb = features(dx, shape), dkb = features(dx_keys, kshape);
    auto sb = per_head(sigma, shape), dsb = per_head(dsigma, shape);
    auto lb = rows(lse, shape);
    Buffer<float, 2> spread(int(shape.heads), int(shape.batch));
    const ChunkWindow w = chunk_window(shape, chunk, window);
    const auto *k = gka::backward_chunk_variant(f->name, gka::internal::kernel_function(), shape.head_dim);
    if (k == nullptr) {
        return gka::not_built("backward_chunk", f->name, gka::internal::kernel_function(), shape.head_dim,
                              gka::Element::f32);
    }
    gka::DenormalsFlushed flushed;
    return gka::internal::ran(
        k, k->run(xb, kb, sb, yb, lb, dyb, w.shift, w.left, w.right, dxb, dkb, dsb, spread), GKA_ERR_INTERNAL);
}

}  // extern "C"
