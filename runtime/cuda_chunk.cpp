// Chunks on CUDA (gka.h, gka_forward_chunk with GKA_CUDA): the direct-form chunk
// kernels on the caller's device memory, for a chunk with pairs in its window
// (the host's rules and window: chunk.cpp).
#include "HalideBuffer.h"
#include "cuda_internal.h"
#include "kernel_variants.h"

namespace gka::internal::cuda {

gka_status forward_chunk(const gka_call &c, const char *family, const char *name) {
    const int64_t D = c.shape.head_dim, H = c.shape.heads, T = c.shape.seq_len, B = c.shape.batch;
    DeviceBuffer xb(static_cast<const float *>(c.x), {D, H, T, B}),
        kb(static_cast<const float *>(c.keys), {D, H, c.chunk->key_len, B}), sb(c.sigma, {H}),
        yb(static_cast<float *>(c.y), {D, H, T, B}), lb(c.lse, {T, H, B});
    if (gka_status s = unwrapped(name, {&xb, &kb, &sb, &yb, &lb}); s != GKA_OK) return s;
    const ChunkWindow w = chunk_window(c.shape, *c.chunk, c.window);
    CallContext context{c.stream};
    const auto *k = gka::cuda_forward_chunk_variant(family, kernel_function(c), D);
    if (k == nullptr) return gka::not_built("forward_chunk", family, kernel_function(c), D, gka::Element::f32);
    Halide::Runtime::Buffer<float, 2> spread(static_cast<int>(H), static_cast<int>(B));  // not read back
    const int code = k->run(&context, &xb.buf, &kb.buf, &sb.buf, w.shift, w.left, w.right, &yb.buf, &lb.buf,
                            spread.raw_buffer());
    spread.device_free(&context);
    return ran(k, code, GKA_ERR_DEVICE);
}

gka_status backward_chunk(const gka_call &c, const char *family, const char *name) {
    const int64_t D = c.shape.head_dim, H = c.shape.heads, T = c.shape.seq_len, B = c.shape.batch;
    const int64_t K = c.chunk->key_len;
    DeviceBuffer xb(static_cast<const float *>(c.x), {D, H, T, B}), kb(static_cast<const float *>(c.keys), {D, H, K, B}),
        sb(c.sigma, {H}), yb(static_cast<const float *>(c.y), {D, H, T, B}), lb(c.lse, {T, H, B}),
        dyb(static_cast<const float *>(c.dy), {D, H, T, B}), dxb(static_cast<float *>(c.dx), {D, H, T, B}),
        dkb(static_cast<float *>(c.dx_keys), {D, H, K, B}), dsb(c.dsigma, {H});
    if (gka_status s = unwrapped(name, {&xb, &kb, &sb, &yb, &lb, &dyb, &dxb, &dkb, &dsb}); s != GKA_OK) return s;
    const ChunkWindow w = chunk_window(c.shape, *c.chunk, c.window);
    CallContext context{c.stream};
    const auto *k = gka::cuda_backward_chunk_variant(family, kernel_function(c), D);
    if (k == nullptr) return gka::not_built("backward_chunk", family, kernel_function(c), D, gka::Element::f32);
    Halide::Runtime::Buffer<float, 2> spread(static_cast<int>(H), static_cast<int>(B));  // not read back
    const int code = k->run(&context, &xb.buf, &kb.buf, &sb.buf, &yb.buf, &lb.buf, &dyb.buf, w.shift, w.left,
                            w.right, &dxb.buf, &dkb.buf, &dsb.buf, spread.raw_buffer());
    spread.device_free(&context);
    return ran(k, code, GKA_ERR_DEVICE);
}

}  // namespace gka::internal::cuda
