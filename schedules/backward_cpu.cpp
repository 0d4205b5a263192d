// CPU schedule of the GKA backward (generators/gka_backward.h).
//
// Two passes over the pairs, each shaped like the forward (schedules/forward_cpu.cpp):
// - by query: one task per (query band, head, batch); micro-blocks of query_tile
//   queries walk their key window by blocks of key_block keys. The score and dP
//   tiles are GEMMs vectorized over keys; dS folds into the micro-block's
//   accumulators of sum_j dS_ij x_j (registers, vectorized over d), and the
//   sums of dS and dS*s ride along (compute_with), as per-lane partials.
// - by key: one task per (key band, head, batch); micro-blocks of key_tile keys
//   walk their query window by blocks of query_block queries. The tiles are
//   vectorized over queries, read from transposed copies of x and dy.
// Each output element is written by one task in a fixed order: deterministic.
//
// x and dy are read from head-major copies (head_major), as in the forward.
//
// Measured (as in forward_cpu.cpp, tuned knobs): causal T=4096 D=64 about 107
// GFLOP/s (GKA.md's 10*D*pairs) = 0.54x sgemm; perf puts ~80% of each pass in
// its GEMM loops. The two passes compute 7 GEMM-sized products for the 5 that
// GKA.md counts (each pass recomputes S and dP), which bounds this design near
// 5/7 of the forward's rate; a single pass (FlashAttention-2's) needs the query
// sums of several key bands combined without atomics, which this does not do
// yet. Storing the key pass's tiles with queries innermost (they are
// vectorized over queries) made the backward 3x faster.
#include "schedule_helpers.h"
#include "schedules.h"

namespace gka {

using namespace Halide;

Knobs cpu_backward_knobs(Family family) {
    switch (family) {
    case Family::Avx512:
        return Knobs({{"vector", 16}, {"band", 48}, {"query_tile", 6}, {"key_block", 64}, {"key_tile", 6},
                      {"query_block", 64}, {"d_block", 64}});
    case Family::Avx2:
        return Knobs({{"vector", 8}, {"band", 48}, {"query_tile", 3}, {"key_block", 32}, {"key_tile", 3},
                      {"query_block", 32}, {"d_block", 32}});
    default:
        return Knobs({{"vector", 4}, {"band", 48}, {"query_tile", 3}, {"key_block", 16}, {"key_tile", 3},
                      {"query_block", 16}, {"d_block", 16}});
    }
}

void schedule_backward_cpu(BackwardPipeline &p, const Knobs &k) {
    if (k["band"] % k["query_tile"] != 0 || k["band"] % k["key_tile"] != 0) {
        throw std::invalid_argument("gka schedule: band must be a multiple of query_tile and key_tile");
    }
    const int vec = k["vector"];
    const Vars &v = p.v;

    p.delta.compute_root().vectorize(v.t, vec, TailStrategy::RoundUp).parallel(v.b);
    p.delta.update().vectorize(v.t, vec, TailStrategy::RoundUp).parallel(v.b);
    head_major(p.x, vec);
    const Func dy_rows = head_major(p.dy, vec);
    schedule_sqnorm(p.by_query.scores, v, p.head_dim, vec);
    schedule_sqnorm(p.by_key.scores, v, p.head_dim, vec);

    // By query: tiles vectorized over keys j, unrolled over queries i.
    {
        const int qt = k["query_tile"], kb = k["key_block"];
        BandSum sum{p.query_sum, p.query_stats, p.keys.y, p.keys.x};
        schedule_band_sum(sum, v, p.head_dim, vec, qt, k["d_block"]);
        // Per key block: keys transposed for the score and dP GEMMs; values read in place.
        const Scores &scores = p.by_query.scores;
        transposed_block_copy(scores.key_features, {scores.dot, p.by_query.dprob}, sum.block_level(), kb, vec);
        PairTerms &t = p.by_query;
        const LoopLevel at = sum.tile_level();
        t.dscore.compute_at(at).bound_extent(v.j, kb).bound_extent(v.i, qt).vectorize(v.j, vec);
        schedule_score_tile(t.scores.dot, t.scores.rd, v.j, v.i, at, kb, qt, vec);
        schedule_score_tile(t.dprob, t.scores.rd, v.j, v.i, at, kb, qt, vec);
    }
    // By key: tiles vectorized over queries i, unrolled over keys j.
    {
        const int kt = k["key_tile"], qb = k["query_block"];
        BandSum sum{p.key_sum, p.key_stats, p.queries.y, p.queries.x};
        schedule_band_sum(sum, v, p.head_dim, vec, kt, k["d_block"]);
        // Per query block: queries and their dy transposed for the GEMMs; values read in place.
        transposed_block_copy(p.by_key.scores.query_features, {p.by_key.scores.dot}, sum.block_level(), qb, vec);
        transposed_block_copy(dy_rows, {p.by_key.dprob}, sum.block_level(), qb, vec);
        PairTerms &t = p.by_key;
        const LoopLevel at = sum.tile_level();
        for (Func f : {t.dscore, t.prob}) {
            f.compute_at(at).bound_extent(v.i, qb).bound_extent(v.j, kt).reorder_storage(v.i, v.j).reorder(v.i, v.j)
                .vectorize(v.i, vec);
        }
        schedule_score_tile(t.scores.dot, t.scores.rd, v.i, v.j, at, qb, kt, vec);
        schedule_score_tile(t.dprob, t.scores.rd, v.i, v.j, at, qb, kt, vec);
    }

    p.dsigma_sum.compute_root();
    schedule_token_output(p.dx, v, vec);
}

}  // namespace gka
