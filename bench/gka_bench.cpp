// GKA kernels per CPU family against the yardsticks of the same run.
//   gka_bench [--quick | --smoke] [Google Benchmark flags]
// Default (full): T in {512 .. 16384}, D in {64, 128}, windows full, causal and
// (255, 0), forward, backward and both, every family this host runs. --quick is
// a subset sized for CI-like runs; --smoke proves the suite works in seconds.
// The inputs are smooth (x of scale 1/8, sigma 1: scores near -D/64), and for
// the best family also sharp ("causal_sharp": x of scale 1.5, scores near
// -2.25 D, most weights at exp's floor of e^-87), where denormal sums would
// make the kernels 20-50x slower were they not flushed to zero.
// The bfloat16 calls run beside them on the best family ("fwd_bf16", "bwd_bf16").
// The head-dim sweep ("dims/<family>/<pass>/<window>/D=<D>/T=4096"): causal and
// (255, 0), both element types, D from 16 to 256, on the best family.
// Decode ("decode/<window>/D=64/T=<cache length>"): one new token a step
// against a cache of T tokens (causal: all of them; w255: a ring of 255 slots),
// with its cache bytes read per second (counter GB) beside the machine's read
// bandwidth in the same run (memory/read). Varlen ("varlen/.../<how>"): packed
// documents of mixed lengths in one call, in a call each, and padded. Chunks
// ("chunks/.../T=<T>/4"): a causal sequence in 4 chunks, every pair's kernels.
// Random-feature GKA ("features/<family>/<pass>/causal/D=64/M=<M>/T=<T>"): its
// kernels at M features a head, beside exact GKA's ("M=exact") up to 16384.
// Kernel functions ("kernels/.../<kernel>"): the forward and backward with each
// kernel function (gka_call.kernel), one after another for each shape, on the
// best family at the sharp cases' T.
// Counters (rates): GFLOP by docs/spec.md's accounting (forward 4*D*pairs, backward 10*D*pairs)
// and pairs/s. Benchmarks measure; they assert nothing.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "../generators/kernel_function.h"
#include "bfloat16.h"
#include "families.h"
#include "gka/gka.h"
#include "reference.h"
#include "yardsticks.h"

namespace {

using benchmark::Counter;

struct Mode {
    std::vector<int64_t> seq_lens, head_dims;
    std::vector<std::pair<std::string, gka_window>> windows;
    std::vector<std::string> passes;
    std::vector<std::string> families;       // empty: every runnable family
    int64_t slow_family_max_seq_len;         // generic and avx2 stop here (they are slow)
    int64_t sgemm_size, unfused_max_seq_len, naive_seq_len;
    int64_t sharp_seq_len;                   // T of the sharp-input cases
    std::vector<int64_t> decode_lengths;     // cache lengths of the decode steps
    std::vector<int64_t> documents;          // lengths of the varlen cases' packed sequences
    std::vector<int64_t> swept_head_dims;    // the head-dim sweep's D (at the sharp cases' T)
    std::vector<int64_t> feature_counts;     // random-feature GKA's M
    std::vector<int64_t> feature_seq_lens;   // its T, and exact GKA's beside it up to exact_max_seq_len
    int64_t exact_max_seq_len;
};

const std::pair<std::string, gka_window> full{"full", {-1, -1}}, causal{"causal", {-1, 0}}, w255{"w255", {255, 0}};

// Documents of a packed training batch: a few long, many short (12,004 tokens).
const std::vector<int64_t> mixed_documents{4096, 3000, 2048, 1024, 1000, 512, 256, 32, 17, 19};

Mode full_mode() {
    return {{512, 1024, 2048, 4096, 8192, 16384}, {64, 128}, {full, causal, w255}, {"fwd", "bwd", "fwdbwd"}, {},
            16384, 2048, 4096, 512, 4096, {1024, 4096, 16384, 32768, 65536}, mixed_documents,
            {16, 32, 48, 64, 80, 96, 128, 192, 256}, {64, 128, 256}, {1024, 4096, 16384, 65536}, 16384};
}
Mode quick_mode() {
    return {{1024, 4096, 16384}, {64, 128}, {causal, w255}, {"fwd", "bwd"}, {}, 1024, 2048, 4096, 512, 4096,
            {1024, 32768, 65536}, mixed_documents, {16, 32, 64, 96, 128, 256}, {128}, {4096, 16384}, 16384};
}
Mode smoke_mode() {
    return {{256}, {64}, {causal, w255}, {"fwd", "bwd", "fwdbwd"}, {}, 256, 256, 256, 64, 256, {256}, {100, 7, 60}, {16, 80}, {16}, {256}, 256};
}

// Feature scales (sigma 1): smooth inputs, and sharp ones whose far keys' weights
// sit at exp's floor (the sums denormal, were they not flushed).
constexpr float smooth_features = 1.0f / 8, sharp_features = 1.5f;

struct Data {
    gka_shape shape;
    std::vector<float> x, sigma, dy, y, lse, dx, dsigma;
    Data(gka_shape s, float feature_scale) : shape(s) {
        const int64_t n = s.batch * s.seq_len * s.heads * s.head_dim;
        std::mt19937 rng(1);
        std::normal_distribution<float> normal;
        for (auto *v : {&x, &dy, &y, &dx}) v->resize(n);
        for (int64_t k = 0; k < n; k++) x[k] = normal(rng) * feature_scale, dy[k] = normal(rng);
        sigma.assign(s.heads, 1.0f);
        dsigma.resize(s.heads);
        lse.resize(s.batch * s.heads * s.seq_len);
    }
};

void check(gka_status s) {
    if (s != GKA_OK) throw std::runtime_error(std::string("gka: ") + gka_last_error());
}

// The bfloat16 calls' tensors: the same values, rounded (the kernels' work is the same).
struct Bf16Data {
    std::vector<gka_bf16> x, dy, y, dx;
    explicit Bf16Data(const Data &d)
        : x(gka_test::to_bf16(d.x)), dy(gka_test::to_bf16(d.dy)), y(d.y.size()), dx(d.dx.size()) {}
};

// The description of a call on d's tensors (float32 unless the caller sets more).
gka_call described(Data &d, gka_window w) {
    gka_call c = gka_call_init();
    c.shape = d.shape, c.window = w;
    c.x = d.x.data(), c.sigma = d.sigma.data(), c.y = d.y.data(), c.lse = d.lse.data();
    c.dy = d.dy.data(), c.dx = d.dx.data(), c.dsigma = d.dsigma.data();
    return c;
}

// kernel_function_names' index of `name`, or -1.
int kernel_index(const std::string &name) {
    for (size_t k = 0; k < std::size(gka::kernel_function_names); k++)
        if (name == gka::kernel_function_names[k]) return int(k);
    return -1;
}

// pass: fwd, bwd or fwdbwd, with "_bf16" for bfloat16 features; kernel: the
// kernel function's name.
void gka_case(benchmark::State &state, std::string family, std::string pass, gka_window w, gka_shape shape,
              float feature_scale, std::string kernel) {
    if (gka_set_cpu_family(family.c_str()) != GKA_OK) {
        state.SkipWithError(gka_last_error());
        return;
    }
    if (kernel_index(kernel) < 0) {
        state.SkipWithError(("unknown kernel function " + kernel).c_str());
        return;
    }
    Data d(shape, feature_scale);
    const bool is_bf16 = pass.size() > 5 && pass.substr(pass.size() - 5) == "_bf16";
    if (is_bf16) pass.resize(pass.size() - 5);
    const std::unique_ptr<Bf16Data> bf16 = is_bf16 ? std::make_unique<Bf16Data>(d) : nullptr;
    gka_call c = described(d, w);
    c.kernel = gka_kernel_function(kernel_index(kernel));
    if (bf16) {
        c.dtype = GKA_BFLOAT16, c.x = bf16->x.data(), c.y = bf16->y.data(), c.dy = bf16->dy.data();
        c.dx = bf16->dx.data();
    }
    auto forward = [&] { check(gka_run_forward(&c)); };
    auto backward = [&] { check(gka_run_backward(&c)); };
    forward();
    const bool fwd = pass != "bwd", bwd = pass != "fwd";
    for (auto _ : state) {
        if (fwd) forward();
        if (bwd) backward();
    }
    const double pairs = double(gka_ref::allowed_pairs(shape, w));
    const double flops = (fwd ? 4.0 : 0.0) * shape.head_dim * pairs + (bwd ? 10.0 : 0.0) * shape.head_dim * pairs;
    state.counters["GFLOP"] = Counter(flops * 1e-9, Counter::kIsIterationInvariantRate);
    state.counters["pairs"] = Counter(pairs, Counter::kIsIterationInvariantRate);
    state.SetLabel(family + " " + std::to_string(gka_num_threads()) + " threads, " + gka_last_kernel());
}

void sgemm_case(benchmark::State &state, int64_t m, int64_t n, int64_t k) {
    std::vector<float> a(m * k, 0.5f), b(k * n, 0.25f), c(m * n);
    for (auto _ : state) gka_bench::sgemm(m, n, k, a.data(), b.data(), c.data());
    state.counters["GFLOP"] = Counter(2.0 * m * n * k * 1e-9, Counter::kIsIterationInvariantRate);
}

void unfused_case(benchmark::State &state, gka_window w, gka_shape shape) {
    Data d(shape, smooth_features);
    gka_bench::UnfusedForward unfused(shape);
    for (auto _ : state) unfused.run(w, d.x.data(), d.sigma.data(), d.y.data(), d.lse.data());
    const double pairs = double(gka_ref::allowed_pairs(shape, w));
    state.counters["GFLOP"] = Counter(4.0 * shape.head_dim * pairs * 1e-9, Counter::kIsIterationInvariantRate);
}

void naive_case(benchmark::State &state, gka_window w, gka_shape shape) {
    gka_ref::Problem p = gka_ref::make_problem(shape, w, std::vector<float>(shape.heads, 1.0f), 1.0, 1);
    for (auto _ : state) benchmark::DoNotOptimize(gka_ref::forward(p));
    const double pairs = double(gka_ref::allowed_pairs(shape, w));
    state.counters["GFLOP"] = Counter(4.0 * shape.head_dim * pairs * 1e-9, Counter::kIsIterationInvariantRate);
}

// One decode step of B=1, H=8, D=64 against a cache of `length` tokens: causal
// (a cache of length + 1 slots) or (W-1, 0) over a ring of W-1 slots.
void decode_case(benchmark::State &state, std::string family, gka_window w, int64_t length) {
    if (gka_set_cpu_family(family.c_str()) != GKA_OK) {
        state.SkipWithError(gka_last_error());
        return;
    }
    const gka_shape shape{1, 1, 8, 64};
    const int64_t row = shape.heads * shape.head_dim, capacity = w.left < 0 ? length + 1 : w.left;
    Data cache({1, capacity, shape.heads, shape.head_dim}, smooth_features);
    std::vector<float> x(cache.x.begin(), cache.x.begin() + row), y(row), lse(shape.heads);
    gka_call c = gka_call_init();
    c.shape = shape, c.window = w, c.cache_capacity = capacity, c.cache_lens = &length;
    c.x = x.data(), c.sigma = cache.sigma.data(), c.cache = cache.x.data(), c.y = y.data(), c.lse = lse.data();
    for (auto _ : state) check(gka_run_decode(&c));
    const double keys = double(std::min(length, w.left < 0 ? length : w.left));
    state.counters["GB"] = Counter(keys * row * sizeof(float) * 1e-9, Counter::kIsIterationInvariantRate);
    state.SetLabel(family + " " + std::to_string(gka_num_threads()) + " threads");
}

// Packed documents (B=1 each, H=8, D=64, causal), as `how` runs them: one
// varlen call ("varlen"), a call per document ("separate"), or a batch padded
// to the longest ("padded", what varlen spares). GFLOP counts the documents'
// own pairs in every case, so padding shows as a lower rate.
void varlen_case(benchmark::State &state, std::string family, std::string pass, std::string how,
                 std::vector<int64_t> lengths) {
    if (gka_set_cpu_family(family.c_str()) != GKA_OK) {
        state.SkipWithError(gka_last_error());
        return;
    }
    const gka_window w = causal.second;
    const int64_t H = 8, D = 64, row = H * D, longest = *std::max_element(lengths.begin(), lengths.end());
    std::vector<int64_t> cu{0};
    for (int64_t length : lengths) cu.push_back(cu.back() + length);
    const int64_t B = int64_t(lengths.size());
    Data d(how == "padded" ? gka_shape{B, longest, H, D} : gka_shape{1, cu.back(), H, D}, smooth_features);
    auto run = [&](bool forward) {
        auto one = [&](gka_call c) { check(forward ? gka_run_forward(&c) : gka_run_backward(&c)); };
        const gka_call whole = described(d, w);
        if (how == "padded") return one(whole);
        if (how == "varlen") {
            gka_call packed = whole;
            packed.shape = {B, cu.back(), H, D}, packed.cu_seqlens = cu.data();
            return one(packed);
        }
        for (int64_t s = 0; s < B; s++) {
            gka_call c = whole;
            const int64_t at = cu[s] * row;
            c.shape = {1, lengths[s], H, D}, c.lse = &d.lse[cu[s] * H];
            c.x = &d.x[at], c.y = &d.y[at], c.dy = &d.dy[at], c.dx = &d.dx[at];
            one(c);
        }
    };
    run(true);
    for (auto _ : state) run(pass == "fwd");
    double pairs = 0;
    for (int64_t length : lengths) pairs += double(gka_ref::allowed_pairs({1, length, H, D}, w));
    state.counters["GFLOP"] = Counter((pass == "fwd" ? 4.0 : 10.0) * D * pairs * 1e-9, Counter::kIsIterationInvariantRate);
    state.SetLabel(family + " " + std::to_string(gka_num_threads()) + " threads");
}

// A causal sequence of T tokens (B=1, H=8, D=64) cut into `chunks` equal chunks,
// every (query chunk, key chunk) pair run by the chunk kernels (the backward
// fed the one-call forward's y and lse, as merged ones): the cost of sequence
// parallelism's pieces beside the one-call rows (gka/...) of the same run.
// The merge itself is O(T*D) and not timed.
void chunk_case(benchmark::State &state, std::string family, std::string pass, int64_t T, int64_t chunks) {
    if (gka_set_cpu_family(family.c_str()) != GKA_OK) {
        state.SkipWithError(gka_last_error());
        return;
    }
    const gka_window w = causal.second;
    const int64_t size = T / chunks, row = 8 * 64;
    const gka_shape shape{1, size, 8, 64};
    Data d({1, T, 8, 64}, smooth_features);
    gka_call whole = described(d, w);
    check(gka_run_forward(&whole));
    std::vector<float> y(size * row), lse(8 * size), dx(size * row), dx_keys(size * row);
    std::vector<std::vector<float>> merged_lse(chunks, std::vector<float>(8 * size));  // [H][size] of each chunk
    for (int64_t q = 0; q < chunks; q++)
        for (int64_t h = 0; h < 8; h++) std::copy_n(&d.lse[h * T + q * size], size, &merged_lse[q][h * size]);
    for (auto _ : state) {
        for (int64_t q = 0; q < chunks; q++)
            for (int64_t k = 0; k <= q; k++) {  // causal: the later chunks have no pair
                const gka_chunk placement{q * size, k * size, size};
                gka_call c = gka_call_init();
                c.shape = shape, c.window = w, c.chunk = &placement, c.sigma = d.sigma.data();
                c.x = &d.x[q * size * row], c.keys = &d.x[k * size * row];
                if (pass == "fwd") {
                    c.y = y.data(), c.lse = lse.data();
                    check(gka_run_forward(&c));
                } else {
                    c.y = &d.y[q * size * row], c.lse = merged_lse[q].data(), c.dy = &d.dy[q * size * row];
                    c.dx = dx.data(), c.dx_keys = dx_keys.data(), c.dsigma = d.dsigma.data();
                    check(gka_run_backward(&c));
                }
            }
    }
    const double pairs = double(gka_ref::allowed_pairs(d.shape, w));
    state.counters["GFLOP"] = Counter((pass == "fwd" ? 4.0 : 10.0) * 64 * pairs * 1e-9, Counter::kIsIterationInvariantRate);
    state.SetLabel(family + " " + std::to_string(gka_num_threads()) + " threads");
}

// Random-feature GKA (gka_call.features = M), causal, B=1, H=8, D=64 at the
// module's default sigma = sqrt(D/2) with features of unit scale; standard
// normal frequencies (gka_draw_frequencies). Counter: tokens/s (its FLOPs are
// not exact GKA's).
void features_case(benchmark::State &state, std::string family, std::string pass, int64_t T, int64_t M) {
    if (gka_set_cpu_family(family.c_str()) != GKA_OK) {
        state.SkipWithError(gka_last_error());
        return;
    }
    const gka_shape shape{1, T, 8, 64};
    Data d(shape, 1.0f);
    d.sigma.assign(8, std::sqrt(32.0f));
    std::vector<float> w(8 * M * 64), dw(w.size());
    check(gka_draw_frequencies(8, M, 64, 2, 0, w.data()));
    gka_call c = described(d, causal.second);
    c.features = M, c.frequencies = w.data(), c.dfrequencies = dw.data();
    check(gka_run_forward(&c));
    const bool fwd = pass != "bwd", bwd = pass != "fwd";
    for (auto _ : state) {
        if (fwd) check(gka_run_forward(&c));
        if (bwd) check(gka_run_backward(&c));
    }
    state.counters["tokens"] = Counter(double(T), Counter::kIsIterationInvariantRate);
    state.SetLabel(family + " " + std::to_string(gka_num_threads()) + " threads, " + gka_last_kernel());
}

void read_bandwidth_case(benchmark::State &state) {
    static const gka_bench::ReadBandwidth reads(int64_t(256) << 20);
    for (auto _ : state) benchmark::DoNotOptimize(reads.run(gka_num_threads()));
    state.counters["GB"] = Counter(reads.bytes() * 1e-9, Counter::kIsIterationInvariantRate);
}

// Every benchmark reports wall time (the kernels run on several threads), in ms.
void timed(benchmark::internal::Benchmark *b) { b->UseRealTime()->Unit(benchmark::kMillisecond); }

void register_all(const Mode &m) {
    const std::vector<std::string> families = m.families.empty() ? gka_test::families_this_host_runs() : m.families;
    const std::string best = families.front();
    for (const std::string &family : families)
        for (const std::string &pass : m.passes)
            for (const auto &[wname, w] : m.windows)
                for (int64_t D : m.head_dims)
                    for (int64_t T : m.seq_lens) {
                        if (family != best && T > m.slow_family_max_seq_len) continue;
                        const std::string name = "gka/" + family + "/" + pass + "/" + wname +
                                                 "/D=" + std::to_string(D) + "/T=" + std::to_string(T);
                        timed(benchmark::RegisterBenchmark(name.c_str(), gka_case, family, pass, w,
                                                           gka_shape{1, T, 8, D}, smooth_features,
                                                           std::string("gaussian")));
                    }
    // bfloat16 beside float32 (the rows above), on the best family at the sharp cases' T.
    for (const std::string pass : {"fwd_bf16", "bwd_bf16"})
        for (const auto &[wname, w] : m.windows)
            for (int64_t D : m.head_dims) {
                if (wname == "full") continue;
                const std::string name = "gka/" + best + "/" + pass + "/" + wname + "/D=" + std::to_string(D) +
                                         "/T=" + std::to_string(m.sharp_seq_len);
                timed(benchmark::RegisterBenchmark(name.c_str(), gka_case, best, pass, w,
                                                   gka_shape{1, m.sharp_seq_len, 8, D}, smooth_features,
                                                   std::string("gaussian")));
            }
    for (const std::string &pass : m.passes)
        for (int64_t D : m.head_dims) {
            const std::string name = "gka/" + best + "/" + pass + "/causal_sharp/D=" + std::to_string(D) +
                                     "/T=" + std::to_string(m.sharp_seq_len);
            timed(benchmark::RegisterBenchmark(name.c_str(), gka_case, best, pass, causal.second,
                                               gka_shape{1, m.sharp_seq_len, 8, D}, sharp_features,
                                               std::string("gaussian")));
        }
    // The head-dim sweep: every D of the kernels general in D beside 64 and 128,
    // both element types, on the best family.
    for (const std::string pass : {"fwd", "bwd", "fwd_bf16", "bwd_bf16"})
        for (const auto &[wname, w] : {causal, w255})
            for (int64_t D : m.swept_head_dims) {
                const std::string name = "dims/" + best + "/" + pass + "/" + wname + "/D=" + std::to_string(D) +
                                         "/T=" + std::to_string(m.sharp_seq_len);
                timed(benchmark::RegisterBenchmark(name.c_str(), gka_case, best, pass, w,
                                                   gka_shape{1, m.sharp_seq_len, 8, D}, smooth_features,
                                                   std::string("gaussian")));
            }
    for (const std::string pass : {"fwd", "bwd"})
        for (const auto &[wname, w] : m.windows)
            for (int64_t D : m.head_dims) {
                if (wname == "full") continue;
                for (const char *kernel : gka::kernel_function_names) {
                    const std::string name = "kernels/" + best + "/" + pass + "/" + wname + "/D=" +
                                             std::to_string(D) + "/T=" + std::to_string(m.sharp_seq_len) + "/" +
                                             kernel;
                    timed(benchmark::RegisterBenchmark(name.c_str(), gka_case, best, pass, w,
                                                       gka_shape{1, m.sharp_seq_len, 8, D}, smooth_features,
                                                       std::string(kernel)));
                }
            }
    for (int64_t T : m.decode_lengths)
        for (const auto &[wname, w] : {causal, w255}) {
            const std::string name = "decode/" + best + "/" + wname + "/D=64/T=" + std::to_string(T);
            timed(benchmark::RegisterBenchmark(name.c_str(), decode_case, best, w, T));
        }
    timed(benchmark::RegisterBenchmark("memory/read", read_bandwidth_case));
    // Random-feature GKA beside exact causal GKA at each T ("M=exact"), where they cross.
    for (const std::string pass : {"fwd", "bwd", "fwdbwd"})
        for (int64_t T : m.feature_seq_lens) {
            const std::string prefix = "features/" + best + "/" + pass + "/causal/D=64/";
            for (int64_t M : m.feature_counts) {
                const std::string name = prefix + "M=" + std::to_string(M) + "/T=" + std::to_string(T);
                timed(benchmark::RegisterBenchmark(name.c_str(), features_case, best, pass, T, M));
            }
            if (T > m.exact_max_seq_len) continue;
            timed(benchmark::RegisterBenchmark((prefix + "M=exact/T=" + std::to_string(T)).c_str(), gka_case, best,
                                               pass, causal.second, gka_shape{1, T, 8, 64}, smooth_features,
                                               std::string("gaussian")));
        }
    for (const std::string pass : {"fwd", "bwd"}) {
        const int64_t T = m.sharp_seq_len;
        const std::string name = "chunks/" + best + "/" + pass + "/causal/D=64/T=" + std::to_string(T) + "/4";
        timed(benchmark::RegisterBenchmark(name.c_str(), chunk_case, best, pass, T, 4));
    }
    for (const std::string pass : {"fwd", "bwd"})
        for (const std::string how : {"varlen", "separate", "padded"}) {
            const std::string name = "varlen/" + best + "/" + pass + "/causal/D=64/" + how;
            timed(benchmark::RegisterBenchmark(name.c_str(), varlen_case, best, pass, how, m.documents));
        }
    const int64_t n = m.sgemm_size;
    timed(benchmark::RegisterBenchmark(("sgemm/" + std::to_string(n) + "^3").c_str(), sgemm_case, n, n, n));
    for (int64_t D : m.head_dims)
        for (int64_t T : m.seq_lens) {
            if (T > m.unfused_max_seq_len) continue;
            const std::string shape = "/D=" + std::to_string(D) + "/T=" + std::to_string(T);
            // The attention-shaped products: S = X X^T (T x T x D) and Y = P X (T x D x T).
            timed(benchmark::RegisterBenchmark(("sgemm/TxTxD" + shape).c_str(), sgemm_case, T, T, D));
            timed(benchmark::RegisterBenchmark(("sgemm/TxDxT" + shape).c_str(), sgemm_case, T, D, T));
            for (const auto &[wname, w] : m.windows) {
                timed(benchmark::RegisterBenchmark(("unfused_blas/fwd/" + wname + shape).c_str(), unfused_case, w,
                                                   gka_shape{1, T, 8, D}));
            }
        }
    const std::string naive = "naive_reference/fwd/causal/D=64/T=" + std::to_string(m.naive_seq_len);
    timed(benchmark::RegisterBenchmark(naive.c_str(), naive_case, causal.second, gka_shape{1, m.naive_seq_len, 1, 64}));
}

}  // namespace

int main(int argc, char **argv) {
    Mode mode = full_mode();
    std::vector<char *> args;
    for (int k = 0; k < argc; k++) {
        if (std::strcmp(argv[k], "--quick") == 0) {
            mode = quick_mode();
        } else if (std::strcmp(argv[k], "--smoke") == 0) {
            mode = smoke_mode();
        } else {
            args.push_back(argv[k]);
        }
    }
    int n = int(args.size());
    benchmark::Initialize(&n, args.data());
    if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 1;
    register_all(mode);
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
