// CPU schedule of GKA decode (generators/gka_decode.h).
//
// Decode reads every cached key once per query and does O(D) work with it:
// it waits on memory, and the schedule's aim is to keep the loads streaming.
// One task per (chunk of cached keys, batch): a long cache gives many tasks
// even at B=1. A task goes by blocks of `vector` keys: first the blocks'
// partial dot products, per lane of d, for every head and query, a key at a
// time, so that each key's row of all heads is read in one run, in the
// cache's order; then per head the pairs' scores (one reduction across the
// lanes for the whole block), their weights vectorized over the keys, and
// each key's row weighted into its queries' sums (vectorized over d, the
// rows read again from cache), the row sums fused into the same loop
// (compute_with). The new tokens' pairs, few, and the chunks' merge are
// small loops at root.
//
// Why it is shaped so (the figures, measured on the AMD Zen 4 host, are in
// docs/performance.md, "Decode"):
// - the ring's slot is computed with one modulo a sequence, not one a key;
// - the lanes of the partial dots are stored innermost, not scattered a lane
//   at a time, and a block's weights are vectorized over its keys;
// - heads are inside the key loop, so that each key's row (2 KB at H=8,
//   D=64) is read in order rather than 256 B of it per pass of a head.
// The time is in the first loads of each key (perf: DRAM latency), with the
// arithmetic hidden under them. Software prefetch of the next blocks' rows
// and a block's sums kept in registers (rfactor) measured within 3% of this
// schedule, so neither is in it.
#include "schedule_helpers.h"
#include "schedules.h"

namespace gka {

using namespace Halide;

// vector: lanes (the family's). chunk: cached keys a task, summed apart (the
// algorithm's chunk: a different chunk changes the order of the sums, so
// results by float rounding, never the thread count's doing).
const std::vector<Knob<CpuDecodeKnobs>> &CpuDecodeKnobs::fields() {
    using K = CpuDecodeKnobs;
    static const std::vector<Knob<K>> fields = {
        {"vector", &K::vector, {}},
        {"chunk", &K::chunk, {256, 512, 1024, 2048}},
    };
    return fields;
}

CpuDecodeKnobs cpu_decode_knobs(Family family) {
    CpuDecodeKnobs k{};
    k.chunk = 512;
    k.vector = family == Family::Avx512 ? 16 : family == Family::Avx2 ? 8 : 4;
    return k;
}

void schedule_decode_cpu(DecodePipeline &p, const CpuDecodeKnobs &k) {
    const Vars &v = p.v;
    const int vec = k.vector;

    for (Func f : {p.key_count, p.first_slot}) f.compute_root();
    // A block of `vector` keys at a time: their scores for every query (a
    // dot product vectorized over d a pair, then one reduction across the
    // lanes for the whole block), their weights vectorized over the keys,
    // then each key's row weighted into every query's sums (vectorized over
    // d), the row sums fused into the same loop (compute_with).
    const RVar key = p.cached_keys.x;
    RVar block("key_block"), in_block("in_block");
    Var dd("dd"), lane("lane");
    p.chunk_sum.compute_root().vectorize(v.d, vec, TailStrategy::GuardWithIf);
    p.chunk_row_sum.compute_root();
    Stage sum = p.chunk_sum.update(), rows = p.chunk_row_sum.update();
    sum.split(key, block, in_block, vec);
    rows.split(key, block, in_block, vec).reorder(v.i, in_block, v.h, block, v.chunk, v.b);
    split_head_dim(sum, v.d, dd, p.head_dim, vec, 8 * vec, {v.d, dd, v.i, in_block, v.h, block, v.chunk, v.b},
                   false);
    for (Stage *s : {&sum, &rows}) s->parallel(v.chunk).parallel(v.b);
    rows.compute_with(sum, block);
    // Stored a task at a time: one allocation a task, not one a block.
    p.cached_weight.store_at(p.chunk_sum, v.chunk)
        .compute_at(p.chunk_sum, block)
        .reorder(v.j, v.i, v.h)
        .vectorize(v.j, vec, TailStrategy::RoundUp);
    Func dot = p.cached_scores.dot;
    const int D = constant_head_dim(p.head_dim);
    dot.compute_at(p.cached_weight, v.i).vectorize(v.j, vec, TailStrategy::RoundUp);
    if (D > 0 && D % vec == 0) {
        RVar outer("rd_outer"), inner("rd_inner");
        Func lanes = dot.update().split(p.cached_scores.rd.x, outer, inner, vec).rfactor(inner, lane);
        // A block's lanes for every head and query at once, a key at a time:
        // each key's row of all heads is read in one run, in the cache's order.
        lanes.compute_at(p.chunk_sum, block).reorder_storage(lane, v.j).vectorize(lane);
        lanes.update().reorder(lane, outer, v.i, v.h, v.j).vectorize(lane);
        // Unrolled where a row is at most 8 vectors: longer ones (NEON's 4
        // lanes) spilled the query's row from the registers.
        if (D / vec <= 8) lanes.update().unroll(outer);
        dot.update().reorder(v.j, inner).vectorize(v.j, vec, TailStrategy::RoundUp).unroll(inner);
    } else {
        dot.update().reorder(v.j, p.cached_scores.rd.x).vectorize(v.j, vec, TailStrategy::RoundUp);
    }
    p.cached_scores.inv_two_var.compute_root();

    // The new tokens' pairs: Tq^2 of them, few.
    p.fresh_weight.compute_root();
    p.fresh_scores.dot.compute_root();
    for (Func f : {p.fresh_sum, p.weighted_sum}) {
        f.compute_root().vectorize(v.d, vec, TailStrategy::GuardWithIf);
        f.update().vectorize(v.d, vec, TailStrategy::GuardWithIf);
    }
    p.fresh_row_sum.compute_root();
    p.row_sum.compute_root();
    p.y.vectorize(v.d, vec, TailStrategy::GuardWithIf).parallel(v.b);
}

}  // namespace gka
