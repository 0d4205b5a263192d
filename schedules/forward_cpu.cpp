// CPU schedule of the GKA forward (generators/gka_forward.h).
//
// One task per (band of queries, head, batch). In a band, each micro-block of
// query_tile queries walks the band's key window by blocks of key_tile keys:
// the score tile (key_tile x query_tile) is a small GEMM vectorized over keys
// that reads keys from a transposed copy of x; it is exponentiated (and masked)
// in place, then folded into the micro-block's accumulators (d_block x
// query_tile, vectorized over d), which stay in registers across the key block.
// Row sums ride along in the same loop (compute_with). Per key block, the keys
// are copied transposed and the values copied contiguous (schedule_helpers.h).
//
// Measured (2-core AVX-512 EPYC VM, B=1 H=8 D=64, medians of 3, `make bench`):
// causal T=4096 104-126 GFLOP/s = 0.67-0.69x OpenBLAS sgemm 2048^3 in the same
// run (two runs), full window ~130; (255, 0) 84 GFLOP/s at T=4096, 0.75x the
// causal pairs/s. Whole key blocks past a band's last key are skipped (the
// algorithm's block predicate, Mask::window); computing and masking them cost
// causal 35% of its time. In the full window, perf puts ~55% of the time in
// the two GEMM loops (24 FMAs, 4 vector loads and 6 broadcasts an iteration,
// accumulators in registers), ~20% in exp and the mask, ~20% in the per-block
// copies (their loads miss L1: the rows of x are H*D floats apart), the rest
// in row sums and loops.
// Per-block key copies instead of one whole-tensor transposed copy: (255, 0)
// +20%, causal within noise (interleaved A/B of the two generators).
#include "schedule_helpers.h"
#include "schedules.h"

namespace gka {

using namespace Halide;

Knobs cpu_forward_knobs(Family family) {
    switch (family) {
    // 32 vector registers: 24 accumulators (6 queries x 4 vectors) in each GEMM.
    case Family::Avx512:
        return Knobs({{"vector", 16}, {"band", 48}, {"query_tile", 6}, {"key_tile", 64}, {"d_block", 64}});
    // 16 vector registers: 12 accumulators (3 queries x 4 vectors) in each GEMM.
    case Family::Avx2:
        return Knobs({{"vector", 8}, {"band", 48}, {"query_tile", 3}, {"key_tile", 32}, {"d_block", 32}});
    default:
        return Knobs({{"vector", 4}, {"band", 48}, {"query_tile", 3}, {"key_tile", 16}, {"d_block", 16}});
    }
}

void schedule_forward_cpu(ForwardPipeline &p, const Knobs &k) {
    if (k["band"] % k["query_tile"] != 0) {
        throw std::invalid_argument("gka schedule: band must be a multiple of query_tile");
    }
    const int vec = k["vector"], qt = k["query_tile"], kt = k["key_tile"];
    const Vars &v = p.v;

    schedule_sqnorm(p.scores, v, p.head_dim, vec);

    BandSum sum{p.weighted_sum, p.row_sum, p.keys.y, p.keys.x};
    schedule_band_sum(sum, v, p.head_dim, vec, qt, k["d_block"]);
    // Keys transposed per key block for the score GEMM; values read in place.
    head_major(p.x, vec);
    block_copy(p.scores.key_features, {p.scores.dot}, sum.block_level(), true, vec);
    p.weight.compute_at(sum.tile_level()).bound_extent(v.j, kt).bound_extent(v.i, qt).vectorize(v.j, vec);
    schedule_score_tile(p.scores.dot, p.scores.rd, v.j, v.i, sum.tile_level(), kt, qt, vec);

    schedule_token_output(p.y, v, vec);
    p.lse.vectorize(v.t, vec, TailStrategy::GuardWithIf).parallel(v.h);
}

}  // namespace gka
