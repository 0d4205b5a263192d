// How each GKA kernel runs on each target family: the schedules' knobs and
// entry points, called by the generators (kernels/). Everything here is
// schedule; none of it changes what is computed beyond the order of float sums.
#pragma once

#include <string>
#include <variant>

#include "../generators/gka_backward.h"
#include "../generators/gka_backward_fused.h"
#include "../generators/gka_decode.h"
#include "../generators/gka_forward.h"
#include "../generators/gka_random_features.h"
#include "knobs.h"

namespace gka {

// Each schedule's knobs; their meanings, field tables (fields()) and each
// family's defaults are in the schedule's file, which the name gives. (The
// defaults start value-initialized: a field a family forgets is 0, never
// garbage.)
struct CpuForwardKnobs {  // forward_cpu.cpp
    int vector, band, score_tile, query_tile, key_tile, key_chunk, d_block;
    static const std::vector<Knob<CpuForwardKnobs>> &fields();
};
struct CudaForwardKnobs {  // forward_cuda.cpp
    int band, key_tile, output_tokens, register_tiles, query_rows, key_cols;
    LaneLoops lanes;
    static const std::vector<Knob<CudaForwardKnobs>> &fields();
};
struct CpuBackwardKnobs {  // backward_cpu.cpp
    int vector, band, key_block, key_tile, query_block, query_tile, d_block, min_tasks, d_padded;
    static const std::vector<Knob<CpuBackwardKnobs>> &fields();
};
struct CudaBackwardKnobs {  // backward_cuda.cpp
    int band, key_block, query_block, output_tokens, row_padding;
    LaneLoops lanes;
    static const std::vector<Knob<CudaBackwardKnobs>> &fields();
};
struct CpuDecodeKnobs {  // decode_cpu.cpp
    int vector, chunk;
    static const std::vector<Knob<CpuDecodeKnobs>> &fields();
};
struct CudaDecodeKnobs {  // decode_cuda.cpp
    int chunk, key_threads, output_tokens;
    static const std::vector<Knob<CudaDecodeKnobs>> &fields();
};

struct CpuRandomFeatureKnobs {  // random_features_cpu.cpp
    int vector, chunk;
    static const std::vector<Knob<CpuRandomFeatureKnobs>> &fields();
};

CpuForwardKnobs cpu_forward_knobs(Family family);
CudaForwardKnobs cuda_forward_knobs();
CpuBackwardKnobs cpu_backward_knobs(Family family);
CudaBackwardKnobs cuda_backward_knobs();
CpuDecodeKnobs cpu_decode_knobs(Family family);
CudaDecodeKnobs cuda_decode_knobs();
CpuRandomFeatureKnobs cpu_random_feature_knobs(Family family);

void schedule_forward_cpu(ForwardPipeline &p, const CpuForwardKnobs &k);
void schedule_forward_cuda(ForwardPipeline &p, const CudaForwardKnobs &k);
// The band sums with register tiles (forward_cuda_tiled.cpp), within schedule_forward_cuda.
void schedule_forward_cuda_tiles(ForwardPipeline &p, const CudaForwardKnobs &k);
void schedule_backward_cpu(FusedBackwardPipeline &p, const CpuBackwardKnobs &k);
void schedule_backward_cuda(BackwardPipeline &p, const CudaBackwardKnobs &k);
void schedule_decode_cpu(DecodePipeline &p, const CpuDecodeKnobs &k);
void schedule_decode_cuda(DecodePipeline &p, const CudaDecodeKnobs &k);
void schedule_random_feature_states_cpu(RandomFeatureStatesPipeline &p, const CpuRandomFeatureKnobs &k);
void schedule_random_feature_forward_cpu(RandomFeaturePipeline &p, const CpuRandomFeatureKnobs &k);
void schedule_random_feature_backward_cpu(RandomFeatureBackwardPipeline &p, const CpuRandomFeatureKnobs &k);

// The forward's schedule for a target: its family's knobs (the defaults, then
// "name:value,..." overrides: the build passes schedules/tuned.tsv's row) and
// what the algorithm's structure takes from them.
class ForwardSchedule {
public:
    ForwardSchedule(const Halide::Target &target, const std::string &overrides);
    int band() const;      // queries a band: the mask's unit of key windows
    int key_tile() const;  // keys a block of a band's window
    void apply(ForwardPipeline &p) const;
    std::string knobs() const;         // "name:value,..."
    std::string search_space() const;  // JSON (knobs.h, search_space_json)

private:
    std::variant<CpuForwardKnobs, CudaForwardKnobs> knobs_;
};

class BackwardSchedule {
public:
    BackwardSchedule(const Halide::Target &target, const std::string &overrides);
    // Which backward the target builds. One pass over the pairs (the CPU's,
    // gka_backward_fused.h) adds the query sums of many key bands at once; on
    // a GPU that would need atomics, so CUDA walks the pairs once per
    // direction (gka_backward.h).
    bool two_pass() const;
    int band() const;
    int key_block() const;
    int query_block() const;
    // The one-pass backward's key-band groups: enough for min_tasks tasks of
    // (group, head, batch), at most one a band; from the shape alone, so that
    // results never depend on the thread count.
    Halide::Expr groups(const Halide::Expr &heads_and_batches, const Halide::Expr &bands) const;
    // Whether the one-pass backward sums the features by pairs of blocks
    // (FusedBackwardPipeline::block_pairs): where the head dim is known at run
    // time alone. There the sums' rows are a run-time stride apart, and LLVM
    // keeps accumulators that may alias in memory; tiles of their own keep
    // them in registers. A head dim fixed at compile time keeps them in
    // registers in the sums themselves, and the tiles cost it (their values
    // live across the fused stages' conditions and spill); so do micro-tiles
    // that guard their d edge (d_padded 0: NEON's, whose tiles spilled).
    bool block_pairs(const Halide::Expr &head_dim) const;
    void apply(BackwardPipeline &p) const;
    void apply(FusedBackwardPipeline &p) const;
    std::string knobs() const;
    std::string search_space() const;

private:
    std::variant<CpuBackwardKnobs, CudaBackwardKnobs> knobs_;
};

class DecodeSchedule {
public:
    DecodeSchedule(const Halide::Target &target, const std::string &overrides);
    int chunk() const;  // cached keys summed apart (gka_decode.h)
    void apply(DecodePipeline &p) const;
    std::string knobs() const;
    std::string search_space() const;

private:
    std::variant<CpuDecodeKnobs, CudaDecodeKnobs> knobs_;
};

// Random-feature GKA's passes: CPU families alone (a GPU target is refused:
// no CUDA schedule yet).
class RandomFeatureSchedule {
public:
    RandomFeatureSchedule(const Halide::Target &target, const std::string &overrides);
    int chunk() const;  // tokens a chunk (gka_random_features.h)
    void apply(RandomFeatureStatesPipeline &p) const;
    void apply(RandomFeaturePipeline &p) const;
    void apply(RandomFeatureBackwardPipeline &p) const;
    std::string knobs() const;
    std::string search_space() const;

private:
    CpuRandomFeatureKnobs knobs_;
};

}  // namespace gka
