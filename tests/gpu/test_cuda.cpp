// The CUDA kernels through libgka's device entry points, fed from device
// memory, against the double reference (oracle/reference.h) with the CPU tests'
// tolerances (tests/check.h); bad inputs; ordering on the caller's stream.
// Without a usable GPU the whole binary exits 77, which CTest reports as
// skipped, after printing why: it never passes without having run.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <regex>
#include <random>
#include <vector>

#include "bfloat16.h"
#include "check.h"
#include "cuda_driver.h"
#include "random_problem.h"

namespace {

gka_cuda::Driver cu;

// Device memory for one tensor of floats (or gka_bf16), freed on scope exit.
template <class T = float>
struct DeviceArray {
    gka_cuda::CUdeviceptr ptr = 0;
    size_t count = 0;
    explicit DeviceArray(size_t n) : count(n) {
        REQUIRE(cu.cuMemAlloc(&ptr, std::max<size_t>(n, 1) * sizeof(T)) == 0);
    }
    explicit DeviceArray(const std::vector<T> &v) : DeviceArray(v.size()) { upload(v); }
    ~DeviceArray() { cu.cuMemFree(ptr); }
    void upload(const std::vector<T> &v) { REQUIRE(cu.cuMemcpyHtoD(ptr, v.data(), v.size() * sizeof(T)) == 0); }
    std::vector<T> download() const {
        std::vector<T> v(count);
        REQUIRE(cu.cuMemcpyDtoH(v.data(), ptr, count * sizeof(T)) == 0);
        return v;
    }
    T *f() const { return reinterpret_cast<T *>(ptr); }
};

struct Stream {
    gka_cuda::CUstream s = nullptr;
    Stream() { REQUIRE(cu.cuStreamCreate(&s, 1 /* CU_STREAM_NON_BLOCKING */) == 0); }
    ~Stream() { cu.cuStreamDestroy(s); }
    void sync() const { REQUIRE(cu.cuStreamSynchronize(s) == 0); }
};

// A description of `p` on the device, on `stream`: its kernel function, no tensors yet.
gka_call on_device(const gka_ref::Problem &p, const Stream &stream) {
    gka_call c = gka_test::described(p.kernel);
    c.shape = p.shape, c.window = p.window, c.device = GKA_CUDA, c.stream = stream.s;
    return c;
}

// With the problem's kernel function.
gka_test::Outputs run_on_device(const gka_ref::Problem &p, const Stream &stream) {
    DeviceArray x(p.x), sigma(p.sigma), dy(p.dy), y(p.size()), lse(p.rows()), dx(p.size()), dsigma(p.shape.heads);
    gka_call c = on_device(p, stream);
    c.x = x.f(), c.sigma = sigma.f(), c.y = y.f(), c.lse = lse.f(), c.dy = dy.f(), c.dx = dx.f(), c.dsigma = dsigma.f();
    gka_status s = gka_run_forward(&c);
    INFO(gka_last_error());
    REQUIRE(s == GKA_OK);
    s = gka_run_backward(&c);
    INFO(gka_last_error());
    REQUIRE(s == GKA_OK);
    stream.sync();
    return {y.download(), lse.download(), dx.download(), dsigma.download()};
}

void check_on_device(const gka_ref::Problem &p) {
    Stream stream;
    gka_test::check_report("cuda", p, gka_test::compare(p, run_on_device(p, stream)));
}

// The bfloat16 passes on `p` with x and dy rounded to bfloat16 (the reference's
// inputs too), judged by the bfloat16 contract.
void check_bf16_on_device(gka_ref::Problem p) {
    p.x = gka_test::rounded_to_bf16(p.x);
    p.dy = gka_test::rounded_to_bf16(p.dy);
    Stream stream;
    DeviceArray<gka_bf16> x(gka_test::to_bf16(p.x)), dy(gka_test::to_bf16(p.dy)), y(p.size()), dx(p.size());
    DeviceArray<> sigma(p.sigma), lse(p.rows()), dsigma(p.shape.heads);
    gka_call c = on_device(p, stream);
    c.dtype = GKA_BFLOAT16;
    c.x = x.f(), c.sigma = sigma.f(), c.y = y.f(), c.lse = lse.f(), c.dy = dy.f(), c.dx = dx.f(), c.dsigma = dsigma.f();
    gka_status s = gka_run_forward(&c);
    INFO(gka_last_error());
    REQUIRE(s == GKA_OK);
    CHECK(std::string(gka_last_kernel()).find("_bf16") != std::string::npos);
    s = gka_run_backward(&c);
    INFO(gka_last_error());
    REQUIRE(s == GKA_OK);
    stream.sync();
    const gka_test::Outputs out{gka_test::from_bf16(y.download()), lse.download(), gka_test::from_bf16(dx.download()),
                                dsigma.download()};
    gka_test::check_report("cuda bf16", p, gka_test::compare(p, out, {}, gka_test::bfloat16_bounds));
}

const gka_window full{-1, -1}, causal{-1, 0};

TEST_CASE("cuda: windows and head dims against the double reference", "[cuda]") {
    const gka_window windows[] = {causal, full, {255, 0}, {20, 20}, {0, 0}, {3, 7}};
    for (int64_t D : {64, 128, 16, 80}) {
        for (gka_window w : windows) {
            auto p = gka_ref::make_problem({2, 300, 3, D}, w, {0.5f, 2.0f, 9.0f}, 1.5, 500 + D);
            gka_test::for_each_kernel([&](const char *kernel) {
                p.kernel = kernel;
                check_on_device(p);
            });
        }
    }
}

TEST_CASE("cuda: bfloat16 features, windows and head dims, within the bf16 contract", "[cuda][bf16]") {
    for (int64_t D : {64, 128, 40}) {
        for (gka_window w : {causal, full, gka_window{255, 0}, gka_window{0, 0}, gka_window{3, 7}}) {
            auto p = gka_ref::make_problem({2, 300, 2, D}, w, {0.6f, 3.0f}, 1.5, 700 + D);
            gka_test::for_each_kernel([&](const char *kernel) {
                p.kernel = kernel;
                check_bf16_on_device(p);
            });
        }
    }
}

// `got` against `want` to within `bound`; infinities (an empty chunk's lse)
// exactly.
void check_close(const std::vector<float> &got, const std::vector<float> &want, double bound) {
    REQUIRE(got.size() == want.size());
    for (size_t k = 0; k < got.size(); k++) {
        INFO("element " << k << ": " << got[k] << " against " << want[k] << ", bound " << bound);
        if (std::isinf(want[k])) REQUIRE(got[k] == want[k]);
        else REQUIRE(std::fabs(double(got[k]) - want[k]) <= bound);
    }
}

// The largest finite |v|: the scale of a tensor whose sums cancel, where a
// value's own size is no measure of its rounding.
double largest(const std::vector<float> &v) {
    double m = 1e-30;
    for (float f : v)
        if (std::isfinite(f)) m = std::max(m, std::fabs(double(f)));
    return m;
}

gka_status decode_on_host(gka_shape s, int64_t capacity, gka_window w, const float *x, const float *sigma,
                          const int64_t *lens, float *cache, float *y, float *lse) {
    return gka_decode(s, capacity, w, x, sigma, lens, cache, y, lse);
}
gka_status decode_on_host(gka_shape s, int64_t capacity, gka_window w, const gka_bf16 *x, const float *sigma,
                          const int64_t *lens, gka_bf16 *cache, gka_bf16 *y, float *lse) {
    return gka_decode_bf16(s, capacity, w, x, sigma, lens, cache, y, lse);
}
gka_status decode_on_device(gka_shape s, int64_t capacity, gka_window w, const float *x, const float *sigma,
                            const int64_t *lens, float *cache, float *y, float *lse, void *stream) {
    return gka_decode_cuda(s, capacity, w, x, sigma, lens, cache, y, lse, stream);
}
gka_status decode_on_device(gka_shape s, int64_t capacity, gka_window w, const gka_bf16 *x, const float *sigma,
                            const int64_t *lens, gka_bf16 *cache, gka_bf16 *y, float *lse, void *stream) {
    return gka_decode_bf16_cuda(s, capacity, w, x, sigma, lens, cache, y, lse, stream);
}

std::vector<float> as_floats(const std::vector<float> &v) { return v; }
std::vector<float> as_floats(const std::vector<gka_bf16> &v) { return gka_test::from_bf16(v); }

struct DecodeCase {
    gka_window window;
    int64_t capacity, new_tokens, D, steps;
};

// Decoding a sequence `steps` steps of `new_tokens` tokens on the device and on
// the CPU (gka_decode, which tests/test_decode.cpp holds to the reference): y
// and lse agree to rounding (a bfloat16 y to its own), and the caches match.
template <class T>
void decode_matches_host(const DecodeCase &c) {
    INFO("window (" << c.window.left << ", 0), capacity " << c.capacity << ", " << c.new_tokens
                    << " new tokens a step, D=" << c.D << (sizeof(T) == 2 ? ", bfloat16" : ", float32"));
    const int64_t B = 2, H = 3, row = H * c.D;
    const double y_tolerance = sizeof(T) == 2 ? 1e-2 : 1e-4;
    const auto p = gka_ref::make_problem({B, c.steps * c.new_tokens, H, c.D}, c.window, {0.5f, 2.0f, 9.0f}, 1.5, 77);
    std::vector<T> features(p.x.size());
    for (size_t k = 0; k < features.size(); k++) {
        if constexpr (sizeof(T) == 2) features[k] = gka_test::to_bf16(p.x[k]);
        else features[k] = p.x[k];
    }
    std::vector<T> host_cache(B * c.capacity * row, T(0));
    DeviceArray<T> cache(host_cache);
    DeviceArray<> sigma(p.sigma);
    Stream stream;
    for (int64_t step = 0; step < c.steps; step++) {
        const int64_t at = step * c.new_tokens;
        std::vector<T> x(B * c.new_tokens * row);
        for (int64_t b = 0; b < B; b++) {
            std::copy_n(&features[(b * p.shape.seq_len + at) * row], c.new_tokens * row, &x[b * c.new_tokens * row]);
        }
        const gka_shape shape{B, c.new_tokens, H, c.D};
        const std::vector<int64_t> lens(B, at);
        std::vector<T> y(x.size());
        std::vector<float> lse(B * H * c.new_tokens);
        REQUIRE(decode_on_host(shape, c.capacity, c.window, x.data(), p.sigma.data(), lens.data(), host_cache.data(),
                               y.data(), lse.data()) == GKA_OK);
        DeviceArray<T> xd(x), yd(y.size());
        DeviceArray<> lsed(lse.size());
        const gka_status s = decode_on_device(shape, c.capacity, c.window, xd.f(), sigma.f(), lens.data(), cache.f(),
                                              yd.f(), lsed.f(), stream.s);
        INFO("step " << step << ": " << gka_last_error());
        REQUIRE(s == GKA_OK);
        stream.sync();
        const std::vector<float> want = as_floats(y);
        check_close(as_floats(yd.download()), want, y_tolerance * largest(want));
        check_close(lsed.download(), lse, 2e-4);
    }
    CHECK(cache.download() == host_cache);
}

}  // namespace

TEST_CASE("cuda: decode steps match the CPU's, causal and on a ring", "[cuda][decode]") {
    // The last case brings more new tokens than the ring has slots: only the
    // last `capacity` of them stay.
    for (const DecodeCase c : {DecodeCase{causal, 600, 1, 64, 150}, DecodeCase{causal, 600, 3, 128, 150},
                               DecodeCase{{63, 0}, 63, 1, 64, 150}, DecodeCase{{63, 0}, 80, 2, 40, 150},
                               DecodeCase{{63, 0}, 63, 70, 64, 4}}) {
        gka_test::for_each_kernel([&](const char *) {  // the host's and the device's calls alike
            decode_matches_host<float>(c);
            decode_matches_host<gka_bf16>(c);
        });
    }
}

gka_status varlen_on_host(bool backward, gka_shape s, const int64_t *cu, gka_window w, const float *x,
                          const float *sigma, float *y, float *lse, const float *dy, float *dx, float *dsigma) {
    return backward ? gka_backward_varlen(s, cu, w, x, sigma, y, lse, dy, dx, dsigma)
                    : gka_forward_varlen(s, cu, w, x, sigma, y, lse);
}
gka_status varlen_on_host(bool backward, gka_shape s, const int64_t *cu, gka_window w, const gka_bf16 *x,
                          const float *sigma, gka_bf16 *y, float *lse, const gka_bf16 *dy, gka_bf16 *dx,
                          float *dsigma) {
    return backward ? gka_backward_varlen_bf16(s, cu, w, x, sigma, y, lse, dy, dx, dsigma)
                    : gka_forward_varlen_bf16(s, cu, w, x, sigma, y, lse);
}
gka_status varlen_on_device(bool backward, gka_shape s, const int64_t *cu, gka_window w, const float *x,
                            const float *sigma, float *y, float *lse, const float *dy, float *dx, float *dsigma,
                            void *stream) {
    return backward ? gka_backward_varlen_cuda(s, cu, w, x, sigma, y, lse, dy, dx, dsigma, stream)
                    : gka_forward_varlen_cuda(s, cu, w, x, sigma, y, lse, stream);
}
gka_status varlen_on_device(bool backward, gka_shape s, const int64_t *cu, gka_window w, const gka_bf16 *x,
                            const float *sigma, gka_bf16 *y, float *lse, const gka_bf16 *dy, gka_bf16 *dx,
                            float *dsigma, void *stream) {
    return backward ? gka_backward_varlen_bf16_cuda(s, cu, w, x, sigma, y, lse, dy, dx, dsigma, stream)
                    : gka_forward_varlen_bf16_cuda(s, cu, w, x, sigma, y, lse, stream);
}

// Packed sequences of mixed lengths (one empty) on the device and on the CPU
// (gka_forward_varlen and gka_backward_varlen, which tests/test_varlen.cpp
// holds to the reference): y, lse, dx and dsigma agree to rounding.
template <class T>
void varlen_matches_host(gka_window w, int64_t D) {
    INFO("window (" << w.left << ", " << w.right << "), D=" << D << (sizeof(T) == 2 ? ", bfloat16" : ", float32"));
    const std::vector<int64_t> cu = {0, 37, 37, 300, 301, 420};
    const int64_t total = cu.back(), H = 2, sequences = int64_t(cu.size()) - 1;
    const double tolerance = sizeof(T) == 2 ? 1e-2 : 1e-4;
    const auto p = gka_ref::make_problem({1, total, H, D}, w, {0.5f, 3.0f}, 1.5, 1100 + D);
    std::vector<T> x(p.x.size()), dy(p.dy.size());
    for (size_t k = 0; k < x.size(); k++) {
        if constexpr (sizeof(T) == 2) x[k] = gka_test::to_bf16(p.x[k]), dy[k] = gka_test::to_bf16(p.dy[k]);
        else x[k] = p.x[k], dy[k] = p.dy[k];
    }
    const gka_shape shape{sequences, total, H, D};
    std::vector<T> y(x.size()), dx(x.size());
    std::vector<float> lse(H * total), ds(H);
    REQUIRE(varlen_on_host(false, shape, cu.data(), w, x.data(), p.sigma.data(), y.data(), lse.data(), nullptr,
                           nullptr, nullptr) == GKA_OK);
    REQUIRE(varlen_on_host(true, shape, cu.data(), w, x.data(), p.sigma.data(), y.data(), lse.data(), dy.data(),
                           dx.data(), ds.data()) == GKA_OK);
    Stream stream;
    DeviceArray<T> xd(x), dyd(dy), yd(y.size()), dxd(dx.size());
    DeviceArray<> sd(p.sigma), ld(lse.size()), dsd(ds.size());
    gka_status s = varlen_on_device(false, shape, cu.data(), w, xd.f(), sd.f(), yd.f(), ld.f(), nullptr, nullptr,
                                    nullptr, stream.s);
    INFO(gka_last_error());
    REQUIRE(s == GKA_OK);
    stream.sync();
    const std::vector<float> want_y = as_floats(y), want_dx = as_floats(dx);
    check_close(as_floats(yd.download()), want_y, tolerance * largest(want_y));
    check_close(ld.download(), lse, 2e-4);
    DeviceArray<T> yc(y);  // the CPU's y and lse, so that both backwards see the same inputs
    DeviceArray<> lc(lse);
    s = varlen_on_device(true, shape, cu.data(), w, xd.f(), sd.f(), yc.f(), lc.f(), dyd.f(), dxd.f(), dsd.f(),
                         stream.s);
    INFO(gka_last_error());
    REQUIRE(s == GKA_OK);
    stream.sync();
    // dx to a bfloat16 rounding (2^-8) of its largest, or float32's; dsigma is
    // float32 either way.
    check_close(as_floats(dxd.download()), want_dx, (sizeof(T) == 2 ? 1.0 / 128 : 1e-3) * largest(want_dx));
    check_close(dsd.download(), ds, 1e-3 * largest(ds));
}

TEST_CASE("cuda: varlen matches the CPU's, float32 and bfloat16", "[cuda][varlen]") {
    for (gka_window w : {causal, full, gka_window{40, 0}, gka_window{5, 9}}) {
        for (int64_t D : {64, 128, 40}) {
            gka_test::for_each_kernel([&](const char *) {  // the host's and the device's calls alike
                varlen_matches_host<float>(w, D);
                varlen_matches_host<gka_bf16>(w, D);
            });
        }
    }
}

// A chunk's passes on the device and on the CPU (gka_forward_chunk and
// gka_backward_chunk, which tests/test_chunk.cpp holds to the reference) agree
// to rounding, relative to each tensor's largest value (dx's sums cancel):
// diagonal, off-diagonal and pairless chunks.
TEST_CASE("cuda: chunks match the CPU's", "[cuda][chunk]") {
    const auto close = [](const std::vector<float> &got, const std::vector<float> &want) {
        check_close(got, want, 1e-4 * largest(want));
    };
    for (gka_window w : {causal, full, gka_window{40, 0}, gka_window{5, 9}}) {
        for (int64_t D : {64, 128, 40}) {
            const auto p = gka_ref::make_problem({2, 200, 2, D}, w, {0.5f, 3.0f}, 1.5, 900 + D);
            const int64_t row = 2 * D, Tq = 70, K = 90;
            for (const char *kernel : gka::kernel_function_names) {  // the host's and the device's calls alike
                REQUIRE(gka_set_kernel(kernel) == GKA_OK);
                for (const gka_chunk c : {gka_chunk{100, 100, K}, gka_chunk{100, 10, K}, gka_chunk{0, 110, K}}) {
                    INFO(kernel << " kernel, window (" << w.left << ", " << w.right << "), D=" << D << ", chunk ("
                                << c.query_start << ", " << c.key_start << ", " << c.key_len << ")");
                    std::vector<float> x(2 * Tq * row), keys(2 * K * row), dy(x.size());
                    for (int64_t b = 0; b < 2; b++) {
                        std::copy_n(&p.x[(b * 200 + c.query_start) * row], Tq * row, &x[b * Tq * row]);
                        std::copy_n(&p.dy[(b * 200 + c.query_start) * row], Tq * row, &dy[b * Tq * row]);
                        std::copy_n(&p.x[(b * 200 + c.key_start) * row], K * row, &keys[b * K * row]);
                    }
                    const gka_shape shape{2, Tq, 2, D};
                    std::vector<float> y(x.size()), lse(2 * 2 * Tq), dx(x.size()), dk(keys.size()), ds(2);
                    REQUIRE(gka_forward_chunk(shape, c, w, x.data(), keys.data(), p.sigma.data(), y.data(), lse.data()) ==
                            GKA_OK);
                    // The backward's y and lse: the chunk's own, as if it were the only one.
                    REQUIRE(gka_backward_chunk(shape, c, w, x.data(), keys.data(), p.sigma.data(), y.data(), lse.data(),
                                               dy.data(), dx.data(), dk.data(), ds.data()) == GKA_OK);
                    Stream stream;
                    DeviceArray<> xd(x), kd(keys), sd(p.sigma), dyd(dy), yd(y.size()), ld(lse.size()), dxd(dx.size()),
                        dkd(dk.size()), dsd(ds.size());
                    gka_status s = gka_forward_chunk_cuda(shape, c, w, xd.f(), kd.f(), sd.f(), yd.f(), ld.f(), stream.s);
                    INFO(gka_last_error());
                    REQUIRE(s == GKA_OK);
                    stream.sync();
                    close(yd.download(), y);
                    close(ld.download(), lse);
                    DeviceArray<> yc(y), lc(lse);  // the CPU's, so that the backwards see the same inputs
                    s = gka_backward_chunk_cuda(shape, c, w, xd.f(), kd.f(), sd.f(), yc.f(), lc.f(), dyd.f(), dxd.f(),
                                                dkd.f(), dsd.f(), stream.s);
                    INFO(gka_last_error());
                    REQUIRE(s == GKA_OK);
                    stream.sync();
                    close(dxd.download(), dx);
                    close(dkd.download(), dk);
                    check_close(dsd.download(), ds, 1e-3 * largest(ds));
                }
            }
        }
    }
    REQUIRE(gka_set_kernel(nullptr) == GKA_OK);
}

TEST_CASE("cuda: sequence lengths around the band, near-one-hot and near-uniform", "[cuda]") {
    for (int64_t T : {1, 2, 63, 64, 65, 129}) {
        for (double spread : {0.3, 4.0}) {
            auto p = gka_ref::make_problem({1, T, 2, 64}, causal, {0.7f, 3.0f}, spread, 900 + T);
            check_on_device(p);
        }
    }
}

TEST_CASE("cuda: long sequences, causal and (255, 0) at T=2048", "[cuda]") {
    for (gka_window w : {causal, gka_window{255, 0}}) {
        auto p = gka_ref::make_problem({1, 2048, 1, 64}, w, {1.0f}, 2.0, 2048);
        check_on_device(p);
    }
}

// docs/spec.md's accuracy contract on the inputs tests/test_accuracy.cpp gives the
// CPU families: exact self rows, offsets, sharp heads beside smooth ones,
// repeated and near-duplicate tokens, extreme scales, underflow, long rows.
TEST_CASE("cuda: a row whose only key is itself is exact", "[cuda][accuracy]") {
    for (int64_t D : {1, 64, 128}) {
        for (double offset : {0.0, 10.0}) {
            for (gka_window w : {causal, gka_window{0, 0}}) {
                const int64_t T = w.left == 0 ? 37 : 1;
                const auto p = gka_test::gaussian_problem({2, T, 2, D}, w, {0.05f, 1.0f}, 1.0, offset, 11 + D);
                INFO("D=" << D << " T=" << T << " offset " << offset);
                Stream stream;
                const gka_test::Outputs out = run_on_device(p, stream);
                CHECK(out.y == p.x);
                CHECK(out.lse == std::vector<float>(p.rows(), 0.0f));
                CHECK(out.dx == p.dy);
                CHECK(out.dsigma == std::vector<float>(p.shape.heads, 0.0f));
            }
        }
    }
}

TEST_CASE("cuda: offsets, sharp beside smooth heads, repeats, extreme scales", "[cuda][accuracy]") {
    for (double offset : {10.0, 100.0})
        check_on_device(gka_test::gaussian_problem({1, 100, 2, 64}, causal, {8.0f, 2.0f}, 1.0, offset, 21));
    for (int64_t D : {4, 64})
        check_on_device(gka_test::gaussian_problem({2, 60, 4, D}, causal, {0.02f, 0.3f, 1.0f, 50.0f}, 1.0, 3.0, 31));
    for (double scale : {1e-3, 1e3})
        for (float sigma : {1e-3f, 1e3f})
            check_on_device(gka_test::gaussian_problem({1, 40, 1, 8}, causal, {sigma}, scale, 0.5 * scale, 51));
    // Tokens a hair apart (1e-5 of their size), with sigmas of that order.
    for (int64_t D : {1, 64}) {
        auto near = gka_test::gaussian_problem({1, 40, 2, D}, full, {1e-5f, 3e-5f}, 1.0, 1.0, 43);
        for (int64_t t = 1; t < 40; t++)
            for (int64_t k = 0; k < 2 * D; k++) near.x[t * 2 * D + k] = near.x[k] * (1.0f + 1e-5f * float(t % 7));
        check_on_device(near);
    }
}

TEST_CASE("cuda: a weight below the smallest normal float is 0", "[cuda][accuracy]") {
    const float sigma = float(1.0 / std::sqrt(2.0 * 88.0));  // the score of the pair: -88
    gka_ref::Problem p{{1, 2, 1, 1}, causal, {1.0f, 0.0f}, {sigma}, {1.0f, 1.0f}};
    Stream stream;
    const gka_test::Outputs out = run_on_device(p, stream);
    CHECK(out.y[1] == 0.0f);
    CHECK(out.lse[1] == 0.0f);
}

TEST_CASE("cuda: long full-window rows: y's error does not grow with T", "[cuda][accuracy]") {
    for (int64_t T : {4096, 16384}) {
        const int64_t D = 128;
        const auto p = gka_test::gaussian_problem({1, T, 1, D}, full, {1.0f}, 0.35, 0.0, 61);
        Stream stream;
        const gka_test::Outputs out = run_on_device(p, stream);
        const double worst = gka_test::long_row_error(p, out.y);
        INFO("T=" << T << ": worst error / max |y| of a row " << worst);
        CHECK(worst < gka_test::long_row_bound);
    }
}

TEST_CASE("cuda: randomized, the contract over every regime", "[cuda][accuracy][property]") {
    const char *seed_env = std::getenv("GKA_SEED");
    const uint64_t seed = seed_env ? std::strtoull(seed_env, nullptr, 10) : std::random_device()();
    WARN("randomized CUDA accuracy test: seed " << seed << " (GKA_SEED=" << seed << " replays it), 200 cases");
    gka_test::SeededDraws draws(seed);
    int unjudged = 0;
    for (int drawn_case = 0; drawn_case < 200; drawn_case++) {
        const gka_test::RandomProblem drawn = gka_test::random_problem(draws);
        INFO("seed " << seed << ", case " << drawn_case);
        Stream stream;
        const gka_test::Outputs out = run_on_device(drawn.p, stream);
        gka_test::Report r = gka_test::compare(drawn.p, out);
        if (gka_test::in_known_gap(drawn, gka_last_kernel())) {
            unjudged += r.dsigma.ratio > 1;
            r.dsigma.ratio = 0;
        }
        gka_test::check_report("cuda", drawn.p, r);
    }
    WARN(unjudged << " cases with repeated tokens over the dsigma bound (the known gap, docs/accuracy.md)");
}

// The CUDA families of cmake/families.tsv, best first, with their compute capabilities.
std::vector<std::pair<std::string, int>> table_cuda_families() {
    std::vector<std::pair<std::string, int>> families;
    const std::regex capability(R"(cuda_capability_(\d+))");
    std::smatch m;
    for (const gka_test::FamilyRow &row : gka_test::families_table())
        if (row.at("kind") == "cuda" && std::regex_search(row.at("halide_target"), m, capability))
            families.emplace_back(row.at("family"), std::stoi(m[1]));
    return families;
}

TEST_CASE("cuda: the best family the device's compute capability has runs", "[cuda]") {
    int major = 0, minor = 0;
    REQUIRE(cu.cuDeviceGetAttribute(&major, 75, 0) == 0);  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
    REQUIRE(cu.cuDeviceGetAttribute(&minor, 76, 0) == 0);
    std::string expected;
    for (const auto &[family, capability] : table_cuda_families())
        if (expected.empty() && capability <= 10 * major + minor) expected = family;
    INFO("compute capability " << major << "." << minor << ", expected family " << expected);
    REQUIRE(!expected.empty());
    Stream stream;
    run_on_device(gka_ref::make_problem({1, 64, 1, 64}, causal, {1.0f}, 1.0, 3), stream);
    CHECK(std::string(gka_last_kernel()).find("_" + expected + "_") != std::string::npos);
}

TEST_CASE("cuda: deterministic (bitwise identical reruns)", "[cuda]") {
    auto p = gka_ref::make_problem({1, 513, 2, 64}, causal, {0.8f, 2.0f}, 1.5, 7);
    Stream stream;
    const gka_test::Outputs a = run_on_device(p, stream), b = run_on_device(p, stream);
    CHECK(std::memcmp(a.y.data(), b.y.data(), a.y.size() * 4) == 0);
    CHECK(std::memcmp(a.dx.data(), b.dx.data(), a.dx.size() * 4) == 0);
    CHECK(std::memcmp(a.dsigma.data(), b.dsigma.data(), a.dsigma.size() * 4) == 0);
}

TEST_CASE("cuda: bad inputs fail before anything runs and leave the outputs untouched", "[cuda]") {
    const gka_shape shape{1, 64, 2, 64};
    const size_t n = 64 * 2 * 64;
    DeviceArray x(std::vector<float>(n, 1.0f)), sigma(std::vector<float>(2, 1.0f)), y(std::vector<float>(n, 42.0f)),
        lse(std::vector<float>(128, 42.0f)), dx(std::vector<float>(n, 42.0f)), dsigma(std::vector<float>(2, 42.0f));
    Stream stream;
    auto untouched = [&] {
        stream.sync();
        for (const DeviceArray<> *a : {&y, &lse, &dx, &dsigma}) {
            for (float v : a->download()) REQUIRE(v == 42.0f);
        }
    };
    CHECK(gka_forward_cuda(shape, causal, nullptr, sigma.f(), y.f(), lse.f(), stream.s) == GKA_ERR_INVALID_ARGUMENT);
    CHECK(std::string(gka_last_error()).find("x is NULL") != std::string::npos);
    CHECK(gka_forward_cuda(shape, causal, x.f(), nullptr, y.f(), lse.f(), stream.s) == GKA_ERR_INVALID_ARGUMENT);
    CHECK(gka_forward_cuda(shape, gka_window{-2, 0}, x.f(), sigma.f(), y.f(), lse.f(), stream.s) ==
          GKA_ERR_INVALID_ARGUMENT);
    CHECK(gka_forward_cuda(gka_shape{1, 0, 2, 64}, causal, x.f(), sigma.f(), y.f(), lse.f(), stream.s) ==
          GKA_ERR_INVALID_ARGUMENT);
    CHECK(gka_forward_cuda(gka_shape{1, 1 << 20, 64, 64}, causal, x.f(), sigma.f(), y.f(), lse.f(), stream.s) ==
          GKA_ERR_UNSUPPORTED);
    CHECK(gka_backward_cuda(shape, causal, x.f(), sigma.f(), x.f(), lse.f(), x.f(), dx.f(), nullptr, stream.s) ==
          GKA_ERR_INVALID_ARGUMENT);
    CHECK(gka_backward_cuda(shape, gka_window{0, -3}, x.f(), sigma.f(), x.f(), lse.f(), x.f(), dx.f(), dsigma.f(),
                            stream.s) == GKA_ERR_INVALID_ARGUMENT);
    untouched();
}

TEST_CASE("cuda: a call without elements writes its exact results on the stream", "[cuda][call]") {
    Stream stream;
    const std::vector<float> host_sigma{0.5f, 2.0f};
    DeviceArray sigma(host_sigma), lse(2 * 7), dsigma(2);
    for (const gka_window w : {causal, full, gka_window{2, 0}}) {
        gka_call c = gka_call_init();
        c.device = GKA_CUDA, c.stream = stream.s, c.shape = {1, 7, 2, 0}, c.window = w;
        c.sigma = sigma.f(), c.lse = lse.f(), c.dsigma = dsigma.f();
        REQUIRE(gka_run_forward(&c) == GKA_OK);
        REQUIRE(gka_run_backward(&c) == GKA_OK);
        stream.sync();
        std::vector<float> want(2 * 7);
        c.device = GKA_CPU, c.stream = nullptr, c.sigma = host_sigma.data(), c.lse = want.data();
        REQUIRE(gka_run_forward(&c) == GKA_OK);  // the host's exact results, tests/test_call.cpp's
        INFO("window (" << w.left << ", " << w.right << ")");
        CHECK(lse.download() == want);
        CHECK(dsigma.download() == std::vector<float>(2, 0.0f));
    }
}

TEST_CASE("cuda: the call is ordered after earlier work on the caller's stream", "[cuda]") {
    // x holds noise; a memset enqueued on the (non-blocking) stream before the
    // call sets every feature to 0.25. Run in order, every key equals every
    // query, so y = 0.25 exactly and lse = log(number of allowed keys).
    const int64_t T = 4096, H = 8, D = 64;
    const gka_shape shape{1, T, H, D};
    std::vector<float> noise(T * H * D);
    for (size_t k = 0; k < noise.size(); k++) noise[k] = float((k * 2654435761u) % 1000) / 100.0f;
    DeviceArray x(noise), sigma(std::vector<float>(H, 1.0f)), y(noise.size()), lse(T * H);
    Stream stream;
    float quarter = 0.25f;
    unsigned bits;
    std::memcpy(&bits, &quarter, 4);
    REQUIRE(cu.cuMemsetD32Async(x.ptr, bits, noise.size(), stream.s) == 0);
    REQUIRE(gka_forward_cuda(shape, causal, x.f(), sigma.f(), y.f(), lse.f(), stream.s) == GKA_OK);
    stream.sync();
    const std::vector<float> yv = y.download(), lv = lse.download();
    for (float v : yv) REQUIRE(v == Approx(0.25f).epsilon(1e-6));
    for (int64_t h = 0; h < H; h++) {
        for (int64_t t = 0; t < T; t += 511) REQUIRE(lv[h * T + t] == Approx(std::log(double(t + 1))).epsilon(1e-5));
    }
}

// gka.h: with no context current on the calling thread, the calls run in
// device 0's primary context, libgka's own driver calls included (the fills of
// a pairless chunk, decode's cache update), which need a current context too.
TEST_CASE("cuda: with no current context, device 0's primary context serves every call", "[cuda]") {
    const int64_t D = 64, H = 2, Tq = 16, K = 16, capacity = 8;
    const gka_shape shape{1, Tq, H, D};
    const auto p = gka_ref::make_problem(shape, causal, {0.5f, 2.0f}, 1.5, 11);
    const size_t n = p.x.size();
    DeviceArray<> x(p.x), keys(p.x), sigma(p.sigma), dy(p.dy), y(std::vector<float>(n, 42.0f)),
        lse(std::vector<float>(H * Tq, 42.0f)), dx(std::vector<float>(n, 42.0f)), dk(std::vector<float>(n, 42.0f)),
        ds(std::vector<float>(H, 42.0f)), cache(std::vector<float>(capacity * H * D, 0.0f)),
        yd(n), lsed(H * Tq);
    Stream stream;
    gka_cuda::CUcontext primary = nullptr;
    REQUIRE(cu.cuCtxGetCurrent(&primary) == 0);
    REQUIRE(cu.cuCtxSetCurrent(nullptr) == 0);
    const gka_chunk pairless{0, 100, K};  // keys after every query: no causal pair
    const int64_t lens[] = {5};
    const gka_status chunk_forward =
        gka_forward_chunk_cuda(shape, pairless, causal, x.f(), keys.f(), sigma.f(), y.f(), lse.f(), stream.s);
    const std::string chunk_forward_error = gka_last_error();
    const gka_status chunk_backward = gka_backward_chunk_cuda(shape, pairless, causal, x.f(), keys.f(), sigma.f(),
                                                              y.f(), lse.f(), dy.f(), dx.f(), dk.f(), ds.f(), stream.s);
    const std::string chunk_backward_error = gka_last_error();
    const gka_status decoded = gka_decode_cuda(shape, capacity, gka_window{7, 0}, x.f(), sigma.f(), lens, cache.f(), yd.f(),
                                               lsed.f(), stream.s);
    const std::string decode_error = gka_last_error();
    // Varlen: its scratch, 2D copies and host sum of dsigma; sequences of 5 and 11.
    const int64_t cu_seqlens[] = {0, 5, Tq};
    const gka_shape packed{2, Tq, H, D};
    DeviceArray<> vy(n), vlse(H * Tq), vdx(n), vds(H);
    gka_status varlen = gka_forward_varlen_cuda(packed, cu_seqlens, causal, x.f(), sigma.f(), vy.f(), vlse.f(), stream.s);
    if (varlen == GKA_OK) {
        varlen = gka_backward_varlen_cuda(packed, cu_seqlens, causal, x.f(), sigma.f(), vy.f(), vlse.f(), dy.f(),
                                          vdx.f(), vds.f(), stream.s);
    }
    const std::string varlen_error = gka_last_error();
    gka_cuda::CUcontext during = nullptr;
    cu.cuCtxGetCurrent(&during);
    REQUIRE(cu.cuCtxSetCurrent(primary) == 0);
    CHECK(during == nullptr);  // libgka left the thread as it found it
    INFO(chunk_forward_error << " / " << chunk_backward_error << " / " << decode_error << " / " << varlen_error);
    REQUIRE(varlen == GKA_OK);
    REQUIRE(chunk_forward == GKA_OK);
    REQUIRE(chunk_backward == GKA_OK);
    REQUIRE(decoded == GKA_OK);
    stream.sync();
    // 16 new tokens after 5 into a ring of 8: the last 8 in slots (5 + q) % 8,
    // which wrap.
    const std::vector<float> ring = cache.download();
    for (int64_t q = Tq - capacity; q < Tq; q++) {
        const int64_t slot = (lens[0] + q) % capacity;
        REQUIRE(std::equal(&p.x[q * H * D], &p.x[(q + 1) * H * D], &ring[slot * H * D]));
    }
    for (float v : y.download()) REQUIRE(v == 0.0f);
    for (float v : lse.download()) REQUIRE(v == -std::numeric_limits<float>::infinity());
    for (const DeviceArray<> *a : {&dx, &dk, &ds}) {
        for (float v : a->download()) REQUIRE(v == 0.0f);
    }
}

int main(int argc, char **argv) {
    const std::string why = gka_cuda::load(cu);
    if (!why.empty() || !gka_cuda_available()) {
        std::printf("SKIP: no CUDA device: %s\n", why.empty() ? gka_last_error() : why.c_str());
        return gka_cuda::skip_code;
    }
    std::printf("CUDA device 0: %s\n", gka_cuda::device_name(cu).c_str());
    return Catch::Session().run(argc, argv);
}
