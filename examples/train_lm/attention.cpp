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

// A description of the layer's call: packed documents are the varlen layout
// (documents, tokens in all); bfloat16 features where `bf16`.
gka_call described(const AttentionShape &s, bool bf16, gka_kernel_function kernel) {
    gka_call c = gka_call_init();
    c.kernel = kernel;
    const bool packed = !s.cu_seqlens.empty();
    c.shape = {packed ? int64_t(s.cu_seqlens.size()) - 1 : s.batch, s.seq, s.heads, s.head_dim};
    c.cu_seqlens = packed ? s.cu_seqlens.data() : nullptr;
    c.window = s.window;
    c.dtype = bf16 ? GKA_BFLOAT16 : GKA_FLOAT32;
    return c;
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
GkaAttention::GkaAttention(const std::string &name, int heads, int head_dim, int layers, Rng &rng, bool bf16,
                           gka_kernel_function kernel, RandomFeatures features)
    : log_sigma(name + ".log_sigma", heads, false),
      out(name + ".out", heads * head_dim, heads * head_dim, rng, float(output_projection_init(layers))),
      frequencies(name + ".frequencies", size_t(heads) * features.count * head_dim, false),
      bf16(bf16),
      kernel(kernel),
      features(features) {
    std::fill(log_sigma.value.begin(), log_sigma.value.end(), 0.5f * std::log(0.5f * head_dim));
    if (features.count > 0) {
        check(gka_draw_frequencies(heads, features.count, head_dim, rng(), 1, frequencies.value.data()),
              "gka_draw_frequencies");
    }
}

std::vector<Param *> GkaAttention::params() {
    if (features.learned) return {&log_sigma, &out.w, &frequencies};
    return {&log_sigma, &out.w};
}

const float *GkaAttention::forward(const float *h_, const AttentionShape &shape_) {
    shape = shape_, h = h_;
    const size_t n = size_t(shape.rows()) * shape.dim();
    sigma.resize(shape.heads);
    for (int k = 0; k < shape.heads; k++) sigma[k] = std::exp(log_sigma.value[k]);
    y.resize(n);
    lse.resize(size_t(shape.batch) * shape.heads * shape.seq);
    gka_call c = described(shape, bf16, kernel);
    c.sigma = sigma.data(), c.lse = lse.data();
    c.features = features.count, c.frequencies = features.count ? frequencies.value.data() : nullptr;
    if (bf16) {
        to_bf16(h, n, h16);
        y16.resize(n);
        c.x = h16.data(), c.y = y16.data();
    } else {
        c.x = h, c.y = y.data();
    }
    check(gka_run_forward(&c), "gka_run_forward");
    if (bf16) from_bf16(y16, y);
    return out.forward(y.data(), shape.rows());
}

const float *GkaAttention::backward(const float *dout) {
    const float *dy = out.backward(dout);
    dh.resize(y.size());
    dsigma.resize(shape.heads);
    gka_call c = described(shape, bf16, kernel);
    c.sigma = sigma.data(), c.lse = lse.data(), c.dsigma = dsigma.data();
    if (features.count > 0) {
        dfrequencies.resize(frequencies.value.size());
        c.features = features.count, c.frequencies = frequencies.value.data(), c.dfrequencies = dfrequencies.data();
    }
    if (bf16) {
        to_bf16(dy, y.size(), dy16);
        dh16.resize(y.size());
        c.x = h16.data(), c.y = y16.data(), c.dy = dy16.data(), c.dx = dh16.data();
    } else {
        c.x = h, c.y = y.data(), c.dy = dy, c.dx = dh.data();
    }
    check(gka_run_backward(&c), "gka_run_backward");
    if (bf16) from_bf16(dh16, dh);
    for (int k = 0; k < shape.heads; k++) log_sigma.grad[k] += dsigma[k] * sigma[k];
    if (features.learned) {
        for (size_t k = 0; k < dfrequencies.size(); k++) frequencies.grad[k] += dfrequencies[k];
    }
    return dh.data();
}

const float *GkaAttention::decode(const float *h_row, int64_t position, gka_window window, int64_t capacity) {
    const int heads = int(log_sigma.value.size()), d = out.in;
    // Random features' cache is the keys' state, [H][M][D + 1], whatever the length.
    const size_t cached = features.count > 0 ? size_t(heads) * features.count * (d / heads + 1) : size_t(capacity) * d;
    if (position == 0) cache.assign(cached, 0.0f), cache16.assign(cache.size(), 0);
    sigma.resize(heads);
    for (int k = 0; k < heads; k++) sigma[k] = std::exp(log_sigma.value[k]);
    y.resize(d), lse.resize(heads);
    gka_call c = gka_call_init();
    c.kernel = kernel, c.shape = {1, 1, heads, d / heads}, c.window = window;
    c.dtype = bf16 ? GKA_BFLOAT16 : GKA_FLOAT32;
    if (features.count > 0) {
        c.features = features.count, c.frequencies = frequencies.value.data();
    } else {
        c.cache_capacity = capacity, c.cache_lens = &position;
    }
    c.sigma = sigma.data(), c.lse = lse.data();
    if (bf16) {
        to_bf16(h_row, d, h16);
        y16.resize(d);
        c.x = h16.data(), c.cache = cache16.data(), c.y = y16.data();
    } else {
        c.x = h_row, c.cache = cache.data(), c.y = y.data();
    }
    check(gka_run_decode(&c), "gka_run_decode");
    if (bf16) from_bf16(y16, y);
    return out.forward(y.data(), 1);
}

// Random features: the chunked algorithm's GEMMs (generators/gka_random_features.h),
// 20 M D + 8 C M + 6 C D a token and head over forward and backward, C = 64.
double GkaAttention::training_flops_per_token(const AttentionShape &s) const {
    const double M = features.count, D = s.head_dim, C = 64;
    const double pairwise = M > 0 ? 20 * M * D + 8 * C * M + 6 * C * D : 14.0 * D * s.pairs_per_token();
    return 6.0 * out.w.value.size() + pairwise * s.heads;
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
                                          int layers, Rng &rng, const std::string &dtype, const std::string &kernel,
                                          RandomFeatures features) {
    if (dtype != "f32" && dtype != "bf16") throw std::invalid_argument("unknown dtype '" + dtype + "' (f32 or bf16)");
    const std::string kernels = gka_kernels();  // gka_kernel_function's order, comma-separated
    const size_t at = ("," + kernels + ",").find("," + kernel + ",");
    if (kernel.empty() || at == std::string::npos) {
        throw std::invalid_argument("unknown kernel function '" + kernel + "' (" + kernels + ")");
    }
    if (kind != "gka" && kernel != "gaussian") {
        throw std::invalid_argument("--kernel chooses GKA's kernel function: it needs --attention gka");
    }
    const auto function = gka_kernel_function(std::count(kernels.begin(), kernels.begin() + at, ','));
    if (features.count < 0) throw std::invalid_argument("--features must be >= 0");
    if (features.count > 0 && (kind != "gka" || dtype != "f32" || function != GKA_GAUSSIAN)) {
        throw std::invalid_argument("--features runs random-feature GKA: it needs --attention gka, --dtype f32 and "
                                    "the Gaussian kernel");
    }
    if (features.learned && features.count == 0) {
        throw std::invalid_argument("--frequencies learned trains random features' frequencies: it needs --features");
    }
    if (kind == "gka") {
        return std::make_unique<GkaAttention>(name, heads, head_dim, layers, rng, dtype == "bf16", function, features);
    }
    if (kind == "dot" && dtype == "bf16") {
        throw std::invalid_argument("dtype bf16 runs GKA's attention in bfloat16 (libgka's kernels); the dot-product "
                                    "layer is float32 only");
    }
    if (kind == "dot") return std::make_unique<DotProductAttention>(name, heads, head_dim, layers, rng);
    throw std::invalid_argument("unknown attention '" + kind + "' (gka or dot)");
}

}  // namespace lm
