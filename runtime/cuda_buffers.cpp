// Device memory as libgka's device entry points handle it (cuda_internal.h):
// whether the caller's tensors wrapped, fills, uploads, a call's own scratch, and 2D copies.
#include <algorithm>
#include <cstring>
#include <string>

#include "cuda_internal.h"
#include "gka/gka.h"
#include "internal.h"

namespace gka::internal::cuda {

gka_status unwrapped(const char *call, std::initializer_list<const DeviceBuffer *> buffers) {
    for (const DeviceBuffer *b : buffers) {
        if (!b->wrapped) return fail(GKA_ERR_DEVICE, std::string(call) + ": " + gka::internal::last_message());
    }
    return GKA_OK;
}

gka_status fill(const char *call, float *p, int64_t count, float value, void *stream) {
    unsigned bits;
    std::memcpy(&bits, &value, sizeof bits);
    BoundContext bound(call);
    if (bound.status != GKA_OK) return bound.status;
    if (CUresult r = driver.cuMemsetD32Async(CUdeviceptr(uintptr_t(p)), bits, size_t(count), stream); r != 0) {
        return fail(GKA_ERR_DEVICE, std::string(call) + ": " + driver_message("cuMemsetD32Async", r));
    }
    return GKA_OK;
}

gka_status upload(const char *call, float *to, const float *from, int64_t count, void *stream) {
    BoundContext bound(call);
    if (bound.status != GKA_OK) return bound.status;
    const size_t bytes = size_t(count) * sizeof(float);
    if (CUresult r = driver.cuMemcpyHtoDAsync(CUdeviceptr(uintptr_t(to)), from, bytes, stream); r != 0) {
        return fail(GKA_ERR_DEVICE, std::string(call) + ": " + driver_message("cuMemcpyHtoDAsync", r));
    }
    return GKA_OK;
}

Scratch::Scratch(const char *call, int64_t floats) {
    if (CUresult r = driver.cuMemAlloc(&ptr, size_t(std::max<int64_t>(floats, 1)) * sizeof(float)); r != 0) {
        ptr = 0;
        status = fail(r == 2 ? GKA_ERR_OUT_OF_MEMORY : GKA_ERR_DEVICE,
                      std::string(call) + ": " + driver_message("cuMemAlloc", r));
    }
}

Scratch::~Scratch() {
    if (ptr) driver.cuMemFree(ptr);
}

gka_status copy_rows(const char *call, float *to, int64_t to_pitch, const float *from, int64_t from_pitch,
                     int64_t width, int64_t rows, void *stream) {
    Memcpy2D m;
    m.src_device = CUdeviceptr(uintptr_t(from));
    m.src_pitch = size_t(from_pitch) * sizeof(float);
    m.dst_device = CUdeviceptr(uintptr_t(to));
    m.dst_pitch = size_t(to_pitch) * sizeof(float);
    m.width_bytes = size_t(width) * sizeof(float);
    m.height = size_t(rows);
    if (CUresult r = driver.cuMemcpy2DAsync(&m, stream); r != 0) {
        return fail(GKA_ERR_DEVICE, std::string(call) + ": " + driver_message("cuMemcpy2DAsync", r));
    }
    return GKA_OK;
}

}  // namespace gka::internal::cuda
