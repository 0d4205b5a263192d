// CUDA schedule of the GKA backward (generators/gka_backward.h).
//
// Two passes over the pairs (the CPU walks them once, but a GPU would need
// atomics for that), each shaped like the CUDA forward (forward_cuda.cpp): one
// warp per band of 32 tokens, one token a lane, the rows the band walks staged
// in shared memory a tile at a time, accumulators and the lane's own rows in
// registers striped over the lanes (own rows in shared memory where registers
// run out), the pair dot products as four FMA chains.
// - by query: each lane walks the keys of its query's band (x_j staged),
//   holds x_i, dy_i and y_i, and keeps sum_j dS_ij (x_j - x_i) and the scalar
//   sums of dS and dS*s (fused);
// - by key: each lane walks the queries of its key's band (x_i, dy_i and y_i
//   staged), holds x_j, and keeps sum_i dS_ij (x_i - x_j) / sigma^2 + P_ij dy_i.
// dx is then an element-wise kernel, and dsigma one block per head summing the
// query pass's dS*s over every token in a fixed order. Every output element is
// written by one thread in a fixed order: no atomics, deterministic results.
// On an NVIDIA H200 (tests/gpu/check.sh; docs/performance.md, "NVIDIA H200"):
// D=64 3-6 TFLOP/s, D=128 1-1.6 (blocks of 16 tokens there,
// schedules/tuned.tsv). ptxas (sm_80, scripts/cuda_ptxas_report.py): D=64 253
// and 215 registers, D=128 253 and 222, no spills.
#include <tuple>

#include "cuda_helpers.h"
#include "schedule_helpers.h"
#include "schedules.h"

namespace gka {

using namespace Halide;

// band: tokens a block, one a lane: one warp. key_block / query_block: the
// tokens a block of each direction's windows, staged in shared memory.
// output_tokens: tokens a block of the element-wise kernel that writes dx.
// row_padding: the layout of a lane's own rows where they are held in shared
// memory (cuda_helpers.h, BandSum::row_padding): 0, 2 or 4.
// The tuner tries query_block up to 32: the key pass stages three rows a query
// (x_i, dy_i, y_i), 96 KiB at 64 queries and D=128, past the 48 KiB a block
// gets without the opt-in.
const std::vector<Knob<CudaBackwardKnobs>> &CudaBackwardKnobs::fields() {
    using K = CudaBackwardKnobs;
    static const std::vector<Knob<K>> fields = {{"band", &K::band, {}},
                                                {"key_block", &K::key_block, {16, 32, 64}},
                                                {"query_block", &K::query_block, {16, 32}},
                                                {"output_tokens", &K::output_tokens, {}},
                                                {"row_padding", &K::row_padding, {0, 2, 4}, nullptr, 0}};
    return fields;
}

CudaBackwardKnobs cuda_backward_knobs() {
    CudaBackwardKnobs k{};
    k.band = 32, k.key_block = 32, k.query_block = 32, k.output_tokens = 8, k.row_padding = 0;
    return k;
}

void schedule_backward_cuda(BackwardPipeline &p, const CudaBackwardKnobs &k) {
    cuda::require_warp_band(k.band, p.head_dim);
    if (k.row_padding != 0 && k.row_padding != 2 && k.row_padding != 4) {
        throw std::invalid_argument("gka CUDA schedule: row_padding takes 0, 2 or 4 (the vector loads that "
                                    "stay free of bank conflicts)");
    }
    const Vars &v = p.v;
    cuda::schedule_centre_and_spread(p.centre, p.spread, v);
    if (p.form == ScoreForm::centred) cuda::schedule_token_rows(p.delta, v, 128);
    for (Scores *s : {&p.by_query.scores, &p.by_key.scores}) cuda::schedule_sqnorm(*s, v, p.head_dim);

    // The pair dot products, split into chains first: wrappers of their
    // operands are made for the Funcs that read them (PairDot::terms).
    const cuda::PairDot query_dot = cuda::split_pair_dot(p.by_query.scores.dot, p.by_query.scores.rd, p.head_dim),
                        query_dprob = cuda::split_pair_dot(p.by_query.dprob, p.by_query.scores.rd, p.head_dim),
                        key_dot = cuda::split_pair_dot(p.by_key.scores.dot, p.by_key.scores.rd, p.head_dim),
                        key_dprob = cuda::split_pair_dot(p.by_key.dprob, p.by_key.scores.rd, p.head_dim);
    // The rows each direction walks, staged a tile at a time: the keys' x in
    // the query direction; the queries' x, dy (and y) in the key direction.
    std::vector<Func> key_rows{p.key_x.in(p.by_query.scores.key_features)};
    std::vector<Func> query_rows{p.x.in(p.by_key.scores.query_features), p.dy.in({key_dprob.terms, p.key_sum})};
    // Each lane's own token's rows, held where they fit (schedule_band_sum):
    // the query's x (and dy and y) in the query direction; the key's x in the other.
    std::vector<Func> own_query_rows{p.by_query.scores.query_features};
    if (p.form == ScoreForm::direct) {  // dP - Dl is dy_i . (x_j - y_i)
        own_query_rows.push_back(p.dy.in(query_dprob.terms));
        own_query_rows.push_back(p.y.in(query_dprob.terms));
        query_rows.push_back(p.y.in(key_dprob.terms));
    }
    // The other kernels' pair terms (a square root, a division) take more
    // registers: one own row fewer held at D=64 (ptxas: the Laplace's chunk
    // query pass spilled 8 bytes with two).
    const int held_register_budget = p.by_query.scores.function == KernelFunction::gaussian ? 192 : 128;
    const cuda::BandSum by_query{p.query_sum, p.query_stats, p.keys.y,      p.keys.x,
                                 1,           own_query_rows, k.lanes,       k.row_padding,
                                 held_register_budget};
    const cuda::BandSum by_key{p.key_sum, p.key_stats, p.queries.y, p.queries.x, 0, {p.by_key.scores.key_features},
                               k.lanes,   k.row_padding};
    for (auto [sum, terms, rows, block, dots] :
         {std::tuple{by_query, &p.by_query, key_rows, k.key_block, std::pair{query_dot, query_dprob}},
          std::tuple{by_key, &p.by_key, query_rows, k.query_block, std::pair{key_dot, key_dprob}}}) {
        const cuda::PairLevel pairs = cuda::schedule_band_sum(sum, v, p.head_dim, block, rows);
        cuda::schedule_pair_term(terms->dscore, pairs);
        cuda::schedule_pair_term(terms->prob, pairs);
        cuda::schedule_pair_dot(dots.first, pairs);
        cuda::schedule_pair_dot(dots.second, pairs);
    }

    // dsigma: one block per head, one thread summing every token in order.
    Var ho("ho"), hi("hi");
    p.dsigma_sum.compute_root().gpu_tile(v.h, ho, hi, 1);
    p.dsigma_sum.update().gpu_tile(v.h, ho, hi, 1);
    p.dsigma.gpu_tile(v.h, ho, hi, 32, TailStrategy::GuardWithIf);

    cuda::schedule_token_output(p.dx, v, k.output_tokens);
    if (p.dx_keys.defined()) cuda::schedule_token_output(p.dx_keys, v, k.output_tokens);
}

}  // namespace gka
