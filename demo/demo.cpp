// A short demonstration on this machine: GKA forward and backward through libgka
// on a language-model-sized shape, checked against the double reference loops
// (on one head, which costs seconds), with times and GFLOP/s (docs/spec.md's accounting).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "gka/gka.h"
#include "reference.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
}

// Median of `runs` timed calls after one warm-up.
template<typename F>
double median_seconds(F call, int runs = 5) {
    call();
    std::vector<double> t;
    for (int k = 0; k < runs; k++) {
        auto start = Clock::now();
        call();
        t.push_back(seconds_since(start));
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

// max |a - ref| / max |ref| over head 0: `width` values a token, `stride` apart in `a`, packed in `ref`.
double head0_error(const std::vector<float> &a, const std::vector<double> &ref, const gka_ref::Problem &p,
                   int64_t stride, int64_t width) {
    double err = 0, scale = 0;
    for (int64_t t = 0; t < p.shape.seq_len; t++)
        for (int64_t d = 0; d < width; d++) {
            const int64_t k = t * stride + d, kr = t * width + d;
            err = std::max(err, std::abs(a[k] - ref[kr]));
            scale = std::max(scale, std::abs(ref[kr]));
        }
    return err / scale;
}

void check(gka_status s) {
    if (s != GKA_OK) {
        std::fprintf(stderr, "gka_demo: %s\n", gka_last_error());
        std::exit(1);
    }
}

}  // namespace

int main() {
    const gka_shape shape{1, 2048, 8, 64};
    const int64_t H = shape.heads, D = shape.head_dim, T = shape.seq_len;
    std::printf("gka demo: B=%lld T=%lld H=%lld D=%lld float32, CPU family %s, %d threads\n\n",
                (long long)shape.batch, (long long)T, (long long)H, (long long)D, gka_cpu_family(), gka_num_threads());
    std::printf("%-12s %-9s %10s %9s %14s   %-30s %s\n", "window", "pass", "time (ms)", "GFLOP/s", "reference (ms)",
                "max error / max |ref| (head 0)", "kernel variant that ran");

    std::vector<float> sigma(H);
    for (int64_t h = 0; h < H; h++) sigma[h] = 0.5f + 0.25f * h;
    for (gka_window w : {gka_window{-1, 0}, gka_window{255, 0}}) {
        const gka_ref::Problem p = gka_ref::make_problem(shape, w, sigma, 1.5, 42);
        std::vector<float> y(p.size()), lse(p.rows()), dx(p.size()), dsigma(H);
        const double pairs = double(gka_ref::allowed_pairs(shape, w));
        gka_call call = gka_call_init();  // float32, the Gaussian, on the CPU
        call.shape = shape, call.window = w;
        call.x = p.x.data(), call.sigma = p.sigma.data(), call.y = y.data(), call.lse = lse.data();
        call.dy = p.dy.data(), call.dx = dx.data(), call.dsigma = dsigma.data();
        const double fwd = median_seconds([&] { check(gka_run_forward(&call)); });
        const std::string fwd_kernel = gka_last_kernel();  // the shape class's variant (schedules/tuned.tsv)
        const double bwd = median_seconds([&] { check(gka_run_backward(&call)); });
        const std::string bwd_kernel = gka_last_kernel();

        // Head 0 alone, through the reference loops.
        gka_ref::Problem one{{1, T, 1, D}, w, {}, {sigma[0]}, {}};
        for (int64_t t = 0; t < T; t++) {
            one.x.insert(one.x.end(), &p.x[p.at(0, t, 0)], &p.x[p.at(0, t, 0)] + D);
            one.dy.insert(one.dy.end(), &p.dy[p.at(0, t, 0)], &p.dy[p.at(0, t, 0)] + D);
        }
        auto start = Clock::now();
        const gka_ref::Forward rf = gka_ref::forward(one);
        const double ref_fwd = seconds_since(start) * H;
        start = Clock::now();
        const gka_ref::Backward rb = gka_ref::backward(one, rf);
        const double ref_bwd = seconds_since(start) * H;

        char name[32];
        std::snprintf(name, sizeof name, "(%lld, %lld)", (long long)w.left, (long long)w.right);
        const double y_err = head0_error(y, rf.y, p, H * D, D);
        std::vector<float> lse0(lse.begin(), lse.begin() + T);
        const double lse_err = head0_error(lse0, rf.lse, one, 1, 1);
        std::printf("%-12s %-9s %10.2f %9.1f %14.0f   y %.1e, lse %.1e    %s\n", name, "forward", fwd * 1e3,
                    4 * D * pairs / fwd * 1e-9, ref_fwd * 1e3, y_err, lse_err, fwd_kernel.c_str());
        const double dx_err = head0_error(dx, rb.dx, p, H * D, D);
        const double ds_err = std::abs(dsigma[0] - rb.dsigma[0]) / std::abs(rb.dsigma[0]);
        std::printf("%-12s %-9s %10.2f %9.1f %14.0f   dx %.1e, dsigma %.1e   %s\n", name, "backward", bwd * 1e3,
                    10 * D * pairs / bwd * 1e-9, ref_bwd * 1e3, dx_err, ds_err, bwd_kernel.c_str());
    }
    std::printf("\nreference (ms): the double-precision loops of oracle/reference.cpp, timed on head 0 and x%lld heads.\n",
                (long long)H);
    return 0;
}
