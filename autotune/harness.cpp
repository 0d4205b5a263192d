// One autotuning trial: checks a candidate kernel against the double reference
// on a small problem, then times it interleaved with the default-knob kernel
// (same target, same shape) so that the machine's drift cancels in the ratio.
//   harness T left right head_dim heads [check_T check_heads]
// Built with GKA_SWEEP (a GPU family's sweep, autotune/gpu_sweep.py), it holds
// many candidates and runs the one its first argument numbers:
//   sweep POINT T left right head_dim heads [check_T check_heads]
// On a GPU the kernels copy their inputs to the device on the first call and
// keep them there; each timed run ends when the device has finished.
// (Halide's autoschedulers tile for the shape they planned for and fail on
// smaller ones: compare.py checks them on the timed shape itself.)
// prints: "ok <candidate ms> <default ms> <speed-up>", "wrong <what>" or, when the
// harness itself fails (the backward's inputs), "broken <what>"; exit 0 each time.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "HalideBuffer.h"
#include "HalideRuntime.h"
#include "baseline.h"
#include "block_cache.h"
#ifdef GKA_SWEEP
#include "points.h"  // kPoints, the sweep's candidates (gpu_sweep.py writes it)
#else
#include "candidate.h"
#endif
#include "contract.h"
#include "reference.h"
#ifndef GKA_TUNE_FORWARD
#include "forward_inputs.h"
#endif

using Halide::Runtime::Buffer;

namespace {

#ifdef GKA_SWEEP
decltype(&baseline) candidate = nullptr;  // the point the command line names
#endif

struct Problem {
    gka_ref::Problem p;
    Buffer<float, 4> x, y, dy, dx;
    Buffer<float, 1> sigma, dsigma;
    Buffer<float, 3> lse;
    Buffer<float, 2> spread;

    explicit Problem(gka_ref::Problem problem) : p(std::move(problem)) {
        const auto &s = p.shape;
        const int D = int(s.head_dim), H = int(s.heads), T = int(s.seq_len), B = int(s.batch);
        x = Buffer<float, 4>(p.x.data(), D, H, T, B);
        dy = Buffer<float, 4>(p.dy.data(), D, H, T, B);
        y = Buffer<float, 4>(D, H, T, B);
        dx = Buffer<float, 4>(D, H, T, B);
        sigma = Buffer<float, 1>(p.sigma.data(), H);
        dsigma = Buffer<float, 1>(H);
        lse = Buffer<float, 3>(T, H, B);
        spread = Buffer<float, 2>(H, B);
        x.set_host_dirty();
        dy.set_host_dirty();
        sigma.set_host_dirty();
    }
};

template<typename Kernel>
int run(Kernel kernel, Problem &q) {
    const int left = int(q.p.window.left), right = int(q.p.window.right);
#ifdef GKA_TUNE_FORWARD
    return kernel(q.x, q.sigma, left, right, q.y, q.lse, q.spread);
#else
    return kernel(q.x, q.sigma, q.y, q.lse, q.dy, left, right, q.dx, q.dsigma, q.spread);
#endif
}

// The candidate's outputs judged by docs/spec.md's accuracy contract, the test
// suite's own metric (oracle/contract.h): a candidate accepted here passes
// `make test`. The backward is fed the reference's y and lse, rounded to
// fp32 as a trainer's are.
std::string check(Problem &q) {
    const gka_ref::Forward f = gka_ref::forward(q.p);
    gka_test::Outputs out;
#ifdef GKA_TUNE_FORWARD
    if (run(candidate, q) != 0) return "kernel failed";
    q.y.copy_to_host();
    q.lse.copy_to_host();
    out.y.assign(q.y.data(), q.y.data() + q.p.size());
    out.lse.assign(q.lse.data(), q.lse.data() + q.p.rows());
#else
    for (int64_t k = 0; k < q.p.size(); k++) q.y.data()[k] = float(f.y[k]);
    for (int64_t k = 0; k < q.p.rows(); k++) q.lse.data()[k] = float(f.lse[k]);
    q.y.set_host_dirty();
    q.lse.set_host_dirty();
    if (run(candidate, q) != 0) return "kernel failed";
    q.dx.copy_to_host();
    q.dsigma.copy_to_host();
    out.y.assign(q.y.data(), q.y.data() + q.p.size());
    out.lse.assign(q.lse.data(), q.lse.data() + q.p.rows());
    out.dx.assign(q.dx.data(), q.dx.data() + q.p.size());
    out.dsigma.assign(q.dsigma.data(), q.dsigma.data() + q.p.shape.heads);
#endif
    const gka_test::Report r = gka_test::compare(q.p, out);
    if (r.holds()) return "";
    for (const gka_test::Worst *w : {&r.y, &r.lse, &r.dx, &r.dsigma}) {
        if (w->ratio > 1) return w->where + " off by " + std::to_string(w->ratio) + "x its bound";
    }
    return "the contract";
}

template<typename Kernel>
double seconds(Kernel kernel, Problem &q) {
    auto start = std::chrono::steady_clock::now();
    run(kernel, q);
#ifdef GKA_TUNE_FORWARD
    q.y.device_sync();
#else
    q.dx.device_sync();
#endif
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// Set while the forward makes the backward's inputs: its failure is no fault of
// the candidate's.
bool making_inputs = false;

// A kernel that fails reports why, as a wrong trial, instead of aborting.
void report_error(void *, const char *message) {
    std::printf("%s halide error: %s\n", making_inputs ? "broken" : "wrong", message);
    std::exit(0);
}

}  // namespace

int main(int argc, char **argv) {
    halide_set_error_handler(report_error);
    // libgka's register cap for the CUDA JIT (runtime/cuda_driver.cpp): under
    // Halide's default of 64 the kernels spill, and would be timed as no user runs them.
    setenv("HL_CUDA_JIT_MAX_REGISTERS", "255", 0);
    // libgka's allocator: with malloc's, each call's large working buffers were
    // mmap'ed afresh or not depending on what the other kernel had freed (157k
    // page faults a run against 26k), which skewed scores by up to 15%.
    gka::install_block_cache();
#ifdef GKA_SWEEP
    const int points = int(sizeof(kPoints) / sizeof(kPoints[0]));
    const int point = argc > 1 ? std::atoi(argv[1]) : -1;
    if (point < 0 || point >= points) {
        std::fprintf(stderr, "usage: sweep POINT T left right head_dim heads [check_T check_heads] (POINT < %d)\n",
                     points);
        return 2;
    }
    candidate = kPoints[point];
    argc--, argv++;
#endif
    if (argc != 6 && argc != 8) {
        std::fprintf(stderr, "usage: harness T left right head_dim heads [check_T check_heads]\n");
        return 2;
    }
    const int64_t T = std::atoll(argv[1]), D = std::atoll(argv[4]), H = std::atoll(argv[5]);
    const gka_window w{std::atoll(argv[2]), std::atoll(argv[3])};

    // A ragged length by default; sigmas of different scales.
    const int64_t check_T = argc == 8 ? std::atoll(argv[6]) : 269, check_H = argc == 8 ? std::atoll(argv[7]) : 2;
    std::vector<float> sigmas(check_H);
    for (int64_t h = 0; h < check_H; h++) sigmas[h] = 0.7f + 1.3f * float(h % 2);
    Problem small(gka_ref::make_problem({1, check_T, check_H, D}, w, sigmas, 1.5, 7));
    if (const std::string what = check(small); !what.empty()) {
        std::printf("wrong %s\n", what.c_str());
        return 0;
    }
    Problem big(gka_ref::make_problem({1, T, H, D}, w, std::vector<float>(H, 1.0f), 1.5, 8));
#ifndef GKA_TUNE_FORWARD
    // The backward reads y and lse: the forward's, as in training. (Left
    // uninitialized, they held whatever the process had freed, at times
    // denormals, which slowed both kernels up to 2.8x.)
    making_inputs = true;
    if (forward_inputs(big.x, big.sigma, int(w.left), int(w.right), big.y, big.lse, big.spread) != 0) {
        std::printf("broken the forward that makes the backward's inputs failed\n");
        return 0;
    }
    making_inputs = false;
#endif
    if (run(candidate, big) != 0 || run(baseline, big) != 0) {
        std::printf("wrong kernel failed on the timed shape\n");
        return 0;
    }
    // Pairs of runs, which kernel goes first alternating, until the pairs add up
    // to a second (at least 5): a short shape gets more pairs, so that its score
    // is no noisier than a long one's. The score is the median of the pairs'
    // ratios, each taken over two runs moments apart.
    std::vector<double> cand, base, ratio;
    double spent = 0;
    for (int r = 0; r < 301 && (r < 5 || spent < 1.0); r++) {
        const bool candidate_first = r % 2 == 0;
        const double first = seconds(candidate_first ? candidate : baseline, big);
        const double second = seconds(candidate_first ? baseline : candidate, big);
        cand.push_back(candidate_first ? first : second);
        base.push_back(candidate_first ? second : first);
        ratio.push_back(base.back() / cand.back());
        spent += first + second;
    }
    std::printf("ok %.4f %.4f %.4f\n", median(cand) * 1e3, median(base) * 1e3, median(ratio));
    return 0;
}
