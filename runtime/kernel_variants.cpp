#include "kernel_variants.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "arch.h"
#include "internal.h"
#include "gka_kernel_variants.h"  // generated: the families, the kernels' headers and the variant lists

namespace gka {
namespace {

#define GKA_CPU_FAMILY(family, host_features) {#family, host_features},
const CpuFamily families[] = {GKA_CPU_FAMILIES};
#undef GKA_CPU_FAMILY
#define GKA_CUDA_FAMILY(family, capability) {#family, capability},
const std::vector<CudaFamily> cuda_family_list = {GKA_CUDA_FAMILIES};
#undef GKA_CUDA_FAMILY

#define GKA_VARIANT(family, head_dim, window, min_seq_len, max_seq_len, name, knobs, form, element, function) \
    {#family, {head_dim, WindowKind::window, min_seq_len, max_seq_len}, name, #name, knobs, ScoreForm::form, \
     Element::element, KernelFunction::function},
const std::vector<Variant<ForwardKernel>> forward_variants = {GKA_FORWARD_CPU_VARIANTS};
const std::vector<Variant<BackwardKernel>> backward_variants = {GKA_BACKWARD_CPU_VARIANTS};
const std::vector<Variant<ForwardChunkKernel>> forward_chunk_variants = {GKA_FORWARD_CHUNK_CPU_VARIANTS};
const std::vector<Variant<BackwardChunkKernel>> backward_chunk_variants = {GKA_BACKWARD_CHUNK_CPU_VARIANTS};
const std::vector<Variant<DecodeKernel>> decode_variants = {GKA_DECODE_CPU_VARIANTS};
const std::vector<Variant<FeatureStatesKernel>> feature_states_variants = {GKA_RF_STATES_CPU_VARIANTS};
const std::vector<Variant<FeatureForwardKernel>> feature_forward_variants = {GKA_RF_FORWARD_CPU_VARIANTS};
const std::vector<Variant<FeatureBackwardKernel>> feature_backward_variants = {GKA_RF_BACKWARD_CPU_VARIANTS};
// Empty where the table has no CUDA family for this architecture.
const std::vector<Variant<CudaForwardKernel>> cuda_forward_variants = {GKA_FORWARD_CUDA_VARIANTS};
const std::vector<Variant<CudaBackwardKernel>> cuda_backward_variants = {GKA_BACKWARD_CUDA_VARIANTS};
const std::vector<Variant<CudaDecodeKernel>> cuda_decode_variants = {GKA_DECODE_CUDA_VARIANTS};
const std::vector<Variant<CudaForwardChunkKernel>> cuda_forward_chunk_variants = {GKA_FORWARD_CHUNK_CUDA_VARIANTS};
const std::vector<Variant<CudaBackwardChunkKernel>> cuda_backward_chunk_variants = {GKA_BACKWARD_CHUNK_CUDA_VARIANTS};
#undef GKA_VARIANT

template <class Kernel>
const Variant<Kernel> *narrowest(const std::vector<Variant<Kernel>> &variants, const char *family,
                                 KernelFunction function, int64_t head_dim, WindowKind kind, int64_t seq_len,
                                 ScoreForm form, Element element) {
    const Variant<Kernel> *best = nullptr;
    for (const Variant<Kernel> &v : variants) {
        if (std::strcmp(v.family, family) != 0 || v.function != function || v.form != form || v.element != element ||
            !v.shape.contains(head_dim, kind, seq_len)) {
            continue;
        }
        if (best == nullptr || v.shape.narrowness() > best->shape.narrowness()) best = &v;
    }
    return best;
}

}  // namespace

const Variant<ForwardKernel> *forward_variant(const char *family, KernelFunction function, int64_t head_dim,
                                              WindowKind kind, int64_t seq_len, ScoreForm form, Element element) {
    return narrowest(forward_variants, family, function, head_dim, kind, seq_len, form, element);
}
const Variant<BackwardKernel> *backward_variant(const char *family, KernelFunction function, int64_t head_dim,
                                                WindowKind kind, int64_t seq_len, ScoreForm form, Element element) {
    return narrowest(backward_variants, family, function, head_dim, kind, seq_len, form, element);
}
const Variant<ForwardChunkKernel> *forward_chunk_variant(const char *family, KernelFunction function,
                                                         int64_t head_dim) {
    return narrowest(forward_chunk_variants, family, function, head_dim, WindowKind::ANY, 1, ScoreForm::direct,
                     Element::f32);
}
const Variant<BackwardChunkKernel> *backward_chunk_variant(const char *family, KernelFunction function,
                                                           int64_t head_dim) {
    return narrowest(backward_chunk_variants, family, function, head_dim, WindowKind::ANY, 1, ScoreForm::direct,
                     Element::f32);
}
const Variant<FeatureStatesKernel> *feature_states_variant(const char *family) {
    return narrowest(feature_states_variants, family, KernelFunction::gaussian, 0, WindowKind::ANY, 1,
                     ScoreForm::direct, Element::f32);
}
const Variant<FeatureForwardKernel> *feature_forward_variant(const char *family) {
    return narrowest(feature_forward_variants, family, KernelFunction::gaussian, 0, WindowKind::ANY, 1,
                     ScoreForm::direct, Element::f32);
}
const Variant<FeatureBackwardKernel> *feature_backward_variant(const char *family) {
    return narrowest(feature_backward_variants, family, KernelFunction::gaussian, 0, WindowKind::ANY, 1,
                     ScoreForm::direct, Element::f32);
}
const Variant<DecodeKernel> *decode_variant(const char *family, KernelFunction function, int64_t head_dim,
                                            Element element) {
    return narrowest(decode_variants, family, function, head_dim, WindowKind::ANY, 1, ScoreForm::direct, element);
}
const Variant<CudaForwardKernel> *cuda_forward_variant(const char *family, KernelFunction function, int64_t head_dim,
                                                      WindowKind kind, int64_t seq_len, Element element) {
    return narrowest(cuda_forward_variants, family, function, head_dim, kind, seq_len, ScoreForm::direct, element);
}
const Variant<CudaBackwardKernel> *cuda_backward_variant(const char *family, KernelFunction function,
                                                        int64_t head_dim, WindowKind kind, int64_t seq_len,
                                                        Element element) {
    return narrowest(cuda_backward_variants, family, function, head_dim, kind, seq_len, ScoreForm::direct, element);
}
const Variant<CudaDecodeKernel> *cuda_decode_variant(const char *family, KernelFunction function, int64_t head_dim,
                                                    Element element) {
    return narrowest(cuda_decode_variants, family, function, head_dim, WindowKind::ANY, 1, ScoreForm::direct,
                     element);
}
const Variant<CudaForwardChunkKernel> *cuda_forward_chunk_variant(const char *family, KernelFunction function,
                                                                  int64_t head_dim) {
    return narrowest(cuda_forward_chunk_variants, family, function, head_dim, WindowKind::ANY, 1, ScoreForm::direct,
                     Element::f32);
}
const Variant<CudaBackwardChunkKernel> *cuda_backward_chunk_variant(const char *family, KernelFunction function,
                                                                    int64_t head_dim) {
    return narrowest(cuda_backward_chunk_variants, family, function, head_dim, WindowKind::ANY, 1,
                     ScoreForm::direct, Element::f32);
}

const std::vector<CudaFamily> &cuda_families() { return cuda_family_list; }

gka_status not_built(const char *pass, const char *family, KernelFunction function, int64_t head_dim,
                     Element element) {
    return internal::fail(GKA_ERR_UNSUPPORTED,
                          std::string("this libgka has no ") + pass + " kernel for family " + family + ", head dim " +
                              std::to_string(head_dim) + ", " + (element == Element::bf16 ? "bfloat16" : "float32") +
                              " features and the kernel function " + kernel_function_names[int(function)] +
                              ": its build compiled the variants that " GKA_SELECTION
                              " selects (kernels/variants.py); build with GKA_SELECT empty for every variant "
                              "(make build, make install and the wheel do)");
}

bool CpuFamily::host_supports() const {
    // Asked on every call (dispatch); the host does not change, so each
    // family's features are looked up once.
    static const std::vector<bool> supported = [] {
        std::vector<bool> has;
        for (const CpuFamily &f : families) {
            const std::string list = f.host_features;
            bool all = true;
            for (size_t start = 0; all && start <= list.size();) {
                const size_t end = std::min(list.find(',', start), list.size());
                all = arch::host_has(list.substr(start, end - start));
                start = end + 1;
            }
            has.push_back(all);
        }
        return has;
    }();
    return supported[this - families];
}

const CpuFamily *cpu_families(int *count) {
    *count = sizeof(families) / sizeof(families[0]);
    return families;
}

const CpuFamily *find_cpu_family(const char *name) {
    for (const CpuFamily &f : families) {
        if (std::strcmp(f.name, name) == 0) return &f;
    }
    return nullptr;
}

}  // namespace gka
