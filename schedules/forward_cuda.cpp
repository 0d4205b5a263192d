// CUDA schedule of the GKA forward (generators/gka_forward.h).
//
// One block per (band of 32 queries, head, batch): one warp, one query a lane.
// The band's key window is walked by tiles of key_tile keys; each tile's rows
// (the features, keys for the score and values for the sum: one tile in the
// direct form) are copied into shared memory by the whole warp, coalesced,
// then every lane reads each key as a broadcast. Each lane holds its query's
// row (registers, or shared memory at D=128) and its D accumulators of
// sum_j exp(s_ij) x_j and its row sum (fused into the same loop) in registers:
// the block-level allocation is striped over the lanes (gpu_lanes), which is
// what lets the tile loop sit between the block and its lanes. The score's dot
// product (four FMA chains) and the exponential are computed once per pair,
// by the lane that owns the query. y and lse are then written by two small
// element-wise kernels. No atomics: results are deterministic. The "any head
// dim" variant keeps the untiled form (accumulators in registers need a
// constant D): one thread per query reading keys from global memory.
//
// On an NVIDIA H200 (tests/gpu/check.sh; docs/performance.md, "NVIDIA H200"):
// 4-10 TFLOP/s by docs/spec.md's accounting. ptxas (sm_80,
// scripts/cuda_ptxas_report.py): D=64 211 registers, D=128 213, no spills.
// forward_cuda_tiled.cpp holds several queries a lane (register tiles).
#include "cuda_helpers.h"
#include "schedule_helpers.h"
#include "schedules.h"

namespace gka {

using namespace Halide;

// band: queries a block. key_tile: keys a block of the window, staged in
// shared memory. output_tokens: tokens a block of the element-wise kernels
// that write y and lse. register_tiles: 0, this file's schedule; 1, that of
// forward_cuda_tiled.cpp (constant head dims; else this one), whose lanes
// take query_rows queries (band = 32 x query_rows) and key_cols keys at once.
const std::vector<Knob<CudaForwardKnobs>> &CudaForwardKnobs::fields() {
    using K = CudaForwardKnobs;
    static const std::vector<Knob<K>> fields = {
        {"band", &K::band, {32, 64}},
        {"key_tile", &K::key_tile, {16, 32, 64}},
        {"output_tokens", &K::output_tokens, {}},
        {"register_tiles", &K::register_tiles, {0, 1}, nullptr, 0},
        {"query_rows", &K::query_rows, {1, 2}, nullptr, 1, "register_tiles"},
        {"key_cols", &K::key_cols, {2, 4, 8}, nullptr, 1, "register_tiles"}};
    return fields;
}

CudaForwardKnobs cuda_forward_knobs() {
    CudaForwardKnobs k{};
    k.band = 32, k.key_tile = 32, k.output_tokens = 8;
    k.register_tiles = 0, k.query_rows = 1, k.key_cols = 4;
    return k;
}

namespace {

// The band sums, one query a lane (this file's header).
void schedule_band_sums(ForwardPipeline &p, const CudaForwardKnobs &k) {
    cuda::require_warp_band(k.band, p.head_dim);
    const Vars &v = p.v;
    // The keys' rows, read by the score (as keys: centred in the centred form)
    // and by the sum (as values).
    const cuda::PairDot dot = cuda::split_pair_dot(p.scores.dot, p.scores.rd, p.head_dim);
    // The direct form's two are the same rows: one tile.
    const std::vector<Func> key_rows =
        p.form == ScoreForm::direct
            ? std::vector<Func>{p.values.in({p.scores.key_features, p.weighted_sum})}
            : std::vector<Func>{p.centred.in(p.scores.key_features), p.values.in(p.weighted_sum)};
    const cuda::PairLevel pairs = cuda::schedule_band_sum(
        {p.weighted_sum, p.row_sum, p.keys.y, p.keys.x, 1, {p.scores.query_features}, k.lanes}, v, p.head_dim,
        k.key_tile, key_rows);
    cuda::schedule_pair_term(p.weight, pairs);
    cuda::schedule_pair_dot(dot, pairs);
}

}  // namespace

void schedule_forward_cuda(ForwardPipeline &p, const CudaForwardKnobs &k) {
    const Vars &v = p.v;
    cuda::schedule_centre_and_spread(p.centre, p.spread, v);
    cuda::schedule_sqnorm(p.scores, v, p.head_dim);
    if (k.register_tiles && constant_head_dim(p.head_dim) > 0) {
        schedule_forward_cuda_tiles(p, k);
    } else {
        schedule_band_sums(p, k);
    }
    cuda::schedule_token_output(p.y, v, k.output_tokens);
    Var to("to"), ti("ti");
    p.lse.gpu_tile(v.t, to, ti, 128, TailStrategy::GuardWithIf).gpu_blocks(to, v.h, v.b);
}

}  // namespace gka
