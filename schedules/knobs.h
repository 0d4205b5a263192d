// A schedule's tunable values, by name. Each schedule starts from its family's
// values and takes overrides as "name:value,..." (the generators' `knobs`
// GeneratorParam; ':' because the generator command line reserves '=').
#pragma once

#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>

#include "Halide.h"

namespace gka {

enum class Family { Generic, Avx2, Avx512, Neon, Cuda };

inline Family family_of(const Halide::Target &t) {
    if (t.has_gpu_feature()) return Family::Cuda;
    if (t.arch == Halide::Target::ARM && t.bits == 64) return Family::Neon;  // AArch64: 32 vector registers
    if (t.has_feature(Halide::Target::AVX512)) return Family::Avx512;
    if (t.has_feature(Halide::Target::AVX2)) return Family::Avx2;
    return Family::Generic;
}

class Knobs {
public:
    explicit Knobs(std::map<std::string, int> values) : values_(std::move(values)) {
        for (const auto &[name, value] : values_) {
            if (value == 0) zero_means_all_.insert(name);
        }
    }

    int operator[](const std::string &name) const {
        auto it = values_.find(name);
        if (it == values_.end()) throw std::invalid_argument("gka schedule: no knob named '" + name + "'");
        return it->second;
    }

    // Applies "name:value,..."; a name the schedule does not have is an error,
    // never silently ignored, and so is a value below 1 (0 only where the
    // default is 0, which means "all": a tile's extent divides by the others;
    // decided by the default, so that no earlier override changes the rule).
    Knobs &override_with(const std::string &spec) {
        std::stringstream in(spec);
        std::string item;
        while (std::getline(in, item, ',')) {
            if (item.empty()) continue;
            auto eq = item.find(':');
            const std::string name = item.substr(0, eq);
            if (eq == std::string::npos || !values_.count(name)) {
                throw std::invalid_argument("gka schedule: bad knob override '" + item + "' (knobs: " + str() + ")");
            }
            const int value = std::stoi(item.substr(eq + 1)), least = zero_means_all_.count(name) ? 0 : 1;
            if (value < least) {
                throw std::invalid_argument("gka schedule: knob '" + item + "' out of range (at least " +
                                            std::to_string(least) + ")");
            }
            values_[name] = value;
        }
        return *this;
    }

    std::string str() const {
        std::string s;
        for (const auto &[name, value] : values_) s += (s.empty() ? "" : ",") + name + ":" + std::to_string(value);
        return s;
    }

private:
    std::map<std::string, int> values_;
    std::set<std::string> zero_means_all_;  // knobs whose default 0 means "all"
};

}  // namespace gka
