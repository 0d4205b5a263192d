// GKA_CPU_TARGET and GKA_NUM_THREADS, read once at start-up. CTest runs this
// binary with the environment each case expects (tests/CMakeLists.txt).
#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>

#include "gka/gka.h"

TEST_CASE("the environment's family and thread count are obeyed", "[env]") {
    const char *family = std::getenv("GKA_CPU_TARGET");
    const char *threads = std::getenv("GKA_NUM_THREADS");
    REQUIRE(family != nullptr);
    REQUIRE(threads != nullptr);
    if (!gka_cpu_family_supported(family)) {
        WARN("SKIP: this host cannot run family " << family);
        return;
    }
    CHECK(std::string(gka_cpu_family()) == family);
    CHECK(gka_num_threads() == std::atoi(threads));
}

TEST_CASE("an unknown family in the environment fails every call, clearly", "[env-bad]") {
    float x = 0, sigma = 1, y, lse;
    CHECK(gka_forward({1, 1, 1, 1}, {-1, 0}, &x, &sigma, &y, &lse) == GKA_ERR_UNSUPPORTED);
    CHECK_THAT(gka_last_error(), Catch::Contains("GKA_CPU_TARGET"));
    CHECK(std::string(gka_cpu_family()) == "none");
}
