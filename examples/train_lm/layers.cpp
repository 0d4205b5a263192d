#include "layers.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>

namespace lm {

void Param::init_normal(Rng &rng, float stddev) {
    std::normal_distribution<float> normal(0.0f, stddev);
    for (float &v : value) v = normal(rng);
}

Linear::Linear(const std::string &name, int in, int out, Rng &rng, float init_scale)
    : w(name, size_t(in) * out, true), in(in), out(out) {
    w.init_normal(rng, init_scale / std::sqrt(float(in)));
}

const float *Linear::forward(const float *x_, int rows_) {
    x = x_, rows = rows_;
    y.resize(size_t(rows) * out);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, out, in, 1.0f, x, in, w.value.data(), in, 0.0f,
                y.data(), out);
    return y.data();
}

const float *Linear::backward(const float *dy) {
    dx.resize(size_t(rows) * in);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, in, out, 1.0f, dy, out, w.value.data(), in, 0.0f,
                dx.data(), in);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, rows, 1.0f, dy, out, x, in, 1.0f, w.grad.data(),
                in);
    return dx.data();
}

const float *RmsNorm::forward(const float *x, int rows_) {
    rows = rows_;
    y.resize(size_t(rows) * dim);
    inv_rms.resize(rows);
    for (int r = 0; r < rows; r++) {
        const float *xr = x + size_t(r) * dim;
        double sum = 0;
        for (int c = 0; c < dim; c++) sum += double(xr[c]) * xr[c];
        inv_rms[r] = float(1.0 / std::sqrt(sum / dim + 1e-6));
        for (int c = 0; c < dim; c++) y[size_t(r) * dim + c] = xr[c] * inv_rms[r];
    }
    return y.data();
}

// dx = (dy - y mean(dy . y)) / rms
const float *RmsNorm::backward(const float *dy) {
    dx.resize(size_t(rows) * dim);
    for (int r = 0; r < rows; r++) {
        const float *dyr = dy + size_t(r) * dim, *yr = y.data() + size_t(r) * dim;
        double dot = 0;
        for (int c = 0; c < dim; c++) dot += double(dyr[c]) * yr[c];
        const float mean = float(dot / dim);
        for (int c = 0; c < dim; c++) dx[size_t(r) * dim + c] = (dyr[c] - yr[c] * mean) * inv_rms[r];
    }
    return dx.data();
}

// Output projections start small (GPT-2's 1/sqrt(2 layers)) so that the
// residual stream's scale does not grow with depth at initialization.
Mlp::Mlp(const std::string &name, int dim, int layers, Rng &rng)
    : fc(name + ".fc", dim, 4 * dim, rng), proj(name + ".proj", 4 * dim, dim, rng, 1.0f / std::sqrt(2.0f * layers)) {}

const float *Mlp::forward(const float *x, int rows) {
    const float *pre = fc.forward(x, rows);
    act.resize(fc.y.size());
    for (size_t k = 0; k < act.size(); k++) {
        const float r = std::max(pre[k], 0.0f);
        act[k] = r * r;
    }
    return proj.forward(act.data(), rows);
}

const float *Mlp::backward(const float *dy) {
    const float *dact = proj.backward(dy);
    const std::vector<float> &pre = fc.y;
    dpre.resize(pre.size());
    for (size_t k = 0; k < pre.size(); k++) dpre[k] = dact[k] * 2.0f * std::max(pre[k], 0.0f);
    return fc.backward(dpre.data());
}

Embedding::Embedding(int vocab, int dim, Rng &rng) : table("wte", size_t(vocab) * dim, false), dim(dim) {
    table.init_normal(rng, 1.0f);
}

const float *Embedding::forward(const uint8_t *tokens_, int rows_) {
    tokens = tokens_, rows = rows_;
    y.resize(size_t(rows) * dim);
    for (int r = 0; r < rows; r++) {
        std::copy_n(table.value.data() + size_t(tokens[r]) * dim, dim, y.data() + size_t(r) * dim);
    }
    return y.data();
}

void Embedding::backward(const float *dy) {
    for (int r = 0; r < rows; r++) {
        float *g = table.grad.data() + size_t(tokens[r]) * dim;
        for (int c = 0; c < dim; c++) g[c] += dy[size_t(r) * dim + c];
    }
}

double CrossEntropy::forward(const float *logits, const uint8_t *targets_, int rows_) {
    targets = targets_, rows = rows_;
    probs.resize(size_t(rows) * vocab);
    double loss = 0;
    for (int r = 0; r < rows; r++) {
        const float *z = logits + size_t(r) * vocab;
        float *p = probs.data() + size_t(r) * vocab;
        const float top = *std::max_element(z, z + vocab);
        double sum = 0;
        for (int v = 0; v < vocab; v++) sum += p[v] = std::exp(z[v] - top);
        for (int v = 0; v < vocab; v++) p[v] = float(p[v] / sum);
        loss -= std::log(std::max(double(p[targets[r]]), 1e-30));
    }
    return loss / rows;
}

const float *CrossEntropy::backward() {
    dlogits = probs;
    for (int r = 0; r < rows; r++) dlogits[size_t(r) * vocab + targets[r]] -= 1.0f;
    for (float &g : dlogits) g /= float(rows);
    return dlogits.data();
}

}  // namespace lm
