// The two attention layers the trainer compares. Both map the normalized
// residual stream h [B][T][d] to [B][T][d] under the same causal window and
// end in the output projection W_O.
//   GkaAttention: libgka's Gaussian Kernel Attention on h itself, seen as
//     [B][T][H][D] per-head features, with one learned bandwidth per head.
//   DotProductAttention: softmax(Q K^T / sqrt(D)) V with Q, K, V = h W_Q^T,
//     h W_K^T, h W_V^T (plain BLAS, the whole T x T block then the mask).
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "gka/gka.h"
#include "layers.h"

namespace lm {

struct AttentionShape {
    int batch, seq, heads, head_dim;
    gka_window window;  // FlashAttention's (left, right); the trainer uses right = 0
    // Packed documents (batch 1, seq tokens in all): each attends within itself
    // (gka_forward_varlen); empty: batch sequences of seq tokens.
    std::vector<int64_t> cu_seqlens = {};
    int dim() const { return heads * head_dim; }
    int rows() const { return batch * seq; }
    bool allowed(int query, int key) const {
        return (window.left < 0 || key >= query - window.left) && (window.right < 0 || key <= query + window.right);
    }
    double pairs_per_token() const;  // allowed (query, key) pairs per head, per token
};

// Random-feature GKA (docs/random-features.md): M features a head in place of
// the Gaussian's exact weights; 0: exact GKA. learned: the frequencies train.
struct RandomFeatures {
    int count = 0;
    bool learned = false;
};

struct Attention {
    virtual ~Attention() = default;
    virtual const float *forward(const float *h, const AttentionShape &shape) = 0;
    virtual const float *backward(const float *dout) = 0;
    virtual std::vector<Param *> params() = 0;
    // Training (forward + backward) FLOPs per token: 6 per weight of a linear
    // layer, and docs/spec.md's 4 + 10 FLOPs per head dim per allowed pair for the
    // pairwise part, the same convention (FlashAttention's) for both layers.
    virtual double training_flops_per_token(const AttentionShape &shape) const = 0;
    // Generation, one token of one sequence: h [1][d] at `position` (0 starts a
    // new text), attending to the tokens before it through a cache of `capacity`
    // slots (a ring under a sliding window), which it extends.
    virtual const float *decode(const float *h, int64_t position, gka_window window, int64_t capacity) {
        throw std::invalid_argument("generation runs GKA's decode path (gka_decode); this attention has no cache");
    }
};

class GkaAttention : public Attention {
public:
    // bf16: the kernels take h, y, dy and dh in bfloat16 (gka_call's dtype);
    // the rest of the model stays float32.
    GkaAttention(const std::string &name, int heads, int head_dim, int layers, Rng &rng, bool bf16 = false,
                 gka_kernel_function kernel = GKA_GAUSSIAN, RandomFeatures features = {});
    const float *forward(const float *h, const AttentionShape &shape) override;
    const float *backward(const float *dout) override;
    std::vector<Param *> params() override;
    double training_flops_per_token(const AttentionShape &shape) const override;
    // gka_decode against a cache of this layer's features: GKA's keys and values
    // are h itself, so the cache holds h alone; random features' holds the keys'
    // state instead (capacity unused).
    const float *decode(const float *h, int64_t position, gka_window window, int64_t capacity) override;

    // sigma = exp(log_sigma): positive by construction and scale-free to
    // update, so Adam's steps are relative changes of the bandwidth.
    Param log_sigma;
    Linear out;
    // Random features' W [H][M][D], orthogonal blocks drawn from the model's
    // generator (gka_draw_frequencies); a parameter where they train.
    Param frequencies;

private:
    bool bf16;
    gka_kernel_function kernel;
    RandomFeatures features;
    std::vector<float> dfrequencies;
    AttentionShape shape{};
    const float *h = nullptr;
    std::vector<float> sigma, y, lse, dh, dsigma;
    std::vector<gka_bf16> h16, y16, dy16, dh16;  // the bf16 kernels' tensors
    std::vector<float> cache;                     // decode's, [capacity][d] (random features: [H][M][D + 1])
    std::vector<gka_bf16> cache16;
};

class DotProductAttention : public Attention {
public:
    DotProductAttention(const std::string &name, int heads, int head_dim, int layers, Rng &rng);
    const float *forward(const float *h, const AttentionShape &shape) override;
    const float *backward(const float *dout) override;
    std::vector<Param *> params() override { return {&query.w, &key.w, &value.w, &out.w}; }
    double training_flops_per_token(const AttentionShape &shape) const override;

    Linear query, key, value, out;

private:
    AttentionShape shape{};
    std::vector<float> probs;  // [B][H][T][T], zero where masked
    std::vector<float> mixed, dq, dk, dv, dh, dprobs;
};

// kind: "gka" or "dot"; dtype: "f32", or "bf16" (GKA's kernels in bfloat16);
// kernel: GKA's kernel function, "gaussian", "laplace" or "cauchy"; features:
// random-feature GKA's (float32, the Gaussian).
std::unique_ptr<Attention> make_attention(const std::string &kind, const std::string &name, int heads, int head_dim,
                                          int layers, Rng &rng, const std::string &dtype = "f32",
                                          const std::string &kernel = "gaussian", RandomFeatures features = {});

}  // namespace lm
