// One GKA call on fixed inputs, for a tool that watches a single call
// (window_cost.py counts its instructions under callgrind).
// Usage: gka_one_call forward|backward auto|centred|direct T left right D [kernel function]
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "reference.h"

int main(int argc, char **argv) {
    if (argc != 7 && argc != 8) {
        std::fprintf(stderr, "usage: %s forward|backward auto|centred|direct T left right D [kernel function]\n",
                     argv[0]);
        return 2;
    }
    const std::string pass = argv[1];
    const int64_t T = std::atoll(argv[3]), D = std::atoll(argv[6]);
    const gka_window window{std::atoll(argv[4]), std::atoll(argv[5])};
    const gka_ref::Problem p = gka_ref::make_problem({1, T, 1, D}, window, {float(std::sqrt(double(D)))}, 1.0, 7);
    std::vector<float> y(p.size()), lse(p.rows()), dx(p.size()), dsigma(1);
    if (gka_set_score_form(argv[2]) != GKA_OK || gka_set_kernel(argc == 8 ? argv[7] : nullptr) != GKA_OK ||
        gka_forward(p.shape, p.window, p.x.data(), p.sigma.data(), y.data(), lse.data()) != GKA_OK ||
        (pass == "backward" && gka_backward(p.shape, p.window, p.x.data(), p.sigma.data(), y.data(), lse.data(),
                                            p.dy.data(), dx.data(), dsigma.data()) != GKA_OK)) {
        std::fprintf(stderr, "gka_one_call: %s\n", gka_last_error());
        return 1;
    }
    std::printf("%s\n", gka_last_kernel());
    return 0;
}
