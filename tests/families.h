// The CPU and CUDA families libgka was compiled with, best first, as it lists
// them (gka_cpu_families, gka_cuda_families), the CPU ones the host runs, and
// the score forms (gka_set_score_form).
// Inline: the autotuner's harness, which links the kernels without libgka,
// shares contract.cpp but not this.
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "gka/gka.h"

namespace gka_test {

// gka_set_score_form's settings: the first form a call tries ("auto": the
// origin's where sampled tokens allow, else the centred).
inline const char *const score_forms[] = {"auto", "origin", "centred", "direct"};

inline std::vector<std::string> listed_families(const char *listed) {
    std::vector<std::string> families;
    std::istringstream in(listed);
    for (std::string f; std::getline(in, f, ',');) families.push_back(f);
    return families;
}
inline std::vector<std::string> compiled_families() { return listed_families(gka_cpu_families()); }
// The CUDA families compiled in, best first (gka_cuda_families).
inline std::vector<std::string> cuda_families() { return listed_families(gka_cuda_families()); }

// Those of them this host runs (gka_cpu_family_supported), best first.
inline std::vector<std::string> families_this_host_runs() {
    std::vector<std::string> runs;
    for (const std::string &f : compiled_families())
        if (gka_cpu_family_supported(f.c_str())) runs.push_back(f);
    return runs;
}

}  // namespace gka_test
