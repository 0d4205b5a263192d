// Halide's working buffers for one call (transposed copies of x, partial sums)
// are as large as x. Fresh allocations that size come from mmap, and every call
// would then fault and zero their pages again; this cache hands the blocks of
// finished calls to the next ones instead.
#pragma once

namespace gka {

// Routes the Halide runtime's allocations through the cache.
void install_block_cache();

}  // namespace gka
