// The forward and backward on CUDA (gka.h, gka_run_forward with GKA_CUDA) on a
// checked description, float32 and bfloat16; varlen runs them on each sequence.
#include "HalideBuffer.h"
#include "buffers.h"
#include "cuda_internal.h"
#include "kernel_variants.h"

namespace gka::internal::cuda {

namespace {

template <class T>
gka_status forward(const gka_call &c, const char *family, const char *name) {
    const int64_t D = c.shape.head_dim, H = c.shape.heads, T_ = c.shape.seq_len, B = c.shape.batch;
    DeviceBuffer xb(static_cast<const T *>(c.x), {D, H, T_, B}), sb(c.sigma, {H}),
        yb(static_cast<T *>(c.y), {D, H, T_, B}), lb(c.lse, {T_, H, B});
    if (gka_status s = unwrapped(name, {&xb, &sb, &yb, &lb}); s != GKA_OK) return s;
    const auto w = kernel_window(c.window, T_);
    CallContext context{c.stream};
    const auto *k = gka::cuda_forward_variant(family, kernel_function(c), D,
                                              gka::window_kind(c.window.left, c.window.right, T_), T_,
                                              ElementOf<T>::element);
    if (k == nullptr) return gka::not_built("forward", family, kernel_function(c), D, ElementOf<T>::element);
    // The CUDA kernels run the direct form alone: the spread, which chooses
    // the form on the CPU, is not read back (that would synchronize the stream).
    Halide::Runtime::Buffer<float, 2> spread(static_cast<int>(H), static_cast<int>(B));
    const int code = k->run(&context, &xb.buf, &sb.buf, w.left, w.right, &yb.buf, &lb.buf, spread.raw_buffer());
    spread.device_free(&context);
    return ran(k, code, GKA_ERR_DEVICE);
}

template <class T>
gka_status backward(const gka_call &c, const char *family, const char *name) {
    const int64_t D = c.shape.head_dim, H = c.shape.heads, T_ = c.shape.seq_len, B = c.shape.batch;
    DeviceBuffer xb(static_cast<const T *>(c.x), {D, H, T_, B}), sb(c.sigma, {H}),
        yb(static_cast<const T *>(c.y), {D, H, T_, B}), lb(c.lse, {T_, H, B}),
        dyb(static_cast<const T *>(c.dy), {D, H, T_, B}), dxb(static_cast<T *>(c.dx), {D, H, T_, B}),
        dsb(c.dsigma, {H});
    if (gka_status s = unwrapped(name, {&xb, &sb, &yb, &lb, &dyb, &dxb, &dsb}); s != GKA_OK) return s;
    const auto w = kernel_window(c.window, T_);
    CallContext context{c.stream};
    const auto *k = gka::cuda_backward_variant(family, kernel_function(c), D,
                                               gka::window_kind(c.window.left, c.window.right, T_), T_,
                                               ElementOf<T>::element);
    if (k == nullptr) return gka::not_built("backward", family, kernel_function(c), D, ElementOf<T>::element);
    Halide::Runtime::Buffer<float, 2> spread(static_cast<int>(H), static_cast<int>(B));  // not read back, as in the forward
    const int code = k->run(&context, &xb.buf, &sb.buf, &yb.buf, &lb.buf, &dyb.buf, w.left, w.right, &dxb.buf,
                            &dsb.buf, spread.raw_buffer());
    spread.device_free(&context);
    return ran(k, code, GKA_ERR_DEVICE);
}

}  // namespace

gka_status forward(const gka_call &c, const char *family, const char *name) {
    return c.dtype == GKA_BFLOAT16 ? forward<gka_bf16>(c, family, name) : forward<float>(c, family, name);
}

gka_status backward(const gka_call &c, const char *family, const char *name) {
    return c.dtype == GKA_BFLOAT16 ? backward<gka_bf16>(c, family, name) : backward<float>(c, family, name);
}

}  // namespace gka::internal::cuda
