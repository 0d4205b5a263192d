// The trainer's layers, llm.c style: each owns its parameters and its output
// and gradient buffers, keeps what its backward needs, and has its forward and
// backward next to each other. Activations are row-major [rows][features];
// a batch of B sequences of T tokens is B*T rows.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace lm {

using Rng = std::mt19937_64;

struct Param {
    std::string name;
    std::vector<float> value, grad;
    bool decay;  // AdamW's weight decay: matrices only

    Param(std::string name, size_t size, bool decay) : name(std::move(name)), value(size), grad(size), decay(decay) {}
    void init_normal(Rng &rng, float stddev);
};

// y = x W^T, W [out][in]. Backward accumulates dW and returns dx.
struct Linear {
    Param w;
    int in, out;

    Linear(const std::string &name, int in, int out, Rng &rng, float init_scale = 1.0f);
    const float *forward(const float *x, int rows);
    const float *backward(const float *dy);

    std::vector<float> y, dx;
    const float *x = nullptr;
    int rows = 0;
};

// Parameter-free RMSNorm, as in nanochat: y = x / sqrt(mean(x^2) + eps).
struct RmsNorm {
    int dim;

    explicit RmsNorm(int dim) : dim(dim) {}
    const float *forward(const float *x, int rows);
    const float *backward(const float *dy);

    std::vector<float> y, inv_rms, dx;
    int rows = 0;
};

// Linear(d, 4d) -> relu^2 -> Linear(4d, d).
struct Mlp {
    Linear fc, proj;

    Mlp(const std::string &name, int dim, int layers, Rng &rng);
    const float *forward(const float *x, int rows);
    const float *backward(const float *dy);

    std::vector<float> act, dpre;  // relu(fc)^2 and its gradient; fc.y keeps the pre-activation
};

struct Embedding {
    Param table;  // [vocab][dim]
    int dim;

    Embedding(int vocab, int dim, Rng &rng);
    const float *forward(const uint8_t *tokens, int rows);
    void backward(const float *dy);

    std::vector<float> y;
    const uint8_t *tokens = nullptr;
    int rows = 0;
};

// Mean cross-entropy of logits [rows][vocab] against targets; backward gives
// dlogits of that mean.
struct CrossEntropy {
    int vocab;

    explicit CrossEntropy(int vocab) : vocab(vocab) {}
    double forward(const float *logits, const uint8_t *targets, int rows);
    const float *backward();

    std::vector<float> probs, dlogits;
    const uint8_t *targets = nullptr;
    int rows = 0;
};

}  // namespace lm
