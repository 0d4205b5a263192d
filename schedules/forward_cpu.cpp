// CPU schedule of the GKA forward (generators/gka_forward.h).
//
// One task per (band of queries, head, batch). In a band, each micro-block of
// query_tile queries walks the band's key window by blocks of key_tile keys:
// the score tile (key_tile x query_tile) is a small GEMM vectorized over keys
// that reads keys from a transposed copy of the block; it is exponentiated (and
// masked) in place, then folded into the micro-block's accumulators (d_block x
// query_tile, vectorized over d), which stay in registers across the key block,
// reading the values in place from one head-major copy of x. Row sums ride
// along (compute_with) as one vector of per-lane partial sums per query.
//
// Measured (2-core AVX-512 Zen 4 VM, B=1 H=8, T=4096, medians of 5 on a quiet
// moment, OpenBLAS sgemm 2048^3 = 197 GFLOP/s): causal D=64 165 GFLOP/s
// (0.84x sgemm), D=128 172 (0.87x). perf, causal D=64: ~74% of the time in the
// two GEMM loops (24 FMAs, 4 vector loads and 6 broadcasts an iteration, the
// FMA pipe busy), ~10% in exp and the mask, ~3% in the key copies.
// What moved it there, each an interleaved A/B of two generators:
// - whole key blocks past a band's last key skipped (Mask::window): causal
//   computed and masked the blocks above the diagonal, 35% of its time;
// - x read from one head-major copy (head_major) instead of per-block copies
//   of rows H*D floats apart, which missed L1: D=64 -10% time, D=128 -30%;
// - row sums as per-lane partials (rfactor) instead of gathered scalars: -4%;
// - exp_nonpositive (generators/gka_math.h) for Halide::exp: -3%;
// - y and lse a band at a time, each band's sums computed there instead of a
//   root T x H x D buffer (zeroed, written, read back): (255, 0) -5%, causal
//   0-3%. (Halide's likely() on the mask measured the same.)
// Block and tile sizes within 3% of each other (band 48/96, key_tile 32/64,
// query_tile 4/6): the defaults below.
#include "schedule_helpers.h"
#include "schedules.h"

namespace gka {

using namespace Halide;

Knobs cpu_forward_knobs(Family family) {
    switch (family) {
    // 32 vector registers: 24 accumulators (6 queries x 4 vectors) in each GEMM.
    case Family::Avx512:
        return Knobs({{"vector", 16}, {"band", 48}, {"score_tile", 16}, {"query_tile", 4}, {"key_tile", 16}, {"d_block", 64}});
    // 16 vector registers: 12 accumulators (3 queries x 4 vectors) in each GEMM.
    case Family::Avx2:
        return Knobs({{"vector", 8}, {"band", 48}, {"score_tile", 16}, {"query_tile", 4}, {"key_tile", 6}, {"d_block", 16}});
    default:
        return Knobs({{"vector", 4}, {"band", 48}, {"score_tile", 8}, {"query_tile", 4}, {"key_tile", 6}, {"d_block", 8}});
    }
}

void schedule_forward_cpu(ForwardPipeline &p, const Knobs &k) {
    const int vec = k["vector"], st = k["score_tile"], qt = k["query_tile"], kt = k["key_tile"];
    if (k["band"] % st != 0 || st % qt != 0 || st % vec != 0) {
        throw std::invalid_argument("gka schedule: band must be a multiple of score_tile, and score_tile of "
                                    "query_tile and vector");
    }
    const Vars &v = p.v;

    schedule_sqnorm(p.scores, v, p.head_dim, vec);

    // y and lse a band at a time, the bands in parallel; each band's sums are
    // computed there, in cache. (At root, they were a T x H x D buffer zeroed,
    // written and read back.)
    Var band("y_band"), offset("y_offset");
    p.y.split(v.t, band, offset, k["band"], TailStrategy::GuardWithIf)
        .reorder(v.d, offset, band, v.h, v.b)
        .vectorize(v.d, vec, TailStrategy::GuardWithIf)
        .parallel(band);
    p.lse.split(v.t, band, offset, k["band"], TailStrategy::GuardWithIf)
        .reorder(offset, band, v.h, v.b)
        .parallel(band)
        .compute_with(p.y, band);
    const LoopLevel band_level(p.y, band);
    BandSum sum{p.weighted_sum, p.row_sum, p.keys.y, p.keys.x};
    schedule_band_sum(sum, v, p.head_dim, vec, st, qt, k["d_block"], band_level);
    // Queries transposed once per band for the score GEMM; keys and values read
    // in place.
    head_major(p.x, vec);
    transposed_block_copy(p.scores.query_features, {p.scores.dot}, band_level, k["band"], vec);
    p.weight.compute_at(sum.tile_level())
        .bound_extent(v.i, st)
        .bound_extent(v.j, kt)
        .reorder_storage(v.i, v.j)
        .reorder(v.i, v.j)
        .vectorize(v.i, vec);
    schedule_score_tile(p.scores.dot, p.scores.rd, v.i, v.j, sum.tile_level(), st, kt, vec);
}

}  // namespace gka
