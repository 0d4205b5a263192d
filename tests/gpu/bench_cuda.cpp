// GPU benchmark of libgka's CUDA kernels: forward and backward TFLOP/s by
// docs/spec.md's accounting (4*D*pairs forward, 10*D*pairs backward), timed with CUDA
// events on the caller's stream after warm-up, for B=1, H=8, T in {2048, 4096,
// 16384}, D in {64, 128}, windows causal and (255, 0). Prints a markdown table
// and writes it to --out. Exits 77 (skipped) without a usable GPU.
//   gka_bench_cuda [--out file.md] [--smoke] [--min-seconds s]
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cuda_driver.h"
#include "reference.h"

namespace {

gka_cuda::Driver cu;

struct Timing {
    double fwd_ms, bwd_ms;
};

bool check(gka_status s, const char *what) {
    if (s != GKA_OK) std::fprintf(stderr, "%s failed: %s\n", what, gka_last_error());
    return s == GKA_OK;
}

// Median-free but stable: warm-up, then enough back-to-back calls between two
// events to fill min_seconds (at least 3, at most 50), averaged.
bool time_shape(gka_shape shape, gka_window w, double min_seconds, gka_cuda::CUstream stream, Timing &out) {
    const size_t n = shape.batch * shape.seq_len * shape.heads * shape.head_dim, rows = shape.batch * shape.heads * shape.seq_len;
    std::vector<float> host(n);
    uint64_t state = 12345;
    for (float &v : host) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        v = float((state >> 40) % 2000) / 1000.0f - 1.0f;
    }
    std::vector<float> sig(shape.heads, std::sqrt(float(shape.head_dim)) * 0.3f);
    gka_cuda::CUdeviceptr x, sigma, y, lse, dy, dx, dsigma;
    for (auto [p, bytes] : {std::pair{&x, n}, {&y, n}, {&dy, n}, {&dx, n}, {&lse, rows}, {&sigma, size_t(shape.heads)},
                            {&dsigma, size_t(shape.heads)}}) {
        if (cu.cuMemAlloc(p, bytes * 4) != 0) return false;
    }
    cu.cuMemcpyHtoD(x, host.data(), n * 4);
    cu.cuMemcpyHtoD(dy, host.data(), n * 4);
    cu.cuMemcpyHtoD(sigma, sig.data(), sig.size() * 4);
    auto F = [](gka_cuda::CUdeviceptr p) { return reinterpret_cast<float *>(p); };
    auto fwd = [&] { return check(gka_forward_cuda(shape, w, F(x), F(sigma), F(y), F(lse), stream), "forward"); };
    auto bwd = [&] {
        return check(gka_backward_cuda(shape, w, F(x), F(sigma), F(y), F(lse), F(dy), F(dx), F(dsigma), stream),
                     "backward");
    };
    gka_cuda::CUevent start, stop;
    cu.cuEventCreate(&start, 0);
    cu.cuEventCreate(&stop, 0);
    auto measure = [&](auto &&call, double &ms) {
        if (!call() || !call()) return false;  // warm-up: module load, JIT, scratch allocations
        cu.cuEventRecord(start, stream);
        if (!call()) return false;
        cu.cuEventRecord(stop, stream);
        cu.cuEventSynchronize(stop);
        float once = 0;
        cu.cuEventElapsedTime(&once, start, stop);
        int iterations = int(std::min(50.0, std::max(3.0, min_seconds * 1000.0 / std::max(once, 1e-3f))));
        cu.cuEventRecord(start, stream);
        for (int k = 0; k < iterations; k++) {
            if (!call()) return false;
        }
        cu.cuEventRecord(stop, stream);
        cu.cuEventSynchronize(stop);
        float total = 0;
        cu.cuEventElapsedTime(&total, start, stop);
        ms = total / iterations;
        return true;
    };
    bool ok = measure(fwd, out.fwd_ms) && measure(bwd, out.bwd_ms);
    for (auto p : {x, y, dy, dx, lse, sigma, dsigma}) cu.cuMemFree(p);
    return ok;
}

}  // namespace

int main(int argc, char **argv) {
    std::string out_path;
    bool smoke = false;
    double min_seconds = 0.2;
    for (int k = 1; k < argc; k++) {
        if (!std::strcmp(argv[k], "--out") && k + 1 < argc) out_path = argv[++k];
        else if (!std::strcmp(argv[k], "--smoke")) smoke = true;
        else if (!std::strcmp(argv[k], "--min-seconds") && k + 1 < argc) min_seconds = std::atof(argv[++k]);
        else {
            std::fprintf(stderr, "usage: %s [--out file.md] [--smoke] [--min-seconds s]\n", argv[0]);
            return 2;
        }
    }
    const std::string why = gka_cuda::load(cu);
    if (!why.empty() || !gka_cuda_available()) {
        std::printf("SKIP: no CUDA device: %s\n", why.empty() ? gka_last_error() : why.c_str());
        return gka_cuda::skip_code;
    }
    gka_cuda::CUstream stream;
    cu.cuStreamCreate(&stream, 1);
    std::string table = "GKA CUDA kernels on " + gka_cuda::device_name(cu) +
                        ", B=1 H=8, TFLOP/s by docs/spec.md (fwd 4*D*pairs, bwd 10*D*pairs), CUDA events on one stream\n\n"
                        "| T | D | window | fwd ms | fwd TFLOP/s | bwd ms | bwd TFLOP/s |\n| --- | --- | --- | --- | --- | --- | --- |\n";
    std::vector<int64_t> lengths = smoke ? std::vector<int64_t>{256} : std::vector<int64_t>{2048, 4096, 16384};
    std::vector<int64_t> dims = smoke ? std::vector<int64_t>{64} : std::vector<int64_t>{64, 128};
    int failures = 0;
    for (int64_t T : lengths) {
        for (int64_t D : dims) {
            for (gka_window w : {gka_window{-1, 0}, gka_window{255, 0}}) {
                const gka_shape shape{1, T, 8, D};
                const double pairs = double(gka_ref::allowed_pairs(shape, w));
                Timing t{};
                char row[256];
                if (!time_shape(shape, w, smoke ? 0.01 : min_seconds, stream, t)) {
                    failures++;
                    std::snprintf(row, sizeof row, "| %lld | %lld | %s | failed: %s | | | |\n", (long long)T,
                                  (long long)D, w.left < 0 ? "causal" : "(255, 0)", gka_last_error());
                } else {
                    std::snprintf(row, sizeof row, "| %lld | %lld | %s | %.3f | %.2f | %.3f | %.2f |\n", (long long)T,
                                  (long long)D, w.left < 0 ? "causal" : "(255, 0)", t.fwd_ms,
                                  4 * D * pairs / (t.fwd_ms * 1e9), t.bwd_ms, 10 * D * pairs / (t.bwd_ms * 1e9));
                }
                std::fputs(row, stdout);
                std::fflush(stdout);
                table += row;
            }
        }
    }
    if (!out_path.empty()) {
        FILE *f = std::fopen(out_path.c_str(), "w");
        if (!f) {
            std::fprintf(stderr, "cannot write %s\n", out_path.c_str());
            return 1;
        }
        std::fputs(table.c_str(), f);
        std::fclose(f);
    }
    cu.cuStreamDestroy(stream);
    return failures ? 1 : 0;
}
