// The CUDA side of the compute calls (call.h, run_call): after the host's
// checks, the driver and the device's family; then the exact results where no
// kernel is needed, written on the stream, or the pass.
#include <vector>

#include "cuda_internal.h"

namespace gka::internal::cuda {

namespace {

// run_call's exact results on the device. Only a chunk without pairs has zeros
// to write beside dsigma's, and chunks are float32.
gka_status write_results(const gka_call &c, Pass pass, const char *name) {
    const int64_t B = c.shape.batch, H = c.shape.heads, D = c.shape.head_dim;
    const int64_t queries = c.chunk ? B * c.shape.seq_len * H * D : 0, keys = c.chunk ? B * c.chunk->key_len * H * D : 0;
    gka_status s = GKA_OK;
    if (pass == Pass::backward) {
        if (queries > 0) s = fill(name, static_cast<float *>(c.dx), queries, 0.0f, c.stream);
        if (s == GKA_OK && keys > 0) s = fill(name, static_cast<float *>(c.dx_keys), keys, 0.0f, c.stream);
        if (s == GKA_OK && H > 0) s = fill(name, c.dsigma, H, 0.0f, c.stream);
    } else {
        if (queries > 0) s = fill(name, static_cast<float *>(c.y), queries, 0.0f, c.stream);
        const std::vector<float> lse = lse_without_kernel(c);
        if (s == GKA_OK && !lse.empty()) s = upload(name, c.lse, lse.data(), int64_t(lse.size()), c.stream);
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
