#include "block_cache.h"

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "HalideRuntime.h"

namespace gka {
namespace {

constexpr size_t alignment = 128;              // what Halide's own allocator guarantees
constexpr size_t cached_min = size_t(1) << 20;  // smaller blocks come from malloc's free lists already
constexpr size_t max_cached_bytes = size_t(512) << 20;  // idle memory held at most

// Each block starts with a header of one alignment's size, before the memory
// Halide gets: the block's size and the size asked for in it, read when the
// block is freed.
struct Header {
    size_t block, asked;
};
static_assert(sizeof(Header) <= alignment, "the header fits before the aligned memory");

struct Block {
    void *p;
    size_t size;
};

std::mutex mutex;
std::vector<Block> free_blocks;  // idle blocks, reused when a request fits within twice its size
size_t free_bytes = 0;

// The sizes asked for by live blocks, and their peak (lock-free: small blocks
// are allocated inside the kernels' parallel loops).
std::atomic<size_t> in_use{0}, peak{0};

void count_in(size_t asked) {
    const size_t now = in_use.fetch_add(asked) + asked;
    size_t seen = peak.load();
    while (now > seen && !peak.compare_exchange_weak(seen, now)) {
    }
}

void *hand_out(void *block, size_t block_size, size_t asked) {
    *static_cast<Header *>(block) = {block_size, asked};
    count_in(asked);
    return static_cast<char *>(block) + alignment;
}

void *cached_malloc(void *, size_t asked) {
    const size_t size = (asked + alignment - 1) / alignment * alignment + alignment;
    if (size >= cached_min) {
        std::lock_guard<std::mutex> lock(mutex);
        for (size_t k = 0; k < free_blocks.size(); k++) {
            if (free_blocks[k].size >= size && free_blocks[k].size <= 2 * size) {
                Block b = free_blocks[k];
                free_blocks.erase(free_blocks.begin() + k);
                free_bytes -= b.size;
                return hand_out(b.p, b.size, asked);
            }
        }
    }
    void *p = std::aligned_alloc(alignment, size);
    return p == nullptr ? nullptr : hand_out(p, size, asked);
}

void cached_free(void *, void *p) {
    if (p == nullptr) return;
    void *block = static_cast<char *>(p) - alignment;
    const Header h = *static_cast<Header *>(block);
    in_use.fetch_sub(h.asked);
    if (h.block < cached_min) return std::free(block);
    std::lock_guard<std::mutex> lock(mutex);
    free_blocks.push_back({block, h.block});
    free_bytes += h.block;
    while (free_bytes > max_cached_bytes) {  // the oldest idle blocks go first
        free_bytes -= free_blocks.front().size;
        std::free(free_blocks.front().p);
        free_blocks.erase(free_blocks.begin());
    }
}

}  // namespace

void install_block_cache() {
    halide_set_custom_malloc(cached_malloc);
    halide_set_custom_free(cached_free);
}

WorkingMemory working_memory() {
    std::lock_guard<std::mutex> lock(mutex);
    return {in_use.load(), peak.load(), free_bytes};
}

void reset_working_memory_peak() { peak.store(in_use.load()); }

}  // namespace gka
