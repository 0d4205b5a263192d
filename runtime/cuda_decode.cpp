// Decode on CUDA (gka.h, gka_decode_cuda): the new tokens against the cache,
// then their features written into its ring on the same stream.
#include <algorithm>
#include <string>

#include "HalideBuffer.h"
#include "buffers.h"
#include "cuda_internal.h"
#include "gka/gka.h"
#include "internal.h"
#include "kernel_variants.h"

namespace {

using gka::internal::fail;
using gka::internal::cuda::BoundContext;
using gka::internal::cuda::CallContext;
using gka::internal::cuda::CUdeviceptr;
using gka::internal::cuda::CUresult;
using gka::internal::cuda::DeviceBuffer;
using gka::internal::cuda::driver;
using gka::internal::cuda::driver_message;
using gka::internal::cuda::prepare;
using gka::internal::cuda::unwrapped;

template <class T>
gka_status decode(const char *call, gka_shape shape, int64_t capacity, gka_window window, const T *x,
                  const float *sigma, const int64_t *cache_lens, T *cache, T *y, float *lse, void *stream) {
    const char *family = nullptr;
    if (gka_status s = prepare(shape, window, sigma,
                               {{x, "x"}, {sigma, "sigma"}, {cache_lens, "cache_lens"}, {cache, "cache"}, {y, "y"},
                                {lse, "lse"}},
                               &family, [&] { return gka::internal::check_decode(shape, capacity, window, cache_lens); });
        s != GKA_OK) {
        return s;
    }
    const int64_t D = shape.head_dim, H = shape.heads, Tq = shape.seq_len, B = shape.batch;
    DeviceBuffer xb(x, {D, H, Tq, B}), cb(cache, {D, H, capacity, B}), sb(sigma, {H}), yb(y, {D, H, Tq, B}),
        lb(lse, {Tq, H, B});
    if (gka_status s = unwrapped(call, {&xb, &cb, &sb, &yb, &lb}); s != GKA_OK) return s;
    // The lengths from the host; Halide copies them to the device.
    Halide::Runtime::Buffer<int32_t, 1> lengths(static_cast<int>(B));
    for (int64_t b = 0; b < B; b++) lengths(int(b)) = int32_t(cache_lens[b]);
    CallContext context{stream};
    const auto *k =
        gka::cuda_decode_variant(family, gka::internal::kernel_function(), D, gka::internal::ElementOf<T>::element);
    if (k == nullptr) {
        return gka::not_built("decode", family, gka::internal::kernel_function(), D,
                              gka::internal::ElementOf<T>::element);
    }
    // A span past the capacity reaches what a span of the capacity does (check_decode).
    const int32_t left = gka::internal::kernel_window(window, capacity).left;
    const int code = k->run(&context, &xb.buf, &cb.buf, lengths.raw_buffer(), &sb.buf, left, &yb.buf, &lb.buf);
    lengths.device_free(&context);
    if (gka_status s = gka::internal::ran(k, code, GKA_ERR_DEVICE); s != GKA_OK) return s;
    // The new tokens' features into their slots (the last `capacity` of them),
    // on the same stream: after the kernels have read the cache. The slots of a
    // sequence are one run, or two where the ring wraps.
    BoundContext bound(call);
    if (bound.status != GKA_OK) return bound.status;
    const size_t row = size_t(H * D) * sizeof(T);
    const int64_t first = std::max<int64_t>(0, Tq - capacity);
    for (int64_t b = 0; b < B; b++) {
        for (int64_t q = first; q < Tq;) {
            const int64_t slot = (cache_lens[b] + q) % capacity;
            const int64_t rows = std::min(Tq - q, capacity - slot);
            const auto to = CUdeviceptr(uintptr_t(cache)) + (b * capacity + slot) * row;
            const auto from = CUdeviceptr(uintptr_t(x)) + (b * Tq + q) * row;
            if (CUresult r = driver.cuMemcpyDtoDAsync(to, from, rows * row, stream); r != 0) {
                return fail(GKA_ERR_DEVICE, std::string(call) + ": " + driver_message("cuMemcpyDtoDAsync", r));
            }
            q += rows;
        }
    }
    return GKA_OK;
}

}  // namespace

extern "C" {

gka_status gka_decode_cuda(gka_shape shape, int64_t capacity, gka_window window, const float *x, const float *sigma,
                           const int64_t *cache_lens, float *cache, float *y, float *lse, void *stream) {
    return decode("gka_decode_cuda", shape, capacity, window, x, sigma, cache_lens, cache, y, lse, stream);
}

gka_status gka_decode_bf16_cuda(gka_shape shape, int64_t capacity, gka_window window, const gka_bf16 *x,
                                const float *sigma, const int64_t *cache_lens, gka_bf16 *cache, gka_bf16 *y,
                                float *lse, void *stream) {
    return decode("gka_decode_bf16_cuda", shape, capacity, window, x, sigma, cache_lens, cache, y, lse, stream);
}

}  // extern "C"
