// libgka's device entry points: the CUDA kernels on the caller's device
// memory, in the caller's current CUDA context, on the caller's stream.
//
// libgka does not link libcuda: the driver is opened (dlopen) when a device
// entry point or gka_cuda_available() is first called, so the library loads and
// its CPU paths run on machines without a GPU or a driver. Halide's CUDA runtime
// (linked in, as for the CPU kernels) finds the driver's symbols in the process.
//
// Halide's context and stream hooks are replaced once: every kernel runs in the
// context current on the calling thread (the primary context a framework such
// as PyTorch makes current), or device 0's primary context if none is, and
// enqueues on the stream passed to the call, carried by the kernels' user_context.
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "HalideBuffer.h"
#include "HalideRuntime.h"
#include "HalideRuntimeCuda.h"
#include "gka/gka.h"
#include "kernel_variants.h"
#include "buffers.h"
#include "internal.h"

namespace {

using gka::internal::fail;

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

Driver driver{};
std::string driver_error;  // why the driver or a device is unusable; "" = usable
std::once_flag driver_loaded;

std::string driver_message(const char *call, CUresult code) {
    const char *text = nullptr;
    if (driver.cuGetErrorString == nullptr || driver.cuGetErrorString(code, &text) != 0 || text == nullptr) {
        text = "unknown error";
    }
    return std::string(call) + " failed: " + text + " (CUresult " + std::to_string(code) + ")";
}

// The stream of the call in progress, handed to Halide's hooks as user_context.
struct CallContext {
    void *stream;
};

// Device 0's primary context, the one the CUDA runtime API (and so PyTorch)
// uses, retained once for the process: where a thread has no current context.
CUresult primary_context(CUcontext *ctx) {
    static CUcontext primary = nullptr;
    static std::once_flag retained;
    static CUresult status = 0;
    std::call_once(retained, [] {
        CUdevice dev = 0;
        status = driver.cuDeviceGet(&dev, 0);
        if (status == 0) status = driver.cuDevicePrimaryCtxRetain(&primary, dev);
    });
    *ctx = primary;
    return status;
}

int acquire_context(void *, void **ctx, bool create) {
    CUcontext current = nullptr;
    if (driver.cuCtxGetCurrent(&current) == 0 && current != nullptr) {
        *ctx = current;
        return halide_error_code_success;
    }
    *ctx = nullptr;
    if (!create) return halide_error_code_success;
    if (CUresult r = primary_context(ctx); r != 0) {
        halide_error(nullptr, driver_message("cuDevicePrimaryCtxRetain", r).c_str());
        return halide_error_code_gpu_device_error;
    }
    return halide_error_code_success;
}

// The context of the kernels (acquire_context's) made current for libgka's own
// driver calls, which need one; the thread's current context is left as it was.
struct BoundContext {
    gka_status status = GKA_OK;
    bool pushed = false;
    explicit BoundContext(const char *call) {
        CUcontext ctx = nullptr;
        if (driver.cuCtxGetCurrent(&ctx) == 0 && ctx != nullptr) return;
        CUresult r = primary_context(&ctx);
        const char *failed = "cuDevicePrimaryCtxRetain";
        if (r == 0) {
            r = driver.cuCtxPushCurrent(ctx);
            failed = "cuCtxPushCurrent";
        }
        if (r != 0) status = fail(GKA_ERR_DEVICE, std::string(call) + ": " + driver_message(failed, r));
        pushed = r == 0;
    }
    ~BoundContext() {
        CUcontext popped = nullptr;
        if (pushed) driver.cuCtxPopCurrent(&popped);
    }
    BoundContext(const BoundContext &) = delete;
    BoundContext &operator=(const BoundContext &) = delete;
};

int release_context(void *) { return halide_error_code_success; }

int get_stream(void *user_context, void *, void **stream) {
    *stream = user_context ? static_cast<CallContext *>(user_context)->stream : nullptr;
    return halide_error_code_success;
}

void load_driver() {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (lib == nullptr) lib = dlopen("libcuda.so", RTLD_NOW | RTLD_GLOBAL);
    if (lib == nullptr) {
        const char *why = dlerror();
        driver_error = std::string("no CUDA driver: cannot load libcuda.so.1 or libcuda.so (") + (why ? why : "not found") + ")";
        return;
    }
    std::string missing;
    auto bind = [&](auto &fn, const char *name) {
        fn = reinterpret_cast<std::decay_t<decltype(fn)>>(dlsym(lib, name));
        if (fn == nullptr) missing += std::string(missing.empty() ? "" : ", ") + name;
    };
    bind(driver.cuInit, "cuInit");
    bind(driver.cuDeviceGetCount, "cuDeviceGetCount");
    bind(driver.cuDeviceGet, "cuDeviceGet");
    bind(driver.cuCtxGetCurrent, "cuCtxGetCurrent");
    bind(driver.cuCtxGetDevice, "cuCtxGetDevice");
    bind(driver.cuCtxPushCurrent, "cuCtxPushCurrent_v2");
    bind(driver.cuCtxPopCurrent, "cuCtxPopCurrent_v2");
    bind(driver.cuDeviceGetAttribute, "cuDeviceGetAttribute");
    bind(driver.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    bind(driver.cuGetErrorString, "cuGetErrorString");
    bind(driver.cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2");
    bind(driver.cuMemsetD32Async, "cuMemsetD32Async");
    bind(driver.cuMemAlloc, "cuMemAlloc_v2");
    bind(driver.cuMemFree, "cuMemFree_v2");
    bind(driver.cuMemcpy2DAsync, "cuMemcpy2DAsync_v2");
    bind(driver.cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2");
    bind(driver.cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
    bind(driver.cuStreamSynchronize, "cuStreamSynchronize");
    if (!missing.empty()) {
        driver_error = "the CUDA driver (libcuda) lacks entry points libgka calls: " + missing;
        return;
    }
    if (CUresult r = driver.cuInit(0); r != 0) {
        driver_error = "no usable CUDA device: " + driver_message("cuInit", r);
        return;
    }
    int count = 0;
    if (CUresult r = driver.cuDeviceGetCount(&count); r != 0 || count < 1) {
        driver_error = r != 0 ? "no usable CUDA device: " + driver_message("cuDeviceGetCount", r)
                              : std::string("no usable CUDA device: the driver reports none");
        return;
    }
    // The register cap of the driver's PTX JIT, which Halide reads when it loads
    // the kernels (its default is 64). The CUDA kernels keep a thread's D
    // accumulators in registers: ptxas gives the D=64 forward 119 registers with
    // no spills, where a cap of 64 spilled 672 bytes a thread. 255, the most a
    // thread can have: these kernels run one warp per band of 32 tokens, so the
    // problem bounds occupancy before the register file does. The environment
    // wins; note that this sets it in the host process (once, on the first device call).
    setenv("HL_CUDA_JIT_MAX_REGISTERS", "255", 0);
    halide_set_cuda_acquire_context(acquire_context);
    halide_set_cuda_release_context(release_context);
    halide_set_cuda_get_stream(get_stream);
    // Device scratch (the pipelines' intermediate sums) is freed with cuMemFree
    // at the end of each call, which waits for the device. Halide's reuse cache
    // (halide_reuse_device_allocations) would avoid that wait, but it is keyed by
    // context and size, not stream: a call on another stream could take scratch
    // that the previous call's kernels still use. Ordering calls with an event
    // would make the cache safe; until that is measured on a GPU, correctness first.
}

// True if the kernels can run; else records the reason as the call's error.
bool device_ready() {
    gka::internal::initialize_once();
    std::call_once(driver_loaded, load_driver);
    if (driver_error.empty()) return true;
    fail(GKA_ERR_DEVICE, driver_error);
    return false;
}

// The CUDA family (cmake/families.tsv) for the device of the calling thread's
// current context (device 0's if none is current): the best one whose compute
// capability the device has. Else the call's error.
gka_status device_family(const char **family) {
    CUcontext current = nullptr;
    CUdevice dev = 0;
    if (driver.cuCtxGetCurrent(&current) != 0 || current == nullptr || driver.cuCtxGetDevice(&dev) != 0) dev = 0;
    int major = 0, minor = 0;
    constexpr int capability_major = 75, capability_minor = 76;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_*
    if (CUresult r = driver.cuDeviceGetAttribute(&major, capability_major, dev); r != 0) {
        return fail(GKA_ERR_DEVICE, driver_message("cuDeviceGetAttribute", r));
    }
    driver.cuDeviceGetAttribute(&minor, capability_minor, dev);
    const std::vector<gka::CudaFamily> &families = gka::cuda_families();
    if ((*family = gka::cuda_family_for(families, 10 * major + minor))) return GKA_OK;
    const std::string has = "CUDA device " + std::to_string(dev) + " has compute capability " +
                            std::to_string(major) + "." + std::to_string(minor);
    if (families.empty()) return fail(GKA_ERR_UNSUPPORTED, has + ", and this libgka has no CUDA kernels");
    const int oldest = families.back().capability;
    return fail(GKA_ERR_UNSUPPORTED, has + ", below the " + std::to_string(oldest / 10) + "." +
                                         std::to_string(oldest % 10) + " that libgka's CUDA kernels need");
}

// The driver, and the family of the device in use.
gka_status device_in_use(const char **family) {
    if (!device_ready()) return GKA_ERR_DEVICE;
    return device_family(family);
}

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

// What every device call does first: the host checks (the arguments', then
// the call's own `more`), then the driver and the family.
gka_status prepare(const gka_shape &shape, const gka_window &window, const float *sigma,
                   std::initializer_list<std::pair<const void *, const char *>> pointers, const char **family,
                   const std::function<gka_status()> &more = {}) {
    gka::internal::clear_error();
    if (gka_status s = gka::internal::check_arguments(shape, window, sigma, pointers, false); s != GKA_OK) return s;
    if (more) {
        if (gka_status s = more(); s != GKA_OK) return s;
    }
    return device_in_use(family);
}

gka_status unwrapped(const char *call, std::initializer_list<const DeviceBuffer *> buffers) {
    for (const DeviceBuffer *b : buffers) {
        if (!b->wrapped) return fail(GKA_ERR_DEVICE, std::string(call) + ": " + gka::internal::last_message());
    }
    return GKA_OK;
}

// The forward on `family`, its arguments checked (forward's, or varlen's for
// every sequence at once).
template <class T>
gka_status run_forward(const char *call, const char *family, gka_shape shape, gka_window window, const T *x,
                       const float *sigma, T *y, float *lse, void *stream) {
    const int64_t D = shape.head_dim, H = shape.heads, T_ = shape.seq_len, B = shape.batch;
    DeviceBuffer xb(x, {D, H, T_, B}), sb(sigma, {H}), yb(y, {D, H, T_, B}), lb(lse, {T_, H, B});
    if (gka_status s = unwrapped(call, {&xb, &sb, &yb, &lb}); s != GKA_OK) return s;
    const auto w = gka::internal::kernel_window(window, T_);
    CallContext context{stream};
    const auto *k = gka::cuda_forward_variant(family, D, gka::window_kind(window.left, window.right, T_), T_,
                                              gka::internal::ElementOf<T>::element);
    // The CUDA kernels run the direct form alone: the spread, which chooses
    // the form on the CPU, is not read back (that would synchronize the stream).
    Halide::Runtime::Buffer<float, 2> spread(static_cast<int>(H), static_cast<int>(B));
    const int code = k->run(&context, &xb.buf, &sb.buf, w.left, w.right, &yb.buf, &lb.buf, spread.raw_buffer());
    spread.device_free(&context);
    return gka::internal::ran(k->name, code, GKA_ERR_DEVICE);
}

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
gka_status run_backward(const char *call, const char *family, gka_shape shape, gka_window window, const T *x,
                        const float *sigma, const T *y, const float *lse, const T *dy, T *dx, float *dsigma,
                        void *stream) {
    const int64_t D = shape.head_dim, H = shape.heads, T_ = shape.seq_len, B = shape.batch;
    DeviceBuffer xb(x, {D, H, T_, B}), sb(sigma, {H}), yb(y, {D, H, T_, B}), lb(lse, {T_, H, B}),
        dyb(dy, {D, H, T_, B}), dxb(dx, {D, H, T_, B}), dsb(dsigma, {H});
    if (gka_status s = unwrapped(call, {&xb, &sb, &yb, &lb, &dyb, &dxb, &dsb}); s != GKA_OK) return s;
    const auto w = gka::internal::kernel_window(window, T_);
    CallContext context{stream};
    const auto *k = gka::cuda_backward_variant(family, D, gka::window_kind(window.left, window.right, T_), T_,
                                               gka::internal::ElementOf<T>::element);
    Halide::Runtime::Buffer<float, 2> spread(static_cast<int>(H), static_cast<int>(B));  // not read back, as in the forward
    const int code = k->run(&context, &xb.buf, &sb.buf, &yb.buf, &lb.buf, &dyb.buf, w.left, w.right, &dxb.buf,
                            &dsb.buf, spread.raw_buffer());
    spread.device_free(&context);
    return gka::internal::ran(k->name, code, GKA_ERR_DEVICE);
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

// `count` floats of device memory set to `value` on `stream`.
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
    const auto *k = gka::cuda_decode_variant(family, D, gka::internal::ElementOf<T>::element);
    // A span past the capacity reaches what a span of the capacity does (check_decode).
    const int32_t left = gka::internal::kernel_window(window, capacity).left;
    const int code = k->run(&context, &xb.buf, &cb.buf, lengths.raw_buffer(), &sb.buf, left, &yb.buf, &lb.buf);
    lengths.device_free(&context);
    if (gka_status s = gka::internal::ran(k->name, code, GKA_ERR_DEVICE); s != GKA_OK) return s;
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

// Device memory for one call's own use, freed on scope exit (in the bound
// context; cuMemFree waits for the device, as the kernels' scratch does).
struct Scratch {
    CUdeviceptr ptr = 0;
    gka_status status = GKA_OK;
    Scratch(const char *call, int64_t floats) {
        if (CUresult r = driver.cuMemAlloc(&ptr, size_t(std::max<int64_t>(floats, 1)) * sizeof(float)); r != 0) {
            ptr = 0;
            status = fail(r == 2 ? GKA_ERR_OUT_OF_MEMORY : GKA_ERR_DEVICE,
                          std::string(call) + ": " + driver_message("cuMemAlloc", r));
        }
    }
    ~Scratch() {
        if (ptr) driver.cuMemFree(ptr);
    }
    Scratch(const Scratch &) = delete;
    Scratch &operator=(const Scratch &) = delete;
    float *at(int64_t offset) const { return reinterpret_cast<float *>(uintptr_t(ptr)) + offset; }
};

// `rows` rows of `width` floats from `from` (rows `from_pitch` floats apart)
// to `to` (`to_pitch` apart), on `stream`.
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

// A varlen call's host checks (varlen.cpp's, cu_seqlens included: they cover
// every sequence's), then the driver and the family.
gka_status prepare_varlen(const gka_shape &shape, const int64_t *cu_seqlens, const gka_window &window,
                          const float *sigma, std::initializer_list<std::pair<const void *, const char *>> pointers,
                          const char **family) {
    gka::internal::clear_error();
    if (gka_status s = gka::internal::check_varlen(shape, cu_seqlens, window, sigma, pointers, false); s != GKA_OK) {
        return s;
    }
    return device_in_use(family);
}

// Varlen (gka.h, gka_forward_varlen_cuda): each sequence a device call of its
// own on views of the packed tensors, as on the host (varlen.cpp). A call's lse
// is [H][length]: each sequence's is written to (or read from) scratch and
// moved from (or to) its columns of the packed [H][total] with one 2D copy.
template <class T>
gka_status forward_varlen(const char *call, gka_shape shape, const int64_t *cu_seqlens, gka_window window,
                          const T *x, const float *sigma, T *y, float *lse, void *stream) {
    const char *family = nullptr;
    if (gka_status s = prepare_varlen(shape, cu_seqlens, window, sigma,
                                      {{x, "x"}, {sigma, "sigma"}, {y, "y"}, {lse, "lse"}}, &family);
        s != GKA_OK) {
        return s;
    }
    BoundContext bound(call);
    if (bound.status != GKA_OK) return bound.status;
    const int64_t total = shape.seq_len, heads = shape.heads, row = heads * shape.head_dim;
    Scratch rows(call, heads * total);
    if (rows.status != GKA_OK) return rows.status;
    return gka::internal::each_sequence(shape, cu_seqlens, [&](gka_shape one, int64_t first) {
        float *own = rows.at(heads * first);
        gka_status s = run_forward(call, family, one, window, x + first * row, sigma, y + first * row, own, stream);
        if (s == GKA_OK) s = copy_rows(call, lse + first, total, own, one.seq_len, one.seq_len, heads, stream);
        return s;
    });
}

// dsigma sums the sequences' in order, in double, as the host's varlen does:
// each sequence's goes to a row of scratch, and the rows are added on the host,
// which waits for `stream` once.
template <class T>
gka_status backward_varlen(const char *call, gka_shape shape, const int64_t *cu_seqlens, gka_window window,
                           const T *x, const float *sigma, const T *y, const float *lse, const T *dy, T *dx,
                           float *dsigma, void *stream) {
    const char *family = nullptr;
    if (gka_status s = prepare_varlen(shape, cu_seqlens, window, sigma,
                                      {{x, "x"}, {sigma, "sigma"}, {y, "y"}, {lse, "lse"}, {dy, "dy"}, {dx, "dx"},
                                       {dsigma, "dsigma"}},
                                      &family);
        s != GKA_OK) {
        return s;
    }
    BoundContext bound(call);
    if (bound.status != GKA_OK) return bound.status;
    const int64_t total = shape.seq_len, heads = shape.heads, row = heads * shape.head_dim;
    Scratch rows(call, heads * total), parts(call, heads * shape.batch);
    if (rows.status != GKA_OK) return rows.status;
    if (parts.status != GKA_OK) return parts.status;
    int64_t ran = 0;  // sequences run: parts' rows in use
    gka_status status = gka::internal::each_sequence(shape, cu_seqlens, [&](gka_shape one, int64_t first) {
        float *own = rows.at(heads * first);
        const int64_t at = first * row;
        gka_status s = copy_rows(call, own, one.seq_len, lse + first, total, one.seq_len, heads, stream);
        if (s == GKA_OK) {
            s = run_backward(call, family, one, window, x + at, sigma, y + at, own, dy + at, dx + at,
                             parts.at(heads * ran++), stream);
        }
        return s;
    });
    if (status != GKA_OK) return status;
    std::vector<float> each(size_t(heads * ran));
    std::vector<double> sum(size_t(heads), 0.0);
    const size_t bytes = each.size() * sizeof(float);
    CUresult r = each.empty() ? 0 : driver.cuMemcpyDtoHAsync(each.data(), parts.ptr, bytes, stream);
    const char *failed = "cuMemcpyDtoHAsync";
    if (r == 0) r = driver.cuStreamSynchronize(stream), failed = "cuStreamSynchronize";
    if (r != 0) return fail(GKA_ERR_DEVICE, std::string(call) + ": " + driver_message(failed, r));
    for (int64_t s = 0; s < ran; s++) {
        for (int64_t h = 0; h < heads; h++) sum[h] += each[s * heads + h];
    }
    const std::vector<float> total_dsigma(sum.begin(), sum.end());
    // From pageable memory: the driver has staged it when the call returns.
    r = driver.cuMemcpyHtoDAsync(CUdeviceptr(uintptr_t(dsigma)), total_dsigma.data(), size_t(heads) * sizeof(float),
                                 stream);
    if (r != 0) return fail(GKA_ERR_DEVICE, std::string(call) + ": " + driver_message("cuMemcpyHtoDAsync", r));
    return GKA_OK;  // gka_last_kernel(): each_sequence's
}

}  // namespace

extern "C" {

int gka_cuda_compiled(void) { return gka::cuda_families().empty() ? 0 : 1; }

const char *gka_cuda_families(void) {
    const std::vector<gka::CudaFamily> &families = gka::cuda_families();
    static const std::string listed = gka::internal::joined_names(families.data(), families.data() + families.size());
    return listed.c_str();
}

int gka_cuda_available(void) {
    gka::internal::clear_error();
    return device_ready() ? 1 : 0;
}

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

gka_status gka_decode_cuda(gka_shape shape, int64_t capacity, gka_window window, const float *x, const float *sigma,
                           const int64_t *cache_lens, float *cache, float *y, float *lse, void *stream) {
    return decode("gka_decode_cuda", shape, capacity, window, x, sigma, cache_lens, cache, y, lse, stream);
}

gka_status gka_decode_bf16_cuda(gka_shape shape, int64_t capacity, gka_window window, const gka_bf16 *x,
                                const float *sigma, const int64_t *cache_lens, gka_bf16 *cache, gka_bf16 *y,
                                float *lse, void *stream) {
    return decode("gka_decode_bf16_cuda", shape, capacity, window, x, sigma, cache_lens, cache, y, lse, stream);
}

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
    const auto *k = gka::cuda_forward_chunk_variant(family, D);
    Halide::Runtime::Buffer<float, 2> spread(static_cast<int>(H), static_cast<int>(B));  // not read back
    const int code = k->run(&context, &xb.buf, &kb.buf, &sb.buf, w.shift, w.left, w.right, &yb.buf, &lb.buf,
                            spread.raw_buffer());
    spread.device_free(&context);
    return gka::internal::ran(k->name, code, GKA_ERR_DEVICE);
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
    const auto *k = gka::cuda_backward_chunk_variant(family, D);
    Halide::Runtime::Buffer<float, 2> spread(static_cast<int>(H), static_cast<int>(B));  // not read back
    const int code = k->run(&context, &xb.buf, &kb.buf, &sb.buf, &yb.buf, &lb.buf, &dyb.buf, w.shift, w.left,
                            w.right, &dxb.buf, &dkb.buf, &dsb.buf, spread.raw_buffer());
    spread.device_free(&context);
    return gka::internal::ran(k->name, code, GKA_ERR_DEVICE);
}

gka_status gka_forward_varlen_cuda(gka_shape shape, const int64_t *cu_seqlens, gka_window window, const float *x,
                                   const float *sigma, float *y, float *lse, void *stream) {
    return forward_varlen("gka_forward_varlen_cuda", shape, cu_seqlens, window, x, sigma, y, lse, stream);
}

gka_status gka_backward_varlen_cuda(gka_shape shape, const int64_t *cu_seqlens, gka_window window, const float *x,
                                    const float *sigma, const float *y, const float *lse, const float *dy, float *dx,
                                    float *dsigma, void *stream) {
    return backward_varlen("gka_backward_varlen_cuda", shape, cu_seqlens, window, x, sigma, y, lse, dy, dx, dsigma,
                           stream);
}

gka_status gka_forward_varlen_bf16_cuda(gka_shape shape, const int64_t *cu_seqlens, gka_window window,
                                        const gka_bf16 *x, const float *sigma, gka_bf16 *y, float *lse, void *stream) {
    return forward_varlen("gka_forward_varlen_bf16_cuda", shape, cu_seqlens, window, x, sigma, y, lse, stream);
}

gka_status gka_backward_varlen_bf16_cuda(gka_shape shape, const int64_t *cu_seqlens, gka_window window,
                                         const gka_bf16 *x, const float *sigma, const gka_bf16 *y, const float *lse,
                                         const gka_bf16 *dy, gka_bf16 *dx, float *dsigma, void *stream) {
    return backward_varlen("gka_backward_varlen_bf16_cuda", shape, cu_seqlens, window, x, sigma, y, lse, dy, dx,
                           dsigma, stream);
}

}  // extern "C"
