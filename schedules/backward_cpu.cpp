// CPU schedule of the GKA backward: the one-pass algorithm
// (generators/gka_backward_fused.h).
//
// One task per (group of key bands, head, batch) walks its key bands (one
// group, all of them, unless B*H is below min_tasks). A band's keys are copied
// transposed (tokens innermost) once; its query window goes by blocks of
// query_block queries, and in a block each key block of key_block keys
// - computes its tiles of pair terms, key_block x query_block, vectorized over
//   keys: the score and dP GEMMs (the keys' transposed features times each
//   query's x and dy broadcast in place, so queries are never copied), then P,
//   dS and dS's term of dsigma in place;
// - adds them to its keys' sums, micro-tile by micro-tile of key_tile keys
//   (d_block x key_tile accumulators vectorized over d, a tile of their own
//   in registers across the query block, then added to the sums); to the
//   block's queries' sums, likewise by micro-tiles of query_tile queries
//   (d_block x query_tile accumulators across the key block); and to its
//   keys' scalar sums of dS and dS*s, a key a lane: updates fused
//   (compute_with), all reading the one tile.
// The origin form of bfloat16 products (FusedBackwardPipeline::token_pairs)
// does every GEMM in bfloat16 dot products: the score and dP tiles by pairs of
// d (a vector of keys' pairs against a query's pair of x or dy, broadcast),
// the block sums by pairs of tokens (a pair of dS or P rounded, broadcast,
// against a vector of d of two tokens' x or dy), by pairs of blocks.
// A group's sums are written by one task in a fixed order: deterministic, no
// atomics. With one task per (head, batch) alone, B*H would bound the tasks
// (B=1, H=1 would run on one thread); where B*H is below min_tasks, the key
// bands are dealt round-robin to groups, each a task with sums of its own,
// added at the end (the groups' count follows the shape alone, so results do
// not depend on the thread count).
//
// Why it is shaped so (the A/B figures behind each choice, with their hosts,
// are in docs/performance.md, "Schedule choices"):
// - One pass over the pairs: two passes would each recompute S and dP, 7
//   GEMM-sized products for docs/spec.md's 5.
// - Tiles vectorized over keys, not queries: tiles over queries would
//   transpose each query block's x and dy per key band (every query ~9 times
//   at (255, 0) with bands of 32), load and store a query's row of sums per
//   4-8 keys, and make the scalar sums scalar adds.
// - Dl (dy . y per token) runs with heads in parallel and d in the lanes, not
//   on one thread at B=1 with gathers.
// - The micro-tiles' accumulators are tiles of their own, of a constant size,
//   not the sums: where the head dim is known at run time alone the sums'
//   rows are a run-time stride apart, and LLVM kept accumulators that might
//   alias one another in memory (1.3x the backward's time at D=96 on Zen 4).
// - The queries' sums go by micro-tiles of query_tile queries: a query's row
//   taking the products of a group of keys in turn (16 on AVX-512, 8 on AVX2
//   and SSE4.1) would be a chain of as many dependent FMAs (4 cycles each)
//   per row and vector of d, whose latency the out-of-order core cannot hide.
// - Key-band groups (min_tasks) fill the cores where B*H does not, and cost
//   ~8% where the heads already fill them; hence 2 by default: a host of more
//   cores gains from a min_tasks of about its core count.
#include <algorithm>

#include "backward_tasks.h"
#include "schedule_helpers.h"
#include "schedules.h"

namespace gka {

using namespace Halide;

// vector: lanes (the family's). band: keys a task's band (a group of bands is
// a task, min_tasks of them at least), walked by key_block x query_block score
// tiles; key_tile and query_tile x d_block: the keys' and queries' value
// micro-tiles, in registers. d_padded (1 or 0): where the head dim is known
// at run time alone, the micro-tiles keep whole d blocks past it
// (split_head_dim, padded) and sum by pairs of blocks
// (BackwardSchedule::block_pairs), or guard their edge in the sums.
const std::vector<Knob<CpuBackwardKnobs>> &CpuBackwardKnobs::fields() {
    using K = CpuBackwardKnobs;
    static const std::vector<Knob<K>> fields = {
        {"vector", &K::vector, {}},
        {"band", &K::band, {16, 32, 48, 64, 96}},
        {"key_block", &K::key_block, {8, 16, 32}},
        {"key_tile", &K::key_tile, {2, 4, 8}},
        {"query_block", &K::query_block, {8, 16, 32, 64}},
        {"query_tile", &K::query_tile, {2, 4, 8}},
        {"d_block", &K::d_block, {8, 16, 32, 64, 128}},
        {"min_tasks", &K::min_tasks, {}},
        {"d_padded", &K::d_padded, {}, nullptr, 0},
    };
    return fields;
}

CpuBackwardKnobs cpu_backward_knobs(Family family) {
    CpuBackwardKnobs k{};
    k.band = 48, k.key_tile = 4, k.query_tile = 4, k.min_tasks = default_backward_min_tasks, k.d_padded = 1;
    switch (family) {
    // The keys' and the queries' micro-tiles alike: 4 tokens x 2 vectors of d,
    // 8 accumulators, independent chains enough to fill two FMA pipes.
    case Family::Avx512:
        k.vector = 16, k.key_block = 16, k.query_block = 16, k.d_block = 32;
        break;
    case Family::Avx2:
        k.vector = 8, k.key_block = 8, k.query_block = 8, k.d_block = 16;
        break;
    // NEON: SSE4.1's but for the score tile, key_block x query_block, whose
    // accumulators are all live in the innermost loop: 8 x 16 / 4 lanes = 32
    // vectors spilled there (scripts/spill_report.py: 387 spills and reloads
    // in innermost loops at D=64), 8 x 8 = 16 do not (8). A wider value
    // micro-tile (d_block 16) spills again (24), and so do whole d blocks past
    // a run-time head dim (the direct form 28-31, at d_block 4 35), with the
    // pairs of blocks' tiles 73.
    case Family::Neon:
        k.vector = 4, k.key_block = 8, k.query_block = 8, k.d_block = 8, k.d_padded = 0;
        break;
    default:
        k.vector = 4, k.key_block = 8, k.query_block = 16, k.d_block = 8;
    }
    return k;
}

namespace {

// A group's sums of a head (d, h, t, b, group), each head's tokens contiguous.
void schedule_head_sum(Func f, const Vars &v, int vec) {
    f.compute_root()
        .reorder_storage(v.d, v.t, v.h, v.b, v.group)
        .reorder(v.d, v.t, v.h, v.b, v.group)
        .vectorize(v.d, vec, TailStrategy::GuardWithIf)
        .parallel(v.h)
        .parallel(v.group);
}

}  // namespace

void schedule_backward_cpu(FusedBackwardPipeline &p, const CpuBackwardKnobs &k) {
    const int vec = k.vector, kb = k.key_block, kt = k.key_tile, qb = k.query_block, qt = k.query_tile;
    if (kb % kt != 0 || kb % vec != 0 || qb % qt != 0) {
        throw std::invalid_argument("gka schedule: key_block must be a multiple of key_tile and vector, and "
                                    "query_block of query_tile");
    }
    const Vars &v = p.v;

    schedule_centre(p.centre, v, vec);
    if (p.form != ScoreForm::direct) schedule_token_dot(p.delta, v, p.head_dim, vec);
    // The GEMMs read x and dy in place, from head-major copies; the origin
    // form's read copies of their pairs, and its scalar sums x and dy in place.
    if (!p.token_pairs) {
        head_major(p.x, vec);
        if (p.dx_keys.defined()) head_major(p.key_x, vec);  // a chunk's keys
        head_major(p.dy, vec);
    }
    schedule_token_dot(p.terms.scores.sqnorm, v, p.head_dim, vec);

    schedule_head_sum(p.key_sum, v, vec);
    schedule_head_sum(p.query_sum, v, vec);
    p.key_stats.compute_root().reorder_storage(v.t, v.h, v.b, v.group);  // zeroing: serial

    // The fused updates, per (key block, query block, band of the group), group,
    // h and b in parallel (nested: fusing them confuses the bounds of the fused
    // tiles).
    Stage query_sum = p.query_sum.update(), key_sum = p.key_sum.update(), key_stats = p.key_stats.update();
    const std::vector<VarOrRVar> outer = {p.key_block, p.query_block, p.band_in_group, v.group, v.h, v.b};
    auto then_outer = [&](std::vector<VarOrRVar> inner) {
        inner.insert(inner.end(), outer.begin(), outer.end());
        return inner;
    };
    // The feature sums: micro-tiles of `tile` tokens of a block x d_block,
    // their accumulators in registers across the other block. By pairs of
    // blocks (p.block_pairs), the accumulators are a pair's sums (a tile of a
    // constant size), added to the sums once a pair, and the sums' domains
    // take the pairs' loop names, so as to be fused with them.
    const auto feature_sum = [&](Func sums, const RDom &blocks, const RVar &in_block, Func pair_sums,
                                 const RDom &other_block, const RVar &other_pair, int tile, const std::string &name,
                                 const Var &d_blocks) {
        Stage sum = sums.update();
        std::vector<VarOrRVar> inner = {v.d, RVar(name + "_in_tile"), d_blocks, RVar(name + "_tile")};
        if (p.block_pairs) {
            const std::vector<RVar> loops = {in_block, p.key_block, p.query_block, p.band_in_group};
            for (int n = 0; n < 4; n++) sum.rename(blocks[n], loops[n]);
        } else {
            inner.insert(inner.begin() + 2, other_pair);
        }
        sum.split(in_block, inner.back().rvar, inner[1].rvar, tile);
        const int d_block = split_head_dim(sum, v.d, d_blocks, p.head_dim, vec, k.d_block, then_outer(inner), k.d_padded);
        sum.unroll(inner[1].rvar);
        if (!p.block_pairs) return;
        // One pair of blocks a tile: said, as bounds inference across the fused
        // stages cannot prove it (it left a loop of run-time extent around it).
        const std::vector<Var> a = pair_sums.args();
        for (size_t n = 2; n < a.size(); n++) pair_sums.bound_extent(a[n], 1);
        // By token pairs (p.token_pairs: other_block is (pair, [term,] pair in
        // block)), a pair's two products in adjacent lanes, reduced into one
        // lane of d: the bfloat16 dot product (vdpbf16ps) of a vector of d,
        // the terms unrolled into the same accumulators.
        const int dims = other_block.dimensions();
        const bool by_pairs = dims > 1;
        std::vector<VarOrRVar> order = {a[0], a[1]};
        for (int n = by_pairs ? 1 : 0; n < dims; n++) order.push_back(other_block[n]);
        if (by_pairs) order.insert(order.begin(), other_block[0]);
        Stage products = schedule_micro_tile(pair_sums, LoopLevel(sums, d_blocks), order, d_block, tile, vec);
        if (!by_pairs) return;
        products.atomic().vectorize(other_block[0]);
        for (int n = 1; n + 1 < dims; n++) products.unroll(other_block[n]);
    };
    feature_sum(p.key_sum, p.key_blocks, p.key_in_block, p.block_key_sum, p.block_queries, p.query_in_block, kt,
                "key", Var("dd"));
    feature_sum(p.query_sum, p.query_blocks, p.query_in_block, p.block_query_sum, p.block_keys, p.key_in_block, qt,
                "query", Var("qd"));
    // Keys' scalar sums: a key a lane. Lanes are distinct keys, which Halide
    // cannot prove through the window's index arithmetic: no race to allow.
    key_stats.reorder(then_outer({p.key_in_block, p.query_in_block}))
        .allow_race_conditions()
        .vectorize(p.key_in_block, vec);
    // By pairs of blocks the keys' scalar sums lead: they walk the pairs' own
    // domain, whose loop names the renamed sums' loops end in (compute_with
    // matches them so).
    std::vector<Stage> fused = {query_sum, key_sum, key_stats};
    if (p.block_pairs) std::rotate(fused.begin(), fused.begin() + 2, fused.end());
    if (p.form != ScoreForm::direct) {
        // Queries' scalar sums: a query's keys of the block are a vector of the
        // tile, added lane by lane into partial sums (rfactor), whose lanes are
        // summed once at the end: a vector add per query and block.
        RVar lanes_of_block("key_lanes_of_block"), key_lane_r("key_lane_r");
        Var key_lane("key_lane");
        Stage query_stats = p.query_stats.update();
        query_stats.split(p.key_in_block, lanes_of_block, key_lane_r, vec);
        Func partial = query_stats.rfactor(key_lane_r, key_lane);
        partial.compute_root().reorder_storage(key_lane, v.t, v.h, v.b, v.group).vectorize(key_lane);
        Stage partial_update = partial.update();
        partial_update.reorder(then_outer({key_lane, lanes_of_block, p.query_in_block})).vectorize(key_lane);
        fused.push_back(partial_update);
        // The lanes' totals: each head's tokens in one task. (Zeroing, serial.)
        p.query_stats.compute_root();
        p.query_stats.update().reorder(key_lane_r, v.t, v.h, v.b, v.group).parallel(v.h);
    }
    for (Stage s : fused) s.parallel(v.group).parallel(v.h).parallel(v.b);
    for (size_t k = 1; k < fused.size(); k++) fused[k].compute_with(fused[0], p.key_block);

    // The band's keys transposed once for the GEMMs; the queries' x and dy are
    // read in place (broadcast). By pairs of d (the origin form's bfloat16
    // products), the keys' pairs likewise, the queries' and dy's from copies
    // of their pairs as they lie.
    const Func lead = p.block_pairs ? p.key_stats : p.query_sum;
    const LoopLevel band_at(lead, p.band_in_group), tile_at(lead, p.key_block);
    PairTerms &t = p.terms;
    const bool pairs = t.scores.feature_pairs;
    if (pairs) {
        transposed_pairs(t.scores.key_pairs, band_at, k.band, vec);
        for (Func f : {t.scores.query_pairs, p.dy_pairs}) pairs_as_they_lie(f, LoopLevel::root(), 0, vec);
        // The block sums' operands by token pairs: x and dy whole, a pair's
        // terms of d side by side (one load each); dS and P a tile beside
        // their own, a pair's terms one 32-bit word (broadcast).
        head_major_token_pairs(p.token_operands, vec);
        const std::vector<Var> a = p.key_operands.args();  // (pair, j, term, p, h, b)
        schedule_bf16_pairs({p.key_operands, a[1], kb, a[3], qb / 2, a[2]}, tile_at, vec);
        const std::vector<Var> by_keys = p.dscore_by_key_pairs.args();  // (pair, i, p, h, b)
        schedule_bf16_pairs({p.dscore_by_key_pairs, by_keys[2], kb / 2, by_keys[1], qb}, tile_at, vec);
    } else {
        transposed_block_copy(t.scores.key_features, {t.scores.dot, t.dprob}, band_at, k.band, vec);
    }
    // Per key block: the pair terms, vectorized over keys j, unrolled over queries
    // i. The sums read tiles alone: a GEMM tile that one of them also read (the
    // dsigma term's score and dP, inlined) would have its bounds widened across
    // the fused sums, a dynamic offset whose accumulators live in memory.
    for (Func f : {t.dscore, t.prob, t.dsigma_term}) schedule_pair_tile(f, v.j, v.i, tile_at, kb, qb, vec);
    schedule_score_tile(t.scores.dot, t.scores.rd, v.j, v.i, tile_at, kb, qb, vec, qb, pairs);
    schedule_score_tile(t.dprob, t.scores.rd, v.j, v.i, tile_at, kb, qb, vec, qb, pairs);

    p.dsigma_sum.compute_root();
    schedule_token_output(p.dx, v, vec);
    // The groups' totals, 16 tokens of a head at a time (one group: a copy).
    if (p.form != ScoreForm::direct) p.dscore_sum.compute_at(p.dx, v.h);
    std::vector<std::pair<Func, Func>> totals = {{p.dx, p.pair_sum}};
    if (p.dx_keys.defined()) {  // a chunk's keys' own
        schedule_token_output(p.dx_keys, v, vec);
        totals.push_back({p.dx_keys, p.key_pair_sum});
    }
    for (auto &[out, total] : totals) {
        total.compute_at(out, v.h).vectorize(v.d, vec, TailStrategy::GuardWithIf);
        total.update().reorder(v.d, p.groups).vectorize(v.d, vec, TailStrategy::GuardWithIf);
    }
}

}  // namespace gka
