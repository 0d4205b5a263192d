// CPU schedule of the GKA forward (generators/gka_forward.h).
//
// One task per (band of queries, head, batch). The band's queries are copied
// transposed (tokens innermost) once, and its key window goes by blocks of
// key_tile keys. In a block, each score block of score_tile queries computes
// its score tile (score_tile x key_tile) as a small GEMM vectorized over
// queries: a vector of queries' features times each key's feature broadcast
// in place (from the values' copy in the origin form, from the block's
// centred copy in the centred form), so keys are never transposed; key_chunk
// keys a pass over d (0: all of them), so that a long key block's tile still
// has its accumulators in registers. The tile is
// exponentiated (and masked) in place, and its row sums are vector adds (a
// query a lane). Then each micro-block of query_tile queries folds it into its
// accumulators (d_block x query_tile, vectorized over d), in registers across
// the block, reading the values in place from one head-major copy of x.
//
// Why it is shaped so (the A/B figures behind each choice, with their hosts,
// are in docs/performance.md, "Schedule choices"):
// - Key blocks past a band's last key are skipped whole (Mask::window): a
//   causal call would otherwise compute and mask every block above the
//   diagonal.
// - x is read from one head-major copy (head_major), each head's tokens
//   contiguous: blocks copied from rows H*D floats apart miss L1.
// - exp is exp_nonpositive (generators/gka_math.h), a short polynomial for
//   the never-positive scores, not Halide::exp.
// - y and lse are computed a band at a time, each band's sums in cache, not
//   in a root T x H x D buffer zeroed, written and read back.
// - Score tiles are vectorized over queries, not keys: tiles over keys would
//   transpose the keys per (band, block), every key once for each band whose
//   window holds it (about 9 times at (255, 0) with bands of 32), and keep
//   row sums as per-lane partials (rfactor). The cheaper band also makes
//   bands of 16 worth taking, whose window wastes 16 of 272 keys a query.
// - key_chunk splits a key block's score GEMM into passes of key_chunk keys,
//   so that key blocks can grow and the value accumulators are loaded and
//   stored once per more keys (they take ~14% of the samples at key_tile 12
//   on the Intel Xeon host of docs/performance.md). Causal T=4096 on that
//   host (gka_autotune.py --measure, 2 runs each), scored against the
//   defaults: D=64 1.048-1.062x with chunks (key_tile 24-48 in chunks of 12),
//   1.021-1.028x for the best knobs without; D=128 1.103-1.121x and
//   1.087-1.094x.
// - Heads and batches run in parallel as well as bands: with the bands of
//   one head as the only parallel loop, the last bands of a causal head, the
//   longest, would run with a core idle.
// - The centred form centres its keys a key block at a time, from the rows
//   of x the value sum then reads: a root copy of the centred features would
//   be a second T x H x D stream beside x's.
// - The origin form (no centring; keys read where the values are) runs where
//   the runtime finds it serves. Against the centred form on the Intel Xeon
//   host (bench/gka_ab, 15 rounds): causal 1.02-1.05x, (255, 0)
//   1.00-1.02x.
#include "schedule_helpers.h"
#include "schedules.h"

namespace gka {

using namespace Halide;

// vector: lanes (the family's). band: queries a task, whose key window is
// walked in blocks of key_tile keys. score_tile: queries a score GEMM tile,
// key_chunk keys of it a pass over d (0: the whole key tile). query_tile x
// d_block: a value GEMM micro-tile, in registers.
const std::vector<Knob<CpuForwardKnobs>> &CpuForwardKnobs::fields() {
    using K = CpuForwardKnobs;
    static const std::vector<Knob<K>> fields = {
        {"vector", &K::vector, {}},
        {"band", &K::band, {16, 32, 48, 64, 96}},
        {"score_tile", &K::score_tile, {8, 16, 24, 32, 48}},
        {"query_tile", &K::query_tile, {2, 4, 8}},
        {"key_tile", &K::key_tile, {6, 8, 12, 16, 24, 32, 48}},
        {"key_chunk", &K::key_chunk, {0, 4, 6, 8, 12, 16}, "key_tile"},
        {"d_block", &K::d_block, {8, 16, 32, 64, 128}},
    };
    return fields;
}

CpuForwardKnobs cpu_forward_knobs(Family family) {
    CpuForwardKnobs k{};
    k.band = 48, k.query_tile = 4, k.key_chunk = 0;
    switch (family) {
    // 32 vector registers: 16 accumulators in the score GEMM (16 queries x 16
    // keys), 16 in the value GEMM (4 queries x 4 vectors of d).
    case Family::Avx512:
        k.vector = 16, k.score_tile = 16, k.key_tile = 16, k.d_block = 64;
        break;
    // 16 vector registers: 12 accumulators in the score GEMM (2 vectors of
    // queries x 6 keys), 8 in the value GEMM (4 queries x 2 vectors of d).
    case Family::Avx2:
        k.vector = 8, k.score_tile = 16, k.key_tile = 6, k.d_block = 16;
        break;
    // NEON: 4 lanes as SSE4.1, but 32 vector registers: the value GEMM takes
    // 16 accumulators (4 queries x 4 vectors of d), so that each value loaded
    // feeds 4 FMAs. A score tile of 16 queries (4 vectors x 6 keys) spills in
    // the innermost loop (scripts/spill_report.py: 12 spills and reloads
    // against 1), so it stays at 8.
    case Family::Neon:
        k.vector = 4, k.score_tile = 8, k.key_tile = 6, k.d_block = 16;
        break;
    default:
        k.vector = 4, k.score_tile = 8, k.key_tile = 6, k.d_block = 8;
    }
    return k;
}

void schedule_forward_cpu(ForwardPipeline &p, const CpuForwardKnobs &k) {
    const int vec = k.vector, st = k.score_tile, qt = k.query_tile, kt = k.key_tile;
    const int kc = k.key_chunk > 0 ? k.key_chunk : kt;  // 0: the whole key tile at once
    if (k.band % st != 0 || st % qt != 0 || st % vec != 0 || kt % kc != 0) {
        throw std::invalid_argument("gka schedule: band must be a multiple of score_tile, score_tile of "
                                    "query_tile and vector, and key_tile of key_chunk");
    }
    const Vars &v = p.v;

    schedule_centre(p.centre, v, vec);
    schedule_token_dot(p.scores.sqnorm, v, p.head_dim, vec);

    // y and lse a band at a time, bands, heads and batches in parallel (nested:
    // fused, the band's bounds would span every band); each band's sums are
    // computed there, in cache (at root they would be a T x H x D buffer,
    // zeroed, written and read back).
    Var band("y_band"), offset("y_offset");
    p.y.split(v.t, band, offset, k.band, TailStrategy::GuardWithIf)
        .reorder(v.d, offset, band, v.h, v.b)
        .vectorize(v.d, vec, TailStrategy::GuardWithIf)
        .parallel(band)
        .parallel(v.h)
        .parallel(v.b);
    p.lse.split(v.t, band, offset, k.band, TailStrategy::GuardWithIf)
        .reorder(offset, band, v.h, v.b)
        .parallel(band)
        .parallel(v.h)
        .parallel(v.b)
        .compute_with(p.y, band);
    const LoopLevel band_level(p.y, band);
    BandSum sum = p.bf16_products ? BandSum{p.weighted_sum, p.row_sum, p.keys.z, p.keys.y, p.keys.x}
                                  : BandSum{p.weighted_sum, p.row_sum, p.keys.y, p.keys.x};
    schedule_band_sum(sum, v, p.head_dim, vec, st, qt, k.d_block, band_level);
    // Queries transposed once per band for the score GEMM; keys and values read
    // in place, from a head-major copy of x. The centred form's keys are centred
    // a key block at a time (centring them as the GEMM broadcasts them would
    // add an operation to each broadcast). Under bfloat16 products the origin
    // form's scores go by feature pairs, keys copied a block at a time as they
    // lie (the values' copy is by key pairs), queries a band at a time by pairs.
    if (p.bf16_products) {
        // The keys' features by key pairs, whole; each pair tile's weights
        // rounded and interleaved likewise, beside the tile.
        head_major_token_pairs(p.value_pairs, vec);
        const std::vector<Var> w = p.value_weight.args();  // (pair, i, p, h, b)
        schedule_bf16_pairs({p.value_weight, w[1], st, w[2], kt / 2}, sum.tile_level(), vec);
    } else {
        head_major(p.values, vec);
    }
    const LoopLevel block_level(p.weighted_sum, sum.block);
    if (p.scores.feature_pairs) {
        pairs_as_they_lie(p.scores.key_pairs, block_level, kt, vec);
        transposed_pairs(p.scores.query_pairs, band_level, k.band, vec);
    } else {
        if (p.form == ScoreForm::centred) head_major_block(p.scores.key_features, block_level, kt, vec);
        transposed_block_copy(p.scores.query_features, {p.scores.dot}, band_level, k.band, vec);
    }
    schedule_pair_tile(p.weight, v.i, v.j, sum.tile_level(), st, kt, vec);
    // The weight tile's vectors of queries unrolled: the mask's and the self
    // pair's indices are then constants, not recomputed per vector
    // (bench/gka_ab against the loop, Intel Xeon, 15 rounds: avx512 causal,
    // score tiles of 2-3 vectors, 1.02-1.05x; generic within noise; the
    // backward's pair tiles measured 2% slower so).
    p.weight.unroll(v.i, st / vec);
    schedule_score_tile(p.scores.dot, p.scores.rd, v.i, v.j, sum.tile_level(), st, kt, vec, kc, p.scores.feature_pairs);
}

}  // namespace gka
