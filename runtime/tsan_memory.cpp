// The TSan build only (GKA_SANITIZE=thread): Halide's runtime generated with
// its tsan feature calls __tsan_memcpy and __tsan_memset, which clang 14's
// TSan runtime lacks. memcpy and memset are TSan's own interceptors, so these
// are checked the same way.
#include <cstring>

extern "C" void *__tsan_memcpy(void *to, const void *from, std::size_t n) { return std::memcpy(to, from, n); }
extern "C" void *__tsan_memset(void *to, int value, std::size_t n) { return std::memset(to, value, n); }
