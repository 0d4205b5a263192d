// The CUDA driver calls the GPU tests and benchmark make themselves, loaded at
// run time (dlopen) as libgka does: the test binaries build and start on
// machines without a driver, and then report why they skip.
#pragma once

#include <dlfcn.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace gka_cuda {

using CUresult = int;
using CUdeviceptr = unsigned long long;
using CUstream = void *;
using CUevent = void *;
using CUcontext = void *;

struct Driver {
    CUresult (*cuInit)(unsigned);
    CUresult (*cuDeviceGet)(int *, int);
    CUresult (*cuDeviceGetName)(char *, int, int);
    CUresult (*cuDeviceGetAttribute)(int *, int, int);
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, int);
    CUresult (*cuCtxSetCurrent)(CUcontext);
    CUresult (*cuCtxGetCurrent)(CUcontext *);
    CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
    CUresult (*cuMemFree)(CUdeviceptr);
    CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void *, size_t);
    CUresult (*cuMemcpyDtoH)(void *, CUdeviceptr, size_t);
    CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
    CUresult (*cuMemsetD32Async)(CUdeviceptr, unsigned, size_t, CUstream);
    CUresult (*cuStreamCreate)(CUstream *, unsigned);
    CUresult (*cuStreamSynchronize)(CUstream);
    CUresult (*cuStreamDestroy)(CUstream);
    CUresult (*cuEventCreate)(CUevent *, unsigned);
    CUresult (*cuEventRecord)(CUevent, CUstream);
    CUresult (*cuEventSynchronize)(CUevent);
    CUresult (*cuEventElapsedTime)(float *, CUevent, CUevent);
    CUresult (*cuGetErrorString)(CUresult, const char **);
};

// Loads the driver, initializes it and makes device 0's primary context
// current. Returns "" on success, else why not.
inline std::string load(Driver &d) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!lib) lib = dlopen("libcuda.so", RTLD_NOW | RTLD_GLOBAL);
    if (!lib) return std::string("cannot load libcuda.so.1 or libcuda.so: ") + dlerror();
    std::string missing;
    auto bind = [&](auto &fn, const char *name) {
        fn = reinterpret_cast<std::decay_t<decltype(fn)>>(dlsym(lib, name));
        if (!fn) missing += " " + std::string(name);
    };
    bind(d.cuInit, "cuInit");
    bind(d.cuDeviceGet, "cuDeviceGet");
    bind(d.cuDeviceGetName, "cuDeviceGetName");
    bind(d.cuDeviceGetAttribute, "cuDeviceGetAttribute");
    bind(d.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    bind(d.cuCtxSetCurrent, "cuCtxSetCurrent");
    bind(d.cuCtxGetCurrent, "cuCtxGetCurrent");
    bind(d.cuMemAlloc, "cuMemAlloc_v2");
    bind(d.cuMemFree, "cuMemFree_v2");
    bind(d.cuMemcpyHtoD, "cuMemcpyHtoD_v2");
    bind(d.cuMemcpyDtoH, "cuMemcpyDtoH_v2");
    bind(d.cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
    bind(d.cuMemsetD32Async, "cuMemsetD32Async");
    bind(d.cuStreamCreate, "cuStreamCreate");
    bind(d.cuStreamSynchronize, "cuStreamSynchronize");
    bind(d.cuStreamDestroy, "cuStreamDestroy_v2");
    bind(d.cuEventCreate, "cuEventCreate");
    bind(d.cuEventRecord, "cuEventRecord");
    bind(d.cuEventSynchronize, "cuEventSynchronize");
    bind(d.cuEventElapsedTime, "cuEventElapsedTime");
    bind(d.cuGetErrorString, "cuGetErrorString");
    if (!missing.empty()) return "libcuda lacks driver entry points the tests use:" + missing;
    const char *text = nullptr;
    if (CUresult r = d.cuInit(0); r != 0) {
        d.cuGetErrorString(r, &text);
        return std::string("cuInit: ") + (text ? text : "error");
    }
    int dev = 0;
    CUcontext ctx = nullptr;
    if (d.cuDeviceGet(&dev, 0) != 0 || d.cuDevicePrimaryCtxRetain(&ctx, dev) != 0 || d.cuCtxSetCurrent(ctx) != 0) {
        return "cannot make device 0's primary context current";
    }
    return "";
}

inline std::string device_name(Driver &d) {
    char name[256] = {0};
    int dev = 0;
    d.cuDeviceGet(&dev, 0);
    d.cuDeviceGetName(name, sizeof(name), dev);
    return name;
}

// Exit code CTest reads as "skipped" (SKIP_RETURN_CODE).
constexpr int skip_code = 77;

}  // namespace gka_cuda
