// One shape far past the other tests' sizes: forward and backward run, rows
// at the start, middle and end of the sequence meet the accuracy contract, and
// the peak memory each pass adds beyond the caller's tensors is reported as a
// multiple of one tensor: resident (VmHWM) and as the kernels' working
// buffers count it (gka_memory_usage). Exit 77 (CTest: Skipped), saying why, where the host
// has too little memory for it.
// Usage: gka_large_input B T H D left right
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "contract.h"
#include "random_problem.h"

namespace {

// A /proc/self/status or /proc/meminfo field, in KiB.
int64_t kib(const char *file, const std::string &field) {
    std::ifstream in(file);
    for (std::string line; std::getline(in, line);)
        if (line.rfind(field + ":", 0) == 0) return std::atoll(line.c_str() + field.size() + 1);
    return -1;
}

// Resets the peak resident size (VmHWM) to the current one.
void reset_peak() { std::ofstream("/proc/self/clear_refs") << "5"; }

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char **argv) {
    if (argc != 7) {
        std::fprintf(stderr, "usage: %s B T H D left right\n", argv[0]);
        return 2;
    }
    const gka_shape shape{std::atoll(argv[1]), std::atoll(argv[2]), std::atoll(argv[3]), std::atoll(argv[4])};
    const gka_window window{std::atoll(argv[5]), std::atoll(argv[6])};
    const int64_t n = shape.batch * shape.seq_len * shape.heads * shape.head_dim;
    const int64_t rows = shape.batch * shape.heads * shape.seq_len;
    const double tensor_gib = double(n) * 4 / (1 << 30);
    // x, y, dy, dx, and what the passes add (at most 4 tensors, as measured).
    const double needed_gib = 8 * tensor_gib, available_gib = double(kib("/proc/meminfo", "MemAvailable")) / (1 << 20);
    std::printf("B=%lld T=%lld H=%lld D=%lld window (%lld, %lld): %lld elements, %.2f GiB a tensor\n",
                (long long)shape.batch, (long long)shape.seq_len, (long long)shape.heads, (long long)shape.head_dim,
                (long long)window.left, (long long)window.right, (long long)n, tensor_gib);
    if (available_gib < needed_gib) {
        std::printf("SKIP: needs about %.0f GiB of memory (4 tensors and the passes' own), the host has %.1f GiB "
                    "available\n", needed_gib, available_gib);
        return 77;
    }
    std::vector<float> x(n), dy(n), sigma(shape.heads), y(n), lse(rows), dx(n), dsigma(shape.heads);
    for (int64_t k = 0; k < n; k++) {
        x[k] = gka_test::hashed_feature(2 * uint64_t(k));  // fast at 2^29 elements
        dy[k] = gka_test::hashed_feature(2 * uint64_t(k) + 1);
    }
    for (int64_t h = 0; h < shape.heads; h++) sigma[h] = float(std::sqrt(double(shape.head_dim)) * (0.5 + 0.25 * h));
    // Every output page touched, so that the peak counts the library's memory only.
    for (auto *v : {&y, &lse, &dx, &dsigma}) std::fill(v->begin(), v->end(), 0.0f);

    int failures = 0;
    auto pass = [&](const char *name, auto call) {
        const int64_t before = kib("/proc/self/status", "VmRSS");
        reset_peak();
        gka_reset_memory_peak();
        const auto start = std::chrono::steady_clock::now();
        const gka_status status = call();
        const double took = seconds_since(start);
        const double added_gib = double(kib("/proc/self/status", "VmHWM") - before) / (1 << 20);
        const double working_gib = double(gka_memory_usage().peak) / (1 << 30);
        std::printf("%s: %s in %.1f s (%s, %d threads); peak memory beyond the caller's tensors %.2f GiB = %.2f "
                    "tensors (resident), working buffers %.2f GiB = %.2f tensors (gka_memory_usage)\n", name,
                    status == GKA_OK ? "ok" : gka_last_error(), took, gka_last_kernel(), gka_num_threads(),
                    added_gib, added_gib / tensor_gib, working_gib, working_gib / tensor_gib);
        failures += status != GKA_OK;
    };
    gka_call call = gka_call_init();
    call.shape = shape, call.window = window;
    call.x = x.data(), call.sigma = sigma.data(), call.y = y.data(), call.lse = lse.data();
    call.dy = dy.data(), call.dx = dx.data(), call.dsigma = dsigma.data();
    pass("forward", [&] { return gka_run_forward(&call); });
    pass("backward", [&] { return gka_run_backward(&call); });
    for (float s : dsigma) failures += !std::isfinite(s);
    if (failures) return 1;

    // Slices of `slice` tokens at the start, middle and end of each sequence,
    // judged by the contract against the reference on the slice alone: the
    // rows whose keys, and whose keys' queries, all lie within it (dsigma, a
    // sum over the whole sequence, is left to the other tests).
    const int64_t reach = std::max<int64_t>(window.left, window.right), slice = std::min(shape.seq_len, 4 * reach + 256);
    if (window.left < 0 || window.right < 0) {
        std::printf("only windows bounded on both sides are judged in slices; outputs not judged\n");
        return 0;
    }
    const int64_t row_elems = shape.heads * shape.head_dim;
    for (int64_t b = 0; b < shape.batch; b++)
        for (int64_t start : {int64_t(0), (shape.seq_len - slice) / 2, shape.seq_len - slice}) {
            gka_ref::Problem p{{1, slice, shape.heads, shape.head_dim}, window, {}, sigma, {}};
            gka_test::Outputs out;
            const int64_t first = (b * shape.seq_len + start) * row_elems, count = slice * row_elems;
            p.x.assign(x.begin() + first, x.begin() + first + count);
            p.dy.assign(dy.begin() + first, dy.begin() + first + count);
            out.y.assign(y.begin() + first, y.begin() + first + count);
            out.dx.assign(dx.begin() + first, dx.begin() + first + count);
            for (int64_t h = 0; h < shape.heads; h++)
                for (int64_t t = 0; t < slice; t++)
                    out.lse.push_back(lse[(b * shape.heads + h) * shape.seq_len + start + t]);
            out.dsigma.assign(shape.heads, 0.0f);
            const gka_test::Tokens judged{start == 0 ? 0 : 2 * reach,
                                          start + slice == shape.seq_len ? slice : slice - 2 * reach};
            const gka_test::Report r = gka_test::compare(p, out, judged);
            std::printf("batch %lld, tokens %lld + [%lld, %lld): error / bound y %.3g, lse %.3g, dx %.3g%s\n",
                        (long long)b, (long long)start, (long long)judged.begin, (long long)judged.end, r.y.ratio,
                        r.lse.ratio, r.dx.ratio, r.holds() ? "" : "  FAIL");
            failures += !r.holds();
        }
    return failures ? 1 : 0;
}
