#include "attention.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace lm {

double AttentionShape::pairs_per_token() const {
    double pairs = 0;
    for (int i = 0; i < seq; i++) {
        const int first = window.left < 0 ? 0 : std::max(0, i - int(window.left));
        const int last = window.right < 0 ? seq - 1 : std::min(seq - 1, i + int(window.right));
        pairs += last - first + 1;
    }
    return pairs / seq;
}

namespace {

void check(gka_status status, const char *call) {
    if (status != GKA_OK) throw std::runtime_error(std::string(call) + ": " + gka_last_error());
}

gka_shape kernel_shape(const AttentionShape &s) { return {s.batch, s.seq, s.heads, s.head_dim}; }
// Packed documents: the varlen calls' shape (documents, tokens in all).
gka_shape packed_shape(const AttentionShape &s) {
    return {int64_t(s.cu_seqlens.size()) - 1, s.seq, s.heads, s.head_dim};
}

void to_bf16(const float *from, size_t n, std::vector<gka_bf16> &to) {
    to.resize(n);
    for (size_t k = 0; k < n; k++) to[k] = gka_bf16_from_float(from[k]);
}
void from_bf16(const std::vector<gka_bf16> &from, std::vector<float> &to) {
    to.resize(from.size());
    for (size_t k = 0; k < from.size(); k++) to[k] = gka_float_from_bf16(from[k]);
}

double output_projection_init(int layers) { return 1.0 / std::sqrt(2.0 * layers); }

}  // namespace

// RMSNorm makes |h_t|^2 about d, so two unrelated tokens are about 2D apart in
// a head; sigma = sqrt(D / 2) starts their score near -2 against 0 for the
// query itself: peaked enough to carry information, flat enough to train.
GkaAttention::GkaAttention(const std::string &name, int heads, int head_dim, int layers, Rng &rng, bool bf16)
    : log_sigma(name + ".log_sigma", heads, false),
      out(name + ".out", heads * head_dim, heads * head_dim, rng, float(output_projection_init(layers))),
      bf16(bf16) {
    std::fill(log_sigma.value.begin(), log_sigma.value.end(), 0.5f * std::log(0.5f * head_dim));
}

const float *GkaAttention::forward(const float *h_, const AttentionShape &shape_) {
    shape = shape_, h = h_;
    const size_t n = size_t(shape.rows()) * shape.dim();
    sigma.resize(shape.heads);
    for (int k = 0; k < shape.heads; k++) sigma[k] = std::exp(log_sigma.value[k]);
    y.resize(n);
    lse.resize(size_t(shape.batch) * shape.heads * shape.seq);
    const bool packed = !shape.cu_seqlens.empty();
    const int64_t *cu = shape.cu_seqlens.data();
    if (bf16) {
        to_bf16(h, n, h16);
        y16.resize(n);
        check(packed ? gka_forward_varlen_bf16(packed_shape(shape), cu, shape.window, h16.data(), sigma.data(),
                                               y16.data(), lse.data())
                     : gka_forward_bf16(kernel_shape(shape), shape.window, h16.data(), sigma.data(), y16.data(),
                                        lse.data()),
              "gka_forward_bf16");
        from_bf16(y16, y);
    } else {
        check(packed ? gka_forward_varlen(packed_shape(shape), cu, shape.window, h, sigma.data(), y.data(), lse.data())
                     : gka_forward(kernel_shape(shape), shape.window, h, sigma.data(), y.data(), lse.data()),
              "gka_forward");
    }
    return out.forward(y.data(), shape.rows());
}

const float *GkaAttention::backward(const float *dout) {
    const float *dy = out.backward(dout);
    const bool packed = !shape.cu_seqlens.empty();
    const int64_t *cu = shape.cu_seqlens.data();
    dh.resize(y.size());
    dsigma.resize(shape.heads);
    if (bf16) {
        to_bf16(dy, y.size(), dy16);
        dh16.resize(y.size());
        check(packed ? gka_backward_varlen_bf16(packed_shape(shape), cu, shape.window, h16.data(), sigma.data(),
                                                y16.data(), lse.data(), dy16.data(), dh16.data(), dsigma.data())
                     : gka_backward_bf16(kernel_shape(shape), shape.window, h16.data(), sigma.data(), y16.data(),
                                         lse.data(), dy16.data(), dh16.data(), dsigma.data()),
              "gka_backward_bf16");
        from_bf16(dh16, dh);
    } else {
        check(packed ? gka_backward_varlen(packed_shape(shape), cu, shape.window, h, sigma.data(), y.data(),
                                           lse.data(), dy, dh.data(), dsigma.data())
                     : gka_backward(kernel_shape(shape), shape.window, h, sigma.data(), y.data(), lse.data(), dy,
                                    dh.data(), dsigma.data()),
              "gka_backward");
    }
    for (int k = 0; k < shape.heads; k++) log_sigma.grad[k] += dsigma[k] * sigma[k];
    return dh.data();
}

const float *GkaAttention::decode(const float *h_row, int64_t position, gka_window window, int64_t capacity) {
    const int heads = int(log_sigma.value.size()), d = out.in;
    const gka_shape one{1, 1, heads, d / heads};
    if (position == 0) cache.assign(size_t(capacity) * d, 0.0f), cache16.assign(cache.size(), 0);
    sigma.resize(heads);
    for (int k = 0; k < heads; k++) sigma[k] = std::exp(log_sigma.value[k]);
    y.resize(d), lse.resize(heads);
    if (bf16) {
        to_bf16(h_row, d, h16);
        y16.resize(d);
        check(gka_decode_bf16(one, capacity, window, h16.data(), sigma.data(), &position, cache16.data(), y16.data(),
                              lse.data()),
              "gka_decode_bf16");
        from_bf16(y16, y);
    } else {
        check(gka_decode(one, capacity, window, h_row, sigma.data(), &position, cache.data(), y.data(), lse.data()),
              "gka_decode");
    }
    return out.forward(y.data(), 1);
}

double GkaAttention::training_flops_per_token(const AttentionShape &s) const {
    return 6.0 * out.w.value.size() + 14.0 * s.head_dim * s.heads * s.pairs_per_token();
}

DotProductAttention::DotProductAttention(const std::string &name, int heads, int head_dim, int layers, Rng &rng)
    : query(name + ".query", heads * head_dim, heads * head_dim, rng),
      key(name + ".key", heads * head_dim, heads * head_dim, rng),
      value(name + ".value", heads * head_dim, heads * head_dim, rng),
      out(name + ".out", heads * head_dim, heads * head_dim, rng, float(output_projection_init(layers))) {}

// Per (batch, head): S = Q K^T / sqrt(D) by sgemm over the [B][T][H][D] rows
// (leading dimension d), the masked softmax row by row, then P V.
const float *DotProductAttention::forward(const float *h, const AttentionShape &shape_) {
    if (!shape_.cu_seqlens.empty()) {
        throw std::invalid_argument("packed documents (--batches packed) run GKA's varlen kernels; the dot-product layer takes "
                                    "fixed windows");
    }
    shape = shape_;
    const int T = shape.seq, D = shape.head_dim, d = shape.dim(), rows = shape.rows();
    const float scale = 1.0f / std::sqrt(float(D));
    const float *q = query.forward(h, rows), *k = key.forward(h, rows), *v = value.forward(h, rows);
    probs.resize(size_t(shape.batch) * shape.heads * T * T);
    mixed.resize(size_t(rows) * d);
    for (int b = 0; b < shape.batch; b++) {
        for (int hd = 0; hd < shape.heads; hd++) {
            const size_t at = size_t(b) * T * d + size_t(hd) * D;
            float *p = probs.data() + (size_t(b) * shape.heads + hd) * T * T;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, D, scale, q + at, d, k + at, d, 0.0f, p, T);
            for (int i = 0; i < T; i++) {
                float *row = p + size_t(i) * T;
                float top = -INFINITY;
                for (int j = 0; j < T; j++) {
                    if (shape.allowed(i, j)) top = std::max(top, row[j]);
                }
                double sum = 0;
                for (int j = 0; j < T; j++) sum += row[j] = shape.allowed(i, j) ? std::exp(row[j] - top) : 0.0f;
                for (int j = 0; j < T; j++) row[j] = float(row[j] / sum);
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, D, T, 1.0f, p, T, v + at, d, 0.0f,
                        mixed.data() + at, d);
        }
    }
    return out.forward(mixed.data(), rows);
}

// dV = P^T dO; dP = dO V^T; dS = P (dP - rowsum(P dP)); dQ = dS K / sqrt(D);
// dK = dS^T Q / sqrt(D).
const float *DotProductAttention::backward(const float *dout) {
    const int T = shape.seq, D = shape.head_dim, d = shape.dim(), rows = shape.rows();
    const float scale = 1.0f / std::sqrt(float(D));
    const float *dmixed = out.backward(dout);
    const float *q = query.y.data(), *k = key.y.data(), *v = value.y.data();
    dq.resize(size_t(rows) * d), dk.resize(dq.size()), dv.resize(dq.size());
    dprobs.resize(size_t(T) * T);
    for (int b = 0; b < shape.batch; b++) {
        for (int hd = 0; hd < shape.heads; hd++) {
            const size_t at = size_t(b) * T * d + size_t(hd) * D;
            const float *p = probs.data() + (size_t(b) * shape.heads + hd) * T * T;
            float *ds = dprobs.data();
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, D, T, 1.0f, p, T, dmixed + at, d, 0.0f,
                        dv.data() + at, d);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, D, 1.0f, dmixed + at, d, v + at, d, 0.0f, ds,
                        T);
            for (int i = 0; i < T; i++) {
                const float *pr = p + size_t(i) * T;
                float *dr = ds + size_t(i) * T;
                double mean = 0;
                for (int j = 0; j < T; j++) mean += double(pr[j]) * dr[j];
                for (int j = 0; j < T; j++) dr[j] = pr[j] * (dr[j] - float(mean));
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, D, T, scale, ds, T, k + at, d, 0.0f,
                        dq.data() + at, d);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, D, T, scale, ds, T, q + at, d, 0.0f,
                        dk.data() + at, d);
        }
    }
    const float *from_q = query.backward(dq.data()), *from_k = key.backward(dk.data()),
                *from_v = value.backward(dv.data());
    dh.resize(dq.size());
    for (size_t n = 0; n < dh.size(); n++) dh[n] = from_q[n] + from_k[n] + from_v[n];
    return dh.data();
}

double DotProductAttention::training_flops_per_token(const AttentionShape &s) const {
    return 6.0 * 4 * out.w.value.size() + 14.0 * s.head_dim * s.heads * s.pairs_per_token();
}

std::unique_ptr<Attention> make_attention(const std::string &kind, const std::string &name, int heads, int head_dim,
                                          int layers, Rng &rng, const std::string &dtype) {
    if (dtype != "f32" && dtype != "bf16") throw std::invalid_argument("unknown dtype '" + dtype + "' (f32 or bf16)");
    if (kind == "gka") return std::make_unique<GkaAttention>(name, heads, head_dim, layers, rng, dtype == "bf16");
    if (kind == "dot" && dtype == "bf16") {
        throw std::invalid_argument("dtype bf16 runs GKA's attention in bfloat16 (libgka's kernels); the dot-product "
                                    "layer is float32 only");
    }
    if (kind == "dot") return std::make_unique<DotProductAttention>(name, heads, head_dim, layers, rng);
    throw std::invalid_argument("unknown attention '" + kind + "' (gka or dot)");
}

}  // namespace lm
