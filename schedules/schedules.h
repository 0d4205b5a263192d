// How each GKA kernel runs on each target family: entry points called by the
// generators. Everything here is schedule; none of it changes what is computed
// beyond the order of float sums.
#pragma once

#include <string>

#include "../generators/gka_backward.h"
#include "../generators/gka_forward.h"
#include "knobs.h"

namespace gka {

// The forward's knobs for `target`: the tuned values, then `overrides`
// ("name:value,...", from the generator's `knobs` parameter).
Knobs forward_knobs(const Halide::Target &target, const std::string &overrides);
void schedule_forward(ForwardPipeline &p, const Knobs &k, const Halide::Target &target);

Knobs backward_knobs(const Halide::Target &target, const std::string &overrides);
void schedule_backward(BackwardPipeline &p, const Knobs &k, const Halide::Target &target);

}  // namespace gka
