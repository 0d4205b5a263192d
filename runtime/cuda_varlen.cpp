// Variable-length batches on CUDA (gka.h, gka_forward_varlen_cuda): each packed
// sequence run by the forward or backward (cuda_attention.cpp), as varlen.cpp does on the host.
#include <string>
#include <vector>

#include "cuda_internal.h"
#include "gka/gka.h"
#include "internal.h"

namespace {

using gka::internal::fail;
using gka::internal::cuda::BoundContext;
using gka::internal::cuda::copy_rows;
using gka::internal::cuda::CUdeviceptr;
using gka::internal::cuda::CUresult;
using gka::internal::cuda::device_in_use;
using gka::internal::cuda::driver;
using gka::internal::cuda::driver_message;
using gka::internal::cuda::run_backward;
using gka::internal::cuda::run_forward;
using gka::internal::cuda::Scratch;

// A varlen call's host checks (varlen.cpp's, cu_seqlens included: they cover
// every sequence's), then the driver and the family.
gka_status prepare_varlen(const gka_shape &shape, const int64_t *cu_seqlens, const gka_window &window,
                          const float *sigma, std::initializer_list<std::pair<const void *, const char *>> pointers,
                          const char **family) {
    gka::internal::clear_error();
    if (gka_status s = gka::internal::check_varlen(shape, cu_seqlens, window, sigma, pointers, false); s != GKA_OK) {
        return s;
    }
    return device_in_use(family);
}

// Varlen (gka.h, gka_forward_varlen_cuda): each sequence a device call of its
// own on views of the packed tensors, as on the host (varlen.cpp). A call's lse
// is [H][length]: each sequence's is written to (or read from) scratch and
// moved from (or to) its columns of the packed [H][total] with one 2D copy.
template <class T>
gka_status forward_varlen(const char *call, gka_shape shape, const int64_t *cu_seqlens, gka_window window,
                          const T *x, const float *sigma, T *y, float *lse, void *stream) {
    const char *family = nullptr;
    if (gka_status s = prepare_varlen(shape, cu_seqlens, window, sigma,
                                      {{x, "x"}, {sigma, "sigma"}, {y, "y"}, {lse, "lse"}}, &family);
        s != GKA_OK) {
        return s;
    }
    BoundContext bound(call);
    if (bound.status != GKA_OK) return bound.status;
    const int64_t total = shape.seq_len, heads = shape.heads, row = heads * shape.head_dim;
    Scratch rows(call, heads * total);
    if (rows.status != GKA_OK) return rows.status;
    return gka::internal::each_sequence(shape, cu_seqlens, [&](gka_shape one, int64_t first) {
        float *own = rows.at(heads * first);
        gka_status s = run_forward(call, family, one, window, x + first * row, sigma, y + first * row, own, stream);
        if (s == GKA_OK) s = copy_rows(call, lse + first, total, own, one.seq_len, one.seq_len, heads, stream);
        return s;
    });
}

// dsigma sums the sequences' in order, in double, as the host's varlen does:
// each sequence's goes to a row of scratch, and the rows are added on the host,
// which waits for `stream` once.
template <class T>
gka_status backward_varlen(const char *call, gka_shape shape, const int64_t *cu_seqlens, gka_window window,
                           const T *x, const float *sigma, const T *y, const float *lse, const T *dy, T *dx,
                           float *dsigma, void *stream) {
    const char *family = nullptr;
    if (gka_status s = prepare_varlen(shape, cu_seqlens, window, sigma,
                                      {{x, "x"}, {sigma, "sigma"}, {y, "y"}, {lse, "lse"}, {dy, "dy"}, {dx, "dx"},
                                       {dsigma, "dsigma"}},
                                      &family);
        s != GKA_OK) {
        return s;
    }
    BoundContext bound(call);
    if (bound.status != GKA_OK) return bound.status;
    const int64_t total = shape.seq_len, heads = shape.heads, row = heads * shape.head_dim;
    Scratch rows(call, heads * total), parts(call, heads * shape.batch);
    if (rows.status != GKA_OK) return rows.status;
    if (parts.status != GKA_OK) return parts.status;
    int64_t ran = 0;  // sequences run: parts' rows in use
    gka_status status = gka::internal::each_sequence(shape, cu_seqlens, [&](gka_shape one, int64_t first) {
        float *own = rows.at(heads * first);
        const int64_t at = first * row;
        gka_status s = copy_rows(call, own, one.seq_len, lse + first, total, one.seq_len, heads, stream);
        if (s == GKA_OK) {
            s = run_backward(call, family, one, window, x + at, sigma, y + at, own, dy + at, dx + at,
                             parts.at(heads * ran++), stream);
        }
        return s;
    });
    if (status != GKA_OK) return status;
    std::vector<float> each(size_t(heads * ran));
    std::vector<double> sum(size_t(heads), 0.0);
    const size_t bytes = each.size() * sizeof(float);
    CUresult r = each.empty() ? 0 : driver.cuMemcpyDtoHAsync(each.data(), parts.ptr, bytes, stream);
    const char *failed = "cuMemcpyDtoHAsync";
    if (r == 0) r = driver.cuStreamSynchronize(stream), failed = "cuStreamSynchronize";
    if (r != 0) return fail(GKA_ERR_DEVICE, std::string(call) + ": " + driver_message(failed, r));
    for (int64_t s = 0; s < ran; s++) {
        for (int64_t h = 0; h < heads; h++) sum[h] += each[s * heads + h];
    }
    const std::vector<float> total_dsigma(sum.begin(), sum.end());
    // From pageable memory: the driver has staged it when the call returns.
    r = driver.cuMemcpyHtoDAsync(CUdeviceptr(uintptr_t(dsigma)), total_dsigma.data(), size_t(heads) * sizeof(float),
                                 stream);
    if (r != 0) return fail(GKA_ERR_DEVICE, std::string(call) + ": " + driver_message("cuMemcpyHtoDAsync", r));
    return GKA_OK;  // gka_last_kernel(): each_sequence's
}

}  // namespace

extern "C" {

gka_status gka_forward_varlen_cuda(gka_shape shape, const int64_t *cu_seqlens, gka_window window, const float *x,
                                   const float *sigma, float *y, float *lse, void *stream) {
    return forward_varlen("gka_forward_varlen_cuda", shape, cu_seqlens, window, x, sigma, y, lse, stream);
}

gka_status gka_backward_varlen_cuda(gka_shape shape, const int64_t *cu_seqlens, gka_window window, const float *x,
                                    const float *sigma, const float *y, const float *lse, const float *dy, float *dx,
                                    float *dsigma, void *stream) {
    return backward_varlen("gka_backward_varlen_cuda", shape, cu_seqlens, window, x, sigma, y, lse, dy, dx, dsigma,
                           stream);
}

gka_status gka_forward_varlen_bf16_cuda(gka_shape shape, const int64_t *cu_seqlens, gka_window window,
                                        const gka_bf16 *x, const float *sigma, gka_bf16 *y, float *lse, void *stream) {
    return forward_varlen("gka_forward_varlen_bf16_cuda", shape, cu_seqlens, window, x, sigma, y, lse, stream);
}

gka_status gka_backward_varlen_bf16_cuda(gka_shape shape, const int64_t *cu_seqlens, gka_window window,
                                         const gka_bf16 *x, const float *sigma, const gka_bf16 *y, const float *lse,
                                         const gka_bf16 *dy, gka_bf16 *dx, float *dsigma, void *stream) {
    return backward_varlen("gka_backward_varlen_bf16_cuda", shape, cu_seqlens, window, x, sigma, y, lse, dy, dx,
                           dsigma, stream);
}

}  // extern "C"
