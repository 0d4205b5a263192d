// The band sums of the GKA forward's CUDA schedule with register tiles
// (forward_cuda.cpp's knob register_tiles:1): each lane holds query_rows
// queries, so that each row read from shared memory feeds several queries'
// FMAs, and the pairs' weights go through shared memory between two
// register-tiled phases.
//
// One block per (band of 32 x query_rows queries, head, batch): one warp.
// The band's query rows are staged in shared memory once; its key window is
// walked by tiles of key_tile keys, each tile's rows staged in shared memory
// (float4 a lane), and for each tile:
// 1. the weight tile, key_tile x band, into shared memory: each lane
//    computes key_cols keys x its query_rows queries at once, their squared
//    distances as four partial sums over the head dim (rfactor), reading both
//    rows a float4 at a time: key_cols + query_rows loads feed
//    4 x key_cols x query_rows FMAs;
// 2. each lane's accumulators, query_rows x the head dim in registers (the
//    block's allocation striped over the lanes), take each key's weights for
//    its queries (one vector load) times the key's row (float4 loads, the
//    same address in every lane: broadcasts);
// 3. the row sums, in the same loop.
// The block is one warp because Halide 21 stripes a block-level register
// allocation over the lanes of one warp only (an allocation outside the lane
// loop must be indexed by the lane alone): the accumulators cannot be split
// by head dim over several warps while the tile loop sits between the block
// and its threads. So a lane holds query_rows x D accumulators: two queries
// at D = 64, one at D = 128 (where key_cols carries the reuse of phase 1, and
// phase 2 does 4 FMAs a float4 load). Every weight is computed once and every
// sum added by one lane in a fixed order: deterministic, no atomics.
//
// ptxas and SASS (sm_86, tests/cuda_static_guards.sh): D = 64 (query_rows 2,
// key_cols 4) 230 registers, no spills, 10.1 FFMAs per shared-memory load in
// the pair kernel; D = 128 (query_rows 1, key_cols 8) 232 registers, 5.5;
// forward_cuda.cpp's schedule 4.6 and 1.4. Not yet run on a GPU: its rows are
// schedules/cuda_candidates.tsv's.
#include <stdexcept>

#include "cuda_helpers.h"
#include "schedule_helpers.h"
#include "schedules.h"

namespace gka {

using namespace Halide;

namespace {

// Rows (d, h, t, b) of `tokens` tokens staged in shared memory at `at` by
// the block's warp, four head-dim elements (one vector) a lane.
void stage_rows(Func rows, LoopLevel at, int head_dim, int tokens, LaneLoops lanes) {
    const std::vector<Var> a = rows.args();
    Var dt("dt"), lane("lane"), quad("quad");
    rows.compute_at(at)
        .store_in(MemoryType::GPUShared)
        .bound_extent(a[0], head_dim)
        .bound_extent(a[2], tokens)
        .split(a[0], a[0], quad, 4)
        .reorder(quad, a[0], a[2], a[1], a[3])
        .fuse(a[0], a[2], dt)
        .split(dt, dt, lane, 32, TailStrategy::GuardWithIf)
        .vectorize(quad);
    cuda::over_lanes(rows, lane, lanes);
}

}  // namespace

void schedule_forward_cuda_tiles(ForwardPipeline &p, const CudaForwardKnobs &k) {
    const int head_dim = constant_head_dim(p.head_dim);
    if (head_dim <= 0 || head_dim % 4 || p.form != ScoreForm::direct || p.bf16_products) {
        throw std::invalid_argument("gka CUDA schedule: register tiles take a constant head dim, "
                                    "a multiple of 4, and the direct form");
    }
    if (k.band != 32 * k.query_rows || k.key_tile % k.key_cols) {
        throw std::invalid_argument("gka CUDA schedule: register tiles take band = 32 x query_rows and a key_tile "
                                    "that divides by key_cols");
    }
    const Vars &v = p.v;
    // The dot products split first: the rows' wrappers are made for the Func
    // that reads them (PairDot::terms).
    cuda::PairDot dot = cuda::split_pair_dot(p.scores.dot, p.scores.rd, p.head_dim);

    // What y and lse read: the band's sums, written once by their lanes.
    Func sum_out = p.weighted_sum.in(), stats_out = p.row_sum.in();
    Var lane("lane"), row("row");
    sum_out.compute_root()
        .split(v.offset, lane, row, k.query_rows)
        .reorder(v.d, row, lane, v.band, v.h, v.b)
        .gpu_blocks(v.band, v.h, v.b)
        .unroll(v.d)
        .unroll(row);
    stats_out.compute_root()
        .split(v.offset, lane, row, k.query_rows)
        .reorder(row, lane, v.band, v.h, v.b)
        .gpu_blocks(v.band, v.h, v.b)
        .unroll(row);
    cuda::over_lanes(sum_out, lane, k.lanes);
    cuda::over_lanes(stats_out, lane, k.lanes);
    stats_out.compute_with(sum_out, lane);
    const LoopLevel block(sum_out, v.band);

    // The accumulators: registers striped over the lanes, query_rows queries
    // x the head dim a lane.
    Func sum = p.weighted_sum, stats = p.row_sum;
    const RVar in_tile = p.keys.x, tile = p.keys.y;
    for (Func f : {sum, stats}) f.bound_extent(v.band, 1).bound_extent(v.h, 1).bound_extent(v.b, 1);
    sum.bound_extent(v.d, head_dim).bound_extent(v.offset, k.band);
    stats.bound_extent(v.offset, k.band);
    for (Func f : {sum, stats}) {
        f.compute_at(block).store_in(MemoryType::Register).split(v.offset, lane, row, k.query_rows).unroll(row);
        f.update().split(v.offset, lane, row, k.query_rows).unroll(row);
        cuda::over_lanes(f, lane, k.lanes);
        cuda::over_lanes(f.update(), lane, k.lanes);
    }
    sum.unroll(v.d).reorder(v.d, row, lane);
    sum.update().reorder(v.d, row, in_tile, lane, tile).unroll(v.d).vectorize(v.d, 4);
    stats.update().reorder(row, in_tile, lane, tile);
    stats.update().compute_with(sum.update(), in_tile);

    // The band's queries, once; each tile's keys (their features and values:
    // one tile in the direct form).
    const LoopLevel each_tile(sum, tile);
    stage_rows(p.scores.query_features.in(dot.terms), block, head_dim, k.band, k.lanes);
    stage_rows(p.values.in({p.scores.key_features, sum}), each_tile, head_dim, k.key_tile, k.lanes);

    // The weight tile, queries innermost (what a lane of the sum reads: its
    // query_rows queries of one key, one vector), a lane's queries x key_cols
    // keys at a time.
    Var jo("jo"), ji("ji"), io("io"), ii("ii");
    p.weight.compute_at(each_tile)
        .store_in(MemoryType::GPUShared)
        .bound_extent(v.j, k.key_tile)
        .bound_extent(v.i, k.band)
        .reorder_storage(v.i, v.j)
        .split(v.j, jo, ji, k.key_cols)
        .split(v.i, io, ii, k.query_rows)
        .reorder(ii, ji, io, jo)
        .unroll(ji)
        .vectorize(ii);
    cuda::over_lanes(p.weight, io, k.lanes);
    // Each pair's dot product as four partial sums over the head dim (one
    // float4 load of each row a step), for key_cols keys x query_rows queries.
    for (Func f : {dot.sum, dot.terms}) {
        f.compute_at(p.weight, io).store_in(MemoryType::Register).bound_extent(v.j, k.key_cols).bound_extent(
            v.i, k.query_rows);
    }
    dot.sum.reorder(v.i, v.j).unroll(v.i).unroll(v.j);
    dot.sum.update().reorder(dot.inner, v.i, v.j).unroll(dot.inner).unroll(v.i).unroll(v.j);
    // (Zeroed by scalar stores: unrolled vector ones would merge into one
    // store wider than OpenCL's vectors.)
    dot.terms.bound_extent(dot.chain, dot.chains).reorder(dot.chain, v.i, v.j).unroll(dot.chain).unroll(v.i).unroll(v.j);
    dot.terms.update().reorder(dot.chain, v.i, v.j, dot.outer).vectorize(dot.chain).unroll(v.i).unroll(v.j);
}

}  // namespace gka
