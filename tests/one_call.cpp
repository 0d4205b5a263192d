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
    const std::string form = argv[2], kernel = argc == 8 ? argv[7] : "gaussian";
    gka_call c = gka_call_init();
    c.shape = p.shape, c.window = p.window;
    c.scores = form == "direct" ? GKA_SCORES_DIRECT : form == "centred" ? GKA_SCORES_CENTRED : GKA_SCORES_AUTO;
    c.kernel = kernel == "laplace" ? GKA_LAPLACE : kernel == "cauchy" ? GKA_CAUCHY : GKA_GAUSSIAN;
    c.x = p.x.data(), c.sigma = p.sigma.data(), c.y = y.data(), c.lse = lse.data();
    c.dy = p.dy.data(), c.dx = dx.data(), c.dsigma = dsigma.data();
    if ((form != "auto" && form != "centred" && form != "direct") ||
        (kernel != "gaussian" && kernel != "laplace" && kernel != "cauchy")) {
        std::fprintf(stderr, "gka_one_call: the score form is auto, centred or direct, the kernel function "
                             "gaussian, laplace or cauchy\n");
        return 2;
    }
    if (gka_run_forward(&c) != GKA_OK || (pass == "backward" && gka_run_backward(&c) != GKA_OK)) {
        std::fprintf(stderr, "gka_one_call: %s\n", gka_last_error());
        return 1;
    }
    std::printf("%s\n", gka_last_kernel());
    return 0;
}
