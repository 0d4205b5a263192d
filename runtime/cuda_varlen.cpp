// Variable-length batches on CUDA (gka.h, gka_forward_varlen): each packed
// sequence run by the forward or backward (cuda_attention.cpp), as varlen.cpp does on the host.
#include <string>
#include <vector>

#include "cuda_internal.h"

namespace gka::internal::cuda {

// Varlen (gka.h, gka_forward_varlen with GKA_CUDA): each sequence a device call
// of its own on views of the packed tensors, as on the host (varlen.cpp). A
// call's lse is [H][length]: each sequence's is written to (or read from)
// scratch and moved from (or to) its columns of the packed [H][total] with one
// 2D copy.
gka_status forward_varlen(const gka_call &c, const char *family, const char *name) {
    BoundContext bound(name);
    if (bound.status != GKA_OK) return bound.status;
    const int64_t total = c.shape.seq_len, heads = c.shape.heads;
    Scratch rows(name, heads * total);
    if (rows.status != GKA_OK) return rows.status;
    return each_sequence(c.shape, c.cu_seqlens, [&](gka_shape one, int64_t first) {
        gka_call sequence = sequence_call(c, one, first);
        sequence.lse = rows.at(heads * first);
        gka_status s = forward(sequence, family, name);
        if (s == GKA_OK) s = copy_rows(name, c.lse + first, total, sequence.lse, one.seq_len, one.seq_len, heads, c.stream);
        return s;
    });
}

// dsigma sums the sequences' in order, in double, as the host's varlen does:
// each sequence's goes to a row of scratch, and the rows are added on the host,
// which waits for the stream once.
gka_status backward_varlen(const gka_call &c, const char *family, const char *name) {
    BoundContext bound(name);
    if (bound.status != GKA_OK) return bound.status;
    const int64_t total = c.shape.seq_len, heads = c.shape.heads;
    Scratch rows(name, heads * total), parts(name, heads * c.shape.batch);
    if (rows.status != GKA_OK) return rows.status;
    if (parts.status != GKA_OK) return parts.status;
    int64_t ran = 0;  // sequences run: parts' rows in use
    gka_status status = each_sequence(c.shape, c.cu_seqlens, [&](gka_shape one, int64_t first) {
        gka_call sequence = sequence_call(c, one, first);
        sequence.lse = rows.at(heads * first), sequence.dsigma = parts.at(heads * ran++);
        gka_status s = copy_rows(name, sequence.lse, one.seq_len, c.lse + first, total, one.seq_len, heads, c.stream);
        if (s == GKA_OK) s = backward(sequence, family, name);
        return s;
    });
    if (status != GKA_OK) return status;
    std::vector<float> each(size_t(heads * ran));
    std::vector<double> sum(size_t(heads), 0.0);
    const size_t bytes = each.size() * sizeof(float);
    CUresult r = each.empty() ? 0 : driver.cuMemcpyDtoHAsync(each.data(), parts.ptr, bytes, c.stream);
    const char *failed = "cuMemcpyDtoHAsync";
    if (r == 0) r = driver.cuStreamSynchronize(c.stream), failed = "cuStreamSynchronize";
    if (r != 0) return fail(GKA_ERR_DEVICE, std::string(name) + ": " + driver_message(failed, r));
    for (int64_t s = 0; s < ran; s++) {
        for (int64_t h = 0; h < heads; h++) sum[h] += each[s * heads + h];
    }
    const std::vector<float> total_dsigma(sum.begin(), sum.end());
    return upload(name, c.dsigma, total_dsigma.data(), heads, c.stream);  // gka_last_kernel(): each_sequence's
}

}  // namespace gka::internal::cuda
