// Halide's working buffers for one call (the band sums, the squared norms) are
// as large as x or a sizeable part of it. Fresh allocations that size come from
// mmap, and every call would then fault and zero their pages again; this cache
// hands the blocks of finished calls to the next ones instead.
#pragma once

namespace gka {

// Routes the Halide runtime's allocations through the cache.
void install_block_cache();

}  // namespace gka
