// What libgka's device entry points (cuda_attention.cpp, cuda_decode.cpp,
// cuda_chunk.cpp, cuda_varlen.cpp) share: the driver and the context its calls
// run in (cuda_driver.cpp), and views of and copies into device memory (cuda_buffers.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>

#include "HalideRuntime.h"
#include "HalideRuntimeCuda.h"
#include "buffers.h"
#include "call.h"
#include "gka/gka.h"

namespace gka::internal::cuda {

// The few driver calls libgka makes itself (cuda.h is not needed to build).
using CUresult = int;
using CUdevice = int;
using CUcontext = void *;
using CUdeviceptr = unsigned long long;
// cuda.h's CUDA_MEMCPY2D (v2), device to device.
struct Memcpy2D {
    size_t src_x_bytes = 0, src_y = 0;
    int src_memory_type = 2;  // CU_MEMORYTYPE_DEVICE
    const void *src_host = nullptr;
    CUdeviceptr src_device = 0;
    void *src_array = nullptr;
    size_t src_pitch = 0;
    size_t dst_x_bytes = 0, dst_y = 0;
    int dst_memory_type = 2;
    void *dst_host = nullptr;
    CUdeviceptr dst_device = 0;
    void *dst_array = nullptr;
    size_t dst_pitch = 0;
    size_t width_bytes = 0, height = 0;
};

struct Driver {
    CUresult (*cuInit)(unsigned);
    CUresult (*cuDeviceGetCount)(int *);
    CUresult (*cuDeviceGet)(CUdevice *, int);
    CUresult (*cuCtxGetCurrent)(CUcontext *);
    CUresult (*cuCtxGetDevice)(CUdevice *);
    CUresult (*cuCtxPushCurrent)(CUcontext);
    CUresult (*cuCtxPopCurrent)(CUcontext *);
    CUresult (*cuDeviceGetAttribute)(int *, int, CUdevice);
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*cuGetErrorString)(CUresult, const char **);
    CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, void *);
    CUresult (*cuMemsetD32Async)(CUdeviceptr, unsigned, size_t, void *);
    CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
    CUresult (*cuMemFree)(CUdeviceptr);
    CUresult (*cuMemcpy2DAsync)(const Memcpy2D *, void *);
    CUresult (*cuMemcpyDtoHAsync)(void *, CUdeviceptr, size_t, void *);
    CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, void *);
    CUresult (*cuStreamSynchronize)(void *);
};

// The driver's entry points, bound by the first device call or
// gka_cuda_available(); and "`call` failed: <the driver's text> (CUresult <code>)".
extern Driver driver;
std::string driver_message(const char *call, CUresult code);

// The stream of the call in progress, handed to Halide's hooks as user_context.
struct CallContext {
    void *stream;
};

// The context of the kernels (acquire_context's) made current for libgka's own
// driver calls, which need one; the thread's current context is left as it was.
struct BoundContext {
    gka_status status = GKA_OK;
    bool pushed = false;
    explicit BoundContext(const char *call);
    ~BoundContext();
    BoundContext(const BoundContext &) = delete;
    BoundContext &operator=(const BoundContext &) = delete;
};

// The driver, and the family of the device in use.
gka_status device_in_use(const char **family);

// A view of caller device memory: no host side, nothing to copy, nothing owned.
struct DeviceBuffer {
    halide_dimension_t dims[4];
    halide_buffer_t buf{};

    template <class T>
    DeviceBuffer(const T *p, std::initializer_list<int64_t> extents) {
        int i = 0, stride = 1;
        for (int64_t e : extents) {
            dims[i] = halide_dimension_t(0, int32_t(e), stride);
            stride *= int32_t(e);
            i++;
        }
        buf.type = gka::internal::ElementOf<T>::type();
        buf.dimensions = i;
        buf.dim = dims;
        buf.host = nullptr;
        wrapped = halide_cuda_wrap_device_ptr(nullptr, &buf, uint64_t(uintptr_t(p))) == 0;
    }
    ~DeviceBuffer() {
        if (wrapped) halide_cuda_detach_device_ptr(nullptr, &buf);
    }
    DeviceBuffer(const DeviceBuffer &) = delete;
    DeviceBuffer &operator=(const DeviceBuffer &) = delete;
    bool wrapped = false;
};

// GKA_OK if every buffer wrapped its pointer; else the call's error, Halide's message.
gka_status unwrapped(const char *call, std::initializer_list<const DeviceBuffer *> buffers);

// `count` floats of device memory set to `value` on `stream`.
gka_status fill(const char *call, float *p, int64_t count, float value, void *stream);

// Device memory for one call's own use, freed on scope exit (in the bound
// context; cuMemFree waits for the device, as the kernels' scratch does).
struct Scratch {
    CUdeviceptr ptr = 0;
    gka_status status = GKA_OK;
    Scratch(const char *call, int64_t floats);
    ~Scratch();
    Scratch(const Scratch &) = delete;
    Scratch &operator=(const Scratch &) = delete;
    float *at(int64_t offset) const { return reinterpret_cast<float *>(uintptr_t(ptr)) + offset; }
};

// `rows` rows of `width` floats from `from` (rows `from_pitch` floats apart)
// to `to` (`to_pitch` apart), on `stream`.
gka_status copy_rows(const char *call, float *to, int64_t to_pitch, const float *from, int64_t from_pitch,
                     int64_t width, int64_t rows, void *stream);

// `count` floats from host memory to device memory, on `stream` (from pageable
// memory: the driver has staged them when it returns).
gka_status upload(const char *call, float *to, const float *from, int64_t count, void *stream);

// The operations on the device's `family`, on a description run_call has
// checked (call.h): the forward and backward (cuda_attention.cpp; varlen runs
// them on each sequence), varlen (cuda_varlen.cpp), a chunk with pairs in its
// window (cuda_chunk.cpp), decode (cuda_decode.cpp). `name`: the entry point.
gka_status forward(const gka_call &c, const char *family, const char *name);
gka_status backward(const gka_call &c, const char *family, const char *name);
gka_status forward_varlen(const gka_call &c, const char *family, const char *name);
gka_status backward_varlen(const gka_call &c, const char *family, const char *name);
gka_status forward_chunk(const gka_call &c, const char *family, const char *name);
gka_status backward_chunk(const gka_call &c, const char *family, const char *name);
gka_status decode(const gka_call &c, const char *family, const char *name);

}  // namespace gka::internal::cuda
