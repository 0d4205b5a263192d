// The schedules' entry points: each target's family picks its knobs and schedule.
#include "schedules.h"

namespace gka {

using Halide::Target;

Knobs forward_knobs(const Target &target, const std::string &overrides) {
    const Family family = family_of(target);
    Knobs k = family == Family::Cuda ? cuda_forward_knobs() : cpu_forward_knobs(family);
    k.override_with(overrides);
    return k;
}

void schedule_forward(ForwardPipeline &p, const Knobs &k, const Target &target) {
    if (family_of(target) == Family::Cuda) return schedule_forward_cuda(p, k);
    schedule_forward_cpu(p, k);
}

Knobs backward_knobs(const Target &target, const std::string &overrides) {
    const Family family = family_of(target);
    Knobs k = family == Family::Cuda ? cuda_backward_knobs() : cpu_backward_knobs(family);
    k.override_with(overrides);
    return k;
}

}  // namespace gka
