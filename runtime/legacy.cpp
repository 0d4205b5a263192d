// The older compute calls (gka.h, "The older calls"): each describes itself as
// a gka_call and runs it through the one entry (call.cpp). What they keep of
// their own: a zero dimension and any NULL pointer are refused, as they were,
// and they compute the calling thread's kernel function (gka_set_kernel) with
// the process's score policy (gka_set_score_form).
#include <algorithm>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <utility>

#include "call.h"

namespace {

using gka::internal::fail;
using gka::internal::Pass;
using Pointers = std::initializer_list<std::pair<const void *, const char *>>;

template <class T>
constexpr gka_dtype dtype_of = std::is_same_v<T, gka_bf16> ? GKA_BFLOAT16 : GKA_FLOAT32;

gka_status refuse_empty(const gka_shape &s, Pointers pointers) {
    if (s.batch < 1 || s.seq_len < 1 || s.heads < 1 || s.head_dim < 1) {
        return fail(GKA_ERR_INVALID_ARGUMENT, gka::internal::shape_text(s) + ": every dimension must be >= 1");
    }
    for (const auto &[pointer, name] : pointers) {
        if (pointer == nullptr) return fail(GKA_ERR_INVALID_ARGUMENT, std::string(name) + " is NULL");
    }
    return GKA_OK;
}

// A varlen call takes empty sequences, and a total of 0 tokens, but one sequence at least.
gka_status refuse_empty_varlen(const gka_shape &s, const int64_t *cu_seqlens, Pointers pointers) {
    if (s.batch < 1) {
        return fail(GKA_ERR_INVALID_ARGUMENT, "varlen: " + std::to_string(s.batch) + " sequences: must be >= 1");
    }
    if (cu_seqlens == nullptr) return fail(GKA_ERR_INVALID_ARGUMENT, "cu_seqlens is NULL");
    return refuse_empty({1, std::max<int64_t>(s.seq_len, 1), s.heads, s.head_dim}, pointers);
}

gka_status refuse_empty_chunk(const gka_shape &s, const gka_chunk &chunk, Pointers pointers) {
    if (gka_status status = refuse_empty(s, pointers); status != GKA_OK) return status;
    if (chunk.query_start < 0 || chunk.key_start < 0 || chunk.key_len < 1) {
        return fail(GKA_ERR_INVALID_ARGUMENT,
                    gka::internal::chunk_text(chunk) + ": starts must be >= 0 and key_len >= 1");
    }
    return GKA_OK;
}

// Where an older call runs: the host, or a CUDA stream.
struct Where {
    gka_device device;
    void *stream;
};
constexpr Where host{GKA_CPU, nullptr};
Where on(void *stream) { return {GKA_CUDA, stream}; }

template <class T>
gka_call described(gka_shape shape, gka_window window, Where where) {
    gka_call c = gka_call_init();
    c.shape = shape, c.window = window, c.dtype = dtype_of<T>;
    c.kernel = gka_kernel_function(gka::internal::thread_kernel_function());
    c.scores = gka::internal::process_score_policy();
    c.device = where.device, c.stream = where.stream;
    return c;
}

template <class T>
gka_status forward(const char *name, Where where, gka_shape shape, gka_window window, const T *x,
                   const float *sigma, T *y, float *lse) {
    gka::internal::clear_error();
    if (gka_status s = refuse_empty(shape, {{x, "x"}, {sigma, "sigma"}, {y, "y"}, {lse, "lse"}}); s != GKA_OK) {
        return s;
    }
    gka_call c = described<T>(shape, window, where);
    c.x = x, c.sigma = sigma, c.y = y, c.lse = lse;
    return gka::internal::run_call(c, Pass::forward, name);
}

template <class T>
gka_status backward(const char *name, Where where, gka_shape shape, gka_window window, const T *x,
                    const float *sigma, const T *y, const float *lse, const T *dy, T *dx, float *dsigma) {
    gka::internal::clear_error();
    if (gka_status s = refuse_empty(shape, {{x, "x"}, {sigma, "sigma"}, {y, "y"}, {lse, "lse"}, {dy, "dy"},
                                            {dx, "dx"}, {dsigma, "dsigma"}});
        s != GKA_OK) {
        return s;
    }
    gka_call c = described<T>(shape, window, where);
    c.x = x, c.sigma = sigma, c.y = const_cast<T *>(y), c.lse = const_cast<float *>(lse);
    c.dy = dy, c.dx = dx, c.dsigma = dsigma;
    return gka::internal::run_call(c, Pass::backward, name);
}

template <class T>
gka_status decode(const char *name, Where where, gka_shape shape, int64_t capacity, gka_window window, const T *x,
                  const float *sigma, const int64_t *cache_lens, T *cache, T *y, float *lse) {
    gka::internal::clear_error();
    if (gka_status s = refuse_empty(shape, {{x, "x"}, {sigma, "sigma"}, {cache_lens, "cache_lens"},
                                            {cache, "cache"}, {y, "y"}, {lse, "lse"}});
        s != GKA_OK) {
        return s;
    }
    gka_call c = described<T>(shape, window, where);
    c.cache_capacity = capacity, c.cache_lens = cache_lens, c.cache = cache;
    c.x = x, c.sigma = sigma, c.y = y, c.lse = lse;
    return gka::internal::run_call(c, Pass::decode, name);
}

template <class T>
gka_status forward_varlen(const char *name, Where where, gka_shape shape, const int64_t *cu_seqlens,
                          gka_window window, const T *x, const float *sigma, T *y, float *lse) {
    gka::internal::clear_error();
    if (gka_status s = refuse_empty_varlen(shape, cu_seqlens, {{x, "x"}, {sigma, "sigma"}, {y, "y"}, {lse, "lse"}});
        s != GKA_OK) {
        return s;
    }
    gka_call c = described<T>(shape, window, where);
    c.cu_seqlens = cu_seqlens;
    c.x = x, c.sigma = sigma, c.y = y, c.lse = lse;
    return gka::internal::run_call(c, Pass::forward, name);
}

template <class T>
gka_status backward_varlen(const char *name, Where where, gka_shape shape, const int64_t *cu_seqlens,
                           gka_window window, const T *x, const float *sigma, const T *y, const float *lse,
                           const T *dy, T *dx, float *dsigma) {
    gka::internal::clear_error();
    if (gka_status s = refuse_empty_varlen(shape, cu_seqlens,
                                           {{x, "x"}, {sigma, "sigma"}, {y, "y"}, {lse, "lse"}, {dy, "dy"},
                                            {dx, "dx"}, {dsigma, "dsigma"}});
        s != GKA_OK) {
        return s;
    }
    gka_call c = described<T>(shape, window, where);
    c.cu_seqlens = cu_seqlens;
    c.x = x, c.sigma = sigma, c.y = const_cast<T *>(y), c.lse = const_cast<float *>(lse);
    c.dy = dy, c.dx = dx, c.dsigma = dsigma;
    return gka::internal::run_call(c, Pass::backward, name);
}

gka_status forward_chunk(const char *name, Where where, gka_shape shape, gka_chunk chunk, gka_window window,
                         const float *x, const float *keys, const float *sigma, float *y, float *lse) {
    gka::internal::clear_error();
    if (gka_status s = refuse_empty_chunk(shape, chunk,
                                          {{x, "x"}, {keys, "keys"}, {sigma, "sigma"}, {y, "y"}, {lse, "lse"}});
        s != GKA_OK) {
        return s;
    }
    gka_call c = described<float>(shape, window, where);
    c.chunk = &chunk;
    c.x = x, c.keys = keys, c.sigma = sigma, c.y = y, c.lse = lse;
    return gka::internal::run_call(c, Pass::forward, name);
}

gka_status backward_chunk(const char *name, Where where, gka_shape shape, gka_chunk chunk, gka_window window,
                          const float *x, const float *keys, const float *sigma, const float *y, const float *lse,
                          const float *dy, float *dx, float *dx_keys, float *dsigma) {
    gka::internal::clear_error();
    if (gka_status s = refuse_empty_chunk(shape, chunk,
                                          {{x, "x"}, {keys, "keys"}, {sigma, "sigma"}, {y, "y"}, {lse, "lse"},
                                           {dy, "dy"}, {dx, "dx"}, {dx_keys, "dx_keys"}, {dsigma, "dsigma"}});
        s != GKA_OK) {
        return s;
    }
    gka_call c = described<float>(shape, window, where);
    c.chunk = &chunk;
    c.x = x, c.keys = keys, c.sigma = sigma, c.y = const_cast<float *>(y), c.lse = const_cast<float *>(lse);
    c.dy = dy, c.dx = dx, c.dx_keys = dx_keys, c.dsigma = dsigma;
    return gka::internal::run_call(c, Pass::backward, name);
}

}  // namespace

extern "C" {

gka_status gka_forward(gka_shape shape, gka_window window, const float *x, const float *sigma, float *y,
                       float *lse) {
    return forward("gka_forward", host, shape, window, x, sigma, y, lse);
}

gka_status gka_backward(gka_shape shape, gka_window window, const float *x, const float *sigma, const float *y,
                        const float *lse, const float *dy, float *dx, float *dsigma) {
    return backward("gka_backward", host, shape, window, x, sigma, y, lse, dy, dx, dsigma);
}

gka_status gka_forward_bf16(gka_shape shape, gka_window window, const gka_bf16 *x, const float *sigma, gka_bf16 *y,
                            float *lse) {
    return forward("gka_forward_bf16", host, shape, window, x, sigma, y, lse);
}

gka_status gka_backward_bf16(gka_shape shape, gka_window window, const gka_bf16 *x, const float *sigma,
                             const gka_bf16 *y, const float *lse, const gka_bf16 *dy, gka_bf16 *dx, float *dsigma) {
    return backward("gka_backward_bf16", host, shape, window, x, sigma, y, lse, dy, dx, dsigma);
}

gka_status gka_decode(gka_shape shape, int64_t capacity, gka_window window, const float *x, const float *sigma,
                      const int64_t *cache_lens, float *cache, float *y, float *lse) {
    return decode("gka_decode", host, shape, capacity, window, x, sigma, cache_lens, cache, y, lse);
}

gka_status gka_decode_bf16(gka_shape shape, int64_t capacity, gka_window window, const gka_bf16 *x,
                           const float *sigma, const int64_t *cache_lens, gka_bf16 *cache, gka_bf16 *y, float *lse) {
    return decode("gka_decode_bf16", host, shape, capacity, window, x, sigma, cache_lens, cache, y, lse);
}

gka_status gka_forward_varlen(gka_shape shape, const int64_t *cu_seqlens, gka_window window, const float *x,
                              const float *sigma, float *y, float *lse) {
    return forward_varlen("gka_forward_varlen", host, shape, cu_seqlens, window, x, sigma, y, lse);
}

gka_status gka_backward_varlen(gka_shape shape, const int64_t *cu_seqlens, gka_window window, const float *x,
                               const float *sigma, const float *y, const float *lse, const float *dy, float *dx,
                               float *dsigma) {
    return backward_varlen("gka_backward_varlen", host, shape, cu_seqlens, window, x, sigma, y, lse, dy, dx, dsigma);
}

gka_status gka_forward_varlen_bf16(gka_shape shape, const int64_t *cu_seqlens, gka_window window, const gka_bf16 *x,
                                   const float *sigma, gka_bf16 *y, float *lse) {
    return forward_varlen("gka_forward_varlen_bf16", host, shape, cu_seqlens, window, x, sigma, y, lse);
}

gka_status gka_backward_varlen_bf16(gka_shape shape, const int64_t *cu_seqlens, gka_window window,
                                    const gka_bf16 *x, const float *sigma, const gka_bf16 *y, const float *lse,
                                    const gka_bf16 *dy, gka_bf16 *dx, float *dsigma) {
    return backward_varlen("gka_backward_varlen_bf16", host, shape, cu_seqlens, window, x, sigma, y, lse, dy, dx,
                           dsigma);
}

gka_status gka_forward_chunk(gka_shape shape, gka_chunk chunk, gka_window window, const float *x, const float *keys,
                             const float *sigma, float *y, float *lse) {
    return forward_chunk("gka_forward_chunk", host, shape, chunk, window, x, keys, sigma, y, lse);
}

gka_status gka_backward_chunk(gka_shape shape, gka_chunk chunk, gka_window window, const float *x, const float *keys,
                              const float *sigma, const float *y, const float *lse, const float *dy, float *dx,
                              float *dx_keys, float *dsigma) {
    return backward_chunk("gka_backward_chunk", host, shape, chunk, window, x, keys, sigma, y, lse, dy, dx, dx_keys,
                          dsigma);
}

gka_status gka_forward_cuda(gka_shape shape, gka_window window, const float *x, const float *sigma, float *y,
                            float *lse, void *stream) {
    return forward("gka_forward_cuda", on(stream), shape, window, x, sigma, y, lse);
}

gka_status gka_forward_bf16_cuda(gka_shape shape, gka_window window, const gka_bf16 *x, const float *sigma,
                                 gka_bf16 *y, float *lse, void *stream) {
    return forward("gka_forward_bf16_cuda", on(stream), shape, window, x, sigma, y, lse);
}

gka_status gka_backward_cuda(gka_shape shape, gka_window window, const float *x, const float *sigma,
                             const float *y, const float *lse, const float *dy, float *dx, float *dsigma,
                             void *stream) {
    return backward("gka_backward_cuda", on(stream), shape, window, x, sigma, y, lse, dy, dx, dsigma);
}

gka_status gka_backward_bf16_cuda(gka_shape shape, gka_window window, const gka_bf16 *x, const float *sigma,
                                  const gka_bf16 *y, const float *lse, const gka_bf16 *dy, gka_bf16 *dx,
                                  float *dsigma, void *stream) {
    return backward("gka_backward_bf16_cuda", on(stream), shape, window, x, sigma, y, lse, dy, dx, dsigma);
}

gka_status gka_decode_cuda(gka_shape shape, int64_t capacity, gka_window window, const float *x, const float *sigma,
                           const int64_t *cache_lens, float *cache, float *y, float *lse, void *stream) {
    return decode("gka_decode_cuda", on(stream), shape, capacity, window, x, sigma, cache_lens, cache, y, lse);
}

gka_status gka_decode_bf16_cuda(gka_shape shape, int64_t capacity, gka_window window, const gka_bf16 *x,
                                const float *sigma, const int64_t *cache_lens, gka_bf16 *cache, gka_bf16 *y,
                                float *lse, void *stream) {
    return decode("gka_decode_bf16_cuda", on(stream), shape, capacity, window, x, sigma, cache_lens, cache, y, lse);
}

gka_status gka_forward_varlen_cuda(gka_shape shape, const int64_t *cu_seqlens, gka_window window, const float *x,
                                   const float *sigma, float *y, float *lse, void *stream) {
    return forward_varlen("gka_forward_varlen_cuda", on(stream), shape, cu_seqlens, window, x, sigma, y, lse);
}

gka_status gka_backward_varlen_cuda(gka_shape shape, const int64_t *cu_seqlens, gka_window window, const float *x,
                                    const float *sigma, const float *y, const float *lse, const float *dy, float *dx,
                                    float *dsigma, void *stream) {
    return backward_varlen("gka_backward_varlen_cuda", on(stream), shape, cu_seqlens, window, x, sigma, y, lse, dy,
                           dx, dsigma);
}

gka_status gka_forward_varlen_bf16_cuda(gka_shape shape, const int64_t *cu_seqlens, gka_window window,
                                        const gka_bf16 *x, const float *sigma, gka_bf16 *y, float *lse, void *stream) {
    return forward_varlen("gka_forward_varlen_bf16_cuda", on(stream), shape, cu_seqlens, window, x, sigma, y, lse);
}

gka_status gka_backward_varlen_bf16_cuda(gka_shape shape, const int64_t *cu_seqlens, gka_window window,
                                         const gka_bf16 *x, const float *sigma, const gka_bf16 *y, const float *lse,
                                         const gka_bf16 *dy, gka_bf16 *dx, float *dsigma, void *stream) {
    return backward_varlen("gka_backward_varlen_bf16_cuda", on(stream), shape, cu_seqlens, window, x, sigma, y, lse,
                           dy, dx, dsigma);
}

gka_status gka_forward_chunk_cuda(gka_shape shape, gka_chunk chunk, gka_window window, const float *x,
                                  const float *keys, const float *sigma, float *y, float *lse, void *stream) {
    return forward_chunk("gka_forward_chunk_cuda", on(stream), shape, chunk, window, x, keys, sigma, y, lse);
}

gka_status gka_backward_chunk_cuda(gka_shape shape, gka_chunk chunk, gka_window window, const float *x,
                                   const float *keys, const float *sigma, const float *y, const float *lse,
                                   const float *dy, float *dx, float *dx_keys, float *dsigma, void *stream) {
    return backward_chunk("gka_backward_chunk_cuda", on(stream), shape, chunk, window, x, keys, sigma, y, lse, dy, dx,
                          dx_keys, dsigma);
}

}  // extern "C"
