// The CUDA driver as libgka's device entry points use it: opened at run time,
// the context and stream the kernels run in, the device's family; and the C
// ABI's device queries (gka_cuda_compiled, gka_cuda_families, gka_cuda_available).
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

#include <cstdlib>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "HalideRuntime.h"
#include "HalideRuntimeCuda.h"
#include "cuda_internal.h"
#include "gka/gka.h"
#include "internal.h"
#include "kernel_variants.h"

namespace gka::internal::cuda {

Driver driver{};

namespace {

std::string driver_error;  // why the driver or a device is unusable; "" = usable
std::once_flag driver_loaded;

}  // namespace

std::string driver_message(const char *call, CUresult code) {
    const char *text = nullptr;
    if (driver.cuGetErrorString == nullptr || driver.cuGetErrorString(code, &text) != 0 || text == nullptr) {
        text = "unknown error";
    }
    return std::string(call) + " failed: " + text + " (CUresult " + std::to_string(code) + ")";
}

namespace {

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

}  // namespace

BoundContext::BoundContext(const char *call) {
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

BoundContext::~BoundContext() {
    CUcontext popped = nullptr;
    if (pushed) driver.cuCtxPopCurrent(&popped);
}

namespace {

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

}  // namespace

gka_status device_in_use(const char **family) {
    if (!device_ready()) return GKA_ERR_DEVICE;
    return device_family(family);
}

}  // namespace gka::internal::cuda

extern "C" {

int gka_cuda_compiled(void) { return gka::cuda_families().empty() ? 0 : 1; }

const char *gka_cuda_families(void) {
    const std::vector<gka::CudaFamily> &families = gka::cuda_families();
    static const std::string listed = gka::internal::joined_names(families.data(), families.data() + families.size());
    return listed.c_str();
}

int gka_cuda_available(void) {
    gka::internal::clear_error();
    return gka::internal::cuda::device_ready() ? 1 : 0;
}

}  // extern "C"
