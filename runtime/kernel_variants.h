// The kernel variants compiled into libgka, the shape classes they serve, and
// the CPU families' host support.
//
// Each (family, pass, head dim) has a variant with the schedule's default or
// tuned knobs; schedules/tuned.tsv adds a variant for each narrower shape class
// the autotuner found better knobs for (cmake/GkaKernels.cmake). A call runs the
// variant of the narrowest class containing its shape.
#pragma once

#include <cstdint>
#include <vector>

#include "HalideRuntime.h"
#include "gka/gka.h"
#include "../generators/kernel_function.h"  // which kernel weighs a variant's pairs
#include "../generators/score_form.h"       // how a variant forms |x_i - x_j|^2

namespace gka {

// spread (h, b): max_t |x_t - centre|^2, the input's test of the score form
// (gka.cpp's expansion_serves).
using ForwardKernel = int (*)(halide_buffer_t *x, halide_buffer_t *sigma, int32_t left, int32_t right,
                              halide_buffer_t *y, halide_buffer_t *lse, halide_buffer_t *spread);
using BackwardKernel = int (*)(halide_buffer_t *x, halide_buffer_t *sigma, halide_buffer_t *y,
                               halide_buffer_t *lse, halide_buffer_t *dy, int32_t left, int32_t right,
                               halide_buffer_t *dx, halide_buffer_t *dsigma, halide_buffer_t *spread);
// A chunk's passes (gka.h, gka_forward_chunk): queries x against keys of their
// own, query 0 at key position shift; dx_keys the keys' paths.
using ForwardChunkKernel = int (*)(halide_buffer_t *x, halide_buffer_t *keys, halide_buffer_t *sigma, int32_t shift,
                                   int32_t left, int32_t right, halide_buffer_t *y, halide_buffer_t *lse,
                                   halide_buffer_t *spread);
using BackwardChunkKernel = int (*)(halide_buffer_t *x, halide_buffer_t *keys, halide_buffer_t *sigma,
                                    halide_buffer_t *y, halide_buffer_t *lse, halide_buffer_t *dy, int32_t shift,
                                    int32_t left, int32_t right, halide_buffer_t *dx, halide_buffer_t *dx_keys,
                                    halide_buffer_t *dsigma, halide_buffer_t *spread);
// Decode (generators/gka_decode.h): the new tokens x (d, h, q, b) against the
// cache (d, h, slot, b) of lengths (b, int32) tokens; the window's right span is 0.
using DecodeKernel = int (*)(halide_buffer_t *x, halide_buffer_t *cache, halide_buffer_t *lengths,
                             halide_buffer_t *sigma, int32_t left, halide_buffer_t *y, halide_buffer_t *lse);
// Random-feature GKA (generators/gka_random_features.h): frequencies W (d, m,
// h); causal 1 for the window (-1, 0), 0 for (-1, -1). A call is a segment:
// the keys' state (d <= D, m, h, b) before it in, after it out (the backward:
// the queries' state after it in, before it out).
using FeatureStatesKernel = int (*)(halide_buffer_t *x, halide_buffer_t *sigma, halide_buffer_t *frequencies,
                                    halide_buffer_t *state_in, halide_buffer_t *state_out);
using FeatureForwardKernel = int (*)(halide_buffer_t *x, halide_buffer_t *sigma, halide_buffer_t *frequencies,
                                     halide_buffer_t *state_in, int32_t causal, halide_buffer_t *y,
                                     halide_buffer_t *lse, halide_buffer_t *state_out);
using FeatureBackwardKernel = int (*)(halide_buffer_t *x, halide_buffer_t *sigma, halide_buffer_t *frequencies,
                                      halide_buffer_t *state_in, halide_buffer_t *y, halide_buffer_t *lse,
                                      halide_buffer_t *dy, halide_buffer_t *query_state_in, int32_t causal,
                                      halide_buffer_t *dx, halide_buffer_t *dfrequencies, halide_buffer_t *dsigma,
                                      halide_buffer_t *query_state_out);
// The CUDA kernels take a user_context first: the call's stream.
using CudaForwardKernel = int (*)(const void *, halide_buffer_t *, halide_buffer_t *, int32_t, int32_t,
                                  halide_buffer_t *, halide_buffer_t *, halide_buffer_t *);
using CudaBackwardKernel = int (*)(const void *, halide_buffer_t *, halide_buffer_t *, halide_buffer_t *,
                                   halide_buffer_t *, halide_buffer_t *, int32_t, int32_t, halide_buffer_t *,
                                   halide_buffer_t *, halide_buffer_t *);
using CudaDecodeKernel = int (*)(const void *, halide_buffer_t *, halide_buffer_t *, halide_buffer_t *,
                                 halide_buffer_t *, int32_t, halide_buffer_t *, halide_buffer_t *);
using CudaForwardChunkKernel = int (*)(const void *, halide_buffer_t *, halide_buffer_t *, halide_buffer_t *, int32_t,
                                       int32_t, int32_t, halide_buffer_t *, halide_buffer_t *, halide_buffer_t *);
using CudaBackwardChunkKernel = int (*)(const void *, halide_buffer_t *, halide_buffer_t *, halide_buffer_t *,
                                        halide_buffer_t *, halide_buffer_t *, halide_buffer_t *, int32_t, int32_t,
                                        int32_t, halide_buffer_t *, halide_buffer_t *, halide_buffer_t *,
                                        halide_buffer_t *);


// The feature tensors' element type a variant takes (x, y, dy, dx; sigma, lse
// and dsigma are float32 in every variant).
enum class Element { f32, bf16 };

// GLOBAL: a side of the window is unbounded (full, causal), O(T^2) pairs;
// SLIDING: both sides are bounded, O(T*W) pairs.
enum class WindowKind { ANY, GLOBAL, SLIDING };
// The kind of a window (gka_window's spans, -1 unbounded) on a sequence of
// seq_len tokens: a span reaching past the sequence bounds nothing.
inline WindowKind window_kind(int64_t left, int64_t right, int64_t seq_len) {
    auto bounded = [&](int64_t span) { return span >= 0 && span < seq_len - 1; };
    return bounded(left) && bounded(right) ? WindowKind::SLIDING : WindowKind::GLOBAL;
}

struct ShapeClass {
    int64_t head_dim;  // 0: any
    WindowKind window;
    int64_t min_seq_len, max_seq_len;  // max 0: no bound

    bool contains(int64_t dim, WindowKind kind, int64_t seq_len) const {
        return (head_dim == 0 || head_dim == dim) && (window == WindowKind::ANY || window == kind) &&
               seq_len >= min_seq_len && (max_seq_len == 0 || seq_len <= max_seq_len);
    }
    // A fixed head dim first, then a window kind, then a length range.
    int narrowness() const {
        return 4 * (head_dim != 0) + 2 * (window != WindowKind::ANY) + (min_seq_len > 1 || max_seq_len != 0);
    }
};

template <class Kernel>
struct Variant {
    const char *family;
    ShapeClass shape;
    Kernel run;
    const char *name;   // the kernel's function name, e.g. gka_forward_avx512_d64_sliding
    const char *knobs;  // its schedule knobs from schedules/tuned.tsv; "" = the schedule's defaults
    ScoreForm form;
    Element element;
    KernelFunction function;
};

// The variant of `family` for a call of these shapes and kernel function, or
// null if the family has no such kernel (every CPU family has one for any head
// dim and shape in each score form and element type for the Gaussian, and in
// the direct form for the other kernel functions; the CUDA families have the
// direct form alone).
const Variant<ForwardKernel> *forward_variant(const char *family, KernelFunction, int64_t head_dim, WindowKind,
                                              int64_t seq_len, ScoreForm, Element);
const Variant<BackwardKernel> *backward_variant(const char *family, KernelFunction, int64_t head_dim, WindowKind,
                                                int64_t seq_len, ScoreForm, Element);
// A chunk's passes: the direct form, float32.
const Variant<ForwardChunkKernel> *forward_chunk_variant(const char *family, KernelFunction, int64_t head_dim);
const Variant<BackwardChunkKernel> *backward_chunk_variant(const char *family, KernelFunction, int64_t head_dim);
// Random-feature GKA's: any head dim, float32, the Gaussian.
const Variant<FeatureStatesKernel> *feature_states_variant(const char *family);
const Variant<FeatureForwardKernel> *feature_forward_variant(const char *family);
const Variant<FeatureBackwardKernel> *feature_backward_variant(const char *family);
const Variant<DecodeKernel> *decode_variant(const char *family, KernelFunction, int64_t head_dim, Element);
const Variant<CudaForwardKernel> *cuda_forward_variant(const char *family, KernelFunction, int64_t head_dim,
                                                      WindowKind, int64_t seq_len, Element);
const Variant<CudaBackwardKernel> *cuda_backward_variant(const char *family, KernelFunction, int64_t head_dim,
                                                        WindowKind, int64_t seq_len, Element);
const Variant<CudaDecodeKernel> *cuda_decode_variant(const char *family, KernelFunction, int64_t head_dim, Element);
const Variant<CudaForwardChunkKernel> *cuda_forward_chunk_variant(const char *family, KernelFunction,
                                                                  int64_t head_dim);
const Variant<CudaBackwardChunkKernel> *cuda_backward_chunk_variant(const char *family, KernelFunction,
                                                                    int64_t head_dim);

// The error of a call whose variant the build left out (kernels/variants.py,
// GKA_SELECT): GKA_ERR_UNSUPPORTED, naming the variant and the build option.
gka_status not_built(const char *pass, const char *family, KernelFunction, int64_t head_dim, Element);

// The CUDA families compiled in, best first, each with the compute capability
// its PTX targets (major * 10 + minor).
struct CudaFamily {
    const char *name;
    int capability;
};
const std::vector<CudaFamily> &cuda_families();
// The best of `families` (best first) that a device of `capability` runs;
// null if it is older than every one.
inline const char *cuda_family_for(const std::vector<CudaFamily> &families, int capability) {
    for (const CudaFamily &f : families)
        if (f.capability <= capability) return f.name;
    return nullptr;
}

struct CpuFamily {
    const char *name;
    const char *host_features;  // comma-separated, in /proc/cpuinfo's names (cmake/families.tsv)
    bool host_supports() const;  // the host has every one (runtime/arch.h)
};
// Best first.
const CpuFamily *cpu_families(int *count);
const CpuFamily *find_cpu_family(const char *name);

}  // namespace gka
