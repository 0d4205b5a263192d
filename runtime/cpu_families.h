// The CPU target families compiled into libgka and the host's support for them.
#pragma once

#include "HalideRuntime.h"

namespace gka {

using ForwardKernel = int (*)(halide_buffer_t *x, halide_buffer_t *sigma, int32_t left, int32_t right,
                              halide_buffer_t *y, halide_buffer_t *lse);
using BackwardKernel = int (*)(halide_buffer_t *x, halide_buffer_t *sigma, halide_buffer_t *y,
                               halide_buffer_t *lse, halide_buffer_t *dy, int32_t left, int32_t right,
                               halide_buffer_t *dx, halide_buffer_t *dsigma);

struct CpuFamily {
    const char *name;
    bool (*host_supports)();
    ForwardKernel forward;
    BackwardKernel backward;
};

// Best first.
const CpuFamily *cpu_families(int *count);
const CpuFamily *find_cpu_family(const char *name);

}  // namespace gka
