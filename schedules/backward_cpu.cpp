// CPU schedule of the GKA backward: the one-pass algorithm
// (generators/gka_backward_fused.h).
//
// One task per (head, batch) walks every key band; the band's query window goes
// by blocks of query_block queries (x and dy transposed per block, as the
// forward's keys), and in a block each micro-tile of key_tile keys
// - computes its tile of pair terms, key_tile x query_block, vectorized over
//   queries: the score and dP GEMMs, then P and dS in place;
// - adds them to its keys' sums (d_block x key_tile accumulators vectorized
//   over d, in registers across the block), to the block's queries' sums
//   (each query's row loaded once and stored once per micro-tile), and to its
//   keys' scalar sums of dS and dS*s: three updates fused (compute_with), all
//   reading the one tile.
// A head's sums are written by one task in a fixed order: deterministic, no
// atomics. The price: B*H tasks at most (one core per head; B=1, H=1 runs on
// one thread).
//
// Measured (2-core AVX-512 VM, B=1 H=8 T=4096 causal, OpenBLAS sgemm 2048^3 =
// 189 GFLOP/s in the same run): D=64 146 GFLOP/s (GKA.md's 10*D*pairs, 0.78x
// sgemm), D=128 134 (0.71x). The two-pass schedule it replaced (each pass
// recomputing S and dP: 7 GEMM-sized products for GKA.md's 5) was 1.25-1.35x
// slower on every window and head dim (interleaved A/B of the two generators).
// perf, D=64: the two tile GEMMs ~29% of the time, the key sums ~28%, the
// query sums ~15%, exp/P/dS ~10%, the scalar sums ~6%. Vector per-lane partials
// for the scalar sums (rfactor) measured the same; knobs within 3% of each other.
#include "schedule_helpers.h"
#include "schedules.h"

namespace gka {

using namespace Halide;

Knobs cpu_backward_knobs(Family family) {
    switch (family) {
    case Family::Avx512:
        return Knobs({{"vector", 16}, {"band", 48}, {"key_tile", 6}, {"query_block", 64}, {"d_block", 64}});
    case Family::Avx2:
        return Knobs({{"vector", 8}, {"band", 48}, {"key_tile", 3}, {"query_block", 32}, {"d_block", 32}});
    default:
        return Knobs({{"vector", 4}, {"band", 48}, {"key_tile", 3}, {"query_block", 16}, {"d_block", 16}});
    }
}

namespace {

// A head's sums (d, h, t, b), each head's tokens contiguous.
void schedule_head_sum(Func f, const Vars &v, int vec) {
    f.compute_root()
        .reorder_storage(v.d, v.t, v.h, v.b)
        .reorder(v.d, v.t, v.h, v.b)
        .vectorize(v.d, vec, TailStrategy::GuardWithIf)
        .parallel(v.h);
}

}  // namespace

void schedule_backward_cpu(FusedBackwardPipeline &p, const Knobs &k) {
    const int vec = k["vector"], kt = k["key_tile"], qb = k["query_block"];
    const Vars &v = p.v;

    p.delta.compute_root().vectorize(v.t, vec, TailStrategy::RoundUp).parallel(v.b);
    p.delta.update().vectorize(v.t, vec, TailStrategy::RoundUp).parallel(v.b);
    head_major(p.x, vec);
    const Func dy_rows = head_major(p.dy, vec);
    schedule_sqnorm(p.terms.scores, v, p.head_dim, vec);

    schedule_head_sum(p.key_sum, v, vec);
    schedule_head_sum(p.query_sum, v, vec);
    p.key_stats.compute_root().reorder_storage(v.t, v.h, v.b).parallel(v.h);

    // The fused updates: loops (innermost first) d, key_in_tile, query_in_block,
    // d blocks, key_tile, query_block, key_band, then h and b in parallel
    // (nested: fusing them confuses the bounds of the fused tiles).
    Var dd("dd");
    Stage query_sum = p.query_sum.update(), key_sum = p.key_sum.update(), key_stats = p.key_stats.update();
    for (Stage s : {query_sum, key_sum}) {
        split_head_dim(s, v.d, dd, p.head_dim, vec, k["d_block"],
                       {v.d, p.key_in_tile, p.query_in_block, dd, p.key_tile, p.query_block, p.key_band, v.h, v.b});
        s.unroll(p.key_in_tile)
            .parallel(v.h)
            .parallel(v.b);
    }
    key_stats.reorder(p.key_in_tile, p.query_in_block, p.key_tile, p.query_block, p.key_band, v.h, v.b)
        .unroll(p.key_in_tile)
        .parallel(v.h)
        .parallel(v.b);
    key_sum.compute_with(query_sum, p.key_tile);
    key_stats.compute_with(query_sum, p.key_tile);

    // Per query block: the queries and their dy transposed for the GEMMs.
    const LoopLevel block_at(p.query_sum, p.query_block), tile_at(p.query_sum, p.key_tile);
    PairTerms &t = p.terms;
    transposed_block_copy(t.scores.query_features, {t.scores.dot}, block_at, qb, vec);
    transposed_block_copy(dy_rows, {t.dprob}, block_at, qb, vec);
    // Per micro-tile: the pair terms, vectorized over queries i, unrolled over keys j.
    for (Func f : {t.dscore, t.prob}) schedule_pair_tile(f, v, tile_at, qb, kt, vec);
    schedule_score_tile(t.scores.dot, t.scores.rd, v.i, v.j, tile_at, qb, kt, vec);
    schedule_score_tile(t.dprob, t.scores.rd, v.i, v.j, tile_at, qb, kt, vec);

    p.dsigma_sum.compute_root();
    schedule_token_output(p.dx, v, vec);
}

}  // namespace gka
