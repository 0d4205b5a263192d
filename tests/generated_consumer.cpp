// A program built around kernels that `make generate` made for a target of
// the user's (tests/generate_own_target.sh): it calls the generated
// gka_forward_d64 and gka_backward_d64 directly, as libgka's C ABI would, and
// judges them by the accuracy contract against the double reference.
#include <cstdio>

#include "HalideBuffer.h"
#include "contract.h"
#include "gka_backward_d64.h"
#include "gka_forward_d64.h"

using Halide::Runtime::Buffer;

int main() {
    const gka_shape shape{2, 100, 3, 64};
    const gka_window window{16, 0};
    const gka_ref::Problem p = gka_ref::make_problem(shape, window, {6.0f, 8.0f, 12.0f}, 1.0, 5);
    gka_test::Outputs out{std::vector<float>(p.size()), std::vector<float>(p.rows()), std::vector<float>(p.size()),
                          std::vector<float>(shape.heads)};
    const int B = int(shape.batch), T = int(shape.seq_len), H = int(shape.heads), D = int(shape.head_dim);
    auto features = [&](const float *f) { return Buffer<float, 4>(const_cast<float *>(f), D, H, T, B); };
    Buffer<float, 1> sigma(const_cast<float *>(p.sigma.data()), H), dsigma(out.dsigma.data(), H);
    Buffer<float, 3> lse(out.lse.data(), T, H, B);
    Buffer<float, 2> spread(H, B);
    int status = gka_forward_d64(features(p.x.data()), sigma, int(window.left), int(window.right),
                                 features(out.y.data()), lse, spread);
    if (status == 0) {
        status = gka_backward_d64(features(p.x.data()), sigma, features(out.y.data()), lse, features(p.dy.data()),
                                  int(window.left), int(window.right), features(out.dx.data()), dsigma, spread);
    }
    if (status != 0) {
        std::printf("the generated kernels failed: Halide error %d\n", status);
        return 1;
    }
    const gka_test::Report r = gka_test::compare(p, out);
    std::printf("generated d64 kernels, B=2 T=100 H=3 window (16, 0): error / bound y %.3g, lse %.3g, dx %.3g, "
                "dsigma %.3g\n",
                r.y.ratio, r.lse.ratio, r.dx.ratio, r.dsigma.ratio);
    return r.holds() ? 0 : 1;
}
