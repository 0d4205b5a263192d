#include "block_cache.h"

#include <cstdlib>
#include <mutex>
#include <vector>

#include "HalideRuntime.h"

namespace gka {
namespace {

constexpr size_t alignment = 128;              // what Halide's own allocator guarantees
constexpr size_t cached_min = size_t(1) << 20;  // smaller blocks come from malloc's free lists already
constexpr size_t max_cached_bytes = size_t(512) << 20;  // idle memory held at most

struct Block {
    void *p;
    size_t size;
};

std::mutex mutex;
std::vector<Block> free_blocks;  // idle blocks, reused when a request fits within twice its size
std::vector<Block> live_blocks;  // handed out, to know a block's size when it is freed
size_t free_bytes = 0;

void *cached_malloc(void *, size_t size) {
    size = (size + alignment - 1) / alignment * alignment;
    if (size >= cached_min) {
        std::lock_guard<std::mutex> lock(mutex);
        for (size_t k = 0; k < free_blocks.size(); k++) {
            if (free_blocks[k].size >= size && free_blocks[k].size <= 2 * size) {
                Block b = free_blocks[k];
                free_blocks.erase(free_blocks.begin() + k);
                free_bytes -= b.size;
                live_blocks.push_back(b);
                return b.p;
            }
        }
    }
    void *p = std::aligned_alloc(alignment, size);
    if (p != nullptr && size >= cached_min) {
        std::lock_guard<std::mutex> lock(mutex);
        live_blocks.push_back({p, size});
    }
    return p;
}

void cached_free(void *, void *p) {
    {
        std::lock_guard<std::mutex> lock(mutex);
        for (size_t k = 0; k < live_blocks.size(); k++) {
            if (live_blocks[k].p != p) continue;
            Block b = live_blocks[k];
            live_blocks.erase(live_blocks.begin() + k);
            free_blocks.push_back(b);
            free_bytes += b.size;
            while (free_bytes > max_cached_bytes) {  // the oldest idle blocks go first
                free_bytes -= free_blocks.front().size;
                std::free(free_blocks.front().p);
                free_blocks.erase(free_blocks.begin());
            }
            return;
        }
    }
    std::free(p);
}

}  // namespace

void install_block_cache() {
    halide_set_custom_malloc(cached_malloc);
    halide_set_custom_free(cached_free);
}

}  // namespace gka
