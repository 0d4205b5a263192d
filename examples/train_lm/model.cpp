#include "model.h"

#include <cmath>

namespace lm {

Block::Block(const ModelConfig &c, int index, Rng &rng)
    : attn_norm(c.dim()),
      mlp_norm(c.dim()),
      attention(make_attention(c.attention, "block" + std::to_string(index) + ".attn", c.heads, c.head_dim, c.layers,
                               rng, c.dtype, c.kernel, c.features)),
      mlp("block" + std::to_string(index) + ".mlp", c.dim(), c.layers, rng) {}

const float *Block::forward(const float *x, const AttentionShape &shape) {
    const int rows = shape.rows();
    const float *a = attention->forward(attn_norm.forward(x, rows), shape);
    mid.resize(size_t(rows) * shape.dim());
    for (size_t n = 0; n < mid.size(); n++) mid[n] = x[n] + a[n];
    const float *m = mlp.forward(mlp_norm.forward(mid.data(), rows), rows);
    out.resize(mid.size());
    for (size_t n = 0; n < out.size(); n++) out[n] = mid[n] + m[n];
    return out.data();
}

const float *Block::backward(const float *dout) {
    const float *from_mlp = mlp_norm.backward(mlp.backward(dout));
    dmid.resize(out.size());
    for (size_t n = 0; n < dmid.size(); n++) dmid[n] = dout[n] + from_mlp[n];
    const float *from_attention = attn_norm.backward(attention->backward(dmid.data()));
    dx.resize(out.size());
    for (size_t n = 0; n < dx.size(); n++) dx[n] = dmid[n] + from_attention[n];
    return dx.data();
}

const float *Block::decode(const float *x, int64_t position, gka_window window, int64_t capacity) {
    const int d = attn_norm.dim;
    const float *a = attention->decode(attn_norm.forward(x, 1), position, window, capacity);
    mid.resize(d), out.resize(d);
    for (int n = 0; n < d; n++) mid[n] = x[n] + a[n];
    const float *m = mlp.forward(mlp_norm.forward(mid.data(), 1), 1);
    for (int n = 0; n < d; n++) out[n] = mid[n] + m[n];
    return out.data();
}

Model::Model(const ModelConfig &c, uint64_t seed)
    : rng(seed), config(c), embed(kVocab, c.dim(), rng), final_norm(c.dim()), head("head", c.dim(), kVocab, rng),
      loss(kVocab) {
    blocks.reserve(c.layers);
    for (int l = 0; l < c.layers; l++) blocks.emplace_back(c, l, rng);
}

double Model::forward(const uint8_t *inputs, const uint8_t *targets, const AttentionShape &shape) {
    const float *x = embed.forward(inputs, shape.rows());
    for (Block &block : blocks) x = block.forward(x, shape);
    return loss.forward(head.forward(final_norm.forward(x, shape.rows()), shape.rows()), targets, shape.rows());
}

const float *Model::decode(uint8_t token, int64_t position, gka_window window, int64_t capacity) {
    const float *x = embed.forward(&token, 1);
    for (Block &block : blocks) x = block.decode(x, position, window, capacity);
    return head.forward(final_norm.forward(x, 1), 1);
}

void Model::backward() {
    const float *dx = final_norm.backward(head.backward(loss.backward()));
    for (auto block = blocks.rbegin(); block != blocks.rend(); ++block) dx = block->backward(dx);
    embed.backward(dx);
}

void Model::zero_grad() {
    for (Param *p : params()) std::fill(p->grad.begin(), p->grad.end(), 0.0f);
}

std::vector<Param *> Model::params() {
    std::vector<Param *> all{&embed.table, &head.w};
    for (Block &block : blocks) {
        for (Param *p : block.attention->params()) all.push_back(p);
        all.push_back(&block.mlp.fc.w);
        all.push_back(&block.mlp.proj.w);
    }
    return all;
}

size_t Model::parameter_count() {
    size_t n = 0;
    for (Param *p : params()) n += p->value.size();
    return n;
}

size_t Model::attention_parameter_count() {
    size_t n = 0;
    for (Block &block : blocks) {
        for (Param *p : block.attention->params()) n += p->value.size();
    }
    return n;
}

// The embedding is a lookup (no FLOPs); every other weight is in a product.
double Model::training_flops_per_token(const AttentionShape &shape) {
    double flops = 6.0 * head.w.value.size();
    for (Block &block : blocks) {
        flops += block.attention->training_flops_per_token(shape);
        flops += 6.0 * (block.mlp.fc.w.value.size() + block.mlp.proj.w.value.size());
    }
    return flops;
}

double Model::attention_training_flops_per_token(const AttentionShape &shape) {
    double flops = 0;
    for (Block &block : blocks) flops += block.attention->training_flops_per_token(shape);
    return flops;
}

void AdamW::step(const std::vector<Param *> &params, float lr) {
    if (m.empty()) {
        for (Param *p : params) {
            m.emplace_back(p->value.size(), 0.0f);
            v.emplace_back(p->value.size(), 0.0f);
        }
    }
    steps++;
    const float correction1 = 1.0f - std::pow(beta1, float(steps)), correction2 = 1.0f - std::pow(beta2, float(steps));
    for (size_t k = 0; k < params.size(); k++) {
        Param &p = *params[k];
        const float decay = p.decay ? 1.0f - lr * weight_decay : 1.0f;
        for (size_t n = 0; n < p.value.size(); n++) {
            const float g = p.grad[n];
            m[k][n] = beta1 * m[k][n] + (1 - beta1) * g;
            v[k][n] = beta2 * v[k][n] + (1 - beta2) * g * g;
            p.value[n] = p.value[n] * decay - lr * (m[k][n] / correction1) / (std::sqrt(v[k][n] / correction2) + eps);
        }
    }
}

double clip_grad_norm(const std::vector<Param *> &params, double max_norm) {
    double sum = 0;
    for (Param *p : params) {
        for (float g : p->grad) sum += double(g) * g;
    }
    const double norm = std::sqrt(sum);
    if (norm > max_norm) {
        const float scale = float(max_norm / norm);
        for (Param *p : params) {
            for (float &g : p->grad) g *= scale;
        }
    }
    return norm;
}

}  // namespace lm
