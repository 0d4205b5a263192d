// The byte-level language model: token embedding, N blocks of
// [RMSNorm -> attention (ending in W_O), residual; RMSNorm -> MLP, residual],
// a final RMSNorm and the output head, trained with cross-entropy and AdamW.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "attention.h"
#include "layers.h"

namespace lm {

constexpr int kVocab = 256;  // bytes

struct ModelConfig {
    std::string attention = "gka";  // "gka" or "dot"
    std::string dtype = "f32";      // the attention kernels': "f32", or "bf16" (GKA)
    std::string kernel = "gaussian";  // GKA's kernel function (gka_kernels()' names)
    RandomFeatures features;          // random-feature GKA's, if any
    int layers = 4, heads = 2, head_dim = 64;
    int dim() const { return heads * head_dim; }
};

struct Block {
    RmsNorm attn_norm, mlp_norm;
    std::unique_ptr<Attention> attention;
    Mlp mlp;

    Block(const ModelConfig &config, int index, Rng &rng);
    const float *forward(const float *x, const AttentionShape &shape);
    const float *backward(const float *dout);
    // One token's row x [1][d] at `position` through the attention's decode path.
    const float *decode(const float *x, int64_t position, gka_window window, int64_t capacity);

    std::vector<float> mid, out, dmid, dx;  // mid = x + attention(norm(x)), out = mid + mlp(norm(mid))
};

class Model {
    Rng rng;  // draws every initial weight, members first, then the blocks

public:
    Model(const ModelConfig &config, uint64_t seed);

    // Mean next-byte cross-entropy of targets given inputs, [batch][seq] each.
    double forward(const uint8_t *inputs, const uint8_t *targets, const AttentionShape &shape);
    // Gradients of the last forward's loss, accumulated into every Param::grad.
    void backward();
    void zero_grad();
    // The last forward's logits, [rows][kVocab].
    const float *logits() const { return head.y.data(); }
    // Generation: the next byte's logits [kVocab] after `token` at `position`
    // (0 starts a new text), each block attending to the tokens before it
    // through its decode cache of `capacity` slots. It overwrites what the
    // layers keep for a backward: run it between training steps, never
    // between a forward and its backward.
    const float *decode(uint8_t token, int64_t position, gka_window window, int64_t capacity);

    std::vector<Param *> params();
    size_t parameter_count();
    size_t attention_parameter_count();
    double training_flops_per_token(const AttentionShape &shape);
    double attention_training_flops_per_token(const AttentionShape &shape);

    const ModelConfig config;
    std::vector<Block> blocks;

private:
    Embedding embed;
    RmsNorm final_norm;
    Linear head;
    CrossEntropy loss;
};

// AdamW with decoupled weight decay on the Params marked for it.
struct AdamW {
    float beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, weight_decay = 0.1f;
    void step(const std::vector<Param *> &params, float lr);

    int steps = 0;
    std::vector<std::vector<float>> m, v;
};

// Scales every gradient so that their global L2 norm is at most max_norm;
// returns the norm before clipping.
double clip_grad_norm(const std::vector<Param *> &params, double max_norm);

}  // namespace lm
