// Variable-length batches (gka.h, gka_forward_varlen): each packed sequence is
// a batch of one of its own, run by the fixed-length entry points on a view of
// the packed tensors. A sequence's cost is then its own call's (no padding to
// the longest), and it is the kernel tested alone; only lse's layout ([H][total]
// packed, [H][len] per call) and dsigma's sum over the sequences are done here.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "gka/gka.h"
#include "internal.h"

namespace gka::internal {

gka_status check_varlen(const gka_shape &shape, const int64_t *cu_seqlens, const gka_window &window,
                        const float *sigma, std::initializer_list<std::pair<const void *, const char *>> pointers,
                        bool sigma_on_host) {
    if (shape.batch < 1) {
        return fail(GKA_ERR_INVALID_ARGUMENT, "varlen: " + std::to_string(shape.batch) + " sequences: must be >= 1");
    }
    if (cu_seqlens == nullptr) return fail(GKA_ERR_INVALID_ARGUMENT, "cu_seqlens is NULL");
    // Sequences may all be empty (a total of 0): the rest is checked all the same.
    const gka_shape tokens{1, std::max<int64_t>(shape.seq_len, 1), shape.heads, shape.head_dim};
    if (gka_status s = check_arguments(tokens, window, sigma, pointers, sigma_on_host); s != GKA_OK) return s;
    if (cu_seqlens[0] != 0) {
        return fail(GKA_ERR_INVALID_ARGUMENT, "cu_seqlens[0] = " + std::to_string(cu_seqlens[0]) + ": must be 0");
    }
    for (int64_t s = 0; s < shape.batch; s++) {
        if (cu_seqlens[s + 1] < cu_seqlens[s]) {
            return fail(GKA_ERR_INVALID_ARGUMENT, "cu_seqlens[" + std::to_string(s + 1) + "] = " +
                                                      std::to_string(cu_seqlens[s + 1]) + " < cu_seqlens[" +
                                                      std::to_string(s) + "] = " + std::to_string(cu_seqlens[s]) +
                                                      ": must be non-decreasing");
        }
    }
    if (cu_seqlens[shape.batch] != shape.seq_len) {
        return fail(GKA_ERR_INVALID_ARGUMENT, "cu_seqlens[" + std::to_string(shape.batch) + "] = " +
                                                  std::to_string(cu_seqlens[shape.batch]) +
                                                  ": must be the total token count, shape.seq_len = " +
                                                  std::to_string(shape.seq_len));
    }
    return GKA_OK;
}

}  // namespace gka::internal

namespace {

using gka::internal::check_varlen;
using gka::internal::each_sequence;
using gka::internal::fail;

gka_status forward_one(gka_shape s, gka_window w, const float *x, const float *sigma, float *y, float *lse) {
    return gka_forward(s, w, x, sigma, y, lse);
}
gka_status forward_one(gka_shape s, gka_window w, const gka_bf16 *x, const float *sigma, gka_bf16 *y, float *lse) {
    return gka_forward_bf16(s, w, x, sigma, y, lse);
}
gka_status backward_one(gka_shape s, gka_window w, const float *x, const float *sigma, const float *y,
                        const float *lse, const float *dy, float *dx, float *dsigma) {
    return gka_backward(s, w, x, sigma, y, lse, dy, dx, dsigma);
}
gka_status backward_one(gka_shape s, gka_window w, const gka_bf16 *x, const float *sigma, const gka_bf16 *y,
                        const float *lse, const gka_bf16 *dy, gka_bf16 *dx, float *dsigma) {
    return gka_backward_bf16(s, w, x, sigma, y, lse, dy, dx, dsigma);
}

template <class T>
gka_status forward_varlen(gka_shape shape, const int64_t *cu_seqlens, gka_window window, const T *x,
                          const float *sigma, T *y, float *lse) {
    gka::internal::clear_error();
    if (gka_status s = check_varlen(shape, cu_seqlens, window, sigma,
                                    {{x, "x"}, {sigma, "sigma"}, {y, "y"}, {lse, "lse"}});
        s != GKA_OK) {
        return s;
    }
    const int64_t total = shape.seq_len, heads = shape.heads, row = heads * shape.head_dim;
    std::vector<float> rows;  // one sequence's lse, [H][length]
    return each_sequence(shape, cu_seqlens, [&](gka_shape one, int64_t first) {
        rows.resize(heads * one.seq_len);
        const gka_status s = forward_one(one, window, x + first * row, sigma, y + first * row, rows.data());
        for (int64_t h = 0; s == GKA_OK && h < heads; h++) {
            std::copy_n(&rows[h * one.seq_len], one.seq_len, lse + h * total + first);
        }
        return s;
    });
}

template <class T>
gka_status backward_varlen(gka_shape shape, const int64_t *cu_seqlens, gka_window window, const T *x,
                           const float *sigma, const T *y, const float *lse, const T *dy, T *dx, float *dsigma) {
    gka::internal::clear_error();
    if (gka_status s = check_varlen(shape, cu_seqlens, window, sigma,
                                    {{x, "x"}, {sigma, "sigma"}, {y, "y"}, {lse, "lse"}, {dy, "dy"}, {dx, "dx"},
                                     {dsigma, "dsigma"}});
        s != GKA_OK) {
        return s;
    }
    const int64_t total = shape.seq_len, heads = shape.heads, row = heads * shape.head_dim;
    std::vector<float> rows, one_dsigma(heads);
    std::vector<double> sum(heads, 0.0);  // the sequences' dsigma, added in order
    const gka_status status = each_sequence(shape, cu_seqlens, [&](gka_shape one, int64_t first) {
        rows.resize(heads * one.seq_len);
        for (int64_t h = 0; h < heads; h++) std::copy_n(lse + h * total + first, one.seq_len, &rows[h * one.seq_len]);
        const int64_t at = first * row;
        const gka_status s = backward_one(one, window, x + at, sigma, y + at, rows.data(), dy + at, dx + at,
                                          one_dsigma.data());
        for (int64_t h = 0; h < heads; h++) sum[h] += one_dsigma[h];
        return s;
    });
    if (status == GKA_OK) std::copy(sum.begin(), sum.end(), dsigma);
    return status;
}

}  // namespace

extern "C" {

gka_status gka_forward_varlen(gka_shape shape, const int64_t *cu_seqlens, gka_window window, const float *x,
                              const float *sigma, float *y, float *lse) {
    return forward_varlen(shape, cu_seqlens, window, x, sigma, y, lse);
}

gka_status gka_backward_varlen(gka_shape shape, const int64_t *cu_seqlens, gka_window window, const float *x,
                               const float *sigma, const float *y, const float *lse, const float *dy, float *dx,
                               float *dsigma) {
    return backward_varlen(shape, cu_seqlens, window, x, sigma, y, lse, dy, dx, dsigma);
}

gka_status gka_forward_varlen_bf16(gka_shape shape, const int64_t *cu_seqlens, gka_window window, const gka_bf16 *x,
                                   const float *sigma, gka_bf16 *y, float *lse) {
    return forward_varlen(shape, cu_seqlens, window, x, sigma, y, lse);
}

gka_status gka_backward_varlen_bf16(gka_shape shape, const int64_t *cu_seqlens, gka_window window,
                                    const gka_bf16 *x, const float *sigma, const gka_bf16 *y, const float *lse,
                                    const gka_bf16 *dy, gka_bf16 *dx, float *dsigma) {
    return backward_varlen(shape, cu_seqlens, window, x, sigma, y, lse, dy, dx, dsigma);
}

}  // extern "C"
