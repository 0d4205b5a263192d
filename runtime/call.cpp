// The compute calls (gka.h, gka_run_forward): reading a description, the one
// validation of every call, the exact results of calls that need no kernel,
// and the dispatch to the device's operations.
#include "call.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <string>

#include "kernel_variants.h"

namespace gka::internal {

namespace {

// The kernels index buffers with 32-bit integers.
constexpr int64_t max_elements = INT32_MAX;

// A tensor the pass reads or writes: it must be given where it has elements.
struct Tensor {
    const void *pointer;
    const char *name;
    __int128 elements;
};

// An enum field read as the int it holds: a value past the enum's range is the
// caller's error to report, and loading it as the enum would be undefined.
template <class Enum>
gka_status check_enum(const Enum &field, int count, const char *name, const char *names) {
    static_assert(sizeof(Enum) == sizeof(int), "gka.h's enums are ints");
    int value;
    std::memcpy(&value, &field, sizeof value);
    if (value >= 0 && value < count) return GKA_OK;
    return fail(GKA_ERR_INVALID_ARGUMENT, std::string(name) + " = " + std::to_string(value) + " is not one of " + names);
}

gka_status check_fields(const gka_call &c) {
    gka_status s = check_enum(c.dtype, 2, "dtype", "GKA_FLOAT32, GKA_BFLOAT16");
    if (s == GKA_OK) s = check_enum(c.kernel, 3, "kernel", "GKA_GAUSSIAN, GKA_LAPLACE, GKA_CAUCHY");
    if (s == GKA_OK) {
        s = check_enum(c.scores, 4, "scores",
                       "GKA_SCORES_AUTO, GKA_SCORES_ORIGIN, GKA_SCORES_CENTRED, GKA_SCORES_DIRECT");
    }
    if (s == GKA_OK) s = check_enum(c.device, 2, "device", "GKA_CPU, GKA_CUDA");
    return s;
}

// The batch layout: at most one of varlen, chunk and decode, and the pass's.
gka_status check_layout(const gka_call &c, Pass pass) {
    const bool decode_fields = c.cache_lens || c.cache_capacity || c.cache;
    if (pass == Pass::decode && (c.cu_seqlens || c.chunk)) {
        return fail(GKA_ERR_INVALID_ARGUMENT, "decode takes a batch of equal new-token counts: cu_seqlens and "
                                              "chunk must be NULL");
    }
    if (pass != Pass::decode && decode_fields) {
        return fail(GKA_ERR_INVALID_ARGUMENT,
                    "cache, cache_capacity and cache_lens are gka_run_decode's: they must be NULL and 0 here");
    }
    if (c.cu_seqlens && c.chunk) {
        return fail(GKA_ERR_INVALID_ARGUMENT, "cu_seqlens and chunk are both set: a call is a varlen batch or a "
                                              "chunk, not both");
    }
    if (!c.chunk && (c.keys || c.dx_keys)) {
        return fail(GKA_ERR_INVALID_ARGUMENT, "keys and dx_keys are a chunk's: they must be NULL without one");
    }
    if (c.chunk && c.dtype != GKA_FLOAT32) {
        return fail(GKA_ERR_UNSUPPORTED, "the chunk kernels take float32 features (dtype GKA_FLOAT32)");
    }
    return GKA_OK;
}

// W's elements (and dW's), [H][M][D]: none where features = 0.
__int128 frequency_count(const gka_call &c) { return __int128(c.shape.heads) * c.features * c.shape.head_dim; }

// Random-feature GKA's calls (features > 0): what its kernels compute, and
// nothing of it elsewhere.
gka_status check_features(const gka_call &c, Pass pass) {
    if (c.features < 0) {
        return fail(GKA_ERR_INVALID_ARGUMENT, "features = " + std::to_string(c.features) +
                                                  ": the count of random features must be >= 0 (0: exact GKA)");
    }
    if (c.features == 0) {
        if (c.frequencies || c.dfrequencies) {
            return fail(GKA_ERR_INVALID_ARGUMENT, "frequencies and dfrequencies are random-feature GKA's: they "
                                                  "must be NULL where features = 0");
        }
        return GKA_OK;
    }
    const char *what = "random-feature GKA (features > 0) ";
    if (c.chunk) {
        return fail(GKA_ERR_UNSUPPORTED, std::string(what) + "takes no chunk: its decode carries a sequence's "
                                                             "state from one call to the next");
    }
    if (!(c.window.left == -1 && (c.window.right == 0 || c.window.right == -1))) {
        return fail(GKA_ERR_UNSUPPORTED, std::string(what) + "takes the causal (-1, 0) and full (-1, -1) windows; " +
                                             "window (" + std::to_string(c.window.left) + ", " +
                                             std::to_string(c.window.right) +
                                             "): a sliding window is exact GKA in O(T*W) already");
    }
    if (pass == Pass::decode && c.window.right != 0) {
        return fail(GKA_ERR_UNSUPPORTED, std::string(what) + "decodes under the causal window (-1, 0)");
    }
    if (pass == Pass::decode && (c.cache_capacity != 0 || c.cache_lens)) {
        return fail(GKA_ERR_INVALID_ARGUMENT, std::string(what) + "decodes from a cache that holds the keys' state, "
                                                                  "[B][H][M][D + 1] float32, not tokens: "
                                                                  "cache_capacity must be 0 and cache_lens NULL");
    }
    if (c.kernel != GKA_GAUSSIAN) {
        return fail(GKA_ERR_UNSUPPORTED, std::string(what) + "estimates the Gaussian kernel alone");
    }
    if (c.dtype != GKA_FLOAT32 || c.device != GKA_CPU) {
        return fail(GKA_ERR_UNSUPPORTED, std::string(what) + "takes float32 features on the CPU today");
    }
    if (c.features > max_elements) {
        return fail(GKA_ERR_UNSUPPORTED, "features = " + std::to_string(c.features) + ": at most 2^31 - 1");
    }
    return GKA_OK;
}

// W's values, read once the shape and pointers are checked.
gka_status check_frequencies(const gka_call &c) {
    for (int64_t k = 0; k < int64_t(frequency_count(c)); k++) {
        if (!std::isfinite(c.frequencies[k])) {
            const int64_t h = k / (c.features * c.shape.head_dim), m = k / c.shape.head_dim % c.features;
            return fail(GKA_ERR_INVALID_ARGUMENT, "frequencies[" + std::to_string(h) + "][" + std::to_string(m) +
                                                      "][" + std::to_string(k % c.shape.head_dim) + "] = " +
                                                      std::to_string(c.frequencies[k]) + ": each must be finite");
        }
    }
    return GKA_OK;
}

std::vector<Tensor> tensors(const gka_call &c, Pass pass) {
    const gka_shape t = tensor_shape(c);
    const __int128 features = __int128(t.batch) * t.seq_len * t.heads * t.head_dim;
    const __int128 rows = __int128(t.batch) * t.heads * t.seq_len;
    std::vector<Tensor> list{{c.x, "x", features}, {c.sigma, "sigma", c.shape.heads}};
    if (pass == Pass::decode && c.features > 0) {  // the keys' state
        const __int128 state = __int128(c.shape.batch) * c.shape.heads * c.features * (c.shape.head_dim + 1);
        list.push_back({c.cache, "cache", state});
    } else if (pass == Pass::decode) {
        const __int128 cache = __int128(c.shape.batch) * c.cache_capacity * c.shape.heads * c.shape.head_dim;
        list.insert(list.end(), {{c.cache_lens, "cache_lens", c.shape.batch}, {c.cache, "cache", cache}});
    }
    const __int128 keys =
        c.chunk ? __int128(c.shape.batch) * c.chunk->key_len * c.shape.heads * c.shape.head_dim : 0;
    if (c.chunk) list.push_back({c.keys, "keys", keys});
    list.insert(list.end(), {{c.y, "y", features}, {c.lse, "lse", rows}});
    const __int128 frequencies = frequency_count(c);
    if (c.features > 0) list.push_back({c.frequencies, "frequencies", frequencies});
    if (pass == Pass::backward) {
        list.insert(list.end(), {{c.dy, "dy", features}, {c.dx, "dx", features}});
        if (c.chunk) list.push_back({c.dx_keys, "dx_keys", keys});
        list.push_back({c.dsigma, "dsigma", c.shape.heads});
        if (c.features > 0) list.push_back({c.dfrequencies, "dfrequencies", frequencies});
    }
    return list;
}

gka_status check_arguments(const gka_call &c, Pass pass) {
    const gka_shape &s = c.shape;
    if (s.batch < 0 || s.seq_len < 0 || s.heads < 0 || s.head_dim < 0) {
        return fail(GKA_ERR_INVALID_ARGUMENT, shape_text(s) + ": every dimension must be >= 0");
    }
    if (c.chunk && (c.chunk->query_start < 0 || c.chunk->key_start < 0 || c.chunk->key_len < 0)) {
        return fail(GKA_ERR_INVALID_ARGUMENT, chunk_text(*c.chunk) + ": starts and key_len must be >= 0");
    }
    if (pass == Pass::decode && c.features == 0 && c.cache_capacity < 1) {
        return fail(GKA_ERR_INVALID_ARGUMENT, "cache capacity " + std::to_string(c.cache_capacity) + " < 1");
    }
    // Each extent within what the kernels index, so that no product of them
    // overflows and no tensor without features (D = 0) goes unbounded.
    const int64_t key_len = c.chunk ? c.chunk->key_len : 0;
    for (int64_t extent : {s.batch, s.seq_len, s.heads, s.head_dim, c.cache_capacity, key_len}) {
        if (extent > max_elements) {
            return fail(GKA_ERR_UNSUPPORTED, shape_text(s) + ": each extent must be at most 2^31 - 1, the most "
                                                             "the kernels address");
        }
    }
    for (const Tensor &t : tensors(c, pass)) {
        if (t.pointer == nullptr && t.elements > 0) {
            return fail(GKA_ERR_INVALID_ARGUMENT, std::string(t.name) + " is NULL");
        }
    }
    const gka_window &w = c.window;
    if (w.left < -1 || w.right < -1) {
        return fail(GKA_ERR_INVALID_ARGUMENT, "window (" + std::to_string(w.left) + ", " +
                                                  std::to_string(w.right) + "): left and right must be >= -1");
    }
    // Checked before sigma is read, so that a shape past the limit is refused
    // without scanning sigma over the heads it claims.
    const gka_shape t = tensor_shape(c);
    const __int128 elements = __int128(t.batch) * t.seq_len * t.heads * t.head_dim;
    const __int128 rows = __int128(t.batch) * t.seq_len * t.heads;  // lse's, which D = 0 leaves unbounded
    const __int128 frequencies = frequency_count(c);
    const __int128 state = c.features * __int128(t.batch) * t.heads * (t.head_dim + 1);  // random features' a call
    if (elements > max_elements || rows > max_elements || frequencies > max_elements || state > max_elements) {
        const __int128 most = std::max({elements, rows, frequencies, state});
        return fail(GKA_ERR_UNSUPPORTED, "shape has " + std::to_string(int64_t(most > INT64_MAX ? INT64_MAX : most)) +
                                             " elements per tensor; the kernels address at most 2^31 - 1");
    }
    // Device memory is never read here.
    for (int64_t h = 0; c.device == GKA_CPU && h < s.heads; h++) {
        if (!std::isfinite(c.sigma[h]) || !(c.sigma[h] > 0.0f)) {
            return fail(GKA_ERR_INVALID_ARGUMENT, "sigma[" + std::to_string(h) + "] = " +
                                                      std::to_string(c.sigma[h]) +
                                                      ": each sigma must be finite and > 0");
        }
    }
    return GKA_OK;
}

// Every rule of a description, before anything is read through its pointers
// (sigma's values last, as they are read).
gka_status check_call(const gka_call &c, Pass pass) {
    gka_status s = check_fields(c);
    if (s == GKA_OK) s = check_layout(c, pass);
    if (s == GKA_OK) s = check_features(c, pass);
    if (s == GKA_OK) s = check_arguments(c, pass);
    if (s == GKA_OK && c.features > 0) s = check_frequencies(c);
    if (s == GKA_OK && c.cu_seqlens) s = check_cu_seqlens(c.shape, c.cu_seqlens);
    if (s == GKA_OK && c.chunk) s = check_chunk(c.shape, *c.chunk);
    if (s == GKA_OK && pass == Pass::decode && c.features == 0) {
        s = check_decode(c.shape, c.cache_capacity, c.window, c.cache_lens);
    }
    return s;
}

// The exact results where no kernel runs, on the host: y, dx and dx_keys 0
// wherever they have elements (a chunk's no pair), lse the log of each row's
// key count, dsigma 0. The cache is left as it is: no features to write (a
// random-feature decode's state counts its new keys: feature_decode_without_kernel).
gka_status write_host_results(const gka_call &c, Pass pass) {
    if (pass == Pass::decode && c.features > 0) return feature_decode_without_kernel(c);
    const gka_shape t = tensor_shape(c);
    const int64_t features = t.batch * t.seq_len * t.heads * t.head_dim;
    const int64_t key_features = c.chunk ? t.batch * c.chunk->key_len * t.heads * t.head_dim : 0;
    auto zero = [](void *p, int64_t elements, size_t element_size) {
        if (elements > 0) std::memset(p, 0, size_t(elements) * element_size);
    };
    const size_t element_size = c.dtype == GKA_BFLOAT16 ? sizeof(gka_bf16) : sizeof(float);
    if (pass == Pass::backward) {
        zero(c.dx, features, element_size);
        zero(c.dx_keys, key_features, element_size);
        zero(c.dsigma, c.shape.heads, sizeof(float));
        zero(c.dfrequencies, int64_t(frequency_count(c)), sizeof(float));
    } else {
        zero(c.y, features, element_size);
        lse_without_kernel(c, c.lse);
    }
    return ran("", 0, GKA_ERR_INTERNAL);
}

// A description as this library knows it: the caller's first `size` bytes,
// the rest at their defaults. Fields past this library's are accepted unset.
gka_status read_call(const gka_call *given, const char *name, gka_call *c) {
    clear_error();
    if (given == nullptr) return fail(GKA_ERR_INVALID_ARGUMENT, std::string(name) + ": the gka_call is NULL");
    // The first version ended at the decode cache; a caller compiled against
    // it gets the later fields' defaults (zero).
    const size_t first = offsetof(gka_call, features), known = sizeof(gka_call), size = given->size;
    if (size < first) {
        return fail(GKA_ERR_INVALID_ARGUMENT,
                    std::string(name) + ": gka_call.size = " + std::to_string(size) + ", less than the " +
                        std::to_string(first) + " bytes of its first version: start from gka_call_init()");
    }
    const auto *bytes = reinterpret_cast<const unsigned char *>(given);
    if (size > known && std::any_of(bytes + known, bytes + size, [](unsigned char b) { return b != 0; })) {
        return fail(GKA_ERR_UNSUPPORTED, std::string(name) + ": the gka_call sets fields past the " +
                                             std::to_string(known) + " bytes that libgka " + gka_version() +
                                             " knows: a newer gka.h than this library's");
    }
    *c = gka_call_init();
    std::memcpy(c, given, std::min(size, known));
    c->size = known;
    return GKA_OK;
}

// `p` moved `bytes` on, or NULL where it is NULL (a tensor without elements).
template <class P>
P *advanced(P *p, uintptr_t bytes) {
    return p ? reinterpret_cast<P *>(reinterpret_cast<uintptr_t>(p) + bytes) : p;
}

gka_status run_new(const gka_call *given, Pass pass, const char *name) {
    gka_call c;
    if (gka_status s = read_call(given, name, &c); s != GKA_OK) return s;
    return run_call(c, pass, name);
}

}  // namespace

bool needs_kernel(const gka_call &c) {
    const gka_shape t = tensor_shape(c);
    if (t.batch == 0 || t.seq_len == 0 || t.heads == 0 || t.head_dim == 0) return false;
    return !c.chunk || (c.chunk->key_len > 0 && has_pairs(c.shape, *c.chunk, c.window));
}

void lse_without_kernel(const gka_call &c, float *lse) {
    const gka_shape t = tensor_shape(c);
    // Row i's keys are those of [first, last] within [position - left, position + right].
    auto log_keys = [&](int64_t position, int64_t first, int64_t last) {
        if (c.window.left >= 0) first = std::max(first, position - c.window.left);
        if (c.window.right >= 0) last = std::min(last, position + c.window.right);
        return float(std::log(double(std::max<int64_t>(0, last - first + 1))));
    };
    for (int64_t b = 0; b < t.batch; b++)
        for (int64_t h = 0; h < t.heads; h++)
            for (int64_t i = 0; i < t.seq_len; i++) {
                int64_t position = i, first = 0, last = t.seq_len - 1;
                if (c.cu_seqlens) {  // [H][total]: the sequence holding token i
                    const int64_t s = std::upper_bound(c.cu_seqlens, c.cu_seqlens + c.shape.batch + 1, i) -
                                      c.cu_seqlens - 1;
                    first = c.cu_seqlens[s], last = c.cu_seqlens[s + 1] - 1;
                } else if (c.chunk) {
                    position = c.chunk->query_start + i;
                    first = c.chunk->key_start, last = c.chunk->key_start + c.chunk->key_len - 1;
                } else if (c.cache_lens) {  // decode: the cache's tokens, then the new ones up to i
                    position = c.cache_lens[b] + i, last = position;
                }
                lse[(b * t.heads + h) * t.seq_len + i] = log_keys(position, first, last);
            }
}

gka_status run_call(const gka_call &c, Pass pass, const char *name) {
    if (gka_status s = check_call(c, pass); s != GKA_OK) return s;
    if (c.device == GKA_CUDA) return cuda::run(c, pass, name);
    const CpuFamily *f = cpu_family();
    if (f == nullptr) return GKA_ERR_UNSUPPORTED;
    if (!needs_kernel(c)) return write_host_results(c, pass);
    if (c.features > 0) {
        return pass == Pass::forward    ? cpu_feature_forward(c, *f)
               : pass == Pass::backward ? cpu_feature_backward(c, *f)
                                        : cpu_feature_decode(c, *f);
    }
    switch (pass) {
    case Pass::forward:
        return c.cu_seqlens ? cpu_forward_varlen(c, *f) : c.chunk ? cpu_forward_chunk(c, *f) : cpu_forward(c, *f);
    case Pass::backward:
        return c.cu_seqlens ? cpu_backward_varlen(c, *f) : c.chunk ? cpu_backward_chunk(c, *f) : cpu_backward(c, *f);
    case Pass::decode:
        return cpu_decode(c, *f);
    }
    return fail(GKA_ERR_INTERNAL, std::string(name) + ": unknown pass");
}

gka_call sequence_call(const gka_call &c, gka_shape one, int64_t first_token) {
    gka_call s = c;
    s.cu_seqlens = nullptr;
    s.shape = one;
    const size_t element_size = c.dtype == GKA_BFLOAT16 ? sizeof(gka_bf16) : sizeof(float);
    const uintptr_t bytes = uintptr_t(first_token * c.shape.heads * c.shape.head_dim) * element_size;
    s.x = advanced(c.x, bytes), s.y = advanced(c.y, bytes), s.dy = advanced(c.dy, bytes), s.dx = advanced(c.dx, bytes);
    return s;
}

}  // namespace gka::internal

extern "C" {

gka_status gka_run_forward(const gka_call *call) {
    return gka::internal::run_new(call, gka::internal::Pass::forward, "gka_run_forward");
}

gka_status gka_run_backward(const gka_call *call) {
    return gka::internal::run_new(call, gka::internal::Pass::backward, "gka_run_backward");
}

gka_status gka_run_decode(const gka_call *call) {
    return gka::internal::run_new(call, gka::internal::Pass::decode, "gka_run_decode");
}

int gka_chunk_has_pairs(gka_shape shape, gka_chunk chunk, gka_window window) {
    return chunk.key_len > 0 && shape.seq_len > 0 && gka::internal::has_pairs(shape, chunk, window);
}

}  // extern "C"
