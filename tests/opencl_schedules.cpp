// The CUDA schedules' logic, checked on a CPU: the same generators and
// schedules compiled for Halide's OpenCL backend (which runs a warp's lane
// loops as threads: schedules/knobs.h, LaneLoops) and run through an OpenCL
// implementation on the CPU (PoCL: `scripts/setup.sh opencl`), judged by the
// accuracy contract against the double reference. What this checks without a
// GPU: every bound, tile, stage and mask of the CUDA schedules, the register
// tiles of forward_cuda_tiled.cpp among them. What it cannot: the PTX, the
// lane striping (Halide's), and speed: tests/gpu/ on a GPU.
// Skipped, saying why, where no OpenCL platform answers.
#include <dlfcn.h>

#include <HalideBuffer.h>
#include <HalideRuntime.h>

#include <string>
#include <vector>

#include "check.h"
#include "opencl_backward_d128.h"
#include "opencl_backward_d64.h"
#include "opencl_backward_d64_laplace.h"
#include "opencl_backward_padded4_d128.h"
#include "opencl_backward_padded_d64.h"
#include "opencl_forward_tiled_d128.h"
#include "opencl_forward_tiled_d64.h"
#include "opencl_forward_tiled_d64_laplace.h"
#include "opencl_forward_warp_d128.h"
#include "opencl_forward_warp_d64.h"
#include "skip.h"

namespace {

using Halide::Runtime::Buffer;
using Forward = int (*)(halide_buffer_t *, halide_buffer_t *, int32_t, int32_t, halide_buffer_t *,
                        halide_buffer_t *, halide_buffer_t *);
using Backward = int (*)(halide_buffer_t *, halide_buffer_t *, halide_buffer_t *, halide_buffer_t *,
                         halide_buffer_t *, int32_t, int32_t, halide_buffer_t *, halide_buffer_t *, halide_buffer_t *);

struct Variant {
    const char *name;
    int head_dim;
    const char *kernel;  // the kernel function (gka_set_kernel's names)
    Forward forward;
    Backward backward = nullptr;  // fed `forward`'s y and lse
    bool forward_checked = true;  // false: `forward` is another variant's, checked there
};

std::string last_halide_error;
void keep_halide_error(void *, const char *message) { last_halide_error = message; }

// The number of OpenCL platforms, asked of the ICD loader; 0 without one.
unsigned opencl_platforms() {
    void *library = dlopen("libOpenCL.so.1", RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) library = dlopen("libOpenCL.so", RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) return 0;
    using GetPlatforms = int (*)(unsigned, void **, unsigned *);
    auto get_platforms = reinterpret_cast<GetPlatforms>(dlsym(library, "clGetPlatformIDs"));
    unsigned count = 0;
    if (get_platforms == nullptr || get_platforms(0, nullptr, &count) != 0) count = 0;
    return count;
}

bool skipped_without_opencl() {
    if (opencl_platforms() > 0) return false;
    gka_test::skip("no OpenCL platform (PoCL: scripts/setup.sh opencl)");
    return true;
}

// x's [B][T][H][D] as Halide's (d, h, t, b), and lse's [B][H][T] as (t, h, b), over `data`.
Buffer<float> features(std::vector<float> &data, const gka_shape &s) {
    return Buffer<float>(data.data(), int(s.head_dim), int(s.heads), int(s.seq_len), int(s.batch));
}
Buffer<float> rows(std::vector<float> &data, const gka_shape &s) {
    return Buffer<float>(data.data(), int(s.seq_len), int(s.heads), int(s.batch));
}

// An input: host memory the pipeline copies to the device.
Buffer<float> input(Buffer<float> b) {
    b.set_host_dirty();
    return b;
}

gka_test::Outputs run_forward(Forward forward, const gka_ref::Problem &p) {
    const gka_shape &s = p.shape;
    std::vector<float> x = p.x, sigma = p.sigma;
    gka_test::Outputs out{std::vector<float>(p.size()), std::vector<float>(p.rows()), {}, {}};
    Buffer<float> y = features(out.y, s), lse = rows(out.lse, s), spread(int(s.heads), int(s.batch));
    const int status = forward(input(features(x, s)), input(Buffer<float>(sigma.data(), int(s.heads))), p.window.left,
                               p.window.right, y, lse, spread);
    INFO(last_halide_error);
    REQUIRE(status == 0);
    y.copy_to_host();
    lse.copy_to_host();
    return out;
}

// The backward fed the forward's own fp32 y and lse, as a trainer passes them.
gka_test::Outputs run_backward(const Variant &variant, const gka_ref::Problem &p) {
    gka_test::Outputs out = run_forward(variant.forward, p);
    const gka_shape &s = p.shape;
    std::vector<float> x = p.x, sigma = p.sigma, dy = p.dy, y = out.y, lse = out.lse;
    out.dx.assign(p.size(), 0.0f);
    out.dsigma.assign(s.heads, 0.0f);
    Buffer<float> dx = features(out.dx, s), dsigma(out.dsigma.data(), int(s.heads)), spread(int(s.heads), int(s.batch));
    const int status = variant.backward(input(features(x, s)), input(Buffer<float>(sigma.data(), int(s.heads))),
                                        input(features(y, s)), input(rows(lse, s)), input(features(dy, s)),
                                        p.window.left, p.window.right, dx, dsigma, spread);
    INFO(last_halide_error);
    REQUIRE(status == 0);
    dx.copy_to_host();
    dsigma.copy_to_host();
    return out;
}

// Lengths across band and tile edges (bands of 32 and 64, tiles of 32),
// windows causal, full, sliding and two-sided, two spreads.
template<typename Run>
void for_each_problem(const Variant &variant, Run run) {
    const gka_window windows[] = {{-1, 0}, {-1, -1}, {20, 0}, {7, 11}};
    uint64_t seed = 4200;
    for (int64_t seq_len : {1, 33, 100, 161}) {
        for (const gka_window &w : windows) {
            for (double spread : {0.5, 3.0}) {
                const gka_shape shape{2, seq_len, 2, variant.head_dim};
                gka_ref::Problem p = gka_ref::make_problem(shape, w, {0.9f, 1.7f}, spread, ++seed);
                p.kernel = variant.kernel;
                gka_test::check_report(std::string(variant.name) + " (seed " + std::to_string(seed) + ")", p,
                                       gka_test::compare(p, run(p)));
            }
        }
    }
}

}  // namespace

const Variant variants[] = {
    {"one query a lane, D=64", 64, "gaussian", opencl_forward_warp_d64, opencl_backward_d64},
    {"one query a lane, D=128", 128, "gaussian", opencl_forward_warp_d128, opencl_backward_d128},
    {"register tiles, D=64", 64, "gaussian", opencl_forward_tiled_d64},
    {"register tiles, D=128", 128, "gaussian", opencl_forward_tiled_d128},
    {"register tiles, D=64, Laplace", 64, "laplace", opencl_forward_tiled_d64_laplace, opencl_backward_d64_laplace},
    {"own rows padded (the candidate), D=64", 64, "gaussian", opencl_forward_warp_d64, opencl_backward_padded_d64,
     false},
    {"own rows padded by 4, D=128", 128, "gaussian", opencl_forward_warp_d128, opencl_backward_padded4_d128, false}};

TEST_CASE("opencl: the CUDA forward schedules on a CPU", "[opencl]") {
    halide_set_error_handler(keep_halide_error);
    if (skipped_without_opencl()) return;
    for (const Variant &variant : variants) {
        if (!variant.forward_checked) continue;
        SECTION(variant.name) {
            for_each_problem(variant, [&](const gka_ref::Problem &p) { return run_forward(variant.forward, p); });
        }
    }
}

TEST_CASE("opencl: the CUDA backward schedules on a CPU", "[opencl]") {
    halide_set_error_handler(keep_halide_error);
    if (skipped_without_opencl()) return;
    for (const Variant &variant : variants) {
        if (variant.backward == nullptr) continue;
        SECTION(variant.name) {
            for_each_problem(variant, [&](const gka_ref::Problem &p) { return run_backward(variant, p); });
        }
    }
}
