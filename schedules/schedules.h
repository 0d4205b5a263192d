// How each GKA kernel runs on each target family: entry points called by the
// generators. Everything here is schedule; none of it changes what is computed
// beyond the order of float sums.
#pragma once

#include <string>

#include "../generators/gka_backward.h"
#include "../generators/gka_backward_fused.h"
#include "../generators/gka_forward.h"
#include "knobs.h"

namespace gka {

// The forward's knobs for `target`: the tuned values, then `overrides`
// ("name:value,...", from the generator's `knobs` parameter).
Knobs forward_knobs(const Halide::Target &target, const std::string &overrides);
void schedule_forward(ForwardPipeline &p, const Knobs &k, const Halide::Target &target);

Knobs backward_knobs(const Halide::Target &target, const std::string &overrides);

// Each family's default knobs and schedules, which the entry points above
// (schedules.cpp) pick by target: the CPU families (forward_cpu.cpp,
// backward_cpu.cpp) and CUDA (forward_cuda.cpp, backward_cuda.cpp).
Knobs cpu_forward_knobs(Family family);
void schedule_forward_cpu(ForwardPipeline &p, const Knobs &k);
Knobs cpu_backward_knobs(Family family);
void schedule_backward_cpu(FusedBackwardPipeline &p, const Knobs &k);
Knobs cuda_forward_knobs();
void schedule_forward_cuda(ForwardPipeline &p, const Knobs &k);
Knobs cuda_backward_knobs();
void schedule_backward_cuda(BackwardPipeline &p, const Knobs &k);

}  // namespace gka
