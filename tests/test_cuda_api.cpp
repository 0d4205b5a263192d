// The CUDA entry points' contract that holds with or without a GPU: the
// kernels are compiled in, arguments are validated before the device is
// touched, and without a usable device the calls fail with GKA_ERR_DEVICE and
// the driver's reason, writing nothing. (tests/gpu/ runs the kernels.)
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "families.h"
#include "gka/gka.h"
#include "kernel_variants.h"

TEST_CASE("cuda: compiled in, and without a device GKA_ERR_DEVICE with the reason and nothing written", "[api][cuda]") {
    REQUIRE(gka_cuda_compiled() == 1);
    const gka_shape shape{1, 8, 1, 4};
    // Without a device these host arrays stand in for device memory: nothing may touch them.
    std::vector<float> x(32, 1.0f), sigma(1, 1.0f), y(32, 42.0f), lse(8, 42.0f);
    CHECK(gka_forward_cuda(shape, {-1, 0}, nullptr, sigma.data(), y.data(), lse.data(), nullptr) ==
          GKA_ERR_INVALID_ARGUMENT);
    CHECK(std::string(gka_last_error()).find("x is NULL") != std::string::npos);
    CHECK(gka_forward_cuda(shape, {-2, 0}, x.data(), sigma.data(), y.data(), lse.data(), nullptr) ==
          GKA_ERR_INVALID_ARGUMENT);
    if (gka_cuda_available()) {
        WARN("a CUDA device is usable here: the no-device half of this test is covered by gka.cuda instead");
        return;
    }
    const std::string why = gka_last_error();
    INFO("gka_cuda_available() == 0: " << why);
    CHECK(!why.empty());
    CHECK(gka_forward_cuda(shape, {-1, 0}, x.data(), sigma.data(), y.data(), lse.data(), nullptr) == GKA_ERR_DEVICE);
    CHECK(std::string(gka_last_error()) == why);
    std::vector<float> dx(32, 42.0f), dsigma(1, 42.0f);
    CHECK(gka_backward_cuda(shape, {-1, 0}, x.data(), sigma.data(), x.data(), lse.data(), x.data(), dx.data(),
                            dsigma.data(), nullptr) == GKA_ERR_DEVICE);
    std::vector<gka_bf16> xb(32), yb(32, 42);
    CHECK(gka_forward_bf16_cuda(shape, {-1, 0}, xb.data(), sigma.data(), yb.data(), lse.data(), nullptr) ==
          GKA_ERR_DEVICE);
    const int64_t lens[] = {3};
    const gka_shape step{1, 1, 1, 4};
    CHECK(gka_decode_cuda(step, 8, {-1, 0}, x.data(), sigma.data(), lens, x.data() + 4, y.data(), lse.data(),
                          nullptr) == GKA_ERR_DEVICE);
    const gka_chunk chunk{0, 0, 8};
    CHECK(gka_forward_chunk_cuda(shape, chunk, {-1, 0}, x.data(), x.data(), sigma.data(), y.data(), lse.data(),
                                 nullptr) == GKA_ERR_DEVICE);
    // The host checks come first: a bad chunk or decode length is that error, device or not.
    CHECK(gka_forward_chunk_cuda(shape, {0, 0, 0}, {-1, 0}, x.data(), x.data(), sigma.data(), y.data(), lse.data(),
                                 nullptr) == GKA_ERR_INVALID_ARGUMENT);
    const int64_t too_long[] = {8};
    CHECK(gka_decode_cuda(step, 8, {-1, 0}, x.data(), sigma.data(), too_long, x.data() + 4, y.data(), lse.data(),
                          nullptr) == GKA_ERR_INVALID_ARGUMENT);
    // Varlen: two packed sequences of 3 and 5 tokens; cu_seqlens is validated
    // as the host call's (the same message), then the device is needed.
    const int64_t cu_seqlens[] = {0, 3, 8}, unordered[] = {0, 5, 3};
    const gka_shape packed{2, 8, 1, 4};
    CHECK(gka_forward_varlen_cuda(packed, cu_seqlens, {-1, 0}, x.data(), sigma.data(), y.data(), lse.data(),
                                  nullptr) == GKA_ERR_DEVICE);
    CHECK(gka_backward_varlen_bf16_cuda(packed, cu_seqlens, {-1, 0}, xb.data(), sigma.data(), xb.data(), lse.data(),
                                        xb.data(), yb.data(), dsigma.data(), nullptr) == GKA_ERR_DEVICE);
    CHECK(gka_backward_varlen_cuda(packed, unordered, {-1, 0}, x.data(), sigma.data(), x.data(), lse.data(),
                                   x.data(), dx.data(), dsigma.data(), nullptr) == GKA_ERR_INVALID_ARGUMENT);
    const std::string device_message = gka_last_error();
    CHECK(gka_backward_varlen(packed, unordered, {-1, 0}, x.data(), sigma.data(), x.data(), lse.data(), x.data(),
                              dx.data(), dsigma.data()) == GKA_ERR_INVALID_ARGUMENT);
    CHECK(device_message == gka_last_error());
    CHECK(gka_forward_varlen_cuda(packed, nullptr, {-1, 0}, x.data(), sigma.data(), y.data(), lse.data(),
                                  nullptr) == GKA_ERR_INVALID_ARGUMENT);
    // The description: the host checks, then the device, for every pass and
    // for a call without elements too (its exact results are written on the device).
    gka_call c = gka_call_init();
    c.device = GKA_CUDA, c.shape = shape, c.x = x.data(), c.sigma = sigma.data(), c.y = y.data(), c.lse = lse.data();
    CHECK(gka_run_forward(&c) == GKA_ERR_DEVICE);
    CHECK(std::string(gka_last_error()) == why);
    c.window = {-2, 0};
    CHECK(gka_run_forward(&c) == GKA_ERR_INVALID_ARGUMENT);
    c.window = {-1, 0}, c.dy = x.data(), c.dx = dx.data(), c.dsigma = dsigma.data();
    CHECK(gka_run_backward(&c) == GKA_ERR_DEVICE);
    gka_call empty = gka_call_init();
    empty.device = GKA_CUDA, empty.shape = {1, 8, 1, 0}, empty.sigma = sigma.data(), empty.lse = lse.data();
    CHECK(gka_run_forward(&empty) == GKA_ERR_DEVICE);
    gka_call step_call = gka_call_init();
    step_call.device = GKA_CUDA, step_call.shape = step, step_call.x = x.data(), step_call.sigma = sigma.data();
    step_call.cache_capacity = 8, step_call.cache_lens = too_long, step_call.cache = x.data() + 4;
    step_call.y = y.data(), step_call.lse = lse.data();
    CHECK(gka_run_decode(&step_call) == GKA_ERR_INVALID_ARGUMENT);
    for (const auto *v : {&y, &lse, &dx, &dsigma}) {
        for (float f : *v) REQUIRE(f == 42.0f);
    }
    for (gka_bf16 b : yb) REQUIRE(b == 42);
    // The CPU paths still run.
    CHECK(gka_forward(shape, {-1, 0}, x.data(), sigma.data(), y.data(), lse.data()) == GKA_OK);
}

// Run by CTest with the CUDA toolkit's stub driver on the library path
// (tests/CMakeLists.txt): it exports every real entry point and refuses cuInit.
TEST_CASE("cuda: every driver entry point libgka calls is found in the stub driver", "[.][cuda-stub]") {
    REQUIRE(gka_cuda_available() == 0);
    const std::string why = gka_last_error();
    INFO(why);
    CHECK(why.find("lacks") == std::string::npos);
    CHECK(why.find("cuInit failed") != std::string::npos);
}

TEST_CASE("cuda: a device runs the best family its compute capability has", "[api][cuda]") {
    const std::vector<gka::CudaFamily> families = {{"cuda86", 86}, {"cuda", 80}};  // best first
    CHECK(std::string(gka::cuda_family_for(families, 90)) == "cuda86");
    CHECK(std::string(gka::cuda_family_for(families, 86)) == "cuda86");
    CHECK(std::string(gka::cuda_family_for(families, 85)) == "cuda");
    CHECK(std::string(gka::cuda_family_for(families, 80)) == "cuda");
    CHECK(gka::cuda_family_for(families, 75) == nullptr);
    CHECK(!gka_test::cuda_families().empty());  // gka_cuda_families(), with every family the table has here
}
