// The CPU target families compiled into libgka and the host's support for them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "HalideRuntime.h"

namespace gka {

using ForwardKernel = int (*)(halide_buffer_t *x, halide_buffer_t *sigma, int32_t left, int32_t right,
                              halide_buffer_t *y, halide_buffer_t *lse);
using BackwardKernel = int (*)(halide_buffer_t *x, halide_buffer_t *sigma, halide_buffer_t *y,
                               halide_buffer_t *lse, halide_buffer_t *dy, int32_t left, int32_t right,
                               halide_buffer_t *dx, halide_buffer_t *dsigma);

// The kernels of one family compiled for one head dim (0: any head dim).
struct Kernels {
    int head_dim;
    ForwardKernel forward;
    BackwardKernel backward;
    const char *forward_knobs, *backward_knobs;  // from schedules/tuned.tsv; "" = the schedule's defaults
};

// The variant serving `head_dim` in a table of a fixed head dim's variants
// first, then the one for any head dim (0), last.
template <class Variant, size_t N>
const Variant &for_head_dim(const Variant (&table)[N], int64_t head_dim) {
    for (const Variant &k : table) {
        if (k.head_dim == head_dim || k.head_dim == 0) return k;
    }
    return table[N - 1];
}

struct CpuFamily {
    const char *name;
    bool (*host_supports)();
    Kernels kernels[3];  // fixed head dims first, then "any"

    const Kernels &for_head_dim(int64_t head_dim) const { return gka::for_head_dim(kernels, head_dim); }
};

// Best first.
const CpuFamily *cpu_families(int *count);
const CpuFamily *find_cpu_family(const char *name);

}  // namespace gka
