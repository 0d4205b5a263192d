// The forward and backward on CUDA (gka.h, gka_forward_cuda): the C ABI's entry
// points, float32 and bfloat16, and the runs on a family that varlen shares.
#include "HalideBuffer.h"
#include "buffers.h"
#include "cuda_internal.h"
#include "gka/gka.h"
#include "internal.h"
#include "kernel_variants.h"

namespace gka::internal::cuda {

template <class T>
gka_status run_forward(const char *call, const char *family, gka_shape shape, gka_window window, const T *x,
                       const float *sigma, T *y, float *lse, void *stream) {
    const int64_t D = shape.head_dim, H = shape.heads, T_ = shape.seq_len, B = shape.batch;
    DeviceBuffer xb(x, {D, H, T_, B}), sb(sigma, {H}), yb(y, {D, H, T_, B}), lb(lse, {T_, H, B});
    if (gka_status s = unwrapped(call, {&xb, &sb, &yb, &lb}); s != GKA_OK) return s;
    const auto w = gka::internal::kernel_window(window, T_);
    CallContext context{stream};
    const auto *k = gka::cuda_forward_variant(family, kernel_function(), D,
                                              gka::window_kind(window.left, window.right, T_), T_,
                                              gka::internal::ElementOf<T>::element);
    if (k == nullptr) {
        return gka::not_built("forward", family, kernel_function(), D, gka::internal::ElementOf<T>::element);
    }
    // The CUDA kernels run the direct form alone: the spread, which chooses
    // the form on the CPU, is not read back (that would synchronize the stream).
    Halide::Runtime::Buffer<float, 2> spread(static_cast<int>(H), static_cast<int>(B));
    const int code = k->run(&context, &xb.buf, &sb.buf, w.left, w.right, &yb.buf, &lb.buf, spread.raw_buffer());
    spread.device_free(&context);
    return gka::internal::ran(k, code, GKA_ERR_DEVICE);
}

template <class T>
gka_status run_backward(const char *call, const char *family, gka_shape shape, gka_window window, const T *x,
                        const float *sigma, const T *y, const float *lse, const T *dy, T *dx, float *dsigma,
                        void *stream) {
    const int64_t D = shape.head_dim, H = shape.heads, T_ = shape.seq_len, B = shape.batch;
    DeviceBuffer xb(x, {D, H, T_, B}), sb(sigma, {H}), yb(y, {D, H, T_, B}), lb(lse, {T_, H, B}),
        dyb(dy, {D, H, T_, B}), dxb(dx, {D, H, T_, B}), dsb(dsigma, {H});
    if (gka_status s = unwrapped(call, {&xb, &sb, &yb, &lb, &dyb, &dxb, &dsb}); s != GKA_OK) return s;
    const auto w = gka::internal::kernel_window(window, T_);
    CallContext context{stream};
    const auto *k = gka::cuda_backward_variant(family, kernel_function(), D,
                                               gka::window_kind(window.left, window.right, T_), T_,
                                               gka::internal::ElementOf<T>::element);
    if (k == nullptr) {
        return gka::not_built("backward", family, kernel_function(), D, gka::internal::ElementOf<T>::element);
    }
    Halide::Runtime::Buffer<float, 2> spread(static_cast<int>(H), static_cast<int>(B));  // not read back, as in the forward
    const int code = k->run(&context, &xb.buf, &sb.buf, &yb.buf, &lb.buf, &dyb.buf, w.left, w.right, &dxb.buf,
                            &dsb.buf, spread.raw_buffer());
    spread.device_free(&context);
    return gka::internal::ran(k, code, GKA_ERR_DEVICE);
}

// The element types the entry points below and cuda_varlen.cpp run.
template gka_status run_forward(const char *, const char *, gka_shape, gka_window, const float *, const float *,
                                float *, float *, void *);
template gka_status run_forward(const char *, const char *, gka_shape, gka_window, const gka_bf16 *, const float *,
                                gka_bf16 *, float *, void *);
template gka_status run_backward(const char *, const char *, gka_shape, gka_window, const float *, const float *,
                                 const float *, const float *, const float *, float *, float *, void *);
template gka_status run_backward(const char *, const char *, gka_shape, gka_window, const gka_bf16 *,
                                 const float *, const gka_bf16 *, const float *, const gka_bf16 *, gka_bf16 *,
                                 float *, void *);

}  // namespace gka::internal::cuda

namespace {

using gka::internal::cuda::prepare;
using gka::internal::cuda::run_backward;
using gka::internal::cuda::run_forward;

template <class T>
gka_status forward(const char *call, gka_shape shape, gka_window window, const T *x, const float *sigma, T *y,
                   float *lse, void *stream) {
    const char *family = nullptr;
    if (gka_status s = prepare(shape, window, sigma, {{x, "x"}, {sigma, "sigma"}, {y, "y"}, {lse, "lse"}}, &family);
        s != GKA_OK) {
        return s;
    }
    return run_forward(call, family, shape, window, x, sigma, y, lse, stream);
}

template <class T>
gka_status backward(const char *call, gka_shape shape, gka_window window, const T *x, const float *sigma,
                    const T *y, const float *lse, const T *dy, T *dx, float *dsigma, void *stream) {
    const char *family = nullptr;
    if (gka_status s = prepare(shape, window, sigma,
                               {{x, "x"}, {sigma, "sigma"}, {y, "y"}, {lse, "lse"}, {dy, "dy"}, {dx, "dx"},
                                {dsigma, "dsigma"}},
                               &family);
        s != GKA_OK) {
        return s;
    }
    return run_backward(call, family, shape, window, x, sigma, y, lse, dy, dx, dsigma, stream);
}

}  // namespace

extern "C" {

gka_status gka_forward_cuda(gka_shape shape, gka_window window, const float *x, const float *sigma, float *y,
                            float *lse, void *stream) {
    return forward("gka_forward_cuda", shape, window, x, sigma, y, lse, stream);
}

gka_status gka_forward_bf16_cuda(gka_shape shape, gka_window window, const gka_bf16 *x, const float *sigma,
                                 gka_bf16 *y, float *lse, void *stream) {
    return forward("gka_forward_bf16_cuda", shape, window, x, sigma, y, lse, stream);
}

gka_status gka_backward_cuda(gka_shape shape, gka_window window, const float *x, const float *sigma,
                             const float *y, const float *lse, const float *dy, float *dx, float *dsigma,
                             void *stream) {
    return backward("gka_backward_cuda", shape, window, x, sigma, y, lse, dy, dx, dsigma, stream);
}

gka_status gka_backward_bf16_cuda(gka_shape shape, gka_window window, const gka_bf16 *x, const float *sigma,
                                  const gka_bf16 *y, const float *lse, const gka_bf16 *dy, gka_bf16 *dx,
                                  float *dsigma, void *stream) {
    return backward("gka_backward_bf16_cuda", shape, window, x, sigma, y, lse, dy, dx, dsigma, stream);
}

}  // extern "C"
