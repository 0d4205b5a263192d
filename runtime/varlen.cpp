// Variable-length batches (gka.h, gka_forward_varlen): each packed sequence is
// a batch of one of its own, run by the fixed-length operations on a view of
// the packed tensors (sequence_call), checked once for all of them. A
// sequence's cost is then its own call's (no padding to the longest), and it
// is the kernel tested alone; only lse's layout ([H][total] packed, [H][len]
// per call) and dsigma's sum over the sequences are done here.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "gka/gka.h"
#include "call.h"

namespace gka::internal {

gka_status check_cu_seqlens(const gka_shape &shape, const int64_t *cu_seqlens) {
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

gka_status cpu_forward_varlen(const gka_call &c, const CpuFamily &f) {
    const int64_t total = c.shape.seq_len, heads = c.shape.heads;
    std::vector<float> rows;  // one sequence's lse, [H][length]
    return each_sequence(c.shape, c.cu_seqlens, [&](gka_shape one, int64_t first) {
        rows.resize(heads * one.seq_len);
        gka_call sequence = sequence_call(c, one, first);
        sequence.lse = rows.data();
        const gka_status s = cpu_forward(sequence, f);
        for (int64_t h = 0; s == GKA_OK && h < heads; h++) {
            std::copy_n(&rows[h * one.seq_len], one.seq_len, c.lse + h * total + first);
        }
        return s;
    });
}

gka_status cpu_backward_varlen(const gka_call &c, const CpuFamily &f) {
    const int64_t total = c.shape.seq_len, heads = c.shape.heads;
    std::vector<float> rows, one_dsigma(heads);
    std::vector<double> sum(heads, 0.0);  // the sequences' dsigma, added in order
    const gka_status status = each_sequence(c.shape, c.cu_seqlens, [&](gka_shape one, int64_t first) {
        rows.resize(heads * one.seq_len);
        for (int64_t h = 0; h < heads; h++) std::copy_n(c.lse + h * total + first, one.seq_len, &rows[h * one.seq_len]);
        gka_call sequence = sequence_call(c, one, first);
        sequence.lse = rows.data(), sequence.dsigma = one_dsigma.data();
        const gka_status s = cpu_backward(sequence, f);
        for (int64_t h = 0; h < heads; h++) sum[h] += one_dsigma[h];
        return s;
    });
    if (status == GKA_OK) std::copy(sum.begin(), sum.end(), c.dsigma);
    return status;
}

}  // namespace gka::internal
