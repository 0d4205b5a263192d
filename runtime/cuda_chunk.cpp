// Chunks on CUDA (gka.h, gka_forward_chunk_cuda): the host's checks and window
// (chunk.cpp), the direct-form chunk kernels on the caller's device memory.
#include <limits>

#include "HalideBuffer.h"
#include "cuda_internal.h"
#include "gka/gka.h"
#include "internal.h"
#include "kernel_variants.h"

namespace {

using gka::internal::cuda::CallContext;
using gka::internal::cuda::DeviceBuffer;
using gka::internal::cuda::fill;
using gka::internal::cuda::prepare;
using gka::internal::cuda::unwrapped;

}  // namespace

extern "C" {

gka_status gka_forward_chunk_cuda(gka_shape shape, gka_chunk chunk, gka_window window, const float *x,
                                  const float *keys, const float *sigma, float *y, float *lse, void *stream) {
    const char *call = "gka_forward_chunk_cuda", *family = nullptr;
    if (gka_status s = prepare(shape, window, sigma, {{x, "x"}, {keys, "keys"}, {sigma, "sigma"}, {y, "y"}, {lse, "lse"}},
                               &family, [&] { return gka::internal::check_chunk(shape, chunk); });
        s != GKA_OK) {
        return s;
    }
    const int64_t D = shape.head_dim, H = shape.heads, T = shape.seq_len, B = shape.batch;
    if (!gka::internal::has_pairs(shape, chunk, window)) {
        gka_status s = fill(call, y, B * T * H * D, 0.0f, stream);
        if (s == GKA_OK) s = fill(call, lse, B * H * T, -std::numeric_limits<float>::infinity(), stream);
        return s == GKA_OK ? gka::internal::ran("", 0, GKA_ERR_DEVICE) : s;
    }
    DeviceBuffer xb(x, {D, H, T, B}), kb(keys, {D, H, chunk.key_len, B}), sb(sigma, {H}), yb(y, {D, H, T, B}),
        lb(lse, {T, H, B});
    if (gka_status s = unwrapped(call, {&xb, &kb, &sb, &yb, &lb}); s != GKA_OK) return s;
    const gka::internal::ChunkWindow w = gka::internal::chunk_window(shape, chunk, window);
    CallContext context{stream};
    const auto *k = gka::cuda_forward_chunk_variant(family, gka::internal::kernel_function(), D);
    if (k == nullptr) {
        return gka::not_built("forward_chunk", family, gka::internal::kernel_function(), D, gka::Element::f32);
    }
    Halide::Runtime::Buffer<float, 2> spread(static_cast<int>(H), static_cast<int>(B));  // not read back
    const int code = k->run(&context, &xb.buf, &kb.buf, &sb.buf, w.shift, w.left, w.right, &yb.buf, &lb.buf,
                            spread.raw_buffer());
    spread.device_free(&context);
    return gka::internal::ran(k, code, GKA_ERR_DEVICE);
}

gka_status gka_backward_chunk_cuda(gka_shape shape, gka_chunk chunk, gka_window window, const float *x,
                                   const float *keys, const float *sigma, const float *y, const float *lse,
                                   const float *dy, float *dx, float *dx_keys, float *dsigma, void *stream) {
    const char *call = "gka_backward_chunk_cuda", *family = nullptr;
    if (gka_status s = prepare(shape, window, sigma,
                               {{x, "x"}, {keys, "keys"}, {sigma, "sigma"}, {y, "y"}, {lse, "lse"}, {dy, "dy"},
                                {dx, "dx"}, {dx_keys, "dx_keys"}, {dsigma, "dsigma"}},
                               &family, [&] { return gka::internal::check_chunk(shape, chunk); });
        s != GKA_OK) {
        return s;
    }
    const int64_t D = shape.head_dim, H = shape.heads, T = shape.seq_len, B = shape.batch, K = chunk.key_len;
    if (!gka::internal::has_pairs(shape, chunk, window)) {
        gka_status s = fill(call, dx, B * T * H * D, 0.0f, stream);
        if (s == GKA_OK) s = fill(call, dx_keys, B * K * H * D, 0.0f, stream);
        if (s == GKA_OK) s = fill(call, dsigma, H, 0.0f, stream);
        return s == GKA_OK ? gka::internal::ran("", 0, GKA_ERR_DEVICE) : s;
    }
    DeviceBuffer xb(x, {D, H, T, B}), kb(keys, {D, H, K, B}), sb(sigma, {H}), yb(y, {D, H, T, B}),
        lb(lse, {T, H, B}), dyb(dy, {D, H, T, B}), dxb(dx, {D, H, T, B}), dkb(dx_keys, {D, H, K, B}),
        dsb(dsigma, {H});
    if (gka_status s = unwrapped(call, {&xb, &kb, &sb, &yb, &lb, &dyb, &dxb, &dkb, &dsb}); s != GKA_OK) return s;
    const gka::internal::ChunkWindow w = gka::internal::chunk_window(shape, chunk, window);
    CallContext context{stream};
    const auto *k = gka::cuda_backward_chunk_variant(family, gka::internal::kernel_function(), D);
    if (k == nullptr) {
        return gka::not_built("backward_chunk", family, gka::internal::kernel_function(), D, gka::Element::f32);
    }
    Halide::Runtime::Buffer<float, 2> spread(static_cast<int>(H), static_cast<int>(B));  // not read back
    const int code = k->run(&context, &xb.buf, &kb.buf, &sb.buf, &yb.buf, &lb.buf, &dyb.buf, w.shift, w.left,
                            w.right, &dxb.buf, &dkb.buf, &dsb.buf, spread.raw_buffer());
    spread.device_free(&context);
    return gka::internal::ran(k, code, GKA_ERR_DEVICE);
}

}  // extern "C"
