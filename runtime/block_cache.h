// Halide's working buffers for one call (the band sums, the squared norms) are
// as large as x or a sizeable part of it. Fresh allocations that size come from
// mmap, and every call would then fault and zero their pages again; this cache
// hands the blocks of finished calls to the next ones instead. It counts what
// the kernels ask for (gka.h, gka_memory).
#pragma once

#include <cstddef>

namespace gka {

// Routes the Halide runtime's allocations through the cache.
void install_block_cache();

struct WorkingMemory {
    size_t in_use, peak, idle;  // bytes asked for by live blocks, their peak, and idle cached blocks
};
WorkingMemory working_memory();
// The peak from now on starts at what is in use.
void reset_working_memory_peak();

}  // namespace gka
