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

// The CUDA family's knobs and schedules (forward_cuda.cpp, backward_cuda.cpp),
// which the entry points above call for a target with a GPU feature.
Knobs cuda_forward_knobs();
void schedule_forward_cuda(ForwardPipeline &p, const Knobs &k);
Knobs cuda_backward_knobs();
void schedule_backward_cuda(BackwardPipeline &p, const Knobs &k);

}  // namespace gka
