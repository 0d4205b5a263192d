// What libgka needs of the CPU it runs on, one implementation per
// architecture (arch_x86.cpp, arch_aarch64.cpp; runtime/CMakeLists.txt picks
// one): the features a family's Halide target assumes, and the float mode the
// kernels run in. Nothing else in the runtime is architecture-specific.
#pragma once

#include <cstdint>
#include <string>

namespace gka::arch {

// True if the host has `feature`, named as /proc/cpuinfo names it
// (cmake/families.tsv's host_features); a name this architecture does not know
// counts as missing.
bool host_has(const std::string &feature);

// The calling thread's float mode (x86: MXCSR; AArch64: FPCR).
uint64_t float_mode();
void set_float_mode(uint64_t mode);
// The kernels' mode, whatever the caller's: round to nearest, exceptions
// masked, denormals flushed to zero (inputs and results), and the caller's
// sticky exception flags where the mode holds them.
uint64_t kernel_float_mode(uint64_t caller);
// The caller's mode again, with the exception flags raised meanwhile (`now`'s).
uint64_t restored_float_mode(uint64_t caller, uint64_t now);

}  // namespace gka::arch
