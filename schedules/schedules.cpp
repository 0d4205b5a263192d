// The schedules' entry points: each target's family picks its knobs and schedule.
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

}  // namespace

ForwardSchedule::ForwardSchedule(const Target &target, const std::string &overrides) {
    const Family family = family_of(target);
    if (family == Family::Cuda) {
        knobs_ = with_overrides(cuda_forward_knobs(), overrides);
    } else {
        knobs_ = with_overrides(cpu_forward_knobs(family), overrides);
    }
}

int ForwardSchedule::band() const {
    return std::visit([](const auto &k) { return k.band; }, knobs_);
}

int ForwardSchedule::key_tile() const {
    return std::visit([](const auto &k) { return k.key_tile; }, knobs_);
}

void ForwardSchedule::apply(ForwardPipeline &p) const {
    std::visit([&](const auto &k) {
        if constexpr (std::is_same_v<std::decay_t<decltype(k)>, CudaForwardKnobs>) {
            schedule_forward_cuda(p, k);
        } else {
            schedule_forward_cpu(p, k);
        }
    }, knobs_);
}

std::string ForwardSchedule::knobs() const { return knob_string_of(knobs_); }
std::string ForwardSchedule::search_space() const { return search_space_of(knobs_); }

BackwardSchedule::BackwardSchedule(const Target &target, const std::string &overrides) {
    const Family family = family_of(target);
    if (family == Family::Cuda) {
        knobs_ = with_overrides(cuda_backward_knobs(), overrides);
    } else {
        knobs_ = with_overrides(cpu_backward_knobs(family), overrides);
    }
}

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

void BackwardSchedule::apply(BackwardPipeline &p) const { schedule_backward_cuda(p, std::get<CudaBackwardKnobs>(knobs_)); }

void BackwardSchedule::apply(FusedBackwardPipeline &p) const {
    schedule_backward_cpu(p, std::get<CpuBackwardKnobs>(knobs_));
}

std::string BackwardSchedule::knobs() const { return knob_string_of(knobs_); }
std::string BackwardSchedule::search_space() const { return search_space_of(knobs_); }

DecodeSchedule::DecodeSchedule(const Target &target, const std::string &overrides) {
    const Family family = family_of(target);
    if (family == Family::Cuda) {
        knobs_ = with_overrides(cuda_decode_knobs(), overrides);
    } else {
        knobs_ = with_overrides(cpu_decode_knobs(family), overrides);
    }
}

int DecodeSchedule::chunk() const {
    return std::visit([](const auto &k) { return k.chunk; }, knobs_);
}

void DecodeSchedule::apply(DecodePipeline &p) const {
    std::visit([&](const auto &k) {
        if constexpr (std::is_same_v<std::decay_t<decltype(k)>, CudaDecodeKnobs>) {
            schedule_decode_cuda(p, k);
        } else {
            schedule_decode_cpu(p, k);
        }
    }, knobs_);
}

std::string DecodeSchedule::knobs() const { return knob_string_of(knobs_); }
std::string DecodeSchedule::search_space() const { return search_space_of(knobs_); }

}  // namespace gka
