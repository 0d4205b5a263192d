// schedules/tuned.tsv round-trips through the build: the kernel libgka runs
// for a (family, pass, head dim) was compiled with the knobs of its table row,
// and with the schedule's defaults where there is no row.
#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "gka/gka.h"

TEST_CASE("the tuned table is what the build compiled", "[tuned]") {
    std::ifstream table(GKA_TUNED_TABLE);
    REQUIRE(table.good());
    std::map<std::string, std::string> rows;  // "family kernel head_dim" -> knobs
    for (std::string line; std::getline(table, line);) {
        if (line.empty() || line[0] == '#') continue;
        std::istringstream in(line);
        std::string family, kernel, head_dim, knobs;
        REQUIRE(std::getline(in, family, '\t'));
        REQUIRE(std::getline(in, kernel, '\t'));
        REQUIRE(std::getline(in, head_dim, '\t'));
        REQUIRE(std::getline(in, knobs, '\t'));
        rows[family + " " + kernel + " " + head_dim] = knobs;
    }
    for (const char *family : {"avx512", "avx2", "generic"})
        for (const char *pass : {"forward", "backward"})
            for (int head_dim : {64, 128}) {
                const std::string key = std::string(family) + " gka_" + pass + " " + std::to_string(head_dim);
                const char *compiled = gka_kernel_knobs(family, pass, head_dim);
                INFO(key);
                REQUIRE(compiled != nullptr);
                CHECK(std::string(compiled) == (rows.count(key) ? rows[key] : std::string()));
            }
    CHECK(gka_kernel_knobs("avx512", "sideways", 64) == nullptr);
    CHECK(gka_kernel_knobs("sse2", "forward", 64) == nullptr);
}
