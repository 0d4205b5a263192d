// The schedules' entry points: each target's family picks its knobs and schedule.
#include "schedule_helpers.h"
#include "schedules.h"

namespace gka {

using Halide::Expr;
using Halide::Target;

namespace {

template<typename Variant>
std::string knob_string_of(const Variant &knobs) {
    return std::visit([](const auto &k) { return knob_string(k); }, knobs);
}

template<typename Variant>
std::string search_space_of(const Variant &knobs) {
    return std::visit([](const auto &k) { return search_space_json<std::decay_t<decltype(k)>>(); }, knobs);
}

template<typename K, typename = void>
struct has_lane_loops : std::false_type {};
template<typename K>
struct has_lane_loops<K, std::void_t<decltype(K::lanes)>> : std::true_type {};

// A schedule's knobs for the target: its CUDA defaults, or its CPU family's,
// with the overrides ("name:value,...") applied; a GPU schedule's lane loops
// by the target's GPU API, where it has them.
template<typename Variant, typename Cuda, typename Cpu>
Variant knobs_for(const Target &target, const std::string &overrides, Cuda cuda_defaults, Cpu cpu_defaults) {
    const Family family = family_of(target);
    if (family == Family::Cuda) {
        auto k = with_overrides(cuda_defaults(), overrides);
        if constexpr (has_lane_loops<decltype(k)>::value) {
            k.lanes = target.has_feature(Target::CUDA) ? LaneLoops::warp : LaneLoops::threads;
        }
        return k;
    }
    return with_overrides(cpu_defaults(family), overrides);
}

// The schedule of the knobs' kind: `cpu` for the CPU knobs (the variant's first
// alternative), `cuda` for the CUDA ones.
template<typename Pipeline, typename Variant, typename Cpu, typename Cuda>
void apply_knobs(Pipeline &p, const Variant &knobs, Cpu cpu, Cuda cuda) {
    std::visit([&](const auto &k) {
        if constexpr (std::is_same_v<std::decay_t<decltype(k)>, std::variant_alternative_t<0, Variant>>) {
            cpu(p, k);
        } else {
            cuda(p, k);
        }
    }, knobs);
}

}  // namespace

ForwardSchedule::ForwardSchedule(const Target &target, const std::string &overrides)
    : knobs_(knobs_for<decltype(knobs_)>(target, overrides, cuda_forward_knobs, cpu_forward_knobs)) {}

int ForwardSchedule::band() const {
    return std::visit([](const auto &k) { return k.band; }, knobs_);
}

int ForwardSchedule::key_tile() const {
    return std::visit([](const auto &k) { return k.key_tile; }, knobs_);
}

void ForwardSchedule::apply(ForwardPipeline &p) const {
    apply_knobs(p, knobs_, schedule_forward_cpu, schedule_forward_cuda);
}

std::string ForwardSchedule::knobs() const { return knob_string_of(knobs_); }
std::string ForwardSchedule::search_space() const { return search_space_of(knobs_); }

BackwardSchedule::BackwardSchedule(const Target &target, const std::string &overrides)
    : knobs_(knobs_for<decltype(knobs_)>(target, overrides, cuda_backward_knobs, cpu_backward_knobs)) {}

bool BackwardSchedule::two_pass() const { return std::holds_alternative<CudaBackwardKnobs>(knobs_); }

int BackwardSchedule::band() const {
    return std::visit([](const auto &k) { return k.band; }, knobs_);
}

int BackwardSchedule::key_block() const {
    return std::visit([](const auto &k) { return k.key_block; }, knobs_);
}

int BackwardSchedule::query_block() const {
    return std::visit([](const auto &k) { return k.query_block; }, knobs_);
}

Expr BackwardSchedule::groups(const Expr &heads_and_batches, const Expr &bands) const {
    const int min_tasks = std::get<CpuBackwardKnobs>(knobs_).min_tasks;
    return Halide::clamp((min_tasks + heads_and_batches - 1) / heads_and_batches, 1, bands);
}

bool BackwardSchedule::block_pairs(const Expr &head_dim) const {
    return !two_pass() && constant_head_dim(head_dim) == 0 && std::get<CpuBackwardKnobs>(knobs_).d_padded;
}

void BackwardSchedule::apply(BackwardPipeline &p) const { schedule_backward_cuda(p, std::get<CudaBackwardKnobs>(knobs_)); }

void BackwardSchedule::apply(FusedBackwardPipeline &p) const {
    schedule_backward_cpu(p, std::get<CpuBackwardKnobs>(knobs_));
}

std::string BackwardSchedule::knobs() const { return knob_string_of(knobs_); }
std::string BackwardSchedule::search_space() const { return search_space_of(knobs_); }

DecodeSchedule::DecodeSchedule(const Target &target, const std::string &overrides)
    : knobs_(knobs_for<decltype(knobs_)>(target, overrides, cuda_decode_knobs, cpu_decode_knobs)) {}

int DecodeSchedule::chunk() const {
    return std::visit([](const auto &k) { return k.chunk; }, knobs_);
}

void DecodeSchedule::apply(DecodePipeline &p) const { apply_knobs(p, knobs_, schedule_decode_cpu, schedule_decode_cuda); }

std::string DecodeSchedule::knobs() const { return knob_string_of(knobs_); }
std::string DecodeSchedule::search_space() const { return search_space_of(knobs_); }

RandomFeatureSchedule::RandomFeatureSchedule(const Target &target, const std::string &overrides)
    : knobs_([&] {
          if (family_of(target) == Family::Cuda) {
              throw std::invalid_argument("random-feature GKA: no GPU schedule (CPU families alone)");
          }
          return with_overrides(cpu_random_feature_knobs(family_of(target)), overrides);
      }()) {}

int RandomFeatureSchedule::chunk() const { return knobs_.chunk; }
void RandomFeatureSchedule::apply(RandomFeatureStatesPipeline &p) const {
    schedule_random_feature_states_cpu(p, knobs_);
}
void RandomFeatureSchedule::apply(RandomFeaturePipeline &p) const { schedule_random_feature_forward_cpu(p, knobs_); }
void RandomFeatureSchedule::apply(RandomFeatureBackwardPipeline &p) const {
    schedule_random_feature_backward_cpu(p, knobs_);
}
std::string RandomFeatureSchedule::knobs() const { return knob_string(knobs_); }
std::string RandomFeatureSchedule::search_space() const { return search_space_json<CpuRandomFeatureKnobs>(); }

}  // namespace gka
