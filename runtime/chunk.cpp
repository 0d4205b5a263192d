// Chunked attention (gka.h, gka_forward_chunk): a block of queries against a
// block of keys placed by their positions, through the chunk kernels
// (generators/gka_forward.h and gka_backward_fused.h with keys of their own),
// on a checked description (call.h) whose chunk has pairs in the window.
#include <algorithm>
#include <cstdlib>
#include <string>

#include "buffers.h"
#include "denormals.h"
#include "gka/gka.h"
#include "call.h"
#include "kernel_variants.h"

namespace gka::internal {

using Halide::Runtime::Buffer;

// Positions stay below this, so that the kernels' int32 index arithmetic
// (positions, and spans of up to query_len + key_len + |shift|, under 3 * 2^28)
// cannot overflow.
constexpr int64_t max_position = int64_t(1) << 28;

gka_shape keys_shape(gka_shape s, const gka_chunk &c) {
    s.seq_len = c.key_len;
    return s;
}

std::string chunk_text(const gka_chunk &c) {
    return "chunk (query_start " + std::to_string(c.query_start) + ", key_start " + std::to_string(c.key_start) +
           ", key_len " + std::to_string(c.key_len) + ")";
}

gka_status check_chunk(const gka_shape &shape, const gka_chunk &c) {
    if (c.query_start > max_position - shape.seq_len || c.key_start > max_position - c.key_len) {
        return fail(GKA_ERR_UNSUPPORTED, chunk_text(c) + " with " + std::to_string(shape.seq_len) +
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

gka_status cpu_forward_chunk(const gka_call &c, const CpuFamily &f) {
    const gka_shape &shape = c.shape;
    auto xb = features(static_cast<const float *>(c.x), shape);
    auto kb = features(static_cast<const float *>(c.keys), keys_shape(shape, *c.chunk));
    auto yb = features(static_cast<float *>(c.y), shape);
    auto sb = per_head(c.sigma, shape);
    auto lb = rows(c.lse, shape);
    Buffer<float, 2> spread(int(shape.heads), int(shape.batch));
    const ChunkWindow w = chunk_window(shape, *c.chunk, c.window);
    const auto *k = gka::forward_chunk_variant(f.name, kernel_function(c), shape.head_dim);
    if (k == nullptr) {
        return gka::not_built("forward_chunk", f.name, kernel_function(c), shape.head_dim, gka::Element::f32);
    }
    gka::DenormalsFlushed flushed;
    return ran(k, k->run(xb, kb, sb, w.shift, w.left, w.right, yb, lb, spread), GKA_ERR_INTERNAL);
}

gka_status cpu_backward_chunk(const gka_call &c, const CpuFamily &f) {
    const gka_shape &shape = c.shape, kshape = keys_shape(shape, *c.chunk);
    auto xb = features(static_cast<const float *>(c.x), shape), kb = features(static_cast<const float *>(c.keys), kshape);
    auto yb = features(static_cast<const float *>(c.y), shape), dyb = features(static_cast<const float *>(c.dy), shape);
    auto dxb = features(static_cast<float *>(c.dx), shape), dkb = features(static_cast<float *>(c.dx_keys), kshape);
    auto sb = per_head(c.sigma, shape), dsb = per_head(c.dsigma, shape);
    auto lb = rows(c.lse, shape);
    Buffer<float, 2> spread(int(shape.heads), int(shape.batch));
    const ChunkWindow w = chunk_window(shape, *c.chunk, c.window);
    const auto *k = gka::backward_chunk_variant(f.name, kernel_function(c), shape.head_dim);
    if (k == nullptr) {
        return gka::not_built("backward_chunk", f.name, kernel_function(c), shape.head_dim, gka::Element::f32);
    }
    gka::DenormalsFlushed flushed;
    return ran(k, k->run(xb, kb, sb, yb, lb, dyb, w.shift, w.left, w.right, dxb, dkb, dsb, spread),
               GKA_ERR_INTERNAL);
}

}  // namespace gka::internal
