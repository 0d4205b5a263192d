// The CUDA side of the compute calls (call.h, run_call): after the host's
// checks, the driver and the device's family; then the exact results where no
// kernel is needed, written on the stream, or the pass.
#include <limits>
#include <new>
#include <vector>

#include "cuda_internal.h"

namespace gka::internal::cuda {

namespace {

// run_call's exact results on the device. Only a chunk without pairs has zeros
// to write beside dsigma's (chunks are float32), and its lse is -inf, filled
// on the device; where D is 0 the rows' key counts are computed here.
gka_status write_results(const gka_call &c, Pass pass, const char *name) {
    const gka_shape t = tensor_shape(c);
    const int64_t H = t.heads, rows = t.batch * t.heads * t.seq_len;
    const int64_t queries = c.chunk ? t.batch * t.seq_len * H * t.head_dim : 0;
    const int64_t keys = c.chunk ? t.batch * c.chunk->key_len * H * t.head_dim : 0;
    gka_status s = GKA_OK;
    if (pass == Pass::backward) {
        if (queries > 0) s = fill(name, static_cast<float *>(c.dx), queries, 0.0f, c.stream);
        if (s == GKA_OK && keys > 0) s = fill(name, static_cast<float *>(c.dx_keys), keys, 0.0f, c.stream);
        if (s == GKA_OK && H > 0) s = fill(name, c.dsigma, H, 0.0f, c.stream);
    } else if (queries > 0) {  // features, and so no pair
        s = fill(name, static_cast<float *>(c.y), queries, 0.0f, c.stream);
        if (s == GKA_OK) s = fill(name, c.lse, rows, -std::numeric_limits<float>::infinity(), c.stream);
    } else if (rows > 0) {
        std::vector<float> lse;
        try {
            lse.resize(size_t(rows));
        } catch (const std::bad_alloc &) {
            return fail(GKA_ERR_OUT_OF_MEMORY, std::string(name) + ": no host memory for lse's " +
                                                   std::to_string(rows) + " rows");
        }
        lse_without_kernel(c, lse.data());
        s = upload(name, c.lse, lse.data(), rows, c.stream);
    }
    return s == GKA_OK ? ran("", 0, GKA_ERR_DEVICE) : s;
}

}  // namespace

gka_status run(const gka_call &c, Pass pass, const char *name) {
    const char *family = nullptr;
    if (gka_status s = device_in_use(&family); s != GKA_OK) return s;
    if (!needs_kernel(c)) return write_results(c, pass, name);
    switch (pass) {
    case Pass::forward:
        return c.cu_seqlens ? forward_varlen(c, family, name)
               : c.chunk    ? forward_chunk(c, family, name)
                            : forward(c, family, name);
    case Pass::backward:
        return c.cu_seqlens ? backward_varlen(c, family, name)
               : c.chunk    ? backward_chunk(c, family, name)
                            : backward(c, family, name);
    case Pass::decode:
        return decode(c, family, name);
    }
    return fail(GKA_ERR_INTERNAL, std::string(name) + ": unknown pass");
}

}  // namespace gka::internal::cuda
