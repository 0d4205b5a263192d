// Decode on CUDA (gka.h, gka_run_decode with GKA_CUDA): the new tokens against the cache,
// then their features written into its ring on the same stream.
#include <algorithm>
#include <string>

#include "HalideBuffer.h"
#include "buffers.h"
#include "cuda_internal.h"
#include "kernel_variants.h"

namespace gka::internal::cuda {

namespace {

template <class T>
gka_status decode(const gka_call &c, const char *family, const char *name) {
    const int64_t D = c.shape.head_dim, H = c.shape.heads, Tq = c.shape.seq_len, B = c.shape.batch;
    const int64_t capacity = c.cache_capacity;
    const T *x = static_cast<const T *>(c.x);
    T *cache = static_cast<T *>(c.cache);
    DeviceBuffer xb(x, {D, H, Tq, B}), cb(cache, {D, H, capacity, B}), sb(c.sigma, {H}),
        yb(static_cast<T *>(c.y), {D, H, Tq, B}), lb(c.lse, {Tq, H, B});
    if (gka_status s = unwrapped(name, {&xb, &cb, &sb, &yb, &lb}); s != GKA_OK) return s;
    // The lengths from the host; Halide copies them to the device.
    Halide::Runtime::Buffer<int32_t, 1> lengths(static_cast<int>(B));
    for (int64_t b = 0; b < B; b++) lengths(int(b)) = int32_t(c.cache_lens[b]);
    CallContext context{c.stream};
    const auto *k = gka::cuda_decode_variant(family, kernel_function(c), D, ElementOf<T>::element);
    if (k == nullptr) return gka::not_built("decode", family, kernel_function(c), D, ElementOf<T>::element);
    // A span past the capacity reaches what a span of the capacity does (check_decode).
    const int32_t left = kernel_window(c.window, capacity).left;
    const int code = k->run(&context, &xb.buf, &cb.buf, lengths.raw_buffer(), &sb.buf, left, &yb.buf, &lb.buf);
    lengths.device_free(&context);
    if (gka_status s = ran(k, code, GKA_ERR_DEVICE); s != GKA_OK) return s;
    // The new tokens' features into their slots (the last `capacity` of them),
    // on the same stream: after the kernels have read the cache. The slots of a
    // sequence are one run, or two where the ring wraps.
    BoundContext bound(name);
    if (bound.status != GKA_OK) return bound.status;
    const size_t row = size_t(H * D) * sizeof(T);
    const int64_t first = std::max<int64_t>(0, Tq - capacity);
    for (int64_t b = 0; b < B; b++) {
        for (int64_t q = first; q < Tq;) {
            const int64_t slot = (c.cache_lens[b] + q) % capacity;
            const int64_t rows = std::min(Tq - q, capacity - slot);
            const auto to = CUdeviceptr(uintptr_t(cache)) + (b * capacity + slot) * row;
            const auto from = CUdeviceptr(uintptr_t(x)) + (b * Tq + q) * row;
            if (CUresult r = driver.cuMemcpyDtoDAsync(to, from, rows * row, c.stream); r != 0) {
                return fail(GKA_ERR_DEVICE, std::string(name) + ": " + driver_message("cuMemcpyDtoDAsync", r));
            }
            q += rows;
        }
    }
    return GKA_OK;
}

}  // namespace

gka_status decode(const gka_call &c, const char *family, const char *name) {
    return c.dtype == GKA_BFLOAT16 ? decode<gka_bf16>(c, family, name) : decode<float>(c, family, name);
}

}  // namespace gka::internal::cuda
