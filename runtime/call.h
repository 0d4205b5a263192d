// The call description (gka.h, gka_call) inside libgka: the one entry of every
// compute call, old and new (call.cpp), and the operations each device runs on
// a description that entry has checked (cpu_*.cpp and cuda_*.cpp). An
// operation reads the description's fields alone: no thread's or process's
// setting changes what it computes.
#pragma once

#include "gka/gka.h"
#include "internal.h"

namespace gka {
struct CpuFamily;
}

namespace gka::internal {

enum class Pass { forward, backward, decode };

// The shape of the feature tensors: a varlen call's packed tokens are one batch.
inline gka_shape tensor_shape(const gka_call &c) {
    return c.cu_seqlens ? gka_shape{1, c.shape.seq_len, c.shape.heads, c.shape.head_dim} : c.shape;
}
inline KernelFunction kernel_function(const gka_call &c) { return KernelFunction(c.kernel); }

// Checks `given` (every rule of call.cpp's check_call: the fields' values,
// the batch layout, shape, pointers, window, sigma on the host, cu_seqlens, the
// chunk, the decode cache), then runs `pass` on its device, or writes the exact
// results where no kernel is needed. `name`: the entry point, for messages.
gka_status run_call(const gka_call &given, Pass pass, const char *name);

// Whether a call has work for a kernel: features with elements, and for a
// chunk keys with some pair in the window. Where it has none, run_call writes
// the exact results itself.
bool needs_kernel(const gka_call &c);

// lse where no kernel runs (run_call), into `lse` (host memory, lse's layout):
// each row's log number of keys in its window, -inf where it has none; with no
// features that is exact.
void lse_without_kernel(const gka_call &c, float *lse);

// The CPU operations (cpu_attention.cpp, varlen.cpp, chunk.cpp).
gka_status cpu_forward(const gka_call &c, const CpuFamily &f);
gka_status cpu_backward(const gka_call &c, const CpuFamily &f);
gka_status cpu_decode(const gka_call &c, const CpuFamily &f);
gka_status cpu_forward_varlen(const gka_call &c, const CpuFamily &f);
gka_status cpu_backward_varlen(const gka_call &c, const CpuFamily &f);
gka_status cpu_forward_chunk(const gka_call &c, const CpuFamily &f);
gka_status cpu_backward_chunk(const gka_call &c, const CpuFamily &f);
// Random-feature GKA (cpu_random_features.cpp).
gka_status cpu_feature_forward(const gka_call &c, const CpuFamily &f);
gka_status cpu_feature_backward(const gka_call &c, const CpuFamily &f);
gka_status cpu_feature_decode(const gka_call &c, const CpuFamily &f);
gka_status feature_decode_without_kernel(const gka_call &c);  // a dimension 0: on the host

// A varlen call's sequence s as a call of its own, a view of the packed
// tensors (lse and dsigma: the caller's, which varlen.cpp and cuda_varlen.cpp
// point at their own rows).
gka_call sequence_call(const gka_call &c, gka_shape one, int64_t first_token);

}  // namespace gka::internal

namespace gka::internal::cuda {

// The CUDA side of run_call, after the host checks: the driver, the device's
// family, then the pass (cuda_call.cpp).
gka_status run(const gka_call &c, Pass pass, const char *name);

}  // namespace gka::internal::cuda
