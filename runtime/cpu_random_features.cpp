// Random-feature GKA on the CPU (gka.h, gka_call.features) on a checked
// description (call.h): one kernel a pass, any head dim and feature count.
#include "buffers.h"
#include "call.h"
#include "denormals.h"
#include "kernel_variants.h"

namespace gka::internal {

namespace {

Halide::Runtime::Buffer<float, 3> frequencies(const float *w, const gka_call &c) {
    return Halide::Runtime::Buffer<float, 3>(const_cast<float *>(w), int(c.shape.head_dim), int(c.features),
                                             int(c.shape.heads));
}

int32_t causal(const gka_call &c) { return c.window.right == 0 ? 1 : 0; }

gka_status not_built(const char *pass, const CpuFamily &f, const gka_call &c) {
    return gka::not_built(pass, f.name, KernelFunction::gaussian, c.shape.head_dim, Element::f32);
}

}  // namespace

gka_status cpu_feature_forward(const gka_call &c, const CpuFamily &f) {
    const auto *k = feature_forward_variant(f.name);
    if (k == nullptr) return not_built("random-feature forward", f, c);
    auto xb = features(static_cast<const float *>(c.x), c.shape), yb = features(static_cast<float *>(c.y), c.shape);
    DenormalsFlushed flushed;
    return ran(k, k->run(xb, per_head(c.sigma, c.shape), frequencies(c.frequencies, c), causal(c), yb,
                         rows(c.lse, c.shape)),
               GKA_ERR_INTERNAL);
}

gka_status cpu_feature_backward(const gka_call &c, const CpuFamily &f) {
    const auto *k = feature_backward_variant(f.name);
    if (k == nullptr) return not_built("random-feature backward", f, c);
    auto feature = [&](const void *p) { return features(static_cast<const float *>(p), c.shape); };
    DenormalsFlushed flushed;
    return ran(k, k->run(feature(c.x), per_head(c.sigma, c.shape), frequencies(c.frequencies, c), feature(c.y),
                         rows(c.lse, c.shape), feature(c.dy), causal(c), feature(c.dx),
                         frequencies(c.dfrequencies, c), per_head(c.dsigma, c.shape)),
               GKA_ERR_INTERNAL);
}

}  // namespace gka::internal
