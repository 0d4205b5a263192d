// Two builds of libgka timed against each other in one process: each round
// calls one library's gka_forward and gka_backward, then the other's (the
// order alternating by round), on the standard shapes (B=1 H=8 T=4096, causal
// and (255, 0), D 64 and 128), and prints each side's median and their ratio.
// The libraries are loaded with RTLD_DEEPBIND, so that each calls its own
// kernels and runtime. Interleaving cancels the drift of a shared machine,
// which separate benchmark runs do not (docs/performance.md: the budget
// against a3dc9e4 is measured this way).
//
//     gka_ab OLD/libgka.so NEW/libgka.so [rounds] [cpu family] [NEW's score form]
//
// The family defaults to the new library's best on this host. GKA_AB_HEAD_DIMS
// (comma-separated) replaces the head dims 64 and 128, GKA_AB_SEQ_LEN the T of
// 4096 (a small T shows the calls' own overhead); GKA_AB_BF16=1 times the
// bfloat16 calls instead of the float32 ones.
//
// The score form (gka_set_score_form: "centred" times the forward's centred
// kernel on these inputs, which "auto" runs about the origin) is set in the new
// library alone: an older one may not know it (a3dc9e4 has no forms), and
// without it neither library is asked.
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "gka/gka.h"

namespace {

using Forward = decltype(&gka_forward);
using Backward = decltype(&gka_backward);
using ForwardBf16 = decltype(&gka_forward_bf16);
using BackwardBf16 = decltype(&gka_backward_bf16);

struct Library {
    Forward forward;
    Backward backward;
    ForwardBf16 forward_bf16;
    BackwardBf16 backward_bf16;
    const char *family;  // the CPU family it runs
};

Library load(const char *path, const char *family, const char *score_form = nullptr) {
    void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (!handle) {
        std::fprintf(stderr, "gka_ab: %s\n", dlerror());
        std::exit(1);
    }
    auto set_family = reinterpret_cast<decltype(&gka_set_cpu_family)>(dlsym(handle, "gka_set_cpu_family"));
    if (!set_family || set_family(family) != GKA_OK) {
        std::fprintf(stderr, "gka_ab: %s cannot run family %s\n", path, family ? family : "(its best)");
        std::exit(1);
    }
    auto set_form = reinterpret_cast<decltype(&gka_set_score_form)>(dlsym(handle, "gka_set_score_form"));
    if (score_form && (!set_form || set_form(score_form) != GKA_OK)) {
        std::fprintf(stderr, "gka_ab: %s has no score form %s\n", path, score_form);
        std::exit(1);
    }
    return {reinterpret_cast<Forward>(dlsym(handle, "gka_forward")),
            reinterpret_cast<Backward>(dlsym(handle, "gka_backward")),
            reinterpret_cast<ForwardBf16>(dlsym(handle, "gka_forward_bf16")),
            reinterpret_cast<BackwardBf16>(dlsym(handle, "gka_backward_bf16")),
            reinterpret_cast<decltype(&gka_cpu_family)>(dlsym(handle, "gka_cpu_family"))()};
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

}  // namespace

int main(int argc, char **argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: %s OLD/libgka.so NEW/libgka.so [rounds] [cpu family] [NEW's score form]\n",
                     argv[0]);
        return 2;
    }
    const int rounds = argc > 3 ? std::atoi(argv[3]) : 11;
    const char *score_form = argc > 5 ? argv[5] : nullptr;  // the library's default
    // The family both run: the one named, else the new library's best here.
    const Library fresh = load(argv[2], argc > 4 ? argv[4] : nullptr, score_form);
    const char *family = fresh.family;
    const Library libraries[2] = {load(argv[1], family), fresh};
    struct Case {
        int64_t head_dim;
        gka_window window;
        std::string name;
    };
    std::vector<int64_t> head_dims = {64, 128};
    if (const char *dims = std::getenv("GKA_AB_HEAD_DIMS")) {
        head_dims.clear();
        for (const char *p = dims; *p;) {
            char *end = nullptr;
            head_dims.push_back(std::strtoll(p, &end, 10));
            if (end == p || head_dims.back() < 1) {
                std::fprintf(stderr, "gka_ab: GKA_AB_HEAD_DIMS is head dims separated by commas, not '%s'\n", dims);
                return 2;
            }
            p = *end == ',' ? end + 1 : end;
        }
    }
    const bool bf16 = std::getenv("GKA_AB_BF16") && std::string(std::getenv("GKA_AB_BF16")) == "1";
    const char *tokens = std::getenv("GKA_AB_SEQ_LEN");
    const int64_t seq_len = tokens ? std::strtoll(tokens, nullptr, 10) : 4096;
    if (seq_len < 1) {
        std::fprintf(stderr, "gka_ab: GKA_AB_SEQ_LEN is a token count >= 1, not '%s'\n", tokens);
        return 2;
    }
    std::vector<Case> cases;
    for (gka_window w : {gka_window{-1, 0}, gka_window{255, 0}})
        for (int64_t D : head_dims)
            cases.push_back({D, w, std::string(w.left < 0 ? "causal" : "(255, 0)") + " D=" + std::to_string(D)});
    std::printf("%d rounds (the first dropped), family %s, new's score form %s, %s, T=%lld; time new / old\n",
                rounds, family, score_form ? score_form : "(default)", bf16 ? "bfloat16" : "float32",
                (long long)seq_len);
    for (const Case &c : cases) {
        const gka_shape shape{1, seq_len, 8, c.head_dim};
        const size_t n = size_t(shape.seq_len * shape.heads * shape.head_dim);
        std::mt19937 rng(1);
        std::normal_distribution<float> normal(0.0f, 0.35f);  // gka_bench's smooth scale
        std::vector<float> x(n), y(n), dy(n), dx(n), lse(size_t(shape.seq_len * shape.heads));
        std::vector<float> sigma(size_t(shape.heads), 1.0f), dsigma(size_t(shape.heads));
        for (float &v : x) v = normal(rng);
        for (float &v : dy) v = normal(rng);
        std::vector<gka_bf16> x16(n), y16(n), dy16(n), dx16(n);
        for (size_t k = 0; k < n; k++) x16[k] = gka_bf16_from_float(x[k]), dy16[k] = gka_bf16_from_float(dy[k]);
        std::vector<double> ms[2][2];  // [library][forward, backward]
        for (int round = 0; round < rounds; round++) {
            for (int k = 0; k < 2; k++) {
                const int which = round % 2 ? 1 - k : k;
                const Library &lib = libraries[which];
                const auto t0 = std::chrono::steady_clock::now();
                const gka_status forward =
                    bf16 ? lib.forward_bf16(shape, c.window, x16.data(), sigma.data(), y16.data(), lse.data())
                         : lib.forward(shape, c.window, x.data(), sigma.data(), y.data(), lse.data());
                const auto t1 = std::chrono::steady_clock::now();
                const gka_status backward =
                    bf16 ? lib.backward_bf16(shape, c.window, x16.data(), sigma.data(), y16.data(), lse.data(),
                                             dy16.data(), dx16.data(), dsigma.data())
                         : lib.backward(shape, c.window, x.data(), sigma.data(), y.data(), lse.data(), dy.data(),
                                        dx.data(), dsigma.data());
                const auto t2 = std::chrono::steady_clock::now();
                if (forward != GKA_OK || backward != GKA_OK) {
                    std::fprintf(stderr, "gka_ab: %s failed on %s\n", argv[1 + which], c.name.c_str());
                    return 1;
                }
                if (round == 0) continue;  // warm-up: first touches, thread pool start
                ms[which][0].push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
                ms[which][1].push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
            }
        }
        for (int pass = 0; pass < 2; pass++) {
            const double old_ms = median(ms[0][pass]), new_ms = median(ms[1][pass]);
            std::printf("%-15s %-8s old %8.2f ms  new %8.2f ms  new/old %.3f\n", c.name.c_str(), pass ? "backward" : "forward",
                        old_ms, new_ms, new_ms / old_ms);
        }
    }
}
