// A schedule's tunable values: one struct per schedule (schedules.h), typed
// fields read as k.band, and one table of its fields (K::fields(), beside the
// schedule's defaults) that names each knob once. The table drives parsing
// the generators' `knobs` parameter ("name:value,..."; ':' because the
// generator command line reserves '='), printing, autotune/gka_knobs, and the
// autotuner's search space.
#pragma once

#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "Halide.h"

namespace gka {

enum class Family { Generic, Avx2, Avx512, Neon, Cuda };

// What a CUDA schedule's lane loops are on its target: a warp's lanes
// (gpu_lanes), or threads where the GPU API has no lanes (OpenCL: the CUDA
// schedules run on a CPU through PoCL, tests/opencl_schedules.cpp). Set from
// the target, not a knob.
enum class LaneLoops { warp, threads };

inline Family family_of(const Halide::Target &t) {
    if (t.has_gpu_feature()) return Family::Cuda;
    if (t.arch == Halide::Target::ARM && t.bits == 64) return Family::Neon;  // AArch64: 32 vector registers
    if (t.has_feature(Halide::Target::AVX512)) return Family::Avx512;
    if (t.has_feature(Halide::Target::AVX2)) return Family::Avx2;
    return Family::Generic;
}

// One knob of the schedule whose knobs are K.
template<typename K>
struct Knob {
    const char *name;
    int K::*value;
    std::vector<int> tried;  // the values the autotuner tries; none: it is not searched
    // Set where 0 is a value, meaning "all of" the knob named here (a tile's
    // extent divides by the others); every other knob is at least 1.
    const char *zero_means_all_of = nullptr;
    int least = 1;  // the smallest value (0 where zero_means_all_of is set)
    // Set where the knob shapes the kernel only while the knob named here is
    // nonzero (a mode's own knobs): elsewhere every value is the same kernel,
    // so the autotuner tries it at its default alone.
    const char *only_with = nullptr;
};

// The knobs' fields by name, so that every listing is in one order.
template<typename K>
std::map<std::string, const Knob<K> *> knobs_by_name() {
    std::map<std::string, const Knob<K> *> by_name;
    for (const Knob<K> &knob : K::fields()) by_name[knob.name] = &knob;
    return by_name;
}

// "name:value,..."
template<typename K>
std::string knob_string(const K &k) {
    std::string s;
    for (const auto &[name, knob] : knobs_by_name<K>()) s += (s.empty() ? "" : ",") + name + ":" + std::to_string(k.*knob->value);
    return s;
}

// `k` with "name:value,..." applied: a name the schedule does not have is an
// error, never silently ignored, and so is a value out of range.
template<typename K>
K with_overrides(K k, const std::string &spec) {
    const auto by_name = knobs_by_name<K>();
    std::stringstream in(spec);
    for (std::string item; std::getline(in, item, ',');) {
        if (item.empty()) continue;
        const auto colon = item.find(':');
        const auto it = by_name.find(item.substr(0, colon));
        if (colon == std::string::npos || it == by_name.end()) {
            throw std::invalid_argument("gka schedule: bad knob override '" + item + "' (knobs: " + knob_string(k) + ")");
        }
        const int value = std::stoi(item.substr(colon + 1));
        const int least = it->second->zero_means_all_of ? 0 : it->second->least;
        if (value < least) {
            throw std::invalid_argument("gka schedule: knob '" + item + "' out of range (at least " +
                                        std::to_string(least) + ")");
        }
        k.*it->second->value = value;
    }
    return k;
}

// The autotuner's search space as JSON: {"knobs": {name: [values tried]},
// "zero_means_all_of": {name: knob}, "only_with": {name: knob}}; unsearched
// knobs are left out.
template<typename K>
std::string search_space_json() {
    std::string tried, zeros, modes;
    for (const auto &[name, knob] : knobs_by_name<K>()) {
        if (knob->tried.empty()) continue;
        std::string values;
        for (int v : knob->tried) values += (values.empty() ? "" : ", ") + std::to_string(v);
        tried += (tried.empty() ? "\"" : ", \"") + name + "\": [" + values + "]";
        if (knob->zero_means_all_of) {
            zeros += (zeros.empty() ? "\"" : ", \"") + name + "\": \"" + knob->zero_means_all_of + "\"";
        }
        if (knob->only_with) modes += (modes.empty() ? "\"" : ", \"") + name + "\": \"" + knob->only_with + "\"";
    }
    return "{\"knobs\": {" + tried + "}, \"zero_means_all_of\": {" + zeros + "}, \"only_with\": {" + modes + "}}";
}

}  // namespace gka
